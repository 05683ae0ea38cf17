import { setTimeout as sleep } from "node:timers/promises";
import { SpanKind } from "@opentelemetry/api";
import type { Attributes, Tracer } from "@opentelemetry/api";
import type { ConsumerMessages, JetStreamClient, JetStreamManager, JsMsg } from "@nats-io/jetstream";
import { nanos } from "@nats-io/nats-core";
import { extractTraceContext, withSpan } from "@baton/telemetry";
import type { Logger } from "@baton/telemetry";
import { BusInvalidOptions, BusUnsupported } from "./errors.ts";
import { fromJsMsg } from "./message.ts";
import type { BusMessage } from "./message.ts";
import { filterWithin, isValidDurable, isValidFilter, subjectMatches } from "./options.ts";
import type { StreamKey } from "./options.ts";
import { settle } from "./settle.ts";
import type { SettleDecision } from "./settle.ts";
import { AckPolicy, DeliverPolicy, ensureConsumer } from "./topology.ts";
import type { ConsumerDesired } from "./topology.ts";

/** A durable pull consumer of one of the three streams. */
export interface ConsumerSpec {
  stream: StreamKey;
  /** Durable name, shared by every process that should split the work (letters, digits, `_`, `-`). */
  durable: string;
  /** Subjects (wildcards allowed) this consumer takes from the stream; at least one. */
  filterSubjects: string[];
  /** Time a delivery may stay unacknowledged before JetStream redelivers it. @default 30_000 */
  ackWaitMs?: number;
  /** Deliveries of one message before it is terminated; 0 or less for unlimited. @default 10 */
  maxDeliver?: number;
  /** Unacknowledged deliveries across all processes sharing the durable. @default 256 */
  maxAckPending?: number;
  /** Handlers in flight in this process; also the most messages fetched ahead. @default 16 */
  concurrency?: number;
  /**
   * Retry delays for naks: the n-th retry waits `backoffMs[n - 1]`, the last entry
   * repeating. An error's own `retryDelayMs` wins. @default exponential from 1 s, capped at 60 s
   */
  backoffMs?: number[];
  /**
   * Where a new durable starts; ignored when it exists. Work-queue streams need "all".
   * @default "all"
   */
  deliverPolicy?: "all" | "new";
  /**
   * How a handled message is acknowledged. "confirmed" waits for the server to confirm
   * the ack; "plain" sends it and goes on (one message less per delivery; a lost ack means
   * one more delivery, so only for handlers that take a repeat calmly, like tool workers with
   * their recorded results). A plain ack goes out with the connection's next write, or by
   * itself within 20 ms; stop() sends the held ones before it resolves. @default "confirmed"
   */
  ack?: "confirmed" | "plain";
}

/** A running consumer or server. */
export interface Subscription {
  /** Stops fetching (or receiving) and resolves once the handlers in flight have settled. */
  stop(): Promise<void>;
  /** Messages whose handler has finished (successfully or not) and been settled. */
  readonly processed: number;
}

export type MessageHandler = (msg: BusMessage) => Promise<void>;

export interface ConsumerContext {
  js: JetStreamClient;
  jsm: JetStreamManager;
  streams: Readonly<Record<StreamKey, string>>;
  /** Subjects each stream takes, to refuse filters outside them early. */
  streamSubjects: Readonly<Record<StreamKey, readonly string[]>>;
  serverVersion: string;
  logger: Logger;
  tracer: Tracer;
  isClosed(): boolean;
  /** Sends a frame nobody waits for (a plain ack) with the connection's next write, or shortly. */
  later(frame: () => void): void;
  /** Round trip to the server: everything written before it (and everything held for later) has been sent. */
  flush(): Promise<void>;
}

export const DEFAULT_ACK_WAIT_MS = 30_000;
export const DEFAULT_MAX_DELIVER = 10;
export const DEFAULT_MAX_ACK_PENDING = 256;
export const DEFAULT_CONCURRENCY = 16;
/** How long one pull request stays open at the server. */
const FETCH_EXPIRES_MS = 5_000;

interface CompiledSpec {
  stream: StreamKey;
  durable: string;
  filterSubjects: string[];
  ackWaitMs: number;
  maxDeliver: number;
  maxAckPending: number;
  concurrency: number;
  backoffMs: number[] | undefined;
  deliverPolicy: "all" | "new";
  ack: "confirmed" | "plain";
}

const STREAM_KEYS: readonly string[] = ["events", "commands", "tools"];

function posInt(v: unknown): boolean {
  return typeof v === "number" && Number.isInteger(v) && v > 0;
}

export function compileConsumerSpec(spec: ConsumerSpec): CompiledSpec {
  const problems: string[] = [];
  if (!STREAM_KEYS.includes(spec.stream)) problems.push(`stream: "${String(spec.stream)}" is not one of events, commands, tools`);
  if (typeof spec.durable !== "string" || !isValidDurable(spec.durable)) problems.push(`durable: "${String(spec.durable)}" must be letters, digits, "_" or "-"`);
  if (!Array.isArray(spec.filterSubjects) || spec.filterSubjects.length === 0) problems.push("filterSubjects: at least one subject is needed");
  else for (const f of spec.filterSubjects) if (!isValidFilter(f)) problems.push(`filterSubjects: "${f}" is not a subject filter`);
  const ackWaitMs = spec.ackWaitMs ?? DEFAULT_ACK_WAIT_MS;
  if (!posInt(ackWaitMs)) problems.push("ackWaitMs: must be a positive integer");
  const maxDeliver = spec.maxDeliver ?? DEFAULT_MAX_DELIVER;
  if (typeof maxDeliver !== "number" || !Number.isInteger(maxDeliver)) problems.push("maxDeliver: must be an integer");
  const maxAckPending = spec.maxAckPending ?? DEFAULT_MAX_ACK_PENDING;
  if (!posInt(maxAckPending)) problems.push("maxAckPending: must be a positive integer");
  const concurrency = spec.concurrency ?? DEFAULT_CONCURRENCY;
  if (!posInt(concurrency)) problems.push("concurrency: must be a positive integer");
  if (spec.backoffMs !== undefined && !(Array.isArray(spec.backoffMs) && spec.backoffMs.every((d) => Number.isFinite(d) && d >= 0))) {
    problems.push("backoffMs: must be a list of non-negative numbers");
  }
  const deliverPolicy = spec.deliverPolicy ?? "all";
  if (deliverPolicy !== "all" && deliverPolicy !== "new") problems.push('deliverPolicy: must be "all" or "new"');
  else if (deliverPolicy === "new" && spec.stream !== "events") problems.push('deliverPolicy: work-queue streams need "all"');
  const ack = spec.ack ?? "confirmed";
  if (ack !== "confirmed" && ack !== "plain") problems.push('ack: must be "confirmed" or "plain"');
  if (problems.length > 0) throw BusInvalidOptions(`ConsumerSpec ${String(spec.durable)}`, problems, { details: problems });
  return {
    stream: spec.stream,
    durable: spec.durable,
    filterSubjects: [...new Set(spec.filterSubjects)],
    ackWaitMs,
    maxDeliver: maxDeliver <= 0 ? -1 : maxDeliver,
    maxAckPending,
    concurrency,
    backoffMs: spec.backoffMs,
    deliverPolicy,
    ack,
  };
}

/** True when the server `version` ("2.9.10") is at least `major.minor`. */
export function serverAtLeast(version: string, major: number, minor: number): boolean {
  const [a = 0, b = 0] = version.split(".").map((p) => Number.parseInt(p, 10));
  return a > major || (a === major && b >= minor);
}

/**
 * The narrowest single filter that covers all of `filters` — their shared leading tokens,
 * then `>` — when it lies within one of `within` (the stream's subjects); otherwise
 * undefined. For servers that take one filter per consumer (NATS before 2.10): the
 * learner's `….evt.execution.completed.*.*` and `….evt.execution.failed.*.*` become
 * `….evt.execution.>`, so the server no longer sends it every node event to skip.
 */
export function coveringFilter(filters: readonly string[], within: readonly string[]): string | undefined {
  const split = filters.map((f) => f.split("."));
  const first = split[0];
  if (first === undefined) return undefined;
  let shared = 0;
  while (shared < first.length && first[shared] !== ">" && split.every((t) => t[shared] === first[shared])) shared++;
  // `a.b.>` does not match `a.b` itself: a filter that is all shared tokens needs one fewer.
  if (split.some((t) => t.length === shared)) shared--;
  if (shared <= 0) return undefined;
  const cover = [...first.slice(0, shared), ">"].join(".");
  return within.some((w) => filterWithin(cover, w)) ? cover : undefined;
}

/**
 * How the filters reach the server. NATS before 2.10 takes one filter per consumer; then
 * an events consumer with several filters takes the narrowest filter covering them all
 * (the whole stream when there is none) and skips (acks) the rest in the client. A work
 * queue cannot do that without stealing others' messages.
 */
export function planFilters(spec: CompiledSpec, serverVersion: string, streamSubjects: readonly string[]): { server: Pick<ConsumerDesired, "filter_subject" | "filter_subjects">; client: string[] | undefined } {
  const filters = spec.filterSubjects;
  if (filters.length === 1) return { server: { filter_subject: filters[0]! }, client: undefined };
  if (serverAtLeast(serverVersion, 2, 10)) return { server: { filter_subjects: filters }, client: undefined };
  if (spec.stream === "events") {
    const cover = coveringFilter(filters, streamSubjects);
    return { server: cover === undefined ? {} : { filter_subject: cover }, client: filters };
  }
  throw BusUnsupported(`consumer ${spec.durable} with several filter subjects on the ${spec.stream} work queue`, "2.10", serverVersion);
}

function definedAttributes(attrs: Record<string, string | number | undefined>): Attributes {
  const out: Attributes = {};
  for (const [k, v] of Object.entries(attrs)) if (v !== undefined) out[k] = v;
  return out;
}

export async function startConsumer(ctx: ConsumerContext, rawSpec: ConsumerSpec, handler: MessageHandler): Promise<Subscription> {
  const spec = compileConsumerSpec(rawSpec);
  const streamName = ctx.streams[spec.stream];
  const taken = ctx.streamSubjects[spec.stream];
  const outside = spec.filterSubjects.filter((f) => !taken.some((t) => filterWithin(f, t)));
  if (outside.length > 0) {
    const problems = outside.map((f) => `filterSubjects: "${f}" is outside the ${spec.stream} stream (${taken.join(", ")})`);
    throw BusInvalidOptions(`ConsumerSpec ${spec.durable}`, problems, { details: problems });
  }
  const planned = planFilters(spec, ctx.serverVersion, taken);
  // An events durable an earlier Baton made without a filter (several filters on NATS < 2.10)
  // keeps it: that server cannot add one in place (ensureConsumer). The client skips the rest.
  const keepUnfiltered = spec.stream === "events" && !serverAtLeast(ctx.serverVersion, 2, 10);
  const info = await ensureConsumer(ctx.jsm, streamName, {
    durable_name: spec.durable,
    ack_policy: AckPolicy.Explicit,
    deliver_policy: spec.deliverPolicy === "new" ? DeliverPolicy.New : DeliverPolicy.All,
    ack_wait: nanos(spec.ackWaitMs),
    max_deliver: spec.maxDeliver,
    max_ack_pending: spec.maxAckPending,
    ...planned.server,
  }, { keepUnfiltered });
  const consumer = ctx.js.consumers.getConsumerFromInfo(info);
  const log = ctx.logger.child({ stream: streamName, durable: spec.durable });
  const unfiltered = !info.config.filter_subject && !info.config.filter_subjects?.length;
  const filters = unfiltered && planned.client === undefined && spec.stream === "events" ? { ...planned, client: spec.filterSubjects } : planned;
  if (unfiltered && keepUnfiltered && (planned.server.filter_subject ?? planned.server.filter_subjects) !== undefined) {
    log.info("this durable takes every event and skips the others here: NATS before 2.10 cannot give it a filter in place; delete the consumer to narrow it", { filterSubjects: spec.filterSubjects });
  }
  const termWithReason = serverAtLeast(ctx.serverVersion, 2, 11);

  let stopped = false;
  let processed = 0;
  let current: ConsumerMessages | undefined;
  const inflight = new Set<Promise<void>>();
  const stopSignal = new AbortController();
  let slotFree: (() => void) | undefined;
  const wake = (): void => {
    const w = slotFree;
    slotFree = undefined;
    w?.();
  };
  const waitForSlot = (): Promise<void> =>
    stopped || inflight.size < spec.concurrency ? Promise.resolve() : new Promise<void>((resolve) => (slotFree = resolve));

  const apply = async (m: JsMsg, msg: BusMessage, decision: SettleDecision): Promise<void> => {
    switch (decision.action) {
      case "ack":
        // Confirmed, so a stopped consumer never leaves an ack in the air. A plain ack goes
        // out with the connection's next write (a handler's work was sent before it, so it
        // would otherwise take a system call of its own); stop() flushes the ones held.
        if (spec.ack === "plain") ctx.later(() => m.ack());
        else await m.ackAck();
        return;
      case "nak":
        log.debug("message will be retried", { subject: msg.subject, seq: msg.seq, deliveryCount: msg.deliveryCount, delayMs: decision.delayMs });
        m.nak(decision.delayMs);
        return;
      case "term":
        log.warn("message terminated", { subject: msg.subject, seq: msg.seq, deliveryCount: msg.deliveryCount, code: decision.code ?? "error", reason: decision.reason });
        if (termWithReason) m.term(decision.reason.slice(0, 512));
        else m.term();
        return;
    }
  };

  const dispatch = async (m: JsMsg): Promise<void> => {
    try {
      await handleOne(m);
    } catch (err) {
      // Only settling can throw here (connection closed); JetStream redelivers after ack wait.
      log.warn("settling a message failed; JetStream will redeliver it", { subject: m.subject, seq: m.seq, err });
    }
  };

  const handleOne = async (m: JsMsg): Promise<void> => {
    if (stopped) {
      // Fetched while stopping: hand it straight back to the other consumers.
      m.nak();
      return;
    }
    if (filters.client !== undefined && !filters.client.some((f) => subjectMatches(f, m.subject))) {
      m.ack();
      return;
    }
    const msg = fromJsMsg(m, () => m.working());
    let failure: unknown;
    try {
      await withSpan(
        ctx.tracer,
        `process ${spec.durable}`,
        definedAttributes({
          "messaging.system": "nats",
          "messaging.operation.type": "process",
          "messaging.destination.name": msg.subject,
          "messaging.consumer.group.name": spec.durable,
          "messaging.message.id": msg.meta.idempotencyKey,
          "messaging.nats.delivery_count": msg.deliveryCount,
          "messaging.nats.stream_sequence": msg.seq,
          "baton.tenant": msg.meta.tenantId,
          "baton.type": msg.meta.type,
        }),
        () => handler(msg),
        { kind: SpanKind.CONSUMER, parent: extractTraceContext(msg.meta.headers) },
      );
    } catch (err) {
      failure = err ?? new Error("handler threw without a value");
    }
    try {
      await apply(m, msg, settle(failure, msg.deliveryCount, spec.maxDeliver, spec.backoffMs === undefined ? {} : { backoffMs: spec.backoffMs }));
    } finally {
      processed += 1;
    }
  };

  const loop = async (): Promise<void> => {
    let failures = 0;
    while (!stopped && !ctx.isClosed()) {
      await waitForSlot();
      if (stopped) break;
      try {
        const batch = await consumer.fetch({ max_messages: spec.concurrency - inflight.size, expires: FETCH_EXPIRES_MS });
        current = batch;
        if (stopped) void batch.close();
        // The batch holds at most the free slots, so in-flight handlers never exceed `concurrency`.
        for await (const m of batch) {
          const p = dispatch(m);
          inflight.add(p);
          void p.then(() => {
            inflight.delete(p);
            wake();
          });
        }
        failures = 0;
      } catch (err) {
        if (stopped || ctx.isClosed()) break;
        failures += 1;
        log.warn("fetching messages failed; retrying", { err, failures });
        await sleep(Math.min(10_000, 100 * 2 ** failures), undefined, { signal: stopSignal.signal }).catch(() => undefined);
      } finally {
        current = undefined;
      }
    }
  };
  const running = loop();

  let stopping: Promise<void> | undefined;
  return {
    get processed() {
      return processed;
    },
    stop() {
      stopping ??= (async () => {
        stopped = true;
        stopSignal.abort();
        wake();
        if (current !== undefined) await current.close();
        await running;
        await Promise.all(inflight);
        if (spec.ack === "plain" && !ctx.isClosed()) await ctx.flush().catch(() => undefined);
      })();
      return stopping;
    },
  };
}
