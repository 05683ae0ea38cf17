/**
 * The floor: the least work a durable, bus-driven engine does per node, on the same
 * NATS and Redis as Baton. Per node, the driver publishes a work item to a JetStream
 * work-queue stream (waiting for the publish ack); a worker takes it, acks it and
 * publishes a result to a second work-queue stream (publish ack awaited); the driver
 * takes the result, acks it, and writes a checkpoint with one Redis compare-and-set
 * (`redisCheckpointStore.put`, the Lua script Baton's executor uses). Parallel nodes
 * of one execution run at once; their checkpoint writes are serialised per execution,
 * as a compare-and-set on one key must be.
 */
import { randomBytes } from "node:crypto";
import { performance } from "node:perf_hooks";
import type { ConsumerMessages, JsMsg } from "@nats-io/jetstream";
import { AckPolicy, RetentionPolicy, StorageType, jetstream, jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { createRedis, redisCheckpointStore } from "@baton/checkpoints";
import type { BenchSystem } from "./system.ts";
import { predecessors } from "./stats.ts";
import type { BenchGraph, ExecutionTrace } from "./stats.ts";

export interface FloorOptions {
  natsUrl: string;
  redisUrl: string;
  /** Work items the worker handles at once (Baton's tool worker default). @default 16 */
  workerConcurrency?: number;
}

const utf8 = new TextEncoder();
const text = new TextDecoder();

export async function createFloor(opts: FloorOptions): Promise<BenchSystem & { roundTrip(): Promise<number> }> {
  const id = randomBytes(4).toString("hex");
  const p = `benchfloor${id}`;
  const streams = { work: `BENCHFLOOR_${id}_WORK`, results: `BENCHFLOOR_${id}_RESULTS` };
  const nc = await connect({ servers: opts.natsUrl, name: "bench-floor", noAsyncTraces: true });
  const jsm = await jetstreamManager(nc);
  const js = jetstream(nc);
  const common = { retention: RetentionPolicy.Workqueue, storage: StorageType.File, num_replicas: 1 };
  await jsm.streams.add({ ...common, name: streams.work, subjects: [`${p}.work`] });
  await jsm.streams.add({ ...common, name: streams.results, subjects: [`${p}.result`] });
  const consumer = { ack_policy: AckPolicy.Explicit, max_ack_pending: 10_000, ack_wait: 30_000_000_000 };
  await jsm.consumers.add(streams.work, { ...consumer, durable_name: "worker" });
  await jsm.consumers.add(streams.results, { ...consumer, durable_name: "driver" });
  const redis = createRedis(opts.redisUrl);
  await redis.ping();
  const checkpoints = redisCheckpointStore<{ node: string }>(redis, { prefix: p, historyLimit: 50 });

  const limit = opts.workerConcurrency ?? 16;
  let inFlight = 0;
  let slot: (() => void) | undefined;
  const handleWork = async (m: JsMsg): Promise<void> => {
    try {
      m.ack();
      await js.publish(`${p}.result`, m.data);
    } finally {
      inFlight--;
      const s = slot;
      slot = undefined;
      s?.();
    }
  };
  const workMsgs: ConsumerMessages = await (await js.consumers.get(streams.work, "worker")).consume({ max_messages: 256 });
  const worker = (async () => {
    for await (const m of workMsgs) {
      if (inFlight >= limit) await new Promise<void>((r) => (slot = r));
      inFlight++;
      void handleWork(m);
    }
  })();

  const waiting = new Map<string, () => void>();
  const resultMsgs: ConsumerMessages = await (await js.consumers.get(streams.results, "driver")).consume({ max_messages: 256 });
  const results = (async () => {
    for await (const m of resultMsgs) {
      m.ack();
      const key = text.decode(m.data);
      const w = waiting.get(key);
      waiting.delete(key);
      w?.();
    }
  })();

  let nextExecution = 1;
  const used: number[] = [];

  /** One node: work item out, result back, checkpoint compare-and-set. */
  async function step(executionId: number, node: string, cas: { chain: Promise<unknown>; version: number }): Promise<void> {
    const key = `${executionId}.${node}`;
    const back = new Promise<void>((r) => waiting.set(key, r));
    await js.publish(`${p}.work`, utf8.encode(key));
    await back;
    const write = cas.chain.then(async () => {
      await checkpoints.put(executionId, { node }, cas.version);
      cas.version++;
    });
    cas.chain = write;
    await write;
  }

  async function execute(graph: BenchGraph, preds: Map<string, string[]>): Promise<ExecutionTrace> {
    const executionId = nextExecution++;
    used.push(executionId);
    const cas = { chain: Promise.resolve() as Promise<unknown>, version: 0 };
    const doneAt = new Map<string, number>();
    const finished = new Map<string, Promise<void>>();
    const startedAt = performance.now();
    for (const node of graph.nodes) {
      const after = (preds.get(node) ?? []).map((n) => finished.get(n)!);
      finished.set(
        node,
        Promise.all(after).then(async () => {
          await step(executionId, node, cas);
          doneAt.set(node, performance.now());
        }),
      );
    }
    await Promise.all(finished.values());
    return { startedAt, doneAt, endedAt: performance.now() };
  }

  return {
    name: "floor (JetStream + Redis CAS)",
    async prepare(graph) {
      const preds = predecessors(graph);
      return () => execute(graph, preds);
    },
    /** One work item through the worker and back, with its checkpoint; returns the checkpoint version written. */
    async roundTrip() {
      const executionId = nextExecution++;
      used.push(executionId);
      const cas = { chain: Promise.resolve() as Promise<unknown>, version: 0 };
      await step(executionId, "probe", cas);
      return (await checkpoints.get(executionId))?.version ?? 0;
    },
    async close() {
      workMsgs.stop();
      resultMsgs.stop();
      await Promise.all([worker, results]);
      for (let i = 0; i < used.length; i += 100) await Promise.all(used.slice(i, i + 100).map((e) => checkpoints.delete(e)));
      await redis.quit();
      await jsm.streams.delete(streams.work).catch(() => false);
      await jsm.streams.delete(streams.results).catch(() => false);
      await nc.close();
    },
  };
}
