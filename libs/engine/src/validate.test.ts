/**
 * Rules checked: the quickstart example is valid; unknown and unsupported node
 * types, edges to missing nodes, a missing start, duplicate ids, bad `$.path`s,
 * bad branch labels, unreachable nodes and unbounded cycles are each reported,
 * all at once, with a path into the definition.
 */
import { describe, expect, it } from "@jest/globals";
import { readFileSync } from "node:fs";
import { parsePath, readPath, validateInput, validateWorkflow, writePath } from "./index.ts";

const quickstart = JSON.parse(readFileSync(new URL("../../../examples/quickstart/workflow.json", import.meta.url), "utf8")) as { definition: unknown };

describe("validateWorkflow", () => {
  it("accepts the quickstart workflow and canonicalises aliases", () => {
    const r = validateWorkflow(quickstart.definition);
    expect(r.ok).toBe(true);
    const alias = validateWorkflow({ nodes: [{ id: "r", type: "humanReview" }] });
    expect(alias.ok && alias.workflow.nodes[0]!.type).toBe("agent.humanReview");
    expect(alias.ok && alias.workflow.start).toBe("r");
  });

  it("lists every error at once", () => {
    const r = validateWorkflow({
      start: "a",
      nodes: [
        { id: "a", type: "tool", config: { tool: "x" }, input: { v: "$.input..bad" } },
        { id: "a", type: "teleport" },
        { id: "c", type: "condition", config: { left: "$.a", op: "gt", right: 1 } },
        { id: "d", type: "agent.llm" },
      ],
      edges: [{ from: "a", to: "ghost" }, { from: "c", to: "a", when: "maybe" }],
    });
    expect(r.ok).toBe(false);
    const codes = !r.ok ? r.errors.map((e) => `${e.code}@${e.path}`) : [];
    expect(codes).toEqual(expect.arrayContaining([
      "invalid_path@nodes[0].input.v", "duplicate_node_id@nodes[1].id", "unknown_node_type@nodes[1].type",
      "dangling_edge@edges[0].to", "invalid_branch@edges[1].when",
    ]));
  });

  it("reports a missing start node and an empty graph", () => {
    const r = validateWorkflow({ start: "nope", nodes: [{ id: "a", type: "setVariable", config: { values: {} } }] });
    expect(!r.ok && r.errors.map((e) => e.code)).toEqual(["missing_start"]);
    const empty = validateWorkflow({ nodes: [] });
    expect(!empty.ok && empty.errors.map((e) => e.code)).toEqual(["no_nodes"]);
    const shape = validateWorkflow({ nodes: "x" });
    expect(!shape.ok && shape.errors[0]!.path).toBe("nodes");
  });

  it("reports unreachable nodes and cycles without a loop bound", () => {
    const sv = { type: "setVariable", config: { values: {} } };
    const unreachable = validateWorkflow({ start: "a", nodes: [{ id: "a", ...sv }, { id: "b", ...sv }] });
    expect(!unreachable.ok && unreachable.errors).toEqual([expect.objectContaining({ code: "unreachable_node", path: "nodes[1]" })]);
    const cyc = validateWorkflow({ start: "a", nodes: [{ id: "a", ...sv }, { id: "b", ...sv }, { id: "c", ...sv }], edges: [{ from: "a", to: "b" }, { from: "b", to: "c" }, { from: "c", to: "b" }] });
    expect(!cyc.ok && cyc.errors[0]!.code).toBe("unbounded_cycle");
  });
});

describe("$.path", () => {
  it("parses, reads and writes", () => {
    expect(parsePath('$.a[0]["b c"].d')).toEqual({ source: '$.a[0]["b c"].d', segments: ["a", 0, "b c", "d"] });
    expect("error" in parsePath("a.b")).toBe(true);
    expect(readPath({ a: [{ "b c": { d: 5 } }] }, '$.a[0]["b c"].d')).toBe(5);
    expect(readPath({ a: 1 }, "$.a.b.c")).toBeUndefined();
    const base = { x: { y: 1 } };
    const w = writePath(base, "$.x.z[1]", 2);
    expect(w).toEqual({ x: { y: 1, z: [null, 2] } });
    expect(base).toEqual({ x: { y: 1 } });
  });
});

describe("validateWorkflow: the complete model", () => {
  const sv = { type: "setVariable", config: { values: {} } };
  const codes = (r: ReturnType<typeof validateWorkflow>) => (r.ok ? [] : r.errors.map((e) => `${e.code}@${e.path}`));

  it("accepts bounded cycles (whileLoop or maxVisits) and refuses unbounded ones", () => {
    const loop = validateWorkflow({
      nodes: [{ id: "l", type: "whileLoop", config: { condition: "true", maxIterations: 3 } }, { id: "b", ...sv }, { id: "x", ...sv }],
      edges: [{ from: "l", to: "b", when: "body" }, { from: "b", to: "l" }, { from: "l", to: "x", when: "exit" }],
    });
    expect(codes(loop)).toEqual([]);
    const visits = validateWorkflow({ nodes: [{ id: "a", ...sv, maxVisits: 3 }, { id: "b", ...sv }], edges: [{ from: "a", to: "b" }, { from: "b", to: "a" }] });
    expect(codes(visits)).toEqual([]);
    const unbounded = validateWorkflow({ nodes: [{ id: "a", ...sv }, { id: "b", ...sv }], edges: [{ from: "a", to: "b" }, { from: "b", to: "a" }] });
    expect(codes(unbounded)).toEqual(["unbounded_cycle@edges"]);
    const bodyless = validateWorkflow({ nodes: [{ id: "l", type: "whileLoop", config: { condition: "true", maxIterations: 3 } }, { id: "x", ...sv }], edges: [{ from: "l", to: "x", when: "exit" }] });
    expect(codes(bodyless)).toEqual(["loop_without_body@nodes[0]"]);
  });

  it("finds joins that can never fire, bad expressions, unknown tools and bad forEach bodies, all at once", () => {
    const r = validateWorkflow({
      nodes: [
        { id: "c", type: "condition", config: { expression: "input.x >" } },
        { id: "a", ...sv }, { id: "b", ...sv },
        { id: "j", ...sv, join: { n: 2 } },
        { id: "t", type: "tool", config: { tool: "nope.tool" } },
        { id: "e", type: "forEach", config: { items: "$.input.xs", body: { nodes: [{ id: "z", type: "teleport" }] } } },
        { id: "m", type: "transform", config: { expression: "$sum(" } },
      ],
      edges: [
        { from: "c", to: "j", when: "true" }, { from: "c", to: "j", when: "false" }, { from: "c", to: "t", when: "true" },
        { from: "t", to: "e", condition: "((" }, { from: "e", to: "m" }, { from: "m", to: "a" }, { from: "a", to: "b" },
      ],
    }, { hasTool: (n) => n !== "nope.tool" });
    expect(codes(r)).toEqual(expect.arrayContaining([
      "invalid_expression@nodes[0].config.expression", "unknown_tool@nodes[4].config.tool", "unknown_node_type@nodes[5].config.body.nodes[0].type",
      "invalid_expression@nodes[6].config.expression", "invalid_expression@edges[3].condition",
    ]));
    const join = validateWorkflow({
      nodes: [{ id: "c", type: "condition", config: { left: 1, op: "eq", right: 1 } }, { id: "j", ...sv, join: { n: 2 } }],
      edges: [{ from: "c", to: "j", when: "true" }, { from: "c", to: "j", when: "false" }],
    });
    expect(codes(join)).toEqual(["join_never_fires@nodes[1].join"]);
  });

  it("checks the input schema itself, and inputs against it", () => {
    const bad = validateWorkflow({ inputSchema: { type: "nonsense" }, nodes: [{ id: "a", ...sv }] });
    expect(codes(bad)).toEqual(["invalid_input_schema@inputSchema"]);
    const ok = validateWorkflow({ inputSchema: { type: "object", required: ["q"], properties: { q: { type: "string" }, n: { type: "integer" } } }, nodes: [{ id: "a", ...sv }] });
    expect(ok.ok).toBe(true);
    if (!ok.ok) return;
    expect(validateInput(ok.workflow, { q: "x", n: 1 })).toEqual([]);
    expect(validateInput(ok.workflow, { n: "two" })).toEqual([
      { path: "input", code: "invalid_input", message: 'missing required property "q"' },
      { path: "input.n", code: "invalid_input", message: "must be integer" },
    ]);
  });

  it("takes input schemas of drafts 2019-09 and 2020-12 when $schema names them", () => {
    for (const dialect of ["https://json-schema.org/draft/2020-12/schema", "https://json-schema.org/draft/2019-09/schema"]) {
      const v = validateWorkflow({ inputSchema: { $schema: dialect, type: "object", required: ["q"], properties: { q: { type: "string" } } }, nodes: [{ id: "a", ...sv }] });
      expect(v.ok).toBe(true);
      if (!v.ok) return;
      expect(validateInput(v.workflow, { q: "x" })).toEqual([]);
      expect(validateInput(v.workflow, { q: 1 })).toEqual([{ path: "input.q", code: "invalid_input", message: "must be string" }]);
    }
  });
});
