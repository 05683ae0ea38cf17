/**
 * The `llm.chat` tool of the worker, against a local OpenAI-compatible server and a real
 * NATS KV budget bucket. Rules checked:
 * - its input is the chat request, its output the chat result with usage; the descriptor's
 *   JSON Schemas can be generated;
 * - streamed deltas go to publishToken in order, tagged with execution, tenant, node and call
 *   (without publishToken, to the context's stream()); `stream: false` turns streaming off;
 * - a tenant over its budget is refused before any request; usage is charged after a call;
 * - the worker's signal (tool timeout, cancellation) ends the call.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "@jest/globals";
import { randomBytes } from "node:crypto";
import { connect } from "@nats-io/transport-node";
import type { NatsConnection } from "@nats-io/nats-core";
import { Kvm } from "@nats-io/kv";
import type { KV } from "@nats-io/kv";
import { compileChecks, toDescriptor } from "@baton/sdk";
import type { ToolContext, ToolSpec } from "@baton/sdk";
import { createLlmRegistry, createTokenBudget, emptyLlmConfig } from "@baton/llm";
import { startOpenAiCompatibleServer } from "@baton/llm/testing";
import type { OpenAiCompatibleServer, ScriptStep } from "@baton/llm/testing";
import { llmTools } from "./llm.ts";
import type { LlmTokenEvent, LlmToolsOptions } from "./llm.ts";

const NATS_URL = process.env.BATON_NATS_URL ?? "nats://127.0.0.1:4222";
let nc: NatsConnection;
let kv: KV;
let server: OpenAiCompatibleServer | undefined;

beforeAll(async () => {
  nc = await connect({ servers: NATS_URL, name: "llm-tool-test" });
  kv = await new Kvm(nc).create(`llm_tool_test_${randomBytes(4).toString("hex")}`, { history: 1 });
});
afterEach(async () => {
  await server?.close();
  server = undefined;
});
afterAll(async () => {
  await kv.destroy();
  await nc.close();
});

function ctx(signal = new AbortController().signal, streamed: string[] = []): ToolContext {
  return {
    idempotencyKey: "7.ask",
    callId: "7.ask.1",
    executionId: 7,
    rootExecutionId: 7,
    tenantId: "acme",
    nodeId: "ask",
    attempt: 1,
    signal,
    progress: () => undefined,
    stream: (d) => void streamed.push(d),
  };
}

async function tool(script: ScriptStep[], extra: Omit<LlmToolsOptions, "registry"> = {}): Promise<{ spec: ToolSpec; server: OpenAiCompatibleServer }> {
  server = await startOpenAiCompatibleServer(script);
  const registry = createLlmRegistry(emptyLlmConfig({ compatible: { local: { baseURL: server.url } }, defaultModel: "local:m" }));
  const [spec] = llmTools({ registry, ...extra });
  return { spec: spec!, server };
}

async function call(spec: ToolSpec, args: unknown, c = ctx()): Promise<unknown> {
  const checks = compileChecks(spec);
  const input = checks.input(args);
  if (!input.ok) throw new Error(input.problems);
  const out = await spec.handler(input.value, c);
  const checked = checks.output(out);
  if (!checked.ok) throw new Error(checked.problems);
  return checked.value;
}

describe("llm.chat tool", () => {
  it("returns the chat result; its descriptor has JSON Schemas", async () => {
    const { spec } = await tool([{ text: "hi there" }]);
    expect(spec.name).toBe("llm.chat");
    const d = toDescriptor(spec);
    expect(d.inputSchema).toMatchObject({ type: "object", required: ["messages"] });
    expect(d.outputSchema).toMatchObject({ type: "object" });
    const out = await call(spec, { messages: [{ role: "user", content: "hello" }] });
    expect(out).toMatchObject({ model: "local:m", text: "hi there", finishReason: "stop", usage: { inputTokens: 10, outputTokens: 5, totalTokens: 15 } });
  });

  it("refuses invalid input naming the field", async () => {
    const { spec } = await tool([]);
    const r = compileChecks(spec).input({ messages: [] });
    expect(r.ok).toBe(false);
    expect(!r.ok && r.problems).toContain("messages");
  });

  it("publishes streamed deltas in order with the call's identity", async () => {
    const events: LlmTokenEvent[] = [];
    const { spec, server } = await tool([{ text: "a b c" }], { publishToken: (e) => void events.push(e) });
    const out = await call(spec, { messages: [{ role: "user", content: "abc" }] });
    expect(out).toMatchObject({ text: "a b c" });
    expect(server.requests[0]!.body.stream).toBe(true);
    expect(events).toEqual(["a ", "b ", "c"].map((delta, index) => ({ executionId: 7, tenantId: "acme", nodeId: "ask", callId: "7.ask.1", delta, index })));
  });

  it("streams to the context's stream() when no publishToken is given", async () => {
    const { spec, server } = await tool([{ text: "x y" }]);
    const streamed: string[] = [];
    await call(spec, { messages: [{ role: "user", content: "x" }] }, ctx(undefined, streamed));
    expect(server.requests[0]!.body.stream).toBe(true);
    expect(streamed).toEqual(["x ", "y"]);
  });

  it("does not stream when the input says stream: false", async () => {
    const events: LlmTokenEvent[] = [];
    const { spec, server } = await tool([{ text: "quiet" }], { publishToken: (e) => void events.push(e) });
    await call(spec, { messages: [{ role: "user", content: "x" }], stream: false });
    expect(server.requests[0]!.body.stream).toBeUndefined();
    expect(events).toEqual([]);
  });

  it("charges usage and refuses a tenant over budget before calling", async () => {
    const budget = createTokenBudget(kv, { dailyLimit: 20 });
    const { spec, server } = await tool([{ text: "one", usage: { prompt_tokens: 15, completion_tokens: 5 } }, { text: "never" }], { budget });
    await call(spec, { messages: [{ role: "user", content: "x" }] });
    expect(await budget.used("acme")).toBe(20);
    await expect(call(spec, { messages: [{ role: "user", content: "y" }] })).rejects.toMatchObject({ code: "BATON_LLM_BUDGET_EXCEEDED", retryable: false });
    expect(server.requests).toHaveLength(1);
  });

  it("ends the call when the worker aborts it", async () => {
    const { spec } = await tool([{ hang: true }]);
    const ac = new AbortController();
    const pending = call(spec, { messages: [{ role: "user", content: "x" }] }, ctx(ac.signal));
    const reason = Object.assign(new Error("tool llm.chat timed out"), { code: "BATON_TOOL_TIMEOUT", status: 504, retryable: true });
    ac.abort(reason);
    await expect(pending).rejects.toBe(reason);
  });
});
