/**
 * A worker process for the multi-process tests: serves `test.record`, which appends
 * `start {callId} {pid}` and `done {callId} {pid}` lines to RECORD_FILE around a sleep
 * of `ms`, so a test can see which process ran which call and how many times.
 *
 * Env: BATON_NATS_URL, PREFIX, RECORD_FILE, ACK_WAIT_MS (default 1000),
 * CONCURRENCY (default 4), PRESENCE_TTL_MS (default 1500), DRAIN_GRACE_MS (default 10000).
 */
import { appendFileSync } from "node:fs";
import { z } from "zod";
import { defineTool, runWorker } from "@baton/sdk";
import { createLogger } from "@baton/telemetry";

const env = process.env;
const file = env.RECORD_FILE ?? "";
const record = defineTool({
  name: "test.record",
  description: "records its runs in a file",
  input: z.object({ ms: z.number().int().min(0) }),
  handler: async ({ ms }, ctx) => {
    appendFileSync(file, `start ${ctx.callId} ${process.pid}\n`);
    await new Promise((r) => setTimeout(r, ms));
    appendFileSync(file, `done ${ctx.callId} ${process.pid}\n`);
    return { pid: process.pid };
  },
});

await runWorker({
  servers: env.BATON_NATS_URL ?? "nats://127.0.0.1:4222",
  prefix: env.PREFIX ?? "baton",
  tools: [record],
  workerId: `pid-${process.pid}`,
  concurrency: Number(env.CONCURRENCY ?? 4),
  ackWaitMs: Number(env.ACK_WAIT_MS ?? 1_000),
  presenceTtlMs: Number(env.PRESENCE_TTL_MS ?? 1_500),
  drainGraceMs: Number(env.DRAIN_GRACE_MS ?? 10_000),
  logger: createLogger("record-worker", "warn"),
});
process.stdout.write("ready\n");
