import { headers as natsHeaders } from "@nats-io/nats-core";
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

/** Builds NATS headers from meta plus already-computed trace headers. */
export function buildHeaders(meta: MessageMeta | undefined, trace: Record<string, string>): MsgHdrs | undefined {
  const all: Record<string, string> = { ...(meta?.headers ?? {}), ...trace };
  if (meta?.tenantId !== undefined) all[HEADERS.tenant] = meta.tenantId;
  if (meta?.type !== undefined) all[HEADERS.type] = meta.type;
  if (meta?.schema !== undefined) all[HEADERS.schema] = meta.schema;
  if (meta?.idempotencyKey !== undefined) all[HEADERS.msgId] = meta.idempotencyKey;
  const keys = Object.keys(all);
  if (keys.length === 0) return undefined;
  const h = natsHeaders();
  for (const k of keys) h.set(k, all[k]!);
  return h;
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
