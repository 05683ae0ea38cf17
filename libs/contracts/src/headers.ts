/**
 * Names of the headers on every bus message (docs/dev/contracts.md).
 */
export const HEADERS = Object.freeze({
  /** W3C trace context. */
  traceparent: "traceparent",
  /** The tenant the message belongs to. */
  tenant: "baton-tenant",
  /** Event type or command name, e.g. `node.started`, `execution.start`. */
  type: "baton-type",
  /** Fully-qualified proto message name, e.g. `baton.v1.NodeStarted` (the schema's `typeName`). */
  schema: "baton-schema",
  /** Idempotency key; JetStream de-duplicates within the stream's duplicate window. */
  msgId: "Nats-Msg-Id",
});
