/**
 * Runs whose next command is lost (given up by the consumer after an outage outlasting its
 * deliveries, or terminated), against the real NATS, Redis and Postgres. The commands go to the
 * stream and nothing consumes them; the test purges the stream to lose them, then runs the
 * recovery sweep with the executor's clock moved past the grace, and hands the commands the
 * sweep sent (read back from the stream) to the executor, as its consumer would. Rules checked:
 * - a timer (here a delay's) overdue by more than a minute is sent again by the sweep, and fires;
 * - a finished child whose `execution.child_result` was lost, a minute after it ended, has its
 *   result sent again from its row by the sweep, and the parent goes on;
 * - a child whose `execution.start` was lost, still queued a minute after, is sent its start
 *   again by the sweep, and the parent goes on;
 * - a call whose answer the worker recorded (its `tool.result` lost) a minute ago is answered
 *   from the record;
 * - a timer not yet overdue, a child still running, an answer recorded within the minute and a
 *   call with no recorded answer that the tools queue still holds (waiting for a worker, or taken
 *   and not acked: being handled) are left alone (the sweep sends nothing for them);
 * - a call with no recorded answer that the queue no longer holds (a worker acked it before
 *   answering and went away), a minute after its run's last step, is failed by the sweep with
 *   BATON_EXECUTOR_CALL_LOST (retryable), recorded as the call's result first;
 * - a run whose ready nodes wait for a slot under `limits.maxConcurrency` is sent nothing;
 * - a checkpoint that cannot be decoded is removed and rebuilt from the journal (the sweep sends
 *   the run `execution.continue`), and the run goes on;
 * - a command delivered again sends its steps' calls marked `resent` (a worker then answers from
 *   its record); a first delivery's calls are not; after a rebuild from the journal, the run's
 *   calls are marked so too, and a call the queue drops as a repeat (sent within its duplicate
 *   window) is answered at once from its record, not by a sweep a minute later;
 * - a rebuild that tells a cancel's end, its executor having died after the cancel's rows, also
 *   cancels the calls the cancel stopped;
 * - records refused by another executor's rebuild leave the run to that rebuild for three
 *   seconds (a command delivered meanwhile comes back later, the floor untouched), and past
 *   them while that rebuild holds its claim on the run, after which the executor rebuilds the
 *   run itself; a rebuild claims the run while it works and drops the claim when done; a
 *   rebuild that fenced and then lost the compare-and-set rebuilds again at once over the
 *   checkpoint written meanwhile.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "@jest/globals";
import { randomBytes } from "node:crypto";
import type { Redis } from "ioredis";
import { jetstreamManager } from "@nats-io/jetstream";
import type { JetStreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import type { NatsConnection } from "@nats-io/transport-node";
import { connectBus } from "@baton/bus";
import type { Bus } from "@baton/bus";
import { createRedis, redisCheckpointStore } from "@baton/checkpoints";
import { COMMANDS, decode, encode, ToolCallSchema, ToolCancelSchema, valueFromJson } from "@baton/contracts";
import { createMessaging, RESULTS_BUCKET } from "@baton/messaging";
import type { Messaging } from "@baton/messaging";
import { openTestStore } from "@baton/store/testing";
import type { TestStore } from "@baton/store/testing";
import type { JsonObject } from "@baton/store";
import { createLogger } from "@baton/telemetry";
import { CHECKPOINT_STORE_OPTIONS, createExecutor } from "./executor.ts";
import type { CheckpointState, Executor } from "./executor.ts";
import { commandsSentBy, removeTestPrefix } from "./test-support.ts";

const NATS = process.env.BATON_NATS_URL ?? "nats://127.0.0.1:4222";
const prefix = `xs${randomBytes(4).toString("hex")}`;
let t: TestStore;
let bus: Bus;
let redis: Redis;
let messaging: Messaging;
let ex: Executor;
let checkpoints: ReturnType<typeof redisCheckpointStore<CheckpointState>>;
let tenantId: string;
let nc: NatsConnection;
let jsm: JetStreamManager;
/** How far the executor's clock is ahead of the wall clock. */
let skewMs = 0;

beforeAll(async () => {
  t = await openTestStore({ prefix: "exec_stuck" });
  bus = await connectBus({ servers: NATS, prefix, name: "executor-stuck-test", logger: createLogger("test", "silent") });
  redis = createRedis(process.env.BATON_REDIS_URL ?? "redis://127.0.0.1:6379");
  checkpoints = redisCheckpointStore<CheckpointState>(redis, { prefix, ...CHECKPOINT_STORE_OPTIONS });
  messaging = createMessaging(bus);
  // No consumer: commands are applied with handle() or by the sweep, and what the steps send stays in the stream.
  ex = createExecutor({ messaging, store: t.store, checkpoints, logger: createLogger("executor", "silent"), recoverOnStart: false, recoverEveryMs: 0, clock: () => new Date(Date.now() + skewMs) });
  nc = await connect({ servers: NATS });
  jsm = await jetstreamManager(nc);
  tenantId = (await t.store.tenants.create("stuck")).id;
});

beforeEach(() => {
  skewMs = 0;
});

afterAll(async () => {
  await nc?.close();
  await t?.dispose();
  await removeTestPrefix(prefix, redis, bus, NATS);
});

async function workflow(name: string, definition: object): Promise<number> {
  return (await t.store.workflows.create(tenantId, { name, definition: definition as JsonObject })).id;
}

/** A run started, and idle: its records written and its outbox dropped from Redis (else the sweep would send it a continue for it). */
async function started(workflowId: number): Promise<number> {
  const row = await t.store.executions.create(tenantId, { workflowId, workflowVersion: 1, input: {} });
  await ex.handle({ name: "execution.start", message: { executionId: row.id, tenantId, workflowId, workflowVersion: 1 } } as never);
  const until = Date.now() + 5_000;
  while ((await redis.hget(`${prefix}:checkpoint:{${row.id}}`, "u")) !== null) {
    if (Date.now() > until) throw new Error(`execution ${row.id} kept its outbox`);
    await new Promise((r) => setTimeout(r, 20));
  }
  return row.id;
}

/** The recovery sweep, then the commands it sent, handled as the consumer would (this suite has none); resolves with the names of those for run `id`. */
async function sweep(id: number): Promise<string[]> {
  const sent = await commandsSentBy(bus, NATS, () => ex.recover());
  for (const c of sent) await ex.handle(c);
  return sent.filter((c) => c.message.executionId === id).map((c) => c.name);
}

/** Every command sent so far is lost. */
async function loseCommands(): Promise<void> {
  await jsm.streams.purge(bus.streams.commands);
}

/** Redis loses the run's checkpoint (and its history). */
async function loseCheckpoint(id: number): Promise<void> {
  const key = `${prefix}:checkpoint:{${id}}`;
  await redis.del(key, `${key}:history`, `${key}:fwd`);
}

/** A run of two tool nodes, x (tool `{tool}.x`) then y, started: x's call is out. */
async function startedTwoTools(tool: string): Promise<number> {
  return started(await workflow(tool, {
    nodes: [{ id: "x", type: "tool", config: { tool: `${tool}.x` } }, { id: "y", type: "tool", config: { tool: `${tool}.y` } }], edges: [{ from: "x", to: "y" }],
  }));
}

/** A worker's answer to the first attempt of node `nodeId` (tool `tool`), as the consumer hands it over. */
function answerOf(id: number, nodeId: string, tool: string): never {
  const init = { callId: `${id}.${nodeId}.1`, executionId: id, tenantId, nodeId, attempt: 1, tool, ok: true, output: valueFromJson({}), durationMs: 1 };
  return { name: "tool.result", message: decode(COMMANDS["tool.result"], encode(COMMANDS["tool.result"], init)) } as never;
}

/** A sweep within the lost-command grace (30 s) leaves the run waiting; one past it (120 s) sends `command` again, and the run ends as `expected`. */
async function sweptOnlyPastGrace(id: number, command: string, expected: { status: string; output: unknown }): Promise<void> {
  skewMs = 30_000;
  expect(await sweep(id)).toEqual([]);
  expect((await checkpoints.get(id))!.state.status).toBe("running");
  skewMs = 120_000;
  expect(await sweep(id)).toEqual([command]);
  expect(await ended(id)).toMatchObject(expected);
}

/** The row once it has ended (the sweep's steps write their records after it returns). */
async function ended(id: number): Promise<{ status: string; output: unknown }> {
  const until = Date.now() + 10_000;
  for (;;) {
    const row = (await t.store.executions.getById(id))!;
    if (row.status !== "running" && row.status !== "paused") return row;
    if (Date.now() > until) throw new Error(`execution ${id} is still ${row.status}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe("the recovery sweep and a lost command", () => {
  it("sends again a timer overdue by more than a minute (a delay whose timer message was lost), which fires", async () => {
    const id = await started(await workflow("delay", {
      start: "d",
      nodes: [{ id: "d", type: "delay", config: { ms: 1000 } }, { id: "t", type: "transform", config: { expression: "42" } }],
      edges: [{ from: "d", to: "t" }],
      output: { v: "$.t" },
    }));
    expect((await checkpoints.get(id))!.state.timers).toEqual({ "delay:d:1": expect.objectContaining({ kind: "delay" }) as unknown });
    await loseCommands();
    // Due, but not overdue by the grace: its message may still come.
    await sweptOnlyPastGrace(id, "execution.timer", { status: "completed", output: { v: 42 } });
  });

  /** A run whose subworkflow node `sub` waits for a child answering `{ c: value }`: its row made and its start sent. */
  async function parentOfChild(name: string, value: number): Promise<{ id: number; childWf: number; child: Awaited<ReturnType<typeof t.store.executions.listChildren>>[number] }> {
    const childWf = await workflow(`${name}-child`, { start: "c", nodes: [{ id: "c", type: "transform", config: { expression: String(value) } }], output: { c: "$.c" } });
    const id = await started(await workflow(name, {
      start: "sub",
      nodes: [{ id: "sub", type: "subworkflow", config: { workflow: { id: childWf } } }],
      output: { got: "$.sub" },
    }));
    const [child] = await t.store.executions.listChildren(tenantId, id);
    expect(child?.status).toBe("queued");
    return { id, childWf, child: child! };
  }

  it("sends a finished child's lost result again from its row when the parent still waits for it", async () => {
    const { id, childWf, child } = await parentOfChild("parent", 7);
    // The child's start was sent; nothing took it yet: the sweep sends the parent nothing (the
    // child's start it sends again only once the child has been queued for a minute: the next test).
    skewMs = 30_000;
    expect(await sweep(id)).toEqual([]);
    expect((await checkpoints.get(id))!.state.status).toBe("running");
    skewMs = 0;
    await ex.handle({ name: "execution.start", message: { executionId: child.id, tenantId, workflowId: childWf, workflowVersion: 1, parentExecutionId: id, parentNodeId: "sub", childKey: child.childKey ?? "", triggerEvent: "subworkflow" } } as never);
    expect((await checkpoints.get(child.id))!.state.status).toBe("completed");
    // Its child_result is lost.
    await loseCommands();
    await sweptOnlyPastGrace(id, "execution.child_result", { status: "completed", output: { got: { c: 7 } } });
  });

  it("sends a child's lost start again when the child is still queued a minute after, and the parent goes on", async () => {
    const { id, childWf, child } = await parentOfChild("parent-of-queued", 8);
    // Its start is lost (given up by the consumer after an outage).
    await loseCommands();
    const startsOf = async () => (await commandsSentBy(bus, NATS, () => ex.recover())).filter((c) => c.name === "execution.start" && c.message.executionId === child.id);
    skewMs = 30_000;
    expect(await startsOf()).toEqual([]);
    skewMs = 120_000;
    const [start, ...more] = await startsOf();
    expect([start?.message, more]).toEqual([expect.objectContaining({ parentExecutionId: id, parentNodeId: "sub", childKey: child.childKey, workflowId: childWf }), []]);
    // The child runs, and its result reaches the parent.
    for (const c of await commandsSentBy(bus, NATS, () => ex.handle(start!))) await ex.handle(c);
    expect(await ended(id)).toMatchObject({ status: "completed", output: { got: { c: 8 } } });
  });

  it("a cancelled child's result sent again from its row tells the cancel's reason", async () => {
    const childWf = await workflow("slow-child", { start: "d", nodes: [{ id: "d", type: "delay", config: { ms: 600_000 } }] });
    const id = await started(await workflow("parent-of-slow", { start: "sub", nodes: [{ id: "sub", type: "subworkflow", config: { workflow: { id: childWf } } }] }));
    const [child] = await t.store.executions.listChildren(tenantId, id);
    await ex.handle({ name: "execution.start", message: { executionId: child!.id, tenantId, workflowId: childWf, workflowVersion: 1, parentExecutionId: id, parentNodeId: "sub", childKey: child!.childKey ?? "", triggerEvent: "subworkflow" } } as never);
    await ex.handle({ name: "execution.cancel", message: { executionId: child!.id, tenantId, reason: "no longer needed" } } as never);
    expect((await t.store.executions.getById(child!.id))!.error).toBe("BATON_CANCELLED: no longer needed");
    // Its child_result is lost; the one sent again from its row carries the reason.
    await loseCommands();
    skewMs = 120_000;
    expect(await sweep(id)).toEqual(["execution.child_result"]);
    expect(await ended(id)).toMatchObject({ status: "failed", error: "BATON_CHILD_CANCELLED: node \"sub\" failed after 1 attempt(s): child run cancelled: no longer needed" });
  });

  it("sends a tool call's recorded answer again when its tool.result was lost; a call with no answer recorded is left waiting", async () => {
    const wf = await workflow("tool", { start: "x", nodes: [{ id: "x", type: "tool", config: { tool: "echo" } }], output: { x: "$.x" } });
    const answered = await started(wf);
    const waiting = await started(wf);
    // The worker recorded its answer and sent it; the answer was lost. (Workers make the bucket.)
    await bus.kv(RESULTS_BUCKET);
    await messaging.recordToolResult(`${answered}.x.1`, { ok: true, output: { a: 1 }, durationMs: 3, workerId: "w1" });
    await loseCommands();
    // Recorded within the grace: its tool.result may still be on its way (the sweep used to
    // send every recorded answer at once, and warn that it was overdue, on healthy runs too).
    skewMs = 30_000;
    expect(await sweep(answered)).toEqual([]);
    skewMs = 120_000;
    const sent = await commandsSentBy(bus, NATS, () => ex.recover());
    expect(sent.filter((c) => c.message.executionId === answered || c.message.executionId === waiting).map((c) => `${c.name} ${c.message.executionId}`)).toEqual([`tool.result ${answered}`]);
    for (const c of sent) await ex.handle(c);
    expect(await ended(answered)).toMatchObject({ status: "completed", output: { x: { a: 1 } } });
    expect((await checkpoints.get(waiting))!.state).toMatchObject({ status: "running", nodes: { x: { status: "running", callId: `${waiting}.x.1` } } });
  });
});

describe("a call taken from the tools queue and never answered", () => {
  /** A worker outside the SDK that takes `tool`'s calls and calls `onCall` for each; the call is acked when it resolves. */
  function worker(tool: string, onCall: () => Promise<void>): Promise<{ stop(): Promise<void> }> {
    return bus.consume({ stream: "tools", durable: `rogue-${tool.replace(/\W/g, "_")}`, filterSubjects: [messaging.subjects.toolCall(tool)], ack: "plain" }, onCall);
  }
  const held = async (callId: string) => (await messaging.queuedToolCalls(1_000))!.has(callId);
  const wfOf = (tool: string) => workflow(tool, { start: "x", nodes: [{ id: "x", type: "tool", config: { tool } }], output: { x: "$.x" } });

  it("fails the attempt with BATON_EXECUTOR_CALL_LOST a minute after the run's last step, its failure recorded as the call's result", async () => {
    const tool = `lost${randomBytes(3).toString("hex")}`;
    const id = await started(await wfOf(tool));
    await bus.kv(RESULTS_BUCKET);
    expect(await held(`${id}.x.1`)).toBe(true);
    // A worker that acks a call before it answers, and dies before it answers.
    let taken!: () => void;
    const took = new Promise<void>((r) => (taken = r));
    const rogue = await worker(tool, async () => taken());
    await took;
    await rogue.stop();
    const until = Date.now() + 5_000;
    while (await held(`${id}.x.1`)) {
      if (Date.now() > until) throw new Error("the call's ack never reached the queue");
      await new Promise((r) => setTimeout(r, 20));
    }
    // Within the grace after the run's last step: a call just taken may still be answered.
    skewMs = 30_000;
    expect(await sweep(id)).toEqual([]);
    skewMs = 120_000;
    expect(await sweep(id)).toEqual(["tool.result"]);
    expect(await ended(id)).toMatchObject({ status: "failed", error: expect.stringMatching(/^BATON_EXECUTOR_CALL_LOST: node "x" failed after 1 attempt\(s\): tool call \S+ was taken from the tools queue and never answered/) as unknown });
    // Recorded first: a worker that gets the call after all answers with this failure.
    expect((await messaging.recordedToolResult(`${id}.x.1`))?.result).toMatchObject({ ok: false, error: { code: "BATON_EXECUTOR_CALL_LOST", retryable: true } });
  });

  it("leaves a call taken and not acked yet (a worker still at it) waiting, past the grace", async () => {
    const tool = `busy${randomBytes(3).toString("hex")}`;
    const id = await started(await wfOf(tool));
    let taken!: () => void;
    const took = new Promise<void>((r) => (taken = r));
    let finish!: () => void;
    const finished = new Promise<void>((r) => (finish = r));
    const busy = await worker(tool, async () => {
      taken();
      await finished;
    });
    try {
      await took;
      skewMs = 120_000;
      expect(await sweep(id)).toEqual([]);
      expect((await checkpoints.get(id))!.state).toMatchObject({ status: "running", nodes: { x: { status: "running", callId: `${id}.x.1` } } });
      expect(await messaging.recordedToolResult(`${id}.x.1`)).toBeNull();
    } finally {
      finish();
      await busy.stop();
    }
  });
});

describe("records refused by another executor's rebuild", () => {
  it("leave the run to that rebuild for a while, rather than fence it out in turn, then rebuild it here", async () => {
    const id = await startedTwoTools("fenced");
    // Another executor lost the checkpoint, fenced the journal and is rebuilding the run (it may
    // wait a second for records in flight before it writes its checkpoint).
    const floor = await t.store.executions.fenceJournal(id, tenantId, 1000);
    const answer = answerOf(id, "x", "fenced.x");
    // This executor steps on the checkpoint Redis still holds: its records are refused.
    await expect(ex.handle(answer, 1)).rejects.toMatchObject({ retryable: true });
    // Delivered again at once: the checkpoint is still below the floor, and the rebuild is left to write its own.
    await expect(ex.handle(answer, 2)).rejects.toMatchObject({ code: "BATON_EXECUTOR_REBUILD_AWAITED", retryable: true });
    expect(await t.store.executions.journalFloor(id, tenantId)).toBe(floor);
    // No checkpoint came: the rebuilder is taken for dead, and this executor rebuilds the run and applies the answer.
    skewMs = 5_000;
    await ex.handle(answer, 3);
    expect(await t.store.executions.journalFloor(id, tenantId)).toBeGreaterThan(floor);
    expect((await checkpoints.get(id))!.state.nodes).toMatchObject({ x: { status: "completed" }, y: { status: "running" } });
  });

  it("wait on past those seconds while the rebuild holds its claim (a slow rebuild, alive), and rebuild once it lapses", async () => {
    const id = await startedTwoTools("claimed");
    const floor = await t.store.executions.fenceJournal(id, tenantId, 1000);
    // The other executor's rebuild claims the run while it works.
    expect(await checkpoints.claimRebuild(id, floor, "slow-rebuild", 60_000)).toBe(true);
    const answer = answerOf(id, "x", "claimed.x");
    await expect(ex.handle(answer, 1)).rejects.toMatchObject({ retryable: true });
    skewMs = 5_000;
    await expect(ex.handle(answer, 2)).rejects.toMatchObject({ code: "BATON_EXECUTOR_REBUILD_AWAITED", retryable: true });
    expect(await t.store.executions.journalFloor(id, tenantId)).toBe(floor);
    // A claim of an earlier fence does not hold it.
    await checkpoints.releaseRebuild(id, floor, "slow-rebuild");
    expect(await checkpoints.claimRebuild(id, floor - 1, "older-rebuild", 60_000)).toBe(true);
    await ex.handle(answer, 3);
    expect(await t.store.executions.journalFloor(id, tenantId)).toBeGreaterThan(floor);
    expect((await checkpoints.get(id))!.state.nodes).toMatchObject({ x: { status: "completed" }, y: { status: "running" } });
  });
});

describe("a rebuild", () => {
  it("claims the run while it works, and drops the claim when done", async () => {
    const id = await startedTwoTools("claiming");
    await loseCheckpoint(id);
    const during: ({ floor: number; owner: string } | null)[] = [];
    const store: typeof t.store = {
      ...t.store,
      nodeExecutions: {
        ...t.store.nodeExecutions,
        listForReplay: async (executionId) => {
          if (executionId === id) during.push(await checkpoints.rebuildClaim(id));
          return t.store.nodeExecutions.listForReplay(executionId);
        },
      },
    };
    const x = createExecutor({ messaging, store, checkpoints, logger: createLogger("executor", "silent"), recoverOnStart: false, recoverEveryMs: 0 });
    await x.handle(answerOf(id, "x", "claiming.x"), 1);
    const floor = (await t.store.executions.journalFloor(id, tenantId))!;
    expect(during.length).toBeGreaterThan(0);
    for (const held of during) expect(held).toMatchObject({ floor });
    expect(await checkpoints.rebuildClaim(id)).toBeNull();
    expect((await checkpoints.get(id))!.state.nodes).toMatchObject({ x: { status: "completed" }, y: { status: "running" } });
  });
});

describe("a rebuild that loses the compare-and-set after its fence", () => {
  it("rebuilds again at once over the checkpoint written meanwhile (below its fence), waiting for no other rebuild", async () => {
    const id = await startedTwoTools("lost");
    const before = (await checkpoints.get(id))!;
    await loseCheckpoint(id);
    // While this executor rebuilds the run (its fence raised), another replica writes a
    // checkpoint first: the lost state, numbered below the fence (a step taken on it, or a
    // rebuild that fenced before this one).
    let raced = false;
    const racing: typeof checkpoints = {
      ...checkpoints,
      put: async (executionId, state, expected, o) => {
        if (!raced && executionId === id && expected === 0) {
          raced = true;
          await checkpoints.put(id, before.state, 0);
        }
        return checkpoints.put(executionId, state, expected, o);
      },
    };
    const x = createExecutor({ messaging, store: t.store, checkpoints: racing, logger: createLogger("executor", "silent"), recoverOnStart: false, recoverEveryMs: 0, clock: () => new Date(Date.now() + skewMs) });
    const answer = answerOf(id, "x", "lost.x");
    // Applied again at once (the compare-and-set lost): that checkpoint is rebuilt over, and
    // the answer applied, on this delivery; before, a step on it was refused by the fence.
    await x.handle(answer, 1);
    expect(raced).toBe(true);
    expect((await checkpoints.get(id))!.state.nodes).toMatchObject({ x: { status: "completed" }, y: { status: "running" } });
  });
});

describe("a rebuild whose row finished before its fence", () => {
  it("does not rebuild the run from the row it read before: a cancel that landed meanwhile stands", async () => {
    const id = await startedTwoTools("late");
    await loseCheckpoint(id);
    // Between this executor's read of the row (running) and its rebuild's fence, another
    // replica's cancel lands: x's attempt failed with BATON_CANCELLED, the row cancelled.
    let landed = false;
    const store: typeof t.store = {
      ...t.store,
      executions: {
        ...t.store.executions,
        fenceJournal: async (executionId, tenant, room) => {
          if (!landed && executionId === id) {
            landed = true;
            const at = new Date();
            await t.store.nodeExecutions.recordSteps({
              entries: [{ tenantId, executionId: id, nodeId: "x", nodeType: "tool", attempt: 1, status: "failed", errorCode: "BATON_CANCELLED", error: "stop", completedAt: at, stepVersion: 3 }],
              executions: [{ id, tenantId, stepVersion: 3, patch: { status: "cancelled", error: "BATON_CANCELLED: stop", completedAt: at } }],
            });
          }
          return t.store.executions.fenceJournal(executionId, tenant, room);
        },
      },
    };
    const x = createExecutor({ messaging, store, checkpoints, logger: createLogger("executor", "silent"), recoverOnStart: false, recoverEveryMs: 0 });
    const answer = answerOf(id, "x", "late.x");
    await x.handle(answer, 1).catch(() => undefined);
    expect(landed).toBe(true);
    expect((await t.store.executions.getById(id))!.status).toBe("cancelled");
    // The end, never published, is told from the journal; nothing went on after the cancel.
    const cp = await checkpoints.get(id);
    expect(cp?.state.status ?? "expired").not.toBe("running");
    expect(cp?.state.nodes.y).toBeUndefined();
    const ends = await bus.lastPerSubject(`${prefix}.evt.execution.*.${tenantId}.${id}`);
    expect(ends.map((m) => m.subject.split(".")[3]).sort()).toEqual(["cancelled", "started"]);
    // With the reason the row keeps.
    const end = ends.find((m) => m.subject.split(".")[3] === "cancelled")!;
    expect(JSON.parse(new TextDecoder().decode(end.data))).toMatchObject({ reason: "stop" });
    const lastStarted = await bus.lastPerSubject(`${prefix}.evt.node.started.${tenantId}.${id}`);
    expect(lastStarted.map((m) => (JSON.parse(new TextDecoder().decode(m.data)) as { node_id?: string }).node_id)).toEqual(["x"]);
  });
});

describe("a cancel whose executor died after its rows", () => {
  it("has the calls it stopped cancelled by the rebuild that tells its end (they ran on before)", async () => {
    const id = await startedTwoTools("stopped");
    // The cancel's rows landed (x's attempt failed with BATON_CANCELLED, the row cancelled); its
    // executor died before it told the workers to stop x's call, and before the events. Then Redis
    // lost the checkpoint, whose outbox held both.
    const at = new Date();
    await t.store.nodeExecutions.recordSteps({
      entries: [{ tenantId, executionId: id, nodeId: "x", nodeType: "tool", attempt: 1, status: "failed", errorCode: "BATON_CANCELLED", error: "stop", completedAt: at, stepVersion: 3 }],
      executions: [{ id, tenantId, stepVersion: 3, patch: { status: "cancelled", error: "BATON_CANCELLED: stop", completedAt: at } }],
    });
    await loseCheckpoint(id);
    const cancels: string[][] = [];
    const sub = nc.subscribe(messaging.subjects.toolCancel(), {
      callback: (_err, m) => {
        cancels.push(decode(ToolCancelSchema, m.data).callIds);
      },
    });
    await nc.flush();
    try {
      // The cancel, delivered again: the run has ended, its end untold, and it is rebuilt.
      await ex.handle({ name: "execution.cancel", message: { executionId: id, tenantId, reason: "stop" } } as never, 2);
      const until = Date.now() + 5_000;
      while (!cancels.some((ids) => ids.includes(`${id}.x.1`)) && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
    } finally {
      sub.unsubscribe();
    }
    expect(cancels).toContainEqual([`${id}.x.1`]);
    const ends = await bus.lastPerSubject(`${prefix}.evt.execution.*.${tenantId}.${id}`);
    expect(ends.map((m) => m.subject.split(".")[3]).sort()).toEqual(["cancelled", "started"]);
  });
});

describe("a run with ready nodes", () => {
  it("is left alone while they wait for a slot under limits.maxConcurrency (its running call's answer starts them)", async () => {
    const id = await started(await workflow("capped", {
      start: "s",
      limits: { maxConcurrency: 1 },
      nodes: [{ id: "s", type: "setVariable", config: { values: {} } }, { id: "a", type: "tool", config: { tool: "echo" } }, { id: "b", type: "tool", config: { tool: "echo" } }],
      edges: [{ from: "s", to: "a" }, { from: "s", to: "b" }],
    }));
    const state = (await checkpoints.get(id))!.state;
    expect([state.nodes.a?.status, state.ready]).toEqual(["running", ["b"]]);
    // Long past the ten seconds after which a run holding ready nodes with nothing running is sent a continue.
    skewMs = 120_000;
    expect(await sweep(id)).toEqual([]);
  });
});

describe("a damaged checkpoint", () => {
  it("is removed and rebuilt from the journal: the run goes on (it used to fail every command with BATON_CHECKPOINT_CORRUPT)", async () => {
    const id = await started(await workflow("corrupt", { start: "x", nodes: [{ id: "x", type: "tool", config: { tool: "echo" } }] }));
    await redis.hset(`${prefix}:checkpoint:{${id}}`, "s", "{not json");
    // The sweep (which reads Redis, not this process's cache) sends the run a continue, which rebuilds it from the journal.
    expect(await sweep(id)).toEqual(["execution.continue"]);
    expect((await checkpoints.get(id))!.state).toMatchObject({ status: "running", nodes: { x: { status: "running" } } });
    // And the run can be told what to do again: here, stopped.
    await ex.handle({ name: "execution.cancel", message: { executionId: id, tenantId, reason: "stop" } } as never);
    expect(await ended(id)).toMatchObject({ status: "cancelled" });
  });
});

describe("a command delivered again", () => {
  /** The call the start of a run of one tool node sent, as a worker gets it, when the start was delivered `delivery` times. */
  async function startedCall(tool: string, delivery?: number): Promise<{ callId: string; resent: boolean }> {
    const wf = await workflow(`again-${tool}`, { nodes: [{ id: "call", type: "tool", config: { tool } }], edges: [] });
    const row = await t.store.executions.create(tenantId, { workflowId: wf, workflowVersion: 1, input: {} });
    await ex.handle({ name: "execution.start", message: { executionId: row.id, tenantId, workflowId: wf, workflowVersion: 1 } } as never, delivery);
    const msg = await jsm.streams.getMessage(bus.streams.tools, { last_by_subj: messaging.subjects.toolCall(tool) });
    const call = decode(ToolCallSchema, msg!.data);
    return { callId: call.callId, resent: call.resent };
  }

  it("marks the calls of its steps as sent again, so that a worker answers from its record past the queue's duplicate window", async () => {
    // A first delivery's calls are new: the worker skips the record lookup.
    expect(await startedCall("again.first", 1)).toMatchObject({ resent: false });
    // A later delivery may follow one that sent the same calls and never wrote its checkpoint,
    // more than the tools stream's two-minute duplicate window ago (deliveries back off).
    expect(await startedCall("again.second", 2)).toMatchObject({ resent: true });
  });

  it("after a rebuild from the journal, marks the run's calls as sent again (lost steps may have sent them)", async () => {
    const wf = await workflow("again-rebuilt", { nodes: [{ id: "a", type: "tool", config: { tool: "again.a" } }, { id: "b", type: "tool", config: { tool: "again.b" } }], edges: [{ from: "a", to: "b" }] });
    const id = await started(wf);
    const lastCall = async (tool: string) => decode(ToolCallSchema, (await jsm.streams.getMessage(bus.streams.tools, { last_by_subj: messaging.subjects.toolCall(tool) }))!.data);
    expect(await lastCall("again.a")).toMatchObject({ callId: `${id}.a.1`, resent: false });
    // Redis loses the checkpoint; the sweep's continue rebuilds the run from the journal.
    await loseCheckpoint(id);
    expect(await sweep(id)).toEqual(["execution.continue"]);
    // a's answer (a first delivery) starts b on the rebuilt state.
    const answer = answerOf(id, "a", "again.a");
    await ex.handle(answer, 1);
    expect((await checkpoints.get(id))!.state).toMatchObject({ rebuilt: true, nodes: { a: { status: "completed" }, b: { status: "running" } } });
    expect(await lastCall("again.b")).toMatchObject({ callId: `${id}.b.1`, resent: true });
  });

  it("after a rebuild, sends the run the recorded answer of a call the queue drops as a repeat, at once, not a sweep later", async () => {
    // A forEach's items: their answers are in no journal row, so a rebuild sends their calls
    // again, within the tools stream's duplicate window of the first send: no worker gets them.
    const wf = await workflow("again-dropped", {
      nodes: [{ id: "each", type: "forEach", config: { items: "$.input.xs", tool: "again.each", concurrency: 1, itemInput: { v: "$.item" } } }], edges: [], output: { each: "$.each" },
    });
    const row = await t.store.executions.create(tenantId, { workflowId: wf, workflowVersion: 1, input: { xs: [1, 2] } });
    await ex.handle({ name: "execution.start", message: { executionId: row.id, tenantId, workflowId: wf, workflowVersion: 1 } } as never);
    const id = row.id;
    const first = `${id}.each.1.0`;
    expect((await checkpoints.get(id))!.state.nodes.each?.fan?.items[0]).toMatchObject({ key: first, status: "running" });
    // The worker answered the first item and recorded it; the answer went to a checkpoint Redis then lost.
    await bus.kv(RESULTS_BUCKET);
    await messaging.recordToolResult(first, { ok: true, output: { v: 1 }, durationMs: 2, workerId: "w1" });
    await loseCommands();
    await loseCheckpoint(id);
    const sweepSent = await commandsSentBy(bus, NATS, () => ex.recover());
    expect(sweepSent.filter((c) => c.message.executionId === id).map((c) => c.name)).toEqual(["execution.continue"]);
    // The rebuild sends the first item's call again; the queue drops it, and its record is the answer.
    const rebuildSent = await commandsSentBy(bus, NATS, async () => {
      for (const c of sweepSent) await ex.handle(c);
    });
    expect(rebuildSent.filter((c) => c.message.executionId === id).map((c) => `${c.name} ${(c.message as { callId?: string }).callId ?? ""}`)).toEqual([`tool.result ${first}`]);
    for (const c of rebuildSent) await ex.handle(c);
    const items = (await checkpoints.get(id))!.state.nodes.each?.fan?.items ?? [];
    expect(items.map((it) => it.status)).toEqual(["done", "running"]);
  });
});
