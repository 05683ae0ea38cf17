import { Prisma, type AgentMemory, type PrismaClient } from "./generated/client.ts";
import { guard } from "./db-errors.ts";
import { StoreInvalidInput } from "./errors.ts";
import { toMemory } from "./records.ts";
import type { MemoryCreateInput, MemoryRepo, MemorySearchHit } from "./types.ts";
import { isDbId, jsonIn, optionalInt, page, quoteIdent, requireId, requireJsonObject, requireTenantId, requireText } from "./values.ts";

const KEY_MAX = 500;
const CONTENT_MAX = 1_000_000;
const QUERY_MAX = 1_000;
const MAX_TERMS = 32;

/** Words of a query (letters and digits of any script), lowercased, deduplicated. */
export function queryTerms(query: string): string[] {
  const words = query.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [];
  return [...new Set(words)].slice(0, MAX_TERMS);
}

function likePattern(query: string): string {
  return `%${query.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}

export function memoryRepo(prisma: PrismaClient, schema: string): MemoryRepo {
  const table = Prisma.raw(`${quoteIdent(schema)}."agent_memory"`);
  return {
    async create(tenantId, entry) {
      requireTenantId(tenantId);
      if (typeof entry !== "object" || entry === null) throw StoreInvalidInput("memory entry must be an object");
      const e: MemoryCreateInput = entry;
      const data: Prisma.AgentMemoryUncheckedCreateInput = {
        tenantId,
        agentId: requireId("agentId", e.agentId),
        userId: optionalInt("userId", e.userId) ?? null,
        key: requireText("key", e.key, { max: KEY_MAX }),
        content: requireText("content", e.content, { max: CONTENT_MAX }),
        metadata: jsonIn(requireJsonObject("metadata", e.metadata ?? {})),
      };
      const row = await guard({ entity: "tenant", id: tenantId }, () => prisma.agentMemory.create({ data }));
      return toMemory(row);
    },

    async list(tenantId, filter = {}) {
      requireTenantId(tenantId);
      const { take, skip } = page(filter);
      const where: Prisma.AgentMemoryWhereInput = { tenantId };
      if (filter.agentId !== undefined) where.agentId = requireId("agentId", filter.agentId);
      if (filter.userId !== undefined) where.userId = optionalInt("userId", filter.userId) ?? null;
      const rows = await guard({ entity: "memory" }, () => prisma.agentMemory.findMany({ where, orderBy: { id: "desc" }, take, skip }));
      return rows.map(toMemory);
    },

    async get(tenantId, id) {
      requireTenantId(tenantId);
      if (!isDbId(id)) return null;
      const row = await guard({ entity: "memory", id }, () => prisma.agentMemory.findFirst({ where: { id, tenantId } }));
      return row ? toMemory(row) : null;
    },

    async delete(tenantId, id) {
      requireTenantId(tenantId);
      if (!isDbId(id)) return null;
      return guard({ entity: "memory", id }, async () => {
        const rows = await prisma.$queryRaw<AgentMemory[]>`
          DELETE FROM ${table} WHERE "id" = ${id} AND "tenantId" = ${tenantId} RETURNING *`;
        const row = rows[0];
        return row ? toMemory(row) : null;
      });
    },

    async search(tenantId, q) {
      requireTenantId(tenantId);
      if (typeof q !== "object" || q === null) throw StoreInvalidInput("query must be an object");
      const query = requireText("query", q.query, { max: QUERY_MAX });
      const { take } = page({ limit: q.limit ?? 10 }, 10, 100);
      const filters: Prisma.Sql[] = [Prisma.sql`m."tenantId" = ${tenantId}`];
      if (q.agentId !== undefined) filters.push(Prisma.sql`m."agentId" = ${requireId("agentId", q.agentId)}`);
      if (q.userId !== undefined) filters.push(Prisma.sql`m."userId" = ${requireId("userId", q.userId)}`);
      const terms = queryTerms(query);
      const pattern = likePattern(query.trim());
      const doc = Prisma.sql`to_tsvector('simple', m."key" || ' ' || m."content")`;
      // Any term matches (prefix match, OR), ranked by how many and how often; a literal
      // substring hit of the whole query in the key or content ranks higher still.
      const tsq = terms.length > 0 ? Prisma.sql`to_tsquery('simple', ${terms.map((t) => `${t}:*`).join(" | ")})` : null;
      const rank = tsq ? Prisma.sql`ts_rank(${doc}, ${tsq})` : Prisma.sql`0`;
      const textMatch = tsq ? Prisma.sql`${doc} @@ ${tsq} OR ` : Prisma.empty;
      const rows = await guard({ entity: "memory" }, () =>
        prisma.$queryRaw<(AgentMemory & { score: number })[]>`
          SELECT m.*, (${rank}
            + CASE WHEN m."key" ILIKE ${pattern} THEN 1.0 ELSE 0 END
            + CASE WHEN m."content" ILIKE ${pattern} THEN 0.5 ELSE 0 END)::float8 AS "score"
          FROM ${table} m
          WHERE ${Prisma.join(filters, " AND ")}
            AND (${textMatch}m."key" ILIKE ${pattern} OR m."content" ILIKE ${pattern})
          ORDER BY "score" DESC, m."updatedAt" DESC, m."id" DESC
          LIMIT ${take}`,
      );
      return rows.map((r): MemorySearchHit => ({ ...toMemory(r), score: Number(r.score) }));
    },
  };
}
