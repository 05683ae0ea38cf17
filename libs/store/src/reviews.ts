import type { Pool } from "pg";
import type { Prisma, PrismaClient, Review } from "./generated/client.ts";
import { guard } from "./db-errors.ts";
import { StoreInvalidInput, StoreNotFound } from "./errors.ts";
import { toReview } from "./records.ts";
import type { ReviewCreateInput, ReviewsRepo } from "./types.ts";
import {
  isDbId,
  jsonIn,
  namedStatement,
  oneOf,
  optionalInt,
  page,
  quoteIdent,
  requireJson,
  requireTenantId,
  requireText,
  REVIEW_DECISIONS,
  REVIEW_STATUSES,
} from "./values.ts";

/** Deeper than any run nests (the executor stops at 32 levels); bounds the walk whatever the rows say. */
const MAX_TREE_DEPTH = 64;

export function reviewsRepo(prisma: PrismaClient, schema: string, pool: Pool): ReviewsRepo {
  const runs = `${quoteIdent(schema)}."agent_workflow_executions"`;
  const reviews = `${quoteIdent(schema)}."reviews"`;
  // The run, then its sub-runs that are paused, level by level through the parent index: a
  // sub-run that is not paused has no review waiting in it, nor below it.
  const PENDING_IN_RUN = namedStatement("review_pending_in_run", `WITH RECURSIVE tree AS (
      SELECT x."id", 0 AS "depth" FROM ${runs} x WHERE x."id" = $1 AND x."tenantId" = $2
      UNION ALL
      SELECT c."id", t."depth" + 1 FROM tree t JOIN ${runs} c ON c."parentExecutionId" = t."id"
       WHERE c."status" = 'paused' AND c."tenantId" = $2 AND t."depth" < ${MAX_TREE_DEPTH}
    )
    SELECT r.* FROM ${reviews} r JOIN tree t ON r."executionId" = t."id"
     WHERE r."tenantId" = $2 AND r."status" = 'pending' ORDER BY r."id" DESC LIMIT $3`);
  // The run, then every sub-run below it, whatever its status, level by level through the parent index.
  const IN_RUN = namedStatement("review_in_run", `WITH RECURSIVE tree AS (
      SELECT x."id", 0 AS "depth" FROM ${runs} x WHERE x."id" = $1 AND x."tenantId" = $2
      UNION ALL
      SELECT c."id", t."depth" + 1 FROM tree t JOIN ${runs} c ON c."parentExecutionId" = t."id"
       WHERE c."tenantId" = $2 AND t."depth" < ${MAX_TREE_DEPTH}
    )
    SELECT r.* FROM ${reviews} r JOIN tree t ON r."executionId" = t."id"
     WHERE r."tenantId" = $2 AND ($3::varchar IS NULL OR r."status" = $3::varchar)
     ORDER BY r."id" DESC LIMIT $4 OFFSET $5`);
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

    async pendingInRun(tenantId, executionId, opts = {}) {
      requireTenantId(tenantId);
      if (!isDbId(executionId)) return [];
      const { take } = page({ limit: opts.limit ?? 100 });
      const res = await guard({ entity: "review" }, () => pool.query<Review>({ ...PENDING_IN_RUN, values: [executionId, tenantId, take] }));
      return res.rows.map(toReview);
    },

    async listInRun(tenantId, executionId, opts = {}) {
      requireTenantId(tenantId);
      const { take, skip } = page(opts);
      const status = opts.status === undefined ? null : oneOf("status", opts.status, REVIEW_STATUSES);
      if (!isDbId(executionId)) return [];
      const res = await guard({ entity: "review" }, () => pool.query<Review>({ ...IN_RUN, values: [executionId, tenantId, status, take, skip] }));
      return res.rows.map(toReview);
    },
  };
}
