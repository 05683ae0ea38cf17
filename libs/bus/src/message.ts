import { canonicalMIMEHeaderKey, MsgHdrsImpl } from "@nats-io/nats-core";
import type { Msg, MsgHdrs } from "@nats-io/nats-core";
import type { JsMsg } from "@nats-io/jetstream";

/** Header names Baton puts on every message (docs/dev/contracts.md). */
export const HEADERS = {
  traceparent: "traceparent",
  tracestate: "tracestate",
  tenant: "baton-tenant",
  type: "baton-type",
  schema: "baton-schema",
  msgId: "Nats-Msg-Id",
  errorCode: "baton-error-code",
  errorMessage: "baton-error-message",
  errorStatus: "baton-error-status",
  errorRetryable: "baton-error-retryable",
} as const;

/** What a publisher says about a message besides its bytes. */
export interface MessageMeta {
  /** Tenant id → header `baton-tenant`. */
  tenantId?: string;
  /** Event or command type, e.g. "node.started" → header `baton-type`. */
  type?: string;
  /** Fully-qualified proto message name, e.g. "baton.v1.NodeStarted" → header `baton-schema`. */
  schema?: string;
  /** Idempotency key → header `Nats-Msg-Id`; JetStream drops repeats within the duplicate window. */
  idempotencyKey?: string;
  /** More headers. Baton's own headers above win over these. */
  headers?: Record<string, string>;
}

/** A received message. */
export interface BusMessage {
  subject: string;
  data: Uint8Array;
  /** The meta the publisher sent; `headers` holds every header received (first value of each). */
  meta: MessageMeta & { headers: Record<string, string> };
  /** 1 on the first delivery; 1 for request/reply and replay. */
  deliveryCount: number;
  /** Stream sequence; 0 for request/reply. */
  seq: number;
  /** When the stream stored it (request/reply: when it was received). */
  timestamp: Date;
  /** In-progress ack: restarts the ack deadline of a slow handler. A no-op outside durable consumers. */
  working(): void;
}

/** A valid NATS header name: printable ASCII without the colon (what nats.js's own check accepts). */
const HEADER_NAME = /^[!-9;-~]+$/;

/**
 * Builds NATS headers from meta plus already-computed trace headers. Later sources win:
 * `meta.headers`, then the trace headers, then Baton's own. The entries go straight into the
 * headers' map (public in nats.js's typings) with nats.js's own checks of names and values:
 * `set` would search and copy the keys twice per header, and every publish builds these.
 */
export function buildHeaders(meta: MessageMeta | undefined, trace: Record<string, string>): MsgHdrs | undefined {
  const h = new MsgHdrsImpl();
  const put = (k: string, v: string): void => {
    if (!HEADER_NAME.test(k)) canonicalMIMEHeaderKey(k); // throws nats.js's InvalidArgumentError naming the character
    h.headers.set(k, [MsgHdrsImpl.validHeaderValue(v)]);
  };
  if (meta?.headers !== undefined) for (const k in meta.headers) put(k, meta.headers[k]!);
  for (const k in trace) put(k, trace[k]!);
  if (meta?.tenantId !== undefined) put(HEADERS.tenant, meta.tenantId);
  if (meta?.type !== undefined) put(HEADERS.type, meta.type);
  if (meta?.schema !== undefined) put(HEADERS.schema, meta.schema);
  if (meta?.idempotencyKey !== undefined) put(HEADERS.msgId, meta.idempotencyKey);
  return h.headers.size === 0 ? undefined : h;
}

/** Header record (first value of each key) from NATS headers. */
export function headerRecord(h: MsgHdrs | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  if (h === undefined) return out;
  for (const [k, values] of h) {
    if (values.length > 0) out[k] = values[0]!;
  }
  return out;
}

export function metaFromHeaders(headers: Record<string, string>): BusMessage["meta"] {
  const meta: BusMessage["meta"] = { headers };
  const tenant = headers[HEADERS.tenant];
  const type = headers[HEADERS.type];
  const schema = headers[HEADERS.schema];
  const key = headers[HEADERS.msgId];
  if (tenant !== undefined) meta.tenantId = tenant;
  if (type !== undefined) meta.type = type;
  if (schema !== undefined) meta.schema = schema;
  if (key !== undefined) meta.idempotencyKey = key;
  return meta;
}

const noop = (): void => {};

export function fromJsMsg(m: JsMsg, working: () => void = noop): BusMessage {
  const headers = headerRecord(m.headers);
  return {
    subject: m.subject,
    data: m.data,
    meta: metaFromHeaders(headers),
    deliveryCount: m.info.deliveryCount,
    seq: m.seq,
    timestamp: m.time,
    working,
  };
}

export function fromCoreMsg(m: Msg): BusMessage {
  const headers = headerRecord(m.headers);
  return { subject: m.subject, data: m.data, meta: metaFromHeaders(headers), deliveryCount: 1, seq: 0, timestamp: new Date(), working: noop };
}
