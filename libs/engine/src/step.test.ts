/**
 * The step function, driven through every control-flow shape with a simulated
 * outside world: tools answer from functions, timers fire in due order on a
 * virtual clock, child runs execute recursively, people answer reviews.
 */
import { describe, expect, it } from "@jest/globals";
import { readFileSync } from "node:fs";
import { backoffDelay, DEADLINE_TIMER_ID, forkState, isBlobRef, outstandingCalls, outstandingCount, replayJournal, resolveRefs, settledFanCall, step, usageOf } from "./index.ts";
import type { Command, Effect, ExecutionState, JournalEntry, JsonObject, JsonValue, NodeRun, WorkflowDefinition } from "./index.ts";
import { deepFreeze, def } from "./test-support.ts";

const quickstart = JSON.parse(readFileSync(new URL("../../../examples/quickstart/workflow.json", import.meta.url), "utf8")) as { definition: unknown };
const qsInput = (JSON.parse(readFileSync(new URL("../../../examples/quickstart/input.json", import.meta.url), "utf8")) as { input: JsonObject }).input;


const identity = { executionId: 7, tenantId: "t_1", workflowId: 1, workflowVersion: 1 };
type ToolFn = (args: JsonObject, callId: string) => { ok: true; output: JsonValue } | { ok: false; retryable: boolean; message: string; code?: string } | "hang";
type Tools = Record<string, ToolFn>;

interface World {
  tools?: Tools;
  /** Stored workflows for subworkflow nodes, by slug. */
  workflows?: Record<string, WorkflowDefinition>;
  /** Stop before delivering this many tool calls (simulates in-flight work). */
  holdCalls?: boolean;
  /** Blobs every step may read through references (what the executor would load). */
  blobs?: ReadonlyMap<string, JsonValue>;
  /** Step from states without their fans' counts, as executors before them wrote (FanState). */
  stripFanCounts?: boolean;
}

interface Run {
  state: ExecutionState;
  effects: Effect[];
  events: string[];
  journal: JournalEntry[];
  now: number;
}

let t0 = Date.UTC(2026, 0, 1);


/** The state with its fans' counts left out, as executors before them wrote it. */
function withoutFanCounts(s: ExecutionState): ExecutionState {
  const nodes = Object.fromEntries(Object.entries(s.nodes).map(([id, run]): [string, NodeRun] => {
    if (!run.fan) return [id, run];
    const { done: _done, running: _running, next: _next, ...fan } = run.fan;
    return [id, { ...run, fan }];
  }));
  return { ...s, nodes };
}

/** The counts a fan keeps (FanState: done, running, next) agree with its items after every step. */
function expectFanCounts(s: ExecutionState): void {
  for (const [id, run] of Object.entries(s.nodes)) {
    const fan = run.fan;
    if (!fan) continue;
    const done = fan.items.filter((i) => i.status === "done").length;
    const running = fan.items.filter((i) => i.status === "running").length;
    const firstPending = fan.items.findIndex((i) => i.status === "pending");
    expect({ id, done: fan.done, running: fan.running, pendingBelowNext: firstPending >= 0 && firstPending < fan.next! }).toEqual({ id, done, running, pendingBelowNext: false });
  }
}

/** Drives an execution until it waits on nothing but people (or held calls). */
async function drive(d: WorkflowDefinition, world: World, state: ExecutionState | null, first: Command, id = identity): Promise<Run> {
  const effects: Effect[] = [];
  const queue: Command[] = [first];
  const timers: { id: string; due: number }[] = [];
  let s = state;
  let now = t0;
  for (;;) {
    if (queue.length === 0) {
      if (timers.length === 0) break;
      timers.sort((a, b) => a.due - b.due);
      const t = timers.shift()!;
      now = Math.max(now, t.due);
      queue.push({ kind: "timer", timerId: t.id });
    }
    now += 1;
    if (s && world.stripFanCounts) s = withoutFanCounts(s);
    const r = await step({ definition: d, state: s && deepFreeze(s), command: queue.shift()!, now: new Date(now).toISOString(), identity: id, ...(world.blobs ? { blobs: world.blobs } : {}) });
    s = r.state;
    expectFanCounts(s);
    effects.push(...r.effects);
    if (r.more) queue.push({ kind: "continue" });
    for (const e of r.effects) {
      if (e.kind === "setTimer") timers.push({ id: e.timerId, due: Date.parse(e.dueAt) });
      if (e.kind === "callTool" && !world.holdCalls) {
        const res = world.tools![e.tool]!(e.args, e.callId);
        if (res === "hang") continue;
        queue.push(res.ok
          ? { kind: "toolResult", nodeId: e.nodeId, callId: e.callId, ok: true, output: res.output, durationMs: 1 }
          : { kind: "toolResult", nodeId: e.nodeId, callId: e.callId, ok: false, error: { code: res.code ?? "E_TOOL", message: res.message, retryable: res.retryable }, durationMs: 1 });
      }
      if (e.kind === "startChild") {
        const childDef = e.workflow ? world.workflows![e.workflow.slug!]! : bodyOf(d, e.definitionRef!);
        const child = await drive(childDef, world, null, { kind: "start", input: e.input }, { ...id, executionId: id.executionId * 100 + effects.length });
        queue.push({ kind: "childResult", nodeId: e.nodeId, childKey: e.childKey, status: child.state.status as "completed", output: child.state.output ?? null, ...(child.state.error ? { error: child.state.error } : {}) });
      }
    }
  }
  t0 = now + 1000;
  return {
    state: s!,
    effects,
    events: effects.flatMap((e) => (e.kind === "emit" ? [`${e.event.kind}${"nodeId" in e.event ? ":" + e.event.nodeId : ""}`] : [])),
    journal: effects.flatMap((e) => (e.kind === "journal" ? [e.entry] : [])),
    now,
  };
}

function bodyOf(d: WorkflowDefinition, ref: string): WorkflowDefinition {
  const n = d.nodes.find((x) => x.id === ref.split("/").pop())!;
  return def(n.config.body);
}

const echo: ToolFn = (a) => ({ ok: true, output: a });
const calls = (r: Run) => r.effects.flatMap((e) => (e.kind === "callTool" ? [e] : []));

describe("step: sequence, branches, reviews (the quickstart)", () => {
  const d = def(quickstart.definition);
  const sum: ToolFn = (a) => {
    const items = a.values as { amount: number }[];
    return { ok: true, output: { sum: items.reduce((x, i) => x + i.amount, 0), count: items.length } };
  };
  const template: ToolFn = (a) => ({ ok: true, output: { text: `${JSON.stringify(a.template)}|${JSON.stringify(a.values)}` } });
  const tools = { "math.sum": sum, "text.template": template };

  it("runs tool → condition → taken branch → review and pauses there, skipping the other branch", async () => {
    const r = await drive(d, { tools }, null, { kind: "start", input: qsInput });
    expect(r.state.status).toBe("paused");
    expect(r.state.pause).toEqual({ nodeId: "review", reason: "Expense report needs a manager's approval", seq: 1 });
    expect(r.state.nodes.routine!.status).toBe("skipped");
    expect(r.events).toEqual([
      "execution.started", "node.started:total", "node.completed:total", "node.started:large", "node.completed:large",
      "node.skipped:routine", "node.started:flag", "node.completed:flag", "node.started:review", "execution.paused:review",
    ]);
    expect(r.effects.find((e) => e.kind === "review")).toMatchObject({ subject: { employee: "Ada", amount: 455 } });
  });

  it("approve completes with the mapped output; edit passes the data on; reject fails with a stable code", async () => {
    const paused = (await drive(d, { tools }, null, { kind: "start", input: qsInput })).state;
    const approved = await drive(d, { tools }, paused, { kind: "resume", nodeId: "review", action: "approve", reviewer: "grace" });
    expect(approved.state.status).toBe("completed");
    expect(approved.state.output).toMatchObject({ decision: "approve", amount: 455 });
    const edited = await drive(d, { tools }, paused, { kind: "resume", nodeId: "review", action: "edit", data: { employee: "Ada", amount: 400 } });
    expect(edited.state.output).toMatchObject({ decision: "edit", amount: 400 });
    const rejected = await drive(d, { tools }, paused, { kind: "resume", nodeId: "review", action: "reject", comment: "no receipts" });
    expect(rejected.state.status).toBe("failed");
    expect(rejected.state.error).toMatchObject({ code: "BATON_REVIEW_REJECTED", nodeId: "review" });
  });

  it("ignores a resume for another node, a duplicate tool result and any command after the end", async () => {
    const paused = (await drive(d, { tools }, null, { kind: "start", input: qsInput })).state;
    const now = new Date(t0).toISOString();
    expect((await step({ definition: d, state: paused, command: { kind: "resume", nodeId: "total", action: "approve" }, now })).ignored).toMatch(/not paused/);
    const dup = await step({ definition: d, state: paused, command: { kind: "toolResult", nodeId: "total", callId: "7.total.1", ok: true, output: 1, durationMs: 1 }, now });
    expect(dup.ignored).toBeDefined();
    expect(dup.state).toEqual(paused);
    const done = (await drive(d, { tools }, paused, { kind: "resume", nodeId: "review", action: "approve" })).state;
    expect((await step({ definition: d, state: done, command: { kind: "cancel", reason: "x" }, now })).ignored).toMatch(/completed/);
  });

  it("a decision naming the pause it is for decides only that pause", async () => {
    const paused = (await drive(d, { tools }, null, { kind: "start", input: qsInput })).state;
    expect(paused.nodes.review).toMatchObject({ status: "paused", attempt: 1 });
    const now = new Date(t0).toISOString();
    const stale = await step({ definition: d, state: paused, command: { kind: "resume", nodeId: "review", action: "reject", attempt: 2 }, now });
    expect(stale.ignored).toMatch(/attempt 2 .* paused at attempt 1/);
    expect(stale.state).toEqual(paused);
    const approved = await drive(d, { tools }, paused, { kind: "resume", nodeId: "review", action: "approve", attempt: 1 });
    expect(approved.state.status).toBe("completed");
  });
});

describe("step: parallel fan-out and joins", () => {
  const fan = (join?: unknown) => def({
    start: "s",
    nodes: [
      { id: "s", type: "setVariable", config: { values: { x: 1 } } },
      { id: "a", type: "tool", config: { tool: "slow" }, input: { v: "A" } },
      { id: "b", type: "tool", config: { tool: "fast" }, input: { v: "B" } },
      { id: "c", type: "tool", config: { tool: "fast" }, input: { v: "C" } },
      { id: "j", type: "transform", config: { expression: "[a.v, b.v, c.v]" }, ...(join ? { join } : {}) },
    ],
    edges: [{ from: "s", to: "a" }, { from: "s", to: "b" }, { from: "s", to: "c" }, { from: "a", to: "j" }, { from: "b", to: "j" }, { from: "c", to: "j" }],
  });

  it("starts every ready branch in the same step, and an all-join waits for all", async () => {
    const first = await step({ definition: fan(), state: null, command: { kind: "start", input: {} }, now: new Date(t0).toISOString(), identity });
    expect(first.effects.filter((e) => e.kind === "callTool").map((e) => (e as { nodeId: string }).nodeId)).toEqual(["a", "b", "c"]);
    const r = await drive(fan(), { tools: { slow: echo, fast: echo } }, null, { kind: "start", input: {} });
    expect(r.state.status).toBe("completed");
    expect(r.state.output).toEqual(["A", "B", "C"]);
  });

  it("an any-join fires on the first arrival and runs once", async () => {
    const onlyB: ToolFn = (a) => (a.v === "B" ? { ok: true, output: a } : "hang");
    const r = await drive(fan("any"), { tools: { slow: onlyB, fast: onlyB } }, null, { kind: "start", input: {} });
    expect(r.state.nodes.j!.status).toBe("completed");
    expect(r.state.context.j).toEqual(["B"]); // JSONata drops the missing a.v and c.v
    expect(r.state.status).toBe("running"); // a and c are still out
    const late = await drive(fan("any"), { tools: { slow: echo, fast: echo } }, r.state, { kind: "toolResult", nodeId: "c", callId: "7.c.1", ok: true, output: { v: "C" }, durationMs: 1 });
    expect(late.journal.filter((j) => j.nodeId === "j")).toHaveLength(0);
  });

  it("an n-of join fires once n branches arrived", async () => {
    const notA: ToolFn = (a) => (a.v === "A" ? "hang" : { ok: true, output: a });
    const r = await drive(fan({ n: 2 }), { tools: { slow: notA, fast: notA } }, null, { kind: "start", input: {} });
    expect(r.state.context.j).toEqual(["B", "C"]);
    expect(r.state.nodes.a!.status).toBe("running");
  });

  it("caps the nodes in flight with limits.maxConcurrency", async () => {
    const d = fan();
    const capped = def({ ...d, limits: { maxConcurrency: 1 } });
    const first = await step({ definition: capped, state: null, command: { kind: "start", input: {} }, now: new Date(t0).toISOString(), identity });
    expect(first.effects.filter((e) => e.kind === "callTool")).toHaveLength(1);
    const r = await drive(capped, { tools: { slow: echo, fast: echo } }, null, { kind: "start", input: {} });
    expect(r.state.output).toEqual(["A", "B", "C"]);
  });

  it("runs several calls of one tool node at once and keeps their order", async () => {
    const d = def({ nodes: [{ id: "m", type: "tool", config: { calls: [{ tool: "echo", input: { n: 1 } }, { tool: "echo", input: { n: "$.input.x" } }] } }] });
    const r = await drive(d, { tools: { echo } }, null, { kind: "start", input: { x: 2 } });
    expect(calls(r)).toHaveLength(2);
    expect(r.state.output).toEqual([{ n: 1 }, { n: 2 }]);
  });
});

describe("step: guards, transform, setVariable, emit", () => {
  it("edge guards decide branches; branching first takes only the first match", async () => {
    const d = def({
      start: "s", nodes: [
        { id: "s", type: "transform", config: { expression: "input.n * 2" }, branching: "first" },
        { id: "big", type: "setVariable", config: { values: { size: "big" } } },
        { id: "any", type: "setVariable", config: { values: { size: "any" } } },
      ],
      edges: [{ from: "s", to: "big", condition: "$output > 10" }, { from: "s", to: "any" }],
    });
    const big = await drive(d, {}, null, { kind: "start", input: { n: 6 } });
    expect(big.state.nodes.big!.status).toBe("completed");
    expect(big.state.nodes.any!.status).toBe("skipped");
    const small = await drive(d, {}, null, { kind: "start", input: { n: 2 } });
    expect(small.state.nodes.big!.status).toBe("skipped");
    expect(small.state.output).toEqual({ size: "any" });
  });

  it("a structured guard compares as a condition node does, each op, reading the source's output where it wrote it", async () => {
    const cases: Array<[JsonObject, boolean]> = [
      [{ left: "$.s.n", op: "eq", right: 5 }, true],
      [{ left: "$.s.n", op: "eq", right: "5" }, false],
      [{ left: "$.s.n", op: "ne", right: "$.input.n" }, false],
      [{ left: "$.s.n", op: "gt", right: 4 }, true],
      [{ left: "$.s.n", op: "gte", right: 6 }, false],
      [{ left: "$.s.n", op: "lt", right: "6" }, false],
      [{ left: "$.s.n", op: "lte", right: "$.input.n" }, true],
      [{ left: "$.s.none", op: "exists" }, false],
      [{ left: "$.s.missing", op: "exists" }, false],
      [{ left: "$.s.tags", op: "truthy" }, true],
      [{ left: "$.s.empty", op: "truthy" }, false],
      [{ left: "b", op: "in", right: "$.s.tags" }, true],
      [{ left: "$.s.name", op: "contains", right: "An" }, true],
      [{ left: "$.s.tags", op: "contains", right: "c" }, false],
      // A node with an output path is read there. `$output` is bound for JSONata alone: here it is text, which exists.
      [{ left: "$.vars.s.n", op: "eq", right: 5 }, true],
      [{ left: "$output", op: "eq", right: "$output" }, true],
    ];
    const d = def({
      start: "s",
      nodes: [
        { id: "s", type: "transform", config: { expression: "{ 'n': 5, 'tags': ['a', 'b'], 'name': 'Ana', 'none': null, 'empty': [] }" } },
        { id: "copy", type: "transform", config: { expression: "s" }, output: "$.vars.s" },
        ...cases.map((_, k) => ({ id: `t${k}`, type: "setVariable", config: { values: {} } })),
      ],
      edges: [{ from: "s", to: "copy" }, ...cases.map(([condition], k) => ({ from: k < 14 ? "s" : "copy", to: `t${k}`, condition }))],
    });
    const r = await drive(d, {}, null, { kind: "start", input: { n: 5 } });
    expect(r.state.status).toBe("completed");
    expect(cases.map(([c], k) => [c, r.state.nodes[`t${k}`]!.status])).toEqual(cases.map(([c, taken]) => [c, taken ? "completed" : "skipped"]));
  });

  it("a structured guard reads a large output through its reference and takes part in branching first", async () => {
    const ref = { $ref: "blob:ok", size: 99_999 };
    const d = def({
      nodes: [
        { id: "a", type: "tool", config: { tool: "big" }, branching: "first" },
        { id: "yes", type: "transform", config: { expression: "'yes'" } },
        { id: "also", type: "transform", config: { expression: "'also'" } },
        { id: "no", type: "transform", config: { expression: "'no'" } },
      ],
      edges: [
        { from: "a", to: "no", condition: { left: "$.a.ok", op: "eq", right: false } },
        { from: "a", to: "yes", condition: { left: "$.a.ok", op: "eq", right: true } },
        { from: "a", to: "also", condition: { left: "$.a.ok", op: "truthy" } },
      ],
    });
    const r = await drive(d, { tools: { big: () => ({ ok: true, output: ref }) }, blobs: new Map([["blob:ok", { ok: true }]]) }, null, { kind: "start", input: {} });
    expect([r.state.nodes.no!.status, r.state.nodes.yes!.status, r.state.nodes.also!.status]).toEqual(["skipped", "completed", "skipped"]);
    expect(r.state.context.a).toEqual(ref);
  });

  it("decides parallel edges between the same two nodes apart, whatever their order", async () => {
    const target = { id: "j", type: "transform", config: { expression: "'ran'" } };
    for (const order of [["true", "false"], ["false", "true"]]) {
      const d = def({
        start: "c", nodes: [{ id: "c", type: "condition", config: { left: 1, op: "eq", right: 1 } }, target],
        edges: order.map((when) => ({ from: "c", to: "j", when })),
      });
      const r = await drive(d, {}, null, { kind: "start", input: {} });
      expect([order.join(","), r.state.status, r.state.nodes.j!.status, r.state.output]).toEqual([order.join(","), "completed", "completed", "ran"]);
      expect(r.state.edges).toEqual(order[0] === "true" ? { "c->j": "taken", "c->j#2": "dead" } : { "c->j": "dead", "c->j#2": "taken" });
    }
    const guarded = def({
      start: "a", nodes: [{ id: "a", type: "setVariable", config: { values: {} } }, { ...target, id: "b" }],
      edges: [{ from: "a", to: "b", condition: "false" }, { from: "a", to: "b" }],
    });
    const g = await drive(guarded, {}, null, { kind: "start", input: {} });
    expect([g.state.status, g.state.nodes.b!.status]).toEqual(["completed", "completed"]);
  });

  it("reads edge decisions a checkpoint wrote before parallel edges had keys of their own", async () => {
    // Such a checkpoint keys every edge `from->to`; that is still the key of the first edge between two nodes.
    const d = def({
      nodes: [{ id: "a", type: "tool", config: { tool: "echo" } }, { id: "b", type: "setVariable", config: { values: { done: true } } }],
      edges: [{ from: "a", to: "b" }],
    });
    const held = await drive(d, { tools: { echo }, holdCalls: true }, null, { kind: "start", input: {} });
    const call = calls(held)[0]!;
    const r = await drive(d, { tools: { echo } }, held.state, { kind: "toolResult", nodeId: "a", callId: call.callId, ok: true, output: {}, durationMs: 1 });
    expect(r.state.edges).toEqual({ "a->b": "taken" });
    expect(r.state.output).toEqual({ done: true });
  });

  it("setVariable writes $.path keys into the context; emit publishes a custom event", async () => {
    const d = def({
      nodes: [
        { id: "v", type: "setVariable", config: { values: { "$.vars.count": 3, plain: "$.input.a" } } },
        { id: "e", type: "emit", config: { event: "order.shipped", data: { count: "$.vars.count" } } },
      ],
      edges: [{ from: "v", to: "e" }],
    });
    const r = await drive(d, {}, null, { kind: "start", input: { a: "x" } });
    expect(r.state.context.vars).toEqual({ count: 3 });
    expect(r.state.context.v).toEqual({ plain: "x" });
    expect(r.effects).toContainEqual({ kind: "emit", event: { kind: "execution.emitted", nodeId: "e", name: "order.shipped", data: { count: 3 } } });
  });

  it("a failing expression fails the node with a stable code", async () => {
    const d = def({ nodes: [{ id: "x", type: "transform", config: { expression: "$error('nope')" } }] });
    const r = await drive(d, {}, null, { kind: "start", input: {} });
    expect(r.state.status).toBe("failed");
    expect(r.state.error).toMatchObject({ code: "BATON_EXPRESSION_FAILED", nodeId: "x" });
  });

  it("an edge guard that cannot be evaluated fails its node (a tool's or an inline one's), once, and the run", async () => {
    for (const source of [{ id: "a", type: "tool", config: { tool: "f" } }, { id: "a", type: "transform", config: { expression: "1" } }]) {
      const d = def({ nodes: [source, { id: "b", type: "transform", config: { expression: "2" } }], edges: [{ from: "a", to: "b", condition: "$error('bad guard')" }] });
      const r = await drive(d, { tools: { f: echo } }, null, { kind: "start", input: {} });
      expect(r.state.status).toBe("failed");
      expect(r.state.error).toMatchObject({ code: "BATON_EXPRESSION_FAILED", nodeId: "a" });
      expect(r.state.error!.message).toContain("an edge guard of node \"a\" failed");
      expect(r.journal.filter((j) => j.nodeId === "a").map((j) => `${j.attempt}:${j.status}`)).toEqual(["1:running", "1:failed"]);
      expect(r.state.context.a).toBeUndefined();
      expect(r.journal.some((j) => j.nodeId === "b")).toBe(false);
    }
  });
});

describe("step: loops", () => {
  const loop = (max: number, onLimit = "fail") => def({
    start: "init",
    nodes: [
      { id: "init", type: "setVariable", config: { values: { "$.vars.i": 0, "$.vars.seen": [] } } },
      { id: "loop", type: "whileLoop", config: { condition: "vars.i < input.n", maxIterations: max, onLimit } },
      { id: "work", type: "tool", config: { tool: "echo" }, input: { i: "$.vars.i" } },
      { id: "inc", type: "setVariable", config: { values: { "$.vars.i": "$.vars.next" } } },
      { id: "done", type: "transform", config: { expression: "{ 'i': vars.i, 'loops': loop.iterations }" } },
    ],
    edges: [
      { from: "init", to: "loop" }, { from: "loop", to: "work", when: "body" }, { from: "work", to: "inc" },
      { from: "inc", to: "loop" }, { from: "loop", to: "done", when: "exit" },
    ],
  });
  const tools: Tools = { echo: (a) => ({ ok: true, output: a }) };

  it("runs the body until the condition is false, counting iterations, and re-runs body nodes each time", async () => {
    // The "inc" step needs i+1; compute it in the tool so the loop advances.
    const t: Tools = { echo: (a) => ({ ok: true, output: a }) };
    const d = def({
      ...loop(10),
      nodes: loop(10).nodes.map((n) => (n.id === "inc" ? { ...n, type: "setVariable", config: { values: { "$.vars.i": "$.work.next" } } } : n.id === "work" ? { ...n, type: "transform", config: { expression: "{ 'next': vars.i + 1 }" } } : n)),
    });
    const r = await drive(d, { tools: t }, null, { kind: "start", input: { n: 3 } });
    expect(r.state.status).toBe("completed");
    expect(r.state.output).toEqual({ i: 3, loops: 3 });
    expect(r.journal.filter((j) => j.nodeId === "work" && j.status === "completed").map((j) => j.attempt)).toEqual([1, 2, 3]);
    expect(r.state.nodes.done!.status).toBe("completed");
  });

  it("a loop's later passes give a node a new idempotency key; its retries keep the pass's", async () => {
    const d = def({
      ...loop(10),
      nodes: loop(10).nodes.map((n) => (n.id === "work" ? { ...n, retry: { maxAttempts: 2, initialDelayMs: 0 } } : n.id === "inc" ? { ...n, config: { values: { "$.vars.i": "$.work.next" } } } : n)),
    });
    const failedOnce = new Set<number>();
    const r = await drive(d, {
      tools: {
        echo: (a) => {
          const i = a.i as number;
          if (i === 1 && !failedOnce.has(i)) {
            failedOnce.add(i);
            return { ok: false, retryable: true, message: "again" };
          }
          return { ok: true, output: { next: i + 1 } };
        },
      },
    }, null, { kind: "start", input: { n: 3 } });
    expect(r.state.status).toBe("completed");
    expect(calls(r).map((c) => c.idempotencyKey)).toEqual(["7.work", "7.work.v2", "7.work.v2", "7.work.v3"]);
  });

  it("a body node with an edge from outside the loop runs on it in the first pass only, and is skipped once the loop exits", async () => {
    const d = def({
      start: "init",
      nodes: [
        { id: "init", type: "setVariable", config: { values: { "$.vars.n": 0 } } },
        { id: "loop", type: "whileLoop", config: { condition: "vars.n < 2", maxIterations: 5 } },
        { id: "x", type: "transform", config: { expression: "vars.n + 1" }, output: "$.vars.n" },
        { id: "done", type: "transform", config: { expression: "vars.n" } },
      ],
      edges: [{ from: "init", to: "loop" }, { from: "init", to: "x" }, { from: "loop", to: "x", when: "body" }, { from: "x", to: "loop" }, { from: "loop", to: "done", when: "exit" }],
    });
    const r = await drive(d, {}, null, { kind: "start", input: {} });
    expect({ status: r.state.status, output: r.state.output }).toEqual({ status: "completed", output: 2 });
    expect(r.journal.filter((j) => j.nodeId === "x" && j.status === "completed")).toHaveLength(2);
    expect(r.journal.filter((j) => j.nodeId === "loop" && j.status === "completed")).toHaveLength(3);
  });

  it("joins that wait on each other fail the run, naming them, instead of completing without them", async () => {
    // Refused on create (join_never_fires); a definition stored before that check runs like this.
    const d = {
      start: "s",
      nodes: [
        { id: "s", type: "setVariable", config: { values: { "$.vars.x": 1 } } },
        { id: "x", type: "setVariable", config: { values: { "$.vars.y": 1 } }, join: "all", maxVisits: 3 },
        { id: "y", type: "setVariable", config: { values: { "$.vars.z": 1 } }, join: "all", maxVisits: 3 },
      ],
      edges: [{ from: "s", to: "x" }, { from: "s", to: "y" }, { from: "x", to: "y" }, { from: "y", to: "x" }],
    } as unknown as WorkflowDefinition;
    const r = await drive(d, {}, null, { kind: "start", input: {} });
    expect(r.state.status).toBe("failed");
    expect(r.state.error).toMatchObject({ code: "BATON_JOIN_NEVER_FIRED", nodeId: "x" });
    expect(r.state.error!.message).toContain('"x", "y"');
  });

  it("a join on the start that an edge back restarts before its cycle can meet it fails the run (all) or never runs the start again (n)", async () => {
    // Refused on create (join_never_fires); a definition stored before that check runs like this.
    const sv = (id: string, extra: Record<string, unknown> = {}) => ({ id, type: "setVariable", config: { values: { [`$.vars.${id}`]: 1 } }, ...extra });
    const all = {
      start: "s",
      nodes: [sv("s", { join: "all", maxVisits: 3 }), sv("a")],
      edges: [{ from: "s", to: "a" }, { from: "a", to: "s" }, { from: "s", to: "s" }],
    } as unknown as WorkflowDefinition;
    const r = await drive(all, {}, null, { kind: "start", input: {} });
    expect(r.state.status).toBe("failed");
    expect(r.state.error).toMatchObject({ code: "BATON_JOIN_NEVER_FIRED", nodeId: "s" });
    expect(r.journal.filter((j) => j.status === "completed").map((j) => j.nodeId)).toEqual(["s"]);
    // The self-loop listed first restarts the round before s → a is decided: the join is met each round.
    const ok = await drive(def({ ...all, edges: [{ from: "s", to: "s" }, { from: "s", to: "a" }, { from: "a", to: "s" }] }), {}, null, { kind: "start", input: {} });
    expect(ok.journal.filter((j) => j.nodeId === "s" && j.status === "completed").length).toBeGreaterThan(1);
    const ring = {
      start: "s",
      nodes: [sv("s", { join: { n: 2 }, maxVisits: 3 }), sv("a"), sv("b")],
      edges: [{ from: "s", to: "a" }, { from: "a", to: "b" }, { from: "b", to: "s" }, { from: "s", to: "s" }],
    } as unknown as WorkflowDefinition;
    const n = await drive(ring, {}, null, { kind: "start", input: {} });
    expect(n.journal.filter((j) => j.status === "completed").map((j) => j.nodeId)).toEqual(["s"]);
  });

  it("nested loops keep their own counts: the inner's restarts with each outer pass, the outer's limit holds", async () => {
    const nested = (innerWhile: string, outerWhile: string, outerMax: number) => def({
      start: "i",
      nodes: [
        { id: "i", type: "setVariable", config: { values: { "$.vars.o": 0, "$.vars.total": 0 } } },
        { id: "outer", type: "whileLoop", config: { condition: outerWhile, maxIterations: outerMax } },
        { id: "ri", type: "setVariable", config: { values: { "$.vars.i": 0 } } },
        { id: "inner", type: "whileLoop", config: { condition: innerWhile, maxIterations: 5 } },
        { id: "inc", type: "transform", config: { expression: "{ 'i': vars.i + 1, 'o': vars.o, 'total': vars.total + 1 }" }, output: "$.vars" },
        { id: "onext", type: "transform", config: { expression: "{ 'i': vars.i, 'o': vars.o + 1, 'total': vars.total }" }, output: "$.vars" },
        { id: "done", type: "transform", config: { expression: "vars" } },
      ],
      edges: [
        { from: "i", to: "outer" }, { from: "outer", to: "ri", when: "body" }, { from: "ri", to: "inner" },
        { from: "inner", to: "inc", when: "body" }, { from: "inc", to: "inner" }, { from: "inner", to: "onext", when: "exit" },
        { from: "onext", to: "outer" }, { from: "outer", to: "done", when: "exit" },
      ],
    });
    // Two outer passes of three inner iterations each: 6 in all, none over the inner's limit of 5.
    const ok = await drive(nested("vars.i < 3", "vars.o < 2", 10), {}, null, { kind: "start", input: {} });
    expect({ status: ok.state.status, output: ok.state.output }).toEqual({ status: "completed", output: { i: 3, o: 2, total: 6 } });
    // An outer loop that never ends stops at its own limit, whatever the inner one does.
    const endless = await drive(nested("vars.i < 1", "true", 3), {}, null, { kind: "start", input: {} });
    expect(endless.state.status).toBe("failed");
    expect(endless.state.error).toMatchObject({ code: "BATON_LOOP_LIMIT", nodeId: "outer" });
    expect(endless.journal.filter((j) => j.nodeId === "inc" && j.status === "completed")).toHaveLength(3);
  });

  it("a loop's maxIterations holds whatever its body does: branches that alternate, and a cycle inside it, do not restart its count", async () => {
    // maxVisits: 50 stops a run whose loop would never reach its limit.
    const branches = def({
      start: "init",
      nodes: [
        { id: "init", type: "setVariable", config: { values: { "$.vars.n": 0 } } },
        { id: "loop", type: "whileLoop", config: { condition: "true", maxIterations: 3 } },
        { id: "inc", type: "transform", config: { expression: "vars.n + 1" }, output: "$.vars.n", maxVisits: 50 },
        { id: "cond", type: "condition", config: { expression: "vars.n % 2 = 1" } },
        { id: "x", type: "setVariable", config: { values: {} } },
        { id: "y", type: "setVariable", config: { values: {} } },
      ],
      edges: [
        { from: "init", to: "loop" }, { from: "loop", to: "inc", when: "body" }, { from: "inc", to: "cond" },
        { from: "cond", to: "x", when: "true" }, { from: "cond", to: "y", when: "false" }, { from: "x", to: "loop" }, { from: "y", to: "loop" },
      ],
    });
    const b = await drive(branches, {}, null, { kind: "start", input: {} });
    expect([b.state.error?.code, b.state.error?.nodeId, b.state.context.vars]).toEqual(["BATON_LOOP_LIMIT", "loop", { n: 3 }]);
    // A retry inside the body (work → chk → work) in every pass.
    const retries = def({
      start: "init",
      nodes: [
        { id: "init", type: "setVariable", config: { values: { "$.vars.tries": 0 } } },
        { id: "loop", type: "whileLoop", config: { condition: "true", maxIterations: 3 } },
        { id: "work", type: "transform", config: { expression: "vars.tries + 1" }, output: "$.vars.tries", maxVisits: 50 },
        { id: "chk", type: "condition", config: { expression: "vars.tries % 2 = 1" } },
        { id: "next", type: "setVariable", config: { values: {} } },
      ],
      edges: [
        { from: "init", to: "loop" }, { from: "loop", to: "work", when: "body" }, { from: "work", to: "chk" },
        { from: "chk", to: "work", when: "true" }, { from: "chk", to: "next", when: "false" }, { from: "next", to: "loop" },
      ],
    });
    const r = await drive(retries, {}, null, { kind: "start", input: {} });
    expect([r.state.error?.code, r.state.error?.nodeId, r.state.context.vars]).toEqual(["BATON_LOOP_LIMIT", "loop", { tries: 6 }]);
  });

  it("maxVisits counts a node's visits in one pass of the whileLoop around it: each pass may visit it up to its bound", async () => {
    // `work` retries (work → chk → work) until it has tried more often than the pass's number: once in pass 0, twice in pass 1, ...
    const d = (passes: number) => def({
      start: "init",
      nodes: [
        { id: "init", type: "setVariable", config: { values: { "$.vars.i": 0, "$.vars.tries": 0 } } },
        { id: "loop", type: "whileLoop", config: { condition: `vars.i < ${passes}`, maxIterations: 10 } },
        { id: "work", type: "transform", config: { expression: "{ 'i': vars.i, 'tries': vars.tries + 1 }" }, output: "$.vars", maxVisits: 2 },
        { id: "chk", type: "condition", config: { expression: "vars.tries <= vars.i" } },
        { id: "next", type: "transform", config: { expression: "{ 'i': vars.i + 1, 'tries': 0 }" }, output: "$.vars" },
        { id: "done", type: "transform", config: { expression: "vars.i" } },
      ],
      edges: [
        { from: "init", to: "loop" }, { from: "loop", to: "work", when: "body" }, { from: "work", to: "chk" },
        { from: "chk", to: "work", when: "true" }, { from: "chk", to: "next", when: "false" }, { from: "next", to: "loop" },
        { from: "loop", to: "done", when: "exit" },
      ],
    });
    const completed = (r: Run, id: string) => r.journal.filter((j) => j.nodeId === id && j.status === "completed").length;
    // Two passes: 1 + 2 visits of a node with maxVisits 2.
    const ok = await drive(d(2), {}, null, { kind: "start", input: {} });
    expect([ok.state.status, ok.state.output, completed(ok, "work")]).toEqual(["completed", 2, 3]);
    // The third pass needs 3 visits in one pass: over the bound, though the passes before were within it.
    const over = await drive(d(3), {}, null, { kind: "start", input: {} });
    expect(over.state.status).toBe("failed");
    expect(over.state.error).toMatchObject({ code: "BATON_LOOP_LIMIT", nodeId: "work", message: expect.stringContaining('reached more than maxVisits=2 times in one pass of loop "loop"') });
    expect(completed(over, "work")).toBe(1 + 2 + 2);

    // Five passes of a body whose node (maxVisits 2) each pass visits once: all run.
    const five = def({
      start: "init",
      nodes: [
        { id: "init", type: "setVariable", config: { values: { "$.vars.i": 0 } } },
        { id: "loop", type: "whileLoop", config: { condition: "vars.i < 5", maxIterations: 5 } },
        { id: "inc", type: "transform", config: { expression: "vars.i + 1" }, output: "$.vars.i", maxVisits: 2 },
        { id: "done", type: "transform", config: { expression: "{ 'i': vars.i, 'loops': loop.iterations }" } },
      ],
      edges: [{ from: "init", to: "loop" }, { from: "loop", to: "inc", when: "body" }, { from: "inc", to: "loop" }, { from: "loop", to: "done", when: "exit" }],
    });
    const r = await drive(five, {}, null, { kind: "start", input: {} });
    expect([r.state.status, r.state.error, r.state.output, r.state.nodes.inc!.visits]).toEqual(["completed", undefined, { i: 5, loops: 5 }, 5]);
  });

  it("nested loops keep their own counts of maxVisits: an inner loop's passes do not restart the count of a node of the outer one's body", async () => {
    const nested = (again: string) => def({
      start: "i",
      nodes: [
        { id: "i", type: "setVariable", config: { values: { "$.vars.o": 0, "$.vars.total": 0 } } },
        { id: "outer", type: "whileLoop", config: { condition: "vars.o < 2", maxIterations: 10 } },
        { id: "ri", type: "setVariable", config: { values: { "$.vars.i": 0 } }, maxVisits: 1 },
        { id: "inner", type: "whileLoop", config: { condition: "vars.i < 2", maxIterations: 5 } },
        { id: "inc", type: "transform", config: { expression: "{ 'i': vars.i + 1, 'o': vars.o, 'total': vars.total + 1 }" }, output: "$.vars", maxVisits: 1 },
        { id: "again", type: "condition", config: { expression: again } },
        { id: "onext", type: "transform", config: { expression: "{ 'i': vars.i, 'o': vars.o + 1, 'total': vars.total }" }, output: "$.vars" },
        { id: "done", type: "transform", config: { expression: "vars" } },
      ],
      edges: [
        { from: "i", to: "outer" }, { from: "outer", to: "ri", when: "body" }, { from: "ri", to: "inner" },
        { from: "inner", to: "inc", when: "body" }, { from: "inc", to: "inner" }, { from: "inner", to: "again", when: "exit" },
        { from: "again", to: "ri", when: "true" }, { from: "again", to: "onext", when: "false" },
        { from: "onext", to: "outer" }, { from: "outer", to: "done", when: "exit" },
      ],
    });
    // Each inner pass visits inc once, each outer pass ri once: two outer passes of two inner ones run.
    const ok = await drive(nested("false"), {}, null, { kind: "start", input: {} });
    expect({ status: ok.state.status, output: ok.state.output }).toEqual({ status: "completed", output: { i: 2, o: 2, total: 4 } });
    // Going back to ri in the same outer pass is a second visit of that pass, inner passes between or not.
    const twice = await drive(nested("vars.total < 3"), {}, null, { kind: "start", input: {} });
    expect(twice.state.error).toMatchObject({ code: "BATON_LOOP_LIMIT", nodeId: "ri", message: expect.stringContaining('in one pass of loop "outer"') });
    expect(twice.journal.filter((j) => j.nodeId === "inc" && j.status === "completed")).toHaveLength(2);
  });

  it("fails at maxIterations (or exits with onLimit: exit)", async () => {
    const forever = (onLimit: string) => def({
      ...loop(2, onLimit),
      nodes: loop(2, onLimit).nodes.map((n) => (n.id === "inc" ? { ...n, config: { values: { "$.vars.i": 0 } } } : n)),
    });
    const failed = await drive(forever("fail"), { tools }, null, { kind: "start", input: { n: 1 } });
    expect(failed.state.status).toBe("failed");
    expect(failed.state.error).toMatchObject({ code: "BATON_LOOP_LIMIT", nodeId: "loop" });
    const exited = await drive(forever("exit"), { tools }, null, { kind: "start", input: { n: 1 } });
    expect(exited.state.status).toBe("completed");
    expect(exited.state.output).toEqual({ i: 0, loops: 2 });
  });

  it("a state-machine cycle bounded by maxVisits runs until its exit transition is taken", async () => {
    const d = def({
      start: "ask",
      nodes: [
        { id: "ask", type: "tool", config: { tool: "guess" }, input: { n: "$.vars.n" }, branching: "first", maxVisits: 5 },
        { id: "count", type: "setVariable", config: { values: { "$.vars.n": "$.ask.next" } } },
        { id: "win", type: "setVariable", config: { values: { won: true } } },
      ],
      edges: [{ from: "ask", to: "win", condition: "ask.hit" }, { from: "ask", to: "count" }, { from: "count", to: "ask" }],
    });
    const guess: ToolFn = (a) => {
      const n = typeof a.n === "number" ? a.n : 0;
      return { ok: true, output: { hit: n >= 2, next: n + 1 } };
    };
    const r = await drive(d, { tools: { guess } }, null, { kind: "start", input: {} });
    expect(r.state.status).toBe("completed");
    expect(r.state.output).toEqual({ won: true });
    expect(r.state.nodes.ask!.visits).toBe(3);
    const never = await drive(d, { tools: { guess: () => ({ ok: true, output: { hit: false, next: 0 } }) } }, null, { kind: "start", input: {} });
    expect(never.state.error).toMatchObject({ code: "BATON_LOOP_LIMIT", nodeId: "ask" });
  });

  /** A loop whose body races `fast` against `other`; an `any` join goes round as soon as `fast` is done. */
  const race = (other: JsonObject) => def({
    start: "init",
    nodes: [
      { id: "init", type: "setVariable", config: { values: { "$.vars.i": 0 } } },
      { id: "loop", type: "whileLoop", config: { condition: "vars.i < 2", maxIterations: 5 } },
      { id: "fast", type: "transform", config: { expression: "vars.i + 1" }, output: "$.vars.i" },
      { id: "other", ...other },
      { id: "j", type: "setVariable", config: { values: { "$.vars.round": "$.vars.i" } }, join: "any" },
      { id: "done", type: "transform", config: { expression: "vars.i" } },
    ],
    edges: [
      { from: "init", to: "loop" }, { from: "loop", to: "fast", when: "body" }, { from: "loop", to: "other", when: "body" },
      { from: "fast", to: "j" }, { from: "other", to: "j" }, { from: "j", to: "loop" }, { from: "loop", to: "done", when: "exit" },
    ],
  });
  /** Each attempt's last journal status. */
  const lastStatus = (r: Run, nodeId: string): string[] => {
    const byAttempt = new Map<number, string>();
    for (const j of r.journal) if (j.nodeId === nodeId) byAttempt.set(j.attempt, j.status);
    return [...byAttempt.values()];
  };

  it("a restarted pass closes the review it left waiting, and the run goes on", async () => {
    const d = race({ type: "humanReview", config: { reason: "check" } });
    const r = await drive(d, { tools }, null, { kind: "start", input: {} });
    expect(r.state.status).toBe("completed");
    expect(r.state.pause).toBeUndefined();
    expect(r.state.output).toBe(2);
    // Each pass's review: paused, then ended by the next pass, which a review service sees as a decision.
    expect(lastStatus(r, "other")).toEqual(["failed", "failed"]);
    expect(r.journal.filter((j) => j.nodeId === "other" && j.status === "failed").map((j) => j.errorCode)).toEqual(["BATON_CANCELLED", "BATON_CANCELLED"]);
    const resumed = r.effects.flatMap((e) => (e.kind === "emit" && e.event.kind === "execution.resumed" ? [e.event] : []));
    expect(resumed).toEqual([{ kind: "execution.resumed", nodeId: "other", decision: "cancelled" }, { kind: "execution.resumed", nodeId: "other", decision: "cancelled" }]);
    expect(r.events.filter((e) => e === "execution.paused:other")).toHaveLength(2);
    // Rebuilt from its journal (the ended attempts' rows included), it ends the same way.
    const rebuilt = await replayJournal({ definition: d, identity, start: { kind: "start", input: {} }, journal: r.journal, startedAt: new Date(t0).toISOString() });
    expect(rebuilt.unplaced).toEqual([]);
    expect({ status: rebuilt.state.status, output: rebuilt.state.output }).toEqual({ status: "completed", output: 2 });
  });

  it("a restarted pass cancels the call it left out and journals its attempt as ended", async () => {
    const r = await drive(race({ type: "tool", config: { tool: "slow" } }), { tools: { slow: () => "hang" } }, null, { kind: "start", input: {} });
    expect(r.state.status).toBe("completed");
    expect(lastStatus(r, "other")).toEqual(["failed", "failed"]);
    const cancelled = r.effects.flatMap((e) => (e.kind === "cancelTools" ? e.callIds : []));
    expect(cancelled).toEqual(calls(r).filter((c) => c.nodeId === "other").map((c) => c.callId));
    expect(cancelled).toHaveLength(2);
    expect(r.events.filter((e) => e === "node.failed:other")).toHaveLength(2);
  });

  it("a restarted pass cancels the child it left running", async () => {
    const d = race({ type: "subworkflow", config: { workflow: { slug: "child" } } });
    let s: ExecutionState | null = null;
    const effects: Effect[] = [];
    let command: Command = { kind: "start", input: {} };
    for (let i = 0; i < 50; i++) {
      const r = await step({ definition: d, state: s && deepFreeze(s), command, now: new Date(t0 + i).toISOString(), identity });
      s = r.state;
      effects.push(...r.effects);
      if (!r.more) break;
      command = { kind: "continue" };
    }
    expect(s!.status).toBe("completed");
    const started = effects.flatMap((e) => (e.kind === "startChild" ? [e.childKey] : []));
    const stopped = effects.flatMap((e) => (e.kind === "cancelChildren" ? e.childKeys : []));
    expect(started).toHaveLength(2);
    expect(stopped).toEqual(started);
    expect(effects.some((e) => e.kind === "cancelTools")).toBe(false);
  });

  it("a loop whose body leaves the cycle another way has its exit edge decided once the rest is quiet", async () => {
    const d = def({
      start: "init",
      nodes: [
        { id: "init", type: "setVariable", config: { values: { "$.vars.i": 0 } } },
        { id: "loop", type: "whileLoop", config: { condition: "true", maxIterations: 10 } },
        { id: "inc", type: "transform", config: { expression: "vars.i + 1" }, output: "$.vars.i" },
        { id: "chk", type: "condition", config: { expression: "vars.i < 2" } },
        { id: "brk", type: "setVariable", config: { values: { "$.vars.broke": true } } },
        { id: "done", type: "setVariable", config: { values: { "$.vars.exited": true } } },
        { id: "final", type: "transform", config: { expression: "{ 'i': vars.i, 'broke': vars.broke, 'exited': vars.exited }" } },
      ],
      edges: [
        { from: "init", to: "loop" }, { from: "loop", to: "inc", when: "body" }, { from: "inc", to: "chk" },
        { from: "chk", to: "loop", when: "true" }, { from: "chk", to: "brk", when: "false" },
        { from: "loop", to: "done", when: "exit" }, { from: "brk", to: "final" }, { from: "done", to: "final" },
      ],
    });
    const r = await drive(d, { tools }, null, { kind: "start", input: {} });
    expect(r.state.status).toBe("completed");
    expect(r.state.nodes.done!.status).toBe("skipped");
    expect(r.state.nodes.final!.status).toBe("completed");
    expect(r.state.output).toEqual({ i: 2, broke: true });
  });
});

describe("step: the step limit (limits.maxSteps)", () => {
  // A run that goes round longer than meant (ADR 013: shapes such as workflows.md's "Loops each in
  // the other's body" known limitation) ends at a limit on its node starts.
  /** Inline steps only, and far more of them than the limits below: a loop of 100,000 passes. */
  const long = (limits?: JsonObject) => def({
    start: "s",
    ...(limits ? { limits } : {}),
    nodes: [
      { id: "s", type: "setVariable", config: { values: {} } },
      { id: "a", type: "whileLoop", config: { condition: "true", maxIterations: 100_000, onLimit: "exit" } },
      { id: "b", type: "setVariable", config: { values: { x: 1 } } },
    ],
    edges: [{ from: "s", to: "a" }, { from: "a", to: "b", when: "body" }, { from: "b", to: "a" }],
  });

  it("a run that goes on past its limit fails with BATON_STEP_LIMIT there, nothing left running", async () => {
    const r = await drive(long({ maxSteps: 40 }), {}, null, { kind: "start", input: {} });
    expect([r.state.status, r.state.error?.code, r.state.error?.retryable]).toEqual(["failed", "BATON_STEP_LIMIT", undefined]);
    expect(r.state.error?.message).toMatch(/made 40 node starts, limits\.maxSteps=40; node "[ab]" would have been one more/);
    expect(r.state.steps).toBe(40);
    // Each start has its journal row; the limit is on them.
    expect(r.journal.filter((j) => j.status === "running")).toHaveLength(40);
    expect(Object.values(r.state.nodes).filter((n) => n.status === "running" || n.status === "paused")).toEqual([]);
    expect(r.events.at(-1)).toBe("execution.failed");
    // Rebuilt from its journal, it counts the same starts and ends the same way.
    const rebuilt = await replayJournal({ definition: long({ maxSteps: 40 }), identity, start: { kind: "start", input: {} }, journal: r.journal, startedAt: new Date(t0).toISOString() });
    expect(rebuilt.unplaced).toEqual([]);
    expect([rebuilt.state.status, rebuilt.state.error?.code, rebuilt.state.steps]).toEqual(["failed", "BATON_STEP_LIMIT", 40]);
  });

  it("without limits.maxSteps the default (100000) applies, and the message says so", async () => {
    const d = def({ start: "loop", nodes: [
      { id: "loop", type: "whileLoop", config: { condition: "true", maxIterations: 100_000 } },
      { id: "f", type: "tool", config: { tool: "f" } },
    ], edges: [{ from: "loop", to: "f", when: "body" }, { from: "f", to: "loop" }] });
    const held = await drive(d, { holdCalls: true, tools: {} }, null, { kind: "start", input: {} });
    expect(held.state.steps).toBe(2);
    // The same run, as if 99,998 starts had been made already.
    const r = await drive(d, { tools: { f: echo } }, { ...held.state, steps: 99_998 }, { kind: "toolResult", nodeId: "f", callId: calls(held)[0]!.callId, ok: true, output: {}, durationMs: 1 });
    expect([r.state.status, r.state.error?.code, r.state.error?.nodeId, r.state.steps]).toEqual(["failed", "BATON_STEP_LIMIT", "loop", 100_000]);
    expect(r.state.error?.message).toBe('the execution made 100000 node starts, the default limits.maxSteps=100000; node "loop" would have been one more');
    expect(r.journal.filter((j) => j.status === "running").map((j) => j.nodeId)).toEqual(["loop", "f"]);
  });

  it("a fork of a run that failed at its limit counts its own starts afresh", async () => {
    const d = def({ limits: { maxSteps: 2 }, start: "a", nodes: [
      { id: "a", type: "tool", config: { tool: "f" } }, { id: "b", type: "tool", config: { tool: "f" } }, { id: "c", type: "tool", config: { tool: "f" } },
    ], edges: [{ from: "a", to: "b" }, { from: "b", to: "c" }] });
    const failed = await drive(d, { tools: { f: echo } }, null, { kind: "start", input: {} });
    expect([failed.state.status, failed.state.error?.code, failed.state.error?.nodeId]).toEqual(["failed", "BATON_STEP_LIMIT", "c"]);
    const fork = forkState(failed.state, { ...identity, executionId: 8 }, { executionId: 7, version: 5 }, new Date(t0).toISOString());
    expect(fork.steps).toBe(0);
    // Its start makes c ready again (the node the limit stopped); the fork runs it.
    const r = await drive(d, { tools: { f: echo } }, null, { kind: "start", input: {}, fork: { state: failed.state, executionId: 7, version: 5 } }, { ...identity, executionId: 8 });
    expect([r.state.status, r.state.steps, r.journal.map((j) => `${j.nodeId}:${j.status}`)]).toEqual(["completed", 1, ["c:running", "c:completed"]]);
  });

  it("retries count: the retry that would exceed the limit fails the run instead of starting", async () => {
    const d = def({ limits: { maxSteps: 3 }, nodes: [{ id: "a", type: "tool", config: { tool: "f" }, retry: { maxAttempts: 5, initialDelayMs: 10, jitter: 0 } }] });
    const r = await drive(d, { tools: { f: () => ({ ok: false, retryable: true, message: "busy" }) } }, null, { kind: "start", input: {} });
    expect([r.state.status, r.state.error?.code, r.state.error?.nodeId, r.state.nodes.a!.attempt]).toEqual(["failed", "BATON_STEP_LIMIT", "a", 3]);
    expect(calls(r)).toHaveLength(3);
    // A run within its limit is untouched by it.
    let n = 0;
    const ok = await drive(d, { tools: { f: () => (++n < 3 ? { ok: false, retryable: true, message: "busy" } : { ok: true, output: "done" }) } }, null, { kind: "start", input: {} });
    expect([ok.state.status, ok.state.steps]).toEqual(["completed", 3]);
  });

  it("a checkpoint written before steps were counted counts its nodes' attempts", async () => {
    const d = def({ limits: { maxSteps: 4 }, start: "a", nodes: [
      { id: "a", type: "tool", config: { tool: "f" } }, { id: "b", type: "tool", config: { tool: "f" } },
      { id: "c", type: "tool", config: { tool: "f" } }, { id: "d", type: "tool", config: { tool: "f" } }, { id: "e", type: "tool", config: { tool: "f" } },
    ], edges: [{ from: "a", to: "b" }, { from: "b", to: "c" }, { from: "c", to: "d" }, { from: "d", to: "e" }] });
    const held = await drive(d, { holdCalls: true, tools: {} }, null, { kind: "start", input: {} });
    expect(held.state.steps).toBe(1);
    const { steps: _steps, ...old } = held.state;
    // As if "a" had run three times already (retries), in a checkpoint without the count.
    const before: ExecutionState = { ...old, nodes: { ...old.nodes, a: { ...old.nodes.a!, attempt: 3 } } };
    const r = await drive(d, { tools: { f: echo } }, before, { kind: "toolResult", nodeId: "a", callId: "7.a.1", ok: true, output: {}, durationMs: 1 });
    expect([r.state.status, r.state.error?.code, r.state.error?.nodeId, r.state.steps]).toEqual(["failed", "BATON_STEP_LIMIT", "c", 4]);
  });
});

describe("step: forEach and sub-workflows", () => {
  it("maps a tool over a list with a concurrency cap, in order, then reduces", async () => {
    const d = def({ nodes: [{ id: "each", type: "forEach", config: { items: "$.input.xs", tool: "sq", concurrency: 2, itemInput: { x: "$.item", i: "$.index" }, reduce: "$sum(results.y)" } }] });
    const first = await step({ definition: d, state: null, command: { kind: "start", input: { xs: [1, 2, 3, 4, 5] } }, now: new Date(t0).toISOString(), identity });
    expect(first.effects.filter((e) => e.kind === "callTool")).toHaveLength(2);
    const r = await drive(d, { tools: { sq: (a) => ({ ok: true, output: { y: (a.x as number) ** 2, i: a.i ?? null } }) } }, null, { kind: "start", input: { xs: [1, 2, 3, 4, 5] } });
    expect(r.state.output).toBe(55);
    expect(calls(r)).toHaveLength(5);
  });

  it("lists the calls a state waits for: tool nodes' and running items', none once finished", async () => {
    const d = def({
      start: "s",
      nodes: [
        { id: "s", type: "setVariable", config: { values: { x: 1 } } },
        { id: "a", type: "tool", config: { tool: "t" } },
        { id: "each", type: "forEach", config: { items: "$.input.xs", tool: "t", concurrency: 2 } },
      ],
      edges: [{ from: "s", to: "a" }, { from: "s", to: "each" }],
    });
    const first = await step({ definition: d, state: null, command: { kind: "start", input: { xs: [1, 2, 3] } }, now: new Date(t0).toISOString(), identity });
    const sent = first.effects.flatMap((e) => (e.kind === "callTool" ? [e.callId] : []));
    expect(sent).toHaveLength(3); // a, and the first two items
    expect([...outstandingCalls(first.state)].sort()).toEqual([...sent].sort());
    expect(outstandingCount(first.state)).toBe(3);
    expect(outstandingCount(first.state, 2)).toBeGreaterThanOrEqual(2);
    expect(outstandingCount(withoutFanCounts(first.state))).toBe(3);
    // Asked for at least two, it may stop there, but finds them.
    expect(outstandingCalls(first.state, 2).size).toBeGreaterThanOrEqual(2);
    expect([...outstandingCalls(first.state, 2)].every((id) => sent.includes(id))).toBe(true);
    const done = await step({ definition: d, state: first.state, command: { kind: "toolResult", nodeId: "a", callId: sent[0]!, ok: true, output: {}, durationMs: 1 }, now: new Date(t0).toISOString(), identity });
    expect(outstandingCalls(done.state).has(sent[0]!)).toBe(false);
    expect(outstandingCount(done.state)).toBe(outstandingCalls(done.state).size);
    const cancelled = await step({ definition: d, state: done.state, command: { kind: "cancel", reason: "stop" }, now: new Date(t0).toISOString(), identity });
    expect(outstandingCalls(cancelled.state).size).toBe(0);
    expect(outstandingCount(cancelled.state)).toBe(0);
  });

  it("tells a settled item's call (answered, or to be started again) from one that may be ahead of its call", async () => {
    const d = def({ nodes: [{ id: "each", type: "forEach", config: { items: "$.input.xs", tool: "t", concurrency: 2 }, retry: { maxAttempts: 2, initialDelayMs: 0 } }] });
    const at = new Date(t0).toISOString();
    const first = await step({ definition: d, state: null, command: { kind: "start", input: { xs: [1, 2, 3] } }, now: at, identity });
    const [c0, c1] = first.effects.flatMap((e) => (e.kind === "callTool" ? [e.callId] : []));
    expect([c0, c1]).toEqual(["7.each.1.0", "7.each.1.1"]);
    const settled = (s: ExecutionState, callId: string) => settledFanCall(s.nodes.each!, 7, "each", callId);
    expect(settled(first.state, c0!)).toBe(false); // out
    const answered = await step({ definition: d, state: first.state, command: { kind: "toolResult", nodeId: "each", callId: c0!, ok: true, output: 1, durationMs: 1 }, now: at, identity });
    expect(settled(answered.state, c0!)).toBe(true);
    // Item 1 fails and is started again as 1-2: its first call is settled, the second is out.
    const failed = await step({ definition: d, state: answered.state, command: { kind: "toolResult", nodeId: "each", callId: c1!, ok: false, error: { code: "E", message: "no", retryable: true }, durationMs: 1 }, now: at, identity });
    expect(failed.effects.flatMap((e) => (e.kind === "callTool" ? [e.callId] : []))).toContain("7.each.1.1-2");
    expect(settled(failed.state, c1!)).toBe(true);
    expect(settled(failed.state, "7.each.1.1-2")).toBe(false);
    // Not a call this state gave out: an item or attempt it has not reached, another node's or attempt's id, a malformed one.
    for (const id of ["7.each.1.1-3", "7.each.1.9", "7.each.2.0", "8.each.1.0", "7.each.1.01", "7.each.1.0-1", "7.each.1.r1.0"]) expect(settled(failed.state, id)).toBe(false);
    // An agent's tool calls come in rounds: every call of an earlier round is settled.
    const run = failed.state.nodes.each!;
    const round2 = { ...run, fan: { ...run.fan!, round: 2 } };
    expect(settledFanCall(round2, 7, "each", "7.each.1.r1.1")).toBe(true);
    expect(settledFanCall(round2, 7, "each", "7.each.1.r2.0")).toBe(true);
    expect(settledFanCall(round2, 7, "each", "7.each.1.r2.1-2")).toBe(false);
    expect(settledFanCall(round2, 7, "each", "7.each.1.r3.0")).toBe(false);
  });

  it("an item that fails retryably waits out the node's backoff on a durable timer, holding its concurrency slot", async () => {
    const d = def({ nodes: [{ id: "each", type: "forEach", config: { items: "$.input.xs", tool: "t", concurrency: 1 }, retry: { maxAttempts: 3, initialDelayMs: 5000, jitter: 0 } }] });
    const sent: string[] = [];
    let fails = 2;
    const r = await drive(d, {
      tools: {
        t: (a, callId) => {
          sent.push(callId);
          return a.value === 1 && fails-- > 0 ? { ok: false, retryable: true, message: "busy" } : { ok: true, output: a.value as number };
        },
      },
    }, null, { kind: "start", input: { xs: [{ value: 1 }, { value: 2 }] } });
    expect({ status: r.state.status, output: r.state.output }).toEqual({ status: "completed", output: [1, 2] });
    // Item 0 three times, then item 1: its slot was taken while item 0 waited.
    expect(sent).toEqual(["7.each.1.0", "7.each.1.0-2", "7.each.1.0-3", "7.each.1.1"]);
    const timers = r.effects.flatMap((e) => (e.kind === "setTimer" ? [e] : []));
    expect(timers.map((t) => t.timerId)).toEqual(["retry:each:1:0:1", "retry:each:1:0:2"]);
    // 5 s, then 10 s after the failures (exponential, no jitter).
    const start = Date.parse(timers[0]!.dueAt);
    expect(Date.parse(timers[1]!.dueAt) - start).toBeGreaterThanOrEqual(10_000);
  });

  it("a fan from a checkpoint without its counts goes on as one with them: they are counted from the items", async () => {
    const d = def({ nodes: [{ id: "each", type: "forEach", config: { items: "$.input.xs", tool: "t", concurrency: 2, itemInput: { x: "$.item" } }, retry: { maxAttempts: 2, initialDelayMs: 0 } }] });
    // Item 1's first call fails (retryable): it goes back to pending below running items.
    const world = (stripFanCounts: boolean): World => ({
      stripFanCounts,
      tools: { t: (a, callId) => (callId.endsWith(".1") ? { ok: false, message: "once", retryable: true } : { ok: true, output: (a.x as number) * 10 }) },
    });
    const kept = await drive(d, world(false), null, { kind: "start", input: { xs: [1, 2, 3, 4, 5] } });
    // Every step from a state as an executor before the counts wrote it.
    const old = await drive(d, world(true), null, { kind: "start", input: { xs: [1, 2, 3, 4, 5] } });
    expect(kept.state.output).toEqual([10, 20, 30, 40, 50]);
    expect(old.state.output).toEqual(kept.state.output);
    expect(calls(old).map((c) => c.callId)).toEqual(calls(kept).map((c) => c.callId));
    expect(calls(kept).map((c) => c.callId)).toContain("7.each.1.1-2");
  });

  it("fails on an item's error unless continueOnError; an empty list completes at once", async () => {
    const mk = (continueOnError: boolean) => def({ nodes: [{ id: "each", type: "forEach", config: { items: "$.input.xs", tool: "t", continueOnError } }] });
    const t: ToolFn = (a) => (a.value === 2 ? { ok: false, retryable: false, message: "two", code: "E_TWO" } : { ok: true, output: a.value ?? null });
    const failed = await drive(mk(false), { tools: { t } }, null, { kind: "start", input: { xs: [1, 2, 3] } });
    expect(failed.state.error).toMatchObject({ code: "E_TWO", nodeId: "each" });
    const kept = await drive(mk(true), { tools: { t } }, null, { kind: "start", input: { xs: [1, 2, 3] } });
    expect(kept.state.output).toEqual([1, { error: { code: "E_TWO", message: "two" } }, 3]);
    const empty = await drive(mk(false), { tools: { t } }, null, { kind: "start", input: { xs: [] } });
    expect(empty.state.output).toEqual([]);
    const notList = await drive(mk(false), { tools: { t } }, null, { kind: "start", input: { xs: 5 } });
    expect(notList.state.error).toMatchObject({ code: "BATON_FOREACH_NOT_A_LIST" });
  });

  it("runs an inline body as a child run per item", async () => {
    const d = def({
      nodes: [{
        id: "each", type: "forEach",
        config: { items: "$.input.xs", body: { nodes: [{ id: "dbl", type: "transform", config: { expression: "input.item * 2" } }] } },
      }],
    });
    const r = await drive(d, {}, null, { kind: "start", input: { xs: [1, 2, 3] } });
    expect(r.state.output).toEqual([2, 4, 6]);
    expect(r.effects.filter((e) => e.kind === "startChild").map((e) => (e as { definitionRef: string }).definitionRef)).toEqual(["each", "each", "each"]);
  });

  it("a subworkflow node waits for its child and takes its output; a failed child fails the node", async () => {
    const child = def({ nodes: [{ id: "c", type: "transform", config: { expression: "input.q & '!'" } }] });
    const d = def({ nodes: [{ id: "sub", type: "subworkflow", config: { workflow: { slug: "shout" } }, input: { q: "$.input.q" } }] });
    const r = await drive(d, { workflows: { shout: child } }, null, { kind: "start", input: { q: "hi" } });
    expect(r.state.output).toBe("hi!");
    const bad = def({ nodes: [{ id: "c", type: "transform", config: { expression: "$error('child broke')" } }] });
    const f = await drive(d, { workflows: { shout: bad } }, null, { kind: "start", input: { q: "hi" } });
    expect(f.state.status).toBe("failed");
    expect(f.state.error).toMatchObject({ code: "BATON_EXPRESSION_FAILED", nodeId: "sub" });
  });

  it("a cancelled child fails the node with BATON_CHILD_CANCELLED and the reason it told", async () => {
    const d = def({
      nodes: [{ id: "s", type: "setVariable", config: { values: { "$.vars.go": true } } }, { id: "sub", type: "subworkflow", config: { workflow: { slug: "slow" } } }, { id: "each", type: "forEach", config: { items: "$.input.xs", continueOnError: true, workflow: { slug: "slow" } } }],
      edges: [{ from: "s", to: "sub" }, { from: "s", to: "each" }],
    });
    const at = (t: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, t)).toISOString();
    const settle = async (state: ExecutionState | null, command: Command, t: number) => {
      let r = await step({ definition: d, state: state && deepFreeze(state), command, now: at(t), identity });
      const effects = [...r.effects];
      while (r.more) {
        r = await step({ definition: d, state: r.state, command: { kind: "continue" }, now: at(t), identity });
        effects.push(...r.effects);
      }
      return { state: r.state, effects, journal: effects.flatMap((e) => (e.kind === "journal" ? [e.entry] : [])) };
    };
    const started = await settle(null, { kind: "start", input: { xs: [1] } }, 1);
    const key = (nodeId: string) => started.effects.flatMap((e) => (e.kind === "startChild" && e.nodeId === nodeId ? [e.childKey] : []))[0]!;
    // Told with the cancel's reason (a child of this release), and without one (an older child).
    const told = await settle(started.state, { kind: "childResult", nodeId: "sub", childKey: key("sub"), status: "cancelled", error: { code: "BATON_CANCELLED", message: "out of budget" } }, 2);
    expect(told.journal.find((j) => j.nodeId === "sub")).toMatchObject({ status: "failed", errorCode: "BATON_CHILD_CANCELLED", error: "child run cancelled: out of budget" });
    const untold = await settle(started.state, { kind: "childResult", nodeId: "sub", childKey: key("sub"), status: "cancelled" }, 2);
    expect(untold.journal.find((j) => j.nodeId === "sub")).toMatchObject({ status: "failed", errorCode: "BATON_CHILD_CANCELLED", error: "child run cancelled" });
    // A forEach item that records its failure keeps the same.
    const item = await settle(started.state, { kind: "childResult", nodeId: "each", childKey: key("each"), status: "cancelled", error: { code: "BATON_CANCELLED", message: "not needed" } }, 3);
    expect(item.journal.find((j) => j.nodeId === "each")).toMatchObject({ status: "completed", output: [{ error: expect.objectContaining({ code: "BATON_CHILD_CANCELLED", message: "child run cancelled: not needed" }) }] });
  });
});

describe("step: retries, timeouts, delays, deadlines, cancel", () => {
  it("retries with exponential backoff timers, then succeeds or gives up", async () => {
    const d = def({ nodes: [{ id: "a", type: "tool", config: { tool: "f" }, retry: { maxAttempts: 3, initialDelayMs: 1000, jitter: 0 } }] });
    let n = 0;
    const ok = await drive(d, { tools: { f: () => (++n < 3 ? { ok: false, retryable: true, message: "busy" } : { ok: true, output: "done" }) } }, null, { kind: "start", input: {} });
    expect(ok.state.status).toBe("completed");
    expect(calls(ok).map((c) => c.callId)).toEqual(["7.a.1", "7.a.2", "7.a.3"]);
    const timers = ok.effects.flatMap((e) => (e.kind === "setTimer" ? [e] : []));
    expect(timers.map((t) => t.timerId)).toEqual(["retry:a:1", "retry:a:2"]);
    const waits = ok.effects.filter((e) => e.kind === "setTimer").map((e, i) => Date.parse((e as { dueAt: string }).dueAt) - Date.parse(ok.journal.filter((j) => j.status === "failed")[i]!.completedAt!));
    expect(waits).toEqual([1000, 2000]);
    const never = await drive(d, { tools: { f: () => ({ ok: false, retryable: true, message: "down" }) } }, null, { kind: "start", input: {} });
    expect(never.state.error!.message).toContain("after 3 attempt(s)");
    const fatal = await drive(d, { tools: { f: () => ({ ok: false, retryable: false, message: "bad args" }) } }, null, { kind: "start", input: {} });
    expect(fatal.state.nodes.a!.attempt).toBe(1);
  });

  it("backoff is capped and its jitter is deterministic per call", () => {
    const p = { maxAttempts: 10, initialDelayMs: 100, backoffMultiplier: 3, maxDelayMs: 1000, jitter: 0.5 };
    expect(backoffDelay(p, 1, "x")).toBe(backoffDelay(p, 1, "x"));
    expect(backoffDelay({ ...p, jitter: 0 }, 5, "x")).toBe(1000);
    // maxDelayMs bounds the jittered wait too.
    for (const seed of ["a", "b", "c", "d", "e", "f"]) expect(backoffDelay(p, 5, seed)).toBeLessThanOrEqual(1000);
    for (const seed of ["a", "b", "c", "d"]) {
      const d = backoffDelay(p, 2, seed);
      expect(d).toBeGreaterThanOrEqual(150);
      expect(d).toBeLessThanOrEqual(450);
    }
  });

  it("a call without a result past timeoutMs (plus grace) is cancelled and retried", async () => {
    const d = def({ nodes: [{ id: "a", type: "tool", config: { tool: "f" }, timeoutMs: 1000, retry: { maxAttempts: 2, initialDelayMs: 0 } }] });
    let n = 0;
    const r = await drive(d, { tools: { f: () => (++n === 1 ? "hang" : { ok: true, output: "second" }) } }, null, { kind: "start", input: {} });
    expect(r.state.output).toBe("second");
    expect(r.effects).toContainEqual({ kind: "cancelTools", callIds: ["7.a.1"], reason: "node timeout" });
    expect(r.journal).toContainEqual(expect.objectContaining({ nodeId: "a", attempt: 1, status: "failed", errorCode: "BATON_NODE_TIMEOUT" }));
  });

  it("a fan item's call without a result past timeoutMs is cancelled and fails the item, which the retry policy retries", async () => {
    const hangOnce = (): ToolFn => {
      const seen = new Set<string>();
      return (a) => {
        const k = JSON.stringify(a);
        if (k.includes("2") && !seen.has(k)) {
          seen.add(k);
          return "hang";
        }
        return { ok: true, output: a };
      };
    };
    const each = { id: "f", type: "forEach", timeoutMs: 1000, config: { items: "$.input.xs", tool: "f" } };
    const xs = [{ v: 1 }, { v: 2 }, { v: 3 }];
    const retried = await drive(def({ nodes: [{ ...each, retry: { maxAttempts: 2, initialDelayMs: 0 } }] }), { tools: { f: hangOnce() } }, null, { kind: "start", input: { xs } });
    expect(retried.state.status).toBe("completed");
    expect(retried.state.output).toEqual(xs);
    expect(retried.effects).toContainEqual({ kind: "cancelTools", callIds: ["7.f.1.1"], reason: "node timeout" });
    // Without retries the timeout fails the node, and so the run.
    const failed = await drive(def({ nodes: [each] }), { tools: { f: hangOnce() } }, null, { kind: "start", input: { xs } });
    expect(failed.state.error).toMatchObject({ code: "BATON_NODE_TIMEOUT", nodeId: "f" });
    // A multi-call node's calls alike.
    const multi = def({ nodes: [{ id: "m", type: "tool", timeoutMs: 1000, retry: { maxAttempts: 2, initialDelayMs: 0 }, config: { calls: xs.map((x) => ({ tool: "f", input: x })) } }] });
    const m = await drive(multi, { tools: { f: hangOnce() } }, null, { kind: "start", input: {} });
    expect(m.state.status).toBe("completed");
    expect(m.effects).toContainEqual({ kind: "cancelTools", callIds: ["7.m.1.1"], reason: "node timeout" });
  });

  it("an answered item's timeout timer leaves the state; a stale one changes nothing", async () => {
    const d = def({ nodes: [{ id: "f", type: "forEach", timeoutMs: 1000, config: { items: "$.input.xs", tool: "f" } }] });
    const now = new Date(t0).toISOString();
    const start = await step({ definition: d, state: null, command: { kind: "start", input: { xs: [{ v: 1 }, { v: 2 }] } }, now, identity });
    expect(Object.keys(start.state.timers ?? {}).sort()).toEqual(["timeout:f:1:0", "timeout:f:1:1"]);
    const one = await step({ definition: d, state: start.state, command: { kind: "toolResult", nodeId: "f", callId: "7.f.1.0", ok: true, output: 1, durationMs: 1 }, now });
    expect(Object.keys(one.state.timers ?? {})).toEqual(["timeout:f:1:1"]);
    expect((await step({ definition: d, state: one.state, command: { kind: "timer", timerId: "timeout:f:1:0" }, now })).ignored).toBeDefined();
  });

  it("a multi-call node's call keeps its idempotency key on every attempt", async () => {
    const d = def({ nodes: [{ id: "m", type: "tool", retry: { maxAttempts: 3, initialDelayMs: 0 }, config: { calls: [{ tool: "f", input: { a: 1 } }, { tool: "f", input: { a: 2 } }] } }] });
    let n = 0;
    const r = await drive(d, { tools: { f: (a) => (a.a === 1 && ++n < 3 ? { ok: false, retryable: true, message: "busy" } : { ok: true, output: a }) } }, null, { kind: "start", input: {} });
    expect(r.state.status).toBe("completed");
    const keys = calls(r).filter((c) => (c.args as { a: number }).a === 1).map((c) => [c.callId, c.idempotencyKey]);
    expect(keys).toEqual([["7.m.1.0", "7.m.0"], ["7.m.1.0-2", "7.m.0"], ["7.m.1.0-3", "7.m.0"]]);
  });

  it("a delay node waits for its durable timer", async () => {
    const d = def({ nodes: [{ id: "w", type: "delay", config: { ms: 60000 } }] });
    const first = await step({ definition: d, state: null, command: { kind: "start", input: {} }, now: "2026-01-01T00:00:00.000Z", identity });
    expect(first.effects).toContainEqual({ kind: "setTimer", timerId: "delay:w:1", dueAt: "2026-01-01T00:01:00.000Z" });
    expect(first.state.status).toBe("running");
    const early = await step({ definition: d, state: first.state, command: { kind: "timer", timerId: "nope" }, now: "2026-01-01T00:01:00.000Z" });
    expect(early.ignored).toBeDefined();
    const fired = await step({ definition: d, state: first.state, command: { kind: "timer", timerId: "delay:w:1" }, now: "2026-01-01T00:01:00.000Z" });
    expect(fired.state.status).toBe("completed");
  });

  it("the deadline fails the execution and cancels what is running", async () => {
    const d = def({ limits: { deadlineMs: 5000 }, nodes: [{ id: "a", type: "tool", config: { tool: "f" } }] });
    const r = await drive(d, { tools: { f: () => "hang" } }, null, { kind: "start", input: {} });
    expect(r.state.status).toBe("failed");
    expect(r.state.error!.code).toBe("BATON_DEADLINE_EXCEEDED");
    expect(r.effects).toContainEqual(expect.objectContaining({ kind: "cancelTools", callIds: ["7.a.1"] }));
  });

  it("a deadline that passed ends the run at the next command, whenever its timer comes, and that command is not applied", async () => {
    const d = def({
      limits: { deadlineMs: 5000 },
      nodes: [{ id: "a", type: "tool", config: { tool: "f" }, retry: { maxAttempts: 3, initialDelayMs: 1000, jitter: 0 } }, { id: "b", type: "tool", config: { tool: "f" } }],
      edges: [{ from: "a", to: "b" }],
    });
    const at = (ms: number) => new Date(t0 + ms).toISOString();
    const started = await step({ definition: d, state: null, command: { kind: "start", input: {} }, now: at(0), identity });
    const result = (ok: boolean, ms: number, state = started.state) =>
      step({ definition: d, state, command: ok ? { kind: "toolResult", nodeId: "a", callId: "7.a.1", ok: true, output: {}, durationMs: 1 } : { kind: "toolResult", nodeId: "a", callId: "7.a.1", ok: false, error: { code: "BUSY", message: "busy", retryable: true }, durationMs: 1 }, now: at(ms) });

    // Before the deadline, the result is applied: b starts.
    const inTime = await result(true, 4999);
    expect([inTime.state.status, inTime.state.nodes.a!.status, inTime.state.nodes.b!.status]).toEqual(["running", "completed", "running"]);

    // After it, with the deadline's timer not come yet: the run fails for its deadline, as if
    // the timer had come first; a's answer is not taken and b never starts.
    const late = await result(true, 5001);
    expect([late.state.status, late.state.error?.code, late.state.nodes.a!.status, late.state.nodes.b]).toEqual(["failed", "BATON_DEADLINE_EXCEEDED", "failed", undefined]);
    expect(late.ignored).toBeUndefined();
    expect(late.effects).toContainEqual(expect.objectContaining({ kind: "cancelTools", callIds: ["7.a.1"] }));
    expect(late.effects.flatMap((e) => (e.kind === "emit" ? [e.event.kind] : []))).toEqual(["node.failed", "execution.failed"]);
    // The same step as the timer's own, which then finds the run ended.
    const byTimer = await step({ definition: d, state: started.state, command: { kind: "timer", timerId: DEADLINE_TIMER_ID }, now: at(5001) });
    expect(late.state).toEqual(byTimer.state);
    expect(late.effects).toEqual(byTimer.effects);
    expect((await step({ definition: d, state: late.state, command: { kind: "timer", timerId: DEADLINE_TIMER_ID }, now: at(9000) })).ignored).toBe("execution is failed");

    // A retry's timer that comes after the deadline starts no attempt.
    const failed = await result(false, 1000);
    expect(failed.state.nodes.a!.timerId).toBe("retry:a:1");
    const retry = await step({ definition: d, state: failed.state, command: { kind: "timer", timerId: "retry:a:1" }, now: at(6000) });
    expect([retry.state.status, retry.state.error?.code, retry.state.nodes.a!.attempt]).toEqual(["failed", "BATON_DEADLINE_EXCEEDED", 1]);
    expect(retry.effects.some((e) => e.kind === "callTool")).toBe(false);
  });

  it("the earlier of the start's deadline (a caller's, or a parent's) and the definition's own limit applies", async () => {
    const d = def({ limits: { deadlineMs: 5000 }, nodes: [{ id: "a", type: "tool", config: { tool: "f" } }] });
    const now = new Date(t0).toISOString();
    const at = (ms: number) => new Date(t0 + ms).toISOString();
    const deadlineOf = async (deadline?: string) => (await step({ definition: d, state: null, command: { kind: "start", input: {}, ...(deadline ? { deadline } : {}) }, now, identity })).state.deadlineAt;
    expect(await deadlineOf()).toBe(at(5000));
    expect(await deadlineOf(at(60_000))).toBe(at(5000));
    expect(await deadlineOf(at(2000))).toBe(at(2000));
    const open = def({ nodes: [{ id: "a", type: "tool", config: { tool: "f" } }] });
    expect((await step({ definition: open, state: null, command: { kind: "start", input: {}, deadline: at(60_000) }, now, identity })).state.deadlineAt).toBe(at(60_000));
  });

  it("a start whose deadline passed already (a run that waited queued) fails at once, and no node runs", async () => {
    const d = def({ nodes: [{ id: "a", type: "tool", config: { tool: "f" } }] });
    const now = new Date(t0).toISOString();
    const r = await step({ definition: d, state: null, command: { kind: "start", input: {}, deadline: new Date(t0 - 1).toISOString() }, now, identity });
    expect(r.state.status).toBe("failed");
    expect(r.state.error).toMatchObject({ code: "BATON_DEADLINE_EXCEEDED" });
    expect(r.effects.map((e) => (e.kind === "emit" ? e.event.kind : e.kind))).toEqual(["execution.started", "execution.failed"]);
  });

  it("cancel stops running calls and children and leaves a consistent record", async () => {
    const d = def({ nodes: [{ id: "a", type: "tool", config: { tool: "f" } }] });
    const running = await drive(d, { tools: { f: () => "hang" } }, null, { kind: "start", input: {} });
    const r = await step({ definition: d, state: running.state, command: { kind: "cancel", reason: "user" }, now: new Date(t0).toISOString() });
    expect(r.state.status).toBe("cancelled");
    // The calls are told why, and the attempts stopped fail with it; so does the run.
    expect(r.effects).toContainEqual({ kind: "cancelTools", callIds: ["7.a.1"], reason: "user" });
    expect(r.effects).toContainEqual(expect.objectContaining({ kind: "journal", entry: expect.objectContaining({ nodeId: "a", status: "failed", errorCode: "BATON_CANCELLED", error: "user" }) }));
    expect(r.state.error).toEqual({ code: "BATON_CANCELLED", message: "user" });
    const late = await step({ definition: d, state: r.state, command: { kind: "toolResult", nodeId: "a", callId: "7.a.1", ok: true, output: 1, durationMs: 1 }, now: new Date(t0).toISOString() });
    expect(late.ignored).toBeDefined();
  });
});

describe("step: references, forks and replay", () => {
  it("reads through blob references and asks for blobs it lacks", async () => {
    const d = def({ nodes: [{ id: "a", type: "tool", config: { tool: "big" } }, { id: "b", type: "transform", config: { expression: "$count(a.rows)" } }], edges: [{ from: "a", to: "b" }] });
    const s1 = await step({ definition: d, state: null, command: { kind: "start", input: {} }, now: new Date(t0).toISOString(), identity });
    const s2 = await step({ definition: d, state: s1.state, command: { kind: "toolResult", nodeId: "a", callId: "7.a.1", ok: true, output: { $ref: "blob:abc", size: 99999 }, durationMs: 1 }, now: new Date(t0).toISOString() });
    await expect(step({ definition: d, state: s2.state, command: { kind: "continue" }, now: new Date(t0).toISOString() })).rejects.toMatchObject({ name: "BlobsNeeded", refs: ["blob:abc"] });
    const s3 = await step({ definition: d, state: s2.state, command: { kind: "continue" }, now: new Date(t0).toISOString(), blobs: new Map([["blob:abc", { rows: [1, 2, 3] }]]) });
    expect(s3.state.output).toBe(3);
    expect(s3.state.context.a).toEqual({ $ref: "blob:abc", size: 99999 });
  });

  it("a step that must read through a reference to a blob the caller found not stored fails the run, and nothing reads the context", async () => {
    const now = new Date(t0).toISOString();
    const gone = new Set(["blob:abc"]);
    // Mid-run: a tool's answer refers to it; the next read fails the run, its other call cancelled.
    const d = def({
      nodes: [
        { id: "s", type: "setVariable", config: { values: { "$.go": true } } },
        { id: "a", type: "tool", config: { tool: "big" } },
        { id: "slow", type: "tool", config: { tool: "slow" } },
        { id: "b", type: "transform", config: { expression: "$count(a.rows)" } },
      ],
      edges: [{ from: "s", to: "a" }, { from: "s", to: "slow" }, { from: "a", to: "b" }],
      output: { n: "$.b" },
    });
    let s1 = await step({ definition: d, state: null, command: { kind: "start", input: {} }, now, identity });
    while (s1.more) s1 = await step({ definition: d, state: s1.state, command: { kind: "continue" }, now });
    expect([s1.state.nodes.a?.status, s1.state.nodes.slow?.status]).toEqual(["running", "running"]);
    const s2 = await step({ definition: d, state: deepFreeze(s1.state), command: { kind: "toolResult", nodeId: "a", callId: "7.a.1", ok: true, output: { $ref: "blob:abc", size: 99999 }, durationMs: 1 }, now });
    const failed = await step({ definition: d, state: deepFreeze(s2.state), command: { kind: "continue" }, now, missingBlobs: gone });
    expect(failed.state).toMatchObject({ status: "failed", output: null, error: { code: "BATON_ENGINE_BLOBS_MISSING", message: "the execution refers to blobs that are not stored: blob:abc" } });
    expect(failed.state.nodes.slow).toMatchObject({ status: "failed" });
    expect(failed.effects).toEqual(expect.arrayContaining([{ kind: "cancelTools", callIds: ["7.slow.1"], reason: expect.any(String) as unknown }]));
    expect(failed.effects.filter((e) => e.kind === "emit").map((e) => e.event.kind)).toContain("execution.failed");
    expect(failed.more).toBe(false);
    // A finished run stays as it was.
    expect(await step({ definition: d, state: failed.state, command: { kind: "continue" }, now, missingBlobs: gone })).toMatchObject({ ignored: "execution is failed", effects: [] });
    // Others still ask for what they lack.
    await expect(step({ definition: d, state: s2.state, command: { kind: "continue" }, now, missingBlobs: new Set(["blob:other"]) })).rejects.toMatchObject({ name: "BlobsNeeded", refs: ["blob:abc"] });

    // At the start: an input that refers to it starts and fails at once.
    const reader = def({ nodes: [{ id: "t", type: "transform", config: { expression: "input.x.n" } }] });
    const start = await step({ definition: reader, state: null, command: { kind: "start", input: { x: { $ref: "blob:abc", size: 3 } } }, now, identity, missingBlobs: gone });
    expect(start.state).toMatchObject({ status: "failed", error: { code: "BATON_ENGINE_BLOBS_MISSING" } });
    expect(start.effects.filter((e) => e.kind === "emit").map((e) => e.event.kind)).toEqual(["execution.started", "execution.failed"]);

    // Rebuilt from a journal: the replay ends failed, it does not ask again.
    const replay = await replayJournal({
      definition: reader, identity, start: { kind: "start", input: { x: { $ref: "blob:abc", size: 3 } } }, journal: [], startedAt: now, missingBlobs: gone,
    });
    expect(replay.state).toMatchObject({ status: "failed", error: { code: "BATON_ENGINE_BLOBS_MISSING" } });
  });

  it("abort fails the run from outside without reading its state: calls cancelled, output null; a finished run stays", async () => {
    const now = new Date(t0).toISOString();
    const d = def({
      nodes: [{ id: "s", type: "setVariable", config: { values: { x: 1 } } }, { id: "a", type: "tool", config: { tool: "t" } }],
      edges: [{ from: "s", to: "a" }],
      output: { x: "$.x" },
    });
    let r = await step({ definition: d, state: null, command: { kind: "start", input: {} }, now, identity });
    while (r.more) r = await step({ definition: d, state: r.state, command: { kind: "continue" }, now });
    const error = { code: "BATON_EXECUTOR_COMMAND_FAILED", message: "the tool.result command could not be applied" };
    const aborted = await step({ definition: d, state: deepFreeze(r.state), command: { kind: "abort", error }, now });
    expect(aborted.state).toMatchObject({ status: "failed", output: null, error, nodes: { a: { status: "failed" } } });
    expect(aborted.effects).toEqual(expect.arrayContaining([{ kind: "cancelTools", callIds: ["7.a.1"], reason: error.message }]));
    expect(aborted.effects.flatMap((e) => (e.kind === "emit" ? [e.event.kind] : []))).toEqual(["node.failed", "execution.failed"]);
    expect(await step({ definition: d, state: aborted.state, command: { kind: "abort", error }, now })).toMatchObject({ ignored: "execution is failed", effects: [] });
  });

  it("writes under a large value's reference change the value: setVariable, a node's output path and a fork's edit", async () => {
    const big = { n: 5, rows: [1, 2, 3] };
    const blobs = new Map([["blob:abc", big]]);
    const d = def({
      nodes: [
        { id: "a", type: "tool", config: { tool: "big" } },
        { id: "set", type: "setVariable", config: { values: { "$.a.n": 9, "$.a.extra": 1 } } },
        { id: "c", type: "transform", config: { expression: "7" }, output: "$.a.rows[3]" },
        { id: "r", type: "transform", config: { expression: "{ 'n': a.n, 'extra': a.extra, 'rows': a.rows }" } },
      ],
      edges: [{ from: "a", to: "set" }, { from: "set", to: "c" }, { from: "c", to: "r" }],
    });
    const now = new Date(t0).toISOString();
    const s1 = await step({ definition: d, state: null, command: { kind: "start", input: {} }, now, identity });
    const result = { kind: "toolResult", nodeId: "a", callId: "7.a.1", ok: true, output: { $ref: "blob:abc", size: 99999 }, durationMs: 1 } as const;
    const s2 = await step({ definition: d, state: s1.state, command: result, now });
    expect(s2.more).toBe(true);
    // Without the blob, the write asks for it, as a read does.
    await expect(step({ definition: d, state: s2.state, command: { kind: "continue" }, now })).rejects.toMatchObject({ name: "BlobsNeeded", refs: ["blob:abc"] });
    let r = s2;
    while (r.more) r = await step({ definition: d, state: r.state, command: { kind: "continue" }, now, blobs });
    expect(r.state.output).toEqual({ n: 9, extra: 1, rows: [1, 2, 3, 7] });
    expect(r.state.context.a).toEqual({ n: 9, extra: 1, rows: [1, 2, 3, 7] });
    expect(big).toEqual({ n: 5, rows: [1, 2, 3] });

    // A fork whose edit goes under a reference.
    const d2 = def({ nodes: [{ id: "a", type: "tool", config: { tool: "big" } }, { id: "r", type: "transform", config: { expression: "a.n" } }], edges: [{ from: "a", to: "r" }] });
    const source = { ...s1.state, context: { ...s1.state.context, a: { $ref: "blob:abc", size: 99999 } }, nodes: { a: { status: "completed" as const, attempt: 1 } }, ready: ["r"] };
    const fork = { kind: "start", input: {}, fork: { state: source, executionId: 7, version: 3, contextPatch: { "$.a.n": 7 } } } as const;
    await expect(step({ definition: d2, state: null, command: fork, now, identity: { ...identity, executionId: 8 } })).rejects.toMatchObject({ name: "BlobsNeeded" });
    let f = await step({ definition: d2, state: null, command: fork, now, identity: { ...identity, executionId: 8 }, blobs });
    while (f.more) f = await step({ definition: d2, state: f.state, command: { kind: "continue" }, now, blobs });
    expect(f.state.output).toBe(7);
  });

  it("a fork starts from a checkpoint with edited context and re-runs what was in flight", async () => {
    const d = def({ nodes: [{ id: "a", type: "tool", config: { tool: "f" } }, { id: "b", type: "tool", config: { tool: "g" }, input: { x: "$.vars.x" } }], edges: [{ from: "a", to: "b" }] });
    const mid = await drive(d, { tools: { f: echo, g: () => "hang" } }, null, { kind: "start", input: {} });
    expect(mid.state.nodes.b!.status).toBe("running");
    const forked = forkState(mid.state, { ...identity, executionId: 8 }, { executionId: 7, version: 3 }, new Date(t0).toISOString());
    expect(forked.ready).toEqual(["b"]);
    const r = await drive(d, { tools: { f: echo, g: echo } }, null, { kind: "start", input: {}, fork: { state: mid.state, executionId: 7, version: 3, contextPatch: { "$.vars.x": 42 } } }, { ...identity, executionId: 8 });
    expect(r.state.status).toBe("completed");
    expect(r.state.forkedFrom).toEqual({ executionId: 7, version: 3 });
    expect(r.state.output).toEqual({ x: 42 });
    expect(calls(r).map((c) => c.tool)).toEqual(["g"]);
  });

  it("a fork taken mid-forEach keeps the items done then and runs the others", async () => {
    const d = def({ nodes: [{ id: "each", type: "forEach", config: { items: "$.input.xs", tool: "f", concurrency: 1 } }], output: { each: "$.each" } });
    // The source answers the first two items and leaves the third out.
    const v = (a: JsonObject) => a.value as number;
    const mid = await drive(d, { tools: { f: (a) => (v(a) < 3 ? { ok: true, output: v(a) * 10 } : "hang") } }, null, { kind: "start", input: { xs: [1, 2, 3, 4] } });
    expect(mid.state.nodes.each!.fan!.items.map((i) => i.status)).toEqual(["done", "done", "running", "pending"]);
    const r = await drive(d, { tools: { f: (a) => ({ ok: true, output: v(a) * 100 }) } }, null, { kind: "start", input: { xs: [1, 2, 3, 4] }, fork: { state: mid.state, executionId: 7, version: 3 } }, { ...identity, executionId: 8 });
    expect(r.state.status).toBe("completed");
    expect(r.state.output).toEqual({ each: [10, 20, 300, 400] });
    expect(calls(r).map((c) => c.args)).toEqual([{ value: 3 }, { value: 4 }]);
    // A fork that edits the list to another length runs it whole.
    const edited = await drive(d, { tools: { f: (a) => ({ ok: true, output: v(a) * 100 }) } }, null, { kind: "start", input: { xs: [1, 2, 3, 4] }, fork: { state: { ...mid.state, context: { ...mid.state.context, input: { xs: [5, 6] } } }, executionId: 7, version: 3 } }, { ...identity, executionId: 8 });
    expect(edited.state.output).toEqual({ each: [500, 600] });
  });

  it("a fork of a run that a forEach item failed, or that was cancelled mid-forEach, keeps the items done then and runs the others", async () => {
    const d = def({ nodes: [{ id: "each", type: "forEach", config: { items: "$.input.xs", tool: "f", concurrency: 2 } }], output: { each: "$.each" } });
    const v = (a: JsonObject) => a.value as number;
    const xs = [1, 2, 3, 4, 5];
    // Item 2 (the third) fails the node while item 3 is out; items 0 and 1 are done.
    const failed = await drive(d, { tools: { f: (a) => (v(a) === 3 ? { ok: false, retryable: false, message: "bad" } : v(a) === 4 ? "hang" : { ok: true, output: v(a) * 10 }) } }, null, { kind: "start", input: { xs } });
    expect(failed.state.status).toBe("failed");
    const again = await drive(d, { tools: { f: (a) => ({ ok: true, output: v(a) * 100 }) } }, null, { kind: "start", input: { xs }, fork: { state: failed.state, executionId: 7, version: 4 } }, { ...identity, executionId: 8 });
    expect(again.state.output).toEqual({ each: [10, 20, 300, 400, 500] });
    expect(calls(again).map((c) => c.args)).toEqual([{ value: 3 }, { value: 4 }, { value: 5 }]);
    // Cancelled with items 0 and 1 done and 2 and 3 out.
    const running = await drive(d, { tools: { f: (a) => (v(a) > 2 ? "hang" : { ok: true, output: v(a) * 10 }) } }, null, { kind: "start", input: { xs } });
    const cancelled = await step({ definition: d, state: running.state, command: { kind: "cancel", reason: "stop" }, now: new Date(running.now + 1).toISOString() });
    expect(cancelled.state.status).toBe("cancelled");
    const resumed = await drive(d, { tools: { f: (a) => ({ ok: true, output: v(a) * 100 }) } }, null, { kind: "start", input: { xs }, fork: { state: cancelled.state, executionId: 7, version: 5 } }, { ...identity, executionId: 9 });
    expect(resumed.state.output).toEqual({ each: [10, 20, 300, 400, 500] });
    expect(calls(resumed).map((c) => c.args)).toEqual([{ value: 3 }, { value: 4 }, { value: 5 }]);
  });

  it("a fork of a run that failed or was cancelled runs again what failed, what was stopped with it, and what was ready", async () => {
    // s → {bad, slow} → j; with maxConcurrency 1, `slow` is still only ready when `bad` fails.
    const d = def({
      nodes: [
        { id: "s", type: "setVariable", config: { values: { "$.vars.x": 1 } } },
        { id: "bad", type: "tool", config: { tool: "bad" } },
        { id: "slow", type: "tool", config: { tool: "slow" } },
        { id: "j", type: "transform", config: { expression: "[bad.ok, slow.ok]" } },
      ],
      edges: [{ from: "s", to: "bad" }, { from: "s", to: "slow" }, { from: "bad", to: "j" }, { from: "slow", to: "j" }],
      limits: { maxConcurrency: 1 },
    });
    const ok: ToolFn = () => ({ ok: true, output: { ok: true } });
    const failed = await drive(d, { tools: { bad: () => ({ ok: false, retryable: false, message: "down" }), slow: ok } }, null, { kind: "start", input: {} });
    expect(failed.state.status).toBe("failed");
    expect(failed.state.nodes.slow!.status).toBe("waiting"); // never started: it was ready
    const fork = { state: failed.state, executionId: 7, version: 4 };
    const again = await drive(d, { tools: { bad: ok, slow: ok } }, null, { kind: "start", input: {}, fork }, { ...identity, executionId: 8 });
    expect({ status: again.state.status, output: again.state.output }).toEqual({ status: "completed", output: [true, true] });
    expect(calls(again).map((c) => c.tool).sort()).toEqual(["bad", "slow"]);

    // Cancelled while both ran: both were stopped (failed, BATON_CANCELLED), and both run again.
    const both = def({ ...d, limits: undefined });
    const running = await drive(both, { tools: { bad: () => "hang", slow: () => "hang" } }, null, { kind: "start", input: {} });
    const cancelled = await step({ definition: both, state: running.state, command: { kind: "cancel", reason: "stop" }, now: new Date(running.now + 1).toISOString() });
    expect(cancelled.state.status).toBe("cancelled");
    const resumed = await drive(both, { tools: { bad: ok, slow: ok } }, null, { kind: "start", input: {}, fork: { state: cancelled.state, executionId: 7, version: 5 } }, { ...identity, executionId: 9 });
    expect({ status: resumed.state.status, output: resumed.state.output }).toEqual({ status: "completed", output: [true, true] });
  });

  it("a fork of a sub-workflow's run is a run of its own: no parent, no root", () => {
    const d = def({ nodes: [{ id: "a", type: "tool", config: { tool: "f" } }] });
    const child: ExecutionState = {
      v: 1, ...identity, status: "running", context: { input: {} }, nodes: {}, edges: {}, ready: ["a"], pauseSeq: 0, startedAt: new Date(t0).toISOString(),
      parent: { executionId: 3, nodeId: "sub", childKey: "1" }, rootExecutionId: 3,
    };
    const forked = forkState(child, { ...identity, executionId: 8 }, { executionId: 7, version: 1 }, new Date(t0).toISOString());
    expect(forked.parent).toBeUndefined();
    expect(forked.rootExecutionId).toBeUndefined();
    expect(d.start).toBe("a");
  });

  it("replaying the journal rebuilds the state, and only in-flight work is re-issued", async () => {
    const d = def({
      nodes: [
        { id: "a", type: "tool", config: { tool: "f" }, retry: { maxAttempts: 2, initialDelayMs: 10 } },
        { id: "c", type: "condition", config: { left: "$.a.v", op: "gt", right: 1 } },
        { id: "b", type: "tool", config: { tool: "g" } },
        { id: "r", type: "humanReview", config: { reason: "ok?" } },
      ],
      edges: [{ from: "a", to: "c" }, { from: "c", to: "b", when: "true" }, { from: "b", to: "r" }],
    });
    let n = 0;
    const live = await drive(d, { tools: { f: () => (++n === 1 ? { ok: false, retryable: true, message: "flaky" } : { ok: true, output: { v: 2 } }), g: () => "hang" } }, null, { kind: "start", input: { q: 1 } });
    const rebuilt = await replayJournal({ definition: d, identity, start: { kind: "start", input: { q: 1 } }, journal: live.journal, startedAt: new Date(t0).toISOString() });
    expect(rebuilt.unplaced).toEqual([]);
    expect(rebuilt.state.context).toEqual(live.state.context);
    expect(rebuilt.state.nodes.b).toMatchObject({ status: "running", callId: "7.b.1" });
    expect(rebuilt.rearm).toEqual([expect.objectContaining({ kind: "callTool", callId: "7.b.1" })]);
    // finish b, pause at the review, and rebuild again: the review is re-armed, nothing else
    const paused = await drive(d, { tools: { g: echo } }, live.state, { kind: "toolResult", nodeId: "b", callId: "7.b.1", ok: true, output: "B", durationMs: 1 });
    const again = await replayJournal({ definition: d, identity, start: { kind: "start", input: { q: 1 } }, journal: [...live.journal, ...paused.journal], startedAt: new Date(t0).toISOString() });
    expect(again.state.status).toBe("paused");
    expect(again.rearm.map((e) => e.kind)).toEqual(["review"]);
  });

  it("replay puts a retry's attempt that started back in flight, not back in its backoff", async () => {
    const d = def({ nodes: [{ id: "f", type: "tool", config: { tool: "f" }, retry: { maxAttempts: 3, initialDelayMs: 10, jitter: 0 } }] });
    let n = 0;
    const live = await drive(d, { tools: { f: () => (++n === 1 ? { ok: false, retryable: true, message: "flaky" } : "hang") } }, null, { kind: "start", input: {} });
    expect(live.state.nodes.f).toMatchObject({ status: "running", attempt: 2, callId: "7.f.2" });
    const rebuilt = await replayJournal({ definition: d, identity, start: { kind: "start", input: {} }, journal: live.journal, startedAt: new Date(t0).toISOString() });
    expect(rebuilt.unplaced).toEqual([]);
    expect(rebuilt.state.nodes.f).toMatchObject({ status: "running", attempt: 2, callId: "7.f.2" });
    expect(rebuilt.state.nodes.f!.timerId).toBeUndefined();
    expect(rebuilt.rearm.map((e) => (e.kind === "callTool" ? `call ${e.callId}` : e.kind))).toEqual(["call 7.f.2"]);
  });

  it("replay places a finished fan-out node from its journal row and pauses where the run paused", async () => {
    const d = def({
      nodes: [
        { id: "each", type: "forEach", config: { items: "$.input.xs", tool: "sq" } },
        { id: "r", type: "humanReview", config: { reason: "ok?", subject: "$.each" } },
      ],
      edges: [{ from: "each", to: "r" }],
    });
    const live = await drive(d, { tools: { sq: (a) => ({ ok: true, output: ((a.value as number) ** 2) }) } }, null, { kind: "start", input: { xs: [1, 2] } });
    expect(live.state.status).toBe("paused");
    const rebuilt = await replayJournal({ definition: d, identity, start: { kind: "start", input: { xs: [1, 2] } }, journal: live.journal, startedAt: new Date(t0).toISOString() });
    expect(rebuilt.unplaced).toEqual([]);
    expect(rebuilt.state.status).toBe("paused");
    expect(rebuilt.state.context.each).toEqual([1, 4]);
    expect(rebuilt.rearm.map((e) => e.kind)).toEqual(["review"]);
  });
});

describe("replay: the records of steps lost with the checkpoint", () => {
  // A step's checkpoint is written before its rows and events. An executor that died while
  // writing them, whose checkpoint Redis then lost, left them nowhere: the rebuild must write them.
  const d = def({
    nodes: [
      { id: "a", type: "tool", config: { tool: "f" } },
      { id: "b", type: "transform", config: { expression: "a.v + 1" } },
      { id: "c", type: "transform", config: { expression: "b * 2" } },
      { id: "d", type: "tool", config: { tool: "g" }, input: { v: "$.c" } },
    ],
    edges: [{ from: "a", to: "b" }, { from: "b", to: "c" }, { from: "c", to: "d" }],
  });
  const entry = (j: JournalEntry): string => `${j.nodeId}#${j.attempt}:${j.status}`;
  const records = (effects: Effect[]): string[] => effects.map((e) => (e.kind === "journal" ? `row ${entry(e.entry)}` : e.kind === "emit" ? `event ${e.event.kind}${"nodeId" in e.event ? ":" + e.event.nodeId : ""}` : e.kind));

  it("gives back the rows and events of the steps after the last one journaled, in order", async () => {
    const live = await drive(d, { tools: { f: () => ({ ok: true, output: { v: 20 } }), g: () => "hang" } }, null, { kind: "start", input: {} });
    expect(live.state.nodes.d).toMatchObject({ status: "running" });
    // The rows up to a's end were written; those of b, c and d's start were not.
    const upToA = live.journal.slice(0, live.journal.findIndex((j) => j.nodeId === "a" && j.status === "completed") + 1);
    const rebuilt = await replayJournal({ definition: d, identity, start: { kind: "start", input: {} }, journal: upToA, startedAt: new Date(t0).toISOString() });
    expect(rebuilt.unplaced).toEqual([]);
    expect(rebuilt.state.nodes.d).toMatchObject({ status: "running", callId: "7.d.1" });
    const lost = [
      "event node.started:b", "row b#1:running", "event node.completed:b", "row b#1:completed",
      "event node.started:c", "row c#1:running", "event node.completed:c", "row c#1:completed",
      "event node.started:d", "row d#1:running",
    ];
    expect(records(rebuilt.unrecorded)).toEqual(lost);
    // As the live run had them, in its order.
    expect(records(live.effects).filter((r) => lost.includes(r))).toEqual(lost);
    // Rows of later steps landed (statements overlap) but b's did not: b's row is written, and the
    // events from b's step on, none of which went out (events follow the steps' order).
    const withoutB = live.journal.filter((j) => j.nodeId !== "b");
    const partly = await replayJournal({ definition: d, identity, start: { kind: "start", input: {} }, journal: withoutB, startedAt: new Date(t0).toISOString() });
    expect(records(partly.unrecorded)).toEqual(lost.filter((r) => !r.startsWith("row ") || r.startsWith("row b#")));
    // The whole journal: nothing was lost.
    const whole = await replayJournal({ definition: d, identity, start: { kind: "start", input: {} }, journal: live.journal, startedAt: new Date(t0).toISOString() });
    expect(whole.unrecorded).toEqual([]);
    // A row written later for the same attempt (d finished) counts as d's start written.
    const done = [...live.journal, { nodeId: "d", nodeType: "tool", attempt: 1, status: "completed" as const, output: "D" }];
    expect((await replayJournal({ definition: d, identity, start: { kind: "start", input: {} }, journal: done, startedAt: new Date(t0).toISOString() })).unrecorded).toEqual([]);
  });

  it("gives back the events of the steps whose rows were written and whose events never went out (chaos seed 841)", async () => {
    const live = await drive(d, { tools: { f: () => ({ ok: true, output: { v: 20 } }), g: () => "hang" } }, null, { kind: "start", input: {} });
    // Step 1 started a; step 2 (a's result) ended a, ran b and c, started d. Its rows were all
    // written (each row's step says so), but the executor died before its events went out.
    // The journal holds one row per attempt, merged by step: its last write, and that step's number.
    const merged = new Map<string, JournalEntry & { stepVersion: number }>();
    for (const j of live.journal) merged.set(`${j.nodeId}#${j.attempt}`, { ...j, stepVersion: j.nodeId === "a" && j.status === "running" ? 1 : 2 });
    const journal = [...merged.values()];
    expect(journal.find((j) => j.nodeId === "a")).toMatchObject({ status: "completed", stepVersion: 2 });
    const replay = (announcedThrough?: number) => replayJournal({
      definition: d, identity, start: { kind: "start", input: {} }, journal, startedAt: new Date(t0).toISOString(), ...(announcedThrough !== undefined ? { announcedThrough } : {}),
    });
    const untold = ["event node.completed:a", "event node.started:b", "event node.completed:b", "event node.started:c", "event node.completed:c", "event node.started:d"];
    // Published through step 1: step 2's events, and no rows (they are in the journal).
    const through1 = await replay(1);
    expect(through1.unplaced).toEqual([]);
    expect(records(through1.unrecorded)).toEqual(untold);
    // As the live run had them, in its order.
    expect(records(live.effects).filter((r) => untold.includes(r))).toEqual(untold);
    // Published through step 2 (or later): nothing to tell. Not known: as before, nothing.
    expect((await replay(2)).unrecorded).toEqual([]);
    expect((await replay(5)).unrecorded).toEqual([]);
    expect((await replay()).unrecorded).toEqual([]);
    // Through step 1, and a row of step 2 missing too (c's): c's rows are written as well.
    const withoutC = journal.filter((j) => j.nodeId !== "c");
    const partly = await replayJournal({ definition: d, identity, start: { kind: "start", input: {} }, journal: withoutC, startedAt: new Date(t0).toISOString(), announcedThrough: 1 });
    expect(records(partly.unrecorded)).toEqual([...untold.slice(0, 4), "row c#1:running", untold[4], "row c#1:completed", untold[5]]);
  });
  it("gives back the events of a retry's start whose only row its unannounced failure wrote again (chaos seed 853)", async () => {
    const r = def({ nodes: [{ id: "f", type: "tool", config: { tool: "f" }, retry: { maxAttempts: 3, initialDelayMs: 10, jitter: 0 } }] });
    let calls = 0;
    const live = await drive(r, { tools: { f: () => (++calls <= 2 ? { ok: false, message: "flaky", retryable: true } : "hang") } }, null, { kind: "start", input: {} });
    // Steps: 1 starts f#1; 2 fails it; 3 (the retry's timer) starts f#2; 4 fails it, its retry's
    // timer set (the rebuild sets it again). Rows of steps 1-4 are written (merged by attempt: the last write and its step); the events
    // went out through step 2. f#2's row says `failed`, written by step 4: no row is step 3's.
    const journal = [
      { nodeId: "f", nodeType: "tool", attempt: 1, status: "failed" as const, error: "flaky", errorCode: "E_TOOL", retryable: true, stepVersion: 2 },
      { nodeId: "f", nodeType: "tool", attempt: 2, status: "failed" as const, error: "flaky", errorCode: "E_TOOL", retryable: true, stepVersion: 4 },
    ];
    expect(live.journal.filter((j) => j.status === "failed").map((j) => `${j.nodeId}#${j.attempt}`)).toEqual(["f#1", "f#2"]);
    const replay = (announced: { announcedThrough?: number; announcedByKind?: Record<string, number> }) => replayJournal({
      definition: r, identity, start: { kind: "start", input: {} }, journal, startedAt: new Date(t0).toISOString(), ...announced,
    });
    const byKind = { "execution.started": 1, "node.started": 1, "node.failed": 2 };
    const told = await replay({ announcedThrough: 2, announcedByKind: byKind });
    expect(told.unplaced).toEqual([]);
    expect(records(told.unrecorded)).toEqual(["event node.started:f", "event node.failed:f"]);
    expect(told.unrecorded.flatMap((e) => (e.kind === "emit" && "attempt" in e.event ? [e.event.attempt] : []))).toEqual([2, 2]);
    expect(told.rearm.map((e) => (e.kind === "setTimer" ? e.timerId : e.kind))).toEqual(["retry:f:2"]);
    // Without the kinds, only the step past the last announced one whose row says so (the gap).
    expect(records((await replay({ announcedThrough: 2 })).unrecorded)).toEqual(["event node.failed:f"]);
    // Step 3's node.started went out (the last node.started is step 3's): from step 4 on.
    expect(records((await replay({ announcedThrough: 3, announcedByKind: { ...byKind, "node.started": 3 } })).unrecorded)).toEqual(["event node.failed:f"]);
    // No event of the run went out (none on a stream that would still hold them): all of them.
    expect(records((await replay({ announcedThrough: 0, announcedByKind: {} })).unrecorded)).toEqual([
      "event execution.started", "event node.started:f", "event node.failed:f", "event node.started:f", "event node.failed:f",
    ]);
    // Everything through step 4 went out: nothing to tell.
    expect((await replay({ announcedThrough: 4, announcedByKind: { ...byKind, "node.started": 3, "node.failed": 4 } })).unrecorded).toEqual([]);
  });

  it("gives back what a cancel whose events never went out stopped, and only that", async () => {
    // After s, a and b run side by side; c waits for both. A cancel stops a's and b's calls: its
    // rows were written (step 2), and its executor died before the stops and the events went out.
    const p = def({
      nodes: [
        { id: "s", type: "transform", config: { expression: "1" } },
        { id: "a", type: "tool", config: { tool: "f" } }, { id: "b", type: "tool", config: { tool: "f" } }, { id: "c", type: "tool", config: { tool: "f" } },
      ],
      edges: [{ from: "s", to: "a" }, { from: "s", to: "b" }, { from: "a", to: "c" }, { from: "b", to: "c" }],
    });
    const running = await drive(p, { tools: { f: () => "hang" } }, null, { kind: "start", input: {} });
    const cancelled = await drive(p, { tools: { f: () => "hang" } }, running.state, { kind: "cancel", reason: "stop" });
    expect(cancelled.state.status).toBe("cancelled");
    expect(cancelled.effects.filter((e) => e.kind === "cancelTools")).toEqual([{ kind: "cancelTools", callIds: ["7.a.1", "7.b.1"], reason: "stop" }]);
    const journal = [
      ...running.journal.map((j) => ({ ...j, stepVersion: 1 })).filter((j) => !cancelled.journal.some((k) => k.nodeId === j.nodeId)),
      ...cancelled.journal.map((j) => ({ ...j, stepVersion: 2 })),
    ];
    expect(journal.map((j) => `${entry(j)}@${j.stepVersion}`)).toEqual(["s#1:running@1", "s#1:completed@1", "a#1:failed@2", "b#1:failed@2"]);
    const replay = (announcedThrough: number) => replayJournal({ definition: p, identity, start: { kind: "start", input: {} }, journal, startedAt: new Date(t0).toISOString(), cancelled: "cancelled", announcedThrough });
    const untold = await replay(1);
    expect(untold.unplaced).toEqual([]);
    expect(untold.state.status).toBe("cancelled");
    expect(untold.rearm).toEqual([]);
    expect(records(untold.unrecorded)).toEqual(["event node.failed:a", "event node.failed:b", "cancelTools", "event execution.cancelled"]);
    expect(untold.unrecorded.find((e) => e.kind === "cancelTools")).toMatchObject({ callIds: ["7.a.1", "7.b.1"] });
    // Its events went out, so its stops did before them: nothing to send again.
    expect((await replay(2)).unrecorded).toEqual([]);
  });
});

describe("step: cancel while a retry waits", () => {
  it("keeps the failed attempt's journal row and event as they were", async () => {
    const d = def({ nodes: [{ id: "f", type: "tool", config: { tool: "f" }, retry: { maxAttempts: 3, initialDelayMs: 60000, jitter: 0 } }] });
    const first = await step({ definition: d, state: null, command: { kind: "start", input: {} }, now: "2026-01-01T00:00:00.000Z", identity });
    const failed = await step({ definition: d, state: first.state, command: { kind: "toolResult", nodeId: "f", callId: "7.f.1", ok: false, error: { code: "E", message: "boom", retryable: true }, durationMs: 1 }, now: "2026-01-01T00:00:01.000Z" });
    expect(failed.state.nodes.f!.timerId).toBe("retry:f:1");
    const cancelled = await step({ definition: d, state: failed.state, command: { kind: "cancel", reason: "user" }, now: "2026-01-01T00:00:02.000Z" });
    expect(cancelled.state.status).toBe("cancelled");
    expect(cancelled.effects.filter((e) => e.kind === "journal")).toEqual([]);
    expect(cancelled.effects.filter((e) => e.kind === "emit").map((e) => (e as { event: { kind: string } }).event.kind)).toEqual(["execution.cancelled"]);
    const late = await step({ definition: d, state: cancelled.state, command: { kind: "timer", timerId: "retry:f:1" }, now: "2026-01-01T00:01:01.000Z" });
    expect(late.ignored).toBeDefined();
  });
});

/** An LLM that asks for `weather` once, then answers from the tool result. */
const react: ToolFn = (a) => {
  const msgs = a.messages as JsonObject[];
  const toolMsg = msgs.find((m) => m.role === "tool");
  if (!toolMsg) return { ok: true, output: { text: "", toolCalls: [{ id: "c1", name: "weather", args: { city: "Oslo" } }, { id: "c2", name: "weather", args: { city: "Rome" } }], usage: { inputTokens: 10, outputTokens: 5, totalTokens: 15 } } };
  return { ok: true, output: { text: `It is ${JSON.stringify(msgs.filter((m) => m.role === "tool").map((m) => m.content))}`, toolCalls: [], usage: { inputTokens: 20, outputTokens: 7, totalTokens: 27 } } };
};
/** agent.llm asks with the weather tool, agent.toolExecutor runs its calls, agent.llm answers. */
function weatherAgent(): WorkflowDefinition {
  return def({
    agentConfig: { model: "m:x" },
    nodes: [
      { id: "ask", type: "agent.llm", config: { prompt: "Weather in {{$.input.city}}?", tools: ["weather"] } },
      { id: "run", type: "agent.toolExecutor", config: {} },
      { id: "answer", type: "agent.llm", config: {} },
    ],
    edges: [{ from: "ask", to: "run" }, { from: "run", to: "answer" }],
  });
}

describe("step: agent nodes", () => {
  const weather: ToolFn = (a) => ({ ok: true, output: { city: a.city ?? null, temp: a.city === "Oslo" ? 3 : 18 } });

  it("a toolLoop runs LLM → parallel tools → LLM until a final answer, with usage summed", async () => {
    const d = def({
      agentConfig: { model: "openai:gpt-test" },
      nodes: [
        { id: "p", type: "agent.prompt", config: { template: "Weather in {{$.input.cities}}?", role: "user" } },
        { id: "loop", type: "agent.toolLoop", config: { tools: ["weather"], system: "Be brief." } },
      ],
      edges: [{ from: "p", to: "loop" }],
    });
    const r = await drive(d, { tools: { "llm.chat": react, weather } }, null, { kind: "start", input: { cities: "Oslo, Rome" } });
    expect(r.state.status).toBe("completed");
    const llm = calls(r).filter((c) => c.tool === "llm.chat");
    expect(llm).toHaveLength(2);
    expect(llm[0]!.args).toMatchObject({ model: "openai:gpt-test", system: "Be brief.", tools: ["weather"], messages: [{ role: "user", content: "Weather in Oslo, Rome?" }] });
    expect(calls(r).filter((c) => c.tool === "weather").map((c) => c.callId)).toEqual(["7.loop.1.r0.0", "7.loop.1.r0.1"]);
    expect(r.state.output).toMatchObject({ iterations: 1, stoppedBy: "answer", usage: { totalTokens: 42 } });
    expect((r.state.context.messages as JsonObject[]).map((m) => m.role)).toEqual(["user", "assistant", "tool", "tool", "assistant"]);
    expect(r.state.tokenUsage).toEqual({ inputTokens: 30, outputTokens: 12, totalTokens: 42 });
    expect(r.journal.find((j) => j.nodeId === "loop" && j.status === "completed")!.tokenUsage).toEqual({ inputTokens: 30, outputTokens: 12, totalTokens: 42 });
  });

  it("stops at maxToolIterations and says so", async () => {
    const always: ToolFn = () => ({ ok: true, output: { text: "", toolCalls: [{ id: "x", name: "weather", args: {} }] } });
    const d = def({ maxToolIterations: 2, nodes: [{ id: "loop", type: "agent.toolLoop", config: { model: "m:x", tools: ["weather"] } }] });
    const r = await drive(d, { tools: { "llm.chat": always, weather } }, null, { kind: "start", input: {} });
    expect(r.state.output).toMatchObject({ stoppedBy: "maxToolIterations", iterations: 2 });
    expect(calls(r).filter((c) => c.tool === "llm.chat")).toHaveLength(3);
  });

  it("a crash between the LLM answer and its tool calls repeats neither", async () => {
    const d = def({ nodes: [{ id: "loop", type: "agent.toolLoop", config: { model: "m:x", tools: ["weather"] } }] });
    const now = new Date(t0).toISOString();
    const s1 = await step({ definition: d, state: null, command: { kind: "start", input: {} }, now, identity });
    const llmCall = s1.effects.find((e): e is Effect & { kind: "callTool" } => e.kind === "callTool")!;
    const answer = react(llmCall.args, llmCall.callId) as { ok: true; output: JsonValue };
    const s2 = await step({ definition: d, state: s1.state, command: { kind: "toolResult", nodeId: "loop", callId: llmCall.callId, ok: true, output: answer.output, durationMs: 1 }, now });
    const toolCalls = s2.effects.filter((e) => e.kind === "callTool");
    expect(toolCalls).toHaveLength(2);
    // The same LLM answer delivered again (redelivery after a crash) is ignored: no second set of tool calls.
    const again = await step({ definition: d, state: s2.state, command: { kind: "toolResult", nodeId: "loop", callId: llmCall.callId, ok: true, output: answer.output, durationMs: 1 }, now });
    expect(again.ignored).toBeDefined();
    // The conversation with the answer is in the checkpointed state.
    expect(s2.state.nodes.loop!.loop!.messages.at(-1)).toMatchObject({ role: "assistant", toolCalls: [{ name: "weather" }, { name: "weather" }] });
  });

  it("judges the repeats of a toolLoop's calls settled while its next LLM call is out", async () => {
    const d = def({ nodes: [{ id: "loop", type: "agent.toolLoop", config: { model: "m:x", tools: ["weather"] } }] });
    const now = new Date(t0).toISOString();
    const settled = (s: ExecutionState, callId: string) => settledFanCall(s.nodes.loop!, 7, "loop", callId);
    const s1 = await step({ definition: d, state: null, command: { kind: "start", input: {} }, now, identity });
    expect(settled(s1.state, "7.loop.1.llm0")).toBe(false); // out
    const answer = react({ messages: [] }, "7.loop.1.llm0") as { ok: true; output: JsonValue };
    const s2 = await step({ definition: d, state: s1.state, command: { kind: "toolResult", nodeId: "loop", callId: "7.loop.1.llm0", ok: true, output: answer.output, durationMs: 1 }, now });
    // The tools of round 0 are out: the LLM call that asked for them is answered.
    expect(settled(s2.state, "7.loop.1.llm0")).toBe(true);
    expect(settled(s2.state, "7.loop.1.r0.0")).toBe(false);
    const s3 = await step({ definition: d, state: s2.state, command: { kind: "toolResult", nodeId: "loop", callId: "7.loop.1.r0.0", ok: true, output: { temp: 3 }, durationMs: 1 }, now });
    const s4 = await step({ definition: d, state: s3.state, command: { kind: "toolResult", nodeId: "loop", callId: "7.loop.1.r0.1", ok: true, output: { temp: 18 }, durationMs: 1 }, now });
    expect(s4.effects.filter((e) => e.kind === "callTool").map((e) => (e as { callId: string }).callId)).toEqual(["7.loop.1.llm1"]);
    // The next LLM call is out: every call of round 0 and the first LLM call are settled.
    expect(settled(s4.state, "7.loop.1.r0.0")).toBe(true);
    expect(settled(s4.state, "7.loop.1.r0.1")).toBe(true);
    expect(settled(s4.state, "7.loop.1.llm0")).toBe(true);
    // What may be ahead of this state is not: the call out, a later round, another attempt.
    expect(settled(s4.state, "7.loop.1.llm1")).toBe(false);
    expect(settled(s4.state, "7.loop.1.r1.0")).toBe(false);
    expect(settled(s4.state, "7.loop.1.llm2")).toBe(false);
    expect(settled(s4.state, "7.loop.2.llm0")).toBe(false);
  });

  it("agent.llm appends to the conversation; toolExecutor runs the calls and appends results", async () => {
    const d = weatherAgent();
    const r = await drive(d, { tools: { "llm.chat": react, weather } }, null, { kind: "start", input: { city: "Oslo" } });
    expect(r.state.status).toBe("completed");
    expect(r.state.context.run).toEqual([{ id: "c1", name: "weather", result: { city: "Oslo", temp: 3 } }, { id: "c2", name: "weather", result: { city: "Rome", temp: 18 } }]);
    expect((r.state.context.messages as JsonObject[]).map((m) => m.role)).toEqual(["user", "assistant", "tool", "tool", "assistant"]);
  });

  it("a tool error inside the loop goes back to the model instead of failing the node", async () => {
    const d = def({ nodes: [{ id: "loop", type: "agent.toolLoop", config: { model: "m:x", tools: ["weather"] } }] });
    const r = await drive(d, { tools: { "llm.chat": react, weather: () => ({ ok: false, retryable: false, message: "no such city", code: "E_CITY" }) } }, null, { kind: "start", input: {} });
    expect(r.state.status).toBe("completed");
    expect(JSON.stringify(r.state.output)).toContain("E_CITY");
  });

  it("a node without a model calls llm.chat naming none (the installation's default); memory.read injects memories; subagent merges its answer", async () => {
    const noModel = await drive(def({ nodes: [{ id: "a", type: "agent.llm", config: {} }] }), { tools: { "llm.chat": () => ({ ok: true, output: { text: "hi" } }) } }, null, { kind: "start", input: {} });
    expect(calls(noModel)[0]!.args).not.toHaveProperty("model");
    expect(noModel.state.status).toBe("completed");
    const mem = def({ nodes: [{ id: "m", type: "agent.memory.read", config: { query: "{{$.input.q}}", agentId: 4 } }] });
    const rm = await drive(mem, { tools: { "memory.search": (a) => ({ ok: true, output: { entries: [{ key: "tz", content: `prefers UTC (${a.query as string})` }] } }) } }, null, { kind: "start", input: { q: "time" } });
    expect(calls(rm)[0]!.args).toEqual({ agentId: 4, query: "time", limit: 5 });
    expect(rm.state.context.messages).toEqual([{ role: "system", content: "Relevant memories:\n- prefers UTC (time)" }]);
    const child = def({ nodes: [{ id: "c", type: "transform", config: { expression: "{ 'text': 'done: ' & input.task }" } }] });
    const parent = def({ nodes: [{ id: "sub", type: "agent.subagent", config: { agent: { slug: "helper" }, task: "summarise {{$.input.topic}}" } }] });
    const rs = await drive(parent, { workflows: { helper: child } }, null, { kind: "start", input: { topic: "tides" } });
    expect(rs.state.output).toEqual({ text: "done: summarise tides" });
    expect(rs.state.context.messages).toEqual([{ role: "assistant", content: "done: summarise tides" }]);
  });

  it("a tool the node does not name is refused back to the model, never run", async () => {
    let asked = 0;
    const greedy: ToolFn = () => (asked++ === 0
      ? { ok: true, output: { text: "", toolCalls: [{ id: "x", name: "shell.exec", args: { cmd: "rm -rf /" } }] } }
      : { ok: true, output: { text: "ok, I won't", toolCalls: [] } });
    const d = def({ nodes: [{ id: "loop", type: "agent.toolLoop", config: { model: "m:x", tools: ["weather"] } }] });
    const r = await drive(d, { tools: { "llm.chat": greedy, weather } }, null, { kind: "start", input: {} });
    expect(r.state.status).toBe("completed");
    expect(calls(r).map((c) => c.tool)).toEqual(["llm.chat", "llm.chat"]);
    expect(JSON.stringify(r.state.output)).toContain("BATON_AGENT_TOOL_NOT_ALLOWED");
  });
});

describe("step: large results by reference", () => {
  const ref = (name: string): JsonObject => ({ $ref: `blob:${name}`, size: 99_999 });
  const start: Command = { kind: "start", input: { xs: [0, 1, 2] } };

  it("a forEach reduce reads its results through their references; without reduce the output keeps them", async () => {
    const blobs = new Map<string, JsonValue>([0, 1, 2].map((i) => [`blob:r${i}`, { n: i + 1, data: "x".repeat(10) }]));
    const big: ToolFn = (a) => ({ ok: true, output: ref(`r${a.value as number}`) });
    const reduced = def({ nodes: [{ id: "each", type: "forEach", config: { items: "$.input.xs", tool: "big", reduce: "{ 'sum': $sum(results.n), 'first': results[0].data }" } }] });
    // Without the blobs the step that reduces asks for every one of them (the executor loads them and steps again).
    await expect(drive(reduced, { tools: { big } }, null, start)).rejects.toMatchObject({ name: "BlobsNeeded", refs: ["blob:r0", "blob:r1", "blob:r2"] });
    const r = await drive(reduced, { tools: { big }, blobs }, null, start);
    expect(r.state.status).toBe("completed");
    expect(r.state.output).toEqual({ sum: 6, first: "xxxxxxxxxx" });
    // No reduce: the node's output is the list of references.
    const plain = def({ nodes: [{ id: "each", type: "forEach", config: { items: "$.input.xs", tool: "big" } }] });
    const p = await drive(plain, { tools: { big }, blobs }, null, start);
    expect(p.state.status).toBe("completed");
    expect(p.state.context.each).toEqual([ref("r0"), ref("r1"), ref("r2")]);
  });

  it("an edge condition reads the node's output through its reference", async () => {
    const d = def({
      nodes: [{ id: "a", type: "tool", config: { tool: "big" } }, { id: "yes", type: "transform", config: { expression: "'yes'" } }, { id: "no", type: "transform", config: { expression: "'no'" } }],
      edges: [{ from: "a", to: "yes", condition: "$output.ok = true" }, { from: "a", to: "no", condition: "$output.ok = false" }],
    });
    const r = await drive(d, { tools: { big: () => ({ ok: true, output: ref("ok") }) }, blobs: new Map([["blob:ok", { ok: true }]]) }, null, { kind: "start", input: {} });
    expect(r.state.nodes.yes!.status).toBe("completed");
    expect(r.state.nodes.no!.status).toBe("skipped");
    expect(r.state.context.a).toEqual(ref("ok"));
  });

  it("a toolLoop's next LLM call gets its tools' large results resolved; the loop and its output keep the references", async () => {
    const d = def({ nodes: [{ id: "loop", type: "agent.toolLoop", config: { model: "m:x", tools: ["weather"] } }] });
    const weatherRef: ToolFn = (a) => ({ ok: true, output: ref(`w-${a.city as string}`) });
    const blobs = new Map<string, JsonValue>([["blob:w-Oslo", { city: "Oslo", temp: 3 }], ["blob:w-Rome", { city: "Rome", temp: 18 }]]);
    await expect(drive(d, { tools: { "llm.chat": react, weather: weatherRef } }, null, { kind: "start", input: {} })).rejects.toMatchObject({ name: "BlobsNeeded" });
    const r = await drive(d, { tools: { "llm.chat": react, weather: weatherRef }, blobs }, null, { kind: "start", input: {} });
    expect(r.state.status).toBe("completed");
    const second = calls(r).filter((c) => c.tool === "llm.chat")[1]!;
    expect((second.args.messages as JsonObject[]).filter((m) => m.role === "tool").map((m) => m.content)).toEqual([{ city: "Oslo", temp: 3 }, { city: "Rome", temp: 18 }]);
    expect(r.state.output).toMatchObject({ text: 'It is [{"city":"Oslo","temp":3},{"city":"Rome","temp":18}]', stoppedBy: "answer" });
    expect((r.state.context.loop as { messages: JsonObject[] }).messages.filter((m) => m.role === "tool").map((m) => m.content)).toEqual([ref("w-Oslo"), ref("w-Rome")]);
  });

  it("a toolExecutor's results stay references in the context and reach the next LLM call resolved", async () => {
    const d = weatherAgent();
    const blobs = new Map<string, JsonValue>([["blob:w-Oslo", { city: "Oslo", temp: 3 }], ["blob:w-Rome", { city: "Rome", temp: 18 }]]);
    const r = await drive(d, { tools: { "llm.chat": react, weather: (a) => ({ ok: true, output: ref(`w-${a.city as string}`) }) }, blobs }, null, { kind: "start", input: { city: "Oslo" } });
    expect(r.state.status).toBe("completed");
    expect(r.state.context.run).toEqual([{ id: "c1", name: "weather", result: ref("w-Oslo") }, { id: "c2", name: "weather", result: ref("w-Rome") }]);
    const last = calls(r).filter((c) => c.tool === "llm.chat").at(-1)!;
    expect((last.args.messages as JsonObject[]).filter((m) => m.role === "tool").map((m) => m.content)).toEqual([{ city: "Oslo", temp: 3 }, { city: "Rome", temp: 18 }]);
  });

  it("an LLM answer above the threshold is read through its reference: text, tool calls and usage", async () => {
    const d = def({ nodes: [{ id: "ask", type: "agent.llm", config: { model: "m:x", prompt: "Hi" } }] });
    const answer = { text: "a long answer", toolCalls: [{ id: "t1", name: "weather", args: { city: "Oslo" } }], usage: { inputTokens: 4, outputTokens: 6, totalTokens: 10 } };
    const r = await drive(d, { tools: { "llm.chat": () => ({ ok: true, output: ref("answer") }) }, blobs: new Map([["blob:answer", answer]]) }, null, { kind: "start", input: {} });
    expect(r.state.status).toBe("completed");
    expect(r.state.context.ask).toEqual(ref("answer"));
    expect(r.state.context.messages).toEqual([{ role: "user", content: "Hi" }, { role: "assistant", content: "a long answer", toolCalls: answer.toolCalls }]);
    expect(r.state.context.toolCalls).toEqual(answer.toolCalls);
    expect(r.state.tokenUsage).toEqual(answer.usage);
  });

  it("a reference keeps the token counts of its value's usage, and is a reference all the same", () => {
    expect(usageOf({ vectors: [], usage: { inputTokens: 12, totalTokens: 12, model: "e", cost: "0.1" } })).toEqual({ inputTokens: 12, totalTokens: 12 });
    expect(usageOf({ usage: { note: "none" } })).toBeUndefined();
    expect(usageOf({ usage: 3 })).toBeUndefined();
    expect(usageOf([1])).toBeUndefined();
    const kept = { ...ref("e"), usage: { inputTokens: 12, totalTokens: 12 } };
    expect(isBlobRef(kept)).toBe(true);
    expect(resolveRefs({ e: kept }, new Map([["blob:e", { vectors: [[1]], usage: { inputTokens: 12, totalTokens: 12, model: "e" } }]]))).toEqual({ e: { vectors: [[1]], usage: { inputTokens: 12, totalTokens: 12, model: "e" } } });
  });

  it("a node that keeps its answer by reference counts the usage the reference keeps; one reading through it counts the value's, once", async () => {
    const usage = { inputTokens: 12, outputTokens: 0, totalTokens: 12 };
    const embed = def({ nodes: [{ id: "e", type: "agent.embed", config: { model: "m:e", values: ["a"] } }] });
    // The run's output reads the node's output (the value is given only for that).
    const vectors = new Map<string, JsonValue>([["blob:vectors", { vectors: [[1]], usage: { inputTokens: 12, totalTokens: 12 } }]]);
    const r = await drive(embed, { tools: { "llm.embed": () => ({ ok: true, output: { ...ref("vectors"), usage: { inputTokens: 12, totalTokens: 12 } } }) }, blobs: vectors }, null, { kind: "start", input: {} });
    expect(r.state.status).toBe("completed");
    expect(r.state.tokenUsage).toEqual(usage);
    expect(r.journal.find((j) => j.nodeId === "e" && j.status === "completed")!.tokenUsage).toEqual(usage);
    const llm = def({ nodes: [{ id: "ask", type: "agent.llm", config: { model: "m:x", prompt: "Hi" } }] });
    const answer = { text: "long", usage: { inputTokens: 4, outputTokens: 6, totalTokens: 10 } };
    const a = await drive(llm, { tools: { "llm.chat": () => ({ ok: true, output: { ...ref("answer"), usage: answer.usage } }) }, blobs: new Map([["blob:answer", answer]]) }, null, { kind: "start", input: {} });
    expect(a.state.tokenUsage).toEqual(answer.usage);
  });

  it("a tool's arguments built from referenced values reach it resolved", async () => {
    const d = def({
      nodes: [
        { id: "a", type: "tool", config: { tool: "big" } },
        { id: "b", type: "tool", config: { tool: "echo" }, input: { rows: "$.a.rows", whole: "$.a" } },
        { id: "each", type: "forEach", config: { items: "$.a.rows", tool: "echo", itemInput: { v: "$.item" } } },
      ],
      edges: [{ from: "a", to: "b" }, { from: "b", to: "each" }],
    });
    const r = await drive(d, { tools: { big: () => ({ ok: true, output: ref("rows") }), echo }, blobs: new Map([["blob:rows", { rows: [1, 2] }]]) }, null, { kind: "start", input: {} });
    expect(r.state.status).toBe("completed");
    expect(calls(r).filter((c) => c.tool === "echo").map((c) => c.args)).toEqual([{ rows: [1, 2], whole: { rows: [1, 2] } }, { v: 1 }, { v: 2 }]);
  });
});
