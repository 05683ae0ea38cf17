/**
 * @baton/sandbox — runs SynthDev workflow handlers (`script.js` functions) in QuickJS
 * (WebAssembly), one fresh context per call, with a time limit and a memory limit, in a
 * thread of its own so the host's event loop never waits on a handler.
 *
 * - {@link createSandbox}: `runHandler(source, handlerName, thisValue, args?)` → `this`
 *   after the call and the returned value, as JSON; or `{ ok: false, code, message }`.
 * - The error catalogue (`BATON_SANDBOX_*`) and {@link sandboxFailureError} to throw a failure.
 *
 * See docs/sandbox.md for what a handler sees and what is blocked.
 */
export { BACKSTOP_GRACE_MS, createSandbox, DEFAULT_MAX_STACK_BYTES, DEFAULT_MEMORY_LIMIT_BYTES, DEFAULT_TIMEOUT_MS, LIMITS } from "./sandbox.ts";
export type { RunOptions, Sandbox, SandboxOptions } from "./sandbox.ts";
export { rewriteExports, SCRIPT_FILE } from "./engine.ts";
export type { JsonObject, JsonPrimitive, JsonValue, SandboxErrorCode, SandboxFailure, SandboxResult, SandboxSuccess } from "./types.ts";
export * from "./errors.ts";
