/** @baton/executor — the execution engine service. Tool workers live in @baton/worker (built on @baton/sdk). */
export { CHECKPOINT_STORE_OPTIONS, CHECKPOINT_UNVERSIONED_KEYS, createExecutor } from "./executor.ts";
export type { CheckpointState, Executor, ExecutorOptions } from "./executor.ts";
export * from "./errors.ts";
