/**
 * SynthDev (seed 002) import and execution, with the worker tools simulated:
 * `sandbox.run` runs handler stand-ins written in TypeScript against the JSON `this`,
 * `llm.chat` answers from a script. Rules checked: the import lists every missing
 * handler / state / context / agent / role, with every part of the wrong shape (each state,
 * agent, context and role on its own), and carries the nodes of the states that parsed with the
 * agents, roles and agentConfig (partial) so that their tools and models are checked in the
 * same answer; two agents sharing a context see each other's messages with roles mapped;
 * pre/post/transition handlers run in order and their changes to common_data and contexts
 * persist; loops end through the
 * transition handler; the final state's output is the execution's output;
 * error_handler "retry" re-runs a state; `this.last_response` has the chat-completion shape;
 * the source map names each node's state and each edge's next_state / transition_handler; an
 * edge's guard compares the state's decision with its target (`{ left, op: "eq", right }`),
 * in JSONata only for a target whose name a comparison would read as a path.
 */
import { describe, expect, it } from "@jest/globals";
import { importSynthDev, partialImportIssues, perspective, replayJournal, scriptFunctions, step, agentsWithoutModel, validateWorkflow } from "./index.ts";
import type { Command, Effect, ExecutionState, JournalEntry, JsonObject, JsonValue, WorkflowDefinition } from "./index.ts";

const identity = { executionId: 9, tenantId: "t_1", workflowId: 1, workflowVersion: 1 };

const workflow = {
  workflow_name: "pair",
  input: { name: "task", type: "string", required: true },
  output: { name: "result", type: "string" },
  variables: { max_rounds: 2 },
  contexts: [{ name: "shared", starting_messages: [{ role: "system", content: "Pair programming session" }], max_length: 50 }],
  agents: [{ agent_role: "coder", context: "shared", role: "assistant" }, { agent_role: "reviewer", context: "shared", role: "user" }],
  states: [
    { name: "start", agent: "coder", pre_handler: "init", message: "Write code for: {input.task}", next_state: "review" },
    { name: "review", agent: "reviewer", message: "Review round {common_data.round}", post_handler: "countRound", transition_handler: "decide" },
    { name: "stop" },
  ],
};
const script = `
export function init() { if (this.common_data.round === undefined) this.common_data.round = 1; }
export function countRound() { this.common_data.round += 1; if (this.last_response.choices[0].message.content.includes('LGTM')) this.common_data.result = 'approved'; }
export function decide() { return this.common_data.result ? 'stop' : (this.common_data.round > this.common_data.max_rounds ? 'stop' : 'start'); }
`;
const roles = { coder: { systemMessage: "You write code.", level: "smart" }, reviewer: { systemMessage: "You review code." } };

type Handler = (self: JsonObject) => JsonValue;
const handlers: Record<string, Handler> = {
  init: (t) => ((t.common_data as JsonObject).round ??= 1, null),
  countRound: (t) => {
    const cd = t.common_data as JsonObject;
    cd.round = (cd.round as number) + 1;
    const text = (((t.last_response as JsonObject).choices as JsonObject[])[0]!.message as JsonObject).content as string;
    if (text.includes("LGTM")) cd.result = "approved";
    return null;
  },
  decide: (t) => {
    const cd = t.common_data as JsonObject;
    return cd.result ? "stop" : (cd.round as number) > (cd.max_rounds as number) ? "stop" : "start";
  },
};

async function run(def: WorkflowDefinition, llm: (args: JsonObject) => JsonValue, input: JsonObject, h = handlers): Promise<{ state: ExecutionState; calls: (Effect & { kind: "callTool" })[]; journal: JournalEntry[] }> {
  let s: ExecutionState | null = null;
  const queue: Command[] = [{ kind: "start", input }];
  const calls: (Effect & { kind: "callTool" })[] = [];
  const journal: JournalEntry[] = [];
  let t = Date.UTC(2026, 0, 1);
  while (queue.length) {
    const r = await step({ definition: def, state: s, command: queue.shift()!, now: new Date(t++).toISOString(), identity });
    s = r.state;
    if (r.more) queue.push({ kind: "continue" });
    for (const e of r.effects) {
      if (e.kind === "journal") journal.push(e.entry);
      if (e.kind !== "callTool") continue;
      calls.push(e);
      if (e.tool === "sandbox.run") {
        const self = structuredClone(e.args.this) as JsonObject;
        try {
          const returned = h[e.args.handler as string]!(self);
          queue.push({ kind: "toolResult", nodeId: e.nodeId, callId: e.callId, ok: true, output: { this: self, returned }, durationMs: 1 });
        } catch (err) {
          queue.push({ kind: "toolResult", nodeId: e.nodeId, callId: e.callId, ok: false, error: { code: "BATON_SANDBOX_ERROR", message: (err as Error).message, retryable: false }, durationMs: 1 });
        }
      } else if (e.tool === "llm.chat") {
        queue.push({ kind: "toolResult", nodeId: e.nodeId, callId: e.callId, ok: true, output: llm(e.args), durationMs: 1 });
      } else {
        queue.push({ kind: "toolResult", nodeId: e.nodeId, callId: e.callId, ok: true, output: { tool: e.tool, args: e.args }, durationMs: 1 });
      }
    }
  }
  return { state: s!, calls, journal };
}

function imported(): WorkflowDefinition {
  const r = importSynthDev({ workflow, script, roles, agentConfig: { model: "openai:base", levels: { smart: "openai:smart" } } });
  if (!r.ok) throw new Error(JSON.stringify(r.errors));
  const v = validateWorkflow(r.definition);
  if (!v.ok) throw new Error(JSON.stringify(v.errors));
  return v.workflow;
}

describe("SynthDev import", () => {
  it("finds the script's handlers", () => {
    expect([...scriptFunctions(script)].sort()).toEqual(["countRound", "decide", "init"]);
    expect([...scriptFunctions("const a = () => 1; let b = async function () {}; function* g() {}")].sort()).toEqual(["a", "b", "g"]);
  });

  it("makes one node per state with guarded transitions, and passes validation", () => {
    const d = imported();
    expect(d.nodes.map((n) => [n.id, n.type])).toEqual([["start", "synthdev.state"], ["review", "synthdev.state"], ["stop", "synthdev.state"]]);
    // The state's decision is compared as a condition node compares: with the target's name.
    expect(d.edges.filter((e) => e.from === "start")).toEqual([{ from: "start", to: "review", condition: { left: "$.start.next", op: "eq", right: "review" } }]);
    expect(d.edges.filter((e) => e.from === "review").map((e) => e.to)).toEqual(["start", "review", "stop"]);
    expect(d.inputSchema).toEqual({ type: "object", properties: { task: { type: "string" } }, required: ["task"] });
  });

  it("maps each node to its state and each edge to the field that makes the transition", () => {
    const r = importSynthDev({ workflow, script, roles });
    if (!r.ok) throw new Error(JSON.stringify(r.errors));
    expect(r.sourceMap.nodes.review).toEqual({ path: "workflow.states[1]", fields: { name: "workflow.states[1].name", "config.state": "workflow.states[1].name" } });
    expect(r.sourceMap.edges.map((e) => e.path)).toEqual(["workflow.states[0].next_state", ...Array<string>(3).fill("workflow.states[1].transition_handler")]);
    expect(r.sourceMap.fields).toMatchObject({ "synthdev.workflow": "workflow", "synthdev.script": "script", "synthdev.roles": "roles", inputSchema: "workflow.input" });
  });

  it("refuses a workflow with missing handlers, states, contexts, agents and roles, listing every one", () => {
    const r = importSynthDev({
      workflow: {
        ...workflow,
        agents: [...workflow.agents, { agent_role: "ghost", context: "nowhere" }],
        states: [{ name: "start", agent: "nobody", pre_handler: "missingFn", next_state: "limbo" }, { name: "stop" }],
      },
      script,
      roles,
    });
    expect(r.ok).toBe(false);
    expect(!r.ok && r.errors.map((e) => `${e.code}@${e.path}`)).toEqual([
      "missing_context@workflow.agents[2].context", "missing_role@workflow.agents[2].agent_role",
      "missing_agent@workflow.states[0].agent", "missing_handler@workflow.states[0].pre_handler", "missing_state@workflow.states[0].next_state",
    ]);
  });

  it("lists the problems of a workflow, script or roles file of the wrong shape with those of its references, in one answer", () => {
    const r = importSynthDev({
      workflow: {
        ...workflow,
        agents: [...workflow.agents, { agent_role: 5, context: "shared" }],
        // review is of the wrong shape; start's transition to it is no problem of start's.
        states: [{ ...workflow.states[0]!, pre_handler: "missingFn" }, { ...workflow.states[1]!, max_retries: -1 }, workflow.states[2]!],
      },
      script,
      roles: { ...roles, coder: { ...roles.coder, includedTools: "repo.read" } },
    });
    expect(!r.ok && r.errors.map((e) => `${e.code}@${e.path}`)).toEqual([
      "invalid_shape@workflow.states[1].max_retries", "invalid_shape@workflow.agents[2].agent_role", "invalid_shape@roles.coder.includedTools",
      "missing_handler@workflow.states[0].pre_handler",
    ]);
    // A workflow that is no object, with a script that is no text, roles and agentConfig that are no objects: each said once.
    const bad = importSynthDev({ workflow: [], script: 5 as unknown as string, roles: "coder", agentConfig: "gpt-4o" as unknown as JsonObject });
    expect(!bad.ok && bad.errors.map((e) => `${e.code}@${e.path}`)).toEqual(["invalid_shape@workflow", "invalid_shape@script", "invalid_shape@roles", "invalid_shape@agentConfig"]);
  });

  it("carries the nodes of the states and the roles that parsed in a failed import, for the caller to check in the same answer", () => {
    const r = importSynthDev({
      workflow: { ...workflow, states: [...workflow.states, { name: "review", next_state: "stop" }] },
      script: script.replace("countRound", "countRounds"),
      roles: { ...roles, coder: { ...roles.coder, includedTools: ["repo.read", "no.such.tool"] } },
    });
    expect(!r.ok && r.errors.map((e) => `${e.code}@${e.path}`)).toEqual(["duplicate_state@workflow.states[3].name", "missing_handler@workflow.states[1].post_handler"]);
    const partial = r.ok ? undefined : r.partial;
    // review has a problem, but not in its node (its name); the second "review" has no node of its own.
    expect(partial?.definition.nodes).toEqual(["start", "review", "stop"].map((name) => ({ id: name, type: "synthdev.state", name, config: { state: name } })));
    expect(partial?.sourceMap).toEqual({
      // The agents the partial carries are mapped one by one: one that does not parse would shift their places.
      fields: { "synthdev.roles": "roles", "synthdev.workflow.agents[0]": "workflow.agents[0]", "synthdev.workflow.agents[1]": "workflow.agents[1]" },
      nodes: Object.fromEntries(["start", "review", "stop"].map((name, i) => [name, { path: `workflow.states[${i}]`, fields: { name: `workflow.states[${i}].name`, "config.state": `workflow.states[${i}].name` } }])),
      edges: [],
    });
    // Validation finds the tool the coder's role names that no worker serves (in the roles the
    // partial carries), and the states no edge reaches, which a caller leaves out.
    const v = partial && validateWorkflow(partial.definition, { hasTool: (n) => n !== "no.such.tool" });
    expect(v?.ok === false && v.errors.map((e) => `${e.code}@${e.path}`)).toEqual(["unknown_tool@synthdev.roles.coder.includedTools[1]", "unreachable_node@nodes[1]", "unreachable_node@nodes[2]"]);
    expect(partial && v?.ok === false && partialImportIssues(partial, v.errors).map((e) => e.path)).toEqual(["synthdev.roles.coder.includedTools[1]"]);
    // Without the tools a state runs on, each state's node is refused at its type, unreachable or not.
    const bare = partial && validateWorkflow(partial.definition, { hasTool: () => false });
    expect(partial && bare?.ok === false && partialImportIssues(partial, bare.errors).map((e) => `${e.code}@${e.path}`)).toEqual([
      ...[0, 1, 2].flatMap((i) => [`unknown_tool@nodes[${i}].type`, `unknown_tool@nodes[${i}].type`]),
      "unknown_tool@synthdev.roles.coder.includedTools[0]",
      "unknown_tool@synthdev.roles.coder.includedTools[1]",
    ]);
  });

  it("carries the agentConfig and the agents in a failed import, so that an agent without a model is found in the same answer", () => {
    const r = importSynthDev({
      workflow: { ...workflow, agents: [{ agent_role: 5, context: "shared" }, ...workflow.agents], states: [...workflow.states.slice(0, 2), { name: "stop", next_state: "nowhere" }] },
      script,
      roles,
      agentConfig: { levels: { smart: "openai:smart" } },
    });
    expect(!r.ok && r.errors.map((e) => `${e.code}@${e.path}`)).toEqual(["invalid_shape@workflow.agents[0].agent_role", "missing_state@workflow.states[2].next_state"]);
    const partial = r.ok ? undefined : r.partial;
    expect(partial?.definition.agentConfig).toEqual({ levels: { smart: "openai:smart" } });
    expect(partial?.sourceMap.fields).toEqual({
      "synthdev.roles": "roles", "synthdev.workflow.agents[0]": "workflow.agents[1]", "synthdev.workflow.agents[1]": "workflow.agents[2]", agentConfig: "agentConfig",
    });
    // The coder's level is mapped; the reviewer's role has none, and there is no model to fall back on.
    expect(partial && partialImportIssues(partial, agentsWithoutModel(partial.definition, undefined, false)).map((e) => `${e.code}@${e.path}`)).toEqual(["missing_model@synthdev.workflow.agents[1]"]);
  });

  it("never names a node after the context keys the engine owns (a state named input or synthdev)", () => {
    const r = importSynthDev({ workflow: { workflow_name: "w", states: [{ name: "input", next_state: "synthdev" }, { name: "synthdev", next_state: "stop" }] } });
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect((r.definition.nodes as { id: string }[]).map((n) => n.id)).toEqual(["input_2", "synthdev_2"]);
    expect(validateWorkflow(r.definition).ok).toBe(true);
  });

  it("refuses a script that is not text, naming it", () => {
    for (const bad of [5, {}, ["x"]]) {
      const r = importSynthDev({ workflow, script: bad as unknown as string, roles });
      expect(!r.ok && r.errors.map((e) => `${e.code}@${e.path}`)).toEqual(["invalid_shape@script"]);
    }
  });
});

describe("SynthDev execution", () => {
  it("maps roles between agents sharing a context", () => {
    const msgs: JsonObject[] = [{ role: "system", content: "s" }, { role: "user", content: "task", agent: "__workflow" }, { role: "assistant", content: "code", agent: "coder" }, { role: "assistant", content: "nit", agent: "reviewer" }];
    expect(perspective(msgs, "coder").map((m) => m.role)).toEqual(["system", "user", "assistant", "user"]);
    expect(perspective(msgs, "reviewer").map((m) => m.role)).toEqual(["system", "user", "user", "assistant"]);
  });

  it("runs two agents through the 4-step pattern until the reviewer approves", async () => {
    let reviews = 0;
    const llm = (args: JsonObject): JsonValue => {
      const system = args.system as string;
      if (system.startsWith("You write")) return { text: `code v${reviews + 1}`, toolCalls: [], usage: { inputTokens: 1, outputTokens: 1, totalTokens: 2 } };
      reviews++;
      return { text: reviews >= 2 ? "LGTM" : "please fix", toolCalls: [] };
    };
    const { state, calls } = await run(imported(), llm, { task: "fizzbuzz" });
    expect(state.status).toBe("completed");
    expect(state.output).toEqual({ next: null, output: "approved" });
    const llmCalls = calls.filter((c) => c.tool === "llm.chat");
    expect(llmCalls.map((c) => c.args.model)).toEqual(["openai:smart", "openai:base", "openai:smart", "openai:base"]);
    // The reviewer's second call sees the coder's messages as user messages and its own earlier review as assistant.
    expect((llmCalls[3]!.args.messages as JsonObject[]).map((m) => `${m.role as string}:${m.content as string}`)).toEqual([
      "system:Pair programming session", "user:Write code for: fizzbuzz", "user:code v1", "user:Review round 1", "assistant:please fix",
      "user:Write code for: fizzbuzz", "user:code v2", "user:Review round 2",
    ]);
    expect(calls.filter((c) => c.tool === "sandbox.run").map((c) => c.args.handler)).toEqual(["init", "countRound", "decide", "init", "countRound", "decide"]);
    expect(((state.context.synthdev as JsonObject).common_data as JsonObject).round).toBe(3);
    // A checkpoint rebuilt from the journal (without the final state's rows, which the replay recomputes) has the same SynthDev runtime.
    const all = await run(imported(), (() => { reviews = 0; return llm; })(), { task: "fizzbuzz" });
    const cut = all.journal.findIndex((j) => j.nodeId === "stop");
    const rebuilt = await replayJournal({ definition: imported(), identity, start: { kind: "start", input: { task: "fizzbuzz" } }, journal: all.journal.slice(0, cut), startedAt: new Date(Date.UTC(2026, 0, 1)).toISOString() });
    expect(rebuilt.unplaced).toEqual([]);
    expect(rebuilt.state.status).toBe("completed");
    expect(rebuilt.state.context.synthdev).toEqual(all.state.context.synthdev);
  });

  it("goes where the state decided, by comparison, or by JSONata for a state whose name a comparison would read as a path", async () => {
    const r = importSynthDev({ workflow: { workflow_name: "w", states: [{ name: "start", next_state: "$.end" }, { name: "$.end", next_state: "last step" }, { name: "last step" }] } });
    if (!r.ok) throw new Error(JSON.stringify(r.errors));
    expect(r.definition.edges).toEqual([
      { from: "start", to: "__end", condition: '$output.next = "$.end"' },
      { from: "__end", to: "last_step", condition: { left: "$.__end.next", op: "eq", right: "last step" } },
    ]);
    const v = validateWorkflow(r.definition);
    if (!v.ok) throw new Error(JSON.stringify(v.errors));
    const { state, journal } = await run(v.workflow, () => ({ text: "" }), {});
    expect([state.status, journal.filter((j) => j.status === "completed").map((j) => j.nodeId)]).toEqual(["completed", ["start", "__end", "last_step"]]);
  });

  it("an error handler returning 'retry' re-runs the state; without one the node fails with the handler's error", async () => {
    let fails = 1;
    const h: Record<string, Handler> = { ...handlers, init: (t) => {
      if (fails-- > 0) throw new Error("flaky init");
      return handlers.init!(t);
    }, onError: (t) => ((t.common_data as JsonObject).saw = (t.last_error as JsonObject).message ?? null, "retry") };
    const wf = { ...workflow, states: [{ name: "start", pre_handler: "init", error_handler: "onError", max_retries: 2, next_state: "stop" }, { name: "stop" }] };
    const r = importSynthDev({ workflow: wf, script: script + "\nexport function onError() { return 'retry'; }", roles });
    if (!r.ok) throw new Error(JSON.stringify(r.errors));
    const v = validateWorkflow(r.definition);
    if (!v.ok) throw new Error(JSON.stringify(v.errors));
    const ok = await run(v.workflow, () => ({ text: "" }), { task: "x" }, h);
    expect(ok.state.status).toBe("completed");
    expect(((ok.state.context.synthdev as JsonObject).common_data as JsonObject).saw).toBe("flaky init");
    fails = 1;
    const noHandler = importSynthDev({ workflow: { ...wf, states: [{ name: "start", pre_handler: "init", next_state: "stop" }, { name: "stop" }] }, script, roles });
    if (!noHandler.ok) throw new Error("import");
    const nv = validateWorkflow(noHandler.definition);
    if (!nv.ok) throw new Error("validate");
    const failed = await run(nv.workflow, () => ({ text: "" }), { task: "x" }, h);
    expect(failed.state.status).toBe("failed");
    expect(failed.state.error).toMatchObject({ code: "BATON_SANDBOX_ERROR", nodeId: "start" });
  });

  it("runs a role's included tools for the agent and keeps that traffic out of the other agents' view", async () => {
    const wf = {
      ...workflow,
      states: [{ name: "start", agent: "coder", message: "Write: {input.task}", next_state: "review" }, { name: "review", agent: "reviewer", message: "Review it", next_state: "stop" }, { name: "stop" }],
    };
    const r = importSynthDev({ workflow: wf, script, roles: { coder: { systemMessage: "You write code.", includedTools: ["repo.read"] }, reviewer: { systemMessage: "You review code." } }, agentConfig: { model: "m:x" } });
    if (!r.ok) throw new Error(JSON.stringify(r.errors));
    const v = validateWorkflow(r.definition);
    if (!v.ok) throw new Error(JSON.stringify(v.errors));
    const seen: JsonObject[][] = [];
    const llm = (args: JsonObject): JsonValue => {
      const msgs = args.messages as JsonObject[];
      seen.push(msgs);
      if ((args.system as string).startsWith("You write") && !msgs.some((m) => m.role === "tool")) {
        return { text: "", toolCalls: [{ id: "t1", name: "repo.read", args: { path: "main.py" } }, { id: "t2", name: "rm.rf", args: {} }] };
      }
      return { text: (args.system as string).startsWith("You write") ? "done coding" : "LGTM", toolCalls: [] };
    };
    const { state, calls } = await run(v.workflow, llm, { task: "x" });
    expect(state.status).toBe("completed");
    expect(calls.filter((c) => c.tool === "repo.read").map((c) => c.args)).toEqual([{ path: "main.py" }]);
    expect(calls.some((c) => c.tool === "rm.rf")).toBe(false);
    // The coder's second call sees its tool call and the result; the reviewer sees only the answer.
    expect(seen[1]!.map((m) => m.role)).toEqual(["system", "user", "assistant", "tool"]);
    expect(seen[2]!.map((m) => `${m.role as string}:${m.content as string}`)).toEqual(["system:Pair programming session", "user:Write: x", "user:done coding", "user:Review it"]);
  });
});
