/**
 * Rules checked for importStateMachine (seed 004 §2 "XState-inspired JSON with states,
 * transitions, guards, invokes"):
 * - each state becomes a node: core and `agent.*` invoke types kept (a `core.` prefix dropped),
 *   any other type becomes a `tool` node calling that tool with `{ ...config, ...input }`;
 * - transitions become edges in order; several → `branching: "first"`; guards → edge
 *   `condition` (JSONata kept, `{ left, op, right }` translated to JSONata that really
 *   evaluates as the comparison); branch events of condition / humanReview / whileLoop nodes
 *   become `when` labels; several entries → `join: "any"`;
 * - states on a cycle get `maxVisits` (own limit, else maxToolIterations, else 25), except
 *   cycles through a whileLoop; a re-entered initial state or initial `context` gets `_start`;
 * - a bad definition lists every problem with a path;
 * - the source map names the state each node came from, with the invoke fields its type,
 *   config, input (each tool argument from config or input) and maxVisits came from; each edge
 *   its transition, with its target, guard and branch label (the `when`, or the event name);
 *   `_start` the context (or the initial state) it was added for.
 * Seed 004 gives no JSON for a definition; the fixtures (fixtures/seeds.ts) are its §5 flows ("Standard Flow
 * (Tool-Calling Agent)" and "Human-in-the-Loop Flow") written in the accepted shape.
 */
import { describe, expect, it } from "@jest/globals";
import jsonata from "jsonata";
import { guardToJsonata, importStateMachine } from "./index.ts";
import { reactAgent, reviewedReply } from "./fixtures/seeds.ts";

describe("importStateMachine", () => {
  it("imports the ReAct flow: agent nodes kept, guarded loop bounded by maxToolIterations", () => {
    expect(importStateMachine(reactAgent)).toEqual({
      ok: true,
      warnings: [],
      definition: {
        schemaVersion: 1,
        start: "prompt",
        nodes: [
          { id: "prompt", type: "agent.prompt", config: { template: "You are a support agent. Customer: {{customer}}" } },
          { id: "recall", type: "agent.memory.read", config: {}, input: { query: "$.input.message" } },
          { id: "llm", type: "agent.llm", config: { model: "default" }, branching: "first", join: "any", maxVisits: 10 },
          { id: "tools", type: "agent.toolExecutor", config: {}, input: { toolCalls: "$.llm.toolCalls" }, maxVisits: 10 },
          { id: "remember", type: "agent.memory.write", config: {} },
          { id: "done", type: "setVariable", config: { values: {} } },
        ],
        edges: [
          { from: "prompt", to: "recall" },
          { from: "recall", to: "llm" },
          { from: "llm", to: "tools", condition: "$count($output.toolCalls) > 0" },
          { from: "llm", to: "remember" },
          { from: "tools", to: "llm" },
          { from: "remember", to: "done" },
        ],
        output: { answer: "$.llm.text" },
      },
      sourceMap: {
        fields: { start: "initial", output: "output" },
        nodes: {
          prompt: { path: "states.prompt", fields: { type: "states.prompt.invoke.type", config: "states.prompt.invoke.config" } },
          recall: { path: "states.recall", fields: { type: "states.recall.invoke.type", input: "states.recall.invoke.input" } },
          llm: { path: "states.llm", fields: { type: "states.llm.invoke.src", config: "states.llm.invoke.config", maxVisits: "maxToolIterations" } },
          tools: { path: "states.tools", fields: { type: "states.tools.invoke.type", input: "states.tools.invoke.input", maxVisits: "maxToolIterations" } },
          remember: { path: "states.remember", fields: { type: "states.remember.invoke.type" } },
          done: { path: "states.done" },
        },
        edges: [
          { path: "states.prompt.on.DONE", fields: { to: "states.prompt.on.DONE" } },
          { path: "states.recall.on.DONE", fields: { to: "states.recall.on.DONE" } },
          { path: "states.llm.transitions[0]", fields: { to: "states.llm.transitions[0].target", condition: "states.llm.transitions[0].guard" } },
          { path: "states.llm.transitions[1]", fields: { to: "states.llm.transitions[1].target" } },
          { path: "states.tools.always", fields: { to: "states.tools.always" } },
          { path: "states.remember.on.DONE", fields: { to: "states.remember.on.DONE" } },
        ],
      },
    });
  });

  it("imports the human-in-the-loop flow: branch labels, API node as tool, translated guard, _start with context", () => {
    expect(importStateMachine(reviewedReply)).toEqual({
      ok: true,
      warnings: [],
      definition: {
        schemaVersion: 1,
        start: "_start",
        nodes: [
          { id: "_start", type: "setVariable", config: { values: { "$.attempts": 0 } } },
          { id: "draft", type: "agent.llm", config: {}, input: { messages: "$.input.messages" }, join: "any", maxVisits: 25 },
          { id: "check", type: "condition", config: { left: "$.draft.confidence", op: "gte", right: 0.8 }, branching: "first", maxVisits: 25 },
          { id: "review", type: "agent.humanReview", config: { reason: "low-confidence draft", subject: "$.draft.text" }, branching: "first", maxVisits: 25 },
          { id: "send", type: "tool", config: { tool: "emails.send" }, input: { template: "reply", body: "$.draft.text" }, join: "any" },
          { id: "discard", type: "emit", config: { event: "reply.discarded", data: { text: "$.draft.text" } } },
          { id: "done", type: "setVariable", config: { values: {} }, join: "any" },
        ],
        edges: [
          { from: "_start", to: "draft" },
          { from: "draft", to: "check" },
          { from: "check", to: "send", when: "true" },
          { from: "check", to: "review", when: "false" },
          { from: "review", to: "send", when: "approved" },
          { from: "review", to: "draft", when: "rejected", condition: "$exists($.review.comment)" },
          { from: "review", to: "discard", when: "rejected" },
          { from: "send", to: "done" },
          { from: "discard", to: "done" },
        ],
      },
      sourceMap: expect.objectContaining({
        fields: {},
        nodes: expect.objectContaining({
          _start: { path: "context" },
          send: {
            path: "states.send",
            fields: {
              type: "states.send.invoke.type",
              "config.tool": "states.send.invoke.type",
              "input.template": "states.send.invoke.config.template",
              "input.body": "states.send.invoke.input.body",
            },
          },
        }),
      }),
    });
    const r = importStateMachine(reviewedReply);
    expect(r.ok && r.sourceMap.edges.slice(0, 1).concat(r.sourceMap.edges.slice(5, 7))).toEqual([
      { path: "initial" },
      { path: "states.review.on.REJECT[0]", fields: { to: "states.review.on.REJECT[0].target", when: "states.review.on.REJECT", condition: "states.review.on.REJECT[0].cond" } },
      { path: "states.review.on.REJECT[1]", fields: { to: "states.review.on.REJECT[1].target", when: "states.review.on.REJECT" } },
    ]);
  });

  it("leaves cycles through a whileLoop unbounded by maxVisits and honours a state's own limit", () => {
    const r = importStateMachine({
      initial: "loop",
      states: {
        loop: { invoke: { type: "whileLoop", config: { condition: "$.count.n < 3", maxIterations: 5 } }, on: { BODY: "work", EXIT: "done" } },
        work: { invoke: "counter.increment", always: "loop" },
        done: { type: "final" },
      },
    });
    expect(r.ok && r.definition.nodes).toEqual([
      { id: "_start", type: "setVariable", config: { values: {} } },
      { id: "loop", type: "whileLoop", config: { condition: "$.count.n < 3", maxIterations: 5 }, branching: "first", join: "any" },
      { id: "work", type: "tool", config: { tool: "counter.increment" } },
      { id: "done", type: "setVariable", config: { values: {} } },
    ]);
    expect(r.ok && r.definition.edges).toEqual([
      { from: "_start", to: "loop" },
      { from: "loop", to: "work", when: "body" },
      { from: "loop", to: "done", when: "exit" },
      { from: "work", to: "loop" },
    ]);

    const own = importStateMachine({
      definition: {
        initial: "a",
        states: { a: { invoke: "x.ping", on: { NEXT: "b", STOP: "end" } }, b: { invoke: "x.pong", always: "a", maxVisits: 3 }, end: { type: "final" } },
      },
      maxToolIterations: 7,
    });
    expect(own.ok && (own.definition.nodes as Array<{ id: string; maxVisits?: number }>).map((n) => [n.id, n.maxVisits])).toEqual([
      ["_start", undefined], ["a", 7], ["b", 3], ["end", undefined],
    ]);
    expect(own.ok && [own.sourceMap.nodes._start, own.sourceMap.nodes.a, own.sourceMap.nodes.b]).toEqual([
      { path: "definition.initial" },
      { path: "definition.states.a", fields: { type: "definition.states.a.invoke", "config.tool": "definition.states.a.invoke", maxVisits: "maxToolIterations" } },
      { path: "definition.states.b", fields: { type: "definition.states.b.invoke", "config.tool": "definition.states.b.invoke", maxVisits: "definition.states.b.maxVisits" } },
    ]);
  });

  it("translates { left, op, right } guards to JSONata with the comparison's meaning", async () => {
    const ctx = { input: { tags: ["vip", "eu"], name: "Ana Lopez", "max-items": 3 }, llm: { score: 0.9, text: "" }, n: 2 };
    const cases: Array<[unknown, boolean]> = [
      [{ left: "$.llm.score", op: "gt", right: 0.5 }, true],
      [{ left: "$.llm.score", op: "lte", right: 0.5 }, false],
      [{ left: "$.input.max-items", op: "eq", right: 3 }, true],
      [{ left: "$.n", op: "eq", right: "$.input.max-items" }, false],
      [{ left: "$.n", op: "ne", right: 3 }, true],
      [{ left: "$.llm.text", op: "truthy" }, false],
      [{ left: "$.llm.missing", op: "exists" }, false],
      [{ left: "eu", op: "in", right: "$.input.tags" }, true],
      [{ left: "$.input.tags", op: "contains", right: "vip" }, true],
      [{ left: "$.input.name", op: "contains", right: "Lopez" }, true],
      [{ expression: "$.n * 2 = 4" }, true],
    ];
    for (const [guard, expected] of cases) {
      const g = guardToJsonata(guard as never);
      if ("code" in g) throw new Error(`${JSON.stringify(guard)}: ${g.message}`);
      expect([guard, Boolean(await jsonata(g.expression).evaluate(ctx))]).toEqual([guard, expected]);
    }
  });

  it("lists every problem of a bad definition with a path", () => {
    expect(importStateMachine({
      initial: "start",
      states: {
        start: { invoke: { type: "agent.llm" }, on: { DONE: "nowhere", RETRY: { cond: "$.x > 1" } } },
        gate: { invoke: { type: "condition", config: { left: "$.x", op: "truthy" } }, transitions: [{ target: "start", guard: { type: "isReady" } }, { target: "end", guard: "$.x >" }] },
        api: { invoke: { type: "POST /api/orders" } },
        blank: { invoke: { config: {} }, on: { GO: "end" } },
        end: { type: "final", on: { AGAIN: "start" } },
      },
    })).toEqual({
      ok: false,
      errors: [
        { path: "states.start.on.RETRY.target", code: "missing_target", message: "the transition has no target state" },
        { path: "states.start.on.DONE", code: "unknown_target", message: 'transition to unknown state "nowhere"' },
        { path: "states.gate.transitions[0]", code: "missing_branch", message: 'transitions out of the condition state "gate" need a branch: an event named true / false or "when"' },
        { path: "states.gate.transitions[0].guard", code: "unsupported_guard", message: 'named guard "isReady" has no definition here; write it as JSONata or { left, op, right }' },
        { path: "states.gate.transitions[1]", code: "missing_branch", message: 'transitions out of the condition state "gate" need a branch: an event named true / false or "when"' },
        expect.objectContaining({ path: "states.gate.transitions[1].guard", code: "invalid_guard" }),
        { path: "states.api.invoke.type", code: "invalid_tool_name", message: '"POST /api/orders" is neither a known node type nor a tool name (dot-separated words)' },
        { path: "states.blank.invoke.type", code: "missing_invoke_type", message: "the invoke names no node type (type or src)" },
        { path: "states.end.on.AGAIN", code: "final_state_transitions", message: 'final state "end" cannot have transitions' },
        { path: "states.gate", code: "unreachable_state", message: 'state "gate" cannot be reached from the initial state "start"' },
        { path: "states.api", code: "unreachable_state", message: 'state "api" cannot be reached from the initial state "start"' },
        { path: "states.blank", code: "unreachable_state", message: 'state "blank" cannot be reached from the initial state "start"' },
        { path: "states.end", code: "unreachable_state", message: 'state "end" cannot be reached from the initial state "start"' },
      ],
    });
    expect(importStateMachine({ initial: "a", states: {} })).toEqual({ ok: false, errors: [{ path: "states", code: "missing_states", message: "the definition needs a states object with at least one state" }] });
    expect(importStateMachine({ initial: "b", states: { a: { type: "final" } } })).toEqual({ ok: false, errors: [{ path: "initial", code: "unknown_initial", message: 'initial state "b" is not one of the states' }] });
  });

  it("warns about what it cannot carry over", () => {
    const r = importStateMachine({
      states: {
        fetch: { invoke: { type: "http.get", input: { url: "$.input.url" }, onError: "failed" }, on: { DONE: "stuck" } },
        stuck: { invoke: { type: "transform", config: { expression: "fetch.body" } } },
      },
    });
    expect(r.ok && r.warnings).toEqual([
      'no initial state given; starting at the first state, "fetch"',
      "states.fetch.invoke.onError: error transitions are not imported; a failing node fails the execution (use retry)",
      'state "stuck" has no transitions and is not final; the execution ends there',
    ]);
  });
});
