/**
 * The servers Baton depends on fail under it. Baton (every module, in this process) runs on a
 * NATS server and a Redis server of this test's own, started from their binaries, and on the
 * shared Postgres under a connection name of its own. Mid-run, NATS and Redis are SIGKILLed
 * together and Baton's Postgres connections are terminated; NATS comes back on its store, Redis
 * empty (every checkpoint lost). Rules checked:
 * - while NATS and Redis are down, /readyz answers 503 and names `bus` and `redis` unavailable;
 *   once they are back, it answers 200;
 * - every run that was in flight completes with its output; one paused at a review waits
 *   through it and completes when approved;
 * - each journal has exactly one completed row per node and none left running;
 * - each run's events pass timelineProblems (test/workflows.ts).
 * Then Postgres goes out of reach (Baton reaches it through a proxy of the test's own, which
 * stops listening): /readyz answers 503 and names `store` unavailable, and the runs in flight
 * complete once it is back, by the same rules.
 * Tool calls may run again here: a call whose answer NATS lost with it is delivered again, as
 * docs/tools.md says (at least once), so this suite does not count the calls.
 */
import { afterAll, beforeAll, expect, it } from "@jest/globals";
import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import type { Redis } from "ioredis";
import { createRedis, deleteKeysByPrefix } from "@baton/checkpoints";
import { createStore } from "@baton/store";
import { databaseProxy } from "@baton/store/testing";
import type { DatabaseProxy } from "@baton/store/testing";
import { createLogger } from "@baton/telemetry";
import { locateServer, probe } from "../infra/local-infra.ts";
import { startBaton } from "../bin/start.ts";
import type { BatonHandle } from "../bin/start.ts";
import { api, DATABASE_URL, dropSchema, freePort, isolatedConfig, waitFor } from "./helpers.ts";
import type { Api } from "./helpers.ts";
import type { NodeRow } from "./workflows.ts";
import { collectEvents, createDefinition, getExecution, journal, startExecution, testTools, timelineProblems, waitForExecution } from "./workflows.ts";

const SHARED_REDIS = process.env.BATON_TEST_REDIS_URL ?? "redis://127.0.0.1:6379";
const appName = `baton-infra-${randomBytes(4).toString("hex")}`;
const natsDir = mkdtempSync(join(tmpdir(), "baton-nats-"));

interface Server { name: string; port: number; args: string[]; bin: string; child?: ChildProcess; output: string[] }

function server(name: string, bin: string | undefined, port: number, args: string[]): Server {
  if (!bin) throw new Error(`${name} is not installed: this suite starts a server of its own from the binary the local setup uses`);
  return { name, port, args, bin, output: [] };
}

async function up(s: Server): Promise<void> {
  const child = spawn(s.bin, s.args, { stdio: ["ignore", "pipe", "pipe"] });
  child.stdout.on("data", (d: Buffer) => s.output.push(d.toString()));
  child.stderr.on("data", (d: Buffer) => s.output.push(d.toString()));
  s.child = child;
  await waitFor(`${s.name} on port ${s.port}`, async () => {
    if (child.exitCode !== null) throw new Error(`${s.name} exited ${child.exitCode}: ${s.output.join("").slice(-1000)}`);
    return (await probe("127.0.0.1", s.port, 500)) ? true : undefined;
  }, 20_000);
}

async function kill(s: Server): Promise<void> {
  const child = s.child;
  s.child = undefined;
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  const gone = new Promise((resolve) => child.once("exit", resolve));
  child.kill("SIGKILL");
  await gone;
}

/** `url` with its connections named `name` (pg_stat_activity's application_name), whatever query it has. */
function withAppName(url: string, name: string): string {
  const u = new URL(url);
  u.searchParams.set("application_name", name);
  return u.href;
}

let nats: Server;
let redisServer: Server;
/** Baton's way to the shared Postgres. */
let pgProxy: DatabaseProxy;
let baton: BatonHandle | undefined;
let a: Api;
let shared: Redis;
let tenantId: string;
let config: ReturnType<typeof isolatedConfig>["config"];

beforeAll(async () => {
  const [natsPort, redisPort] = [await freePort(), await freePort()];
  const natsBin = locateServer("nats");
  const redisBin = locateServer("redis");
  nats = server("nats-server", natsBin && join(natsBin, "nats-server"), natsPort, ["-js", "-a", "127.0.0.1", "-p", String(natsPort), "-sd", natsDir]);
  redisServer = server("redis-server", redisBin && join(redisBin, "redis-server"), redisPort, ["--port", String(redisPort), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]);
  await up(nats);
  await up(redisServer);
  pgProxy = await databaseProxy(0, DATABASE_URL);
  ({ config } = isolatedConfig({
    BATON_NATS_URL: `nats://127.0.0.1:${natsPort}`,
    BATON_REDIS_URL: `redis://127.0.0.1:${redisPort}`,
    BATON_DATABASE_URL: withAppName(pgProxy.url, appName),
    BATON_EXECUTOR_ACK_WAIT_MS: "3000",
    BATON_RECOVERY_SWEEP_SECONDS: "5",
  }));
  // The recording tools keep their records on the shared Redis, which does not fail.
  shared = createRedis(SHARED_REDIS);
  const t = testTools(shared, config.prefix);
  baton = await startBaton({ config, logger: createLogger("infra-restart", "error"), tools: t.tools });
  a = api(baton.gatewayPort!, config.apiKey!);
  const store = createStore({ databaseUrl: DATABASE_URL, schema: config.databaseSchema });
  try {
    tenantId = (await store.tenants.resolveApiKey(config.apiKey!))!.tenantId;
  } finally {
    await store.close();
  }
}, 90_000);

afterAll(async () => {
  // NATS and Redis are up again by now (or the test failed before taking them down).
  if (!nats.child) await up(nats).catch(() => undefined);
  if (!redisServer.child) await up(redisServer).catch(() => undefined);
  await baton?.stop().catch(() => undefined);
  await pgProxy.close();
  await kill(nats);
  await kill(redisServer);
  rmSync(natsDir, { recursive: true, force: true });
  await dropSchema(config.databaseSchema);
  await deleteKeysByPrefix(shared, config.prefix);
  await shared.quit();
}, 60_000);

/** Ends Baton's Postgres connections (each statement in flight fails; the pool connects again). */
async function terminateConnections(): Promise<number> {
  const c = new pg.Client({ connectionString: DATABASE_URL });
  await c.connect();
  try {
    // The pids first, then one call each: with the call beside the filter in one WHERE, the
    // planner may call it for every connection of the server.
    const pids = await c.query<{ pid: number }>("SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND pid <> pg_backend_pid()", [appName]);
    for (const { pid } of pids.rows) await c.query("SELECT pg_terminate_backend($1)", [pid]);
    return pids.rows.length;
  } finally {
    await c.end();
  }
}

async function readiness(): Promise<{ status: number; body: { ready: boolean; modules: Record<string, string> } }> {
  const r = await fetch(`${a.base}/readyz`);
  return { status: r.status, body: (await r.json()) as { ready: boolean; modules: Record<string, string> } };
}

/** A tool, a durable delay, a forEach of three and a tool: input `{ xs: [300, 300, 300] }`. */
function sequence(name: string): Promise<number> {
  return createDefinition(a, name, {
    nodes: [
      { id: "a", type: "tool", config: { tool: "rec.sleep" }, input: { ms: 400, v: "a" } },
      { id: "d", type: "delay", config: { ms: 1500 } },
      { id: "each", type: "forEach", config: { items: "$.input.xs", concurrency: 2, tool: "rec.sleep", itemInput: { ms: "$.item", v: "$.index" } } },
      { id: "b", type: "tool", config: { tool: "rec.sleep" }, input: { ms: 400, v: "b" } },
    ],
    edges: [{ from: "a", to: "d" }, { from: "d", to: "each" }, { from: "each", to: "b" }],
    output: { each: "$.each", b: "$.b.v" },
  });
}

/** Waits for each run to complete with the sequence's output, one completed row per node and a whole timeline. */
async function expectSequencesCompleted(runs: readonly number[]): Promise<void> {
  for (const id of runs) {
    const e = await waitForExecution(a, id, ["completed", "failed", "cancelled"], 90_000);
    expect({ id, status: e.status, error: e.error, output: e.output }).toEqual({
      id, status: "completed", error: null, output: { each: [{ slept: 300, v: 0 }, { slept: 300, v: 1 }, { slept: 300, v: 2 }], b: "b" },
    });
    expect(completedPerNode(await journal(a, id))).toEqual({ a: 1, d: 1, each: 1, b: 1 });
  }
}

async function expectWholeTimelines(runs: readonly number[]): Promise<void> {
  for (const id of runs) {
    const events = await collectEvents(a, config.apiKey!, id, undefined, 30_000);
    expect({ id, problems: timelineProblems(events, id, tenantId) }).toEqual({ id, problems: [] });
  }
}

function completedPerNode(nodes: NodeRow[]): Record<string, number> {
  expect(nodes.filter((n) => n.status === "running").map((n) => n.nodeId)).toEqual([]);
  const out: Record<string, number> = {};
  for (const n of nodes) if (n.status === "completed") out[n.nodeId] = (out[n.nodeId] ?? 0) + 1;
  return out;
}

it("runs in flight and a paused run go on when NATS, Redis and the database connections fail under them", async () => {
  const seq = await sequence("infra-seq");
  const review = await createDefinition(a, "infra-review", {
    nodes: [
      { id: "a", type: "tool", config: { tool: "rec.sleep" }, input: { ms: 100, v: "a" } },
      { id: "r", type: "agent.humanReview", config: { reason: "ok?" } },
      { id: "b", type: "tool", config: { tool: "rec.sleep" }, input: { ms: 100, v: "b" } },
    ],
    edges: [{ from: "a", to: "r" }, { from: "r", to: "b", when: "approved" }],
    output: { b: "$.b.v", decision: "$.r.decision" },
  });
  const runs: number[] = [];
  for (let i = 0; i < 4; i++) runs.push(await startExecution(a, seq, { xs: [300, 300, 300] }));
  const paused = await startExecution(a, review);
  await waitForExecution(a, paused, ["paused"]);
  // Some are past their first node, some inside it.
  await waitFor("a run past its first node", async () => ((await journal(a, runs[0]!)).some((n) => n.nodeId === "a" && n.status === "completed") ? true : undefined));

  await Promise.all([kill(nats), kill(redisServer)]);
  expect(await terminateConnections()).toBeGreaterThan(0);
  const down = await waitFor("/readyz to say the bus and Redis are down", async () => {
    const r = await readiness();
    return r.body.modules.bus === "unavailable" && r.body.modules.redis === "unavailable" ? r : undefined;
  });
  expect(down.status).toBe(503);
  expect(down.body.ready).toBe(false);
  await new Promise((r) => setTimeout(r, 3000));
  await terminateConnections();
  await up(nats);
  await up(redisServer);
  await waitFor("/readyz to answer 200 again", async () => ((await readiness()).status === 200 ? true : undefined), 30_000);

  await expectSequencesCompleted(runs);
  // The paused run waited through it (its checkpoint rebuilt from the journal) and goes on when approved.
  expect((await getExecution(a, paused)).status).toBe("paused");
  const approved = await waitFor("the approval to be taken", async () => {
    const r = await a.call("POST", `/api/agent-workflow-executions/${paused}/resume`, { action: "approve" });
    return r.status === 202 ? r : undefined;
  }, 30_000);
  expect(approved.status).toBe(202);
  const done = await waitForExecution(a, paused, ["completed", "failed", "cancelled"], 30_000);
  expect({ status: done.status, output: done.output }).toEqual({ status: "completed", output: { b: "b", decision: "approve" } });
  expect(completedPerNode(await journal(a, paused))).toEqual({ a: 1, r: 1, b: 1 });

  await expectWholeTimelines([...runs, paused]);
}, 240_000);

it("runs in flight go on when Postgres is out of reach for a while, and /readyz names the store meanwhile", async () => {
  const seq = await sequence("infra-seq-pg");
  const runs: number[] = [];
  for (let i = 0; i < 3; i++) runs.push(await startExecution(a, seq, { xs: [300, 300, 300] }));
  await waitFor("a run past its first node", async () => ((await journal(a, runs[0]!)).some((n) => n.nodeId === "a" && n.status === "completed") ? true : undefined));

  const port = pgProxy.port;
  await pgProxy.close();
  const down = await waitFor("/readyz to say the store is down", async () => {
    const r = await readiness();
    return r.body.modules.store === "unavailable" ? r : undefined;
  });
  expect(down.status).toBe(503);
  expect(down.body.ready).toBe(false);
  expect(down.body.modules.bus).toBe("running");
  // A request that needs the database says so.
  const refused = await a.call("GET", `/api/agent-workflow-executions/${runs[0]}`);
  expect({ status: refused.status, code: (refused.body as { code?: string }).code }).toEqual({ status: 503, code: "BATON_STORE_UNAVAILABLE" });
  await new Promise((r) => setTimeout(r, 3000));
  pgProxy = await databaseProxy(port, DATABASE_URL);
  await waitFor("/readyz to answer 200 again", async () => ((await readiness()).status === 200 ? true : undefined), 30_000);

  await expectSequencesCompleted(runs);
  await expectWholeTimelines(runs);
}, 240_000);
