/**
 * What a rebuild tells of the steps whose rows were written and whose events never went out
 * (replayJournal's `unrecorded`, from `announcedThrough` and `announcedByKind`), checked over
 * every cut of live runs of several shapes: the events went out through step k, the rows were
 * written through step m (k ≤ m), then the executor died and Redis lost the checkpoint.
 *
 * Rules checked, for every k and m:
 * - never a step at or before k again: the events given back are the live run's events from the
 *   start of some step j > k on, in order, with nothing left out after j;
 * - whatever the journal rows place past k is given back (a row numbered past k);
 * - in these shapes, with the kinds of the events published (`announcedByKind`), every cut is
 *   told whole: the first step given back is k + 1, or the steps before it have no events. Without
 *   the kinds, a retry's start whose only row its failure wrote again is lost in some cuts.
 * - an event told under the id of the live step that first took it (`origin`) is the very event
 *   that step had there;
 * - with the step that began each attempt in the journal (`beganStep`), more events are placed
 *   than without it, and a retry's start is found without the kinds; a start whose only row the
 *   next step wrote again is told under the start's ids.
 * k = 0 is a run with no event published (nothing on the stream): every step from the first.
 */
import { describe, expect, it } from "@jest/globals";
import { replayJournal } from "./index.ts";
import type { Effect, EngineEvent, WorkflowDefinition } from "./index.ts";
import { def, echo, identity, journalThrough, lastEventsThrough, ok, originProblems, Sim, START } from "./test-support.ts";
import type { ToolFn } from "./test-support.ts";

/** `kind:node#attempt` of an event. */
function named(e: EngineEvent): string {
  return `${e.kind}:${"nodeId" in e ? e.nodeId : ""}#${"attempt" in e ? e.attempt : ""}`;
}

interface Cut {
  /** Events of each live step (step n at n - 1). */
  events: string[][];
  journal: (m: number) => ReturnType<typeof journalThrough>;
  byKind: (k: number) => ReturnType<typeof lastEventsThrough>;
  steps: number;
}

function cutsOf(perStep: readonly Effect[][], began: boolean): Cut {
  return {
    events: perStep.map((effects) => effects.flatMap((e) => (e.kind === "emit" ? [named(e.event)] : []))),
    steps: perStep.length,
    journal: (m) => journalThrough(perStep, m, { began }),
    byKind: (k) => lastEventsThrough(perStep, k),
  };
}

/** Runs `d` to its end with `tools`, its steps' effects kept apart. */
async function live(d: WorkflowDefinition, tools: Record<string, ToolFn>, input = {}): Promise<Sim> {
  const sim = await new Sim(d, tools).start(input);
  expect(["completed", "failed"]).toContain(sim.s.status);
  return sim;
}

/**
 * For every cut, the events the rebuild gives back, and the first live step they start at
 * (Infinity when none). Fails when they are not the live events from a step boundary after k.
 */
async function check(d: WorkflowDefinition, sim: Sim, input = {}, { withKinds = true, began = true }: { withKinds?: boolean; began?: boolean } = {}): Promise<{ cuts: number; complete: number; placed: number }> {
  const c = cutsOf(sim.perStep, began);
  const flat = c.events.flat();
  const offset: number[] = [];
  c.events.reduce((at, evs, i) => ((offset[i] = at), at + evs.length), 0);
  let cuts = 0;
  let complete = 0;
  let placed = 0;
  for (let m = 1; m <= c.steps; m++) {
    const journal = c.journal(m);
    const rowSteps = journal.map((j) => j.stepVersion);
    for (let k = 0; k <= m; k++) {
      const r = await replayJournal({
        definition: d, identity, start: { kind: "start", input }, journal, startedAt: new Date(START).toISOString(),
        announcedThrough: k, ...(withKinds ? { announcedByKind: c.byKind(k) } : {}),
      });
      expect(r.unplaced).toEqual([]);
      const origins = originProblems(sim.perStep, r.unrecorded);
      expect(origins.problems).toEqual([]);
      placed += origins.placed;
      const told = r.unrecorded.flatMap((e) => (e.kind === "emit" ? [named(e.event)] : []));
      // The step it starts at: the first step after k whose events begin the same way.
      let from = Infinity;
      if (told.length > 0) {
        for (let j = k; j < c.steps; j++) {
          if (c.events[j]!.length === 0) continue;
          if (told.every((t, i) => flat[offset[j]! + i] === t)) {
            from = j + 1;
            break;
          }
        }
        if (from === Infinity) throw new Error(`cut k=${k} m=${m}: ${JSON.stringify(told)} is no run of live events after step ${k} (live: ${JSON.stringify(c.events)})`);
      }
      // Nothing between k and the step it starts at had events of its own to tell.
      const skipped = c.events.slice(k, Math.min(from - 1, m)).flat();
      cuts++;
      if (skipped.length === 0) complete++;
      // The events after m that the replay takes again on its own (inline steps) may follow;
      // the steps up to m that rows place past k are never left out.
      if (rowSteps.some((s) => s > k)) expect(from).toBeLessThanOrEqual(Math.max(...rowSteps));
    }
  }
  return { cuts, complete, placed };
}

describe("replay: the events of lost steps, over every cut of live runs", () => {
  const flaky = (n: number): ToolFn => {
    let calls = 0;
    return () => (++calls <= n ? { ok: false, retryable: true, message: "flaky" } : ok({ v: calls }));
  };
  const shapes: { name: string; d: WorkflowDefinition; tools: () => Record<string, ToolFn>; input?: Record<string, unknown> }[] = [
    {
      name: "a chain of tools and transforms",
      d: def({
        nodes: [
          { id: "a", type: "tool", config: { tool: "echo" } },
          { id: "b", type: "transform", config: { expression: "1" } },
          { id: "c", type: "tool", config: { tool: "echo" } },
        ],
        edges: [{ from: "a", to: "b" }, { from: "b", to: "c" }],
      }),
      tools: () => ({ echo }),
    },
    {
      name: "a tool retried twice, then a tool",
      d: def({
        nodes: [
          { id: "f", type: "tool", config: { tool: "flaky" }, retry: { maxAttempts: 3, initialDelayMs: 10, jitter: 0 } },
          { id: "g", type: "tool", config: { tool: "echo" } },
        ],
        edges: [{ from: "f", to: "g" }],
      }),
      tools: () => ({ flaky: flaky(2), echo }),
    },
    {
      name: "a fan-out of three tools into a join",
      d: def({
        start: "s",
        nodes: [
          { id: "s", type: "setVariable", config: { values: { x: 1 } } },
          ...["p", "q", "r"].map((id) => ({ id, type: "tool", config: { tool: "echo" } })),
          { id: "j", type: "transform", config: { expression: "1" } },
        ],
        edges: [...["p", "q", "r"].flatMap((id) => [{ from: "s", to: id }, { from: id, to: "j" }])],
      }),
      tools: () => ({ echo }),
    },
    {
      name: "a forEach over a tool, then a tool that fails for good",
      d: def({
        nodes: [
          { id: "each", type: "forEach", config: { items: "$.input.xs", tool: "echo", concurrency: 2 } },
          { id: "bad", type: "tool", config: { tool: "flaky" }, retry: { maxAttempts: 2, initialDelayMs: 10, jitter: 0 } },
        ],
        edges: [{ from: "each", to: "bad" }],
      }),
      tools: () => ({ echo, flaky: flaky(5) }),
      input: { xs: [1, 2, 3] },
    },
    {
      name: "a whileLoop around a tool",
      d: def({
        start: "init",
        nodes: [
          { id: "init", type: "setVariable", config: { values: { "$.vars.i": 0 } } },
          { id: "loop", type: "whileLoop", config: { condition: "vars.i < 3", maxIterations: 5 } },
          { id: "work", type: "tool", config: { tool: "next" }, input: { i: "$.vars.i" } },
          { id: "inc", type: "setVariable", config: { values: { "$.vars.i": "$.work.next" } } },
        ],
        edges: [{ from: "init", to: "loop" }, { from: "loop", to: "work", when: "body" }, { from: "work", to: "inc" }, { from: "inc", to: "loop" }],
      }),
      tools: () => ({ next: (a) => ok({ next: (a.i as number) + 1 }) }),
    },
  ];

  it.each(shapes)("$name: never a published step again, and no lost step left out", async ({ d, tools, input }) => {
    const sim = await live(d, tools(), input);
    const r = await check(d, sim, input);
    expect(r.cuts).toBeGreaterThan(sim.perStep.length);
    // In these shapes every cut is told whole: no step after k is lost.
    expect(r.complete).toBe(r.cuts);
    // Events told again under their first step's id, checked above.
    expect(r.placed).toBeGreaterThan(0);
    // On rows written before the store kept the step that began each attempt: the same rules,
    // and fewer events placed (a beginning whose row its end wrote again is placed by beganStep alone).
    const old = await check(d, sim, input, { began: false });
    expect(old.complete).toBe(old.cuts);
    expect(r.placed).toBeGreaterThan(old.placed);
  });

  it("loses a retry's start in some cuts without the kinds of the events published nor the step that began each attempt", async () => {
    const shape = shapes.find((x) => x.name.startsWith("a tool retried"))!;
    const sim = await live(shape.d, shape.tools());
    const r = await check(shape.d, sim, {}, { withKinds: false, began: false });
    expect(r.complete).toBeLessThan(r.cuts);
    // Either closes the gap: the kinds (above), or the step that began the retry's attempt.
    const began = await check(shape.d, sim, {}, { withKinds: false, began: true });
    expect(began.complete).toBe(began.cuts);
  });

  // Chaos seed 1147 (docs/dev/chaos.md): the start's rows written and its events not out, the
  // next step (another executor's) wrote the first node's row again, then the checkpoint was
  // lost with nothing of the run on the stream. The start's events are told under the start's own
  // ids, so that a late copy of them is dropped as a repeat.
  it("tells a start whose only row the next step wrote again under the start's ids", async () => {
    const d = def({ nodes: [{ id: "a", type: "tool", config: { tool: "echo" } }, { id: "b", type: "tool", config: { tool: "echo" } }], edges: [{ from: "a", to: "b" }] });
    const sim = await live(d, { echo });
    const journal = journalThrough(sim.perStep, 2);
    expect(journal.map((j) => `${j.nodeId}#${j.attempt}:${j.status}@${j.stepVersion}/${j.beganStep}`)).toEqual(["b#1:running@2/2", "a#1:completed@2/1"]);
    const rebuild = (rows: typeof journal) => replayJournal({ definition: d, identity, start: { kind: "start", input: {} }, journal: rows, startedAt: new Date(START).toISOString(), announcedThrough: 0, announcedByKind: {} });
    const origins = (r: Awaited<ReturnType<typeof rebuild>>): string[] => r.unrecorded.flatMap((e) => (e.kind === "emit" ? [`${e.event.kind}@${e.origin ? `${e.origin.step}.${e.origin.index}` : "-"}`] : []));
    const told = await rebuild(journal);
    expect(originProblems(sim.perStep, told.unrecorded).problems).toEqual([]);
    expect(origins(told)).toEqual(["execution.started@1.1", "node.started@1.2", "node.completed@2.1", "node.started@2.3"]);
    // Without beganStep the start cannot be placed: its events go out under the rebuild's own ids.
    expect(origins(await rebuild(journal.map(({ beganStep: _, ...j }) => j)))).toEqual(["execution.started@-", "node.started@-", "node.completed@2.1", "node.started@2.3"]);
  });
});

describe("a run whose steps wrote no journal row", () => {
  const d = def({ nodes: [{ id: "a", type: "tool", config: { tool: "echo" } }] });
  const startedAt = new Date(START).toISOString();
  const told = (r: Awaited<ReturnType<typeof replayJournal>>): string[] => r.unrecorded.flatMap((e) => (e.kind === "emit" ? [e.event.kind] : []));

  // Chaos seed 5005 (--forks, docs/dev/chaos.md): a fork of a finished run from its last
  // checkpoint ends at its start, writing no row. Its start's records were refused by a rebuild's
  // fence and Redis lost its checkpoint: each rebuild after found nothing of it published and told
  // nothing, since it told "from the first step whose rows are written". The run ended completed
  // with no event at all.
  it("is told whole when nothing of it was published: a fork of a finished run, ended at its start", async () => {
    const source = await live(d, { echo });
    const start = { kind: "start" as const, input: {}, fork: { state: source.s, executionId: 1, version: 3 } };
    const rebuild = (announcedThrough: number | undefined) =>
      replayJournal({ definition: d, identity, start, journal: [], startedAt, ...(announcedThrough === undefined ? {} : { announcedThrough, announcedByKind: {} }) });
    const none = await rebuild(0);
    expect(none.state.status).toBe("completed");
    expect(told(none)).toEqual(["execution.started", "execution.completed"]);
    // Its step published (or not known): nothing told again.
    expect(told(await rebuild(1))).toEqual([]);
    expect(told(await rebuild(undefined))).toEqual([]);
  });

  it("likewise a start that failed at once: its deadline passed while it waited queued", async () => {
    const start = { kind: "start" as const, input: {}, deadline: new Date(START - 1).toISOString() };
    const r = await replayJournal({ definition: d, identity, start, journal: [], startedAt, announcedThrough: 0, announcedByKind: {} });
    expect([r.state.status, told(r)]).toEqual(["failed", ["execution.started", "execution.failed"]]);
  });
});
