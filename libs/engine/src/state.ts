/**
 * Execution state (what the checkpoint holds) and the effects a step asks the
 * executor to carry out. Both are plain JSON so they cross Redis, Postgres and the bus.
 */
import type { JsonObject, JsonValue } from "./json.ts";

export type ExecutionStatus = "running" | "paused" | "completed" | "failed" | "cancelled";
export type NodeStatus = "waiting" | "running" | "paused" | "completed" | "failed" | "skipped";

/** One unit of outside work of a fan node (a forEach item or one call of a multi-call tool node). */
export interface FanItem {
  /** "pending" not started; "running" call or child outstanding, or (no key) waiting out a retry's backoff. */
  status: "pending" | "running" | "done";
  attempts: number;
  /** The outstanding call id (tools) or child key (workflows). */
  key?: string;
  result?: JsonValue;
}

/** A fan node's items in progress (see {@link NodeRun.fan}). */
export interface FanState {
  items: FanItem[];
  concurrency: number;
  calls?: { tool: string; args: JsonObject }[];
  continueOnError?: boolean;
  round?: number;
  /**
   * How many items are done and running, and an index below which no item is pending: kept
   * by the engine so that a step of a long fan does not scan its items. Absent in checkpoints
   * written before they were kept; counted from the items then.
   */
  done?: number;
  running?: number;
  next?: number;
}

export interface NodeRun {
  status: NodeStatus;
  /** Counts every start of the node (retries and loop visits alike); the journal's key. */
  attempt: number;
  /** Starts of the node through its incoming edges (loop iterations); retries do not count. */
  visits?: number;
  /**
   * `visits` when the current pass of a whileLoop whose body holds the node began (set each
   * time such a loop takes its body edges): `maxVisits` bounds the visits since. Absent: no
   * such pass began, and the visits of the whole execution count.
   */
  visitsBeforePass?: number;
  /** `attempt` when the current visit began, so retries count per visit. */
  visitStartAttempt?: number;
  startedAt?: string;
  completedAt?: string;
  /** Idempotency key of the outstanding tool call. */
  callId?: string;
  /** A timer the node waits for (retry backoff, delay). */
  timerId?: string;
  /** Outstanding child execution key (subworkflow). */
  childKey?: string;
  /** Fan-out bookkeeping (forEach, multi-call tool nodes, agent tool calls). */
  fan?: FanState;
  /** Conversation of an agent.toolLoop (or the calls of an agent.toolExecutor) in progress. */
  loop?: { iteration: number; messages: JsonObject[]; base: number; calls?: ToolCall[] };
  /** A SynthDev state in progress: the step it waits on, and the decision so far. */
  sd?: { phase: "pre" | "agent" | "post" | "transition" | "done"; waiting?: "pre" | "agent" | "post" | "transition" | "error" | "tools"; next?: string | null; message?: string; toolRounds?: number };
  /** Tokens the node's LLM calls used. */
  tokenUsage?: JsonObject;
  /** Loop iterations decided by a whileLoop node. */
  iterations?: number;
  /**
   * A whileLoop's last run went out by its exit, not into its body: whichever way the run comes
   * back to it, that is a new run of it, whose count starts afresh (absent in checkpoints
   * written before it was kept: then only coming back by its exit edge says so).
   */
  exited?: boolean;
  /**
   * What started this whileLoop's current run (its count afresh): the node whose pass or cycle
   * came round to it (a loop, or the head of a cycle), or, when a cycle through its own exit came
   * back to it, the loop whose pass started the `maxVisits` count of the cycle's last node
   * ({@link passOf}). A pass of this loop does not start a new run of a loop that this run is
   * owed to, so two loops each in the other's body cannot restart each other for ever.
   */
  restartedBy?: string;
  /** The whileLoop whose pass last started this node's `maxVisits` count afresh. */
  passOf?: string;
  error?: string;
  /** Resolved input of the current attempt, kept for retries and the journal. */
  input?: JsonValue;
}

/** A tool call an LLM asked for. */
export interface ToolCall {
  id: string;
  name: string;
  args: JsonObject;
}

/** A durable timer the execution waits for. */
export interface TimerState {
  dueAt: string;
  kind: "retry" | "retryItem" | "delay" | "timeout" | "deadline";
  nodeId?: string;
  /** For a fan item's retry (`retryItem`): the item, and the attempts it had when it failed; for a fan item's timeout: the item. */
  index?: number;
  attempts?: number;
  /** For node timeouts: the call the timer guards. */
  callId?: string;
}

/**
 * What a run knows of a pause in one of its sub-runs (a child execution of a subworkflow,
 * agent.subagent or forEach node), as the sub-run told it (ChildPaused).
 */
export interface SubRunPause {
  /** The node that waits for the sub-run, and which of its children the sub-run is. */
  nodeId: string;
  childKey: string;
  /** Whether a review waits in the sub-run (its own, or in one of its sub-runs). */
  paused: boolean;
  /** The sub-run's step that told it (its checkpoint version): news of an earlier step is stale. */
  seq: number;
  /** The sub-run's pause reason, while paused. */
  reason?: string;
}

export interface ExecutionError {
  code: string;
  message: string;
  nodeId?: string;
  /**
   * The node failure that ended the run was retryable: running it again may succeed. A parent
   * retries a sub-workflow run (a subworkflow node's, or a forEach item's) only then.
   */
  retryable?: boolean;
}

export interface ExecutionState {
  v: 1;
  executionId: number;
  tenantId: string;
  workflowId: number;
  workflowVersion: number;
  /** The agent that triggered the run (its execution row's `agentId`). */
  agentId?: number;
  status: ExecutionStatus;
  /** `$` of every `$.path`: `{ input, <node outputs> }`. */
  context: JsonObject;
  nodes: Record<string, NodeRun>;
  /** Edge decisions, keyed `from->to` (`from->to#2`... for further edges between the same nodes; see graph.ts): taken or dead. */
  edges: Record<string, "taken" | "dead">;
  /** Edges leaving a cycle that were not taken: decided dead only once the graph is quiet (the cycle may still take them). */
  deferred?: string[];
  /**
   * Edges taken into a node of their cycle that had already started in this pass without them
   * (an `any` or `n` join, arrived late): the node did not run because of them, so they lead on
   * to nothing that closes a loop. Absent in checkpoints written before it was kept.
   */
  late?: string[];
  /** Timers not yet fired, by id. */
  timers?: Record<string, TimerState>;
  deadlineAt?: string;
  /** The top execution of the sub-workflow tree (token streams go there too). */
  rootExecutionId?: number;
  /** Set when this run is a sub-workflow of another execution. */
  parent?: { executionId: number; nodeId: string; childKey: string };
  /** Set when this run was forked from another execution's checkpoint. */
  forkedFrom?: { executionId: number; version: number };
  /**
   * Added to the checkpoint version to number steps (event ids, journal order). A checkpoint
   * rebuilt from the journal restarts its version at 1; the base keeps step numbers rising.
   */
  versionBase?: number;
  /**
   * The checkpoint was rebuilt from the journal (Redis lost it). Steps lost with it may have sent
   * tool calls that a later step sends again under the same ids, after the tools stream's
   * duplicate window; the executor then sends every call of the run marked as sent again, so a
   * worker answers from its record.
   */
  rebuilt?: boolean;
  /**
   * Node starts so far (every attempt of every node: the journal's rows), which
   * `limits.maxSteps` bounds. Absent in a checkpoint written before it was counted: the
   * nodes' attempts are summed at the next start.
   */
  steps?: number;
  /** Tokens used by the execution's LLM calls, summed. */
  tokenUsage?: JsonObject;
  /** Which body of the workflow this run executes (forEach / subworkflow bodies), "" = the whole graph. */
  definitionRef?: string;
  /** Nodes whose inputs are settled and that have not started yet, in order. */
  ready: string[];
  /**
   * Where the run waits for a person: a review node of its own, or (`subExecutionId`) the
   * node that waits for a sub-run in which a review waits. The latest pause, while several wait.
   */
  pause?: { nodeId: string; reason: string; seq: number; subExecutionId?: number };
  /**
   * The sub-runs (by child execution id) that told this run of a pause while it waits for
   * them. The run is paused while a review waits in one of its own nodes or in one of these.
   * An entry stays when its sub-run runs on (`paused: false`), so that older news of it is
   * known as such, until the run no longer waits for that sub-run (its result came, or its
   * node ended). Not in the journal: a checkpoint rebuilt from the journal learns it again
   * from the sub-runs' rows.
   */
  subRuns?: Record<string, SubRunPause>;
  /** Incremented by every pause (also of a pause in sub-runs), so a redelivered pause is recognised. */
  pauseSeq: number;
  lastNode?: string;
  output?: JsonValue;
  error?: ExecutionError;
  startedAt: string;
  finishedAt?: string;
}

export type EngineEvent =
  | { kind: "node.started"; nodeId: string; nodeType: string; attempt: number }
  | { kind: "node.skipped"; nodeId: string; nodeType: string }
  | { kind: "execution.emitted"; nodeId: string; name: string; data: JsonValue }
  | { kind: "node.completed"; nodeId: string; nodeType: string; attempt: number; durationMs: number; output: JsonValue }
  | { kind: "node.failed"; nodeId: string; nodeType: string; attempt: number; code: string; error: string; retrying: boolean }
  | { kind: "execution.started" }
  /** `subExecutionId`: a pause in that sub-run, not a review of this run's own. */
  | { kind: "execution.paused"; nodeId: string; reason: string; subExecutionId?: number }
  /** `decision` `sub_run`: no review waits any more in the sub-runs of `nodeId` (`subExecutionId` is the last one that did). */
  | { kind: "execution.resumed"; nodeId: string; decision: string; reviewer?: string; comment?: string; data?: JsonValue; subExecutionId?: number }
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
  errorCode?: string;
  retryable?: boolean;
  tokenUsage?: JsonValue;
  durationMs?: number;
  startedAt?: string;
  completedAt?: string;
  toolCalls?: JsonValue;
}

export type Effect =
  | {
    kind: "emit";
    event: EngineEvent;
    /**
     * Set on the events a rebuild tells again (`ReplayResult.unrecorded`) when the journal says
     * which step first took them: that step's number and the event's place among the step's
     * effects (from 1), which its executor's message id was made of. A late copy from that
     * executor (stalled, not dead) and the rebuild's then share a message id, and the stream
     * keeps one.
     */
    origin?: { step: number; index: number };
  }
  | { kind: "journal"; entry: JournalEntry }
  | { kind: "callTool"; nodeId: string; callId: string; tool: string; args: JsonObject; attempt: number; idempotencyKey: string; timeoutMs?: number }
  | { kind: "cancelTools"; callIds: string[]; reason: string }
  | { kind: "review"; nodeId: string; reason: string; subject: JsonValue; seq: number }
  | { kind: "setTimer"; timerId: string; dueAt: string }
  /** Start (or find) the child run `childKey` of `nodeId`: a stored workflow, or a body of this definition (`definitionRef`). */
  | { kind: "startChild"; nodeId: string; childKey: string; workflow?: { id?: number; slug?: string; version?: number }; definitionRef?: string; input: JsonObject }
  | { kind: "cancelChildren"; nodeId: string; childKeys: string[]; reason: string };

/** What drives an execution forward. */
export type Command =
  | {
    kind: "start";
    input: JsonObject;
    /** RFC 3339 deadline of the run; else the definition's `limits.deadlineMs`. */
    deadline?: string;
    parent?: { executionId: number; nodeId: string; childKey: string };
    /** The top execution of a tree of sub-workflows. */
    root?: number;
    definitionRef?: string;
    /** Start from another execution's checkpoint (time travel). */
    fork?: { state: ExecutionState; executionId: number; version: number; contextPatch?: JsonObject };
  }
  | { kind: "toolResult"; nodeId: string; callId: string; ok: true; output: JsonValue; durationMs: number }
  | { kind: "toolResult"; nodeId: string; callId: string; ok: false; error: { code: string; message: string; retryable: boolean }; durationMs: number }
  /** `attempt`: the pause it decides (the node's attempt when it paused); absent: whichever pause the node is in. */
  | { kind: "resume"; nodeId: string; action: "approve" | "edit" | "reject"; data?: JsonObject; comment?: string; reviewer?: string; attempt?: number }
  | { kind: "cancel"; reason: string }
  /**
   * Fails the run from outside: a command the executor could not apply on any of its
   * deliveries. Stops what is out and reads nothing (the output is null), since reading the
   * state may be what failed.
   */
  | { kind: "abort"; error: { code: string; message: string } }
  | { kind: "timer"; timerId: string }
  /** Replay only: the journal's outcome of a whole node attempt (fan-out nodes, whose items are not journaled one by one). */
  | { kind: "recorded"; nodeId: string; attempt: number; ok: true; output: JsonValue }
  | { kind: "recorded"; nodeId: string; attempt: number; ok: false; error: { code: string; message: string; retryable: boolean } }
  | { kind: "childResult"; nodeId: string; childKey: string; status: "completed" | "failed" | "cancelled"; output?: JsonValue; error?: { code: string; message: string; retryable?: boolean } }
  /**
   * A sub-run became paused (a review waits in it) or runs on again; `seq`: the sub-run's step
   * that made the change. News no newer than what the run has of the sub-run is ignored.
   */
  | { kind: "childPaused"; nodeId: string; childKey: string; childExecutionId: number; paused: boolean; seq: number; reason?: string }
  /** Runs the next ready inline node, if any. */
  | { kind: "continue" };
