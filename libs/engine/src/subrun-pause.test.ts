/**
 * Pauses in sub-runs (the `childPaused` command), step by step. Rules checked:
 * - a sub-run's pause pauses its parent: status `paused`, the pause point names the node that
 *   waits for the sub-run and the sub-run (`subExecutionId`), and `execution.paused` says so
 *   with the reason "review in sub-run <id>: <its reason>"; the run is paused until no review
 *   waits in it, then `execution.resumed` (decision `sub_run`) and `running` again;
 * - news is taken once and in order: a repeat, or news of an earlier step of the sub-run, is
 *   ignored and changes nothing; news of a sub-run the run does not wait for (not its child,
 *   or one whose result came) or after the run ended is ignored;
 * - a node's pause lasts from its first sub-run to pause to its last one to run on: a forEach
 *   whose two children pause is resumed once, after the second;
 * - a sub-run that ends while paused ends the node's pause before its result is applied;
 *   one cancelled by its parent (a loop going round) ends it as `cancelled`; a run that is
 *   cancelled forgets its sub-runs, cancels them, and announces no resume (its end closes it);
 * - the run's own reviews and pauses in sub-runs add up: the newest pause is the pause point,
 *   and deciding the run's own review leaves it paused while a sub-run's review waits;
 * - a fork of a state paused in a sub-run starts the sub-run again, knowing no pause;
 * - a state rebuilt from the journal (replayJournal) learns its pauses in sub-runs again from
 *   the sub-runs that are paused, with their reasons, its pause point and the sub-run each
 *   node's pause names as announced where they still wait (also the run's own review), and
 *   owes what the announced pauses (the row's `subRunPauses`) say it did not publish: the
 *   `execution.resumed` of a node whose sub-runs no longer wait (decided meanwhile), while it
 *   stays paused at the others, and the `execution.paused` of a node not announced.
 */
import { describe, expect, it } from "@jest/globals";
import { forkState, replayJournal, step, subRunPauses } from "./index.ts";
import type { Command, Effect, EngineEvent, ExecutionState, JournalEntry, LearnedSubRunPause, ReplayInput, WorkflowDefinition } from "./index.ts";
import { deepFreeze, def } from "./test-support.ts";


const identity = { executionId: 7, tenantId: "t_1", workflowId: 1, workflowVersion: 1 };
let clock = Date.UTC(2026, 0, 1);

interface Applied {
  state: ExecutionState;
  effects: Effect[];
  events: EngineEvent[];
  ignored?: string;
}


/** Applies a command and the inline steps it makes ready; no outside work is answered. */
async function apply(d: WorkflowDefinition, state: ExecutionState | null, command: Command): Promise<Applied> {
  clock += 1000;
  let r = await step({ definition: d, state: state && deepFreeze(state), command, now: new Date(clock).toISOString(), identity });
  const effects = [...r.effects];
  const ignored = r.ignored;
  while (r.more) {
    r = await step({ definition: d, state: r.state, command: { kind: "continue" }, now: new Date(clock).toISOString(), identity });
    effects.push(...r.effects);
  }
  return { state: r.state, effects, events: effects.flatMap((e) => (e.kind === "emit" ? [e.event] : [])), ...(ignored !== undefined ? { ignored } : {}) };
}

const children = (r: Applied) => r.effects.flatMap((e) => (e.kind === "startChild" ? [e] : []));
const kinds = (r: Applied) => r.events.map((e) => `${e.kind}${"nodeId" in e ? `:${e.nodeId}` : ""}`);
const news = (nodeId: string, childKey: string, childExecutionId: number, paused: boolean, seq: number, reason = "ok?"): Command =>
  ({ kind: "childPaused", nodeId, childKey, childExecutionId, paused, seq, ...(paused ? { reason } : {}) });

const sub = def({
  nodes: [
    { id: "sub", type: "subworkflow", config: { workflow: { slug: "child" } } },
    { id: "after", type: "transform", config: { expression: "sub.v" } },
  ],
  edges: [{ from: "sub", to: "after" }],
});

describe("a subworkflow whose child pauses at a review", () => {
  it("pauses the parent at the subworkflow node until the child runs on, then the parent completes", async () => {
    const started = await apply(sub, null, { kind: "start", input: {} });
    expect(children(started)).toMatchObject([{ nodeId: "sub", childKey: "1" }]);
    const paused = await apply(sub, started.state, news("sub", "1", 70, true, 5));
    expect(paused.state.status).toBe("paused");
    expect(paused.state.pause).toEqual({ nodeId: "sub", reason: "review in sub-run 70: ok?", seq: 1, subExecutionId: 70 });
    expect(paused.events).toEqual([{ kind: "execution.paused", nodeId: "sub", reason: "review in sub-run 70: ok?", subExecutionId: 70 }]);
    expect(paused.effects.some((e) => e.kind === "review")).toBe(false);
    expect(paused.state.subRuns).toEqual({ 70: { nodeId: "sub", childKey: "1", paused: true, seq: 5, reason: "ok?" } });

    const resumed = await apply(sub, paused.state, news("sub", "1", 70, false, 9));
    expect(resumed.state.status).toBe("running");
    expect(resumed.state.pause).toBeUndefined();
    expect(resumed.events).toEqual([{ kind: "execution.resumed", nodeId: "sub", decision: "sub_run", subExecutionId: 70 }]);

    const done = await apply(sub, resumed.state, { kind: "childResult", nodeId: "sub", childKey: "1", status: "completed", output: { v: 3 } });
    expect({ status: done.state.status, output: done.state.output }).toEqual({ status: "completed", output: 3 });
    expect(done.state.subRuns).toBeUndefined();
  });

  it("takes news once and in order: a repeat or older news changes nothing, nor news of a child it does not wait for", async () => {
    const started = await apply(sub, null, { kind: "start", input: {} });
    const paused = await apply(sub, started.state, news("sub", "1", 70, true, 5));
    for (const c of [news("sub", "1", 70, true, 5), news("sub", "1", 70, false, 4), news("sub", "1", 70, true, 2)]) {
      const again = await apply(sub, paused.state, c);
      expect(again.ignored).toMatch(/not newer/);
      expect(again.state).toBe(paused.state);
      expect(again.effects).toEqual([]);
    }
    const resumed = await apply(sub, paused.state, news("sub", "1", 70, false, 9));
    // The pause of step 5, delivered again after the resume of step 9: still running.
    const late = await apply(sub, resumed.state, news("sub", "1", 70, true, 5));
    expect(late.ignored).toMatch(/not newer/);
    expect(late.state.status).toBe("running");
    expect((await apply(sub, resumed.state, news("sub", "1", 70, false, 9))).ignored).toMatch(/not newer/);
    // Another node's child, or a child key that is not out.
    expect((await apply(sub, started.state, news("after", "1", 71, true, 1))).ignored).toMatch(/no outstanding child/);
    expect((await apply(sub, started.state, news("sub", "2", 71, true, 1))).ignored).toMatch(/no outstanding child/);
  });

  it("a child that ends while paused ends the node's pause before its result is applied", async () => {
    const retried = def({ nodes: [{ id: "sub", type: "subworkflow", config: { workflow: { slug: "child" } }, retry: { maxAttempts: 2, initialDelayMs: 10, jitter: 0 } }] });
    const started = await apply(retried, null, { kind: "start", input: {} });
    const paused = await apply(retried, started.state, news("sub", "1", 70, true, 5));
    const failed = await apply(retried, paused.state, { kind: "childResult", nodeId: "sub", childKey: "1", status: "failed", error: { code: "E_FLAKY", message: "flaky", retryable: true } });
    expect(kinds(failed)).toEqual(["execution.resumed:sub", "node.failed:sub"]);
    expect(failed.events[0]).toEqual({ kind: "execution.resumed", nodeId: "sub", decision: "sub_run", subExecutionId: 70 });
    expect(failed.state.status).toBe("running");
    expect(failed.state.subRuns).toBeUndefined();
    // Its news that comes late is about a child the run no longer waits for.
    expect((await apply(retried, failed.state, news("sub", "1", 70, false, 9))).ignored).toMatch(/no outstanding child/);
  });

  it("cancelling a run paused in a sub-run cancels the sub-run and announces no resume", async () => {
    const started = await apply(sub, null, { kind: "start", input: {} });
    const paused = await apply(sub, started.state, news("sub", "1", 70, true, 5));
    const cancelled = await apply(sub, paused.state, { kind: "cancel", reason: "stop" });
    expect(cancelled.state.status).toBe("cancelled");
    expect(cancelled.state.subRuns).toBeUndefined();
    expect(cancelled.state.pause).toBeUndefined();
    expect(cancelled.effects).toContainEqual({ kind: "cancelChildren", nodeId: "sub", childKeys: ["1"], reason: "stop" });
    expect(kinds(cancelled)).toEqual(["node.failed:sub", "execution.cancelled"]);
    expect((await apply(sub, cancelled.state, news("sub", "1", 70, false, 9))).ignored).toMatch(/cancelled/);
  });

  it("a fork of a state paused in a sub-run starts the sub-run again and knows no pause", async () => {
    const started = await apply(sub, null, { kind: "start", input: {} });
    const paused = await apply(sub, started.state, news("sub", "1", 70, true, 5));
    const base = forkState(paused.state, { ...identity, executionId: 8 }, { executionId: 7, version: 3 }, new Date(clock).toISOString());
    expect(base.subRuns).toBeUndefined();
    expect(base.status).toBe("running");
    const fork = await step({ definition: sub, state: null, command: { kind: "start", input: {}, fork: { state: paused.state, executionId: 7, version: 3 } }, now: new Date(clock).toISOString(), identity: { ...identity, executionId: 8 } });
    expect(fork.state.status).toBe("running");
    expect(fork.effects.filter((e) => e.kind === "startChild")).toHaveLength(1);
  });
});

describe("a forEach whose children pause", () => {
  const each = def({ nodes: [{ id: "each", type: "forEach", config: { items: "$.input.xs", body: { nodes: [{ id: "r", type: "humanReview", config: { reason: "item?" } }] } } }] });

  it("is paused from the first child's pause to the last one's resume, announced once each way", async () => {
    const started = await apply(each, null, { kind: "start", input: { xs: [1, 2] } });
    const [c0, c1] = children(started).map((c) => c.childKey);
    expect([c0, c1]).toEqual(["1.0", "1.1"]);
    const first = await apply(each, started.state, news("each", c0!, 80, true, 4, "item?"));
    expect(first.events).toEqual([{ kind: "execution.paused", nodeId: "each", reason: "review in sub-run 80: item?", subExecutionId: 80 }]);
    const second = await apply(each, first.state, news("each", c1!, 81, true, 4, "item?"));
    expect(second.events).toEqual([]);
    expect(second.state.pause).toMatchObject({ nodeId: "each", subExecutionId: 80 });
    // The first child is decided: the second still waits; the pause point now names it.
    const one = await apply(each, second.state, news("each", c0!, 80, false, 6));
    expect(one.events).toEqual([]);
    expect(one.state.status).toBe("paused");
    expect(one.state.pause).toMatchObject({ nodeId: "each", subExecutionId: 81, reason: "review in sub-run 81: item?" });
    const both = await apply(each, one.state, news("each", c1!, 81, false, 6));
    expect(both.events).toEqual([{ kind: "execution.resumed", nodeId: "each", decision: "sub_run", subExecutionId: 81 }]);
    expect(both.state.status).toBe("running");
    let s = both.state;
    for (const key of [c0!, c1!]) s = (await apply(each, s, { kind: "childResult", nodeId: "each", childKey: key, status: "completed", output: key })).state;
    expect({ status: s.status, output: s.output, subRuns: s.subRuns }).toEqual({ status: "completed", output: ["1.0", "1.1"], subRuns: undefined });
  });

  it("a child that fails the forEach ends the run, which cancels the paused sibling", async () => {
    const started = await apply(each, null, { kind: "start", input: { xs: [1, 2] } });
    const paused = await apply(each, started.state, news("each", "1.0", 80, true, 4));
    const failed = await apply(each, paused.state, { kind: "childResult", nodeId: "each", childKey: "1.1", status: "failed", error: { code: "E_ITEM", message: "no" } });
    expect(failed.state.status).toBe("failed");
    expect(failed.state.subRuns).toBeUndefined();
    expect(failed.effects).toContainEqual(expect.objectContaining({ kind: "cancelChildren", nodeId: "each", childKeys: ["1.0"] }));
    expect(kinds(failed).at(-1)).toBe("execution.failed");
  });
});

describe("the run's own reviews with pauses in sub-runs", () => {
  const both = def({
    start: "s",
    nodes: [
      { id: "s", type: "setVariable", config: { values: { x: 1 } } },
      { id: "own", type: "humanReview", config: { reason: "mine" } },
      { id: "sub", type: "subworkflow", config: { workflow: { slug: "child" } } },
    ],
    edges: [{ from: "s", to: "own" }, { from: "s", to: "sub" }],
  });

  it("the newest pause is the pause point; deciding the own review leaves the run paused in the sub-run", async () => {
    const started = await apply(both, null, { kind: "start", input: {} });
    expect(started.state.pause).toMatchObject({ nodeId: "own" });
    const inSub = await apply(both, started.state, news("sub", "1", 70, true, 3));
    expect(inSub.state.pause).toMatchObject({ nodeId: "sub", subExecutionId: 70 });
    const decided = await apply(both, inSub.state, { kind: "resume", nodeId: "own", action: "approve" });
    expect(decided.state.status).toBe("paused");
    expect(decided.state.pause).toMatchObject({ nodeId: "sub", subExecutionId: 70, reason: "review in sub-run 70: ok?" });
    // The other way round: the sub-run runs on first, the own review still waits.
    const subFirst = await apply(both, inSub.state, news("sub", "1", 70, false, 4));
    expect(subFirst.state.status).toBe("paused");
    expect(subFirst.state.pause).toMatchObject({ nodeId: "own" });
    expect(subFirst.state.pause?.subExecutionId).toBeUndefined();
    const running = await apply(both, decided.state, news("sub", "1", 70, false, 4));
    expect(running.state.status).toBe("running");
    const done = await apply(both, running.state, { kind: "childResult", nodeId: "sub", childKey: "1", status: "completed", output: 1 });
    expect(done.state.status).toBe("completed");
  });
});

describe("a loop that goes round past a node paused in a sub-run", () => {
  /** A loop whose body races `fast` against a subworkflow; an `any` join goes round as soon as `fast` is done. */
  const race = def({
    start: "init",
    nodes: [
      { id: "init", type: "setVariable", config: { values: { "$.vars.i": 0 } } },
      { id: "loop", type: "whileLoop", config: { condition: "vars.i < 2", maxIterations: 5 } },
      { id: "fast", type: "tool", config: { tool: "t" } },
      { id: "inc", type: "transform", config: { expression: "vars.i + 1" }, output: "$.vars.i" },
      { id: "other", type: "subworkflow", config: { workflow: { slug: "child" } } },
      { id: "j", type: "setVariable", config: { values: { "$.vars.round": "$.vars.i" } }, join: "any" },
    ],
    edges: [
      { from: "init", to: "loop" }, { from: "loop", to: "fast", when: "body" }, { from: "loop", to: "other", when: "body" },
      { from: "fast", to: "inc" }, { from: "inc", to: "j" }, { from: "other", to: "j" }, { from: "j", to: "loop" },
    ],
  });

  it("cancels the sub-run and ends its pause as cancelled; the sub-run's late news is ignored", async () => {
    const started = await apply(race, null, { kind: "start", input: {} });
    expect(children(started)).toMatchObject([{ nodeId: "other", childKey: "1" }]);
    const paused = await apply(race, started.state, news("other", "1", 90, true, 2));
    expect(paused.state.status).toBe("paused");
    const call = started.effects.find((e) => e.kind === "callTool")!;
    const round = await apply(race, paused.state, { kind: "toolResult", nodeId: "fast", callId: (call as { callId: string }).callId, ok: true, output: 1, durationMs: 1 });
    expect(round.effects).toContainEqual(expect.objectContaining({ kind: "cancelChildren", nodeId: "other", childKeys: ["1"] }));
    expect(round.events).toContainEqual({ kind: "execution.resumed", nodeId: "other", decision: "cancelled", subExecutionId: 90 });
    const names = kinds(round);
    expect(names.indexOf("execution.resumed:other")).toBeLessThan(names.lastIndexOf("node.started:other"));
    expect(round.state.status).toBe("running");
    expect(round.state.subRuns).toBeUndefined();
    expect(children(round)).toMatchObject([{ nodeId: "other", childKey: "2" }]);
    expect((await apply(race, round.state, news("other", "1", 90, false, 3))).ignored).toMatch(/no outstanding child/);
  });
});

describe("a checkpoint rebuilt from the journal", () => {
  /** `first` and `second` wait for a sub-run each; `second` starts once `t` answers, so it pauses last. */
  const two = def({
    start: "s",
    nodes: [
      { id: "s", type: "setVariable", config: { values: { x: 1 } } },
      { id: "first", type: "subworkflow", config: { workflow: { slug: "child" } } },
      { id: "t", type: "tool", config: { tool: "t" } },
      { id: "second", type: "subworkflow", config: { workflow: { slug: "child" } } },
    ],
    edges: [{ from: "s", to: "first" }, { from: "s", to: "t" }, { from: "t", to: "second" }],
  });
  const journalOf = (...steps: Applied[]): JournalEntry[] => steps.flatMap((r) => r.effects.flatMap((e) => (e.kind === "journal" ? [e.entry] : [])));
  const callOf = (r: Applied) => r.effects.find((e): e is Effect & { kind: "callTool" } => e.kind === "callTool")!;
  const rebuild = (d: WorkflowDefinition, journal: JournalEntry[], pausedSubRuns: LearnedSubRunPause[], announced?: ReplayInput["announced"]) =>
    replayJournal({ definition: d, identity, start: { kind: "start", input: {} }, journal, startedAt: new Date(clock).toISOString(), pausedSubRuns, ...(announced ? { announced } : {}) });
  const learned = { first: { nodeId: "first", childKey: "1", childExecutionId: 70, reason: "first?" }, second: { nodeId: "second", childKey: "1", childExecutionId: 71, reason: "second?" } };

  /** The live run: paused at `first` (sub-run 70), then at `second` (71), its pause point. */
  async function pausedAtBoth(): Promise<{ live: ExecutionState; journal: JournalEntry[] }> {
    const started = await apply(two, null, { kind: "start", input: {} });
    const atFirst = await apply(two, started.state, news("first", "1", 70, true, 3, "first?"));
    const answered = await apply(two, atFirst.state, { kind: "toolResult", nodeId: "t", callId: callOf(started).callId, ok: true, output: 1, durationMs: 1 });
    const atBoth = await apply(two, answered.state, news("second", "1", 71, true, 3, "second?"));
    expect(atBoth.state.pause).toEqual({ nodeId: "second", reason: "review in sub-run 71: second?", seq: 2, subExecutionId: 71 });
    expect(subRunPauses(atBoth.state)).toEqual({ first: 70, second: 71 });
    return { live: atBoth.state, journal: journalOf(started, atFirst, answered, atBoth) };
  }

  it("learns the pauses again with their reasons, the pause point as announced, and owes nothing when they were announced", async () => {
    const { live, journal } = await pausedAtBoth();
    const r = await rebuild(two, journal, [learned.first, learned.second], { subRunPauses: { first: 70, second: 71 }, pausePoint: "second" });
    expect(r.state.status).toBe("paused");
    expect(r.state.pause).toEqual({ ...live.pause, seq: expect.any(Number) });
    expect(subRunPauses(r.state)).toEqual({ first: 70, second: 71 });
    expect(r.subRunNews).toEqual([]);
    // Listed the other way round, or with `first` the announced pause point: the pause point is the row's.
    const other = await rebuild(two, journal, [learned.second, learned.first], { subRunPauses: { first: 70, second: 71 }, pausePoint: "first" });
    expect(other.state.pause).toEqual({ nodeId: "first", reason: "review in sub-run 70: first?", seq: expect.any(Number), subExecutionId: 70 });
    // A reason not known: the pause names the sub-run alone.
    const bare = await rebuild(two, journal, [{ nodeId: "first", childKey: "1", childExecutionId: 70 }], { subRunPauses: { first: 70 }, pausePoint: "first" });
    expect(bare.state.pause?.reason).toBe("review in sub-run 70");
  });

  it.each(["first", "second"])("owes the resume of a node whose sub-run was decided meanwhile (the pause point was %s) and stays paused at the other", async (pausePoint) => {
    const { journal } = await pausedAtBoth();
    const r = await rebuild(two, journal, [learned.second], { subRunPauses: { first: 70, second: 71 }, pausePoint });
    expect(r.subRunNews).toEqual([{ kind: "execution.resumed", nodeId: "first", decision: "sub_run", subExecutionId: 70 }]);
    expect(r.state.status).toBe("paused");
    expect(r.state.pause).toEqual({ nodeId: "second", reason: "review in sub-run 71: second?", seq: expect.any(Number), subExecutionId: 71 });
    const other = await rebuild(two, journal, [learned.first], { subRunPauses: { first: 70, second: 71 }, pausePoint });
    expect(other.subRunNews).toEqual([{ kind: "execution.resumed", nodeId: "second", decision: "sub_run", subExecutionId: 71 }]);
    expect(other.state.pause).toMatchObject({ nodeId: "first", subExecutionId: 70 });
    // Both decided: both pauses end, and the run runs on.
    const none = await rebuild(two, journal, [], { subRunPauses: { first: 70, second: 71 }, pausePoint });
    expect(none.subRunNews.map((e) => e.kind === "execution.resumed" && [e.nodeId, e.subExecutionId])).toEqual([["first", 70], ["second", 71]]);
    expect(none.state.status).toBe("running");
  });

  it("owes the pause of a node that was not announced, and every pause when nothing was", async () => {
    const { journal } = await pausedAtBoth();
    const r = await rebuild(two, journal, [learned.first, learned.second], { subRunPauses: { first: 70 }, pausePoint: "first" });
    expect(r.subRunNews).toEqual([{ kind: "execution.paused", nodeId: "second", reason: "review in sub-run 71: second?", subExecutionId: 71 }]);
    const fresh = await rebuild(two, journal, [learned.first, learned.second]);
    expect(fresh.subRunNews).toEqual([
      { kind: "execution.paused", nodeId: "first", reason: "review in sub-run 70: first?", subExecutionId: 70 },
      { kind: "execution.paused", nodeId: "second", reason: "review in sub-run 71: second?", subExecutionId: 71 },
    ]);
  });

  it("a forEach's pause names its announced sub-run; one of its sub-runs still paused keeps the node paused, owing nothing", async () => {
    const each = def({ nodes: [{ id: "each", type: "forEach", config: { items: "$.input.xs", body: { nodes: [{ id: "r", type: "humanReview", config: { reason: "item?" } }] } } }] });
    const started = await apply(each, null, { kind: "start", input: { xs: [1, 2] } });
    // The second item paused first: its sub-run (81) is the one the pause names.
    const one = await apply(each, started.state, news("each", "1.1", 81, true, 4, "item?"));
    const both = await apply(each, one.state, news("each", "1.0", 80, true, 4, "item?"));
    expect(subRunPauses(both.state)).toEqual({ each: 81 });
    const items = [{ nodeId: "each", childKey: "1.0", childExecutionId: 80, reason: "item?" }, { nodeId: "each", childKey: "1.1", childExecutionId: 81, reason: "item?" }];
    const replay = (pausedSubRuns: LearnedSubRunPause[]) => replayJournal({
      definition: each, identity, start: { kind: "start", input: { xs: [1, 2] } }, journal: journalOf(started, one, both), startedAt: new Date(clock).toISOString(),
      pausedSubRuns, announced: { subRunPauses: { each: 81 }, pausePoint: "each" },
    });
    const r = await replay(items);
    expect(r.state.pause).toMatchObject({ nodeId: "each", subExecutionId: 81 });
    expect(r.subRunNews).toEqual([]);
    const left = await replay([items[0]!]);
    expect(left.subRunNews).toEqual([]);
    expect(left.state.pause).toMatchObject({ nodeId: "each", subExecutionId: 80, reason: "review in sub-run 80: item?" });
  });

  it("keeps the run's own review the pause point when the row says so", async () => {
    const mixed = def({
      start: "s",
      nodes: [
        { id: "s", type: "setVariable", config: { values: { x: 1 } } },
        { id: "sub", type: "subworkflow", config: { workflow: { slug: "child" } } },
        { id: "t", type: "tool", config: { tool: "t" } },
        { id: "own", type: "humanReview", config: { reason: "mine" } },
      ],
      edges: [{ from: "s", to: "sub" }, { from: "s", to: "t" }, { from: "t", to: "own" }],
    });
    const started = await apply(mixed, null, { kind: "start", input: {} });
    const inSub = await apply(mixed, started.state, news("sub", "1", 70, true, 3));
    const own = await apply(mixed, inSub.state, { kind: "toolResult", nodeId: "t", callId: callOf(started).callId, ok: true, output: 1, durationMs: 1 });
    expect(own.state.pause).toMatchObject({ nodeId: "own", reason: "mine" });
    const r = await rebuild(mixed, journalOf(started, inSub, own), [{ nodeId: "sub", childKey: "1", childExecutionId: 70, reason: "ok?" }], { subRunPauses: { sub: 70 }, pausePoint: "own" });
    expect(r.state.pause).toMatchObject({ nodeId: "own", reason: "mine" });
    expect(r.state.pause?.subExecutionId).toBeUndefined();
    expect(r.subRunNews).toEqual([]);
    // Deciding it leaves the run paused in the sub-run.
    const decided = await step({ definition: mixed, state: r.state, command: { kind: "resume", nodeId: "own", action: "approve" }, now: new Date(clock).toISOString(), identity });
    expect(decided.state.pause).toMatchObject({ nodeId: "sub", subExecutionId: 70, reason: "review in sub-run 70: ok?" });
  });
});
