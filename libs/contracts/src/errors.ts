/**
 * Error catalogue of `@baton/contracts`. Codes are stable and never reused.
 */
import { defineError } from "@baton/errors";

/** A payload could not be decoded as the expected `baton.v1` message (bad UTF-8, bad JSON, wrong field types). */
export const ContractDecodeFailed = defineError(
  "BATON_CONTRACTS_DECODE",
  (typeName: string, reason: string) => `cannot decode ${typeName}: ${reason}`,
  { status: 400, retryable: false },
);

/** A message could not be encoded (e.g. a `Value` holding NaN, an int32 out of range). A bug of the sender. */
export const ContractEncodeFailed = defineError(
  "BATON_CONTRACTS_ENCODE",
  (typeName: string, reason: string) => `cannot encode ${typeName}: ${reason}`,
  { status: 500, retryable: false },
);

/** A bus prefix is not a single NATS token of `[A-Za-z0-9_-]`. */
export const InvalidBusPrefix = defineError(
  "BATON_CONTRACTS_INVALID_PREFIX",
  (prefix: string) => `invalid bus prefix ${JSON.stringify(prefix)}: it must be one NATS token of letters, digits, "_" or "-"`,
  { status: 500, retryable: false },
);

/** A value placed into a subject (tenant id, scope id, tool name) would break the subject's token structure. */
export const InvalidSubjectToken = defineError(
  "BATON_CONTRACTS_INVALID_SUBJECT_TOKEN",
  (what: string, value: string) => `invalid ${what} ${JSON.stringify(value)} for a NATS subject`,
  { status: 400, retryable: false },
);

/** An event type, command name or rpc name that the contract does not define. */
export const UnknownMessageType = defineError(
  "BATON_CONTRACTS_UNKNOWN_TYPE",
  (kind: string, name: string) => `unknown ${kind} ${JSON.stringify(name)}`,
  { status: 400, retryable: false },
);
