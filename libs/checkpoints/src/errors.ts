/**
 * The checkpoint library's error catalogue. Codes are stable and never reused;
 * callers check them with `Conflict.is(err)` or `hasCode(err, code)`.
 */
import { defineError } from "@baton/errors";

/**
 * A compare-and-set write lost: the stored version is not the one the writer read.
 * Retryable — the writer reloads the checkpoint and decides again.
 * `details` is `{ expected, actual }` (0 means "no checkpoint").
 */
export const CheckpointConflict = defineError(
  "BATON_CHECKPOINT_CONFLICT",
  (executionId: number, expected: number, actual: number) =>
    `checkpoint of execution ${executionId} is at version ${actual}, the writer expected ${expected}`,
  { status: 409, retryable: true },
);

/** The state cannot be stored as JSON (undefined, a BigInt, a cycle, ...). */
export const CheckpointInvalidState = defineError(
  "BATON_CHECKPOINT_INVALID_STATE",
  (reason: string) => `checkpoint state cannot be stored: ${reason}`,
  { status: 400 },
);

/** An argument is out of range: execution id, version, TTL or limit. */
export const CheckpointInvalidArgument = defineError(
  "BATON_CHECKPOINT_INVALID_ARGUMENT",
  (name: string, value: unknown, rule: string) => `${name} must be ${rule}, got ${String(value)}`,
  { status: 400 },
);

/** A stored record cannot be decoded — written by something else or damaged. */
export const CheckpointCorrupt = defineError(
  "BATON_CHECKPOINT_CORRUPT",
  (key: string) => `stored record ${key} cannot be decoded`,
  { status: 500 },
);

/** Redis did not answer (connection lost, timeout). Retryable; the cause is attached. */
export const CheckpointUnavailable = defineError(
  "BATON_CHECKPOINT_UNAVAILABLE",
  (operation: string) => `checkpoint store unavailable during ${operation}`,
  { status: 503, retryable: true },
);
