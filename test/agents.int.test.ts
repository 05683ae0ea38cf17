/**
 * Agent workflows through the real services and the real `@ai-sdk/openai` provider,
 * talking to a local HTTP server that speaks the OpenAI chat-completions protocol
 * (no LLM is reachable here). Rules checked:
 * - a ReAct loop (agent.toolLoop): the model asks for two tool calls at once, they run on
 *   the workers in parallel, their results go back in the next request, the final answer
 *   is the output; tokens reach SSE clients; usage is summed on the execution;
 * - a two-agent SynthDev workflow (seed 002) imported with its script.js and roles file
 *   runs as written: handlers in the QuickJS sandbox, agents sharing a context with roles
 *   mapped, a parsing-only tool as the reviewer's decision, the final state's output;
 * - a model that is not configured fails validation naming the missing setting.
 */
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { readFileSync } from "node:fs";
import { z } from "zod";
import { importSynthDev } from "@baton/engine";
import { startOpenAiCompatibleServer } from "@baton/llm/testing";
import type { OpenAiCompatibleServer, RecordedRequest, ScriptedReply } from "@baton/llm/testing";
import { defineTool } from "@baton/sdk";
import { createLogger } from "@baton/telemetry";
import { startBaton } from "../bin/start.ts";
import type { BatonHandle } from "../bin/start.ts";
import { api, isolatedConfig, readSse, removeIsolated, waitFor } from "./helpers.ts";
import type { Api } from "./helpers.ts";

const { config } = isolatedConfig();
let baton: BatonHandle;
let a: Api;
let llm: OpenAiCompatibleServer;
const weatherCalls: string[] = [];
let replies: (req: RecordedRequest) => ScriptedReply = () => ({ status: 500 });

const weather = defineTool({
  name: "weather.lookup",
  description: "Current temperature of a city",
  input: z.object({ city: z.string() }),
  handler: async ({ city }) => {
    weatherCalls.push(city);
    await new Promise((r) => setTimeout(r, 200));
    return { city, celsius: city === "Oslo" ? 3 : 18 };
  },
});

beforeAll(async () => {
  llm = await startOpenAiCompatibleServer((req) => replies(req));
  process.env.BATON_OPENAI_API_KEY = "sk-test";
  process.env.BATON_OPENAI_BASE_URL = llm.url;
  process.env.BATON_LLM_RETRY_BASE_DELAY_MS = "1";
  baton = await startBaton({ config, logger: createLogger("agents", "warn"), tools: [weather] });
  a = api(baton.gatewayPort!, config.apiKey!);
}, 60_000);

afterAll(async () => {
  await baton?.stop();
  await llm?.close();
  await removeIsolated(config);
});

async function create(slug: string, definition: unknown): Promise<number> {
  const r = await a.call<{ id: number }>("POST", "/api/agent-workflows", { name: slug, slug, definition });
  if (r.status !== 201) throw new Error(JSON.stringify(r.body));
  return r.body.id;
}

async function finished(id: number): Promise<{ status: string; output: unknown; tokenUsage: Record<string, number>; error: string | null }> {
  return waitFor(`execution ${id} to finish`, async () => {
    const r = await a.call<{ status: string; output: unknown; tokenUsage: Record<string, number>; error: string | null }>("GET", `/api/agent-workflow-executions/${id}`);
    return ["completed", "failed", "cancelled"].includes(r.body.status) ? r.body : undefined;
  }, 20_000);
}

describe("agent workflows against an OpenAI-compatible server", () => {
  it("runs a ReAct loop with parallel tool calls, streams tokens and records usage", async () => {
    replies = (req) => {
      const msgs = req.body.messages ?? [];
      const toolResults = msgs.filter((m) => m.role === "tool").map((m) => String(m.content));
      if (toolResults.length === 0) {
        return { toolCalls: [{ id: "c1", name: "weather_lookup", args: { city: "Oslo" } }, { id: "c2", name: "weather_lookup", args: { city: "Rome" } }], usage: { prompt_tokens: 30, completion_tokens: 10 } };
      }
      return { text: `Oslo is colder than Rome. ${toolResults.join(" ")}`, chunks: ["Oslo is ", "colder ", "than Rome."], usage: { prompt_tokens: 60, completion_tokens: 8 } };
    };
    const wf = await create("react", {
      agentConfig: { model: "openai:gpt-test" },
      nodes: [
        { id: "ask", type: "agent.prompt", config: { template: "Which is colder, {{$.input.a}} or {{$.input.b}}?", role: "user" } },
        { id: "think", type: "agent.toolLoop", config: { system: "Use the tools.", tools: ["weather.lookup"] } },
      ],
      edges: [{ from: "ask", to: "think" }],
      output: { answer: "$.think.text", rounds: "$.think.iterations" },
    });
    const before = llm.requests.length;
    const started = await a.call<{ id: number }>("POST", `/api/agent-workflows/${wf}/execute`, { input: { a: "Oslo", b: "Rome" } });
    expect(started.status).toBe(202);
    const events = await readSse(`${a.base}/api/agent-workflow-executions/${started.body.id}/events`, config.apiKey!, AbortSignal.timeout(20_000));
    const done = await finished(started.body.id);
    expect(done.status).toBe("completed");
    expect(done.output).toMatchObject({ rounds: 1 });
    expect((done.output as { answer: string }).answer).toContain("Oslo is colder than Rome.");
    expect(weatherCalls.sort()).toEqual(["Oslo", "Rome"]);
    const sent = llm.requests.slice(before);
    expect(sent).toHaveLength(2);
    expect(sent[0]!.body.tools).toEqual([expect.objectContaining({ type: "function", function: expect.objectContaining({ name: "weather_lookup" }) })]);
    expect(sent[1]!.body.messages!.filter((m) => m.role === "tool").map((m) => JSON.parse(String(m.content)) as unknown)).toEqual([{ city: "Oslo", celsius: 3 }, { city: "Rome", celsius: 18 }]);
    expect(done.tokenUsage).toMatchObject({ inputTokens: 90, outputTokens: 18, totalTokens: 108 });
    const tokens = events.filter((e) => e.event === "token").map((e) => (e.data as { delta: string }).delta).join("");
    expect(tokens).toBe("Oslo is colder than Rome.");
  }, 30_000);

  it("the workflow's own agentConfig (seed 004's column) is its LLM nodes' default, kept with each version and brought back by a restore", async () => {
    replies = (req) => ({ text: `model ${String(req.body.model)} temperature ${String(req.body.temperature)}` });
    const created = await a.call<{ id: number; agentConfig: unknown }>("POST", "/api/agent-workflows", {
      name: "row-config", agentConfig: { model: "openai:gpt-row", temperature: 0.5 },
      // The definition's own agentConfig wins field by field; a forEach body's LLM nodes take them too.
      definition: {
        agentConfig: { temperature: 0.25 },
        nodes: [
          { id: "ask", type: "agent.llm", config: { prompt: "hi" } },
          { id: "each", type: "forEach", config: { items: "$.input.xs", body: { nodes: [{ id: "inner", type: "agent.llm", config: { prompt: "{{$.input.item}}" } }] } } },
        ],
        edges: [{ from: "ask", to: "each" }],
        output: { outer: "$.ask.text", inner: "$.each[0].text" },
      },
    });
    expect(created.status).toBe(201);
    const wf = created.body.id;
    const run = async (): Promise<unknown> => {
      const started = await a.call<{ id: number }>("POST", `/api/agent-workflows/${wf}/execute`, { input: { xs: ["x"] } });
      const done = await finished(started.body.id);
      expect(done.status).toBe("completed");
      return done.output;
    };
    expect(await run()).toEqual({ outer: "model gpt-row temperature 0.25", inner: expect.stringMatching(/^model gpt-row /) });
    // Another model in version 2; version 1 keeps its own, and a restore of it brings it back.
    expect((await a.call("PUT", `/api/agent-workflows/${wf}`, { agentConfig: { model: "openai:gpt-two" } })).status).toBe(200);
    expect(await run()).toEqual({ outer: "model gpt-two temperature 0.25", inner: expect.stringMatching(/^model gpt-two /) });
    const versions = await a.call<{ items: { id: number; version: number; agentConfig: unknown }[] }>("GET", `/api/agent-workflows/${wf}/versions`);
    expect(versions.body.items.map((v) => [v.version, v.agentConfig])).toEqual([[1, { model: "openai:gpt-row", temperature: 0.5 }], [2, { model: "openai:gpt-two" }]]);
    const restored = await a.call<{ version: number; agentConfig: unknown }>("POST", `/api/agent-workflows/${wf}/versions/${versions.body.items[0]!.id}/restore`);
    expect(restored.body).toMatchObject({ version: 3, agentConfig: { model: "openai:gpt-row", temperature: 0.5 } });
    expect(await run()).toEqual({ outer: "model gpt-row temperature 0.25", inner: expect.stringMatching(/^model gpt-row /) });
    // A bad agentConfig is a 400 naming the field.
    const bad = await a.call<{ errors: { path: string }[] }>("PUT", `/api/agent-workflows/${wf}`, { agentConfig: { temperature: "hot" } });
    expect([bad.status, bad.body.errors.map((e) => e.path)]).toEqual([400, ["body.agentConfig.temperature"]]);
  }, 30_000);

  it("runs a two-agent SynthDev workflow with its script and roles as written", async () => {
    const dir = new URL("../examples/synthdev/", import.meta.url);
    const workflow = JSON.parse(readFileSync(new URL("workflow.json", dir), "utf8")) as unknown;
    const script = readFileSync(new URL("script.js", dir), "utf8");
    const roles = JSON.parse(readFileSync(new URL("roles.json", dir), "utf8")) as unknown;
    let reviews = 0;
    replies = (req) => {
      const first = req.body.messages?.[0]?.content;
      const system = typeof first === "string" ? first : "";
      if (system.includes("software engineer")) return { text: `def fizz(): return ${reviews + 1}` };
      reviews++;
      return { toolCalls: [{ name: "verdict", args: { approved: reviews >= 2, comment: reviews >= 2 ? "good" : "fix it" } }] };
    };
    const imported = importSynthDev({ workflow, script, roles, agentConfig: { model: "openai:gpt-base", levels: { smart: "openai:gpt-smart", base: "openai:gpt-base" } } });
    if (!imported.ok) throw new Error(JSON.stringify(imported.errors));
    const wf = await create("pair", imported.definition);
    const before = llm.requests.length;
    const started = await a.call<{ id: number }>("POST", `/api/agent-workflows/${wf}/execute`, { input: { task: "fizzbuzz" } });
    expect(started.status).toBe(202);
    const done = await finished(started.body.id);
    expect(done.error).toBeNull();
    expect(done.status).toBe("completed");
    expect(done.output).toEqual({ next: null, output: { code: "def fizz(): return 2", approved: true, rounds: 2 } });
    const sent = llm.requests.slice(before);
    expect(sent.map((r) => r.body.model)).toEqual(["gpt-smart", "gpt-base", "gpt-smart", "gpt-base"]);
    // The reviewer (role user) sees the coder's answers as user messages and its own verdicts as assistant ones.
    const last = sent[3]!.body.messages!.map((m) => `${String(m.role)}:${typeof m.content === "string" ? m.content : ""}`);
    expect(last).toContain("user:def fizz(): return 1");
    expect(last).toContain("user:Reviewer asks for changes.");
    expect(sent[3]!.body.tools).toEqual([expect.objectContaining({ function: expect.objectContaining({ name: "verdict" }) })]);
  }, 30_000);

  it("writes and reads long-term memory through the memory service, and the model sees it", async () => {
    replies = () => ({ text: "Noted." });
    const wf = await create("memory", {
      agentConfig: { model: "openai:gpt-test" },
      nodes: [
        { id: "remember", type: "agent.memory.write", config: { agentId: 77, key: "tz", content: "{{$.input.fact}}" } },
        { id: "recall", type: "agent.memory.read", config: { agentId: 77, query: "UTC" } },
        { id: "reply", type: "agent.llm", config: { prompt: "What time zone do I like?" } },
      ],
      edges: [{ from: "remember", to: "recall" }, { from: "recall", to: "reply" }],
    });
    const before = llm.requests.length;
    const started = await a.call<{ id: number }>("POST", `/api/agent-workflows/${wf}/execute`, { input: { fact: "prefers UTC times" } });
    const done = await finished(started.body.id);
    expect(done.status).toBe("completed");
    const sent = llm.requests[before]!.body.messages!;
    expect(sent).toContainEqual({ role: "system", content: "Relevant memories:\n- prefers UTC times" });
    const listed = await a.call<{ items: { key: string; content: string }[] }>("GET", "/api/agent-memory?agentId=77");
    expect(listed.body.items).toEqual([expect.objectContaining({ key: "tz", content: "prefers UTC times" })]);
  }, 30_000);

  it("embeds text and generates an image through the provider", async () => {
    const wf = await create("media", {
      nodes: [
        { id: "vec", type: "agent.embed", config: { model: "openai:embed-test", values: "$.input.texts" } },
        { id: "pic", type: "agent.imageGen", config: { model: "openai:image-test", prompt: "A lighthouse at {{$.input.place}}", size: "256x256" } },
      ],
      edges: [{ from: "vec", to: "pic" }],
      output: { dims: "$.vec.embeddings[0]", image: "$.pic.images[0]" },
    });
    const started = await a.call<{ id: number }>("POST", `/api/agent-workflows/${wf}/execute`, { input: { texts: ["alpha", "beta"], place: "dawn" } });
    const done = await finished(started.body.id);
    expect(done.error).toBeNull();
    const out = done.output as { dims: number[]; image: { mediaType: string; base64: string } };
    expect(out.dims).toHaveLength(8);
    expect(out.image.mediaType).toBe("image/png");
    expect(Buffer.from(out.image.base64, "base64").subarray(1, 4).toString()).toBe("PNG");
    expect(llm.embeddings.slice(-2)).toEqual(["alpha", "beta"]);
    expect(llm.images.at(-1)).toBe("A lighthouse at dawn");
  }, 30_000);

  it("refuses a workflow whose model is not configured, naming the missing setting", async () => {
    const r = await a.call<{ errors: { path: string; code: string; message: string }[] }>("POST", "/api/agent-workflows", {
      name: "claude", slug: "claude",
      definition: { nodes: [{ id: "x", type: "agent.llm", config: { model: "anthropic:claude-x", prompt: "hi" } }] },
    });
    expect(r.status).toBe(400);
    expect(r.body.errors).toEqual([expect.objectContaining({ path: "body.definition.nodes[0].config.model", code: "model_not_configured", message: expect.stringContaining("ANTHROPIC_API_KEY") as unknown })]);
  });
});
