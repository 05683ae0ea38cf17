/**
 * Rules checked: every JSON example in docs/workflows.md is a definition the validator accepts —
 * whole definitions as they are, a single node's example as a one-node workflow — so the
 * document's examples keep working as the model changes.
 */
import { describe, expect, it } from "@jest/globals";
import { readFileSync } from "node:fs";
import { validateWorkflow } from "./validate.ts";

const doc = readFileSync(new URL("../../../docs/workflows.md", import.meta.url), "utf8");
const examples = [...doc.matchAll(/```json\n([\s\S]*?)```/g)].map((m) => JSON.parse(m[1]!) as Record<string, unknown>);

describe("docs/workflows.md", () => {
  it("has its examples: whole workflows and node snippets", () => {
    expect(examples.length).toBeGreaterThanOrEqual(4);
    expect(examples.filter((e) => Array.isArray(e.nodes)).length).toBeGreaterThanOrEqual(3);
  });

  it.each(examples.map((e, i) => [i + 1, e] as const))("example %i validates", (_n, example) => {
    const definition = Array.isArray(example.nodes) ? example : { nodes: [example], edges: [] };
    const r = validateWorkflow(definition);
    expect(r.ok ? [] : r.errors).toEqual([]);
  });
});
