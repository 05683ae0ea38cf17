import type { Pool } from "pg";
import type { Prisma, PrismaClient } from "./generated/client.ts";
import { guard } from "./db-errors.ts";
import { StoreInvalidInput, StoreNotFound } from "./errors.ts";
import { toLearnedSequence } from "./records.ts";
import type { LearnedSequenceInput, LearningRepo } from "./types.ts";
import { isDbId, lockKey, namedStatement, optionalInt, page, quoteIdent, requireId, requireJson, requireTenantId, runPruneBatch } from "./values.ts";

/**
 * A blob reference at any depth of a JSON value, as jsonpath: `{ "$ref": "blob:<hex>" }`
 * (lax mode: missing keys and non-objects are skipped; arrays unwrapped, so one reference can
 * come twice — callers take distinct values).
 */
const BLOB_REF_JSONPATH = 'lax $.**."$ref" ? (@ like_regex "^blob:[0-9a-f]{64}$")';

/**
 * The CTEs that record the blobs a just-inserted learned sequence refers to (ADR 008, "Learned
 * sequences"), appended to a statement whose CTE `ins` returns the inserted rows' "id",
 * "tenantId" and "tools": the tenant's blobs named by a `$ref` anywhere in the tools are locked
 * in hash order (as blob puts and uses lock them: no deadlock), marked used now, and get a
 * `learned_blob_uses` row; references to blobs the tenant does not have are left out. Locking
 * and touching the row is what keeps a concurrent pruner from deleting a blob that just got a
 * use (the same argument as `blobs.use`). A sequence not inserted (a repeat) records nothing.
 * `tenant` is the statement's parameter holding the sequence's tenant: the blobs are looked up
 * by key, `("tenantId", "hash") = ($tenant, any of the hashes)`, as `blobs.use` does. A
 * semi-join with the references let the planner read the whole blobs table on every finished
 * run (steps-plan.int.test.ts).
 */
function recordBlobUses(q: string, tenant: string): string {
  return `refs AS (
      SELECT DISTINCT ins."tenantId", ins."id", substr(r.ref #>> '{}', 6) AS "hash"
        FROM ins CROSS JOIN LATERAL jsonb_path_query(ins."tools", '${BLOB_REF_JSONPATH}') r(ref)
    ),
    held AS (
      SELECT b."id" FROM ${q}."blobs" b
       WHERE b."tenantId" = ${tenant} AND b."hash" = ANY (ARRAY(SELECT "hash" FROM refs)::varchar[])
       ORDER BY b."hash" FOR UPDATE OF b
    ),
    touched AS (
      UPDATE ${q}."blobs" b SET "usedAt" = CURRENT_TIMESTAMP FROM held WHERE b."id" = held."id" RETURNING b."tenantId", b."hash"
    ),
    used AS (
      INSERT INTO ${q}."learned_blob_uses" ("tenantId", "hash", "sequenceId")
      SELECT refs."tenantId", refs."hash", refs."id" FROM refs JOIN touched ON touched."tenantId" = refs."tenantId" AND touched."hash" = refs."hash"
      ON CONFLICT DO NOTHING
    )`;
}

export function learningRepo(prisma: PrismaClient, schema: string, pool: Pool): LearningRepo {
  const q = quoteIdent(schema);
  // Once per finished execution: plain SQL on the pool, one round trip instead of Prisma's
  // three (journal, execution, insert), each of which cost more in Prisma than in Postgres.
  // Journal inputs above the large-value threshold are blob references: the sequence records
  // its uses of their blobs in the same statement, since it outlives the execution.
  const FROM_JOURNAL_SQL = `
    WITH calls AS (
      SELECT coalesce(jsonb_agg(jsonb_build_object(
               'nodeId', n."nodeId",
               'tool', coalesce(nullif(CASE WHEN jsonb_typeof(n."toolCalls") = 'array' THEN n."toolCalls"->0->'tool' END, 'null'::jsonb), '"unknown"'::jsonb),
               'params', coalesce(n."input", 'null'::jsonb))
             ORDER BY n."startedAt", n."id"), '[]'::jsonb) AS tools
      FROM ${q}."agent_workflow_node_executions" n
      WHERE n."executionId" = $1 AND n."tenantId" = $2 AND n."nodeType" = 'tool' AND n."status" = 'completed'
    ),
    run AS (SELECT "agentId", "sessionId" FROM ${q}."agent_workflow_executions" WHERE "id" = $1 AND "tenantId" = $2),
    ins AS (
      INSERT INTO ${q}."learned_sequences" ("tenantId", "executionId", "agentId", "sessionId", "tools", "successful")
      SELECT $2, $1, run."agentId", run."sessionId", calls.tools, $3 FROM calls, run
      ON CONFLICT ("executionId") DO NOTHING
      RETURNING "id", "tenantId", "tools"
    ),
    ${recordBlobUses(q, "$2")}
    SELECT calls.tools, EXISTS (SELECT 1 FROM run) AS found FROM calls`;
  const FROM_JOURNAL = namedStatement("learned_from_journal", FROM_JOURNAL_SQL);
  // A sequence given whole, with its uses of the blobs it refers to; a repeat writes nothing.
  const RECORD = namedStatement("learned_record", `WITH ins AS (
      INSERT INTO ${q}."learned_sequences" ("tenantId", "executionId", "agentId", "sessionId", "tools", "successful")
      VALUES ($1, $2, $3, $4, $5::jsonb, $6)
      ON CONFLICT ("executionId") DO NOTHING
      RETURNING "id", "tenantId", "tools"
    ),
    ${recordBlobUses(q, "$1")}
    SELECT 1`);
  // One batch of the retention (LearningRepo.pruneOlder): the oldest sequences through the
  // "createdAt" index, locked (SKIP LOCKED), the blobs they use touched (locked in key order, as
  // blob puts and uses lock them) before their uses cascade away, so a blob's grace period counts
  // from the deletion.
  const PRUNE = namedStatement("learned_prune", `WITH lock AS (SELECT pg_try_advisory_xact_lock($3::int, $4::int) AS ok),
    batch AS (
      SELECT s."id" FROM ${q}."learned_sequences" s
       WHERE s."createdAt" < $1::timestamptz AND (SELECT ok FROM lock)
       ORDER BY s."createdAt", s."id" LIMIT $2
       FOR UPDATE OF s SKIP LOCKED
    ),
    held AS (
      SELECT b."id" FROM ${q}."blobs" b
        JOIN (SELECT DISTINCT u."tenantId", u."hash" FROM ${q}."learned_blob_uses" u WHERE u."sequenceId" IN (SELECT "id" FROM batch)) h
          ON b."tenantId" = h."tenantId" AND b."hash" = h."hash"
       ORDER BY b."tenantId", b."hash" FOR UPDATE OF b
    ),
    touched AS (UPDATE ${q}."blobs" b SET "usedAt" = CURRENT_TIMESTAMP FROM held WHERE b."id" = held."id"),
    gone AS (DELETE FROM ${q}."learned_sequences" d USING batch x WHERE d."id" = x."id" RETURNING d."id")
    SELECT (SELECT ok FROM lock) AS "ran", (SELECT count(*)::int FROM gone) AS "deleted"`);
  const pruneLock = [lockKey("baton:learned-prune"), lockKey(`baton:learned-prune:${schema}`)];
  return {
    async recordFromJournal(entry) {
      if (typeof entry !== "object" || entry === null) throw StoreInvalidInput("entry must be an object");
      const tenantId = requireTenantId(entry.tenantId);
      if (!isDbId(entry.executionId)) throw StoreNotFound("execution", String(entry.executionId));
      if (typeof entry.successful !== "boolean") throw StoreInvalidInput("successful must be a boolean");
      const res = await guard({ entity: "tenant", id: tenantId }, () =>
        pool.query<{ tools: { tool: unknown }[]; found: boolean }>({ ...FROM_JOURNAL, values: [entry.executionId, tenantId, entry.successful] }),
      );
      if (!res.rows[0]?.found) throw StoreNotFound("execution", String(entry.executionId));
      return { tools: (res.rows[0]?.tools ?? []).map((t) => (typeof t.tool === "string" ? t.tool : JSON.stringify(t.tool))) };
    },
    async recordSequence(entry) {
      if (typeof entry !== "object" || entry === null) throw StoreInvalidInput("entry must be an object");
      const e: LearnedSequenceInput = entry;
      const tenantId = requireTenantId(e.tenantId);
      if (!isDbId(e.executionId)) throw StoreNotFound("execution", String(e.executionId));
      if (typeof e.successful !== "boolean") throw StoreInvalidInput("successful must be a boolean");
      const agentId = optionalInt("agentId", e.agentId) ?? null;
      const sessionId = optionalInt("sessionId", e.sessionId) ?? null;
      const tools = JSON.stringify(requireJson("tools", e.tools));
      // ON CONFLICT DO NOTHING on executionId: redelivered events record once.
      await guard({ entity: "tenant", id: tenantId }, () =>
        pool.query({ ...RECORD, values: [tenantId, e.executionId, agentId, sessionId, tools, e.successful] }),
      );
    },

    async list(tenantId, opts = {}) {
      requireTenantId(tenantId);
      const { take, skip } = page(opts);
      const where: Prisma.LearnedSequenceWhereInput = { tenantId };
      if (opts.agentId !== undefined) where.agentId = requireId("agentId", opts.agentId);
      if (opts.successful !== undefined) where.successful = opts.successful;
      const rows = await guard({ entity: "learned sequence" }, () =>
        prisma.learnedSequence.findMany({ where, orderBy: { id: "desc" }, take, skip }),
      );
      return rows.map(toLearnedSequence);
    },

    pruneOlder(opts) {
      return runPruneBatch<{ ran: boolean; deleted: number }>(pool, "learned sequence", PRUNE, pruneLock, opts);
    },
  };
}
