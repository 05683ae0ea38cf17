/**
 * Micro-benchmark of `redisCheckpointStore(...).put()` against the real Redis
 * (BATON_REDIS_URL, default redis://127.0.0.1:6379). Not a test.
 *
 *   ./baton node bench/checkpoints/put.ts [rounds=5] [executions=200] [steps=30]
 *
 * Each round writes `executions` executions of `steps` versions of an evolving,
 * executor-like state of about 4 KB (one node finishes per step: its output lands in
 * the context, the edges, ready list, timers and outbox change), first one execution
 * after another (every put awaited, as one executor step does), then 16 executions
 * at a time. The states are built before the clock starts. It reports CPU per put
 * (process.cpuUsage(), user + system, this process only — Redis's own CPU is not
 * included) and wall time per put, median and min over the rounds.
 *
 * `put+read` also reads the returned checkpoint's state (parsed on first read). To
 * compare with another version of the store, copy its redis.ts and delta.ts next to
 * this file (e.g. into `baseline/`) and add it to `implementations`; the rounds
 * alternate between implementations. `BENCH_ONLY=<name>` runs one (e.g. under --cpu-prof).
 */
import { randomUUID } from "node:crypto";
import { createRedis, deleteKeysByPrefix, redisCheckpointStore, type Redis } from "@baton/checkpoints";

type Store = { put(executionId: number, state: unknown, expectedVersion: number): Promise<unknown> };
type Factory = (redis: Redis, prefix: string) => Store;

const implementations: [string, Factory][] = ([
  ["put", (redis, prefix) => redisCheckpointStore(redis, { prefix })],
  [
    "put+read",
    (redis, prefix) => {
      const store = redisCheckpointStore(redis, { prefix });
      return { put: async (id, state, expected) => (await store.put(id, state, expected)).state };
    },
  ],
] satisfies [string, Factory][]).filter(([name]) => process.env.BENCH_ONLY === undefined || process.env.BENCH_ONLY === name);

const [rounds = 5, executions = 200, steps = 30] = process.argv.slice(2).map(Number);
const NODES = 12;

/** The states of one execution, version 1 first: about 4 KB each, a few fields change per step. */
function executionStates(executionId: number): Record<string, unknown>[] {
  const nodeIds = Array.from({ length: NODES }, (_, i) => `node_${i}_${["llm", "tool", "branch", "map"][i % 4]}`);
  let state: Record<string, unknown> = {
    v: 1,
    executionId,
    tenantId: "tenant-7f3c2a",
    workflowId: 42,
    workflowVersion: 3,
    status: "running",
    context: {
      input: {
        question: "Summarise the open incidents of the last week and propose owners for each.",
        filters: { severity: ["high", "critical"], teams: ["platform", "payments", "search"] },
        requestedBy: "user-1234",
      },
    },
    nodes: Object.fromEntries(nodeIds.map((id) => [id, { status: "waiting", attempt: 0 }])),
    edges: {},
    ready: [nodeIds[0]],
    pauseSeq: 0,
    startedAt: "2025-03-01T10:00:00.000Z",
    tokenUsage: { input: 0, output: 0 },
    outbox: [],
    carried: [],
  };
  const out: Record<string, unknown>[] = [];
  for (let step = 0; step < steps; step++) {
    const i = step % NODES;
    const id = nodeIds[i]!;
    const nextId = nodeIds[(i + 1) % NODES]!;
    const at = new Date(Date.UTC(2025, 2, 1, 10, 0, step)).toISOString();
    const nodes = state.nodes as Record<string, Record<string, unknown>>;
    const tokenUsage = state.tokenUsage as { input: number; output: number };
    const context = { ...(state.context as Record<string, unknown>) };
    // Only the outputs of the last few nodes are kept, so the size stays near 4 KB.
    delete context[nodeIds[(i + NODES - 5) % NODES]!];
    context[id] = {
      summary: `Result of step ${step}: ${"incident analysis ".repeat(4)}`.trim(),
      items: Array.from({ length: 3 }, (_, k) => ({ id: `INC-${1000 + step * 3 + k}`, owner: `team-${k}`, score: (step * 7 + k) % 10 })),
      at,
    };
    state = {
      ...state,
      context,
      nodes: {
        ...nodes,
        [id]: { status: "completed", attempt: (nodes[id]!.attempt as number) + 1, startedAt: at, completedAt: at, input: { from: "$.input", step } },
        [nextId]: { status: "running", attempt: (nodes[nextId]!.attempt as number) + 1, startedAt: at, callId: `call-${executionId}-${step}`, timerId: undefined },
      },
      edges: { ...(state.edges as Record<string, string>), [`${id}->${nextId}`]: "taken" },
      ready: [nodeIds[(i + 2) % NODES]],
      timers: { [`t${step}`]: { dueAt: at, kind: "timeout", nodeId: nextId, callId: `call-${executionId}-${step}` } },
      lastNode: id,
      tokenUsage: { input: tokenUsage.input + 812, output: tokenUsage.output + 133 },
      outbox: [{ kind: "tool.call", callId: `call-${executionId}-${step}`, tool: "search.incidents", args: { query: `step ${step}`, limit: 20 } }],
      carried: step % 3 === 0 ? [] : [{ version: step, effects: [{ kind: "event", name: "progress", data: { step } }] }],
    };
    out.push(state);
  }
  return out;
}

interface Sample {
  cpu: number;
  wall: number;
}

async function round(redis: Redis, factory: Factory, states: Record<string, unknown>[][], concurrency: number): Promise<Sample> {
  const prefix = `baton-bench:${randomUUID()}`;
  const store = factory(redis, prefix);
  let next = 0;
  const worker = async (): Promise<void> => {
    for (let e = next++; e < states.length; e = next++) {
      const versions = states[e]!;
      for (let v = 0; v < versions.length; v++) await store.put(e + 1, versions[v], v);
    }
  };
  const cpu0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  await Promise.all(Array.from({ length: concurrency }, worker));
  const wall = Number(process.hrtime.bigint() - t0) / 1e3;
  const cpu = process.cpuUsage(cpu0);
  const puts = states.length * (states[0]?.length ?? 0);
  // Clean up outside the measurement.
  await deleteKeysByPrefix(redis, prefix);
  return { cpu: (cpu.user + cpu.system) / puts, wall: wall / puts };
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
};

const redis = createRedis(process.env.BATON_REDIS_URL ?? "redis://127.0.0.1:6379");
const states = Array.from({ length: executions }, (_, e) => executionStates(e + 1));
const sizes = states.flat().map((s) => JSON.stringify(s).length);
console.log(`${executions} executions × ${steps} puts, state ${Math.min(...sizes)}–${Math.max(...sizes)} bytes (mean ${Math.round(sizes.reduce((a, b) => a + b, 0) / sizes.length)}), ${rounds} rounds, implementations interleaved`);

for (const concurrency of [1, 16]) {
  const samples = new Map<string, Sample[]>(implementations.map(([name]) => [name, []]));
  // Warm-up (JIT, script cache), then the measured rounds, alternating the order.
  for (const [, factory] of implementations) await round(redis, factory, states.slice(0, 20), concurrency);
  for (let r = 0; r < rounds; r++) {
    const order = r % 2 === 0 ? implementations : [...implementations].reverse();
    for (const [name, factory] of order) samples.get(name)!.push(await round(redis, factory, states, concurrency));
  }
  for (const [name, list] of samples) {
    const cpu = list.map((s) => s.cpu);
    const wall = list.map((s) => s.wall);
    console.log(
      `concurrency ${String(concurrency).padStart(2)}  ${name.padEnd(10)} CPU/put median ${median(cpu).toFixed(1)} µs (min ${Math.min(...cpu).toFixed(1)})   wall/put median ${median(wall).toFixed(1)} µs (min ${Math.min(...wall).toFixed(1)})`,
    );
  }
}
await redis.quit();
