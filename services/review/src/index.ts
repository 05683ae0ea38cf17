/**
 * @baton/review — human-in-the-loop. Records a pending review for every
 * `execution.paused`, resolves it on `execution.resumed` (or closes it, decision
 * `cancelled`, when the execution ends otherwise), and announces both as `review.*` events.
 * A pause in a sub-run (`sub_execution_id` set) is not a review of the run that announces
 * it: the sub-run's own `execution.paused` recorded that review, and its own
 * `execution.resumed` resolves it; neither the parent's pause nor its end touches a review.
 */
import type { Subscription } from "@baton/bus";
import { valueToJson } from "@baton/contracts";
import type { Messaging } from "@baton/messaging";
import type { Service } from "@baton/runtime";
import type { Store } from "@baton/store";
import type { Logger } from "@baton/telemetry";

export interface ReviewServiceOptions {
  messaging: Messaging;
  store: Store;
  logger: Logger;
}

/** How a decision (`execution.resumed`) leaves its review; `cancelled`: a loop went round past it. */
const DECISION_STATUS = { approve: "approved", edit: "edited", reject: "rejected", cancelled: "rejected" } as const;

/**
 * The ends of an execution that can leave a review waiting: its reviews still pending are
 * closed (decision `cancelled`). A run cannot complete while a review waits (the engine ends
 * a pause with `execution.resumed` first), so `execution.completed` is not taken: most runs
 * end that way, and each would cost a query here.
 */
const ENDS = ["execution.cancelled", "execution.failed"] as const;

export function createReviewService(opts: ReviewServiceOptions): Service {
  const { messaging, store, logger } = opts;
  let sub: Subscription | undefined;

  async function resolved(tenantId: string, executionId: number, nodeId: string, decision: string, reviewId: number): Promise<void> {
    await messaging.publishEvent("review.resolved", { tenantId, reviewId, executionId, nodeId, decision }, `review-resolved:${reviewId}`);
  }

  return {
    async start() {
      sub = await messaging.consumeEvents("review", ["execution.paused", "execution.resumed", ...ENDS], async (ev, msg) => {
        if ((ev.type === "execution.paused" || ev.type === "execution.resumed") && ev.message.subExecutionId !== 0) return;
        if (ev.type === "execution.paused") {
          const m = ev.message;
          const node = await store.nodeExecutions.latest(m.id, m.nodeId);
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
          // The decision as the reviewer gave it: the comment, and an edit's data (a blob
          // reference when large), with who decided on the review itself.
          const data = valueToJson(m.data);
          const decision = { decision: m.decision, ...(m.comment ? { comment: m.comment } : {}), ...(data !== undefined ? { data } : {}) };
          const review = await store.reviews.resolve(m.tenantId, m.id, m.nodeId, { status, decision, ...(m.reviewer ? { reviewer: m.reviewer } : {}) });
          if (review) await resolved(m.tenantId, m.id, m.nodeId, m.decision, review.id);
        } else if (ev.type === "execution.cancelled" || ev.type === "execution.failed") {
          // The execution ended while a review still waited (a cancel, a deadline, a failure elsewhere).
          const m = ev.message;
          const reason = ev.type === "execution.cancelled" ? ev.message.reason : `the execution ${ev.type.slice("execution.".length)}`;
          const pending = await store.reviews.list(m.tenantId, { status: "pending", executionId: m.id });
          for (const r of pending) {
            const review = await store.reviews.resolve(m.tenantId, m.id, r.nodeId, { status: "rejected", decision: { decision: "cancelled", reason } });
            if (review) await resolved(m.tenantId, m.id, r.nodeId, "cancelled", review.id);
          }
        }
      }, {
        // One at a time, in the stream's order: an execution's pause, its decision and its end
        // come in that order, and a decision handled before its pause was recorded would be lost.
        concurrency: 1,
      });
    },
    async stop() {
      await sub?.stop();
    },
  };
}
