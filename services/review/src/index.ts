/**
 * @baton/review — human-in-the-loop. Records a pending review for every
 * `execution.paused`, resolves it on `execution.resumed` (or closes it when the
 * execution ends otherwise), and announces both as `review.*` events.
 */
import type { Subscription } from "@baton/bus";
import type { Messaging } from "@baton/messaging";
import type { Service } from "@baton/runtime";
import type { Store } from "@baton/store";
import type { Logger } from "@baton/telemetry";

export interface ReviewServiceOptions {
  messaging: Messaging;
  store: Store;
  logger: Logger;
}

const DECISION_STATUS = { approve: "approved", edit: "edited", reject: "rejected" } as const;

export function createReviewService(opts: ReviewServiceOptions): Service {
  const { messaging, store, logger } = opts;
  let sub: Subscription | undefined;
  return {
    async start() {
      sub = await messaging.consumeEvents("review", ["execution.paused", "execution.resumed", "execution.cancelled"], async (ev, msg) => {
        if (ev.type === "execution.paused") {
          const m = ev.message;
          const nodes = await store.nodeExecutions.listById(m.id);
          const node = nodes.filter((n) => n.nodeId === m.nodeId).at(-1);
          const { review, created } = await store.reviews.createPending({
            tenantId: m.tenantId,
            executionId: m.id,
            nodeId: m.nodeId,
            pauseSeq: msg.seq,
            reason: m.reason,
            payload: (node?.input ?? null),
          });
          if (created) logger.info("review pending", { executionId: m.id, nodeId: m.nodeId, reviewId: review.id });
          await messaging.publishEvent("review.created", { tenantId: m.tenantId, reviewId: review.id, executionId: m.id, nodeId: m.nodeId, reason: m.reason }, `review-created:${review.id}`);
        } else if (ev.type === "execution.resumed") {
          const m = ev.message;
          const status = DECISION_STATUS[m.decision as keyof typeof DECISION_STATUS] ?? "approved";
          const review = await store.reviews.resolve(m.tenantId, m.id, m.nodeId, { status, decision: { decision: m.decision } });
          if (review) {
            await messaging.publishEvent("review.resolved", { tenantId: m.tenantId, reviewId: review.id, executionId: m.id, nodeId: m.nodeId, decision: m.decision }, `review-resolved:${review.id}`);
          }
        } else if (ev.type === "execution.cancelled") {
          const m = ev.message;
          const pending = await store.reviews.list(m.tenantId, { status: "pending", executionId: m.id });
          for (const r of pending) {
            const review = await store.reviews.resolve(m.tenantId, m.id, r.nodeId, { status: "rejected", decision: { decision: "cancelled", reason: m.reason } });
            if (review) await messaging.publishEvent("review.resolved", { tenantId: m.tenantId, reviewId: review.id, executionId: m.id, nodeId: r.nodeId, decision: "cancelled" }, `review-resolved:${review.id}`);
          }
        }
      });
    },
    async stop() {
      await sub?.stop();
    },
  };
}
