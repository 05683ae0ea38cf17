/**
 * @baton/planner — turns a plain-language goal into a workflow graph. It answers
 * `planner.plan` on the bus; until a model provider is configured (the LLM layer)
 * it refuses with BATON_PLANNER_NO_MODEL instead of guessing.
 */
import type { Subscription } from "@baton/bus";
import type { Messaging } from "@baton/messaging";
import type { Service } from "@baton/runtime";

export interface PlannerOptions {
  messaging: Messaging;
}

export function createPlanner(opts: PlannerOptions): Service {
  let sub: Subscription | undefined;
  return {
    async start() {
      sub = await opts.messaging.serve("planner.plan", async (req) => {
        if (!req.goal.trim()) return { ok: false, error: { code: "BATON_PLANNER_BAD_REQUEST", message: "goal is empty", retryable: false } };
        return {
          ok: false,
          error: { code: "BATON_PLANNER_NO_MODEL", message: "no model configured: the planner needs an LLM provider (not available in this version)", retryable: false },
        };
      });
    },
    async stop() {
      await sub?.stop();
    },
  };
}
