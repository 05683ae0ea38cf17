/**
 * The tool worker SDK: serves {@link ToolSpec}s from the JetStream work queue.
 *
 * One durable work-queue consumer per tool (`tool_{name}_{hash}`, filter `{p}.tool.{name}`),
 * shared by every worker process serving that tool, so calls are spread over them. For
 * each call: the recorded result is resent if there is one (redelivery), else the input
 * is checked, the handler runs with a time limit and in-progress acks, the output is
 * checked, the result is recorded in KV (`{prefix}_tool_results`, key = call id) and sent
 * to the executor as a `tool.result` command; a result larger than `largeResultBytes` is
 * stored in an object bucket and both carry a reference to it (large.ts). Arguments the
 * executor sent by reference are read from their object before the input is checked, and the
 * object is deleted once the call's answer is recorded. The last allowed delivery never runs the
 * handler: it answers BATON_TOOL_DELIVERIES_EXHAUSTED, so a call whose workers keep
 * dying still gets an answer.
 */
import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import type { Bus, BusMessage, KV, ObjectRef, Subscription } from "@baton/bus";
import { connectBus, objectName, objectRefJson, parseObjectRef } from "@baton/bus";
import { TokenDeltaSchema, ToolCallSchema, ToolCancelSchema, decode, encode, toJsonValue, valueFromJson } from "@baton/contracts";
import type { MessageShape } from "@baton/contracts";
import { errorMessage, hasCode } from "@baton/errors";
import { createMessaging, RESULTS_BUCKET, resultKey } from "@baton/messaging";
import type { Messaging, RecordedToolResult } from "@baton/messaging";
import { createLogger, getMeter, SHORT_DURATION_BUCKETS_S } from "@baton/telemetry";
import type { Logger } from "@baton/telemetry";
import {
  ToolArgsObjectInvalid, ToolArgsObjectLost, ToolCancelled, ToolDeliveriesExhausted, ToolFailed, ToolInvalidInput, ToolInvalidOutput, ToolResultTooLarge, ToolSdkInvalidOptions, ToolTimeout, ToolWorkerDraining,
} from "./errors.ts";
import { canonicalJson, DEFAULT_LARGE_RESULT_BYTES, DEFAULT_MAX_RESULT_BYTES, exceeds, INLINE_SHARE_OF_MAX_PAYLOAD, LARGE_ARGS_BUCKET, LARGE_RESULTS_BUCKET, sha256Hex } from "./large.ts";
import { createToolRegistry, workerKeyToken } from "./registry.ts";
import type { Registration, ToolRegistry } from "./registry.ts";
import { compileChecks, DEFAULT_TOOL_TIMEOUT_MS, toDescriptor } from "./schema.ts";
import type { Check } from "./schema.ts";
import type { ToolContext, ToolSpec } from "./tool.ts";

export interface WorkerOptions {
  /** A connected bus; the worker does not close it. Give this or `servers`. */
  bus?: Bus;
  /** NATS server URL(s) when the worker connects itself. @default "nats://127.0.0.1:4222" */
  servers?: string | string[];
  /** Bus prefix when the worker connects itself. @default "baton" */
  prefix?: string;
  /** The tools this worker serves; names must be unique. */
  tools: readonly ToolSpec[];
  /** Handlers running at once in this process, over all tools (backpressure). @default 16 */
  concurrency?: number;
  /** Identity in results and the registry. @default `${hostname()}:${pid}` */
  workerId?: string;
  logger?: Logger;
  /** Time a call may go without an in-progress ack before JetStream hands it to another worker. @default 30_000 */
  ackWaitMs?: number;
  /** Deliveries of one call; the last one answers BATON_TOOL_DELIVERIES_EXHAUSTED without running. At least 2. @default 5 */
  maxDeliver?: number;
  /** How long results are kept for redeliveries. A property of the bucket, fixed at its creation. @default 86_400_000 */
  resultTtlMs?: number;
  /** Presence TTL of the registry. @default 15_000 */
  presenceTtlMs?: number;
  /** How long `drain()` waits for calls in flight before aborting them (they go back to the queue). @default 30_000 */
  drainGraceMs?: number;
  /**
   * Results whose JSON is larger than this are stored in the object bucket
   * `{prefix}_tool_results_large` and sent as a reference (never more than a sixth of the
   * server's max_payload inline). @default 65_536
   */
  largeResultBytes?: number;
  /** Results whose JSON is larger than this fail with BATON_TOOL_RESULT_TOO_LARGE (not retryable). @default 16_777_216 */
  maxResultBytes?: number;
}

export interface Worker {
  readonly workerId: string;
  /** Calls this process is handling (waiting for a slot or running). */
  readonly inFlight: number;
  /** Handlers that finished (any outcome) since start. */
  readonly completed: number;
  /** ToolResults sent since start, resends of recorded results included. */
  readonly answered: number;
  /** The registry the worker registered in (after start). */
  readonly registry: ToolRegistry;
  /** Connects (when needed), opens the consumers, registers the tools. */
  start(): Promise<void>;
  /**
   * Stops fetching, lets calls in flight finish (aborting them after `drainGraceMs`; they
   * are redelivered to another worker), unregisters, and closes the bus it opened.
   */
  drain(): Promise<void>;
  /** Same as drain(), for the runtime's Service contract. */
  stop(): Promise<void>;
  ready(): boolean;
}

type RecordedResult = RecordedToolResult;
type ToolCall = MessageShape<typeof ToolCallSchema>;

export { RESULTS_BUCKET, resultKey };

/** Cancels of calls not (yet) running here are remembered this long, at most this many. */
const CANCEL_MEMORY_MS = 10 * 60_000;
const CANCEL_MEMORY_MAX = 10_000;
const enc = new TextEncoder();
const dec = new TextDecoder();

function fnv1a(s: string): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h.toString(16).padStart(8, "0");
}

/** The durable consumer of a tool: readable, and unique even when sanitizing merges names. */
export function toolDurable(tool: string): string {
  return `tool_${tool.replace(/[^A-Za-z0-9_-]/g, "_")}_${fnv1a(tool)}`;
}

/** The reference a call's `args` are when the executor sent them through {@link LARGE_ARGS_BUCKET}; undefined for inline arguments. */
function argsRef(call: ToolCall): ObjectRef | undefined {
  const ref = parseObjectRef(call.args);
  return ref?.bucket === LARGE_ARGS_BUCKET ? ref : undefined;
}

function failure(err: { code: string; message: string; retryable: boolean }, started: number, workerId: string): RecordedResult {
  return { ok: false, error: { code: err.code, message: err.message, retryable: err.retryable }, durationMs: Date.now() - started, workerId };
}

/** A thrown value as a result error: its own `code` and `retryable` when it has them, else BATON_TOOL_FAILED. */
function errorInfo(tool: string, err: unknown): { code: string; message: string; retryable: boolean } {
  if (hasCode(err)) return { code: err.code, message: err.message, retryable: err.retryable };
  const o = typeof err === "object" && err !== null ? (err as { code?: unknown; retryable?: unknown }) : undefined;
  if (o && typeof o.code === "string" && o.code !== "") {
    return { code: o.code, message: errorMessage(err), retryable: typeof o.retryable === "boolean" ? o.retryable : true };
  }
  const e = ToolFailed(tool, errorMessage(err));
  return { code: e.code, message: e.message, retryable: e.retryable };
}

/** What a worker measures (docs/observability.md); nothing when no meter provider records it. */
interface ToolMetrics {
  call(tool: string, result: RecordedResult): void;
}

function createToolMetrics(): ToolMetrics | undefined {
  const { meter, enabled } = getMeter("@baton/sdk/worker");
  if (!enabled) return undefined;
  const calls = meter.createCounter("baton.tool.calls", { unit: "{call}", description: "Tool calls answered by this worker, by tool and outcome (ok, error)." });
  const duration = meter.createHistogram("baton.tool.duration", {
    unit: "s",
    description: "Time from taking a tool call to its result, waiting for a free slot included, by tool and outcome.",
    advice: { explicitBucketBoundaries: [...SHORT_DURATION_BUCKETS_S] },
  });
  return {
    call(tool, result) {
      const attributes = result.ok ? { "baton.tool.name": tool, "baton.tool.outcome": "ok" } : { "baton.tool.name": tool, "baton.tool.outcome": "error", "error.type": result.error?.code ?? "unknown" };
      calls.add(1, attributes);
      duration.record(result.durationMs / 1000, attributes);
    },
  };
}

/** Counts free handler slots; waiting callers queue in order. */
class Slots {
  #free: number;
  #waiting: (() => void)[] = [];
  constructor(n: number) {
    this.#free = n;
  }
  async acquire(signal: AbortSignal): Promise<() => void> {
    if (this.#free > 0) this.#free--;
    else {
      await new Promise<void>((resolve, reject) => {
        const wake = (): void => {
          signal.removeEventListener("abort", onAbort);
          resolve();
        };
        const onAbort = (): void => {
          const i = this.#waiting.indexOf(wake);
          if (i >= 0) this.#waiting.splice(i, 1);
          reject(signal.reason as Error);
        };
        this.#waiting.push(wake);
        signal.addEventListener("abort", onAbort, { once: true });
      });
    }
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.#waiting.shift();
      if (next) next();
      else this.#free++;
    };
  }
}

interface Running {
  tool: string;
  abort: AbortController;
  /** False while waiting for a handler slot. */
  started: boolean;
}

function compileOptions(opts: WorkerOptions): Required<Omit<WorkerOptions, "bus" | "servers" | "prefix" | "logger">> {
  const problems: string[] = [];
  const names = new Set<string>();
  if (!Array.isArray(opts.tools) || opts.tools.length === 0) problems.push("tools: at least one tool is needed");
  for (const t of opts.tools ?? []) {
    if (names.has(t.name)) problems.push(`tools: "${t.name}" is given twice`);
    names.add(t.name);
    if (typeof t.handler !== "function") problems.push(`tools: "${t.name}" has no handler`);
  }
  const posInt = (v: number): boolean => Number.isInteger(v) && v > 0;
  const concurrency = opts.concurrency ?? 16;
  const ackWaitMs = opts.ackWaitMs ?? 30_000;
  const maxDeliver = opts.maxDeliver ?? 5;
  const resultTtlMs = opts.resultTtlMs ?? 86_400_000;
  const presenceTtlMs = opts.presenceTtlMs ?? 15_000;
  const drainGraceMs = opts.drainGraceMs ?? 30_000;
  const largeResultBytes = opts.largeResultBytes ?? DEFAULT_LARGE_RESULT_BYTES;
  const maxResultBytes = opts.maxResultBytes ?? DEFAULT_MAX_RESULT_BYTES;
  if (!posInt(concurrency)) problems.push("concurrency: must be a positive integer");
  if (!posInt(ackWaitMs) || ackWaitMs < 300) problems.push("ackWaitMs: must be an integer of at least 300");
  if (!Number.isInteger(maxDeliver) || maxDeliver < 2) problems.push("maxDeliver: must be an integer of at least 2 (the last delivery only answers)");
  if (!posInt(resultTtlMs)) problems.push("resultTtlMs: must be a positive integer");
  if (!posInt(presenceTtlMs) || presenceTtlMs < 1_000) problems.push("presenceTtlMs: must be an integer of at least 1000");
  if (!Number.isInteger(drainGraceMs) || drainGraceMs < 0) problems.push("drainGraceMs: must be a non-negative integer");
  if (!Number.isInteger(largeResultBytes) || largeResultBytes < 1024) problems.push("largeResultBytes: must be an integer of at least 1024");
  if (!Number.isInteger(maxResultBytes) || maxResultBytes < largeResultBytes) problems.push("maxResultBytes: must be an integer of at least largeResultBytes");
  if (!opts.bus && opts.servers !== undefined && (Array.isArray(opts.servers) ? opts.servers.length === 0 : opts.servers.trim() === "")) problems.push("servers: at least one server URL is needed");
  if (problems.length > 0) throw ToolSdkInvalidOptions("WorkerOptions", problems, { details: problems });
  return {
    tools: opts.tools,
    concurrency,
    workerId: opts.workerId ?? `${hostname()}:${process.pid}`,
    ackWaitMs,
    maxDeliver,
    resultTtlMs,
    presenceTtlMs,
    drainGraceMs,
    largeResultBytes,
    maxResultBytes,
  };
}

/** Builds a worker (not started). */
export function createWorker(options: WorkerOptions): Worker {
  const o = compileOptions(options);
  const { workerId } = o;
  const logger = (options.logger ?? createLogger("worker", "info")).child({ workerId });
  const specs = new Map(o.tools.map((t) => [t.name, { spec: t, checks: compileChecks(t), descriptor: toDescriptor(t, t.kind) }]));
  const slots = new Slots(o.concurrency);
  const toolMetrics = createToolMetrics();
  const running = new Map<string, Running>();
  /** Calls cancelled before they arrived here: call id → when. */
  const cancelledEarly = new Map<string, { at: number; reason: string }>();
  const subs: Subscription[] = [];
  let bus: Bus | undefined;
  let messaging: Messaging | undefined;
  let registry: ToolRegistry | undefined;
  let registration: Registration | undefined;
  let results: KV | undefined;
  let inFlight = 0;
  // Calls taken here whose answer has not been handed to the bus yet (see handle).
  let unanswered = 0;
  let sendQueued = false;
  /**
   * Writes the answers handed to the bus at the end of the current cascade of microtasks,
   * if by then every call taken here has its answer. The calls of one delivery (a fan-out's
   * branches, sent in one step) are taken and, when quick, answered within one cascade: their
   * answers then leave together, at once, where the first would have left alone and the rest
   * at the end of the turn, to be applied by the executor in a step after the first's.
   */
  const sendWhenAllAnswered = (): void => {
    if (sendQueued) return;
    sendQueued = true;
    process.nextTick(() => {
      sendQueued = false;
      if (unanswered === 0) bus!.sendNow();
    });
  };
  let completed = 0;
  let answered = 0;
  let started = false;
  let draining: Promise<void> | undefined;

  const rememberCancel = (callId: string, reason: string): void => {
    const now = Date.now();
    cancelledEarly.set(callId, { at: now, reason });
    // Insertion order is age order: drop from the front what is too old or too many.
    for (const [k, v] of cancelledEarly) {
      if (now - v.at <= CANCEL_MEMORY_MS && cancelledEarly.size <= CANCEL_MEMORY_MAX) break;
      cancelledEarly.delete(k);
    }
  };

  const onCancel = async (msg: BusMessage): Promise<{ data: Uint8Array }> => {
    const c = decode(ToolCancelSchema, msg.data);
    for (const callId of c.callIds) {
      const r = running.get(callId);
      if (r) r.abort.abort(ToolCancelled(r.tool, c.reason));
      else rememberCancel(callId, c.reason);
    }
    return { data: new Uint8Array() };
  };

  async function run(tool: string, checks: { input: Check; output: Check }, call: ToolCall, msg: BusMessage): Promise<RecordedResult> {
    const entry = specs.get(tool)!;
    const spec = entry.spec;
    const startedAt = Date.now();
    const ac = new AbortController();
    const early = cancelledEarly.get(call.callId);
    if (early) {
      cancelledEarly.delete(call.callId);
      return failure(ToolCancelled(tool, early.reason), startedAt, workerId);
    }
    const tracked: Running = { tool, abort: ac, started: false };
    running.set(call.callId, tracked);
    const beat = setInterval(() => msg.working(), Math.max(100, Math.floor(o.ackWaitMs / 3)));
    let timer: NodeJS.Timeout | undefined;
    let release: (() => void) | undefined;
    try {
      release = await slots.acquire(ac.signal);
      ac.signal.throwIfAborted();
      tracked.started = true;
      const args = await callArgs(tool, call);
      if ("error" in args) return failure(args.error, startedAt, workerId);
      ac.signal.throwIfAborted();
      const timeoutMs = call.timeoutMs > 0 ? call.timeoutMs : (spec.timeoutMs ?? DEFAULT_TOOL_TIMEOUT_MS);
      timer = setTimeout(() => ac.abort(ToolTimeout(tool, timeoutMs)), timeoutMs);
      const input = checks.input(args.value);
      if (!input.ok) return failure(ToolInvalidInput(tool, input.problems), startedAt, workerId);
      const ctx: ToolContext = {
        idempotencyKey: call.idempotencyKey || call.callId,
        callId: call.callId,
        executionId: call.executionId,
        rootExecutionId: call.rootExecutionId || call.executionId,
        tenantId: call.tenantId,
        nodeId: call.nodeId,
        attempt: call.attempt,
        signal: ac.signal,
        stream: (() => {
          let index = 0;
          const root = call.rootExecutionId || call.executionId;
          const targets = root === call.executionId ? [call.executionId] : [call.executionId, root];
          return (delta: string) => {
            const data = encode(TokenDeltaSchema, { tenantId: call.tenantId, executionId: call.executionId, rootExecutionId: root, nodeId: call.nodeId, callId: call.callId, index: index++, delta });
            for (const id of targets) {
              void bus!.broadcast(messaging!.subjects.tokens(call.tenantId, id), data, { tenantId: call.tenantId, type: "token.delta" })
                .catch((err: unknown) => logger.debug("token not streamed", { callId: call.callId, err: errorMessage(err) }));
            }
          };
        })(),
        progress: (fraction, message, data) => {
          void messaging!
            .publishEvent("node.progress", {
              tenantId: call.tenantId,
              executionId: call.executionId,
              nodeId: call.nodeId,
              callId: call.callId,
              fraction,
              message: message ?? "",
              ...(data === undefined ? {} : { data: valueFromJson(toJsonValue(data)) }),
            })
            .catch((err: unknown) => logger.warn("progress event not published", { callId: call.callId, err: errorMessage(err) }));
        },
      };
      const aborted = new Promise<never>((_, reject) => {
        if (ac.signal.aborted) reject(ac.signal.reason as Error);
        ac.signal.addEventListener("abort", () => reject(ac.signal.reason as Error), { once: true });
      });
      aborted.catch(() => undefined);
      const raw: unknown = await Promise.race([spec.handler(input.value as never, ctx), aborted]);
      const output = toJsonValue(raw === undefined ? null : raw);
      const checked = checks.output(output);
      if (!checked.ok) return failure(ToolInvalidOutput(tool, checked.problems), startedAt, workerId);
      return { ok: true, output: toJsonValue(checked.value ?? null), durationMs: Date.now() - startedAt, workerId };
    } catch (err) {
      const reason: unknown = ac.signal.aborted ? ac.signal.reason : err;
      if (ToolWorkerDraining.is(reason)) throw reason;
      return failure(errorInfo(tool, reason), startedAt, workerId);
    } finally {
      clearTimeout(timer);
      clearInterval(beat);
      release?.();
      running.delete(call.callId);
    }
  }

  /**
   * A call's arguments: `args` as they came, or, when the executor sent a reference, the value
   * read from the object of this call (its bytes checked against the reference's sha256).
   */
  async function callArgs(tool: string, call: ToolCall): Promise<{ value: unknown } | { error: { code: string; message: string; retryable: boolean } }> {
    const ref = argsRef(call);
    if (!ref) return { value: call.args ?? {} };
    const label = `object:${ref.bucket}/${ref.name}`;
    if (ref.name !== objectName(call.callId)) return { error: ToolArgsObjectInvalid(tool, call.callId, label) };
    const lost = (why: string): { error: { code: string; message: string; retryable: boolean } } => {
      logger.warn("the arguments of a call cannot be read", { tool, callId: call.callId, object: label, why });
      return { error: ToolArgsObjectLost(tool, call.callId, why) };
    };
    const data = await bus!.objects(LARGE_ARGS_BUCKET).get(ref.name, ref);
    if (data === null) return lost(`${label} is gone (expired or deleted)`);
    if (sha256Hex(data) !== ref.sha256) return lost(`${label} does not match its sha256`);
    let value: unknown;
    try {
      value = JSON.parse(dec.decode(data));
    } catch (err) {
      return lost(`${label} is not JSON (${errorMessage(err)})`);
    }
    if (typeof value !== "object" || value === null || Array.isArray(value)) return lost(`${label} is not a JSON object`);
    return { value };
  }

  /** Deletes the arguments object of a call that is answered (a redelivery answers from the record). */
  async function dropArgs(tool: string, call: ToolCall): Promise<void> {
    const ref = argsRef(call);
    if (!ref || ref.name !== objectName(call.callId)) return;
    await bus!.objects(LARGE_ARGS_BUCKET).delete(ref.name).catch((err: unknown) =>
      logger.warn("an arguments object was not deleted; its bucket's max age removes it", { tool, callId: call.callId, err: errorMessage(err) }));
  }

  /**
   * The result as it is sent and recorded, and its JSON: a large output is stored as an
   * object and replaced by a reference to it; one above `maxResultBytes` fails the call.
   * A small result is only serialized (its record needs that anyway).
   */
  function settleSize(tool: string, call: ToolCall, result: RecordedResult): { result: RecordedResult; text: string } | Promise<{ result: RecordedResult; text: string }> {
    const text = JSON.stringify(result);
    const inline = Math.min(o.largeResultBytes, Math.floor(bus!.maxPayload() * INLINE_SHARE_OF_MAX_PAYLOAD));
    // A small result is settled at once, without an await: calls delivered together are then
    // still answered together (sendWhenAllAnswered), as before large results were handled.
    if (!exceeds(text, inline)) return { result, text };
    return settleLarge(tool, call, result);
  }

  async function settleLarge(tool: string, call: ToolCall, result: RecordedResult): Promise<{ result: RecordedResult; text: string }> {
    if (!result.ok) {
      // Only an error message can make a failure this large: keep its start.
      const message = result.error?.message ?? "";
      const cut = { ...result, error: { code: result.error?.code ?? "BATON_TOOL_FAILED", retryable: result.error?.retryable ?? false, message: `${message.slice(0, 4096)}… (${message.length - 4096} more characters cut)` } };
      return { result: cut, text: JSON.stringify(cut) };
    }
    const bytes = enc.encode(canonicalJson(result.output ?? null));
    if (bytes.byteLength > o.maxResultBytes) {
      logger.warn("a result larger than maxResultBytes fails its call", { tool, callId: call.callId, bytes: bytes.byteLength, max: o.maxResultBytes });
      const failed = failure(ToolResultTooLarge(tool, bytes.byteLength, o.maxResultBytes), Date.now() - result.durationMs, workerId);
      return { result: failed, text: JSON.stringify(failed) };
    }
    const name = objectName(call.callId);
    const info = await bus!.objects(LARGE_RESULTS_BUCKET).put(name, bytes, { ttlMs: o.resultTtlMs });
    const ref = { ...result, output: objectRefJson({ bucket: LARGE_RESULTS_BUCKET, name, ...info, sha256: sha256Hex(bytes) }) };
    return { result: ref, text: JSON.stringify(ref) };
  }

  async function record(key: string, result: RecordedResult, text = JSON.stringify(result)): Promise<RecordedResult> {
    try {
      await results!.create(key, enc.encode(text));
      return result;
    } catch (err) {
      // Another delivery of the same call recorded first: its result is the answer.
      const e = await results!.get(key);
      if (e && e.operation === "PUT" && e.length > 0) return JSON.parse(dec.decode(e.value)) as RecordedResult;
      throw err;
    }
  }

  /** Sends a call's result to the executor as the `tool.result` command. */
  function answer(tool: string, call: ToolCall, result: RecordedResult): Promise<unknown> {
    return messaging!.sendCommand(
      "tool.result",
      {
        callId: call.callId,
        executionId: call.executionId,
        tenantId: call.tenantId,
        nodeId: call.nodeId,
        attempt: call.attempt,
        tool: call.tool || tool,
        ok: result.ok,
        ...(result.ok ? { output: valueFromJson(result.output ?? null) } : {}),
        ...(result.error ? { error: result.error } : {}),
        durationMs: result.durationMs,
        workerId: result.workerId,
      },
      `result:${call.callId}`,
    );
  }

  /**
   * Each call being handled here: the delivery that handles it last. A process that stalled
   * past ackWait (SIGSTOP, an event loop blocked) holding a call gets the call's redeliveries
   * too, read when it wakes; they wait for the delivery before them instead of running the
   * handler again at the same time (its result not recorded yet), then answer from the record.
   */
  const handling = new Map<string, Promise<void>>();

  async function handle(tool: string, msg: BusMessage): Promise<void> {
    const call = decode(ToolCallSchema, msg.data);
    const earlier = handling.get(call.callId);
    const current = handleCall(tool, msg, call, earlier);
    handling.set(call.callId, current);
    try {
      await current;
    } finally {
      if (handling.get(call.callId) === current) handling.delete(call.callId);
    }
  }

  async function handleCall(tool: string, msg: BusMessage, call: ToolCall, earlier: Promise<void> | undefined): Promise<void> {
    const entry = specs.get(tool)!;
    inFlight++;
    unanswered++;
    let pending = true;
    const handedOver = (): void => {
      if (pending) unanswered--;
      pending = false;
    };
    try {
      if (earlier) {
        // Another delivery of this call is being handled here: its run's record is the answer.
        const beat = setInterval(() => msg.working(), Math.max(100, Math.floor(o.ackWaitMs / 3)));
        try {
          await earlier.catch(() => undefined);
        } finally {
          clearInterval(beat);
        }
      }
      const key = resultKey(call.callId);
      // Only a redelivery, or a call the executor sends again, can have been answered before;
      // the first delivery of a first send skips the lookup.
      const prior = earlier || msg.deliveryCount > 1 || call.resent ? await results!.get(key) : null;
      if (prior && prior.operation === "PUT" && prior.length > 0) {
        logger.debug("call already answered; resending its result", { tool, callId: call.callId });
        await answer(tool, call, JSON.parse(dec.decode(prior.value)) as RecordedResult);
      } else if (msg.deliveryCount >= o.maxDeliver) {
        logger.warn("last delivery of a call that was never answered", { tool, callId: call.callId, deliveries: msg.deliveryCount });
        const exhausted = failure(ToolDeliveriesExhausted(tool, msg.deliveryCount - 1), Date.now(), workerId);
        toolMetrics?.call(tool, exhausted);
        await answer(tool, call, await record(key, exhausted));
      } else {
        const sized = settleSize(tool, call, await run(tool, entry.checks, call, msg));
        const { result, text } = sized instanceof Promise ? await sized : sized;
        completed++;
        toolMetrics?.call(tool, result);
        // The record and the answer go out together; the message is acked only after both.
        // A crash between them redelivers the call: with its result recorded it is answered
        // from the record, otherwise it runs again (the handler has ctx.idempotencyKey for
        // its side effects) and the repeated answer is dropped by the commands stream's
        // duplicate window. Two deliveries racing (a worker presumed dead) may record
        // different results; the executor takes the first answer either way.
        // The answer first: the server stores and delivers it before it stores the record.
        const sent = Promise.all([answer(tool, call, result), record(key, result, text)]);
        handedOver();
        // The executor waits for the answer: when it is the only call here, out now rather
        // than when this turn ends; when the others taken with it are answered too, all of
        // them at the end of this cascade. Under load the answers of a turn share one write.
        if (inFlight === 1) bus!.sendNow();
        else sendWhenAllAnswered();
        await sent;
      }
      // Answered and recorded: the arguments are not read again.
      await dropArgs(tool, call);
      answered++;
    } finally {
      inFlight--;
      handedOver();
    }
  }

  const abortAll = (onlyWaiting: boolean): void => {
    for (const r of running.values()) if (!onlyWaiting || !r.started) r.abort.abort(ToolWorkerDraining(r.tool, { retryDelayMs: 0 }));
  };

  const worker: Worker = {
    workerId,
    get inFlight() {
      return inFlight;
    },
    get completed() {
      return completed;
    },
    get answered() {
      return answered;
    },
    get registry() {
      if (!registry) throw ToolSdkInvalidOptions("worker", ["registry: the worker is not started"]);
      return registry;
    },
    ready: () => started && draining === undefined && (bus?.isConnected() ?? false),
    async start() {
      if (started) return;
      bus = options.bus ?? (await connectBus({
        ...(options.servers === undefined ? {} : { servers: options.servers }),
        ...(options.prefix === undefined ? {} : { prefix: options.prefix }),
        name: `baton-worker-${workerId}`,
        logger,
      }));
      try {
        messaging = createMessaging(bus);
        results = await bus.kv(RESULTS_BUCKET, { ttlMs: o.resultTtlMs });
        registry = createToolRegistry(bus, { presenceTtlMs: o.presenceTtlMs });
        // A queue group of its own: every worker gets every cancel broadcast.
        subs.push(await bus.serve(messaging.subjects.toolCancel(), onCancel, { queue: `cancel_${workerKeyToken(workerId)}_${randomUUID().slice(0, 8)}` }));
        for (const name of specs.keys()) {
          subs.push(
            await bus.consume(
              {
                stream: "tools",
                durable: toolDurable(name),
                filterSubjects: [messaging.subjects.toolCall(name)],
                concurrency: o.concurrency,
                ackWaitMs: o.ackWaitMs,
                maxDeliver: o.maxDeliver,
                // A lost ack only redelivers the call, which is then answered from its record.
                ack: "plain",
              },
              (msg) => handle(name, msg),
            ),
          );
        }
        registration = await registry.register(workerId, [...specs.values()].map((s) => s.descriptor));
        started = true;
        logger.info("worker started", { tools: [...specs.keys()], concurrency: o.concurrency });
      } catch (err) {
        await Promise.all(subs.map((s) => s.stop().catch(() => undefined)));
        if (!options.bus) await bus.drain().catch(() => undefined);
        throw err;
      }
    },
    drain() {
      draining ??= (async () => {
        if (!bus) return;
        logger.info("worker draining", { inFlight });
        const grace = setTimeout(() => abortAll(false), o.drainGraceMs);
        try {
          // Consumers first, then the cancel listener. Calls waiting for a slot go back to
          // the queue now (nak); running ones get the grace period.
          const stopping = Promise.all(subs.slice(1).map((s) => s.stop()));
          abortAll(true);
          await stopping;
          await subs[0]?.stop();
        } finally {
          clearTimeout(grace);
        }
        await registration?.stop();
        if (!options.bus) await bus.drain();
        logger.info("worker drained", { completed });
      })();
      return draining;
    },
    stop() {
      return worker.drain();
    },
  };
  return worker;
}

/** Options of {@link runWorker}: the worker's, plus what to do once drained. */
export interface RunWorkerOptions extends WorkerOptions {
  /** Signals that start a drain. @default ["SIGTERM", "SIGINT"] */
  signals?: NodeJS.Signals[];
  /** Called after the drain (default: exit the process with code 0, or 1 when the drain failed). */
  onDrained?: (err?: unknown) => void;
}

/** Starts a worker and drains it on SIGTERM / SIGINT, then exits. For a worker's `main`. */
export async function runWorker(options: RunWorkerOptions): Promise<Worker> {
  const worker = createWorker(options);
  await worker.start();
  const signals = options.signals ?? ["SIGTERM", "SIGINT"];
  const done = options.onDrained ?? ((err?: unknown) => process.exit(err === undefined ? 0 : 1));
  const onSignal = (): void => {
    for (const s of signals) process.off(s, onSignal);
    worker.drain().then(
      () => done(),
      (err: unknown) => done(err),
    );
  };
  for (const s of signals) process.on(s, onSignal);
  return worker;
}

/**
 * Broadcasts a ToolCancel to every worker of the bus (core NATS, `{p}.rpc.tools.cancel`).
 * Resolves once one worker acknowledged or none is listening (nothing to cancel then).
 */
export async function cancelToolCalls(bus: Bus, callIds: readonly string[], reason = ""): Promise<void> {
  const subject = createMessaging(bus).subjects.toolCancel();
  try {
    await bus.request(subject, encode(ToolCancelSchema, { callIds: [...callIds], reason }), { timeoutMs: 2_000 });
  } catch (err) {
    if (hasCode(err, "BATON_BUS_NO_RESPONDERS") || hasCode(err, "BATON_BUS_TIMEOUT")) return;
    throw err;
  }
}

