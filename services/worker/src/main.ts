/**
 * The built-in tool worker as its own OS process, connected to NATS only:
 *
 *   BATON_NATS_URL=nats://127.0.0.1:4222 BATON_BUS_PREFIX=baton ./baton node services/worker/src/main.ts
 *
 * The same worker as `./baton start --target=worker` (service.ts): the built-in tools, the
 * agent nodes' `llm.*` tools (providers from the environment, docs/llm.md) and the tool
 * sources (HTTP tools declared without code, MCP servers; docs/tools.md). Needs neither Redis
 * nor Postgres. SIGTERM / SIGINT drain it (calls in flight finish, the rest stays queued).
 * Outbound HTTP follows BATON_HTTP_ALLOW_HOSTS / BATON_HTTP_ALLOW_PRIVATE /
 * BATON_HTTP_ALLOW_PRIVATE_HOSTS; results follow BATON_LARGE_RESULT_BYTES and
 * BATON_TOOL_MAX_RESULT_BYTES. The OpenTelemetry SDK starts when OTEL_EXPORTER_OTLP_ENDPOINT
 * (or a signal's own endpoint) is set; docs/observability.md.
 */
import { hostname } from "node:os";
import { connectBus } from "@baton/bus";
import { loadConfig } from "@baton/config";
import { errorMessage } from "@baton/errors";
import { createLogger, startTelemetry } from "@baton/telemetry";
import { createWorkerService } from "./service.ts";

const config = loadConfig(process.env, { BATON_TARGET: "worker" });
const logger = createLogger("worker", config.logLevel);
// Before the worker is created: it creates its instruments on the meter provider registered then.
const telemetry = startTelemetry({ serviceName: "baton-worker", logger });
const workerId = `${hostname()}:${process.pid}`;
const bus = await connectBus({ servers: config.natsUrl, prefix: config.prefix, name: `baton-worker-${workerId}`, logger });
const worker = await createWorkerService({ bus, config, logger, workerId });
// Listening for signals before the worker registers its tools: a SIGTERM that comes while it
// starts (a deployment rolling on) drains it once started, instead of killing it mid-start.
const started = worker.start();

const onSignal = (): void => {
  process.off("SIGTERM", onSignal);
  process.off("SIGINT", onSignal);
  started
    .then(() => worker.stop())
    .then(() => bus.drain())
    .then(() => telemetry.shutdown())
    .then(
      () => process.exit(0),
      (err: unknown) => {
        logger.error("drain failed", { err: errorMessage(err) });
        process.exit(1);
      },
    );
};
process.on("SIGTERM", onSignal);
process.on("SIGINT", onSignal);
await started;
