/**
 * A crash between an LLM answer and its tool calls (issue 5): the executor runs as its
 * own OS process and is SIGKILLed while the tools the model asked for are running; a
 * new executor takes over. Rules checked: the run completes with the right answer; the
 * model was asked exactly twice (no duplicate LLM call), each tool call ran once, and
 * the journal holds one completed row for the loop node.
 */
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { join } from "node:path";
import { z } from "zod";
import { loadConfig } from "@baton/config";
import { startOpenAiCompatibleServer } from "@baton/llm/testing";
import type { OpenAiCompatibleServer } from "@baton/llm/testing";
import { defineTool } from "@baton/sdk";
import { createLogger } from "@baton/telemetry";
import { startBaton } from "../bin/start.ts";
import type { BatonHandle } from "../bin/start.ts";
import { api, freePort, isolatedConfig, removeIsolated, waitFor } from "./helpers.ts";
import type { Api } from "./helpers.ts";

const root = join(import.meta.dirname, "..");
const { config, env } = isolatedConfig({ BATON_EXECUTOR_ACK_WAIT_MS: "2000" });
let llm: OpenAiCompatibleServer;
let local: BatonHandle;
let a: Api;
let executor: ChildProcess | undefined;
const ran: string[] = [];
let toolStarted = 0;

const slowLookup = defineTool({
  name: "crash.lookup",
  description: "Looks a city up, slowly",
  input: z.object({ city: z.string() }),
  handler: async ({ city }, ctx) => {
    toolStarted++;
    await new Promise((r) => setTimeout(r, 2_500));
    ran.push(`${ctx.callId}:${city}`);
    return { city, found: true };
  },
});

async function startExecutor(): Promise<ChildProcess> {
  const healthPort = await freePort();
  const child = spawn(process.execPath, [join(root, "bin/baton.ts"), "--target=executor"], {
    cwd: root, env: { ...process.env, ...env, BATON_HEALTH_PORT: String(healthPort) }, stdio: "ignore",
  });
  await waitFor("executor ready", async () => {
    const r = await fetch(`http://127.0.0.1:${healthPort}/readyz`).catch(() => undefined);
    return r?.status === 200 ? true : undefined;
  }, 45_000);
  return child;
}

beforeAll(async () => {
  llm = await startOpenAiCompatibleServer((req) => {
    const tools = (req.body.messages ?? []).filter((m) => m.role === "tool");
    return tools.length === 0
      ? { toolCalls: [{ id: "a", name: "crash_lookup", args: { city: "Oslo" } }, { id: "b", name: "crash_lookup", args: { city: "Lima" } }] }
      : { text: `found ${tools.length}` };
  });
  process.env.BATON_OPENAI_API_KEY = "sk-test";
  process.env.BATON_OPENAI_BASE_URL = llm.url;
  local = await startBaton({ config: loadConfig({ ...env, BATON_TARGET: "gateway,worker" }), logger: createLogger("agents-crash", "warn"), tools: [slowLookup] });
  a = api(local.gatewayPort!, config.apiKey!);
  executor = await startExecutor();
}, 90_000);

afterAll(async () => {
  executor?.kill("SIGKILL");
  await local?.stop();
  await llm?.close();
  await removeIsolated(config);
}, 30_000);

describe("a crash between the LLM answer and its tool calls", () => {
  it("loses neither and repeats neither", async () => {
    const created = await a.call<{ id: number }>("POST", "/api/agent-workflows", {
      name: "crash", slug: "crash",
      definition: {
        agentConfig: { model: "openai:gpt-test" },
        nodes: [{ id: "loop", type: "agent.toolLoop", config: { prompt: "Find Oslo and Lima", tools: ["crash.lookup"] } }],
      },
    });
    expect(created.status).toBe(201);
    const started = await a.call<{ id: number }>("POST", `/api/agent-workflows/${created.body.id}/execute`, { input: {} });
    expect(started.status).toBe(202);
    // The model has answered and both tool calls are running: kill the executor now.
    await waitFor("tool calls running", async () => (toolStarted >= 2 ? true : undefined), 20_000);
    expect(llm.requests).toHaveLength(1);
    executor!.kill("SIGKILL");
    await new Promise((r) => executor!.once("exit", r));
    executor = await startExecutor();
    const done = await waitFor("execution done", async () => {
      const r = await a.call<{ status: string; output: { text: string; iterations: number } }>("GET", `/api/agent-workflow-executions/${started.body.id}`);
      return ["completed", "failed", "cancelled"].includes(r.body.status) ? r.body : undefined;
    }, 40_000);
    expect(done.status).toBe("completed");
    expect(done.output).toMatchObject({ text: "found 2", iterations: 1 });
    expect(llm.requests).toHaveLength(2);
    expect(ran.map((r) => r.split(":")[1]).sort()).toEqual(["Lima", "Oslo"]);
    expect(new Set(ran.map((r) => r.split(":")[0])).size).toBe(2);
    const nodes = await a.call<{ items: { nodeId: string; status: string }[] }>("GET", `/api/agent-workflow-executions/${started.body.id}/nodes`);
    expect(nodes.body.items.filter((n) => n.nodeId === "loop" && n.status === "completed")).toHaveLength(1);
  }, 90_000);
});
