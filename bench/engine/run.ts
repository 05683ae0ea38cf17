/**
 * The engine benchmark: Baton, the floor (JetStream + Redis compare-and-set) and
 * LangGraph + PostgresSaver run the same two no-op graphs in one process, at each
 * concurrency, interleaved in rounds (see measureAll). Prints a markdown table and
 * rewrites the Engine section of docs/benchmarks.md.
 *
 *   ./baton node bench/engine/run.ts [--iterations 200] [--warmup 20] [--rounds 2] [--concurrency 1,16] [--no-doc]
 *     [--systems floor,baton,langgraph] [--graphs sequential-10,fan-out-1-8-1]   (a partial run does not touch the doc)
 *   (or ./baton npm run bench:engine -- [options])
 */
import { readFile, writeFile } from "node:fs/promises";
import { cpus, loadavg, totalmem } from "node:os";
import { performance } from "node:perf_hooks";
import { parseArgs } from "node:util";
import { positiveOption as positive } from "./args.ts";
import { createBatonBench } from "./baton.ts";
import { addCpu, cpuMeter, cpuTotal, scaleCpu, type CpuMs } from "./cpu.ts";
import { createFloor } from "./floor.ts";
import { createLangGraph } from "./langgraph.ts";
import { BATON, cpuCeilings, cpuTable, FLOOR, LANGGRAPH, table, targets, upsertSection } from "./report.ts";
import type { Row } from "./report.ts";
import { fanOutGraph, runPool, sequentialGraph, summarise } from "./stats.ts";
import type { BenchGraph, ExecutionTrace } from "./stats.ts";
import type { BenchSystem } from "./system.ts";

function parseOptions() {
  try {
    return parseArgs({
      options: {
        iterations: { type: "string", default: "200" },
        warmup: { type: "string", default: "20" },
        rounds: { type: "string", default: "2" },
        concurrency: { type: "string", default: "1,16" },
        systems: { type: "string", default: "floor,baton,langgraph" },
        graphs: { type: "string", default: "sequential-10,fan-out-1-8-1" },
        "no-doc": { type: "boolean", default: false },
        help: { type: "boolean", short: "h", default: false },
        doc: { type: "string", default: new URL("../../docs/benchmarks.md", import.meta.url).pathname },
      },
    }).values;
  } catch (err) {
    console.error(`${err instanceof Error ? err.message : String(err)} (see --help)`);
    process.exit(2);
  }
}
const args = parseOptions();
if (args.help) {
  console.log(`usage: ./baton node bench/engine/run.ts [options]   (or ./baton npm run bench:engine -- [options])
  --iterations N        measured executions per system, graph and concurrency (default 200)
  --warmup N            uncounted executions first (default 20; 0 for none)
  --rounds N            turns per system, in counterbalanced order (default 2)
  --concurrency A,B     executions in flight at once (default 1,16)
  --systems S,...       floor, baton, langgraph (default all; a partial run leaves the doc alone)
  --graphs G,...        sequential-10, fan-out-1-8-1 (default both)
  --no-doc              print the table only; do not rewrite docs/benchmarks.md
  --doc PATH            the file whose Engine section is rewritten (default docs/benchmarks.md)
Needs NATS, Redis and Postgres (BATON_NATS_URL, BATON_REDIS_URL, BATON_BENCH_DATABASE_URL).`);
  process.exit(0);
}
const iterations = positive("iterations", args.iterations);
const rounds = Math.min(positive("rounds", args.rounds), iterations);
const warmup = Number(args.warmup) === 0 ? 0 : positive("warmup", args.warmup);
const levels = args.concurrency.split(",").map((c) => positive("concurrency", c.trim()));

const env = {
  natsUrl: process.env.BATON_NATS_URL ?? "nats://127.0.0.1:4222",
  redisUrl: process.env.BATON_REDIS_URL ?? "redis://127.0.0.1:6379",
  databaseUrl: process.env.BATON_BENCH_DATABASE_URL ?? "postgresql://postgres@127.0.0.1:5432/test",
};
const graphs: BenchGraph[] = [sequentialGraph(10), fanOutGraph(8)].filter((g) => args.graphs.split(",").includes(g.name));
const systems = args.systems.split(",").map((s) => s.trim());
for (const s of systems) if (!["floor", "baton", "langgraph"].includes(s)) throw new Error(`--systems: unknown system "${s}" (floor, baton, langgraph)`);
if (graphs.length === 0) throw new Error(`--graphs: none of "${args.graphs}" is a graph (sequential-10, fan-out-1-8-1)`);
const EXECUTION_TIMEOUT_MS = 60_000;
const meter = cpuMeter();
const cpuCount = cpus().length;

function withTimeout<T>(what: string, p: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const limit = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not finish within ${EXECUTION_TIMEOUT_MS} ms`)), EXECUTION_TIMEOUT_MS);
  });
  return Promise.race([p, limit]).finally(() => clearTimeout(timer));
}

interface Opened {
  kind: string;
  system: BenchSystem;
  failed?: boolean;
}

/** Runs `job` for one system, recording a failure (and dropping the system from later rounds) instead of throwing. */
async function guarded<T>(s: Opened, failures: string[], job: () => Promise<T>): Promise<T | undefined> {
  if (s.failed) return undefined;
  try {
    return await job();
  } catch (err) {
    s.failed = true;
    failed(failures, s.kind, err);
    return undefined;
  }
}

function failed(failures: string[], kind: string, err: unknown): void {
  const message = `${kind}: ${err instanceof Error ? err.message : String(err)}`;
  failures.push(message);
  console.error(`FAILED ${message}`);
}

/**
 * Every cell interleaves the systems in `rounds` rounds: each round runs a share of every
 * system's measured executions, the systems in order in even rounds and in reverse order in
 * odd ones (ABC, CBA, …). A machine whose speed drifts during the run (other tenants, CPU
 * steal) then weighs on every system alike, instead of on whichever ran last. Each share is
 * led in by `concurrency` executions in the same pool that are not counted, so the measured
 * ones start with the pool already full, not all at once.
 */
async function measureAll(opened: Opened[], rows: Row[], failures: string[]): Promise<void> {
  for (const graph of graphs) {
    const runs = new Map<Opened, () => Promise<ExecutionTrace>>();
    for (const s of opened) {
      const run = await guarded(s, failures, () => s.system.prepare(graph));
      if (run) runs.set(s, run);
    }
    for (const concurrency of levels) {
      const once = (s: Opened) => (): Promise<ExecutionTrace> => withTimeout(`a ${s.system.name} execution of ${graph.name}`, runs.get(s)!());
      for (const s of opened) if (runs.has(s)) await guarded(s, failures, () => runPool(warmup, concurrency, once(s)));
      const measured = new Map<Opened, { traces: ExecutionTrace[]; cpu: CpuMs; nodes: number; ms: number }>();
      for (let round = 0; round < rounds; round++) {
        const share = Math.floor(iterations / rounds) + (round < iterations % rounds ? 1 : 0);
        const live = opened.filter((s) => runs.has(s) && !s.failed);
        if (round % 2 === 1) live.reverse();
        for (const s of live) {
          const reading = meter.start();
          const wallBefore = performance.now();
          const got = await guarded(s, failures, () => runPool(concurrency + share, concurrency, once(s)));
          const ms = performance.now() - wallBefore;
          const cpu = reading.stop();
          if (!got) continue;
          const m = measured.get(s) ?? { traces: [], cpu: { process: 0, nats: 0, redis: 0, postgres: 0 }, nodes: 0, ms: 0 };
          m.traces.push(...got.slice(concurrency)); // runPool keeps start order: the lead-in comes first
          m.cpu = addCpu(m.cpu, cpu);
          m.nodes += got.length * graph.nodes.length;
          m.ms += ms;
          measured.set(s, m);
        }
      }
      for (const s of opened) {
        const m = measured.get(s);
        if (s.failed || !m) continue;
        const cpuPerNode = scaleCpu(m.cpu, 1 / m.nodes);
        const row: Row = {
          kind: s.kind,
          ...summarise(s.system.name, graph, concurrency, m.traces, { nodes: m.nodes, ms: m.ms }),
          cpuPerNode,
          busy: cpuTotal(m.cpu) / (m.ms * cpuCount),
        };
        rows.push(row);
        console.error(
          `${row.system} · ${row.graph} · c=${concurrency}: p50 ${row.p50.toFixed(2)} ms, mean ${row.meanP50.toFixed(2)} ms, p99 ${row.p99.toFixed(2)} ms, ` +
            `${row.stepsPerSecond.toFixed(0)} steps/s, CPU/node ${cpuTotal(cpuPerNode).toFixed(2)} ms (this process ${cpuPerNode.process.toFixed(2)})`,
        );
      }
    }
  }
}

const rows: Row[] = [];
const failures: string[] = [];
const started = new Date();
const loadAtStart = loadavg()[0]!;
const makers: [string, string, () => Promise<BenchSystem>][] = [
  ["floor", FLOOR, () => createFloor({ natsUrl: env.natsUrl, redisUrl: env.redisUrl })],
  ["baton", BATON, () => createBatonBench(env)],
  ["langgraph", LANGGRAPH, () => createLangGraph({ databaseUrl: env.databaseUrl })],
];
const opened: Opened[] = [];
for (const [flag, kind, make] of makers) {
  if (!systems.includes(flag)) continue;
  try {
    opened.push({ kind, system: await make() });
  } catch (err) {
    failed(failures, kind, err);
  }
}
const batonSettings = (opened.find((s) => s.kind === BATON)?.system as { settings?: string } | undefined)?.settings;
try {
  await measureAll(opened, rows, failures);
} finally {
  for (const s of opened) await s.system.close().catch((err: unknown) => console.error(`closing ${s.kind} failed`, err));
}

const order = [BATON, FLOOR, LANGGRAPH];
rows.sort((a, b) => a.graph.localeCompare(b.graph) * -1 || a.concurrency - b.concurrency || order.indexOf(a.kind) - order.indexOf(b.kind));
const command = `./baton node bench/engine/run.ts --iterations ${iterations} --warmup ${warmup} --rounds ${rounds} --concurrency ${levels.join(",")}`;
const cpu = cpus();
const machine =
  `Node ${process.version}, ${cpu.length} CPUs (${cpu[0]?.model.trim() ?? "unknown"}), ${(totalmem() / 2 ** 30).toFixed(0)} GiB RAM, ${process.platform}/${process.arch}; ` +
  `1-minute load average ${loadAtStart.toFixed(1)} at the start and ${loadavg()[0]!.toFixed(1)} at the end`;
const versionOf = async (pkg: string): Promise<string> => {
  try {
    return (JSON.parse(await readFile(new URL(`../../node_modules/${pkg}/package.json`, import.meta.url), "utf8")) as { version: string }).version;
  } catch {
    return "(version unknown)";
  }
};
const [langgraphVersion, saverVersion] = await Promise.all([versionOf("@langchain/langgraph"), versionOf("@langchain/langgraph-checkpoint-postgres")]);
const resultTable = table(rows);
const resultCpu = cpuTable(rows);
const resultTargets = targets(rows);
const resultBudget = cpuCeilings(rows, cpuCount);
console.log(resultTable);
console.log();
console.log(resultCpu);
console.log();
console.log(resultTargets);
if (resultBudget) console.log(`\n${resultBudget}`);
for (const f of failures) console.log(`FAILED ${f}`);

const section = `## Engine

What one workflow step costs in Baton's engine, next to the least a bus-driven durable engine
must do (the floor) and next to LangGraph.js checkpointing to Postgres. Issue 3 sets the
targets: per-node p50 within 1.2× the floor, and below LangGraph + Postgres. They are judged
here on each execution's mean per-node time (its p50 over executions), which bursts of
completions do not flatter (see *What is measured*).

**Run** ${started.toISOString().slice(0, 16).replace("T", " ")} UTC, \`${command}\`
(from the repository root, with NATS, Redis and Postgres running locally). ${machine}.
NATS, Redis and Postgres ran on the same machine. On a busy machine the numbers move from run
to run; compare the rows of one run with each other.

${resultTable}

Where the CPU went, per node (see *CPU* below):

${resultCpu}

**Targets** (Baton's per-node time, the per-execution mean's p50, against the same graph and
concurrency):

${resultTargets || "- no Baton rows: the Baton run failed (below)."}
${resultBudget ? `\nWhat CPU alone allows (see *CPU* below):\n\n${resultBudget}\n` : ""}${failures.length > 0 ? `\n**Failed in this run:**\n\n${failures.map((f) => `- ${f}`).join("\n")}\n` : ""}
### What is measured

- **Graphs.** \`sequential-10\`: ten no-op nodes in a chain. \`fan-out-1-8-1\`: one node, eight
  parallel nodes, one join node (10 nodes). In Baton each node is a \`tool\` node calling
  \`bench.noop\`, a tool that answers \`{}\`; in LangGraph each node is a function returning \`{}\`.
- **Per-node overhead** of a node = the time from the completion of its last predecessor to
  its own completion, both as seen by the benchmark's driver. Start nodes are left out, so
  admission (the API call, the execution row, the first checkpoint) is not counted; that cost
  is in *execution p50*. The no-op handlers take microseconds, so nothing is subtracted for
  them. *Per-node p50* and *p99* are nearest-rank percentiles over every non-start node of every
  measured execution (9 per execution). *Per-node mean* is each execution's mean of those 9
  samples, and its p50 over the executions; the ratios and the targets use it. The samples'
  median alone can flatter a system whose completions arrive in bursts: Baton announces a step's
  events only after the previous step's are confirmed, so two steps' \`node.completed\` events
  often arrive together, one gap near zero and the next twice as long. On the sequential graph at
  concurrency 1 that put Baton's sample median about 15% below its per-execution mean, while
  LangGraph's and the floor's two measures stay within a few percent of each other.
- **Completion** means: in Baton, the driver receiving the \`node.completed\` event (a plain
  NATS subscription to the events subjects, stamped on arrival); in the floor, the driver
  having the result message and its Redis compare-and-set done; in LangGraph, the
  \`PostgresSaver.put\` of the superstep that ran the node having returned. LangGraph.js 1.2
  writes checkpoints in the background, one after another per thread, while later steps already
  run (\`durability: "sync"\` only waits for them at the end of the run), so its node functions'
  own timing would leave persistence out.
- **CPU** per node = the CPU time this process (the driver and, for Baton, every Baton module),
  the NATS server, the Redis server and the Postgres server (its live processes, and the
  backends that exited, as their postmaster counts them) used during the system's measured
  turns, read from \`/proc\`, divided by the nodes completed (\`bench/engine/cpu.ts\`).
  *CPUs busy* is that CPU over the turns' wall time and the machine's ${cpuCount} CPUs. A system
  spending C ms per node completes at most ${cpuCount} × 1000 ÷ C nodes per second here, and at one
  concurrency its per-node time goes with the inverse of its steps/s (c executions in flight,
  each waiting for its own nodes; start nodes, whose admission is left out of the per-node
  samples, make this loose: a system whose executions spend much of their time being admitted
  has a per-node time below what its steps/s suggest). The CPU counts everything a system does
  in its turns, admission included. Where the ceiling left by the servers' CPU alone is far
  below the floor's measured steps/s, no change to Baton's process can bring its steps/s to the
  floor's on this machine ([ADR 011](adr/011-floor-target-and-cpu.md)). The servers are shared, so anything else using them during
  a run is counted too.
- **Steps/s** = nodes completed ÷ wall time of the measured phase (the system's rounds added
  up), across all concurrent executions.
- **Execution p50** = median time from the driver asking for an execution (for Baton,
  \`POST /api/agent-workflows/:id/execute\`) to seeing it end (\`execution.completed\`; for
  LangGraph, \`invoke\` returning).
- **Concurrency** c = c executions in flight at once, each started as soon as one ends.
  Every cell first runs ${warmup} warm-up executions that are not counted, then ${iterations} measured ones.
- **Baton** runs in-process through \`startBaton\` (bin/start.ts) with every module, on an
  isolated bus prefix, Postgres schema and data dir${batonSettings ? ` (${batonSettings}, the defaults)` : ""};
  workflows are created and executed through the gateway's REST API.
- **Floor**, per node: publish a work item to a JetStream work-queue stream (file storage,
  publish ack awaited); a worker (concurrency 16, as Baton's tool worker) takes it, acks it and
  publishes a result to a second work-queue stream (ack awaited); the driver takes the result,
  acks it, and writes the execution's checkpoint with one compare-and-set
  (\`redisCheckpointStore.put\` of \`@baton/checkpoints\`, the Lua script Baton uses). Parallel
  nodes run at once; their compare-and-sets are serialised per execution.
- **LangGraph**: \`@langchain/langgraph\` ${langgraphVersion} \`StateGraph\`s with the same nodes and edges,
  compiled with \`@langchain/langgraph-checkpoint-postgres\` ${saverVersion} \`PostgresSaver\` on the same
  Postgres (a schema of its own, a pool of 20 connections), default durability, one \`thread_id\`
  per execution.
- The three systems run in one process, never at the same time, but interleaved: each cell's
  ${iterations} measured executions per system are split into ${rounds} rounds, the systems taking turns in
  order in one round and in reverse order in the next, so a machine whose speed drifts during
  the run (other tenants, CPU steal) weighs on each system alike. Each turn starts with c
  executions that are not counted (the pool fills up before measuring) and ends as the pool
  drains; steps/s counts every node of the turns over their time.
- The harness's own checks (percentiles, samples, the floor's round trip; no timing assertions):
  \`./baton npm run test:jest -- --testMatch '<rootDir>/bench/**/*.test.ts' bench/engine\`.
- To judge a change to Baton, whose effect is often smaller than this table's run-to-run
  spread, use \`./baton node bench/engine/ab.ts\`: the old and the new path behind a temporary
  switch, alternated in short phases inside one process, with the CPU of every process
  involved read from \`/proc\` (see its header).
`;

// A partial run (some systems or graphs left out) prints its table but leaves the document alone.
const partial = systems.length < 3 || graphs.length < 2;
if (partial && !args["no-doc"]) console.error("a partial run (--systems / --graphs): docs/benchmarks.md left as it is");
if (!args["no-doc"] && !partial) {
  const current = await readFile(args.doc, "utf8").catch((err: NodeJS.ErrnoException) => {
    if (err.code === "ENOENT") return "";
    throw err;
  });
  await writeFile(args.doc, upsertSection(current, section));
  console.error(`wrote the Engine section of ${args.doc}`);
}
if (failures.length > 0) process.exitCode = 1;
