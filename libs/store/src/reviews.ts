import type { Prisma, PrismaClient } from "./generated/client.ts";
import { guard } from "./db-errors.ts";
import { StoreInvalidInput, StoreNotFound } from "./errors.ts";
import { toReview } from "./records.ts";
import type { ReviewCreateInput, ReviewsRepo } from "./types.ts";
import {
  isDbId,
  jsonIn,
  oneOf,
  optionalInt,
  page,
  requireJson,
  requireTenantId,
  requireText,
  REVIEW_DECISIONS,
  REVIEW_STATUSES,
} from "./values.ts";

export function reviewsRepo(prisma: PrismaClient): ReviewsRepo {
  return {
    async createPending(entry) {
      if (typeof entry !== "object" || entry === null) throw StoreInvalidInput("entry must be an object");
      const e: ReviewCreateInput = entry;
      const tenantId = requireTenantId(e.tenantId);
      if (!isDbId(e.executionId)) throw StoreNotFound("execution", String(e.executionId));
      const executionId = e.executionId;
      const nodeId = requireText("nodeId", e.nodeId, { max: 500 });
      const pauseSeq = optionalInt("pauseSeq", e.pauseSeq, 0);
      if (pauseSeq == null) throw StoreInvalidInput("pauseSeq is required");
      const reason = requireText("reason", e.reason, { max: 10_000, allowEmpty: true });
      const payload = jsonIn(requireJson("payload", e.payload));
      return guard({ entity: "execution", id: executionId }, async () => {
        // ON CONFLICT DO NOTHING: a redelivered pause finds the review its first delivery made.
        const created = await prisma.review.createManyAndReturn({
          data: [{ tenantId, executionId, nodeId, pauseSeq, reason, payload, status: "pending" }],
          skipDuplicates: true,
        });
        const first = created[0];
        if (first) return { review: toReview(first), created: true };
        const existing = await prisma.review.findFirst({ where: { executionId, nodeId, pauseSeq, tenantId } });
        if (!existing) throw StoreNotFound("execution", executionId);
        return { review: toReview(existing), created: false };
      });
    },

    async resolve(tenantId, executionId, nodeId, decision) {
      requireTenantId(tenantId);
      if (!isDbId(executionId) || typeof nodeId !== "string") return null;
      if (typeof decision !== "object" || decision === null) throw StoreInvalidInput("decision must be an object");
      const status = oneOf("status", decision.status, REVIEW_DECISIONS);
      const answer = jsonIn(requireJson("decision", decision.decision));
      const reviewer = decision.reviewer === undefined ? null : requireText("reviewer", decision.reviewer, { max: 200 });
      return guard({ entity: "review" }, async () => {
        const pending = await prisma.review.findFirst({
          where: { tenantId, executionId, nodeId, status: "pending" },
          orderBy: { pauseSeq: "desc" },
          select: { id: true },
        });
        if (!pending) return null;
        // Conditional on still pending: of two concurrent resolutions exactly one wins.
        const updated = await prisma.review.updateManyAndReturn({
          where: { id: pending.id, status: "pending" },
          data: { status, decision: answer, reviewer, resolvedAt: new Date() },
        });
        const row = updated[0];
        return row ? toReview(row) : null;
      });
    },

    async list(tenantId, opts = {}) {
      requireTenantId(tenantId);
      const { take, skip } = page(opts);
      const where: Prisma.ReviewWhereInput = { tenantId };
      if (opts.status !== undefined) where.status = oneOf("status", opts.status, REVIEW_STATUSES);
      if (opts.executionId !== undefined) {
        if (!isDbId(opts.executionId)) return [];
        where.executionId = opts.executionId;
      }
      const rows = await guard({ entity: "review" }, () => prisma.review.findMany({ where, orderBy: { id: "desc" }, take, skip }));
      return rows.map(toReview);
    },
  };
}
