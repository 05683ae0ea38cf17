/**
 * A bench worker process: serves `bench.noop` (returns its input's `n`) through the SDK.
 * Env: BATON_NATS_URL, PREFIX, CONCURRENCY (default 64). Prints "ready" once serving.
 */
import { z } from "zod";
import { defineTool, runWorker } from "@baton/sdk";
import { createLogger } from "@baton/telemetry";

const noop = defineTool({
  name: "bench.noop",
  description: "returns n",
  input: z.object({ n: z.number() }),
  output: z.object({ n: z.number() }),
  handler: async ({ n }) => ({ n }),
});

await runWorker({
  servers: process.env.BATON_NATS_URL ?? "nats://127.0.0.1:4222",
  prefix: process.env.PREFIX ?? "bench",
  tools: [noop],
  workerId: `bench-${process.pid}`,
  concurrency: Number(process.env.CONCURRENCY ?? 64),
  logger: createLogger("bench-worker", "warn"),
});
process.stdout.write("ready\n");
