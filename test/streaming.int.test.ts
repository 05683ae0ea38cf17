/**
 * Token streaming through the real services. Rules checked:
 * - pieces a tool streams (`ctx.stream`, as the LLM tool does with tokens) reach SSE
 *   clients of the execution as `event: token`, in order, before the node completes;
 * - tokens streamed inside a sub-workflow reach the SSE clients of the parent too;
 * - the completed answer is recorded durably; tokens are not (a late client sees none).
 */
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { z } from "zod";
import { defineTool } from "@baton/sdk";
import { createLogger } from "@baton/telemetry";
import { startBaton } from "../bin/start.ts";
import type { BatonHandle } from "../bin/start.ts";
import { api, isolatedConfig, readSse, removeIsolated } from "./helpers.ts";
import type { Api } from "./helpers.ts";

const { config } = isolatedConfig();
let baton: BatonHandle;
let a: Api;

const talker = defineTool({
  name: "test.talk",
  description: "Waits for an SSE client, then streams words and returns the sentence.",
  input: z.object({ words: z.array(z.string()), waitMs: z.number().default(700) }),
  handler: async (input, ctx) => {
    await new Promise((r) => setTimeout(r, input.waitMs));
    for (const w of input.words) ctx.stream(w);
    return { text: input.words.join("") };
  },
});

beforeAll(async () => {
  baton = await startBaton({ config, logger: createLogger("streaming", "warn"), tools: [talker] });
  a = api(baton.gatewayPort!, config.apiKey!);
}, 60_000);

afterAll(async () => {
  await baton?.stop();
  await removeIsolated(config);
});

async function create(slug: string, definition: unknown): Promise<number> {
  const r = await a.call<{ id: number }>("POST", "/api/agent-workflows", { name: slug, slug, definition });
  expect(r.status).toBe(201);
  return r.body.id;
}

async function runAndListen(workflowId: number): Promise<{ id: number; events: { event: string; data: unknown }[] }> {
  const r = await a.call<{ id: number }>("POST", `/api/agent-workflows/${workflowId}/execute`, { input: {} });
  expect(r.status).toBe(202);
  const events = await readSse(`${a.base}/api/agent-workflow-executions/${r.body.id}/events`, config.apiKey!, AbortSignal.timeout(20_000));
  return { id: r.body.id, events };
}

describe("token streaming over SSE", () => {
  it("delivers a node's streamed pieces in order before it completes, and records the whole answer", async () => {
    const wf = await create("talk", { nodes: [{ id: "say", type: "tool", config: { tool: "test.talk" }, input: { words: ["Hel", "lo", " wor", "ld"] } }] });
    const { id, events } = await runAndListen(wf);
    const tokens = events.filter((e) => e.event === "token").map((e) => e.data as { delta: string; index: number; nodeId: string; executionId: number });
    expect(tokens.map((t) => t.delta)).toEqual(["Hel", "lo", " wor", "ld"]);
    expect(tokens.map((t) => t.index)).toEqual([0, 1, 2, 3]);
    expect(tokens.every((t) => t.nodeId === "say" && t.executionId === id)).toBe(true);
    const names = events.map((e) => e.event);
    expect(names.lastIndexOf("token")).toBeLessThan(names.indexOf("node.completed"));
    const exec = await a.call<{ output: unknown }>("GET", `/api/agent-workflow-executions/${id}`);
    expect(exec.body.output).toEqual({ text: "Hello world" });
    // Tokens are ephemeral: a client arriving after the end sees the durable events only.
    const late = await readSse(`${a.base}/api/agent-workflow-executions/${id}/events`, config.apiKey!, AbortSignal.timeout(10_000));
    expect(late.some((e) => e.event === "token")).toBe(false);
    expect(late.some((e) => e.event === "execution.completed")).toBe(true);
  }, 30_000);

  it("forwards tokens streamed inside a sub-workflow to the parent's clients", async () => {
    await create("child-talk", { nodes: [{ id: "inner", type: "tool", config: { tool: "test.talk" }, input: { words: ["sub", "agent"], waitMs: 1000 } }] });
    const parent = await create("parent-talk", { nodes: [{ id: "delegate", type: "subworkflow", config: { workflow: { slug: "child-talk" } } }] });
    const { id, events } = await runAndListen(parent);
    const tokens = events.filter((e) => e.event === "token").map((e) => e.data as { delta: string; nodeId: string; executionId: number });
    expect(tokens.map((t) => t.delta)).toEqual(["sub", "agent"]);
    expect(tokens[0]!.nodeId).toBe("inner");
    expect(tokens[0]!.executionId).not.toBe(id); // the child's id, delivered on the parent's stream
    const exec = await a.call<{ output: unknown; status: string }>("GET", `/api/agent-workflow-executions/${id}`);
    expect(exec.body).toMatchObject({ status: "completed", output: { text: "subagent" } });
  }, 30_000);
});
