/**
 * The built-in tool worker as its own OS process, connected to NATS only:
 *
 *   BATON_NATS_URL=nats://127.0.0.1:4222 BATON_BUS_PREFIX=baton ./baton node services/worker/src/main.ts
 *
 * SIGTERM / SIGINT drain it (calls in flight finish, the rest stays queued). `http.request`
 * follows BATON_HTTP_ALLOW_HOSTS / BATON_HTTP_ALLOW_PRIVATE / BATON_HTTP_ALLOW_PRIVATE_HOSTS.
 * Same as `./baton start --target=worker` without Redis or Postgres.
 */
import { hostname } from "node:os";
import { loadConfig } from "@baton/config";
import { runWorker } from "@baton/sdk";
import { createLogger } from "@baton/telemetry";
import { policyFromEnv } from "@baton/tools";
import { builtinToolSpecs } from "./index.ts";

const config = loadConfig(process.env, { BATON_TARGET: "worker" });
const logger = createLogger("worker", config.logLevel);
await runWorker({
  servers: config.natsUrl,
  prefix: config.prefix,
  tools: builtinToolSpecs([], policyFromEnv(process.env)),
  concurrency: config.workerConcurrency,
  workerId: `${hostname()}:${process.pid}`,
  logger,
  drainGraceMs: Math.max(0, config.shutdownGraceMs - 2_000),
});
