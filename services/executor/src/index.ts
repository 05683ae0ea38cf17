/** @baton/executor — the execution engine service and the built-in tool worker. */
export { createExecutor } from "./executor.ts";
export type { CheckpointState, Executor, ExecutorOptions } from "./executor.ts";
export { createToolWorker } from "./worker.ts";
export type { ToolContext, ToolDefinition, ToolWorkerOptions } from "./worker.ts";
export { builtinTools } from "./builtin-tools.ts";
export * from "./errors.ts";
