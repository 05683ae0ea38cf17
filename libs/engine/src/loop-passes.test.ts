/**
 * Loop bodies across passes, step by step: each pass of a whileLoop sees that pass's state.
 * Rules checked, for bodies holding a join, a condition, branches that race back to the loop, a
 * retried node, a review, a nested loop, a cycle bounded by maxVisits and a forEach:
 * - a join waits for this pass's branches: a branch that arrived in an earlier pass counts
 *   nothing now; a join left out waits for all (only a node entered by an edge that closes a
 *   loop joins as `any` by default); a branch arriving after an `any` or `n` join fired in this
 *   pass is ignored, as outside a loop: the join runs once per pass and what follows it goes on;
 * - a branch not taken in this pass is skipped, whatever it did in the pass before, and the
 *   loop node and the nodes before the branch keep this pass's runs (nothing restarts mid-pass);
 *   a branch still running when the pass went back to the loop on another edge is stopped then,
 *   and starts afresh in the next pass;
 * - `$.path` reads see the latest values: what this pass wrote, else what an earlier pass
 *   left (the output of a branch not taken now, or not yet arrived, stays from the pass that ran it);
 * - counts: a node's attempts go on across passes (the journal's key), its retries count per
 *   visit, a loop's iterations per entry into it, `maxVisits` per pass; each journal row and
 *   event names the attempt it is about, and a decision for an earlier pass's review is ignored;
 * - time travel: a fork of a checkpoint taken mid-pass, and a state rebuilt from the journal,
 *   go on from that pass and end as the run itself does; a node the fork starts again is the
 *   same visit (maxVisits counts it once, its idempotency key is the visit's).
 */
import { describe, expect, it } from "@jest/globals";
import { replayJournal, step } from "./index.ts";
import type { Command, ExecutionState, JsonObject, JsonValue, WorkflowDefinition } from "./index.ts";
import { def, echo, hold, identity, ok, Sim, START } from "./test-support.ts";
import type { Answer, ToolFn } from "./test-support.ts";

/** A fork of a checkpoint (time travel), run as far as it goes. */
async function fork(d: WorkflowDefinition, source: ExecutionState, tools: Record<string, ToolFn>, contextPatch?: JsonObject): Promise<Sim> {
  const f = new Sim(d, tools, { ...identity, executionId: 8 });
  return f.run({ kind: "start", input: {}, fork: { state: source, executionId: 7, version: 5, ...(contextPatch ? { contextPatch } : {}) } });
}

/** Node runs without their times (a state rebuilt from the journal has the journal's). */
function untimed(s: ExecutionState): Record<string, JsonObject> {
  return Object.fromEntries(Object.entries(s.nodes).map(([id, r]) => {
    const { startedAt: _s, completedAt: _c, ...rest } = r;
    return [id, rest as unknown as JsonObject];
  }));
}

/** The run rebuilt from its journal (a lost checkpoint). */
async function rebuilt(sim: Sim, input: JsonObject = {}): Promise<ExecutionState> {
  const r = await replayJournal({ definition: sim.d, identity, start: { kind: "start", input }, journal: sim.journal, startedAt: new Date(START + 1).toISOString() });
  expect(r.unplaced).toEqual([]);
  return r.state;
}

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

  it("a fork of a run cancelled mid-pass runs that pass's branches that were out, and its join waits for them", async () => {
    const sim = await new Sim(body(undefined), tools).start();
    for (const id of ["a", "b", "c"]) await sim.answer(id, ok(at(sim)));
    await sim.answer("k", ok("k"));
    // Pass 2: a is back, b and c are out when the run is cancelled.
    await sim.answer("a", ok(at(sim)));
    await sim.run({ kind: "cancel", reason: "stop" });
    expect(sim.statuses()).toMatchObject({ loop: "completed#2", a: "completed#2", b: "failed#2", c: "failed#2", j: "waiting#1" });
    const f = await fork(body(undefined), sim.s, tools);
    // The fork starts b and c again (resettle finds j reached by a, and j waits for the others).
    expect(f.calls().map((c) => c.nodeId)).toEqual(["b", "c"]);
    expect(f.statuses()).toMatchObject({ j: "waiting#1", a: "completed#2" });
    await f.answer("c", ok(at(f)));
    expect(f.s.nodes.j!.status).toBe("waiting");
    await f.answer("b", ok(at(f)));
    await f.answer("k", ok("k"));
    for (const id of ["a", "b", "c"]) await f.answer(id, ok(at(f)));
    await f.answer("k", ok("k"));
    expect([f.s.status, f.s.output]).toEqual(["completed", { i: 3, seen: [[0, 0, 0], [1, 1, 1], [2, 2, 2]] }]);
    expect(f.s.nodes.loop!.iterations).toBe(3);
  });

  it("an any join fires once per pass on that pass's first branch; later arrivals are ignored and what follows it goes on", async () => {
    const sim = await new Sim(body("any", 2), tools).start();
    await sim.answer("b", ok({ i: 0 }));
    expect(sim.s.nodes.j).toMatchObject({ status: "completed", attempt: 1 });
    expect(sim.s.nodes.k).toMatchObject({ status: "running", attempt: 1 });
    // a and c arrive while k runs: j does not run again, k is not cancelled, the loop node keeps its pass.
    await sim.answer("a", ok({ i: 0 }));
    await sim.answer("c", ok({ i: 0 }));
    expect(sim.statuses()).toMatchObject({ loop: "completed#1", a: "completed#1", b: "completed#1", c: "completed#1", j: "completed#1", k: "running#1" });
    expect(sim.effects.filter((e) => e.kind === "cancelTools")).toEqual([]);
    await sim.answer("k", ok("k"));
    // Pass 2: the first branch is c. j sees c's value of this pass, and a's and b's of the pass before (the latest values).
    expect(sim.statuses()).toMatchObject({ loop: "completed#2", a: "running#2", b: "running#2", c: "running#2", j: "waiting#1" });
    await sim.answer("c", ok({ i: 1 }));
    // Pass 1's j saw only b ([a.i, b.i, c.i] drops what is missing).
    expect(sim.s.context.vars).toEqual({ i: 2, seen: [[0], [0, 0, 1]] });
    await sim.answer("k", ok("k"));
    // The loop exits. a and b of pass 2 were still out: the pass's end stopped them, as a loop going round does.
    expect(sim.s.status).toBe("completed");
    expect(sim.rows("j")).toEqual(["1:running", "1:completed", "2:running", "2:completed"]);
    expect(sim.rows("k")).toEqual(["1:running", "1:completed", "2:running", "2:completed"]);
    expect(sim.effects.flatMap((e) => (e.kind === "cancelTools" ? e.callIds : []))).toEqual(["7.a.2", "7.b.2"]);
    expect(sim.rows("a")).toEqual(["1:running", "1:completed", "2:running", "2:failed(BATON_CANCELLED)"]);
  });

  it("an n-of join waits for n branches of this pass", async () => {
    const sim = await new Sim(body({ n: 2 }, 2), tools).start();
    await sim.answer("a", ok({ i: 0 }));
    await sim.answer("c", ok({ i: 0 }));
    expect(sim.statuses()).toMatchObject({ j: "completed#1", k: "running#1", b: "running#1" });
    // b comes late: ignored.
    await sim.answer("b", ok({ i: 0 }));
    expect(sim.statuses()).toMatchObject({ loop: "completed#1", j: "completed#1", k: "running#1" });
    await sim.answer("k", ok("k"));
    // Pass 2: one branch of this pass is not enough, though all three arrived in the pass before.
    await sim.answer("b", ok({ i: 1 }));
    expect(sim.statuses()).toMatchObject({ loop: "completed#2", j: "waiting#1", b: "completed#2" });
    await sim.answer("a", ok({ i: 1 }));
    expect(sim.s.context.vars).toEqual({ i: 2, seen: [[0, 0], [1, 1, 0]] });
    // Rebuilt from its journal (the late arrival's row included), the run is where it is.
    const again = await rebuilt(sim);
    expect([again.context, untimed(again)]).toEqual([sim.s.context, untimed(sim.s)]);
    await sim.answer("k", ok("k"));
    expect([sim.s.status, sim.rows("j").length]).toEqual(["completed", 4]);
  });
});

describe("loop passes: a condition in the body", () => {
  /** Odd passes go through x, even ones through y; each branch goes back to the loop on its own edge. */
  const d = def({
    start: "init",
    nodes: [
      { id: "init", type: "setVariable", config: { values: { "$.vars.i": 0 } } },
      { id: "loop", type: "whileLoop", config: { condition: "vars.i < 3", maxIterations: 5 } },
      { id: "inc", type: "transform", config: { expression: "vars.i + 1" }, output: "$.vars.i" },
      { id: "c", type: "condition", config: { expression: "vars.i % 2 = 1" } },
      { id: "x", type: "tool", config: { tool: "t" }, input: { branch: "x", i: "$.vars.i" } },
      { id: "y", type: "tool", config: { tool: "t" }, input: { branch: "y", i: "$.vars.i" } },
      { id: "done", type: "transform", config: { expression: "{ 'x': x, 'y': y, 'loops': loop.iterations }" } },
    ],
    edges: [
      { from: "init", to: "loop" }, { from: "loop", to: "inc", when: "body" }, { from: "inc", to: "c" },
      { from: "c", to: "x", when: "true" }, { from: "c", to: "y", when: "false" }, { from: "x", to: "loop" }, { from: "y", to: "loop" },
      { from: "loop", to: "done", when: "exit" },
    ],
  });

  it("a branch not taken is skipped in this pass, whatever it did in the pass before; nothing before it restarts", async () => {
    const sim = await new Sim(d, { t: hold }).start();
    await sim.answer("x", ok({ from: "x", i: 1 }));
    // Pass 2 takes y, which the pass before skipped; x ran then, and is skipped now.
    expect(sim.statuses()).toEqual({ init: "completed#1", loop: "completed#2", inc: "completed#2", c: "completed#2", x: "skipped#1", y: "running#1" });
    // x's output is the one of the pass that ran it: the latest value.
    expect(sim.s.context.x).toEqual({ from: "x", i: 1 });
    const mid = sim.s;
    await sim.answer("y", ok({ from: "y", i: 2 }));
    expect(sim.statuses()).toMatchObject({ loop: "completed#3", inc: "completed#3", c: "completed#3", x: "running#2", y: "skipped#1" });
    await sim.answer("x", ok({ from: "x", i: 3 }));
    expect([sim.s.status, sim.s.output]).toEqual(["completed", { x: { from: "x", i: 3 }, y: { from: "y", i: 2 }, loops: 3 }]);
    expect(sim.rows("x")).toEqual(["1:running", "1:completed", "2:running", "2:completed"]);
    // y: skipped in pass 1, run in pass 2, skipped in pass 3, and, as all the body, when the loop exits.
    expect(sim.nodeEvents("y")).toEqual(["skipped", "started:1", "completed:1", "skipped", "skipped"]);
    expect(sim.rows("inc").filter((r) => r.endsWith("completed"))).toEqual(["1:completed", "2:completed", "3:completed"]);

    // A fork of the checkpoint taken in pass 2 goes on from there and ends as the run did.
    const f = await fork(d, mid, { t: (a) => ok({ from: a.branch!, i: a.i! }) });
    expect([f.s.status, f.s.output]).toEqual(["completed", { x: { from: "x", i: 3 }, y: { from: "y", i: 2 }, loops: 3 }]);
    expect(f.calls().map((c) => `${c.nodeId}:${c.callId}`)).toEqual(["y:8.y.2", "x:8.x.2"]);
    // Rebuilt from its journal, the run is where it was in pass 2.
    const at2 = new Sim(d, { t: hold });
    await at2.start();
    await at2.answer("x", ok({ from: "x", i: 1 }));
    const again = await rebuilt(at2);
    expect([again.context, untimed(again)]).toEqual([at2.s.context, untimed(at2.s)]);
  });
});

describe("loop passes: branches that go back to the loop each on its own edge", () => {
  /** work races a delay: whichever goes back to the loop first ends the pass. */
  const d = def({
    start: "loop",
    nodes: [
      { id: "loop", type: "whileLoop", config: { condition: "$iteration < 2", maxIterations: 5 } },
      { id: "work", type: "tool", config: { tool: "t" } },
      { id: "tick", type: "delay", config: { ms: 1000 } },
      { id: "done", type: "transform", config: { expression: "loop.iterations" } },
    ],
    edges: [
      { from: "loop", to: "work", when: "body" }, { from: "loop", to: "tick", when: "body" }, { from: "work", to: "loop" }, { from: "tick", to: "loop" },
      { from: "loop", to: "done", when: "exit" },
    ],
  });

  it("the first branch back ends the pass: the other branch's work is stopped then, and starts afresh in the next pass", async () => {
    // Pass 1: the delay wins.
    const sim = new Sim(d, { t: hold });
    sim.autoTimers = false;
    await sim.start();
    await sim.fire();
    expect(sim.statuses()).toMatchObject({ loop: "completed#2", work: "running#2", tick: "running#2" });
    expect(sim.rows("work")).toEqual(["1:running", "1:failed(BATON_CANCELLED)", "2:running"]);
    expect(sim.effects.flatMap((e) => (e.kind === "cancelTools" ? e.callIds : []))).toEqual(["7.work.1"]);
    // Pass 2: work wins; the delay of pass 2 is stopped, the loop exits.
    await sim.answer("work", ok("w"));
    expect([sim.s.status, sim.s.output, sim.s.timers]).toEqual(["completed", 2, undefined]);
    expect(sim.rows("tick")).toEqual(["1:running", "1:completed", "2:running", "2:failed(BATON_CANCELLED)"]);
    // The call of pass 1 answering late changes nothing.
    const late = await step({ definition: d, state: sim.s, command: { kind: "toolResult", nodeId: "work", callId: "7.work.1", ok: true, output: 1, durationMs: 1 }, now: new Date(START + 99_999).toISOString() });
    expect(late.ignored).toBeDefined();
  });
});

describe("loop passes: a loop entered again through a cycle through its exit", () => {
  /** Two iterations per entry; `again` goes back to the loop from its exit twice. */
  const d = (back: "loop" | "pre") => def({
    start: "init",
    nodes: [
      { id: "init", type: "setVariable", config: { values: { "$.vars.rounds": 0 } } },
      { id: "pre", type: "setVariable", config: { values: {} } },
      { id: "loop", type: "whileLoop", config: { condition: "$iteration < 2", maxIterations: 3 } },
      { id: "b", type: "transform", config: { expression: "vars.rounds" } },
      { id: "again", type: "transform", config: { expression: "vars.rounds + 1" }, output: "$.vars.rounds", maxVisits: 3, branching: "first" },
      { id: "done", type: "transform", config: { expression: "vars.rounds" } },
    ],
    edges: [
      { from: "init", to: "pre" }, { from: "pre", to: "loop" }, { from: "loop", to: "b", when: "body" }, { from: "b", to: "loop" },
      { from: "loop", to: "again", when: "exit" }, { from: "again", to: back, condition: "vars.rounds < 3" }, { from: "again", to: "done" },
    ],
  });

  it("counts its iterations afresh on each entry, whether the cycle comes back to it or to a node before it", async () => {
    for (const back of ["loop", "pre"] as const) {
      const sim = await new Sim(d(back)).start();
      expect([back, sim.s.status, sim.s.output]).toEqual([back, "completed", 3]);
      // Two iterations on each of the three entries: b sees each entry's round.
      expect([back, sim.journal.filter((j) => j.nodeId === "b" && j.status === "completed").map((j) => j.output)]).toEqual([back, [0, 0, 1, 1, 2, 2]]);
    }
  });
});

describe("loop passes: a retried node in the body", () => {
  const d = def({
    start: "init",
    nodes: [
      { id: "init", type: "setVariable", config: { values: { "$.vars.i": 0 } } },
      { id: "loop", type: "whileLoop", config: { condition: "vars.i < 3", maxIterations: 5 } },
      { id: "work", type: "tool", config: { tool: "t" }, input: { i: "$.vars.i" }, retry: { maxAttempts: 2, initialDelayMs: 1000, jitter: 0 }, maxVisits: 1 },
      { id: "inc", type: "transform", config: { expression: "vars.i + 1" }, output: "$.vars.i" },
    ],
    edges: [{ from: "init", to: "loop" }, { from: "loop", to: "work", when: "body" }, { from: "work", to: "inc" }, { from: "inc", to: "loop" }],
  });
  const fail: Answer = { ok: false, retryable: true, message: "busy" };

  it("attempts go on across passes, retries count per visit, and each row and event names its attempt", async () => {
    // Pass 1 fails once, pass 2 not at all, pass 3 twice: the run fails there after 2 attempts of that visit.
    const plan: Record<number, Answer[]> = { 0: [fail, ok("a")], 1: [ok("b")], 2: [fail, fail] };
    const sim = await new Sim(d, { t: (a) => plan[a.i as number]!.shift()! }).start();
    expect(sim.s.status).toBe("failed");
    expect(sim.s.error).toMatchObject({ code: "E_TOOL", nodeId: "work", message: 'node "work" failed after 2 attempt(s): busy' });
    expect(sim.rows("work")).toEqual(["1:running", "1:failed(E_TOOL)", "2:running", "2:completed", "3:running", "3:completed", "4:running", "4:failed(E_TOOL)", "5:running", "5:failed(E_TOOL)"]);
    expect(sim.events.flatMap((e) => (e.kind === "node.failed" ? [`${e.attempt}:${e.retrying}`] : []))).toEqual(["1:true", "4:true", "5:false"]);
    expect(sim.effects.flatMap((e) => (e.kind === "setTimer" ? [e.timerId] : []))).toEqual(["retry:work:1", "retry:work:4"]);
    // A new call per attempt; the idempotency key is the visit's, the same on its retries.
    expect(sim.calls("work").map((c) => [c.callId, c.attempt, c.idempotencyKey])).toEqual([
      ["7.work.1", 1, "7.work"], ["7.work.2", 2, "7.work"], ["7.work.3", 3, "7.work.v2"], ["7.work.4", 4, "7.work.v3"], ["7.work.5", 5, "7.work.v3"],
    ]);
    expect(sim.s.nodes.work).toMatchObject({ attempt: 5, visits: 3, visitStartAttempt: 3 });
    // A fork of the failed run's last checkpoint runs pass 3's visit of work again, with its retries afresh, and completes.
    const f = await fork(d, sim.s, { t: (a) => ok(a.i!) });
    expect([f.s.status, f.s.context.vars, f.s.nodes.work!.visits]).toEqual(["completed", { i: 3 }, 3]);
    expect(f.calls("work").map((c) => [c.callId, c.idempotencyKey])).toEqual([["8.work.6", "8.work.v3"]]);
  });

  it("a checkpoint taken while a retry waits in a later pass: rebuilt from the journal, or forked, it goes on from that attempt", async () => {
    let first = true;
    const sim = await new Sim(d, { t: (a) => (a.i === 1 && first ? ((first = false), fail) : a.i === 1 ? "hold" : ok(a.i!)) }).start();
    // Pass 2: attempt 2 failed, attempt 3 is out.
    expect(sim.s.nodes.work).toMatchObject({ status: "running", attempt: 3, callId: "7.work.3", visits: 2, visitStartAttempt: 1 });
    const again = await rebuilt(sim);
    expect(again.nodes.work).toMatchObject({ status: "running", attempt: 3, callId: "7.work.3", visits: 2, visitStartAttempt: 1 });
    expect(again.nodes.loop).toMatchObject({ iterations: 2 });
    // The fork runs pass 2's visit again: not a visit more (work may be visited once a pass), and with that visit's key.
    const f = await fork(d, sim.s, { t: (a) => ok(a.i!) });
    expect([f.s.status, f.s.context.vars, f.s.nodes.loop!.iterations, f.s.nodes.work!.visits]).toEqual(["completed", { i: 3 }, 3, 3]);
    expect(f.calls("work").map((c) => [c.callId, c.idempotencyKey])).toEqual([["8.work.4", "8.work.v2"], ["8.work.5", "8.work.v3"]]);
  });
});

describe("loop passes: a review in the body", () => {
  /** Each pass asks for a review of vars.i; approved or edited, nx counts on; rejected, the pass goes back to the loop as it is. */
  const d = def({
    start: "init",
    nodes: [
      { id: "init", type: "setVariable", config: { values: { "$.vars.i": 0 } } },
      { id: "loop", type: "whileLoop", config: { condition: "vars.i < 3", maxIterations: 10 } },
      { id: "r", type: "humanReview", config: { reason: "ok?", subject: { i: "$.vars.i" } } },
      { id: "nx", type: "transform", config: { expression: "r.data.i + 1" }, output: "$.vars.i" },
      { id: "done", type: "transform", config: { expression: "{ 'i': vars.i, 'r': r.decision }" } },
    ],
    edges: [
      { from: "init", to: "loop" }, { from: "loop", to: "r", when: "body" }, { from: "r", to: "nx", when: "approved" },
      { from: "r", to: "loop", when: "rejected" }, { from: "nx", to: "loop" }, { from: "loop", to: "done", when: "exit" },
    ],
  });
  const decide = (action: "approve" | "edit" | "reject", attempt: number, data?: JsonObject): Command => ({ kind: "resume", nodeId: "r", action, attempt, ...(data ? { data } : {}) });

  it("each pass pauses at its own attempt of the review; a decision for an earlier pass's is ignored", async () => {
    const sim = await new Sim(d).start();
    const reviews = () => sim.effects.flatMap((e) => (e.kind === "review" ? [[e.seq, e.subject]] : []));
    expect([sim.s.status, sim.s.pause, sim.s.nodes.r!.attempt]).toEqual(["paused", { nodeId: "r", reason: "ok?", seq: 1 }, 1]);
    await sim.run(decide("approve", 1));
    expect([sim.s.status, sim.s.pause, sim.s.nodes.r!.attempt]).toEqual(["paused", { nodeId: "r", reason: "ok?", seq: 2 }, 2]);
    // The first pass's decision again (sent twice): it is for attempt 1, and changes nothing.
    const stale = await step({ definition: d, state: sim.s, command: decide("reject", 1), now: new Date(START + 99_999).toISOString() });
    expect(stale.ignored).toMatch(/attempt 1 .* paused at attempt 2/);
    await sim.run(decide("reject", 2));
    // Rejected: nx was skipped in pass 2, and waits in pass 3, which reviews the same i again.
    expect(sim.nodeEvents("nx").slice(-2)).toEqual(["completed:1", "skipped"]);
    expect([sim.s.nodes.nx!.status, sim.s.context.vars, sim.s.nodes.r!.attempt]).toEqual(["waiting", { i: 1 }, 3]);
    expect(sim.s.context.r).toMatchObject({ decision: "reject" });
    const paused3 = sim.s;
    await sim.run(decide("edit", 3, { i: 1 }));
    await sim.run(decide("approve", 4));
    expect([sim.s.status, sim.s.output, sim.s.nodes.loop!.iterations]).toEqual(["completed", { i: 3, r: "approve" }, 4]);
    expect(reviews()).toEqual([[1, { i: 0 }], [2, { i: 1 }], [3, { i: 1 }], [4, { i: 2 }]]);
    expect(sim.rows("r")).toEqual(["1:paused", "1:completed", "2:paused", "2:completed", "3:paused", "3:completed", "4:paused", "4:completed"]);
    expect(sim.events.flatMap((e) => (e.kind === "execution.resumed" ? [e.decision] : []))).toEqual(["approve", "reject", "edit", "approve"]);
    expect(sim.rows("nx").filter((r) => r.endsWith("completed"))).toEqual(["1:completed", "2:completed", "3:completed"]);

    // Rebuilt from the journal while paused in pass 3: paused at that attempt, and its decision goes on from there.
    const at3 = new Sim(d);
    await at3.start();
    await at3.run(decide("approve", 1));
    await at3.run(decide("reject", 2));
    const again = await rebuilt(at3);
    expect([again.status, again.pause, again.nodes.r!.attempt, again.context]).toEqual(["paused", paused3.pause, 3, paused3.context]);
    // A fork of that checkpoint asks for the review again, at its own next attempt, and goes on.
    const f = await fork(d, paused3, {});
    expect([f.s.status, f.s.nodes.r!.attempt, f.s.nodes.r!.visits, f.s.nodes.loop!.iterations]).toEqual(["paused", 4, 3, 3]);
    await f.run(decide("approve", 4));
    await f.run(decide("approve", 5));
    expect([f.s.status, f.s.output]).toEqual(["completed", { i: 3, r: "approve" }]);
  });
});

describe("loop passes: a nested loop in the body", () => {
  /** Two outer passes of two inner ones; `work` (a tool) runs in each inner pass. */
  const d = def({
    start: "i",
    nodes: [
      { id: "i", type: "setVariable", config: { values: { "$.vars.o": 0, "$.vars.log": [] } } },
      { id: "outer", type: "whileLoop", config: { condition: "vars.o < 2", maxIterations: 2 } },
      { id: "ri", type: "setVariable", config: { values: { "$.vars.n": 0 } } },
      { id: "inner", type: "whileLoop", config: { condition: "vars.n < 2", maxIterations: 2 } },
      { id: "work", type: "tool", config: { tool: "t" }, input: { o: "$.vars.o", n: "$.vars.n" }, maxVisits: 1 },
      { id: "inc", type: "transform", config: { expression: "vars.n + 1" }, output: "$.vars.n" },
      { id: "onext", type: "transform", config: { expression: "{ 'o': vars.o + 1, 'n': vars.n, 'log': $append(vars.log, [inner.iterations]) }" }, output: "$.vars" },
      { id: "done", type: "transform", config: { expression: "vars" } },
    ],
    edges: [
      { from: "i", to: "outer" }, { from: "outer", to: "ri", when: "body" }, { from: "ri", to: "inner" },
      { from: "inner", to: "work", when: "body" }, { from: "work", to: "inc" }, { from: "inc", to: "inner" }, { from: "inner", to: "onext", when: "exit" },
      { from: "onext", to: "outer" }, { from: "outer", to: "done", when: "exit" },
    ],
  });
  const t: ToolFn = (a) => ok([a.o!, a.n!]);

  it("the inner loop counts its iterations afresh in each outer pass; counts and keys go on; a fork mid-inner-pass goes on from there", async () => {
    const sim = await new Sim(d, { t }).start();
    // maxIterations 2 for each loop: the inner's count restarts in every outer pass.
    expect([sim.s.status, sim.s.output]).toEqual(["completed", { o: 2, n: 2, log: [2, 2] }]);
    expect(sim.calls("work").map((c) => [c.callId, c.idempotencyKey, c.args])).toEqual([
      ["7.work.1", "7.work", { o: 0, n: 0 }], ["7.work.2", "7.work.v2", { o: 0, n: 1 }], ["7.work.3", "7.work.v3", { o: 1, n: 0 }], ["7.work.4", "7.work.v4", { o: 1, n: 1 }],
    ]);
    expect(sim.s.nodes.inner).toMatchObject({ attempt: 6 });
    expect(sim.s.nodes.outer).toMatchObject({ iterations: 2, attempt: 3 });

    // Held in the second inner pass of the second outer pass.
    let calls = 0;
    const mid = await new Sim(d, { t: (a, c) => (++calls === 4 ? "hold" : t(a, c)) }).start();
    expect([mid.s.nodes.outer!.iterations, mid.s.nodes.inner!.iterations, mid.s.nodes.work!.status]).toEqual([2, 2, "running"]);
    const again = await rebuilt(mid);
    expect([again.context, untimed(again)]).toEqual([mid.s.context, untimed(mid.s)]);
    const f = await fork(d, mid.s, { t });
    expect([f.s.status, f.s.output]).toEqual(["completed", { o: 2, n: 2, log: [2, 2] }]);
    expect(f.calls("work").map((c) => [c.idempotencyKey, c.args])).toEqual([["8.work.v4", { o: 1, n: 1 }]]);
  });
});

describe("loop passes: a cycle bounded by maxVisits in the body", () => {
  /** `work` retries (work → chk → work) until it has tried more often than the pass's number: once in pass 0, twice in pass 1. */
  const d = def({
    start: "init",
    nodes: [
      { id: "init", type: "setVariable", config: { values: { "$.vars.i": 0, "$.vars.tries": 0 } } },
      { id: "loop", type: "whileLoop", config: { condition: "vars.i < 2", maxIterations: 10 } },
      { id: "work", type: "tool", config: { tool: "t" }, input: { i: "$.vars.i", tries: "$.vars.tries" }, maxVisits: 2 },
      { id: "count", type: "transform", config: { expression: "{ 'i': vars.i, 'tries': vars.tries + 1 }" }, output: "$.vars" },
      { id: "chk", type: "condition", config: { expression: "vars.tries <= vars.i" } },
      { id: "next", type: "transform", config: { expression: "{ 'i': vars.i + 1, 'tries': 0 }" }, output: "$.vars" },
      { id: "done", type: "transform", config: { expression: "{ 'i': vars.i, 'work': work.visits }" } },
    ],
    edges: [
      { from: "init", to: "loop" }, { from: "loop", to: "work", when: "body" }, { from: "work", to: "count" }, { from: "count", to: "chk" },
      { from: "chk", to: "work", when: "true" }, { from: "chk", to: "next", when: "false" }, { from: "next", to: "loop" },
      { from: "loop", to: "done", when: "exit" },
    ],
  });

  it("counts visits per pass; a fork mid-cycle counts the visit it runs again once", async () => {
    const sim = await new Sim(d, { t: echo }).start();
    expect([sim.s.status, sim.s.nodes.work!.visits, sim.s.nodes.loop!.iterations]).toEqual(["completed", 3, 2]);
    expect(sim.calls("work").map((c) => [c.idempotencyKey, c.args])).toEqual([["7.work", { i: 0, tries: 0 }], ["7.work.v2", { i: 1, tries: 0 }], ["7.work.v3", { i: 1, tries: 1 }]]);
    // Held at the second visit of pass 2, its last allowed one.
    let n = 0;
    const mid = await new Sim(d, { t: (a, c) => (++n === 3 ? "hold" : echo(a, c)) }).start();
    expect(mid.s.nodes.work).toMatchObject({ status: "running", visits: 3, visitsBeforePass: 1 });
    const f = await fork(d, mid.s, { t: echo });
    expect([f.s.status, f.s.error, f.s.nodes.work!.visits]).toEqual(["completed", undefined, 3]);
    expect(f.calls("work").map((c) => [c.idempotencyKey, c.args])).toEqual([["8.work.v3", { i: 1, tries: 1 }]]);
  });
});

describe("loop passes: a cycle in the body with two ways back to its head", () => {
  /**
   * work → chk, then back to work through fixA or fixB (A, B, A in even passes, B, A, B in odd
   * ones), or on to the loop's next pass through post. Joined: fixA and fixB go back through
   * `note`; else each goes back to work on its own edge, and work notes them.
   */
  const d = (joined: boolean) => def({
    start: "init",
    nodes: [
      { id: "init", type: "setVariable", config: { values: { "$.vars.i": 0, "$.vars.t": 0, "$.vars.log": [] } } },
      { id: "loop", type: "whileLoop", config: { condition: "vars.i < 3", maxIterations: 5 } },
      { id: "pre", type: "tool", config: { tool: "t" }, input: { i: "$.vars.i" } },
      {
        id: "work", type: "transform", output: "$.vars", maxVisits: 4,
        config: { expression: joined ? "{ 'i': vars.i, 't': vars.t + 1, 'log': vars.log }" : "{ 'i': vars.i, 't': vars.t + 1, 'log': vars.t = 0 ? vars.log : $append(vars.log, fixA.fix & fixA.i & '/' & fixB.fix & fixB.i) }" },
      },
      { id: "chk", type: "transform", branching: "first", config: { expression: "vars.t = 4 ? 'ok' : (vars.i % 2 = 0) = (vars.t % 2 = 1) ? 'a' : 'b'" } },
      { id: "fixA", type: "tool", config: { tool: "fix" }, input: { fix: "A", i: "$.vars.i" } },
      { id: "fixB", type: "tool", config: { tool: "fix" }, input: { fix: "B", i: "$.vars.i" } },
      ...(joined ? [{ id: "note", type: "transform", config: { expression: "{ 'i': vars.i, 't': vars.t, 'log': $append(vars.log, fixA.fix & fixA.i & '/' & fixB.fix & fixB.i) }" }, output: "$.vars" }] : []),
      { id: "post", type: "tool", config: { tool: "t" }, input: { i: "$.vars.i" } },
      { id: "next", type: "transform", config: { expression: "{ 'i': vars.i + 1, 't': 0, 'log': vars.log }" }, output: "$.vars" },
      { id: "done", type: "transform", config: { expression: "vars.log" } },
    ],
    edges: [
      { from: "init", to: "loop" }, { from: "loop", to: "pre", when: "body" }, { from: "pre", to: "work" }, { from: "work", to: "chk" },
      { from: "chk", to: "fixA", condition: "$output = 'a'" }, { from: "chk", to: "fixB", condition: "$output = 'b'" }, { from: "chk", to: "post" },
      ...(joined
        ? [{ from: "fixA", to: "note" }, { from: "fixB", to: "note" }, { from: "note", to: "work" }]
        : [{ from: "fixA", to: "work" }, { from: "fixB", to: "work" }]),
      { from: "post", to: "next" }, { from: "next", to: "loop" }, { from: "loop", to: "done", when: "exit" },
    ],
  });

  it("each round of the cycle starts with nothing left of the one before; the loop node and the nodes before the cycle keep their pass", async () => {
    for (const joined of [true, false]) {
      const sim = await new Sim(d(joined), { t: echo, fix: (a) => (a.fix === "B" && a.i === 0 ? "hold" : ok(a)) }).start();
      // Pass 1, second round: fixB runs; fixA, which ran in the first round, is skipped in this one (and runs in the third).
      expect([joined, sim.statuses()]).toEqual([joined, expect.objectContaining({
        loop: "completed#1", pre: "completed#1", work: "completed#2", chk: "completed#2", fixA: "skipped#1", fixB: "running#1",
      })]);
      expect(sim.s.nodes.work!.visits).toBe(2);
      const mid = sim.s;
      await sim.answer("fixB", ok({ fix: "B", i: 0 }));
      // What a round notes of the branch it did not take is that branch's output of its last run.
      expect([joined, sim.s.status, sim.s.output]).toEqual([joined, "completed", ["A0/", "A0/B0", "A0/B0", "A0/B1", "A1/B1", "A1/B1", "A2/B1", "A2/B2", "A2/B2"]]);
      expect(sim.rows("pre").filter((r) => r.endsWith("completed"))).toEqual(["1:completed", "2:completed", "3:completed"]);
      expect(sim.rows("loop").filter((r) => r.endsWith("completed"))).toEqual(["1:completed", "2:completed", "3:completed", "4:completed"]);
      expect(sim.s.nodes.work).toMatchObject({ visits: 12, visitsBeforePass: 8 });
      const f = await fork(d(joined), mid, { t: echo, fix: (a) => ok(a) });
      expect([joined, f.s.status, f.s.output]).toEqual([joined, "completed", sim.s.output]);

      // Pass 2 leaves the cycle to post, which its rounds before skipped: post runs, and nothing before it restarts.
      const left = await new Sim(d(joined), { t: (a, c) => (c.nodeId === "post" && a.i === 1 ? "hold" : ok(a)), fix: (a) => ok(a) }).start();
      expect([joined, left.statuses()]).toEqual([joined, expect.objectContaining({
        loop: "completed#2", pre: "completed#2", work: "completed#8", chk: "completed#8", fixA: "skipped#3", fixB: "skipped#3", post: "running#2", next: "waiting#1",
      })]);
      const f2 = await fork(d(joined), left.s, { t: echo, fix: (a) => ok(a) });
      expect([joined, f2.s.status, f2.s.output, f2.rows("pre").length]).toEqual([joined, "completed", sim.s.output, 2]);
    }
  });
});

describe("loop passes: a cycle bounded by maxVisits whose branches race back to its head", () => {
  /** Each round of h races work against a delay; the third round leaves to done. */
  const d = def({
    start: "h",
    nodes: [
      { id: "h", type: "transform", config: { expression: "$exists(vars.r) ? vars.r + 1 : 1" }, output: "$.vars.r", maxVisits: 3 },
      { id: "work", type: "tool", config: { tool: "t" }, input: { r: "$.vars.r" } },
      { id: "tick", type: "delay", config: { ms: 1000 } },
      { id: "done", type: "transform", config: { expression: "vars.r" } },
    ],
    edges: [
      { from: "h", to: "work", condition: "vars.r < 3" }, { from: "h", to: "tick", condition: "vars.r < 3" }, { from: "h", to: "done", condition: "vars.r >= 3" },
      { from: "work", to: "h" }, { from: "tick", to: "h" },
    ],
  });

  it("the first branch back ends the round: the other branch's work is stopped then, and starts afresh in the next round", async () => {
    const sim = new Sim(d, { t: hold });
    sim.autoTimers = false;
    await sim.start();
    await sim.fire();
    expect(sim.statuses()).toMatchObject({ h: "completed#2", work: "running#2", tick: "running#2" });
    expect(sim.rows("work")).toEqual(["1:running", "1:failed(BATON_CANCELLED)", "2:running"]);
    await sim.answer("work", ok("w"));
    expect([sim.s.status, sim.s.output, sim.s.timers]).toEqual(["completed", 3, undefined]);
    expect(sim.rows("tick")).toEqual(["1:running", "1:completed", "2:running", "2:failed(BATON_CANCELLED)"]);
  });
});

describe("loop passes: a forEach in the body", () => {
  /** Each pass maps `sq` over the pass's list, then the next list is the results. */
  const d = def({
    start: "init",
    nodes: [
      { id: "init", type: "setVariable", config: { values: { "$.vars.i": 0, "$.vars.xs": [1, 2] } } },
      { id: "loop", type: "whileLoop", config: { condition: "vars.i < 2", maxIterations: 5 } },
      { id: "each", type: "forEach", config: { items: "$.vars.xs", tool: "sq", concurrency: 1 } },
      { id: "nx", type: "transform", config: { expression: "{ 'i': vars.i + 1, 'xs': each }" }, output: "$.vars" },
      { id: "done", type: "transform", config: { expression: "vars.xs" } },
    ],
    edges: [
      { from: "init", to: "loop" }, { from: "loop", to: "each", when: "body" }, { from: "each", to: "nx" }, { from: "nx", to: "loop" },
      { from: "loop", to: "done", when: "exit" },
    ],
  });
  const sq: ToolFn = (a) => ok((a.value as number) ** 2);

  it("each pass maps its own list with calls of that pass; a fork mid-forEach keeps only that pass's items done", async () => {
    const sim = await new Sim(d, { sq }).start();
    expect([sim.s.status, sim.s.output]).toEqual(["completed", [1, 16]]);
    expect(sim.calls("each").map((c) => [c.callId, c.idempotencyKey, c.args])).toEqual([
      ["7.each.1.0", "7.each.0", { value: 1 }], ["7.each.1.1", "7.each.1", { value: 2 }],
      ["7.each.2.0", "7.each.v2.0", { value: 1 }], ["7.each.2.1", "7.each.v2.1", { value: 4 }],
    ]);
    // Held at the second item of pass 2: the fork runs that item only.
    let n = 0;
    const mid = await new Sim(d, { sq: (a, c) => (++n === 4 ? "hold" : sq(a, c)) }).start();
    expect(mid.s.nodes.each!.fan!.items.map((it) => [it.status, it.result ?? null])).toEqual([["done", 1], ["running", null]]);
    const f = await fork(d, mid.s, { sq });
    expect([f.s.status, f.s.output]).toEqual(["completed", [1, 16]]);
    expect(f.calls("each").map((c) => [c.callId, c.idempotencyKey, c.args])).toEqual([["8.each.3.1", "8.each.v2.1", { value: 4 }]]);
  });
});

describe("a loop the run never enters", () => {
  /** `c` goes into the loop or around it; both ways meet at `j` (default join: all). */
  const d = (head: "whileLoop" | "cycle") => def({
    start: "c",
    nodes: [
      { id: "c", type: "condition", config: { left: "$.input.go", op: "eq", right: true } },
      head === "whileLoop"
        ? { id: "loop", type: "whileLoop", config: { condition: "$iteration < 2", maxIterations: 5 } }
        : { id: "loop", type: "transform", config: { expression: "1" }, maxVisits: 2 },
      { id: "a", type: "transform", config: { expression: "1" } },
      { id: "j", type: "transform", config: { expression: "'joined'" } },
    ],
    edges: head === "whileLoop"
      ? [{ from: "c", to: "loop", when: "true" }, { from: "loop", to: "a", when: "body" }, { from: "a", to: "loop" }, { from: "loop", to: "j", when: "exit" }, { from: "c", to: "j", when: "false" }]
      : [{ from: "c", to: "loop", when: "true" }, { from: "loop", to: "a" }, { from: "a", to: "loop", condition: "false" }, { from: "a", to: "j", condition: "true" }, { from: "c", to: "j", when: "false" }],
  });

  it("is skipped with its body, so a merge after it runs: its way back cannot be taken before it runs", async () => {
    for (const head of ["whileLoop", "cycle"] as const) {
      const around = await new Sim(d(head)).start({ go: false });
      expect([head, around.s.status, around.s.output ?? around.s.context.j]).toEqual([head, "completed", "joined"]);
      expect([head, around.s.nodes.loop?.status, around.s.nodes.a?.status]).toEqual([head, "skipped", "skipped"]);
      expect(around.nodeEvents("loop")).toEqual(["skipped"]);
      const through = await new Sim(d(head)).start({ go: true });
      expect([head, through.s.status, through.s.nodes.j?.status]).toEqual([head, "completed", "completed"]);
    }
  });
});

describe("a whileLoop whose body edge goes straight back to it", () => {
  /** No body node: `poll`'s own `body` edge goes back to it, its `exit` to `done`. */
  const d = (condition: string) => def({
    start: "init",
    nodes: [
      { id: "init", type: "setVariable", config: { values: { "$.vars.k": 0 } } },
      { id: "poll", type: "whileLoop", config: { condition, maxIterations: 4 } },
      { id: "done", type: "transform", config: { expression: "poll.iterations" } },
    ],
    edges: [{ from: "init", to: "poll" }, { from: "poll", to: "poll", when: "body" }, { from: "poll", to: "done", when: "exit" }],
  });

  it("counts each time round as an iteration, so it exits, or stops at maxIterations, instead of running forever", async () => {
    const twice = await new Sim(d("$iteration < 2")).start();
    expect([twice.s.status, twice.s.output]).toEqual(["completed", 2]);
    expect(twice.rows("poll").filter((r) => r.endsWith(":completed"))).toHaveLength(3);
    const always = await new Sim(d("true")).start();
    expect([always.s.status, always.s.error?.code]).toEqual(["failed", "BATON_LOOP_LIMIT"]);
    expect(always.rows("poll").filter((r) => r.endsWith(":completed"))).toHaveLength(4);
  });
});

describe("a loop entered at two of its nodes that the run never enters", () => {
  /**
   * `mode` enters the loop at `draft` (then `loop`) or at `loop` itself; `loop`'s body goes back
   * to `draft`. No node of the cycle comes first, so each joins as `any`. `gate` goes around it
   * all, and both ways meet at `j` (default join: all).
   */
  const d = def({
    start: "gate",
    nodes: [
      { id: "gate", type: "condition", config: { left: "$.input.go", op: "eq", right: true } },
      { id: "mode", type: "condition", config: { left: "$.input.fresh", op: "eq", right: true } },
      { id: "draft", type: "transform", config: { expression: "'draft'" } },
      { id: "loop", type: "whileLoop", config: { condition: "$iteration < 2", maxIterations: 5 } },
      { id: "publish", type: "transform", config: { expression: "'published'" } },
      { id: "note", type: "transform", config: { expression: "'not now'" } },
      { id: "j", type: "transform", config: { expression: "'joined'" } },
    ],
    edges: [
      { from: "gate", to: "mode", when: "true" }, { from: "gate", to: "note", when: "false" },
      { from: "mode", to: "draft", when: "true" }, { from: "mode", to: "loop", when: "false" },
      { from: "draft", to: "loop" }, { from: "loop", to: "draft", when: "body" }, { from: "loop", to: "publish", when: "exit" },
      { from: "publish", to: "j" }, { from: "note", to: "j" },
    ],
  });

  it("is skipped once the run is quiet, so the merge after it runs instead of the run failing", async () => {
    const around = await new Sim(d).start({ go: false });
    expect([around.s.status, around.s.output]).toEqual(["completed", "joined"]);
    expect([around.s.nodes.draft?.status, around.s.nodes.loop?.status, around.s.nodes.publish?.status]).toEqual(["skipped", "skipped", "skipped"]);
    expect(around.nodeEvents("loop")).toEqual(["skipped"]);
    for (const fresh of [true, false]) {
      const through = await new Sim(d).start({ go: true, fresh });
      expect([fresh, through.s.status, through.s.output]).toEqual([fresh, "completed", "joined"]);
      expect([fresh, through.rows("draft").filter((r) => r.endsWith(":completed")).length]).toEqual([fresh, fresh ? 3 : 2]);
    }
  });
});

describe("a loop whose body can go back to a node before it", () => {
  /** `plan` → `loop` and `plan` → `report`; the body `work` goes back to the loop, or once to `plan` (replanning). */
  const d = def({
    start: "plan",
    nodes: [
      { id: "plan", type: "transform", config: { expression: "($exists(vars.plans) ? vars.plans : 0) + 1" }, output: "$.vars.plans", maxVisits: 2 },
      { id: "loop", type: "whileLoop", config: { condition: "$iteration < 2", maxIterations: 5 } },
      { id: "work", type: "transform", config: { expression: "($exists(vars.k) ? vars.k : 0) + 1" }, output: "$.vars.k" },
      { id: "report", type: "transform", config: { expression: "{ 'plans': vars.plans, 'work': vars.k }" } },
    ],
    edges: [
      { from: "plan", to: "loop" }, { from: "plan", to: "report" }, { from: "loop", to: "work", when: "body" },
      { from: "work", to: "loop", condition: "$not(vars.k = input.replanAt and vars.plans = 1)" },
      { from: "work", to: "plan", condition: "vars.k = input.replanAt and vars.plans = 1" },
      { from: "loop", to: "report", when: "exit" },
    ],
  });

  it("keeps that node's run through the loop's passes: it is not reset, nor reported skipped, until the body goes back to it", async () => {
    const straight = await new Sim(d).start({ replanAt: 0 });
    expect([straight.s.status, straight.s.output]).toEqual(["completed", { plans: 1, work: 2 }]);
    expect(straight.nodeEvents("plan")).toEqual(["started:1", "completed:1"]);
    expect(straight.s.nodes.plan?.status).toBe("completed");
    const replanned = await new Sim(d).start({ replanAt: 1 });
    expect([replanned.s.status, replanned.s.output]).toEqual(["completed", { plans: 2, work: 2 }]);
    expect(replanned.nodeEvents("plan")).toEqual(["started:1", "completed:1", "started:2", "completed:2"]);
  });

  it("so a join on the way back that waits for the loop's exit and for that node's branch is not left waiting for ever", async () => {
    // `back` joins `after` (behind `start`'s branch and the loop's exit) and the body's way back
    // to `start`; a pass used to reset `start`, leaving its edge to `after` undecided.
    const sim = await new Sim(def({
      start: "start",
      nodes: [
        { id: "start", type: "transform", config: { expression: "1" }, maxVisits: 3 },
        { id: "loop", type: "whileLoop", config: { condition: "$iteration < 3", maxIterations: 5 } },
        { id: "work", type: "transform", config: { expression: "1" } },
        { id: "after", type: "transform", config: { expression: "1" } },
        { id: "back", type: "transform", config: { expression: "1" } },
      ],
      edges: [
        { from: "start", to: "after" }, { from: "start", to: "loop" }, { from: "loop", to: "work", when: "body" }, { from: "work", to: "loop" },
        { from: "work", to: "back" }, { from: "after", to: "back" }, { from: "loop", to: "after", when: "exit" }, { from: "back", to: "start" },
      ],
    })).start();
    // The cycle start → after → back → start goes round until start's maxVisits stops it.
    expect([sim.s.status, sim.s.error?.code, sim.s.error?.nodeId]).toEqual(["failed", "BATON_LOOP_LIMIT", "start"]);
  });
});

describe("a nested loop whose body has an edge, never taken, back to the outer loop", () => {
  /** outer →body→ inner →body→ work → inner, inner →exit→ outer; `work → outer` (when `$.input.leave`) only when asked. */
  const d = (leave: boolean) => def({
    start: "s",
    nodes: [
      { id: "s", type: "transform", config: { expression: "0" }, output: "$.vars.k" },
      { id: "outer", type: "whileLoop", config: { condition: "$iteration < 2", maxIterations: 5 } },
      { id: "inner", type: "whileLoop", config: { condition: "$iteration < 2", maxIterations: 5 } },
      { id: "work", type: "transform", config: { expression: "vars.k + 1" }, output: "$.vars.k" },
      { id: "done", type: "transform", config: { expression: "vars.k" } },
    ],
    edges: [
      { from: "s", to: "outer" }, { from: "outer", to: "inner", when: "body" }, { from: "inner", to: "work", when: "body" },
      { from: "work", to: "inner" }, { from: "inner", to: "outer", when: "exit" }, { from: "outer", to: "done", when: "exit" },
      ...(leave ? [{ from: "work", to: "outer", condition: "false" }] : []),
    ],
  });

  it("restarts the inner loop's count in each outer pass, as without that edge", async () => {
    for (const leave of [false, true]) {
      const sim = await new Sim(d(leave)).start();
      expect([leave, sim.s.status, sim.s.output]).toEqual([leave, "completed", 4]);
      expect([leave, sim.rows("work").filter((r) => r.endsWith(":completed")).length]).toEqual([leave, 4]);
    }
  });

  it("also when the outer pass comes back another way than the inner loop's exit edge", async () => {
    // inner →exit→ after → outer, and (`guarded`) a second exit edge that never holds: the pass
    // reaches outer from `after`, not from an exit edge of inner, whose exit edges say nothing of
    // how it went out (one is taken, one left open as it would be while inner iterates).
    for (const guarded of [false, true]) {
      for (const leave of [false, true]) {
        const base = d(leave);
        const sim = await new Sim(def({
          ...base,
          nodes: [...base.nodes, { id: "after", type: "transform", config: { expression: "1" } }, ...(guarded ? [{ id: "never", type: "transform", config: { expression: "1" } }] : [])],
          edges: [
            ...base.edges.filter((e) => !(e.from === "inner" && e.to === "outer")),
            { from: "inner", to: "after", when: "exit" }, { from: "after", to: "outer" },
            ...(guarded ? [{ from: "inner", to: "never", when: "exit", condition: "false" }] : []),
          ],
        })).start();
        expect([guarded, leave, sim.s.status, sim.s.output]).toEqual([guarded, leave, "completed", 4]);
      }
    }
  });
});

describe("two whileLoops each in the other's body, both entered from outside", () => {
  /**
   * n0 → n1 → n2 and n0 → n4 → n5 → n6; n2 →body→ n6 and n6 →body→ n2; each loop's exit goes
   * back to the node before it (n2 →exit→ n1, n6 →exit→ n5), a cycle bounded by that node's maxVisits.
   */
  const d = def({
    start: "n0",
    nodes: [
      { id: "n0", type: "transform", config: { expression: "1" } },
      { id: "n1", type: "transform", config: { expression: "1" }, maxVisits: 2 },
      { id: "n2", type: "whileLoop", config: { condition: "$iteration < 2", maxIterations: 5 } },
      { id: "n4", type: "transform", config: { expression: "1" } },
      { id: "n5", type: "transform", config: { expression: "1" }, maxVisits: 3 },
      { id: "n6", type: "whileLoop", config: { condition: "$iteration < 2", maxIterations: 5 } },
    ],
    edges: [
      { from: "n0", to: "n1" }, { from: "n1", to: "n2" }, { from: "n0", to: "n4" }, { from: "n4", to: "n5" }, { from: "n5", to: "n6" },
      { from: "n2", to: "n6", when: "body" }, { from: "n6", to: "n2", when: "body" }, { from: "n2", to: "n1", when: "exit" }, { from: "n6", to: "n5", when: "exit" },
    ],
  });

  it("ends: neither loop's passes restart the maxVisits of the other's exit cycle, so n1's stops it", async () => {
    const sim = await new Sim(d).start();
    expect([sim.s.status, sim.s.error?.code, sim.s.error?.nodeId]).toEqual(["failed", "BATON_LOOP_LIMIT", "n1"]);
    expect(sim.rows("n1").filter((r) => !r.endsWith(":running"))).toEqual(["1:completed", "2:completed", "3:failed(BATON_LOOP_LIMIT)"]);
  });
});

describe("a cycle entered at two of its nodes inside a loop around it", () => {
  /** s → a and s → loop (join all); loop →body→ a, a → loop; loop →exit→ s while k < 2 (s counts k). */
  const d = def({
    start: "s",
    nodes: [
      { id: "s", type: "transform", config: { expression: "($exists(vars.k) ? vars.k : 0) + 1" }, output: "$.vars.k", maxVisits: 4 },
      { id: "a", type: "transform", config: { expression: "1" } },
      { id: "loop", type: "whileLoop", config: { condition: "$iteration < 2", maxIterations: 2 }, join: "all" },
    ],
    edges: [
      { from: "s", to: "a" }, { from: "s", to: "loop" }, { from: "loop", to: "s", when: "exit", condition: "vars.k < 2" },
      { from: "loop", to: "a", when: "body" }, { from: "a", to: "loop" },
    ],
  });

  it("goes round without resetting the node before it: the loop's join keeps that node's edge", async () => {
    const sim = await new Sim(d).start();
    expect([sim.s.status, sim.s.error?.code, sim.s.context.vars]).toEqual(["completed", undefined, { k: 2 }]);
    expect(sim.nodeEvents("s")).toEqual(["started:1", "completed:1", "started:2", "completed:2"]);
    expect(sim.statuses()).toMatchObject({ s: "completed#2", loop: "completed#6" });
  });
});

describe("an edge back to the start after a round of a cycle between them", () => {
  /**
   * s → a (a tool) and s → b (whileLoop); b →body→ a, a → b; a → s while k < 2. b's body edge
   * reaches a while its call is out; a's answer then closes b's cycle, whose round forgets
   * s → a, and then its edge back to s.
   */
  const d = def({
    start: "s",
    nodes: [
      { id: "s", type: "transform", config: { expression: "($exists(vars.k) ? vars.k : 0) + 1" }, output: "$.vars.k", maxVisits: 3 },
      { id: "a", type: "tool", config: { tool: "t" } },
      { id: "b", type: "whileLoop", config: { condition: "$iteration < 2", maxIterations: 2 } },
    ],
    edges: [
      { from: "s", to: "a" }, { from: "s", to: "b" }, { from: "a", to: "b" }, { from: "a", to: "s", condition: "vars.k < 2" },
      { from: "b", to: "a", when: "body" },
    ],
  });

  it("still closes the loop to the start, which runs again and ends completed, never reported skipped", async () => {
    const sim = await new Sim(d, { t: () => ok(1) }).start();
    expect([sim.s.status, sim.s.context.vars]).toEqual(["completed", { k: 2 }]);
    expect(sim.nodeEvents("s")).toEqual(["started:1", "completed:1", "started:2", "completed:2"]);
    expect(sim.statuses()).toMatchObject({ s: "completed#2", a: "completed#3", b: "completed#3" });
  });
});

describe("two whileLoops each in the other's body, each with an exit edge straight back to itself", () => {
  /** s → a; a →body→ b, b →body→ a; a →exit→ a and b →exit→ b, bounded by the loops' own maxVisits. */
  const d = (a: string) => def({
    start: "s",
    nodes: [
      { id: "s", type: "transform", config: { expression: "1" } },
      { id: "a", type: "whileLoop", config: { condition: a, maxIterations: 1, onLimit: "exit" }, maxVisits: 4 },
      { id: "b", type: "whileLoop", config: { condition: "$iteration < 2", maxIterations: 3 }, maxVisits: 3 },
    ],
    edges: [
      { from: "s", to: "a" }, { from: "a", to: "b", when: "body" }, { from: "b", to: "a", when: "body" },
      { from: "a", to: "a", when: "exit" }, { from: "b", to: "b", when: "exit" },
    ],
  });

  it("ends: neither loop's passes restart the other's maxVisits, so a's own bound stops its exit cycle", async () => {
    for (const condition of ["true", "$iteration < 1"]) {
      const sim = new Sim(d(condition));
      sim.cap = 2_000;
      await sim.start();
      expect([condition, sim.capped, sim.s.status, sim.s.error?.code, sim.s.error?.nodeId]).toEqual([condition, false, "failed", "BATON_LOOP_LIMIT", "a"]);
      expect(sim.rows("a").filter((r) => !r.endsWith(":running"))).toEqual(["1:completed", "2:completed", "3:completed", "4:completed", "5:failed(BATON_LOOP_LIMIT)"]);
    }
  });
});

describe("a cycle in a loop body entered at two of its nodes, when the loop exits", () => {
  /** loop →body→ a and loop →body→ b; a ⇄ b (guards never true; a bounds the cycle), a → loop. */
  const d = def({
    start: "init",
    nodes: [
      { id: "init", type: "setVariable", config: { values: { "$.vars.k": 0 } } },
      { id: "loop", type: "whileLoop", config: { condition: "$iteration < 2", maxIterations: 5 } },
      { id: "a", type: "transform", config: { expression: "1" }, maxVisits: 2 },
      { id: "b", type: "transform", config: { expression: "1" } },
      { id: "done", type: "transform", config: { expression: "loop.iterations" } },
    ],
    edges: [
      { from: "init", to: "loop" }, { from: "loop", to: "a", when: "body" }, { from: "loop", to: "b", when: "body" },
      { from: "a", to: "b", condition: "false" }, { from: "b", to: "a", condition: "false" }, { from: "a", to: "loop" },
      { from: "loop", to: "done", when: "exit" },
    ],
  });

  it("is skipped: the run completes with no node left waiting", async () => {
    const sim = await new Sim(d).start();
    expect([sim.s.status, sim.s.output]).toEqual(["completed", 2]);
    expect(Object.values(sim.s.nodes).filter((r) => r.status !== "completed" && r.status !== "skipped")).toEqual([]);
    expect([sim.s.nodes.a?.status, sim.s.nodes.b?.status]).toEqual(["skipped", "skipped"]);
    expect(sim.nodeEvents("a")).toEqual(["started:1", "completed:1", "started:2", "completed:2", "skipped"]);
    // Each node.skipped is the last word on its node, after the run's last node completed and before it completed.
    expect(sim.events.map((e) => e.kind).slice(-3)).toEqual(["node.skipped", "node.skipped", "execution.completed"]);
  });
});

describe("a whileLoop whose passes reach a node that a join after it waits for", () => {
  /**
   * loop →body→ w → loop, w → b; loop →exit→ j (n: 2) and →exit→ c; c →true→ b; j → a → b → j
   * (a → b never taken). Validation accepts it: each pass runs w → b, so j has b's edge before the
   * loop goes out, whichever way c goes (without w → b, c going false leaves j waiting for b, and
   * validation refuses it: validate.test.ts).
   */
  const d = def({
    start: "loop",
    nodes: [
      { id: "loop", type: "whileLoop", config: { condition: "$iteration < 2", maxIterations: 3 } },
      { id: "w", type: "transform", config: { expression: "1" } },
      { id: "j", type: "transform", config: { expression: "1" }, join: { n: 2 } },
      { id: "c", type: "condition", config: { left: "$.input.go", op: "eq", right: true } },
      { id: "a", type: "transform", config: { expression: "1" } },
      { id: "b", type: "transform", config: { expression: "1" }, maxVisits: 2 },
    ],
    edges: [
      { from: "loop", to: "w", when: "body" }, { from: "w", to: "loop" }, { from: "w", to: "b" },
      { from: "loop", to: "j", when: "exit" }, { from: "loop", to: "c", when: "exit" }, { from: "c", to: "b", when: "true" },
      { from: "j", to: "a" }, { from: "a", to: "b", condition: "false" }, { from: "b", to: "j" },
    ],
  });

  it("completes whichever way the condition after it goes, with the join run once", async () => {
    for (const go of [true, false]) {
      const sim = await new Sim(d).start({ go });
      expect([go, sim.s.status, sim.s.error]).toEqual([go, "completed", undefined]);
      expect([sim.s.nodes.loop!.iterations, sim.s.nodes.j!.status, sim.nodeEvents("j")]).toEqual([2, "completed", ["started:1", "completed:1"]]);
      expect(Object.values(sim.s.nodes).filter((r) => r.status !== "completed" && r.status !== "skipped")).toEqual([]);
    }
  });

  it("without w → b (validation refuses it), a run in which c goes false stops with j waiting", async () => {
    const refused: WorkflowDefinition = { ...d, edges: d.edges.filter((e) => !(e.from === "w" && e.to === "b")) };
    const sim = await new Sim(refused).start({ go: false });
    expect([sim.s.status, sim.s.error?.code, sim.s.nodes.loop!.iterations]).toEqual(["failed", "BATON_JOIN_NEVER_FIRED", 2]);
    expect(sim.s.error?.message).toMatch(/"j"/);
  });
});

describe("the start's join after an edge back that starts its round over", () => {
  /**
   * s (join all, counts k) → a, s → L; L (while k < 2) →body→ s, then →body→ b, →exit→ end;
   * a → b; b → s. L's edge back starts s's round over (a, b and L wait again); the round then
   * takes L → b, but b waits for a, which waits for s, and s waits for b: validation refuses it
   * (validate.test.ts). Without a → b, the round runs b and s runs again on both edges back.
   */
  const accepted = def({
    start: "s",
    nodes: [
      { id: "s", type: "transform", config: { expression: "$exists(vars.k) ? vars.k + 1 : 1" }, output: "$.vars.k", join: "all", maxVisits: 3 },
      { id: "a", type: "setVariable", config: { values: {} } },
      { id: "L", type: "whileLoop", config: { condition: "vars.k < 2", maxIterations: 3 } },
      { id: "b", type: "setVariable", config: { values: {} } },
      { id: "end", type: "setVariable", config: { values: {} } },
    ],
    edges: [
      { from: "s", to: "a" }, { from: "s", to: "L" }, { from: "L", to: "s", when: "body" }, { from: "L", to: "b", when: "body" }, { from: "L", to: "end", when: "exit" },
      { from: "b", to: "s" },
    ],
  });

  it("with a → b (validation refuses it), the run stops with s and b waiting", async () => {
    const refused: WorkflowDefinition = { ...accepted, edges: [...accepted.edges, { from: "a", to: "b" }] };
    const sim = await new Sim(refused).start();
    expect([sim.s.status, sim.s.error?.code, sim.s.error?.message]).toEqual([
      "failed", "BATON_JOIN_NEVER_FIRED", 'node(s) "s", "b" were reached but their joins wait for edges from nodes that never run (they wait on each other)',
    ]);
  });

  it("without a → b (validation accepts it), s runs again on both edges back and the run completes", async () => {
    const sim = await new Sim(accepted).start();
    expect([sim.s.status, sim.s.error, (sim.s.context.vars as JsonObject).k]).toEqual(["completed", undefined, 2]);
    expect([sim.nodeEvents("s"), sim.s.nodes.end!.status]).toEqual([["started:1", "completed:1", "started:2", "completed:2"], "completed"]);
  });
});

describe("an edge arriving late at a node that ran in this round of a cycle entered at several nodes", () => {
  /**
   * s → c, s → a; c (counts k, maxVisits 3) → b, → a; a → j, → b; b → j; j (join all) → c while
   * k < 2. j → c starts c's round over (c, a, b and j wait again) and stays taken. In the new
   * round c runs b and a; a → b then arrives late at b, which ran. That b ran before a, so the
   * edge closes no loop: the way b → j → c → a goes through j, which has not run in this round
   * (j → c is the edge back of the round before). Taken as closing one, it started b's region
   * over (a and c too), and j waited for a for ever (BATON_JOIN_NEVER_FIRED).
   */
  const d = def({
    start: "s",
    nodes: [
      { id: "s", type: "setVariable", config: { values: {} } },
      { id: "c", type: "transform", config: { expression: "$exists(vars.k) ? vars.k + 1 : 1" }, output: "$.vars.k", maxVisits: 3 },
      { id: "a", type: "setVariable", config: { values: {} } },
      { id: "b", type: "setVariable", config: { values: {} } },
      { id: "j", type: "setVariable", config: { values: {} }, join: "all" },
    ],
    edges: [
      { from: "s", to: "c" }, { from: "c", to: "b" }, { from: "a", to: "j" }, { from: "a", to: "b" }, { from: "b", to: "j" }, { from: "s", to: "a" }, { from: "c", to: "a" },
      { from: "j", to: "c", condition: "vars.k < 2" },
    ],
  });

  it("does not start that node's region over: each node runs once a round and the run completes", async () => {
    const sim = await new Sim(d).start();
    expect([sim.s.status, sim.s.error, (sim.s.context.vars as JsonObject).k]).toEqual(["completed", undefined, 2]);
    const twice = ["started:1", "completed:1", "started:2", "completed:2"];
    expect(["c", "a", "b", "j"].map((id) => sim.nodeEvents(id))).toEqual([twice, twice, twice, twice]);
  });
});

describe("an edge arriving late at an n-join, on the way back to its source", () => {
  /**
   * s → j twice, s → b; b (maxVisits 2) → j; j ({ n: 2 }) → c; c → b. j runs on the two edges
   * from s; b then arrives late at j, which ran. c ran after b, but not because of it: the way
   * b → j → c passes j, which ran before b. So c → b closes no loop: it arrives late at b, which
   * ran, and is ignored; each node runs once. Taken as closing one (b → j counted as a way on),
   * it started b's region over (b, j, c): j, its edges from s counting for the first round only,
   * then could not get two, and was skipped with c (fuzz seed 159253, where such a j waited for
   * a node of its cycle: BATON_JOIN_NEVER_FIRED).
   */
  const d = def({
    start: "s",
    nodes: [
      { id: "s", type: "transform", config: { expression: "'s'" } },
      { id: "j", type: "transform", config: { expression: "'j'" }, join: { n: 2 } },
      { id: "b", type: "transform", config: { expression: "'b'" }, maxVisits: 2 },
      { id: "c", type: "transform", config: { expression: "'c'" } },
    ],
    edges: [{ from: "s", to: "j" }, { from: "s", to: "j" }, { from: "s", to: "b" }, { from: "b", to: "j" }, { from: "j", to: "c" }, { from: "c", to: "b" }],
  });

  it("does not start the region of the node it left from over: each node runs once and the run completes", async () => {
    const sim = await new Sim(d).start();
    expect([sim.s.status, sim.s.error, sim.s.output]).toEqual(["completed", undefined, "c"]);
    const once = ["started:1", "completed:1"];
    expect(["s", "j", "b", "c"].map((id) => sim.nodeEvents(id))).toEqual([once, once, once, once]);
    expect(sim.s.late).toEqual(["b->j", "c->b"]);
  });
});

describe("a round started by an edge back to a node of a cycle entered at several nodes", () => {
  /**
   * s → a, s → c; a (counts k) → j (join all); c →false→ j; j → c, then j → a while k < 2. j ran
   * after a because of a → j, so j → a starts a's round over (j and c too; s → c counts for the
   * first round only). With c true, a → j arrives but c is reached only from j, and j waits for c:
   * validation refuses it (validate.test.ts). With a → c too, the round runs c and completes.
   */
  const accepted = def({
    start: "s",
    nodes: [
      { id: "s", type: "setVariable", config: { values: {} } },
      { id: "a", type: "transform", config: { expression: "$exists(vars.k) ? vars.k + 1 : 1" }, output: "$.vars.k" },
      { id: "c", type: "condition", config: { left: "$.input.go", op: "eq", right: true } },
      { id: "j", type: "setVariable", config: { values: {} }, join: "all", maxVisits: 3 },
    ],
    edges: [
      { from: "s", to: "a" }, { from: "s", to: "c" }, { from: "a", to: "j" }, { from: "c", to: "j", when: "false" }, { from: "a", to: "c" },
      { from: "j", to: "c" }, { from: "j", to: "a", condition: "vars.k < 2" },
    ],
  });

  it("without a → c (validation refuses it), the round stops with j waiting for c", async () => {
    const refused: WorkflowDefinition = { ...accepted, edges: accepted.edges.filter((e) => !(e.from === "a" && e.to === "c")) };
    const sim = await new Sim(refused).start({ go: true });
    expect([sim.s.status, sim.s.error?.code, sim.s.error?.message, sim.s.nodes.a!.attempt]).toEqual([
      "failed", "BATON_JOIN_NEVER_FIRED", 'node(s) "j" were reached but their joins wait for edges from nodes that never run (they wait on each other)', 2,
    ]);
  });

  it("with a → c (validation accepts it), the round runs c and j again and the run completes", async () => {
    const sim = await new Sim(accepted).start({ go: true });
    expect([sim.s.status, sim.s.error, (sim.s.context.vars as JsonObject).k]).toEqual(["completed", undefined, 2]);
    expect([sim.nodeEvents("j"), sim.nodeEvents("c")]).toEqual([["started:1", "completed:1", "started:2", "completed:2"], ["started:1", "completed:1", "started:2", "completed:2"]]);
  });
});

describe("a round started by an edge back whose source is reached from its target only through another node (known gap)", () => {
  /**
   * s → w, s → h; w → v, h → v; v (join all) → b, → c; c →true→ w; b → h (maxVisits on w and h).
   * b ran after h because of it (through v), so b → h starts h's round over (v, b, c and w too;
   * s → w counts for the first round only), and v then waits for w, which waits for c, which
   * waits for v. Validation follows such a round only when the edge back's source has an edge
   * from its target (workflows.md, join_never_fires), so it accepts this definition; every run
   * fails with BATON_JOIN_NEVER_FIRED (fuzz seeds 154281, 218290 are of this kind).
   */
  const d = def({
    start: "s",
    nodes: [
      { id: "s", type: "setVariable", config: { values: {} } },
      { id: "w", type: "setVariable", config: { values: {} }, maxVisits: 3 },
      { id: "h", type: "setVariable", config: { values: {} }, maxVisits: 3 },
      { id: "v", type: "setVariable", config: { values: {} }, join: "all" },
      { id: "b", type: "setVariable", config: { values: {} } },
      { id: "c", type: "condition", config: { left: "$.input.go", op: "eq", right: true } },
    ],
    edges: [
      { from: "s", to: "w" }, { from: "s", to: "h" }, { from: "w", to: "v" }, { from: "h", to: "v" }, { from: "v", to: "b" }, { from: "v", to: "c" },
      { from: "c", to: "w", when: "true" }, { from: "b", to: "h" },
    ],
  });

  it.each([true, false])("is accepted, and a run (c %s) stops with v waiting for w", async (go) => {
    const sim = await new Sim(d).start({ go });
    expect([sim.s.status, sim.s.error?.code, sim.s.error?.message, sim.s.nodes.h!.attempt]).toEqual([
      "failed", "BATON_JOIN_NEVER_FIRED", 'node(s) "v" were reached but their joins wait for edges from nodes that never run (they wait on each other)', 2,
    ]);
  });
});

describe("an n-join counting a condition's edge straight into it as arriving (known gap)", () => {
  /**
   * s → j twice, s → c1, s → c2; c1 →true→ x; c2 →false→ j; x → j; j ({ n: 3 }) → x (maxVisits
   * on x). When c1 goes false, x is reached only through j; j then needs c2's edge, so when c2
   * goes true it waits for x, which waits for j. Validation tries c1 either way but counts c2's
   * edge as arriving (c2 does not lead towards x), so it accepts this definition (fuzz seed
   * 252786 is of this kind; workflows.md, join_never_fires).
   */
  const d = def({
    start: "s",
    nodes: [
      { id: "s", type: "setVariable", config: { values: {} } },
      { id: "c1", type: "condition", config: { left: "$.input.x", op: "eq", right: true } },
      { id: "c2", type: "condition", config: { left: "$.input.y", op: "eq", right: true } },
      { id: "x", type: "setVariable", config: { values: {} }, maxVisits: 4 },
      { id: "j", type: "setVariable", config: { values: {} }, join: { n: 3 } },
    ],
    edges: [
      { from: "s", to: "c1" }, { from: "s", to: "c2" }, { from: "c1", to: "x", when: "true" }, { from: "x", to: "j" },
      { from: "s", to: "j" }, { from: "s", to: "j" }, { from: "c2", to: "j", when: "false" }, { from: "j", to: "x" },
    ],
  });

  it("is accepted, and with c1 false and c2 true the run stops with j waiting for x", async () => {
    const stuck = await new Sim(d).start({ x: false, y: true });
    expect([stuck.s.status, stuck.s.error?.code, stuck.s.error?.message]).toEqual([
      "failed", "BATON_JOIN_NEVER_FIRED", 'node(s) "j" were reached but their joins wait for edges from nodes that never run (they wait on each other)',
    ]);
  });
});

describe("two whileLoops each in the other's body", () => {
  /**
   * s → a, s → b; a →body→ a, b →body→ b, a →body→ b, b →body→ a (a: "true", maxIterations 2,
   * onLimit exit; b: `$iteration < 2`, maxIterations 2). Neither is inside the other. Each pass
   * of one used to start a new run of the other (its count afresh), so the two restarted each
   * other for ever and the run went on until limits.maxSteps (workflows.md, the old "Known
   * limitation"; fuzz seeds 75033, 90067, 90875, 94325, 96059, 114054, 120083, 120673, 125112).
   * A pass of one now starts a new run of the other only when the other did not start its own
   * run: a's second run, started by b, does not start b over, and both counts run out.
   */
  const d = def({
    start: "s",
    nodes: [
      { id: "s", type: "setVariable", config: { values: {} } },
      { id: "a", type: "whileLoop", config: { condition: "true", maxIterations: 2, onLimit: "exit" } },
      { id: "b", type: "whileLoop", config: { condition: "$iteration < 2", maxIterations: 2 } },
    ],
    edges: [
      { from: "s", to: "a" }, { from: "s", to: "b" }, { from: "a", to: "a", when: "body" }, { from: "b", to: "b", when: "body" },
      { from: "a", to: "b", when: "body" }, { from: "b", to: "a", when: "body" },
    ],
  });

  it("end: each pass of one restarts the other only until the other restarted it", async () => {
    const sim = await new Sim(d).start({});
    expect([sim.capped, sim.s.status, sim.s.error, sim.s.steps]).toEqual([false, "completed", undefined, 11]);
    const completions = (id: string) => sim.nodeEvents(id).filter((e) => e.startsWith("completed")).length;
    expect([completions("a"), completions("b")]).toEqual([6, 4]);
    expect(sim.s.nodes.a!.restartedBy).toBe("b");
  });
});

describe("a loop's count restarts on a new pass of a loop around it, not on a cycle through that loop's exit", () => {
  /**
   * a ($iteration < 2) →body→ b and →exit→ b; b (goes out at once, maxVisits 3) →exit→ a and
   * →exit→ c; c ($iteration < 1) →body→ b. c and a are each in the other's body; b is on the
   * cycle a →exit→ b →exit→ a, which only its maxVisits bounds, and each pass of c starts b's
   * count again. Once a went out (for good: its count is spent), coming back to it by that cycle
   * is no new pass of it, so c, which went out too, keeps its count and makes no more passes; b's
   * count then runs out. When that return counted as a new pass of a, c went round again each
   * time, restarting b's count, and the run never ended.
   */
  const d = def({
    start: "a",
    nodes: [
      { id: "a", type: "whileLoop", config: { condition: "$iteration < 2", maxIterations: 2 } },
      { id: "b", type: "whileLoop", config: { condition: "false", maxIterations: 1 }, maxVisits: 3 },
      { id: "c", type: "whileLoop", config: { condition: "$iteration < 1", maxIterations: 1 } },
    ],
    edges: [
      { from: "a", to: "b", when: "body" }, { from: "a", to: "b", when: "exit" },
      { from: "b", to: "a", when: "exit" }, { from: "b", to: "c", when: "exit" },
      { from: "c", to: "b", when: "body" },
    ],
  });

  it("fails with BATON_LOOP_LIMIT once b's count runs out, c going round once only", async () => {
    const sim = new Sim(d);
    sim.cap = 2_000;
    await sim.start();
    expect([sim.capped, sim.s.status, sim.s.error?.code, sim.s.error?.nodeId]).toEqual([false, "failed", "BATON_LOOP_LIMIT", "b"]);
    // c went round once (in a's second pass) and then out each time; b's visits since are its 3, and one more.
    expect(["a", "b", "c"].map((id) => [sim.s.nodes[id]!.attempt, sim.s.nodes[id]!.iterations])).toEqual([[5, 2], [5, undefined], [4, 1]]);
    expect(sim.steps).toBe(14);
  });
});
