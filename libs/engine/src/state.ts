/**
 * Execution state (what the checkpoint holds) and the effects a step asks the
 * executor to carry out. Both are plain JSON so they cross Redis, Postgres and the bus.
 */
import type { JsonObject, JsonValue } from "./json.ts";

export type ExecutionStatus = "running" | "paused" | "completed" | "failed" | "cancelled";
export type NodeStatus = "waiting" | "running" | "paused" | "completed" | "failed" | "skipped";

export interface NodeRun {
  status: NodeStatus;
  attempt: number;
  startedAt?: string;
  completedAt?: string;
  /** Idempotency key of the outstanding tool call. */
  callId?: string;
  error?: string;
}

export interface ExecutionError {
  code: string;
  message: string;
  nodeId?: string;
}

export interface ExecutionState {
  v: 1;
  executionId: number;
  tenantId: string;
  workflowId: number;
  workflowVersion: number;
  status: ExecutionStatus;
  /** `$` of every `$.path`: `{ input, <node outputs> }`. */
  context: JsonObject;
  nodes: Record<string, NodeRun>;
  /** Edge decisions, keyed `from->to`: taken or dead. */
  edges: Record<string, "taken" | "dead">;
  /** Nodes whose inputs are settled and that have not started yet, in order. */
  ready: string[];
  pause?: { nodeId: string; reason: string; seq: number };
  /** Incremented by every pause, so a redelivered pause is recognised. */
  pauseSeq: number;
  lastNode?: string;
  output?: JsonValue;
  error?: ExecutionError;
  startedAt: string;
  finishedAt?: string;
}

export type EngineEvent =
  | { kind: "node.started"; nodeId: string; nodeType: string; attempt: number }
  | { kind: "node.completed"; nodeId: string; nodeType: string; attempt: number; durationMs: number; output: JsonValue }
  | { kind: "node.failed"; nodeId: string; nodeType: string; attempt: number; code: string; error: string; retrying: boolean }
  | { kind: "execution.started" }
  | { kind: "execution.paused"; nodeId: string; reason: string }
  | { kind: "execution.resumed"; nodeId: string; decision: string }
  | { kind: "execution.completed"; output: JsonValue }
  | { kind: "execution.failed"; error: ExecutionError }
  | { kind: "execution.cancelled"; reason: string };

export interface JournalEntry {
  nodeId: string;
  nodeType: string;
  attempt: number;
  status: NodeStatus;
  input?: JsonValue;
  output?: JsonValue;
  error?: string;
  durationMs?: number;
  startedAt?: string;
  completedAt?: string;
  toolCalls?: JsonValue;
}

export type Effect =
  | { kind: "emit"; event: EngineEvent }
  | { kind: "journal"; entry: JournalEntry }
  | { kind: "callTool"; nodeId: string; callId: string; tool: string; args: JsonObject; attempt: number; timeoutMs?: number }
  | { kind: "review"; nodeId: string; reason: string; subject: JsonValue; seq: number };

/** What drives an execution forward. */
export type Command =
  | { kind: "start"; input: JsonObject }
  | { kind: "toolResult"; nodeId: string; callId: string; ok: true; output: JsonValue; durationMs: number }
  | { kind: "toolResult"; nodeId: string; callId: string; ok: false; error: { code: string; message: string; retryable: boolean }; durationMs: number }
  | { kind: "resume"; nodeId: string; action: "approve" | "edit" | "reject"; data?: JsonObject; comment?: string; reviewer?: string }
  | { kind: "cancel"; reason: string }
  /** Runs the next ready inline node, if any. */
  | { kind: "continue" };
