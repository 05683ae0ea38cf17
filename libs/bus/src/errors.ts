/**
 * The bus library's error catalogue. Codes are stable and never reused; check them with
 * `BusTimeout.is(err)` or `hasCode(err, "BATON_BUS_TIMEOUT")`.
 */
import { defineError } from "@baton/errors";

/** No NATS server could be reached. Retryable. */
export const BusConnectFailed = defineError(
  "BATON_BUS_CONNECT_FAILED",
  (servers: string) => `cannot connect to NATS at ${servers}`,
  { status: 503, retryable: true },
);

/** BusOptions or a ConsumerSpec are invalid; `details` lists every problem. */
export const BusInvalidOptions = defineError(
  "BATON_BUS_INVALID_OPTIONS",
  (what: string, problems: string[]) => `invalid ${what}: ${problems.join("; ")}`,
  { status: 500 },
);

/** A stream could not be created or updated (subjects overlap another stream, retention differs, ...). */
export const BusTopologyFailed = defineError(
  "BATON_BUS_TOPOLOGY_FAILED",
  (stream: string, reason: string) => `cannot create or update stream ${stream}: ${reason}`,
  { status: 500 },
);

/** A durable consumer could not be created or updated. */
export const BusConsumerFailed = defineError(
  "BATON_BUS_CONSUMER_FAILED",
  (stream: string, durable: string, reason: string) => `cannot create or update consumer ${durable} on ${stream}: ${reason}`,
  { status: 500 },
);

/** The connected server lacks a feature the request needs (e.g. several filters on a work queue before NATS 2.10). */
export const BusUnsupported = defineError(
  "BATON_BUS_UNSUPPORTED",
  (feature: string, needs: string, server: string) => `${feature} needs NATS ${needs}, the server is ${server}`,
  { status: 500 },
);

/** JetStream did not store a published message (no stream for the subject, server away). Retryable. */
export const BusPublishFailed = defineError(
  "BATON_BUS_PUBLISH_FAILED",
  (subject: string) => `publish to ${subject} was not stored by JetStream`,
  { status: 503, retryable: true },
);

/**
 * A message is larger than the server's `max_payload`: it can never be published as it is.
 * Not retryable; send a reference instead (e.g. through {@link Bus.objects}).
 */
export const BusPayloadTooLarge = defineError(
  "BATON_BUS_PAYLOAD_TOO_LARGE",
  (subject: string, size: number, max: number) => `a message of ${size} bytes to ${subject} exceeds the server's max_payload of ${max} bytes`,
  { status: 413 },
);

/** Nobody serves a request subject. Retryable: the service may be starting. */
export const BusNoResponders = defineError(
  "BATON_BUS_NO_RESPONDERS",
  (subject: string) => `no service answers on ${subject}`,
  { status: 503, retryable: true },
);

/** A request got no answer in time. Retryable. */
export const BusTimeout = defineError(
  "BATON_BUS_TIMEOUT",
  (subject: string, timeoutMs: number) => `no answer on ${subject} within ${timeoutMs} ms`,
  { status: 504, retryable: true },
);

/**
 * A request handler failed with an error that is not a Baton error. (Baton errors travel
 * with their own code and status.) Retryable, like every unknown error.
 */
export const BusHandlerFailed = defineError(
  "BATON_BUS_HANDLER_FAILED",
  (subject: string) => `the handler of ${subject} failed`,
  { status: 500, retryable: true },
);

/** The bus was drained or its connection closed. */
export const BusClosed = defineError(
  "BATON_BUS_CLOSED",
  (operation: string) => `bus is closed (${operation})`,
  { status: 503, retryable: true },
);
