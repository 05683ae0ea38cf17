/**
 * Where `POST /api/agent-workflows/import` says a problem is, when the source converts but the
 * definition it converts to fails validation (gateway on a real Postgres store, the engine's real
 * importers, the engine's validator with a fixed set of registered tools). Rules checked:
 * - such a source is a 400 `BATON_GATEWAY_IMPORT_INVALID` (not the create route's code), and
 *   nothing is written or announced;
 * - each problem's path points into `body.source`, at the element its node or edge came from,
 *   with the rest of the path kept when that field came from the source too (plan step fields
 *   under their own aliases, a state's invoke, a forEach body inside an invoke's config, a
 *   bare array of tool steps);
 * - a problem of a field the importer made up points at the element it was made for (else at
 *   `body.source`) and its message says where in the generated definition it is;
 * - the validation warnings of a created import point into `body.source` the same way;
 * - an importer that gives no source map still answers with `body.source` paths;
 * - a source with problems of its own also gets, in the same answer, the tools no worker serves
 *   among its elements that did convert (plan and tool-sequence steps whose tool and params
 *   converted, whatever their dependencies or order, state-machine states whose invoke
 *   converted, SynthDev states and the roles of their agents), at their tool fields, and every
 *   other problem in those nodes' own fields (a delay's config, a transform's expression, a
 *   prompt's placeholder, an output path); nothing of the partial definition's graph (its
 *   unreachable nodes, a loop without its body: it has no edges) is reported;
 * - a state-machine state named after a context key an agent state makes the engine write is
 *   refused by the importer, with the source's other problems;
 * - a SynthDev role's includedTools are checked for the roles of the states' agents, in the
 *   roles file; a SynthDev source goes through the engine's importWorkflow like the others;
 * - a SynthDev agent its agentConfig gives no model is `missing_model` at the agent in the
 *   source, also with the source's own problems (and a model of the source's agentConfig no
 *   provider serves with them).
 */
import { afterAll, beforeAll, describe, expect, test } from "@jest/globals";
import { importWorkflow, validateWorkflowWithTools } from "@baton/engine";
import type { ImportWorkflow, ValidateWorkflow } from "./deps.ts";
import type { TestGateway } from "./test-support.ts";
import { bearer, openTestGateway } from "./test-support.ts";

/** The importer as bin/modules.ts wires it: the engine's, every format (SynthDev too) in one dispatch. */
const importer: ImportWorkflow = importWorkflow;
const registered = new Set(["echo", "http.get"]);
const withTools: ValidateWorkflow = (d) => validateWorkflowWithTools(d, (name) => Promise.resolve(registered.has(name)));

let gw: TestGateway;

beforeAll(async () => {
  gw = await openTestGateway({}, { importWorkflow: importer });
  gw.setValidator(withTools);
});
afterAll(async () => {
  await gw.close();
});

interface Problem {
  code: string;
  detail: string;
  errors: { path: string; code: string; message: string }[];
}

const importDoc = (format: string, source: unknown, name: string) =>
  gw.app.inject({ method: "POST", url: "/api/agent-workflows/import", headers: bearer(gw.a.operator), payload: { format, source, name } });

/** Imports `source`, expects a refusal, and checks that nothing was written or announced. */
async function refused(format: string, source: unknown): Promise<Problem> {
  const before = { rows: (await gw.store.workflows.list(gw.a.tenantId, { limit: 1000 })).length, events: gw.bus.published.length };
  const res = await importDoc(format, source, `refused ${format}`);
  expect({ status: res.statusCode, type: String(res.headers["content-type"]).split(";")[0] }).toEqual({ status: 400, type: "application/problem+json" });
  const p = res.json<Problem>();
  expect(p.code).toBe("BATON_GATEWAY_IMPORT_INVALID");
  expect(p.detail).toContain(`${format} document`);
  expect({ rows: (await gw.store.workflows.list(gw.a.tenantId, { limit: 1000 })).length, events: gw.bus.published.length }).toEqual(before);
  return p;
}

const at = (p: Problem) => p.errors.map((e) => `${e.code}@${e.path}`);

describe("a source of the wrong JSON type", () => {
  test("is a 400 at body.source saying what a source is, not zod's bare \"Invalid input\"", async () => {
    for (const [source, received] of [["a plan", "string"], [null, "null"], [42, "number"]] as const) {
      const res = await importDoc("plan", source, "Wrong type");
      expect(res.statusCode).toBe(400);
      const p = res.json<Problem>();
      expect({ code: p.code, errors: p.errors }).toEqual({
        code: "BATON_GATEWAY_REQUEST_INVALID",
        errors: [{ path: "body.source", code: "invalid_union", message: `expected a JSON object (or, for toolSequence, an array of steps), received ${received}` }],
      });
    }
  });
});

describe("a source that converts to a definition the validation refuses", () => {
  test("plan: each step naming a tool no worker serves is reported at that step's tool field", async () => {
    const p = await refused("plan", {
      steps: [
        { name: "fetch", tool: "web.fetch", params: { url: "{{input.url}}" } },
        { name: "notify", tool_name: "no.such.tool", params: { text: "got {{fetch.body}}" }, dependencies: ["fetch"] },
      ],
    });
    expect(at(p)).toEqual(["unknown_tool@body.source.steps[0].tool", "unknown_tool@body.source.steps[1].tool_name"]);
    expect(p.errors[1]!.message).toBe('tool "no.such.tool" is not registered (no worker serves it, or this tenant may not call it)');
  });

  test("stateMachine: a config the validator refuses, an API node no worker serves and a forEach body's tool point into the states", async () => {
    const p = await refused("stateMachine", {
      initial: "wait",
      states: {
        wait: { invoke: { type: "delay", config: { ms: "soon" } }, on: { DONE: "lookup" } },
        lookup: { invoke: { type: "crm.lookup", input: { id: "$.input.id" } }, on: { DONE: "each" } },
        each: {
          invoke: { type: "forEach", config: { items: "$.input.ids", body: { nodes: [{ id: "one", type: "tool", config: { tool: "no.such.tool" } }] } } },
          on: { DONE: "done" },
        },
        done: { type: "final" },
      },
    });
    expect(at(p)).toEqual([
      "invalid_config@body.source.states.wait.invoke.config.ms",
      "unknown_tool@body.source.states.lookup.invoke.type",
      "unknown_tool@body.source.states.each.invoke.config.body.nodes[0].config.tool",
    ]);
  });

  test("toolSequence as a bare array: the step's toolName", async () => {
    const p = await refused("toolSequence", [{ toolName: "echo", parameters: { text: "hi" } }, { toolName: "no.such.tool" }]);
    expect(at(p)).toEqual(["unknown_tool@body.source[1].toolName"]);
  });

  test("a problem in what the importer made up points at the element it came from, and says where in the generated definition", async () => {
    const source = {
      initial: "ask",
      states: {
        ask: { invoke: { type: "http.get", input: { url: "$.input.url" } }, transitions: [{ target: "ask", guard: { left: "$.ask.retry", op: "truthy" } }, { target: "done" }] },
        done: { type: "final" },
      },
    };
    // The engine's validator accepts this definition: stand in for one that would not.
    const issues = [
      { path: "edges[1].condition", code: "invalid_expression", message: "bad guard" },
      { path: "edges[1].condition.left", code: "invalid_path", message: "bad operand" },
      { path: "nodes[1].input.url", code: "invalid_path", message: "bad path" },
      { path: "nodes[1].maxVisits", code: "invalid_shape", message: "too many visits" },
      { path: "nodes[0]", code: "unreachable_node", message: "unreachable" },
      { path: "edges", code: "unbounded_cycle", message: "endless" },
      { path: "(definition)", code: "invalid_shape", message: "not a workflow" },
    ];
    gw.setValidator(() => ({ ok: false, errors: issues }));
    try {
      const p = await refused("stateMachine", source);
      expect(p.errors).toEqual([
        { path: "body.source.states.ask.transitions[0].guard", code: "invalid_expression", message: "bad guard" },
        // A comparison guard is kept as it was written: a path into it points into the source's guard.
        { path: "body.source.states.ask.transitions[0].guard.left", code: "invalid_path", message: "bad operand" },
        { path: "body.source.states.ask.invoke.input.url", code: "invalid_path", message: "bad path" },
        // maxVisits was the importer's default (no state or definition sets one).
        { path: "body.source.states.ask", code: "invalid_shape", message: "too many visits (in the generated definition at nodes[1].maxVisits)" },
        // _start exists because the initial state is re-entered.
        { path: "body.source.initial", code: "unreachable_node", message: "unreachable" },
        { path: "body.source", code: "unbounded_cycle", message: "endless (in the generated definition at edges)" },
        { path: "body.source", code: "invalid_shape", message: "not a workflow (in the generated definition at its top level)" },
      ]);
    } finally {
      gw.setValidator(withTools);
    }
  });

  test("an importer without a source map still answers with paths into body.source", async () => {
    const bare: ImportWorkflow = (format, source) => {
      const r = importer(format, source);
      return r.ok ? { ok: true, definition: r.definition, warnings: r.warnings } : r;
    };
    const other = await openTestGateway({}, { importWorkflow: bare });
    other.setValidator(withTools);
    try {
      const res = await other.app.inject({
        method: "POST", url: "/api/agent-workflows/import", headers: bearer(other.a.operator),
        payload: { format: "plan", name: "no map", source: { steps: [{ name: "a", tool_name: "no.such.tool" }] } },
      });
      expect(res.statusCode).toBe(400);
      expect(res.json<Problem>().errors).toEqual([{
        path: "body.source",
        code: "unknown_tool",
        message: 'tool "no.such.tool" is not registered (no worker serves it, or this tenant may not call it) (in the generated definition at nodes[0].config.tool)',
      }]);
      expect(await other.store.workflows.list(other.a.tenantId)).toEqual([]);
    } finally {
      await other.close();
    }
  });
});

describe("a source with problems of its own", () => {
  test("plan: the source's problems and the converted steps' unknown tools come in one answer", async () => {
    const p = await refused("plan", {
      steps: [
        { name: "fetch", tool_name: "no.such.fetch", params: {} },
        { name: "broken", params: {}, dependencies: ["fetch"] },
        { name: "say", tool: "echo", params: { text: "{{fetch.body}}" }, dependencies: ["broken", "ghost"] },
        // A wrong dependency is an edge: the step's made-up tool is reported with it.
        { name: "tell", tool: "no.such.chat", params: {}, dependencies: ["nobody"] },
      ],
    });
    // The converted steps' nodes have no edges between them (they are unreachable in the partial definition): not reported.
    expect(at(p)).toEqual([
      "missing_tool@body.source.steps[1].tool_name",
      "unknown_dependency@body.source.steps[2].dependencies[1]",
      "unknown_dependency@body.source.steps[3].dependencies[0]",
      "unknown_tool@body.source.steps[0].tool_name",
      "unknown_tool@body.source.steps[3].tool",
    ]);
  });

  test("toolSequence: the same, and a source whose every step has a problem gets the source's problems only", async () => {
    const p = await refused("toolSequence", [{ toolName: "no.such.tool" }, { parameters: [] }, { toolName: "echo" }]);
    expect(at(p)).toEqual(["missing_tool@body.source[1].toolName", "invalid_params@body.source[1].parameters", "unknown_tool@body.source[0].toolName"]);
    const q = await refused("toolSequence", [{ parameters: {} }]);
    expect(at(q)).toEqual(["missing_tool@body.source[0].toolName"]);
    // A wrong order only places a step in the chain: its made-up tool is reported with it.
    const r = await refused("toolSequence", { steps: [{ order: 1, toolName: "echo" }, { order: 1, toolName: "no.such.tool", parameters: { text: "got {{step1.text}}" } }] });
    expect(at(r)).toEqual(["duplicate_order@body.source.steps[1].order", "unknown_tool@body.source.steps[1].toolName"]);
  });

  test("stateMachine: the states' problems and the tools no worker serves in the states whose invoke converted, in one answer", async () => {
    const p = await refused("stateMachine", {
      initial: "lookup",
      states: {
        lookup: { invoke: { type: "crm.lookup", input: { id: "$.input.id" } }, on: { DONE: "ask" } },
        ask: { invoke: { type: "agent.llm", config: { model: "openai:gpt-4o-mini", tools: ["echo", "no.such.search"] } }, on: { DONE: "each" } },
        each: {
          invoke: { type: "forEach", config: { items: "$.input.ids", body: { nodes: [{ id: "one", type: "tool", config: { tool: "no.such.tool" } }] } } },
          on: { DONE: "post" },
        },
        // A bad transition: the state's node still converted, and its tool is checked.
        post: { invoke: { type: "chat.post", input: { text: "$.ask.text" } }, on: { DONE: "broken", FAIL: "nowhere" } },
        // A bad invoke: nothing of it is checked.
        broken: { invoke: { type: "no.such.tool", config: 5 }, on: { DONE: "done" } },
        done: { type: "final" },
      },
    });
    expect(at(p)).toEqual([
      "unknown_target@body.source.states.post.on.FAIL",
      "invalid_config@body.source.states.broken.invoke.config",
      "unknown_tool@body.source.states.lookup.invoke.type",
      "unknown_tool@body.source.states.ask.invoke.type",
      "unknown_tool@body.source.states.ask.invoke.config.tools[1]",
      "unknown_tool@body.source.states.each.invoke.config.body.nodes[0].config.tool",
      "unknown_tool@body.source.states.post.invoke.type",
    ]);
    expect(p.errors[3]!.message).toBe('tool "llm.chat" is not registered (no worker serves it, or this tenant may not call it)');
  });

  test("stateMachine: every problem of a converted state's own node comes with the source's, none of the partial graph's", async () => {
    const p = await refused("stateMachine", {
      initial: "wait",
      states: {
        wait: { invoke: { type: "delay", config: { ms: "soon" } }, on: { DONE: "shape" } },
        shape: { invoke: { type: "transform", config: { expression: "$.a +" } }, on: { DONE: "ask" } },
        ask: { invoke: { type: "agent.llm", config: { model: "openai:gpt-4o-mini", prompt: "Answer {{$.input.q[}}" }, output: "$.input.answer" }, on: { DONE: "loop" } },
        loop: { invoke: { type: "whileLoop", config: { condition: "$.n < 3", maxIterations: 3 } }, on: { BODY: "wait", EXIT: "done" } },
        done: { type: "final" },
        post: { invoke: { type: "crm.post", input: { id: "$.ask.id" } }, on: { DONE: "nowhere" } },
      },
    });
    // Not reported: the converted nodes unreachable and the loop without its body, for want of the edges a partial import has not.
    expect(at(p)).toEqual([
      "unknown_target@body.source.states.post.on.DONE",
      "unreachable_state@body.source.states.post",
      "invalid_config@body.source.states.wait.invoke.config.ms",
      "invalid_expression@body.source.states.shape.invoke.config.expression",
      "unknown_tool@body.source.states.ask.invoke.type",
      "invalid_path@body.source.states.ask.invoke.config.prompt",
      "invalid_path@body.source.states.ask.invoke.output",
      "unknown_tool@body.source.states.post.invoke.type",
    ]);
  });

  test("stateMachine: a state named after the conversation an agent state keeps is one of the source's problems, in the same answer", async () => {
    const p = await refused("stateMachine", {
      initial: "ask",
      states: {
        ask: { invoke: { type: "agent.llm", config: { model: "openai:gpt-4o-mini", prompt: "{{$.input.q}}" } }, on: { DONE: "messages" } },
        messages: { invoke: { type: "echo", input: { text: "$.ask.text" } }, on: { DONE: "done", FAIL: "nowhere" } },
        done: { type: "final" },
      },
    });
    expect(at(p)).toEqual([
      "unknown_target@body.source.states.messages.on.FAIL",
      "reserved_state_name@body.source.states.messages",
      "unknown_tool@body.source.states.ask.invoke.type",
    ]);
  });
});

describe("a SynthDev source", () => {
  /** The tools a SynthDev state runs on served too, so that only its agents' tools are in question. */
  const withStateTools: ValidateWorkflow = (d) => validateWorkflowWithTools(d, (name) => Promise.resolve(registered.has(name) || name === "sandbox.run" || name === "llm.chat"));
  const pair = {
    workflow_name: "pair",
    contexts: [{ name: "shared" }],
    agents: [{ agent_role: "coder", context: "shared" }, { agent_role: "reviewer", context: "shared" }],
    states: [{ name: "start", agent: "coder", next_state: "review" }, { name: "review", agent: "reviewer", next_state: "stop" }, { name: "stop" }],
  };
  const agentConfig = { model: "openai:gpt-4o-mini" };

  test("goes through the engine's importWorkflow: a source that is no object is refused as such", async () => {
    const p = await refused("synthdev", [pair]);
    expect(p.errors).toEqual([{ path: "body.source", code: "invalid_source", message: "a SynthDev source is an object { workflow, script?, roles?, agentConfig? }" }]);
  });

  test("a tool no worker serves in the role of a state's agent is reported in the roles file", async () => {
    gw.setValidator(withStateTools);
    try {
      const p = await refused("synthdev", { workflow: pair, script: "", roles: { coder: { includedTools: ["echo", "no.such.tool"] }, reviewer: {}, unused: { includedTools: ["no.such.either"] } }, agentConfig });
      expect(at(p)).toEqual(["unknown_tool@body.source.roles.coder.includedTools[1]"]);
    } finally {
      gw.setValidator(withTools);
    }
  });

  test("a bad state, and a state whose agent may call a tool no worker serves, in one answer", async () => {
    gw.setValidator(withStateTools);
    try {
      const p = await refused("synthdev", {
        workflow: { ...pair, states: [pair.states[0], { ...pair.states[1], post_handler: "tally" }, { name: "stop", max_retries: "twice" }] },
        script: "export function count() {}",
        roles: { coder: { includedTools: ["echo", "no.such.tool"] }, reviewer: {} },
        agentConfig,
      });
      expect(at(p)).toEqual([
        "invalid_shape@body.source.workflow.states[2].max_retries",
        "missing_handler@body.source.workflow.states[1].post_handler",
        "unknown_tool@body.source.roles.coder.includedTools[1]",
      ]);
    } finally {
      gw.setValidator(withTools);
    }
    // Without sandbox.run and llm.chat, every state that converted cannot run: said at each, with where in the generated definition.
    const q = await refused("synthdev", { workflow: { ...pair, states: [pair.states[0], { name: "review", next_state: "limbo" }] }, script: "", roles: { coder: {}, reviewer: {} }, agentConfig });
    expect(q.errors.map((e) => `${e.code}@${e.path}: ${e.message}`)).toEqual([
      'missing_state@body.source.workflow.states[1].next_state: state "review" goes to "limbo", which is not a state',
      ...[0, 1].flatMap((i) => ["sandbox.run", "llm.chat"].map((t) => `unknown_tool@body.source.workflow.states[${i}]: tool "${t}" is not registered (no worker serves it, or this tenant may not call it) (in the generated definition at nodes[${i}].type)`)),
    ]);
  });
});

describe("a SynthDev agent without a model", () => {
  const withStateTools: ValidateWorkflow = (d) => validateWorkflowWithTools(d, (name) => Promise.resolve(registered.has(name) || name === "sandbox.run" || name === "llm.chat"), {
    checkModel: (ref) => (ref.startsWith("openai:") ? undefined : `model "${ref}": provider "${ref.split(":")[0]}" is not configured`),
  });
  const pair = {
    workflow_name: "pair",
    contexts: [{ name: "shared" }],
    agents: [{ agent_role: "coder", context: "shared" }, { agent_role: "reviewer", context: "shared" }],
    states: [{ name: "start", agent: "coder", next_state: "review" }, { name: "review", agent: "reviewer", next_state: "stop" }, { name: "stop" }],
  };
  const roles = { coder: { level: "smart" }, reviewer: {} };

  test("is refused at the agent in the source, its run would fail for want of a model", async () => {
    gw.setValidator(withStateTools);
    try {
      const p = await refused("synthdev", { workflow: pair, roles, agentConfig: { levels: { smart: "openai:gpt-4o" } } });
      expect(p.errors).toEqual([{
        path: "body.source.workflow.agents[1]",
        code: "missing_model",
        message: 'agent "reviewer" has no model and the installation no default one (BATON_LLM_DEFAULT_MODEL): its role has no level and agentConfig has no model; set agentConfig.model (or give the role a level that agentConfig.levels maps)',
      }]);
      expect((await importDoc("synthdev", { workflow: pair, roles, agentConfig: { model: "openai:gpt-4o-mini" } }, "with a model")).statusCode).toBe(201);
    } finally {
      gw.setValidator(withTools);
    }
  });

  test("comes with the source's own problems, and so does a model of the source's agentConfig no provider serves", async () => {
    gw.setValidator(withStateTools);
    try {
      const p = await refused("synthdev", {
        // An agent that does not parse shifts the others' places in the partial import: each is still named where it is in the source.
        workflow: { ...pair, agents: [{ agent_role: 7, context: "shared" }, ...pair.agents], states: [...pair.states.slice(0, 2), { name: "stop", max_retries: "twice" }] },
        roles,
        agentConfig: { levels: { smart: "anthropic:claude-x" } },
      });
      expect(at(p)).toEqual([
        "invalid_shape@body.source.workflow.states[2].max_retries",
        "invalid_shape@body.source.workflow.agents[0].agent_role",
        // The coder's level names a model, which no provider serves; the reviewer has none at all.
        "model_not_configured@body.source.agentConfig.levels.smart",
        "missing_model@body.source.workflow.agents[2]",
      ]);
      expect(p.errors[3]!.message).toMatch(/^agent "reviewer" has no model and the installation no default one /);
    } finally {
      gw.setValidator(withTools);
    }
  });
});

describe("a state machine's agentConfig in a failed import", () => {
  const withModels: ValidateWorkflow = (d) => validateWorkflowWithTools(d, (name) => Promise.resolve(registered.has(name) || name === "llm.chat"), {
    checkModel: (ref) => (ref.startsWith("openai:") ? undefined : `model "${ref}": provider "${ref.split(":")[0]}" is not configured`),
  });
  const machine = (agentConfig: Record<string, unknown>) => ({
    initial: "ask",
    agentConfig,
    states: {
      ask: { invoke: { type: "agent.llm", config: { prompt: "{{$.input.q}}" } }, on: { DONE: "done", FAIL: "nowhere" } },
      done: { type: "final" },
    },
  });

  test("gives its LLM states their model, and its model refs are checked in the same answer", async () => {
    gw.setValidator(withModels);
    try {
      // The source's agentConfig gives the state a model: no missing_model for it.
      expect(at(await refused("stateMachine", machine({ model: "openai:gpt-4o-mini" })))).toEqual(["unknown_target@body.source.states.ask.on.FAIL"]);
      // A model no provider serves is found in the first answer, where it is in the source.
      expect(at(await refused("stateMachine", machine({ model: "anthropic:claude-x" })))).toEqual([
        "unknown_target@body.source.states.ask.on.FAIL",
        "model_not_configured@body.source.agentConfig.model",
      ]);
    } finally {
      gw.setValidator(withTools);
    }
  });
});

describe("warnings of an imported definition", () => {
  test("point into body.source, after the importer's own", async () => {
    const res = await importDoc("stateMachine", {
      states: {
        each: {
          invoke: { type: "forEach", config: { items: "$.input.ids", body: { nodes: [{ id: "one", type: "tool", config: { tool: "echo" }, retries: 3 }] } } },
          on: { DONE: "done" },
        },
        done: { type: "final" },
      },
    }, "warned import");
    expect(res.statusCode).toBe(201);
    expect(res.json<{ warnings: string[] }>().warnings).toEqual([
      'no initial state given; starting at the first state, "each"',
      'body.source.states.each.invoke.config.body.nodes[0].retries: "retries" is not a field here and has no effect',
    ]);
  });
});
