/**
 * Rules checked for importStateMachine (seed 004 §2 "XState-inspired JSON with states,
 * transitions, guards, invokes"):
 * - each state becomes a node: core and `agent.*` invoke types kept (a `core.` prefix dropped),
 *   any other type becomes a `tool` node calling that tool with `{ ...config, ...input }`;
 * - transitions become edges in order; several → `branching: "first"`; guards → edge
 *   `condition` (JSONata kept, `{ left, op, right }` kept as a comparison, which the engine
 *   evaluates as a condition node's); branch events of condition / humanReview / whileLoop nodes
 *   become `when` labels; several entries → `join: "any"`;
 * - states on a cycle get `maxVisits` (own limit, else maxToolIterations, else 25), except
 *   cycles through a whileLoop; a re-entered initial state or initial `context` gets `_start`;
 * - a state named after a context key the engine writes for an agent state (`messages`,
 *   `toolCalls`, `toolResults`) is refused unless its invoke has an output path: not renamed;
 * - a bad definition lists every problem with a path, and carries the nodes of the states whose
 *   invoke has no problem as a partial definition (nodes alone, with their origins; not a state
 *   named after a key the engine writes), whose own problems (invalid_config, invalid_path,
 *   invalid_expression, unknown_tool) validation finds and partialImportIssues keeps, and whose
 *   graph's (unreachable nodes, a loop without its body) it leaves out;
 * - the source map names the state each node came from, with the invoke fields its type,
 *   config, input (each tool argument from config or input) and maxVisits came from; each edge
 *   its transition, with its target, guard and branch label (the `when`, or the event name);
 *   `_start` the context (or the initial state) it was added for.
 * Seed 004 gives no JSON for a definition; the fixtures (fixtures/seeds.ts) are its §5 flows ("Standard Flow
 * (Tool-Calling Agent)" and "Human-in-the-Loop Flow") written in the accepted shape.
 */
import { describe, expect, it } from "@jest/globals";
import { evaluateGuard } from "../condition.ts";
import { guardToCondition, importStateMachine, partialImportIssues } from "./index.ts";
import { validateWorkflow } from "../validate.ts";
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
          // maxToolIterations 10 is 10 tool rounds: the LLM, where the cycle is entered, answers an 11th time.
          { id: "llm", type: "agent.llm", config: { model: "default" }, branching: "first", join: "any", maxVisits: 11 },
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
        maxToolIterations: 10,
        output: { answer: "$.llm.text" },
      },
      sourceMap: {
        fields: { start: "initial", maxToolIterations: "maxToolIterations", output: "output" },
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
          { from: "review", to: "draft", when: "rejected", condition: { left: "$.review.comment", op: "exists" } },
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

  it("leaves cycles through a whileLoop unbounded by maxVisits and adds no bound to a cycle a state's own limit bounds", () => {
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
      ["_start", undefined], ["a", undefined], ["b", 3], ["end", undefined],
    ]);
    expect(own.ok && [own.sourceMap.nodes._start, own.sourceMap.nodes.a, own.sourceMap.nodes.b]).toEqual([
      { path: "definition.initial" },
      { path: "definition.states.a", fields: { type: "definition.states.a.invoke", "config.tool": "definition.states.a.invoke" } },
      { path: "definition.states.b", fields: { type: "definition.states.b.invoke", "config.tool": "definition.states.b.invoke", maxVisits: "definition.states.b.maxVisits" } },
    ]);
  });

  it("keeps { left, op, right } guards as comparisons, which the engine evaluates with the op's meaning", async () => {
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
      const g = guardToCondition(guard as never);
      if ("code" in g) throw new Error(`${JSON.stringify(guard)}: ${g.message}`);
      expect([guard, await evaluateGuard(g.condition, ctx, "2026-01-01T00:00:00.000Z", null)]).toEqual([guard, expected]);
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
    })).toMatchObject({
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
    expect(importStateMachine({ initial: "b", states: { a: { type: "final" } } })).toMatchObject({ ok: false, errors: [{ path: "initial", code: "unknown_initial", message: 'initial state "b" is not one of the states' }] });
  });

  it("carries the nodes of the states whose invoke has no problem in a failed import, for the caller to check in the same answer", () => {
    // The human-in-the-loop flow with one bad invoke (discard) and one bad transition (send's, whose API node no worker serves below).
    const r = importStateMachine({
      ...reviewedReply,
      states: {
        ...reviewedReply.states,
        send: { ...reviewedReply.states.send, on: { DONE: { target: "done", guard: { type: "isSent" } } } },
        discard: { invoke: { type: "emit", config: "reply.discarded" }, on: { DONE: "done" } },
      },
    });
    expect(r.ok === false && r.errors.map((e) => `${e.code}@${e.path}`)).toEqual(["unsupported_guard@states.send.on.DONE.guard", "invalid_config@states.discard.invoke.config"]);
    const partial = r.ok ? undefined : r.partial;
    // send's transitions are not in its node, so its node goes along; discard's stand-in does not.
    expect(partial?.definition).toEqual({
      schemaVersion: 1, start: "draft", edges: [],
      nodes: [
        { id: "draft", type: "agent.llm", config: {}, input: { messages: "$.input.messages" } },
        { id: "check", type: "condition", config: { left: "$.draft.confidence", op: "gte", right: 0.8 } },
        { id: "review", type: "agent.humanReview", config: { reason: "low-confidence draft", subject: "$.draft.text" } },
        { id: "send", type: "tool", config: { tool: "emails.send" }, input: { template: "reply", body: "$.draft.text" } },
        { id: "done", type: "setVariable", config: { values: {} } },
      ],
    });
    expect(partial?.sourceMap.nodes.send).toEqual({
      path: "states.send",
      fields: { type: "states.send.invoke.type", "config.tool": "states.send.invoke.type", "input.template": "states.send.invoke.config.template", "input.body": "states.send.invoke.input.body" },
    });
    // Validation finds the API node no worker serves; its graph is not the machine's, so a caller keeps only its nodes' own problems.
    const v = partial && validateWorkflow(partial.definition, { hasTool: (n) => n === "llm.chat" });
    expect(partial && v?.ok === false && partialImportIssues(partial, v.errors).map((e) => e.path)).toEqual(["nodes[3].config.tool"]);
    // A machine whose every state's invoke is broken carries nothing.
    expect(importStateMachine({ initial: "a", states: { a: { invoke: { type: "no such" } } } })).toEqual({
      ok: false, errors: [{ path: "states.a.invoke.type", code: "invalid_tool_name", message: '"no such" is neither a known node type nor a tool name (dot-separated words)' }],
    });
  });

  it("carries nodes whose own problems validation finds, and none that only the partial's graph has", () => {
    const r = importStateMachine({
      initial: "wait",
      states: {
        wait: { invoke: { type: "delay", config: { ms: "soon" } }, on: { DONE: "shape" } },
        shape: { invoke: { type: "transform", config: { expression: "$.a +" } }, on: { DONE: "ask" } },
        ask: { invoke: { type: "agent.llm", config: { prompt: "Answer {{$.input.q[}}" }, output: "$.input.answer" }, on: { DONE: "loop" } },
        loop: { invoke: { type: "whileLoop", config: { condition: "$.n < 3", maxIterations: 3 } }, on: { BODY: "wait", EXIT: "done" } },
        done: { type: "final" },
        // The machine's own problems: a transition to no state, and nothing leads here.
        post: { invoke: { type: "crm.post", input: { id: "$.ask.id" } }, on: { DONE: "nowhere" } },
      },
    });
    expect(!r.ok && r.errors.map((e) => `${e.code}@${e.path}`)).toEqual(["unknown_target@states.post.on.DONE", "unreachable_state@states.post"]);
    const partial = r.ok ? undefined : r.partial;
    expect(partial?.definition.nodes).toHaveLength(6);
    const v = partial && validateWorkflow(partial.definition, { hasTool: (n) => n === "llm.chat" });
    // The partial has no edges: every node but the first is unreachable, and the loop has no body.
    expect(v?.ok === false && v.errors.filter((e) => ["unreachable_node", "loop_without_body"].includes(e.code)).map((e) => `${e.code}@${e.path}`)).toEqual([
      "loop_without_body@nodes[3]", ...[1, 2, 3, 4, 5].map((i) => `unreachable_node@nodes[${i}]`),
    ]);
    // Each node's own problems are the machine's too, found now rather than once its transitions are fixed.
    expect(partial && v?.ok === false && partialImportIssues(partial, v.errors).map((e) => `${e.code}@${e.path}`)).toEqual([
      "invalid_config@nodes[0].config.ms",
      "invalid_expression@nodes[1].config.expression",
      "invalid_path@nodes[2].config.prompt",
      "invalid_path@nodes[2].output",
      "unknown_tool@nodes[5].config.tool",
    ]);
  });

  it("leaves out of a failed import the node of a state named after a key the engine writes", () => {
    const r = importStateMachine({
      initial: "ask",
      states: {
        ask: { invoke: { type: "agent.llm", config: { prompt: "{{$.input.q}}" } }, on: { DONE: "messages" } },
        messages: { invoke: { type: "echo", input: { text: "$.ask.text" } }, on: { DONE: "done" } },
        done: { type: "final" },
      },
    });
    expect(!r.ok && r.errors.map((e) => `${e.code}@${e.path}`)).toEqual(["reserved_state_name@states.messages"]);
    // Its node's id is the problem: validation would only say it again (invalid_path at its id).
    expect(!r.ok && (r.partial?.definition.nodes as { id: string }[]).map((n) => n.id)).toEqual(["ask", "done"]);
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

  it("carries seed 004's agentConfig over (row and definition merged field by field, the definition's winning) and warns about settings a definition cannot hold", () => {
    const machine = { initial: "a", states: { a: { type: "final", invoke: { type: "agent.llm" } } } };
    const plain = importStateMachine({ ...machine, agentConfig: { model: "openai:gpt-4o-mini", temperature: 0.2 }, maxToolIterations: 4 });
    expect(plain.ok && [plain.definition.agentConfig, plain.definition.maxToolIterations, plain.sourceMap.fields]).toEqual([
      { model: "openai:gpt-4o-mini", temperature: 0.2 }, 4, { start: "initial", agentConfig: "agentConfig", maxToolIterations: "maxToolIterations" },
    ]);

    const row = importStateMachine({
      definition: { ...machine, agentConfig: { model: "anthropic:claude-sonnet-4", system: "Be brief." }, streamingEnabled: true },
      agentConfig: { model: "openai:gpt-4o-mini", temperature: 0.2 },
      memoryConfig: { enabled: true },
      mcpExport: true,
      maxToolIterations: 6,
    });
    expect(row.ok && [row.definition.agentConfig, row.definition.maxToolIterations]).toEqual([
      { model: "anthropic:claude-sonnet-4", temperature: 0.2, system: "Be brief." }, 6,
    ]);
    expect(row.ok && row.sourceMap.fields).toEqual({
      start: "definition.initial",
      "agentConfig.model": "definition.agentConfig.model",
      "agentConfig.temperature": "agentConfig.temperature",
      "agentConfig.system": "definition.agentConfig.system",
      maxToolIterations: "maxToolIterations",
    });
    expect(row.ok && row.warnings).toEqual([
      "definition.agentConfig.model: overrides agentConfig.model (the definition's agentConfig wins over the row's, field by field)",
      "memoryConfig: a setting of the stored workflow, not of its definition, so the import does not set it; set it with PUT /api/agent-workflows/:id",
      "mcpExport: a setting of the stored workflow, not of its definition, so the import does not set it; set it with PUT /api/agent-workflows/:id",
      "definition.streamingEnabled: has no effect and is not imported (a definition has no such setting; a run's progress is followed through its events)",
    ]);

    expect(importStateMachine({ ...machine, agentConfig: "gpt-4o" })).toMatchObject({
      ok: false, errors: [{ path: "agentConfig", code: "invalid_agent_config", message: "agentConfig is an object of LLM defaults (model, system, temperature, ...)" }],
    });
  });

  it("warns about transitions that can never be taken: after one without a guard on the same branch (events do not choose)", () => {
    const r = importStateMachine({
      initial: "classify",
      states: {
        classify: { invoke: { type: "echo" }, on: { SPAM: "drop", HAM: "deliver" } },
        review: { invoke: { type: "humanReview" }, on: { APPROVE: "deliver", REJECT: [{ target: "classify", guard: "$.x" }, { target: "drop" }] }, transitions: [{ target: "drop" }] },
        drop: { type: "final" },
        deliver: { invoke: "x.send", transitions: [{ target: "review", guard: "$.y" }, { target: "drop" }] },
      },
    });
    expect(r.ok && r.warnings).toEqual([
      'states.classify.on.HAM: the transition to "deliver" is never taken: states.classify.on.SPAM has no guard and is taken first.' +
        " Events do not choose a transition here (the state moves on when its node finishes): give each transition a guard on the node's output ($output).",
      // An edge out of a review without `when` is its approved branch; `transitions` come before `on`.
      'states.review.on.APPROVE: the transition to "deliver" is never taken: states.review.transitions[0] has no guard and is taken first.',
    ]);
  });

  it("never names a node after the context keys the engine owns (input, synthdev)", () => {
    const r = importStateMachine({ initial: "input", states: { input: { always: "synthdev" }, synthdev: { type: "final" } } });
    expect(r.ok && [(r.definition.nodes as Array<{ id: string }>).map((n) => n.id), r.definition.start, r.warnings]).toEqual([
      ["input_2", "synthdev_2"], "input_2", [
        'state "input" became node "input_2" (node ids are letters, digits, _ or -, and "input" and "synthdev" are reserved)',
        'state "synthdev" became node "synthdev_2" (node ids are letters, digits, _ or -, and "input" and "synthdev" are reserved)',
      ],
    ]);
  });

  it("refuses a state named after a context key an agent state makes the engine write, rather than rename it under the machine's $.paths", () => {
    // The ReAct flow with its memory write named "messages" and its tool executor "toolResults".
    const renamed = JSON.parse(JSON.stringify(reactAgent).replaceAll('"remember"', '"messages"').replaceAll('"tools"', '"toolResults"')) as typeof reactAgent;
    const r = importStateMachine(renamed);
    expect(r.ok === false && r.errors).toEqual([
      {
        path: "states.toolResults", code: "reserved_state_name",
        message: 'state "toolResults" would write its output to $.toolResults, where this agent.toolExecutor state itself puts the results of its calls: rename the state (and the paths that read its output), or give its invoke an output path',
      },
      {
        path: "states.messages", code: "reserved_state_name",
        message: 'state "messages" would write its output to $.messages, where the agent.memory.read state "recall" adds to the conversation: rename the state (and the paths that read its output), or give its invoke an output path',
      },
    ]);
    // With output paths of their own they write nowhere near, and keep their names.
    const states = renamed.states as unknown as Record<string, { invoke: Record<string, unknown> }>;
    const placed = importStateMachine({
      ...renamed,
      states: { ...renamed.states, toolResults: { ...states.toolResults, invoke: { ...states.toolResults!.invoke, output: "$.ran" } }, messages: { ...states.messages, invoke: { ...states.messages!.invoke, output: "$.memo" } } },
    });
    expect(placed.ok && (placed.definition.nodes as Array<{ id: string }>).map((n) => n.id)).toEqual(["prompt", "recall", "llm", "toolResults", "messages", "done"]);
    expect(placed.ok && validateWorkflow(placed.definition).ok).toBe(true);
    // Where no state makes the engine write the key, the name is the state's to use.
    const plain = importStateMachine({ initial: "messages", states: { messages: { invoke: "echo", always: "done" }, done: { type: "final" } } });
    expect(plain.ok && [(plain.definition.nodes as Array<{ id: string }>).map((n) => n.id), plain.warnings, validateWorkflow(plain.definition).ok]).toEqual([["messages", "done"], [], true]);
  });

  it("bounds only cycles nothing else bounds, on states each pass visits once, per pass of the loops around them", () => {
    const r = importStateMachine({
      initial: "round",
      states: {
        round: { invoke: "x.round", always: "loop" },
        loop: { invoke: { type: "whileLoop", config: { condition: "$.go", maxIterations: 100 } }, on: { BODY: "inner", EXIT: "next" } },
        inner: { invoke: { type: "whileLoop", config: { condition: "$.more", maxIterations: 10 } }, on: { BODY: "work", EXIT: "loop" } },
        work: { invoke: "x.work", transitions: [{ target: "work", guard: "$.retry" }, { target: "inner" }] },
        next: { transitions: [{ target: "round", guard: "$.again" }, { target: "done" }] },
        done: { type: "final" },
      },
    });
    expect(r.ok && (r.definition.nodes as Array<{ id: string; maxVisits?: number }>).map((n) => [n.id, n.maxVisits])).toEqual([
      ["_start", undefined],
      // The outer cycle leaves `loop` by exit: bounded on round and next (one visit a pass), not on the loop.
      ["round", 25], ["loop", undefined], ["inner", undefined],
      // The retry cycle is inside both loops, whose passes each restart its count.
      ["work", 25], ["next", 25], ["done", undefined],
    ]);
    expect(r.ok && r.warnings).toEqual([]);

    // A state the loop's exit also leads to (through "after") counts its visits across the loop's
    // passes: its bound is scaled by them, 25 × 1000 × 25 (the cycle through the exit re-runs the loop), cut to the most a node may have.
    const across = importStateMachine({
      initial: "loop",
      states: {
        loop: { invoke: { type: "whileLoop", config: { condition: "$.go", maxIterations: 1000 } }, on: { BODY: "work", EXIT: "after" } },
        work: { invoke: "x.work", transitions: [{ target: "work", guard: "$.retry" }, { target: "loop" }] },
        after: { transitions: [{ target: "work", guard: "$.again" }, { target: "done" }] },
        done: { type: "final" },
      },
    });
    expect(across.ok && (across.definition.nodes as Array<{ id: string; maxVisits?: number }>).map((n) => [n.id, n.maxVisits])).toEqual([
      ["_start", undefined], ["loop", undefined], ["work", 100_000], ["after", 25], ["done", undefined],
    ]);
    expect(across.ok && across.warnings).toEqual(['state "work" gets maxVisits 100000, the most a node may have; the loops around it could legitimately visit it 625000 times']);

    const inLoop = importStateMachine({
      initial: "loop",
      maxToolIterations: 3,
      states: {
        loop: { invoke: { type: "whileLoop", config: { condition: "$.go", maxIterations: 20 } }, on: { BODY: "llm", EXIT: "done" } },
        llm: { invoke: "x.llm", transitions: [{ target: "tools", guard: "$.calls" }, { target: "loop" }] },
        tools: { invoke: "x.tools", always: "llm" },
        done: { type: "final" },
      },
    });
    // 3 tool rounds in each iteration (the LLM answers once more), counted per iteration.
    expect(inLoop.ok && (inLoop.definition.nodes as Array<{ id: string; maxVisits?: number }>).map((n) => [n.id, n.maxVisits])).toEqual([
      ["_start", undefined], ["loop", undefined], ["llm", 4], ["tools", 3], ["done", undefined],
    ]);
  });
});
