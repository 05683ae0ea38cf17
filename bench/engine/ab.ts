/**
 * Paired A/B comparison of a change to Baton's engine, inside one process: the two builds are
 * one build with a switch, flipped between short phases (A B B A A B B A ...), so the
 * machine's drift over minutes (10–30% on the 2-CPU machines this project runs on) falls on
 * both sides alike. Back-to-back runs of two builds cannot show a change of a few percent;
 * this can, given enough phases.
 *
 *   ./baton node bench/engine/ab.ts [--graph sequential-10|fan-out-1-8-1] [--concurrency 1]
 *     [--phases 10] [--per 150] [--warmup 50]
 *
 * The switch: while a B phase runs, `globalThis.__batonBenchB` is true. Put a temporary
 * `if ((globalThis as Record<string, unknown>).__batonBenchB) …` into the code under test —
 * the new path, or a knock-out of some work — and take it out again before committing.
 * Nothing in the repository reads the switch.
 *
 * Per phase it records each execution's mean per-node time (as `run.ts` does, see
 * stats.ts), the executions' median duration (from the execute call to the last event) and the CPU, from `/proc` (Linux), of this process, the NATS and Redis servers
 * and every Postgres process, per execution. It prints both sides' averages and the B/A
 * ratio of each phase pair. Needs NATS, Redis and Postgres as `run.ts` does.
 */
import { parseArgs } from "node:util";
import { positiveOption as positive } from "./args.ts";
import { createBatonBench } from "./baton.ts";
import { cpuMeter } from "./cpu.ts";
import { fanOutGraph, nodeSamples, runPool, sequentialGraph } from "./stats.ts";

const { values: args } = parseArgs({
  options: {
    graph: { type: "string", default: "sequential-10" },
    concurrency: { type: "string", default: "1" },
    phases: { type: "string", default: "10" },
    per: { type: "string", default: "150" },
    warmup: { type: "string", default: "50" },
  },
});
const concurrency = positive("concurrency", args.concurrency);
const phases = positive("phases", args.phases);
const per = positive("per", args.per);
const warmup = positive("warmup", args.warmup);
const graph = [sequentialGraph(10), fanOutGraph(8)].find((g) => g.name === args.graph);
if (!graph) throw new Error(`--graph: "${args.graph}" is not sequential-10 or fan-out-1-8-1`);

const meter = cpuMeter();
const baton = await createBatonBench({
  natsUrl: process.env.BATON_NATS_URL ?? "nats://127.0.0.1:4222",
  redisUrl: process.env.BATON_REDIS_URL ?? "redis://127.0.0.1:6379",
  databaseUrl: process.env.BATON_BENCH_DATABASE_URL ?? "postgresql://postgres@127.0.0.1:5432/test",
});
const switchB = globalThis as Record<string, unknown>;
interface Side {
  perNode: number[];
  /** Median execution duration per phase. A change that only delays a run's early events lowers the per-node mean, not this. */
  execution: number[];
  cpu: { process: number[]; nats: number[]; redis: number[]; postgres: number[] };
}
const sides: Record<"A" | "B", Side> = {
  A: { perNode: [], execution: [], cpu: { process: [], nats: [], redis: [], postgres: [] } },
  B: { perNode: [], execution: [], cpu: { process: [], nats: [], redis: [], postgres: [] } },
};
try {
  const run = await baton.prepare(graph);
  await runPool(warmup, concurrency, () => run());
  for (let i = 0; i < phases * 2; i++) {
    const side = i % 4 === 0 || i % 4 === 3 ? "A" : "B";
    switchB.__batonBenchB = side === "B";
    // The pool fills before the clock starts, under the phase's side.
    await runPool(concurrency, concurrency, () => run());
    const reading = meter.start();
    const traces = await runPool(per, concurrency, () => run());
    const used = reading.stop();
    const means = traces
      .map((t) => {
        const s = nodeSamples(graph, t);
        return s.reduce((a, b) => a + b, 0) / s.length;
      })
      .sort((a, b) => a - b);
    const s = sides[side];
    s.perNode.push(means[Math.floor(means.length / 2)]!);
    const durations = traces.map((t) => t.endedAt - t.startedAt).sort((a, b) => a - b);
    s.execution.push(durations[Math.floor(durations.length / 2)]!);
    s.cpu.process.push(used.process / per);
    s.cpu.nats.push(used.nats / per);
    s.cpu.redis.push(used.redis / per);
    s.cpu.postgres.push(used.postgres / per);
    console.error(`phase ${i + 1}/${phases * 2} (${side}): per-node mean p50 ${s.perNode.at(-1)!.toFixed(3)} ms`);
  }
} finally {
  delete switchB.__batonBenchB;
  await baton.close();
}

const avg = (xs: readonly number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length;
console.log(`${graph.name}, concurrency ${concurrency}, ${phases} phases of ${per} executions per side`);
for (const name of ["A", "B"] as const) {
  const { perNode, execution, cpu } = sides[name];
  const total = avg(cpu.process) + avg(cpu.nats) + avg(cpu.redis) + avg(cpu.postgres);
  console.log(
    `${name}: per-node ${avg(perNode).toFixed(3)} ms (phases: ${perNode.map((x) => x.toFixed(2)).join(" ")}); execution p50 ${avg(execution).toFixed(2)} ms; CPU per execution: ` +
      `this process ${avg(cpu.process).toFixed(2)}, NATS ${avg(cpu.nats).toFixed(2)}, Redis ${avg(cpu.redis).toFixed(2)}, Postgres ${avg(cpu.postgres).toFixed(2)}, all ${total.toFixed(2)} ms`,
  );
}
const pairs = sides.A.perNode.map((a, i) => sides.B.perNode[i]! / a);
console.log(`B/A per-node, by phase pair: ${pairs.map((r) => r.toFixed(2)).join(" ")} (B faster in ${pairs.filter((r) => r < 1).length} of ${pairs.length})`);
