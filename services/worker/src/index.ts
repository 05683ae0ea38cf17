/**
 * @baton/worker — Baton's built-in tool worker: the SDK's worker serving the
 * built-in tools (plus any extra ToolSpecs), as a runtime module or its own process
 * (`src/main.ts`).
 *
 * Built-in tools: `math.sum` and `echo` (here), and `@baton/tools`' `http.request`,
 * `json.transform`, `text.template` and `sleep`, and `sandbox.run` (SynthDev handlers in QuickJS).
 */
import type { Bus } from "@baton/bus";
import type { BatonConfig } from "@baton/config";
import { createWorker } from "@baton/sdk";
import type { ToolSpec, Worker, WorkerOptions } from "@baton/sdk";
import type { Logger } from "@baton/telemetry";
import { builtinTools } from "@baton/tools";
import type { HttpPolicy } from "@baton/tools";
import { coreTools } from "./builtin.ts";
import { sandboxTools } from "./sandbox-tool.ts";

export { coreTools, echo, mathSum, sleep, textTemplate } from "./builtin.ts";
export { createToolSourcesWorker } from "./sources.ts";
export { sandboxTools } from "./sandbox-tool.ts";
export { agentLlmTools } from "./agent-llm.ts";
export type { AgentLlmOptions } from "./agent-llm.ts";
export { llmTools } from "./llm.ts";
export { createWorkerService } from "./service.ts";
export type { WorkerService, WorkerServiceOptions } from "./service.ts";
export type { ToolSourcesWorker, ToolSourcesWorkerOptions } from "./sources.ts";
export { ToolSourceConflict, ToolSourceLoadFailed, ToolSourceTenantRefused } from "./errors.ts";

export interface BuiltinWorkerOptions extends Omit<WorkerOptions, "tools" | "bus" | "logger"> {
  bus?: Bus;
  logger?: Logger;
  /** Served besides the built-in tools; one with a built-in's name replaces it. */
  extraTools?: readonly ToolSpec[];
  /** Where `http.request` may go (`policyFromEnv(process.env)` of `@baton/tools`). @default any public host */
  http?: HttpPolicy;
}

/**
 * The built-in tools and the extras, later names replacing earlier ones: this package's
 * text.template, math.sum, echo, sleep, then `@baton/tools`' (whose text.template and
 * sleep behave the same and replace these), then `extra`.
 */
export function builtinToolSpecs(extra: readonly ToolSpec[] = [], http: HttpPolicy = {}): ToolSpec[] {
  const byName = new Map<string, ToolSpec>();
  for (const t of [...coreTools(), ...builtinTools({ http }), ...sandboxTools(), ...extra]) byName.set(t.name, t);
  return [...byName.values()];
}

/**
 * The result limits of Baton's own workers (built-in tools and tool sources) from the
 * configuration: `BATON_LARGE_RESULT_BYTES` (results larger go through the object bucket, the
 * executor's blob threshold too) and `BATON_TOOL_MAX_RESULT_BYTES` (larger ones fail the call
 * with BATON_TOOL_RESULT_TOO_LARGE).
 */
export function workerLimits(config: Pick<BatonConfig, "largeResultBytes" | "toolMaxResultBytes">): { largeResultBytes: number; maxResultBytes: number } {
  return { largeResultBytes: config.largeResultBytes, maxResultBytes: config.toolMaxResultBytes };
}

/** A worker (not started) serving the built-in tools. */
export function createBuiltinWorker(opts: BuiltinWorkerOptions): Worker {
  const { extraTools, http, ...rest } = opts;
  return createWorker({ ...rest, tools: builtinToolSpecs(extraTools, http) });
}
