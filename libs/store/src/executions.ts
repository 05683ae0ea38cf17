import type { Pool } from "pg";
import { Prisma } from "./generated/client.ts";
import type { AgentWorkflowExecution, PrismaClient } from "./generated/client.ts";
import { guard, toStoreError } from "./db-errors.ts";
import { StoreFenced, StoreInvalidInput, StoreNotFound } from "./errors.ts";
import { toExecution, toNodeExecution } from "./records.ts";
import type { ExecutionPatch, ExecutionRecord, ExecutionStatus, ExecutionsRepo, JsonValue, NodeExecutionEntry, NodeExecutionsRepo, StepRecords } from "./types.ts";
import {
  EXECUTION_STATUSES,
  isDbId,
  jsonIn,
  namedStatement,
  nullableJsonIn,
  oneOf,
  optionalInt,
  page,
  inTransaction,
  lockKey,
  quoteIdent,
  requireIdMap,
  requireJson,
  requireJsonObject,
  requireTenantId,
  requireText,
  runPruneBatch,
} from "./values.ts";

const STATE_MAX = 500;
const ERROR_MAX = 100_000;

function optionalText(name: string, v: unknown, max: number): string | null | undefined {
  if (v === undefined || v === null) return v;
  return requireText(name, v, { max, allowEmpty: true });
}

function optionalDate(name: string, v: unknown): Date | null | undefined {
  if (v === undefined || v === null) return v;
  if (!(v instanceof Date) || Number.isNaN(v.getTime())) throw StoreInvalidInput(`${name} must be a valid Date`);
  return v;
}

function optionalJson(name: string, v: unknown): ReturnType<typeof nullableJsonIn> {
  if (v === undefined || v === null) return nullableJsonIn(v);
  return nullableJsonIn(requireJson(name, v));
}

function executionPatch(patch: ExecutionPatch): Prisma.AgentWorkflowExecutionUncheckedUpdateInput {
  if (typeof patch !== "object" || patch === null) throw StoreInvalidInput("patch must be an object");
  const data: Prisma.AgentWorkflowExecutionUncheckedUpdateInput = {};
  if (patch.status !== undefined) data.status = oneOf("status", patch.status, EXECUTION_STATUSES);
  if (patch.currentState !== undefined) data.currentState = optionalText("currentState", patch.currentState, STATE_MAX);
  if (patch.context !== undefined) data.context = jsonIn(requireJsonObject("context", patch.context));
  if (patch.checkpoint !== undefined) data.checkpoint = optionalJson("checkpoint", patch.checkpoint);
  if (patch.output !== undefined) data.output = optionalJson("output", patch.output);
  if (patch.error !== undefined) data.error = optionalText("error", patch.error, ERROR_MAX);
  if (patch.tokenUsage !== undefined) data.tokenUsage = jsonIn(requireJsonObject("tokenUsage", patch.tokenUsage));
  if (patch.subRunPauses !== undefined) data.subRunPauses = requireIdMap("subRunPauses", patch.subRunPauses);
  if (patch.startedAt !== undefined) data.startedAt = optionalDate("startedAt", patch.startedAt);
  if (patch.completedAt !== undefined) data.completedAt = optionalDate("completedAt", patch.completedAt);
  if (patch.deadlineAt !== undefined) data.deadlineAt = optionalDate("deadlineAt", patch.deadlineAt);
  return data;
}

/** A patch as sent to SQL by recordSteps: checked like {@link executionPatch}, only the keys it carries, dates as ISO text. */
function executionPatchDoc(id: unknown, tenantId: unknown, patch: ExecutionPatch): Record<string, JsonValue> {
  if (!isDbId(id)) throw StoreNotFound("execution", String(id));
  const doc: Record<string, JsonValue> = { id, tenantId: requireTenantId(tenantId) };
  const data = executionPatch(patch);
  if (data.status !== undefined) doc.status = data.status;
  if (data.currentState !== undefined) doc.currentState = data.currentState ?? null;
  if (data.error !== undefined) doc.error = data.error ?? null;
  if (patch.context !== undefined) doc.context = patch.context;
  if (patch.tokenUsage !== undefined) doc.tokenUsage = patch.tokenUsage;
  if (patch.subRunPauses !== undefined) doc.subRunPauses = patch.subRunPauses;
  if (patch.output !== undefined) doc.output = patch.output ?? null;
  if (patch.checkpoint !== undefined) doc.checkpoint = patch.checkpoint ?? null;
  for (const key of ["startedAt", "completedAt", "deadlineAt"] as const) {
    if (data[key] !== undefined) doc[key] = data[key] === null ? null : (data[key] as Date).toISOString();
  }
  return doc;
}

const ACTIVE_STATUSES: ExecutionStatus[] = ["queued", "running", "paused"];

async function requireSameTenantExecution(prisma: PrismaClient, tenantId: string, id: unknown, what: string): Promise<number> {
  if (!isDbId(id)) throw StoreNotFound(what, String(id));
  const row = await guard({ entity: "execution", id }, () =>
    prisma.agentWorkflowExecution.findFirst({ where: { id, tenantId }, select: { id: true } }),
  );
  if (!row) throw StoreNotFound(what, id);
  return id;
}

function optionalBool(name: string, v: unknown): boolean | null | undefined {
  if (v === undefined || v === null) return v;
  if (typeof v !== "boolean") throw StoreInvalidInput(`${name} must be a boolean`);
  return v;
}


/** Finished statuses, as SQL: a run whose executions all have one of them may be pruned. */
const FINISHED = "'completed', 'failed', 'cancelled'";


/** Statuses that hold one of a tenant's slots under `BATON_TENANT_MAX_RUNNING` (see `admit`). */
const SLOT_STATUSES = "'running', 'paused'";

export function executionsRepo(prisma: PrismaClient, schema: string, pool: Pool): ExecutionsRepo {
  // Admission reads and writes these rows once or twice per execution (the gateway creates
  // the row, the executor reads it), so plain named statements on the pool: Prisma's work
  // per query cost about three times the statement's (0.3-0.4 ms of CPU against 0.1).
  const runs = `${quoteIdent(schema)}."agent_workflow_executions"`;
  const blobs = `${quoteIdent(schema)}."blobs"`;
  const uses = `${quoteIdent(schema)}."blob_uses"`;
  const BY_ID = namedStatement("execution_by_id", `SELECT * FROM ${runs} WHERE "id" = $1`);
  // The row is locked FOR UPDATE in a statement of its own, then the floor set in the next one,
  // in one transaction. FOR UPDATE: an UPDATE alone takes the row FOR NO KEY UPDATE, which a
  // journal statement's FOR KEY SHARE does not wait for (nor it for that). Its own statement:
  // the journal's highest step must be read in a snapshot taken once the lock is held, so that it
  // counts every journal statement that was in flight when the fence came (they hold the row FOR
  // KEY SHARE until they commit, so the lock waits for them). Read in the locking statement's
  // snapshot, from before the wait, it missed their rows: the floor then stayed below the steps
  // the rebuild numbers from (past the journal it reads), and a stale history numbered between
  // the two could still write and tell its steps beside the rebuilt one's (found tracing chaos
  // seed 1116, ADR 004). The floor rises past the floor before it, and past the step of the
  // row's last patch, not only past the journal: the history rebuilt after the last fence was
  // numbered from that floor, and its steps may have written no journal row (a pause in a
  // sub-run patches the row only) or none yet (its executor stalled). A floor left where it was
  // numbered the next rebuilt history from the same step, and so its events with the same
  // message ids (chaos seed 810).
  const FENCE_LOCK = namedStatement("execution_fence_lock", `SELECT x."id" FROM ${runs} x WHERE x."id" = $1 AND x."tenantId" = $2 FOR UPDATE`);
  const FENCE = namedStatement("execution_fence_journal", `UPDATE ${runs} AS x SET "journalFloor" = GREATEST(COALESCE(x."journalFloor", 0), COALESCE(x."patchedStep", 0),
      COALESCE((SELECT max(j."stepVersion") FROM ${quoteIdent(schema)}."agent_workflow_node_executions" j WHERE j."executionId" = x."id"), 0)) + $2::int
    WHERE x."id" = $1 RETURNING x."journalFloor"`);
  const FLOOR = namedStatement("execution_journal_floor", `SELECT "journalFloor" FROM ${runs} WHERE "id" = $1 AND "tenantId" = $2`);
  const BY_TENANT_ID = namedStatement("execution_by_tenant_id", `SELECT * FROM ${runs} WHERE "id" = $1 AND "tenantId" = $2`);
  const CREATE_COLUMNS = ["tenantId", "agentWorkflowId", "workflowVersion", "status", "input", "agentId", "sessionId", "triggerEvent", "parentNodeId", "childKey",
    "definitionRef", "deadlineAt", "forkedFromVersion", "parentExecutionId", "forkedFromExecutionId", "checkpoint"] as const;
  const CREATE = namedStatement("execution_create", `INSERT INTO ${runs} (${CREATE_COLUMNS.map((c) => `"${c}"`).join(", ")}, "updatedAt")
    VALUES (${CREATE_COLUMNS.map((c, i) => `$${i + 1}${c === "input" || c === "checkpoint" ? "::jsonb" : ""}`).join(", ")}, CURRENT_TIMESTAMP) RETURNING *`);
  // Admission (ADR 004, amended): a start moves its row from queued to running in one
  // conditional statement, so a cancel of a queued run and its start never both win. With a
  // cap, the tenant's top-level runs holding a slot are counted in the same statement, under a
  // per-tenant transaction-scoped advisory lock taken before it: the statement's snapshot is
  // taken after the lock, so it sees every admission committed before, on any replica.
  const slotsTaken = `SELECT count(*)::int AS n FROM ${runs} r WHERE r."status" IN (${SLOT_STATUSES}) AND r."tenantId" = $2 AND r."parentExecutionId" IS NULL`;
  // Under a cap, the tenant's older queued top-level runs that could start hold their place too:
  // a run is admitted only while the slots taken plus those waiting before it are under the
  // cap, so a fresh start cannot take the slot a woken older run is about to (oldest first).
  const waitingBefore = `SELECT count(*)::int FROM ${runs} q WHERE q."status" = 'queued' AND q."tenantId" = $2 AND q."parentExecutionId" IS NULL
    AND q."id" < $1 AND (q."forkedFromExecutionId" IS NULL OR q."checkpoint" IS NOT NULL) AND (q."deadlineAt" IS NULL OR q."deadlineAt" > $3::timestamptz)`;
  // A run whose deadline has passed is admitted whatever the cap: its start step fails it
  // before any node runs, so it holds a slot only for that step, and it does not wait for a
  // slot to free only to fail then. For the same reason it holds no place in the line above.
  const open = `(slots.n < $5 OR COALESCE(x."deadlineAt" <= $3::timestamptz, false))`;
  const admitSql = (capped: boolean): string => `
    WITH ${capped ? `slots AS (SELECT (${slotsTaken.replace("count(*)::int AS n", "count(*)::int")}) + (${waitingBefore}) AS n),` : ""}
    cur AS (SELECT * FROM ${runs} WHERE "id" = $1 AND "tenantId" = $2),
    upd AS (
      UPDATE ${runs} AS x SET
        "status" = ${capped ? `CASE WHEN ${open} THEN 'running' ELSE x."status" END` : "'running'"},
        "startedAt" = ${capped ? `CASE WHEN ${open} THEN COALESCE(x."startedAt", $3::timestamptz) ELSE x."startedAt" END` : `COALESCE(x."startedAt", $3::timestamptz)`},
        "checkpoint" = COALESCE(x."checkpoint", $4::jsonb),
        "updatedAt" = CURRENT_TIMESTAMP
      ${capped ? "FROM slots" : ""}
      WHERE x."id" = $1 AND x."tenantId" = $2 AND x."status" = 'queued'
        ${capped ? `AND (${open} OR ($4::jsonb IS NOT NULL AND x."checkpoint" IS NULL))` : ""}
      RETURNING x.*
    )
    SELECT upd.*, true AS "fresh" FROM upd UNION ALL SELECT cur.*, false FROM cur WHERE NOT EXISTS (SELECT 1 FROM upd)`;
  const ADMIT = namedStatement("execution_admit", admitSql(false));
  const ADMIT_CAPPED = namedStatement("execution_admit_capped", admitSql(true));
  const admissionLock = lockKey(`baton:tenant-admission:${schema}`);
  const CANCEL_QUEUED = namedStatement("execution_cancel_queued", `UPDATE ${runs} SET "status" = 'cancelled', "completedAt" = $3, "error" = 'BATON_CANCELLED: ' || $4, "updatedAt" = CURRENT_TIMESTAMP
    WHERE "id" = $1 AND "tenantId" = $2 AND "status" = 'queued' RETURNING *`);
  // A fork can be started from its row once its starting state is there (admit keeps it).
  const startable = `x."status" = 'queued' AND x."parentExecutionId" IS NULL AND (x."forkedFromExecutionId" IS NULL OR x."checkpoint" IS NOT NULL)
    AND x."updatedAt" <= CURRENT_TIMESTAMP - make_interval(secs => $3::double precision / 1000)`;
  const STARTABLE = namedStatement("execution_startable", `SELECT x.* FROM ${runs} x WHERE x."tenantId" = $1 AND ${startable} ORDER BY x."id" LIMIT $2`);
  const STARTABLE_CAPPED = namedStatement("execution_startable_capped", `SELECT x.* FROM ${runs} x WHERE x."tenantId" = $1 AND ${startable}
    ORDER BY x."id" LIMIT LEAST($2, GREATEST($4 - (${slotsTaken.replace("$2", "$1")}), 0))`);
  const QUEUED_TENANTS = namedStatement("execution_queued_tenants", `SELECT DISTINCT x."tenantId" FROM ${runs} x
    WHERE ${startable.replace("$3", "$1")}`);
  // One batch of the retention pruner (ExecutionsRepo.pruneFinished, ADR 008 "Execution
  // retention"). Candidate runs: top-level, finished before the cutoff, oldest first through the
  // "completedAt" index, locked (SKIP LOCKED: a row being written now is left for later) and,
  // so that a run stuck behind an active child does not fill every batch, without a direct child
  // that is active or finished since the cutoff. Their trees are then read whole (by the
  // "parentExecutionId" index) and kept unless every execution in them is finished before the
  // cutoff; the deepest executions of the oldest runs go first, at most $2. The blobs those
  // executions use are touched (locked in key order, as blob puts and uses lock them) before
  // the uses cascade away, so a blob's grace period counts from the deletion. The delete checks
  // the status again: a row whose status changed since the statement's snapshot stays.
  const PRUNE_FINISHED = namedStatement("execution_prune_finished", `WITH RECURSIVE lock AS (SELECT pg_try_advisory_xact_lock($3::int, $4::int) AS ok),
    roots AS (
      SELECT r."id", r."completedAt" FROM ${runs} r
       WHERE r."completedAt" < $1::timestamptz AND r."status" IN (${FINISHED}) AND r."parentExecutionId" IS NULL AND (SELECT ok FROM lock)
         AND NOT EXISTS (SELECT 1 FROM ${runs} c WHERE c."parentExecutionId" = r."id"
               AND (c."status" NOT IN (${FINISHED}) OR c."completedAt" IS NULL OR c."completedAt" >= $1::timestamptz))
       ORDER BY r."completedAt", r."id" LIMIT $2
       FOR UPDATE OF r SKIP LOCKED
    ),
    tree AS (
      SELECT x."id" AS "root", x."completedAt" AS "rootAt", x."id", 0 AS "depth", true AS "done" FROM roots x
      UNION ALL
      SELECT t."root", t."rootAt", c."id", t."depth" + 1, COALESCE(c."status" IN (${FINISHED}) AND c."completedAt" < $1::timestamptz, false)
        FROM tree t JOIN ${runs} c ON c."parentExecutionId" = t."id"
    ),
    whole AS (SELECT "root" FROM tree GROUP BY "root" HAVING bool_and("done")),
    pick AS (
      SELECT t."id" FROM tree t JOIN whole w ON w."root" = t."root"
       ORDER BY t."rootAt", t."root", t."depth" DESC, t."id" LIMIT $2
    ),
    hashes AS (SELECT DISTINCT u."tenantId", u."hash" FROM ${uses} u WHERE u."executionId" IN (SELECT "id" FROM pick)),
    held AS (
      SELECT b."id" FROM ${blobs} b JOIN hashes h ON b."tenantId" = h."tenantId" AND b."hash" = h."hash"
       ORDER BY b."tenantId", b."hash" FOR UPDATE OF b
    ),
    touched AS (UPDATE ${blobs} b SET "usedAt" = CURRENT_TIMESTAMP FROM held WHERE b."id" = held."id" RETURNING b."id"),
    gone AS (
      DELETE FROM ${runs} d USING pick p WHERE d."id" = p."id" AND d."status" IN (${FINISHED})
      RETURNING d."id", d."parentExecutionId"
    )
    SELECT (SELECT ok FROM lock) AS "ran", (SELECT count(*)::int FROM gone) AS "deleted",
           (SELECT count(*)::int FROM gone WHERE "parentExecutionId" IS NULL) AS "runs"`);
  const pruneLock = [lockKey("baton:execution-prune"), lockKey(`baton:execution-prune:${schema}`)];
  // One execution deleted (its sub-workflow runs stay, SET NULL), with its blob uses: the blobs
  // it used are marked used now first, as the retention pruner does, so their grace period
  // counts from the deletion.
  const DELETE = namedStatement("execution_delete", `WITH held AS (
      SELECT b."id" FROM ${blobs} b
       WHERE b."tenantId" = $2 AND b."hash" IN (SELECT u."hash" FROM ${uses} u WHERE u."executionId" = $1 AND u."tenantId" = $2)
       ORDER BY b."hash" FOR UPDATE OF b
    ),
    touched AS (UPDATE ${blobs} b SET "usedAt" = CURRENT_TIMESTAMP FROM held WHERE b."id" = held."id"),
    gone AS (DELETE FROM ${runs} d WHERE d."id" = $1 AND d."tenantId" = $2 RETURNING d."id")
    SELECT count(*)::int AS "deleted" FROM gone`);
  const one = async (ctx: { entity: string; id: number }, statement: { name: string; text: string }, values: unknown[]): Promise<ExecutionRecord | null> => {
    const res = await guard(ctx, () => pool.query<AgentWorkflowExecution>({ ...statement, values }));
    return res.rows[0] ? toExecution(res.rows[0]) : null;
  };
  const repo: ExecutionsRepo = {
    async create(tenantId, input) {
      requireTenantId(tenantId);
      if (typeof input !== "object" || input === null) throw StoreInvalidInput("execution input must be an object");
      if (!isDbId(input.workflowId)) throw StoreNotFound("workflow", String(input.workflowId));
      const workflowVersion = optionalInt("workflowVersion", input.workflowVersion, 1);
      if (workflowVersion == null) throw StoreInvalidInput("workflowVersion is required");
      const data: Prisma.AgentWorkflowExecutionUncheckedCreateInput = {
        tenantId,
        agentWorkflowId: input.workflowId,
        workflowVersion,
        status: "queued",
        input: jsonIn(requireJsonObject("input", input.input)),
        agentId: optionalInt("agentId", input.agentId) ?? null,
        sessionId: optionalInt("sessionId", input.sessionId) ?? null,
        triggerEvent: optionalText("triggerEvent", input.triggerEvent, STATE_MAX) ?? null,
      };
      data.parentNodeId = optionalText("parentNodeId", input.parentNodeId, STATE_MAX) ?? null;
      data.childKey = optionalText("childKey", input.childKey, STATE_MAX) ?? null;
      data.definitionRef = optionalText("definitionRef", input.definitionRef, STATE_MAX) ?? null;
      data.deadlineAt = optionalDate("deadlineAt", input.deadlineAt) ?? null;
      const forkedFromVersion = optionalInt("forkedFromVersion", input.forkedFromVersion, 1) ?? null;
      const hasFork = input.forkedFromExecutionId !== undefined && input.forkedFromExecutionId !== null;
      if (forkedFromVersion !== null && !hasFork) throw StoreInvalidInput("forkedFromVersion needs forkedFromExecutionId");
      data.forkedFromVersion = forkedFromVersion;
      if (input.parentExecutionId !== undefined && input.parentExecutionId !== null) {
        data.parentExecutionId = await requireSameTenantExecution(prisma, tenantId, input.parentExecutionId, "parent execution");
      }
      if (hasFork) {
        data.forkedFromExecutionId = await requireSameTenantExecution(prisma, tenantId, input.forkedFromExecutionId, "forked-from execution");
      }
      const checkpoint = input.checkpoint === undefined || input.checkpoint === null ? null : JSON.stringify(requireJsonObject("checkpoint", input.checkpoint));
      const values = CREATE_COLUMNS.map((c) => (c === "input" ? JSON.stringify(input.input) : c === "checkpoint" ? checkpoint : (data[c] ?? null)));
      const row = await one({ entity: "workflow", id: input.workflowId }, CREATE, values);
      if (!row) throw StoreNotFound("workflow", input.workflowId);
      return row;
    },

    async createChild(input) {
      if (typeof input !== "object" || input === null) throw StoreInvalidInput("child input must be an object");
      const tenantId = requireTenantId(input.tenantId);
      const parentNodeId = requireText("parentNodeId", input.parentNodeId, { max: STATE_MAX });
      const childKey = requireText("childKey", input.childKey, { max: STATE_MAX });
      const parentExecutionId = input.parentExecutionId;
      if (!isDbId(parentExecutionId)) throw StoreNotFound("parent execution", String(parentExecutionId));
      const existing = () =>
        guard({ entity: "execution", id: parentExecutionId }, () =>
          prisma.agentWorkflowExecution.findFirst({ where: { parentExecutionId, parentNodeId, childKey, tenantId } }),
        );
      const before = await existing();
      if (before) return { row: toExecution(before), created: false };
      try {
        const row = await repo.create(tenantId, {
          workflowId: input.agentWorkflowId,
          workflowVersion: input.workflowVersion,
          input: input.input,
          parentExecutionId,
          parentNodeId,
          childKey,
          triggerEvent: input.triggerEvent === undefined ? "subworkflow" : input.triggerEvent,
          ...(input.definitionRef === undefined ? {} : { definitionRef: input.definitionRef }),
          ...(input.deadlineAt === undefined ? {} : { deadlineAt: input.deadlineAt }),
        });
        return { row, created: true };
      } catch (err) {
        // Two deliveries of the same "start child" raced; the unique key picked the winner.
        if (!(toStoreError(err).code === "BATON_STORE_CONFLICT")) throw err;
        const after = await existing();
        if (!after) throw err;
        return { row: toExecution(after), created: false };
      }
    },

    async getChild(parentExecutionId, parentNodeId, childKey) {
      if (!isDbId(parentExecutionId) || typeof parentNodeId !== "string" || typeof childKey !== "string") return null;
      const row = await guard({ entity: "execution", id: parentExecutionId }, () =>
        prisma.agentWorkflowExecution.findFirst({ where: { parentExecutionId, parentNodeId, childKey } }),
      );
      return row ? toExecution(row) : null;
    },

    async listChildren(tenantId, id, opts = {}) {
      requireTenantId(tenantId);
      if (!isDbId(id)) return [];
      const where: Prisma.AgentWorkflowExecutionWhereInput = { parentExecutionId: id, tenantId };
      if (opts.status !== undefined) where.status = oneOf("status", opts.status, EXECUTION_STATUSES);
      const rows = await guard({ entity: "execution", id }, () =>
        prisma.agentWorkflowExecution.findMany({ where, orderBy: { id: "asc" } }),
      );
      return rows.map(toExecution);
    },

    async listActive(query = {}) {
      const statuses = (query.statuses ?? ACTIVE_STATUSES).map((st) => oneOf("status", st, EXECUTION_STATUSES));
      const { take } = page({ limit: query.limit ?? 100 });
      const afterId = optionalInt("afterId", query.afterId, 0) ?? 0;
      const rows = await guard({ entity: "execution" }, () =>
        prisma.agentWorkflowExecution.findMany({ where: { status: { in: statuses }, id: { gt: afterId } }, orderBy: { id: "asc" }, take }),
      );
      return rows.map(toExecution);
    },

    async admit(input) {
      if (typeof input !== "object" || input === null) throw StoreInvalidInput("admission must be an object");
      const tenantId = requireTenantId(input.tenantId);
      if (!isDbId(input.id)) return { outcome: "missing", row: null };
      const cap = optionalInt("cap", input.cap, 0) ?? 0;
      const startedAt = optionalDate("startedAt", input.startedAt);
      if (!startedAt) throw StoreInvalidInput("startedAt is required");
      const checkpoint = input.checkpoint === undefined ? null : JSON.stringify(requireJsonObject("checkpoint", input.checkpoint));
      const values: unknown[] = [input.id, tenantId, startedAt.toISOString(), checkpoint];
      const ctx = { entity: "execution", id: input.id };
      let res: { rows: (AgentWorkflowExecution & { fresh: boolean })[] };
      if (cap === 0) {
        res = await guard(ctx, () => pool.query<AgentWorkflowExecution & { fresh: boolean }>({ ...ADMIT, values }));
      } else {
        // The lock goes with BEGIN, in one round trip; its keys are integers computed here, not text from outside.
        res = await guard(ctx, () => inTransaction(pool,
          (client) => client.query<AgentWorkflowExecution & { fresh: boolean }>({ ...ADMIT_CAPPED, values: [...values, cap] }),
          `BEGIN; SELECT pg_advisory_xact_lock(${admissionLock}, ${lockKey(tenantId)})`));
      }
      const raw = res.rows[0];
      if (!raw) return { outcome: "missing", row: null };
      const { fresh, ...rest } = raw;
      const row = toExecution(rest);
      if (row.status === "running" || row.status === "paused") return { outcome: fresh ? "admitted" : "started", row };
      if (row.status !== "queued") return { outcome: "finished", row };
      // Still queued: the cap turned it away (its checkpoint may just have been kept), or, without
      // a cap, its status changed between the statement's snapshot and its update.
      return { outcome: cap > 0 ? "busy" : "changed", row };
    },

    async fenceJournal(id, tenantId, room) {
      requireTenantId(tenantId);
      if (!isDbId(id)) throw StoreNotFound("execution", String(id));
      const gap = optionalInt("room", room, 1);
      if (gap == null) throw StoreInvalidInput("room is required");
      const floor = await guard({ entity: "execution", id }, () => inTransaction(pool, async (client) => {
        if ((await client.query({ ...FENCE_LOCK, values: [id, tenantId] })).rowCount === 0) return null;
        return (await client.query<{ journalFloor: number }>({ ...FENCE, values: [id, gap] })).rows[0]!.journalFloor;
      }));
      if (floor === null) throw StoreNotFound("execution", id);
      return floor;
    },

    async journalFloor(id, tenantId) {
      requireTenantId(tenantId);
      if (!isDbId(id)) throw StoreNotFound("execution", String(id));
      const res = await guard({ entity: "execution", id }, () => pool.query<{ journalFloor: number | null }>({ ...FLOOR, values: [id, tenantId] }));
      const row = res.rows[0];
      if (!row) throw StoreNotFound("execution", id);
      return row.journalFloor;
    },

    async cancelQueued(id, tenantId, at, reason) {
      requireTenantId(tenantId);
      if (!isDbId(id)) return null;
      const when = optionalDate("at", at);
      if (!when) throw StoreInvalidInput("at is required");
      return one({ entity: "execution", id }, CANCEL_QUEUED, [id, tenantId, when.toISOString(), reason || "cancelled"]);
    },

    async listStartable(query) {
      if (typeof query !== "object" || query === null) throw StoreInvalidInput("query must be an object");
      const tenantId = requireTenantId(query.tenantId);
      const cap = optionalInt("cap", query.cap, 0) ?? 0;
      const { take } = page({ limit: query.limit ?? 100 });
      const idleMs = optionalInt("idleMs", query.idleMs, 0) ?? 0;
      const res = await guard({ entity: "execution" }, () =>
        pool.query<AgentWorkflowExecution>(cap === 0 ? { ...STARTABLE, values: [tenantId, take, idleMs] } : { ...STARTABLE_CAPPED, values: [tenantId, take, idleMs, cap] }),
      );
      return res.rows.map(toExecution);
    },

    pruneFinished(opts) {
      return runPruneBatch<{ ran: boolean; deleted: number; runs: number }>(pool, "execution", PRUNE_FINISHED, pruneLock, opts);
    },

    async queuedTenants(idleMs = 0) {
      const idle = optionalInt("idleMs", idleMs, 0) ?? 0;
      const res = await guard({ entity: "execution" }, () => pool.query<{ tenantId: string }>({ ...QUEUED_TENANTS, values: [idle] }));
      return res.rows.map((r) => r.tenantId);
    },

    async get(tenantId, id) {
      requireTenantId(tenantId);
      if (!isDbId(id)) return null;
      return one({ entity: "execution", id }, BY_TENANT_ID, [id, tenantId]);
    },

    async getById(id) {
      if (!isDbId(id)) return null;
      return one({ entity: "execution", id }, BY_ID, [id]);
    },

    async list(tenantId, opts = {}) {
      requireTenantId(tenantId);
      const { take, skip } = page(opts);
      const where: Prisma.AgentWorkflowExecutionWhereInput = { tenantId };
      if (opts.workflowId !== undefined) {
        if (!isDbId(opts.workflowId)) return [];
        where.agentWorkflowId = opts.workflowId;
      }
      if (opts.status !== undefined) where.status = oneOf("status", opts.status, EXECUTION_STATUSES);
      const rows = await guard({ entity: "execution" }, () =>
        prisma.agentWorkflowExecution.findMany({ where, orderBy: { id: "desc" }, take, skip }),
      );
      return rows.map(toExecution);
    },

    async update(id, patch) {
      if (!isDbId(id)) throw StoreNotFound("execution", String(id));
      const data = executionPatch(patch);
      const row = await guard({ entity: "execution", id }, () => prisma.agentWorkflowExecution.update({ where: { id }, data }));
      return toExecution(row);
    },

    async delete(tenantId, id) {
      requireTenantId(tenantId);
      if (!isDbId(id)) return false;
      const res = await guard({ entity: "execution", id }, () => pool.query<{ deleted: number }>({ ...DELETE, values: [id, tenantId] }));
      return res.rows[0]!.deleted > 0;
    },
  };
  return repo;
}

interface NormalizedEntry {
  tenantId: string;
  executionId: number;
  nodeId: string;
  attempt: number;
  changes: Prisma.AgentWorkflowNodeExecutionUncheckedUpdateInput;
  /** The entry as sent to SQL by recordMany: only the keys the entry carries, dates as ISO text. */
  doc: Record<string, JsonValue>;
}

const JSON_FIELDS = ["input", "output", "toolCalls", "tokenUsage"] as const;

function normalizeEntry(entry: unknown): NormalizedEntry {
  if (typeof entry !== "object" || entry === null) throw StoreInvalidInput("entry must be an object");
  const e = entry as NodeExecutionEntry;
  const tenantId = requireTenantId(e.tenantId);
  if (!isDbId(e.executionId)) throw StoreNotFound("execution", String(e.executionId));
  const executionId = e.executionId;
  const nodeId = requireText("nodeId", e.nodeId, { max: STATE_MAX });
  const nodeType = requireText("nodeType", e.nodeType, { max: STATE_MAX });
  const attempt = optionalInt("attempt", e.attempt, 1);
  if (attempt == null) throw StoreInvalidInput("attempt is required");
  const status = requireText("status", e.status, { max: 50 });

  const changes: Prisma.AgentWorkflowNodeExecutionUncheckedUpdateInput = { status, nodeType };
  const doc: Record<string, JsonValue> = { tenantId, executionId, nodeId, nodeType, attempt, status };
  for (const f of JSON_FIELDS) {
    if (e[f] === undefined) continue;
    changes[f] = optionalJson(f, e[f]);
    doc[f] = e[f] ?? null;
  }
  if (e.error !== undefined) doc.error = changes.error = optionalText("error", e.error, ERROR_MAX) ?? null;
  if (e.errorCode !== undefined) doc.errorCode = changes.errorCode = optionalText("errorCode", e.errorCode, STATE_MAX) ?? null;
  if (e.retryable !== undefined) doc.retryable = changes.retryable = optionalBool("retryable", e.retryable) ?? null;
  if (e.stepVersion !== undefined) doc.stepVersion = changes.stepVersion = optionalInt("stepVersion", e.stepVersion, 0) ?? null;
  // Only a beginning writes an attempt's row running or paused: its step began the attempt.
  if (typeof doc.stepVersion === "number" && (status === "running" || status === "paused")) doc.beganStep = changes.beganStep = doc.stepVersion;
  if (e.durationMs !== undefined) doc.durationMs = changes.durationMs = optionalInt("durationMs", e.durationMs) ?? null;
  if (e.completedAt !== undefined) {
    const completedAt = optionalDate("completedAt", e.completedAt) ?? null;
    changes.completedAt = completedAt;
    doc.completedAt = completedAt === null ? null : completedAt.toISOString();
  }
  const startedAt = optionalDate("startedAt", e.startedAt);
  if (startedAt) {
    changes.startedAt = startedAt;
    doc.startedAt = startedAt.toISOString();
  }
  return { tenantId, executionId, nodeId, attempt, changes, doc };
}

/**
 * The statement behind {@link NodeExecutionsRepo.recordSteps} for a schema: `$1` the journal
 * entries, `$2` the execution-row patches (JSON arrays). `patches: false` gives the statement
 * for a batch of entries alone (most steps change no execution row): `$1` only, and none of
 * the patch's plan, which Postgres would set up on every write even with nothing to patch.
 * Exported for the test of its plan.
 */
export function recordStepsSql(schema: string, opts: { patches?: boolean } = {}): string {
  const patches = opts.patches ?? true;
  // One statement, so the tenant checks, the journal upserts and the execution updates all
  // happen or none does.
  const journal = `${quoteIdent(schema)}."agent_workflow_node_executions"`;
  const runs = `${quoteIdent(schema)}."agent_workflow_executions"`;
  // The rows of one attempt may be written by statements that land in any order (the
  // executor overlaps an execution's statements), so an upsert merges by step: a write of
  // the same or a later step (stepVersion) than the row's sets the status and every column
  // it carries ("carries" looks in the batch itself) and keeps the rest; a write of an
  // earlier step only fills columns the row does not have yet. Within an attempt a column,
  // once set, is only ever set again to the same kind of value (no step clears one), so the
  // row comes out the same whichever write lands first.
  const NEWER = `(t."stepVersion" IS NULL OR EXCLUDED."stepVersion" IS NULL OR t."stepVersion" <= EXCLUDED."stepVersion")`;
  const MERGED = ["input", "output", "toolCalls", "tokenUsage", "error", "errorCode", "retryable", "stepVersion", "beganStep", "durationMs", "startedAt", "completedAt"];
  const mergeCol = (column: string): string =>
    `CASE WHEN ${NEWER} THEN CASE WHEN s.doc ? '${column}' THEN EXCLUDED."${column}" ELSE t."${column}" END ELSE COALESCE(t."${column}", EXCLUDED."${column}") END`;
  const laterCol = (column: string): string => `"${column}" = CASE WHEN ${NEWER} THEN EXCLUDED."${column}" ELSE t."${column}" END`;
  // A write of an earlier step that has nothing to fill leaves the row untouched (and uncounted).
  const fills = MERGED.map((c) => `(t."${c}" IS NULL AND EXCLUDED."${c}" IS NOT NULL)`).join(" OR ");
  const patchCol = (column: string, value: string): string => `"${column}" = CASE WHEN p.doc ? '${column}' THEN ${value} ELSE x."${column}" END`;
  const written = patches
    ? `SELECT (doc->>'executionId')::int AS id, doc->>'tenantId' AS tenant FROM src
                     UNION SELECT (doc->>'id')::int, doc->>'tenantId' FROM pat`
    : `SELECT DISTINCT (doc->>'executionId')::int AS id, doc->>'tenantId' AS tenant FROM src`;
  // The step number of every record of the batch, by execution.
  const numbered = patches
    ? `SELECT (doc->>'executionId')::int AS id, (doc->>'stepVersion')::int AS step FROM src
                     UNION ALL SELECT (doc->>'id')::int, (doc->>'stepVersion')::int FROM pat`
    : `SELECT (doc->>'executionId')::int AS id, (doc->>'stepVersion')::int AS step FROM src`;
  const upd = `upd AS (
      UPDATE ${runs} AS x SET
        ${[
          patchCol("status", "p.doc->>'status'"),
          patchCol("currentState", "p.doc->>'currentState'"),
          patchCol("context", "p.doc->'context'"),
          patchCol("tokenUsage", "p.doc->'tokenUsage'"),
          patchCol("subRunPauses", "p.doc->'subRunPauses'"),
          patchCol("output", "NULLIF(p.doc->'output', 'null'::jsonb)"),
          patchCol("checkpoint", "NULLIF(p.doc->'checkpoint', 'null'::jsonb)"),
          patchCol("error", "p.doc->>'error'"),
          patchCol("startedAt", "(p.doc->>'startedAt')::timestamptz"),
          patchCol("completedAt", "(p.doc->>'completedAt')::timestamptz"),
          patchCol("deadlineAt", "(p.doc->>'deadlineAt')::timestamptz"),
        ].join(",\n        ")},
        "patchedStep" = COALESCE((p.doc->>'stepVersion')::int, x."patchedStep"),
        "updatedAt" = CURRENT_TIMESTAMP
      FROM pat p
      -- The ids as an array too, so the rows are found by key, not by hashing the table.
      WHERE x."id" = ANY (ARRAY(SELECT (doc->>'id')::int FROM pat)) AND x."id" = (p.doc->>'id')::int AND x."tenantId" = p.doc->>'tenantId'
        AND NOT EXISTS (SELECT 1 FROM foreign_rows) AND (SELECT floor FROM fence) IS NULL
        -- A patch of an earlier step than the journal's latest, or than the patch that last
        -- wrote the row (a step that writes no journal row: a pause in a sub-run), would undo
        -- them: another executor's later records landed first.
        AND (p.doc->'stepVersion' IS NULL OR (
          (x."patchedStep" IS NULL OR x."patchedStep" <= (p.doc->>'stepVersion')::int) AND NOT EXISTS (
          SELECT 1 FROM ${journal} j WHERE j."executionId" = x."id" AND j."stepVersion" > (p.doc->>'stepVersion')::int)))
      RETURNING 1
    )`;
  return `
    -- Ids are drawn in the entries' order (an insert takes one even when it updates), so rows
    -- begun in one step list in the order the step began them; the rows are then written in
    -- (execution, node, attempt) order, the same in every statement, so statements writing
    -- rows of one execution at the same time take the locks in one order and never deadlock.
    WITH src AS (SELECT e AS doc, nextval('${quoteIdent(schema)}."agent_workflow_node_executions_id_seq"'::regclass)::int AS id FROM jsonb_array_elements($1::jsonb) AS e),${patches ? `
    pat AS (SELECT e AS doc FROM jsonb_array_elements($2::jsonb) AS e),` : ""}
    w AS (${written}),
    -- The executions written, locked FOR KEY SHARE (as the journal rows' foreign key locks them
    -- anyway: statements writing one execution do not wait for each other) until the statement
    -- commits, with their journal floors as they are once no rebuild's fence holds the row
    -- (executionsRepo.fenceJournal). Each looked up by its key, whatever the planner makes of
    -- the table's size: a join's plan, or an = ANY of the ids, made once per connection while
    -- the table was small, read the whole table on every write.
    locked AS MATERIALIZED (
      SELECT r.* FROM w, LATERAL (SELECT x."id", x."tenantId", x."journalFloor" FROM ${runs} x WHERE x."id" = w.id FOR KEY SHARE) r
    ),
    foreign_rows AS (
      SELECT 1 FROM w WHERE (SELECT r."tenantId" FROM locked r WHERE r."id" = w.id) IS DISTINCT FROM w.tenant
    ),
    -- A record numbered below its execution's floor belongs to a checkpoint that was lost and
    -- rebuilt from the journal after it was taken: the batch is refused whole (its events must
    -- never go out). An aggregate over every row, so every row is locked before anything is written.
    fence AS (
      SELECT max(r."journalFloor") FILTER (WHERE below) AS floor, min(r."id") FILTER (WHERE below) AS id
      FROM locked r, LATERAL (SELECT EXISTS (SELECT 1 FROM (${numbered}) n WHERE n.id = r."id" AND n.step < r."journalFloor") AS below) b
    ),
    ins AS (
      INSERT INTO ${journal} AS t ("id", "tenantId", "executionId", "nodeId", "nodeType", "attempt", "status", "input", "output", "toolCalls", "tokenUsage",
        "error", "errorCode", "retryable", "stepVersion", "beganStep", "durationMs", "startedAt", "completedAt")
      SELECT id, doc->>'tenantId', (doc->>'executionId')::int, doc->>'nodeId', doc->>'nodeType', (doc->>'attempt')::int, doc->>'status',
        NULLIF(doc->'input', 'null'::jsonb), NULLIF(doc->'output', 'null'::jsonb), NULLIF(doc->'toolCalls', 'null'::jsonb), NULLIF(doc->'tokenUsage', 'null'::jsonb),
        doc->>'error', doc->>'errorCode', (doc->>'retryable')::boolean, (doc->>'stepVersion')::int, (doc->>'beganStep')::int, (doc->>'durationMs')::int,
        COALESCE((doc->>'startedAt')::timestamptz, CURRENT_TIMESTAMP), (doc->>'completedAt')::timestamptz
      FROM src
      WHERE NOT EXISTS (SELECT 1 FROM foreign_rows) AND (SELECT floor FROM fence) IS NULL
      ORDER BY (doc->>'executionId')::int, doc->>'nodeId', (doc->>'attempt')::int
      ON CONFLICT ("executionId", "nodeId", "attempt") DO UPDATE SET
        ${[laterCol("status"), laterCol("nodeType")].join(",\n        ")},
        -- One look into the batch for the entry's own doc serves every merged column (a
        -- subquery per column cost Postgres about a third of the statement).
        (${MERGED.map((c) => `"${c}"`).join(", ")}) = (SELECT ${MERGED.map(mergeCol).join(",\n          ")}
          FROM src s WHERE (s.doc->>'executionId')::int = EXCLUDED."executionId" AND s.doc->>'nodeId' = EXCLUDED."nodeId" AND (s.doc->>'attempt')::int = EXCLUDED."attempt")
      WHERE ${NEWER} OR ${fills}
      RETURNING 1
    )${patches ? `,
    ${upd}` : ""}
    SELECT (SELECT count(*) FROM ins)::int AS journaled, ${patches ? "(SELECT count(*) FROM upd)::int" : "0"} AS updated, EXISTS (SELECT 1 FROM foreign_rows) AS "foreign",
      (SELECT floor FROM fence) AS "fenced", (SELECT id FROM fence) AS "fencedId"`;
}

/** Size classes of {@link planGeneration}: ids up to 2^20, then one class for all larger ones. */
const PLAN_GENERATIONS = 21;

/**
 * The size class of an execution id, ⌊log2 id⌋ capped: the name under which the statement
 * that patches execution rows is prepared when it patches that id. Postgres plans a named
 * statement once per connection and keeps the plan until the table's statistics change. On
 * a table that is never analyzed (autovacuum off, as on some machines; a new deployment until
 * autovacuum first runs) they never change, so a plan made while the table was a few pages
 * (a sequential scan, rightly) was kept as it grew, and every start and end of an execution
 * read the whole table. Ids grow with the table, so each doubling gets a plan of its own,
 * made for the table as it is then: past about 3,000 rows that plan finds the rows by key
 * (`steps-plan.int.test.ts`). A connection plans the statement at most once per class.
 */
function planGeneration(id: number): number {
  return Math.min(Math.floor(Math.log2(Math.max(id, 1))), PLAN_GENERATIONS - 1);
}

export function nodeExecutionsRepo(prisma: PrismaClient, schema: string, pool: Pool): NodeExecutionsRepo {
  const orderBy: Prisma.AgentWorkflowNodeExecutionOrderByWithRelationInput[] = [{ startedAt: "asc" }, { id: "asc" }];
  // The hot path of the executor, so plain SQL on the pool rather than Prisma, whose
  // per-query work costs more than the statement.
  // (Named: the plan of this statement cost about twice its execution.)
  const STEPS = namedStatement("record_steps", recordStepsSql(schema));
  // The statement that patches execution rows, under a name per size class of the patched ids
  // (see planGeneration): a new class is planned afresh on each connection.
  const stepsOfClass = Array.from({ length: PLAN_GENERATIONS }, (_, g) => ({ name: `${STEPS.name}_g${g}`, text: STEPS.text }));
  const ENTRIES = namedStatement("record_entries", recordStepsSql(schema, { patches: false }));

  async function writeSteps(batch: StepRecords): Promise<{ journaled: number; updated: number }> {
    // ON CONFLICT DO UPDATE and UPDATE ... FROM touch a row once per statement: merge writes
    // of one attempt, and patches of one execution, in order.
    const merged = new Map<string, NormalizedEntry>();
    for (const raw of batch.entries) {
      const n = normalizeEntry(raw);
      const key = `${n.executionId}\u0000${n.nodeId}\u0000${n.attempt}`;
      const prev = merged.get(key);
      if (prev) Object.assign(prev.doc, n.doc);
      else merged.set(key, n);
    }
    const patches = new Map<number, Record<string, JsonValue>>();
    for (const e of batch.executions) {
      const doc = executionPatchDoc(e?.id, e?.tenantId, e?.patch);
      if (e.stepVersion !== undefined) {
        if (!Number.isSafeInteger(e.stepVersion)) throw StoreInvalidInput(`stepVersion of the patch of execution ${e.id} must be an integer`);
        doc.stepVersion = e.stepVersion;
      }
      const id = e.id;
      const prev = patches.get(id);
      if (prev && prev.tenantId !== doc.tenantId) throw StoreNotFound("execution", `${id} (of the patches' tenants)`);
      if (prev) Object.assign(prev, doc);
      else patches.set(id, doc);
    }
    if (merged.size === 0 && patches.size === 0) return { journaled: 0, updated: 0 };
    const docs = [...merged.values()].map((n) => n.doc);
    const first = docs[0]?.executionId ?? [...patches.keys()][0]!;
    const res = await guard({ entity: "execution", id: first as number }, () =>
      pool.query<{ journaled: number; updated: number; foreign: boolean; fenced: number | null; fencedId: number | null }>(
        patches.size === 0 ? { ...ENTRIES, values: [JSON.stringify(docs)] } : { ...stepsOfClass[planGeneration(Math.max(...patches.keys()))]!, values: [JSON.stringify(docs), JSON.stringify([...patches.values()])] },
      ),
    );
    const row = res.rows[0];
    if (!row || row.foreign) {
      const ids = [...new Set([...[...merged.values()].map((n) => n.executionId), ...patches.keys()])].join(", ");
      throw StoreNotFound("execution", `${ids} (of the entries' tenants)`);
    }
    if (row.fenced !== null) throw StoreFenced(row.fencedId!, row.fenced, { details: { executionId: row.fencedId, floor: row.fenced } });
    return { journaled: row.journaled, updated: row.updated };
  }

  return {
    async record(entry) {
      const { tenantId, executionId, nodeId, attempt, changes } = normalizeEntry(entry);

      // The journal row of an attempt can only belong to its execution's tenant (composite
      // foreign key), so checking the execution once makes the upsert tenant-safe.
      const owner = await guard({ entity: "execution", id: executionId }, () =>
        prisma.agentWorkflowExecution.findFirst({ where: { id: executionId, tenantId }, select: { id: true } }),
      );
      if (!owner) throw StoreNotFound("execution", executionId);

      const create = { ...changes, tenantId, executionId, nodeId, attempt } as Prisma.AgentWorkflowNodeExecutionUncheckedCreateInput;
      const upsert = () =>
        prisma.agentWorkflowNodeExecution.upsert({
          where: { executionId_nodeId_attempt: { executionId, nodeId, attempt } },
          create,
          update: changes,
        });
      try {
        return toNodeExecution(await upsert());
      } catch (err) {
        // Two first writes of the same attempt raced; the loser's write becomes an update.
        const mapped = toStoreError(err, { entity: "execution", id: executionId });
        if (mapped.code !== "BATON_STORE_CONFLICT") throw mapped;
        return toNodeExecution(await guard({ entity: "execution", id: executionId }, upsert));
      }
    },

    async recordMany(entries) {
      if (!Array.isArray(entries)) throw StoreInvalidInput("entries must be an array");
      return (await writeSteps({ entries, executions: [] })).journaled;
    },

    recordSteps(batch) {
      if (typeof batch !== "object" || batch === null || !Array.isArray(batch.entries) || !Array.isArray(batch.executions)) {
        throw StoreInvalidInput("batch must be { entries: [], executions: [] }");
      }
      return writeSteps(batch);
    },

    async list(tenantId, executionId) {
      requireTenantId(tenantId);
      if (!isDbId(executionId)) return [];
      const rows = await guard({ entity: "execution", id: executionId }, () =>
        prisma.agentWorkflowNodeExecution.findMany({ where: { executionId, tenantId }, orderBy }),
      );
      return rows.map(toNodeExecution);
    },

    async listById(executionId) {
      if (!isDbId(executionId)) return [];
      const rows = await guard({ entity: "execution", id: executionId }, () =>
        prisma.agentWorkflowNodeExecution.findMany({ where: { executionId }, orderBy }),
      );
      return rows.map(toNodeExecution);
    },

    async latest(executionId, nodeId) {
      if (!isDbId(executionId)) return null;
      const row = await guard({ entity: "execution", id: executionId }, () =>
        prisma.agentWorkflowNodeExecution.findFirst({ where: { executionId, nodeId }, orderBy: { attempt: "desc" } }),
      );
      return row ? toNodeExecution(row) : null;
    },

    async listForReplay(executionId) {
      if (!isDbId(executionId)) return [];
      const rows = await guard({ entity: "execution", id: executionId }, () =>
        prisma.agentWorkflowNodeExecution.findMany({
          where: { executionId },
          // Within a step, the order its commands were applied in (a batch of results stamps
          // each after the one before): rows still running (no completedAt) first, by start.
          orderBy: [{ stepVersion: { sort: "asc", nulls: "last" } }, { completedAt: { sort: "asc", nulls: "first" } }, { id: "asc" }],
        }),
      );
      return rows.map(toNodeExecution);
    },
  };
}
