/**
 * Randomized chaos for the executor's durability promises (docs/workflows.md "Scheduling and
 * durability", docs/events.md "The shape of a timeline", ADR 002 and 004).
 *
 * The gateway, the tool worker (with the recording test tools of test/workflows.ts) and the
 * review service run in this process; `--executors` executors (default 2) run as their own OS
 * processes (`node bin/baton.ts --target=executor`, ack wait 2 s). The driver submits a stream
 * of executions of mixed shapes (sequences, fan-out with all/any/n joins, forEach over a tool
 * and over child runs with a concurrency cap, whileLoops, sub-workflows, delays, retries of a
 * flaky tool, reviews in the run and in a sub-run that it approves or rejects after a while,
 * cancels of some runs) while, at random moments, it SIGKILLs an executor (restarted after a
 * while) and deletes random live executions' Redis checkpoints. Then, with every executor up
 * and every review answered, once every run and its child runs have ended (a child may end well
 * after its parent: a command a killed executor held comes back after the 30 s ack wait, and
 * the wait gives up after 180 s for the runs and 120 s more for the children), it checks each
 * execution and each of its child runs:
 * - it ended (completed, failed, cancelled) with the status and output its shape should give; a
 *   run cancelled keeps the cancel's reason as its error; with worker faults, a run that failed
 *   with BATON_TOOL_DELIVERIES_EXHAUSTED (a call's deliveries lost, docs/tools.md) is excused and
 *   said;
 * - no journal row is left running, and no node attempt completed twice; a completed run of a
 *   loop-free shape has exactly one completed row per node it should have run;
 * - every recorded tool call (`rec.sleep` call ids) ran at most once, a completed run made
 *   exactly the calls its shape makes, and a flaky tool ran `failures + 1` times;
 * - a completed run started the child runs its shape starts, no more;
 * - its events, read from the SSE stream, pass timelineProblems.
 *
 * Fault kinds besides those (all off by default; docs/dev/chaos.md):
 * - `--stall=F`: that fraction of the process faults SIGSTOPs an executor for 2.5–6 s (longer
 *   than its ack wait), then SIGCONTs it: it wakes with a stale cache and stale work in flight;
 * - `--workers=N`: the tool workers run as N OS processes (bench/chaos/worker.ts, ack wait 2 s),
 *   and `--worker-faults=F` of the process faults SIGKILL or SIGSTOP one of them. A call may
 *   then run again (at-least-once, docs/tools.md) only when a fault of its worker interrupted
 *   it; the flaky tool's count and answer may grow by those re-runs;
 * - `--pg-fail=R`: now and then, for 1–4 s, that fraction of the journal's writes fails
 *   (SQLSTATE 40001, a trigger in the round's schema);
 * - `--loss-all=P`: that fraction of the checkpoint losses deletes every checkpoint of the round.
 *
 * Features under the faults (also off by default; they draw from generators of their own):
 * - `--deadlines=F`: that fraction of the runs is started with a `deadlineMs` of 0.5–8 s. Such a
 *   run either ends as its shape says or fails with BATON_DEADLINE_EXCEEDED, not before its
 *   deadline; it (and every child run) completes no later than a second past it, and no node of
 *   it starts later than that;
 * - `--forks=F`: after that fraction of the starts, an earlier run that completed is forked from
 *   one of its kept checkpoints (time travel). The fork must end as its source did, with the same
 *   output, and (loop-free shapes) without running again a node completed at that version;
 * - `--tenant-cap=N`: BATON_TENANT_MAX_RUNNING=N. Runs wait queued for a slot; at no moment were
 *   more than N of the round's top-level runs running or paused (their rows' startedAt to
 *   completedAt, each shortened by 100 ms at both ends for the processes' clocks);
 * - `--max-concurrency=N`: every run's definition has `limits.maxConcurrency` N; at no moment did
 *   more than N of a run's nodes (reviews aside) have an attempt running, by its journal rows;
 * - `--large=F`: BATON_LARGE_RESULT_BYTES is 1024, and that fraction of the runs has every
 *   `rec.sleep` call answer 1.1–6 KB (a `pad`), so their results go by reference (the object
 *   bucket, then blobs). Besides the usual checks, every blob reference in the journal rows of
 *   such a completed run (and its child runs) must still be readable (`GET /api/blobs/:hash`);
 * - `--updates=F`: that fraction of the runs has its workflow updated 0–2 s after its start, to a
 *   version with other nodes and another output. The run, and any fork of it, must still end as
 *   the version it started on says (item 7: every execution is pinned to its version). And half
 *   way through the starts the child workflows that sub and subReview start by slug get a
 *   version 2 that answers differently: runs started before keep version 1 for their children,
 *   runs started after get version 2;
 * - `--rogue=F`: at that fraction of the chaos's moments, a worker outside the SDK takes one
 *   `rec.sleep` call from the queue, acks it and never answers. The recovery sweep must fail it
 *   (BATON_EXECUTOR_CALL_LOST) a minute after its run's last step: its run, and a parent of it,
 *   must end (failed with that code in its error, unless it ended otherwise first), not wait.
 *
 *   ./baton node bench/chaos/run.ts [--seed=N] [--rounds=R] [--executions=N] [--executors=2]
 *                                   [--chaos-ms=2500] [--loss=0.4] [--cancel=0.1] [--verbose]
 *                                   [--stall=0] [--workers=0] [--worker-faults=0] [--pg-fail=0] [--loss-all=0]
 *                                   [--deadlines=0] [--forks=0] [--tenant-cap=0] [--max-concurrency=0]
 *                                   [--large=0] [--updates=0] [--rogue=0]
 *
 * Each round prints its seed; `--seed=N --rounds=1` replays one (the chaos is random in time
 * too, so a replay is likely but not certain to fail the same way). Exit code 1 when a check
 * failed. Everything the run made (schema, streams, Redis keys, processes) is removed at the end.
 */
import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { isDeepStrictEqual } from "node:util";
import type { Redis } from "ioredis";
import pg from "pg";
import { createRedis } from "@baton/checkpoints";
import { loadConfig } from "@baton/config";
import { createLogger } from "@baton/telemetry";
import { streamNames } from "@baton/bus";
import { decode, ToolCallSchema } from "@baton/contracts";
import { toolDurable } from "@baton/sdk";
import { connect } from "@nats-io/transport-node";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
// mulberry32: a small seeded generator, so a round's choices replay from its seed.
import { mulberry32 as rng } from "../../libs/engine/src/test-support.ts";
import { startBaton } from "../../bin/start.ts";
import type { BatonHandle } from "../../bin/start.ts";
import { api, DATABASE_URL, freePort, isolatedConfig, removeIsolated, waitFor } from "../../test/helpers.ts";
import type { Api } from "../../test/helpers.ts";
import type { ExecutionRow, NodeRow, Recorder, SseEvent } from "../../test/workflows.ts";
import { collectEvents, createDefinition, getExecution, testTools, timelineProblems } from "../../test/workflows.ts";

const root = join(import.meta.dirname, "../..");
const { values: args } = parseArgs({
  options: {
    seed: { type: "string" },
    rounds: { type: "string", default: "1" },
    executions: { type: "string", default: "30" },
    executors: { type: "string", default: "2" },
    "chaos-ms": { type: "string", default: "2500" },
    loss: { type: "string", default: "0.4" },
    cancel: { type: "string", default: "0.1" },
    stall: { type: "string", default: "0" },
    workers: { type: "string", default: "0" },
    "worker-faults": { type: "string", default: "0" },
    "pg-fail": { type: "string", default: "0" },
    "loss-all": { type: "string", default: "0" },
    deadlines: { type: "string", default: "0" },
    forks: { type: "string", default: "0" },
    "tenant-cap": { type: "string", default: "0" },
    "max-concurrency": { type: "string", default: "0" },
    large: { type: "string", default: "0" },
    updates: { type: "string", default: "0" },
    rogue: { type: "string", default: "0" },
    shapes: { type: "string" },
    verbose: { type: "boolean", default: false },
  },
});


interface Expect {
  status: "completed" | "failed";
  output?: unknown;
  /** Completed rows per node of a completed run (loop-free shapes). */
  nodes?: Record<string, number>;
  /** `rec.sleep` calls a completed run (with its children) makes. */
  calls?: number;
  /** Child runs a completed run starts. */
  children?: number;
  /** For `flaky`: its key and how often it must have run. */
  flaky?: { key: string; count: number };
}

interface Planned {
  shape: string;
  definition: Record<string, unknown>;
  input: Record<string, unknown>;
  expect: Expect;
}

type Rand = () => number;
const int = (r: Rand, lo: number, hi: number) => lo + Math.floor(r() * (hi - lo + 1));
const sleepNode = (id: string, ms: number, v: unknown) => ({ id, type: "tool", config: { tool: "rec.sleep" }, input: { ms, v } });
/**
 * The fan-in the fanAll and mixed shapes start with: s → p1, p2 (sleeps of `lo`–400 ms), p3 (echo)
 * → j (their sum, 6). Its sleeps are the shape's first draws from `r`, so a seed replays the same.
 */
const fanIn = (r: Rand, lo: number) => ({
  nodes: [
    { id: "s", type: "setVariable", config: { values: { "$.vars.k": 1 } } },
    sleepNode("p1", int(r, lo, 400), 1), sleepNode("p2", int(r, lo, 400), 2),
    { id: "p3", type: "tool", config: { tool: "echo" }, input: { v: 3 } },
    { id: "j", type: "transform", config: { expression: "p1.v + p2.v + p3.v" } },
  ],
  edges: [{ from: "s", to: "p1" }, { from: "s", to: "p2" }, { from: "s", to: "p3" }, { from: "p1", to: "j" }, { from: "p2", to: "j" }, { from: "p3", to: "j" }],
});
const ones = (ids: string[]) => Object.fromEntries(ids.map((i) => [i, 1]));

/** The shapes: each picks its parameters from the round's generator and says what it must give. */
const shapes: Record<string, (r: Rand, tag: string) => Planned> = {
  seq: (r) => {
    const n = int(r, 3, 7);
    const ids = Array.from({ length: n }, (_, i) => `s${i + 1}`);
    return {
      shape: "seq",
      definition: {
        nodes: ids.map((id, i) => sleepNode(id, int(r, 20, 300), i + 1)),
        edges: ids.slice(1).map((id, i) => ({ from: ids[i]!, to: id })),
        output: { first: "$.s1.v", last: `$.s${n}.v` },
      },
      input: {},
      expect: { status: "completed", output: { first: 1, last: n }, nodes: ones(ids), calls: n, children: 0 },
    };
  },
  fanAll: (r) => {
    const fan = fanIn(r, 20);
    return {
      shape: "fanAll",
      definition: {
        start: "s",
        nodes: [...fan.nodes, sleepNode("t", int(r, 20, 200), "$.j")],
        edges: [...fan.edges, { from: "j", to: "t" }],
        output: { r: "$.t.v" },
      },
      input: {},
      expect: { status: "completed", output: { r: 6 }, nodes: ones(["s", "p1", "p2", "p3", "j", "t"]), calls: 3, children: 0 },
    };
  },
  fanAny: (r) => ({
    shape: "fanAny",
    definition: {
      start: "s",
      nodes: [
        { id: "s", type: "setVariable", config: { values: { x: 1 } } },
        sleepNode("slow", int(r, 400, 1500), "S"),
        sleepNode("fast", int(r, 10, 100), "F"),
        { ...sleepNode("j", 10, "J"), join: "any" },
      ],
      edges: [{ from: "s", to: "slow" }, { from: "s", to: "fast" }, { from: "slow", to: "j" }, { from: "fast", to: "j" }],
      output: { j: "$.j.v", slow: "$.slow.v" },
    },
    input: {},
    expect: { status: "completed", output: { j: "J", slow: "S" }, nodes: ones(["s", "slow", "fast", "j"]), calls: 3, children: 0 },
  }),
  fanN: (r) => ({
    shape: "fanN",
    definition: {
      start: "s",
      nodes: [
        { id: "s", type: "setVariable", config: { values: { x: 1 } } },
        sleepNode("b1", int(r, 20, 800), 1), sleepNode("b2", int(r, 20, 800), 2), sleepNode("b3", int(r, 20, 800), 3),
        { id: "j", type: "transform", config: { expression: "'N'" }, join: { n: 2 } },
        sleepNode("after", 20, "$.j"),
      ],
      edges: [{ from: "s", to: "b1" }, { from: "s", to: "b2" }, { from: "s", to: "b3" }, { from: "b1", to: "j" }, { from: "b2", to: "j" }, { from: "b3", to: "j" }, { from: "j", to: "after" }],
      output: { j: "$.after.v" },
    },
    input: {},
    expect: { status: "completed", output: { j: "N" }, nodes: ones(["s", "b1", "b2", "b3", "j", "after"]), calls: 4, children: 0 },
  }),
  eachTool: (r) => {
    const xs = Array.from({ length: int(r, 3, 8) }, () => int(r, 1, 9));
    return {
      shape: "eachTool",
      definition: {
        nodes: [{ id: "work", type: "forEach", config: { items: "$.input.xs", tool: "rec.sleep", concurrency: int(r, 1, 3), itemInput: { ms: int(r, 20, 300), v: "$.item" }, reduce: "$sum(results.v)" } }],
        output: { sum: "$.work" },
      },
      input: { xs },
      expect: { status: "completed", output: { sum: xs.reduce((a, b) => a + b, 0) }, nodes: { work: 1 }, calls: xs.length, children: 0 },
    };
  },
  eachBody: (r) => {
    const xs = Array.from({ length: int(r, 2, 5) }, (_, i) => i + 1);
    return {
      shape: "eachBody",
      definition: {
        nodes: [
          { id: "each", type: "forEach", config: { items: "$.input.xs", concurrency: int(r, 1, 3), body: {
            nodes: [sleepNode("z", int(r, 50, 500), "$.input.item"), { id: "y", type: "transform", config: { expression: "z.v * 10" } }],
            edges: [{ from: "z", to: "y" }],
            output: { v: "$.y" },
          } } },
        ],
        output: { each: "$.each" },
      },
      input: { xs },
      expect: { status: "completed", output: { each: xs.map((x) => ({ v: x * 10 })) }, nodes: { each: 1 }, calls: xs.length, children: xs.length },
    };
  },
  loop: (r) => {
    const k = int(r, 2, 5);
    return {
      shape: "loop",
      definition: {
        start: "init",
        nodes: [
          { id: "init", type: "setVariable", config: { values: { "$.vars.i": 0 } } },
          { id: "loop", type: "whileLoop", config: { condition: `vars.i < ${k}`, maxIterations: 10 } },
          sleepNode("body", int(r, 10, 200), "$.vars.i"),
          { id: "inc", type: "transform", config: { expression: "body.v + 1" }, output: "$.vars.i" },
          { id: "work", type: "transform", config: { expression: "vars.i" } },
        ],
        edges: [{ from: "init", to: "loop" }, { from: "loop", to: "body", when: "body" }, { from: "body", to: "inc" }, { from: "inc", to: "loop" }, { from: "loop", to: "work", when: "exit" }],
        output: { r: "$.work" },
      },
      input: {},
      expect: { status: "completed", output: { r: k }, nodes: { init: 1, loop: k + 1, body: k, inc: k, work: 1 }, calls: k, children: 0 },
    };
  },
  sub: () => ({
    shape: "sub",
    definition: {
      nodes: [{ id: "sub", type: "subworkflow", config: { workflow: { slug: "chaos-child" } }, input: { v: "$.input.v" } }, { id: "after", type: "transform", config: { expression: "sub.v & '.'" } }],
      edges: [{ from: "sub", to: "after" }],
      output: { r: "$.after" },
    },
    input: { v: "deep" },
    expect: { status: "completed", output: { r: "deep." }, nodes: ones(["sub", "after"]), calls: 1, children: 1 },
  }),
  delay: (r) => ({
    shape: "delay",
    definition: {
      nodes: [
        { id: "a", type: "tool", config: { tool: "echo" }, input: { x: 1 } },
        { id: "wait", type: "delay", config: { ms: int(r, 200, 2000) } },
        { id: "b", type: "transform", config: { expression: "a.x + 1" } },
      ],
      edges: [{ from: "a", to: "wait" }, { from: "wait", to: "b" }],
      output: { r: "$.b" },
    },
    input: {},
    expect: { status: "completed", output: { r: 2 }, nodes: ones(["a", "wait", "b"]), calls: 0, children: 0 },
  }),
  retry: (r, tag) => {
    const failures = int(r, 1, 2);
    const key = `k-${tag}`;
    return {
      shape: "retry",
      definition: {
        nodes: [
          { id: "f", type: "tool", config: { tool: "flaky" }, input: { key: "$.input.key", failures }, retry: { maxAttempts: failures + 1, initialDelayMs: int(r, 50, 600), jitter: 0 } },
          sleepNode("g", 20, "$.f.calls"),
        ],
        edges: [{ from: "f", to: "g" }],
        output: { calls: "$.g.v" },
      },
      input: { key },
      expect: { status: "completed", output: { calls: failures + 1 }, calls: 1, children: 0, flaky: { key, count: failures + 1 } },
    };
  },
  review: (r) => {
    const decision = r() < 0.7 ? "approve" : "reject";
    return {
      shape: "review",
      definition: {
        nodes: [
          sleepNode("a", int(r, 10, 200), "A"),
          { id: "review", type: "humanReview", config: { reason: "chaos" } },
          { id: "yes", type: "transform", config: { expression: "'yes'" }, output: "$.vars.verdict" },
          { id: "no", type: "transform", config: { expression: "'no'" }, output: "$.vars.verdict" },
        ],
        edges: [{ from: "a", to: "review" }, { from: "review", to: "yes" }, { from: "review", to: "no", when: "rejected" }],
        output: { verdict: "$.vars.verdict", a: "$.a.v" },
      },
      input: { decision },
      expect: { status: "completed", output: { verdict: decision === "approve" ? "yes" : "no", a: "A" }, nodes: ones(["a", "review", decision === "approve" ? "yes" : "no"]), calls: 1, children: 0 },
    };
  },
  subReview: (r) => {
    const decision = r() < 0.7 ? "approve" : "reject";
    return {
      shape: "subReview",
      definition: {
        nodes: [
          { id: "sub", type: "subworkflow", config: { workflow: { slug: "chaos-review-child" } }, input: { decision: "$.input.decision" } },
          sleepNode("after", 20, "$.sub.b"),
        ],
        edges: [{ from: "sub", to: "after" }],
        output: { r: "$.after.v" },
      },
      input: { decision },
      expect: decision === "approve"
        ? { status: "completed", output: { r: "ok" }, nodes: ones(["sub", "after"]), calls: 2, children: 1 }
        : { status: "failed" },
    };
  },
  mixed: (r) => {
    const fan = fanIn(r, 50);
    return {
      shape: "mixed",
      definition: {
        start: "s",
        nodes: [
          ...fan.nodes,
          { id: "each", type: "forEach", config: { items: "$.input.xs", concurrency: 3, body: {
            nodes: [sleepNode("z", int(r, 50, 400), "$.input.item"), { id: "y", type: "transform", config: { expression: "z.v * 10" } }],
            edges: [{ from: "z", to: "y" }],
          } } },
          sleepNode("t1", int(r, 20, 200), "$.j"),
          { id: "d", type: "delay", config: { ms: int(r, 50, 800) } },
          sleepNode("t2", int(r, 20, 200), "$.t1.v"),
          { id: "t3", type: "transform", config: { expression: "{ 'sum': t2.v, 'each': each }" } },
        ],
        edges: [
          ...fan.edges,
          { from: "j", to: "each" }, { from: "each", to: "t1" }, { from: "t1", to: "d" }, { from: "d", to: "t2" }, { from: "t2", to: "t3" },
        ],
        output: { r: "$.t3" },
      },
      input: { xs: [1, 2, 3, 4, 5] },
      expect: { status: "completed", output: { r: { sum: 6, each: [10, 20, 30, 40, 50] } }, nodes: ones(["s", "p1", "p2", "p3", "j", "each", "t1", "d", "t2", "t3"]), calls: 9, children: 5 },
    };
  },
};

interface Proc { child: ChildProcess; output: string[]; healthPort: number; index: number; kind: "executor" | "worker"; stalled?: boolean }
/** A fault a process suffered: SIGKILL at `at`, or SIGSTOP from `at` to `until` (SIGCONT). */
interface Fault { pid: number; kind: "kill" | "stop"; at: number; until?: number }
/** One handler run of a recorded tool in a worker process (bench/chaos/worker.ts). */
interface ToolRun { c: string; t: string; p: number; r: number; s: number; e?: number }
interface Run extends Planned {
  id: number;
  cancel?: { atMs: number; answered?: number };
  decideAfterMs: number;
  /** The `deadlineMs` it was started with (--deadlines). */
  deadlineMs?: number;
  /** A fork (--forks): of which run, from which checkpoint version, and the nodes completed at that version. */
  fork?: { of: number; version: number; done: string[] };
  /** --large: the characters each of its `rec.sleep` calls answers besides its value. */
  pad?: number;
  /** --updates: when its workflow's update answered, and with what status. */
  updated?: { atMs: number; answered?: number };
}

/**
 * The definition with `pad` on every `rec.sleep` call it makes itself (tool nodes, forEach
 * items, forEach bodies); the sub-workflows it starts by slug are left as they are.
 */
function padded(definition: Record<string, unknown>, pad: number): Record<string, unknown> {
  const nodes = (definition.nodes as Record<string, unknown>[]).map((n) => {
    const config = (n.config ?? {}) as Record<string, unknown>;
    if (n.type === "tool" && config.tool === "rec.sleep") return { ...n, input: { ...(n.input as object), pad } };
    if (n.type !== "forEach") return n;
    return {
      ...n,
      config: {
        ...config,
        ...(config.tool === "rec.sleep" ? { itemInput: { ...(config.itemInput as object), pad } } : {}),
        ...(config.body ? { body: padded(config.body as Record<string, unknown>, pad) } : {}),
      },
    };
  });
  return { ...definition, nodes };
}

/** Every `blob:` reference in a value. */
function blobRefs(value: unknown, into: Set<string> = new Set()): Set<string> {
  if (Array.isArray(value)) for (const v of value) blobRefs(v, into);
  else if (value && typeof value === "object") {
    const ref = (value as Record<string, unknown>).$ref;
    if (typeof ref === "string" && ref.startsWith("blob:")) into.add(ref);
    else for (const v of Object.values(value)) blobRefs(v, into);
  }
  return into;
}

/** What --updates replaces a run's workflow with: other nodes, another output. */
const otherVersion = { nodes: [{ id: "v2", type: "transform", config: { expression: "'version 2'" } }], output: { v2: "$.v2" } };

/**
 * The largest set of spans open at one moment (a span that takes no time is none; where one
 * ends as another starts, the first is closed first).
 */
function mostAtOnce(spans: readonly { id: string; from: number; to: number }[]): string[] {
  const edges = spans.filter((x) => x.to > x.from).flatMap((x) => [{ at: x.from, d: 1, id: x.id }, { at: x.to, d: -1, id: x.id }]).sort((x, y) => x.at - y.at || x.d - y.d);
  const open = new Set<string>();
  let most: string[] = [];
  for (const e of edges) {
    if (e.d > 0) open.add(e.id);
    else open.delete(e.id);
    if (open.size > most.length) most = [...open];
  }
  return most;
}

async function scanKeys(redis: Redis, pattern: string): Promise<string[]> {
  const keys: string[] = [];
  let cursor = "0";
  do {
    const [next, batch] = await redis.scan(cursor, "MATCH", pattern, "COUNT", 500);
    cursor = next;
    keys.push(...batch);
  } while (cursor !== "0");
  return keys;
}

function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once("exit", () => resolve()));
}

async function round(seed: number): Promise<string[]> {
  const r = rng(seed);
  // The chaos draws from its own generator, so the plan of executions does not depend on timing.
  const rc = rng(seed ^ 0x5bd1e995);
  const verbose = args.verbose;
  const log = (msg: string) => console.log(`[seed ${seed} +${((Date.now() - t0) / 1000).toFixed(1)}s] ${msg}`);
  const t0 = Date.now();
  const tenantCap = Number(args["tenant-cap"]);
  const largeRate = Number(args.large);
  const { config, env } = isolatedConfig({
    BATON_EXECUTOR_ACK_WAIT_MS: "2000", BATON_CHECKPOINT_DELTA_ABOVE_BYTES: r() < 0.5 ? "0" : "65536",
    ...(tenantCap > 0 ? { BATON_TENANT_MAX_RUNNING: String(tenantCap) } : {}),
    // Its least: a padded call's answer (1.1–6 KB) goes by reference.
    ...(largeRate > 0 ? { BATON_LARGE_RESULT_BYTES: "1024" } : {}),
  });
  const redis: Redis = createRedis(config.redisUrl);
  const t = testTools(redis, config.prefix);
  const rec: Recorder = t.recorder;
  // Postgres faults and process faults of the new kinds draw from generators of their own, so
  // a seed's kills and checkpoint losses stay what they were without them.
  const rp = rng(seed ^ 0x27d4eb2f);
  // Deadlines, and forks (whose choices depend on which runs ended by then), likewise.
  const rd = rng(seed ^ 0x68e31da4);
  const rf = rng(seed ^ 0x1b873593);
  // Large results and updates too.
  const rl = rng(seed ^ 0x85ebca6b);
  const ru = rng(seed ^ 0x2c1b3c6d);
  const rr = rng(seed ^ 0x7feb352d);
  /** --rogue: the calls a worker outside the SDK took, acked and never answered. */
  const stolen = new Set<string>();
  const procs: Proc[] = [];
  const slots: (Proc | undefined)[] = [];
  const wslots: (Proc | undefined)[] = [];
  const faults: Fault[] = [];
  let local: BatonHandle | undefined;
  let rogueNc: Awaited<ReturnType<typeof connect>> | undefined;
  const problems: string[] = [];
  let stopChaos = false;
  const nWorkers = Number(args.workers);
  const toolAckWaitMs = 2000;

  async function startProc(kind: "executor" | "worker", index: number): Promise<void> {
    const healthPort = await freePort();
    const entry = kind === "executor" ? [join(root, "bin/baton.ts"), "--target=executor"] : [join(root, "bench/chaos/worker.ts")];
    const child = spawn(process.execPath, entry, {
      cwd: root,
      env: { ...process.env, ...env, BATON_HEALTH_PORT: String(healthPort), CHAOS_TOOL_ACK_WAIT_MS: String(toolAckWaitMs) },
      stdio: ["ignore", "pipe", "pipe"],
    });
    const p: Proc = { child, output: [], healthPort, index, kind };
    child.stdout.on("data", (d: Buffer) => p.output.push(d.toString()));
    child.stderr.on("data", (d: Buffer) => p.output.push(d.toString()));
    procs.push(p);
    await waitFor(`${kind} ${index} ready`, async () => {
      if (child.exitCode !== null) throw new Error(`${kind} exited ${child.exitCode}: ${p.output.join("").slice(-2000)}`);
      if (kind === "worker") return p.output.join("").includes("chaos-worker ready") ? true : undefined;
      const res = await fetch(`http://127.0.0.1:${healthPort}/readyz`).catch(() => undefined);
      return res?.status === 200 ? true : undefined;
    }, 60_000);
    (kind === "executor" ? slots : wslots)[index] = p;
  }
  const startExecutor = (index: number) => startProc("executor", index);

  /** SIGKILLs a process (restarted 0.2–3 s later) or SIGSTOPs it for longer than the ack wait (then SIGCONT). */
  async function fault(p: Proc, kind: "kill" | "stop"): Promise<void> {
    const table = p.kind === "executor" ? slots : wslots;
    const pid = p.child.pid!;
    if (kind === "kill") {
      table[p.index] = undefined;
      p.child.kill("SIGKILL");
      faults.push({ pid, kind, at: Date.now() });
      await exited(p.child);
      if (verbose) log(`killed ${p.kind} ${p.index} (pid ${pid})`);
      const down = int(rc, 200, 3000);
      void (async () => {
        await new Promise((res) => setTimeout(res, down));
        await startProc(p.kind, p.index).catch((err: unknown) => problems.push(`restart of ${p.kind} ${p.index}: ${(err as Error).message}`));
      })();
    } else {
      // Longer than the ack wait (2 s for executors and the chaos workers): the process's
      // commands or calls go to another one meanwhile, and it wakes with its stale work.
      const ms = int(rc, 2500, 6000);
      p.stalled = true;
      p.child.kill("SIGSTOP");
      const f: Fault = { pid, kind, at: Date.now() };
      faults.push(f);
      if (verbose) log(`stopped ${p.kind} ${p.index} (pid ${pid}) for ${ms} ms`);
      void (async () => {
        await new Promise((res) => setTimeout(res, ms));
        f.until = Date.now();
        p.child.kill("SIGCONT");
        p.stalled = false;
        if (verbose) log(`continued ${p.kind} ${p.index} (pid ${pid})`);
      })();
    }
  }

  try {
    // With --workers, the tool workers run as OS processes (bench/chaos/worker.ts), not here.
    local = await startBaton({ config: loadConfig({ ...env, BATON_TARGET: nWorkers > 0 ? "gateway,review" : "gateway,worker,review" }), logger: createLogger("chaos", "warn"), ...(nWorkers > 0 ? {} : { tools: t.tools }) });
    const a: Api = api(local.gatewayPort!, config.apiKey!);
    const nExecutors = Number(args.executors);
    for (let i = 0; i < nExecutors; i++) await startExecutor(i);
    for (let i = 0; i < nWorkers; i++) await startProc("worker", i);
    if (nWorkers > 0) {
      await waitFor("worker tools registered", async () => {
        const res = await a.call<{ workers: number }>("GET", "/api/tools/rec.sleep");
        return res.status === 200 && res.body.workers > 0 ? true : undefined;
      }, 30_000);
    }

    const childId = await createDefinition(a, "chaos-child", { nodes: [sleepNode("z", 200, "$.input.v")], output: { v: "$.z.v" } }, { slug: "chaos-child" });
    const reviewChildId = await createDefinition(a, "chaos-review-child", {
      nodes: [sleepNode("a", 30, "A"), { id: "review", type: "humanReview", config: { reason: "child check" } }, { id: "b", type: "transform", config: { expression: "'ok'" } }],
      edges: [{ from: "a", to: "review" }, { from: "review", to: "b" }],
      output: { b: "$.b" },
    }, { slug: "chaos-review-child" });
    const workflowIds = new Map<string, number>();

    const runs: Run[] = [];
    const started = new Map<number, number>();
    const names = args.shapes ? args.shapes.split(",") : Object.keys(shapes);
    const total = Number(args.executions);
    const cancelRate = Number(args.cancel);
    const lossRate = Number(args.loss);
    const lossAllRate = Number(args["loss-all"]);
    const stallRate = Number(args.stall);
    const workerFaultRate = nWorkers > 0 ? Number(args["worker-faults"]) : 0;
    const pgFailRate = Number(args["pg-fail"]);
    const chaosMs = Number(args["chaos-ms"]);
    const deadlineRate = Number(args.deadlines);
    const forkRate = Number(args.forks);
    const maxConcurrency = Number(args["max-concurrency"]);
    const updateRate = Number(args.updates);
    const rogueRate = Number(args.rogue);
    rogueNc = rogueRate > 0 ? await connect({ servers: config.natsUrl }) : undefined;
    /** A worker outside the SDK that acks a call before answering, and dies: it takes one rec.sleep call, acks it, and is gone. */
    const steal = async (): Promise<void> => {
      const consumer = await jetstream(rogueNc!).consumers.get(streamNames(config.prefix).tools, toolDurable("rec.sleep"));
      const m = await consumer.next({ expires: 1000 });
      if (!m) return;
      const { callId } = decode(ToolCallSchema, m.data);
      await m.ackAck();
      stolen.add(callId);
      if (verbose) log(`a rogue worker took call ${callId} and will never answer it`);
    };
    /** --updates: whether the child workflows named by slug were updated (half way through the starts). */
    let childrenUpdated = false;
    let forks = 0;
    let kills = 0;
    let losses = 0;
    let stalls = 0;
    let workerFaults = 0;
    let pgWindows = 0;

    // Chaos: at random moments kill an executor (restarted after 0.2–3 s) or drop a live run's checkpoint.
    const chaos = (async () => {
      while (!stopChaos) {
        await new Promise((res) => setTimeout(res, int(rc, chaosMs / 2, chaosMs * 1.5)));
        if (stopChaos) break;
        if (rogueRate > 0 && rr() < rogueRate) {
          await steal().catch((err: unknown) => problems.push(`the rogue worker failed: ${(err as Error).message}`));
          continue;
        }
        if (rc() < lossRate) {
          const recent = await Promise.all(runs.slice(-15).map(async (x) => ({ run: x, row: await getExecution(a, x.id) })));
          const live = recent.filter((x) => x.row.status === "running" || x.row.status === "paused").map((x) => x.run);
          if (!live.length) continue;
          const target = live[int(rc, 0, live.length - 1)]!;
          // The run itself, or one of its children.
          let id = target.id;
          if (rc() < 0.4) {
            const kids = (await a.call<{ items: ExecutionRow[] }>("GET", `/api/agent-workflow-executions/${id}/children`)).body.items;
            if (kids.length) id = kids[int(rc, 0, kids.length - 1)]!.id;
          }
          const row = await getExecution(a, id);
          if (row.status !== "running" && row.status !== "paused") continue;
          if (lossAllRate > 0 && rp() < lossAllRate) {
            // Redis loses every checkpoint of the round at once (a flush, a failover to an empty replica).
            const keys = await scanKeys(redis, `${config.prefix}:checkpoint:*`);
            if (keys.length) await redis.del(...keys);
            losses++;
            if (verbose) log(`lost every checkpoint (${keys.length} keys)`);
            continue;
          }
          const n = await redis.del(`${config.prefix}:checkpoint:{${id}}`, `${config.prefix}:checkpoint:{${id}}:history`, `${config.prefix}:checkpoint:{${id}}:fwd`);
          losses++;
          if (verbose) log(`lost checkpoint of ${id} (${target.shape} ${target.id}, ${row.status}, ${n} keys)`);
        } else {
          // A process fault: an executor killed (the only kind without the flags below, drawn as
          // before), an executor stalled, or a tool worker killed or stalled.
          const u = stallRate > 0 || workerFaultRate > 0 ? rc() : 1;
          const onWorker = u >= stallRate && u < stallRate + workerFaultRate;
          const table = onWorker ? wslots : slots;
          const alive = table.map((p, i) => (p && !p.stalled ? i : -1)).filter((i) => i >= 0);
          if (!alive.length) continue;
          const p = table[alive[int(rc, 0, alive.length - 1)]!]!;
          const kind = onWorker ? (rc() < 0.5 ? "kill" : "stop") : u < stallRate ? "stop" : "kill";
          await fault(p, kind);
          if (onWorker) workerFaults++;
          else if (kind === "stop") stalls++;
          else kills++;
        }
      }
    })();

    // Transient Postgres failures: now and then, for 1–4 s, a fraction of the journal's writes
    // (node rows inserted or updated, execution rows updated) fail with SQLSTATE 40001, by a
    // trigger in the round's own schema.
    const pgChaos = pgFailRate > 0 ? (async () => {
      const db = new pg.Client({ connectionString: DATABASE_URL });
      // A connection the server ends (an administrator's pg_terminate_backend) fails the query in
      // flight; unheard, its error event would end the driver (seed 1115).
      db.on("error", () => undefined);
      await db.connect();
      const sch = `"${config.databaseSchema}"`;
      try {
        await db.query(`CREATE TABLE ${sch}.chaos_pg_fault (rate float8 NOT NULL)`);
        await db.query(`INSERT INTO ${sch}.chaos_pg_fault VALUES (0)`);
        await db.query(`CREATE FUNCTION ${sch}.chaos_pg_fail() RETURNS trigger LANGUAGE plpgsql AS $$
          BEGIN
            IF random() < (SELECT rate FROM ${sch}.chaos_pg_fault LIMIT 1) THEN
              RAISE EXCEPTION 'chaos: injected failure' USING ERRCODE = '40001';
            END IF;
            RETURN NEW;
          END $$`);
        await db.query(`CREATE TRIGGER chaos_pg_fail BEFORE INSERT OR UPDATE ON ${sch}.agent_workflow_node_executions FOR EACH ROW EXECUTE FUNCTION ${sch}.chaos_pg_fail()`);
        await db.query(`CREATE TRIGGER chaos_pg_fail BEFORE UPDATE ON ${sch}.agent_workflow_executions FOR EACH ROW EXECUTE FUNCTION ${sch}.chaos_pg_fail()`);
        while (!stopChaos) {
          await new Promise((res) => setTimeout(res, int(rp, 1000, 6000)));
          if (stopChaos) break;
          const on = int(rp, 1000, 4000);
          await db.query(`UPDATE ${sch}.chaos_pg_fault SET rate = $1`, [pgFailRate]);
          pgWindows++;
          if (verbose) log(`journal writes failing (${pgFailRate}) for ${on} ms`);
          await new Promise((res) => setTimeout(res, on));
          await db.query(`UPDATE ${sch}.chaos_pg_fault SET rate = 0`);
        }
        await db.query(`DROP TRIGGER chaos_pg_fail ON ${sch}.agent_workflow_node_executions`);
        await db.query(`DROP TRIGGER chaos_pg_fail ON ${sch}.agent_workflow_executions`);
      } finally {
        await db.end();
      }
    })() : Promise.resolve();

    // Reviews: each pending one is decided as its top-level run's input says, a while after it appeared.
    const seenReview = new Map<number, number>();
    let answering = true;
    const answer = (async () => {
      while (answering) {
        await new Promise((res) => setTimeout(res, 250));
        const res = await a.call<{ items: { id: number; executionId: number; nodeId: string }[] }>("GET", "/api/reviews?status=pending&limit=200").catch(() => undefined);
        for (const rv of res?.body.items ?? []) {
          const first = seenReview.get(rv.id) ?? Date.now();
          seenReview.set(rv.id, first);
          const row = await getExecution(a, rv.executionId).catch(() => undefined);
          if (!row) continue;
          const top = runs.find((x) => x.id === rv.executionId || x.id === row.parentExecutionId);
          if (!top || Date.now() - first < top.decideAfterMs) continue;
          const action = (row.input?.decision as string | undefined) ?? "approve";
          const sent = await a.call("POST", `/api/agent-workflow-executions/${rv.executionId}/resume`, { action, nodeId: rv.nodeId }).catch(() => undefined);
          if (verbose) log(`review ${rv.id} of ${rv.executionId} (${row.status}): ${action} → ${sent?.status ?? "error"} ${sent && sent.status !== 202 ? JSON.stringify(sent.body).slice(0, 200) : ""}`);
        }
      }
    })();

    /**
     * Forks a run that completed (not a retry: its flaky tool counts on across runs) from one of
     * its kept checkpoints, drawn at random; the fork is checked like a run of its source's shape,
     * for status and output. False when there was none to fork, or its checkpoints are gone
     * (a loss of every checkpoint of the round takes finished runs' too).
     */
    const completedRuns = new Set<number>();
    async function forkOne(): Promise<boolean> {
      const done = runs.filter((x) => !x.fork && !x.cancel && x.expect.status === "completed" && x.shape !== "retry");
      const ended: Run[] = [];
      for (const x of done) {
        if (!completedRuns.has(x.id) && (await getExecution(a, x.id)).status === "completed") completedRuns.add(x.id);
        if (completedRuns.has(x.id)) ended.push(x);
      }
      if (!ended.length) return false;
      const src = ended[int(rf, 0, ended.length - 1)]!;
      const list = await a.call<{ items: { version: number; nodes: Record<string, string> }[] }>("GET", `/api/agent-workflow-executions/${src.id}/checkpoints?limit=200`);
      if (list.status !== 200 || !list.body.items.length) return false;
      const cp = list.body.items[int(rf, 0, list.body.items.length - 1)]!;
      const res = await a.call<{ id: number }>("POST", `/api/agent-workflow-executions/${src.id}/fork`, { version: cp.version });
      if (res.status === 404) return false; // trimmed or lost between the list and the fork
      if (res.status !== 202) {
        problems.push(`fork of ${src.shape} ${src.id} at version ${cp.version} answered ${res.status}: ${JSON.stringify(res.body)}`);
        return false;
      }
      const doneAt = Object.entries(cp.nodes).filter(([, st]) => st === "completed").map(([id]) => id);
      runs.push({
        shape: `fork:${src.shape}`, definition: src.definition, input: src.input, expect: { status: "completed", output: src.expect.output }, id: res.body.id, decideAfterMs: src.decideAfterMs,
        fork: { of: src.id, version: cp.version, done: doneAt }, ...(src.pad === undefined ? {} : { pad: src.pad }),
      });
      started.set(res.body.id, Date.now());
      if (verbose) log(`forked ${src.shape} ${src.id} at version ${cp.version}: ${res.body.id}`);
      return true;
    }

    // The stream of executions, a few in flight at once.
    for (let k = 0; k < total; k++) {
      if (updateRate > 0 && !childrenUpdated && k === Math.floor(total / 2)) {
        // The workflows sub and subReview start by slug, without a version, get a version 2 that
        // answers differently. A child runs the version that was current when its top-level run
        // began (workflows.md, "Sub-workflows"): runs started before this keep version 1, their
        // rebuilds and forks too; runs started after get version 2.
        const child = await a.call("PUT", `/api/agent-workflows/${childId}`, { definition: {
          nodes: [sleepNode("z", 200, "$.input.v"), { id: "w", type: "transform", config: { expression: "z.v & '2'" } }], edges: [{ from: "z", to: "w" }], output: { v: "$.w" },
        } });
        const reviewChild = await a.call("PUT", `/api/agent-workflows/${reviewChildId}`, { definition: {
          nodes: [sleepNode("a", 30, "A"), { id: "review", type: "humanReview", config: { reason: "child check" } }, { id: "b", type: "transform", config: { expression: "'ok2'" } }],
          edges: [{ from: "a", to: "review" }, { from: "review", to: "b" }],
          output: { b: "$.b" },
        } });
        if (child.status !== 200 || reviewChild.status !== 200) problems.push(`updates of the child workflows answered ${child.status} and ${reviewChild.status}`);
        childrenUpdated = true;
        if (verbose) log("child workflows updated to version 2");
      }
      const shape = names[int(r, 0, names.length - 1)]!;
      const plan = shapes[shape]!(r, `${seed}-${k}`);
      if (childrenUpdated && plan.expect.status === "completed") {
        if (shape === "sub") plan.expect.output = { r: "deep2." };
        if (shape === "subReview") plan.expect.output = { r: "ok2" };
      }
      const pad = largeRate > 0 && rl() < largeRate ? int(rl, 1100, 6000) : undefined;
      if (pad !== undefined) plan.definition = padded(plan.definition, pad);
      let wf = workflowIds.get(`${shape}-${k}`);
      if (wf === undefined) {
        const limited = maxConcurrency > 0 ? { ...plan.definition, limits: { maxConcurrency } } : plan.definition;
        wf = await createDefinition(a, `chaos-${shape}-${k}`, limited);
        workflowIds.set(`${shape}-${k}`, wf);
      }
      const deadlineMs = deadlineRate > 0 && rd() < deadlineRate ? int(rd, 500, 8000) : undefined;
      const res = await a.call<{ id: number }>("POST", `/api/agent-workflows/${wf}/execute`, { input: plan.input, ...(deadlineMs === undefined ? {} : { deadlineMs }) });
      if (res.status !== 202) {
        problems.push(`execute ${shape} answered ${res.status}: ${JSON.stringify(res.body)}`);
        continue;
      }
      const run: Run = { ...plan, id: res.body.id, decideAfterMs: int(r, 100, 3000), ...(deadlineMs === undefined ? {} : { deadlineMs }), ...(pad === undefined ? {} : { pad }) };
      if (r() < cancelRate) run.cancel = { atMs: int(r, 50, 3000) };
      runs.push(run);
      started.set(run.id, Date.now());
      if (updateRate > 0 && ru() < updateRate) {
        // A new version of its workflow while it runs: it (and any fork of it) keeps its own.
        const u: NonNullable<Run["updated"]> = { atMs: int(ru, 0, 2000) };
        run.updated = u;
        const wfId = wf;
        void (async () => {
          await new Promise((res2) => setTimeout(res2, u.atMs));
          const up = await a.call("PUT", `/api/agent-workflows/${wfId}`, { definition: otherVersion }).catch(() => ({ status: -1, body: undefined }));
          u.answered = up.status;
          if (up.status !== 200) problems.push(`update of ${shape} ${run.id}'s workflow answered ${up.status}: ${JSON.stringify(up.body)}`);
        })();
      }
      if (run.cancel) {
        const c = run.cancel;
        void (async () => {
          await new Promise((res2) => setTimeout(res2, c.atMs));
          c.answered = (await a.call("POST", `/api/agent-workflow-executions/${run.id}/cancel`, { reason: "chaos" }).catch(() => ({ status: -1 }))).status;
        })();
      }
      if (verbose) log(`started ${shape} ${run.id}${run.cancel ? ` (cancel at ${run.cancel.atMs} ms)` : ""}${deadlineMs === undefined ? "" : ` (deadline ${deadlineMs} ms)`}${pad === undefined ? "" : ` (pad ${pad})`}${run.updated ? ` (updated at ${run.updated.atMs} ms)` : ""}`);
      if (forkRate > 0 && rf() < forkRate && (await forkOne())) forks++;
      await new Promise((res2) => setTimeout(res2, int(r, 50, 600)));
      // Keep at most ~10 runs in flight (2 CPUs).
      for (;;) {
        const rows = await Promise.all(runs.slice(-12).map((x) => getExecution(a, x.id)));
        if (rows.filter((x) => x.status === "running" || x.status === "queued").length < 10) break;
        await new Promise((res2) => setTimeout(res2, 300));
      }
    }

    // Let the chaos go on a little past the last start, then bring every executor back.
    await new Promise((res) => setTimeout(res, 3000));
    stopChaos = true;
    await chaos;
    await pgChaos;
    for (let i = 0; i < nExecutors; i++) if (!slots[i]) await waitFor(`executor ${i} back`, async () => (slots[i] ? true : undefined), 90_000).catch(() => startExecutor(i));
    for (let i = 0; i < nWorkers; i++) if (!wslots[i]) await waitFor(`worker ${i} back`, async () => (wslots[i] ? true : undefined), 90_000).catch(() => startProc("worker", i));
    await waitFor("stalled processes continued", async () => (procs.some((p) => p.stalled) ? undefined : true), 10_000);
    log(`${runs.length} executions (${forks} forks, ${runs.filter((x) => x.deadlineMs !== undefined).length} with a deadline${largeRate > 0 ? `, ${runs.filter((x) => x.pad !== undefined).length} with large results` : ""}${updateRate > 0 ? `, ${runs.filter((x) => x.updated?.answered === 200).length} updated while running` : ""}${tenantCap > 0 ? `, tenant cap ${tenantCap}` : ""}), ${kills} kills, ${stalls} executor stalls, ${workerFaults} worker faults, ${losses} checkpoint losses, ${pgWindows} journal failure windows; waiting for every run to end`);

    // Every run ends (reviews still answered meanwhile). The recovery sweep runs every minute.
    const ends = ["completed", "failed", "cancelled"];
    const rows = new Map<number, ExecutionRow>();
    await waitFor("every run to end", async () => {
      for (const run of runs) {
        if (rows.has(run.id)) continue;
        const row = await getExecution(a, run.id);
        if (ends.includes(row.status)) rows.set(run.id, row);
      }
      return rows.size === runs.length ? true : undefined;
    }, 180_000).catch(() => undefined);
    // And their child runs: a parent that ended (cancelled, failed) stops its children
    // asynchronously, and a command that a killed executor held comes back only after the
    // consumer's ack wait (30 s), so a child may end well after its parent.
    const childrenOf = async (id: number) => (await a.call<{ items: ExecutionRow[] }>("GET", `/api/agent-workflow-executions/${id}/children`)).body.items;
    await waitFor("every child run to end", async () => {
      for (const run of runs) {
        for (const kid of await childrenOf(run.id)) {
          if (!ends.includes(kid.status)) return undefined;
          for (const grand of await childrenOf(kid.id)) if (!ends.includes(grand.status)) return undefined;
        }
      }
      return true;
    }, 120_000).catch(() => undefined);
    answering = false;
    await answer;

    const calls = await rec.calls();
    const callCount = new Map<string, number>();
    for (const c of calls) callCount.set(c, (callCount.get(c) ?? 0) + 1);
    // Tool workers in processes of their own: a call its worker's death or stall interrupted
    // may run again elsewhere (docs/tools.md: at-least-once execution, exactly-once results).
    // A run is interrupted when a fault of its process came after it started and before its
    // answer could be recorded (at most a second after the handler returned), or when it
    // started within a second of its process waking from a stall (it was delivered before or
    // during the stall, and redelivered to another worker meanwhile). Every other run is one too
    // many; and one process never runs a call twice at the same time.
    const interrupted = new Map<string, number>();
    const recordGraceMs = 1000;
    if (nWorkers > 0) {
      const lines = (await redis.lrange(`${config.prefix}:chaos:runs`, 0, -1)).map((l) => JSON.parse(l) as ToolRun);
      const started = lines.filter((x) => x.s !== undefined);
      const ends = new Map<string, number>();
      for (const x of lines) if (x.e !== undefined) ends.set(`${x.p}:${x.r}`, x.e);
      const countOf = new Map<string, number>();
      for (const x of started) {
        countOf.set(x.c, (countOf.get(x.c) ?? 0) + 1);
        const e = ends.get(`${x.p}:${x.r}`) ?? Infinity;
        const hit = faults.some((f) => f.pid === x.p && ((f.at >= x.s - 20 && f.at <= e + recordGraceMs) || (f.until !== undefined && x.s >= f.until - 20 && x.s <= f.until + recordGraceMs)));
        if (hit) interrupted.set(x.c, (interrupted.get(x.c) ?? 0) + 1);
        const overlap = started.find((y) => y !== x && y.c === x.c && y.p === x.p && y.s >= x.s && y.s <= e);
        if (overlap) problems.push(`call ${x.c} ran twice at once in worker pid ${x.p} (runs ${x.r} and ${overlap.r})`);
      }
      const at = (ms: number | undefined) => (ms === undefined || ms === Infinity ? "-" : `${((ms - t0) / 1000).toFixed(2)}s`);
      for (const [c, n] of countOf) {
        if (n - (interrupted.get(c) ?? 0) <= 1) continue;
        const runsOf = started.filter((x) => x.c === c).map((x) => `pid ${x.p} ${at(x.s)}–${at(ends.get(`${x.p}:${x.r}`))}`);
        const pids = new Set(started.filter((x) => x.c === c).map((x) => x.p));
        const theirs = faults.filter((f) => pids.has(f.pid)).map((f) => `${f.kind} ${f.pid} ${at(f.at)}${f.until ? `–${at(f.until)}` : ""}`);
        problems.push(`call ${c} ran ${n} times, ${interrupted.get(c) ?? 0} of them interrupted by a worker fault: runs ${runsOf.join(", ")}; faults ${theirs.join(", ") || "none"}`);
      }
      const again = [...countOf].filter(([, n]) => n > 1).length;
      log(`${started.length} recorded tool runs, ${countOf.size} calls, ${again} of them run again after a worker fault`);
    } else {
      for (const [c, n] of callCount) if (n > 1) problems.push(`call ${c} ran ${n} times`);
    }
    /** Handler runs of the calls of these executions that a worker fault interrupted. */
    const rerunsOf = (ids: number[]) => [...interrupted].filter(([c]) => ids.some((x) => c.startsWith(`${x}.`))).reduce((m, [, n]) => m + n, 0);

    const journalOf = async (id: number) => (await a.call<{ items: NodeRow[] }>("GET", `/api/agent-workflow-executions/${id}/nodes`)).body.items;
    const tenantId = async (id: number) => {
      const store = (await import("@baton/store")).createStore({ databaseUrl: config.databaseUrl, schema: config.databaseSchema });
      try {
        return (await store.executions.getById(id))!.tenantId;
      } finally {
        await store.close();
      }
    };
    const tenant = runs.length ? await tenantId(runs[0]!.id) : "";
    let largeRefs = 0;
    let robbedFailed = 0;
    // For the report of a run with problems (below): the journal's steps, and the events' ids.
    const db = new pg.Client({ connectionString: DATABASE_URL });
    db.on("error", () => undefined);
    await db.connect();
    const schema = `"${config.databaseSchema}"`;
    const nc = await connect({ servers: config.natsUrl });
    const jsm = await jetstreamManager(nc);
    const eventsStream = streamNames(config.prefix).events;

    try {
      for (const run of runs) {
        const before = problems.length;
        const say = (what: string) => problems.push(`${run.shape} ${run.id}${run.cancel ? ` (cancel ${run.cancel.answered ?? "unsent"} at ${run.cancel.atMs} ms)` : ""}: ${what}`);
        const row = rows.get(run.id) ?? (await getExecution(a, run.id));
        const stuck = !ends.includes(row.status);
        // Ended while the checks ran: what was read before (its calls, its children) may be short of it (chaos seed 959).
        if (!stuck && !rows.has(run.id)) say(`had not ended when the wait for every run gave up (180 s after the faults stopped); it ended ${row.status} since`);
        if (stuck) {
          const cp = await redis.hget(`${config.prefix}:checkpoint:{${run.id}}`, "s");
          say(`still ${row.status} (${row.currentState ?? ""}); checkpoint ${cp ? cp.slice(0, 1500) : "none"}`);
        }
        const cancelled = run.cancel?.answered === 202 && row.status === "cancelled";
        const kids = await childrenOf(run.id);
        const grand = (await Promise.all(kids.map((k) => childrenOf(k.id)))).flat();
        const family = [run.id, ...kids.map((k) => k.id), ...grand.map((k) => k.id)];
        // --rogue: a call of it (or of its children) taken and never answered.
        const robbed = [...stolen].filter((c) => family.some((id) => c.startsWith(`${id}.`)));
        if (!cancelled && !stuck) {
          // A flaky call run again after its worker died counts again: its answer may say so.
          const flakyOut = run.expect.flaky && rerunsOf([run.id]) > 0 ? (row.output as { calls?: number } | undefined)?.calls : undefined;
          const flakyOk = flakyOut !== undefined && flakyOut >= run.expect.flaky!.count && flakyOut <= run.expect.flaky!.count + rerunsOf([run.id]);
          // A call whose deliveries all but the last were lost to worker faults fails, by design, with
          // BATON_TOOL_DELIVERIES_EXHAUSTED (docs/tools.md): excused, and said, when workers were faulted.
          const exhausted = row.status === "failed" && (row.error ?? "").startsWith("BATON_TOOL_DELIVERIES_EXHAUSTED") && workerFaults > 0;
          // A run given a deadline may fail for it, whatever its shape.
          const deadlineHit = run.deadlineMs !== undefined && row.status === "failed" && (row.error ?? "").startsWith("BATON_DEADLINE_EXCEEDED");
          if (exhausted) log(`excused: ${run.shape} ${run.id} ended failed (${row.error}), its calls' handlers interrupted by worker faults ${rerunsOf([run.id])} times`);
          else if (deadlineHit) {
            const early = row.deadlineAt && row.completedAt ? Date.parse(row.deadlineAt) - Date.parse(row.completedAt) : 0;
            if (early > 100) say(`failed with BATON_DEADLINE_EXCEEDED ${early} ms before its deadline (${row.deadlineAt})`);
          } else if (robbed.length && row.status === "failed") {
            // Its deadline may have ended it first (above).
            if (!(row.error ?? "").includes("BATON_EXECUTOR_CALL_LOST")) say(`failed (${row.error ?? ""}) with calls of it taken and never answered (${robbed.join(", ")}), not for them`);
            else robbedFailed++;
          } else if (row.status !== run.expect.status) say(`ended ${row.status} (${row.error ?? ""}), expected ${run.expect.status}`);
          else if (run.expect.status === "completed" && !flakyOk && !isDeepStrictEqual(row.output, run.expect.output)) say(`output ${JSON.stringify(row.output)}, expected ${JSON.stringify(run.expect.output)}`);
        }
        if (row.status === "cancelled" && run.cancel?.answered !== 202) say("cancelled without a cancel");
        if (cancelled && row.error !== "BATON_CANCELLED: chaos") say(`cancelled, its error ${JSON.stringify(row.error)}, not the cancel's reason`);
        for (const id of family) {
          const nodes = await journalOf(id);
          const open = nodes.filter((n) => n.status === "running");
          const kidRow = id === run.id ? row : await getExecution(a, id);
          if (open.length && ends.includes(kidRow.status)) say(`execution ${id} (${kidRow.status}) has running rows ${open.map((n) => `${n.nodeId}#${n.attempt}`).join(", ")}`);
          const seen = new Set<string>();
          for (const n of nodes.filter((x) => x.status === "completed")) {
            const key = `${n.nodeId}#${n.attempt}`;
            if (seen.has(key)) say(`execution ${id}: node ${key} completed twice`);
            seen.add(key);
          }
          if (!ends.includes(kidRow.status)) say(`child ${id} still ${kidRow.status}`);
          // A deadline (the run's, or inherited by a child run) ends the run when it passes:
          // nothing completes, and no node starts, more than a second after it.
          if (kidRow.deadlineAt) {
            const due = Date.parse(kidRow.deadlineAt);
            if (kidRow.status === "completed" && kidRow.completedAt && Date.parse(kidRow.completedAt) > due + 1000) {
              say(`execution ${id} completed ${Date.parse(kidRow.completedAt) - due} ms past its deadline (${kidRow.deadlineAt})`);
            }
            const late = nodes.filter((n) => Date.parse(n.startedAt) > due + 1000);
            if (late.length) say(`execution ${id}: ${late.map((n) => `${n.nodeId}#${n.attempt} (${n.status})`).join(", ")} started more than a second past its deadline (${kidRow.deadlineAt})`);
          }
          // Timelines: every run read to its end passes the rules of docs/events.md. A run's rows
          // (its row's status too) can be ahead of its events by the consumer's ack wait (30 s):
          // an executor killed between a step's rows and its events leaves them to the command's
          // next delivery. The gateway's stream of a run that ended moments ago waits 40 s for
          // them (2 s with a Last-Event-ID or for an older run), so a timeline without its end
          // is read again, for up to 45 s.
          const readTimeline = async (): Promise<SseEvent[] | undefined> => {
            const until = Date.now() + 45_000;
            for (;;) {
              const got = await collectEvents(a, config.apiKey!, id, undefined, 50_000).catch((err: unknown) => {
                say(`events of ${id} did not end: ${(err as Error).message}`);
                return undefined;
              });
              if (!got || got.some((e) => ends.includes(e.event.replace(/^execution\./, ""))) || Date.now() > until) return got;
              await new Promise((r) => setTimeout(r, 1_000));
            }
          };
          const events = await readTimeline();
          if (events) for (const p of timelineProblems(events, id, tenant)) say(`timeline of ${id}: ${p}`);
        }
        if (run.fork && run.shape !== "fork:loop") {
          // Time travel: a node completed at the version forked from is not run again (a loop's are, on later passes).
          const again = (await journalOf(run.id)).filter((n) => run.fork!.done.includes(n.nodeId));
          if (again.length) say(`fork of ${run.fork.of} at version ${run.fork.version} ran again ${again.map((n) => `${n.nodeId}#${n.attempt} (${n.status})`).join(", ")}, completed at that version`);
        }
        if (maxConcurrency > 0) {
          // limits.maxConcurrency: the attempts running at once, by the run's journal (a node's
          // row spans its attempt; inline nodes' take no time; a paused review does not count).
          // One step's ends come before its starts: a node finishing frees its slot for the next.
          const worst = mostAtOnce((await journalOf(run.id)).filter((n) => !n.nodeType.endsWith("humanReview") && n.completedAt)
            .map((n) => ({ id: `${n.nodeId}#${n.attempt}`, from: Date.parse(n.startedAt), to: Date.parse(n.completedAt!) })));
          if (worst.length > maxConcurrency) say(`${worst.length} attempts running at once (${worst.join(", ")}), limits.maxConcurrency ${maxConcurrency}`);
        }
        if (row.status === "completed" && !cancelled) {
          const nodes = await journalOf(run.id);
          if (run.expect.nodes) {
            const per: Record<string, number> = {};
            for (const n of nodes) if (n.status === "completed") per[n.nodeId] = (per[n.nodeId] ?? 0) + 1;
            if (!isDeepStrictEqual(per, run.expect.nodes)) say(`completed rows ${JSON.stringify(per)}, expected ${JSON.stringify(run.expect.nodes)}`);
          }
          // Distinct calls (a call run twice is reported above).
          const mine = [...new Set(calls.filter((c) => family.some((id) => c.startsWith(`${id}.`))))];
          if (run.expect.calls !== undefined && !robbed.length && mine.length !== run.expect.calls) say(`made ${mine.length} calls (${mine.join(", ")}), expected ${run.expect.calls}`);
          if (run.expect.children !== undefined && kids.length !== run.expect.children) say(`started ${kids.length} children (${kids.map((k) => `${k.id}:${k.status}`).join(", ")}), expected ${run.expect.children}`);
          if (run.pad !== undefined) {
            // Large results: each blob the run's rows refer to is still there. A run that calls
            // rec.sleep in its own nodes has at least one; a fork may run none of them (those
            // completed at its version, or a loop's, reset and skipped by its exit: seed 5093).
            const refs = blobRefs(row.output);
            for (const id of family) for (const n of await journalOf(id)) blobRefs([n.input, n.output], refs);
            const own = !run.fork && (run.definition.nodes as { type: string; config?: { tool?: string } }[]).some((n) => n.type === "tool" && n.config?.tool === "rec.sleep");
            if (own && !refs.size) say(`large results (pad ${run.pad}), but no blob reference in its rows`);
            for (const ref of refs) {
              const got = await a.call("GET", `/api/blobs/${ref}`);
              if (got.status !== 200) say(`blob ${ref} in its rows answered ${got.status}`);
            }
            largeRefs += refs.size;
          }
          if (run.expect.flaky) {
            const n = await rec.flakyCount(run.expect.flaky.key);
            const reruns = rerunsOf([run.id]);
            if (n < run.expect.flaky.count || n > run.expect.flaky.count + reruns) say(`flaky ran ${n} times, expected ${run.expect.flaky.count}${reruns ? ` (+ up to ${reruns} interrupted by a worker fault)` : ""}`);
          }
        }
        if (problems.length > before) {
          // What it takes to see why: the journal in write order with each row's step, the row's
          // fence and last patch, the events with their message ids (`evt:{run}:{step}:{n}`: the
          // step that published each), and the executors' lines about the run.
          const ids = [run.id, ...kids.map((k) => k.id)];
          for (const id of ids) {
            const { rows: steps } = await db.query<{ nodeId: string; attempt: number; status: string; stepVersion: number | null }>(
              `SELECT "nodeId", "attempt", "status", "stepVersion" FROM ${schema}."agent_workflow_node_executions" WHERE "executionId" = $1 ORDER BY "id"`, [id]);
            const { rows: [fence] } = await db.query<{ journalFloor: number | null; patchedStep: number | null }>(
              `SELECT "journalFloor", "patchedStep" FROM ${schema}."agent_workflow_executions" WHERE "id" = $1`, [id]);
            problems.push(`  journal of ${id} (floor ${fence?.journalFloor ?? "-"}, row patched at step ${fence?.patchedStep ?? "-"}): ${steps.map((n) => `${n.nodeId}#${n.attempt}:${n.status}/${n.stepVersion ?? "-"}`).join(" ")}`);
            const events = await collectEvents(a, config.apiKey!, id, undefined, 3_000).catch(() => []);
            const msgIds = await Promise.all(events.map((e) => jsm.streams.getMessage(eventsStream, { seq: e.data.seq }).then((m) => m?.header.get("Nats-Msg-Id") ?? "?", () => "?")));
            problems.push(`  events of ${id}: ${events.map((e, i) => `${e.event}:${JSON.stringify(e.data.data.node_id ?? "")}#${JSON.stringify(e.data.data.attempt ?? "")}@${e.data.seq}/${msgIds[i]}`).join(" ")}`);
          }
          const about = (l: string) => ids.some((x) => l.includes(`"executionId":${x},`) || l.includes(`"executionId":${x}}`));
          for (const p of procs) for (const l of p.output.join("").split("\n").filter(about)) problems.push(`  [${p.kind} ${p.index} pid ${p.child.pid}] ${l.slice(0, 800)}`);
        }
      }
    } finally {
      await db.end();
      await nc.close();
    }
    if (tenantCap > 0) {
      // The cap: top-level runs running or paused at once, from their rows (forks count too).
      const worst = mostAtOnce(runs.flatMap((run) => {
        const row = rows.get(run.id);
        return row?.startedAt && row.completedAt ? [{ id: String(run.id), from: Date.parse(row.startedAt) + 100, to: Date.parse(row.completedAt) - 100 }] : [];
      }));
      if (worst.length > tenantCap) problems.push(`tenant cap ${tenantCap}: ${worst.length} top-level runs were running at once (${worst.join(", ")})`);
      log(`tenant cap ${tenantCap}: at most ${worst.length} top-level runs running at once`);
    }
    const by = new Map<string, number>();
    for (const run of runs) by.set(`${run.shape}:${rows.get(run.id)?.status ?? "?"}`, (by.get(`${run.shape}:${rows.get(run.id)?.status ?? "?"}`) ?? 0) + 1);
    if (largeRate > 0) log(`large results: ${largeRefs} blob references read back`);
    if (rogueRate > 0) log(`rogue worker: ${stolen.size} calls taken and never answered; ${robbedFailed} runs failed for them (BATON_EXECUTOR_CALL_LOST)`);
    log(`checked: ${[...by].map(([k, v]) => `${k}=${v}`).join(" ")}; ${problems.length} problems`);
    if (problems.length) {
      const errors = procs.flatMap((p) => p.output.join("").split("\n").filter((l) => l.includes('"level":"error"') || l.includes('"level":50')).map((l) => `[${p.kind} ${p.index} pid ${p.child.pid}] ${l.slice(0, 600)}`));
      for (const e of errors.slice(0, 30)) console.log(e);
    }
    return problems;
  } finally {
    stopChaos = true;
    await rogueNc?.close();
    for (const p of procs) if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill("SIGKILL");
    await Promise.all(procs.map((p) => exited(p.child)));
    await local?.stop().catch(() => undefined);
    await redis.quit();
    await removeIsolated(config);
  }
}

const rounds = Number(args.rounds);
const firstSeed = args.seed !== undefined ? Number(args.seed) : Math.floor(Math.random() * 2 ** 31);
let failedRounds = 0;
for (let i = 0; i < rounds; i++) {
  const seed = firstSeed + i;
  console.log(`chaos round ${i + 1}/${rounds}: seed ${seed}`);
  const problems = await round(seed);
  for (const p of problems) console.log(`  ✕ [seed ${seed}] ${p}`);
  if (problems.length) failedRounds++;
}
console.log(`${rounds - failedRounds} rounds passed, ${failedRounds} failed`);
process.exit(failedRounds ? 1 : 0);
