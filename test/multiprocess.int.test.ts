/**
 * Microservice mode: the gateway, the executor and the tool worker each run as
 * their own OS process (`node bin/baton.ts --target=…`), the review, learner,
 * memory and planner services in this test process, wired only by the real bus,
 * Redis and Postgres. Rules checked: the quickstart runs to the review, pauses,
 * resumes and completes across processes; the worker and executor serve
 * /healthz and /readyz; SIGTERM makes every process drain and exit 0.
 */
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { join } from "node:path";
import { loadConfig } from "@baton/config";
import { createLogger } from "@baton/telemetry";
import { startBaton } from "../bin/start.ts";
import type { BatonHandle } from "../bin/start.ts";
import { api, freePort, isolatedConfig, removeIsolated, waitFor } from "./helpers.ts";
import { createWorkflow, execute, waitForStatus } from "./quickstart.ts";

const root = join(import.meta.dirname, "..");
const { config, env } = isolatedConfig();
const procs: { name: string; child: ChildProcess; output: string[] }[] = [];
let rest: BatonHandle;
let gatewayPort = 0;
let executorHealth = 0;

function spawnTarget(target: string, extra: Record<string, string>): void {
  const child = spawn(process.execPath, [join(root, "bin/baton.ts"), `--target=${target}`], {
    cwd: root,
    env: { ...process.env, ...env, ...extra },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const output: string[] = [];
  child.stdout.on("data", (d: Buffer) => output.push(d.toString()));
  child.stderr.on("data", (d: Buffer) => output.push(d.toString()));
  procs.push({ name: target, child, output });
}

function exited(child: ChildProcess): Promise<number | null> {
  if (child.exitCode !== null) return Promise.resolve(child.exitCode);
  return new Promise((resolve) => child.once("exit", (code) => resolve(code)));
}

beforeAll(async () => {
  gatewayPort = await freePort();
  executorHealth = await freePort();
  // The gateway migrates first; the others wait for it through the advisory lock.
  spawnTarget("gateway", { BATON_PORT: String(gatewayPort) });
  spawnTarget("executor", { BATON_HEALTH_PORT: String(executorHealth) });
  spawnTarget("worker", { BATON_HEALTH_PORT: String(await freePort()) });
  rest = await startBaton({ config: loadConfig({ ...env, BATON_TARGET: "review,learner,memory,planner" }), logger: createLogger("mp", "warn"), healthServer: false });
  await waitFor("gateway ready", async () => {
    const r = await fetch(`http://127.0.0.1:${gatewayPort}/readyz`).catch(() => undefined);
    return r?.status === 200 ? true : undefined;
  }, 45_000);
}, 60_000);

afterAll(async () => {
  for (const p of procs) if (p.child.exitCode === null) p.child.kill("SIGKILL");
  await rest?.stop();
  await removeIsolated(config);
});

describe("walking skeleton (separate processes)", () => {
  it("runs the quickstart across gateway, executor and worker processes", async () => {
    const a = api(gatewayPort, config.apiKey!);
    const ready = await waitFor("executor ready", async () => {
      const r = await fetch(`http://127.0.0.1:${executorHealth}/readyz`).catch(() => undefined);
      return r?.status === 200 ? ((await r.json()) as { modules: Record<string, string> }) : undefined;
    });
    expect(ready.modules).toEqual({ bus: "running", redis: "running", store: "running", executor: "running" });

    // Workflows may name only registered tools: wait until the worker process has registered its own.
    await waitFor("worker tools registered", async () => {
      const r = await a.call<{ workers: number }>("GET", "/api/tools/math.sum");
      return r.status === 200 && r.body.workers > 0 ? true : undefined;
    }, 30_000);
    const wf = await createWorkflow(a);
    const id = await execute(a, wf);
    const paused = await waitForStatus(a, id, ["paused", "failed"], 30_000);
    expect(paused.status).toBe("paused");
    expect((await a.call("POST", `/api/agent-workflow-executions/${id}/resume`, { action: "approve" })).status).toBe(202);
    const done = await waitForStatus(a, id, ["completed", "failed"], 30_000);
    expect(done.status).toBe("completed");
    expect(done.output).toMatchObject({ receipt: "Filed: Ada, 455 (approve)" });
  }, 90_000);

  it("drains and exits 0 on SIGTERM", async () => {
    for (const p of procs) p.child.kill("SIGTERM");
    const codes = await Promise.all(procs.map(async (p) => ({ name: p.name, code: await exited(p.child), log: p.output.join("").slice(-2000) })));
    for (const c of codes) expect({ name: c.name, code: c.code }).toEqual({ name: c.name, code: 0 });
  }, 40_000);
});
