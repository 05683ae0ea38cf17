/** What the runner needs of each system under test. */
import type { BenchGraph, ExecutionTrace } from "./stats.ts";

export interface BenchSystem {
  /** Row label in the table. */
  readonly name: string;
  /** Prepares one graph (e.g. creates the workflow) and returns a function that runs one execution of it. */
  prepare(graph: BenchGraph): Promise<() => Promise<ExecutionTrace>>;
  /** Releases connections and deletes everything the system created. */
  close(): Promise<void>;
}
