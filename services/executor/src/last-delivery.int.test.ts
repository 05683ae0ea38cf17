/**
 * A command that fails on every delivery, against the real NATS, Redis and Postgres, through
 * the executor's own consumer (its last delivery set to 3, so the retries take about 3 s).
 * Rules checked:
 * - an uncoded fault (here a step that throws, from a checkpoint naming a node the definition
 *   does not have) on the last delivery fails the run: `BATON_EXECUTOR_COMMAND_FAILED` on the
 *   row and in `execution.failed`, naming the command, the deliveries and the fault; the
 *   checkpoint ends `failed` with a null output, and the call still out is cancelled
 *   (`tools.cancel`); the command is not delivered again;
 * - a coded error on the last delivery (services out of reach, and the executor's own
 *   conditions, say so with a code) leaves the run as it was: the consumer gives the command
 *   up, as before.
 */
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { randomBytes } from "node:crypto";
import type { Redis } from "ioredis";
import { jetstreamManager } from "@nats-io/jetstream";
import type { JetStreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import type { NatsConnection } from "@nats-io/transport-node";
import { connectBus } from "@baton/bus";
import type { Bus } from "@baton/bus";
import { createRedis, redisCheckpointStore } from "@baton/checkpoints";
import { decode, ToolCancelSchema, valueFromJson } from "@baton/contracts";
import { createMessaging, decodeEventMessage } from "@baton/messaging";
import type { Messaging } from "@baton/messaging";
import { openTestStore } from "@baton/store/testing";
import type { TestStore } from "@baton/store/testing";
import type { JsonObject } from "@baton/store";
import { createLogger } from "@baton/telemetry";
import { CHECKPOINT_STORE_OPTIONS, createExecutor } from "./executor.ts";
import type { CheckpointState, Executor } from "./executor.ts";
import { removeTestPrefix } from "./test-support.ts";

const NATS = process.env.BATON_NATS_URL ?? "nats://127.0.0.1:4222";
const prefix = `xl${randomBytes(4).toString("hex")}`;
let t: TestStore;
let bus: Bus;
let redis: Redis;
let messaging: Messaging;
let starter: Executor;
let consumer: Executor;
let checkpoints: ReturnType<typeof redisCheckpointStore<CheckpointState>>;
let tenantId: string;
let workflowId: number;
let nc: NatsConnection;
let jsm: JetStreamManager;
const failed: { id: number; code: string; message: string }[] = [];
const cancels: string[][] = [];

const definition = {
  start: "s",
  nodes: [
    { id: "s", type: "setVariable", config: { values: { x: 1 } } },
    { id: "a", type: "tool", config: { tool: "echo" } },
    { id: "b", type: "tool", config: { tool: "echo" } },
    { id: "j", type: "transform", config: { expression: "1" }, join: "any" },
  ],
  edges: [{ from: "s", to: "a" }, { from: "s", to: "b" }, { from: "a", to: "j" }, { from: "b", to: "j" }],
};

const waitFor = async <T>(what: string, read: () => Promise<T | undefined> | T | undefined, ms = 20_000): Promise<T> => {
  const until = Date.now() + ms;
  for (;;) {
    const v = await read();
    if (v !== undefined) return v;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
};

beforeAll(async () => {
  t = await openTestStore({ prefix: "exec_last" });
  bus = await connectBus({ servers: NATS, prefix, name: "executor-last-delivery-test", logger: createLogger("test", "silent") });
  redis = createRedis(process.env.BATON_REDIS_URL ?? "redis://127.0.0.1:6379");
  checkpoints = redisCheckpointStore<CheckpointState>(redis, { prefix, ...CHECKPOINT_STORE_OPTIONS });
  messaging = createMessaging(bus);
  const base = { messaging, store: t.store, checkpoints, logger: createLogger("executor", "silent"), recoverOnStart: false, recoverEveryMs: 0 };
  // One executor starts the runs (handle() called directly); another, with a cache of its own,
  // takes the commands from the bus and so reads the checkpoints the test changed.
  starter = createExecutor(base);
  consumer = createExecutor({ ...base, durable: `last_${prefix}`, commandMaxDeliver: 3 });
  await consumer.start?.();
  nc = await connect({ servers: NATS });
  jsm = await jetstreamManager(nc);
  nc.subscribe(`${prefix}.evt.execution.failed.>`, {
    callback: (_err, m) => {
      const e = decodeEventMessage(prefix, m);
      if (e?.type === "execution.failed") failed.push({ id: Number(e.message.id), code: e.message.error?.code ?? "", message: e.message.error?.message ?? "" });
    },
  });
  nc.subscribe(messaging.subjects.toolCancel(), {
    callback: (_err, m) => {
      cancels.push(decode(ToolCancelSchema, m.data).callIds);
    },
  });
  await nc.flush();
  tenantId = (await t.store.tenants.create("last-delivery")).id;
  workflowId = (await t.store.workflows.create(tenantId, { name: "fan", definition: definition as unknown as JsonObject })).id;
});

afterAll(async () => {
  await consumer?.stop?.();
  await nc?.close();
  await t?.dispose();
  await removeTestPrefix(prefix, redis, bus, NATS);
});

/** A run started and waiting for its two calls, with a checkpoint that makes every step throw (a node "ghost" is ready). */
async function brokenRun(): Promise<number> {
  const row = await t.store.executions.create(tenantId, { workflowId, workflowVersion: 1, input: {} });
  await starter.handle({ name: "execution.start", message: { executionId: row.id, tenantId, workflowId, workflowVersion: 1 } } as never);
  const cp = (await checkpoints.get(row.id))!;
  expect([cp.state.nodes.a?.status, cp.state.nodes.b?.status]).toEqual(["running", "running"]);
  await checkpoints.put(row.id, { ...cp.state, ready: ["ghost"] }, cp.version);
  return row.id;
}

describe("a command that fails on every delivery", () => {
  it("fails its run when the fault is uncoded: the row, the event, the checkpoint, and the call still out cancelled", async () => {
    const id = await brokenRun();
    await messaging.sendCommand("tool.result", { callId: `${id}.a.1`, executionId: id, tenantId, nodeId: "a", attempt: 1, tool: "echo", ok: true, output: valueFromJson({}), durationMs: 1 }, `result:${id}.a.1`);
    const row = await waitFor("the run to fail", async () => {
      const r = await t.store.executions.getById(id);
      return r?.status === "failed" ? r : undefined;
    });
    expect(row.error).toBe('BATON_EXECUTOR_COMMAND_FAILED: the tool.result command could not be applied on any of its 3 deliveries: node "ghost" is not in the definition');
    // The event follows the row (rows before the events that announce them).
    await waitFor("execution.failed", () => (failed.some((f) => f.id === id) ? true : undefined));
    expect(failed.filter((f) => f.id === id)).toEqual([{ id, code: "BATON_EXECUTOR_COMMAND_FAILED", message: expect.stringContaining('node "ghost" is not in the definition') as unknown as string }]);
    const cp = (await checkpoints.get(id))!;
    expect(cp.state).toMatchObject({ status: "failed", output: null, error: { code: "BATON_EXECUTOR_COMMAND_FAILED" } });
    await waitFor("b's call cancelled", () => (cancels.some((c) => c.includes(`${id}.b.1`)) ? true : undefined));
    // Done with: acknowledged once the run is failed (its ack follows the step's records), not
    // left to be delivered again.
    await waitFor("the command acknowledged", async () => {
      const info = await jsm.consumers.info(bus.streams.commands, `last_${prefix}`);
      return info.num_ack_pending + info.num_pending === 0 ? true : undefined;
    });
    expect((await jsm.streams.info(bus.streams.commands)).state.messages).toBe(0);
  });

  it("leaves the run as it was when the error carries a code", async () => {
    const row = await t.store.executions.create(tenantId, { workflowId, workflowVersion: 1, input: {} });
    const id = row.id;
    await starter.handle({ name: "execution.start", message: { executionId: id, tenantId, workflowId, workflowVersion: 1 } } as never);
    // An answer to a call the run does not have: BATON_EXECUTOR_RESULT_BEFORE_CALL (coded,
    // retryable) on each delivery, as the call may still come; the consumer then gives it up.
    await messaging.sendCommand("tool.result", { callId: `${id}.nowhere.1`, executionId: id, tenantId, nodeId: "nowhere", attempt: 1, tool: "echo", ok: true, output: valueFromJson({}), durationMs: 1 }, `result:${id}.nowhere.1`);
    await waitFor("the command given up", async () => {
      const info = await jsm.consumers.info(bus.streams.commands, `last_${prefix}`);
      return info.num_ack_pending + info.num_pending === 0 && info.delivered.consumer_seq > 1 ? true : undefined;
    });
    expect((await t.store.executions.getById(id))!.status).toBe("running");
    expect((await checkpoints.get(id))!.state.status).toBe("running");
    expect(failed.some((f) => f.id === id)).toBe(false);
  });
});
