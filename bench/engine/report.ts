/** The benchmark's markdown: the results table, the targets, and the Engine section of docs/benchmarks.md. */
import { cpuTotal, type CpuMs } from "./cpu.ts";
import type { CellResult } from "./stats.ts";

export const FLOOR = "floor";
export const LANGGRAPH = "langgraph";
export const BATON = "baton";

export interface Row extends CellResult {
  /** FLOOR, LANGGRAPH or BATON. */
  kind: string;
  /** CPU per node completed, by process group, over the measured turns. */
  cpuPerNode?: CpuMs;
  /** The share of the machine's CPUs those processes used while the system's turns ran (0…1). */
  busy?: number;
}

const ms = (v: number): string => (Number.isFinite(v) ? v.toFixed(2) : "—");
const ratio = (v: number): string => (Number.isFinite(v) ? `${v.toFixed(2)}×` : "—");

function peer(rows: readonly Row[], kind: string, r: Row): Row | undefined {
  return rows.find((o) => o.kind === kind && o.graph === r.graph && o.concurrency === r.concurrency);
}

export function table(rows: readonly Row[]): string {
  const lines = [
    "| system | graph | concurrency | executions | per-node p50 (ms) | per-node p99 (ms) | per-node mean, p50 of executions (ms) | steps/s | execution p50 (ms) | mean ÷ floor | mean ÷ LangGraph |",
    "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
  ];
  for (const r of rows) {
    const floor = peer(rows, FLOOR, r);
    const lg = peer(rows, LANGGRAPH, r);
    lines.push(
      `| ${r.system} | ${r.graph} | ${r.concurrency} | ${r.executions} | ${ms(r.p50)} | ${ms(r.p99)} | ${ms(r.meanP50)} | ${r.stepsPerSecond.toFixed(0)} | ${ms(r.executionP50)} | ` +
        `${floor ? ratio(r.meanP50 / floor.meanP50) : "—"} | ${lg ? ratio(r.meanP50 / lg.meanP50) : "—"} |`,
    );
  }
  return lines.join("\n");
}

/** Where each cell's CPU went, per node: this process and each server, with the machine's load. */
export function cpuTable(rows: readonly Row[]): string {
  const lines = [
    "| system | graph | concurrency | this process (ms) | NATS (ms) | Redis (ms) | Postgres (ms) | all (ms) | all ÷ floor | CPUs busy |",
    "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|",
  ];
  for (const r of rows) {
    const c = r.cpuPerNode;
    if (!c) continue;
    const floor = peer(rows, FLOOR, r)?.cpuPerNode;
    lines.push(
      `| ${r.system} | ${r.graph} | ${r.concurrency} | ${ms(c.process)} | ${ms(c.nats)} | ${ms(c.redis)} | ${ms(c.postgres)} | ${ms(cpuTotal(c))} | ` +
        `${floor ? ratio(cpuTotal(c) / cpuTotal(floor)) : "—"} | ${r.busy === undefined ? "—" : `${(r.busy * 100).toFixed(0)}%`} |`,
    );
  }
  return lines.join("\n");
}

/**
 * What CPU alone allows, per Baton cell: a system that spends C ms of CPU per node (all
 * processes) on a machine of N CPUs completes at most N × 1000 ÷ C nodes per second, with every
 * CPU busy and nothing else running. At one concurrency a system's per-node time goes with the
 * inverse of its steps/s (c executions in flight, each waiting for its own nodes), so a ceiling
 * far under the floor's measured steps/s bounds how close its per-node time can come, whatever
 * its process does. One line per Baton cell: its ceiling, and the ceiling its servers' CPU
 * (NATS, Redis, Postgres) alone would leave it, each against the floor's measured steps/s.
 */
export function cpuCeilings(rows: readonly Row[], cpuCount: number): string {
  const lines: string[] = [];
  for (const r of rows.filter((x) => x.kind === BATON && x.cpuPerNode)) {
    const floor = peer(rows, FLOOR, r);
    if (!floor) continue;
    const c = r.cpuPerNode!;
    const servers = c.nats + c.redis + c.postgres;
    const all = (cpuCount * 1000) / cpuTotal(c);
    const serversOnly = (cpuCount * 1000) / servers;
    lines.push(
      `- ${r.graph}, concurrency ${r.concurrency}: the floor ran ${floor.stepsPerSecond.toFixed(0)} steps/s. Baton's ${ms(cpuTotal(c))} ms of CPU per node allow at most ` +
        `${all.toFixed(0)} steps/s on ${cpuCount} CPUs (${ratio(all / floor.stepsPerSecond)} the floor's); its servers' ${ms(servers)} ms alone ` +
        `(NATS ${ms(c.nats)}, Redis ${ms(c.redis)}, Postgres ${ms(c.postgres)}) would allow at most ${serversOnly.toFixed(0)} (${ratio(serversOnly / floor.stepsPerSecond)}).`,
    );
  }
  return lines.join("\n");
}

/**
 * One line per Baton cell: is the per-node time within 1.2× the floor, and below LangGraph +
 * Postgres? Judged on the per-execution mean (p50 over executions), which bursts of
 * completions do not flatter; a peer missing from the run is "not met".
 */
export function targets(rows: readonly Row[]): string {
  const lines: string[] = [];
  for (const r of rows.filter((x) => x.kind === BATON)) {
    const floor = peer(rows, FLOOR, r);
    const lg = peer(rows, LANGGRAPH, r);
    const f = floor ? r.meanP50 / floor.meanP50 : Number.NaN;
    const l = lg ? r.meanP50 / lg.meanP50 : Number.NaN;
    lines.push(
      `- ${r.graph}, concurrency ${r.concurrency}: ${ratio(f)} the floor (target ≤ 1.2×: ${f <= 1.2 ? "met" : "**not met**"}); ` +
        `${ratio(l)} LangGraph + Postgres (target < 1×: ${l < 1 ? "met" : "**not met**"}).`,
    );
  }
  return lines.join("\n");
}

export const BEGIN = "<!-- engine-benchmark:begin -->";
export const END = "<!-- engine-benchmark:end -->";

export const INTRO = `# Benchmarks

Measurements of Baton on one machine, each with the command that produced it, so anyone can
run it again. Numbers move with the hardware and with the code: compare the ratios in a row,
not absolute numbers across machines.
`;

/** Replaces the Engine section of `doc` (between the markers), or appends it; creates the document when empty. */
export function upsertSection(doc: string, section: string): string {
  const block = `${BEGIN}\n${section.trim()}\n${END}`;
  const base = doc.trim() === "" ? INTRO : doc;
  const start = base.indexOf(BEGIN);
  const end = base.indexOf(END);
  if (start >= 0 && end > start) return base.slice(0, start) + block + base.slice(end + END.length);
  return `${base.trimEnd()}\n\n${block}\n`;
}
