/**
 * Rules checked: the quickstart example is valid; unknown and unsupported node
 * types, edges to missing nodes, a missing start, duplicate ids, bad `$.path`s,
 * bad branch labels, unreachable nodes and unbounded cycles are each reported,
 * all at once, with a path into the definition:
 * - a malformed node, edge or field hides nothing else: shape, local, graph and
 *   input-schema problems come in one answer (forEach bodies too);
 * - every cycle needs a bound of its own (not just its strongly connected component);
 * - an n-join fed by branches that exclude each other (directly or through nodes only
 *   those branches reach) and an explicit all / n join on a loop head that needs its
 *   back edge never fire and are refused; joins that can fire are accepted;
 * - a join of a cycle that, for some outcome of the branches, guards and loops before it,
 *   waits for a node that can only run after it (in its first run or a later round of a loop)
 *   is refused, naming the outcome; one whose way in hangs on a node that decides again each
 *   time round a cycle of its own is accepted;
 * - a node whose output would land on a context key the engine writes is refused: `input`
 *   always, `messages`, `toolCalls`, `toolResults` and `synthdev` when a node of the same graph
 *   makes the engine write there; an output path of its own makes it fine;
 * - the tools a SynthDev state's agent may call (its role's `includedTools`) must be registered,
 *   like an agent node's `tools`; roles no state's agent has are not checked;
 * - paths are checked where the runtime reads them (whileLoop comparisons and edge guards
 *   written as comparisons, idempotency keys, setVariable keys, path-only fields,
 *   `{{$.path}}` placeholders), and text that merely starts with `$` stays text; a comparison
 *   that is no comparison is reported at its field (`edges[2].condition.op`).
 */
import { describe, expect, it } from "@jest/globals";
import { readFileSync } from "node:fs";
import { parsePath, readPath, referencedTools, validateInput, validateWorkflow, validateWorkflowWithTools, writePath } from "./index.ts";

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
    // __proto__ names no key: writing it would replace an object's prototype.
    for (const p of ["$.__proto__", "$.a.__proto__.b", '$["__proto__"]']) expect(parsePath(p)).toEqual({ error: expect.stringContaining('"__proto__" cannot be a name') });
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

  it("warns of fields that have no effect (typos), at the top, in nodes and in edges, and accepts the definition", () => {
    const r = validateWorkflow({
      nodes: [{ id: "a", ...sv, retries: 3 }, { id: "b", ...sv }],
      edges: [{ from: "a", to: "b", condtion: "true" }],
      outputs: {},
    });
    expect(r.ok).toBe(true);
    expect(r.ok && r.warnings?.map((w) => `${w.code}@${w.path}`)).toEqual(["unknown_field@outputs", "unknown_field@nodes[0].retries", "unknown_field@edges[0].condtion"]);
    expect(validateWorkflow({ nodes: [{ id: "a", ...sv }] })).not.toHaveProperty("warnings");
    // And inside a forEach body, with the path into it.
    const body = validateWorkflow({ nodes: [{ id: "each", type: "forEach", config: { items: "$.input.xs", body: { nodes: [{ id: "b", ...sv, timeout: 5 }] } } }] });
    expect(body.ok && body.warnings?.map((w) => `${w.code}@${w.path}`)).toEqual(["unknown_field@nodes[0].config.body.nodes[0].timeout"]);
    // A known field that does nothing on this node type.
    const sub = validateWorkflow({ nodes: [{ id: "s", type: "subworkflow", config: { workflow: { slug: "child" } }, timeoutMs: 300 }] });
    expect(sub.ok && sub.warnings?.map((w) => `${w.code}@${w.path}`)).toEqual(["no_effect@nodes[0].timeoutMs"]);
    // So on a forEach of child runs; on a forEach of tool calls it bounds each call.
    const children = validateWorkflow({ nodes: [{ id: "f", type: "forEach", timeoutMs: 300, config: { items: "$.input.xs", workflow: { slug: "child" } } }] });
    expect(children.ok && children.warnings?.map((w) => `${w.code}@${w.path}`)).toEqual(["no_effect@nodes[0].timeoutMs"]);
    expect(validateWorkflow({ nodes: [{ id: "f", type: "forEach", timeoutMs: 300, config: { items: "$.input.xs", tool: "echo" } }] })).not.toHaveProperty("warnings");
  });

  it("warns of a whileLoop whose passes may take more node starts than limits.maxSteps allows, and accepts it", () => {
    const loop = (maxIterations: number, limits?: object) => ({
      start: "l",
      ...(limits ? { limits } : {}),
      nodes: [{ id: "l", type: "whileLoop", config: { condition: "true", maxIterations } }, { id: "a", ...sv }, { id: "b", ...sv }, { id: "out", ...sv }],
      edges: [{ from: "l", to: "a", when: "body" }, { from: "a", to: "b" }, { from: "b", to: "l" }, { from: "l", to: "out", when: "exit" }],
    });
    // 3 nodes a pass (the loop, a, b): 33,333 passes fit in the default 100,000 starts, 33,334 do not.
    expect(validateWorkflow(loop(33_333))).not.toHaveProperty("warnings");
    const over = validateWorkflow(loop(33_334));
    expect(over.ok && over.warnings).toEqual([{
      path: "nodes[0].config.maxIterations",
      code: "step_limit",
      message: 'whileLoop "l" may go round 33334 times over 3 nodes (100002 node starts), more than the default limits.maxSteps (100000) allows: a run that goes round that often fails with BATON_STEP_LIMIT; raise limits.maxSteps',
    }]);
    expect(validateWorkflow(loop(33_334, { maxSteps: 200_000 }))).not.toHaveProperty("warnings");
    const own = validateWorkflow(loop(10, { maxSteps: 20 }));
    expect(own.ok && own.warnings?.map((w) => `${w.code}@${w.path}: ${w.message}`)).toEqual([
      'step_limit@nodes[0].config.maxIterations: whileLoop "l" may go round 10 times over 3 nodes (30 node starts), more than limits.maxSteps (20) allows: a run that goes round that often fails with BATON_STEP_LIMIT; raise limits.maxSteps',
    ]);
    // limits.maxSteps is checked as a limit.
    expect(codes(validateWorkflow(loop(3, { maxSteps: 0 })))).toEqual(["invalid_shape@limits.maxSteps"]);
  });

  it("warns of two whileLoops each in the other's body (their passes are hard to foresee), and accepts them; nested loops are fine", () => {
    // The shape of workflows.md's "Loops each in the other's body" (it used to go round for ever).
    const mutual = validateWorkflow({
      start: "s",
      nodes: [
        { id: "s", ...sv },
        { id: "a", type: "whileLoop", config: { condition: "true", maxIterations: 2, onLimit: "exit" } },
        { id: "b", type: "whileLoop", config: { condition: "$iteration < 2", maxIterations: 2 } },
      ],
      edges: [
        { from: "s", to: "a" }, { from: "s", to: "b" }, { from: "a", to: "a", when: "body" }, { from: "b", to: "b", when: "body" },
        { from: "a", to: "b", when: "body" }, { from: "b", to: "a", when: "body" },
      ],
    });
    expect(mutual.ok && mutual.warnings).toEqual([{
      path: "nodes[1]",
      code: "mutual_loops",
      message: 'whileLoops "a" and "b" are each in the other\'s body, so neither is inside the other: a pass of one starts a new run of the other only while that one did not make the first\'s run possible, so how often each goes round is hard to foresee; nest one loop inside the other instead',
    }]);
    // An inner loop whose exit goes back to the outer one is in the outer's body, not the other way round.
    const nested = validateWorkflow({
      start: "outer",
      nodes: [
        { id: "outer", type: "whileLoop", config: { condition: "$iteration < 3", maxIterations: 3 } },
        { id: "inner", type: "whileLoop", config: { condition: "$iteration < 2", maxIterations: 2 } },
        { id: "work", ...sv },
        { id: "done", ...sv },
      ],
      edges: [
        { from: "outer", to: "inner", when: "body" }, { from: "inner", to: "work", when: "body" }, { from: "work", to: "inner" },
        { from: "inner", to: "outer", when: "exit" }, { from: "outer", to: "done", when: "exit" },
      ],
    });
    expect(codes(nested)).toEqual([]);
    expect(nested).not.toHaveProperty("warnings");
  });

  it("refuses a cycle that goes back through a whileLoop by its exit edge: exiting counts no iteration", () => {
    const l = { id: "l", type: "whileLoop", config: { condition: "false", maxIterations: 3, onLimit: "exit" } };
    const throughExit = validateWorkflow({ start: "l", nodes: [l, { id: "a", ...sv }], edges: [{ from: "l", to: "a", when: "exit" }, { from: "a", to: "l" }] });
    expect(codes(throughExit)).toEqual(["unbounded_cycle@edges"]);
    // The same cycle is bounded when one of its nodes has maxVisits; a body cycle beside it stays bounded by the loop.
    const visited = validateWorkflow({
      start: "l",
      nodes: [l, { id: "a", ...sv, maxVisits: 2 }, { id: "b", ...sv }],
      edges: [{ from: "l", to: "a", when: "exit" }, { from: "a", to: "l" }, { from: "l", to: "b", when: "body" }, { from: "b", to: "l" }],
    });
    expect(codes(visited)).toEqual([]);
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

  it("a definition of thousands of branches and joins is checked whole: the one join that can never fire is found", () => {
    // 3,000 condition diamonds in a row, each closed by a join (12,001 nodes, about 1.3 MB):
    // the checks walked sets of every node's dominators and searched the whole graph from
    // every branch, which took minutes (and the heap, with more nodes).
    const nodes: unknown[] = [{ id: "s", ...sv }];
    const edges: unknown[] = [];
    let prev = "s";
    for (let i = 0; i < 3000; i++) {
      nodes.push({ id: `c${i}`, type: "condition", config: { left: 1, op: "eq", right: 1 } }, { id: `a${i}`, ...sv }, { id: `b${i}`, ...sv }, { id: `j${i}`, ...sv, join: { n: i === 2999 ? 2 : 1 } });
      edges.push({ from: prev, to: `c${i}` }, { from: `c${i}`, to: `a${i}`, when: "true" }, { from: `c${i}`, to: `b${i}`, when: "false" }, { from: `a${i}`, to: `j${i}` }, { from: `b${i}`, to: `j${i}` });
      prev = `j${i}`;
    }
    const r = validateWorkflow({ start: "s", nodes, edges });
    expect(codes(r)).toEqual(["join_never_fires@nodes[12000].join"]);
    expect(!r.ok && r.errors[0]!.message).toContain('branches of "c2999"');
  });

  it("joins that wait on each other in a cycle no node of which comes first never fire", () => {
    const mutual = (join: unknown) => validateWorkflow({
      start: "s",
      nodes: [{ id: "s", ...sv }, { id: "x", ...sv, join, maxVisits: 3 }, { id: "y", ...sv, join, maxVisits: 3 }],
      edges: [{ from: "s", to: "x" }, { from: "s", to: "y" }, { from: "x", to: "y" }, { from: "y", to: "x" }],
    });
    const all = mutual("all");
    expect(codes(all)).toEqual(["join_never_fires@nodes[1].join", "join_never_fires@nodes[2].join"]);
    expect(!all.ok && all.errors[0]!.message).toContain('its join waits for edges from "y"');
    expect(codes(mutual({ n: 2 }))).toEqual(["join_never_fires@nodes[1].join", "join_never_fires@nodes[2].join"]);
    // One side that runs on any edge breaks the wait.
    const oneAny = validateWorkflow({
      start: "s",
      nodes: [{ id: "s", ...sv }, { id: "x", ...sv, join: "all", maxVisits: 3 }, { id: "y", ...sv, join: "any", maxVisits: 3 }],
      edges: [{ from: "s", to: "x" }, { from: "s", to: "y" }, { from: "x", to: "y" }, { from: "y", to: "x" }],
    });
    expect(codes(oneAny)).toEqual([]);
  });

  it("an input schema's $id belongs to it alone: another schema can neither $ref it nor is refused for using it too", () => {
    const withId = (schema: object) => validateWorkflow({ inputSchema: schema, nodes: [{ id: "a", ...sv }] });
    const id = `urn:baton-test:${Date.now()}`;
    expect(codes(withId({ $id: id, type: "object", required: ["secretField"], properties: { secretField: { type: "string" } } }))).toEqual([]);
    // Another definition (another tenant's, say) cannot reach it through its $id …
    const refs = withId({ type: "object", properties: { x: { $ref: id } } });
    expect(codes(refs)).toEqual(["invalid_input_schema@inputSchema"]);
    expect(!refs.ok && refs.errors[0]!.message).toContain("resolve reference");
    // … and may use the same $id for a schema of its own.
    expect(codes(withId({ $id: id, type: "object", properties: { other: { type: "number" } } }))).toEqual([]);
    const mine = validateWorkflow({ inputSchema: { $id: id, type: "object", properties: { other: { type: "number" } } }, nodes: [{ id: "a", ...sv }] });
    expect(mine.ok && validateInput(mine.workflow, { other: 1 })).toEqual([]);
  });

  it("refuses an input schema pattern that repeats a repeating group (exponential backtracking)", () => {
    const pattern = (p: string) => codes(validateWorkflow({ inputSchema: { type: "object", properties: { s: { type: "string", pattern: p } } }, nodes: [{ id: "a", ...sv }] }));
    for (const p of ["^(a+)+$", "(\\w+\\s?)*x", "^(a+|b)+$", "((ab)+)+"]) expect({ p, codes: pattern(p) }).toEqual({ p, codes: ["invalid_input_schema@inputSchema"] });
    for (const p of ["^([a-z0-9-]+\\.)+[a-z]{2,}$", "^[A-Z][a-z]*( [A-Z][a-z]*)*$", "^(\\d+,)*\\d+$", "^(ab)+$", "(a|b)*"]) expect({ p, codes: pattern(p) }).toEqual({ p, codes: [] });
    const props = codes(validateWorkflow({ inputSchema: { type: "object", patternProperties: { "^(x+)+$": { type: "string" } } }, nodes: [{ id: "a", ...sv }] }));
    expect(props).toEqual(["invalid_input_schema@inputSchema"]);
  });

  it("checks the input schema itself, and inputs against it", () => {
    const bad = validateWorkflow({ inputSchema: { type: "nonsense" }, nodes: [{ id: "a", ...sv }] });
    expect(codes(bad)).toEqual(["invalid_input_schema@inputSchema"]);
    // An input is always an object: a schema of strings only could never be met.
    expect(codes(validateWorkflow({ inputSchema: { type: "string" }, nodes: [{ id: "a", ...sv }] }))).toEqual(["invalid_input_schema@inputSchema.type"]);
    expect(codes(validateWorkflow({ inputSchema: { type: ["object", "null"] }, nodes: [{ id: "a", ...sv }] }))).toEqual([]);
    // A delay's fixed `until` must be a time; a $.path is read when the node runs.
    const until = (u: string) => codes(validateWorkflow({ nodes: [{ id: "d", type: "delay", config: { until: u } }] }));
    expect(until("next tuesday")).toEqual(["invalid_config@nodes[0].config.until"]);
    expect(until("2026-12-01T09:00:00Z")).toEqual([]);
    expect(until("$.input.when")).toEqual([]);
    const ok = validateWorkflow({ inputSchema: { type: "object", required: ["q"], properties: { q: { type: "string" }, n: { type: "integer" } } }, nodes: [{ id: "a", ...sv }] });
    expect(ok.ok).toBe(true);
    if (!ok.ok) return;
    expect(validateInput(ok.workflow, { q: "x", n: 1 })).toEqual([]);
    expect(validateInput(ok.workflow, { n: "two" })).toEqual([
      { path: "input", code: "invalid_input", message: 'missing required property "q"' },
      { path: "input.n", code: "invalid_input", message: "must be integer" },
    ]);
  });

  it("refuses an $async schema, whose validator answers with a promise; an input checked against one stored before is refused", () => {
    expect(codes(validateWorkflow({ inputSchema: { $async: true, type: "object", required: ["x"] }, nodes: [{ id: "a", ...sv }] }))).toEqual(["invalid_input_schema@inputSchema"]);
    const stored = { inputSchema: { $async: true, type: "object", required: ["x"] } } as Parameters<typeof validateInput>[0];
    expect(validateInput(stored, {})).toEqual([{ path: "inputSchema", code: "invalid_input_schema", message: expect.stringContaining("$async") }]);
  });

  it("names the property an input may not have, and keys with / or ~ as they are", () => {
    const v = validateWorkflow({
      inputSchema: { type: "object", additionalProperties: false, properties: { "a/b": { type: "string" }, "c~d": { type: "object", additionalProperties: false } } },
      nodes: [{ id: "a", ...sv }],
    });
    expect(v.ok).toBe(true);
    if (!v.ok) return;
    expect(validateInput(v.workflow, { extra: 1, "a/b": 2, "c~d": { deep: true } })).toEqual([
      { path: "input.extra", code: "invalid_input", message: 'property "extra" is not allowed here' },
      { path: "input.a/b", code: "invalid_input", message: "must be string" },
      { path: "input.c~d.deep", code: "invalid_input", message: 'property "deep" is not allowed here' },
    ]);
  });

  it("refuses a node that would write its output over the execution's input", () => {
    expect(codes(validateWorkflow({ nodes: [{ id: "input", ...sv }] }))).toEqual(["invalid_path@nodes[0].id"]);
    expect(codes(validateWorkflow({ nodes: [{ id: "input", ...sv, output: "$.cleaned" }] }))).toEqual([]);
  });

  it("refuses a node named after a context key the engine writes for another node of the graph, and only then", () => {
    // Each: [the key, a node of the graph that makes the engine write it, one like it that does not].
    const cases: Array<[string, Record<string, unknown>, Record<string, unknown> | undefined]> = [
      ["messages", { type: "agent.llm", config: { model: "m:x" } }, { type: "agent.llm", config: { model: "m:x", append: false } }],
      ["messages", { type: "agent.llm", config: { model: "m:x", messages: "$.messages.main" } }, { type: "agent.llm", config: { model: "m:x", messages: "$.conversation" } }],
      ["messages", { type: "agent.prompt", config: { template: "hi", role: "user" } }, { type: "agent.prompt", config: { template: "hi" } }],
      ["messages", { type: "agent.toolLoop", config: { model: "m:x" } }, { type: "agent.toolLoop", config: { model: "m:x", messages: "$.conversation" } }],
      ["messages", { type: "agent.memory.read", config: {} }, { type: "agent.memory.read", config: { inject: false } }],
      ["messages", { type: "agent.subagent", config: { agent: { slug: "helper" } } }, { type: "agent.subagent", config: { agent: { slug: "helper" }, append: false } }],
      ["messages", { type: "agent.toolExecutor", config: {} }, undefined],
      ["toolCalls", { type: "agent.llm", config: { model: "m:x" } }, { type: "agent.llm", config: { model: "m:x", append: false } }],
      ["toolResults", { type: "agent.toolExecutor", config: { append: false } }, { type: "agent.toolLoop", config: { model: "m:x" } }],
      ["synthdev", { type: "synthdev.state", config: { state: "start" } }, undefined],
    ];
    const graph = (key: string, writer: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
      validateWorkflow({ start: "w", nodes: [{ id: "w", ...writer }, { id: key, ...sv, ...extra }], edges: [{ from: "w", to: key }] });
    for (const [key, writer, other] of cases) {
      const r = graph(key, writer);
      expect([key, writer, codes(r)]).toEqual([key, writer, ["invalid_path@nodes[1].id"]]);
      const message = !r.ok ? r.errors[0]!.message : "";
      expect([message.startsWith(`node "${key}" would write its output to $.${key}, where ${String(writer.type)} node "w" `), message.endsWith(": give it another id, or an output path")]).toEqual([true, true]);
      // With an output path of its own it writes nowhere near; without the writer there is nothing to collide with.
      expect([key, writer, codes(graph(key, writer, { output: "$.mine" }))]).toEqual([key, writer, []]);
      if (other) expect([key, other, codes(graph(key, other))]).toEqual([key, other, []]);
    }
    // A node that writes the key itself collides with itself; a forEach body is a graph (and a context) of its own.
    const self = validateWorkflow({ nodes: [{ id: "toolCalls", type: "agent.llm", config: { model: "m:x" } }] });
    expect(!self.ok && self.errors).toEqual([{
      path: "nodes[0].id", code: "invalid_path",
      message: 'node "toolCalls" would write its output to $.toolCalls, where agent.llm node "toolCalls" puts the tool calls of its answer: give it another id, or an output path',
    }]);
    const body = { nodes: [{ id: "messages", ...sv }] };
    expect(codes(validateWorkflow({ nodes: [{ id: "p", type: "agent.prompt", config: { template: "hi", role: "user" } }, { id: "each", type: "forEach", config: { items: "$.input.xs", body } }], edges: [{ from: "p", to: "each" }] }))).toEqual([]);
    const inBody = { nodes: [{ id: "p", type: "agent.prompt", config: { template: "hi", role: "user" } }, { id: "messages", ...sv }], edges: [{ from: "p", to: "messages" }] };
    expect(codes(validateWorkflow({ nodes: [{ id: "each", type: "forEach", config: { items: "$.input.xs", body: inBody } }] }))).toEqual(["invalid_path@nodes[0].config.body.nodes[1].id"]);
  });

  it("checks the tools a SynthDev state's agent may call (its role's includedTools) like an agent node's tools, only for the roles its states' agents have", async () => {
    const synthdev = {
      workflow: {
        workflow_name: "pair",
        contexts: [{ name: "shared" }],
        agents: [{ agent_role: "coder", context: "shared" }, { agent_role: "code reviewer", context: "shared" }, { agent_role: "idle", context: "shared" }],
        states: [{ name: "write", agent: "coder", next_state: "review" }, { name: "review", agent: "code reviewer", next_state: "again" }, { name: "again", agent: "coder" }],
      },
      roles: { coder: { includedTools: ["repo.read", "no.such.tool"] }, "code reviewer": { includedTools: ["no.such.lint"] }, idle: { includedTools: ["no.such.thing"] } },
    };
    const state = (name: string) => ({ id: name, type: "synthdev.state", config: { state: name } });
    const def = { synthdev, nodes: [state("write"), state("review"), state("again")], edges: [{ from: "write", to: "review" }, { from: "review", to: "again" }] };
    const known = new Set(["sandbox.run", "llm.chat", "repo.read"]);
    const expected = ["unknown_tool@synthdev.roles.coder.includedTools[1]", 'unknown_tool@synthdev.roles["code reviewer"].includedTools[0]'];
    expect(codes(validateWorkflow(def, { hasTool: (n) => known.has(n) }))).toEqual(expected);
    // Looked up asynchronously (a registry), the same tools are asked about; the idle role's are not.
    expect(referencedTools(def).sort()).toEqual(["llm.chat", "no.such.lint", "no.such.tool", "repo.read", "sandbox.run"]);
    expect(codes(await validateWorkflowWithTools(def, (n) => Promise.resolve(known.has(n))))).toEqual(expected);
    expect(codes(validateWorkflow(def, { hasTool: () => true }))).toEqual([]);
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

describe("validateWorkflow: every problem in one pass", () => {
  const sv = { type: "setVariable", config: { values: {} } };
  const codes = (r: ReturnType<typeof validateWorkflow>) => (r.ok ? [] : r.errors.map((e) => `${e.code}@${e.path}`));

  it("a node or edge of the wrong shape hides nothing else", () => {
    const r = validateWorkflow({
      nodes: [{ id: "bad id", ...sv }, { id: "x", type: "teleport" }],
      edges: [{ from: "x", to: "ghost" }],
    });
    expect(codes(r)).toEqual(["invalid_shape@nodes[0].id", "unknown_node_type@nodes[1].type", "dangling_edge@edges[0].to", "unreachable_node@nodes[1]"]);
  });

  it("lists shape, local, graph and input-schema problems together", () => {
    const r = validateWorkflow({
      start: "a",
      inputSchema: { type: "nonsense" },
      limits: { maxConcurrency: 0 },
      nodes: [
        { id: "a", ...sv },
        { id: "b", type: "transform", config: { expression: "((" } },
        { id: "c", ...sv, retry: { maxAttempts: 0 } },
        { id: "d", type: "teleport" },
        { id: "orphan", ...sv },
        { id: "e", type: "tool", config: { tool: "echo" }, input: { v: "$.x[y]" } },
      ],
      edges: [{ from: "a", to: "b" }, { from: "b", to: "c" }, { from: "c", to: "b" }, { from: "a", to: "d" }, { from: "a", to: "e" }, { from: 3, to: "d" }, { from: "a", to: "ghost" }],
    });
    expect(codes(r)).toEqual([
      "invalid_shape@limits.maxConcurrency",
      "invalid_shape@nodes[2].retry.maxAttempts",
      "invalid_expression@nodes[1].config.expression",
      "unknown_node_type@nodes[3].type",
      "invalid_path@nodes[5].input.v",
      "invalid_shape@edges[5].from",
      "dangling_edge@edges[6].to",
      // A cycle is a cycle whatever else is broken; reachability waits for edges[5] to name its source.
      "unbounded_cycle@edges",
      "invalid_input_schema@inputSchema",
    ]);
  });

  it("runs the graph checks beside unknown node types and bad configs", () => {
    const r = validateWorkflow({
      start: "a",
      nodes: [{ id: "a", type: "teleport" }, { id: "b", type: "delay", config: { seconds: 1 } }, { id: "c", ...sv }, { id: "orphan", ...sv }],
      edges: [{ from: "a", to: "b" }, { from: "b", to: "c" }, { from: "c", to: "b" }],
    });
    expect(codes(r)).toEqual(["unknown_node_type@nodes[0].type", "invalid_config@nodes[1].config", "unbounded_cycle@edges", "unreachable_node@nodes[3]"]);
  });

  it("checks a forEach body part by part too", () => {
    const r = validateWorkflow({
      nodes: [{ id: "e", type: "forEach", config: { items: "$.input.xs", body: { nodes: [{ id: "1bad", ...sv }, { id: "t", type: "teleport" }], edges: [{ from: "t", to: "t" }] } } }],
    });
    expect(codes(r)).toEqual([
      "invalid_shape@nodes[0].config.body.nodes[0].id",
      "unknown_node_type@nodes[0].config.body.nodes[1].type",
      "unbounded_cycle@nodes[0].config.body.edges",
      "unreachable_node@nodes[0].config.body.nodes[1]",
    ]);
  });
});

describe("validateWorkflow: cycles and joins", () => {
  const sv = { type: "setVariable", config: { values: {} } };
  const cond = (id: string) => ({ id, type: "condition", config: { left: 1, op: "eq", right: 1 } });
  const codes = (r: ReturnType<typeof validateWorkflow>) => (r.ok ? [] : r.errors.map((e) => `${e.code}@${e.path}`));

  it("refuses a cycle that avoids every bound, even when its component holds a whileLoop", () => {
    const r = validateWorkflow({
      start: "l",
      nodes: [{ id: "l", type: "whileLoop", config: { condition: "true", maxIterations: 3 } }, { id: "a", ...sv }, { id: "b", ...sv, branching: "first" }, { id: "x", ...sv }],
      edges: [{ from: "l", to: "a", when: "body" }, { from: "a", to: "b" }, { from: "b", to: "a", condition: "true" }, { from: "b", to: "l" }, { from: "l", to: "x", when: "exit" }],
    });
    expect(!r.ok && r.errors).toEqual([{ path: "edges", code: "unbounded_cycle", message: expect.stringContaining("cycle a → b → a has no loop bound") }]);
    const bounded = validateWorkflow({
      start: "l",
      nodes: [{ id: "l", type: "whileLoop", config: { condition: "true", maxIterations: 3 } }, { id: "a", ...sv, maxVisits: 10 }, { id: "b", ...sv, branching: "first" }, { id: "x", ...sv }],
      edges: [{ from: "l", to: "a", when: "body" }, { from: "a", to: "b" }, { from: "b", to: "a", condition: "true" }, { from: "b", to: "l" }, { from: "l", to: "x", when: "exit" }],
    });
    expect(codes(bounded)).toEqual([]);
    const selfLoop = validateWorkflow({ nodes: [{ id: "a", ...sv }], edges: [{ from: "a", to: "a" }] });
    expect(codes(selfLoop)).toEqual(["unbounded_cycle@edges"]);
  });

  it("refuses an n-join fed by branches that exclude each other, one hop or more away", () => {
    const fed = (from: Record<string, unknown>, edges: { from: string; to: string; when?: string }[]) => validateWorkflow({
      nodes: [from, { id: "a", ...sv }, { id: "b", ...sv }, { id: "j", ...sv, join: { n: 2 } }],
      edges: [...edges, { from: "a", to: "j" }, { from: "b", to: "j" }],
    });
    expect(codes(fed(cond("c"), [{ from: "c", to: "a", when: "true" }, { from: "c", to: "b", when: "false" }]))).toEqual(["join_never_fires@nodes[3].join"]);
    expect(codes(fed({ id: "r", type: "humanReview" }, [{ from: "r", to: "a", when: "approved" }, { from: "r", to: "b", when: "rejected" }]))).toEqual(["join_never_fires@nodes[3].join"]);
    expect(codes(fed({ id: "r", type: "humanReview" }, [{ from: "r", to: "a" }, { from: "r", to: "b", when: "rejected" }]))).toEqual(["join_never_fires@nodes[3].join"]);
    expect(codes(fed({ id: "s", ...sv, branching: "first" }, [{ from: "s", to: "a" }, { from: "s", to: "b" }]))).toEqual(["join_never_fires@nodes[3].join"]);
    const deep = validateWorkflow({
      nodes: [cond("c"), { id: "a", ...sv }, { id: "a2", ...sv }, { id: "b", ...sv }, { id: "j", ...sv, join: { n: 2 } }],
      edges: [{ from: "c", to: "a", when: "true" }, { from: "a", to: "a2" }, { from: "c", to: "b", when: "false" }, { from: "a2", to: "j" }, { from: "b", to: "j" }],
    });
    expect(!deep.ok && deep.errors).toEqual([{ path: "nodes[4].join", code: "join_never_fires", message: 'node "j" waits for 2 incoming branches but at most 1 can arrive (they come from branches of "c" that exclude each other)' }]);
  });

  it("accepts n-joins that can fire: a fan-out, one branch feeding both, two paths out of one branch", () => {
    const fanOut = validateWorkflow({
      nodes: [{ id: "s", ...sv }, { id: "a", ...sv }, { id: "b", ...sv }, { id: "j", ...sv, join: { n: 2 } }],
      edges: [{ from: "s", to: "a" }, { from: "s", to: "b" }, { from: "a", to: "j" }, { from: "b", to: "j" }],
    });
    expect(codes(fanOut)).toEqual([]);
    const oneBranch = validateWorkflow({
      nodes: [cond("c"), { id: "a", ...sv }, { id: "b", ...sv }, { id: "j", ...sv, join: { n: 2 } }],
      edges: [{ from: "c", to: "a", when: "true" }, { from: "c", to: "b", when: "true" }, { from: "a", to: "j" }, { from: "b", to: "j" }],
    });
    expect(codes(oneBranch)).toEqual([]);
    const twoPaths = validateWorkflow({
      nodes: [cond("c"), { id: "a", ...sv }, { id: "m", ...sv }, { id: "b", ...sv }, { id: "j", ...sv, join: { n: 2 } }],
      edges: [{ from: "c", to: "a", when: "true" }, { from: "c", to: "b", when: "false" }, { from: "a", to: "j" }, { from: "a", to: "m" }, { from: "m", to: "j" }, { from: "b", to: "j" }],
    });
    expect(codes(twoPaths)).toEqual([]);
    // Nodes reached on both branches (after a merge) are not held to one of them.
    const merged = validateWorkflow({
      nodes: [cond("c"), { id: "a", ...sv }, { id: "b", ...sv }, { id: "m", ...sv }, { id: "x", ...sv }, { id: "y", ...sv }, { id: "j", ...sv, join: { n: 2 } }],
      edges: [{ from: "c", to: "a", when: "true" }, { from: "c", to: "b", when: "false" }, { from: "a", to: "m" }, { from: "b", to: "m" }, { from: "m", to: "x" }, { from: "m", to: "y" }, { from: "x", to: "j" }, { from: "y", to: "j" }],
    });
    expect(codes(merged)).toEqual([]);
  });

  it("refuses an explicit all or n join on a loop head that its back edge would have to satisfy", () => {
    const loop = (join: unknown, extra: Record<string, unknown>[] = [], extraEdges: { from: string; to: string }[] = []) => validateWorkflow({
      start: "init",
      nodes: [{ id: "init", ...sv }, { id: "head", ...sv, join, maxVisits: 3 }, { ...cond("body") }, { id: "out", ...sv }, ...extra],
      edges: [{ from: "init", to: "head" }, { from: "head", to: "body" }, { from: "body", to: "head", when: "true" }, { from: "body", to: "out", when: "false" }, ...extraEdges],
    });
    const all = loop("all");
    expect(codes(all)).toEqual(["join_never_fires@nodes[1].join"]);
    expect(!all.ok && all.errors[0]!.message).toMatch(/edge from "body" closes a loop back to "head".*leave join out/);
    expect(codes(loop({ n: 2 }))).toEqual(["join_never_fires@nodes[1].join"]);
    expect(codes(loop("any"))).toEqual([]);
    expect(codes(loop({ n: 1 }))).toEqual([]);
    // Two entries from outside the loop can meet an n: 2 join on its first run.
    expect(codes(loop({ n: 2 }, [{ id: "init2", ...sv }], [{ from: "init", to: "init2" }, { from: "init2", to: "head" }]))).toEqual([]);
    // The start node runs first whatever its join says.
    const startHead = validateWorkflow({
      nodes: [{ id: "head", ...sv, join: "all", maxVisits: 3 }, cond("body"), { id: "out", ...sv }],
      edges: [{ from: "head", to: "body" }, { from: "body", to: "head", when: "true" }, { from: "body", to: "out", when: "false" }],
    });
    expect(codes(startHead)).toEqual([]);
  });

  it("refuses a join on the start that no round of its cycle can meet: an edge back starts the round over, and only edges decided after it count", () => {
    type E = { from: string; to: string };
    const start = (join: unknown, nodes: string[], edges: E[]) => validateWorkflow({
      start: "s", nodes: [{ id: "s", ...sv, join, maxVisits: 3 }, ...nodes.map((id) => ({ id, ...sv }))], edges,
    });
    // s → a, a → s, s → s: the self-loop restarts the round after s → a was taken, so s waits for a, which waits for s.
    const self = start("all", ["a"], [{ from: "s", to: "a" }, { from: "a", to: "s" }, { from: "s", to: "s" }]);
    expect(codes(self)).toEqual(["join_never_fires@nodes[0].join"]);
    expect(!self.ok && self.errors[0]!.message).toMatch(/"s" is the start and has join "all".*waits for the edge from "a".*leave join out/);
    // Listed first, the self-loop restarts the round before s → a is decided: a runs in it and s runs again.
    expect(codes(start("all", ["a"], [{ from: "s", to: "s" }, { from: "s", to: "a" }, { from: "a", to: "s" }]))).toEqual([]);
    // a → s listed before a → b: b is restarted and waits for s; listed after it, b runs in the new round.
    expect(codes(start("all", ["a", "b"], [{ from: "s", to: "a" }, { from: "a", to: "b" }, { from: "a", to: "s" }, { from: "b", to: "s" }]))).toEqual(["join_never_fires@nodes[0].join"]);
    expect(codes(start("all", ["a", "b"], [{ from: "s", to: "a" }, { from: "a", to: "s" }, { from: "a", to: "b" }, { from: "b", to: "s" }]))).toEqual([]);
    // n: 2 on s → a → b → s plus s → s, and on s ⇄ a plus s → s: one edge back per round.
    const ring = start({ n: 2 }, ["a", "b"], [{ from: "s", to: "a" }, { from: "a", to: "b" }, { from: "b", to: "s" }, { from: "s", to: "s" }]);
    expect(codes(ring)).toEqual(["join_never_fires@nodes[0].join"]);
    expect(!ring.ok && ring.errors[0]!.message).toMatch(/waits for 2 incoming edges.*at most 1 can then arrive/);
    expect(codes(start({ n: 2 }, ["a"], [{ from: "s", to: "a" }, { from: "a", to: "s" }, { from: "s", to: "s" }]))).toEqual(["join_never_fires@nodes[0].join"]);
    // Listing the self-loop first does not help n: 2: the start, skipped at once with one arrival, kills its edges out, the self-loop too.
    expect(codes(start({ n: 2 }, ["a", "b"], [{ from: "s", to: "s" }, { from: "s", to: "a" }, { from: "a", to: "b" }, { from: "b", to: "s" }]))).toEqual(["join_never_fires@nodes[0].join"]);
    expect(codes(start({ n: 1 }, ["a"], [{ from: "s", to: "a" }, { from: "a", to: "s" }, { from: "s", to: "s" }]))).toEqual([]);
    // One edge back, or two from one node, can meet all.
    expect(codes(start("all", ["a"], [{ from: "s", to: "a" }, { from: "a", to: "s" }, { from: "a", to: "s" }]))).toEqual([]);
  });

  it("refuses an all join on the start when a round that cannot meet it can come first, whichever others could", () => {
    type E = { from: string; to: string; condition?: string };
    const start = (nodes: string[], edges: E[]) => validateWorkflow({ start: "s", nodes: [{ id: "s", ...sv, join: "all", maxVisits: 3 }, ...nodes.map((id) => ({ id, ...sv }))], edges });
    // Two self-loops, the guarded one first: when its guard fails the other restarts the round,
    // and s waits for the guarded one, which only s's next run decides.
    const self = start([], [{ from: "s", to: "s", condition: "input.go" }, { from: "s", to: "s" }]);
    expect(codes(self)).toEqual(["join_never_fires@nodes[0].join"]);
    expect(!self.ok && self.errors[0]!.message).toMatch(/the edge back from "s" can be the first taken after it ran \(those listed before it from the same node not taken\)/);
    // The unguarded one first always restarts the round, and the guarded one is decided in it.
    expect(codes(start([], [{ from: "s", to: "s" }, { from: "s", to: "s", condition: "input.go" }]))).toEqual([]);
    // The same with two edges back from another node.
    expect(codes(start(["a"], [{ from: "s", to: "a" }, { from: "a", to: "s", condition: "input.go" }, { from: "a", to: "s" }]))).toEqual(["join_never_fires@nodes[0].join"]);
    expect(codes(start(["a"], [{ from: "s", to: "a" }, { from: "a", to: "s" }, { from: "a", to: "s", condition: "input.go" }]))).toEqual([]);
    // A whileLoop's exit and body edges back: whichever it takes, the other is left undecided by the round.
    for (const first of ["exit", "body"]) {
      const r = validateWorkflow({
        start: "s",
        nodes: [{ id: "s", ...sv, join: "all", maxVisits: 2 }, { id: "L", type: "whileLoop", config: { condition: "input.go", maxIterations: 3 } }],
        edges: [{ from: "s", to: "L" }, { from: "L", to: "s", when: first }, { from: "L", to: "s", when: first === "exit" ? "body" : "exit" }],
      });
      expect([first, codes(r)]).toEqual([first, ["join_never_fires@nodes[0].join"]]);
    }
  });

  it("refuses a join on the start whose round needs an edge the source of the edge back decides on another branch", () => {
    // loop →exit→ s starts a round in which loop's body edge to c dies; c still waits for s → c,
    // so c → s is never decided. Taken as if every branch could be taken, c's edge counted.
    const r = validateWorkflow({
      start: "s",
      nodes: [
        { id: "s", type: "condition", config: { left: "$.input.loop", op: "eq", right: true }, join: "all", maxVisits: 2 },
        { id: "loop", type: "whileLoop", config: { condition: "input.again", maxIterations: 3, onLimit: "exit" } },
        { id: "c", type: "condition", config: { left: "$.input.back", op: "eq", right: true } },
      ],
      edges: [
        { from: "s", to: "loop", when: "true" }, { from: "loop", to: "s", when: "exit" }, { from: "loop", to: "c", when: "body" },
        { from: "s", to: "c", when: "false" }, { from: "c", to: "s", when: "false" },
      ],
    });
    expect(codes(r)).toEqual(["join_never_fires@nodes[0].join"]);
    expect(!r.ok && r.errors[0]!.message).toMatch(/"s" is the start and has join "all".*on its branch.*leave join out/);
    // A node that only the dead branch leads to is skipped, so its edge is decided: the round's join is met.
    const skipped = validateWorkflow({
      start: "s",
      nodes: [
        { id: "s", type: "transform", config: { expression: "1" }, join: "all", maxVisits: 3 },
        { id: "loop", type: "whileLoop", config: { condition: "input.again", maxIterations: 3 } },
        { id: "b", type: "transform", config: { expression: "1" } },
      ],
      edges: [{ from: "s", to: "loop" }, { from: "loop", to: "s", when: "exit" }, { from: "loop", to: "b", when: "body" }, { from: "b", to: "s" }],
    });
    expect(codes(skipped)).toEqual([]);
  });

  describe("a join on the start whose round reaches a node that waits, by its own join, for the start", () => {
    // s (join all) → a, s → L; L →body→ s starts the round over, then L →body→ b; a → b; b → s.
    // The round takes L → b, but b (join all) waits for a too, which waits for s: s waits for b for ever.
    const round = (o: { aToB?: boolean; sJoin?: string } = {}) => validateWorkflow({
      start: "s",
      nodes: [
        { id: "s", type: "transform", config: { expression: "$exists(vars.k) ? vars.k + 1 : 1" }, output: "$.vars.k", join: o.sJoin ?? "all", maxVisits: 3 },
        { id: "a", ...sv }, { id: "L", type: "whileLoop", config: { condition: "vars.k < 2", maxIterations: 3 } }, { id: "b", ...sv }, { id: "end", ...sv },
      ],
      edges: [
        { from: "s", to: "a" }, { from: "s", to: "L" }, { from: "L", to: "s", when: "body" }, { from: "L", to: "b", when: "body" }, { from: "L", to: "end", when: "exit" },
        ...(o.aToB === false ? [] : [{ from: "a", to: "b" }]), { from: "b", to: "s" },
      ],
    });

    it("refuses it, naming the node the start waits for and whom that one waits for, back to the start", () => {
      const r = round();
      expect(codes(r)).toEqual(["join_never_fires@nodes[0].join"]);
      expect(!r.ok && r.errors[0]!.message).toBe(
        'node "s" is the start and has join "all": an edge back to it, as the one from "L", starts its cycle\'s round over, and it then waits for the edge from "b", which that round cannot decide before "s" ran again: "b" (join "all") waits for the edge from "a", "a" (join "all") for the one from "s" (the round starts them over, and only "s" can take those edges again): it never runs again; leave join out (the start runs again on any edge back) or use "any", or give "b" a way in that does not wait for "s"',
      );
    });

    it("accepts it when that node's ways in do not wait for the start, or the start runs on any edge back", () => {
      // Without a → b, the round runs b and s gets both edges back (loop-passes.test.ts runs it to completion).
      expect(codes(round({ aToB: false }))).toEqual([]);
      expect(codes(round({ sJoin: "any" }))).toEqual([]);
    });
  });
});

describe("validateWorkflow: joins that wait on each other for some outcome of the branches before them", () => {
  const sv = { type: "setVariable", config: { values: {} } };
  const cond = (id: string, path = "$.input.go") => ({ id, type: "condition", config: { left: path, op: "eq", right: true } });
  const codes = (r: ReturnType<typeof validateWorkflow>) => (r.ok ? [] : r.errors.map((e) => `${e.code}@${e.path}`));
  const loop = (id: string, condition: string, maxIterations: number, extra: Record<string, unknown> = {}) => ({ id, type: "whileLoop", config: { condition, maxIterations }, ...extra });

  it("refuses an all join in a cycle entered at two nodes when the other way in hangs on a branch; accepts it when that way is sure", () => {
    // s → c →true→ y, s → x (join all), x ⇄ y: when c goes false, y is reached only from x and x waits for y.
    const entry = (xJoin: unknown, yIn: Record<string, unknown>[]) => validateWorkflow({
      start: "s",
      nodes: [{ id: "s", ...sv }, cond("c"), { id: "x", ...sv, join: xJoin }, { id: "y", ...sv, maxVisits: 2 }],
      edges: [{ from: "s", to: "c" }, ...yIn, { from: "s", to: "x" }, { from: "x", to: "y" }, { from: "y", to: "x" }],
    });
    const r = entry("all", [{ from: "c", to: "y", when: "true" }]);
    expect(codes(r)).toEqual(["join_never_fires@nodes[2].join"]);
    expect(!r.ok && r.errors[0]!.message).toBe(
      'node "x" has join "all", so it waits for every incoming edge, the one from "y" too; when "c" takes its "false" branch, "y" cannot run before "x" (it waits, in turn, for "x" or for nodes that wait for it), so the run stops with them waiting (BATON_JOIN_NEVER_FIRED): use join "any" on "x", or give "y" a way in that does not depend on that outcome',
    );
    expect(codes(entry("any", [{ from: "c", to: "y", when: "true" }]))).toEqual([]);
    expect(codes(entry("all", [{ from: "s", to: "y" }]))).toEqual([]);
    // A guard on the way in may fail as a branch may go the other way.
    expect(codes(entry("all", [{ from: "s", to: "y", condition: "input.go" }]))).toEqual(["join_never_fires@nodes[2].join"]);
  });

  it("refuses an n-join whose edges come from branches that exclude each other through a loop", () => {
    // c →true→ j, c →false→ loop, j → loop, loop →exit→ j: two edges into j only when both branches were taken.
    const r = validateWorkflow({
      start: "s",
      nodes: [{ id: "s", ...sv }, cond("c"), { id: "j", ...sv, join: { n: 2 } }, loop("loop", "$iteration < 1", 2, { maxVisits: 2 }), { id: "w", ...sv }],
      edges: [
        { from: "s", to: "c" }, { from: "c", to: "j", when: "true" }, { from: "c", to: "loop", when: "false" }, { from: "j", to: "loop" },
        { from: "loop", to: "w", when: "body" }, { from: "w", to: "loop" }, { from: "loop", to: "j", when: "exit" },
      ],
    });
    expect(codes(r)).toEqual(["join_never_fires@nodes[2].join"]);
    expect(!r.ok && r.errors[0]!.message).toMatch(/"j" waits for 2 incoming edges, at most 1 of them from nodes that can run before it.*when "c" takes its "true" branch, "loop" cannot run before "j"/);
  });

  it("takes a whileLoop to go into its body or out on its first visit, as its condition allows", () => {
    // loop →body→ j, loop →exit→ c → j (n: 2): a pass through the body leaves c waiting for j.
    const d = (condition: string) => validateWorkflow({
      start: "s",
      nodes: [{ id: "s", ...sv }, loop("loop", condition, 1, { config: { condition, maxIterations: 1, onLimit: "exit" } }), { id: "j", ...sv, join: { n: 2 }, maxVisits: 2 }, cond("c")],
      edges: [{ from: "s", to: "loop" }, { from: "loop", to: "j", when: "body" }, { from: "loop", to: "c", when: "exit" }, { from: "j", to: "c" }, { from: "c", to: "j", when: "false" }, { from: "j", to: "s" }],
    });
    expect(codes(d("input.go"))).toEqual(["join_never_fires@nodes[2].join"]);
    expect(codes(d("$iteration < 1"))).toEqual(["join_never_fires@nodes[2].join"]);
    // A loop whose condition only counts and never holds goes out at once: no pass through its body leaves c waiting.
    expect(codes(d("$iteration < 0"))).toEqual([]);
  });

  describe("a whileLoop that goes round its body before it goes out", () => {
    // start loop →body→ loop, →exit→ j (n: 2) and →exit→ c; c →true→ b; j → a → b → j. The loop
    // goes round before it goes out (`$iteration < 2`); when c then goes false, j gets one edge
    // and waits for b, which waits for a, which waits for j.
    const minimal = (o: { condition?: string; maxIterations?: number; onLimit?: string; body?: "self" | "node" | "spill" } = {}) => {
      const body = o.body ?? "self";
      const edges: Record<string, unknown>[] = [
        { from: "loop", to: "j", when: "exit" }, { from: "loop", to: "c", when: "exit" }, { from: "c", to: "b", when: "true" },
        { from: "j", to: "a" }, { from: "a", to: "b", condition: "false" }, { from: "b", to: "j" },
      ];
      if (body === "self") edges.push({ from: "loop", to: "loop", when: "body" });
      else edges.push({ from: "loop", to: "w", when: "body" }, { from: "w", to: "loop" }, ...(body === "spill" ? [{ from: "w", to: "b" }] : []));
      return {
        start: "loop",
        nodes: [
          { id: "loop", type: "whileLoop", config: { condition: o.condition ?? "$iteration < 2", maxIterations: o.maxIterations ?? 3, ...(o.onLimit ? { onLimit: o.onLimit } : {}) } },
          { id: "j", ...sv, join: { n: 2 } }, cond("c"), { id: "a", ...sv }, { id: "b", ...sv, maxVisits: 2 }, ...(body === "self" ? [] : [{ id: "w", ...sv }]),
        ],
        edges,
      };
    };

    it("refuses a join that waits for ever when the loop goes out on a later visit, naming the join, the node it waits for and the outcome", () => {
      const r = validateWorkflow(minimal());
      expect(codes(r)).toEqual(["join_never_fires@nodes[1].join"]);
      expect(!r.ok && r.errors[0]!.message).toBe(
        'node "j" waits for 2 incoming edges, at most 1 of them from nodes that can run before it, and for the one from "b" too; when "loop" goes round its body and then takes its "exit" branch and "c" takes its "false" branch, "b" cannot run before "j" (it waits, in turn, for "j" or for nodes that wait for it), so the run stops with them waiting (BATON_JOIN_NEVER_FIRED): use join "any" or a smaller n on "j", or give "b" a way in that does not depend on that outcome',
      );
      // A body of its own, and a loop that goes out at its limit (onLimit "exit"), the same.
      expect(codes(validateWorkflow(minimal({ body: "node" })))).toEqual(["join_never_fires@nodes[1].join"]);
      expect(codes(validateWorkflow(minimal({ condition: "$iteration <= 4", maxIterations: 2, onLimit: "exit" })))).toEqual(["join_never_fires@nodes[1].join"]);
      expect(codes(validateWorkflow(minimal({ condition: "true", maxIterations: 2, onLimit: "exit" })))).toEqual(["join_never_fires@nodes[1].join"]);
    });

    it("accepts it when the loop never goes out after going round, or when its passes reach the node the join waits for", () => {
      // At its limit the loop fails the run (onLimit "fail"): it never goes out, and j is never reached.
      expect(codes(validateWorkflow(minimal({ condition: "$iteration < 5", maxIterations: 2 })))).toEqual([]);
      expect(codes(validateWorkflow(minimal({ condition: "true", maxIterations: 2 })))).toEqual([]);
      // Each pass runs w → b, which b's first run takes: j has b's edge before the loop goes out (see loop-passes.test.ts).
      expect(codes(validateWorkflow(minimal({ body: "spill" })))).toEqual([]);
    });
  });

  it("refuses an all join that a later round of its cycle leaves waiting: an edge into the cycle counts for its first round only", () => {
    // s → a and s → loop; loop →exit→ v, v →body→ a and back to loop; a → v never taken. After
    // loop's own body edge goes round, a is reached from v alone, and v (join all) waits for a.
    const r = validateWorkflow({
      start: "s",
      nodes: [{ id: "s", ...sv }, { id: "a", ...sv }, loop("loop", "$iteration < 2", 2), loop("v", "$iteration < 1", 1, { join: "all" })],
      edges: [
        { from: "s", to: "a" }, { from: "s", to: "loop" }, { from: "loop", to: "loop", when: "body" }, { from: "loop", to: "v", when: "exit" },
        { from: "v", to: "a", when: "body" }, { from: "a", to: "v", condition: "false" }, { from: "v", to: "loop", when: "body" },
      ],
    });
    expect(codes(r)).toEqual(["join_never_fires@nodes[3].join"]);
    expect(!r.ok && r.errors[0]!.message).toMatch(/when the cycle through "loop" goes round again \(the edge from "s" into it counts for its first round only\), "a" cannot run before "v"/);
  });

  it("refuses joins that wait on each other only for some branch, through other joins", () => {
    // s →true→ x → j (all), s →true→ v (all); j → w →exit→ j, v →exit→ w, w →body→ c →true→ v; s →false→ c.
    const r = validateWorkflow({
      start: "s",
      nodes: [cond("s"), { id: "x", ...sv }, { id: "j", ...sv, join: "all" }, cond("c", "$.input.back"), loop("v", "$iteration < 2", 3, { join: "all" }), loop("w", "$iteration < 1", 1, { maxVisits: 4 })],
      edges: [
        { from: "s", to: "x", when: "true" }, { from: "x", to: "j" }, { from: "s", to: "c", when: "false" }, { from: "s", to: "v", when: "true" }, { from: "j", to: "w" },
        { from: "v", to: "w", when: "exit" }, { from: "w", to: "j", when: "exit" }, { from: "w", to: "c", when: "body" }, { from: "c", to: "v", when: "true" }, { from: "c", to: "w", when: "false" },
      ],
    });
    expect(codes(r)).toEqual(["join_never_fires@nodes[2].join", "join_never_fires@nodes[4].join"]);
  });

  it("counts, for an n-join, every edge the ways that reach it for sure take", () => {
    // s → j, s → L, L →body→ j: two edges arrive for sure; j (n: 3) also waits for t, which only j leads to.
    const r = validateWorkflow({
      start: "s",
      nodes: [{ id: "s", ...sv }, { id: "j", ...sv, join: { n: 3 }, maxVisits: 2 }, { id: "t", ...sv }, loop("L", "$iteration < 2", 2)],
      edges: [{ from: "s", to: "j" }, { from: "j", to: "t" }, { from: "s", to: "L" }, { from: "t", to: "j" }, { from: "L", to: "j", when: "body" }, { from: "j", to: "L" }, { from: "L", to: "t", when: "exit" }],
    });
    expect(codes(r)).toEqual(["join_never_fires@nodes[1].join"]);
    expect(!r.ok && r.errors[0]!.message).toMatch(/"j" waits for 3 incoming edges, at most 2 of them from nodes that can run before it, and for the one from "t" too; when "L" takes its "body" branch/);
  });

  it("counts on an n-join on the way to the join when enough edges from that way reach it", () => {
    // c →true→ b, b → m twice (m: n 2), m → v (join all); a → v, and a only from c's false branch or v's body.
    const r = validateWorkflow({
      start: "c",
      nodes: [cond("c"), { id: "a", ...sv }, { id: "b", ...sv }, { id: "m", ...sv, join: { n: 2 } }, loop("v", "$iteration < 1", 2, { join: "all" })],
      edges: [
        { from: "c", to: "a", when: "false" }, { from: "c", to: "b", when: "true" }, { from: "b", to: "m" }, { from: "b", to: "m" },
        { from: "a", to: "v" }, { from: "m", to: "v" }, { from: "v", to: "a", when: "body" },
      ],
    });
    expect(codes(r)).toEqual(["join_never_fires@nodes[4].join"]);
  });

  it("takes the guard of an edge into an n-join as part of the outcome", () => {
    // j (n: 3) gets s → j and a → j (guarded); s → b is guarded too, and b is reached otherwise only from j.
    const r = validateWorkflow({
      start: "s",
      nodes: [{ id: "s", ...sv }, { id: "a", ...sv }, { id: "b", ...sv, maxVisits: 2 }, { id: "j", ...sv, join: { n: 3 } }],
      edges: [
        { from: "s", to: "j" }, { from: "s", to: "a" }, { from: "a", to: "j", condition: "input.go" }, { from: "s", to: "b", condition: "input.back" },
        { from: "b", to: "j" }, { from: "j", to: "b" },
      ],
    });
    expect(codes(r)).toEqual(["join_never_fires@nodes[3].join"]);
  });

  it("accepts a join whose waited-for nodes nothing reached leads to, and one whose way in is a loop's exit edge left open", () => {
    // L →body→ v, v →body→ L, L →exit→ a → v, L →exit→ c ⇄ a: when L goes into its body, a and c
    // wait only on each other; never entered, they are skipped once the run is quiet and v runs.
    const unentered = validateWorkflow({
      start: "L",
      nodes: [loop("L", "$iteration < 2", 3), { id: "a", ...sv }, loop("v", "input.go", 2), loop("c", "$iteration < 3", 3)],
      edges: [
        { from: "L", to: "a", when: "exit" }, { from: "a", to: "v" }, { from: "L", to: "c", when: "exit" }, { from: "L", to: "v", when: "body" },
        { from: "v", to: "L", when: "body" }, { from: "c", to: "a", when: "body" }, { from: "a", to: "c" },
      ],
    });
    expect(codes(unentered)).toEqual([]);
    // n0's exit edges are left open while it iterates, so a round of n3's body (which takes n0 in)
    // can come before them: they do not count as taken in the first round only.
    const openExit = validateWorkflow({
      start: "n0",
      nodes: [
        loop("n0", "$iteration < 2", 3, { maxVisits: 4 }), cond("n1", "$.input.x"), cond("n2", "$.input.y"),
        loop("n3", "$iteration < 1", 1, { config: { condition: "$iteration < 1", maxIterations: 1, onLimit: "exit" } }),
        loop("n4", "$iteration < 2", 2, { config: { condition: "$iteration < 2", maxIterations: 2, onLimit: "exit" }, join: "all" }), loop("n5", "input.go", 1),
      ],
      edges: [
        { from: "n0", to: "n1", when: "exit" }, { from: "n1", to: "n2", when: "false" }, { from: "n0", to: "n3", when: "exit" }, { from: "n2", to: "n4", when: "true" },
        { from: "n4", to: "n5", when: "exit" }, { from: "n5", to: "n0", when: "exit" }, { from: "n3", to: "n3", when: "body" }, { from: "n3", to: "n4", when: "exit" },
        { from: "n4", to: "n1", when: "body" }, { from: "n3", to: "n0", when: "body" },
      ],
    });
    expect(codes(openExit)).toEqual([]);
  });

  it("checks a loop of thousands of branches and joins within its budget", () => {
    // 2,000 condition diamonds in a whileLoop's body, each closed by an all join: every join is
    // on the loop's cycle, and each costs walks of the whole graph, so only so many are tried.
    const nodes: unknown[] = [{ id: "s", ...sv }, loop("L", "$iteration < 2", 3)];
    const edges: unknown[] = [{ from: "s", to: "L" }];
    let prev = "L";
    for (let i = 0; i < 2000; i++) {
      nodes.push(cond(`c${i}`), { id: `a${i}`, ...sv }, { id: `b${i}`, ...sv }, { id: `j${i}`, ...sv, join: "all" });
      edges.push({ from: prev, to: `c${i}`, ...(i === 0 ? { when: "body" } : {}) }, { from: `c${i}`, to: `a${i}`, when: "true" }, { from: `c${i}`, to: `b${i}`, when: "false" }, { from: `a${i}`, to: `j${i}` }, { from: `b${i}`, to: `j${i}` });
      prev = `j${i}`;
    }
    edges.push({ from: prev, to: "L" });
    // (Without the budget this does not end within the test's timeout.)
    expect(codes(validateWorkflow({ start: "s", nodes, edges }))).toEqual([]);
  });

  describe("a round of a cycle entered at several nodes, started by an edge back to a node that does not come first", () => {
    // s → a, s → c; a (counts k) → j (join all); c →false→ j; j → c, then j → a while k < 2. a does
    // not come before j on every way (s → c → j), yet j ran after a because of a → j: j → a starts
    // a's round over (j and c too, s → c counting for the first round only). a → j arrives, but c
    // is reached only from j, and j waits for c.
    const round = (o: { jJoin?: string; aToC?: boolean } = {}) => validateWorkflow({
      start: "s",
      nodes: [
        { id: "s", ...sv }, { id: "a", type: "transform", config: { expression: "$exists(vars.k) ? vars.k + 1 : 1" }, output: "$.vars.k" },
        cond("c"), { id: "j", ...sv, join: o.jJoin ?? "all", maxVisits: 3 },
      ],
      edges: [
        { from: "s", to: "a" }, { from: "s", to: "c" }, { from: "a", to: "j" }, { from: "c", to: "j", when: "false" }, ...(o.aToC === true ? [{ from: "a", to: "c" }] : []),
        { from: "j", to: "c" }, { from: "j", to: "a", condition: "vars.k < 2" },
      ],
    });

    it("refuses it, naming the join, the node it waits for and the round", () => {
      const r = round();
      expect(codes(r)).toEqual(["join_never_fires@nodes[3].join"]);
      expect(!r.ok && r.errors[0]!.message).toBe(
        'node "j" has join "all", so it waits for every incoming edge, the one from "c" too; when the cycle through "a" goes round again (the edge from "s" into it counts for its first round only), "c" cannot run before "j" (it waits, in turn, for "j" or for nodes that wait for it), so the run stops with them waiting (BATON_JOIN_NEVER_FIRED): use join "any" on "j", or give "c" a way in that does not depend on the first round',
      );
    });

    it("accepts it when j joins as any, or c has a way in from the round (loop-passes.test.ts runs both to completion)", () => {
      expect(codes(round({ jJoin: "any" }))).toEqual([]);
      expect(codes(round({ aToC: true }))).toEqual([]);
    });
  });

  it("accepts a join whose other way in hangs on a node that decides again each time round its own cycle", () => {
    // c →false→ c goes round until c goes true: no outcome keeps y from being reached before x for good.
    const r = validateWorkflow({
      start: "s",
      nodes: [{ id: "s", ...sv }, { ...cond("c"), maxVisits: 3 }, { id: "x", ...sv, join: "all" }, { id: "y", ...sv, maxVisits: 2 }],
      edges: [{ from: "s", to: "c" }, { from: "c", to: "c", when: "false" }, { from: "c", to: "y", when: "true" }, { from: "s", to: "x" }, { from: "x", to: "y" }, { from: "y", to: "x", condition: "false" }],
    });
    expect(codes(r)).toEqual([]);
  });
});

describe("validateWorkflow: $.paths as the runtime reads them", () => {
  const sv = { type: "setVariable", config: { values: {} } };
  const codes = (r: ReturnType<typeof validateWorkflow>) => (r.ok ? [] : r.errors.map((e) => `${e.code}@${e.path}`));

  it("keeps text that only starts with $ as text, as the runtime does", () => {
    const r = validateWorkflow({ nodes: [{ id: "t", type: "tool", config: { tool: "echo" }, input: { price: "$5", cmd: "$HOME", list: ["$x", "$.input.ok"] } }] });
    expect(codes(r)).toEqual([]);
  });

  it("checks paths in a whileLoop comparison, an idempotency key, setVariable keys and fields always read as paths", () => {
    const r = validateWorkflow({
      start: "l",
      nodes: [
        { id: "l", type: "whileLoop", config: { condition: { left: "$.vars[x]", op: "eq", right: 1 }, maxIterations: 3 } },
        { id: "t", type: "tool", config: { tool: "echo" }, idempotencyKey: "$.input[x" },
        { id: "s", type: "setVariable", config: { values: { "$.vars[x]": 1, "$": 2, "$.input.x": 3, "$.ok": 4, plain: 5 } } },
        { id: "d", type: "delay", config: { ms: "$5" } },
        { id: "f", type: "forEach", config: { items: "$items", tool: "echo" } },
        { id: "p", type: "agent.prompt", config: { template: "hello {{$.who[name]}} and {{$.input.ok}}" } },
        { id: "x", ...sv },
      ],
      edges: [{ from: "l", to: "t", when: "body" }, { from: "t", to: "s" }, { from: "s", to: "d" }, { from: "d", to: "f" }, { from: "f", to: "p" }, { from: "p", to: "l" }, { from: "l", to: "x", when: "exit" }],
    });
    expect(codes(r)).toEqual([
      "invalid_path@nodes[0].config.condition.left",
      "invalid_path@nodes[1].idempotencyKey",
      'invalid_path@nodes[2].config.values["$.vars[x]"]',
      'invalid_path@nodes[2].config.values["$"]',
      'invalid_path@nodes[2].config.values["$.input.x"]',
      "invalid_path@nodes[3].config.ms",
      "invalid_path@nodes[4].config.items",
      "invalid_path@nodes[5].config.template",
    ]);
    expect(!r.ok && r.errors[3]!.message).toBe('setVariable key "$" may not replace the context or write into $.input');
  });

  it("checks an edge guard written as a comparison like a node's: its $.path operands and its shape, every problem at once", () => {
    const r = validateWorkflow({
      start: "a",
      nodes: [
        { id: "a", ...sv, input: { x: "$.input..x" } },
        { id: "b", ...sv }, { id: "c", ...sv }, { id: "d", ...sv }, { id: "e", ...sv }, { id: "f", ...sv }, { id: "g", ...sv },
        { id: "l", type: "whileLoop", config: { condition: { left: "$.a.n", op: "below", right: 3 }, maxIterations: 3 } },
      ],
      edges: [
        { from: "a", to: "b", condition: { left: "$.a[x]", op: "eq", right: 1 } },
        { from: "a", to: "c", condition: { left: "$.a.tags", op: "contains", right: ["$.ok", "$.a..b"] } },
        { from: "a", to: "d", condition: { left: "$.a.n", op: "near", right: 1 } },
        { from: "a", to: "e", condition: { op: "exists" } },
        { from: "a", to: "f", condition: "$output >" },
        { from: "a", to: "g", condition: { left: { k: "$.a.n", price: "$5" }, op: "ne", right: "$.input.n" } },
        { from: "g", to: "l" }, { from: "l", to: "g", when: "body" }, { from: "l", to: "b", when: "exit" },
      ],
    });
    expect(codes(r)).toEqual([
      "invalid_path@nodes[0].input.x",
      "invalid_config@nodes[7].config.condition.op",
      "invalid_path@edges[0].condition.left",
      "invalid_path@edges[1].condition.right[1]",
      "invalid_shape@edges[2].condition.op",
      "invalid_shape@edges[3].condition.left",
      "invalid_expression@edges[4].condition",
    ]);
    const ok = validateWorkflow({ nodes: [{ id: "a", ...sv }, { id: "b", ...sv }], edges: [{ from: "a", to: "b", condition: { left: "$.a.n", op: "gte", right: "$.input.min" } }] });
    expect(ok.ok && ok.workflow.edges).toEqual([{ from: "a", to: "b", condition: { left: "$.a.n", op: "gte", right: "$.input.min" } }]);
    const neither = validateWorkflow({ nodes: [{ id: "a", ...sv }, { id: "b", ...sv }], edges: [{ from: "a", to: "b", condition: 5 }] });
    expect(!neither.ok && neither.errors).toEqual([
      { path: "edges[0].condition", code: "invalid_shape", message: "a condition is a JSONata expression (text) or a comparison { left, op, right }" },
    ]);
  });
});
