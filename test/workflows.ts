/**
 * Pieces shared by the integration suites: Baton started in this process, workflows created
 * through the API, test tools that record what they did in Redis (so the record
 * survives and is visible across processes), and an SSE reader that stops when told.
 */
import { randomBytes } from "node:crypto";
import type { Redis } from "ioredis";
import { createRedis } from "@baton/checkpoints";
import type { BatonConfig } from "@baton/config";
import type { ToolContext, ToolSpec } from "@baton/sdk";
import { createStore } from "@baton/store";
import type { Store } from "@baton/store";
import { createLogger } from "@baton/telemetry";
import { startBaton } from "../bin/start.ts";
import type { BatonHandle } from "../bin/start.ts";
import type { Api } from "./helpers.ts";
import { api, isolatedConfig, removeIsolated, waitFor } from "./helpers.ts";
import type { Execution } from "./quickstart.ts";

export interface NodeRow {
  id: number;
  nodeId: string;
  nodeType: string;
  attempt: number;
  status: string;
  input: unknown;
  output: unknown;
  error: string | null;
  startedAt: string;
  completedAt: string | null;
}

export interface ExecutionRow extends Execution {
  workflowId: number;
  parentExecutionId: number | null;
  parentNodeId: string | null;
  childKey: string | null;
  input: Record<string, unknown> | null;
  deadlineAt: string | null;
  startedAt: string | null;
  completedAt: string | null;
}

/** One SSE event: `data` is the gateway's envelope `{ type, seq, time, data }`, `data.data` the event payload. */
export interface SseEvent {
  id: string;
  event: string;
  data: { type: string; seq: number; time: string; data: Record<string, unknown> };
}

/** Creates a workflow from a definition; throws with the answer when it is not 201. */
export async function createDefinition(a: Api, name: string, definition: unknown, extra: Record<string, unknown> = {}): Promise<number> {
  const res = await a.call<{ id: number }>("POST", "/api/agent-workflows", { name, definition, ...extra });
  if (res.status !== 201) throw new Error(`create ${name} answered ${res.status}: ${JSON.stringify(res.body)}`);
  return res.body.id;
}

/** Starts an execution; throws with the answer when it is not 202. @param headers more request headers (e.g. `traceparent`) */
export async function startExecution(a: Api, workflowId: number, input: Record<string, unknown> = {}, extra: Record<string, unknown> = {}, headers: Record<string, string> = {}): Promise<number> {
  const res = await a.call<{ id: number }>("POST", `/api/agent-workflows/${workflowId}/execute`, { input, ...extra }, undefined, headers);
  if (res.status !== 202) throw new Error(`execute ${workflowId} answered ${res.status}: ${JSON.stringify(res.body)}`);
  return res.body.id;
}

export async function getExecution(a: Api, id: number): Promise<ExecutionRow> {
  const r = await a.call<ExecutionRow>("GET", `/api/agent-workflow-executions/${id}`);
  if (r.status !== 200) throw new Error(`GET execution ${id} answered ${r.status}`);
  return r.body;
}

export function waitForExecution(a: Api, id: number, statuses: string[], timeoutMs = 20_000): Promise<ExecutionRow> {
  return waitFor(`execution ${id} to be ${statuses.join("|")}`, async () => {
    const e = await getExecution(a, id);
    return statuses.includes(e.status) ? e : undefined;
  }, timeoutMs);
}

/** The journal of an execution (GET …/nodes), in the order the API gives it. */
export async function journal(a: Api, id: number): Promise<NodeRow[]> {
  const r = await a.call<{ items: NodeRow[] }>("GET", `/api/agent-workflow-executions/${id}/nodes`);
  if (r.status !== 200) throw new Error(`GET nodes of ${id} answered ${r.status}`);
  return r.body.items;
}

export async function children(a: Api, id: number): Promise<ExecutionRow[]> {
  const r = await a.call<{ items: ExecutionRow[] }>("GET", `/api/agent-workflow-executions/${id}/children`);
  if (r.status !== 200) throw new Error(`GET children of ${id} answered ${r.status}`);
  return r.body.items;
}

/** Parses one SSE block (`id:`/`event:`/`data:` lines); comments and blocks without data give undefined. */
function parseBlock(block: string): SseEvent | undefined {
  const lines = block.split("\n");
  const field = (name: string) => lines.find((l) => l.startsWith(name + ":"))?.slice(name.length + 1).trim();
  const data = field("data");
  if (data === undefined) return undefined;
  return { id: field("id") ?? "", event: field("event") ?? "", data: JSON.parse(data) as SseEvent["data"] };
}

/**
 * Reads an execution's SSE stream from the beginning until it ends (the run finished)
 * or `until` holds for the events read so far, then disconnects.
 */
export async function collectEvents(a: Api, apiKey: string, id: number, until?: (events: SseEvent[]) => boolean, timeoutMs = 20_000): Promise<SseEvent[]> {
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(new Error(`SSE of execution ${id}: no end within ${timeoutMs} ms`)), timeoutMs);
  const events: SseEvent[] = [];
  try {
    const res = await fetch(`${a.base}/api/agent-workflow-executions/${id}/events`, { headers: { authorization: `Bearer ${apiKey}`, accept: "text/event-stream" }, signal: ac.signal });
    if (!res.ok || !res.body) throw new Error(`SSE answered ${res.status}`);
    const decoder = new TextDecoder();
    let buf = "";
    for await (const chunk of res.body) {
      buf += decoder.decode(chunk as Uint8Array, { stream: true });
      let cut: number;
      while ((cut = buf.indexOf("\n\n")) >= 0) {
        const e = parseBlock(buf.slice(0, cut));
        buf = buf.slice(cut + 2);
        if (e) events.push(e);
      }
      if (until?.(events)) break;
    }
    return events;
  } finally {
    clearTimeout(timer);
    ac.abort();
  }
}

/** `type:nodeId` (or `type`) of each event, for order checks. */
export function eventNames(events: SseEvent[]): string[] {
  return events.map((e) => {
    const nodeId = e.data.data.node_id;
    return typeof nodeId === "string" && nodeId !== "" ? `${e.event}:${nodeId}` : e.event;
  });
}

/**
 * What an outside subscriber can rebuild from the events alone (docs/events.md, "The shape of a
 * timeline"), for a run read to its end:
 * - every event names the tenant and the execution, in increasing `seq`;
 * - `execution.started` comes first (a run whose start failed has `execution.failed` alone);
 * - exactly one end (`execution.completed`, `.failed` or `.cancelled`) comes last;
 * - every node.started has exactly one node.completed or node.failed with the same node and
 *   attempt after it; node.skipped needs no start;
 * - a node.failed with `retrying: true` is followed by the node's next start, and an
 *   execution.paused by an execution.resumed of its node, unless the run failed or was
 *   cancelled first;
 * - a node is paused once at a time: no second execution.paused of it before its resume;
 *   a pause in sub-runs (`sub_execution_id` set) is ended by a resume that names a sub-run
 *   (decision `sub_run`, or `cancelled` when the node stopped waiting for them), a pause of the
 *   run's own review by one that names none.
 * Returns the problems found (empty when the timeline is whole).
 */
export function timelineProblems(events: SseEvent[], executionId: number, tenantId: string): string[] {
  const problems: string[] = [];
  const open = new Map<string, number>();
  const closed = new Map<string, number>();
  const retrying = new Map<string, number>();
  /** Paused nodes, and whether the pause is in sub-runs. */
  const paused = new Map<string, boolean>();
  const ends = ["execution.completed", "execution.failed", "execution.cancelled"];
  const end = events.findIndex((e) => ends.includes(e.event));
  if (end < 0) problems.push("no execution.completed, execution.failed or execution.cancelled");
  else if (end !== events.length - 1) problems.push(`#${end} ${events[end]!.event} is not the last event (${events.length - 1 - end} after it)`);
  // A run that never started: its start failed, or it was cancelled while it waited queued.
  const neverStarted = events.length === 1 && (events[0]!.event === "execution.failed" || events[0]!.event === "execution.cancelled");
  if (!neverStarted && events[0]?.event !== "execution.started") problems.push(`#0 is ${events[0]?.event ?? "missing"}, not execution.started`);
  let seq = -Infinity;
  for (const [i, e] of events.entries()) {
    const d = e.data.data;
    if (!(e.data.seq > seq)) problems.push(`#${i} ${e.event}: seq ${e.data.seq} after ${seq}`);
    seq = e.data.seq;
    // execution.* events carry the run as `id`; node.*, review.* and learning.* as `execution_id`.
    const exec = e.event.startsWith("execution.") ? d.id : d.execution_id;
    if (String(exec) !== String(executionId)) problems.push(`#${i} ${e.event}: execution ${String(exec)}, expected ${executionId}`);
    if (d.tenant_id !== tenantId) problems.push(`#${i} ${e.event}: tenant ${String(d.tenant_id)}, expected ${tenantId}`);
    if (i > 0 && e.event === "execution.started") problems.push(`#${i} execution.started again`);
    const inSubRun = typeof d.sub_execution_id === "number" && d.sub_execution_id !== 0;
    if (e.event === "execution.paused") {
      if (paused.has(String(d.node_id))) problems.push(`#${i} execution.paused ${String(d.node_id)} again before its execution.resumed`);
      paused.set(String(d.node_id), inSubRun);
    }
    if (e.event === "execution.resumed") {
      const wasInSubRun = paused.get(String(d.node_id));
      if (wasInSubRun === undefined) problems.push(`#${i} execution.resumed ${String(d.node_id)} without execution.paused`);
      else if (wasInSubRun !== inSubRun) problems.push(`#${i} execution.resumed ${String(d.node_id)} ${inSubRun ? "names a sub-run" : "names no sub-run"}, its pause ${wasInSubRun ? "did" : "did not"}`);
      else if (inSubRun && d.decision !== "sub_run" && d.decision !== "cancelled") problems.push(`#${i} execution.resumed ${String(d.node_id)} of a pause in sub-runs with decision ${String(d.decision)}`);
      paused.delete(String(d.node_id));
    }
    if (!e.event.startsWith("node.")) continue;
    if (typeof d.node_id !== "string" || d.node_id === "") {
      problems.push(`#${i} ${e.event}: no node id`);
      continue;
    }
    const key = `${d.node_id}#${JSON.stringify(d.attempt ?? null)}`;
    if (e.event === "node.started") {
      if (open.has(key) || closed.has(key)) problems.push(`#${i} node.started ${key} twice`);
      open.set(key, i);
      const promised = retrying.get(d.node_id);
      if (promised !== undefined && Number(d.attempt) > promised) retrying.delete(d.node_id);
    } else if (e.event === "node.completed" || e.event === "node.failed") {
      if (!open.has(key)) problems.push(`#${i} ${e.event} ${key} without node.started`);
      if (closed.has(key)) problems.push(`#${i} ${e.event} ${key} closed twice`);
      open.delete(key);
      closed.set(key, i);
      if (e.event === "node.failed" && d.retrying === true) retrying.set(d.node_id, Number(d.attempt));
    }
  }
  for (const key of open.keys()) problems.push(`node.started ${key} never completed or failed`);
  const stopped = end >= 0 && events[end]!.event !== "execution.completed";
  if (!stopped) {
    for (const [node, attempt] of retrying) problems.push(`node.failed ${node}#${attempt} said retrying, and no later attempt started`);
    for (const node of paused.keys()) problems.push(`execution.paused ${node} never resumed`);
  }
  return problems;
}

/** Keys the test tools write under; one namespace per test file (its bus prefix). */
export interface Recorder {
  /** Call ids of every handler run of `rec.sleep` (one entry per run, redeliveries included). */
  calls(): Promise<string[]>;
  /** Call ids whose `rec.sleep` was aborted (cancel, timeout, deadline). */
  aborted(): Promise<string[]>;
  /** Call ids whose `rec.sleep` ran to its end. */
  finished(): Promise<string[]>;
  /** How many times `flaky` ran for `key`. */
  flakyCount(key: string): Promise<number>;
  /** The values the gauge `name` took (in-flight `rec.sleep` runs sharing it), for concurrency checks. */
  gauge(name: string): Promise<number[]>;
}

/**
 * Test tools:
 * - `rec.sleep` `{ ms, v?, gauge?, tag?, pad? }`: records its call id in Redis, sleeps (aborted by
 *   the signal, recorded too), returns `{ slept, v }`, and with `pad` also `pad`: that many
 *   characters, to make the result large (above `BATON_LARGE_RESULT_BYTES`);
 * - `flaky` `{ key, failures }`: fails (retryably) the first `failures` calls for `key`
 *   (count kept in Redis), then returns `{ calls }`;
 * - `slow.once` `{ key, ms }`: the first call for `key` sleeps `ms`, later ones answer at once;
 * - `rec.ctx`: returns the call's context (idempotency key, call id, attempt…).
 */
export function testTools(redis: Redis, ns: string): { tools: ToolSpec[]; recorder: Recorder } {
  const k = (s: string) => `${ns}:testtools:${s}`;
  const sleep: ToolSpec = {
    name: "rec.sleep",
    description: "Sleeps `ms`, recording the call id in Redis when it starts, ends or is aborted.",
    inputJsonSchema: { type: "object", properties: { ms: { type: "integer", minimum: 0 }, v: {}, gauge: { type: "string" }, tag: { type: "string" }, pad: { type: "integer", minimum: 1 } }, required: ["ms"] },
    timeoutMs: 120_000,
    handler: async (raw, ctx: ToolContext) => {
      const input = raw as { ms: number; v?: unknown; gauge?: string; tag?: string; pad?: number };
      const id = input.tag ? `${ctx.callId}|${input.tag}` : ctx.callId;
      await redis.rpush(k("calls"), id);
      if (input.gauge) await redis.rpush(k(`gauge:${input.gauge}`), await redis.incr(k(`gauge:${input.gauge}:now`)));
      try {
        await new Promise<void>((resolve, reject) => {
          if (ctx.signal.aborted) return reject(ctx.signal.reason as Error);
          const t = setTimeout(resolve, input.ms);
          ctx.signal.addEventListener("abort", () => {
            clearTimeout(t);
            reject(ctx.signal.reason as Error);
          }, { once: true });
        });
      } catch (err) {
        await redis.rpush(k("aborted"), id);
        throw err;
      } finally {
        if (input.gauge) await redis.decr(k(`gauge:${input.gauge}:now`));
      }
      await redis.rpush(k("finished"), id);
      return { slept: input.ms, v: (input.v ?? null) as never, ...(input.pad ? { pad: "x".repeat(input.pad) } : {}) };
    },
  };
  const flaky: ToolSpec = {
    name: "flaky",
    description: "Fails the first `failures` calls for `key`, then succeeds.",
    inputJsonSchema: { type: "object", properties: { key: { type: "string" }, failures: { type: "integer" } }, required: ["key", "failures"] },
    handler: async (raw) => {
      const input = raw as { key: string; failures: number };
      const n = await redis.incr(k(`flaky:${input.key}`));
      if (n <= input.failures) throw new Error(`flaky failure ${n} of ${input.failures}`);
      return { calls: n };
    },
  };
  const slowOnce: ToolSpec = {
    name: "slow.once",
    description: "The first call for `key` sleeps `ms` (abortable, recorded as aborted); later calls return at once.",
    inputJsonSchema: { type: "object", properties: { key: { type: "string" }, ms: { type: "integer" } }, required: ["key", "ms"] },
    timeoutMs: 120_000,
    handler: async (raw, ctx: ToolContext) => {
      const input = raw as { key: string; ms: number };
      const n = await redis.incr(k(`slow:${input.key}`));
      if (n === 1) {
        await new Promise<void>((resolve, reject) => {
          const t = setTimeout(resolve, input.ms);
          ctx.signal.addEventListener("abort", () => {
            clearTimeout(t);
            void redis.rpush(k("aborted"), ctx.callId).finally(() => reject(ctx.signal.reason as Error));
          }, { once: true });
        });
      }
      return { calls: n, attempt: ctx.attempt };
    },
  };
  const context: ToolSpec = {
    name: "rec.ctx",
    description: "Returns what the handler was told about its call; with `failFirst`, the first call for that key fails (retryably).",
    inputJsonSchema: { type: "object", properties: { failFirst: { type: "string" } } },
    handler: async (raw, ctx: ToolContext) => {
      const { failFirst } = raw as { failFirst?: string };
      if (failFirst && (await redis.incr(k(`ctx:${failFirst}`))) === 1) throw new Error(`first call (key ${ctx.idempotencyKey}) fails`);
      return {
        idempotencyKey: ctx.idempotencyKey, callId: ctx.callId, executionId: ctx.executionId, tenantId: ctx.tenantId, nodeId: ctx.nodeId, attempt: ctx.attempt,
      };
    },
  };
  const list = (name: string) => redis.lrange(k(name), 0, -1);
  return {
    tools: [sleep, flaky, slowOnce, context],
    recorder: {
      calls: () => list("calls"),
      aborted: () => list("aborted"),
      finished: () => list("finished"),
      flakyCount: async (key) => Number((await redis.get(k(`flaky:${key}`))) ?? 0),
      gauge: async (name) => (await list(`gauge:${name}`)).map(Number),
    },
  };
}

/** A short random suffix for names that must not collide between tests. */
export const uniq = (): string => randomBytes(3).toString("hex");

/** What a suite running every service in its own process works with (see startInProcess). */
export interface InProcess {
  baton: BatonHandle;
  a: Api;
  store: Store;
  redis: Redis;
  rec: Recorder;
  tenantId: string;
  /** Stops Baton, closes the clients and removes what the run left (schema, streams, keys). */
  stop(): Promise<void>;
}

/** Starts every service in this process on an isolated config, with the test tools, and a client of its API. */
export async function startInProcess(config: BatonConfig, name: string): Promise<InProcess> {
  const redis = createRedis(config.redisUrl);
  let baton: BatonHandle | undefined;
  let store: Store | undefined;
  const stop = async (): Promise<void> => {
    await baton?.stop();
    await store?.close();
    await redis.quit();
    await removeIsolated(config);
  };
  try {
    const t = testTools(redis, config.prefix);
    baton = await startBaton({ config, logger: createLogger(name, "warn"), tools: t.tools });
    store = createStore({ databaseUrl: config.databaseUrl, schema: config.databaseSchema });
    const tenantId = (await store.tenants.resolveApiKey(config.apiKey!))!.tenantId;
    return { baton, a: api(baton.gatewayPort!, config.apiKey!), store, redis, rec: t.recorder, tenantId, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

/**
 * The services of one test file, started in this process on an isolated config (`overrides`:
 * BATON_* settings) when the file loads (call it with top-level `await`) and stopped after its
 * tests; with the config and its environment.
 */
export async function suiteInProcess(name: string, overrides: Record<string, string> = {}): Promise<InProcess & { config: BatonConfig; env: Record<string, string> }> {
  const { config, env } = isolatedConfig(overrides);
  // Imported here, not at the top: scripts run outside jest (bench/chaos) import this module's
  // other helpers, and @jest/globals throws when loaded outside a jest environment.
  const { afterAll } = await import("@jest/globals");
  const h = await startInProcess(config, name);
  afterAll(() => h.stop());
  return { ...h, config, env };
}

/**
 * Runs `workflowId` (whose graph pauses at a review) with `input` until it pauses, forks it from
 * that paused checkpoint with `context` edits, and waits until the fork pauses too.
 */
export async function forkAtPause(a: Api, workflowId: number, input: Record<string, unknown>, context: Record<string, unknown>): Promise<{ src: number; at: number; id: number }> {
  const src = await startExecution(a, workflowId, input);
  const paused = await waitForExecution(a, src, ["paused", "failed", "completed", "cancelled"]);
  if (paused.status !== "paused") throw new Error(`execution ${src} ended ${paused.status} instead of pausing`);
  const cps = (await a.call<{ items: { version: number; status: string }[] }>("GET", `/api/agent-workflow-executions/${src}/checkpoints`)).body.items;
  const at = cps.find((c) => c.status === "paused")!.version;
  const forked = await a.call<{ id: number }>("POST", `/api/agent-workflow-executions/${src}/fork`, { version: at, context });
  if (forked.status !== 202) throw new Error(`fork of ${src} at ${at} answered ${forked.status}: ${JSON.stringify(forked.body)}`);
  const id = forked.body.id;
  const fork = await waitForExecution(a, id, ["paused", "failed", "completed", "cancelled"]);
  if (fork.status !== "paused") throw new Error(`fork ${id} ended ${fork.status} instead of pausing`);
  return { src, at, id };
}
