/**
 * The sandbox's error catalogue. Codes are stable and never reused.
 *
 * `runHandler` answers with `{ ok: false, code, message }` rather than throwing; these
 * definitions give the same codes as Baton errors (see {@link sandboxFailureError}) for
 * callers that throw, like the `sandbox.run` tool. A script's failures are not retryable:
 * the same script on the same input fails the same way.
 */
import { BatonError, defineError } from "@baton/errors";
import type { SandboxFailure } from "./types.ts";

/** The handler (or the script's top level) ran past its time limit and was interrupted. */
export const SandboxTimeout = defineError(
  "BATON_SANDBOX_TIMEOUT",
  (timeoutMs: number) => `sandboxed handler interrupted after ${timeoutMs} ms time limit`,
  { status: 422 },
);

/** The script tried to use more memory than its limit allows (or built a string past QuickJS's maximum length). */
export const SandboxMemory = defineError(
  "BATON_SANDBOX_MEMORY",
  (limitBytes: number, detail: string) => `sandboxed handler exceeded its memory limit of ${limitBytes} bytes (${detail})`,
  { status: 422 },
);

/** The handler, or the script's top level, threw; the message has the JS error and its first stack line. */
export const SandboxError = defineError(
  "BATON_SANDBOX_ERROR",
  (detail: string) => `sandboxed handler failed: ${detail}`,
  { status: 422 },
);

/** The script defines no function of the requested handler name. */
export const SandboxHandlerMissing = defineError(
  "BATON_SANDBOX_HANDLER_MISSING",
  (handler: string, detail: string) => `sandboxed script has no handler "${handler}": ${detail}`,
  { status: 422 },
);

/** The handler left `this`, or returned, a value that is not JSON (function, cycle, NaN, Map, ...); the message names the path. */
export const SandboxResultNotJson = defineError(
  "BATON_SANDBOX_RESULT_NOT_JSON",
  (path: string, problem: string) => `sandboxed handler result is not JSON: ${path} ${problem}`,
  { status: 422 },
);

/** The call was cancelled through its AbortSignal; the thread running it was stopped. */
export const SandboxCancelled = defineError(
  "BATON_SANDBOX_CANCELLED",
  (reason: string) => `sandboxed handler cancelled${reason ? `: ${reason}` : ""}`,
  { status: 409 },
);

/** The sandbox was disposed before or while the call ran. */
export const SandboxDisposed = defineError("BATON_SANDBOX_DISPOSED", () => "sandbox disposed", { status: 503 });

/** `createSandbox` or `runHandler` got invalid options or input; the message lists every problem. */
export const SandboxInvalidOptions = defineError(
  "BATON_SANDBOX_INVALID_OPTIONS",
  (problems: string[]) => `invalid sandbox options: ${problems.join("; ")}`,
  { status: 400 },
);

const BY_CODE = {
  BATON_SANDBOX_TIMEOUT: SandboxTimeout,
  BATON_SANDBOX_MEMORY: SandboxMemory,
  BATON_SANDBOX_ERROR: SandboxError,
  BATON_SANDBOX_HANDLER_MISSING: SandboxHandlerMissing,
  BATON_SANDBOX_RESULT_NOT_JSON: SandboxResultNotJson,
  BATON_SANDBOX_CANCELLED: SandboxCancelled,
  BATON_SANDBOX_DISPOSED: SandboxDisposed,
  BATON_SANDBOX_INVALID_OPTIONS: SandboxInvalidOptions,
} as const;

/**
 * A failed call as a throwable Baton error with the same code and message (not retryable;
 * `details` keeps the script's stack and console lines).
 */
export function sandboxFailureError(failure: SandboxFailure): BatonError {
  const def = BY_CODE[failure.code];
  const details = failure.stack === undefined && failure.logs === undefined ? undefined : { stack: failure.stack, logs: failure.logs };
  return new BatonError(failure.code, failure.message, def.status, false, details === undefined ? {} : { details });
}
