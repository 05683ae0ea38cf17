/**
 * Your own tool worker, as its own process. It needs only NATS: it registers its tools
 * in the registry (`GET /api/tools` lists them), takes their calls from the work queue,
 * and sends the results back to the executor.
 *
 *   ./baton node examples/worker/worker.ts                 # BATON_NATS_URL, BATON_BUS_PREFIX as for Baton
 *
 * Stop it with Ctrl-C or SIGTERM: it drains (calls in flight finish, the rest stay queued
 * for the next worker). Start several to share the load.
 */
import { z } from "zod";
import { defineTool, runWorker, ToolInvalidInput } from "@baton/sdk";

/** Pure computation: invoice lines → total with tax. */
const invoiceTotal = defineTool({
  name: "billing.invoiceTotal",
  description: "Totals invoice lines and adds tax.",
  input: z.object({
    lines: z.array(z.object({ sku: z.string(), qty: z.number().int().positive(), unitPrice: z.number().nonnegative() })).min(1),
    taxRate: z.number().min(0).max(1).default(0.2),
  }),
  output: z.object({ net: z.number(), tax: z.number(), gross: z.number(), lines: z.number().int() }),
  retry: { maxAttempts: 1 },
  handler: async ({ lines, taxRate }) => {
    const net = Math.round(lines.reduce((s, l) => s + l.qty * l.unitPrice, 0) * 100) / 100;
    const tax = Math.round(net * taxRate * 100) / 100;
    return { net, tax, gross: Math.round((net + tax) * 100) / 100, lines: lines.length };
  },
});

/**
 * A slow step with a side effect: reports progress, stops when cancelled, and uses the
 * idempotency key so a retried node does not send the same notice twice.
 */
const sent = new Map<string, string>();
const sendNotice = defineTool({
  name: "billing.sendNotice",
  description: "Sends a payment notice (simulated), reporting progress.",
  input: z.object({ customer: z.string().min(1), amount: z.number().positive() }),
  output: z.object({ noticeId: z.string(), duplicate: z.boolean() }),
  timeoutMs: 10_000,
  retry: { maxAttempts: 3, initialDelayMs: 500 },
  handler: async ({ customer, amount }, ctx) => {
    if (customer.toLowerCase() === "nobody") throw ToolInvalidInput("billing.sendNotice", "customer: no such customer");
    const earlier = sent.get(ctx.idempotencyKey);
    if (earlier) return { noticeId: earlier, duplicate: true };
    for (let step = 1; step <= 4; step++) {
      ctx.signal.throwIfAborted();
      await new Promise((r) => setTimeout(r, 150));
      ctx.progress(step / 4, `step ${step} of 4`);
    }
    const noticeId = `notice-${ctx.executionId}-${customer}-${amount}`;
    sent.set(ctx.idempotencyKey, noticeId);
    return { noticeId, duplicate: false };
  },
});

const worker = await runWorker({
  servers: process.env.BATON_NATS_URL ?? "nats://127.0.0.1:4222",
  prefix: process.env.BATON_BUS_PREFIX ?? "baton",
  tools: [invoiceTotal, sendNotice],
  concurrency: 8,
});
process.stdout.write(`worker ${worker.workerId} serving billing.invoiceTotal, billing.sendNotice (Ctrl-C to drain and stop)\n`);
