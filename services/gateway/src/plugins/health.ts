/**
 * Liveness and readiness, without authentication.
 * `/healthz` answers 200 while the process serves requests; `/readyz` answers 200
 * only when every module of the process is running, and lists their states.
 */
import type { FastifyPluginAsyncZod } from "fastify-type-provider-zod";
import { z } from "zod";
import type { GatewayDeps } from "../deps.ts";
import { TAGS } from "../schemas.ts";

export interface HealthPluginOptions {
  deps: GatewayDeps;
}

const readinessSchema = z.object({
  ready: z.boolean(),
  modules: z.record(z.string(), z.string()).describe("Module name → state: `new`, `starting`, `running`, `unavailable` (running, but NATS, Redis or Postgres is out of its reach), `stopping`, `terminated`, `failed`"),
});

export const healthPlugin: FastifyPluginAsyncZod<HealthPluginOptions> = async (app, { deps }) => {
  app.get("/healthz", {
    schema: {
      tags: [TAGS.health],
      summary: "Liveness",
      security: [],
      response: { 200: z.object({ status: z.literal("ok") }) },
    },
    handler: async () => ({ status: "ok" as const }),
  });

  app.get("/readyz", {
    schema: {
      tags: [TAGS.health],
      summary: "Readiness",
      description: "200 when every module of this process is running, 503 otherwise; the body lists the module states.",
      security: [],
      response: { 200: readinessSchema, 503: readinessSchema },
    },
    handler: async (_request, reply) => {
      let state: { ready: boolean; modules: Record<string, string> };
      try {
        const r = deps.readiness();
        state = { ready: r.ready === true, modules: { ...r.modules } };
      } catch {
        state = { ready: false, modules: {} };
      }
      return reply.code(state.ready ? 200 : 503).send(state);
    },
  });
};
