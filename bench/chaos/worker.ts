/**
 * A tool worker as its own OS process for the chaos driver (`--workers=N` of run.ts): the
 * built-in tools and the recording test tools of test/workflows.ts, on the bus prefix and Redis
 * of the environment (the driver's `isolatedConfig`), with the consumers' ack wait set by
 * `CHAOS_TOOL_ACK_WAIT_MS` (the built-in worker's 30 s would make a stalled worker's calls wait
 * half a minute before they are redelivered).
 *
 * Every handler run of `rec.sleep` and `flaky` is also recorded in the Redis list
 * `{prefix}:chaos:runs` as JSON lines `{ c: callId, t: tool, p: pid, r: run, s: startMs }` when it
 * starts and `{ c, p, r, e: endMs }` when the handler returns or throws, so the driver can tell a
 * run that its worker's death or stall interrupted (whose call may legitimately run again,
 * docs/tools.md "Idempotency without Redis") from one that ran twice for no reason.
 * Prints `chaos-worker ready` once its tools are registered and its consumers open.
 */
import { hostname } from "node:os";
import { connectBus } from "@baton/bus";
import { createRedis } from "@baton/checkpoints";
import { loadConfig } from "@baton/config";
import type { ToolSpec } from "@baton/sdk";
import { createLogger } from "@baton/telemetry";
import { createBuiltinWorker, workerLimits } from "@baton/worker";
import { testTools } from "../../test/workflows.ts";

const config = loadConfig(process.env, { BATON_TARGET: "worker" });
const logger = createLogger("chaos-worker", config.logLevel);
const redis = createRedis(config.redisUrl);
const runsKey = `${config.prefix}:chaos:runs`;
const recorded = new Set(["rec.sleep", "flaky"]);
let runs = 0;

const tools: ToolSpec[] = testTools(redis, config.prefix).tools.map((t) => recorded.has(t.name)
  ? {
      ...t,
      handler: async (input, ctx) => {
        const r = ++runs;
        await redis.rpush(runsKey, JSON.stringify({ c: ctx.callId, t: t.name, p: process.pid, r, s: Date.now() }));
        try {
          return await t.handler(input, ctx);
        } finally {
          await redis.rpush(runsKey, JSON.stringify({ c: ctx.callId, p: process.pid, r, e: Date.now() }));
        }
      },
    }
  : t);

const workerId = `${hostname()}:${process.pid}`;
const bus = await connectBus({ servers: config.natsUrl, prefix: config.prefix, name: `chaos-worker-${workerId}`, logger });
const worker = createBuiltinWorker({
  bus,
  logger,
  workerId,
  concurrency: config.workerConcurrency,
  ackWaitMs: Number(process.env.CHAOS_TOOL_ACK_WAIT_MS ?? 2000),
  // BATON_LARGE_RESULT_BYTES (the driver's --large lowers it) and BATON_TOOL_MAX_RESULT_BYTES, as Baton's own worker.
  ...workerLimits(config),
  extraTools: tools,
});
await worker.start();
process.stdout.write("chaos-worker ready\n");
