/** `/api/reviews`: human reviews requested by paused executions (decisions go through `…/resume`). */
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
      description: "Filter by `status` (e.g. pending) and `executionId`. Decide with POST /api/agent-workflow-executions/{id}/resume.",
      security: API_SECURITY,
      querystring: reviewListQuery,
      response: { 200: page(reviewSchema), ...apiErrors },
    },
    handler: async (request) => {
      const { status, executionId, limit, offset } = request.query;
      const rows = await deps.store.reviews.list(request.auth.tenantId, { ...defined({ status, executionId }), limit, offset });
      return { items: rows.map(toReview), limit, offset };
    },
  });
};
