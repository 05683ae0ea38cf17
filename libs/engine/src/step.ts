/**
 * The engine's one decision function: (definition, state, command, now) → new
 * state + effects. Pure: no clock, no I/O, no randomness. The executor persists
 * the state (checkpoint) and then carries out the effects; replaying the same
 * command against the state it produced is a no-op, which makes redelivery safe.
 *
 * A step moves at most one node forward, so the executor checkpoints after
 * every node.
 */
import type { JsonObject, JsonValue } from "./json.ts";
import type { NodeDefinition, WorkflowDefinition } from "./model.ts";
import { conditionConfigSchema, NODE_TYPES, reviewConfigSchema, setVariableConfigSchema, toolConfigSchema } from "./model.ts";
import { readPath, resolveTemplate, writePath } from "./path.ts";
import { evaluateCondition } from "./condition.ts";
import type { Command, Effect, ExecutionState, JournalEntry, NodeRun } from "./state.ts";

export interface StepInput {
  definition: WorkflowDefinition;
  /** Null before the execution's first command. */
  state: ExecutionState | null;
  command: Command;
  /** ISO time of "now", supplied by the caller. */
  now: string;
  /** Identity used when the state is created by a start command. */
  identity?: { executionId: number; tenantId: string; workflowId: number; workflowVersion: number };
}

export interface StepResult {
  state: ExecutionState;
  effects: Effect[];
  /** Whether a `continue` command would make progress. */
  more: boolean;
  /** Set when the command did not apply (duplicate or stale); the state is unchanged. */
  ignored?: string;
}

export function isFinished(s: ExecutionState): boolean {
  return s.status === "completed" || s.status === "failed" || s.status === "cancelled";
}

/** Stable idempotency key of one tool call attempt. */
export function toolCallId(executionId: number, nodeId: string, attempt: number): string {
  return `${executionId}.${nodeId}.${attempt}`;
}

class Stepper {
  readonly effects: Effect[] = [];
  readonly def: WorkflowDefinition;
  readonly now: string;
  readonly nodesById: Map<string, NodeDefinition>;
  s: ExecutionState;

  constructor(def: WorkflowDefinition, state: ExecutionState, now: string) {
    this.def = def;
    this.now = now;
    this.s = structuredClone(state);
    this.nodesById = new Map(def.nodes.map((n) => [n.id, n]));
  }

  node(id: string): NodeDefinition {
    const n = this.nodesById.get(id);
    if (!n) throw new Error(`node "${id}" is not in the definition`);
    return n;
  }

  run(id: string): NodeRun {
    return (this.s.nodes[id] ??= { status: "waiting", attempt: 0 });
  }

  emit(event: Effect & { kind: "emit" }): void {
    this.effects.push(event);
  }

  journal(entry: JournalEntry): void {
    this.effects.push({ kind: "journal", entry });
  }

  duration(run: NodeRun): number {
    return run.startedAt ? Math.max(0, Date.parse(this.now) - Date.parse(run.startedAt)) : 0;
  }

  outputPath(n: NodeDefinition): string {
    return n.output ?? `$.${n.id}`;
  }

  begin(n: NodeDefinition, status: "running" | "paused", input?: JsonValue, toolCalls?: JsonValue): NodeRun {
    const run = this.run(n.id);
    run.attempt += 1;
    run.status = status;
    run.startedAt = this.now;
    delete run.completedAt;
    delete run.error;
    this.s.lastNode = n.id;
    this.emit({ kind: "emit", event: { kind: "node.started", nodeId: n.id, nodeType: n.type, attempt: run.attempt } });
    this.journal({ nodeId: n.id, nodeType: n.type, attempt: run.attempt, status, input, startedAt: this.now, ...(toolCalls ? { toolCalls } : {}) });
    return run;
  }

  /** Completes a node, stores its output, decides its outgoing edges. */
  complete(n: NodeDefinition, output: JsonValue, branch: string | undefined, input?: JsonValue): void {
    const run = this.run(n.id);
    run.status = "completed";
    run.completedAt = this.now;
    delete run.callId;
    const durationMs = this.duration(run);
    this.s.context = writePath(this.s.context, this.outputPath(n), output);
    this.s.lastNode = n.id;
    this.emit({ kind: "emit", event: { kind: "node.completed", nodeId: n.id, nodeType: n.type, attempt: run.attempt, durationMs, output } });
    this.journal({ nodeId: n.id, nodeType: n.type, attempt: run.attempt, status: "completed", input, output, durationMs, startedAt: run.startedAt, completedAt: this.now });
    this.decideEdges(n, branch);
  }

  decideEdges(n: NodeDefinition, branch: string | undefined): void {
    for (const e of this.def.edges) {
      if (e.from !== n.id) continue;
      const label = e.when ?? (n.type === "agent.humanReview" ? "approved" : undefined);
      this.s.edges[`${e.from}->${e.to}`] = label === undefined || label === branch ? "taken" : "dead";
      this.settle(e.to);
    }
  }

  /** Dead-path elimination: a node is ready once all incoming edges are decided and one was taken. */
  settle(id: string): void {
    const incoming = this.def.edges.filter((e) => e.to === id);
    const decisions = incoming.map((e) => this.s.edges[`${e.from}->${e.to}`]);
    if (decisions.some((d) => d === undefined)) return;
    const run = this.run(id);
    if (run.status !== "waiting" || this.s.ready.includes(id)) return;
    if (decisions.includes("taken")) {
      this.s.ready.push(id);
    } else {
      run.status = "skipped";
      for (const e of this.def.edges) {
        if (e.from !== id) continue;
        this.s.edges[`${e.from}->${e.to}`] = "dead";
        this.settle(e.to);
      }
    }
  }

  fail(code: string, message: string, nodeId?: string): void {
    this.s.status = "failed";
    this.s.error = { code, message, ...(nodeId ? { nodeId } : {}) };
    this.s.finishedAt = this.now;
    this.s.ready = [];
    delete this.s.pause;
    this.emit({ kind: "emit", event: { kind: "execution.failed", error: this.s.error } });
  }

  /** Completes the execution when nothing is ready, running or paused. */
  maybeFinish(): void {
    if (this.s.status !== "running") return;
    if (this.s.ready.length > 0) return;
    if (Object.values(this.s.nodes).some((r) => r.status === "running" || r.status === "paused")) return;
    const output = this.def.output
      ? (resolveTemplate(this.def.output, this.s.context) ?? null)
      : this.s.lastNode
        ? (readPath(this.s.context, this.outputPath(this.node(this.s.lastNode))) ?? null)
        : null;
    this.s.output = output;
    this.s.status = "completed";
    this.s.finishedAt = this.now;
    this.emit({ kind: "emit", event: { kind: "execution.completed", output } });
  }

  dispatchTool(n: NodeDefinition): void {
    const cfg = toolConfigSchema.parse(n.config);
    const args = (resolveTemplate(n.input ?? {}, this.s.context) ?? {}) as JsonObject;
    const callId = toolCallId(this.s.executionId, n.id, this.run(n.id).attempt + 1);
    const run = this.begin(n, "running", args, [{ tool: cfg.tool, callId }]);
    run.callId = callId;
    this.effects.push({ kind: "callTool", nodeId: n.id, callId: run.callId, tool: cfg.tool, args, attempt: run.attempt, ...(n.timeoutMs ? { timeoutMs: n.timeoutMs } : {}) });
  }

  /** Starts the first ready node. */
  advance(): void {
    const id = this.s.ready.shift();
    if (id === undefined) return;
    const n = this.node(id);
    switch (n.type) {
      case "condition": {
        const input = resolveTemplate(n.input ?? {}, this.s.context);
        this.begin(n, "running", input);
        const result = evaluateCondition(conditionConfigSchema.parse(n.config), this.s.context);
        this.complete(n, { result }, String(result), input);
        break;
      }
      case "setVariable": {
        const cfg = setVariableConfigSchema.parse(n.config);
        this.begin(n, "running");
        const values = (resolveTemplate(cfg.values, this.s.context) ?? {}) as JsonObject;
        this.complete(n, values, undefined);
        break;
      }
      case "tool":
        this.dispatchTool(n);
        break;
      case "agent.humanReview": {
        const cfg = reviewConfigSchema.parse(n.config);
        const subject = resolveTemplate(cfg.subject ?? null, this.s.context) ?? null;
        this.begin(n, "paused", { reason: cfg.reason, subject });
        this.s.pauseSeq += 1;
        this.s.status = "paused";
        this.s.pause = { nodeId: n.id, reason: cfg.reason, seq: this.s.pauseSeq };
        this.emit({ kind: "emit", event: { kind: "execution.paused", nodeId: n.id, reason: cfg.reason } });
        this.effects.push({ kind: "review", nodeId: n.id, reason: cfg.reason, subject, seq: this.s.pauseSeq });
        break;
      }
      default:
        this.fail("BATON_ENGINE_NODE_TYPE", `node type "${n.type}" cannot be executed`, n.id);
    }
  }
}

function newState(input: StepInput, cmdInput: JsonObject): ExecutionState {
  if (!input.identity) throw new Error("a start command needs the execution identity");
  return {
    v: 1,
    ...input.identity,
    status: "running",
    context: { input: cmdInput },
    nodes: {},
    edges: {},
    ready: [input.definition.start],
    pauseSeq: 0,
    startedAt: input.now,
  };
}

/** Applies one command to an execution. */
export function step(input: StepInput): StepResult {
  const { definition, command, now } = input;
  const unchanged = (state: ExecutionState, ignored: string): StepResult => ({ state, effects: [], more: false, ignored });

  if (input.state === null) {
    if (command.kind !== "start") throw new Error(`execution has no state; "${command.kind}" needs a prior start`);
    const st = new Stepper(definition, newState(input, command.input), now);
    st.emit({ kind: "emit", event: { kind: "execution.started" } });
    return { state: st.s, effects: st.effects, more: st.s.ready.length > 0 };
  }

  const state = input.state;
  if (command.kind === "start") return unchanged(state, "already started");
  if (isFinished(state)) return unchanged(state, `execution is ${state.status}`);
  const st = new Stepper(definition, state, now);

  switch (command.kind) {
    case "continue": {
      if (st.s.status === "cancelled" || st.s.ready.length === 0) {
        st.maybeFinish();
        break;
      }
      st.advance();
      st.maybeFinish();
      break;
    }
    case "toolResult": {
      const run = st.s.nodes[command.nodeId];
      if (!run || run.status !== "running" || run.callId !== command.callId) return unchanged(state, `no outstanding call ${command.callId}`);
      const n = st.node(command.nodeId);
      if (command.ok) {
        st.complete(n, command.output, undefined);
      } else {
        const maxAttempts = n.retry?.maxAttempts ?? 1;
        const retrying = command.error.retryable && run.attempt < maxAttempts;
        run.status = "failed";
        run.error = command.error.message;
        run.completedAt = now;
        st.emit({ kind: "emit", event: { kind: "node.failed", nodeId: n.id, nodeType: n.type, attempt: run.attempt, code: command.error.code, error: command.error.message, retrying } });
        st.journal({ nodeId: n.id, nodeType: n.type, attempt: run.attempt, status: "failed", error: `${command.error.code}: ${command.error.message}`, durationMs: st.duration(run), startedAt: run.startedAt, completedAt: now });
        if (retrying) st.dispatchTool(n);
        else st.fail(command.error.code, `node "${n.id}" failed after ${run.attempt} attempt(s): ${command.error.message}`, n.id);
      }
      st.maybeFinish();
      break;
    }
    case "resume": {
      if (st.s.status !== "paused" || st.s.pause?.nodeId !== command.nodeId) return unchanged(state, `execution is not paused at "${command.nodeId}"`);
      const n = st.node(command.nodeId);
      const run = st.run(n.id);
      const cfg = reviewConfigSchema.parse(n.config);
      const subject = resolveTemplate(cfg.subject ?? null, st.s.context) ?? null;
      delete st.s.pause;
      st.s.status = "running";
      st.emit({ kind: "emit", event: { kind: "execution.resumed", nodeId: n.id, decision: command.action } });
      const output: JsonObject = {
        decision: command.action,
        data: command.action === "edit" ? (command.data ?? {}) : subject,
        ...(command.comment ? { comment: command.comment } : {}),
        ...(command.reviewer ? { reviewer: command.reviewer } : {}),
      };
      if (command.action === "reject") {
        const hasRejectPath = definition.edges.some((e) => e.from === n.id && e.when === "rejected");
        if (hasRejectPath) {
          st.complete(n, output, "rejected");
        } else {
          run.status = "failed";
          run.completedAt = now;
          run.error = "rejected by reviewer";
          st.s.context = writePath(st.s.context, st.outputPath(n), output);
          st.emit({ kind: "emit", event: { kind: "node.failed", nodeId: n.id, nodeType: n.type, attempt: run.attempt, code: "BATON_REVIEW_REJECTED", error: "rejected by reviewer", retrying: false } });
          st.journal({ nodeId: n.id, nodeType: n.type, attempt: run.attempt, status: "failed", output, error: "rejected by reviewer", durationMs: st.duration(run), startedAt: run.startedAt, completedAt: now });
          st.fail("BATON_REVIEW_REJECTED", `review at "${n.id}" was rejected${command.comment ? `: ${command.comment}` : ""}`, n.id);
        }
      } else {
        st.complete(n, output, "approved");
      }
      st.maybeFinish();
      break;
    }
    case "cancel": {
      for (const [id, run] of Object.entries(st.s.nodes)) {
        if (run.status === "running" || run.status === "paused") {
          run.status = "failed";
          run.error = "cancelled";
          run.completedAt = now;
          const n = st.node(id);
          st.journal({ nodeId: id, nodeType: n.type, attempt: run.attempt, status: "failed", error: "cancelled", durationMs: st.duration(run), startedAt: run.startedAt, completedAt: now });
        }
      }
      st.s.status = "cancelled";
      st.s.ready = [];
      delete st.s.pause;
      st.s.finishedAt = now;
      st.emit({ kind: "emit", event: { kind: "execution.cancelled", reason: command.reason } });
      break;
    }
  }
  return { state: st.s, effects: st.effects, more: st.s.status === "running" && st.s.ready.length > 0 };
}

/** Node types whose work leaves the executor (tool calls, people). */
export function isInline(type: string): boolean {
  return NODE_TYPES[type]?.inline ?? false;
}
