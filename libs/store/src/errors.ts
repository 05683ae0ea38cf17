/**
 * The `@baton/store` error catalogue. Codes are stable and never reused; check them
 * with `X.is(err)` or `hasCode(err, "BATON_STORE_…")`.
 */
import { defineError } from "@baton/errors";

/** Postgres cannot be reached (refused, timed out, shutting down, too many connections). Retry later. */
export const StoreUnavailable = defineError(
  "BATON_STORE_UNAVAILABLE",
  (detail: string) => `database unavailable: ${detail}`,
  { status: 503, retryable: true },
);

/** A tenant-scoped row does not exist (or belongs to another tenant — the two are indistinguishable on purpose). */
export const StoreNotFound = defineError(
  "BATON_STORE_NOT_FOUND",
  (entity: string, id: string | number) => `${entity} ${id} not found`,
  { status: 404 },
);

/** A workflow slug is already used by another workflow of the same tenant. */
export const SlugTaken = defineError(
  "BATON_STORE_SLUG_TAKEN",
  (slug: string) => `slug "${slug}" is already taken; choose another slug or name`,
  { status: 409 },
);

/** A workflow still has executions queued, running or paused: they must end (or be cancelled) before it is deleted. */
export const WorkflowHasActiveRuns = defineError(
  "BATON_STORE_WORKFLOW_ACTIVE",
  (id: number, active: number) => `workflow ${id} has ${active} execution${active === 1 ? "" : "s"} queued, running or paused; cancel them (POST /api/agent-workflow-executions/:id/cancel) or let them end before deleting it`,
  { status: 409 },
);

/**
 * A workflow update made on condition of the version it was checked against found the workflow
 * at a later version: another update came in between. Reading it again and checking again is safe.
 */
export const WorkflowVersionMoved = defineError(
  "BATON_STORE_WORKFLOW_VERSION_MOVED",
  (id: number, expected: number, actual: number) => `workflow ${id} is at version ${actual}, not ${expected}: it was updated meanwhile; read it again and retry`,
  { status: 409, retryable: true },
);

/** A write collided with a unique constraint other than a slug. */
export const StoreConflict = defineError(
  "BATON_STORE_CONFLICT",
  (what: string) => `conflict: ${what} already exists`,
  { status: 409 },
);

/** Two transactions collided (serialization failure or deadlock); running the operation again is safe. */
export const StoreTxConflict = defineError(
  "BATON_STORE_TX_CONFLICT",
  () => "concurrent update collided; retry the operation",
  { status: 409, retryable: true },
);

/** The caller passed a value the store will not write. */
export const StoreInvalidInput = defineError(
  "BATON_STORE_INVALID_INPUT",
  (problem: string) => `invalid input: ${problem}`,
  { status: 400 },
);

/** A raw API key given to `ensureLocalKey` exists but was revoked; it will not be brought back. */
export const ApiKeyRevoked = defineError(
  "BATON_STORE_API_KEY_REVOKED",
  (prefix: string) => `API key ${prefix}… was revoked; configure a new key`,
  { status: 403 },
);

/** The store's tables are missing from the configured schema: `migrate()` has not run. */
export const SchemaNotMigrated = defineError(
  "BATON_STORE_SCHEMA_NOT_MIGRATED",
  (detail: string) => `database schema is not migrated (${detail}); run migrate() first`,
  { status: 500 },
);

/** An already-applied migration file was edited: its checksum no longer matches the recorded one. */
export const MigrationChecksumMismatch = defineError(
  "BATON_STORE_MIGRATION_CHECKSUM_MISMATCH",
  (name: string, recorded: string, actual: string) =>
    `migration ${name} was changed after it was applied (recorded sha256 ${recorded.slice(0, 12)}…, file ${actual.slice(0, 12)}…); add a new migration instead of editing an applied one`,
  { status: 500 },
);

/** A migration's SQL failed; its transaction was rolled back and later migrations were not applied. */
export const MigrationFailed = defineError(
  "BATON_STORE_MIGRATION_FAILED",
  (name: string, detail: string) => `migration ${name} failed: ${detail}`,
  { status: 500 },
);

/** Another process held the migration lock for longer than `lockTimeoutMs`. */
export const MigrationLockTimeout = defineError(
  "BATON_STORE_MIGRATION_LOCK_TIMEOUT",
  (schema: string, ms: number) => `timed out after ${ms} ms waiting for the migration lock of schema "${schema}"`,
  { status: 503, retryable: true },
);

/** An unexpected database error (a bug, not a condition the caller can fix). */
export const StoreQueryFailed = defineError(
  "BATON_STORE_QUERY_FAILED",
  (detail: string) => `database query failed: ${detail}`,
  { status: 500 },
);

/**
 * A step's records were refused: they are numbered below the journal floor of their execution,
 * which a rebuild of its checkpoint from the journal set after they were taken (the checkpoint
 * they belong to was lost, and the run was rebuilt without them). Nothing of the batch was
 * written; the step is to be applied again from the rebuilt checkpoint, never announced.
 * `details.floor`: the floor.
 */
export const StoreFenced = defineError(
  "BATON_STORE_FENCED",
  (executionId: number, floor: number) => `execution ${executionId}: the journal was rebuilt from; records numbered below step ${floor} are refused`,
  { status: 409 },
);
