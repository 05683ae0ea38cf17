/**
 * `/api/reviews`: human reviews requested by paused executions (decisions go through `…/resume`).
 * The reviews of an execution include its sub-runs': a review in a sub-run pauses the run above.
 */
import type { FastifyPluginAsyncZod } from "fastify-type-provider-zod";
import type { GatewayDeps } from "../deps.ts";
import { API_SECURITY, TAGS, page, reviewListQuery, reviewSchema, toReview } from "../schemas.ts";
import { apiErrors, defined } from "./common.ts";

export interface ReviewsPluginOptions {
  deps: GatewayDeps;
}

export const reviewsPlugin: FastifyPluginAsyncZod<ReviewsPluginOptions> = async (app, { deps }) => {
  app.get("/reviews", {
    schema: {
      tags: [TAGS.reviews],
      summary: "List human reviews",
      description:
        "Newest first; filter by `status` (e.g. pending) and `executionId`. With `executionId`, the list holds the reviews of that execution and of " +
        "its sub-runs at any depth (subworkflow, forEach and subagent child executions), since a review in a sub-run pauses the runs above it: " +
        "its pending ones include the review that the execution's `pendingReview` shows and those its resume's 409 `BATON_GATEWAY_REVIEW_IN_SUBRUN` lists. Each item's `executionId` is " +
        "its own execution, the one whose POST /api/agent-workflow-executions/{id}/resume decides it. `subRuns=false` lists the execution's own reviews only.",
      security: API_SECURITY,
      querystring: reviewListQuery,
      response: { 200: page(reviewSchema), ...apiErrors },
    },
    handler: async (request) => {
      const { status, executionId, subRuns, limit, offset } = request.query;
      const { tenantId } = request.auth;
      const rows =
        executionId !== undefined && subRuns !== "false"
          ? await deps.store.reviews.listInRun(tenantId, executionId, { ...defined({ status }), limit, offset })
          : await deps.store.reviews.list(tenantId, { ...defined({ status, executionId }), limit, offset });
      return { items: rows.map(toReview), limit, offset };
    },
  });
};
