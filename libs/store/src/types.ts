/**
 * The public shapes of `@baton/store`: options, records and the {@link Store} interface.
 * Records are plain objects: ids are numbers, timestamps are `Date`, JSON columns are
 * {@link JsonValue}. Record fields carry the seed 004 column names.
 */
import type { PrismaClient } from "./generated/client.ts";

/** A JSON scalar. */
export type JsonPrimitive = string | number | boolean | null;
/** Any JSON value. */
export type JsonValue = JsonPrimitive | JsonValue[] | { [key: string]: JsonValue };
/** A JSON object. */
export type JsonObject = { [key: string]: JsonValue };

/** How to reach the database. */
export interface StoreOptions {
  /** Postgres connection string, e.g. `postgresql://postgres@127.0.0.1:5432/baton`. */
  databaseUrl: string;
  /**
   * Postgres schema holding Baton's tables (created by {@link migrate} when missing).
   * Must match `^[A-Za-z_][A-Za-z0-9_]{0,62}$`.
   * @default "public"
   */
  schema?: string;
  /**
   * Maximum pooled connections of this store.
   * @default 10
   */
  poolSize?: number;
  /**
   * How long to wait for a new connection before failing with `BATON_STORE_UNAVAILABLE`.
   * @default 5000
   */
  connectTimeoutMs?: number;
}

/** Options of {@link migrate}. */
export interface MigrateOptions extends StoreOptions {
  /**
   * Directory holding `<NNNN_name>/migration.sql` folders.
   * @default the package's `prisma/migrations`
   */
  migrationsDir?: string;
  /**
   * How long to wait for another process's migration lock before failing with
   * `BATON_STORE_MIGRATION_LOCK_TIMEOUT`.
   * @default 60000
   */
  lockTimeoutMs?: number;
}

/** What {@link migrate} did. */
export interface MigrateResult {
  /** Names of the migrations applied by this call, in order (empty when up to date). */
  applied: string[];
}

/** API key roles, from most to least privileged. */
export type Role = "admin" | "operator" | "viewer";
/** Lifecycle of an execution. */
export type ExecutionStatus = "queued" | "running" | "paused" | "completed" | "failed" | "cancelled";
/** Lifecycle of a human review. */
export type ReviewStatus = "pending" | "approved" | "edited" | "rejected";
/** How a review is resolved. */
export type ReviewDecisionStatus = Exclude<ReviewStatus, "pending">;

/** A tenant: the owner of every other row. */
export interface Tenant {
  /** `t_<random>`, or `local` for the single-user local tenant. */
  id: string;
  name: string;
  createdAt: Date;
}

/** An API key as listed (never the raw key, never its hash). */
export interface ApiKeyRecord {
  id: number;
  tenantId: string;
  name: string;
  role: Role;
  /** First 8 characters of the raw key, for display. */
  prefix: string;
  createdAt: Date;
  lastUsedAt: Date | null;
  revokedAt: Date | null;
}

/** What a caller gives to create (or patch) a workflow. */
export interface WorkflowInput {
  name: string;
  /** URL-safe id, unique per tenant (`^[a-z0-9]+(-[a-z0-9]+)*$`, ≤ 100 chars). @default derived from `name` */
  slug?: string;
  /** @default "" */
  description?: string;
  /** The workflow graph (engine format). */
  definition: JsonObject;
  /** @default {} */
  agentConfig?: JsonObject;
  /** @default {} */
  memoryConfig?: JsonObject;
  /** @default false */
  mcpExport?: boolean;
  /** @default true */
  enabled?: boolean;
}

/** A row of `agent_workflows`. */
export interface WorkflowRecord {
  id: number;
  tenantId: string;
  name: string;
  slug: string;
  description: string;
  definition: JsonObject;
  agentConfig: JsonObject;
  memoryConfig: JsonObject;
  mcpExport: boolean;
  enabled: boolean;
  /** Current version; starts at 1 and grows by one with every update or restore. */
  version: number;
  createdAt: Date;
  updatedAt: Date;
}

/** A row of `agent_workflow_versions`: the definition as it was at `version`. */
export interface WorkflowVersionRecord {
  /** Row id (what `restoreVersion` takes). */
  id: number;
  tenantId: string;
  agentWorkflowId: number;
  version: number;
  definition: JsonObject;
  /** The workflow's `agentConfig` and `memoryConfig` at this version. */
  agentConfig: JsonObject;
  memoryConfig: JsonObject;
  /** What changed in this version (`changeDescription` of the update), if given. */
  description: string | null;
  createdAt: Date;
}

/** A patch of a workflow: any input field, plus a note stored on the new version. */
export type WorkflowPatch = Partial<WorkflowInput> & { changeDescription?: string };

/** A row of `agent_workflow_executions`. */
export interface ExecutionRecord {
  id: number;
  tenantId: string;
  agentWorkflowId: number;
  /** The workflow version this execution runs. */
  workflowVersion: number;
  agentId: number | null;
  sessionId: number | null;
  status: ExecutionStatus;
  /** Current position in the graph (node id), null before the first node. */
  currentState: string | null;
  input: JsonObject;
  output: JsonValue | null;
  context: JsonObject;
  checkpoint: JsonValue | null;
  triggerEvent: string | null;
  tokenUsage: JsonObject;
  /**
   * The run's nodes paused in sub-runs (a review waits in a child run below them), as last
   * announced: node id → the sub-run its pause names. Written with the row, before the step's
   * events; a checkpoint rebuilt from the journal compares it with what it learns again.
   */
  subRunPauses: Record<string, number>;
  /**
   * Internal (executor): the step whose records last patched the row, null before any. A step
   * writes the row before its events, so the row's status and pauses were announced only once
   * that step's events are out.
   */
  patchedStep: number | null;
  parentExecutionId: number | null;
  /** Sub-workflow runs: the parent's node that waits for this run. */
  parentNodeId: string | null;
  /** Sub-workflow runs: which of the parent node's children this is (e.g. `"3.2"`). */
  childKey: string | null;
  /** Runs only the body of this node of the definition (forEach and subworkflow bodies). */
  definitionRef: string | null;
  /** Forks: the execution this run was forked from. */
  forkedFromExecutionId: number | null;
  /** Forks: the checkpoint version of the source this run started from. */
  forkedFromVersion: number | null;
  /** When the whole run must have ended. */
  deadlineAt: Date | null;
  error: string | null;
  startedAt: Date | null;
  completedAt: Date | null;
  createdAt: Date;
  updatedAt: Date;
}

/** What `executions.create` takes. */
export interface ExecutionCreateInput {
  workflowId: number;
  workflowVersion: number;
  input: JsonObject;
  agentId?: number | null;
  sessionId?: number | null;
  triggerEvent?: string | null;
  /** Must be an execution of the same tenant. */
  parentExecutionId?: number | null;
  parentNodeId?: string | null;
  childKey?: string | null;
  definitionRef?: string | null;
  /** Must be an execution of the same tenant. */
  forkedFromExecutionId?: number | null;
  /** ≥ 1; only with `forkedFromExecutionId`. */
  forkedFromVersion?: number | null;
  deadlineAt?: Date | null;
  /** The row's `checkpoint` column to begin with (a fork's starting state: `{ forkStart }`). */
  checkpoint?: JsonObject | null;
}

/** What `executions.createChild` takes: one child run of a parent's node. */
export interface ChildExecutionInput {
  tenantId: string;
  parentExecutionId: number;
  parentNodeId: string;
  /** Which of the node's children this is; unique per (parent, node). */
  childKey: string;
  agentWorkflowId: number;
  workflowVersion: number;
  input: JsonObject;
  definitionRef?: string | null;
  deadlineAt?: Date | null;
  /** @default "subworkflow" */
  triggerEvent?: string | null;
}

/** Filters of `executions.listActive` (the executor's recovery scan, all tenants). */
export interface ActiveExecutionsQuery {
  /** @default ["queued", "running", "paused"] */
  statuses?: ExecutionStatus[];
  /** @default 100 (max 1000) */
  limit?: number;
  /** Keyset pagination: only ids greater than this. @default 0 */
  afterId?: number;
}

/**
 * What `executions.admit` is asked: move a `queued` execution to `running` when its start is
 * taken. `cap` > 0: only while fewer than `cap` of the tenant's top-level executions (no
 * parent) are `running` or `paused`, decided under a per-tenant lock, so starts racing in one
 * process or on several replicas never admit more. A run whose deadline is not after
 * `startedAt` is admitted whatever the cap: its start step fails it before any node runs.
 */
export interface AdmitInput {
  id: number;
  tenantId: string;
  /** 0 = no cap (children, or no `BATON_TENANT_MAX_RUNNING`). */
  cap: number;
  /** `startedAt` of an admitted row that has none yet. */
  startedAt: Date;
  /**
   * Kept in the row's `checkpoint` column unless it holds a value already (also when the start
   * must wait): what the executor needs to start the run again from the row alone (a fork's
   * starting state).
   */
  checkpoint?: JsonObject;
}

/**
 * What `executions.admit` did: `admitted` (queued → running now), `started` (it was `running`
 * or `paused` already: a start taken before), `busy` (it stays `queued`: the cap is reached),
 * `finished` (completed, failed or cancelled: not to be started), `changed` (it left `queued`
 * while this was deciding; look again), `missing` (no such execution of the tenant).
 */
export type Admission =
  | { outcome: "admitted" | "started" | "busy" | "finished" | "changed"; row: ExecutionRecord }
  | { outcome: "missing"; row: null };

/** Filters of `executions.listStartable`. */
export interface StartableQuery {
  tenantId: string;
  /** 0 = no cap: up to `limit` rows; otherwise at most the slots the cap leaves free. */
  cap: number;
  /** @default 100 (max 1000) */
  limit?: number;
  /** Only rows not updated for this long. @default 0 */
  idleMs?: number;
}

/** What `executions.update` changes; `undefined` leaves a column alone, `null` clears a nullable one. */
export interface ExecutionPatch {
  status?: ExecutionStatus;
  currentState?: string | null;
  context?: JsonObject;
  checkpoint?: JsonValue | null;
  output?: JsonValue | null;
  error?: string | null;
  tokenUsage?: JsonObject;
  /** Node id → sub-run execution id (positive integers). */
  subRunPauses?: Record<string, number>;
  startedAt?: Date | null;
  completedAt?: Date | null;
  deadlineAt?: Date | null;
}

/** Filters of `executions.list`. */
export interface ExecutionListOptions {
  workflowId?: number;
  status?: ExecutionStatus;
  /** @default 100 (max 1000) */
  limit?: number;
  /** @default 0 */
  offset?: number;
}

/** A row of `agent_workflow_node_executions`: one attempt of one node (the durable journal). */
export interface NodeExecutionRecord {
  id: number;
  tenantId: string;
  executionId: number;
  nodeId: string;
  nodeType: string;
  attempt: number;
  /** e.g. running, completed, failed, paused, skipped, cancelled. */
  status: string;
  input: JsonValue | null;
  output: JsonValue | null;
  tokenUsage: JsonValue | null;
  toolCalls: JsonValue | null;
  error: string | null;
  /** Stable error code of a failed attempt (e.g. `BATON_TOOL_TIMEOUT`). */
  errorCode: string | null;
  /** Whether the failure may succeed when tried again. */
  retryable: boolean | null;
  /** The checkpoint version whose step wrote this row; orders the journal for replay. */
  stepVersion: number | null;
  /**
   * The step whose write began the attempt (status running or paused, which only a beginning
   * writes); kept when a later step writes the row again. Null when not known.
   */
  beganStep: number | null;
  durationMs: number | null;
  startedAt: Date;
  completedAt: Date | null;
}

/**
 * One journal write. Upserted on (executionId, nodeId, attempt): the first write of an
 * attempt creates the row, later writes update only the fields they carry.
 */
export interface NodeExecutionEntry {
  tenantId: string;
  executionId: number;
  nodeId: string;
  nodeType: string;
  /** 1-based. */
  attempt: number;
  status: string;
  input?: JsonValue | null;
  output?: JsonValue | null;
  error?: string | null;
  toolCalls?: JsonValue | null;
  tokenUsage?: JsonValue | null;
  durationMs?: number | null;
  errorCode?: string | null;
  retryable?: boolean | null;
  stepVersion?: number | null;
  /** @default now, on the first write of the attempt */
  startedAt?: Date;
  completedAt?: Date | null;
}

/** A row of `reviews`: a human decision requested by a paused node. */
export interface ReviewRecord {
  id: number;
  tenantId: string;
  executionId: number;
  nodeId: string;
  /** Which pause of the node this review answers. */
  pauseSeq: number;
  status: ReviewStatus;
  reason: string;
  /** What the reviewer is shown. */
  payload: JsonValue;
  /** The reviewer's answer; null while pending. */
  decision: JsonValue | null;
  reviewer: string | null;
  createdAt: Date;
  resolvedAt: Date | null;
}

/** What `reviews.createPending` takes. */
export interface ReviewCreateInput {
  tenantId: string;
  executionId: number;
  nodeId: string;
  pauseSeq: number;
  reason: string;
  payload: JsonValue;
}

/** What `reviews.resolve` takes. */
export interface ReviewDecision {
  status: ReviewDecisionStatus;
  decision: JsonValue;
  reviewer?: string;
}

/** A row of `agent_memory`. */
export interface MemoryRecord {
  id: number;
  tenantId: string;
  agentId: number;
  userId: number | null;
  key: string;
  content: string;
  metadata: JsonObject;
  createdAt: Date;
  updatedAt: Date;
}

/** A memory search hit: the record and its text relevance (higher is better). */
export interface MemorySearchHit extends MemoryRecord {
  score: number;
}

/** What `memory.create` takes. */
export interface MemoryCreateInput {
  agentId: number;
  userId?: number | null;
  key: string;
  content: string;
  /** @default {} */
  metadata?: JsonObject;
}

/** A text query over memory. */
export interface MemorySearchQuery {
  agentId?: number;
  userId?: number;
  query: string;
  /** @default 10 (max 100) */
  limit?: number;
}

/** A row of `learned_sequences`: the tool calls one execution made, in order. */
export interface LearnedSequenceRecord {
  id: number;
  tenantId: string;
  executionId: number;
  agentId: number | null;
  sessionId: number | null;
  /** Ordered tool calls, e.g. `[{ tool, params }]`. */
  tools: JsonValue;
  successful: boolean;
  createdAt: Date;
}

/** What `learning.recordSequence` takes. */
export interface LearnedSequenceInput {
  tenantId: string;
  executionId: number;
  agentId?: number | null;
  sessionId?: number | null;
  tools: JsonValue;
  successful: boolean;
}

/** Whether an MCP server definition is served. */
export type McpServerStatus = "active" | "disabled";

/** A row of `mcp_server_definitions`: the MCP server generated from one workflow. */
export interface McpServerRecord {
  id: number;
  tenantId: string;
  agentWorkflowId: number;
  name: string;
  slug: string;
  /** MCP tool definitions generated from the workflow. */
  toolDefinitions: JsonValue;
  status: McpServerStatus;
  lastGeneratedAt: Date;
  createdAt: Date;
  updatedAt: Date;
}

/** What `mcpServers.upsert` takes. */
export interface McpServerInput {
  name: string;
  /** Unique per tenant. @default derived from `name` */
  slug?: string;
  toolDefinitions: JsonValue;
  /** @default "active" on create, unchanged on regenerate */
  status?: McpServerStatus;
}

/** Pagination of list calls. */
export interface PageOptions {
  /** @default 100 (max 1000) */
  limit?: number;
  /** @default 0 */
  offset?: number;
}

/** Tenants and API keys. */
export interface TenantsRepo {
  /** Creates a tenant with a fresh `t_<random>` id. */
  create(name: string): Promise<Tenant>;
  get(id: string): Promise<Tenant | null>;
  /**
   * Creates an API key for a tenant. When `rawKey` is absent one is generated
   * (`bk_` + 32 base64url characters); only its sha256 is stored, so the returned
   * raw key is the only copy. Given keys must be ≥ 16 printable characters without spaces.
   * Throws `BATON_STORE_NOT_FOUND` for an unknown tenant, `BATON_STORE_CONFLICT` for a key that exists.
   * @param opts.role @default "viewer"
   * @param opts.name @default "default"
   */
  createApiKey(tenantId: string, opts?: { name?: string; role?: Role; rawKey?: string }): Promise<{ id: number; rawKey: string; prefix: string }>;
  /** The tenant and role of a raw key; null for unknown or revoked keys. Records `lastUsedAt` (at most once a minute). */
  resolveApiKey(rawKey: string): Promise<{ tenantId: string; role: Role; keyId: number } | null>;
  /** Revokes a key of the tenant; false when no such active key. */
  revokeApiKey(tenantId: string, keyId: number): Promise<boolean>;
  /** The tenant's keys, newest first (no secrets). */
  listApiKeys(tenantId: string): Promise<ApiKeyRecord[]>;
  /**
   * Makes sure a local admin key exists, for single-user local runs. The local tenant
   * has id `local` and is created when missing.
   * - `rawKey` given: the key is created (admin) unless it already exists; returns it
   *   with `created` telling which. A revoked key throws `BATON_STORE_API_KEY_REVOKED`.
   * - `rawKey` absent: when the local tenant has no active key, creates tenant and key
   *   and returns the new raw key (`created: true`); otherwise returns
   *   `{ created: false, rawKey: "" }` — raw keys are never stored, so an existing one
   *   cannot be shown again.
   */
  ensureLocalKey(rawKey?: string): Promise<{ tenantId: string; rawKey: string; created: boolean }>;
}

/** Workflow definitions and their versions. */
export interface WorkflowsRepo {
  /** Creates version 1 and its versions row in one transaction. Throws `BATON_STORE_SLUG_TAKEN` (409) on a slug conflict. */
  create(tenantId: string, input: WorkflowInput): Promise<WorkflowRecord>;
  /** Newest first. */
  list(tenantId: string, opts?: PageOptions): Promise<WorkflowRecord[]>;
  get(tenantId: string, id: number): Promise<WorkflowRecord | null>;
  /**
   * Applies the patch, bumps `version` and adds a versions row, in one transaction. Throws
   * `BATON_STORE_NOT_FOUND`. With `ifVersion`, only while the workflow is at that version (the
   * version the caller read and checked the patch against): else it throws
   * `BATON_STORE_WORKFLOW_VERSION_MOVED` (409, retryable) and writes nothing.
   */
  update(tenantId: string, id: number, patch: WorkflowPatch, opts?: { ifVersion?: number }): Promise<WorkflowRecord>;
  /**
   * Deletes the workflow with its versions, executions, node executions, reviews, blob uses and
   * MCP definition; the blobs its executions used are marked used now, so they are pruned a
   * grace period after the deletion at the earliest. False when it is not the tenant's.
   * Throws `BATON_STORE_WORKFLOW_ACTIVE` (409) and deletes nothing while any of its executions
   * is queued, running or paused: deleting them would leave their work and their watchers
   * without an end.
   */
  delete(tenantId: string, id: number): Promise<boolean>;
  /**
   * One page of the workflow's versions, oldest first (by version number), read with
   * LIMIT/OFFSET. Empty when the workflow does not exist for this tenant.
   */
  listVersions(tenantId: string, id: number, opts?: PageOptions): Promise<WorkflowVersionRecord[]>;
  /** By version number. */
  getVersion(tenantId: string, id: number, version: number): Promise<WorkflowVersionRecord | null>;
  /**
   * By versions row id (see {@link WorkflowVersionRecord.id}): one row, read by its primary key.
   * Null when that row is not a version of workflow `id` of this tenant.
   */
  getVersionByRowId(tenantId: string, id: number, versionId: number): Promise<WorkflowVersionRecord | null>;
  getBySlug(tenantId: string, slug: string): Promise<WorkflowRecord | null>;
  /**
   * The version of workflow `id` that was current when the run `executionId` belongs to began:
   * the newest version created at or before the creation of the first run up its chain of
   * parents and fork sources (the top-level run a fork was taken from, for a fork). Null when
   * the workflow had no version then (it was created later), or the run is not the tenant's.
   * Versions and runs are stamped by the database's clock, so the comparison does not depend
   * on the clocks of the processes that wrote them.
   */
  versionAt(tenantId: string, id: number, executionId: number): Promise<number | null>;
  /** Makes a new version whose definition is the one of versions row `versionId` (a row id, see {@link WorkflowVersionRecord.id}). */
  restoreVersion(tenantId: string, id: number, versionId: number): Promise<WorkflowRecord>;
}

/** Execution records. */
export interface ExecutionsRepo {
  /** Creates a `queued` execution. Throws `BATON_STORE_NOT_FOUND` when the workflow (or parent execution) is not the tenant's. */
  create(tenantId: string, input: ExecutionCreateInput): Promise<ExecutionRecord>;
  get(tenantId: string, id: number): Promise<ExecutionRecord | null>;
  /** Internal (executor): not tenant-scoped. */
  getById(id: number): Promise<ExecutionRecord | null>;
  /** Newest first. */
  list(tenantId: string, opts?: ExecutionListOptions): Promise<ExecutionRecord[]>;
  /** Internal (executor): not tenant-scoped. Throws `BATON_STORE_NOT_FOUND`. */
  update(id: number, patch: ExecutionPatch): Promise<ExecutionRecord>;
  /**
   * Deletes the execution with its journal, reviews and blob uses (its sub-workflow runs and
   * forks stay, unlinked); the blobs it used are marked used now, so they are pruned a grace
   * period after the deletion at the earliest. False when it is not the tenant's.
   */
  delete(tenantId: string, id: number): Promise<boolean>;
  /**
   * Internal (executor): creates the `queued` child run of a parent's node, idempotent on
   * (parentExecutionId, parentNodeId, childKey): a redelivered "start child" gets the row
   * made the first time with `created: false` (its other fields are not compared).
   * Throws `BATON_STORE_NOT_FOUND` when parent or workflow is not the tenant's.
   */
  createChild(input: ChildExecutionInput): Promise<{ row: ExecutionRecord; created: boolean }>;
  /** Internal (executor): the child run of a parent's node with that key, or null. */
  getChild(parentExecutionId: number, parentNodeId: string, childKey: string): Promise<ExecutionRecord | null>;
  /** The child runs of an execution (sub-workflows, forEach bodies), oldest first; with `status`, only those in it. */
  listChildren(tenantId: string, id: number, opts?: { status?: ExecutionStatus }): Promise<ExecutionRecord[]>;
  /** Internal (executor): executions of every tenant in the given statuses, by id ascending. */
  listActive(query?: ActiveExecutionsQuery): Promise<ExecutionRecord[]>;
  /** Internal (executor): takes the start of an execution (see {@link AdmitInput}, {@link Admission}). */
  admit(input: AdmitInput): Promise<Admission>;
  /**
   * Internal (executor): cancels an execution that is still `queued` (status `cancelled`,
   * `completedAt`, `error` `BATON_CANCELLED: <reason>`, as a cancelled run's); null when it is
   * not queued (any more) or not the tenant's.
   */
  cancelQueued(id: number, tenantId: string, at: Date, reason?: string): Promise<ExecutionRecord | null>;
  /**
   * Internal (executor): fences the journal of an execution whose checkpoint is rebuilt from it,
   * before it is read: in one statement, takes the row `FOR UPDATE` (every journal statement of
   * the execution still running lands first) and raises its journal floor by `room` past the
   * highest of: the floor before, its journal's highest step number, and the step of its row's
   * last patch (`patchedStep`). Records numbered below the floor are refused from then on
   * (`recordSteps` throws `BATON_STORE_FENCED`). Resolves with the floor; throws
   * `BATON_STORE_NOT_FOUND` when the execution is not the tenant's.
   */
  fenceJournal(id: number, tenantId: string, room: number): Promise<number>;
  /**
   * Internal (executor): an execution's journal floor ({@link fenceJournal}), null when its
   * journal was never fenced. Throws `BATON_STORE_NOT_FOUND` when the execution is not the tenant's.
   */
  journalFloor(id: number, tenantId: string): Promise<number | null>;
  /**
   * Internal (executor): the oldest `queued` top-level executions of a tenant that can be
   * started from their row alone (a fork only once its starting state is on the row), as many
   * as the cap leaves free.
   */
  listStartable(query: StartableQuery): Promise<ExecutionRecord[]>;
  /** Internal (executor): tenants with `queued` top-level executions not updated for `idleMs`. */
  queuedTenants(idleMs?: number): Promise<string[]>;
  /**
   * Internal (executor): one batch of the retention pruner, across tenants
   * (docs/adr/008-blob-retention.md, "Execution retention"). A run is a top-level execution
   * with its sub-workflow runs at every depth; it goes whole once every execution in it is
   * finished (`completed`, `failed` or `cancelled`) with a `completedAt` before `olderThan`.
   * Deletes up to `limit` (at most 10 000) executions of such runs, oldest run first, each
   * run's deepest executions first (a run cut by the limit keeps its top, still whole and
   * finished, for the next batch), with everything that cascades from them (journal, reviews,
   * blob uses); their forks stay, without `forkedFromExecutionId`. The blobs they used are
   * marked used now, so they are pruned a grace period later at the earliest. One process at
   * a time (a transaction-scoped advisory lock; a call that does not get it does nothing).
   */
  pruneFinished(opts: { olderThan: Date; limit: number }): Promise<ExecutionPruneResult>;
}

/** What one batch of {@link ExecutionsRepo.pruneFinished} did. */
export interface ExecutionPruneResult {
  /** False when another process was pruning (an advisory lock): this call did nothing. */
  ran: boolean;
  /** Executions deleted (sub-workflow runs included). */
  deleted: number;
  /** Top-level executions among them (runs deleted whole by this batch). */
  runs: number;
}

/** What {@link NodeExecutionsRepo.recordSteps} writes. */
export interface StepRecords {
  entries: readonly NodeExecutionEntry[];
  /**
   * `stepVersion`: the step the patch comes from; when the journal already holds a row of a
   * later step of the execution, the patch is left out (another executor's later records
   * landed first).
   */
  executions: readonly { id: number; tenantId: string; patch: ExecutionPatch; stepVersion?: number }[];
}

/** The durable per-node journal. */
export interface NodeExecutionsRepo {
  /** Idempotent upsert on (executionId, nodeId, attempt). Throws `BATON_STORE_NOT_FOUND` when the execution is not the tenant's. */
  record(entry: NodeExecutionEntry): Promise<NodeExecutionRecord>;
  /** Ordered by startedAt, id. */
  list(tenantId: string, executionId: number): Promise<NodeExecutionRecord[]>;
  /** Internal (executor): not tenant-scoped. Ordered by startedAt, id. */
  listById(executionId: number): Promise<NodeExecutionRecord[]>;
  /** Internal: the row of a node's latest attempt, or null; one key lookup, however long the journal. Not tenant-scoped. */
  latest(executionId: number, nodeId: string): Promise<NodeExecutionRecord | null>;
  /**
   * Internal (executor): upserts a batch of journal writes in one SQL statement (one
   * round trip), with the semantics of {@link record} for each entry. Entries for the
   * same (executionId, nodeId, attempt) are merged in order first. Throws
   * `BATON_STORE_NOT_FOUND` when an entry's execution is not its tenant's (then nothing is written).
   * Writes of one attempt merge by step, whatever order they land in: an entry whose
   * `stepVersion` is below the row's only fills columns the row does not have yet, so the
   * records of an earlier step that land after a later step's (statements overlapping, or
   * another executor's) do not undo it. Entries are written in (execution, node, attempt)
   * order, so statements running at the same time do not deadlock. An entry with a
   * `stepVersion` and status `running` or `paused` (a beginning) sets the row's `beganStep`,
   * which later steps' entries keep, and an earlier step's beginning that lands late fills.
   * @returns how many rows were written (an earlier step's entry with nothing to fill not counted)
   */
  recordMany(entries: readonly NodeExecutionEntry[]): Promise<number>;
  /**
   * Internal (executor): the journal writes of many steps and the execution-row updates
   * that go with them, in one SQL statement (one round trip, straight on the connection
   * pool). Journal entries as in {@link recordMany}; patches as in
   * {@link ExecutionsRepo.update}, merged in order per execution, left out when the journal
   * holds a row of a later step than the patch's `stepVersion`. Throws
   * `BATON_STORE_NOT_FOUND` when an entry's or a patch's execution is not its tenant's
   * (then nothing is written), and `BATON_STORE_FENCED` (nothing written either) when one is
   * numbered below its execution's journal floor ({@link ExecutionsRepo.fenceJournal}).
   * @returns rows written and execution rows updated (entries and patches left out not counted)
   */
  recordSteps(batch: StepRecords): Promise<{ journaled: number; updated: number }>;
  /** Internal (executor): not tenant-scoped. Ordered by stepVersion (nulls last), then id. */
  listForReplay(executionId: number): Promise<NodeExecutionRecord[]>;
}

/** A row of `blobs`: a JSON value stored once per tenant under the sha256 of its canonical JSON. */
export interface BlobRecord {
  tenantId: string;
  /** sha256 (hex) of the canonical JSON (object keys sorted, no spaces). */
  hash: string;
  /** Bytes of the canonical JSON (UTF-8). */
  size: number;
  data: JsonValue;
  createdAt: Date;
  /** When it was last put, recorded as used, or found in use by the pruner. */
  usedAt: Date;
}

/** What one batch of {@link BlobsRepo.prune} did. */
export interface BlobPruneResult {
  /** False when another process was pruning (an advisory lock): this call did nothing. */
  ran: boolean;
  /** Blobs deleted: no execution used them and their `usedAt` was older than the cutoff. */
  deleted: number;
  /** Blobs older than the cutoff that an execution or a learned sequence still uses: their `usedAt` is set to now. */
  inUse: number;
}

/**
 * Content-addressed storage of large values (tool results), referenced as `blob:<hash>`,
 * with a record of which execution uses which blob so unused ones can be pruned
 * (docs/adr/008-blob-retention.md).
 */
export interface BlobsRepo {
  /**
   * Stores `data` unless the tenant already has it (then refreshes its `usedAt`), and records
   * that `executionId` (the tenant's) uses it, in one statement; idempotent. Either way returns
   * its reference. Throws `BATON_STORE_NOT_FOUND` when the execution is not the tenant's.
   */
  put(tenantId: string, executionId: number, data: JsonValue): Promise<{ ref: string; hash: string; size: number }>;
  /**
   * Records that `executionId` uses the tenant's blobs `hashes` (`<hex>` or `blob:<hex>`, at most
   * 1000), which another execution stored (a child's input, a child's output, a fork's starting
   * state), and refreshes their `usedAt`; idempotent.
   * @returns the hashes (hex) the tenant has no blob for (nothing is recorded for them)
   */
  use(tenantId: string, executionId: number, hashes: readonly string[]): Promise<string[]>;
  /**
   * Internal (executor): one batch of the pruner, across tenants. Looks at up to `limit`
   * (at most 10 000) blobs whose `usedAt` is older than `olderThan`, oldest first: deletes
   * those no execution and no learned sequence uses and sets `usedAt` to now on the others. One process at a time
   * (a transaction-scoped advisory lock; a call that does not get it does nothing).
   */
  prune(opts: { olderThan: Date; limit: number }): Promise<BlobPruneResult>;
  /** By hash (`<hex>` or `blob:<hex>`); null when the tenant has no such blob. */
  get(tenantId: string, hash: string): Promise<BlobRecord | null>;
  /** The hashes (hex) among `hashes` (`<hex>` or `blob:<hex>`, at most 1000) the tenant has no blob for; reads no data. */
  missing(tenantId: string, hashes: readonly string[]): Promise<string[]>;
  /** The tenant's blobs among `hashes`, keyed by hex hash; missing ones are absent. */
  getMany(tenantId: string, hashes: readonly string[]): Promise<Map<string, BlobRecord>>;
}

/** Human reviews. */
export interface ReviewsRepo {
  /** Idempotent on (executionId, nodeId, pauseSeq): a redelivered pause returns the existing review with `created: false`. */
  createPending(entry: ReviewCreateInput): Promise<{ review: ReviewRecord; created: boolean }>;
  /** Resolves the node's pending review (the latest pause); null when none is pending. */
  resolve(tenantId: string, executionId: number, nodeId: string, decision: ReviewDecision): Promise<ReviewRecord | null>;
  /** Newest first. */
  list(tenantId: string, opts?: { status?: ReviewStatus; executionId?: number } & PageOptions): Promise<ReviewRecord[]>;
  /**
   * The pending reviews a run waits on, newest first (at most `limit`, default 100): its own,
   * and those of its sub-runs (child executions) that are paused, at any depth, through paused
   * sub-runs only. Each names the execution whose resume decides it. Empty for another
   * tenant's run.
   */
  pendingInRun(tenantId: string, executionId: number, opts?: { limit?: number }): Promise<ReviewRecord[]>;
  /**
   * The reviews of a run and of all its sub-runs (child executions: subworkflow, forEach and
   * subagent runs), at any depth whatever their status, newest first, paged like `list`, with
   * `status` only those in it. Each names its own execution. Empty for another tenant's run.
   */
  listInRun(tenantId: string, executionId: number, opts?: { status?: ReviewStatus } & PageOptions): Promise<ReviewRecord[]>;
}

/** Long-term agent memory. */
export interface MemoryRepo {
  create(tenantId: string, entry: MemoryCreateInput): Promise<MemoryRecord>;
  /** Newest first. */
  list(tenantId: string, filter?: { agentId?: number; userId?: number } & PageOptions): Promise<MemoryRecord[]>;
  /** One entry; null when it is not the tenant's. */
  get(tenantId: string, id: number): Promise<MemoryRecord | null>;
  /** Returns the deleted record, or null when it was not the tenant's. */
  delete(tenantId: string, id: number): Promise<MemoryRecord | null>;
  /** Text relevance over key + content (full-text rank plus substring match), best first. */
  search(tenantId: string, query: MemorySearchQuery): Promise<MemorySearchHit[]>;
}

/** Tool sequences captured for learning. */
export interface LearningRepo {
  /**
   * Idempotent per executionId: the first record wins. Records, in the same statement, that the
   * sequence uses the tenant's blobs its tools refer to (`{ "$ref": "blob:<hex>" }` at any depth;
   * references to blobs the tenant does not have are left out), so they are kept as long as the
   * sequence (docs/adr/008-blob-retention.md, "Learned sequences").
   */
  recordSequence(entry: LearnedSequenceInput): Promise<void>;
  /**
   * Records an execution's tool sequence from its journal, in one statement: its completed
   * tool nodes in journal order (start time, then row id) as `{ nodeId, tool, params }`
   * (`tool` from the node's first tool call, `"unknown"` without one; `params` its input),
   * with the execution's agent and session. Only rows and the execution of `tenantId` count:
   * `BATON_STORE_NOT_FOUND` when the execution is not the tenant's (nothing is written).
   * Idempotent per executionId like {@link recordSequence}, and like it records the sequence's
   * uses of the blobs its params refer to (inputs above the large-value threshold are blob
   * references); returns the tools' names in order.
   */
  recordFromJournal(entry: { tenantId: string; executionId: number; successful: boolean }): Promise<{ tools: string[] }>;
  /** Newest first. */
  list(tenantId: string, opts?: { agentId?: number; successful?: boolean } & PageOptions): Promise<LearnedSequenceRecord[]>;
  /**
   * Internal (executor): one batch of the learned-sequence retention, across tenants. Deletes up
   * to `limit` (at most 10 000) sequences created before `olderThan`, oldest first, with their
   * uses of blobs; the blobs they used are marked used now, so they are pruned a grace period
   * after the deletion at the earliest. One process at a time (a transaction-scoped advisory
   * lock; a call that does not get it does nothing and answers `ran: false`).
   */
  pruneOlder(opts: { olderThan: Date; limit: number }): Promise<{ ran: boolean; deleted: number }>;
}

/** MCP server definitions generated from workflows (one per workflow). */
export interface McpServersRepo {
  /**
   * Creates or regenerates the workflow's MCP server definition (sets `lastGeneratedAt`).
   * Throws `BATON_STORE_NOT_FOUND` when the workflow is not the tenant's, `BATON_STORE_SLUG_TAKEN` on a slug conflict.
   */
  upsert(tenantId: string, workflowId: number, input: McpServerInput): Promise<McpServerRecord>;
  get(tenantId: string, id: number): Promise<McpServerRecord | null>;
  getByWorkflow(tenantId: string, workflowId: number): Promise<McpServerRecord | null>;
  getBySlug(tenantId: string, slug: string): Promise<McpServerRecord | null>;
  /** Newest first. */
  list(tenantId: string, opts?: PageOptions): Promise<McpServerRecord[]>;
  /** Null when the definition is not the tenant's. */
  setStatus(tenantId: string, id: number, status: McpServerStatus): Promise<McpServerRecord | null>;
}

/**
 * Baton's definitions store. Everything tenant-scoped takes `tenantId` first and never
 * reads, changes or deletes another tenant's rows; methods marked internal are for the
 * executor, which works from ids carried by its own commands.
 */
export interface Store {
  /** The underlying Prisma client (escape hatch; bypasses tenant scoping). */
  readonly prisma: PrismaClient;
  /** The Postgres schema this store reads and writes. */
  readonly schema: string;
  /** Closes the connection pool. */
  close(): Promise<void>;
  /** Round-trips to the database; throws `BATON_STORE_UNAVAILABLE` when it cannot. */
  ping(): Promise<void>;
  readonly tenants: TenantsRepo;
  readonly workflows: WorkflowsRepo;
  readonly executions: ExecutionsRepo;
  readonly nodeExecutions: NodeExecutionsRepo;
  readonly reviews: ReviewsRepo;
  readonly memory: MemoryRepo;
  readonly learning: LearningRepo;
  readonly mcpServers: McpServersRepo;
  readonly blobs: BlobsRepo;
}
