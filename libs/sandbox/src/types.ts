/** Types shared by the host side and the sandbox thread. */

export type JsonPrimitive = string | number | boolean | null;
export type JsonValue = JsonPrimitive | JsonValue[] | { [key: string]: JsonValue };
export type JsonObject = { [key: string]: JsonValue };

/** Codes a failed {@link SandboxResult} carries (the catalogue in `errors.ts`). */
export type SandboxErrorCode =
  | "BATON_SANDBOX_TIMEOUT"
  | "BATON_SANDBOX_MEMORY"
  | "BATON_SANDBOX_ERROR"
  | "BATON_SANDBOX_HANDLER_MISSING"
  | "BATON_SANDBOX_RESULT_NOT_JSON"
  | "BATON_SANDBOX_CANCELLED"
  | "BATON_SANDBOX_DISPOSED"
  | "BATON_SANDBOX_INVALID_OPTIONS";

export interface SandboxSuccess {
  ok: true;
  /** `this` after the handler ran, as JSON (helper methods are not part of it). */
  this: JsonObject;
  /** What the handler returned (or its promise resolved to); `null` for `undefined`. */
  returned: JsonValue;
  /** Lines the script wrote with `console.*` (at most 200 lines / 64 Ki characters). */
  logs: string[];
}

export interface SandboxFailure {
  ok: false;
  code: SandboxErrorCode;
  message: string;
  /** For BATON_SANDBOX_ERROR: the script's stack lines (`at fn (script.js:line:col)`). */
  stack?: string;
  /** Lines logged before the failure, when the sandbox could still report them. */
  logs?: string[];
}

export type SandboxResult = SandboxSuccess | SandboxFailure;

/** One call, as the host sends it to a sandbox thread. Strings only: the data crosses as JSON text. */
export interface ExecuteRequest {
  source: string;
  handler: string;
  thisJson: string;
  argsJson: string;
  timeoutMs: number;
  memoryLimitBytes: number;
  maxStackBytes: number;
}

/** A result from the thread; `poisoned` when the WASM instance can no longer be trusted and the thread must go. */
export type ExecuteResponse = SandboxResult & { poisoned?: boolean };
