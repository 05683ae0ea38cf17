/**
 * The same two graphs in LangGraph.js, checkpointed by PostgresSaver on the same
 * Postgres (a schema of its own). Nodes are no-ops; each execution is one thread.
 *
 * A node counts as done when the checkpoint holding its result is in Postgres: each
 * node records the superstep it ran in (`metadata.langgraph_step`), and the saver's
 * `put` stamps the time its write for that step returned. LangGraph.js writes
 * checkpoints in the background, one after another per thread, while later steps
 * already run (in 1.2.x `durability: "sync"` only waits for them at the end of the
 * run, like the default `"async"`), so the node functions' own timing would show
 * steps without their persistence.
 */
import { randomBytes } from "node:crypto";
import { performance } from "node:perf_hooks";
import { Annotation, END, START, StateGraph } from "@langchain/langgraph";
import { PostgresSaver } from "@langchain/langgraph-checkpoint-postgres";
import pg from "pg";
import type { BenchSystem } from "./system.ts";
import { predecessors } from "./stats.ts";
import type { BenchGraph, ExecutionTrace } from "./stats.ts";

export interface LangGraphOptions {
  databaseUrl: string;
  /** Postgres connections of the saver's pool. @default 20 */
  poolSize?: number;
}

const State = Annotation.Root({ value: Annotation<number> });

interface Thread {
  /** Superstep each node ran in. */
  stepOf: Map<string, number>;
  /** When the checkpoint of each superstep was written. */
  writtenAt: Map<number, number>;
}

type NodeConfig = { configurable?: { thread_id?: string }; metadata?: { langgraph_step?: number } };

export async function createLangGraph(opts: LangGraphOptions): Promise<BenchSystem> {
  const schema = `bench_lg_${randomBytes(4).toString("hex")}`;
  const pool = new pg.Pool({ connectionString: opts.databaseUrl, max: opts.poolSize ?? 20 });
  await pool.query(`CREATE SCHEMA IF NOT EXISTS "${schema}"`);
  const threads = new Map<string, Thread>();

  class TimedSaver extends PostgresSaver {
    override async put(...args: Parameters<PostgresSaver["put"]>): ReturnType<PostgresSaver["put"]> {
      const written = await super.put(...args);
      const t = performance.now();
      const [config, , metadata] = args;
      const thread = threads.get(String(config.configurable?.thread_id));
      if (thread && typeof metadata.step === "number" && !thread.writtenAt.has(metadata.step)) thread.writtenAt.set(metadata.step, t);
      return written;
    }
  }
  const saver = new TimedSaver(pool, undefined, { schema });
  await saver.setup();
  let nextThread = 0;

  return {
    name: "LangGraph + PostgresSaver",
    async prepare(graph: BenchGraph) {
      const preds = predecessors(graph);
      // The builder's types track node names as literals; here they come from data.
      const builder = new StateGraph(State) as unknown as {
        addNode(name: string, fn: (state: unknown, config: NodeConfig) => Record<string, never>): void;
        addEdge(from: string, to: string): void;
        compile(o: { checkpointer: PostgresSaver }): { invoke(input: unknown, config: unknown): Promise<unknown> };
      };
      for (const node of graph.nodes) {
        builder.addNode(node, (_state, config) => {
          const thread = threads.get(String(config.configurable?.thread_id));
          const step = config.metadata?.langgraph_step;
          if (thread && typeof step === "number" && !thread.stepOf.has(node)) thread.stepOf.set(node, step);
          return {};
        });
      }
      for (const node of graph.nodes) if ((preds.get(node) ?? []).length === 0) builder.addEdge(START, node);
      for (const [from, to] of graph.edges) builder.addEdge(from, to);
      const sources = new Set(graph.edges.map(([from]) => from));
      for (const node of graph.nodes) if (!sources.has(node)) builder.addEdge(node, END);
      const app = builder.compile({ checkpointer: saver });
      return async (): Promise<ExecutionTrace> => {
        const threadId = `${graph.name}-${nextThread++}`;
        const thread: Thread = { stepOf: new Map(), writtenAt: new Map() };
        threads.set(threadId, thread);
        const startedAt = performance.now();
        await app.invoke({ value: 0 }, { configurable: { thread_id: threadId } });
        const endedAt = performance.now();
        threads.delete(threadId);
        const doneAt = new Map<string, number>();
        for (const node of graph.nodes) {
          const step = thread.stepOf.get(node);
          const t = step === undefined ? undefined : thread.writtenAt.get(step);
          if (t === undefined) throw new Error(`LangGraph ran no checkpointed step for node ${node} of ${graph.name}`);
          doneAt.set(node, t);
        }
        return { startedAt, doneAt, endedAt };
      };
    },
    async close() {
      await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await pool.end();
    },
  };
}
