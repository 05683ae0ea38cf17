/**
 * Tool workers as separate OS processes sharing one work queue (real NATS). Rules checked:
 * - a worker killed with SIGKILL in the middle of a call loses it to another worker after
 *   the ack deadline; the call completes exactly once and is answered once;
 * - the registry counts each live process and drops the killed one after the presence TTL;
 * - SIGTERM drains a worker: its calls in flight finish in it, the process exits 0, and
 *   the calls it had not started are run by the next worker — none is lost or run twice;
 * - the standalone worker process (src/main.ts) registers the tools the `worker` module
 *   serves, the agent nodes' llm.* tools included, and exits 0 on SIGTERM.
 */
import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { connectBus } from "@baton/bus";
import type { Bus } from "@baton/bus";
import { createToolRegistry } from "@baton/sdk";
import { callTool, collectResults, deletePrefix, randomToolPrefix, TEST_NATS_URL } from "@baton/sdk/testing";
import type { ResultCollector } from "@baton/sdk/testing";
import { createLogger } from "@baton/telemetry";

const here = dirname(fileURLToPath(import.meta.url));
const fixture = join(here, "testing", "record-worker.ts");

interface Proc {
  child: ChildProcess;
  pid: number;
  exited: Promise<number | null>;
}

function startWorker(env: Record<string, string>): Promise<Proc> {
  const child = spawn(process.execPath, [fixture], { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "inherit"] });
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  return new Promise((resolve, reject) => {
    let out = "";
    child.stdout.on("data", (b: Buffer) => {
      out += b.toString();
      if (out.includes("ready")) resolve({ child, pid: child.pid!, exited });
    });
    child.once("exit", (code) => reject(new Error(`worker exited with ${code} before it was ready`)));
  });
}

function lines(file: string): { kind: string; callId: string; pid: number }[] {
  if (!existsSync(file)) return [];
  return readFileSync(file, "utf8")
    .split("\n")
    .filter((l) => l !== "")
    .map((l) => {
      const [kind, callId, pid] = l.split(" ");
      return { kind: kind!, callId: callId!, pid: Number(pid) };
    });
}

async function until(cond: () => boolean | Promise<boolean>): Promise<void> {
  while (!(await cond())) await new Promise((r) => setTimeout(r, 25));
}

describe("worker processes", () => {
  const dir = mkdtempSync(join(tmpdir(), "baton-workers-"));
  const procs: Proc[] = [];
  let prefix: string;
  let bus: Bus;
  let results: ResultCollector;

  beforeAll(async () => {
    prefix = randomToolPrefix();
    bus = await connectBus({ servers: TEST_NATS_URL, prefix, name: "processes-test", logger: createLogger("test", "silent") });
    results = await collectResults(bus);
  });

  afterAll(async () => {
    for (const p of procs) if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill("SIGKILL");
    await Promise.all(procs.map((p) => p.exited));
    await results.stop();
    await bus.drain();
    await deletePrefix(prefix);
    rmSync(dir, { recursive: true, force: true });
  });

  it("finishes a call exactly once when its worker is killed mid-call", async () => {
    const file = join(dir, "kill.log");
    const env = { BATON_NATS_URL: TEST_NATS_URL, PREFIX: prefix, RECORD_FILE: file, ACK_WAIT_MS: "1000", PRESENCE_TTL_MS: "1500" };
    const a = await startWorker(env);
    const b = await startWorker(env);
    procs.push(a, b);
    const registry = createToolRegistry(bus);
    await until(async () => (await registry.get("test.record"))?.workers === 2);

    const callId = await callTool(bus, "test.record", { ms: 1_500 });
    await until(() => lines(file).some((l) => l.kind === "start" && l.callId === callId));
    const victim = lines(file).find((l) => l.callId === callId)!.pid;
    const [dead, alive] = victim === a.pid ? [a, b] : [b, a];
    dead.child.kill("SIGKILL");
    await dead.exited;

    const r = await results.waitFor(callId);
    expect(r).toMatchObject({ ok: true, output: { pid: alive.pid }, workerId: `pid-${alive.pid}` });
    const runs = lines(file).filter((l) => l.callId === callId);
    expect(runs.filter((l) => l.kind === "done")).toEqual([{ kind: "done", callId, pid: alive.pid }]);
    expect(runs.filter((l) => l.kind === "start").map((l) => l.pid)).toEqual([dead.pid, alive.pid]);

    // The killed worker never unregistered; its presence stops counting after the TTL.
    await until(async () => (await registry.get("test.record"))?.workers === 1);
    alive.child.kill("SIGTERM");
    expect(await alive.exited).toBe(0);
    expect(results.all.filter((x) => x.callId === callId)).toHaveLength(1);
  });

  it("drains on SIGTERM without losing or repeating a call", async () => {
    const file = join(dir, "drain.log");
    const env = { BATON_NATS_URL: TEST_NATS_URL, PREFIX: prefix, RECORD_FILE: file, ACK_WAIT_MS: "1000", CONCURRENCY: "2" };
    const first = await startWorker(env);
    procs.push(first);
    const calls: string[] = [];
    for (let i = 0; i < 8; i++) calls.push(await callTool(bus, "test.record", { ms: 400 }));
    await until(() => lines(file).filter((l) => l.kind === "start").length >= 2);
    first.child.kill("SIGTERM");
    expect(await first.exited).toBe(0);

    // Whatever the first worker started, it finished before exiting.
    const startedByFirst = lines(file).filter((l) => l.kind === "start" && l.pid === first.pid).map((l) => l.callId);
    const doneByFirst = lines(file).filter((l) => l.kind === "done" && l.pid === first.pid).map((l) => l.callId);
    expect(doneByFirst.sort()).toEqual(startedByFirst.sort());
    expect(startedByFirst.length).toBeLessThan(calls.length);

    const second = await startWorker(env);
    procs.push(second);
    const answered = await Promise.all(calls.map((c) => results.waitFor(c)));
    expect(answered.every((r) => r.ok)).toBe(true);
    for (const c of calls) expect(lines(file).filter((l) => l.kind === "done" && l.callId === c)).toHaveLength(1);
    second.child.kill("SIGTERM");
    expect(await second.exited).toBe(0);
  });

  it("the standalone worker (src/main.ts) serves what the worker module does, the llm.* tools included, and drains on SIGTERM", async () => {
    const child = spawn(process.execPath, [join(here, "main.ts")], {
      env: { ...process.env, BATON_NATS_URL: TEST_NATS_URL, BATON_BUS_PREFIX: prefix, BATON_LOG_LEVEL: "warn" },
      stdio: ["ignore", "ignore", "inherit"],
    });
    const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
    procs.push({ child, pid: child.pid!, exited });
    const registry = createToolRegistry(bus);
    const names = ["echo", "math.sum", "http.request", "sandbox.run", "llm.chat", "llm.embed", "llm.image"];
    await until(async () => (await Promise.all(names.map((n) => registry.get(n)))).every((d) => (d?.workers ?? 0) > 0));
    child.kill("SIGTERM");
    expect(await exited).toBe(0);
  });
});
