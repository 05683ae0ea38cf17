/**
 * Rules checked for importToolSequence (seed 000 tool workflows):
 * - the seed's stored step array, its procedural-memory record (steps as a JSON string in
 *   `action`), a `ToolWorkflow` / `UserWorkflow` with `steps` and `ToolExecutionData.toolSequence`
 *   all become the same chain of `tool` nodes step1 → step2 → ...;
 * - steps run in `order` when given; templates `{{input.x}}` / `{{x}}` read `$.input.x` (and
 *   make `x` a required input), `{{stepN.path}}` reads an earlier result; templates inside text
 *   are computed by a `transform` node whose JSONata really yields the string;
 * - `required: false` is reported as a warning; bad sources list every problem with a path,
 *   and carry as a partial definition the nodes of the steps whose tool and parameters convert
 *   (a wrong order only places a step in the chain, so it keeps no node out);
 * - the source map names the step each node came from (where it is in the source, whatever the
 *   order it runs in), its toolName and parameters, and for each edge the step it leads to.
 */
import { describe, expect, it } from "@jest/globals";
import jsonata from "jsonata";
import { codeReviewRecord, codeReviewSteps } from "./fixtures/seeds.ts";
import { importToolSequence } from "./index.ts";

const codeReviewDefinition = {
  schemaVersion: 1,
  start: "step1",
  nodes: [
    { id: "step1", type: "tool", config: { tool: "Bash" }, input: { command: "git diff main" } },
    { id: "step2", type: "tool", config: { tool: "Grep" }, input: { pattern: "TODO|FIXME" } },
    { id: "step3", type: "tool", config: { tool: "Bash" }, input: { command: "npm test" } },
  ],
  edges: [
    { from: "step1", to: "step2" },
    { from: "step2", to: "step3" },
  ],
};

/** The source map of the code-review chain whose step1..step3 are at `paths` in the source. */
function chainMap(...paths: string[]) {
  return {
    fields: {},
    nodes: Object.fromEntries(paths.map((p, i) => [`step${i + 1}`, { path: p, fields: { "config.tool": `${p}.toolName`, input: `${p}.parameters` } }])),
    edges: paths.slice(1).map((p) => ({ path: p })),
  };
}

describe("importToolSequence", () => {
  it("imports the seed's stored steps as a chain", () => {
    expect(importToolSequence(codeReviewSteps)).toEqual({ ok: true, warnings: [], definition: codeReviewDefinition, sourceMap: chainMap("[0]", "[1]", "[2]") });
  });

  it("reads the same steps from the procedural-memory record, a UserWorkflow and ToolExecutionData", () => {
    expect(importToolSequence(codeReviewRecord)).toEqual({ ok: true, warnings: [], definition: codeReviewDefinition, sourceMap: chainMap("action[0]", "action[1]", "action[2]") });
    // Seed 000 `UserWorkflow` { name, description, steps, triggerKeywords }, steps listed out of order.
    const userWorkflow = { name: "code-review", description: "Code review workflow", steps: [codeReviewSteps[2], codeReviewSteps[0], codeReviewSteps[1]], triggerKeywords: ["review"] };
    expect(importToolSequence(userWorkflow)).toEqual({ ok: true, warnings: [], definition: codeReviewDefinition, sourceMap: chainMap("steps[1]", "steps[2]", "steps[0]") });
    // Seed 000 `ToolExecutionData.toolSequence` entries: { toolName, parameters, duration, success }.
    const learned = { userId: "u1", agentId: "a1", success: true, context: "review", toolSequence: codeReviewSteps.map(({ toolName, parameters }) => ({ toolName, parameters, duration: 120, success: true })) };
    expect(importToolSequence(learned)).toEqual({ ok: true, warnings: [], definition: codeReviewDefinition, sourceMap: chainMap("toolSequence[0]", "toolSequence[1]", "toolSequence[2]") });
  });

  it("turns parameter templates into input paths and earlier results, and computes templates inside text", async () => {
    const r = importToolSequence({
      name: "review-branch",
      steps: [
        { order: 1, toolName: "Bash", parameters: { command: "git diff {{input.base}}...{{branch}}" }, required: true, description: "diff against base" },
        { order: 2, toolName: "Grep", parameters: { pattern: "{{pattern}}", files: "{{step1.files}}" }, required: false },
        { order: 3, toolName: "Bash", parameters: { command: "npm test", env: { CI: "${input.ci}" } } },
      ],
    });
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.definition).toEqual({
      schemaVersion: 1,
      start: "step1_params",
      inputSchema: { type: "object", properties: { base: {}, branch: {}, ci: {}, pattern: {} }, required: ["base", "branch", "ci", "pattern"] },
      nodes: [
        { id: "step1_params", type: "transform", description: 'computes the templated parameters of "step1"', config: { expression: '{ "p0": "git diff " & $.input.base & "..." & $.input.branch }' } },
        { id: "step1", type: "tool", description: "diff against base", config: { tool: "Bash" }, input: { command: "$.step1_params.p0" } },
        { id: "step2", type: "tool", config: { tool: "Grep" }, input: { pattern: "$.input.pattern", files: "$.step1.files" } },
        { id: "step3", type: "tool", config: { tool: "Bash" }, input: { command: "npm test", env: { CI: "$.input.ci" } } },
      ],
      edges: [
        { from: "step1_params", to: "step1" },
        { from: "step1", to: "step2" },
        { from: "step2", to: "step3" },
      ],
    });
    expect(r.warnings).toEqual(["steps[1] (Grep) is marked required: false; Baton runs every step as required, so its failure fails the workflow"]);
    const expr = (r.definition.nodes as Array<{ config: { expression: string } }>)[0]!.config.expression;
    expect(await jsonata(expr).evaluate({ input: { base: "main", branch: "feature/x" } })).toEqual({ p0: "git diff main...feature/x" });
  });

  it("keeps escaped \\{{ and \\${ as literal text for tools that take templates themselves", async () => {
    const r = importToolSequence([
      { toolName: "math.sum", parameters: { values: "{{amounts}}" } },
      { toolName: "text.template", parameters: { template: "\\{{n}} items, total \\{{s}} for {{who}}; cost \\${usd}", values: { n: "{{step1.count}}", s: "{{step1.sum}}" } } },
    ]);
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    const nodes = r.definition.nodes as Array<{ id: string; config: { expression?: string }; input?: unknown }>;
    expect(nodes.map((n) => n.id)).toEqual(["step1", "step2_params", "step2"]);
    expect(nodes[2]!.input).toEqual({ template: "$.step2_params.p0", values: { n: "$.step1.count", s: "$.step1.sum" } });
    expect(await jsonata(nodes[1]!.config.expression!).evaluate({ input: { who: "Ana" } })).toEqual({ p0: "{{n}} items, total {{s}} for Ana; cost ${usd}" });
    const plain = importToolSequence([{ toolName: "text.template", parameters: { template: "\\{{greeting}}, world" } }]);
    expect(plain.ok && plain.definition.nodes).toEqual([{ id: "step1", type: "tool", config: { tool: "text.template" }, input: { template: "{{greeting}}, world" } }]);
  });

  it("lists every problem of a bad sequence with a path", () => {
    expect(importToolSequence({
      steps: [
        { order: 1, toolName: "Bash", parameters: { command: "{{step2.stdout}}" } },
        { order: 1, parameters: [] },
        { toolName: "not a tool" },
        "Grep",
      ],
    })).toEqual({
      ok: false,
      errors: [
        { path: "steps[3]", code: "invalid_step", message: "each step is an object with toolName and parameters" },
        { path: "steps[2].order", code: "missing_order", message: "some steps have an order and this one has none" },
        { path: "steps[1].order", code: "duplicate_order", message: "order 1 is also used by steps[0]" },
        { path: "steps[0].parameters.command", code: "forward_reference", message: '"step2" runs after this step; a step can only read earlier steps\' results' },
        { path: "steps[1].toolName", code: "missing_tool", message: "the step names no tool" },
        { path: "steps[1].parameters", code: "invalid_params", message: "parameters must be an object of parameter names to values" },
        { path: "steps[2].toolName", code: "invalid_tool_name", message: 'tool name "not a tool" is not dot-separated words of letters, digits, _ or -' },
      ],
    });
  });

  it("carries the nodes of the steps whose tool and parameters convert in a failed import", () => {
    const r = importToolSequence([{ toolName: "echo" }, { parameters: {} }, { toolName: "no.such", parameters: { x: "{{step1.text}}" } }]);
    expect(r).toEqual({
      ok: false,
      errors: [{ path: "[1].toolName", code: "missing_tool", message: "the step names no tool" }],
      partial: {
        definition: {
          schemaVersion: 1, start: "step1", edges: [],
          nodes: [{ id: "step1", type: "tool", config: { tool: "echo" }, input: {} }, { id: "step3", type: "tool", config: { tool: "no.such" }, input: { x: "$.step1.text" } }],
        },
        sourceMap: {
          fields: {}, edges: [],
          nodes: {
            step1: { path: "[0]", fields: { "config.tool": "[0].toolName", input: "[0].parameters" } },
            step3: { path: "[2]", fields: { "config.tool": "[2].toolName", input: "[2].parameters" } },
          },
        },
      },
    });
    // A step's order only places it in the chain (edges): a step with a wrong order is carried, its parameters' transform too.
    const ordered = importToolSequence({
      steps: [
        { order: 1, toolName: "echo", parameters: { text: "{{input.q}}" } },
        { order: 1, toolName: "no.such", description: "made up", parameters: { x: "a {{step1.text}}" } },
        { order: 2, parameters: {} },
      ],
    });
    expect(!ordered.ok && ordered.errors.map((e) => `${e.code}@${e.path}`)).toEqual(["duplicate_order@steps[1].order", "missing_tool@steps[2].toolName"]);
    expect(!ordered.ok && ordered.partial?.definition.nodes).toEqual([
      { id: "step1", type: "tool", config: { tool: "echo" }, input: { text: "$.input.q" } },
      { id: "step2_params", type: "transform", description: 'computes the templated parameters of "step2"', config: { expression: '{ "p0": "a " & $.step1.text }' } },
      { id: "step2", type: "tool", description: "made up", config: { tool: "no.such" }, input: { x: "$.step2_params.p0" } },
    ]);
    expect(!ordered.ok && ordered.partial?.sourceMap.nodes).toEqual({
      step1: { path: "steps[0]", fields: { "config.tool": "steps[0].toolName", input: "steps[0].parameters" } },
      step2_params: { path: "steps[1].parameters" },
      step2: { path: "steps[1]", fields: { "config.tool": "steps[1].toolName", input: "steps[1].parameters", description: "steps[1].description" } },
    });
  });

  it("refuses a step reading its own result", () => {
    expect(importToolSequence([{ toolName: "echo", parameters: { again: "{{step1.text}}" } }])).toEqual({
      ok: false,
      errors: [{ path: "[0].parameters.again", code: "self_reference", message: '"step1" is this step; a step can only read earlier steps\' results' }],
    });
  });

  it("rejects sources without steps", () => {
    expect(importToolSequence({ trigger: "x", action: "[{" })).toMatchObject({ ok: false, errors: [{ path: "action", code: "invalid_json" }] });
    expect(importToolSequence({ name: "x" })).toEqual({ ok: false, errors: [{ path: "steps", code: "missing_steps", message: "no steps: expected steps, toolSequence or action" }] });
    expect(importToolSequence([])).toEqual({ ok: false, errors: [{ path: "(source)", code: "no_steps", message: "a tool sequence needs at least one step" }] });
    expect(importToolSequence(42)).toMatchObject({ ok: false, errors: [{ path: "(source)", code: "invalid_source" }] });
  });
});
