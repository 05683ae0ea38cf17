/** The benchmark's markdown: the results table, the targets, and the Engine section of docs/benchmarks.md. */
import type { CellResult } from "./stats.ts";

export const FLOOR = "floor";
export const LANGGRAPH = "langgraph";
export const BATON = "baton";

export interface Row extends CellResult {
  /** FLOOR, LANGGRAPH or BATON. */
  kind: string;
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
