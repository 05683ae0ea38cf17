/**
 * Rules checked for importWorkflowPlan (seed 001 `WorkflowPlan`):
 * - each step becomes a `tool` node (step name → id, tool_name → config.tool, params → input,
 *   reason → description), each dependency an edge;
 * - references to the input/context and to earlier results become `$.paths`, whatever syntax
 *   (`{{step.result}}`, `$step.path`, `workflow://step/<id>`, `${...}`); references inside text
 *   are computed by a `transform` node whose JSONata really produces the string;
 * - several roots hang off a `_start` node; a single root is the start; the output maps sinks;
 * - a bad plan lists every problem (missing tool, unknown dependency, cycle, duplicate, bad
 *   reference) with a path into the plan, and carries as a partial definition the nodes (tool
 *   node, params transform) of the steps whose tool and params convert, with their origins,
 *   however wrong their dependencies (edges, as a cycle is, also one made in params);
 * - the source map names, for every node and edge, the step (or its field) it came from: a
 *   step's node its `steps[i]` with tool/params/reason fields, a `*_params` transform and an
 *   implied dependency the step's params, a declared dependency its `dependencies[j]`, the
 *   `_start` node the steps list and each of its edges the root step it leads to.
 * The seed's examples are pseudo-code (`rank_images(quality_scores)`); the fixtures (fixtures/seeds.ts) are
 * those examples written as the seed's own `WorkflowPlan` / `WorkflowStepPlan` JSON.
 */
import { describe, expect, it } from "@jest/globals";
import jsonata from "jsonata";
import { importWorkflowPlan, partialImportIssues } from "./index.ts";
import { validateWorkflow } from "../validate.ts";
import { example1, example2, mockPlan } from "./fixtures/seeds.ts";

describe("importWorkflowPlan", () => {
  it("imports a linear plan (example 1) as a chain with the sink as output", () => {
    const r = importWorkflowPlan(example1);
    expect(r).toEqual({
      ok: true,
      warnings: [],
      definition: {
        schemaVersion: 1,
        start: "assess_quality_batch",
        inputSchema: { type: "object", properties: { image_paths: {} }, required: ["image_paths"] },
        nodes: [
          { id: "assess_quality_batch", type: "tool", description: "Assessed quality of 500 photos", config: { tool: "assess_quality_batch" }, input: { image_paths: "$.input.image_paths", method: "clip_learned" } },
          { id: "rank_images", type: "tool", description: "Ranked photos by quality", config: { tool: "rank_images" }, input: { quality_scores: "$.assess_quality_batch" } },
          { id: "select_top_images", type: "tool", description: "Selected top 10 photos", config: { tool: "select_top_images" }, input: { ranked_images: "$.rank_images", top_n: 10 } },
        ],
        edges: [
          { from: "assess_quality_batch", to: "rank_images" },
          { from: "rank_images", to: "select_top_images" },
        ],
        output: { select_top_images: "$.select_top_images" },
      },
      sourceMap: {
        fields: {},
        nodes: {
          assess_quality_batch: { path: "steps[0]", fields: { "config.tool": "steps[0].tool_name", input: "steps[0].params", description: "steps[0].reason" } },
          rank_images: { path: "steps[1]", fields: { "config.tool": "steps[1].tool_name", input: "steps[1].params", description: "steps[1].reason" } },
          select_top_images: { path: "steps[2]", fields: { "config.tool": "steps[2].tool_name", input: "steps[2].params", description: "steps[2].reason" } },
        },
        edges: [{ path: "steps[1].dependencies[0]" }, { path: "steps[2].dependencies[0]" }],
      },
    });
  });

  it("fans independent steps (example 2) out of a _start node and maps every sink", () => {
    const r = importWorkflowPlan(example2);
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.warnings).toEqual([]);
    expect(r.definition).toEqual({
      schemaVersion: 1,
      start: "_start",
      inputSchema: { type: "object", properties: { image_paths: {} }, required: ["image_paths"] },
      nodes: [
        { id: "_start", type: "setVariable", config: { values: {} } },
        { id: "clip_tag_images", type: "tool", description: "Tag all photos", config: { tool: "clip_tag_images" }, input: { image_paths: "$.input.image_paths" } },
        { id: "detect_landmarks", type: "tool", description: "Detect landmarks", config: { tool: "detect_landmarks" }, input: { image_paths: "$.input.image_paths" } },
        { id: "group_by_location", type: "tool", description: "Group by location", config: { tool: "group_by_location" }, input: { landmarks: "$.detect_landmarks.landmarks" } },
        { id: "assess_quality_batch", type: "tool", description: "Assess quality (parallel)", config: { tool: "assess_quality_batch" }, input: { image_paths: "$.input.image_paths" } },
        {
          id: "select_best_from_group", type: "tool", description: "Select best", config: { tool: "select_best_from_group" },
          input: { groups: "$.group_by_location", quality_scores: "$.assess_quality_batch.scores", top_n: 3 },
        },
      ],
      edges: [
        { from: "_start", to: "clip_tag_images" },
        { from: "_start", to: "detect_landmarks" },
        { from: "_start", to: "assess_quality_batch" },
        { from: "detect_landmarks", to: "group_by_location" },
        { from: "group_by_location", to: "select_best_from_group" },
        { from: "assess_quality_batch", to: "select_best_from_group" },
      ],
      output: { clip_tag_images: "$.clip_tag_images", select_best_from_group: "$.select_best_from_group" },
    });
    expect(r.sourceMap.nodes._start).toEqual({ path: "steps" });
    expect(r.sourceMap.edges.map((e) => e.path)).toEqual([
      "steps[0]", "steps[1]", "steps[3]", "steps[2].dependencies[0]", "steps[4].dependencies[0]", "steps[4].dependencies[1]",
    ]);
  });

  it("starts a one-step plan (the mock LLM's plan) at that step, literals kept", () => {
    expect(importWorkflowPlan(mockPlan)).toEqual({
      ok: true,
      warnings: [],
      definition: {
        schemaVersion: 1,
        start: "assess_quality_batch",
        nodes: [{ id: "assess_quality_batch", type: "tool", config: { tool: "assess_quality_batch" }, input: { image_paths: ["photo1.jpg"] } }],
        edges: [],
        output: { assess_quality_batch: "$.assess_quality_batch" },
      },
      sourceMap: { fields: {}, nodes: { assess_quality_batch: { path: "steps[0]", fields: { "config.tool": "steps[0].tool_name", input: "steps[0].params" } } }, edges: [] },
    });
  });

  it("accepts the id/tool/parameters/depends_on aliases and adds dependencies implied by references", () => {
    const r = importWorkflowPlan({
      steps: [
        { id: "fetch", tool: "http.get", parameters: { url: "{{input.url}}" } },
        { id: "summarize", tool: "llm.summarize", parameters: { text: "$fetch.body" } },
      ],
    });
    expect(r.ok && r.definition.edges).toEqual([{ from: "fetch", to: "summarize" }]);
    expect(r.ok && r.warnings).toEqual(['step "summarize" uses the result of "fetch" without listing it in dependencies; it was added']);
    expect(r.ok && r.sourceMap).toEqual({
      fields: {},
      nodes: {
        fetch: { path: "steps[0]", fields: { "config.tool": "steps[0].tool", input: "steps[0].parameters" } },
        summarize: { path: "steps[1]", fields: { "config.tool": "steps[1].tool", input: "steps[1].parameters" } },
      },
      edges: [{ path: "steps[1].parameters" }],
    });
  });

  it("computes references inside text with a transform node whose JSONata yields the string", async () => {
    const r = importWorkflowPlan({
      steps: [
        { name: "count", tool_name: "count_photos", params: {} },
        { name: "report", tool_name: "notify", params: { text: "Found {{count.result.total}} photos for {{input.user}}", raw: "$.not-a-path" }, dependencies: ["count"] },
      ],
    });
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    const nodes = r.definition.nodes as Array<{ id: string; config: { expression?: string }; input?: unknown }>;
    expect(nodes.map((n) => n.id)).toEqual(["count", "report_params", "report"]);
    expect(nodes[2]!.input).toEqual({ text: "$.report_params.p0", raw: "$.report_params.p1" });
    expect(r.definition.edges).toEqual([{ from: "count", to: "report_params" }, { from: "report_params", to: "report" }]);
    expect(r.sourceMap.nodes.report_params).toEqual({ path: "steps[1].params" });
    expect(r.sourceMap.edges).toEqual([{ path: "steps[1].dependencies[0]" }, { path: "steps[1].params" }]);
    const value: unknown = await jsonata(nodes[1]!.config.expression!).evaluate({ input: { user: "ana" }, count: { total: 42 } });
    expect(value).toEqual({ p0: "Found 42 photos for ana", p1: "$.not-a-path" });
  });

  it("starts a plan whose only root has text templates at that root's parameters, and the result validates", () => {
    const r = importWorkflowPlan({
      steps: [
        { name: "greet", tool_name: "echo", params: { msg: "hello {{input.who}}" }, dependencies: [] },
        { name: "after", tool_name: "echo", params: { got: "{{greet.msg}}" }, dependencies: ["greet"] },
      ],
    });
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.definition.start).toBe("greet_params");
    const v = validateWorkflow(r.definition);
    expect(v.ok ? [] : v.errors).toEqual([]);
  });

  it("renames steps whose names are not node ids, and keeps references pointing at them", () => {
    const r = importWorkflowPlan({
      steps: [
        { name: "find photos", tool_name: "search", params: {} },
        { name: "input", tool_name: "rank", params: { items: "$find photos" }, dependencies: ["find photos"] },
        { name: "top", tool_name: "top_n", params: { items: "{{input.result}}" }, dependencies: ["input"] },
      ],
    });
    expect(r.ok && r.definition.nodes).toEqual([
      { id: "find_photos", type: "tool", config: { tool: "search" }, input: {} },
      // "$find photos" is no reference (a name has no space), so it stays text.
      { id: "input_2", type: "tool", config: { tool: "rank" }, input: { items: "$find photos" } },
      // "input" always names the execution input, even when a step has that name.
      { id: "top", type: "tool", config: { tool: "top_n" }, input: { items: "$.input.result" } },
    ]);
    expect(r.ok && r.definition.edges).toEqual([{ from: "find_photos", to: "input_2" }, { from: "input_2", to: "top" }]);
    expect(r.ok && r.warnings).toEqual([
      'step "find photos" became node "find_photos" (node ids are letters, digits, _ or -, and "input" and "synthdev" are reserved)',
      'step "input" became node "input_2" (node ids are letters, digits, _ or -, and "input" and "synthdev" are reserved)',
    ]);
  });

  it("lists every problem of a bad plan with a path", () => {
    const r = importWorkflowPlan({
      name: "broken",
      steps: [
        { name: "a", tool_name: "tool.a", params: {}, dependencies: ["c"] },
        { name: "b", params: {}, dependencies: ["a", "ghost"] },
        { name: "c", tool_name: "tool.c", params: { x: "{{nowhere.result}}" }, dependencies: ["a"] },
        { name: "a", tool_name: "tool.a2", params: {}, dependencies: [] },
        { name: "d", tool_name: "bad tool!", params: "nope", dependencies: ["d"] },
        { tool_name: "tool.e" },
      ],
    });
    expect(r).toMatchObject({
      ok: false,
      errors: [
        { path: "steps[1].tool_name", code: "missing_tool", message: 'step "b" names no tool' },
        { path: "steps[3].name", code: "duplicate_step", message: 'duplicate step name "a" (first at steps[0])' },
        { path: "steps[4].tool_name", code: "invalid_tool_name", message: 'tool name "bad tool!" is not dot-separated words of letters, digits, _ or -' },
        { path: "steps[4].params", code: "invalid_params", message: "params must be an object of parameter names to values" },
        { path: "steps[5].name", code: "missing_step_name", message: "the step has no name" },
        { path: "steps[1].dependencies[1]", code: "unknown_dependency", message: 'step "b" depends on unknown step "ghost"' },
        { path: "steps[2].params.x", code: "unknown_reference", message: '"nowhere" is neither a step of this plan nor input/context' },
        { path: "steps[0].dependencies[0]", code: "dependency_cycle", message: 'steps "a", "c" depend on each other in a cycle' },
        { path: "steps[4].dependencies[0]", code: "dependency_cycle", message: 'step "d" depends on itself' },
      ],
    });
    expect(!r.ok && r.errors).toHaveLength(9);
    // Of the steps with a node of their own, only "a" has a tool and params that convert (its problem is a dependency).
    expect(!r.ok && r.partial?.definition.nodes).toEqual([{ id: "a", type: "tool", config: { tool: "tool.a" }, input: {} }]);
  });

  it("carries the nodes of the steps whose tool and params convert, for the caller to check in the same answer", () => {
    const r = importWorkflowPlan({
      steps: [
        { name: "fetch", tool_name: "web.fetch", params: { url: "{{input.url}}" }, reason: "get the page" },
        { name: "broken", params: {}, dependencies: ["fetch"] },
        // A wrong dependency is an edge: the step's nodes are carried all the same.
        { name: "notify", tool: "chat.post", params: { text: "got {{fetch.body}}" }, dependencies: ["broken", "ghost"] },
        { name: "lost", tool: "echo", params: { x: "{{nowhere.y}}" } },
      ],
    });
    expect(r).toEqual({
      ok: false,
      errors: [
        { path: "steps[1].tool_name", code: "missing_tool", message: 'step "broken" names no tool' },
        { path: "steps[2].dependencies[1]", code: "unknown_dependency", message: 'step "notify" depends on unknown step "ghost"' },
        { path: "steps[3].params.x", code: "unknown_reference", message: '"nowhere" is neither a step of this plan nor input/context' },
      ],
      partial: {
        definition: {
          schemaVersion: 1, start: "fetch", edges: [],
          nodes: [
            { id: "fetch", type: "tool", description: "get the page", config: { tool: "web.fetch" }, input: { url: "$.input.url" } },
            { id: "notify_params", type: "transform", description: 'computes the templated parameters of "notify"', config: { expression: '{ "p0": "got " & $.fetch.body }' } },
            { id: "notify", type: "tool", config: { tool: "chat.post" }, input: { text: "$.notify_params.p0" } },
          ],
        },
        sourceMap: {
          fields: {}, edges: [],
          nodes: {
            fetch: { path: "steps[0]", fields: { "config.tool": "steps[0].tool_name", input: "steps[0].params", description: "steps[0].reason" } },
            notify_params: { path: "steps[2].params" },
            notify: { path: "steps[2]", fields: { "config.tool": "steps[2].tool", input: "steps[2].params" } },
          },
        },
      },
    });
    // Validation finds the unregistered tool of the step with a wrong dependency. Its graph is not
    // the plan's (no edges: "notify_params" and "notify" are unreachable), which is why a caller
    // keeps only the problems in the nodes' own fields.
    const partial = r.ok ? undefined : r.partial;
    const v = partial && validateWorkflow(partial.definition, { hasTool: (n) => n === "web.fetch" });
    expect(v?.ok === false && v.errors.map((e) => [e.path, e.code])).toEqual([["nodes[2].config.tool", "unknown_tool"], ["nodes[1]", "unreachable_node"], ["nodes[2]", "unreachable_node"]]);
    expect(partial && v?.ok === false && partialImportIssues(partial, v.errors).map((e) => `${e.code}@${e.path}`)).toEqual(["unknown_tool@nodes[2].config.tool"]);
  });

  it("reports a cycle made by references in params at the parameter that makes it", () => {
    // No step has a dependencies field: the cycle is in the params alone.
    const inParams = importWorkflowPlan({
      steps: [
        { name: "a", tool: "echo", params: { x: "$b.v", y: "{{input.k}}" } },
        { name: "b", tool: "echo", params: { nested: { list: ["literal", "{{a.result.v}}"] } } },
      ],
    });
    expect(inParams).toMatchObject({ ok: false, errors: [{ path: "steps[0].params.x", code: "dependency_cycle", message: 'steps "a", "b" depend on each other in a cycle' }] });
    // A cycle is edges, also where a reference in params makes it: both steps' nodes are carried.
    expect(!inParams.ok && inParams.partial?.definition.nodes).toEqual([
      { id: "a", type: "tool", config: { tool: "echo" }, input: { x: "$.b.v", y: "$.input.k" } },
      { id: "b", type: "tool", config: { tool: "echo" }, input: { nested: { list: ["literal", "$.a.v"] } } },
    ]);
    // A listed dependency in the cycle is where it is written, even when params also refer to it.
    const listed = importWorkflowPlan({
      steps: [{ name: "a", tool: "echo", params: { x: "{{b.v}}" }, depends_on: ["input_step", "b"] }, { name: "b", tool: "echo", params: { y: "$a.v" } }, { name: "input_step", tool: "echo" }],
    });
    expect(listed).toMatchObject({ ok: false, errors: [{ path: "steps[0].depends_on[1]", code: "dependency_cycle", message: 'steps "a", "b" depend on each other in a cycle' }] });
    expect(!listed.ok && listed.errors).toHaveLength(1);
    // The cycle is no problem of any step's node: every step's is carried.
    expect(!listed.ok && listed.partial?.definition.nodes).toEqual([
      { id: "a", type: "tool", config: { tool: "echo" }, input: { x: "$.b.v" } },
      { id: "b", type: "tool", config: { tool: "echo" }, input: { y: "$.a.v" } },
      { id: "input_step", type: "tool", config: { tool: "echo" }, input: {} },
    ]);
  });

  it("rejects sources that are not plans", () => {
    expect(importWorkflowPlan("steps")).toEqual({ ok: false, errors: [{ path: "(source)", code: "invalid_source", message: "a workflow plan is a JSON object with a steps array" }] });
    expect(importWorkflowPlan({ name: "x" })).toEqual({ ok: false, errors: [{ path: "steps", code: "missing_steps", message: "the plan needs a steps array" }] });
    expect(importWorkflowPlan({ name: "x", steps: [] })).toEqual({ ok: false, errors: [{ path: "steps", code: "no_steps", message: "a workflow plan must have at least one step" }] });
  });
});
