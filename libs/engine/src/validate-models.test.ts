/**
 * Rules checked: model refs are checked where a definition names them, with the lookup the
 * caller gives (`checkModel`, the gateway's: the configured LLM providers):
 * - a ref with no configured provider is `model_not_configured`, with the lookup's message, at
 *   its path: an agent node's `nodes[i].config.model`, the definition's `agentConfig.model`
 *   and each `agentConfig.levels.<level>`;
 * - the definition's agentConfig refs are checked always, as the node's own: with no LLM node
 *   at all, and when every LLM node names its own model;
 * - configured refs pass; every problem comes in one answer with the definition's others;
 * - without a lookup (the executor's re-validation) no ref is checked;
 * - where the installation has no default model: a SynthDev agent that no agentConfig gives a
 *   model (its role's level through `levels`, else `model`; the workflow's own under the
 *   definition's, field by field) is `missing_model` at the agent, once per agent, for the agents
 *   of the definition's states only; an agent.llm or agent.toolLoop node with neither
 *   config.model nor agentConfig.model is `missing_model` at its config.model, forEach bodies
 *   included; exactly those make llm.chat calls that name no model. With a default model none is.
 */
import { describe, expect, it } from "@jest/globals";
import { importSynthDev, step, agentsWithoutModel, validateWorkflow } from "./index.ts";
import type { JsonObject, ValidateOptions } from "./index.ts";

/** Only the `openai` provider is configured. */
const checkModel = (ref: string): string | undefined =>
  ref.startsWith("openai:") ? undefined : `model "${ref}": provider "${ref.split(":")[0]}" is not configured (set ANTHROPIC_API_KEY)`;

const llm = (id: string, config: Record<string, unknown> = {}) => ({ id, type: "agent.llm", config: { prompt: "hi", ...config } });
const set = { id: "set", type: "setVariable", config: { values: { x: 1 } } };

function problems(definition: unknown, opts: ValidateOptions = { checkModel }) {
  const r = validateWorkflow(definition, opts);
  return r.ok ? [] : r.errors.map((e) => [e.path, e.code]);
}

describe("model refs", () => {
  it("refuses a node's model with no configured provider, with the lookup's message", () => {
    const r = validateWorkflow({ nodes: [llm("a", { model: "anthropic:claude-x" })] }, { checkModel });
    expect(r.ok ? [] : r.errors).toEqual([
      { path: "nodes[0].config.model", code: "model_not_configured", message: expect.stringContaining("ANTHROPIC_API_KEY") as unknown },
    ]);
  });

  it("refuses the definition's agentConfig.model and each levels value the same way", () => {
    expect(problems({ agentConfig: { model: "anthropic:claude-x", levels: { base: "openai:gpt-4o-mini", smart: "anthropic:claude-y" } }, nodes: [llm("a")] })).toEqual([
      ["agentConfig.model", "model_not_configured"],
      ["agentConfig.levels.smart", "model_not_configured"],
    ]);
  });

  it("checks the agentConfig refs always: with no LLM node, and when every LLM node names its own model", () => {
    expect(problems({ agentConfig: { model: "anthropic:claude-x" }, nodes: [set] })).toEqual([["agentConfig.model", "model_not_configured"]]);
    expect(problems({ agentConfig: { model: "anthropic:claude-x" }, nodes: [llm("a", { model: "openai:gpt-4o" })] })).toEqual([["agentConfig.model", "model_not_configured"]]);
  });

  it("accepts configured refs", () => {
    expect(problems({ agentConfig: { model: "openai:gpt-4o-mini", levels: { smart: "openai:gpt-4o" } }, nodes: [llm("a"), llm("b", { model: "openai:o3" })], edges: [{ from: "a", to: "b" }] })).toEqual([]);
  });

  it("reports model problems with the definition's other problems, in one answer", () => {
    expect(problems({ agentConfig: { model: "anthropic:claude-x" }, nodes: [llm("a", { model: "anthropic:claude-y" }), { id: "b", type: "noSuchType" }], edges: [{ from: "a", to: "b" }] })).toEqual([
      ["nodes[1].type", "unknown_node_type"],
      ["agentConfig.model", "model_not_configured"],
      ["nodes[0].config.model", "model_not_configured"],
    ]);
  });

  it("checks no ref without a lookup", () => {
    expect(problems({ agentConfig: { model: "anthropic:claude-x", levels: { smart: "nobody:x" } }, nodes: [llm("a", { model: "anthropic:claude-y" })] }, {})).toEqual([]);
  });
});

describe("SynthDev agents' models", () => {
  const workflow = {
    workflow_name: "pair",
    contexts: [{ name: "c" }],
    agents: [{ agent_role: "idle", context: "c" }, { agent_role: "coder", context: "c" }, { agent_role: "reviewer", context: "c" }],
    states: [{ name: "start", agent: "coder", next_state: "review" }, { name: "review", agent: "reviewer", next_state: "again" }, { name: "again", agent: "coder", next_state: "stop" }, { name: "stop" }],
  };
  const roles = { idle: { level: "smart" }, coder: { level: "smart" }, reviewer: {} };
  const definition = (agentConfig?: JsonObject): JsonObject => {
    const r = importSynthDev({ workflow, roles, ...(agentConfig ? { agentConfig } : {}) });
    if (!r.ok) throw new Error(JSON.stringify(r.errors));
    return r.definition;
  };
  const missing = (d: JsonObject, own?: JsonObject) => agentsWithoutModel(d, own, false).map((i) => `${i.code}@${i.path}`);

  it("names each agent of a state that no agentConfig gives a model, once, at the agent", () => {
    expect(agentsWithoutModel(definition(), undefined, false)).toEqual([
      { path: "synthdev.workflow.agents[1]", code: "missing_model", message: 'agent "coder" has no model and the installation no default one (BATON_LLM_DEFAULT_MODEL): agentConfig has neither levels.smart (its role\'s level) nor model; set one of them' },
      { path: "synthdev.workflow.agents[2]", code: "missing_model", message: 'agent "reviewer" has no model and the installation no default one (BATON_LLM_DEFAULT_MODEL): its role has no level and agentConfig has no model; set agentConfig.model (or give the role a level that agentConfig.levels maps)' },
    ]);
    // A level the agentConfig does not map falls back to its model; the reviewer (no level) has that model too.
    expect(missing(definition({ levels: { base: "openai:gpt-4o-mini" } }))).toEqual(["missing_model@synthdev.workflow.agents[1]", "missing_model@synthdev.workflow.agents[2]"]);
    expect(missing(definition({ levels: { smart: "openai:gpt-4o" } }))).toEqual(["missing_model@synthdev.workflow.agents[2]"]);
    expect(missing(definition({ model: "openai:gpt-4o-mini" }))).toEqual([]);
  });

  it("takes the workflow's own agentConfig under the definition's, field by field, as a run does", () => {
    expect(missing(definition(), { model: "openai:gpt-4o-mini" })).toEqual([]);
    // The definition's levels replace the workflow's whole: the coder's level is no longer mapped, and nothing gives a model.
    expect(missing(definition({ levels: { base: "openai:gpt-4o-mini" } }), { levels: { smart: "openai:gpt-4o" } })).toEqual([
      "missing_model@synthdev.workflow.agents[1]", "missing_model@synthdev.workflow.agents[2]",
    ]);
    expect(missing(definition({ levels: { smart: "openai:gpt-4o" } }), { model: "openai:gpt-4o-mini" })).toEqual([]);
  });

  it("finds exactly the agents whose calls name no model, and none where the installation has a default one", async () => {
    const identity = { executionId: 1, tenantId: "t_1", workflowId: 1, workflowVersion: 1 };
    expect(missing(definition({ levels: { base: "openai:x" } }))).toContain("missing_model@synthdev.workflow.agents[1]");
    expect(await firstModel(definition({ levels: { base: "openai:x" } }), identity)).toBe("(none)");
    expect(missing(definition({ levels: { smart: "openai:x" } }))).not.toContain("missing_model@synthdev.workflow.agents[1]");
    expect(await firstModel(definition({ levels: { smart: "openai:x" } }), identity)).toBe("openai:x");
    // llm.chat fills in BATON_LLM_DEFAULT_MODEL for a call that names none.
    expect(agentsWithoutModel(definition(), undefined, true)).toEqual([]);
  });
});

/** The model the first llm.chat call of a run of `d` names ("(none)" when it names none), or the run's error code. */
async function firstModel(d: JsonObject, identity: { executionId: number; tenantId: string; workflowId: number; workflowVersion: number }): Promise<string> {
  const v = validateWorkflow(d);
  if (!v.ok) throw new Error(JSON.stringify(v.errors));
  const r = await step({ definition: v.workflow, state: null, command: { kind: "start", input: {} }, now: new Date(0).toISOString(), identity });
  const call = r.effects.find((e) => e.kind === "callTool" && e.tool === "llm.chat");
  if (!call || call.kind !== "callTool") return r.state.error?.code ?? "no call";
  const model = (call.args as { model?: unknown }).model;
  return typeof model === "string" ? model : "(none)";
}

describe("LLM nodes' models", () => {
  const identity = { executionId: 1, tenantId: "t_1", workflowId: 1, workflowVersion: 1 };
  const graph = (agentConfig?: JsonObject): JsonObject => ({
    ...(agentConfig ? { agentConfig } : {}),
    nodes: [
      { id: "ask", type: "agent.llm", config: { prompt: "hi" } },
      { id: "pinned", type: "agent.llm", config: { model: "openai:gpt-4o", prompt: "hi" } },
      { id: "each", type: "forEach", config: { items: "$.input.xs", body: { nodes: [{ id: "loop", type: "agent.toolLoop", config: { prompt: "{{$.item}}", tools: ["echo"] } }] } } },
    ],
    edges: [{ from: "ask", to: "pinned" }, { from: "pinned", to: "each" }],
  });
  const missing = (d: JsonObject, own?: JsonObject) => agentsWithoutModel(d, own, false).map((i) => `${i.code}@${i.path}`);

  it("names each agent.llm and agent.toolLoop node, forEach bodies included, that neither its config nor agentConfig gives a model", () => {
    expect(agentsWithoutModel(graph(), undefined, false)).toEqual([
      { path: "nodes[0].config.model", code: "missing_model", message: 'node "ask" has no model and the installation no default one (BATON_LLM_DEFAULT_MODEL): set config.model, or agentConfig.model (the definition\'s or the workflow\'s) for all its LLM nodes' },
      { path: "nodes[2].config.body.nodes[0].config.model", code: "missing_model", message: expect.stringContaining('node "loop" has no model') as unknown },
    ]);
    expect(missing(graph({ model: "openai:gpt-4o-mini" }))).toEqual([]);
    // The workflow's own agentConfig gives it too; levels are a SynthDev agent's, not a node's.
    expect(missing(graph(), { model: "openai:gpt-4o-mini" })).toEqual([]);
    expect(missing(graph({ levels: { smart: "openai:gpt-4o" } }))).toEqual(["missing_model@nodes[0].config.model", "missing_model@nodes[2].config.body.nodes[0].config.model"]);
  });

  it("finds exactly the nodes whose calls name no model, and none where the installation has a default one", async () => {
    const one = (config: JsonObject, agentConfig?: JsonObject): JsonObject => ({ ...(agentConfig ? { agentConfig } : {}), nodes: [{ id: "ask", type: "agent.llm", config }] });
    expect(missing(one({ prompt: "hi" }))).toEqual(["missing_model@nodes[0].config.model"]);
    // A node without config has the default, {}: no model either.
    expect(missing({ nodes: [{ id: "ask", type: "agent.llm" }] })).toEqual(["missing_model@nodes[0].config.model"]);
    expect(await firstModel(one({ prompt: "hi" }), identity)).toBe("(none)");
    expect(missing(one({ prompt: "hi" }, { model: "openai:x" }))).toEqual([]);
    expect(await firstModel(one({ prompt: "hi" }, { model: "openai:x" }), identity)).toBe("openai:x");
    expect(missing(one({ prompt: "hi", model: "openai:y" }, { model: "openai:x" }))).toEqual([]);
    expect(await firstModel(one({ prompt: "hi", model: "openai:y" }, { model: "openai:x" }), identity)).toBe("openai:y");
    expect(agentsWithoutModel(graph(), undefined, true)).toEqual([]);
  });
});
