/**
 * Baton's configuration: environment → zod-validated, defaulted, frozen object.
 * Every problem is reported at once, each with the variable's name.
 */
import { z } from "zod";
import { defineError } from "@baton/errors";

export const ConfigInvalid = defineError(
  "BATON_CONFIG_INVALID",
  (problems: string[]) => `invalid configuration:\n  ${problems.join("\n  ")}`,
  { status: 500 },
);

/**
 * How long the events stream keeps an event: `DEFAULT_EVENTS_MAX_AGE_MS` of `@baton/bus`, which
 * every Baton process sets on the stream. An event may refer to blobs (large outputs), so a blob
 * is never pruned sooner than this after its run is deleted (`BATON_BLOB_GRACE_SECONDS`; ADR 008,
 * "Events in the stream").
 */
export const EVENTS_MAX_AGE_SECONDS = 7 * 86_400;

const MODULE_NAMES = ["gateway", "planner", "executor", "worker", "learner", "memory", "review"] as const;
export type ModuleName = (typeof MODULE_NAMES)[number];
export const ALL_MODULES: readonly ModuleName[] = MODULE_NAMES;

const bool = z
  .enum(["true", "false", "1", "0", "yes", "no"])
  .transform((v) => v === "true" || v === "1" || v === "yes");
const int = (min: number, max: number) => z.coerce.number().int().min(min).max(max);

/** The environment variables Baton reads, with their defaults. Documented in README.md. */
export const envSchema = z.object({
  /** Which modules this process runs: `all` or a comma-separated list. @default "all" */
  BATON_TARGET: z.string().default("all"),
  /** @default "nats://127.0.0.1:4222" */
  BATON_NATS_URL: z.string().default("nats://127.0.0.1:4222"),
  /** @default "redis://127.0.0.1:6379" */
  BATON_REDIS_URL: z.string().default("redis://127.0.0.1:6379"),
  /** @default "postgresql://postgres@127.0.0.1:5432/baton" */
  BATON_DATABASE_URL: z.string().default("postgresql://postgres@127.0.0.1:5432/baton"),
  /** Postgres schema holding Baton's tables. @default "public" */
  BATON_DATABASE_SCHEMA: z.string().regex(/^[a-z_][a-z0-9_]*$/).default("public"),
  /** Prefix of every NATS subject, stream and Redis key; one token. @default "baton" */
  BATON_BUS_PREFIX: z.string().regex(/^[A-Za-z0-9_-]+$/).default("baton"),
  /** Gateway listen port. @default 3000 */
  BATON_PORT: int(0, 65535).default(3000),
  /** Gateway listen host. @default "127.0.0.1" */
  BATON_HOST: z.string().default("127.0.0.1"),
  /** Health/readiness port for processes without the gateway (0 = off). @default 9464 */
  BATON_HEALTH_PORT: int(0, 65535).default(9464),
  /** API key of the local tenant; generated and printed at first start when unset. */
  BATON_API_KEY: z.string().min(16).optional(),
  /** Start NATS/Redis/Postgres from local binaries when unreachable. @default true */
  BATON_EMBEDDED: bool.default(true),
  /** Where local data (embedded servers, generated key file) lives. @default ".baton" */
  BATON_DATA_DIR: z.string().default(".baton"),
  /** debug | info | warn | error. @default "info" */
  BATON_LOG_LEVEL: z.enum(["debug", "info", "warn", "error"]).default("info"),
  /** Tool calls a worker process runs at once. @default 16 */
  BATON_WORKER_CONCURRENCY: int(1, 10_000).default(16),
  /** Commands an executor process handles at once. @default 32 */
  BATON_EXECUTOR_CONCURRENCY: int(1, 10_000).default(32),
  /** How long a command taken by an executor may go unacknowledged before another executor gets it (crash recovery time). @default 30000 */
  BATON_EXECUTOR_ACK_WAIT_MS: int(1_000, 3_600_000).default(30_000),
  /** Executions of one tenant running at once; further starts wait queued. 0 = no cap. @default 0 */
  BATON_TENANT_MAX_RUNNING: int(0, 1_000_000).default(0),
  /** Seconds between two recovery sweeps of an executor (unfinished outboxes, lost checkpoints, queued runs whose tenant has a free slot); 0 = only on start. @default 60 */
  BATON_RECOVERY_SWEEP_SECONDS: int(0, 86_400).default(60),
  /** Tool results above this many bytes of JSON are stored once as blobs and referenced. @default 65536 */
  BATON_LARGE_RESULT_BYTES: int(1_024, 64 * 1024 * 1024).default(65_536),
  /** A tool result above this many bytes of JSON fails its call (`BATON_TOOL_RESULT_TOO_LARGE`); at least BATON_LARGE_RESULT_BYTES. @default 16777216 */
  BATON_TOOL_MAX_RESULT_BYTES: int(1_024, 1024 * 1024 * 1024).default(16 * 1024 * 1024),
  /** Seconds between two runs of the blob pruner (blobs no execution refers to any more); 0 = never. @default 3600 */
  BATON_BLOB_PRUNE_INTERVAL_SECONDS: int(0, 2_147_483_647).default(3_600),
  /** Seconds a blob is kept after its last use before the pruner may delete it; at least BATON_CHECKPOINT_FINISHED_TTL_SECONDS and the events stream's max age (7 days). @default the larger of the two + 1 day (8 days) */
  BATON_BLOB_GRACE_SECONDS: int(1, 2_147_483_647).optional(),
  /** Days a finished run (completed, failed, cancelled) is kept after its `completedAt`; then the blob pruner's run deletes it with its journal, reviews and blob uses. 0 = for ever. @default 0 */
  BATON_EXECUTION_RETENTION_DAYS: int(0, 36_500).default(0),
  /** Days a learned tool sequence is kept after it was recorded; then the blob pruner's run deletes it with its uses of blobs. 0 = for ever. @default 0 */
  BATON_LEARNED_RETENTION_DAYS: int(0, 36_500).default(0),
  /** Checkpoint versions kept per execution for time travel (older ones are pruned). @default 100 */
  BATON_CHECKPOINT_HISTORY: int(1, 100_000).default(100),
  /** A checkpoint whose JSON was larger than this when last written whole is written as a delta of what changed (a step of a forEach over thousands of items). @default 65536 */
  BATON_CHECKPOINT_DELTA_ABOVE_BYTES: int(0, 2_147_483_647).default(65_536),
  /** Seconds the checkpoint and history of a finished execution are kept. @default 604800 (7 days) */
  BATON_CHECKPOINT_FINISHED_TTL_SECONDS: int(1, 2_147_483_647).default(604_800),
  /** Seconds SIGTERM waits for in-flight work before exiting. @default 25 */
  BATON_SHUTDOWN_GRACE_SECONDS: int(1, 3600).default(25),
});

export type Env = z.infer<typeof envSchema>;

export interface BatonConfig {
  readonly target: readonly ModuleName[];
  readonly natsUrl: string;
  readonly redisUrl: string;
  readonly databaseUrl: string;
  readonly databaseSchema: string;
  readonly prefix: string;
  readonly port: number;
  readonly host: string;
  readonly healthPort: number;
  readonly apiKey: string | undefined;
  readonly embedded: boolean;
  readonly dataDir: string;
  readonly logLevel: "debug" | "info" | "warn" | "error";
  readonly workerConcurrency: number;
  readonly executorConcurrency: number;
  /** `BATON_EXECUTOR_ACK_WAIT_MS`. */
  readonly executorAckWaitMs: number;
  /** `BATON_TENANT_MAX_RUNNING`; 0 = no cap. */
  readonly tenantMaxRunning: number;
  /** `BATON_RECOVERY_SWEEP_SECONDS`; 0 = an executor sweeps only on start. */
  readonly recoverySweepSeconds: number;
  /** `BATON_LARGE_RESULT_BYTES`. */
  readonly largeResultBytes: number;
  /** `BATON_TOOL_MAX_RESULT_BYTES`. */
  readonly toolMaxResultBytes: number;
  /** `BATON_BLOB_PRUNE_INTERVAL_SECONDS`; 0 = the pruner does not run. */
  readonly blobPruneIntervalSeconds: number;
  /** `BATON_BLOB_GRACE_SECONDS`. */
  readonly blobGraceSeconds: number;
  /** `BATON_EXECUTION_RETENTION_DAYS`; 0 = finished executions are kept for ever. */
  readonly executionRetentionDays: number;
  /** `BATON_LEARNED_RETENTION_DAYS`; 0 = learned sequences are kept for ever. */
  readonly learnedRetentionDays: number;
  /** Checkpoint versions kept per execution (`BATON_CHECKPOINT_HISTORY`). */
  readonly checkpointHistory: number;
  /** `BATON_CHECKPOINT_DELTA_ABOVE_BYTES`: checkpoints larger than this are written as deltas. */
  readonly checkpointDeltaAboveBytes: number;
  /** Seconds a finished execution's checkpoints are kept (`BATON_CHECKPOINT_FINISHED_TTL_SECONDS`). */
  readonly checkpointFinishedTtlSeconds: number;
  readonly shutdownGraceMs: number;
}

/** Parses a target list: `all`, or names separated by commas. */
export function parseTarget(raw: string): ModuleName[] {
  const parts = raw.split(",").map((s) => s.trim()).filter(Boolean);
  if (parts.length === 0 || parts.includes("all")) return [...MODULE_NAMES];
  const unknown = parts.filter((p) => !(MODULE_NAMES as readonly string[]).includes(p));
  if (unknown.length > 0) {
    throw ConfigInvalid([`BATON_TARGET: unknown module(s) ${unknown.join(", ")}; known: all, ${MODULE_NAMES.join(", ")}`]);
  }
  return [...new Set(parts)] as ModuleName[];
}

/** Reads configuration from an environment (default `process.env`), reporting every problem at once. */
export function loadConfig(env: Record<string, string | undefined> = process.env, overrides: Partial<Env> = {}): BatonConfig {
  const source: Record<string, unknown> = {};
  for (const key of Object.keys(envSchema.shape)) {
    const v = env[key];
    if (v !== undefined && v !== "") source[key] = v;
  }
  Object.assign(source, overrides);
  const parsed = envSchema.safeParse(source);
  if (!parsed.success) {
    throw ConfigInvalid(parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`));
  }
  const e = parsed.data;
  const problems: string[] = [];
  if (e.BATON_TOOL_MAX_RESULT_BYTES < e.BATON_LARGE_RESULT_BYTES) problems.push("BATON_TOOL_MAX_RESULT_BYTES: must be at least BATON_LARGE_RESULT_BYTES");
  const blobGraceSeconds = e.BATON_BLOB_GRACE_SECONDS ?? Math.max(e.BATON_CHECKPOINT_FINISHED_TTL_SECONDS, EVENTS_MAX_AGE_SECONDS) + 86_400;
  if (blobGraceSeconds < e.BATON_CHECKPOINT_FINISHED_TTL_SECONDS) {
    problems.push("BATON_BLOB_GRACE_SECONDS: must be at least BATON_CHECKPOINT_FINISHED_TTL_SECONDS (a finished execution's checkpoints may still refer to its blobs)");
  }
  if (blobGraceSeconds < EVENTS_MAX_AGE_SECONDS) {
    problems.push(`BATON_BLOB_GRACE_SECONDS: must be at least ${EVENTS_MAX_AGE_SECONDS} (7 days), how long the events stream keeps an event (an event may refer to the blobs of a run deleted since)`);
  }
  if (problems.length > 0) throw ConfigInvalid(problems);
  return Object.freeze({
    target: Object.freeze(parseTarget(e.BATON_TARGET)),
    natsUrl: e.BATON_NATS_URL,
    redisUrl: e.BATON_REDIS_URL,
    databaseUrl: e.BATON_DATABASE_URL,
    databaseSchema: e.BATON_DATABASE_SCHEMA,
    prefix: e.BATON_BUS_PREFIX,
    port: e.BATON_PORT,
    host: e.BATON_HOST,
    healthPort: e.BATON_HEALTH_PORT,
    apiKey: e.BATON_API_KEY,
    embedded: e.BATON_EMBEDDED,
    dataDir: e.BATON_DATA_DIR,
    logLevel: e.BATON_LOG_LEVEL,
    workerConcurrency: e.BATON_WORKER_CONCURRENCY,
    executorConcurrency: e.BATON_EXECUTOR_CONCURRENCY,
    executorAckWaitMs: e.BATON_EXECUTOR_ACK_WAIT_MS,
    tenantMaxRunning: e.BATON_TENANT_MAX_RUNNING,
    recoverySweepSeconds: e.BATON_RECOVERY_SWEEP_SECONDS,
    largeResultBytes: e.BATON_LARGE_RESULT_BYTES,
    toolMaxResultBytes: e.BATON_TOOL_MAX_RESULT_BYTES,
    blobPruneIntervalSeconds: e.BATON_BLOB_PRUNE_INTERVAL_SECONDS,
    blobGraceSeconds,
    executionRetentionDays: e.BATON_EXECUTION_RETENTION_DAYS,
    learnedRetentionDays: e.BATON_LEARNED_RETENTION_DAYS,
    checkpointHistory: e.BATON_CHECKPOINT_HISTORY,
    checkpointDeltaAboveBytes: e.BATON_CHECKPOINT_DELTA_ABOVE_BYTES,
    checkpointFinishedTtlSeconds: e.BATON_CHECKPOINT_FINISHED_TTL_SECONDS,
    shutdownGraceMs: e.BATON_SHUTDOWN_GRACE_SECONDS * 1000,
  });
}
