import type { Prisma, PrismaClient } from "./generated/client.ts";
import { guard } from "./db-errors.ts";
import { StoreInvalidInput, StoreNotFound } from "./errors.ts";
import { toLearnedSequence } from "./records.ts";
import type { LearnedSequenceInput, LearningRepo } from "./types.ts";
import { isDbId, jsonIn, optionalInt, page, requireId, requireJson, requireTenantId } from "./values.ts";

export function learningRepo(prisma: PrismaClient): LearningRepo {
  return {
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
