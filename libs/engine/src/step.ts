/**
 * The engine's one decision function: (definition, state, command, now) → new
 * state + effects. No clock, no I/O, no randomness (retry jitter is derived from the
 * call id): the executor persists the state (checkpoint) and then carries out the
 * effects; replaying the same command against the state it produced is a no-op,
 * which makes redelivery safe. Async only because JSONata evaluates asynchronously.
 *
 * A step completes at most one node, so the executor checkpoints after every node;
 * it may start any number of nodes whose work leaves the executor (tool calls,
 * children, timers, reviews): every ready node starts at once, up to the
 * execution's concurrency cap.
 */
import type { JsonObject, JsonValue } from "./json.ts";
import { clonePlain, isJsonObject } from "./json.ts";
import type { EdgeDefinition, ForEachConfig, Join, NodeDefinition, RetryPolicy, WorkflowDefinition } from "./model.ts";
import {
  AGENT_TOOLS, embedConfigSchema, imageGenConfigSchema, llmConfigSchema, memoryReadConfigSchema, memoryWriteConfigSchema, promptConfigSchema,
  ragConfigSchema, subagentConfigSchema, toolExecutorConfigSchema, toolLoopConfigSchema,
  conditionConfigSchema, DEFAULT_MAX_STEPS, delayConfigSchema, emitConfigSchema, forEachConfigSchema, NODE_TYPES, reviewConfigSchema,
  setVariableConfigSchema, subworkflowConfigSchema, toolConfigSchema, transformConfigSchema, whileLoopConfigSchema,
} from "./model.ts";
import type { ToolCall } from "./state.ts";
import { addToContext, absorbHandler, fillSynthdev, handlerThis, initialRuntime, perspective, synthdevAgentModel, synthdevStateConfigSchema } from "./synthdev.ts";
import type { SynthdevMaterial, SynthdevRuntime } from "./synthdev.ts";
import { looksLikePath, PLACEHOLDER, readPath, resolveTemplate, writePath } from "./path.ts";
import { evaluateCondition, evaluateGuard } from "./condition.ts";
import { evaluateExpression, ExpressionFailed, truthy } from "./expr.ts";
import { backEdgeSources, edgeKeySource, graphOf, joinOf, loopBody, loopRegion, passNodes } from "./graph.ts";
import type { GraphInfo } from "./graph.ts";
import { BLOBS_MISSING, BlobsMissing, isBlobRef, resolveRefs } from "./refs.ts";
import type { Command, Effect, ExecutionState, FanItem, FanState, JournalEntry, NodeRun, SubRunPause, TimerState } from "./state.ts";

export interface StepInput {
  definition: WorkflowDefinition;
  /** Null before the execution's first command. */
  state: ExecutionState | null;
  command: Command;
  /** ISO time of "now", supplied by the caller. */
  now: string;
  /** Identity used when the state is created by a start command. */
  identity?: { executionId: number; tenantId: string; workflowId: number; workflowVersion: number; agentId?: number };
  /** Blobs the step may read through references (see refs.ts); a step that needs others throws `BlobsNeeded`. */
  blobs?: ReadonlyMap<string, JsonValue>;
  /**
   * References (`blob:<sha256>`) the caller looked up and found not stored. A step that must
   * read through one fails the execution (`BATON_ENGINE_BLOBS_MISSING`) instead of asking again.
   */
  missingBlobs?: ReadonlySet<string>;
}

export interface StepResult {
  state: ExecutionState;
  effects: Effect[];
  /** Whether a `continue` command would make progress. */
  more: boolean;
  /** Set when the command did not apply (duplicate or stale); the state is unchanged. */
  ignored?: string;
}

/** Grace the executor gives a worker past a node's own timeout before it gives up on the call. */
export const TIMEOUT_GRACE_MS = 5_000;

/** The id of an execution's deadline timer (a `timer` command with it fails a run past its deadline). */
export const DEADLINE_TIMER_ID = "deadline";

/**
 * The decision of an `execution.resumed` that ends a pause in sub-runs: no review waits any
 * more in the node's sub-runs (decided, or the sub-runs ended).
 */
export const SUB_RUN_DECISION = "sub_run";

/** The reason of a pause in sub-run `id`, from the sub-run's own reason. */
export function subRunReason(id: number | string, reason: string | undefined): string {
  return `review in sub-run ${id}${reason ? `: ${reason}` : ""}`;
}

/**
 * The run's nodes paused in sub-runs, each with a sub-run its pause waits on: the pause
 * point's, else the node's paused sub-run of the lowest id. The executor keeps it on the
 * execution row as what was announced (written before a step's events), which a checkpoint
 * rebuilt from the journal compares with the pauses it learns again (replay.ts).
 */
export function subRunPauses(s: ExecutionState): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [id, p] of Object.entries(s.subRuns ?? {})) if (p.paused && out[p.nodeId] === undefined) out[p.nodeId] = Number(id);
  const at = s.pause;
  if (at?.subExecutionId !== undefined && out[at.nodeId] !== undefined) out[at.nodeId] = at.subExecutionId;
  return out;
}

export function isFinished(s: ExecutionState): boolean {
  return s.status === "completed" || s.status === "failed" || s.status === "cancelled";
}

/**
 * The ids of the calls (and child keys) the state waits for: a result for any other id is
 * ignored by {@link step}. With `atLeast`, it stops looking once it has found that many.
 */
export function outstandingCalls(s: ExecutionState, atLeast = Number.POSITIVE_INFINITY): Set<string> {
  const ids = new Set<string>();
  if (isFinished(s)) return ids;
  for (const run of Object.values(s.nodes)) {
    if (run.status !== "running" && run.status !== "paused") continue;
    if (run.callId) ids.add(run.callId);
    for (const it of run.fan?.items ?? []) if (it.status === "running" && it.key) ids.add(it.key);
    if (ids.size >= atLeast) break;
  }
  return ids;
}

/**
 * How many of the calls (and child keys) {@link outstandingCalls} lists the state waits for,
 * counted up to `atMost`: a fan's running items from its counts (FanState), without a scan.
 * Items waiting out a retry's backoff count as running, so this may be one more per such item.
 */
export function outstandingCount(s: ExecutionState, atMost = Number.POSITIVE_INFINITY): number {
  if (isFinished(s)) return 0;
  let n = 0;
  for (const run of Object.values(s.nodes)) {
    if (run.status !== "running" && run.status !== "paused") continue;
    if (run.callId) n++;
    const fan = run.fan;
    if (fan) n += fan.running ?? fan.items.reduce((k, it) => k + (it.status === "running" && it.key ? 1 : 0), 0);
    if (n >= atMost) return n;
  }
  return n;
}

/** Stable idempotency key of one tool call attempt. */
export function toolCallId(executionId: number, nodeId: string, attempt: number): string {
  return `${executionId}.${nodeId}.${attempt}`;
}

/** What tells one fan item's attempt apart (see pump): `r{round}.` when the fan has rounds, `-{attempts}` from the second attempt. */
function fanSuffix(round: number | undefined, index: number, attempts: number): string {
  return `${round !== undefined ? `r${round}.` : ""}${index}${attempts > 1 ? `-${attempts}` : ""}`;
}

/**
 * Whether `callId` is a call of `run` that has moved on: a fan item's (a forEach item, one of
 * a multi-call node's calls, an agent's tool call) answered already, started again, or of an
 * earlier round; or an agent.toolLoop's LLM call answered already, or its tool call of a round
 * before the LLM call now out. A result for it is a repeat, not a result that came before its call.
 */
export function settledFanCall(run: NodeRun, executionId: number, nodeId: string, callId: string): boolean {
  const prefix = `${toolCallId(executionId, nodeId, run.attempt)}.`;
  if (!callId.startsWith(prefix)) return false;
  const rest = callId.slice(prefix.length);
  const fan = run.fan;
  const loop = run.loop;
  if (loop) {
    // A toolLoop's LLM calls are `llm{iteration}` and the tools of that answer `r{iteration}.…`.
    const llm = /^llm(\d+)$/.exec(rest);
    if (llm) return Number(llm[1]) < loop.iteration || (Number(llm[1]) === loop.iteration && run.callId !== callId);
    const round = fan ? undefined : /^r(\d+)\./.exec(rest);
    if (round) return Number(round[1]) < loop.iteration;
  }
  if (!fan) return false;
  const m = /^(?:r(\d+)\.)?(\d+)(?:-(\d+))?$/.exec(rest);
  if (!m) return false;
  const round = m[1] === undefined ? undefined : Number(m[1]);
  if (round !== undefined && fan.round !== undefined && round < fan.round) return true;
  const index = Number(m[2]);
  const attempts = m[3] === undefined ? 1 : Number(m[3]);
  const item = fan.items[index];
  // Only a call this state gave out (the same id) is judged: anything else may be ahead of it.
  if (!item || round !== fan.round || `${prefix}${fanSuffix(fan.round, index, attempts)}` !== callId) return false;
  // The item's latest attempt is settled unless it is out (an item waiting out a retry's backoff has no key).
  return attempts < item.attempts || (attempts === item.attempts && (item.status !== "running" || item.key === undefined));
}

/** Wait before attempt `attempt + 1`: exponential, capped, with deterministic jitter from `seed`. */
export function backoffDelay(policy: RetryPolicy, attempt: number, seed: string): number {
  const base = Math.min(policy.maxDelayMs, policy.initialDelayMs * policy.backoffMultiplier ** Math.max(0, attempt - 1));
  if (base === 0 || policy.jitter === 0) return Math.round(base);
  let h = 2166136261;
  for (let i = 0; i < seed.length; i++) h = Math.imul(h ^ seed.charCodeAt(i), 16777619);
  const unit = ((h >>> 0) % 10_000) / 10_000; // 0..1
  // Jittered around the wait, and capped after: maxDelayMs bounds every wait.
  return Math.min(policy.maxDelayMs, Math.max(0, Math.round(base * (1 + policy.jitter * (2 * unit - 1)))));
}

function addMs(iso: string, ms: number): string {
  return new Date(Date.parse(iso) + ms).toISOString();
}

const DEFAULT_RETRY: RetryPolicy = { maxAttempts: 1, initialDelayMs: 1000, backoffMultiplier: 2, maxDelayMs: 60_000, jitter: 0.2 };

interface Failure {
  code: string;
  message: string;
  retryable: boolean;
}

/**
 * The state a step works on: a copy of everything but what the engine never changes in
 * place. The context is replaced, never changed (`write` goes through `writePath`, which
 * copies the path it writes), and so is a fan's list of calls; a fan's items are copied as
 * a list and shared one by one, and an item is replaced before it changes
 * ({@link Stepper.item}). A step so costs in proportion to what it changes, not to the size
 * of the context or the length of a fan: a forEach over thousands of items no longer copies
 * every item's result at every step (and the checkpoint's delta sees the shared parts as
 * unchanged without walking them).
 */
function workingCopy(state: ExecutionState): ExecutionState {
  const { context, nodes, ...rest } = state;
  const s = clonePlain(rest) as ExecutionState;
  s.context = context;
  s.nodes = {};
  for (const id of Object.keys(nodes)) {
    const { fan, ...run } = nodes[id]!;
    const copy = clonePlain(run) as NodeRun;
    if (fan) {
      const { items, calls, ...bookkeeping } = fan;
      copy.fan = { ...clonePlain(bookkeeping), items: items.slice(), ...(calls ? { calls } : {}) };
    }
    // A node id is a plain key, even "__proto__".
    Object.defineProperty(s.nodes, id, { value: copy, enumerable: true, writable: true, configurable: true });
  }
  return s;
}

/** Contexts with their blob references resolved: a context is never changed in place, and a blob never changes. */
const resolvedContexts = new WeakMap<JsonObject, JsonObject>();

function resolvedContext(context: JsonObject, blobs: ReadonlyMap<string, JsonValue>, gone?: ReadonlySet<string>): JsonObject {
  let view = resolvedContexts.get(context);
  if (view === undefined) {
    view = resolveRefs(context, blobs, gone) as JsonObject;
    resolvedContexts.set(context, view);
  }
  return view;
}

class Stepper {
  readonly effects: Effect[] = [];
  readonly def: WorkflowDefinition;
  readonly g: GraphInfo;
  readonly now: string;
  readonly nodesById: Map<string, NodeDefinition>;
  readonly blobs: ReadonlyMap<string, JsonValue>;
  readonly gone: ReadonlySet<string> | undefined;
  s: ExecutionState;
  private view: JsonObject | undefined;
  private completedOne = false;
  /** Set when the context refers to a blob that is not stored: nothing reads it any more (see failWithoutReading). */
  private unreadable = false;

  constructor(def: WorkflowDefinition, state: ExecutionState, now: string, blobs: ReadonlyMap<string, JsonValue>, gone?: ReadonlySet<string>) {
    this.def = def;
    this.g = graphOf(def);
    this.now = now;
    this.s = workingCopy(state);
    this.blobs = blobs;
    this.gone = gone;
    this.nodesById = new Map(def.nodes.map((n) => [n.id, n]));
  }

  /** `v` with its blob references resolved (see resolveRefs). */
  resolve(v: JsonValue): JsonValue {
    return resolveRefs(v, this.blobs, this.gone);
  }

  node(id: string): NodeDefinition {
    const n = this.nodesById.get(id);
    if (!n) throw new Error(`node "${id}" is not in the definition`);
    return n;
  }

  run(id: string): NodeRun {
    return (this.s.nodes[id] ??= { status: "waiting", attempt: 0 });
  }

  /** The context with blob references resolved, for reads. */
  ctx(): JsonObject {
    this.view ??= resolvedContext(this.s.context, this.blobs, this.gone);
    return this.view;
  }

  /**
   * Writes a value into the context. A large value's reference on the way is replaced by the
   * value it stands for, changed (the executor stores it by reference again if it is still
   * large): writing into the reference itself would be lost, since reads see through it.
   */
  write(path: string, value: JsonValue): void {
    this.s.context = writePath(this.s.context, path, value, (v) => (isBlobRef(v) ? this.resolve(v) : v));
    this.view = undefined;
  }

  emit(event: (Effect & { kind: "emit" })["event"]): void {
    this.effects.push({ kind: "emit", event });
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

  retryPolicy(n: NodeDefinition): RetryPolicy {
    return { ...DEFAULT_RETRY, ...n.retry };
  }

  // ---- timers -------------------------------------------------------------

  setTimer(timerId: string, timer: TimerState): void {
    (this.s.timers ??= {})[timerId] = timer;
    this.effects.push({ kind: "setTimer", timerId, dueAt: timer.dueAt });
  }

  clearNodeTimers(nodeId: string): void {
    if (!this.s.timers) return;
    for (const [id, t] of Object.entries(this.s.timers)) if (t.nodeId === nodeId) delete this.s.timers[id];
  }

  // ---- node lifecycle -----------------------------------------------------

  begin(n: NodeDefinition, status: "running" | "paused", input?: JsonValue, toolCalls?: JsonValue): NodeRun {
    const run = this.run(n.id);
    this.s.steps = this.stepsSoFar() + 1;
    run.attempt += 1;
    run.status = status;
    run.startedAt = this.now;
    delete run.completedAt;
    delete run.error;
    if (input !== undefined) run.input = input;
    else delete run.input;
    this.s.lastNode = n.id;
    this.emit({ kind: "node.started", nodeId: n.id, nodeType: n.type, attempt: run.attempt });
    this.journal({ nodeId: n.id, nodeType: n.type, attempt: run.attempt, status, input, startedAt: this.now, ...(toolCalls ? { toolCalls } : {}) });
    return run;
  }

  /** Completes a node, stores its output, decides its outgoing edges. */
  async complete(n: NodeDefinition, output: JsonValue, branch: string | undefined): Promise<void> {
    const run = this.run(n.id);
    // The edges' guards see the node's output in the context. One that cannot be evaluated
    // fails the node (not retried: the same output would fail it again), before anything
    // says it completed.
    const before = this.s.context;
    this.write(this.outputPath(n), output);
    let edges: EdgeDecision[];
    try {
      edges = await this.decideEdges(n, branch, output);
    } catch (err) {
      if (!(err instanceof ExpressionFailed)) throw err;
      this.s.context = before;
      this.view = undefined;
      this.failNode(n, { code: "BATON_EXPRESSION_FAILED", message: `an edge guard of node "${n.id}" failed: ${err.message}`, retryable: false }, output);
      return;
    }
    run.status = "completed";
    run.completedAt = this.now;
    delete run.callId;
    delete run.timerId;
    delete run.childKey;
    delete run.fan;
    this.clearNodeTimers(n.id);
    const durationMs = this.duration(run);
    this.s.lastNode = n.id;
    this.completedOne = true;
    this.emit({ kind: "node.completed", nodeId: n.id, nodeType: n.type, attempt: run.attempt, durationMs, output });
    this.journal({ nodeId: n.id, nodeType: n.type, attempt: run.attempt, status: "completed", input: run.input, output, durationMs, startedAt: run.startedAt, completedAt: this.now, ...(run.tokenUsage ? { tokenUsage: run.tokenUsage } : {}) });
    delete run.input;
    delete run.tokenUsage;
    for (const [how, e] of edges) {
      if (how === "take") this.take(e);
      else if (how === "kill") this.kill(e);
      else this.defer(this.edgeKey(e));
    }
  }

  /** A node's attempt failed: retry it after its backoff, or fail the execution. */
  failNode(n: NodeDefinition, f: Failure, output?: JsonValue): void {
    const run = this.run(n.id);
    const policy = this.retryPolicy(n);
    const retrying = f.retryable && run.attempt - (run.visitStartAttempt ?? 0) < policy.maxAttempts;
    const callId = run.callId ?? `${this.s.executionId}.${n.id}.${run.attempt}`;
    run.status = retrying ? "running" : "failed";
    run.error = f.message;
    run.completedAt = this.now;
    delete run.callId;
    delete run.childKey;
    if (retrying) delete run.fan;
    else this.keepDoneItems(n, run);
    this.clearNodeTimers(n.id);
    this.completedOne = true;
    this.emit({ kind: "node.failed", nodeId: n.id, nodeType: n.type, attempt: run.attempt, code: f.code, error: f.message, retrying });
    this.journal({
      nodeId: n.id, nodeType: n.type, attempt: run.attempt, status: "failed", input: run.input, ...(output !== undefined ? { output } : {}),
      error: f.message, errorCode: f.code, retryable: f.retryable, durationMs: this.duration(run), startedAt: run.startedAt, completedAt: this.now,
    });
    if (retrying) {
      const delay = backoffDelay(policy, run.attempt - (run.visitStartAttempt ?? 0), callId);
      const timerId = `retry:${n.id}:${run.attempt}`;
      run.timerId = timerId;
      this.setTimer(timerId, { dueAt: addMs(this.now, delay), kind: "retry", nodeId: n.id });
    } else {
      this.failExecution(f.code, `node "${n.id}" failed after ${run.attempt - (run.visitStartAttempt ?? 0)} attempt(s): ${f.message}`, n.id, f.retryable);
    }
  }

  /** What becomes of each outgoing edge of a node that completed; throws `ExpressionFailed` for a guard that cannot be evaluated. */
  async decideEdges(n: NodeDefinition, branch: string | undefined, output: JsonValue): Promise<EdgeDecision[]> {
    const out = this.g.outgoing.get(n.id) ?? [];
    const first = n.branching === "first";
    const decisions: EdgeDecision[] = [];
    let took = false;
    for (const e of out) {
      const label = e.when ?? (n.type === "agent.humanReview" ? "approved" : undefined);
      let take = label === undefined || label === branch;
      // A loop that iterates leaves its exit edges open: it decides them when it exits, or,
      // when the body leaves the cycle another way and never comes back, they die once the
      // rest of the graph is quiet.
      if (n.type === "whileLoop" && branch === "body" && label === "exit") {
        decisions.push(["defer", e]);
        continue;
      }
      if (take && e.condition !== undefined) {
        take = await evaluateGuard(e.condition, this.ctx(), this.now, this.resolve(output));
      }
      if (take && first && took) take = false;
      if (take) took = true;
      decisions.push([take ? "take" : "kill", e]);
    }
    return decisions;
  }

  edgeKey(e: EdgeDefinition): string {
    return this.g.edgeKey.get(e) ?? `${e.from}->${e.to}`;
  }

  take(e: EdgeDefinition): void {
    const { from, to } = e;
    const target = this.run(to);
    if (target.status !== "waiting" && this.g.cyclic.has(to) && this.g.scc.get(to) === this.g.scc.get(from)) {
      // The node was reached before in this pass. Skipped then (a round of a cycle before this
      // one went another way), it has not run: it waits again. When it ran, and the edge's
      // source ran after it and because of it, the edge closes a loop: run the region again.
      // So does an edge from a node it comes before on every way from the start (the source
      // ran after it), also when a round of a cycle in between forgot the edges that led there.
      // Otherwise the edge arrives late at a node that started without it (an `any` or `n`
      // join): ignored, as outside a loop.
      if (target.status === "skipped") {
        this.unskip(to);
      } else if (backEdgeSources(this.g, this.def.start, to)?.includes(from) === true || this.leadsTo(to, from)) {
        this.resetRegion(e);
      } else {
        const key = this.edgeKey(e);
        this.s.edges[key] = "taken";
        if (!(this.s.late ??= []).includes(key)) this.s.late.push(key);
        return;
      }
    }
    this.s.edges[this.edgeKey(e)] = "taken";
    this.notLate(this.edgeKey(e));
    this.settle(to);
  }

  /** The edge is decided again (taken on time, or dead): it is no longer one that arrived late. */
  notLate(key: string): void {
    if (this.s.late?.includes(key)) {
      this.s.late = this.s.late.filter((k) => k !== key);
      if (this.s.late.length === 0) delete this.s.late;
    }
  }

  /**
   * A node skipped in this pass is reached again: it waits again, and so does every node its
   * skip skipped in turn (along its dead edges, within its cycle), their edges undecided. Each
   * is decided again as the edges into it are.
   */
  unskip(id: string): void {
    const scc = this.g.scc.get(id);
    this.run(id).status = "waiting";
    const stack = [id];
    while (stack.length) {
      const v = stack.pop()!;
      for (const e of this.g.outgoing.get(v) ?? []) {
        const key = this.edgeKey(e);
        if (this.s.deferred?.includes(key)) this.s.deferred = this.s.deferred.filter((k) => k !== key);
        if (this.s.edges[key] !== "dead") continue;
        delete this.s.edges[key];
        const next = this.s.nodes[e.to];
        if (next?.status !== "skipped" || this.g.scc.get(e.to) !== scc) continue;
        next.status = "waiting";
        stack.push(e.to);
      }
    }
  }

  /**
   * Whether `to` can be reached from `from` along edges taken (in this pass), within their cycle,
   * through nodes that completed. A node waiting again took none of its edges since: the edge
   * back that started a round stays taken while its source waits, and leads on from no node
   * that runs in the new round (a branch of it arriving late at a node that ran would else
   * start that node's region over, and a join there would wait for ever). Nor does an edge
   * that arrived late at a node that had started without it ({@link ExecutionState.late}): that
   * node ran before its source, not because of it.
   */
  leadsTo(from: string, to: string): boolean {
    if (from === to) return true;
    const scc = this.g.scc.get(from);
    const seen = new Set<string>([from]);
    const stack = [from];
    while (stack.length) {
      for (const e of this.g.outgoing.get(stack.pop()!) ?? []) {
        if (seen.has(e.to) || this.g.scc.get(e.to) !== scc || this.s.edges[this.edgeKey(e)] !== "taken" || this.s.late?.includes(this.edgeKey(e))) continue;
        if (e.to === to) return true;
        if (this.s.nodes[e.to]?.status !== "completed") continue;
        seen.add(e.to);
        stack.push(e.to);
      }
    }
    return false;
  }

  kill(e: EdgeDefinition, flushing = false): void {
    const { from, to } = e;
    const key = this.edgeKey(e);
    if (!flushing && this.g.cyclic.has(from) && this.g.scc.get(from) !== this.g.scc.get(to)) {
      // Leaving a cycle: a later pass of the cycle may still take this edge.
      this.defer(key);
      return;
    }
    this.s.edges[key] = "dead";
    this.notLate(key);
    this.settle(to);
  }

  /** An edge left undecided until the graph is quiet (maybeFinish), unless a later pass decides it. */
  defer(key: string): void {
    if (!(this.s.deferred ??= []).includes(key)) this.s.deferred.push(key);
  }

  /**
   * A whileLoop starts a pass: the visits of the nodes of its body so far belong to the passes
   * before, and their `maxVisits` counts afresh (passNodes: not the nodes its exit also leads to).
   * Each pass is an iteration the loop counts, so every count stays bounded: by `maxVisits`
   * times the loop's `maxIterations`.
   */
  newPass(loop: string): void {
    for (const id of passNodes(this.g, loop)) {
      const run = this.s.nodes[id];
      if (run?.visits === undefined) continue;
      run.visitsBeforePass = run.visits;
      run.passOf = loop;
    }
  }

  /**
   * Whether whileLoop `id`'s last run went out by its exit, so that the run coming back to it by
   * `e` (which closes a loop to `head`) starts a new run of it: `e` is one of its `exit` edges, or
   * `e` starts a new pass of a whileLoop whose body holds it and its run says it went out
   * ({@link NodeRun.exited}; its exit edges cannot tell: they are left open while it iterates,
   * and also when it went out with their guards false).
   */
  exited(id: string, e: EdgeDefinition, head: string): boolean {
    if (e.from === id && e.when === "exit") return true;
    // Only a new pass of a loop around it starts a new run of it so: coming back to it any other
    // way after it went out is bounded by the cycles through its exit, whose counts go on.
    return id !== head && this.node(head).type === "whileLoop" && loopBody(this.g, head).has(id) && this.s.nodes[id]?.exited === true && this.newRunOf(head, e);
  }

  /**
   * Whether `e`, which closes a loop to whileLoop `head`, comes back to it by a pass that its
   * count bounds: its last run went into its body (so `e` ends one of its iterations), or `e`
   * enters it again from outside its body or by its own exit (its count starts afresh). Not when
   * its last run went out and `e` comes back from its body by a cycle through its exit: that
   * cycle is bounded by the `maxVisits` on it, which a loop restarting inside it could reset.
   */
  newRunOf(head: string, e: EdgeDefinition): boolean {
    if (this.s.nodes[head]?.exited !== true) return true;
    return !loopBody(this.g, head).has(e.from) || (e.from === head && e.when === "exit");
  }

  /**
   * Whether the current run of `loop` was made possible by `by`, or by what `by` made possible,
   * and so on. A whileLoop's run is owed to the node whose pass or cycle started it afresh
   * ({@link NodeRun.restartedBy}); a node's visits since its `maxVisits` count last started
   * afresh are owed to the whileLoop whose pass did that ({@link NodeRun.passOf}).
   */
  restartedThrough(loop: string, by: string): boolean {
    const seen = new Set<string>([loop]);
    const stack = [loop];
    while (stack.length) {
      const run = this.s.nodes[stack.pop()!];
      for (const at of [run?.restartedBy, run?.passOf]) {
        if (at === undefined || seen.has(at)) continue;
        if (at === by) return true;
        seen.add(at);
        stack.push(at);
      }
    }
    return false;
  }

  /** The edge `e` closes a loop back to its target, the head: the head's region runs again. */
  resetRegion(e: EdgeDefinition): void {
    const { from, to: head } = e;
    // The edge back is the head's own `body` edge (a whileLoop with no body node: it goes round on itself).
    const ownBody = from === head && e.when === "body";
    const region = loopRegion(this.g, head, from, this.def.start);
    const calls: string[] = [];
    const reason = "loop iteration restarted";
    for (const id of region) {
      const run = this.s.nodes[id];
      if (!run) continue;
      // Work of the pass before that is still out (a branch the join did not wait for) ends here.
      if (run.status === "paused") this.emit({ kind: "execution.resumed", nodeId: id, decision: "cancelled" });
      // (Asked before the reset below, which sets every node of the region waiting.)
      const wentOut = run.iterations !== undefined && this.exited(id, e, head);
      if (run.status === "running" || run.status === "paused") this.interrupt(id, run, reason, calls);
      run.status = "waiting";
      delete run.callId;
      delete run.timerId;
      delete run.childKey;
      delete run.fan;
      // A loop restarts its count when it is entered again from outside its body: a pass of a
      // loop around it, or a cycle through its exit (back to it, or to a node before it). Not
      // when its own body comes back to it, or a cycle inside its body goes round: that is
      // still the same run of the loop, nor when its own `body` edge goes straight back to it
      // (a loop with no body node: each time round is an iteration, or it would never end).
      // A loop whose last run went out by its exit has ended that run, whichever way the run
      // comes back to it: an edge from its body back to a loop around it (never taken, or not
      // this time) puts that loop in its body too, and must not make its passes one run.
      const inside = id === head ? ownBody || loopBody(this.g, id).has(from) : loopBody(this.g, id).has(head);
      if (run.iterations !== undefined && (!inside || wentOut)) {
        if (id === head) {
          // Entered afresh from outside its body, by a cycle through its exit: that run is owed to
          // what let the cycle go round again, the loop whose pass started its last node's count.
          delete run.iterations;
          const by = this.s.nodes[from]?.passOf;
          if (by === undefined) delete run.restartedBy;
          else run.restartedBy = by;
        } else if (!inside || !this.restartedThrough(head, id)) {
          // A new run of loop `id`, started by a pass of `head`. Not when `head`'s own run was
          // made possible by `id` (restarted by it, or by a cycle whose `maxVisits` count a pass
          // of `id` started afresh, and so on): two loops each in the other's body would start
          // each other's runs for ever, neither count ever running out.
          delete run.iterations;
          run.restartedBy = head;
        }
      }
      this.clearNodeTimers(id);
      this.s.ready = this.s.ready.filter((r) => r !== id);
    }
    if (calls.length) this.effects.push({ kind: "cancelTools", callIds: calls, reason });
    if (this.s.pause && region.has(this.s.pause.nodeId)) this.pauseAtNext();
    for (const key of Object.keys(this.s.edges)) {
      if (region.has(edgeKeySource(key))) delete this.s.edges[key];
    }
    // An edge from outside the loop into its body counts for the pass its source ran in: the
    // source does not run again, so later passes enter the body through the loop alone, and a
    // body node whose edge from the loop dies (the loop exits) is skipped, not run on the
    // old edge (which would start the loop over without end).
    for (const id of region) {
      if (id === head) continue;
      for (const e of this.g.incoming.get(id) ?? []) {
        const key = this.edgeKey(e);
        if (!region.has(e.from) && this.s.edges[key] === "taken") this.s.edges[key] = "dead";
      }
    }
    if (this.s.deferred) this.s.deferred = this.s.deferred.filter((k) => !region.has(edgeKeySource(k)));
    if (this.s.late) {
      this.s.late = this.s.late.filter((k) => this.s.edges[k] === "taken");
      if (this.s.late.length === 0) delete this.s.late;
    }
  }

  /**
   * The pause point moves to another review still waiting (not `except`), if any: one of this
   * run's own, else one in a sub-run; else the execution runs on.
   */
  pauseAtNext(except?: string): void {
    const other = Object.entries(this.s.nodes).find(([id, r]) => id !== except && r.status === "paused");
    const sub = other ? undefined : this.pausedSubRun();
    if (other) {
      const [id] = other;
      this.s.pause = { nodeId: id, reason: reviewConfigSchema.parse(this.node(id).config).reason, seq: this.s.pauseSeq };
    } else if (sub) {
      this.s.pause = this.subRunPausePoint(...sub);
    } else {
      delete this.s.pause;
      if (this.s.status === "paused") this.s.status = "running";
    }
  }

  // ---- pauses in sub-runs -------------------------------------------------

  /** Whether the run still waits for the child run `childKey` of `nodeId` (a subworkflow's, a subagent's or a forEach item's). */
  waitsForChild(nodeId: string, childKey: string): boolean {
    const run = this.s.nodes[nodeId];
    if (!run || run.status !== "running") return false;
    return run.childKey === childKey || this.fanIndex(run, childKey) >= 0;
  }

  /** A sub-run (of `nodeId`, when given) in which a review waits: its id and what the run knows of it. */
  pausedSubRun(nodeId?: string): [string, SubRunPause] | undefined {
    for (const [id, p] of Object.entries(this.s.subRuns ?? {})) if (p.paused && (nodeId === undefined || p.nodeId === nodeId)) return [id, p];
    return undefined;
  }

  subRunPausePoint(id: string, p: SubRunPause): NonNullable<ExecutionState["pause"]> {
    return { nodeId: p.nodeId, reason: subRunReason(id, p.reason), seq: this.s.pauseSeq, subExecutionId: Number(id) };
  }

  /** News from a sub-run the run waits for (the caller checked that it is newer than what the run knows). */
  subRunNews(c: Command & { kind: "childPaused" }): void {
    const id = String(c.childExecutionId);
    const subs = (this.s.subRuns ??= {});
    const was = subs[id]?.paused === true;
    const nodeWaited = this.pausedSubRun(c.nodeId) !== undefined;
    subs[id] = { nodeId: c.nodeId, childKey: c.childKey, paused: c.paused, seq: c.seq, ...(c.paused && c.reason ? { reason: c.reason } : {}) };
    if (c.paused && !was) {
      // The node's pause begins with its first sub-run to pause, and ends with its last.
      if (nodeWaited) return;
      this.s.pauseSeq += 1;
      this.s.status = "paused";
      this.s.pause = this.subRunPausePoint(id, subs[id]);
      this.emit({ kind: "execution.paused", nodeId: c.nodeId, reason: this.s.pause.reason, subExecutionId: c.childExecutionId });
    } else if (c.paused && this.s.pause?.subExecutionId === c.childExecutionId) {
      this.s.pause = this.subRunPausePoint(id, subs[id]);
    } else if (!c.paused && was) {
      this.subRunResumed(id, c.nodeId, SUB_RUN_DECISION);
    }
  }

  /**
   * Sub-run `id` of `nodeId` no longer waits for a person: the node's pause ends, unless another
   * of its sub-runs still waits (the pause point then names that one).
   */
  subRunResumed(id: string, nodeId: string, decision: string): void {
    const other = this.pausedSubRun(nodeId);
    if (other) {
      if (this.s.pause?.subExecutionId === Number(id)) this.s.pause = this.subRunPausePoint(...other);
      return;
    }
    this.emit({ kind: "execution.resumed", nodeId, decision, subExecutionId: Number(id) });
    if (this.s.pause?.subExecutionId !== undefined && this.s.pause.nodeId === nodeId) this.pauseAtNext();
  }

  /** The run no longer waits for child `childKey` of `nodeId` (its result came): what it knew of the child goes. */
  forgetSubRun(nodeId: string, childKey: string): void {
    const subs = this.s.subRuns;
    if (!subs) return;
    for (const [id, p] of Object.entries(subs)) {
      if (p.nodeId !== nodeId || p.childKey !== childKey) continue;
      delete subs[id];
      if (p.paused) this.subRunResumed(id, nodeId, SUB_RUN_DECISION);
    }
    if (Object.keys(subs).length === 0) delete this.s.subRuns;
  }

  /**
   * After a step: the sub-runs the run no longer waits for (their node failed, was retried or
   * went round a loop, which cancels them) are forgotten; a pause in them ends as `cancelled`,
   * as a review's does when a loop goes round past it. A run that ended forgets them all: its
   * last event ends every pause.
   */
  settleSubRuns(): void {
    const subs = this.s.subRuns;
    if (!subs) return;
    if (isFinished(this.s)) {
      delete this.s.subRuns;
      return;
    }
    for (const [id, p] of Object.entries(subs)) {
      if (this.waitsForChild(p.nodeId, p.childKey)) continue;
      delete subs[id];
      if (p.paused) this.subRunResumed(id, p.nodeId, "cancelled");
    }
    if (Object.keys(subs).length === 0) delete this.s.subRuns;
  }

  /**
   * Ends a node's attempt that is running or paused and will not finish (a cancel, a deadline,
   * a failure elsewhere, a loop restarted over it): its calls (added to `calls`), children and
   * timers are stopped, and `node.failed` (`BATON_CANCELLED`) and its journal row say so. A node waiting
   * out a retry's backoff has its failed attempt journaled and announced already and its next
   * attempt never started, so it gets neither: the run's end, or the node's next start, follows.
   */
  interrupt(id: string, run: NodeRun, reason: string, calls: string[]): void {
    const n = this.node(id);
    this.clearNodeTimers(id);
    if (run.timerId?.startsWith("retry:")) {
      run.status = "failed";
      run.error = reason;
      delete run.timerId;
      return;
    }
    const children: string[] = [];
    if (run.callId) calls.push(run.callId);
    if (run.childKey) children.push(run.childKey);
    for (const it of run.fan?.items ?? []) {
      if (it.status !== "running" || !it.key) continue;
      if (run.fan?.calls || (n.type === "forEach" && forEachConfigSchema.parse(n.config).tool)) calls.push(it.key);
      else children.push(it.key);
    }
    if (children.length) this.effects.push({ kind: "cancelChildren", nodeId: id, childKeys: children, reason });
    run.status = "failed";
    run.error = reason;
    run.completedAt = this.now;
    delete run.callId;
    delete run.childKey;
    this.keepDoneItems(n, run);
    delete run.timerId;
    this.emit({ kind: "node.failed", nodeId: id, nodeType: n.type, attempt: run.attempt, code: "BATON_CANCELLED", error: reason, retrying: false });
    this.journal({ nodeId: id, nodeType: n.type, attempt: run.attempt, status: "failed", error: reason, errorCode: "BATON_CANCELLED", retryable: false, durationMs: this.duration(run), startedAt: run.startedAt, completedAt: this.now });
  }

  /**
   * A forEach that stops for good (it failed, or the run ended around it) keeps the items it
   * finished, and only them, so that a fork of this run's last checkpoint does not run them
   * again (forkState); the others are pending, with no call or child out. Any other fan (a
   * node's several calls, an agent's round of tools) is one step of its node, and goes.
   */
  keepDoneItems(n: NodeDefinition, run: NodeRun): void {
    const fan = run.fan;
    if (!fan || fan.calls || n.type !== "forEach") {
      delete run.fan;
      return;
    }
    const items = fan.items.map((it): FanItem => (it.status === "done" ? it : { status: "pending", attempts: 0 }));
    const next = items.findIndex((it) => it.status === "pending");
    run.fan = { ...fan, items, done: items.filter((it) => it.status === "done").length, running: 0, next: next < 0 ? items.length : next };
  }

  joinOf(id: string): Join {
    return joinOf(this.g, this.def.start, id, this.node(id).join);
  }

  /** Dead-path elimination with joins: ready, skipped or still waiting. */
  settle(id: string): void {
    const run = this.run(id);
    if (run.status !== "waiting" || this.s.ready.includes(id)) return;
    const incoming = this.g.incoming.get(id) ?? [];
    // An edge closing a loop back to this node comes from a node that only runs after it: while
    // this node waits, that edge cannot be taken, so it does not keep the node from being
    // skipped (a loop whose way in is dead is skipped with its body, and a merge after it runs).
    const back = backEdgeSources(this.g, this.def.start, id);
    let taken = 0;
    let undecided = 0;
    let undecidedBack = 0;
    for (const e of incoming) {
      const d = this.s.edges[this.edgeKey(e)];
      if (d === "taken") taken++;
      else if (d === undefined) {
        if (back?.includes(e.from)) undecidedBack++;
        else undecided++;
      }
    }
    const join = this.joinOf(id);
    const need = join === "all" ? (undecided + undecidedBack > 0 ? Infinity : 1) : join === "any" ? 1 : join.n;
    if (taken >= need) {
      this.s.ready.push(id);
    } else if (taken + undecided < (join === "all" ? 1 : need)) {
      this.skip(id);
    }
  }

  /**
   * Makes ready again the nodes whose incoming edges let them start: a fork's start from a run
   * that ended, whose ready list the failure or cancel emptied.
   */
  resettle(): void {
    for (const n of this.def.nodes) {
      if ((this.s.nodes[n.id]?.status ?? "waiting") !== "waiting") continue;
      if ((this.g.incoming.get(n.id) ?? []).some((e) => this.s.edges[this.edgeKey(e)] === "taken")) this.settle(n.id);
    }
  }

  skip(id: string): void {
    const n = this.node(id);
    const run = this.run(id);
    run.status = "skipped";
    this.emit({ kind: "node.skipped", nodeId: id, nodeType: n.type });
    for (const e of this.g.outgoing.get(id) ?? []) this.kill(e);
  }

  failExecution(code: string, message: string, nodeId?: string, retryable?: boolean): void {
    this.cancelOutstanding(message);
    this.s.status = "failed";
    this.s.error = { code, message, ...(nodeId ? { nodeId } : {}), ...(retryable ? { retryable } : {}) };
    this.s.finishedAt = this.now;
    this.s.ready = [];
    delete this.s.pause;
    delete this.s.subRuns;
    delete this.s.timers;
    this.s.output = this.outputValue();
    this.emit({ kind: "execution.failed", error: this.s.error });
  }

  /**
   * Fails the run without reading its context on the way (the output is null): the context
   * refers to blobs that are not stored (pruned, or a reference written by hand into an input
   * or a tool's answer), so no step could read it, or the run is aborted from outside.
   */
  failWithoutReading(code: string, message: string): void {
    this.unreadable = true;
    this.failExecution(code, message);
  }

  /** Stops every call, child and timer still out (cancel, deadline, failure elsewhere). */
  cancelOutstanding(reason: string): void {
    const calls: string[] = [];
    for (const [id, run] of Object.entries(this.s.nodes)) {
      if (run.status === "running" || run.status === "paused") this.interrupt(id, run, reason, calls);
    }
    if (calls.length) this.effects.push({ kind: "cancelTools", callIds: calls, reason });
    delete this.s.timers;
  }

  outputValue(): JsonValue {
    if (this.unreadable) return null;
    if (this.def.output) return resolveTemplate(this.def.output, this.ctx()) ?? null;
    if (this.s.lastNode) {
      const n = this.nodesById.get(this.s.lastNode);
      if (n) return readPath(this.ctx(), this.outputPath(n)) ?? null;
    }
    return null;
  }

  busy(): boolean {
    return Object.values(this.s.nodes).some((r) => r.status === "running" || r.status === "paused");
  }

  /** Completes the execution when nothing is ready, running or paused; first settles edges left open by cycles. */
  maybeFinish(): void {
    if (this.s.status !== "running") return;
    if (this.s.ready.length > 0 || this.busy()) return;
    let blocked: NodeDefinition[];
    for (;;) {
      while (this.s.deferred?.length) {
        const keys = this.s.deferred;
        delete this.s.deferred;
        for (const key of keys) {
          const e = this.g.edgeByKey.get(key);
          if (e && this.s.edges[key] === undefined) this.kill(e, true);
        }
        if (this.s.ready.length > 0) return;
      }
      blocked = this.def.nodes.filter((n) => (this.s.nodes[n.id]?.status ?? "waiting") === "waiting" && this.waitsForever(n.id));
      // Skip the nodes the run never entered and no longer can, so their edges die: a reached
      // node that waits for an edge from them then decides (a loop whose ways in are all dead,
      // entered at more than one of its nodes, is skipped as one entered only at its head is:
      // see settle), and a run that completes leaves none of them waiting (a cycle in a loop
      // body that the loop's exit left behind, a cycle entered at several nodes and never entered).
      if (!this.skipUnentered()) break;
      if (this.s.ready.length > 0) return;
    }
    // Nothing is left to run or decide, yet a node was reached (an edge into it was taken) and
    // its join still waits for edges that nothing will decide: nodes whose joins wait on each
    // other. The run cannot complete as the definition says; it fails naming them.
    if (blocked.length > 0) {
      const ids = blocked.map((n) => `"${n.id}"`).join(", ");
      this.failExecution("BATON_JOIN_NEVER_FIRED", `node(s) ${ids} were reached but their joins wait for edges from nodes that never run (they wait on each other)`, blocked[0]!.id);
      return;
    }
    this.s.output = this.outputValue();
    this.s.status = "completed";
    this.s.finishedAt = this.now;
    delete this.s.timers;
    this.emit({ kind: "execution.completed", output: this.s.output });
  }

  /**
   * Skips the nodes the run can no longer enter, once nothing is ready, running or deferred:
   * waiting nodes with no edge in taken whose undecided edges all come from such nodes (the
   * largest such set). None of them can run first, since each needs an edge taken by another.
   * A node skipped with them kills its edges out, so a join after them decides. Returns whether
   * it skipped any.
   */
  skipUnentered(): boolean {
    const out = new Set(this.def.nodes.filter((n) => (this.s.nodes[n.id]?.status ?? "waiting") === "waiting").map((n) => n.id));
    for (const id of out) {
      if ((this.g.incoming.get(id) ?? []).some((e) => this.s.edges[this.edgeKey(e)] === "taken")) out.delete(id);
    }
    for (let changed = true; changed; ) {
      changed = false;
      for (const id of out) {
        if ((this.g.incoming.get(id) ?? []).some((e) => this.s.edges[this.edgeKey(e)] === undefined && !out.has(e.from))) {
          out.delete(id);
          changed = true;
        }
      }
    }
    if (out.size === 0) return false;
    for (const id of out) {
      this.run(id).status = "skipped";
      this.emit({ kind: "node.skipped", nodeId: id, nodeType: this.node(id).type });
    }
    for (const id of out) for (const e of this.g.outgoing.get(id) ?? []) if (this.s.edges[this.edgeKey(e)] === undefined) this.kill(e, true);
    return true;
  }

  /** A waiting node with an incoming edge taken and one still undecided (see maybeFinish). */
  waitsForever(id: string): boolean {
    let taken = false;
    let undecided = false;
    for (const e of this.g.incoming.get(id) ?? []) {
      const d = this.s.edges[this.edgeKey(e)];
      if (d === "taken") taken = true;
      else if (d === undefined) undecided = true;
    }
    return taken && undecided;
  }

  inFlight(): number {
    return Object.values(this.s.nodes).filter((r) => r.status === "running").length;
  }

  canStart(id: string): boolean {
    const type = this.node(id).type;
    if (NODE_TYPES[type]?.inline) return !this.completedOne;
    const cap = this.def.limits?.maxConcurrency;
    return cap === undefined || this.inFlight() < cap;
  }

  /** Starts what may start now: every ready node doing outside work (up to the cap), and one inline node if none completed yet. */
  async advance(): Promise<void> {
    for (;;) {
      if (this.s.status !== "running" && this.s.status !== "paused") return;
      const id = this.s.ready.find((r) => this.canStart(r));
      if (id === undefined) return;
      this.s.ready = this.s.ready.filter((r) => r !== id);
      await this.activate(this.node(id));
    }
  }

  more(): boolean {
    if (this.s.status !== "running" && this.s.status !== "paused") return false;
    this.completedOne = false;
    return this.s.ready.some((r) => this.canStart(r));
  }

  // ---- node types ---------------------------------------------------------

  /** Node starts so far; a checkpoint written before they were counted sums its nodes' attempts. */
  stepsSoFar(): number {
    return this.s.steps ?? Object.values(this.s.nodes).reduce((sum, r) => sum + r.attempt, 0);
  }

  /**
   * Fails the execution with BATON_STEP_LIMIT when it has made `limits.maxSteps` node starts
   * already, so that starting `n` would exceed it; returns whether it did.
   */
  stepLimitReached(n: NodeDefinition): boolean {
    const limit = this.def.limits?.maxSteps ?? DEFAULT_MAX_STEPS;
    const steps = this.stepsSoFar();
    if (steps < limit) return false;
    const which = this.def.limits?.maxSteps === undefined ? "the default limits.maxSteps" : "limits.maxSteps";
    this.failExecution("BATON_STEP_LIMIT", `the execution made ${steps} node starts, ${which}=${limit}; node "${n.id}" would have been one more`, n.id, false);
    return true;
  }

  async activate(n: NodeDefinition): Promise<void> {
    if (this.stepLimitReached(n)) return;
    const run = this.run(n.id);
    run.visits = (run.visits ?? 0) + 1;
    run.visitStartAttempt = run.attempt;
    if (n.maxVisits !== undefined && run.visits - (run.visitsBeforePass ?? 0) > n.maxVisits) {
      this.begin(n, "running");
      this.failNode(n, { code: "BATON_LOOP_LIMIT", message: `node "${n.id}" was reached more than maxVisits=${n.maxVisits} times${this.passOf(n.id)}`, retryable: false });
      return;
    }
    try {
      await this.startWork(n);
    } catch (err) {
      if (!(err instanceof ExpressionFailed) && !(err instanceof NodeInputError)) throw err;
      if (this.run(n.id).status !== "running") this.begin(n, "running");
      this.failNode(n, { code: err instanceof ExpressionFailed ? "BATON_EXPRESSION_FAILED" : err.code, message: err.message, retryable: false });
    }
  }

  /** For a message: the innermost whileLoop whose passes a node's visits are counted in, if any. */
  passOf(id: string): string {
    const loops = this.def.nodes.filter((l) => l.type === "whileLoop" && passNodes(this.g, l.id).has(id));
    const inner = loops.sort((a, b) => loopBody(this.g, a.id).size - loopBody(this.g, b.id).size)[0];
    return inner ? ` in one pass of loop "${inner.id}"` : "";
  }

  async startWork(n: NodeDefinition): Promise<void> {
    const ctx = this.ctx();
    switch (n.type) {
      case "condition": {
        const input = resolveTemplate(n.input ?? {}, ctx);
        this.begin(n, "running", input);
        const cfg = n.config;
        const result = typeof cfg.expression === "string"
          ? truthy(await evaluateExpression(cfg.expression, ctx, this.now))
          : evaluateCondition(conditionConfigSchema.parse(cfg), ctx);
        await this.complete(n, { result }, String(result));
        return;
      }
      case "transform": {
        const cfg = transformConfigSchema.parse(n.config);
        this.begin(n, "running");
        await this.complete(n, await evaluateExpression(cfg.expression, ctx, this.now), undefined);
        return;
      }
      case "setVariable": {
        const cfg = setVariableConfigSchema.parse(n.config);
        this.begin(n, "running");
        const output: JsonObject = {};
        for (const [k, v] of Object.entries(cfg.values)) {
          const value = resolveTemplate(v, ctx) ?? null;
          if (looksLikePath(k)) this.write(k, value);
          else output[k] = value;
        }
        await this.complete(n, output, undefined);
        return;
      }
      case "emit": {
        const cfg = emitConfigSchema.parse(n.config);
        const data = resolveTemplate(cfg.data ?? null, ctx) ?? null;
        this.begin(n, "running");
        this.emit({ kind: "execution.emitted", nodeId: n.id, name: cfg.event, data });
        await this.complete(n, { event: cfg.event, data }, undefined);
        return;
      }
      case "whileLoop": {
        const cfg = whileLoopConfigSchema.parse(n.config);
        const run = this.run(n.id);
        const iterations = run.iterations ?? 0;
        const go = typeof cfg.condition === "string"
          ? truthy(await evaluateExpression(cfg.condition, ctx, this.now, { iteration: iterations }))
          : evaluateCondition(cfg.condition, ctx);
        this.begin(n, "running", { iteration: iterations });
        if (go && iterations >= cfg.maxIterations) {
          if (cfg.onLimit === "fail") {
            this.failNode(n, { code: "BATON_LOOP_LIMIT", message: `loop "${n.id}" reached maxIterations=${cfg.maxIterations}`, retryable: false });
            return;
          }
          run.exited = true;
          await this.complete(n, { iterations, limitReached: true }, "exit");
          return;
        }
        if (go) {
          run.iterations = iterations + 1;
          delete run.exited;
          this.newPass(n.id);
        } else {
          run.exited = true;
        }
        await this.complete(n, { iterations: go ? iterations + 1 : iterations }, go ? "body" : "exit");
        return;
      }
      case "tool": {
        const cfg = toolConfigSchema.parse(n.config);
        if ("tool" in cfg) {
          this.dispatchTool(n, cfg.tool);
        } else {
          const calls = cfg.calls.map((c) => ({ tool: c.tool, args: asArgs(resolveTemplate(c.input, ctx)) }));
          this.begin(n, "running", calls, calls.map((c) => ({ tool: c.tool })));
          this.startFan(n, calls.length, calls.length, calls);
        }
        return;
      }
      case "delay": {
        const cfg = delayConfigSchema.parse(n.config);
        let dueAt: string;
        if ("ms" in cfg) {
          const ms = typeof cfg.ms === "number" ? cfg.ms : readPath(ctx, cfg.ms);
          if (typeof ms !== "number" || !(ms >= 0)) throw new NodeInputError("BATON_DELAY_INVALID", `delay "${n.id}": ms must be a non-negative number, got ${JSON.stringify(ms ?? null)}`);
          dueAt = addMs(this.now, ms);
        } else {
          const until = looksLikePath(cfg.until) ? readPath(ctx, cfg.until) : cfg.until;
          if (typeof until !== "string" || Number.isNaN(Date.parse(until))) throw new NodeInputError("BATON_DELAY_INVALID", `delay "${n.id}": until must be an ISO time, got ${JSON.stringify(until ?? null)}`);
          dueAt = new Date(Date.parse(until)).toISOString();
        }
        const run = this.begin(n, "running", { dueAt });
        const timerId = `delay:${n.id}:${run.attempt}`;
        run.timerId = timerId;
        this.setTimer(timerId, { dueAt, kind: "delay", nodeId: n.id });
        return;
      }
      case "forEach": {
        const cfg = forEachConfigSchema.parse(n.config);
        const items = readPath(ctx, cfg.items);
        if (!Array.isArray(items)) throw new NodeInputError("BATON_FOREACH_NOT_A_LIST", `forEach "${n.id}": ${cfg.items} is ${items === undefined ? "missing" : `not a list (${typeof items})`}`);
        // A fork started mid-forEach carries the items done then (forkState): only the others run,
        // unless the list it reads is no longer as long (the fork edited it).
        const carried = this.run(n.id).fan;
        delete this.run(n.id).fan;
        this.begin(n, "running", { items: items.length });
        if (items.length === 0) {
          await this.complete(n, await this.reduce(cfg, [], []), undefined);
          return;
        }
        if (carried && carried.items.length === items.length && carried.items.some((it) => it.status !== "done")) {
          this.run(n.id).fan = { ...carried, concurrency: cfg.concurrency };
          this.pump(n);
          return;
        }
        this.startFan(n, items.length, cfg.concurrency);
        return;
      }
      case "subworkflow": {
        const cfg = subworkflowConfigSchema.parse(n.config);
        const input = asArgs(resolveTemplate(n.input ?? {}, ctx));
        const run = this.begin(n, "running", input);
        run.childKey = String(run.attempt);
        this.effects.push({ kind: "startChild", nodeId: n.id, childKey: run.childKey, workflow: cfg.workflow, input });
        return;
      }
      case "agent.humanReview": {
        const cfg = reviewConfigSchema.parse(n.config);
        const subject = resolveTemplate(cfg.subject ?? null, ctx) ?? null;
        this.begin(n, "paused", { reason: cfg.reason, subject });
        this.s.pauseSeq += 1;
        this.s.status = "paused";
        this.s.pause = { nodeId: n.id, reason: cfg.reason, seq: this.s.pauseSeq };
        this.emit({ kind: "execution.paused", nodeId: n.id, reason: cfg.reason });
        this.effects.push({ kind: "review", nodeId: n.id, reason: cfg.reason, subject, seq: this.s.pauseSeq });
        return;
      }
      case "agent.prompt": {
        const cfg = promptConfigSchema.parse(n.config);
        this.begin(n, "running");
        const text = this.fill(cfg.template);
        if (cfg.role) this.write(this.messagesPath(), [...this.conversation(this.messagesPath()), { role: cfg.role, content: text }]);
        await this.complete(n, { text }, undefined);
        return;
      }
      case "agent.llm": {
        const cfg = llmConfigSchema.parse(n.config);
        this.dispatchTool(n, "llm.chat", this.llmRequest(n, cfg, this.conversation(cfg.messages ?? this.messagesPath())));
        return;
      }
      case "agent.toolLoop": {
        const cfg = toolLoopConfigSchema.parse(n.config);
        const messages = this.conversation(cfg.messages ?? this.messagesPath());
        const request = this.llmRequest(n, { ...cfg, prompt: undefined }, messages);
        const start = [...messages, ...(cfg.prompt ? [{ role: "user", content: this.fill(cfg.prompt) }] : [])];
        const run = this.begin(n, "running", { model: request.model ?? null, tools: cfg.tools ?? [] });
        run.loop = { iteration: 0, messages: start, base: messages.length };
        this.loopLlmCall(n, run);
        return;
      }
      case "agent.toolExecutor": {
        const cfg = toolExecutorConfigSchema.parse(n.config);
        const calls = toolCallsAt(ctx, cfg.toolCalls);
        this.begin(n, "running", calls as unknown as JsonValue, calls.map((c) => ({ tool: c.name, id: c.id })));
        if (calls.length === 0) {
          await this.agentToolsDone(n, []);
          return;
        }
        this.run(n.id).loop = { iteration: 0, messages: [], base: 0, calls };
        this.startFan(n, calls.length, cfg.parallel ? calls.length : 1, calls.map((c) => ({ tool: c.name, args: c.args })), true, undefined, this.agentToolNames());
        await this.fanSettledAtStart(n);
        return;
      }
      case "agent.subagent": {
        const cfg = subagentConfigSchema.parse(n.config);
        const input: JsonObject = {
          ...(cfg.task !== undefined ? { task: this.fill(cfg.task) } : {}),
          messages: cfg.shareMessages ? this.conversation(this.messagesPath()) : [],
          ...asArgs(resolveTemplate(n.input ?? {}, ctx)),
        };
        const run = this.begin(n, "running", input);
        run.childKey = String(run.attempt);
        this.effects.push({ kind: "startChild", nodeId: n.id, childKey: run.childKey, workflow: cfg.agent, input });
        return;
      }
      case "synthdev.state": {
        const cfg = synthdevStateConfigSchema.parse(n.config);
        const run = this.begin(n, "running", { state: cfg.state });
        run.sd = { phase: "pre" };
        if (readPath(ctx, "$.synthdev") === undefined) this.write("$.synthdev", initialRuntime(this.sdMaterial()) as unknown as JsonValue);
        await this.sdAdvance(n, run);
        return;
      }
      case "agent.memory.read":
      case "agent.rag":
      case "agent.memory.write":
      case "agent.embed":
      case "agent.imageGen":
        this.dispatchTool(n, AGENT_TOOLS[n.type]!, this.agentToolArgs(n));
        return;
      default:
        this.begin(n, "running");
        this.failNode(n, { code: "BATON_ENGINE_NODE_TYPE", message: `node type "${n.type}" cannot be executed`, retryable: false });
    }
  }

  // ---- agent nodes --------------------------------------------------------

  /** A fan whose items were all answered at start (every call refused) finishes at once. */
  async fanSettledAtStart(n: NodeDefinition): Promise<void> {
    const fan = this.run(n.id).fan && this.fan(n);
    if (fan && fan.done === fan.items.length) await this.agentToolsDone(n, fan.items.map((i) => i.result ?? null));
  }

  /** Tools the workflow's agent nodes name: what a toolExecutor may run. */
  agentToolNames(): Set<string> {
    const out = new Set<string>();
    for (const n of this.def.nodes) {
      const tools = n.type.startsWith("agent.") ? n.config.tools : undefined;
      if (Array.isArray(tools)) for (const t of tools) if (typeof t === "string") out.add(t);
    }
    return out;
  }

  messagesPath(): string {
    return "$.messages";
  }

  conversation(path: string): JsonObject[] {
    const v = readPath(this.ctx(), path);
    return Array.isArray(v) ? v.filter(isJsonObject) : [];
  }

  /** Fills `{{$.path}}` placeholders of a template from the context. */
  fill(template: string): string {
    return template.replace(PLACEHOLDER, (_, path: string) => {
      const v = readPath(this.ctx(), path.trim());
      return v === undefined || v === null ? "" : typeof v === "string" ? v : JSON.stringify(v);
    });
  }

  llmRequest(n: NodeDefinition, cfg: { model?: string | undefined; system?: string | undefined; temperature?: number | undefined; maxTokens?: number | undefined; timeoutMs?: number | undefined; prompt?: string | undefined; tools?: string[] | undefined; responseFormat?: JsonObject | undefined }, messages: JsonObject[]): JsonObject {
    const ac = this.def.agentConfig ?? {};
    // No model: the call names none, and llm.chat takes the installation's BATON_LLM_DEFAULT_MODEL.
    const model = cfg.model ?? ac.model;
    const system = cfg.system ?? ac.system;
    const req: JsonObject = {
      ...(model ? { model } : {}),
      messages: [...messages, ...(cfg.prompt ? [{ role: "user", content: this.fill(cfg.prompt) }] : [])],
    };
    if (system !== undefined) req.system = this.fill(system);
    const temperature = cfg.temperature ?? ac.temperature;
    if (temperature !== undefined) req.temperature = temperature;
    const maxTokens = cfg.maxTokens ?? ac.maxTokens;
    if (maxTokens !== undefined) req.maxTokens = maxTokens;
    const timeoutMs = cfg.timeoutMs ?? ac.timeoutMs;
    if (timeoutMs !== undefined) req.timeoutMs = timeoutMs;
    if (cfg.tools?.length) req.tools = cfg.tools;
    if (cfg.responseFormat) req.responseFormat = cfg.responseFormat;
    return req;
  }

  agentToolArgs(n: NodeDefinition): JsonObject {
    const ctx = this.ctx();
    // Memories belong to an agent; a workflow without one uses its own id.
    const agentId = (v: number | string | undefined): JsonValue => (typeof v === "string" ? readPath(ctx, v) ?? null : v ?? this.s.workflowId);
    const last = (role: string): string => {
      const m = [...this.conversation(this.messagesPath())].reverse().find((x) => x.role === role);
      return typeof m?.content === "string" ? m.content : "";
    };
    switch (n.type) {
      case "agent.memory.read": {
        const cfg = memoryReadConfigSchema.parse(n.config);
        return { agentId: agentId(cfg.agentId), query: cfg.query !== undefined ? this.fill(cfg.query) : last("user"), limit: cfg.limit };
      }
      case "agent.rag": {
        const cfg = ragConfigSchema.parse(n.config);
        return { agentId: agentId(cfg.agentId), query: this.fill(cfg.query), limit: cfg.topK };
      }
      case "agent.memory.write": {
        const cfg = memoryWriteConfigSchema.parse(n.config);
        return { agentId: agentId(cfg.agentId), key: cfg.key !== undefined ? this.fill(cfg.key) : `${this.s.executionId}.${n.id}`, content: cfg.content !== undefined ? this.fill(cfg.content) : last("assistant"), metadata: (resolveTemplate(cfg.metadata ?? {}, ctx) ?? {}) };
      }
      case "agent.embed": {
        const cfg = embedConfigSchema.parse(n.config);
        return { ...(cfg.model ? { model: cfg.model } : {}), values: resolveTemplate(cfg.values, ctx) ?? null };
      }
      default: {
        const cfg = imageGenConfigSchema.parse(n.config);
        return { ...(cfg.model ? { model: cfg.model } : {}), prompt: this.fill(cfg.prompt), ...(cfg.size ? { size: cfg.size } : {}) };
      }
    }
  }

  addUsage(run: NodeRun, output: JsonValue): void {
    const u = isJsonObject(output) && isJsonObject(output.usage) ? output.usage : undefined;
    if (!u) return;
    const add = (a: JsonObject | undefined): JsonObject => ({
      inputTokens: num(a?.inputTokens) + num(u.inputTokens),
      outputTokens: num(a?.outputTokens) + num(u.outputTokens),
      totalTokens: num(a?.totalTokens) + num(u.totalTokens),
    });
    run.tokenUsage = add(run.tokenUsage);
    this.s.tokenUsage = add(this.s.tokenUsage);
  }

  /** Whether a single-call node reads its answer (beyond storing it as its output). */
  readsAnswer(n: NodeDefinition): boolean {
    switch (n.type) {
      case "agent.llm":
      case "agent.toolLoop":
      case "synthdev.state":
        return true;
      case "agent.memory.read":
        return memoryReadConfigSchema.parse(n.config).inject;
      case "agent.subagent":
        return subagentConfigSchema.parse(n.config).append;
      default:
        return false;
    }
  }

  /** A single-call node's work came back: agent nodes fold it into the conversation, then complete. */
  async finishCall(n: NodeDefinition, output: JsonValue): Promise<void> {
    const run = this.run(n.id);
    // What agent nodes read of the answer (text, tool calls, usage, entries) is read through a
    // blob reference; the node's output stays the reference.
    const answer = this.readsAnswer(n) ? this.resolve(output) : output;
    this.addUsage(run, answer);
    if (n.type === "agent.toolLoop") {
      await this.loopLlmResult(n, run, answer);
      return;
    }
    if (n.type === "synthdev.state") {
      await this.sdResult(n, run, answer);
      return;
    }
    if (n.type === "agent.llm") {
      const cfg = llmConfigSchema.parse(n.config);
      if (cfg.append) {
        const path = cfg.messages ?? this.messagesPath();
        const o = isJsonObject(answer) ? answer : {};
        const calls = toolCallsOf(answer);
        this.write(path, [
          ...this.conversation(path),
          ...(cfg.prompt ? [{ role: "user", content: this.fill(cfg.prompt) }] : []),
          { role: "assistant", content: typeof o.text === "string" ? o.text : "", ...(calls.length ? { toolCalls: calls as unknown as JsonValue } : {}) },
        ]);
        this.write("$.toolCalls", calls as unknown as JsonValue);
      }
    }
    if (n.type === "agent.memory.read" && memoryReadConfigSchema.parse(n.config).inject) {
      const entries = isJsonObject(answer) && Array.isArray(answer.entries) ? answer.entries : Array.isArray(answer) ? answer : [];
      if (entries.length) {
        const lines = entries.map((e) => `- ${isJsonObject(e) && typeof e.content === "string" ? e.content : JSON.stringify(e)}`).join("\n");
        this.write(this.messagesPath(), [...this.conversation(this.messagesPath()), { role: "system", content: `Relevant memories:\n${lines}` }]);
      }
    }
    if (n.type === "agent.subagent" && subagentConfigSchema.parse(n.config).append) {
      const text = typeof answer === "string" ? answer : isJsonObject(answer) && typeof answer.text === "string" ? answer.text : JSON.stringify(answer);
      this.write(this.messagesPath(), [...this.conversation(this.messagesPath()), { role: "assistant", content: text }]);
    }
    await this.complete(n, output, undefined);
  }

  // ---- SynthDev states (seed 002) -------------------------------------------

  sdMaterial(): SynthdevMaterial {
    if (!this.def.synthdev) throw new NodeInputError("BATON_SYNTHDEV_MISSING", "a synthdev.state node needs definition.synthdev (import the workflow with format \"synthdev\")");
    return this.def.synthdev;
  }

  sdState(n: NodeDefinition): SynthdevMaterial["workflow"]["states"][number] {
    const name = synthdevStateConfigSchema.parse(n.config).state;
    const st = this.sdMaterial().workflow.states.find((x) => x.name === name);
    if (!st) throw new NodeInputError("BATON_SYNTHDEV_STATE_MISSING", `SynthDev state "${name}" is not in the workflow`);
    return st;
  }

  sdRuntime(): SynthdevRuntime {
    return structuredClone(readPath(this.ctx(), "$.synthdev")) as unknown as SynthdevRuntime;
  }

  sdSave(rt: SynthdevRuntime): void {
    this.write("$.synthdev", rt as unknown as JsonValue);
  }

  sdHandlerCall(n: NodeDefinition, run: NodeRun, handler: string, waiting: "pre" | "post" | "transition" | "error", extra: JsonObject = {}): void {
    const rt = this.sdRuntime();
    const callId = `${this.s.executionId}.${n.id}.${run.attempt}.${waiting}${run.visits ?? 1}`;
    run.callId = callId;
    run.sd!.waiting = waiting;
    const args: JsonObject = { script: this.sdMaterial().script, handler, this: handlerThis(rt, readPath(this.ctx(), "$.input") ?? null, extra) };
    this.callTool({ nodeId: n.id, callId, tool: "sandbox.run", args, attempt: run.attempt, idempotencyKey: callId });
  }

  sdAgentCall(n: NodeDefinition, run: NodeRun, st: SynthdevMaterial["workflow"]["states"][number], again = false): void {
    const m = this.sdMaterial();
    const agent = m.workflow.agents.find((a) => a.agent_role === st.agent);
    if (!agent) throw new NodeInputError("BATON_SYNTHDEV_AGENT_MISSING", `state "${st.name}" names agent "${st.agent ?? ""}", which is not in agents`);
    const role = m.roles[agent.agent_role];
    const rt = this.sdRuntime();
    const context = rt.contexts[agent.context];
    if (!context) throw new NodeInputError("BATON_SYNTHDEV_CONTEXT_MISSING", `agent "${agent.agent_role}" uses context "${agent.context}", which is not in contexts`);
    const data: JsonObject = { input: readPath(this.ctx(), "$.input") ?? null, common_data: rt.common_data, variables: m.workflow.variables as JsonObject };
    if (st.message !== undefined && !again) {
      const content = fillSynthdev(st.message, data);
      addToContext(context, { role: "user", content, agent: "__workflow" });
      this.sdSave(rt);
    }
    const ac = this.def.agentConfig ?? {};
    // No model: the call names none, and llm.chat takes the installation's BATON_LLM_DEFAULT_MODEL.
    const model = synthdevAgentModel(role, ac);
    const tools = [...(role?.includedTools ?? [])];
    const parsing = (role?.parsingTools ?? []).map((t) => ({ name: t.name, description: t.description, inputSchema: t.parameters as JsonObject }));
    const args: JsonObject = {
      ...(model ? { model } : {}),
      messages: perspective(context.messages, agent.agent_role),
      ...(role?.systemMessage ? { system: role.systemMessage } : {}),
      ...(tools.length ? { tools } : {}),
      ...(parsing.length ? { toolDefinitions: parsing } : {}),
      ...(ac.temperature !== undefined ? { temperature: ac.temperature } : {}),
      ...(ac.maxTokens !== undefined ? { maxTokens: ac.maxTokens } : {}),
    };
    const callId = `${this.s.executionId}.${n.id}.${run.attempt}.agent${run.visits ?? 1}${run.sd!.toolRounds ? `.${run.sd!.toolRounds}` : ""}`;
    run.callId = callId;
    run.sd!.waiting = "agent";
    this.callTool({ nodeId: n.id, callId, tool: "llm.chat", args, attempt: run.attempt, idempotencyKey: callId, ...(n.timeoutMs ? { timeoutMs: n.timeoutMs } : {}) });
  }

  /** Runs the state's next step that has work; completes the node when all four are done. */
  async sdAdvance(n: NodeDefinition, run: NodeRun): Promise<void> {
    const st = this.sdState(n);
    const sd = run.sd!;
    for (;;) {
      switch (sd.phase) {
        case "pre":
          sd.phase = "agent";
          if (st.pre_handler) return this.sdHandlerCall(n, run, st.pre_handler, "pre");
          break;
        case "agent":
          sd.phase = "post";
          if (st.agent) return this.sdAgentCall(n, run, st);
          break;
        case "post":
          sd.phase = "transition";
          if (st.post_handler) return this.sdHandlerCall(n, run, st.post_handler, "post");
          break;
        case "transition":
          sd.phase = "done";
          if (st.transition_handler) return this.sdHandlerCall(n, run, st.transition_handler, "transition");
          break;
        case "done": {
          const next = sd.next !== undefined ? sd.next : st.next_state ?? null;
          const rt = this.sdRuntime();
          delete run.sd;
          if (next === null || next === "stop" && !this.sdMaterial().workflow.states.some((x) => x.name === "stop")) {
            // A final state: the workflow's output.
            const outName = this.sdMaterial().workflow.output?.name;
            const value = outName !== undefined && rt.common_data[outName] !== undefined ? rt.common_data[outName] : lastText(rt.last_response);
            await this.complete(n, { next: null, output: value ?? null }, undefined);
            this.write("$.synthdev.output", value ?? null);
            return;
          }
          // The runtime goes with the output, so a checkpoint rebuilt from the journal has it.
          await this.complete(n, { next, runtime: rt as unknown as JsonValue }, undefined);
          return;
        }
      }
    }
  }

  async sdResult(n: NodeDefinition, run: NodeRun, output: JsonValue): Promise<void> {
    const sd = run.sd!;
    delete run.callId;
    const rt = this.sdRuntime();
    const waiting = sd.waiting;
    delete sd.waiting;
    if (waiting === "agent") {
      const st = this.sdState(n);
      const agent = this.sdMaterial().workflow.agents.find((a) => a.agent_role === st.agent)!;
      const o = isJsonObject(output) ? output : {};
      const text = typeof o.text === "string" ? o.text : "";
      const calls = toolCallsOf(output);
      // Calls of the role's included tools run on the workers and go back to the agent; the
      // answer without them (parsing-only tool calls included) is the state's response.
      const included = new Set(this.sdMaterial().roles[agent.agent_role]?.includedTools ?? []);
      const runnable = calls.filter((c) => included.has(c.name));
      addToContext(rt.contexts[agent.context]!, { role: "assistant", content: text, agent: agent.agent_role, ...(runnable.length ? { toolCalls: runnable as unknown as JsonValue } : {}) });
      const rounds = sd.toolRounds ?? 0;
      if (runnable.length && rounds < (this.def.maxToolIterations ?? 10)) {
        sd.toolRounds = rounds + 1;
        sd.waiting = "tools";
        this.sdSave(rt);
        run.loop = { iteration: sd.toolRounds, messages: [], base: 0, calls: runnable };
        this.startFan(n, runnable.length, runnable.length, runnable.map((c) => ({ tool: c.name, args: c.args })), true, 1000 * (run.visits ?? 1) + sd.toolRounds, included);
        await this.fanSettledAtStart(n);
        return;
      }
      rt.last_response = o.raw ?? {
        choices: [{ index: 0, finish_reason: typeof o.finishReason === "string" ? o.finishReason : "stop", message: {
          role: "assistant", content: text,
          ...(calls.length ? { tool_calls: calls.map((c) => ({ id: c.id, type: "function", function: { name: c.name, arguments: JSON.stringify(c.args) } })) } : {}),
        } }],
      };
      this.sdSave(rt);
      await this.sdAdvance(n, run);
      return;
    }
    const o = isJsonObject(output) ? output : {};
    absorbHandler(rt, o.this ?? null);
    this.sdSave(rt);
    const returned = o.returned ?? null;
    if (waiting === "transition") {
      sd.next = typeof returned === "string" ? returned : null;
    } else if (waiting === "error") {
      if (returned === "retry") {
        const st = this.sdState(n);
        const tries = (rt.retries[st.name] ?? 0) + 1;
        rt.retries[st.name] = tries;
        this.sdSave(rt);
        if (tries > (st.max_retries ?? 3)) {
          this.failNode(n, { code: "BATON_SYNTHDEV_RETRIES_EXHAUSTED", message: `state "${st.name}" failed ${tries} time(s)`, retryable: false });
          return;
        }
        sd.phase = "pre";
      } else {
        sd.phase = "done";
        sd.next = typeof returned === "string" && returned !== "" ? returned : null;
      }
    }
    await this.sdAdvance(n, run);
  }

  /** A step of a SynthDev state failed: its error_handler decides, else max_retries, else the node fails. */
  async sdFailed(n: NodeDefinition, run: NodeRun, f: Failure): Promise<void> {
    const st = this.sdState(n);
    const sd = run.sd!;
    delete run.callId;
    const rt = this.sdRuntime();
    if (st.error_handler && sd.waiting !== "error") {
      this.sdHandlerCall(n, run, st.error_handler, "error", { last_error: { code: f.code, message: f.message } });
      return;
    }
    const tries = (rt.retries[st.name] ?? 0) + 1;
    rt.retries[st.name] = tries;
    this.sdSave(rt);
    if (sd.waiting !== "error" && tries <= (st.max_retries ?? 0)) {
      sd.phase = "pre";
      delete sd.waiting;
      await this.sdAdvance(n, run);
      return;
    }
    this.failNode(n, { code: f.code, message: `state "${st.name}": ${f.message}`, retryable: false });
  }

  loopLlmCall(n: NodeDefinition, run: NodeRun): void {
    const cfg = toolLoopConfigSchema.parse(n.config);
    const loop = run.loop!;
    const args = this.llmRequest(n, { ...cfg, prompt: undefined }, loop.messages);
    const callId = `${this.s.executionId}.${n.id}.${run.attempt}.llm${loop.iteration}`;
    run.callId = callId;
    this.callTool({ nodeId: n.id, callId, tool: "llm.chat", args, attempt: run.attempt, idempotencyKey: callId, ...(n.timeoutMs ? { timeoutMs: n.timeoutMs } : {}) });
  }

  async loopLlmResult(n: NodeDefinition, run: NodeRun, output: JsonValue): Promise<void> {
    const cfg = toolLoopConfigSchema.parse(n.config);
    const loop = run.loop!;
    delete run.callId;
    const o = isJsonObject(output) ? output : {};
    const text = typeof o.text === "string" ? o.text : "";
    const calls = toolCallsOf(output);
    loop.messages = [...loop.messages, { role: "assistant", content: text, ...(calls.length ? { toolCalls: calls as unknown as JsonValue } : {}) }];
    const max = cfg.maxToolIterations ?? this.def.maxToolIterations ?? 10;
    const stopCall = cfg.stopOnTool ? calls.find((c) => c.name === cfg.stopOnTool) : undefined;
    let stoppedBy: string | undefined;
    if (calls.length === 0) stoppedBy = "answer";
    else if (stopCall) stoppedBy = `tool:${stopCall.name}`;
    else if (loop.iteration + 1 > max) stoppedBy = "maxToolIterations";
    if (stoppedBy) {
      const newMessages = loop.messages.slice(loop.base);
      if (cfg.append) this.write(cfg.messages ?? this.messagesPath(), loop.messages);
      const result: JsonObject = {
        text, iterations: loop.iteration, stoppedBy, messages: newMessages,
        ...(stopCall ? { answer: stopCall.args } : {}),
        ...(run.tokenUsage ? { usage: run.tokenUsage } : {}),
      };
      delete run.loop;
      await this.complete(n, result, undefined);
      return;
    }
    loop.calls = calls;
    const allowed = new Set(cfg.tools ?? []);
    this.startFan(n, calls.length, calls.length, calls.map((c) => ({ tool: c.name, args: c.args })), true, loop.iteration, allowed);
    await this.fanSettledAtStart(n);
  }

  /** The tool calls of a toolExecutor, or of one toolLoop round, all came back. */
  async agentToolsDone(n: NodeDefinition, results: JsonValue[]): Promise<void> {
    const run = this.run(n.id);
    const calls = run.loop?.calls ?? [];
    const toolMessages = calls.map((c, i) => ({ role: "tool", toolCallId: c.id, name: c.name, content: results[i] ?? null }));
    delete run.fan;
    if (n.type === "synthdev.state") {
      const st = this.sdState(n);
      const agent = this.sdMaterial().workflow.agents.find((a) => a.agent_role === st.agent)!;
      const rt = this.sdRuntime();
      for (const m of toolMessages) addToContext(rt.contexts[agent.context]!, { ...m, agent: agent.agent_role });
      this.sdSave(rt);
      delete run.loop;
      this.sdAgentCall(n, run, st, true);
      return;
    }
    if (n.type === "agent.toolLoop") {
      const loop = run.loop!;
      loop.messages = [...loop.messages, ...toolMessages];
      loop.iteration += 1;
      delete loop.calls;
      this.loopLlmCall(n, run);
      return;
    }
    const cfg = toolExecutorConfigSchema.parse(n.config);
    delete run.loop;
    if (cfg.append && toolMessages.length) this.write(this.messagesPath(), [...this.conversation(this.messagesPath()), ...toolMessages]);
    this.write("$.toolResults", toolMessages);
    await this.complete(n, calls.map((c, i) => ({ id: c.id, name: c.name, result: results[i] ?? null })), undefined);
  }

  idempotencyKey(n: NodeDefinition): string {
    if (n.idempotencyKey === undefined) {
      // The same on every attempt of a visit; a loop's later passes are new work, so they differ.
      const visits = this.s.nodes[n.id]?.visits ?? 1;
      return visits > 1 ? `${this.s.executionId}.${n.id}.v${visits}` : `${this.s.executionId}.${n.id}`;
    }
    const v = looksLikePath(n.idempotencyKey) ? readPath(this.ctx(), n.idempotencyKey) : n.idempotencyKey;
    return typeof v === "string" ? v : JSON.stringify(v ?? null);
  }

  /**
   * Sends a tool call with its arguments as the tool must see them: blob references resolved
   * (an agent.toolLoop's conversation keeps its tools' large results by reference).
   */
  callTool(call: Omit<Effect & { kind: "callTool" }, "kind">): void {
    this.effects.push({ kind: "callTool", ...call, args: asArgs(this.resolve(call.args)) });
  }

  dispatchTool(n: NodeDefinition, tool: string, explicitArgs?: JsonObject): void {
    const args = explicitArgs ?? asArgs(resolveTemplate(n.input ?? {}, this.ctx()));
    const callId = toolCallId(this.s.executionId, n.id, this.run(n.id).attempt + 1);
    const run = this.begin(n, "running", args, [{ tool, callId }]);
    run.callId = callId;
    this.callTool({ nodeId: n.id, callId, tool, args, attempt: run.attempt, idempotencyKey: this.idempotencyKey(n), ...(n.timeoutMs ? { timeoutMs: n.timeoutMs } : {}) });
    if (n.timeoutMs) this.setTimer(`timeout:${n.id}:${run.attempt}`, { dueAt: addMs(this.now, n.timeoutMs + TIMEOUT_GRACE_MS), kind: "timeout", nodeId: n.id, callId });
  }

  // ---- fan-out (forEach, multi-call tool nodes) ------------------------------

  startFan(n: NodeDefinition, count: number, concurrency: number, calls?: { tool: string; args: JsonObject }[], continueOnError?: boolean, round?: number, allowed?: ReadonlySet<string>): void {
    const run = this.run(n.id);
    let done = 0;
    run.fan = {
      // An LLM may ask for a tool the workflow does not name: answer it with an error, never run it.
      items: Array.from({ length: count }, (_, i): FanItem => (allowed && calls && !allowed.has(calls[i]!.tool)
        ? (done++, { status: "done", attempts: 0, result: { error: { code: "BATON_AGENT_TOOL_NOT_ALLOWED", message: `tool "${calls[i]!.tool}" is not one this node may call` } } })
        : { status: "pending", attempts: 0 })),
      concurrency,
      ...(calls ? { calls } : {}), ...(continueOnError ? { continueOnError } : {}), ...(round !== undefined ? { round } : {}),
      done, running: 0, next: 0,
    };
    this.pump(n);
  }

  /** The fan of a node, its counts made from the items when its checkpoint had none (see FanState). */
  fan(n: NodeDefinition): FanState & Required<Pick<FanState, "done" | "running" | "next">> {
    const fan = this.run(n.id).fan!;
    if (fan.done === undefined || fan.running === undefined || fan.next === undefined) {
      let done = 0;
      let running = 0;
      let next = -1;
      fan.items.forEach((it, i) => {
        if (it.status === "done") done++;
        else if (it.status === "running") running++;
        else if (next < 0) next = i;
      });
      Object.assign(fan, { done, running, next: next < 0 ? fan.items.length : next });
    }
    return fan as FanState & Required<Pick<FanState, "done" | "running" | "next">>;
  }

  /** Starts pending items, lowest index first, while fewer than the fan's concurrency run. */
  pump(n: NodeDefinition): void {
    const fan = this.fan(n);
    const ctx = this.ctx();
    for (let i = fan.next; i < fan.items.length && fan.running < fan.concurrency; i++) {
      // No item below `next` is pending: it moves up past every item that is not.
      if (fan.items[i]!.status !== "pending") {
        if (i === fan.next) fan.next++;
        continue;
      }
      if (i === fan.next) fan.next++;
      const item = this.item(fan, i);
      item.status = "running";
      fan.running++;
      this.issueItem(n, fan, i, ctx);
    }
  }

  /** Starts attempt `attempts + 1` of a fan's item (its status and the counts are the caller's). */
  issueItem(n: NodeDefinition, fan: FanState, i: number, ctx: JsonObject): void {
    const run = this.run(n.id);
    const item = this.item(fan, i);
    item.attempts += 1;
    const suffix = fanSuffix(fan.round, i, item.attempts);
    const callId = `${toolCallId(this.s.executionId, n.id, run.attempt)}.${suffix}`;
    if (fan.calls) {
      const call = fan.calls[i]!;
      item.key = callId;
      // The same key on every attempt of the call, as a node's own key is (fanSuffix's first attempt).
      this.callTool({ nodeId: n.id, callId: item.key, tool: call.tool, args: call.args, attempt: run.attempt, idempotencyKey: `${this.idempotencyKey(n)}.${fanSuffix(fan.round, i, 1)}`, ...(n.timeoutMs ? { timeoutMs: n.timeoutMs } : {}) });
      this.setItemTimeout(n, fan, i, callId);
      return;
    }
    const cfg = forEachConfigSchema.parse(n.config);
    const list = readPath(ctx, cfg.items) as JsonValue[];
    const value = list[i] ?? null;
    const scope: JsonObject = { ...ctx, item: value, index: i };
    if (cfg.tool) {
      item.key = callId;
      const args = cfg.itemInput !== undefined ? asArgs(resolveTemplate(cfg.itemInput, scope)) : asArgs(value);
      this.callTool({ nodeId: n.id, callId: item.key, tool: cfg.tool, args, attempt: run.attempt, idempotencyKey: `${this.idempotencyKey(n)}.${i}`, ...(n.timeoutMs ? { timeoutMs: n.timeoutMs } : {}) });
      this.setItemTimeout(n, fan, i, callId);
    } else {
      item.key = `${run.attempt}.${suffix}`;
      const input = cfg.itemInput !== undefined ? asArgs(resolveTemplate(cfg.itemInput, scope)) : { item: value, index: i };
      this.effects.push({
        kind: "startChild", nodeId: n.id, childKey: item.key, input,
        ...(cfg.workflow ? { workflow: cfg.workflow } : { definitionRef: this.bodyRef(n.id) }),
      });
    }
  }

  /**
   * A tool call of a fan's item gets the backstop a node's own call gets (dispatchTool): if no
   * answer comes within timeoutMs (and the grace), the item fails with BATON_NODE_TIMEOUT, which
   * the node's retry policy may retry, as any failure of an item.
   */
  setItemTimeout(n: NodeDefinition, fan: FanState, index: number, callId: string): void {
    if (!n.timeoutMs) return;
    this.setTimer(this.itemTimeoutId(n, fan, index), { dueAt: addMs(this.now, n.timeoutMs + TIMEOUT_GRACE_MS), kind: "timeout", nodeId: n.id, callId, index });
  }

  /** The id of the timeout timer of an item's current attempt. */
  itemTimeoutId(n: NodeDefinition, fan: FanState, index: number): string {
    return `timeout:${n.id}:${this.run(n.id).attempt}:${fanSuffix(fan.round, index, fan.items[index]!.attempts)}`;
  }

  bodyRef(nodeId: string): string {
    return this.s.definitionRef ? `${this.s.definitionRef}/${nodeId}` : nodeId;
  }

  /** Item `index` of a fan, to change: the working copy shares items with the state it was made from (see workingCopy). */
  item(fan: NonNullable<NodeRun["fan"]>, index: number): FanItem {
    const item = { ...fan.items[index]! };
    fan.items[index] = item;
    return item;
  }

  /** The answer of a running item (see fanIndex). */
  async fanResult(n: NodeDefinition, index: number, ok: boolean, output: JsonValue, f?: Failure): Promise<void> {
    const run = this.run(n.id);
    const fan = this.fan(n);
    const item = this.item(fan, index);
    const cfg = n.type === "forEach" ? forEachConfigSchema.parse(n.config) : undefined;
    // The attempt is answered (or timed out): its timeout timer, if any, is no longer wanted.
    if (n.timeoutMs && this.s.timers) delete this.s.timers[this.itemTimeoutId(n, fan, index)];
    fan.running--;
    if (ok) {
      item.status = "done";
      item.result = output;
      fan.done++;
    } else if (f!.retryable && item.attempts < this.retryPolicy(n).maxAttempts) {
      // The item keeps its place among the running (its concurrency slot) while it waits out
      // the node's backoff; then the timer starts its next attempt (timer "retryItem").
      fan.running++;
      delete item.key;
      const delay = backoffDelay(this.retryPolicy(n), item.attempts, `${toolCallId(this.s.executionId, n.id, run.attempt)}.${fanSuffix(fan.round, index, item.attempts)}`);
      if (delay === 0) this.issueItem(n, fan, index, this.ctx());
      else this.setTimer(`retry:${n.id}:${run.attempt}:${index}:${item.attempts}`, { dueAt: addMs(this.now, delay), kind: "retryItem", nodeId: n.id, index, attempts: item.attempts });
      return;
    } else if (cfg?.continueOnError || fan.continueOnError) {
      item.status = "done";
      item.result = { error: { code: f!.code, message: f!.message } };
      fan.done++;
    } else {
      // The item fails the node: it is not done (a fork of the run's last checkpoint runs it again, see keepDoneItems).
      item.status = "pending";
      const others = fan.items.filter((i) => i.status === "running" && i.key).map((i) => i.key!);
      if (others.length) {
        if (run.fan!.calls || cfg?.tool) this.effects.push({ kind: "cancelTools", callIds: others, reason: `item ${index} of "${n.id}" failed` });
        else this.effects.push({ kind: "cancelChildren", nodeId: n.id, childKeys: others, reason: `item ${index} of "${n.id}" failed` });
      }
      delete item.key;
      this.failNode(n, { code: f!.code, message: `item ${index}: ${f!.message}`, retryable: false });
      return;
    }
    delete item.key;
    this.pump(n);
    if (fan.done === fan.items.length) {
      const results = fan.items.map((i) => i.result ?? null);
      if (n.type === "agent.toolLoop" || n.type === "agent.toolExecutor" || n.type === "synthdev.state") {
        await this.agentToolsDone(n, results);
        return;
      }
      const out = cfg ? await this.reduce(cfg, results, readPath(this.ctx(), cfg.items) as JsonValue[]) : results;
      await this.complete(n, out, undefined);
    }
  }

  async reduce(cfg: ForEachConfig, results: JsonValue[], items: JsonValue[]): Promise<JsonValue> {
    // Without reduce the output is the list as it is: large results stay references.
    if (cfg.reduce === undefined) return results;
    return evaluateExpression(cfg.reduce, { results: this.resolve(results), items }, this.now);
  }

  /** The index of the running item whose call id or child key is `key`, or -1. */
  fanIndex(run: NodeRun, key: string): number {
    const items = run.fan?.items;
    if (!items) return -1;
    // Keys end with the item's index (fanSuffix: `…{index}` or `…{index}-{attempts}`).
    const at = Number.parseInt(key.slice(key.lastIndexOf(".") + 1), 10);
    const it = items[at];
    if (it?.status === "running" && it.key === key) return at;
    return items.findIndex((i) => i.status === "running" && i.key === key);
  }
}

class NodeInputError extends Error {
  override name = "NodeInputError";
  readonly code: string;
  constructor(code: string, message: string) {
    super(message);
    this.code = code;
  }
}

function lastText(r: JsonValue): JsonValue {
  if (!isJsonObject(r) || !Array.isArray(r.choices)) return null;
  const c = r.choices[0];
  return isJsonObject(c) && isJsonObject(c.message) ? (c.message.content ?? null) : null;
}

function num(v: JsonValue | undefined): number {
  return typeof v === "number" && Number.isFinite(v) ? v : 0;
}

/** The tool calls of an LLM answer `{ toolCalls: [{ id, name, args }] }`. */
function toolCallsOf(output: JsonValue): ToolCall[] {
  const raw = isJsonObject(output) && Array.isArray(output.toolCalls) ? output.toolCalls : [];
  return toolCallsList(raw);
}

function toolCallsAt(ctx: JsonObject, path: string): ToolCall[] {
  const raw = readPath(ctx, path);
  return Array.isArray(raw) ? toolCallsList(raw) : [];
}

/**
 * How a sub-run that did not complete fails its parent's node. A failed child's own error (its
 * code, `BATON_CHILD_FAILED` when it has none). A cancelled child's is always
 * `BATON_CHILD_CANCELLED`, with the cancel's reason when the child told one (children before
 * 2026-11-28 told none).
 */
function childFailure(command: Extract<Command, { kind: "childResult" }>): Failure {
  if (command.status === "cancelled") {
    // A cancel given no reason says "cancelled", which adds nothing.
    const reason = command.error?.message;
    return { code: "BATON_CHILD_CANCELLED", message: reason && reason !== "cancelled" ? `child run cancelled: ${reason}` : "child run cancelled", retryable: false };
  }
  return { code: command.error?.code || "BATON_CHILD_FAILED", message: command.error?.message || `child run ${command.status}`, retryable: command.error?.retryable === true };
}

function toolCallsList(raw: JsonValue[]): ToolCall[] {
  return raw.filter(isJsonObject).filter((c) => typeof c.name === "string").map((c, i) => ({
    id: typeof c.id === "string" ? c.id : `call_${i}`,
    name: c.name as string,
    args: isJsonObject(c.args) ? c.args : isJsonObject(c.input) ? c.input : {},
  }));
}

function asArgs(v: JsonValue | undefined): JsonObject {
  return isJsonObject(v) ? v : { value: v ?? null };
}

function newState(input: StepInput, cmd: Command & { kind: "start" }): ExecutionState {
  if (!input.identity) throw new Error("a start command needs the execution identity");
  return {
    v: 1,
    ...input.identity,
    status: "running",
    context: { input: cmd.input },
    nodes: {},
    edges: {},
    ready: [input.definition.start],
    pauseSeq: 0,
    startedAt: input.now,
    ...(cmd.parent ? { parent: cmd.parent } : {}),
    ...(cmd.root ? { rootExecutionId: cmd.root } : {}),
    ...(cmd.definitionRef ? { definitionRef: cmd.definitionRef } : {}),
  };
}

/** What becomes of an outgoing edge of a completed node (see `Stepper.decideEdges`). */
type EdgeDecision = ["take" | "kill" | "defer", EdgeDefinition];

/**
 * The state a fork starts from: the source checkpoint with this run's identity, and every
 * node that was in flight made ready again. The step applies the context patch (`Stepper.write`).
 */
export function forkState(source: ExecutionState, identity: NonNullable<StepInput["identity"]>, fork: { executionId: number; version: number }, now: string): ExecutionState {
  const s = clonePlain(source);
  delete s.agentId; // the fork's own row says who started it
  Object.assign(s, identity);
  s.status = "running";
  s.startedAt = now;
  s.forkedFrom = { executionId: fork.executionId, version: fork.version };
  delete s.finishedAt;
  delete s.output;
  delete s.error;
  delete s.pause;
  delete s.subRuns;
  delete s.timers;
  delete s.deadlineAt;
  // Its own node starts count against limits.maxSteps, as its own deadline bounds it.
  s.steps = 0;
  // A fork is a run of its own, not part of its source's tree.
  delete s.parent;
  delete s.rootExecutionId;
  // From a run that failed or was cancelled, every failed node runs again: the one that failed
  // it and the ones stopped with it (a failed node of a run that went on is retrying, so running).
  const ended = source.status === "failed" || source.status === "cancelled";
  const again: string[] = [];
  for (const [id, run] of Object.entries(s.nodes)) {
    if (run.status === "running" || run.status === "paused" || (run.status === "failed" && ended)) {
      // A forEach's items done at that version are kept (its start in the fork takes them up,
      // see startWork); the ones in flight or waiting out a backoff start over. A forEach that
      // failed, or stopped as its run ended, kept its done items (keepDoneItems). Other fans
      // (a node's several calls, an agent's round of tools) are one step of their node and start over whole.
      const fan = (run.status === "running" || run.status === "failed") && run.fan && !run.fan.calls ? run.fan : undefined;
      run.status = "waiting";
      delete run.callId;
      delete run.timerId;
      delete run.childKey;
      delete run.fan;
      delete run.error;
      // Its start in the fork is the same visit again, not one more: `maxVisits` counts it once,
      // and the visit keeps its idempotency key.
      if (run.visits) run.visits -= 1;
      if (fan) {
        run.fan = {
          ...fan,
          items: fan.items.map((it): FanItem => (it.status === "done" ? it : { status: "pending", attempts: 0 })),
        };
        delete run.fan.done;
        delete run.fan.running;
        delete run.fan.next;
      }
      again.push(id);
    }
  }
  s.ready = [...again, ...s.ready.filter((r) => !again.includes(r))];
  return s;
}

/**
 * Applies one command to an execution. A command whose step must read through a reference the
 * caller found not stored (`missingBlobs`) fails the execution instead (`BATON_ENGINE_BLOBS_MISSING`).
 */
export async function step(input: StepInput): Promise<StepResult> {
  try {
    return await stepOnce(input);
  } catch (err) {
    if (!(err instanceof BlobsMissing)) throw err;
    const { definition, command, now } = input;
    if (input.state !== null && isFinished(input.state)) return { state: input.state, effects: [], more: false, ignored: `execution is ${input.state.status}` };
    let base = input.state;
    if (base === null) {
      if (command.kind !== "start") throw err;
      base = command.fork ? forkState(command.fork.state, input.identity!, command.fork, now) : newState(input, command);
    }
    const st = new Stepper(definition, base, now, input.blobs ?? new Map<string, JsonValue>(), input.missingBlobs);
    if (input.state === null) st.emit({ kind: "execution.started" });
    st.failWithoutReading(BLOBS_MISSING, err.message);
    return { state: st.s, effects: st.effects, more: false };
  }
}

async function stepOnce(input: StepInput): Promise<StepResult> {
  const { definition, now } = input;
  let { command } = input;
  const blobs = input.blobs ?? new Map<string, JsonValue>();
  const gone = input.missingBlobs;
  const unchanged = (state: ExecutionState, ignored: string): StepResult => ({ state, effects: [], more: false, ignored });

  if (input.state === null) {
    if (command.kind !== "start") throw new Error(`execution has no state; "${command.kind}" needs a prior start`);
    const base = command.fork ? forkState(command.fork.state, input.identity!, command.fork, now) : newState(input, command);
    const st = new Stepper(definition, base, now, blobs, gone);
    for (const [path, value] of Object.entries(command.fork?.contextPatch ?? {})) st.write(path, value);
    if (command.fork) st.resettle();
    st.emit({ kind: "execution.started" });
    // Both bound the run: the start's deadline (the caller's, or a parent's, which a child
    // inherits) and the definition's own limit, whichever comes first.
    const own = definition.limits?.deadlineMs ? addMs(now, definition.limits.deadlineMs) : undefined;
    const deadlineAt = command.deadline === undefined || (own !== undefined && Date.parse(own) < Date.parse(command.deadline)) ? own : command.deadline;
    if (deadlineAt) {
      st.s.deadlineAt = deadlineAt;
      // A run that waited queued (a tenant's cap) past its deadline ends as it starts: no node runs.
      if (Date.parse(deadlineAt) <= Date.parse(now)) {
        st.failExecution("BATON_DEADLINE_EXCEEDED", `the execution's deadline (${deadlineAt}) passed before it started`);
        return { state: st.s, effects: st.effects, more: false };
      }
      st.setTimer(DEADLINE_TIMER_ID, { dueAt: deadlineAt, kind: "deadline" });
    }
    await st.advance();
    st.maybeFinish();
    return { state: st.s, effects: st.effects, more: st.more() };
  }

  const state = input.state;
  if (command.kind === "start") return unchanged(state, "already started");
  if (isFinished(state)) return unchanged(state, `execution is ${state.status}`);
  const st = new Stepper(definition, state, now, blobs, gone);

  // A deadline that has passed ends the run before anything else it is told, whenever its own
  // timer comes: that command can come late (the executor holding it died or stalled, and it
  // comes back after the ack wait), and meanwhile a result, a retry's timer or a resume would
  // run the run on past its deadline. The step is the deadline's, as if its timer had come
  // first; the command that came is not applied, the run having ended (its timer, when it
  // comes, finds none).
  const deadline = state.timers?.[DEADLINE_TIMER_ID];
  if (deadline && Date.parse(deadline.dueAt) <= Date.parse(now)) command = { kind: "timer", timerId: DEADLINE_TIMER_ID };

  switch (command.kind) {
    case "continue":
      break;
    case "toolResult": {
      const run = st.s.nodes[command.nodeId];
      if (!run || run.status !== "running") return unchanged(state, `no outstanding call ${command.callId}`);
      const n = st.node(command.nodeId);
      if (run.callId === command.callId) {
        if (command.ok) await st.finishCall(n, command.output);
        else if (n.type === "synthdev.state") await st.sdFailed(n, run, command.error);
        else st.failNode(n, command.error);
      } else {
        const index = st.fanIndex(run, command.callId);
        if (index < 0) return unchanged(state, `no outstanding call ${command.callId}`);
        if (command.ok) await st.fanResult(n, index, true, command.output);
        else await st.fanResult(n, index, false, null, command.error);
      }
      break;
    }
    case "childResult": {
      const run = st.s.nodes[command.nodeId];
      if (!run || run.status !== "running") return unchanged(state, `no outstanding child ${command.childKey}`);
      const n = st.node(command.nodeId);
      const failure = childFailure(command);
      if (run.childKey === command.childKey) {
        st.forgetSubRun(n.id, command.childKey);
        if (command.status === "completed") await st.finishCall(n, command.output ?? null);
        else st.failNode(n, failure);
      } else {
        const index = st.fanIndex(run, command.childKey);
        if (index < 0) return unchanged(state, `no outstanding child ${command.childKey}`);
        st.forgetSubRun(n.id, command.childKey);
        await st.fanResult(n, index, command.status === "completed", command.output ?? null, failure);
      }
      break;
    }
    case "childPaused": {
      if (!st.waitsForChild(command.nodeId, command.childKey)) return unchanged(state, `no outstanding child ${command.childKey}`);
      const known = st.s.subRuns?.[String(command.childExecutionId)];
      if (known && known.seq >= command.seq) return unchanged(state, `sub-run ${command.childExecutionId}: news of step ${command.seq} is not newer than of step ${known.seq}`);
      st.subRunNews(command);
      break;
    }
    case "timer": {
      const t = st.s.timers?.[command.timerId];
      if (!t) return unchanged(state, `no timer ${command.timerId}`);
      delete st.s.timers![command.timerId];
      if (t.kind === "deadline") {
        st.failExecution("BATON_DEADLINE_EXCEEDED", `the execution's deadline (${t.dueAt}) passed`);
        break;
      }
      const n = st.node(t.nodeId!);
      const run = st.run(n.id);
      if (t.kind === "retry" && run.timerId === command.timerId && run.status === "running") {
        delete run.timerId;
        if (st.stepLimitReached(n)) break;
        try {
          await st.startWork(n);
        } catch (err) {
          if (!(err instanceof ExpressionFailed) && !(err instanceof NodeInputError)) throw err;
          st.failNode(n, { code: err instanceof ExpressionFailed ? "BATON_EXPRESSION_FAILED" : err.code, message: err.message, retryable: false });
        }
      } else if (t.kind === "retryItem" && run.status === "running" && run.fan?.items[t.index!]?.status === "running" && !run.fan.items[t.index!]!.key && run.fan.items[t.index!]!.attempts === t.attempts) {
        st.issueItem(n, st.fan(n), t.index!, st.ctx());
      } else if (t.kind === "delay" && run.timerId === command.timerId && run.status === "running") {
        await st.complete(n, { firedAt: now, dueAt: t.dueAt }, undefined);
      } else if (t.kind === "timeout" && t.index !== undefined) {
        // A fan item's call (setItemTimeout), if that attempt is still out.
        const item = run.fan?.items[t.index];
        if (run.status !== "running" || item?.status !== "running" || item.key !== t.callId) return unchanged(state, `timer ${command.timerId} is stale`);
        st.effects.push({ kind: "cancelTools", callIds: [t.callId!], reason: "node timeout" });
        await st.fanResult(n, t.index, false, null, { code: "BATON_NODE_TIMEOUT", message: `no result within timeoutMs=${n.timeoutMs}`, retryable: true });
      } else if (t.kind === "timeout" && run.callId === t.callId && run.status === "running") {
        st.effects.push({ kind: "cancelTools", callIds: [t.callId!], reason: "node timeout" });
        st.failNode(n, { code: "BATON_NODE_TIMEOUT", message: `no result within timeoutMs=${n.timeoutMs}`, retryable: true });
      } else {
        return unchanged(state, `timer ${command.timerId} is stale`);
      }
      break;
    }
    case "resume": {
      const run = st.s.nodes[command.nodeId];
      if (!run || run.status !== "paused") return unchanged(state, `execution is not paused at "${command.nodeId}"`);
      if (command.attempt !== undefined && command.attempt !== run.attempt) return unchanged(state, `the decision is for attempt ${command.attempt} of "${command.nodeId}", which is paused at attempt ${run.attempt}`);
      const n = st.node(command.nodeId);
      const cfg = reviewConfigSchema.parse(n.config);
      const subject = resolveTemplate(cfg.subject ?? null, st.ctx()) ?? null;
      st.pauseAtNext(n.id);
      st.emit({
        kind: "execution.resumed", nodeId: n.id, decision: command.action,
        ...(command.reviewer ? { reviewer: command.reviewer } : {}), ...(command.comment ? { comment: command.comment } : {}),
        ...(command.action === "edit" ? { data: command.data ?? {} } : {}),
      });
      const output: JsonObject = {
        decision: command.action,
        data: command.action === "edit" ? (command.data ?? {}) : subject,
        ...(command.comment ? { comment: command.comment } : {}),
        ...(command.reviewer ? { reviewer: command.reviewer } : {}),
      };
      if (command.action === "reject") {
        const hasRejectPath = definition.edges.some((e) => e.from === n.id && e.when === "rejected");
        if (hasRejectPath) {
          await st.complete(n, output, "rejected");
        } else {
          st.write(st.outputPath(n), output);
          st.failNode(n, { code: "BATON_REVIEW_REJECTED", message: `rejected by reviewer${command.comment ? `: ${command.comment}` : ""}`, retryable: false }, output);
        }
      } else {
        await st.complete(n, output, "approved");
      }
      break;
    }
    case "recorded": {
      // Replay only: a node whose outcome the journal holds as a whole (fan-out nodes).
      const run = st.s.nodes[command.nodeId];
      if (!run || run.status !== "running" || run.attempt !== command.attempt) return unchanged(state, `node ${command.nodeId} is not running attempt ${command.attempt}`);
      const n = st.node(command.nodeId);
      delete run.fan;
      delete run.sd;
      delete run.loop;
      delete run.callId;
      if (command.ok && n.type === "synthdev.state" && isJsonObject(command.output) && command.output.runtime !== undefined) st.write("$.synthdev", command.output.runtime);
      if (command.ok) await st.complete(n, command.output, undefined);
      else st.failNode(n, command.error);
      break;
    }
    case "abort":
      st.failWithoutReading(command.error.code, command.error.message);
      return { state: st.s, effects: st.effects, more: false };
    case "cancel": {
      st.cancelOutstanding(command.reason || "cancelled");
      st.s.status = "cancelled";
      st.s.ready = [];
      delete st.s.pause;
      delete st.s.subRuns;
      st.s.finishedAt = now;
      // Kept on the run (its row's `error`), so that the reason can be read after the event.
      st.s.error = { code: "BATON_CANCELLED", message: command.reason || "cancelled" };
      st.emit({ kind: "execution.cancelled", reason: command.reason });
      return { state: st.s, effects: st.effects, more: false };
    }
  }
  st.settleSubRuns();
  await st.advance();
  st.maybeFinish();
  return { state: st.s, effects: st.effects, more: st.more() };
}

/** Node types whose work stays inside the executor. */
export function isInline(type: string): boolean {
  return NODE_TYPES[type]?.inline ?? false;
}
