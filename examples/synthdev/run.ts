/**
 * Runs the two-agent SynthDev example (pair programming: a coder and a reviewer) end to end.
 *
 *   ./baton node examples/synthdev/run.ts --fake-llm     # no LLM needed: a scripted local chat-completions server
 *   ./baton node examples/synthdev/run.ts                # uses the LLM configured in the environment (docs/llm.md),
 *                                                        # e.g. BATON_OPENAI_API_KEY; models via EXAMPLE_MODEL
 *
 * Starts Baton in this process (own bus prefix, Postgres schema and Redis keys, removed at the
 * end), imports workflow.json + script.js + roles.json through the REST API, runs it, prints
 * the nodes as they start and complete (the execution's events) and the final output.
 */
import { readFileSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { loadConfig } from "@baton/config";
import { startOpenAiCompatibleServer } from "@baton/llm/testing";
import type { OpenAiCompatibleServer, RecordedRequest, ScriptedReply } from "@baton/llm/testing";
import { createLogger } from "@baton/telemetry";
import { startBaton } from "../../bin/start.ts";
import { ensureLocalInfra } from "../../infra/local-infra.ts";

const fake = process.argv.includes("--fake-llm");
const here = (f: string) => new URL(f, import.meta.url);
let server: OpenAiCompatibleServer | undefined;

if (fake) {
  let reviews = 0;
  server = await startOpenAiCompatibleServer((req: RecordedRequest): ScriptedReply => {
    const first = req.body.messages?.[0]?.content;
    const system = typeof first === "string" ? first : "";
    if (system.includes("software engineer")) return { text: `def fizzbuzz(n):\n    return "Fizz"*(n%3==0) + "Buzz"*(n%5==0) or str(n)  # v${reviews + 1}` };
    reviews++;
    return { toolCalls: [{ name: "verdict", args: { approved: reviews >= 2, comment: reviews >= 2 ? "Looks good." : "Handle n=0." } }] };
  });
  process.env.BATON_OPENAI_API_KEY = "sk-fake";
  process.env.BATON_OPENAI_BASE_URL = server.url;
}

const id = randomBytes(3).toString("hex");
const config = loadConfig({
  ...process.env,
  BATON_BUS_PREFIX: `example${id}`,
  BATON_DATABASE_SCHEMA: `example_${id}`,
  BATON_PORT: "0",
  BATON_API_KEY: `bk_example_${randomBytes(8).toString("hex")}`,
});
// Creates the database when it is missing (and starts local servers when BATON_EMBEDDED allows).
const infra = config.embedded
  ? await ensureLocalInfra({ natsUrl: config.natsUrl, redisUrl: config.redisUrl, databaseUrl: config.databaseUrl, dataDir: config.dataDir, log: () => undefined })
  : undefined;
const baton = await startBaton({ config, logger: createLogger("example", "warn") });
const base = `http://127.0.0.1:${baton.gatewayPort!}`;
const headers = { authorization: `Bearer ${config.apiKey!}`, "content-type": "application/json" };
const model = process.env.EXAMPLE_MODEL ?? "openai:gpt-4o-mini";

try {
  const imported = await fetch(`${base}/api/agent-workflows/import`, {
    method: "POST",
    headers,
    body: JSON.stringify({
      format: "synthdev",
      name: "Pair programming",
      slug: "pair-programming",
      source: {
        workflow: JSON.parse(readFileSync(here("workflow.json"), "utf8")) as unknown,
        script: readFileSync(here("script.js"), "utf8"),
        roles: JSON.parse(readFileSync(here("roles.json"), "utf8")) as unknown,
        agentConfig: { model, levels: { smart: model, base: model } },
      },
    }),
  });
  const wf = (await imported.json()) as { id: number };
  if (!imported.ok) throw new Error(`import answered ${imported.status}: ${JSON.stringify(wf)}`);
  const run = await fetch(`${base}/api/agent-workflows/${wf.id}/execute`, { method: "POST", headers, body: JSON.stringify({ input: { task: "fizzbuzz in Python" } }) });
  const exec = (await run.json()) as { id: number };
  console.log(`execution ${exec.id} started; events:`);
  const sse = await fetch(`${base}/api/agent-workflow-executions/${exec.id}/events`, { headers: { authorization: headers.authorization } });
  for (const block of (await sse.text()).split("\n\n")) {
    const event = /^event: (.*)$/m.exec(block)?.[1];
    const data = /^data: (.*)$/m.exec(block)?.[1];
    if (event === "node.completed" || event === "node.started") console.log(`  ${event} ${(JSON.parse(data!) as { data: { node_id: string } }).data.node_id}`);
  }
  const done = (await (await fetch(`${base}/api/agent-workflow-executions/${exec.id}`, { headers })).json()) as { status: string; output: unknown; error: string | null };
  console.log(`status: ${done.status}${done.error ? ` (${done.error})` : ""}`);
  console.log("output:", JSON.stringify(done.output, null, 2));
  if (done.status !== "completed") process.exitCode = 1;
} finally {
  await baton.stop();
  await server?.close();
  // Remove this run's streams, KV buckets, Redis keys (its checkpoints) and schema.
  const { connect } = await import("@nats-io/transport-node");
  const { jetstreamManager } = await import("@nats-io/jetstream");
  const nc = await connect({ servers: config.natsUrl });
  const jsm = await jetstreamManager(nc);
  for await (const name of jsm.streams.names()) {
    if (name.startsWith(config.prefix.toUpperCase()) || name.startsWith(`KV_${config.prefix}_`)) await jsm.streams.delete(name).catch(() => false);
  }
  await nc.close();
  const { Redis } = await import("ioredis");
  const redis = new Redis(config.redisUrl);
  for await (const keys of redis.scanStream({ match: `${config.prefix}:*`, count: 500 }) as AsyncIterable<string[]>) {
    if (keys.length > 0) await redis.del(...keys);
  }
  redis.disconnect();
  const pg = (await import("pg")).default;
  const client = new pg.Client({ connectionString: config.databaseUrl });
  await client.connect();
  await client.query(`DROP SCHEMA IF EXISTS "${config.databaseSchema}" CASCADE`);
  await client.end();
  await infra?.stop();
}
