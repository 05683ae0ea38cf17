/**
 * Large values of running nodes (docs/tools.md, "Large results"), against the real NATS, Redis
 * and Postgres, with a real tool worker (@baton/sdk); the executor's handle() is called
 * directly and the worker's answers are handed to it from the worker's records. The threshold
 * is 4 KiB; the value is 20 KB, made by a transform in the step that starts the call. Rules:
 * - the checkpoint written while a node's call is out holds blob references, not the value, in
 *   the node's resolved input and in the outbox's call arguments (and in a multi-call node's
 *   kept calls); the tool gets the whole arguments (through the `tool_args_large` bucket);
 * - a retry of the node, and a retried call of a multi-call node, send the whole arguments again;
 * - after a crash before the call went out, another executor sends the outbox from the
 *   checkpoint with the references resolved from the blob store;
 * - after a crash once the call was out, the outbox sent again keeps the arguments object the
 *   queued call refers to (the value read back from the blob store has its keys in another
 *   order), so the worker taking the queued call reads it;
 * - a checkpoint rebuilt from the journal while the call is out holds references too, and the
 *   run completes;
 * - a non-agent node whose whole answer became a reference still counts the answer's token
 *   usage (node, journal row, execution row), the reference carrying a small `usage`; also
 *   when the answer came as a worker's object and is delivered again after it was moved.
 */
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { createHash, randomBytes } from "node:crypto";
import type { Redis } from "ioredis";
import { z } from "zod";
import { connectBus, objectName, objectRefJson } from "@baton/bus";
import type { Bus } from "@baton/bus";
import { createRedis, redisCheckpointStore } from "@baton/checkpoints";
import { COMMANDS, decode, encode, valueFromJson } from "@baton/contracts";
import type { CommandName } from "@baton/contracts";
import type { Effect, JsonObject } from "@baton/engine";
import { createMessaging } from "@baton/messaging";
import type { AnyCommand, CommandInit, Messaging } from "@baton/messaging";
import { createWorker, defineTool } from "@baton/sdk";
import type { Worker } from "@baton/sdk";
import { openTestStore } from "@baton/store/testing";
import type { TestStore } from "@baton/store/testing";
import { createLogger } from "@baton/telemetry";
import { CHECKPOINT_STORE_OPTIONS, createExecutor } from "./executor.ts";
import type { CheckpointState, Executor } from "./executor.ts";
import { createLargeValues, LARGE_RESULTS_BUCKET } from "./large.ts";
import { removeTestPrefix } from "./test-support.ts";

const NATS = process.env.BATON_NATS_URL ?? "nats://127.0.0.1:4222";
const prefix = `xlr${randomBytes(4).toString("hex")}`;
const THRESHOLD = 4096;
const Z = 20_000;
/** What the transform makes (keys in this order) and the tool must get. */
const payload = { z: "x".repeat(Z), a: 1 };
/** A run of the value's characters: no checkpoint may hold one. */
const RUN = "x".repeat(200);

let t: TestStore;
let bus: Bus;
let redis: Redis;
let messaging: Messaging;
let checkpoints: ReturnType<typeof redisCheckpointStore<CheckpointState>>;
let tenantId: string;
let worker: Worker;
let laterWorker: Worker | undefined;

/** Every state written to Redis, as JSON, by execution. */
const written = new Map<number, string[]>();
/** The arguments each call's handler got, by call id. */
const got = new Map<string, JsonObject>();
/** Calls whose first run fails, retryably. */
const failOnce = new Set<string>();

const argsSchema = z.object({ payload: z.object({ z: z.string(), a: z.number() }), n: z.number() });
const handler = async (args: z.infer<typeof argsSchema>, ctx: { callId: string }) => {
  got.set(ctx.callId, args);
  if (failOnce.delete(ctx.callId)) throw Object.assign(new Error("flaky"), { code: "TEST_FLAKY", retryable: true });
  return { n: args.n, length: args.payload.z.length };
};
const take = defineTool({ name: "take", description: "takes a large payload", input: argsSchema, handler });
/** Served only once a test has set the scene (its queued calls wait for it). */
const later = defineTool({ name: "later", description: "takes a large payload, later", input: argsSchema, handler });

const makePayload = { id: "t", type: "transform", config: { expression: `{ "z": $pad("", ${Z}, "x"), "a": 1 }` } };
const oneCall = (tool: string, extra: JsonObject = {}) => ({
  nodes: [makePayload, { id: "m", type: "tool", config: { tool }, input: { payload: "$.t", n: 7 }, ...extra }],
  edges: [{ from: "t", to: "m" }],
  output: { m: "$.m" },
});

const recording: typeof checkpoints = new Proxy({} as typeof checkpoints, {
  get(_, key: keyof typeof checkpoints) {
    if (key === "put") {
      return (id: number, state: CheckpointState, version: number) => {
        written.set(id, [...(written.get(id) ?? []), JSON.stringify(state)]);
        return checkpoints.put(id, state, version);
      };
    }
    const v = checkpoints[key];
    return typeof v === "function" ? (v as (...a: unknown[]) => unknown).bind(checkpoints) : v;
  },
});

function executorWith(m: Messaging = messaging): Executor {
  return createExecutor({ messaging: m, store: t.store, checkpoints: recording, logger: createLogger("executor", "silent"), recoverOnStart: false, recoverEveryMs: 0, largeResultBytes: THRESHOLD });
}

/** A command as the consumer hands it over: encoded and decoded as on the bus. */
function command<N extends CommandName>(name: N, init: CommandInit<N>): AnyCommand {
  const schema = COMMANDS[name];
  return { name, message: decode(schema, encode(schema, init as never)) } as AnyCommand;
}

async function workflow(name: string, definition: unknown): Promise<number> {
  return (await t.store.workflows.create(tenantId, { name, definition: definition as JsonObject })).id;
}

async function created(workflowId: number, input: JsonObject = {}): Promise<{ id: number; start: AnyCommand }> {
  const row = await t.store.executions.create(tenantId, { workflowId, workflowVersion: 1, input });
  return { id: row.id, start: command("execution.start", { executionId: row.id, tenantId, workflowId, workflowVersion: 1, input }) };
}

async function until<T>(what: string, fn: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const v = await fn();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`gave up waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** The worker's answer to a call, as the tool.result command the executor consumes. */
async function answer(id: number, nodeId: string, callId: string, attempt = 1): Promise<AnyCommand> {
  const { result: rec } = await until(`the answer to ${callId}`, async () => (await messaging.recordedToolResult(callId)) ?? undefined);
  return command("tool.result", {
    callId, executionId: id, tenantId, nodeId, attempt, tool: "take", ok: rec.ok, durationMs: rec.durationMs,
    ...(rec.ok ? { output: valueFromJson(rec.output ?? null) } : { error: rec.error! }),
  });
}

/** The states written for `id` whose node `nodeId` is running with call `callId` in the outbox. */
function writtenWithCall(id: number, nodeId: string, callId: string): { json: string; state: CheckpointState; call: Effect & { kind: "callTool" } }[] {
  return (written.get(id) ?? []).flatMap((json) => {
    const state = JSON.parse(json) as CheckpointState;
    const call = state.outbox?.find((e): e is Effect & { kind: "callTool" } => e.kind === "callTool" && e.callId === callId);
    return state.nodes[nodeId]?.status === "running" && call ? [{ json, state, call }] : [];
  });
}

const blobRef = { $ref: expect.stringMatching(/^blob:[0-9a-f]{64}$/) as unknown as string, size: expect.any(Number) as unknown as number };

/** The checkpoint that sent the call holds references where the value was, and nothing large. */
function expectReferenced(id: number, nodeId: string, callId: string): void {
  const found = writtenWithCall(id, nodeId, callId);
  expect(found.length).toBeGreaterThan(0);
  for (const { json, state, call } of found) {
    expect({ bytes: json.length, holdsTheValue: json.includes(RUN) }).toEqual({ bytes: expect.any(Number), holdsTheValue: false });
    expect(json.length).toBeLessThan(THRESHOLD * 2);
    expect(call.args).toEqual({ payload: blobRef, n: expect.any(Number) });
    expect(JSON.stringify(state.nodes[nodeId]!.input)).toContain('"$ref":"blob:');
  }
}

beforeAll(async () => {
  t = await openTestStore({ prefix: "exec_large_running" });
  bus = await connectBus({ servers: NATS, prefix, name: "executor-large-running-test", logger: createLogger("test", "silent") });
  redis = createRedis(process.env.BATON_REDIS_URL ?? "redis://127.0.0.1:6379");
  checkpoints = redisCheckpointStore<CheckpointState>(redis, { prefix, ...CHECKPOINT_STORE_OPTIONS });
  messaging = createMessaging(bus);
  tenantId = (await t.store.tenants.create("large-running")).id;
  worker = createWorker({ bus, tools: [take], logger: createLogger("worker", "silent") });
  await worker.start();
});

afterAll(async () => {
  await laterWorker?.drain();
  await worker?.drain();
  await t?.dispose();
  await removeTestPrefix(prefix, redis, bus, NATS);
});

describe("a running node's large input and call arguments", () => {
  it("are references in the checkpoint; the tool gets the whole arguments and the run completes", async () => {
    const x = executorWith();
    const { id, start } = await created(await workflow("fresh", oneCall("take")));
    await x.handle(start);
    expectReferenced(id, "m", `${id}.m.1`);
    await x.handle(await answer(id, "m", `${id}.m.1`));
    expect(got.get(`${id}.m.1`)).toEqual({ payload, n: 7 });
    const cp = (await checkpoints.get(id))!;
    expect(cp.state.status).toBe("completed");
    expect(cp.state.output).toEqual({ m: { n: 7, length: Z } });
    const m = (await t.store.nodeExecutions.listById(id)).find((r) => r.nodeId === "m" && r.status === "completed")!;
    expect(m.input).toEqual({ payload: blobRef, n: 7 });
  });

  it("a retry of the node sends the whole arguments again", async () => {
    const x = executorWith();
    const { id, start } = await created(await workflow("retried", oneCall("take", { retry: { maxAttempts: 2, initialDelayMs: 0, jitter: 0 } })));
    failOnce.add(`${id}.m.1`);
    await x.handle(start);
    await x.handle(await answer(id, "m", `${id}.m.1`));
    const waiting = (await checkpoints.get(id))!.state;
    expect(waiting.nodes.m).toMatchObject({ status: "running", timerId: "retry:m:1", input: { payload: blobRef, n: 7 } });
    await x.handle(command("execution.timer", { executionId: id, tenantId, timerId: "retry:m:1", dueAt: waiting.timers!["retry:m:1"]!.dueAt }));
    expectReferenced(id, "m", `${id}.m.2`);
    await x.handle(await answer(id, "m", `${id}.m.2`, 2));
    expect(got.get(`${id}.m.2`)).toEqual({ payload, n: 7 });
    expect((await checkpoints.get(id))!.state).toMatchObject({ status: "completed", output: { m: { n: 7, length: Z } } });
  });

  it("a multi-call node keeps its calls' arguments by reference; a retried call gets them whole", async () => {
    const x = executorWith();
    const wf = await workflow("calls", {
      nodes: [makePayload, {
        id: "m", type: "tool", retry: { maxAttempts: 2, initialDelayMs: 0, jitter: 0 },
        config: { calls: [{ tool: "take", input: { payload: "$.t", n: 1 } }, { tool: "take", input: { payload: "$.t", n: 2 } }] },
      }],
      edges: [{ from: "t", to: "m" }],
      output: { m: "$.m" },
    });
    const { id, start } = await created(wf);
    failOnce.add(`${id}.m.1.0`);
    await x.handle(start);
    for (const callId of [`${id}.m.1.0`, `${id}.m.1.1`]) expectReferenced(id, "m", callId);
    const kept = JSON.parse(written.get(id)!.at(-1)!) as CheckpointState;
    expect(kept.nodes.m!.fan!.calls).toEqual([{ tool: "take", args: { payload: blobRef, n: 1 } }, { tool: "take", args: { payload: blobRef, n: 2 } }]);
    await x.handle(await answer(id, "m", `${id}.m.1.1`));
    await x.handle(await answer(id, "m", `${id}.m.1.0`));
    expectReferenced(id, "m", `${id}.m.1.0-2`);
    await x.handle(await answer(id, "m", `${id}.m.1.0-2`));
    expect(got.get(`${id}.m.1.0-2`)).toEqual({ payload, n: 1 });
    expect((await checkpoints.get(id))!.state).toMatchObject({ status: "completed", output: { m: [{ n: 1, length: Z }, { n: 2, length: Z }] } });
  });

  it("sent again from the checkpoint after a crash before the call went out, reach the tool whole", async () => {
    const dead: Messaging = { ...messaging, callTool: () => Promise.reject(new Error("the executor died here")) };
    const { id, start } = await created(await workflow("crash-before-call", oneCall("take")));
    await expect(executorWith(dead).handle(start)).rejects.toMatchObject({ code: "BATON_EXECUTOR_EFFECTS_FAILED" });
    expectReferenced(id, "m", `${id}.m.1`);
    expect(await messaging.recordedToolResult(`${id}.m.1`)).toBeNull();
    // The start is delivered again, to another executor: it finds the outbox and sends it.
    const x = executorWith();
    await x.handle(start);
    await x.handle(await answer(id, "m", `${id}.m.1`));
    expect(got.get(`${id}.m.1`)).toEqual({ payload, n: 7 });
    expect((await checkpoints.get(id))!.state).toMatchObject({ status: "completed", output: { m: { n: 7, length: Z } } });
  });

  it("sent again after a crash once the call was out, keep the arguments object the queued call refers to", async () => {
    // The step's records fail (the executor died after its call went out): the outbox stays.
    const dead: Messaging = { ...messaging, publishEvent: () => Promise.reject(new Error("the executor died here")) };
    const { id, start } = await created(await workflow("crash-after-call", oneCall("later")));
    await expect(executorWith(dead).handle(start)).rejects.toThrow("the executor died here");
    expectReferenced(id, "m", `${id}.m.1`);
    const x = executorWith();
    await x.handle(start);
    // Only now a worker takes the call queued by the first executor.
    laterWorker = createWorker({ bus, tools: [later], logger: createLogger("worker", "silent") });
    await laterWorker.start();
    const answered = await answer(id, "m", `${id}.m.1`);
    expect(answered.name === "tool.result" && answered.message.error).toBeUndefined();
    expect(got.get(`${id}.m.1`)).toEqual({ payload, n: 7 });
    await x.handle(answered);
    expect((await checkpoints.get(id))!.state).toMatchObject({ status: "completed", output: { m: { n: 7, length: Z } } });
  });

  it("rebuilt from the journal while the call is out, are references, and the run completes", async () => {
    const { id, start } = await created(await workflow("rebuilt", oneCall("take")));
    await executorWith().handle(start);
    const done = await answer(id, "m", `${id}.m.1`);
    // Redis lost the checkpoint; the answer reaches another executor, which rebuilds it first.
    expect(await redis.del(`${prefix}:checkpoint:{${id}}`, `${prefix}:checkpoint:{${id}}:history`)).toBeGreaterThanOrEqual(1);
    written.delete(id);
    await executorWith().handle(done);
    const rebuilt = JSON.parse(written.get(id)![0]!) as CheckpointState;
    expect(rebuilt.nodes.m!.status).toBe("running");
    expectReferenced(id, "m", `${id}.m.1`);
    expect(written.get(id)!.filter((json) => json.includes(RUN))).toHaveLength(0);
    expect((await checkpoints.get(id))!.state).toMatchObject({ status: "completed", output: { m: { n: 7, length: Z } } });
  });
});

describe("token usage of an answer kept by reference", () => {
  it("counts for a non-agent node whose whole answer became a blob", async () => {
    const x = executorWith();
    const wf = await workflow("embed", { nodes: [{ id: "e", type: "agent.embed", config: { model: "m:emb", values: "$.input.texts" } }] });
    const { id, start } = await created(wf, { texts: ["a", "b"] });
    await x.handle(start);
    const usage = { inputTokens: 12, outputTokens: 0, totalTokens: 12 };
    const output = { vectors: [Array.from({ length: 1000 }, (_, i) => i / 1000), [0.5]], usage };
    await x.handle(command("tool.result", { callId: `${id}.e.1`, executionId: id, tenantId, nodeId: "e", attempt: 1, tool: "llm.embed", ok: true, output: valueFromJson(output), durationMs: 1 }));
    const state = (await checkpoints.get(id))!.state;
    expect(state.status).toBe("completed");
    expect(state.context.e).toEqual({ ...blobRef, usage });
    expect(state.tokenUsage).toEqual(usage);
    const row = (await t.store.nodeExecutions.listById(id)).find((r) => r.nodeId === "e" && r.status === "completed")!;
    expect(row.tokenUsage).toEqual(usage);
    expect((await t.store.executions.get(tenantId, id))!.tokenUsage).toEqual(usage);
  });

  it("travels with a worker's large result moved into the blob store, also when the answer is delivered again", async () => {
    const large = createLargeValues({ store: t.store, bus, logger: createLogger("large", "silent"), thresholdBytes: THRESHOLD });
    const { id } = await created(await workflow("object-usage", oneCall("take")));
    const callId = `${id}.img.1`;
    const usage = { inputTokens: 3, outputTokens: 900, totalTokens: 903 };
    const bytes = new TextEncoder().encode(JSON.stringify({ image: "i".repeat(10_000), usage }));
    const info = await bus.objects(LARGE_RESULTS_BUCKET).put(objectName(callId), bytes);
    const ref = objectRefJson({ bucket: LARGE_RESULTS_BUCKET, name: objectName(callId), ...info, sha256: createHash("sha256").update(bytes).digest("hex") });
    const owner = { tenantId, executionId: id };
    const a = { nodeId: "img", callId, ok: true, durationMs: 1, output: ref };
    const first = await large.toolResultCommand(owner, a);
    expect(first).toMatchObject({ ok: true, output: { ...blobRef, usage } });
    // The object is gone (moved); the same answer again finds the blob.
    expect(await large.toolResultCommand(owner, a)).toEqual(first);
  });
});
