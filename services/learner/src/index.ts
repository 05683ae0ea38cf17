/**
 * @baton/learner — watches executions finish and records the tool sequence each
 * one ran (seed 000: the raw material of learned workflows), then announces it
 * as `learning.sequence`. Learning patterns from these records comes later.
 */
import type { Subscription } from "@baton/bus";
import { hasCode } from "@baton/errors";
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
        const successful = ev.type === "execution.completed";
        let tools: string[];
        try {
          ({ tools } = await store.learning.recordFromJournal({ tenantId: m.tenantId, executionId, successful }));
        } catch (err) {
          // The run was deleted (through the API, or by retention) before its sequence was
          // recorded: there is nothing left to learn from, and trying again cannot change that.
          if (!hasCode(err, "BATON_STORE_NOT_FOUND")) throw err;
          logger.info("execution deleted before its tool sequence was recorded; nothing to learn", { executionId, tenantId: m.tenantId });
          return;
        }
        logger.debug("tool sequence recorded", { executionId, tools: tools.length, successful });
        await messaging.publishEvent("learning.sequence", { tenantId: m.tenantId, executionId, tools, successful }, `learning:${executionId}`);
      });
    },
    async stop() {
      await sub?.stop();
    },
  };
}
