/**
 * @baton/learner — watches executions finish and records the tool sequence each
 * one ran (seed 000: the raw material of learned workflows), then announces it
 * as `learning.sequence`. Learning patterns from these records comes later.
 */
import type { Subscription } from "@baton/bus";
import type { Messaging } from "@baton/messaging";
import type { Service } from "@baton/runtime";
import type { Store } from "@baton/store";
import type { Logger } from "@baton/telemetry";

export interface LearnerOptions {
  messaging: Messaging;
  store: Store;
  logger: Logger;
}

export function createLearner(opts: LearnerOptions): Service {
  const { messaging, store, logger } = opts;
  let sub: Subscription | undefined;
  return {
    async start() {
      sub = await messaging.consumeEvents("learner", ["execution.completed", "execution.failed"], async (ev) => {
        if (ev.type !== "execution.completed" && ev.type !== "execution.failed") return;
        const m = ev.message;
        const executionId = m.id;
        const nodes = await store.nodeExecutions.listById(executionId);
        const calls = nodes
          .filter((n) => n.nodeType === "tool" && n.status === "completed")
          .map((n) => {
            const tc = Array.isArray(n.toolCalls) ? (n.toolCalls[0] as { tool?: string } | undefined) : undefined;
            return { nodeId: n.nodeId, tool: tc?.tool ?? "unknown", params: (n.input ?? null) };
          });
        const successful = ev.type === "execution.completed";
        const exec = await store.executions.getById(executionId);
        await store.learning.recordSequence({
          tenantId: m.tenantId,
          executionId,
          agentId: exec?.agentId ?? null,
          sessionId: exec?.sessionId ?? null,
          tools: calls,
          successful,
        });
        logger.debug("tool sequence recorded", { executionId, tools: calls.length, successful });
        await messaging.publishEvent("learning.sequence", { tenantId: m.tenantId, executionId, tools: calls.map((c) => c.tool), successful }, `learning:${executionId}`);
      });
    },
    async stop() {
      await sub?.stop();
    },
  };
}
