/**
 * Server-Sent Events of one execution.
 *
 * Rules: every event is written as `id: <seq>`, `event: <type>`, `data: <json>`;
 * the stream starts from the execution's first event (a client sending
 * `Last-Event-ID` gets only later ones); a comment line goes out every heartbeat
 * interval so proxies keep the connection; after a terminal event
 * (`execution.completed|failed|cancelled`) the server ends the response. A client
 * disconnect, the end of the event source, or the server closing aborts the
 * source's signal and clears the heartbeat timer — nothing outlives the response.
 */
import type { FastifyReply, FastifyRequest } from "fastify";
import type { ExecutionEventEnvelope, GatewayEvents } from "./deps.ts";

export const TERMINAL_EVENT_TYPES: ReadonlySet<string> = new Set([
  "execution.completed",
  "execution.failed",
  "execution.cancelled",
]);

/** Formats one SSE message; `data` is one line of JSON (JSON.stringify never emits raw newlines). */
export function formatSseEvent(e: ExecutionEventEnvelope): string {
  const type = e.type.replace(/[\r\n]/g, " ");
  return `id: ${e.seq}\nevent: ${type}\ndata: ${JSON.stringify({ type: e.type, seq: e.seq, time: e.time, data: e.data ?? null })}\n\n`;
}

/** Open streams of one app, so closing the app ends them instead of waiting for clients. */
export class SseRegistry {
  readonly #open = new Set<() => void>();
  add(close: () => void): () => void {
    this.#open.add(close);
    return () => this.#open.delete(close);
  }
  closeAll(): void {
    for (const close of [...this.#open]) close();
  }
  get size(): number {
    return this.#open.size;
  }
}

export interface StreamOptions {
  tenantId: string;
  executionId: number;
  events: GatewayEvents;
  heartbeatMs: number;
  registry: SseRegistry;
  /**
   * The run had ended when the client connected: every event it will have is stored (or a few
   * milliseconds from it), so a stream that stays idle for {@link FINISHED_IDLE_MS} ends, even
   * without its terminal event (a `Last-Event-ID` past the run's last event, which event ids,
   * the stream's sequence numbers, cannot tell).
   */
  finished?: boolean;
  /**
   * The run ended moments ago (its row says so): its last events may still be on their way.
   * A step's rows, the row's end with them, are written before its events, and when an executor
   * dies between the two, its events go out with the command's next delivery, after the
   * consumer's ack wait (30 s). A stream from the run's first event (no `Last-Event-ID`) then
   * waits {@link OWED_END_WAIT_MS} for an event before it ends, rather than {@link FINISHED_IDLE_MS}.
   */
  endedRecently?: boolean;
}

/** How long the stream of a run that had ended when the client connected waits for an event before it ends. */
export const FINISHED_IDLE_MS = 2_000;
/** How long it waits when the run ended moments ago and the stream replays from its first event. */
export const OWED_END_WAIT_MS = 40_000;
/** How recently a run must have ended for its end to be awaited so ({@link StreamOptions.endedRecently}). */
export const RECENT_END_MS = 60_000;

/**
 * The event a reconnecting client had last: the `id` of an event, written in decimal digits.
 * Anything else (which `Number()` would read: `0x10`, `1e2`, `+3`) replays the run from its
 * first event rather than skip events the client never had.
 */
function lastEventId(request: FastifyRequest): number {
  const raw = request.headers["last-event-id"];
  const v = Array.isArray(raw) ? raw[0] : raw;
  if (v === undefined || !/^[0-9]{1,15}$/.test(v)) return -1;
  return Number(v);
}

/**
 * Takes over the response and streams the execution's events until a terminal
 * event, the client leaving, or the app closing. Resolves when the response ended.
 */
export function streamExecutionEvents(request: FastifyRequest, reply: FastifyReply, o: StreamOptions): Promise<void> {
  const after = lastEventId(request);
  reply.hijack();
  const res = reply.raw;
  res.writeHead(200, {
    "content-type": "text/event-stream; charset=utf-8",
    "cache-control": "no-cache, no-transform",
    connection: "keep-alive",
    "x-accel-buffering": "no",
  });
  res.flushHeaders();
  res.write(`retry: 3000\n: execution ${o.executionId}\n\n`);

  const abort = new AbortController();
  let ended = false;
  let unregister: () => void = () => undefined;
  let resolveDone: () => void = () => undefined;
  const done = new Promise<void>((resolve) => {
    resolveDone = resolve;
  });

  const heartbeat = setInterval(() => {
    if (!ended) res.write(`: heartbeat ${new Date().toISOString()}\n\n`);
  }, o.heartbeatMs);

  let idle: NodeJS.Timeout | undefined;
  const finish = () => {
    if (ended) return;
    ended = true;
    clearInterval(heartbeat);
    clearTimeout(idle);
    abort.abort();
    unregister();
    res.off("close", onClose);
    if (!res.writableEnded && !res.destroyed) res.end();
    resolveDone();
  };
  const onClose = () => finish();
  res.on("close", onClose);
  unregister = o.registry.add(finish);
  // A run that had ended: the stream ends once no event came for a while (see StreamOptions.finished).
  const awaitEvents = (): void => {
    if (!o.finished) return;
    clearTimeout(idle);
    idle = setTimeout(finish, o.endedRecently && after < 0 ? OWED_END_WAIT_MS : FINISHED_IDLE_MS);
  };
  awaitEvents();

  const onEvent = (e: ExecutionEventEnvelope) => {
    if (ended) return;
    awaitEvents();
    if (e.seq > after) res.write(formatSseEvent(e));
    if (TERMINAL_EVENT_TYPES.has(e.type)) finish();
  };

  // Tokens are ephemeral: written without an id, they are not replayed on reconnect.
  o.events.streamTokens?.(o.tenantId, o.executionId, abort.signal, (t) => {
    if (!ended) res.write(`event: token\ndata: ${JSON.stringify(t)}\n\n`);
  }).catch((err: unknown) => request.log.debug({ err, executionId: o.executionId }, "token stream ended"));
  // A client resuming after event `after` is replayed from that event on, not from the run's
  // first: that event itself comes again (and is not written), so a client that had the
  // terminal event already sees the stream end.
  o.events.streamExecution(o.tenantId, o.executionId, abort.signal, onEvent, after > 0 ? after : undefined).then(
    () => finish(),
    (err: unknown) => {
      if (!ended && !abort.signal.aborted) {
        request.log.warn({ err, executionId: o.executionId }, "execution event stream failed");
        res.write(`event: stream.error\ndata: ${JSON.stringify({ code: "BATON_GATEWAY_EVENT_STREAM_FAILED", message: "the event stream was interrupted; reconnect to resume" })}\n\n`);
      }
      finish();
    },
  );
  return done;
}
