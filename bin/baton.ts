/**
 * Baton's entry point.
 *
 *   node bin/baton.ts [--target=all|gateway,executor,...]   run modules (default: all)
 *   node bin/baton.ts migrate                               apply database migrations and exit
 *
 * Options are environment variables (see README.md); `--target=` overrides BATON_TARGET.
 */
import { errorMessage } from "@baton/errors";
import { loadConfig } from "@baton/config";
import { migrate } from "@baton/store";
import { createLogger, startTelemetry } from "@baton/telemetry";
import { ensureLocalInfra } from "../infra/local-infra.ts";
import { startBaton, telemetryServiceName } from "./start.ts";

async function main(argv: string[]): Promise<number> {
  const args = argv.filter((a) => !a.startsWith("--"));
  const target = argv.find((a) => a.startsWith("--target="))?.slice("--target=".length);
  const config = loadConfig(process.env, target ? { BATON_TARGET: target } : {});
  const logger = createLogger("baton", config.logLevel);

  const infra = config.embedded
    ? await ensureLocalInfra({ natsUrl: config.natsUrl, redisUrl: config.redisUrl, databaseUrl: config.databaseUrl, dataDir: config.dataDir, log: (m) => logger.info(m) })
    : undefined;

  if (args[0] === "migrate") {
    const { applied } = await migrate({ databaseUrl: config.databaseUrl, schema: config.databaseSchema });
    logger.info("migrations applied", { applied });
    await infra?.stop();
    return 0;
  }
  if (args.length > 0) {
    process.stderr.write(`unknown command "${args[0]}"; usage: baton [migrate] [--target=all|gateway,executor,worker,planner,learner,memory,review]\n`);
    return 2;
  }

  // One OpenTelemetry SDK for the process, whatever modules it runs; off unless OTEL_* names an endpoint.
  const telemetry = startTelemetry({ serviceName: telemetryServiceName(config.target), logger });
  const baton = await startBaton({
    config,
    logger,
    onApiKey: (key) => {
      process.stdout.write(`\nGenerated the local API key (also saved to ${config.dataDir}/api-key):\n\n  export BATON_API_KEY=${key}\n\n`);
    },
  });
  if (baton.gatewayPort !== undefined) {
    process.stdout.write(`Baton is running: http://${config.host}:${baton.gatewayPort}  (API docs: http://${config.host}:${baton.gatewayPort}/docs)\n`);
  }

  return await new Promise<number>((resolve) => {
    let stopping = false;
    const shutdown = (why: string, code: number) => {
      if (stopping) return;
      stopping = true;
      logger.info("stopping", { why });
      const force = setTimeout(() => {
        logger.error("shutdown grace period over; exiting", { graceMs: config.shutdownGraceMs });
        resolve(1);
      }, config.shutdownGraceMs);
      force.unref();
      baton
        .stop()
        .then(() => telemetry.shutdown())
        .then(() => infra?.stop())
        .then(() => resolve(code), (err: unknown) => {
          logger.error("stop failed", { error: errorMessage(err) });
          resolve(1);
        });
    };
    process.on("SIGTERM", () => shutdown("SIGTERM", 0));
    process.on("SIGINT", () => shutdown("SIGINT", 0));
    baton.manager.onFailure((name, err) => {
      logger.error("module failed", { module: name, error: errorMessage(err) });
      shutdown(`module ${name} failed`, 1);
    });
  });
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`baton: ${errorMessage(err)}\n`);
    process.exit(1);
  },
);
