/**
 * `@baton/store` — Baton's definitions in Postgres through Prisma: tenants and API
 * keys, workflows and their versions, executions and the per-node journal, human
 * reviews, agent memory and learned tool sequences (seed 004 §3).
 *
 * {@link migrate} brings a schema up to date from the hand-written SQL migrations;
 * {@link createStore} returns the {@link Store} interface. Every tenant-scoped method
 * takes `tenantId` first and never touches another tenant's rows; the database backs
 * that up with composite (parentId, tenantId) foreign keys.
 *
 * @example
 * import { createStore, migrate } from "@baton/store";
 * await migrate({ databaseUrl, schema: "public" });
 * const store = createStore({ databaseUrl });
 * const wf = await store.workflows.create(tenantId, { name: "Triage", definition: graph });
 */
export { migrate, migrationChecksum, readMigrations, MIGRATIONS_DIR, MIGRATIONS_TABLE } from "./migrate.ts";
export type { MigrationFile } from "./migrate.ts";
export { createStore } from "./store.ts";
export { generateApiKey, hashApiKey, LOCAL_TENANT_ID } from "./tenants.ts";
export { isSlug, slugify, SLUG_MAX } from "./slug.ts";
export { toStoreError } from "./db-errors.ts";
export { watchDatabase } from "./watch.ts";
export type { DatabaseWatch, DatabaseWatchOptions } from "./watch.ts";
export { BLOB_REF_PREFIX, canonicalJson } from "./blobs.ts";
export { EXECUTION_STATUSES, MCP_STATUSES, REVIEW_STATUSES, ROLES } from "./values.ts";
export {
  ApiKeyRevoked,
  MigrationChecksumMismatch,
  MigrationFailed,
  MigrationLockTimeout,
  SchemaNotMigrated,
  SlugTaken,
  StoreConflict,
  StoreFenced,
  StoreInvalidInput,
  StoreNotFound,
  StoreQueryFailed,
  StoreTxConflict,
  StoreUnavailable,
  WorkflowHasActiveRuns,
  WorkflowVersionMoved,
} from "./errors.ts";
export { Prisma } from "./generated/client.ts";
export type { PrismaClient } from "./generated/client.ts";
export type {
  ActiveExecutionsQuery,
  Admission,
  AdmitInput,
  ApiKeyRecord,
  BlobPruneResult,
  BlobRecord,
  BlobsRepo,
  ChildExecutionInput,
  ExecutionCreateInput,
  ExecutionListOptions,
  ExecutionPatch,
  ExecutionPruneResult,
  ExecutionRecord,
  ExecutionsRepo,
  ExecutionStatus,
  JsonObject,
  JsonPrimitive,
  JsonValue,
  LearnedSequenceInput,
  LearnedSequenceRecord,
  LearningRepo,
  McpServerInput,
  McpServerRecord,
  McpServersRepo,
  McpServerStatus,
  MemoryCreateInput,
  MemoryRecord,
  MemoryRepo,
  MemorySearchHit,
  MemorySearchQuery,
  MigrateOptions,
  MigrateResult,
  NodeExecutionEntry,
  NodeExecutionRecord,
  NodeExecutionsRepo,
  StepRecords,
  StartableQuery,
  PageOptions,
  ReviewCreateInput,
  ReviewDecision,
  ReviewDecisionStatus,
  ReviewRecord,
  ReviewsRepo,
  ReviewStatus,
  Role,
  Store,
  StoreOptions,
  Tenant,
  TenantsRepo,
  WorkflowInput,
  WorkflowPatch,
  WorkflowRecord,
  WorkflowsRepo,
  WorkflowVersionRecord,
} from "./types.ts";
