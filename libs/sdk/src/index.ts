/**
 * @baton/sdk — write tools and run tool workers.
 *
 * - {@link defineTool}: a tool with zod (or JSON Schema) input/output.
 * - {@link createWorker} / {@link runWorker}: serve tools from the bus (NATS only).
 * - {@link createToolRegistry}: which tools exist and how many workers serve each.
 */
export { defineTool } from "./tool.ts";
export type { JsonObject, JsonPrimitive, JsonSchema, JsonValue, ToolContext, ToolDescriptor, ToolRetryPolicy, ToolSpec } from "./tool.ts";
export { compileChecks, DEFAULT_TOOL_TIMEOUT_MS, formatIssues, toDescriptor } from "./schema.ts";
export { createToolRegistry, DEFAULT_PRESENCE_TTL_MS, DESCRIPTORS_BUCKET, PRESENCE_BUCKET, workerKeyToken } from "./registry.ts";
export type { RegisteredTool, Registration, ToolRegistry, ToolRegistryOptions } from "./registry.ts";
export { cancelToolCalls, createWorker, RESULTS_BUCKET, resultKey, runWorker, toolDurable } from "./worker.ts";
export type { RunWorkerOptions, Worker, WorkerOptions } from "./worker.ts";
export * from "./errors.ts";
export { canonicalJson, DEFAULT_LARGE_RESULT_BYTES, DEFAULT_MAX_RESULT_BYTES, LARGE_ARGS_BUCKET, LARGE_RESULTS_BUCKET } from "./large.ts";
export { createToolSourceStore, TOOL_SOURCE_KINDS, TOOL_SOURCE_STATUS_BUCKET, TOOL_SOURCES_BUCKET, toolSourceKey } from "./sources.ts";
export type { HttpToolSource, McpToolSource, StoredToolSource, ToolSource, ToolSourceKind, ToolSourceStatus, ToolSourceStore } from "./sources.ts";
