/** Helpers of the engine's tests (not part of the package's API). */
import { validateWorkflow } from "./validate.ts";
import { step } from "./step.ts";
import type { WorkflowDefinition } from "./model.ts";
import type { JsonObject, JsonValue } from "./json.ts";
import type { Command, Effect, EngineEvent, ExecutionState, JournalEntry } from "./state.ts";

/** A definition that validation accepts, as the engine takes it; throws with the problems otherwise. */
export function def(d: unknown): WorkflowDefinition {
  const v = validateWorkflow(d);
  if (!v.ok) throw new Error(JSON.stringify(v.errors));
  return v.workflow;
}

/**
 * Freezes a value deeply. The tests freeze every state before stepping from it: a step must
 * not change the state it is given (it shares the context and a fan's items with its result,
 * see workingCopy in step.ts), and in a module (strict mode) a change of a frozen object throws.
 */
export function deepFreeze<T>(v: T): T {
  if (typeof v === "object" && v !== null && !Object.isFrozen(v)) {
    Object.freeze(v);
    for (const x of Object.values(v)) deepFreeze(x);
  }
  return v;
}

export const identity = { executionId: 7, tenantId: "t_1", workflowId: 1, workflowVersion: 1 };
export const START = Date.UTC(2026, 0, 1);

export type Answer = { ok: true; output: JsonValue } | { ok: false; retryable: boolean; message: string };
/** Answers a call at once, or leaves it out ("hold") for the test to answer. */
export type ToolFn = (args: JsonObject, call: Effect & { kind: "callTool" }) => Answer | "hold";

/**
 * An execution and its outside world: tools answer at once unless they hold a call, timers
 * fire when nothing else is left (on a virtual clock), reviews and held calls wait for the test.
 */
export class Sim {
  state: ExecutionState | null = null;
  readonly effects: Effect[] = [];
  /** Each step's effects, in the order the steps were taken (step n is `perStep[n - 1]`). */
  readonly perStep: Effect[][] = [];
  readonly held: (Effect & { kind: "callTool" })[] = [];
  private readonly timers: { id: string; due: number }[] = [];
  private clock = START;
  /** Whether timers fire by themselves once nothing else is left; else {@link fire} fires them. */
  autoTimers = true;
  /** Steps one {@link run} takes at most; {@link capped} says whether it stopped there with commands left. */
  cap = 10_000;
  capped = false;
  /** Steps taken in all. */
  steps = 0;
  /**
   * Whether the inline steps a step leads to run before the commands queued behind it, as the
   * executor takes them (up to 256 in a row); by default they queue behind those commands.
   */
  eagerInline = false;

  readonly d: WorkflowDefinition;
  readonly tools: Record<string, ToolFn>;
  readonly id: typeof identity;

  constructor(d: WorkflowDefinition, tools: Record<string, ToolFn> = {}, id = identity) {
    this.d = d;
    this.tools = tools;
    this.id = id;
  }

  get s(): ExecutionState {
    return this.state!;
  }

  get journal(): JournalEntry[] {
    return this.effects.flatMap((e) => (e.kind === "journal" ? [e.entry] : []));
  }

  get events(): EngineEvent[] {
    return this.effects.flatMap((e) => (e.kind === "emit" ? [e.event] : []));
  }

  /** Journal rows of a node, as `attempt:status`. */
  rows(nodeId: string): string[] {
    return this.journal.filter((j) => j.nodeId === nodeId).map((j) => `${j.attempt}:${j.status}${j.errorCode ? `(${j.errorCode})` : ""}`);
  }

  /** `node.*` events of a node, as `kind:attempt`. */
  nodeEvents(nodeId: string): string[] {
    return this.events.flatMap((e) => ("nodeId" in e && e.nodeId === nodeId && e.kind.startsWith("node.") ? [`${e.kind.slice(5)}${"attempt" in e ? `:${e.attempt}` : ""}`] : []));
  }

  calls(nodeId?: string): (Effect & { kind: "callTool" })[] {
    return this.effects.flatMap((e) => (e.kind === "callTool" && (nodeId === undefined || e.nodeId === nodeId) ? [e] : []));
  }

  statuses(): Record<string, string> {
    return Object.fromEntries(Object.entries(this.s.nodes).map(([id, r]) => [id, `${r.status}#${r.attempt}`]));
  }

  /** Applies a command, then everything it leads to that needs no person and no held call. */
  async run(first: Command): Promise<this> {
    const queue: Command[] = [first];
    for (let guard = 0; ; guard++) {
      if (queue.length === 0) {
        if (!this.autoTimers || (this.state && this.state.status !== "running" && this.state.status !== "paused")) break;
        const t = this.nextTimer();
        if (!t) break;
        queue.push(t);
      }
      if (guard >= this.cap) {
        this.capped = true;
        break;
      }
      this.clock += 1;
      this.steps += 1;
      const r = await step({ definition: this.d, state: this.state && deepFreeze(this.state), command: queue.shift()!, now: new Date(this.clock).toISOString(), identity: this.id });
      this.state = r.state;
      this.effects.push(...r.effects);
      this.perStep.push(r.effects);
      if (r.more) {
        if (this.eagerInline) queue.unshift({ kind: "continue" });
        else queue.push({ kind: "continue" });
      }
      for (const e of r.effects) {
        if (e.kind === "setTimer") this.timers.push({ id: e.timerId, due: Date.parse(e.dueAt) });
        if (e.kind === "callTool") {
          const answer = this.tools[e.tool]!(e.args, e);
          if (answer === "hold") this.held.push(e);
          else queue.push(result(e, answer));
        }
      }
    }
    return this;
  }

  /** The command of the timer due first (a timer the state no longer holds is stale: step ignores it). */
  private nextTimer(): Command | undefined {
    this.timers.sort((a, b) => a.due - b.due);
    const t = this.timers.shift();
    if (!t) return undefined;
    this.clock = Math.max(this.clock, t.due);
    return { kind: "timer", timerId: t.id };
  }

  /** Fires the timer due first. */
  fire(): Promise<this> {
    const t = this.nextTimer();
    if (!t) throw new Error("no timer set");
    return this.run(t);
  }

  /** Answers the held call of a node (its latest). */
  async answer(nodeId: string, answer: Answer): Promise<this> {
    const at = this.held.map((c) => c.nodeId).lastIndexOf(nodeId);
    if (at < 0) throw new Error(`no held call of ${nodeId}`);
    const [call] = this.held.splice(at, 1);
    return this.run(result(call!, answer));
  }

  start(input: JsonObject = {}): Promise<this> {
    return this.run({ kind: "start", input });
  }
}

/**
 * The journal as an executor would have written it through step m of a run's steps (`perStep`
 * of a {@link Sim}, step n at n - 1): each row's last write, numbered with its step, and the
 * step that began its attempt (`beganStep`: the step of its write running or paused, as the
 * store keeps it; left out with `began: false`, as rows written before the store kept it), in
 * the order the store reads it back for a replay (`listForReplay`: by step, then rows still
 * running first, then by completion, then by first write).
 */
export function journalThrough(perStep: readonly Effect[][], m: number, { began = true }: { began?: boolean } = {}): (JournalEntry & { stepVersion: number; beganStep?: number })[] {
  const rows = new Map<string, { row: JournalEntry & { stepVersion: number; beganStep?: number }; id: number }>();
  perStep.slice(0, m).forEach((effects, i) => {
    for (const e of effects) {
      if (e.kind !== "journal") continue;
      const key = `${e.entry.nodeId}#${e.entry.attempt}`;
      const before = rows.get(key);
      const begins = began && (e.entry.status === "running" || e.entry.status === "paused");
      const beganStep = begins ? i + 1 : before?.row.beganStep;
      rows.set(key, { row: { ...e.entry, stepVersion: i + 1, ...(beganStep !== undefined ? { beganStep } : {}) }, id: before?.id ?? rows.size });
    }
  });
  const done = (r: JournalEntry): number => (r.completedAt ? Date.parse(r.completedAt) : -Infinity);
  return [...rows.values()].sort((a, b) => a.row.stepVersion - b.row.stepVersion || done(a.row) - done(b.row) || a.id - b.id).map((r) => r.row);
}

/**
 * The events a rebuild tells again under the id of the live step that first took them (Effect
 * `origin`) whose live step holds another effect there: each should be the event the live step
 * had at that place (the same kind, node and attempt; a duration may differ), so that a late
 * copy of it shares its message id. Resolves with the problems and how many events were placed.
 */
export function originProblems(perStep: readonly Effect[][], told: readonly Effect[]): { problems: string[]; placed: number } {
  const name = (e: EngineEvent): string => `${e.kind}:${"nodeId" in e ? e.nodeId : ""}#${"attempt" in e ? e.attempt : ""}`;
  const problems: string[] = [];
  let placed = 0;
  for (const e of told) {
    if (e.kind !== "emit" || !e.origin) continue;
    placed++;
    const live = perStep[e.origin.step - 1]?.[e.origin.index - 1];
    const was = live === undefined ? "nothing" : live.kind === "emit" ? name(live.event) : live.kind;
    if (was !== name(e.event)) problems.push(`${name(e.event)} told as step ${e.origin.step}'s effect ${e.origin.index}, which is ${was}`);
  }
  return { problems, placed };
}

/** The step of each event kind's last event through step k of a run's steps. */
export function lastEventsThrough(perStep: readonly Effect[][], k: number): Partial<Record<EngineEvent["kind"], number>> {
  const last: Partial<Record<EngineEvent["kind"], number>> = {};
  perStep.slice(0, k).forEach((effects, i) => {
    for (const e of effects) if (e.kind === "emit") last[e.event.kind] = i + 1;
  });
  return last;
}

/** The command that answers a call. */
export function result(e: Effect & { kind: "callTool" }, a: Answer): Command {
  return a.ok
    ? { kind: "toolResult", nodeId: e.nodeId, callId: e.callId, ok: true, output: a.output, durationMs: 1 }
    : { kind: "toolResult", nodeId: e.nodeId, callId: e.callId, ok: false, error: { code: "E_TOOL", message: a.message, retryable: a.retryable }, durationMs: 1 };
}

export const ok = (output: JsonValue): Answer => ({ ok: true, output });
export const echo: ToolFn = (a) => ok(a);
export const hold: ToolFn = () => "hold";

/** mulberry32: a small, fast seeded generator of numbers in [0, 1), so a run's choices replay from its seed (the fuzz test, bench/chaos). */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
