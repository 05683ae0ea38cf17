/**
 * Tool-call throughput and dispatch-to-result latency with 1, 2 and 4 separately started
 * worker processes, beside the raw JetStream floor measured in the same run.
 *
 *   ./baton node bench/tools/run.ts [--calls=3000] [--window=256] [--serial=300] [--workers=1,2,4] [--concurrency=64]
 *
 * Baton: the bench publishes ToolCalls as the executor does (`messaging.callTool`, one
 * JetStream publish each, pipelined, at most `window` unanswered), worker processes built on
 * `@baton/sdk` run `bench.noop` (input and output checked by zod, result recorded in KV,
 * `tool.result` command sent), and the bench reads the results from the commands stream.
 * Latency: from just before the publish to the result's arrival.
 *
 * Floor: the same shape on plain JetStream, no Baton code — publish a work item to a
 * work-queue stream, N processes take it from a shared durable consumer, publish a
 * reply to a reply stream and ack; the bench reads the replies.
 *
 * Two measurements per row: under load (pipelined, `window` unanswered: throughput, and
 * latency including queueing) and unloaded (`serial` calls one at a time: the latency of
 * one call through the machinery). Prints markdown tables with the Baton / floor ratios.
 */
import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { AckPolicy, jetstream, jetstreamManager, RetentionPolicy, StorageType } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { connectBus } from "@baton/bus";
import { ToolResultSchema, decode } from "@baton/contracts";
import { createMessaging } from "@baton/messaging";
import { createToolRegistry } from "@baton/sdk";
import { deletePrefix } from "@baton/sdk/testing";
import { createLogger } from "@baton/telemetry";

const here = dirname(fileURLToPath(import.meta.url));
const NATS = process.env.BATON_NATS_URL ?? "nats://127.0.0.1:4222";
const arg = (name: string, dflt: string): string => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? dflt;
const CALLS = Number(arg("calls", "3000"));
const WINDOW = Number(arg("window", "256"));
const WARMUP = Math.min(300, Math.floor(CALLS / 10));
/** Calls of the unloaded latency run (one call at a time). */
const SERIAL = Number(arg("serial", "300"));
const WORKERS = arg("workers", "1,2,4").split(",").map(Number);
const CONCURRENCY = arg("concurrency", "64");

interface Stats {
  perSec: number;
  p50: number;
  p99: number;
}

function spawnReady(file: string, env: Record<string, string>): Promise<ChildProcess> {
  const child = spawn(process.execPath, [file], { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "inherit"] });
  return new Promise((resolve, reject) => {
    let out = "";
    child.stdout.on("data", (b: Buffer) => {
      out += b.toString();
      if (out.includes("ready")) resolve(child);
    });
    child.once("exit", (code) => reject(new Error(`${file} exited with ${code}`)));
  });
}

async function stopAll(children: ChildProcess[]): Promise<void> {
  await Promise.all(
    children.map(
      (c) =>
        new Promise<void>((resolve) => {
          if (c.exitCode !== null) return resolve();
          c.removeAllListeners("exit");
          c.once("exit", () => resolve());
          c.kill("SIGTERM");
        }),
    ),
  );
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

/**
 * Sends `total` items through `send` keeping at most WINDOW unanswered; `answered(id)`
 * is called by the reader. Returns the stats of the items after the warm-up.
 */
async function drive(total: number, window: number, send: (id: number) => Promise<void>, onAnswer: (cb: (id: number) => void) => void): Promise<Stats> {
  const warmup = Math.min(300, Math.floor(total / 10));
  const sentAt = new Array<number>(total);
  const latency: number[] = [];
  let next = 0;
  let answered = 0;
  let measuredStart = 0;
  let finish!: () => void;
  const finished = new Promise<void>((r) => (finish = r));
  let wake: (() => void) | undefined;
  const pending = new Set<number>();
  const failed: unknown[] = [];
  onAnswer((id) => {
    if (id >= total || sentAt[id] === undefined) return;
    const t = performance.now();
    if (id >= warmup) latency.push(t - sentAt[id]);
    answered++;
    if (answered === warmup) measuredStart = t;
    const w = wake;
    wake = undefined;
    w?.();
    if (answered === total) finish();
  });
  while (next < total) {
    while (next - answered >= window) await new Promise<void>((r) => (wake = r));
    const id = next++;
    sentAt[id] = performance.now();
    // Publishes are pipelined (not awaited one by one), so the publisher is not the bottleneck.
    pending.add(id);
    void send(id).then(
      () => pending.delete(id),
      (err: unknown) => failed.push(err),
    );
    if (failed.length > 0) throw failed[0] as Error;
  }
  await finished;
  const elapsed = (performance.now() - measuredStart) / 1000;
  latency.sort((a, b) => a - b);
  return { perSec: (total - warmup) / elapsed, p50: percentile(latency, 50), p99: percentile(latency, 99) };
}

async function baton(workers: number): Promise<{ load: Stats; serial: Stats }> {
  const prefix = `bench_${randomBytes(4).toString("hex")}`;
  const bus = await connectBus({ servers: NATS, prefix, name: "bench-tools", logger: createLogger("bench", "warn") });
  const messaging = createMessaging(bus);
  const children: ChildProcess[] = [];
  try {
    for (let i = 0; i < workers; i++) children.push(await spawnReady(join(here, "worker.ts"), { BATON_NATS_URL: NATS, PREFIX: prefix, CONCURRENCY }));
    const registry = createToolRegistry(bus);
    while (((await registry.get("bench.noop"))?.workers ?? 0) < workers) await new Promise((r) => setTimeout(r, 50));
    let deliver: (id: number) => void = () => undefined;
    let base = 0;
    const sub = await bus.consume(
      { stream: "commands", durable: "bench_results", filterSubjects: [messaging.subjects.command("tool.result")], concurrency: 512, maxAckPending: 4096, ack: "plain" /* as the executor */ },
      async (msg) => {
        const r = decode(ToolResultSchema, msg.data);
        if (!r.ok) throw new Error(`call failed: ${r.error?.code} ${r.error?.message}`);
        deliver(Number(r.callId.split(".")[1]) - base);
      },
    );
    const call = async (id: number): Promise<void> => {
      await messaging.callTool({ callId: `1.${base + id}.1`, tool: "bench.noop", tenantId: "bench", executionId: 1, nodeId: String(base + id), attempt: 1, args: { n: id } });
    };
    const load = await drive(CALLS, WINDOW, call, (cb) => (deliver = cb));
    base = CALLS;
    const serial = await drive(SERIAL, 1, call, (cb) => (deliver = cb));
    await sub.stop();
    return { load, serial };
  } finally {
    await stopAll(children);
    await bus.drain();
    await deletePrefix(prefix, NATS);
  }
}

async function raw(workers: number): Promise<{ load: Stats; serial: Stats }> {
  const id = randomBytes(4).toString("hex");
  const nc = await connect({ servers: NATS, noAsyncTraces: true });
  const jsm = await jetstreamManager(nc);
  const js = jetstream(nc);
  const work = `RAWBENCH_${id}_WORK`;
  const reply = `RAWBENCH_${id}_REPLY`;
  const children: ChildProcess[] = [];
  try {
    await jsm.streams.add({ name: work, subjects: [`rb_${id}.work`], retention: RetentionPolicy.Workqueue, storage: StorageType.File });
    await jsm.streams.add({ name: reply, subjects: [`rb_${id}.reply`], retention: RetentionPolicy.Workqueue, storage: StorageType.File });
    await jsm.consumers.add(work, { durable_name: "workers", ack_policy: AckPolicy.Explicit, max_ack_pending: 4096 });
    await jsm.consumers.add(reply, { durable_name: "reader", ack_policy: AckPolicy.Explicit, max_ack_pending: 4096 });
    for (let i = 0; i < workers; i++) children.push(await spawnReady(join(here, "raw-worker.ts"), { BATON_NATS_URL: NATS, RAW_ID: id, CONCURRENCY }));
    let deliver: (n: number) => void = () => undefined;
    let base = 0;
    const messages = await (await js.consumers.get(reply, "reader")).consume({ max_messages: 512 });
    const reading = (async () => {
      for await (const m of messages) {
        m.ack();
        deliver(Number(new TextDecoder().decode(m.data)) - base);
      }
    })();
    const enc = new TextEncoder();
    const item = async (n: number): Promise<void> => void (await js.publish(`rb_${id}.work`, enc.encode(String(base + n))));
    const load = await drive(CALLS, WINDOW, item, (cb) => (deliver = cb));
    base = CALLS;
    const serial = await drive(SERIAL, 1, item, (cb) => (deliver = cb));
    await messages.close();
    await reading;
    return { load, serial };
  } finally {
    await stopAll(children);
    await jsm.streams.delete(work).catch(() => false);
    await jsm.streams.delete(reply).catch(() => false);
    await nc.close();
  }
}

const fmt = (n: number, d = 0): string => n.toFixed(d);
const load: string[] = [];
const serial: string[] = [];
for (const n of WORKERS) {
  const b = await baton(n);
  const f = await raw(n);
  load.push(
    `| ${n} | ${fmt(b.load.perSec)} | ${fmt(f.load.perSec)} | ${fmt(b.load.perSec / f.load.perSec, 2)} | ${fmt(b.load.p50, 1)} | ${fmt(b.load.p99, 1)} | ${fmt(f.load.p50, 1)} | ${fmt(f.load.p99, 1)} |`,
  );
  serial.push(
    `| ${n} | ${fmt(b.serial.p50, 2)} | ${fmt(b.serial.p99, 2)} | ${fmt(f.serial.p50, 2)} | ${fmt(f.serial.p99, 2)} | ${fmt(b.serial.p50 / f.serial.p50, 1)}× | ${fmt(b.serial.p99 / f.serial.p99, 1)}× |`,
  );
  process.stderr.write(`workers=${n} done\n`);
}
process.stdout.write(
  [
    `Under load: ${CALLS} calls per row (${WARMUP} warm-up not measured), pipelined, at most ${WINDOW} unanswered; worker concurrency ${CONCURRENCY}.`,
    "",
    "| worker processes | Baton calls/s | floor items/s | Baton/floor | Baton p50 ms | Baton p99 ms | floor p50 ms | floor p99 ms |",
    "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ...load,
    "",
    `Unloaded: ${SERIAL} calls one at a time (dispatch-to-result latency without queueing).`,
    "",
    "| worker processes | Baton p50 ms | Baton p99 ms | floor p50 ms | floor p99 ms | p50 Baton/floor | p99 Baton/floor |",
    "|---:|---:|---:|---:|---:|---:|---:|",
    ...serial,
    "",
  ].join("\n"),
);
