/**
 * Rules checked for partialImportIssues (which problems of a failed import's partial definition
 * the whole import has too):
 * - a problem in a node's own fields is kept (`nodes[i].<field>…`), whatever its code, and so is
 *   every problem inside a forEach body (the body is whole in its node: its graph is the source's);
 * - the problems of the partial's graph are left out: a node itself (unreachable, a loop without
 *   its body), a join of the top-level graph that can never fire, edges, cycles, the start node;
 * - a problem in top-level material is kept only in a field the partial's source map names.
 */
import { describe, expect, it } from "@jest/globals";
import { partialImportIssues } from "./index.ts";
import type { PartialImport } from "./index.ts";
import type { JsonObject } from "../json.ts";
import { validateWorkflow } from "../validate.ts";

const issue = (code: string, path: string) => ({ path, code, message: code });

describe("partialImportIssues", () => {
  const partial: PartialImport = {
    definition: { schemaVersion: 1, start: "a", nodes: [{ id: "a", type: "setVariable", config: { values: {} } }], edges: [] },
    sourceMap: { fields: { "synthdev.roles": "roles" }, nodes: { a: { path: "steps[0]" } }, edges: [] },
  };

  it("keeps the problems in the nodes' own fields and the material the partial carries, not those of its graph", () => {
    const kept = [
      issue("invalid_config", "nodes[0].config.ms"),
      issue("invalid_path", "nodes[1].input.url"),
      issue("unknown_tool", "nodes[1].config.tools[0]"),
      issue("invalid_path", "nodes[2].id"),
      issue("invalid_shape", "nodes[2].join"),
      issue("join_never_fires", "nodes[3].config.body.nodes[1].join"),
      issue("unreachable_node", "nodes[3].config.body.nodes[2]"),
      issue("unknown_tool", "synthdev.roles.coder.includedTools[1]"),
    ];
    const dropped = [
      issue("unreachable_node", "nodes[1]"),
      issue("loop_without_body", "nodes[2]"),
      issue("join_never_fires", "nodes[2].join"),
      issue("unbounded_cycle", "edges"),
      issue("dangling_edge", "edges[0].to"),
      issue("missing_start", "start"),
      issue("no_nodes", "nodes"),
      issue("model_not_configured", "agentConfig.model"),
      issue("invalid_shape", "synthdev.workflow.states"),
      issue("invalid_shape", "(definition)"),
    ];
    expect(partialImportIssues(partial, [...dropped, ...kept])).toEqual(kept);
  });

  it("keeps what validation finds in a forEach body, whose graph is whole", () => {
    const definition: JsonObject = {
      schemaVersion: 1, start: "each", edges: [],
      nodes: [
        { id: "each", type: "forEach", config: { items: "$.input.ids", body: { nodes: [{ id: "one", type: "transform", config: { expression: "$" } }, { id: "two", type: "transform", config: { expression: "$" } }] } } },
        { id: "later", type: "delay", config: { ms: "soon" } },
      ],
    };
    const v = validateWorkflow(definition);
    expect(v.ok ? [] : partialImportIssues({ definition, sourceMap: { fields: {}, nodes: {}, edges: [] } }, v.errors).map((e) => `${e.code}@${e.path}`)).toEqual([
      "unreachable_node@nodes[0].config.body.nodes[1]",
      "invalid_config@nodes[1].config.ms",
    ]);
    expect(v.ok ? [] : v.errors.map((e) => `${e.code}@${e.path}`)).toContain("unreachable_node@nodes[1]");
  });
});
