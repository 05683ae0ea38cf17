/**
 * `@baton/checkpoints` — the hot state of running and paused executions in Redis:
 * versioned compare-and-set checkpoints with a bounded, delta-encoded history (time travel), and
 * idempotency records for side effects.
 *
 * The contract ({@link CheckpointStore}) is backend-neutral; every backend passes
 * `checkpointStoreConformance` from `@baton/checkpoints/testing`.
 */
export type { Redis, RedisOptions } from "ioredis";
export type { Checkpoint, CheckpointStore, HistoryOptions, IdempotencyStore } from "./types.ts";
export {
  CHECKPOINT_DEFAULTS,
  compileRedisCheckpointOptions,
  createRedis,
  deleteKeysByPrefix,
  redisCheckpointStore,
  redisIdempotencyStore,
  type CompiledRedisCheckpointOptions,
  type RedisCheckpointOptions,
  type RedisCheckpointStore,
  type RedisIdempotencyOptions,
} from "./redis.ts";
export { applyPatch, diffJson, jsonEqual } from "./delta.ts";
export type { Json, JsonPatch } from "./delta.ts";
export {
  CheckpointConflict,
  CheckpointCorrupt,
  CheckpointInvalidArgument,
  CheckpointInvalidState,
  CheckpointUnavailable,
} from "./errors.ts";
