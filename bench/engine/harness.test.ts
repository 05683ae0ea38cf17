/**
 * The engine benchmark's own arithmetic (no timing assertions). Rules checked:
 * - nearest-rank percentiles; empty input gives NaN, a percentile outside 0…100 throws;
 * - per-node samples run from a node's last predecessor's completion to its own, and
 *   leave out start nodes; a node without a completion is an error, not a silent gap;
 * - the per-node mean is each execution's mean sample, with its median over executions;
 * - the pool never runs more than `concurrency` jobs at once and returns results in order;
 * - the docs section is replaced between its markers, appended when absent, and the
 *   document is created with an intro when empty;
 * - the CPU table shows each process group per node and the total against the floor's; the
 *   ceilings are the steps/s that Baton's CPU per node, and its servers' share alone, allow on
 *   the machine's CPUs, against the floor's measured steps/s.
 */
import { describe, expect, it } from "@jest/globals";
import { BATON, BEGIN, cpuCeilings, cpuTable, END, FLOOR, upsertSection, type Row } from "./report.ts";
import { fanOutGraph, nodeSamples, percentile, runPool, sequentialGraph, summarise } from "./stats.ts";

describe("percentile", () => {
  it("takes the nearest rank", () => {
    const v = [5, 1, 4, 2, 3];
    expect(percentile(v, 50)).toBe(3);
    expect(percentile(v, 99)).toBe(5);
    expect(percentile(v, 0)).toBe(1);
    expect(percentile(Array.from({ length: 100 }, (_, i) => i + 1), 99)).toBe(99);
  });
  it("refuses nonsense", () => {
    expect(percentile([], 50)).toBeNaN();
    expect(() => percentile([1], 101)).toThrow(RangeError);
  });
});

describe("nodeSamples", () => {
  it("measures a chain link by link, without the start node", () => {
    const g = sequentialGraph(3);
    const doneAt = new Map([["n1", 10], ["n2", 13], ["n3", 20]]);
    expect(nodeSamples(g, { startedAt: 0, doneAt, endedAt: 21 })).toEqual([3, 7]);
  });
  it("measures a join from its last branch", () => {
    const g = fanOutGraph(2);
    const doneAt = new Map([["fork", 1], ["b1", 4], ["b2", 6], ["join", 9]]);
    expect(nodeSamples(g, { startedAt: 0, doneAt, endedAt: 9 })).toEqual([3, 5, 3]);
  });
  it("fails on a missing completion", () => {
    const g = sequentialGraph(2);
    expect(() => nodeSamples(g, { startedAt: 0, doneAt: new Map([["n1", 1]]), endedAt: 2 })).toThrow("n2");
  });
});

describe("summarise", () => {
  const g = sequentialGraph(2);
  // Two executions of one system, measured in two rounds with 1 s of another system's between them.
  const traces = [
    { startedAt: 0, doneAt: new Map([["n1", 100], ["n2", 300]]), endedAt: 300 },
    { startedAt: 1300, doneAt: new Map([["n1", 1400], ["n2", 1500]]), endedAt: 1500 },
  ];
  it("takes the percentiles over every execution's samples", () => {
    const r = summarise("x", g, 1, traces);
    expect([r.p50, r.p99, r.executions, r.executionP50]).toEqual([100, 200, 2, 200]);
  });
  it("takes each execution's mean sample, then its median over executions", () => {
    // Completions in bursts (gaps 0 and 2 … ) against an even pace of 1: the same mean, a lower median.
    const chain = sequentialGraph(5);
    const bursty = { startedAt: 0, doneAt: new Map([["n1", 1], ["n2", 3], ["n3", 3], ["n4", 5], ["n5", 5]]), endedAt: 5 };
    const even = { startedAt: 0, doneAt: new Map([["n1", 1], ["n2", 2], ["n3", 3], ["n4", 4], ["n5", 6]]), endedAt: 6 };
    const b = summarise("b", chain, 1, [bursty]);
    expect([b.p50, b.meanP50]).toEqual([0, 1]);
    const r = summarise("x", chain, 1, [bursty, even, even]);
    expect(r.meanP50).toBe(1.25);
    expect(summarise("x", chain, 1, [bursty, bursty, even]).meanP50).toBe(1);
  });
  it("counts steps/s over the time the system ran, when given, not first start to last end", () => {
    expect(summarise("x", g, 1, traces).stepsPerSecond).toBeCloseTo(4 / 1.5);
    expect(summarise("x", g, 1, traces, { nodes: 6, ms: 500 }).stepsPerSecond).toBeCloseTo(6 / 0.5);
  });
});

describe("runPool", () => {
  it("bounds concurrency and keeps order", async () => {
    let running = 0;
    let peak = 0;
    const out = await runPool(10, 3, async (i) => {
      running++;
      peak = Math.max(peak, running);
      await new Promise((r) => setImmediate(r));
      running--;
      return i * 2;
    });
    expect(out).toEqual([0, 2, 4, 6, 8, 10, 12, 14, 16, 18]);
    expect(peak).toBe(3);
  });
});

describe("upsertSection", () => {
  it("creates, appends and replaces", () => {
    const created = upsertSection("", "## Engine\none");
    expect(created).toMatch(/^# Benchmarks/);
    expect(created).toContain(`${BEGIN}\n## Engine\none\n${END}`);
    const other = "# Benchmarks\n\n## Tool workers\nkeep me\n";
    const appended = upsertSection(other, "## Engine\none");
    expect(appended.startsWith(other.trimEnd())).toBe(true);
    const replaced = upsertSection(appended + "\n## Later\nalso kept\n", "## Engine\ntwo");
    expect(replaced).toContain("## Engine\ntwo");
    expect(replaced).not.toContain("one");
    expect(replaced).toContain("keep me");
    expect(replaced).toContain("also kept");
  });
});

describe("CPU per node", () => {
  const cell = (kind: string, concurrency: number, cpu: [number, number, number, number], busy: number): Row => ({
    kind, system: kind, graph: "sequential-10", concurrency, executions: 1, p50: 1, p99: 1, meanP50: 1, stepsPerSecond: 1, executionP50: 1,
    cpuPerNode: { process: cpu[0], nats: cpu[1], redis: cpu[2], postgres: cpu[3] }, busy,
  });
  const rows = [
    cell(BATON, 1, [1, 0.5, 0.1, 0.4], 0.6),
    cell(FLOOR, 1, [0.2, 0.1, 0.05, 0], 0.5),
    cell(BATON, 16, [1.5, 0.4, 0.1, 0.5], 0.97),
    cell(FLOOR, 16, [0.25, 0.15, 0.1, 0], 0.9),
  ];
  it("lists every group, the total and its ratio to the floor's", () => {
    const t = cpuTable(rows).split("\n");
    expect(t).toHaveLength(6);
    expect(t[2]).toBe("| baton | sequential-10 | 1 | 1.00 | 0.50 | 0.10 | 0.40 | 2.00 | 5.71× | 60% |");
    expect(t[3]).toBe("| floor | sequential-10 | 1 | 0.20 | 0.10 | 0.05 | 0.00 | 0.35 | 1.00× | 50% |");
  });
  it("gives the steps/s that CPU alone allows, against the floor's", () => {
    const floor16 = { ...rows[3]!, stepsPerSecond: 2000 };
    const lines = cpuCeilings([rows[0]!, rows[1]!, rows[2]!, floor16], 2).split("\n");
    expect(lines).toHaveLength(2);
    // 2.5 ms per node on 2 CPUs: 800 steps/s at most; the servers' 1.0 ms alone: 2000.
    expect(lines[1]).toBe(
      "- sequential-10, concurrency 16: the floor ran 2000 steps/s. Baton's 2.50 ms of CPU per node allow at most 800 steps/s on 2 CPUs (0.40× the floor's); " +
        "its servers' 1.00 ms alone (NATS 0.40, Redis 0.10, Postgres 0.50) would allow at most 2000 (1.00×).",
    );
    expect(cpuCeilings([rows[0]!], 2)).toBe("");
  });
});
