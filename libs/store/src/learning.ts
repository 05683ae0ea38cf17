import type { Pool } from "pg";
import type { Prisma, PrismaClient } from "./generated/client.ts";
import { guard } from "./db-errors.ts";
import { StoreInvalidInput, StoreNotFound } from "./errors.ts";
import { toLearnedSequence } from "./records.ts";
import type { LearnedSequenceInput, LearningRepo } from "./types.ts";
import { isDbId, jsonIn, namedStatement, optionalInt, page, quoteIdent, requireId, requireJson, requireTenantId } from "./values.ts";

export function learningRepo(prisma: PrismaClient, schema: string, pool: Pool): LearningRepo {
  const q = quoteIdent(schema);
  // Once per finished execution: plain SQL on the pool, one round trip instead of Prisma's
  // three (journal, execution, insert), each of which cost more in Prisma than in Postgres.
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
    )
    SELECT calls.tools, EXISTS (SELECT 1 FROM run) AS found FROM calls`;
  const FROM_JOURNAL = namedStatement("learned_from_journal", FROM_JOURNAL_SQL);
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
      const data: Prisma.LearnedSequenceCreateManyInput = {
        tenantId,
        executionId: e.executionId,
        agentId: optionalInt("agentId", e.agentId) ?? null,
        sessionId: optionalInt("sessionId", e.sessionId) ?? null,
        tools: jsonIn(requireJson("tools", e.tools)),
        successful: e.successful,
      };
      // ON CONFLICT DO NOTHING on executionId: redelivered events record once.
      await guard({ entity: "tenant", id: tenantId }, () => prisma.learnedSequence.createMany({ data: [data], skipDuplicates: true }));
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
  };
}
