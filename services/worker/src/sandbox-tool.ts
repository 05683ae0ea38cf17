/**
 * The `sandbox.run` tool: runs one handler of a SynthDev `script.js` in the QuickJS
 * sandbox of `@baton/sandbox` (fresh context per call, time and memory limits, its own
 * thread) and answers `this` after the call, the returned value and the console lines.
 *
 * A sandbox failure becomes a tool error with the sandbox's code (BATON_SANDBOX_TIMEOUT,
 * _MEMORY, _ERROR, _HANDLER_MISSING, _RESULT_NOT_JSON), never retryable: the same script
 * on the same input fails the same way. See docs/sandbox.md.
 */
import { z } from "zod";
import { BACKSTOP_GRACE_MS, createSandbox, DEFAULT_MEMORY_LIMIT_BYTES, DEFAULT_TIMEOUT_MS, LIMITS, sandboxFailureError } from "@baton/sandbox";
import type { Sandbox } from "@baton/sandbox";
import { defineTool, ToolSdkInvalidOptions } from "@baton/sdk";
import type { ToolSpec } from "@baton/sdk";

const MiB = 1024 * 1024;

export interface SandboxToolOptions {
  /**
   * Runs the calls. When absent, one is created on the first call and kept for the
   * process's life (its threads are unreferenced while idle, so they never hold the
   * process open). Pass your own to dispose of it on shutdown.
   */
  sandbox?: Sandbox;
  /** Threads of the sandbox created here (calls beyond wait their turn). @default 2 */
  maxThreads?: number;
  /** Largest `timeoutMs` a call may ask for. @default 10000 */
  maxTimeoutMs?: number;
  /** Largest `memoryLimitBytes` a call may ask for. @default 268435456 (256 MiB) */
  maxMemoryLimitBytes?: number;
  /** Largest script, in characters. @default 1000000 */
  maxScriptChars?: number;
}

/** One tool, `sandbox.run`. @throws BATON_TOOL_SDK_INVALID_OPTIONS naming every bad option. */
export function sandboxTools(opts: SandboxToolOptions = {}): ToolSpec[] {
  const maxTimeoutMs = opts.maxTimeoutMs ?? 10_000;
  const maxMemoryLimitBytes = opts.maxMemoryLimitBytes ?? 256 * MiB;
  const maxScriptChars = opts.maxScriptChars ?? 1_000_000;
  const maxThreads = opts.maxThreads ?? 2;
  const problems: string[] = [];
  const check = (name: string, v: number, min: number, max: number): void => {
    if (!Number.isInteger(v) || v < min || v > max) problems.push(`${name}: must be an integer from ${min} to ${max}, got ${v}`);
  };
  check("maxTimeoutMs", maxTimeoutMs, LIMITS.timeoutMs.min, LIMITS.timeoutMs.max);
  check("maxMemoryLimitBytes", maxMemoryLimitBytes, LIMITS.memoryLimitBytes.min, LIMITS.memoryLimitBytes.max);
  check("maxScriptChars", maxScriptChars, 1, 100_000_000);
  check("maxThreads", maxThreads, LIMITS.maxThreads.min, LIMITS.maxThreads.max);
  if (problems.length > 0) throw ToolSdkInvalidOptions("sandbox tool options", problems);

  let own: Sandbox | undefined;
  const sandbox = (): Sandbox => opts.sandbox ?? (own ??= createSandbox({ maxThreads }));

  const run = defineTool({
    name: "sandbox.run",
    description:
      "Runs the function `handler` of the SynthDev workflow script `script` in an isolated QuickJS sandbox, with `this` built " +
      "from the JSON object `this` (contexts get addMessage, this.context.getContext(name) finds them) and `args` as " +
      "arguments. Answers `this` after the call, the returned value and console lines. No I/O, no timers, no host access.",
    input: z.object({
      script: z.string().min(1).max(maxScriptChars),
      handler: z.string().regex(/^[A-Za-z_$][A-Za-z0-9_$]*$/, "must be a JavaScript identifier"),
      this: z.record(z.string(), z.json()),
      args: z.array(z.json()).default([]),
      timeoutMs: z.number().int().min(LIMITS.timeoutMs.min).max(maxTimeoutMs).default(Math.min(DEFAULT_TIMEOUT_MS, maxTimeoutMs)),
      memoryLimitBytes: z
        .number()
        .int()
        .min(LIMITS.memoryLimitBytes.min)
        .max(maxMemoryLimitBytes)
        .default(Math.min(DEFAULT_MEMORY_LIMIT_BYTES, maxMemoryLimitBytes)),
    }),
    output: z.object({ this: z.record(z.string(), z.json()), returned: z.json(), logs: z.array(z.string()) }),
    // Past the longest call, its host-side backstop and a wait for a free thread: the sandbox's own codes come first.
    timeoutMs: maxTimeoutMs + BACKSTOP_GRACE_MS + 10_000,
    retry: { maxAttempts: 1 },
    handler: async (input, ctx) => {
      const r = await sandbox().runHandler(input.script, input.handler, input.this, input.args, {
        timeoutMs: input.timeoutMs,
        memoryLimitBytes: input.memoryLimitBytes,
        signal: ctx.signal,
      });
      if (r.ok) return { this: r.this, returned: r.returned, logs: r.logs };
      // Aborted by the SDK (tool timeout, cancellation, drain): its own reason carries the right code.
      if (r.code === "BATON_SANDBOX_CANCELLED" && ctx.signal.aborted) throw ctx.signal.reason as Error;
      throw sandboxFailureError(r);
    },
  });
  return [run] as ToolSpec[];
}
