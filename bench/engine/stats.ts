/** Pure measurement helpers of the engine benchmark: graph shapes, per-node samples, percentiles. */

/** A benchmark graph: node ids in topological order and the edges between them. */
export interface BenchGraph {
  name: string;
  nodes: readonly string[];
  edges: readonly (readonly [from: string, to: string])[];
}

/** `n1 → n2 → … → n10`. */
export function sequentialGraph(length = 10): BenchGraph {
  const nodes = Array.from({ length }, (_, i) => `n${i + 1}`);
  return { name: `sequential-${length}`, nodes, edges: nodes.slice(1).map((to, i) => [nodes[i]!, to] as const) };
}

/** `fork → b1…b8 → join`: one node, `width` parallel nodes, one join. */
export function fanOutGraph(width = 8): BenchGraph {
  const branches = Array.from({ length: width }, (_, i) => `b${i + 1}`);
  return {
    name: `fan-out-1-${width}-1`,
    nodes: ["fork", ...branches, "join"],
    edges: [...branches.map((b) => ["fork", b] as const), ...branches.map((b) => [b, "join"] as const)],
  };
}

export function predecessors(graph: BenchGraph): Map<string, string[]> {
  const preds = new Map<string, string[]>(graph.nodes.map((n) => [n, []]));
  for (const [from, to] of graph.edges) preds.get(to)!.push(from);
  return preds;
}

/** What the driver saw of one execution, in `performance.now()` milliseconds. */
export interface ExecutionTrace {
  /** Just before the driver asked for the execution. */
  startedAt: number;
  /** When the driver saw each node complete. */
  doneAt: Map<string, number>;
  /** When the driver saw the execution end. */
  endedAt: number;
}

/**
 * Per-node overhead samples of one execution: for every node that has predecessors,
 * the time from its last predecessor's completion to its own completion, both as seen
 * by the driver. Start nodes are left out so that admission (API call, row insert,
 * initial checkpoint) is not counted as node overhead.
 */
export function nodeSamples(graph: BenchGraph, trace: ExecutionTrace, preds = predecessors(graph)): number[] {
  const out: number[] = [];
  for (const node of graph.nodes) {
    const ps = preds.get(node) ?? [];
    if (ps.length === 0) continue;
    const done = trace.doneAt.get(node);
    if (done === undefined) throw new Error(`no completion seen for node ${node}`);
    let ready = -Infinity;
    for (const p of ps) {
      const t = trace.doneAt.get(p);
      if (t === undefined) throw new Error(`no completion seen for node ${p}`);
      ready = Math.max(ready, t);
    }
    out.push(done - ready);
  }
  return out;
}

/** Nearest-rank percentile (`p` in 0…100) of unsorted values. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  if (!(p >= 0 && p <= 100)) throw new RangeError(`percentile must be within 0…100, got ${p}`);
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length));
  return sorted[rank - 1]!;
}

/** Runs `total` jobs with at most `concurrency` in flight; resolves with their results in start order. */
export async function runPool<T>(total: number, concurrency: number, job: (i: number) => Promise<T>): Promise<T[]> {
  const results: T[] = new Array<T>(total);
  let next = 0;
  const lane = async (): Promise<void> => {
    while (next < total) {
      const i = next++;
      results[i] = await job(i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, total) }, lane));
  return results;
}

export interface CellResult {
  system: string;
  graph: string;
  concurrency: number;
  executions: number;
  /** Percentiles over every per-node sample of every execution. */
  p50: number;
  p99: number;
  /**
   * The median over executions of each execution's mean per-node sample. Unlike the
   * samples' median, it does not fall when completions arrive in bursts (two nodes seen
   * together make one gap near zero and the next twice as long): the targets use it.
   */
  meanP50: number;
  stepsPerSecond: number;
  /** Median driver-observed wall time of one execution, start request to end seen. */
  executionP50: number;
}

/**
 * Summarises the measured (post warm-up) executions of one system × graph × concurrency cell.
 * Steps/s is `throughput` when given (the nodes the system completed while it ran and for
 * how long: its executions may have run in rounds between other systems'), otherwise the
 * traces' nodes over their first start to last end.
 */
export function summarise(
  system: string,
  graph: BenchGraph,
  concurrency: number,
  traces: readonly ExecutionTrace[],
  throughput?: { nodes: number; ms: number },
): CellResult {
  const preds = predecessors(graph);
  const perExecution = traces.map((t) => nodeSamples(graph, t, preds));
  const samples = perExecution.flat();
  const means = perExecution.map((v) => v.reduce((a, b) => a + b, 0) / v.length);
  const { nodes, ms } = throughput ?? {
    nodes: traces.length * graph.nodes.length,
    ms: Math.max(...traces.map((t) => t.endedAt)) - Math.min(...traces.map((t) => t.startedAt)),
  };
  return {
    system,
    graph: graph.name,
    concurrency,
    executions: traces.length,
    p50: percentile(samples, 50),
    p99: percentile(samples, 99),
    meanP50: percentile(means, 50),
    stepsPerSecond: nodes / (ms / 1000),
    executionP50: percentile(traces.map((t) => t.endedAt - t.startedAt), 50),
  };
}
