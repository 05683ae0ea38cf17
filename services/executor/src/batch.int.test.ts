/**
 * Rules checked against the real NATS, Redis and Postgres (the executor's handle() is
 * called directly, without its consumer):
 * - tool results of one execution that arrive while its lock is held are applied together,
 *   in one step (their journal rows carry one step number), each call's result counts, and
 *   every handle() call resolves only once that step's journal rows are written;
 * - results handled one after another are one step each, as before;
 * - once an execution waits (its records written, no step since), its outbox is dropped from
 *   the Redis checkpoint in place: the version stays, the history gains nothing;
 * - a step's journal statement does not wait for the previous step's events to be confirmed,
 *   but its own events go out only after those are, and not at all when they failed; steps
 *   whose rows came in meanwhile publish their events together;
 * - the statements of steps that leave the execution row alone run alongside the previous
 *   step's; a step that changes the row (here the last) waits for every row before it; when
 *   an earlier step's rows fail, no later step's events go out, and the redelivered command
 *   redoes both steps' records in order;
 * - effects carried out while Redis still holds their outbox (its drop is delayed) are not
 *   carried out again when an ignored command makes the executor read the checkpoint there;
 * - calls go out while their checkpoint is written. When it is not written (a crash), the
 *   answer that comes meanwhile is delivered again (BATON_EXECUTOR_RESULT_BEFORE_CALL) and
 *   dropped on its last delivery; the redelivered command sends the call again, finds it
 *   sent, and applies its recorded answer. When the compare-and-set is lost to another
 *   executor, the calls the step applied again does not send are cancelled.
 * Findings of the chaos driver reproduced here (docs/dev/chaos.md): a late redo's row patch
 * undoing a pause in a sub-run (seed 501, fixed), a stale step's records landing after another
 * replica's rebuild (seed 603, fixed), and after another replica's fresh start over an empty
 * journal (seed 810, fixed); and, found tracing seed 831, a step taken on the rebuilt checkpoint
 * while the stale step's refused records were in flight, which carried them (fixed); and a step's
 * rows written, its executor dead before its events, the checkpoint then lost: the rebuild never
 * told them (seed 841, fixed); and a cancel whose records were refused stopping the rebuilt run's
 * calls and children, which then failed it (seed 832, fixed: what a step stops goes out after its rows).
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "@jest/globals";
import { randomBytes } from "node:crypto";
import type { Redis } from "ioredis";
import { connectBus } from "@baton/bus";
import type { Bus } from "@baton/bus";
import { createRedis, redisCheckpointStore } from "@baton/checkpoints";
import { COMMANDS, decode, encode, ToolCancelSchema, valueFromJson } from "@baton/contracts";
import type { CommandName } from "@baton/contracts";
import { forkStartOf, forkStartRecord } from "@baton/engine";
import { createMessaging, RESULTS_BUCKET, resultKey } from "@baton/messaging";
import type { AnyCommand, CommandInit, Messaging } from "@baton/messaging";
import { openTestStore } from "@baton/store/testing";
import type { TestStore } from "@baton/store/testing";
import type { JsonObject, Store } from "@baton/store";
import { createLogger } from "@baton/telemetry";
import { CHECKPOINT_STORE_OPTIONS, createExecutor } from "./executor.ts";
import type { CheckpointState, Executor } from "./executor.ts";
import { commandsSentBy, removeTestPrefix } from "./test-support.ts";

const NATS = process.env.BATON_NATS_URL ?? "nats://127.0.0.1:4222";
const prefix = `xb${randomBytes(4).toString("hex")}`;
let t: TestStore;
let bus: Bus;
let redis: Redis;
let executor: Executor;
let checkpoints: ReturnType<typeof redisCheckpointStore<CheckpointState>>;
let tenantId: string;
let workflowId: number;
/**
 * How far the clock of the executors made by gated() and executorWith() is ahead of the wall
 * clock: a sweep sends a recorded answer only once it was recorded a minute ago, and a
 * continue only to a checkpoint with no step for ten seconds.
 */
let skewMs = 0;
const skewedClock = (): Date => new Date(Date.now() + skewMs);

const fan = {
  start: "s",
  nodes: [
    { id: "s", type: "setVariable", config: { values: { x: 1 } } },
    ...["a", "b", "c", "d"].map((id) => ({ id, type: "tool", config: { tool: "echo" }, input: { v: id } })),
    { id: "j", type: "transform", config: { expression: "[a.v, b.v, c.v, d.v]" } },
  ],
  edges: [...["a", "b", "c", "d"].flatMap((id) => [{ from: "s", to: id }, { from: id, to: "j" }])],
  output: { j: "$.j" },
};

beforeAll(async () => {
  t = await openTestStore({ prefix: "exec_batch" });
  bus = await connectBus({ servers: NATS, prefix, name: "executor-batch-test", logger: createLogger("test", "silent") });
  redis = createRedis(process.env.BATON_REDIS_URL ?? "redis://127.0.0.1:6379");
  checkpoints = redisCheckpointStore<CheckpointState>(redis, { prefix, ...CHECKPOINT_STORE_OPTIONS });
  executor = createExecutor({ messaging: createMessaging(bus), store: t.store, checkpoints, logger: createLogger("executor", "silent"), recoverOnStart: false, recoverEveryMs: 0 });
  tenantId = (await t.store.tenants.create("batch")).id;
  workflowId = (await t.store.workflows.create(tenantId, { name: "fan", definition: fan as unknown as JsonObject })).id;
});

beforeEach(() => {
  skewMs = 0;
});

afterAll(async () => {
  await t?.dispose();
  await removeTestPrefix(prefix, redis, bus, NATS);
});

/**
 * Creates a child workflow of one echo call and a parent whose one node, `sub`, runs it (names
 * and slug carry `tag`, so each test has its own); returns the parent's id.
 */
async function parentOfChild(tag: string): Promise<number> {
  const suffix = tag ? `-${tag}` : "";
  const child = await t.store.workflows.create(tenantId, { name: `child${suffix}`, slug: `child${suffix}-${prefix}`, definition: { start: "w", nodes: [{ id: "w", type: "tool", config: { tool: "echo" } }], edges: [] } });
  return (await t.store.workflows.create(tenantId, {
    name: `parent${suffix}`, definition: { start: "sub", nodes: [{ id: "sub", type: "subworkflow", config: { workflow: { slug: child.slug } } }], edges: [] },
  })).id;
}

/** The test store, each journal statement first given to `before` (which may hold it, fence, or throw). */
function storeBefore(before: (batch: Parameters<Store["nodeExecutions"]["recordSteps"]>[0]) => void | Promise<void>): Store {
  const rows = t.store.nodeExecutions;
  return { ...t.store, nodeExecutions: { ...rows, recordSteps: async (batch) => (await before(batch), rows.recordSteps(batch)) } };
}

async function started(): Promise<number> {
  const row = await t.store.executions.create(tenantId, { workflowId, workflowVersion: 1, input: {} });
  await executor.handle(command("execution.start", { executionId: row.id, tenantId, workflowId, workflowVersion: 1, input: {} }));
  return row.id;
}

/** The events stream holds everything from over a second before a run created now (the clocks' leeway): what the run publishes, a rebuild finds. */
async function streamKeepsOverASecond(): Promise<void> {
  const since = await bus.eventsKeptSince();
  if (since === null || since.getTime() > Date.now() - 1_100) {
    await bus.publish(`${prefix}.evt.workflow.created.${tenantId}.0`, new Uint8Array(), { tenantId, type: "workflow.created" });
    await new Promise((r) => setTimeout(r, 1_100));
  }
}

/** A command as the consumer hands it over: encoded and decoded as on the bus. */
function command<N extends CommandName>(name: N, init: CommandInit<N>): AnyCommand {
  const schema = COMMANDS[name];
  return { name, message: decode(schema, encode(schema, init as never)) } as AnyCommand;
}

const result = (executionId: number, nodeId: string): AnyCommand =>
  command("tool.result", { callId: `${executionId}.${nodeId}.1`, executionId, tenantId, nodeId, attempt: 1, tool: "echo", ok: true, output: valueFromJson({ v: nodeId }), durationMs: 1 });

/** The bus's messaging, with every event it publishes recorded as `type`, or `type nodeId` for a node's. */
function publishing(): { messaging: Messaging; published: string[] } {
  const published: string[] = [];
  const base = createMessaging(bus);
  const publishEvent: Messaging["publishEvent"] = async (type, init, key) => {
    const nodeId = (init as { nodeId?: string }).nodeId;
    published.push(nodeId ? `${type} ${nodeId}` : type);
    return base.publishEvent(type, init, key);
  };
  return { messaging: { ...base, publishEvent }, published };
}

/** Redis loses an execution's checkpoint (its history and forward keys too); it had one. */
async function loseCheckpoint(id: number): Promise<void> {
  expect(await redis.del(`${prefix}:checkpoint:{${id}}`, `${prefix}:checkpoint:{${id}}:history`, `${prefix}:checkpoint:{${id}}:fwd`)).toBeGreaterThanOrEqual(1);
}

/** Waits until run `id` is idle: its last step's records written and its outbox dropped from Redis (else a sweep sends it a continue). */
async function idle(id: number): Promise<void> {
  const deadline = Date.now() + 5_000;
  while ((await redis.hget(`${prefix}:checkpoint:{${id}}`, "u")) !== null) {
    if (Date.now() > deadline) throw new Error(`execution ${id} kept its outbox`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** The commands the recovery sweep of `x` sent for run `id`, read back from the stream, each handed to `x` as its consumer would (delivery 1); resolves with them. */
async function swept(x: Executor, id: number): Promise<AnyCommand[]> {
  const sent = (await commandsSentBy(bus, NATS, () => x.recover())).filter((c) => c.message.executionId === id);
  for (const c of sent) await x.handle(c, 1);
  return sent;
}

/** Runs `fn` with the call ids of every tool cancel sent meanwhile (each cancel's list). */
async function withCancels(fn: (cancelled: string[][]) => Promise<void>): Promise<void> {
  const cancelled: string[][] = [];
  const listener = await bus.serve(createMessaging(bus).subjects.toolCancel(), async (msg) => {
    cancelled.push(decode(ToolCancelSchema, msg.data).callIds);
    return { data: new Uint8Array() };
  }, { queue: `test_${randomBytes(3).toString("hex")}` });
  try {
    await fn(cancelled);
  } finally {
    await listener.stop();
  }
}

async function waitForCancel(cancelled: readonly string[][], callId: string): Promise<void> {
  const deadline = Date.now() + 5_000;
  while (!cancelled.some((ids) => ids.includes(callId)) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
}

/** The step number of each node's completed journal row. */
async function completedSteps(id: number): Promise<Record<string, number>> {
  const rows = await t.store.nodeExecutions.listById(id);
  return Object.fromEntries(rows.filter((r) => r.status === "completed").map((r) => [r.nodeId, r.stepVersion!]));
}

describe("tool results that queue up behind their execution's lock", () => {
  it("are applied in one step, and each handle() resolves with its records written", async () => {
    const id = await started();
    // All four in one delivery, handed over one after another as the consumer does (a few
    // microtasks apart): the first leads, and since the execution has other calls out it
    // takes the lock only once the others joined.
    const handled: Promise<void>[] = [];
    for (const n of ["a", "b", "c", "d"]) {
      handled.push(executor.handle(result(id, n)));
      for (let i = 0; i < 10; i++) await Promise.resolve();
    }
    const steps: Record<string, number>[] = [];
    for (const h of handled) {
      await h;
      steps.push(await completedSteps(id));
    }
    // One step for all four; the join after them.
    const last = steps.at(-1)!;
    expect(last.b).toBe(last.a);
    expect(last.c).toBe(last.a);
    expect(last.d).toBe(last.a);
    expect(last.j).toBeGreaterThan(last.d!);
    // When a call's handle() resolved, its own row was already written.
    ["a", "b", "c", "d"].forEach((n, i) => expect(steps[i]![n]).toBeDefined());
    const cp = (await checkpoints.get(id))!;
    expect(cp.state.status).toBe("completed");
    expect(cp.state.output).toEqual({ j: ["a", "b", "c", "d"] });
    expect((await t.store.executions.getById(id))!.status).toBe("completed");
  });

  it("run what each result made ready before the next is applied: an any-join sees only the first", async () => {
    // x holds the lock while b, c and d queue up; b leads their batch and makes j ready.
    const anyJoin = {
      start: "s",
      nodes: [
        { id: "s", type: "setVariable", config: { values: { x: 1 } } },
        ...["x", "b", "c", "d"].map((id) => ({ id, type: "tool", config: { tool: "echo" }, input: { v: id } })),
        { id: "j", type: "transform", config: { expression: "[b.v, c.v, d.v]" }, join: "any" },
      ],
      edges: [{ from: "s", to: "x" }, ...["b", "c", "d"].flatMap((id) => [{ from: "s", to: id }, { from: id, to: "j" }])],
      output: { j: "$.j" },
    };
    const wf = (await t.store.workflows.create(tenantId, { name: "any-join", definition: anyJoin as unknown as JsonObject })).id;
    const row = await t.store.executions.create(tenantId, { workflowId: wf, workflowVersion: 1, input: {} });
    const id = row.id;
    await executor.handle(command("execution.start", { executionId: id, tenantId, workflowId: wf, workflowVersion: 1, input: {} }));
    await Promise.all(["x", "b", "c", "d"].map((n) => executor.handle(result(id, n))));
    const s = await completedSteps(id);
    expect(s.b).toBe(s.d); // b, c and d were one batch
    expect(s.j).toBe(s.b);
    const cp = (await checkpoints.get(id))!;
    expect(cp.state.status).toBe("completed");
    expect(cp.state.output).toEqual({ j: ["b"] });
  });

  it("rebuilt from the journal after a batch, an any-join sees the same first arrival", async () => {
    // x holds the lock while b, then a, queue up: j takes b's value. Redis then loses the
    // checkpoint; the rebuild must apply b before a, as the live step did, though a started first.
    const def = {
      start: "s",
      nodes: [
        { id: "s", type: "setVariable", config: { values: { x: 1 } } },
        ...["x", "a", "b"].map((id) => ({ id, type: "tool", config: { tool: "echo" }, input: { v: id } })),
        { id: "j", type: "transform", config: { expression: "$exists(b) ? b.v : a.v" }, join: "any" },
        { id: "after", type: "tool", config: { tool: "echo" }, input: { v: "$.j" } },
      ],
      edges: [{ from: "s", to: "x" }, { from: "s", to: "a" }, { from: "s", to: "b" }, { from: "a", to: "j" }, { from: "b", to: "j" }, { from: "j", to: "after" }],
      output: { j: "$.j", after: "$.after.v" },
    };
    const wf = (await t.store.workflows.create(tenantId, { name: "any-join-replay", definition: def as unknown as JsonObject })).id;
    const id = (await t.store.executions.create(tenantId, { workflowId: wf, workflowVersion: 1, input: {} })).id;
    await executor.handle(command("execution.start", { executionId: id, tenantId, workflowId: wf, workflowVersion: 1 }));
    await Promise.all(["x", "b", "a"].map((n) => executor.handle(result(id, n))));
    const s = await completedSteps(id);
    expect(s.a).toBe(s.b); // one batch
    expect((await checkpoints.get(id))!.state.context.j).toBe("b");
    await redis.del(`${prefix}:checkpoint:{${id}}`, `${prefix}:checkpoint:{${id}}:history`, `${prefix}:checkpoint:{${id}}:fwd`);
    await executor.handle(command("tool.result", { callId: `${id}.after.1`, executionId: id, tenantId, nodeId: "after", attempt: 1, tool: "echo", ok: true, output: valueFromJson({ v: "b" }), durationMs: 1 }));
    const cp = (await checkpoints.get(id))!;
    expect({ status: cp.state.status, output: cp.state.output }).toEqual({ status: "completed", output: { j: "b", after: "b" } });
  });

  it("handled one after another, each result is its own step", async () => {
    const id = await started();
    for (const n of ["a", "b", "c", "d"]) await executor.handle(result(id, n));
    const s = await completedSteps(id);
    expect(new Set([s.a, s.b, s.c, s.d]).size).toBe(4);
    expect((await checkpoints.get(id))!.state.output).toEqual({ j: ["a", "b", "c", "d"] });
  });
});

describe("the outbox of an execution that waits", () => {
  it("is dropped from Redis in place once the step's records are written", async () => {
    const id = await started(); // s ran; a, b, c and d wait for their results
    const key = `${prefix}:checkpoint:{${id}}`;
    const cp = (await checkpoints.get(id))!;
    const historyBefore = (await checkpoints.history(id)).map((c) => c.version);
    expect(cp.state.outbox?.some((e) => e.kind === "callTool")).toBe(true);
    const deadline = Date.now() + 5_000;
    while ((await redis.hget(key, "u")) !== null && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect(await redis.hget(key, "u")).toBeNull();
    const after = (await checkpoints.get(id))!;
    expect(after.version).toBe(cp.version);
    expect(after.state.outbox).toBeUndefined();
    expect(after.state.nodes).toEqual(cp.state.nodes);
    expect((await checkpoints.history(id)).map((c) => c.version)).toEqual(historyBefore);
    // It goes on as before.
    for (const n of ["a", "b", "c", "d"]) await executor.handle(result(id, n));
    expect((await checkpoints.get(id))!.state.output).toEqual({ j: ["a", "b", "c", "d"] });
  });
});

describe("effects whose records were written while the next command was read", () => {
  it("are not carried out again: every call of a forEach goes out once", async () => {
    // A closed loop, as with a worker: each call is answered as soon as it is sent. The next
    // command is often read while the previous step's records are still being written, and
    // they are done by the time the command is applied; those effects are not a crash's.
    const sends = new Map<string, number>();
    const handled: Promise<void>[] = [];
    const base = createMessaging(bus);
    const messaging: Messaging = {
      ...base,
      callTool: async (init) => {
        sends.set(init.callId, (sends.get(init.callId) ?? 0) + 1);
        const sent = await base.callTool(init);
        const answer = command("tool.result", {
          callId: init.callId, executionId: init.executionId, tenantId, nodeId: init.nodeId, attempt: init.attempt, tool: init.tool, ok: true, output: valueFromJson({ ok: 1 }), durationMs: 1,
        });
        setImmediate(() => handled.push(x.handle(answer)));
        return sent;
      },
    };
    const x = createExecutor({ messaging, store: t.store, checkpoints, logger: createLogger("executor", "silent"), recoverOnStart: false, recoverEveryMs: 0 });
    const each = { nodes: [{ id: "each", type: "forEach", config: { items: "$.input.xs", tool: "echo", concurrency: 4 } }], edges: [] };
    const wf = (await t.store.workflows.create(tenantId, { name: "each-once", definition: each })).id;
    const xs = Array.from({ length: 60 }, (_, i) => i);
    const row = await t.store.executions.create(tenantId, { workflowId: wf, workflowVersion: 1, input: { xs } });
    await x.handle(command("execution.start", { executionId: row.id, tenantId, workflowId: wf, workflowVersion: 1 }));
    const deadline = Date.now() + 20_000;
    while ((await checkpoints.get(row.id))?.state.status !== "completed" && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    await Promise.all(handled);
    expect((await checkpoints.get(row.id))?.state.status).toBe("completed");
    expect(sends.size).toBe(60);
    expect([...sends].filter(([, n]) => n > 1)).toEqual([]);
  });
});

describe("effects carried out while their outbox waits to be dropped from Redis", () => {
  it("are not carried out again when an ignored command makes the executor read Redis", async () => {
    const sends = new Map<string, number>();
    const base = createMessaging(bus);
    const messaging: Messaging = {
      ...base,
      callTool: async (init) => {
        sends.set(init.callId, (sends.get(init.callId) ?? 0) + 1);
        return base.callTool(init);
      },
    };
    const x = createExecutor({ messaging, store: t.store, checkpoints, logger: createLogger("executor", "silent"), recoverOnStart: false, recoverEveryMs: 0 });
    const row = await t.store.executions.create(tenantId, { workflowId, workflowVersion: 1, input: {} });
    const id = row.id;
    await x.handle(command("execution.start", { executionId: id, tenantId, workflowId, workflowVersion: 1 }));
    // The step's records are written: its effects are done, and the cached state says so; Redis
    // still holds the outbox until the delayed drop.
    expect(await redis.hget(`${prefix}:checkpoint:{${id}}`, "u")).not.toBeNull();
    // A late answer of a call the run no longer waits for (here of s, which ran inline) is
    // ignored against the cached state, so the executor checks with Redis.
    await x.handle(command("tool.result", { callId: `${id}.s.1`, executionId: id, tenantId, nodeId: "s", attempt: 1, tool: "echo", ok: true, output: valueFromJson({}), durationMs: 1 })).catch(() => undefined);
    expect([...sends.keys()].sort()).toEqual(["a", "b", "c", "d"].map((n) => `${id}.${n}.1`));
    expect([...sends].filter(([, n]) => n > 1)).toEqual([]);
    for (const n of ["a", "b", "c", "d"]) await x.handle(result(id, n));
    expect((await checkpoints.get(id))!.state.output).toEqual({ j: ["a", "b", "c", "d"] });
    await x.stop?.();
  });
});

describe("a command that reaches a finished execution", () => {
  it("does not carry out its last step again, and leaves its checkpoint to expire", async () => {
    // A deadline timer, a node timeout or a result after a cancel often comes after the run
    // ended. Its last step's effects are carried out by then; they are not a crash's.
    const { messaging, published } = publishing();
    const ends = (): string[] => published.filter((e) => e === "execution.completed");
    const x = createExecutor({ messaging, store: t.store, checkpoints, logger: createLogger("executor", "silent"), recoverOnStart: false, recoverEveryMs: 0 });
    const row = await t.store.executions.create(tenantId, { workflowId, workflowVersion: 1, input: {} });
    const id = row.id;
    await x.handle(command("execution.start", { executionId: id, tenantId, workflowId, workflowVersion: 1 }));
    for (const n of ["a", "b", "c", "d"]) await x.handle(result(id, n));
    const key = `${prefix}:checkpoint:{${id}}`;
    const cp = (await checkpoints.get(id))!;
    expect(cp.state.status).toBe("completed");
    // Once its records are written, the finished run's outbox goes, in place.
    const deadline = Date.now() + 5_000;
    while ((await redis.hget(key, "u")) !== null && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(await redis.hget(key, "u")).toBeNull();
    expect(await redis.ttl(key)).toBeGreaterThan(0);
    // A late timer and a repeated result: ignored, nothing done again.
    await x.handle(command("execution.timer", { executionId: id, tenantId, timerId: "deadline", dueAt: new Date().toISOString() }));
    await x.handle(result(id, "a"));
    expect(ends()).toEqual(["execution.completed"]);
    expect((await checkpoints.get(id))!.version).toBe(cp.version);
    expect(await redis.ttl(key)).toBeGreaterThan(0);
    expect(await redis.ttl(`${prefix}:checkpoint:{${id}}:history`)).toBeGreaterThan(0);
  });
});

describe("a command that comes after the run's deadline, before its timer", () => {
  // Chaos round 5001 (--deadlines, docs/dev/chaos.md): the deadline timer's command comes back
  // only after the ack wait when the executor holding it died or stalled; meanwhile the run's
  // results and retry timers ran it on, and it completed past its deadline.
  it("fails the run for its deadline instead of applying the command; the timer then finds it ended", async () => {
    const { messaging, published } = publishing();
    const x = createExecutor({ messaging, store: t.store, checkpoints, logger: createLogger("executor", "silent"), recoverOnStart: false, recoverEveryMs: 0, clock: skewedClock });
    const row = await t.store.executions.create(tenantId, { workflowId, workflowVersion: 1, input: {} });
    const id = row.id;
    const dueAt = new Date(Date.now() + 60_000).toISOString();
    await x.handle(command("execution.start", { executionId: id, tenantId, workflowId, workflowVersion: 1, deadline: dueAt }));
    await x.handle(result(id, "a"));
    expect((await checkpoints.get(id))!.state.status).toBe("running");
    // b answers two minutes later: its timer, sent at the start, has not come.
    skewMs = 120_000;
    published.length = 0;
    await x.handle(result(id, "b"));
    const after = await t.store.executions.getById(id);
    expect([after!.status, after!.error?.split(":")[0]]).toEqual(["failed", "BATON_DEADLINE_EXCEEDED"]);
    const rows = await t.store.nodeExecutions.listById(id);
    // b's answer was not taken, and j never started.
    expect(rows.map((r) => `${r.nodeId}:${r.status}`).sort()).toEqual(["a:completed", "b:failed", "c:failed", "d:failed", "s:completed"]);
    expect(published).toEqual(["node.failed b", "node.failed c", "node.failed d", "execution.failed"]);
    // The timer comes at last: the run has ended, nothing more is written or told.
    const version = (await checkpoints.get(id))!.version;
    await x.handle(command("execution.timer", { executionId: id, tenantId, timerId: "deadline", dueAt }));
    expect(published).toHaveLength(4);
    expect((await checkpoints.get(id))!.version).toBe(version);
  });
});

describe("the records of consecutive steps", () => {
  /**
   * An executor whose event publishes wait for `gate` (when set), logging rows and events in the
   * order they go out; `sent`: each event publish as `type node message-id`; `commands`: each
   * command it sends as `name execution-id`.
   */
  function gated(): {
    executor: Executor; log: string[]; sent: string[]; commands: string[]; written: Set<string>;
    hold(): { release(): void; fail(): void }; holdRows(nodeId: string): { release(): void; fail(): void }; holdAfterRows(nodeId: string): { release(): void };
    /** How often the executor read a journal floor (before the events of slow records). */
    floorReads(): number;
  } {
    const log: string[] = [];
    const sent: string[] = [];
    const commands: string[] = [];
    /** `node:status` of the entries whose statement has returned (the log has a statement when it starts). */
    const written = new Set<string>();
    let gate: Promise<void> | undefined;
    const heldRows = new Map<string, Promise<void>>();
    const heldAfterRows = new Map<string, Promise<void>>();
    const messaging = createMessaging(bus);
    const publishEvent: Messaging["publishEvent"] = async (type, init, key) => {
      log.push(`event ${type} ${(init as { nodeId?: string }).nodeId ?? ""}`.trim());
      sent.push(`${type} ${(init as { nodeId?: string }).nodeId ?? ""} ${key ?? ""}`);
      if (gate) await gate;
      return messaging.publishEvent(type, init, key);
    };
    const rows = t.store.nodeExecutions;
    let floorReads = 0;
    const store: Store = {
      ...t.store,
      executions: {
        ...t.store.executions,
        journalFloor: (...args) => (floorReads++, t.store.executions.journalFloor(...args)),
      },
      nodeExecutions: {
        ...rows,
        recordSteps: async (batch) => {
          const entries = batch.entries.map((e) => `${e.nodeId}:${e.status}`);
          log.push(`rows ${entries.join(" ")}`);
          // The first statement with the node's rows (its own step's) is held; later ones that
          // carry them again, as the rows of an earlier link not written yet, are not.
          const heldNode = batch.entries.map((e) => e.nodeId).find((n) => heldRows.has(n));
          const held = heldNode === undefined ? undefined : heldRows.get(heldNode);
          if (heldNode !== undefined) heldRows.delete(heldNode);
          if (held) await held;
          const r = await rows.recordSteps(batch);
          for (const e of entries) written.add(e);
          // Written, and the executor stalls before it learns so.
          const after = batch.entries.map((e) => heldAfterRows.get(e.nodeId)).find((h) => h !== undefined);
          if (after) await after;
          return r;
        },
      },
    };
    const sendCommand: Messaging["sendCommand"] = (name, init, key) => {
      commands.push(`${name} ${(init as { executionId: number }).executionId}`);
      return messaging.sendCommand(name, init, key);
    };
    const x = createExecutor({ messaging: { ...messaging, publishEvent, sendCommand }, store, checkpoints, logger: createLogger("executor", "silent"), recoverOnStart: false, recoverEveryMs: 0, clock: skewedClock });
    return {
      executor: x,
      log,
      sent,
      commands,
      written,
      hold() {
        let release!: () => void;
        let fail!: (err: Error) => void;
        gate = new Promise<void>((res, rej) => ((release = res), (fail = rej)));
        gate.catch(() => undefined);
        return { release: () => release(), fail: () => fail(new Error("the events stream is gone")) };
      },
      floorReads: () => floorReads,
      holdAfterRows(nodeId) {
        let release!: () => void;
        heldAfterRows.set(nodeId, new Promise<void>((res) => (release = res)));
        return {
          release: () => {
            heldAfterRows.delete(nodeId);
            release();
          },
        };
      },
      holdRows(nodeId) {
        let release!: () => void;
        let fail!: (err: Error) => void;
        const held = new Promise<void>((res, rej) => ((release = res), (fail = rej)));
        held.catch(() => undefined);
        heldRows.set(nodeId, held);
        return {
          release: () => {
            heldRows.delete(nodeId);
            release();
          },
          fail: () => {
            heldRows.delete(nodeId);
            fail(new Error("the database went away"));
          },
        };
      },
    };
  }

  async function until(check: () => boolean | Promise<boolean>, what: string): Promise<void> {
    const deadline = Date.now() + 5_000;
    while (!(await check())) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 10));
    }
  }

  /** A gated executor with an execution of the fan started (s ran; a, b, c and d wait), its log cleared. */
  async function startedGated(): Promise<{ g: ReturnType<typeof gated>; id: number }> {
    const g = gated();
    const row = await t.store.executions.create(tenantId, { workflowId, workflowVersion: 1, input: {} });
    await g.executor.handle(command("execution.start", { executionId: row.id, tenantId, workflowId, workflowVersion: 1, input: {} }));
    g.log.length = 0;
    return { g, id: row.id };
  }

  /** a's result, its journal statement started and held until released or failed. */
  async function aHeld(g: ReturnType<typeof gated>, id: number): Promise<{ a: Promise<void>; heldA: { release(): void; fail(): void } }> {
    const heldA = g.holdRows("a");
    const a = g.executor.handle(result(id, "a"));
    await until(() => g.log.includes("rows a:completed"), "a's statement");
    return { a, heldA };
  }

  /**
   * A stalled replica: a's step checkpointed, its statement held. Redis then loses the
   * checkpoint, and another replica gets a's result again, rebuilds the run from the journal
   * (a still running there) and applies it.
   */
  async function rebuiltBehindStall(): Promise<{ stale: ReturnType<typeof gated>; other: ReturnType<typeof gated>; id: number; staleA: Promise<void>; heldA: { release(): void; fail(): void } }> {
    const { g: stale, id } = await startedGated();
    const { a: staleA, heldA } = await aHeld(stale, id);
    await loseCheckpoint(id);
    const other = gated();
    await other.executor.handle(result(id, "a"), 2);
    return { stale, other, id, staleA, heldA };
  }

  /** a's result, its event held unconfirmed; then b's result, up to its rows being written. */
  async function twoSteps(): Promise<{ g: ReturnType<typeof gated>; id: number; a: Promise<void>; b: Promise<void>; gate: { release(): void; fail(): void } }> {
    const { g, id } = await startedGated();
    const gate = g.hold();
    const a = g.executor.handle(result(id, "a"));
    await until(() => g.log.includes("event node.completed a"), "a's event");
    const b = g.executor.handle(result(id, "b"));
    await until(() => g.log.includes("rows b:completed"), "b's rows");
    return { g, id, a, b, gate };
  }

  it("writes a step's rows while the previous step's events are confirmed, and publishes its events after them", async () => {
    const { g, a, b, gate } = await twoSteps();
    // b's rows are written while a's event is still unconfirmed; b's event waits for it.
    expect(g.log).not.toContain("event node.completed b");
    gate.release();
    await Promise.all([a, b]);
    expect(g.log).toEqual(["rows a:completed", "event node.completed a", "rows b:completed", "event node.completed b"]);
  });

  it("overlaps the statements of steps that leave the execution row alone; the last step's waits for every row", async () => {
    const { g, id } = await startedGated();
    // a's statement is running (held) when b's and c's results come: theirs start at once,
    // b's carrying a's rows again (not known written yet); c's starts once b's has landed.
    const { a, heldA } = await aHeld(g, id);
    const b = g.executor.handle(result(id, "b"));
    await until(() => g.log.includes("rows a:completed b:completed"), "b's statement");
    await until(() => g.written.has("b:completed"), "b's rows");
    const c = g.executor.handle(result(id, "c"));
    await until(() => g.log.includes("rows c:completed"), "c's statement");
    const settled = new Set<string>();
    for (const [n, p] of [["b", b], ["c", c]] as const) void p.then(() => settled.add(n), () => settled.add(n));
    // a's, b's and c's rows are written: b's and c's statements ran while a's was held.
    await until(async () => (await t.store.nodeExecutions.listById(id)).filter((r) => r.status === "completed").length === 4, "a's, b's and c's rows");
    // Written, but not acknowledged, and not announced before a's rows and event.
    expect(settled.size).toBe(0);
    expect(g.log.filter((l) => l.startsWith("event"))).toEqual([]);
    // d's answer: d's step leaves the row alone, its statement goes; the step after it runs j
    // and completes the execution, so its statement changes the row and waits for a's.
    const d = g.executor.handle(result(id, "d"));
    await until(() => g.log.includes("rows d:completed"), "d's statement");
    await new Promise((r) => setTimeout(r, 100));
    expect(g.log.some((l) => l.includes("j:completed"))).toBe(false);
    expect((await t.store.executions.getById(id))!.status).toBe("running");
    heldA.release();
    await Promise.all([a, b, c, d]);
    expect(g.log.filter((l) => l.startsWith("rows"))).toEqual(["rows a:completed", "rows a:completed b:completed", "rows c:completed", "rows d:completed", "rows j:running j:completed"]);
    // The events in step order, each step's after its rows.
    expect(g.log.filter((l) => l.startsWith("event"))).toEqual([
      "event node.completed a", "event node.completed b", "event node.completed c", "event node.completed d",
      "event node.started j", "event node.completed j", "event execution.completed",
    ]);
    expect(g.log.indexOf("event node.started j")).toBeGreaterThan(g.log.indexOf("rows j:running j:completed"));
    const journal = await t.store.nodeExecutions.listById(id);
    expect(journal.map((r) => `${r.nodeId}:${r.status}`)).toEqual(["s:completed", "a:completed", "b:completed", "c:completed", "d:completed", "j:completed"]);
    expect(journal.find((r) => r.nodeId === "a")).toMatchObject({ input: { v: "a" }, output: { v: "a" } });
    expect((await t.store.executions.getById(id))!.status).toBe("completed");
  });

  it("publishes together the events of steps whose rows came in while earlier events were confirmed", async () => {
    const { g, id, a, b, gate } = await twoSteps(); // a's event unconfirmed, b's rows written
    const c = g.executor.handle(result(id, "c"));
    // b's and c's statements returned (not only started): both links' rows are in.
    await until(() => g.written.has("b:completed") && g.written.has("c:completed"), "b's and c's rows");
    // Once a's event is confirmed, b's and c's go out at once: c's does not wait for b's.
    const second = g.hold();
    gate.release();
    await until(() => g.log.includes("event node.completed c"), "c's event");
    expect(g.log.filter((l) => l.startsWith("event"))).toEqual(["event node.completed a", "event node.completed b", "event node.completed c"]);
    second.release();
    await Promise.all([a, b, c]);
  });

  it("publishes no later step's events when an earlier step's rows fail, and the redelivered command redoes them", async () => {
    const { g, id } = await startedGated();
    const { a, heldA } = await aHeld(g, id);
    const b = g.executor.handle(result(id, "b"));
    await until(async () => (await t.store.nodeExecutions.listById(id)).some((r) => r.nodeId === "b" && r.status === "completed"), "b's rows");
    // b's statement carried a's rows (not known written then): the journal has no gap, should
    // Redis lose the checkpoint that holds a's step before it is redone (chaos seed 5006).
    expect((await t.store.nodeExecutions.listById(id)).find((r) => r.nodeId === "a")).toMatchObject({ status: "completed", output: { v: "a" } });
    heldA.fail();
    // b's rows are written, but its event must not go out before a's, which now never will.
    await expect(a).rejects.toMatchObject({ code: "BATON_EXECUTOR_EFFECTS_FAILED" });
    await expect(b).rejects.toMatchObject({ code: "BATON_EXECUTOR_EFFECTS_FAILED" });
    expect(g.log.filter((l) => l.startsWith("event"))).toEqual([]);
    // a's result delivered again: the checkpoint still carries both steps' effects; they are redone in order.
    await g.executor.handle(result(id, "a"), 2);
    expect(g.log.filter((l) => l.startsWith("event"))).toEqual(["event node.completed a", "event node.completed b"]);
    const journal = await t.store.nodeExecutions.listById(id);
    expect(journal.filter((r) => r.status === "completed").map((r) => r.nodeId).sort()).toEqual(["a", "b", "s"]);
    expect(journal.find((r) => r.nodeId === "a")).toMatchObject({ input: { v: "a" }, output: { v: "a" } });
    // It goes on.
    for (const n of ["c", "d"]) await g.executor.handle(result(id, n));
    expect((await checkpoints.get(id))!.state.output).toEqual({ j: ["a", "b", "c", "d"] });
  });

  // Chaos seed 603 (docs/dev/chaos.md): the events of a step whose checkpoint was written before
  // Redis lost it, and whose records land only after another replica rebuilt the run from a
  // journal without them (its executor stalled in between), went out twice: once from the stale
  // step, once from the rebuilt state, which takes the step again. The rebuild now fences the
  // journal (a floor on the execution row) and the stale step's records are refused.
  it("publishes a step's events once when its records land after another replica rebuilt the run without them", async () => {
    // a's step stalled before its statement; another replica rebuilt the run and took a's result.
    const { stale, other, id, staleA, heldA } = await rebuiltBehindStall();
    expect(other.log).toContain("event node.completed a");
    // The stalled executor wakes: its statement lands.
    heldA.release();
    const refused = await staleA.then(() => undefined, (err: unknown) => err);
    const completedA = [...stale.log, ...other.log].filter((l) => l === "event node.completed a");
    expect(completedA).toHaveLength(1);
    // Its records were refused: the journal was fenced by the rebuild.
    expect(refused).toMatchObject({ code: "BATON_EXECUTOR_EFFECTS_FAILED", cause: { code: "BATON_STORE_FENCED" } });
    expect(stale.log.filter((l) => l.startsWith("event"))).toEqual([]);
    // a's result delivered again to the stalled executor: applied to the rebuilt checkpoint
    // (already taken there), not redone from its own; the run goes on from there. (The rebuilt
    // checkpoint's outbox may still be in Redis, and is then carried out again under the same
    // message ids, which the stream drops: one node.completed a in the stream, by its id.)
    const completedAIds = (): Set<string> => new Set([...stale.sent, ...other.sent].filter((l) => l.startsWith("node.completed a ")));
    expect(completedAIds().size).toBe(1);
    await stale.executor.handle(result(id, "a"), 3);
    for (const n of ["b", "c", "d"]) await stale.executor.handle(result(id, n));
    expect((await checkpoints.get(id))!.state.output).toEqual({ j: ["a", "b", "c", "d"] });
    expect(completedAIds().size).toBe(1);
    const journal = await t.store.nodeExecutions.listById(id);
    expect(journal.filter((r) => r.status === "completed").map((r) => r.nodeId).sort()).toEqual(["a", "b", "c", "d", "j", "s"]);
  });

  // Chaos seed 810 (docs/dev/chaos.md): the same with a journal still empty. The start's
  // statement (and a's, behind it) stalled; Redis lost the checkpoint; another replica took the
  // start again and, finding no rows, applied it afresh, numbered from 1 again and without a
  // fence. Two histories under the same step numbers: the stalled one's `node.completed a` went
  // out under the id the fresh one then gave `node.completed b`, which the stream dropped as a
  // duplicate, and a's completion went out again under the fresh history's own number.
  it("publishes each step's events once when another replica starts the run afresh while its first records are stalled", async () => {
    const stale = gated();
    const row = await t.store.executions.create(tenantId, { workflowId, workflowVersion: 1, input: {} });
    const start = command("execution.start", { executionId: row.id, tenantId, workflowId, workflowVersion: 1, input: {} });
    const id = row.id;
    // The start's statement is held (the executor stalls), and a's step queues behind it.
    const heldS = stale.holdRows("s");
    const staleStart = stale.executor.handle(start);
    await until(() => stale.log.some((l) => l.startsWith("rows ") && l.includes("s:")), "the start's statement");
    const staleA = stale.executor.handle(result(id, "a"));
    await until(async () => (await checkpoints.get(id))?.state.nodes.a?.status === "completed", "a's checkpoint");
    expect(await t.store.nodeExecutions.listById(id)).toEqual([]);
    // Redis loses the checkpoint; the start, delivered again, reaches another replica: the row is
    // running, the journal empty, so the start is applied afresh.
    await loseCheckpoint(id);
    const other = gated();
    await other.executor.handle(start, 2);
    // The stalled executor wakes: its statements land after the fresh start.
    heldS.release();
    const outcomes = await Promise.all([staleStart, staleA].map((p) => p.then(() => undefined, (err: unknown) => err)));
    // The fresh history takes b's result, then a's (delivered again: the stale step's was not
    // acknowledged), and the rest.
    for (const n of ["b", "a", "c", "d"]) await other.executor.handle(result(id, n), 2);
    expect((await checkpoints.get(id))!.state.output).toEqual({ j: ["a", "b", "c", "d"] });
    // No message id names two different events (the stream keeps the first and drops the other).
    const byId = new Map<string, Set<string>>();
    for (const l of [...stale.sent, ...other.sent]) {
      const [type, node, key] = l.split(" ");
      byId.set(key!, (byId.get(key!) ?? new Set()).add(`${type} ${node}`));
    }
    expect([...byId].filter(([, events]) => events.size > 1)).toEqual([]);
    // The stalled history's records were refused (the fresh start fenced the journal), and none
    // of its events went out.
    expect(outcomes).toEqual([
      expect.objectContaining({ code: "BATON_EXECUTOR_EFFECTS_FAILED", cause: expect.objectContaining({ code: "BATON_STORE_FENCED" }) }),
      expect.objectContaining({ code: "BATON_EXECUTOR_EFFECTS_FAILED" }),
    ]);
    expect(stale.log.filter((l) => l.startsWith("event"))).toEqual([]);
    const journal = await t.store.nodeExecutions.listById(id);
    expect(journal.filter((r) => r.status === "completed").map((r) => r.nodeId).sort()).toEqual(["a", "b", "c", "d", "j", "s"]);
    expect((await t.store.executions.getById(id))!.status).toBe("completed");
  });

  // Chaos seed 831 (docs/dev/chaos.md): the stalled executor of the test above got the next
  // result while its refused statement was still in flight. It read the rebuilt checkpoint from
  // Redis and took the step on it, but into the pipe that still held its own lost history's step:
  // the rebuilt checkpoint carried that step, and every redo of it (any replica's, every
  // delivery) was refused by the journal's floor; the run could not go on.
  it("goes on from the rebuilt checkpoint when it takes a step there while its refused records are still in flight", async () => {
    const { stale, other, id, staleA, heldA } = await rebuiltBehindStall();
    await until(async () => !(await checkpoints.get(id))!.state.outbox?.length, "the rebuilt checkpoint's outbox dropped");
    // b's result reaches the stalled executor, its a statement still held: b's step is taken on
    // the rebuilt checkpoint (its cached one lost the compare-and-set).
    const staleB = stale.executor.handle(result(id, "b"));
    await until(() => stale.log.some((l) => l.startsWith("rows ") && l.includes("b:completed")), "b's statement");
    heldA.release();
    const [refusedA, b] = await Promise.all([staleA, staleB].map((p) => p.then(() => undefined, (err: unknown) => err)));
    expect(refusedA).toMatchObject({ code: "BATON_EXECUTOR_EFFECTS_FAILED", cause: { code: "BATON_STORE_FENCED" } });
    // The rebuilt checkpoint carries nothing of the lost history: b's step is written and
    // published (on its first delivery, or on the next), and the run goes on on either replica.
    if (b !== undefined) await stale.executor.handle(result(id, "b"), 2);
    expect((await checkpoints.get(id))!.state.carried ?? []).toEqual([]);
    await other.executor.handle(result(id, "c"));
    await stale.executor.handle(result(id, "d"));
    expect((await checkpoints.get(id))!.state.output).toEqual({ j: ["a", "b", "c", "d"] });
    expect((await t.store.executions.getById(id))!.status).toBe("completed");
    // Each node's completion went out under one message id, past the floor.
    const sent = [...stale.sent, ...other.sent];
    for (const n of ["a", "b", "c", "d"]) expect(new Set(sent.filter((l) => l.startsWith(`node.completed ${n} `)))).toHaveProperty("size", 1);
    const steps = await completedSteps(id);
    for (const n of ["a", "b", "c", "d"]) expect(steps[n]).toBeGreaterThan(1000);
  });

  /**
   * Redis loses a started run's checkpoint; replica `g` rebuilds the run on a's result and applies
   * it; then another rebuild fences the journal past that checkpoint's numbers (`floor`) and loses
   * the compare-and-set, leaving Redis with `below`.
   */
  async function rebuiltThenFenced(): Promise<{ id: number; g: ReturnType<typeof gated>; floor: number; below: NonNullable<Awaited<ReturnType<typeof checkpoints.get>>> }> {
    const { id } = await startedGated();
    await loseCheckpoint(id);
    const g = gated();
    await g.executor.handle(result(id, "a"), 2);
    const floor = await t.store.executions.fenceJournal(id, tenantId, 1000);
    return { id, g, floor, below: (await checkpoints.get(id))! };
  }

  it("rebuilds again, in its place, a checkpoint numbered below the journal's floor (two rebuilds raced), rather than writing on it", async () => {
    const { id, g, floor, below: won } = await rebuiltThenFenced();
    expect(won.version + (won.state.versionBase ?? 0)).toBeLessThan(floor);
    // b's step on that checkpoint: refused, and never announced.
    await expect(g.executor.handle(result(id, "b"))).rejects.toMatchObject({ code: "BATON_EXECUTOR_EFFECTS_FAILED", cause: { code: "BATON_STORE_FENCED" } });
    expect(g.sent.filter((l) => l.startsWith("node.completed b "))).toEqual([]);
    // Delivered again at once: the rebuild that fenced is left a few seconds to write its
    // checkpoint (it may still be reading the journal), and the floor stays.
    await expect(g.executor.handle(result(id, "b"), 2)).rejects.toMatchObject({ code: "BATON_EXECUTOR_REBUILD_AWAITED", retryable: true });
    expect(await t.store.executions.journalFloor(id, tenantId)).toBe(floor);
    // None came (that rebuild lost the compare-and-set): delivered again later, the checkpoint is
    // rebuilt in its place, numbered past the floor, and b's result applied to it; the run goes on.
    skewMs = 5_000;
    await g.executor.handle(result(id, "b"), 3);
    const rebuilt = (await checkpoints.get(id))!;
    expect(rebuilt.version + (rebuilt.state.versionBase ?? 0)).toBeGreaterThan(floor);
    for (const n of ["c", "d"]) await g.executor.handle(result(id, n));
    expect((await checkpoints.get(id))!.state.output).toEqual({ j: ["a", "b", "c", "d"] });
    expect(new Set(g.sent.filter((l) => l.startsWith("node.completed b "))).size).toBe(1);
    const steps = await completedSteps(id);
    expect(steps.b).toBeGreaterThan(floor);
    expect((await t.store.executions.getById(id))!.status).toBe("completed");
  });

  // Chaos seed 1013 (docs/dev/chaos.md): that rebuild in place numbered its steps at the floor
  // plus the old checkpoint's version (past 1 000 after a rebuild), so past the fence of the next
  // rebuild too, which leaves 1 000 above the steps recorded. That fence refused none of the
  // state it replaced, and both states had their steps written and told.
  it("numbers the steps of a checkpoint rebuilt in its place from just past the floor, so that the next rebuild's fence refuses them", async () => {
    const { id, g, floor, below } = await rebuiltThenFenced();
    expect(below.version).toBeGreaterThan(1000);
    // Refused below the floor; past the wait, rebuilt in its place on a command with nothing to do.
    await expect(g.executor.handle(result(id, "b"))).rejects.toMatchObject({ cause: { code: "BATON_STORE_FENCED" } });
    skewMs = 5_000;
    await g.executor.handle(command("execution.continue", { executionId: id, tenantId }), 2);
    const rebuilt = (await checkpoints.get(id))!;
    expect(rebuilt.version).toBeGreaterThan(below.version);
    // Its own fence raised the floor again; its steps go on from just past it.
    const own = (await t.store.executions.journalFloor(id, tenantId))!;
    expect(own).toBeGreaterThan(floor);
    const step = rebuilt.version + (rebuilt.state.versionBase ?? 0);
    expect(step).toBeGreaterThan(own);
    expect(step).toBeLessThanOrEqual(own + 2);
    // Another rebuild fences the journal: b's step on the state rebuilt in place is refused.
    const next = await t.store.executions.fenceJournal(id, tenantId, 1000);
    expect(next).toBeGreaterThan(step);
    await expect(g.executor.handle(result(id, "b"), 3)).rejects.toMatchObject({ cause: { code: "BATON_STORE_FENCED" } });
    expect(g.sent.filter((l) => l.startsWith("node.completed b "))).toEqual([]);
  });

  // Chaos seed 841 (docs/dev/chaos.md): an executor wrote a step's rows and died before that
  // step's events went out; Redis then lost the checkpoint, and with it the outbox holding them.
  // The rebuild took every step whose rows are in the journal as announced, so they never went
  // out. It now reads the last step the run published (its events' message ids) and tells the
  // steps past it whose rows it finds, once; the steps before are not told again.
  it("publishes, once, the events of a step whose rows were written and whose executor died before its events, after Redis lost the checkpoint", async () => {
    const { g: dead, id } = await startedGated();
    const startEvents = dead.sent.length;
    expect(startEvents).toBeGreaterThan(0);
    // a's step: its rows are written, its events never go out (the executor dies there).
    const gate = dead.hold();
    const a = dead.executor.handle(result(id, "a"));
    await until(() => dead.written.has("a:completed") && dead.log.includes("event node.completed a"), "a's rows, then its event held");
    gate.fail();
    await expect(a).rejects.toMatchObject({ code: "BATON_EXECUTOR_EFFECTS_FAILED" });
    const aStep = (await completedSteps(id)).a!;
    // Redis loses the checkpoint (and the outbox with a's events); b's result reaches another
    // replica, which rebuilds the run from the journal.
    await loseCheckpoint(id);
    const other = gated();
    await other.executor.handle(result(id, "b"), 2);
    // a's completion goes out, once, before b's; nothing of the start step again.
    const told = other.sent.map((l) => l.split(" ").slice(0, 2).join(" "));
    expect(told.filter((l) => l === "node.completed a")).toHaveLength(1);
    expect(told.indexOf("node.completed a")).toBeLessThan(told.indexOf("node.completed b"));
    expect(told.filter((l) => l.startsWith("execution.started") || l.endsWith(" s"))).toEqual([]);
    // Its rows were not written again.
    expect((await completedSteps(id)).a).toBe(aStep);
    for (const n of ["c", "d"]) await other.executor.handle(result(id, n));
    expect((await t.store.executions.getById(id))!.status).toBe("completed");
    expect(other.sent.filter((l) => l.startsWith("node.completed a "))).toHaveLength(1);
    // On the stream: one node.completed a for the run.
    const ac = new AbortController();
    const seen: string[] = [];
    const reading = bus.replay(`${prefix}.evt.node.completed.${tenantId}.${id}`, { signal: ac.signal }, (m) => void seen.push(m.meta.idempotencyKey ?? ""));
    await until(() => seen.length >= 5, "the run's node.completed events");
    await new Promise((r) => setTimeout(r, 200));
    ac.abort();
    await reading;
    const completed = new Set(other.sent.filter((l) => l.startsWith("node.completed a ")).map((l) => l.split(" ")[2]));
    expect(seen.filter((k) => completed.has(k))).toHaveLength(1);
    expect(seen).toHaveLength(6);
  });

  // Chaos seed 1116 (docs/dev/chaos.md): a rebuild took the last event of each kind on the stream
  // as that kind's highest step told. A stale history's copy of an earlier step, published after a
  // later step's events, then put the highest told below steps already told, and the rebuild told
  // them again. Before it tells steps, it now reads every step event of the run.
  it("takes each kind's highest step told, not its last, when a late copy of an earlier step came after a later step's events", async () => {
    const { g, id } = await startedGated();
    await g.executor.handle(result(id, "a"));
    await g.executor.handle(result(id, "b"));
    const keyOf = (node: string): string => g.sent.find((l) => l.startsWith(`node.completed ${node} `))!.split(" ")[2]!;
    const [aStep, bStep] = [keyOf("a"), keyOf("b")].map((k) => Number(k.split(":")[2]));
    expect(aStep).toBeLessThan(bStep!);
    // A copy of a's completion under a's step and an index of its own (a stale history's telling), now the last of its kind.
    const subject = createMessaging(bus).subjects.event("node.completed", tenantId, id);
    await bus.publish(subject, new Uint8Array(), { tenantId, type: "node.completed", idempotencyKey: `evt:${id}:${aStep}:7` });
    expect((await bus.lastPerSubject(subject)).map((m) => m.meta.idempotencyKey)).toEqual([`evt:${id}:${aStep}:7`]);
    // Redis loses the checkpoint; c's result reaches another replica, which rebuilds the run.
    await loseCheckpoint(id);
    const other = gated();
    await other.executor.handle(result(id, "c"), 2);
    const told = other.sent.map((l) => l.split(" ").slice(0, 2).join(" ").trim());
    expect(told).toEqual(["node.completed c"]);
    await other.executor.handle(result(id, "d"));
    expect((await t.store.executions.getById(id))!.status).toBe("completed");
  });

  // Chaos seed 977 (docs/dev/chaos.md): the same, but the executor was stalled, not dead, in the
  // publish of the step's events (past its check of the journal's floor): the rebuild told them,
  // then the executor woke and published its own. The rebuild now tells them under the ids their
  // step gave them, and the stream keeps one of each.
  it("tells the events of a step whose executor stalled in their publish under that step's ids, so that its late copies are dropped", async () => {
    const { g: stalled, id } = await startedGated();
    const gate = stalled.hold();
    const a = stalled.executor.handle(result(id, "a"));
    await until(() => stalled.written.has("a:completed") && stalled.log.includes("event node.completed a"), "a's rows, then its events held");
    await loseCheckpoint(id);
    const other = gated();
    await other.executor.handle(result(id, "b"), 2);
    const byRebuild = other.sent.find((l) => l.startsWith("node.completed a "))!.split(" ")[2];
    // The executor wakes and publishes a's events.
    gate.release();
    await a.catch(() => undefined);
    const byStalled = stalled.sent.find((l) => l.startsWith("node.completed a "))!.split(" ")[2];
    expect(byRebuild).toBe(byStalled);
    // On the stream: a's completion once (and b's), though both executors published it.
    const ac = new AbortController();
    const seen: string[] = [];
    const reading = bus.replay(`${prefix}.evt.node.completed.${tenantId}.${id}`, { signal: ac.signal }, (m) => void seen.push((JSON.parse(new TextDecoder().decode(m.data)) as { node_id: string }).node_id));
    await until(() => seen.length >= 3, "the run's node.completed events");
    await new Promise((r) => setTimeout(r, 200));
    ac.abort();
    await reading;
    expect(seen.sort()).toEqual(["a", "b", "s"]);
  });

  // Chaos seed 1147 (docs/dev/chaos.md): the start's rows written and its executor stalled in the
  // publish of its events; another replica's step wrote a's row again (completed), and it died
  // before its events (here its rows are written directly); Redis lost the checkpoint. The rebuild found
  // no event of the run and told the start under ids of its own, since no row said which step
  // began a; the stalled executor then published its own. The journal now keeps the step that
  // began each attempt (`beganStep`), and the rebuild tells the start under the start's ids.
  it("tells a start whose row the next step wrote again under the start's ids, so that its stalled executor's late copies are dropped", async () => {
    await streamKeepsOverASecond();
    const first = gated();
    const gate = first.hold();
    const row = await t.store.executions.create(tenantId, { workflowId, workflowVersion: 1, input: {} });
    const id = row.id;
    const start = first.executor.handle(command("execution.start", { executionId: id, tenantId, workflowId, workflowVersion: 1, input: {} }));
    await until(() => first.written.has("a:running") && first.log.includes("event execution.started"), "the start's rows, then its events held");
    // a's step as the other replica wrote it (step 2), its events never out.
    await t.store.nodeExecutions.recordSteps({ entries: [{ tenantId, executionId: id, nodeId: "a", nodeType: "tool", attempt: 1, status: "completed", output: { v: "a" }, durationMs: 1, completedAt: new Date(), stepVersion: 2 }], executions: [] });
    expect((await t.store.nodeExecutions.listById(id)).find((r) => r.nodeId === "a")).toMatchObject({ status: "completed", beganStep: 1 });
    await loseCheckpoint(id);
    const third = gated();
    await third.executor.handle(result(id, "b"), 2);
    expect(third.sent.filter((l) => l.startsWith("execution.started"))).toHaveLength(1);
    // The stalled executor wakes and publishes the start's events.
    gate.release();
    await start.catch(() => undefined);
    expect(first.sent.filter((l) => l.startsWith("execution.started"))).toHaveLength(1);
    for (const n of ["c", "d"]) await third.executor.handle(result(id, n));
    expect((await t.store.executions.getById(id))!.status).toBe("completed");
    // On the stream: the start once, and each node begun once.
    const ac = new AbortController();
    const seen: string[] = [];
    const subjects = (["execution.started", "node.started", "execution.completed"] as const).map((type) => createMessaging(bus).subjects.event(type, tenantId, id));
    const reading = bus.replay(subjects, { signal: ac.signal }, (m) => void seen.push(`${createMessaging(bus).subjects.parseEvent(m.subject)?.type} ${(JSON.parse(new TextDecoder().decode(m.data)) as { node_id?: string }).node_id ?? ""}`.trim()));
    await until(() => seen.includes("execution.completed"), "the run's end on the stream");
    await new Promise((r) => setTimeout(r, 200));
    ac.abort();
    await reading;
    expect(seen.sort()).toEqual(["execution.completed", "execution.started", "node.started a", "node.started b", "node.started c", "node.started d", "node.started j", "node.started s"]);
  });

  // Chaos seeds 831 and 832 (docs/dev/chaos.md): a run's timeline began after its start (no
  // `execution.started`, no `node.started` of the first node) though the journal had the start's
  // rows: the start's executor died between its rows and its events, Redis lost the checkpoint,
  // and the rebuild, finding no event of the run on the stream, took that as "not known" and told
  // nothing. When the stream still holds messages from before the run, none was published.
  it("publishes the start's events when no event of the run went out, its rows written, after Redis lost the checkpoint", async () => {
    await streamKeepsOverASecond();
    const dead = gated();
    const row = await t.store.executions.create(tenantId, { workflowId, workflowVersion: 1, input: {} });
    const id = row.id;
    const gate = dead.hold();
    const start = dead.executor.handle(command("execution.start", { executionId: id, tenantId, workflowId, workflowVersion: 1, input: {} }));
    await until(() => dead.written.has("s:completed") && dead.log.includes("event execution.started"), "the start's rows, then its events held");
    gate.fail();
    await expect(start).rejects.toMatchObject({ code: "BATON_EXECUTOR_EFFECTS_FAILED" });
    expect(await bus.lastPerSubject(`${prefix}.evt.*.*.${tenantId}.${id}`)).toEqual([]);
    // Events of other things whose id is the run's (a workflow, a memory), and a tool's progress,
    // which is no step of the run: none says what the run published (chaos seed 1029: a workflow's
    // `workflow.created`, numbered as the run, had its rebuild take the start as told).
    for (const type of ["workflow.created", "memory.created", "node.progress"] as const) {
      await bus.publish(`${prefix}.evt.${type}.${tenantId}.${id}`, new Uint8Array(), { tenantId, type });
    }
    await loseCheckpoint(id);
    const other = gated();
    await other.executor.handle(result(id, "a"), 2);
    const told = other.sent.map((l) => l.split(" ").slice(0, 2).join(" ").trim());
    expect(told.slice(0, 3)).toEqual(["execution.started", "node.started s", "node.completed s"]);
    for (const e of ["execution.started", "node.completed s", "node.started a", "node.completed a"]) expect(told.filter((l) => l === e)).toHaveLength(1);
    for (const n of ["b", "c", "d"]) await other.executor.handle(result(id, n));
    expect((await t.store.executions.getById(id))!.status).toBe("completed");
  });

  // Chaos seed 861, replayed (docs/dev/chaos.md): a child's start, delivered again after Redis
  // lost its checkpoint, rebuilt the run; another replica's rebuild fenced the journal past the
  // first's, whose records were refused. The refusal came back bare (BATON_STORE_FENCED, not
  // retryable), and the start was taken as one that can never run: the child failed, and with it
  // its parent's forEach. A refused start is delivered again, as any refused command.
  it("delivers a start again when its rebuild's records are refused by another rebuild's fence, and the run goes on", async () => {
    const { g: dead, id } = await startedGated();
    const start = command("execution.start", { executionId: id, tenantId, workflowId, workflowVersion: 1, input: {} });
    // d's result: d's rows land, the statement of j's step (inline, the run's end) fails, and the
    // executor dies: the rebuild has j's rows to write.
    for (const n of ["a", "b", "c"]) await dead.executor.handle(result(id, n));
    const heldJ = dead.holdRows("j");
    const last = dead.executor.handle(result(id, "d"));
    await until(() => dead.written.has("d:completed") && dead.log.some((l) => l.startsWith("rows ") && l.includes("j:completed")), "d's rows, then j's statement");
    heldJ.fail();
    await expect(last).rejects.toMatchObject({ code: "BATON_EXECUTOR_EFFECTS_FAILED" });
    let raceOnce = true;
    const store = storeBefore(async (batch) => {
      if (raceOnce && batch.executions.some((e) => e.id === id)) {
        // Another replica's rebuild fences the journal just before this statement.
        raceOnce = false;
        await t.store.executions.fenceJournal(id, tenantId, 1000);
      }
    });
    const x = createExecutor({ messaging: createMessaging(bus), store, checkpoints, logger: createLogger("executor", "silent"), recoverOnStart: false, recoverEveryMs: 0, clock: skewedClock });
    await loseCheckpoint(id);
    await expect(x.handle(start, 2)).rejects.toMatchObject({ code: "BATON_EXECUTOR_EFFECTS_FAILED", retryable: true, cause: { code: "BATON_STORE_FENCED" } });
    expect(raceOnce).toBe(false);
    expect((await t.store.executions.getById(id))!.status).toBe("running");
    // Delivered again: once the other rebuild has had its time (it never writes here), rebuilt
    // past the floor, its lost records written, and the run ends.
    await expect(x.handle(start, 3)).rejects.toMatchObject({ code: "BATON_EXECUTOR_REBUILD_AWAITED" });
    skewMs = 5_000;
    await x.handle(start, 4);
    expect((await t.store.executions.getById(id))!.status).toBe("completed");
    expect(Object.keys(await completedSteps(id)).sort()).toEqual(["a", "b", "c", "d", "j", "s"]);
  });

  // Chaos seed 861 (docs/dev/chaos.md): as above, but the step was the run's last: its rows, the
  // row's `completed` with them, landed and its events did not, and Redis then lost the
  // checkpoint. The result, delivered again, found a finished run without a checkpoint and was
  // ignored: the run's end was never published (nor its parent told, nor anything expired).
  it("publishes the end of a run whose last step's rows landed and whose executor died before its events, after Redis lost the checkpoint", async () => {
    const { g: dead, id } = await startedGated();
    for (const n of ["a", "b", "c"]) await dead.executor.handle(result(id, n));
    const gate = dead.hold();
    const last = dead.executor.handle(result(id, "d"));
    await until(() => dead.written.has("j:completed") && dead.log.includes("event node.completed d"), "the last step's rows, then its events held");
    gate.fail();
    await expect(last).rejects.toMatchObject({ code: "BATON_EXECUTOR_EFFECTS_FAILED" });
    expect((await t.store.executions.getById(id))!.status).toBe("completed");
    await loseCheckpoint(id);
    const other = gated();
    await other.executor.handle(result(id, "d"), 2);
    const told = other.sent.map((l) => l.split(" ").slice(0, 2).join(" ").trim());
    expect(told).toEqual(["node.completed d", "node.started j", "node.completed j", "execution.completed"]);
    // Its end is carried out: the checkpoint left to expire.
    expect(await redis.pttl(`${prefix}:checkpoint:{${id}}`)).toBeGreaterThan(0);
    // Delivered once more: the end is on the stream now, nothing is told again.
    await other.executor.handle(result(id, "d"), 3);
    expect(other.sent).toHaveLength(4);
  });

  // Chaos seed 903 (docs/dev/chaos.md): a replica's step whose rows landed and whose events were
  // not out yet when the replica stalled; Redis lost the checkpoint and another replica rebuilt
  // the run, found the rows in the journal and none of their events on the stream (nor a second
  // later), and told them. The stalled replica woke and published them too, under its own step
  // numbers: the same transition twice (ADR 004, "Still open" until 2026-11-28).
  it("publishes a step's events once when a rebuild fenced the journal after its rows landed, its executor stalled before its events", async () => {
    const { g: stale, id } = await startedGated();
    const stalled = stale.holdAfterRows("a");
    const staleA = stale.executor.handle(result(id, "a"));
    await until(() => stale.written.has("a:completed"), "a's rows landed");
    await loseCheckpoint(id);
    const other = gated();
    await other.executor.handle(result(id, "b"), 1);
    const completedA = (g: ReturnType<typeof gated>): string[] => g.sent.filter((l) => l.startsWith("node.completed a "));
    expect(completedA(other)).toHaveLength(1); // told by the rebuild
    stalled.release();
    const woke: unknown = await staleA.then(() => "acknowledged", (err: unknown) => err);
    // It wakes, finds the journal fenced past its step, and publishes nothing: its command goes
    // back, to be applied to the rebuilt checkpoint.
    expect(completedA(stale)).toEqual([]);
    expect(stale.floorReads()).toBeGreaterThan(0);
    expect(woke).toMatchObject({ code: "BATON_EXECUTOR_EFFECTS_FAILED", retryable: true, cause: { code: "BATON_STORE_FENCED" } });
    // Delivered again, a's result is ignored by the rebuilt run, which goes on.
    await stale.executor.handle(result(id, "a"), 2);
    for (const n of ["c", "d"]) await other.executor.handle(result(id, n));
    expect((await checkpoints.get(id))!.state.status).toBe("completed");
    expect([...completedA(stale), ...completedA(other)]).toHaveLength(1);
  });

  it("publishes the events of a step whose records took long when no rebuild fenced the journal meanwhile", async () => {
    const { g, id } = await startedGated();
    const slow = g.holdAfterRows("a");
    const a = g.executor.handle(result(id, "a"));
    await until(() => g.written.has("a:completed"), "a's rows landed");
    await new Promise((r) => setTimeout(r, 700)); // past the 500 ms after which the journal's floor is read first
    slow.release();
    await a;
    expect(g.sent.filter((l) => l.startsWith("node.completed a "))).toHaveLength(1);
    expect(g.floorReads()).toBeGreaterThan(0); // read, and found no fence
    expect(await t.store.executions.journalFloor(id, tenantId)).toBeNull();
  });

  // As above, but the run's last step was the recovery sweep's: it applied what it found (here
  // an answer its worker recorded, whose tool.result was lost) itself, with no command behind
  // the step. Its executor dead between the step's rows and its events, nothing delivered
  // anything again, and the sweep looks at live runs only: the run's end was never told
  // (ADR 004, "Still open" until 2026-11-28). The sweep now sends commands instead.
  it("tells the end of a run whose last step came from the recovery sweep, its executor dead between the step's rows and its events", async () => {
    const single = (await t.store.workflows.create(tenantId, {
      name: "single", slug: `single-${prefix}`,
      definition: { start: "x", nodes: [{ id: "x", type: "tool", config: { tool: "echo" } }], edges: [], output: { x: "$.x" } },
    })).id;
    const dead = gated();
    const row = await t.store.executions.create(tenantId, { workflowId: single, workflowVersion: 1, input: {} });
    const id = row.id;
    await dead.executor.handle(command("execution.start", { executionId: id, tenantId, workflowId: single, workflowVersion: 1, input: {} }));
    await idle(id);
    await bus.kv(RESULTS_BUCKET);
    await createMessaging(bus).recordToolResult(`${id}.x.1`, { ok: true, output: { v: "recorded" }, durationMs: 3, workerId: "w1" });
    skewMs = 120_000; // the answer was recorded over a minute ago
    const sent = (await commandsSentBy(bus, NATS, () => dead.executor.recover())).filter((c) => c.message.executionId === id);
    expect(sent.map((c) => c.name)).toEqual(["tool.result"]);
    expect((await checkpoints.get(id))!.state.status).toBe("running"); // sent, not applied
    // The executor takes it and dies between the step's rows and its events.
    const gate = dead.hold();
    const taken = dead.executor.handle(sent[0]!, 1);
    await until(() => dead.written.has("x:completed") && dead.log.includes("event node.completed x"), "the step's rows, then its events held");
    gate.fail();
    await expect(taken).rejects.toMatchObject({ code: "BATON_EXECUTOR_EFFECTS_FAILED" });
    expect((await t.store.executions.getById(id))!.status).toBe("completed");
    // Not acknowledged, the command is delivered again (here to another executor), which
    // carries out what the checkpoint still holds: the run's end is told.
    const other = gated();
    await other.executor.handle(sent[0]!, 2);
    expect(other.sent.map((l) => l.split(" ").slice(0, 2).join(" ").trim())).toEqual(["node.completed x", "execution.completed"]);
    expect(await redis.pttl(`${prefix}:checkpoint:{${id}}`)).toBeGreaterThan(0);
  });

  // A run of more than 256 inline steps in a row gives way to the commands queued behind it and
  // goes on later. It went on in this process, with no command behind those steps: the same
  // gap as above, for a loop of transforms whose last steps end the run.
  it("leaves a long run of inline steps for later under a command of its own, execution.continue, which takes them up", async () => {
    const loop = (await t.store.workflows.create(tenantId, {
      name: "inline-loop", slug: `inline-loop-${prefix}`,
      definition: {
        start: "init",
        nodes: [
          { id: "init", type: "setVariable", config: { values: { "$.vars.i": 0 } } },
          { id: "loop", type: "whileLoop", config: { condition: "vars.i < 200", maxIterations: 1000 } },
          { id: "inc", type: "transform", config: { expression: "vars.i + 1" }, output: "$.vars.i" },
          { id: "done", type: "transform", config: { expression: "vars.i" } },
        ],
        edges: [{ from: "init", to: "loop" }, { from: "loop", to: "inc", when: "body" }, { from: "inc", to: "loop" }, { from: "loop", to: "done", when: "exit" }],
        output: { i: "$.done" },
      },
    })).id;
    const row = await t.store.executions.create(tenantId, { workflowId: loop, workflowVersion: 1, input: {} });
    const id = row.id;
    // About 400 inline steps: the start takes 256 of them and sends a continue for the rest.
    let sent = await commandsSentBy(bus, NATS, () => executor.handle(command("execution.start", { executionId: id, tenantId, workflowId: loop, workflowVersion: 1, input: {} })));
    expect(sent.map((c) => c.name)).toEqual(["execution.continue"]);
    expect((await checkpoints.get(id))!.state.status).toBe("running");
    const continues = sent.length;
    sent = await commandsSentBy(bus, NATS, () => executor.handle(sent[0]!, 1));
    expect(sent).toEqual([]);
    const cp = (await checkpoints.get(id))!;
    expect({ status: cp.state.status, output: cp.state.output, continues }).toEqual({ status: "completed", output: { i: 200 }, continues: 1 });
  });

  // Chaos seed 853 (docs/dev/chaos.md): as above, but the unannounced steps were a retry's start
  // and its failure. The start's only row (f#2 running) was written again by the failure
  // (f#2 failed), so no row said the start was past the last announced step, and the rebuild
  // told the failure alone: the timeline had `node.failed f#2` without `node.started f#2`. The
  // rebuild now also reads the last event of each kind from the stream.
  it("publishes the start of a retry whose only row its unannounced failure wrote again, after Redis lost the checkpoint", async () => {
    const retried = (await t.store.workflows.create(tenantId, {
      name: "retried", slug: `retried-${prefix}`,
      definition: { start: "f", nodes: [{ id: "f", type: "tool", config: { tool: "echo" }, retry: { maxAttempts: 3, initialDelayMs: 0, jitter: 0 } }], edges: [] },
    })).id;
    const failed = (id: number, attempt: number): AnyCommand =>
      command("tool.result", { callId: `${id}.f.${attempt}`, executionId: id, tenantId, nodeId: "f", attempt, tool: "echo", ok: false, error: { code: "E_FLAKY", message: "flaky", retryable: true }, durationMs: 1 });
    const retryTimer = async (id: number, attempt: number): Promise<AnyCommand> => {
      const cp = (await checkpoints.get(id))!;
      return command("execution.timer", { executionId: id, tenantId, timerId: `retry:f:${attempt}`, dueAt: cp.state.timers![`retry:f:${attempt}`]!.dueAt });
    };
    const dead = gated();
    const row = await t.store.executions.create(tenantId, { workflowId: retried, workflowVersion: 1, input: {} });
    const id = row.id;
    await dead.executor.handle(command("execution.start", { executionId: id, tenantId, workflowId: retried, workflowVersion: 1, input: {} }));
    await dead.executor.handle(failed(id, 1));
    const timer1 = await retryTimer(id, 1);
    // The retry's start and its failure: rows written, events held; the executor dies there.
    const gate = dead.hold();
    const started2 = dead.executor.handle(timer1);
    await until(() => dead.log.includes("event node.started f"), "f#2's start, its event held");
    const failed2 = dead.executor.handle(failed(id, 2));
    await until(async () => (await t.store.nodeExecutions.listById(id)).some((r) => r.attempt === 2 && r.status === "failed"), "f#2's failure written");
    gate.fail();
    await expect(started2).rejects.toMatchObject({ code: "BATON_EXECUTOR_EFFECTS_FAILED" });
    await expect(failed2).rejects.toMatchObject({ code: "BATON_EXECUTOR_EFFECTS_FAILED" });
    const timer2 = await retryTimer(id, 2);
    // Redis loses the checkpoint; the next retry's timer reaches another replica, which rebuilds.
    await loseCheckpoint(id);
    const other = gated();
    await other.executor.handle(timer2, 2);
    // f#2's start and failure go out, once each and in order, then f#3's start.
    expect(other.sent.map((l) => l.split(" ").slice(0, 2).join(" "))).toEqual(["node.started f", "node.failed f", "node.started f"]);
    const attempts = (await t.store.nodeExecutions.listById(id)).map((r) => `${r.attempt}:${r.status}`);
    expect(attempts).toEqual(["1:failed", "2:failed", "3:running"]);
  });

  // Chaos seed 832 (docs/dev/chaos.md): a cancel was applied and its calls stopped, but its
  // records were refused (Redis had lost the checkpoint and another replica had rebuilt the run
  // without the cancel). The stopped call answered BATON_TOOL_CANCELLED to the rebuilt run,
  // which had not asked, and failed it before the cancel, delivered again, reached it. Calls
  // are now stopped only once the step's rows are written.
  it("stops a cancel's calls only once its records are written: refused, they run on, and the cancel delivered again stops them", async () => {
    await withCancels(async (cancelled) => {
      const { g: stale, id } = await startedGated();
      const held = stale.holdRows("a");
      const cancel = command("execution.cancel", { executionId: id, tenantId, reason: "stop" });
      const staleCancel = stale.executor.handle(cancel);
      await until(() => stale.log.some((l) => l.startsWith("rows ") && l.includes("a:")), "the cancel's statement");
      // Redis loses the checkpoint; another replica rebuilds the run from the journal (no
      // cancel there) on a's result.
      await loseCheckpoint(id);
      const other = gated();
      await other.executor.handle(result(id, "a"), 2);
      held.release();
      await expect(staleCancel).rejects.toMatchObject({ code: "BATON_EXECUTOR_EFFECTS_FAILED", cause: { code: "BATON_STORE_FENCED" } });
      // Nothing was stopped: b, c and d still run for the rebuilt run.
      bus.sendNow();
      await new Promise((r) => setTimeout(r, 200));
      expect(cancelled).toEqual([]);
      expect((await checkpoints.get(id))!.state.status).toBe("running");
      // The cancel, delivered again, cancels the rebuilt run, and its calls are stopped then.
      await stale.executor.handle(cancel, 2);
      for (const n of ["b", "c", "d"]) await waitForCancel(cancelled, `${id}.${n}.1`);
      expect(cancelled.flat().sort()).toEqual(["b", "c", "d"].map((n) => `${id}.${n}.1`));
      expect((await checkpoints.get(id))!.state.status).toBe("cancelled");
      expect((await t.store.executions.getById(id))!.status).toBe("cancelled");
    });
  });

  // The replay of seed 832 failed the same way through a child: the parent's cancel, refused,
  // had cancelled its child, and the rebuilt parent failed with BATON_CHILD_CANCELLED.
  it("cancels a run's children only once the cancel's records are written", async () => {
    const parentWf = await parentOfChild("stop");
    const x = gated();
    const row = await t.store.executions.create(tenantId, { workflowId: parentWf, workflowVersion: 1, input: {} });
    await x.executor.handle(command("execution.start", { executionId: row.id, tenantId, workflowId: parentWf, workflowVersion: 1, input: {} }));
    const child = (await t.store.executions.listChildren(tenantId, row.id))[0]!;
    // The cancel's statement (sub's attempt closed) is held.
    const held = x.holdRows("sub");
    const cancel = command("execution.cancel", { executionId: row.id, tenantId, reason: "stop" });
    const first = x.executor.handle(cancel);
    await until(() => x.log.some((l) => l.startsWith("rows ") && l.includes("sub:")), "the cancel's statement");
    // Another replica's rebuild fences the journal (the cancel is not in it); the statement lands after.
    await t.store.executions.fenceJournal(row.id, tenantId, 1000);
    held.release();
    await expect(first).rejects.toMatchObject({ code: "BATON_EXECUTOR_EFFECTS_FAILED", cause: { code: "BATON_STORE_FENCED" } });
    expect(x.commands).not.toContain(`execution.cancel ${child.id}`);
    // Delivered again once the other rebuild has had its time: applied to the run rebuilt past
    // the floor, which cancels the child now.
    await expect(x.executor.handle(cancel, 2)).rejects.toMatchObject({ code: "BATON_EXECUTOR_REBUILD_AWAITED" });
    expect(x.commands).not.toContain(`execution.cancel ${child.id}`);
    skewMs = 5_000;
    await x.executor.handle(cancel, 3);
    expect(x.commands.filter((l) => l === `execution.cancel ${child.id}`)).toHaveLength(1);
    expect((await t.store.executions.getById(row.id))!.status).toBe("cancelled");
  });

  it("does not publish a step's events when the previous step's events failed", async () => {
    const { g, a, b, gate } = await twoSteps();
    gate.fail();
    // Neither command is acknowledged: both are delivered again and redo what the checkpoint holds.
    await expect(a).rejects.toMatchObject({ code: "BATON_EXECUTOR_EFFECTS_FAILED" });
    await expect(b).rejects.toMatchObject({ code: "BATON_EXECUTOR_EFFECTS_FAILED" });
    expect(g.log.filter((l) => l.startsWith("event"))).toEqual(["event node.completed a"]);
  });

  // Chaos seed 5005 (--forks, docs/dev/chaos.md): a fork of a finished run from its last
  // checkpoint ends at its start and writes no journal row. Its start's records were refused by a
  // rebuild's fence; the checkpoint it had written, numbered below the floor, was rebuilt over from
  // the empty journal, which told nothing of it: the run ended completed with no event at all.
  it("tells its start and end when its refused start is rebuilt over", async () => {
    await streamKeepsOverASecond();
    const src = await started();
    for (const n of ["a", "b", "c", "d"]) await executor.handle(result(src, n));
    const last = (await checkpoints.get(src))!;
    expect(last.state.status).toBe("completed");
    const row = await t.store.executions.create(tenantId, {
      workflowId, workflowVersion: 1, input: {}, triggerEvent: "fork", forkedFromExecutionId: src, forkedFromVersion: last.version,
      checkpoint: { forkStart: forkStartRecord(forkStartOf(last.state, src, last.version)) },
    });
    const id = row.id;
    let raceOnce = true;
    const store = storeBefore(async (batch) => {
      if (raceOnce && batch.executions.some((e) => e.id === id)) {
        // Another replica's rebuild fences the journal just before the start's statement.
        raceOnce = false;
        await t.store.executions.fenceJournal(id, tenantId, 1000);
      }
    });
    const { messaging, published } = publishing();
    const x = createExecutor({ messaging, store, checkpoints, logger: createLogger("executor", "silent"), recoverOnStart: false, recoverEveryMs: 0, clock: skewedClock });
    const start = command("execution.start", { executionId: id, tenantId, workflowId, workflowVersion: 1, forkOfExecutionId: src, forkOfVersion: last.version });
    await expect(x.handle(start, 1)).rejects.toMatchObject({ code: "BATON_EXECUTOR_EFFECTS_FAILED", cause: { code: "BATON_STORE_FENCED" } });
    expect(published).toEqual([]);
    await expect(x.handle(start, 2)).rejects.toMatchObject({ code: "BATON_EXECUTOR_REBUILD_AWAITED" });
    // Once the other rebuild has had its time (it never writes here): rebuilt over, from no row.
    skewMs = 5_000;
    await x.handle(start, 3);
    expect(published).toEqual(["execution.started", "execution.completed"]);
    expect(await t.store.nodeExecutions.listById(id)).toEqual([]);
    expect((await t.store.executions.getById(id))!.status).toBe("completed");
  });

  // The same run whose start's records landed (the row says it ended) and whose executor died
  // before its events, Redis then losing the checkpoint: its start, delivered again, found the row
  // ended and was ignored, as the start of a run cancelled while it waited queued is.
  it("tells its start and end when its start comes again to its ended row, the checkpoint lost", async () => {
    await streamKeepsOverASecond();
    const src = await started();
    for (const n of ["a", "b", "c", "d"]) await executor.handle(result(src, n));
    const last = (await checkpoints.get(src))!;
    const row = await t.store.executions.create(tenantId, {
      workflowId, workflowVersion: 1, input: {}, triggerEvent: "fork", forkedFromExecutionId: src, forkedFromVersion: last.version,
      checkpoint: { forkStart: forkStartRecord(forkStartOf(last.state, src, last.version)) },
    });
    const id = row.id;
    const start = command("execution.start", { executionId: id, tenantId, workflowId, workflowVersion: 1, forkOfExecutionId: src, forkOfVersion: last.version });
    const dead = gated();
    const gate = dead.hold();
    const first = dead.executor.handle(start, 1);
    await until(() => dead.log.includes("event execution.started"), "the start's records, then its events held");
    gate.fail();
    await expect(first).rejects.toMatchObject({ code: "BATON_EXECUTOR_EFFECTS_FAILED" });
    expect((await t.store.executions.getById(id))!.status).toBe("completed");
    expect(await bus.lastPerSubject(`${prefix}.evt.*.*.${tenantId}.${id}`)).toEqual([]);
    await loseCheckpoint(id);
    const other = gated();
    await other.executor.handle(start, 2);
    expect(other.sent.map((l) => l.split(" ")[0])).toEqual(["execution.started", "execution.completed"]);
    expect((await bus.lastPerSubject(`${prefix}.evt.*.*.${tenantId}.${id}`)).length).toBe(2);
    // Once more: its end is on the stream now, the start is ignored.
    await other.executor.handle(start, 3);
    expect(other.sent).toHaveLength(2);
  });
});

describe("calls sent while their checkpoint is written", () => {
  const chain = {
    start: "a",
    nodes: [{ id: "a", type: "tool", config: { tool: "echo" } }, { id: "b", type: "tool", config: { tool: "echo" } }],
    edges: [{ from: "a", to: "b" }],
    output: { b: "$.b" },
  };
  let chainId: number;
  beforeAll(async () => {
    chainId = (await t.store.workflows.create(tenantId, { name: "chain", definition: chain })).id;
  });

  function executorWith(cp: typeof checkpoints): Executor {
    return createExecutor({ messaging: createMessaging(bus), store: t.store, checkpoints: cp, logger: createLogger("executor", "silent"), recoverOnStart: false, recoverEveryMs: 0, clock: skewedClock });
  }

  async function startChain(x: Executor): Promise<number> {
    const row = await t.store.executions.create(tenantId, { workflowId: chainId, workflowVersion: 1, input: {} });
    await x.handle(command("execution.start", { executionId: row.id, tenantId, workflowId: chainId, workflowVersion: 1, input: {} }));
    return row.id;
  }

  /**
   * A chain started, then a's result applied by an executor whose checkpoint write fails (as
   * if the process died there): b's call went out, and no checkpoint knows it.
   */
  async function bSentWithoutCheckpoint(): Promise<{ x: Executor; id: number }> {
    let failPut = false;
    const flaky: typeof checkpoints = Object.assign(Object.create(checkpoints) as typeof checkpoints, {
      put: (...args: Parameters<typeof checkpoints.put>) => (failPut ? Promise.reject(new Error("the executor died here")) : checkpoints.put(...args)),
    });
    const x = executorWith(flaky);
    const id = await startChain(x);
    failPut = true;
    await expect(x.handle(result(id, "a"))).rejects.toThrow("the executor died here");
    failPut = false;
    expect((await checkpoints.get(id))!.state.nodes.b).toBeUndefined();
    return { x, id };
  }

  it("answers a call sent for a checkpoint that was never written from its record", async () => {
    const { x, id } = await bSentWithoutCheckpoint();
    // A worker ran b and recorded its answer; the answer reaches an executor whose checkpoint has no b.
    const kv = await bus.kv(RESULTS_BUCKET);
    await kv.put(resultKey(`${id}.b.1`), new TextEncoder().encode(JSON.stringify({ ok: true, output: { v: "recorded" }, durationMs: 3, workerId: "w1" })));
    // (The answer differs from the record only to show which one is applied.)
    const answer = command("tool.result", { callId: `${id}.b.1`, executionId: id, tenantId, nodeId: "b", attempt: 1, tool: "echo", ok: true, output: valueFromJson({ v: "answered" }), durationMs: 3 });
    await expect(x.handle(answer, 1)).rejects.toMatchObject({ code: "BATON_EXECUTOR_RESULT_BEFORE_CALL", retryable: true, retryDelayMs: 250 });
    await expect(x.handle(answer, 3)).rejects.toMatchObject({ code: "BATON_EXECUTOR_RESULT_BEFORE_CALL", retryDelayMs: 1_000 });
    await x.handle(answer, 8); // the last delivery: dropped; the worker's record stays as it was
    // a's result is delivered again: b's call is sent again, found sent, and its record applied.
    await x.handle(result(id, "a"), 2);
    const cp = (await checkpoints.get(id))!;
    expect(cp.state.status).toBe("completed");
    expect(cp.state.output).toEqual({ b: { v: "recorded" } });
    const rows = await t.store.nodeExecutions.listById(id);
    expect(rows.filter((r) => r.nodeId === "b").map((r) => r.status)).toEqual(["completed"]);
  });

  it("records an answer it drops as early, so the step taken again finds it when no worker recorded it", async () => {
    const { x, id } = await bSentWithoutCheckpoint();
    // The worker (which opened the results bucket) sent b's answer and died before recording it.
    await bus.kv(RESULTS_BUCKET);
    expect(await bus.kvGet(RESULTS_BUCKET, resultKey(`${id}.b.1`))).toBeNull();
    const answer = command("tool.result", { callId: `${id}.b.1`, executionId: id, tenantId, nodeId: "b", attempt: 1, tool: "echo", ok: true, output: valueFromJson({ v: "only the answer" }), durationMs: 4 });
    await expect(x.handle(answer, 7)).rejects.toMatchObject({ code: "BATON_EXECUTOR_RESULT_BEFORE_CALL" });
    expect(await bus.kvGet(RESULTS_BUCKET, resultKey(`${id}.b.1`))).toBeNull();
    await x.handle(answer, 8); // the last delivery: dropped, and recorded
    // a's result again: b's call is found sent (the queue drops it as a duplicate, so no
    // worker runs it again), and the answer the executor dropped is applied.
    await x.handle(result(id, "a"), 2);
    const cp = (await checkpoints.get(id))!;
    expect(cp.state.status).toBe("completed");
    expect(cp.state.output).toEqual({ b: { v: "only the answer" } });
    const raw = await bus.kvGet(RESULTS_BUCKET, resultKey(`${id}.b.1`));
    expect(raw).not.toBeNull();
    const recorded: unknown = JSON.parse(new TextDecoder().decode(raw?.value));
    expect(recorded).toMatchObject({ ok: true, output: { v: "only the answer" }, durationMs: 4 });
  });

  it("drops at once a repeated answer of a finished attempt, and of an earlier attempt", async () => {
    const x = executorWith(checkpoints);
    const id = await startChain(x);
    await x.handle(result(id, "a"), 1); // b's call is out
    await x.handle(result(id, "a"), 1); // the same answer again (a lost ack): acked, not delivered again
    const early = command("tool.result", { callId: `${id}.b.2`, executionId: id, tenantId, nodeId: "b", attempt: 2, tool: "echo", ok: true, output: valueFromJson({}), durationMs: 1 });
    await expect(x.handle(early, 1)).rejects.toMatchObject({ code: "BATON_EXECUTOR_RESULT_BEFORE_CALL" }); // a later attempt than b's
    const old = command("tool.result", { callId: `${id}.a.0`, executionId: id, tenantId, nodeId: "a", attempt: 0, tool: "echo", ok: true, output: valueFromJson({}), durationMs: 1 });
    await x.handle(old, 1);
    expect((await checkpoints.get(id))!.state.nodes.b!.status).toBe("running");
  });

  it("drops at once a repeated answer of a forEach item while other items are out", async () => {
    const each = { start: "each", nodes: [{ id: "each", type: "forEach", config: { items: "$.input.xs", tool: "echo" } }] };
    const wf = (await t.store.workflows.create(tenantId, { name: "each", definition: each })).id;
    const row = await t.store.executions.create(tenantId, { workflowId: wf, workflowVersion: 1, input: { xs: [1, 2, 3] } });
    const x = executorWith(checkpoints);
    await x.handle(command("execution.start", { executionId: row.id, tenantId, workflowId: wf, workflowVersion: 1, input: { xs: [1, 2, 3] } }));
    const item = (i: number, callId = `${row.id}.each.1.${i}`) =>
      command("tool.result", { callId, executionId: row.id, tenantId, nodeId: "each", attempt: 1, tool: "echo", ok: true, output: valueFromJson({ i }), durationMs: 1 });
    await x.handle(item(0), 1);
    await x.handle(item(0), 1); // the same answer again: items 1 and 2 are still out, but this one is settled
    // An item's later attempt, or an item the state does not have, may still be ahead of its call.
    await expect(x.handle(item(1, `${row.id}.each.1.1-2`), 1)).rejects.toMatchObject({ code: "BATON_EXECUTOR_RESULT_BEFORE_CALL" });
    await expect(x.handle(item(7), 1)).rejects.toMatchObject({ code: "BATON_EXECUTOR_RESULT_BEFORE_CALL" });
    for (const i of [1, 2]) await x.handle(item(i), 1);
    const cp = (await checkpoints.get(row.id))!;
    expect(cp.state.status).toBe("completed");
    expect(cp.state.context.each).toEqual([{ i: 0 }, { i: 1 }, { i: 2 }]);
  });

  it("cancels the calls of a step that lost its compare-and-set and was not taken again", async () => {
    await withCancels(async (cancelled) => {
      const x1 = executorWith(checkpoints);
      const x2 = executorWith(checkpoints);
      const id = await startChain(x1); // x1 caches the checkpoint with a's call out
      await x2.handle(command("execution.cancel", { executionId: id, tenantId, reason: "stop" }));
      // x1 applies a's result to its cached state: b's call goes out, the compare-and-set fails,
      // the result applied again to the cancelled execution is ignored, and b is cancelled.
      await x1.handle(result(id, "a"));
      await waitForCancel(cancelled, `${id}.b.1`);
      expect(cancelled).toContainEqual([`${id}.a.1`]); // the cancel itself
      expect(cancelled).toContainEqual([`${id}.b.1`]); // the orphan
      expect((await checkpoints.get(id))!.state.status).toBe("cancelled");
    });
  });

  it("leaves a lost step's call to run when the state that won has yet to send it (the same call id)", async () => {
    await withCancels(async (cancelled) => {
      // Before x1's write, Redis gets a state behind x1's cache: a not started yet (as a rebuild
      // from a journal that lacks a's start leaves it), a newer version all the same.
      let behindBeforePut: number | undefined;
      const raced: typeof checkpoints = Object.assign(Object.create(checkpoints) as typeof checkpoints, {
        put: async (...args: Parameters<typeof checkpoints.put>) => {
          if (args[0] === behindBeforePut) {
            behindBeforePut = undefined;
            const cp = (await checkpoints.get(args[0]))!;
            const { callId: _sent, ...a } = cp.state.nodes.a!;
            await checkpoints.put(args[0], { ...cp.state, nodes: { ...cp.state.nodes, a: { ...a, status: "waiting", attempt: 0 } }, ready: ["a"], outbox: [] }, cp.version);
          }
          return checkpoints.put(...args);
        },
      });
      const x1 = executorWith(raced);
      const id = await startChain(x1); // a's call is out; x1 caches that state
      behindBeforePut = id;
      // x1 applies a's result to its cache: b's call goes out, the write loses; applied again to
      // what Redis holds, a's result is early (a not started there), so it is delivered again later.
      await expect(x1.handle(result(id, "a"), 1)).rejects.toMatchObject({ code: "BATON_EXECUTOR_RESULT_BEFORE_CALL" });
      expect(behindBeforePut).toBeUndefined(); // the race happened
      // That state sends b's call with the same id once a completes: it must not have been cancelled.
      expect(cancelled.flat()).not.toContain(`${id}.b.1`);
      // a is ready: the sweep sends a continue, and its call goes out again, as the same call.
      // (Only once no step came for a while: a run mid-step holds ready nodes for a moment.)
      expect((await swept(x1, id)).map((c) => c.name)).toEqual([]);
      skewMs = 20_000;
      expect((await swept(x1, id)).map((c) => c.name)).toEqual(["execution.continue"]);
      await x1.handle(result(id, "a"), 2);
      await x1.handle(result(id, "b"), 1);
      expect((await checkpoints.get(id))!.state.status).toBe("completed");
      expect(cancelled.flat()).not.toContain(`${id}.b.1`);
    });
  });

  it("cancels the calls of a step taken for a lost command the recovery sweep sent again when it lost its compare-and-set", async () => {
    await withCancels(async (cancelled) => {
      const x2 = executorWith(checkpoints);
      // Another executor cancels the run between the sweep's read of the checkpoint and its write.
      let cancelBeforePut: number | undefined;
      const raced: typeof checkpoints = Object.assign(Object.create(checkpoints) as typeof checkpoints, {
        put: async (...args: Parameters<typeof checkpoints.put>) => {
          if (args[0] === cancelBeforePut) {
            cancelBeforePut = undefined;
            await x2.handle(command("execution.cancel", { executionId: args[0], tenantId, reason: "stop" }));
          }
          return checkpoints.put(...args);
        },
      });
      const x1 = executorWith(raced);
      const id = await startChain(x1); // a's call is out
      // A worker ran a and recorded its answer, and the answer's command was lost: the sweep applies it.
      const kv = await bus.kv(RESULTS_BUCKET);
      await kv.put(resultKey(`${id}.a.1`), new TextEncoder().encode(JSON.stringify({ ok: true, output: { v: "recorded" }, durationMs: 3, workerId: "w1" })));
      await idle(id);
      cancelBeforePut = id;
      skewMs = 120_000; // the answer was recorded over a minute ago
      expect((await swept(x1, id)).map((c) => c.name)).toEqual(["tool.result"]);
      expect(cancelBeforePut).toBeUndefined(); // the race happened
      await waitForCancel(cancelled, `${id}.b.1`);
      expect(cancelled).toContainEqual([`${id}.b.1`]); // the orphan of the sweep's step
      expect((await checkpoints.get(id))!.state.status).toBe("cancelled");
    });
  });
});

describe("the execution row of a step that writes no journal row", () => {
  // Chaos seed 501 (docs/dev/chaos.md): a pause in a sub-run changes only the parent's execution
  // row (no journal row). A redo of the step before it that lands afterwards (another replica
  // redoing the same failed outbox) wrote the row back to `running` without `subRunPauses` while
  // `execution.paused` was out; a later rebuild then took that pause as never announced and never
  // published its `execution.resumed`. The row's `patchedStep` now leaves that patch out.
  it("keeps the pause of a sub-run when another replica's redo of the step before lands after it", async () => {
    const parentWf = await parentOfChild("");
    const log: string[] = [];
    const gates: { y?: Promise<void> } = {};
    const rows = t.store.nodeExecutions;
    let failNext = true;
    const storeFor = (name: string): Store => ({
      ...t.store,
      nodeExecutions: {
        ...rows,
        recordSteps: async (batch) => {
          if (batch.executions.length === 0 && batch.entries.length === 0) return rows.recordSteps(batch);
          log.push(`${name} rows ${batch.entries.map((e) => `${e.nodeId}:${e.status}`).join(" ")} row ${batch.executions.map((e) => String(e.patch.status)).join(" ")}`);
          if (name === "x" && failNext) {
            failNext = false;
            throw new Error("the database refused the write");
          }
          if (name === "y" && gates.y) await gates.y;
          return rows.recordSteps(batch);
        },
      },
    });
    const x = createExecutor({ messaging: createMessaging(bus), store: storeFor("x"), checkpoints, logger: createLogger("executor", "silent"), recoverOnStart: false, recoverEveryMs: 0 });
    const y = createExecutor({ messaging: createMessaging(bus), store: storeFor("y"), checkpoints, logger: createLogger("executor", "silent"), recoverOnStart: false, recoverEveryMs: 0 });
    const row = await t.store.executions.create(tenantId, { workflowId: parentWf, workflowVersion: 1, input: {} });
    const start = command("execution.start", { executionId: row.id, tenantId, workflowId: parentWf, workflowVersion: 1, input: {} });
    // x's start step: the checkpoint is written, its records refused (the child is started).
    await expect(x.handle(start)).rejects.toMatchObject({ code: "BATON_EXECUTOR_EFFECTS_FAILED" });
    const sub = (await t.store.executions.listChildren(tenantId, row.id))[0]!;
    // The start delivered again to y: it redoes the outbox, its statement held.
    let release!: () => void;
    gates.y = new Promise<void>((r) => (release = r));
    const redo = y.handle(start, 2);
    const deadline = Date.now() + 5_000;
    while (!log.some((l) => l.startsWith("y rows"))) {
      if (Date.now() > deadline) throw new Error("y's redo did not start");
      await new Promise((r) => setTimeout(r, 10));
    }
    // The child pauses; x redoes the start's records, then takes the pause (row paused, event out).
    await x.handle(command("execution.child_paused", { executionId: row.id, tenantId, nodeId: "sub", childKey: sub.childKey!, childExecutionId: sub.id, paused: true, seq: 5, reason: "check" }));
    expect((await t.store.executions.getById(row.id))!.status).toBe("paused");
    // x's outbox is dropped from Redis (nothing left in flight); y's redo of the start lands now.
    while ((await checkpoints.get(row.id))?.state.outbox?.length) {
      if (Date.now() > deadline + 5_000) throw new Error("x's outbox was not dropped");
      await new Promise((r) => setTimeout(r, 20));
    }
    release();
    await redo.catch(() => undefined);
    const after = (await t.store.executions.getById(row.id))!;
    expect(after.status).toBe("paused");
    expect(after.subRunPauses).toEqual({ sub: sub.id });
  });
});

describe("rebuilds one after another", () => {
  // Chaos seed 810 (subReview 48; docs/dev/chaos.md): a parent whose sub node ran while its
  // checkpoint was lost twice. Its steps in between (the rebuild's, the child's pause) wrote no
  // journal row, only its execution row, so the second rebuild's fence found the journal as the
  // first had left it, kept the floor where it was (1001), and numbered the second rebuilt
  // history from the same step as the first: the same message ids for other events, and the
  // stream dropped the later ones (`node.completed sub` never published).
  it("number each rebuilt history past every step of the one before, also when those wrote no journal row", async () => {
    const parentWf = await parentOfChild("twice");
    const sent: string[] = [];
    const messaging = createMessaging(bus);
    let parentId = 0;
    const x = createExecutor({
      messaging: {
        ...messaging,
        publishEvent: async (type, init, key) => {
          if ((init as { id?: number; executionId?: number }).id === parentId || (init as { executionId?: number }).executionId === parentId) sent.push(`${key} ${type} ${(init as { nodeId?: string }).nodeId ?? ""}`);
          return messaging.publishEvent(type, init, key);
        },
      },
      store: t.store, checkpoints, logger: createLogger("executor", "silent"), recoverOnStart: false, recoverEveryMs: 0,
    });
    const row = await t.store.executions.create(tenantId, { workflowId: parentWf, workflowVersion: 1, input: {} });
    parentId = row.id;
    await x.handle(command("execution.start", { executionId: row.id, tenantId, workflowId: parentWf, workflowVersion: 1, input: {} }));
    const sub = (await t.store.executions.listChildren(tenantId, row.id))[0]!;
    const lose = async (): Promise<void> => {
      await loseCheckpoint(row.id);
    };
    const numbered = async (): Promise<number> => {
      const cp = (await checkpoints.get(row.id))!;
      return cp.version + (cp.state.versionBase ?? 0);
    };
    // Lost once: the child's pause rebuilds the parent, which takes it (its row only).
    await lose();
    await x.handle(command("execution.child_paused", { executionId: row.id, tenantId, nodeId: "sub", childKey: sub.childKey!, childExecutionId: sub.id, paused: true, seq: 5, reason: "check" }));
    expect((await t.store.executions.getById(row.id))!.status).toBe("paused");
    const first = await numbered();
    // Lost again: the child's result reaches a rebuilt parent.
    await lose();
    const before = sent.length;
    await x.handle(command("execution.child_result", { executionId: row.id, tenantId, nodeId: "sub", childKey: sub.childKey!, childExecutionId: sub.id, status: "completed", output: valueFromJson({ w: 1 }) }));
    expect((await t.store.executions.getById(row.id))!.status).toBe("completed");
    // No message id names two different events (the stream keeps the first and drops the other).
    const byId = new Map<string, Set<string>>();
    for (const l of sent) {
      const [key, ...event] = l.split(" ");
      byId.set(key!, (byId.get(key!) ?? new Set()).add(event.join(" ")));
    }
    expect([...byId].filter(([, events]) => events.size > 1)).toEqual([]);
    // The second rebuilt history is numbered past every step of the first.
    const stepOf = (l: string): number => Number(l.split(" ")[0]!.split(":")[2]);
    expect(Math.min(...sent.slice(before).map(stepOf))).toBeGreaterThan(first);
    expect(sent.map((l) => l.split(" ").slice(1).join(" ").trim())).toContain("node.completed sub");
  });
});

describe("the events a rebuild learns from the rows of sub-runs", () => {
  // Chaos seed 810 (subReview 41, child 42; docs/dev/chaos.md): a parent whose checkpoint was lost
  // while its child paused learned the pause at its rebuild, and owed `execution.paused` (its row
  // did not say announced). The rebuild's records failed (Postgres refused the write); the
  // checkpoint it had written kept the re-armed work and the lost steps' records, not that event,
  // so the redelivered command's redo wrote the row as paused and published nothing: the parent's
  // timeline had `execution.resumed` without `execution.paused`.
  it("publishes a pause learned at a rebuild when the rebuild's records failed once", async () => {
    const parentWf = await parentOfChild("news");
    const events: string[] = [];
    const messaging = createMessaging(bus);
    const rows = t.store.nodeExecutions;
    let failParent = false;
    let parentId = 0;
    const x = createExecutor({
      messaging: {
        ...messaging,
        publishEvent: async (type, init, key) => {
          if ((init as { id?: number }).id === parentId) events.push(type);
          return messaging.publishEvent(type, init, key);
        },
      },
      store: storeBefore((batch) => {
        if (failParent && batch.executions.some((e) => e.id === parentId)) {
          failParent = false;
          throw new Error("the database refused the write");
        }
      }),
      checkpoints, logger: createLogger("executor", "silent"), recoverOnStart: false, recoverEveryMs: 0,
    });
    const row = await t.store.executions.create(tenantId, { workflowId: parentWf, workflowVersion: 1, input: {} });
    parentId = row.id;
    await x.handle(command("execution.start", { executionId: row.id, tenantId, workflowId: parentWf, workflowVersion: 1, input: {} }));
    const sub = (await t.store.executions.listChildren(tenantId, row.id))[0]!;
    // The child pauses (its row says so) while Redis loses the parent's checkpoint.
    await rows.recordSteps({ entries: [], executions: [{ id: sub.id, tenantId, stepVersion: 5, patch: { status: "paused", currentState: "w" } }] });
    await loseCheckpoint(row.id);
    // The child's news reaches the parent: rebuilt from its journal, it learns the pause; the
    // rebuild's records fail once.
    const news = command("execution.child_paused", { executionId: row.id, tenantId, nodeId: "sub", childKey: sub.childKey!, childExecutionId: sub.id, paused: true, seq: 5, reason: "check" });
    failParent = true;
    await expect(x.handle(news)).rejects.toThrow("the database refused the write");
    // Delivered again: the rebuilt checkpoint's outbox is redone, the pause announced.
    await x.handle(news, 2);
    expect((await t.store.executions.getById(row.id))!.status).toBe("paused");
    expect(events.filter((e) => e === "execution.paused")).toHaveLength(1);
  });

  /**
   * Executors that record the events of run `watch.id` (as `type:node`) and, while
   * `watch.dieBeforePause`, die before publishing its `execution.paused` (between a step's rows
   * and its events).
   */
  function pauseWatch(): { events: string[]; id: number; dieBeforePause: boolean; executor(): Executor } {
    const messaging = createMessaging(bus);
    const watch = {
      events: [] as string[], id: 0, dieBeforePause: false,
      executor: () => createExecutor({
        messaging: {
          ...messaging,
          publishEvent: async (type, init, key) => {
            if ((init as { id?: number }).id === watch.id) {
              if (type === "execution.paused" && watch.dieBeforePause) throw new Error("the executor died");
              watch.events.push(`${type}:${(init as { nodeId?: string }).nodeId ?? ""}`);
            }
            return messaging.publishEvent(type, init, key);
          },
        },
        store: t.store, checkpoints, logger: createLogger("executor", "silent"), recoverOnStart: false, recoverEveryMs: 0,
      }),
    };
    return watch;
  }
  const pauseEvents = (events: readonly string[]) => events.filter((e) => e.startsWith("execution.paused:") || e.startsWith("execution.resumed:"));

  // Chaos seed 975 (docs/dev/chaos.md): a parent took its child's pause; the step wrote the row
  // (paused, its pause in the sub-run named) and its executor died before the step's events.
  // Redis lost the checkpoint holding them, and the child went on. The rebuild took the row's
  // word that the pause was announced, and told an `execution.resumed` with no
  // `execution.paused` before it.
  it("tells no resume of a pause in a sub-run whose step wrote the row and never published its events, after Redis lost the checkpoint", async () => {
    const parentWf = await parentOfChild("untold");
    const watch = pauseWatch();
    const x = watch.executor();
    const row = await t.store.executions.create(tenantId, { workflowId: parentWf, workflowVersion: 1, input: {} });
    watch.id = row.id;
    await x.handle(command("execution.start", { executionId: row.id, tenantId, workflowId: parentWf, workflowVersion: 1, input: {} }));
    const sub = (await t.store.executions.listChildren(tenantId, row.id))[0]!;
    // The child pauses, and tells its parent, whose step writes the row and publishes nothing.
    await t.store.nodeExecutions.recordSteps({ entries: [], executions: [{ id: sub.id, tenantId, stepVersion: 5, patch: { status: "paused", currentState: "w" } }] });
    watch.dieBeforePause = true;
    await expect(x.handle(command("execution.child_paused", { executionId: row.id, tenantId, nodeId: "sub", childKey: sub.childKey!, childExecutionId: sub.id, paused: true, seq: 5, reason: "check" }))).rejects.toThrow();
    expect((await t.store.executions.getById(row.id))!).toMatchObject({ status: "paused", subRunPauses: { sub: sub.id } });
    expect(pauseEvents(watch.events)).toEqual([]);
    // Redis loses the parent's checkpoint; the child goes on, and says so to another replica.
    await loseCheckpoint(row.id);
    await t.store.nodeExecutions.recordSteps({ entries: [], executions: [{ id: sub.id, tenantId, stepVersion: 6, patch: { status: "running", currentState: "w" } }] });
    watch.dieBeforePause = false;
    const y = watch.executor();
    await y.handle(command("execution.child_paused", { executionId: row.id, tenantId, nodeId: "sub", childKey: sub.childKey!, childExecutionId: sub.id, paused: false, seq: 6, reason: "" }));
    // The pause was never told, so neither is its end; the row is running again.
    expect(pauseEvents(watch.events)).toEqual([]);
    expect((await t.store.executions.getById(row.id))!).toMatchObject({ status: "running", subRunPauses: {} });
  });

  // The same with two nodes paused in sub-runs, the first pause told: the row names both, and
  // the last event of each kind cannot say which nodes were told. The run's pause events can.
  it("tells no resume of the one pause in a sub-run whose step never published its events, while another pause was told", async () => {
    const child = await t.store.workflows.create(tenantId, { name: "child-two", slug: `child-two-${prefix}`, definition: { start: "w", nodes: [{ id: "w", type: "tool", config: { tool: "echo" } }], edges: [] } });
    const parentWf = (await t.store.workflows.create(tenantId, {
      name: "parent-two",
      definition: {
        start: "s",
        nodes: [
          { id: "s", type: "transform", config: { expression: "1" } },
          { id: "a", type: "subworkflow", config: { workflow: { slug: child.slug } } },
          { id: "b", type: "subworkflow", config: { workflow: { slug: child.slug } } },
        ],
        edges: [{ from: "s", to: "a" }, { from: "s", to: "b" }],
      },
    })).id;
    const watch = pauseWatch();
    const x = watch.executor();
    await streamKeepsOverASecond();
    const row = await t.store.executions.create(tenantId, { workflowId: parentWf, workflowVersion: 1, input: {} });
    watch.id = row.id;
    await x.handle(command("execution.start", { executionId: row.id, tenantId, workflowId: parentWf, workflowVersion: 1, input: {} }));
    const subs = await t.store.executions.listChildren(tenantId, row.id);
    const subOf = (nodeId: string) => subs.find((c) => c.parentNodeId === nodeId)!;
    const pause = async (e: Executor, nodeId: string, paused: boolean, seq: number) => {
      const sub = subOf(nodeId);
      await t.store.nodeExecutions.recordSteps({ entries: [], executions: [{ id: sub.id, tenantId, stepVersion: seq, patch: { status: paused ? "paused" : "running", currentState: "w" } }] });
      await e.handle(command("execution.child_paused", { executionId: row.id, tenantId, nodeId, childKey: sub.childKey!, childExecutionId: sub.id, paused, seq, reason: paused ? "check" : "" }));
    };
    // a's child pauses, and its parent tells it.
    await pause(x, "a", true, 5);
    expect(pauseEvents(watch.events)).toEqual(["execution.paused:a"]);
    // b's child pauses: the parent's step writes the row, naming both, and publishes nothing.
    watch.dieBeforePause = true;
    await expect(pause(x, "b", true, 5)).rejects.toThrow();
    expect((await t.store.executions.getById(row.id))!).toMatchObject({ status: "paused", subRunPauses: { a: subOf("a").id, b: subOf("b").id } });
    expect(pauseEvents(watch.events)).toEqual(["execution.paused:a"]);
    // Redis loses the parent's checkpoint; b's child goes on, and says so to another replica.
    await loseCheckpoint(row.id);
    watch.dieBeforePause = false;
    await pause(watch.executor(), "b", false, 6);
    // b's pause was never told, so neither is its end; a's still stands.
    expect(pauseEvents(watch.events)).toEqual(["execution.paused:a"]);
    expect((await t.store.executions.getById(row.id))!).toMatchObject({ status: "paused", subRunPauses: { a: subOf("a").id } });
  });
});
