import { SpanKind } from "@opentelemetry/api";
import type { Attributes } from "@opentelemetry/api";
import { connect } from "@nats-io/transport-node";
import { jetstream, jetstreamManager, DeliverPolicy, JetStreamApiCodes, JetStreamApiError } from "@nats-io/jetstream";
import type { ConsumerMessages, JetStreamClient, JetStreamManager, MsgRequest, StoredMsg } from "@nats-io/jetstream";
import { headers as natsHeaders, RequestError, TimeoutError } from "@nats-io/nats-core";
import type { Msg, NatsConnection } from "@nats-io/nats-core";
import { Kvm } from "@nats-io/kv";
import type { KV } from "@nats-io/kv";
import { BatonError, errorMessage, hasCode } from "@baton/errors";
import { createLogger, extractTraceContext, getTracer, injectTraceContext, withSpan } from "@baton/telemetry";
import { BusClosed, BusConnectFailed, BusHandlerFailed, BusInvalidOptions, BusNoResponders, BusPayloadTooLarge, BusPublishFailed, BusTimeout } from "./errors.ts";
import { buildHeaders, fromCoreMsg, fromJsMsg, headerRecord, HEADERS, metaFromHeaders } from "./message.ts";
import type { BusMessage, MessageMeta } from "./message.ts";
import { compileBusOptions, filterWithin, isValidFilter, isValidSubject, streamSubjects, subjectMatches } from "./options.ts";
import type { BusOptions, StreamKey } from "./options.ts";
import { coveringFilter, serverAtLeast, startConsumer } from "./consumer.ts";
import type { ConsumerSpec, MessageHandler, Subscription } from "./consumer.ts";
import { ensureStream, streamSpecs } from "./topology.ts";
import { coalesceWrites, sendLater, sendLaterNow, sendNow } from "./coalesce.ts";
import { skipSettledRequestErrors } from "./settled-requests.ts";
import { objectStore } from "./objects.ts";
import type { ObjectStore } from "./objects.ts";

/** Options of {@link Bus.replay}. */
export interface ReplayOptions {
  /** First stream sequence to deliver. @default 1 (the oldest event kept) */
  fromSeq?: number;
  /** Ends the replay; without one it runs until the bus drains. */
  signal?: AbortSignal;
}

/** Options of {@link Bus.request}. */
export interface RequestOptions {
  /** @default 5_000 */
  timeoutMs?: number;
  meta?: MessageMeta;
}

/** What a request handler answers. */
export interface Reply {
  data: Uint8Array;
  headers?: Record<string, string>;
}

/** Options of {@link Bus.serve}. */
export interface ServeOptions {
  /** Queue group: one member answers each request; `false` = every subscriber gets every message (broadcast). @default "baton" */
  queue?: string | false;
}

/** Options of {@link Bus.kv}. */
export interface KvBucketOptions {
  /** Values kept per key. @default 1 */
  history?: number;
  /** Age after which values expire, in ms; 0 keeps them. @default 0 */
  ttlMs?: number;
}

/** Baton's message bus on NATS JetStream. Get one with {@link connectBus}. */
export interface Bus {
  readonly prefix: string;
  /** Stream names, `{P}_EVENTS`, `{P}_COMMANDS`, `{P}_TOOLS` (docs/dev/contracts.md). */
  readonly streams: Readonly<Record<StreamKey, string>>;
  /**
   * Creates the three streams or updates the settings Baton owns (subjects, max age,
   * duplicate window, replicas). Idempotent, and safe when many processes call it at once.
   */
  ensureTopology(): Promise<void>;
  /**
   * Publishes to JetStream and waits for the stream's ack. Adds `traceparent` from the
   * active context and the `baton-*` / `Nats-Msg-Id` headers from `meta`.
   * Throws BATON_BUS_PUBLISH_FAILED when no stream stored it, and BATON_BUS_PAYLOAD_TOO_LARGE
   * (not retryable) when `data` is larger than the server's `max_payload`.
   */
  publish(subject: string, data: Uint8Array, meta?: MessageMeta): Promise<{ seq: number; duplicate: boolean }>;
  /**
   * Runs `handler` for each message of a durable pull consumer (created or updated to
   * `spec`). The handler runs inside the publisher's trace context; its outcome is settled
   * by {@link settle}: success acks, non-retryable errors and the last delivery term,
   * other errors nak with backoff.
   */
  consume(spec: ConsumerSpec, handler: MessageHandler): Promise<Subscription>;
  /**
   * Delivers the events matching `filterSubject` (one filter or several, each within the
   * events stream) in stream order, from the oldest kept (or `fromSeq`), then follows new
   * ones until `signal` aborts or the bus drains. Resolves then; rejects when `onMessage`
   * throws, and with BATON_BUS_INVALID_OPTIONS for a filter outside the events stream.
   * No durable state: a late reader sees everything.
   */
  replay(filterSubject: string | readonly string[], opts: ReplayOptions, onMessage: (msg: BusMessage) => void | Promise<void>): Promise<void>;
  /**
   * The last message the events stream holds on each subject matching `filterSubject` (one
   * filter within the events stream), in no particular order; none when no subject matches.
   * No consumer: the stream's subjects, then the last message of each. For rare reads (what an
   * execution last published, when its checkpoint is rebuilt), not for following events.
   */
  lastPerSubject(filterSubject: string): Promise<BusMessage[]>;
  /**
   * Since when the events stream holds every message published to it: when it was created, if it
   * has dropped none (its first sequence is still 1, or nothing was published yet), else when the
   * oldest message it still holds was stored; null when it has dropped every message. Messages
   * go oldest first (max age, size limits), so whatever was published since then is all still
   * there: a subject with no message since then never had one.
   */
  eventsKeptSince(): Promise<Date | null>;
  /**
   * The message ids (`Nats-Msg-Id`) of the messages `stream` holds, or undefined when it holds
   * more than `limit` messages. In a work queue (commands, tools) those are the messages not
   * acked yet: waiting for a consumer or being handled. One request per message (`next_by_subj`,
   * nats-server 2.9 or later): for rare reads, such as the recovery sweep asking whether an
   * unanswered call is still queued, not for following a stream.
   */
  heldMessageIds(stream: StreamKey, limit: number): Promise<Set<string> | undefined>;
  /**
   * Core NATS request/reply. Throws BATON_BUS_NO_RESPONDERS (503) when nobody serves the
   * subject, BATON_BUS_TIMEOUT (504) without an answer in time, and the handler's own error
   * (same code, status, retryability) when the server answered with one.
   */
  request(subject: string, data: Uint8Array, opts?: RequestOptions): Promise<BusMessage>;
  /**
   * Answers requests on `subject` in a queue group. A thrown error is answered with
   * headers `baton-error-code`, `baton-error-message`, `baton-error-status`,
   * `baton-error-retryable` (errors that are not Baton errors become
   * BATON_BUS_HANDLER_FAILED, their message only logged).
   */
  serve(subject: string, handler: (msg: BusMessage) => Promise<Reply>, opts?: ServeOptions): Promise<Subscription>;
  /**
   * Core NATS publish, fire and forget, to every subscriber (e.g. `serve(..., { queue: false })`):
   * for signals that are useless once missed, such as "cancel these calls".
   */
  broadcast(subject: string, data: Uint8Array, meta?: MessageMeta): Promise<void>;
  /**
   * Writes what has been published so far to the socket now. The bus otherwise sends each
   * event-loop turn's frames in one write when the turn ends (ADR 007); call this right after
   * a publish whose reader waits for it while this turn still has work to do.
   */
  sendNow(): void;
  /** Opens (creating if needed) the KV bucket `{prefix}_{bucket}` (prefix with `.` → `_`). */
  kv(bucket: string, opts?: KvBucketOptions): Promise<KV>;
  /**
   * The keys of bucket `{prefix}_{bucket}` matching `filter` (a key, `*` and `>` wildcards;
   * every key by default) that hold an entry, sorted; a delete marker counts, so read each
   * with `get()` to see its operation. One stream-info request: unlike nats.js `KV.keys()`,
   * whose consumer can wait forever when an entry expires (max age) while it is being read,
   * this always answers. An unknown bucket has no keys.
   */
  kvKeys(bucket: string, filter?: string): Promise<string[]>;
  /**
   * The value of `key` in bucket `{prefix}_{bucket}` and when the server stored it, or null
   * when the key holds none (never written, deleted, purged, expired) or the bucket does not
   * exist. Reads without opening the bucket, so a reader never creates it with settings of its own.
   */
  kvGet(bucket: string, key: string): Promise<KvValue | null>;
  /**
   * Puts `value` at `key` in bucket `{prefix}_{bucket}` only when the key has never held a
   * value (or it has expired): true when written, false when the key holds one already or
   * the bucket does not exist. Like {@link kvGet}, it never creates the bucket.
   */
  kvCreate(bucket: string, key: string, value: Uint8Array): Promise<boolean>;
  /**
   * The object bucket `{prefix}_{bucket}` (stream `OBJ_{prefix}_{bucket}`, created on the
   * first put): values larger than a message may be, stored as parts (objects.ts).
   */
  objects(bucket: string): ObjectStore;
  /** The largest message the server takes (its `max_payload`), in bytes. */
  maxPayload(): number;
  isConnected(): boolean;
  /** Stops every subscription and replay (waiting for handlers in flight), then drains the connection. */
  drain(): Promise<void>;
}

/** A key's value as {@link Bus.kvGet} reads it. */
export interface KvValue {
  value: Uint8Array;
  /** When the server stored it (its clock). */
  storedAt: Date;
}

const tracer = getTracer("@baton/bus");
const BUCKET_RE = /^[A-Za-z0-9_-]+$/;

function attrs(values: Record<string, string | number | undefined>): Attributes {
  const out: Attributes = {};
  for (const [k, v] of Object.entries(values)) if (v !== undefined) out[k] = v;
  return out;
}

function headerValue(v: string): string {
  return v.replace(/[\r\n]+/g, " ");
}

function errorReply(err: unknown, subject: string): { headers: Record<string, string>; body: { code: string; message: string } } {
  const e = hasCode(err) ? err : BusHandlerFailed(subject);
  return {
    headers: {
      [HEADERS.errorCode]: e.code,
      [HEADERS.errorMessage]: headerValue(e.message),
      [HEADERS.errorStatus]: String(e.status),
      [HEADERS.errorRetryable]: String(e.retryable),
    },
    body: { code: e.code, message: e.message },
  };
}

function remoteError(headers: Record<string, string>, subject: string): BatonError {
  const status = Number.parseInt(headers[HEADERS.errorStatus] ?? "", 10);
  return new BatonError(
    headers[HEADERS.errorCode]!,
    headers[HEADERS.errorMessage] ?? `request to ${subject} failed`,
    Number.isInteger(status) ? status : 500,
    headers[HEADERS.errorRetryable] === "true",
  );
}

/**
 * Connects to NATS, then ensures the streams exist ({@link Bus.ensureTopology}).
 * Throws BATON_BUS_INVALID_OPTIONS for bad options (every problem at once) and
 * BATON_BUS_CONNECT_FAILED when no server answers.
 */
export async function connectBus(options: BusOptions): Promise<Bus> {
  const o = compileBusOptions(options);
  const logger = (o.logger ?? createLogger("bus", "info")).child({ connection: o.name, prefix: o.prefix });
  // And none after every answered request (a nats.js 3.4 detail; see settled-requests.ts).
  skipSettledRequestErrors();
  let nc: NatsConnection;
  try {
    // noAsyncTraces: nats.js otherwise builds an Error (a stack trace) for every request and
    // every JetStream publish, in case it fails — about a tenth of the executor's CPU under
    // load. Baton wraps request failures in its own coded errors, so the trace is not needed.
    nc = await connect({ servers: [...o.servers], name: o.name, maxReconnectAttempts: -1, noAsyncTraces: true });
  } catch (err) {
    throw BusConnectFailed(o.servers.join(","), { cause: err });
  }
  try {
    const js = jetstream(nc);
    const jsm = await jetstreamManager(nc);
    const bus = new NatsBus(nc, js, jsm, o.prefix, o.streams, logger, streamSpecs(o));
    await bus.ensureTopology();
    return bus;
  } catch (err) {
    await nc.close().catch(() => undefined);
    throw err;
  }
}

class NatsBus implements Bus {
  readonly prefix: string;
  readonly streams: Readonly<Record<StreamKey, string>>;
  #nc: NatsConnection;
  #js: JetStreamClient;
  #jsm: JetStreamManager;
  #logger: ReturnType<typeof createLogger>;
  #specs: ReturnType<typeof streamSpecs>;
  #subjects: Readonly<Record<StreamKey, readonly string[]>>;
  #connected = true;
  #subscriptions = new Set<Subscription>();
  #replays = new Set<AbortController>();
  #kvs = new Map<string, Promise<KV>>();
  #objects = new Map<string, ObjectStore>();
  #draining: Promise<void> | undefined;

  constructor(
    nc: NatsConnection,
    js: JetStreamClient,
    jsm: JetStreamManager,
    prefix: string,
    streams: Readonly<Record<StreamKey, string>>,
    logger: ReturnType<typeof createLogger>,
    specs: ReturnType<typeof streamSpecs>,
  ) {
    this.#nc = nc;
    this.#js = js;
    this.#jsm = jsm;
    this.prefix = prefix;
    this.streams = streams;
    this.#logger = logger;
    this.#specs = specs;
    this.#subjects = streamSubjects(prefix);
    coalesceWrites(nc);
    void this.#watchStatus();
  }

  async #watchStatus(): Promise<void> {
    try {
      for await (const s of this.#nc.status()) {
        if (s.type === "disconnect") {
          this.#connected = false;
          this.#logger.warn("disconnected from NATS", { server: s.server });
        } else if (s.type === "reconnect") {
          this.#connected = true;
          // A reconnect dials a new socket.
          coalesceWrites(this.#nc);
          this.#logger.info("reconnected to NATS", { server: s.server });
        }
      }
    } catch {
      // The status iterator ends with the connection.
    }
  }

  #assertOpen(operation: string): void {
    if (this.#draining !== undefined || this.#nc.isClosed()) throw BusClosed(operation);
  }

  #serverVersion(): string {
    return this.#nc.info?.version ?? "0.0.0";
  }

  async ensureTopology(): Promise<void> {
    for (const spec of Object.values(this.#specs)) {
      const result = await ensureStream(this.#jsm, spec);
      if (result !== "unchanged") this.#logger.info(`stream ${result}`, { stream: spec.name });
    }
  }

  async publish(subject: string, data: Uint8Array, meta?: MessageMeta): Promise<{ seq: number; duplicate: boolean }> {
    this.#assertOpen("publish");
    if (!isValidSubject(subject)) throw BusInvalidOptions("publish subject", [`"${subject}" is not a subject`]);
    // nats.js would refuse it too, and the caller would take that for a passing failure.
    if (data.byteLength > this.maxPayload()) throw BusPayloadTooLarge(subject, data.byteLength, this.maxPayload());
    return withSpan(
      tracer,
      `publish ${meta?.type ?? "message"}`,
      attrs({ "messaging.system": "nats", "messaging.operation.type": "send", "messaging.destination.name": subject, "messaging.message.id": meta?.idempotencyKey, "baton.tenant": meta?.tenantId, "baton.type": meta?.type }),
      async () => {
        const h = buildHeaders(meta, injectTraceContext({}));
        try {
          const ack = await this.#js.publish(subject, data, h === undefined ? {} : { headers: h });
          return { seq: ack.seq, duplicate: ack.duplicate };
        } catch (err) {
          if (this.#nc.isClosed()) throw BusClosed("publish", { cause: err });
          throw BusPublishFailed(subject, { cause: err });
        }
      },
      { kind: SpanKind.PRODUCER },
    );
  }

  async consume(spec: ConsumerSpec, handler: MessageHandler): Promise<Subscription> {
    this.#assertOpen("consume");
    const sub = await startConsumer(
      {
        js: this.#js,
        jsm: this.#jsm,
        streams: this.streams,
        streamSubjects: this.#subjects,
        serverVersion: this.#serverVersion(),
        logger: this.#logger,
        tracer,
        isClosed: () => this.#nc.isClosed(),
        later: (frame) => void sendLater(this.#nc, frame),
        flush: () => {
          sendLaterNow(this.#nc);
          return this.#nc.flush();
        },
      },
      spec,
      handler,
    );
    return this.#track(sub);
  }

  #track(sub: Subscription): Subscription {
    this.#subscriptions.add(sub);
    return {
      get processed() {
        return sub.processed;
      },
      stop: async () => {
        try {
          await sub.stop();
        } finally {
          this.#subscriptions.delete(sub);
        }
      },
    };
  }

  async replay(filterSubject: string | readonly string[], opts: ReplayOptions, onMessage: (msg: BusMessage) => void | Promise<void>): Promise<void> {
    this.#assertOpen("replay");
    const filters = typeof filterSubject === "string" ? [filterSubject] : [...filterSubject];
    const badFilter = filters.find((f) => !isValidFilter(f));
    if (filters.length === 0 || badFilter !== undefined) throw BusInvalidOptions("replay filter", [`"${badFilter ?? ""}" is not a subject filter`]);
    const outside = filters.filter((f) => !this.#subjects.events.some((t) => filterWithin(f, t)));
    if (outside.length > 0) {
      // The server would refuse the consumer, and an ordered consumer retries forever.
      throw BusInvalidOptions("replay filter", outside.map((f) => `"${f}" is outside the events stream (${this.#subjects.events.join(", ")})`));
    }
    if (opts.fromSeq !== undefined && !(Number.isInteger(opts.fromSeq) && opts.fromSeq > 0)) {
      throw BusInvalidOptions("replay fromSeq", ["fromSeq must be a positive integer"]);
    }
    const signal = opts.signal;
    if (signal?.aborted) return;
    // One filter: `filter_subjects` as a string becomes the consumer's filter_subject, which
    // every server knows. Several: a list from NATS 2.10; before, the narrowest filter that
    // covers them (or the whole stream), filtered here (an ordered consumer acks nothing, so
    // skipping costs only bandwidth).
    const several = filters.length > 1 && !serverAtLeast(this.#serverVersion(), 2, 10);
    const serverFilters = filters.length === 1 ? filters[0]! : several ? coveringFilter(filters, this.#subjects.events) : filters;
    const clientFilters = several ? filters : undefined;
    const consumer = await this.#js.consumers.get(this.streams.events, {
      ...(serverFilters === undefined ? {} : { filter_subjects: serverFilters }),
      ...(opts.fromSeq !== undefined && opts.fromSeq > 1 ? { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: opts.fromSeq } : { deliver_policy: DeliverPolicy.All }),
    });
    const messages: ConsumerMessages = await consumer.consume();
    const local = new AbortController();
    this.#replays.add(local);
    const close = (): void => void messages.close();
    local.signal.addEventListener("abort", close, { once: true });
    signal?.addEventListener("abort", close, { once: true });
    if (signal?.aborted) close();
    try {
      for await (const m of messages) {
        if (local.signal.aborted || signal?.aborted) break;
        if (clientFilters !== undefined && !clientFilters.some((f) => subjectMatches(f, m.subject))) continue;
        await onMessage(fromJsMsg(m));
      }
    } finally {
      signal?.removeEventListener("abort", close);
      this.#replays.delete(local);
      await messages.close();
      // Closing only stops the client's subscription: the server would keep the ordered
      // consumer until its inactivity threshold (5 minutes in nats.js, not configurable for
      // an ordered pull consumer), one per replay (an SSE client reconnecting every 3 s keeps
      // adding them). Deleted here, unless the connection is going away anyway.
      if (this.#draining === undefined && !this.#nc.isClosed()) {
        await consumer.delete().catch((err: unknown) => this.#logger.debug("deleting a replay's consumer failed", { err }));
      }
    }
  }

  async lastPerSubject(filterSubject: string): Promise<BusMessage[]> {
    this.#assertOpen("lastPerSubject");
    if (!isValidFilter(filterSubject)) throw BusInvalidOptions("lastPerSubject filter", [`"${filterSubject}" is not a subject filter`]);
    if (!this.#subjects.events.some((t) => filterWithin(filterSubject, t))) {
      throw BusInvalidOptions("lastPerSubject filter", [`"${filterSubject}" is outside the events stream (${this.#subjects.events.join(", ")})`]);
    }
    const stream = this.streams.events;
    const subjects = Object.keys((await this.#jsm.streams.info(stream, { subjects_filter: filterSubject })).state.subjects ?? {});
    const found = await Promise.all(subjects.map((subject) => this.#jsm.streams.getMessage(stream, { last_by_subj: subject })));
    return found.flatMap((m) => {
      if (m === null) return [];
      const headers = headerRecord(m.header);
      return [{ subject: m.subject, data: m.data, meta: metaFromHeaders(headers), deliveryCount: 1, seq: m.seq, timestamp: m.time, working: () => undefined }];
    });
  }

  async eventsKeptSince(): Promise<Date | null> {
    this.#assertOpen("eventsKeptSince");
    const { state, created } = await this.#jsm.streams.info(this.streams.events);
    // Nothing dropped yet: everything since its creation (a run created in its first second too).
    const since = state.first_seq <= 1 ? new Date(created) : state.messages === 0 ? null : new Date(state.first_ts);
    return since === null || Number.isNaN(since.getTime()) ? null : since;
  }

  async heldMessageIds(stream: StreamKey, limit: number): Promise<Set<string> | undefined> {
    this.#assertOpen("heldMessageIds");
    const name = this.streams[stream];
    const { state } = await this.#jsm.streams.info(name);
    if (state.messages > limit) return undefined;
    const ids = new Set<string>();
    let read = 0;
    for (const filter of this.#subjects[stream]) {
      // The next message of the stream's subjects from `seq` on: a work queue's acked messages leave gaps.
      for (let seq = state.first_seq; ; ) {
        const m = await this.#jsm.streams.getMessage(name, { seq, next_by_subj: filter } as unknown as MsgRequest);
        if (m === null) break;
        // Messages published meanwhile are read too: past the limit, the answer is no better.
        if (++read > limit) return undefined;
        const id = m.header?.get(HEADERS.msgId);
        if (id) ids.add(id);
        seq = m.seq + 1;
      }
    }
    return ids;
  }

  async request(subject: string, data: Uint8Array, opts: RequestOptions = {}): Promise<BusMessage> {
    this.#assertOpen("request");
    if (!isValidSubject(subject)) throw BusInvalidOptions("request subject", [`"${subject}" is not a subject`]);
    const timeoutMs = opts.timeoutMs ?? 5_000;
    return withSpan(
      tracer,
      `request ${opts.meta?.type ?? "rpc"}`,
      attrs({ "messaging.system": "nats", "messaging.destination.name": subject, "baton.tenant": opts.meta?.tenantId, "baton.type": opts.meta?.type }),
      async () => {
        const h = buildHeaders(opts.meta, injectTraceContext({}));
        let reply: Msg;
        try {
          reply = await this.#nc.request(subject, data, { timeout: timeoutMs, ...(h === undefined ? {} : { headers: h }) });
        } catch (err) {
          if (err instanceof RequestError && err.isNoResponders()) throw BusNoResponders(subject, { cause: err });
          if (err instanceof TimeoutError) throw BusTimeout(subject, timeoutMs, { cause: err });
          if (this.#nc.isClosed()) throw BusClosed("request", { cause: err });
          throw err;
        }
        const msg = fromCoreMsg(reply);
        if (msg.meta.headers[HEADERS.errorCode] !== undefined) throw remoteError(msg.meta.headers, subject);
        return msg;
      },
      { kind: SpanKind.CLIENT },
    );
  }

  sendNow(): void {
    sendNow(this.#nc);
  }

  async broadcast(subject: string, data: Uint8Array, meta?: MessageMeta): Promise<void> {
    this.#assertOpen("broadcast");
    if (!isValidSubject(subject)) throw BusInvalidOptions("broadcast subject", [`"${subject}" is not a subject`]);
    const h = buildHeaders(meta, injectTraceContext({}));
    this.#nc.publish(subject, data, h === undefined ? {} : { headers: h });
    await this.#nc.flush();
  }

  async serve(subject: string, handler: (msg: BusMessage) => Promise<Reply>, opts: ServeOptions = {}): Promise<Subscription> {
    this.#assertOpen("serve");
    if (!isValidFilter(subject)) throw BusInvalidOptions("serve subject", [`"${subject}" is not a subject`]);
    const queue = opts.queue ?? "baton";
    const log = this.#logger.child({ subject, queue });
    const inflight = new Set<Promise<void>>();
    let processed = 0;

    const answer = async (m: Msg): Promise<void> => {
      const msg = fromCoreMsg(m);
      let data: Uint8Array;
      let replyHeaders: Record<string, string> | undefined;
      try {
        const res = await withSpan(
          tracer,
          `serve ${subject}`,
          attrs({ "messaging.system": "nats", "messaging.destination.name": msg.subject, "baton.tenant": msg.meta.tenantId, "baton.type": msg.meta.type }),
          () => handler(msg),
          { kind: SpanKind.SERVER, parent: extractTraceContext(msg.meta.headers) },
        );
        data = res.data;
        replyHeaders = res.headers;
      } catch (err) {
        if (hasCode(err)) log.debug("request failed", { err });
        else log.error("request handler failed", { err });
        const e = errorReply(err, subject);
        data = new TextEncoder().encode(JSON.stringify(e.body));
        replyHeaders = e.headers;
      }
      try {
        if (m.reply !== undefined && m.reply !== "") {
          if (replyHeaders === undefined) m.respond(data);
          else {
            const h = natsHeaders();
            for (const [k, v] of Object.entries(replyHeaders)) h.set(k, headerValue(v));
            m.respond(data, { headers: h });
          }
        }
      } catch (err) {
        log.warn("could not answer a request", { err: errorMessage(err) });
      }
      processed += 1;
    };

    const sub = this.#nc.subscribe(subject, {
      ...(queue === false ? {} : { queue }),
      callback: (err, m) => {
        if (err !== null) {
          log.error("subscription failed", { err });
          return;
        }
        const p = answer(m);
        inflight.add(p);
        void p.then(() => inflight.delete(p));
      },
    });
    // The server knows the subscription before serve() returns, so a request right after finds it.
    await this.#nc.flush();
    let stopping: Promise<void> | undefined;
    const nc = this.#nc;
    return this.#track({
      get processed() {
        return processed;
      },
      stop() {
        stopping ??= (async () => {
          if (!nc.isClosed() && !sub.isClosed()) await sub.drain().catch(() => undefined);
          await Promise.all(inflight);
        })();
        return stopping;
      },
    });
  }

  async kv(bucket: string, opts: KvBucketOptions = {}): Promise<KV> {
    this.#assertOpen("kv");
    const name = this.#kvName(bucket);
    let kv = this.#kvs.get(name);
    if (kv === undefined) {
      kv = new Kvm(this.#js).create(name, { history: opts.history ?? 1, ...(opts.ttlMs ? { ttl: opts.ttlMs } : {}) });
      this.#kvs.set(name, kv);
      void kv.catch(() => this.#kvs.delete(name));
    }
    return kv;
  }

  async kvKeys(bucket: string, filter = ">"): Promise<string[]> {
    this.#assertOpen("kvKeys");
    const name = this.#kvName(bucket);
    const subjectPrefix = `$KV.${name}.`;
    let subjects: Record<string, number> | undefined;
    try {
      subjects = (await this.#jsm.streams.info(`KV_${name}`, { subjects_filter: subjectPrefix + filter })).state.subjects;
    } catch (err) {
      if (err instanceof JetStreamApiError && err.code === JetStreamApiCodes.StreamNotFound) return [];
      throw err;
    }
    return Object.keys(subjects ?? {}).map((s) => s.slice(subjectPrefix.length)).sort();
  }

  async kvGet(bucket: string, key: string): Promise<KvValue | null> {
    this.#assertOpen("kvGet");
    const name = this.#kvName(bucket);
    let m: StoredMsg | null;
    try {
      m = await this.#jsm.streams.getMessage(`KV_${name}`, { last_by_subj: `$KV.${name}.${key}` });
    } catch (err) {
      if (err instanceof JetStreamApiError && err.code === JetStreamApiCodes.StreamNotFound) return null;
      throw err;
    }
    const op = m?.header?.get("KV-Operation");
    return m === null || op === "DEL" || op === "PURGE" ? null : { value: m.data, storedAt: m.time };
  }

  async kvCreate(bucket: string, key: string, value: Uint8Array): Promise<boolean> {
    this.#assertOpen("kvCreate");
    const name = this.#kvName(bucket);
    const subject = `$KV.${name}.${key}`;
    if (!isValidSubject(subject)) throw BusInvalidOptions("kv key", [`"${key}" is not a key`]);
    try {
      await this.#js.publish(subject, value, { expect: { lastSubjectSequence: 0 } });
      return true;
    } catch (err) {
      if (err instanceof JetStreamApiError && err.code === JetStreamApiCodes.StreamWrongLastSequence) return false;
      // Without the bucket's stream nobody answers the publish: tell that apart from a failure.
      const exists = await this.#jsm.streams.info(`KV_${name}`).then(
        () => true,
        (e: unknown) => !(e instanceof JetStreamApiError && e.code === JetStreamApiCodes.StreamNotFound),
      );
      if (!exists) return false;
      if (this.#nc.isClosed()) throw BusClosed("kvCreate", { cause: err });
      throw BusPublishFailed(subject, { cause: err });
    }
  }

  objects(bucket: string): ObjectStore {
    this.#assertOpen("objects");
    const name = this.#kvName(bucket);
    let store = this.#objects.get(name);
    if (store === undefined) {
      store = objectStore(this.#js, this.#jsm, name, this.maxPayload());
      this.#objects.set(name, store);
    }
    return store;
  }

  maxPayload(): number {
    // 1 MiB is the server's default, when it has not said yet.
    return this.#nc.info?.max_payload ?? 1_048_576;
  }

  #kvName(bucket: string): string {
    if (!BUCKET_RE.test(bucket)) throw BusInvalidOptions("kv bucket", [`"${bucket}" must be letters, digits, "_" or "-"`]);
    return `${this.prefix.replace(/[^A-Za-z0-9_-]/g, "_")}_${bucket}`;
  }

  isConnected(): boolean {
    return this.#connected && !this.#nc.isClosed() && this.#draining === undefined;
  }

  drain(): Promise<void> {
    this.#draining ??= (async () => {
      for (const r of this.#replays) r.abort();
      await Promise.all([...this.#subscriptions].map((s) => s.stop().catch((err: unknown) => this.#logger.warn("stopping a subscription failed", { err }))));
      this.#subscriptions.clear();
      if (!this.#nc.isClosed()) {
        sendLaterNow(this.#nc);
        try {
          await this.#nc.drain();
        } catch (err) {
          if (!this.#nc.isClosed()) throw err;
        }
      }
    })();
    return this.#draining;
  }
}
