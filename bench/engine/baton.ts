/**
 * Baton through its real services: `startBaton` runs every module in this process on
 * the local NATS, Redis and Postgres with an isolated bus prefix, Postgres schema and
 * data dir; a `bench.noop` tool answers `{}`. The driver creates each graph with
 * `POST /api/agent-workflows` and starts executions with
 * `POST /api/agent-workflows/:id/execute`. It learns about progress from the event
 * subjects on the bus (a plain NATS subscription to `node.completed` and the
 * execution's terminal events), stamping each event when it arrives — the same way the
 * floor's driver stamps results. Closing deletes the prefix's streams, key-value
 * buckets, Redis keys, Postgres schema and data dir.
 */
import { randomBytes } from "node:crypto";
import { rm } from "node:fs/promises";
import { performance } from "node:perf_hooks";
import { connect } from "@nats-io/transport-node";
import type { Subscription } from "@nats-io/transport-node";
import { jetstreamManager } from "@nats-io/jetstream";
import { createRedis, deleteKeysByPrefix } from "@baton/checkpoints";
import { loadConfig } from "@baton/config";
import { streamNames } from "@baton/contracts";
import { decodeEventMessage } from "@baton/messaging";
import { createLogger } from "@baton/telemetry";
import pg from "pg";
import { startBaton } from "../../bin/start.ts";
import type { StartOptions } from "../../bin/start.ts";
import type { BenchSystem } from "./system.ts";
import type { BenchGraph, ExecutionTrace } from "./stats.ts";

export interface BatonBenchOptions {
  natsUrl: string;
  redisUrl: string;
  databaseUrl: string;
  /** Extra BATON_* settings (e.g. BATON_WORKER_CONCURRENCY). */
  env?: Record<string, string>;
}

interface Seen {
  doneAt: Map<string, number>;
  end?: { at: number; type: string; detail: string };
  wake?: () => void;
}

/** How long to wait, after an execution's terminal event, for node events published out of order. */
const STRAGGLER_MS = 5_000;

const noop: NonNullable<StartOptions["tools"]>[number] = {
  name: "bench.noop",
  description: "Does nothing; answers {}.",
  inputJsonSchema: { type: "object" },
  handler: async () => ({}),
};

/** One execution of a stored workflow, from the execute call to its terminal event. */
export interface DefinitionRun {
  ms: number;
  status: string;
  detail: string;
}

export interface BatonBench extends BenchSystem {
  readonly settings: string;
  /** Creates a workflow from any definition; the function runs one execution of it to its end. */
  workflow(name: string, definition: unknown): Promise<(input: unknown) => Promise<DefinitionRun>>;
}

export async function createBatonBench(opts: BatonBenchOptions): Promise<BatonBench> {
  const id = randomBytes(4).toString("hex");
  const apiKey = `bk_bench_${randomBytes(12).toString("hex")}`;
  const env: Record<string, string> = {
    BATON_NATS_URL: opts.natsUrl,
    BATON_REDIS_URL: opts.redisUrl,
    BATON_DATABASE_URL: opts.databaseUrl,
    BATON_BUS_PREFIX: `bench${id}`,
    BATON_DATABASE_SCHEMA: `bench_${id}`,
    BATON_API_KEY: apiKey,
    BATON_PORT: "0",
    BATON_HEALTH_PORT: "0",
    BATON_EMBEDDED: "false",
    BATON_LOG_LEVEL: "warn",
    BATON_DATA_DIR: `/tmp/baton-bench-${id}`,
    ...opts.env,
  };
  const config = loadConfig(env);
  const prefix = config.prefix;

  // Subscribe before anything runs, so no event of any execution is missed.
  const nc = await connect({ servers: opts.natsUrl, name: "bench-baton-events" });
  const seen = new Map<string, Seen>();
  const entry = (executionId: string): Seen => {
    let s = seen.get(executionId);
    if (!s) seen.set(executionId, (s = { doneAt: new Map() }));
    return s;
  };
  const onEvent = (sub: Subscription, handle: (subject: string, data: Uint8Array, at: number) => void): Promise<void> =>
    (async () => {
      for await (const m of sub) handle(m.subject, m.data, performance.now());
    })();
  const nodeSub = nc.subscribe(`${prefix}.evt.node.completed.*.*`);
  const execSub = nc.subscribe(`${prefix}.evt.execution.*.*.*`);
  const utf8 = new TextDecoder();
  const readers = [
    // The node events are read as an outside subscriber in any language would: the execution
    // id from the subject, the node id from the JSON payload. (Decoding them with the
    // contract's codec cost this process, which Baton runs in, about 2% of its CPU.)
    onEvent(nodeSub, (subject, data, at) => {
      const executionId = subject.slice(subject.lastIndexOf(".") + 1);
      const nodeId = (JSON.parse(utf8.decode(data)) as { node_id?: unknown }).node_id;
      if (typeof nodeId !== "string") throw new Error(`a node.completed event without a node id: ${utf8.decode(data)}`);
      const s = entry(executionId);
      if (!s.doneAt.has(nodeId)) s.doneAt.set(nodeId, at);
      s.wake?.();
    }),
    onEvent(execSub, (subject, data, at) => {
      const ev = decodeEventMessage(prefix, { subject, data });
      if (ev?.type !== "execution.completed" && ev?.type !== "execution.failed" && ev?.type !== "execution.cancelled") return;
      const s = entry(String(ev.message.id));
      if (s.end) return;
      const detail = ev.type === "execution.failed" ? `${ev.message.error?.code ?? ""} ${ev.message.error?.message ?? ""}` : "";
      s.end = { at, type: ev.type, detail };
      s.wake?.();
    }),
  ];

  const baton = await startBaton({
    config,
    logger: createLogger("bench", "warn"),
    healthServer: false,
    tools: [noop],
  });
  const base = `http://127.0.0.1:${baton.gatewayPort}`;
  const call = async <T>(method: string, path: string, body: unknown): Promise<T> => {
    const res = await fetch(base + path, { method, headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" }, body: JSON.stringify(body) });
    const text = await res.text();
    if (!res.ok) throw new Error(`${method} ${path} answered ${res.status}: ${text}`);
    return JSON.parse(text) as T;
  };

  const createWorkflow = async (name: string, definition: unknown): Promise<number> => {
    const slug = `bench-${name}-${randomBytes(3).toString("hex")}`;
    return (await call<{ id: number }>("POST", "/api/agent-workflows", { name: `bench ${name}`, slug, definition })).id;
  };
  /** Starts an execution and waits for its terminal event. */
  const execute = async (workflowId: number, input: unknown): Promise<{ id: number; s: Seen; end: NonNullable<Seen["end"]>; event: () => Promise<void> }> => {
    const { id } = await call<{ id: number }>("POST", `/api/agent-workflows/${workflowId}/execute`, { input });
    const s = entry(String(id));
    const event = (): Promise<void> => new Promise<void>((resolve) => (s.wake = resolve));
    while (!s.end) await event();
    return { id, s, end: s.end, event };
  };

  return {
    name: "Baton",
    settings: `worker concurrency ${config.workerConcurrency}, executor concurrency ${config.executorConcurrency}`,
    async workflow(name, definition) {
      const workflowId = await createWorkflow(name, definition);
      return async (input) => {
        const startedAt = performance.now();
        const { id, end } = await execute(workflowId, input);
        seen.delete(String(id));
        return { ms: end.at - startedAt, status: end.type, detail: end.detail };
      };
    },
    async prepare(graph: BenchGraph) {
      const sources = new Set(graph.edges.map(([, to]) => to));
      const definition = {
        start: graph.nodes.find((n) => !sources.has(n)),
        nodes: graph.nodes.map((n) => ({ id: n, type: "tool", config: { tool: "bench.noop" } })),
        edges: graph.edges.map(([from, to]) => ({ from, to })),
      };
      const workflowId = await createWorkflow(graph.name, definition);
      return async (): Promise<ExecutionTrace> => {
        const startedAt = performance.now();
        const { id, s, end, event } = await execute(workflowId, {});
        // node.completed and execution.completed are separate publishes; the last node's may arrive after the end.
        const deadline = performance.now() + STRAGGLER_MS;
        while (end.type === "execution.completed" && s.doneAt.size < graph.nodes.length && performance.now() < deadline) {
          await Promise.race([event(), new Promise((r) => setTimeout(r, 50))]);
        }
        seen.delete(String(id));
        if (end.type !== "execution.completed") throw new Error(`execution ${id} of ${graph.name} ended with ${end.type} ${end.detail}`);
        const missing = graph.nodes.filter((n) => !s.doneAt.has(n));
        if (missing.length > 0) throw new Error(`execution ${id} of ${graph.name} completed, but no node.completed event came for ${missing.join(", ")} within ${STRAGGLER_MS} ms`);
        return { startedAt, doneAt: s.doneAt, endedAt: Math.max(end.at, ...s.doneAt.values()) };
      };
    },
    async close() {
      await baton.stop();
      nodeSub.unsubscribe();
      execSub.unsubscribe();
      await Promise.all(readers);
      // Baton's streams, and the key-value buckets (streams `KV_<prefix>_*`) of its tool registry and results.
      const jsm = await jetstreamManager(nc);
      const ours = new Set(Object.values(streamNames(prefix)) as string[]);
      for await (const s of jsm.streams.list()) if (s.config.name.startsWith(`KV_${prefix}_`)) ours.add(s.config.name);
      for (const name of ours) await jsm.streams.delete(name).catch(() => false);
      await nc.close();
      const db = new pg.Client({ connectionString: opts.databaseUrl });
      await db.connect();
      try {
        await db.query(`DROP SCHEMA IF EXISTS "${config.databaseSchema}" CASCADE`);
      } finally {
        await db.end();
      }
      await rm(config.dataDir, { recursive: true, force: true });
      const redis = createRedis(opts.redisUrl);
      try {
        await deleteKeysByPrefix(redis, prefix);
      } finally {
        await redis.quit();
      }
    },
  };
}
