/**
 * Rules checked: model refs are checked where a definition names them, with the lookup the
 * caller gives (`checkModel`, the gateway's: the configured LLM providers):
 * - a ref with no configured provider is `model_not_configured`, with the lookup's message, at
 *   its path: an agent node's `nodes[i].config.model`, the definition's `agentConfig.model`
 *   and each `agentConfig.levels.<level>`;
 * - the definition's agentConfig refs are checked always, as the node's own: with no LLM node
 *   at all, and when every LLM node names its own model (chat nodes have no other default:
 *   without config.model or agentConfig.model a run fails BATON_AGENT_NO_MODEL);
 * - configured refs pass; every problem comes in one answer with the definition's others;
 * - without a lookup (the executor's re-validation) no ref is checked.
 */
import { describe, expect, it } from "@jest/globals";
import { validateWorkflow } from "./index.ts";
import type { ValidateOptions } from "./index.ts";

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
