/**
 * Loop bodies across passes, step by step: each pass of a whileLoop sees that pass's state.
 * Rules checked, for bodies holding a join:
 * - a join waits for this pass's branches: a branch that arrived in an earlier pass counts
 *   nothing now; a join left out waits for all (only a node entered by an edge that closes a
 *   loop joins as `any` by default).
 */
import { describe, expect, it } from "@jest/globals";
import { step, validateWorkflow } from "./index.ts";
import type { Command, Effect, EngineEvent, ExecutionState, JournalEntry, JsonObject, JsonValue, WorkflowDefinition } from "./index.ts";

function def(d: unknown): WorkflowDefinition {
  const v = validateWorkflow(d);
  if (!v.ok) throw new Error(JSON.stringify(v.errors));
  return v.workflow;
}

const identity = { executionId: 7, tenantId: "t_1", workflowId: 1, workflowVersion: 1 };
const START = Date.UTC(2026, 0, 1);

/** Freezes deeply: a step must not change the state it is given. */
function deepFreeze<T>(v: T): T {
  if (typeof v === "object" && v !== null && !Object.isFrozen(v)) {
    Object.freeze(v);
    for (const x of Object.values(v)) deepFreeze(x);
  }
  return v;
}

type Answer = { ok: true; output: JsonValue } | { ok: false; retryable: boolean; message: string };
/** Answers a call at once, or leaves it out ("hold") for the test to answer. */
type ToolFn = (args: JsonObject, call: Effect & { kind: "callTool" }) => Answer | "hold";

/**
 * An execution and its outside world: tools answer at once unless they hold a call, timers
 * fire when nothing else is left (on a virtual clock), reviews and held calls wait for the test.
 */
class Sim {
  state: ExecutionState | null = null;
  readonly effects: Effect[] = [];
  readonly held: (Effect & { kind: "callTool" })[] = [];
  private readonly timers: { id: string; due: number }[] = [];
  private clock = START;
  /** Whether timers fire by themselves once nothing else is left; else {@link fire} fires them. */
  autoTimers = true;

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
    for (let guard = 0; guard < 10_000; guard++) {
      if (queue.length === 0) {
        if (!this.autoTimers || (this.state && this.state.status !== "running" && this.state.status !== "paused")) break;
        const t = this.nextTimer();
        if (!t) break;
        queue.push(t);
      }
      this.clock += 1;
      const r = await step({ definition: this.d, state: this.state && deepFreeze(this.state), command: queue.shift()!, now: new Date(this.clock).toISOString(), identity: this.id });
      this.state = r.state;
      this.effects.push(...r.effects);
      if (r.more) queue.push({ kind: "continue" });
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

function result(e: Effect & { kind: "callTool" }, a: Answer): Command {
  return a.ok
    ? { kind: "toolResult", nodeId: e.nodeId, callId: e.callId, ok: true, output: a.output, durationMs: 1 }
    : { kind: "toolResult", nodeId: e.nodeId, callId: e.callId, ok: false, error: { code: "E_TOOL", message: a.message, retryable: a.retryable }, durationMs: 1 };
}

const ok = (output: JsonValue): Answer => ({ ok: true, output });
const hold: ToolFn = () => "hold";

describe("loop passes: a join in the body", () => {
  /** Three parallel branches joined by `j`, then `k`; each pass appends what `j` saw to `$.vars.seen`. */
  const body = (join: JsonValue | undefined, passes = 3) => def({
    start: "init",
    nodes: [
      { id: "init", type: "setVariable", config: { values: { "$.vars.i": 0, "$.vars.seen": [] } } },
      { id: "loop", type: "whileLoop", config: { condition: `vars.i < ${passes}`, maxIterations: 10 } },
      { id: "a", type: "tool", config: { tool: "t" }, input: { who: "a", i: "$.vars.i" } },
      { id: "b", type: "tool", config: { tool: "t" }, input: { who: "b", i: "$.vars.i" } },
      { id: "c", type: "tool", config: { tool: "t" }, input: { who: "c", i: "$.vars.i" } },
      {
        id: "j", type: "transform", ...(join !== undefined ? { join } : {}),
        config: { expression: "{ 'i': vars.i + 1, 'seen': $append(vars.seen, [[a.i, b.i, c.i]]) }" }, output: "$.vars",
      },
      { id: "k", type: "tool", config: { tool: "k" } },
      { id: "done", type: "transform", config: { expression: "vars" } },
    ],
    edges: [
      { from: "init", to: "loop" }, { from: "loop", to: "a", when: "body" }, { from: "loop", to: "b", when: "body" }, { from: "loop", to: "c", when: "body" },
      { from: "a", to: "j" }, { from: "b", to: "j" }, { from: "c", to: "j" }, { from: "j", to: "k" }, { from: "k", to: "loop" },
      { from: "loop", to: "done", when: "exit" },
    ],
  });
  const tools = { t: hold, k: hold };
  const at = (sim: Sim) => ({ i: (sim.s.context.vars as JsonObject).i ?? null });

  it("a join left out waits for every branch of this pass, in a loop body as outside one", async () => {
    for (const join of [undefined, "all"]) {
      const sim = await new Sim(body(join), tools).start();
      for (const order of [["a", "b", "c"], ["c", "b", "a"], ["b", "a", "c"]]) {
        // After the first two branches of the pass, j still waits: the third's edge from the pass before counts nothing.
        await sim.answer(order[0]!, ok(at(sim)));
        await sim.answer(order[1]!, ok(at(sim)));
        expect([String(join), sim.s.nodes.j!.status, sim.s.nodes[order[2]!]!.status]).toEqual([String(join), "waiting", "running"]);
        await sim.answer(order[2]!, ok(at(sim)));
        await sim.answer("k", ok("k"));
      }
      expect([sim.s.status, sim.s.output]).toEqual(["completed", { i: 3, seen: [[0, 0, 0], [1, 1, 1], [2, 2, 2]] }]);
      // One run of j per pass, none cancelled; every branch's call answered, none cancelled.
      expect(sim.rows("j")).toEqual(["1:running", "1:completed", "2:running", "2:completed", "3:running", "3:completed"]);
      expect(sim.effects.filter((e) => e.kind === "cancelTools")).toEqual([]);
      expect(sim.s.nodes.loop).toMatchObject({ status: "completed", iterations: 3, attempt: 4 });
    }
  });
});
