/**
 * A state-machine comparison guard `{ left, op, right }` means what the condition node's op of
 * the same name means: for every op, on the same context, the edge the importer's guard sits on
 * is taken by the step function exactly when a condition node's config (condition.ts) is true.
 * Operands are paths to values of every kind (missing, null, {}, [], "", 0, numbers, numeric
 * strings, booleans, arrays of those, objects with their keys in either order), literals, and
 * templates with paths inside. Each check is one step: a node with one guarded edge per case,
 * all decided when it completes.
 */
import { describe, expect, it } from "@jest/globals";
import type { JsonObject, JsonValue } from "../json.ts";
import { evaluateCondition } from "../condition.ts";
import { CONDITION_OPS } from "../model.ts";
import type { Comparison, WorkflowDefinition } from "../model.ts";
import { step } from "../step.ts";
import { validateWorkflow } from "../validate.ts";
import { guardToCondition } from "./stateMachine.ts";

const MISSING = Symbol("missing");
type Value = JsonValue | typeof MISSING;
type Guard = { left: JsonValue; op: string; right?: JsonValue };

const VALUES: Value[] = [
  MISSING, null, {}, [], "", 0, 1, -1, 2.5, 3, "2", "3", "10", " 5 ", "-0", "0x10", "abc", "a", "Abc", true, false,
  [0], [1, 2], ["a"], ["a", "b"], [null], [[1]], [[]], [" -3 "], ["Infinity"], [{}], [true],
  { a: 1 }, { a: 1, b: 2 }, { b: 2, a: 1 }, { a: [1] }, { a: null },
];
const show = (v: Value): string => (v === MISSING ? "missing" : JSON.stringify(v));

/**
 * Each guard as the importer makes it, decided by the engine: a run whose input is `input` starts
 * at a node with one edge per guard; the first step completes it and decides every edge. Returns,
 * per guard, whether its edge was taken and what a condition node with the guard as its config
 * says on the same context.
 */
async function decide(guards: readonly Guard[], input: JsonObject): Promise<Array<{ guard: Guard; edge: boolean; node: boolean }>> {
  const conditions = guards.map((g) => {
    const c = guardToCondition(g);
    if (!("condition" in c)) throw new Error(`${JSON.stringify(g)}: ${c.message}`);
    return c.condition;
  });
  // Kept as written: a comparison, not an expression that imitates one.
  expect(conditions).toEqual(guards);
  // Written in its parsed form: validating thousands of edges per check would be most of the test's time.
  const definition: WorkflowDefinition = {
    schemaVersion: 1,
    start: "s",
    nodes: [{ id: "s", type: "setVariable", config: { values: {} } }, ...guards.map((_, k) => ({ id: `t${k}`, type: "setVariable", config: { values: {} } }))],
    edges: conditions.map((condition, k) => ({ from: "s", to: `t${k}`, condition })),
  };
  const r = await step({ definition, state: null, command: { kind: "start", input }, now: "2026-01-01T00:00:00.000Z", identity: { executionId: 1, tenantId: "t_1", workflowId: 1, workflowVersion: 1 } });
  return guards.map((guard, k) => ({ guard, edge: r.state.edges[`s->t${k}`] === "taken", node: evaluateCondition(guard as Comparison, r.state.context) }));
}

/** `VALUES` as an input object `{ x0: ..., x1: ... }` (missing left out), read at `$.input.x<i>`. */
const input: JsonObject = {};
VALUES.forEach((v, i) => {
  if (v !== MISSING) input[`x${i}`] = v;
});
const at = (i: number): string => `$.input.x${i}`;

describe("comparison guards mean what the condition node's ops mean", () => {
  it.each(CONDITION_OPS.map((op) => [op]))("%s: two $.paths, every pair of values", async (op) => {
    const cases = VALUES.flatMap((a, i) => VALUES.map((b, j) => ({ what: `${show(a)} ${op} ${show(b)}`, guard: { left: at(i), op, right: at(j) } })));
    const decided = await decide(cases.map((c) => c.guard), input);
    expect(decided.flatMap((d, k) => (d.edge === d.node ? [] : [`${cases[k]!.what}: edge ${d.edge}, node ${d.node}`]))).toEqual([]);
  });

  it.each(CONDITION_OPS.map((op) => [op]))("%s: a path against a literal on either side, and no right at all", async (op) => {
    const cases: Array<{ what: string; guard: Guard }> = [];
    VALUES.forEach((a, i) => {
      for (const b of VALUES) {
        if (b === MISSING) continue;
        cases.push(
          { what: `${show(a)} ${op} ${show(b)} (literal)`, guard: { left: at(i), op, right: b } },
          { what: `${show(b)} (literal) ${op} ${show(a)}`, guard: { left: b, op, right: at(i) } },
        );
      }
      cases.push({ what: `${show(a)} ${op} (no right)`, guard: { left: at(i), op } });
    });
    const decided = await decide(cases.map((c) => c.guard), input);
    expect(decided.flatMap((d, k) => (d.edge === d.node ? [] : [`${cases[k]!.what}: edge ${d.edge}, node ${d.node}`]))).toEqual([]);
  });

  it("resolves paths inside array and object operands like a node input (missing → null in arrays, key left out in objects)", async () => {
    const operands: JsonValue[] = [["$.input.a", "x"], ["$.input.gone", 1], [["$.input.a"]], { k: "$.input.a" }, { k: "$.input.gone", j: 1 }, { k: ["$.input.a"] }];
    const some: Value[] = [MISSING, null, [], {}, "", 0, 3, "3", [1, 2], { a: 1 }];
    const guards = operands.flatMap((x) => [...operands, ["x"], [1], [null], { k: 1, j: 1 }, { j: 1 }, "$.input.a"].flatMap((y) => CONDITION_OPS.map((op) => ({ left: x, op, right: y }))));
    const differ: string[] = [];
    for (const a of some) {
      for (const d of await decide(guards, a === MISSING ? {} : { a })) {
        if (d.edge !== d.node) differ.push(`${JSON.stringify(d.guard)} with a = ${show(a)}: edge ${d.edge}, node ${d.node}`);
      }
    }
    expect(differ).toEqual([]);
  });

  it("reads paths as $.path reads do: no mapping over arrays, indexes only into arrays, $ is the whole context", async () => {
    const cases: Array<[Guard, boolean]> = [
      [{ left: "$.input.list.s", op: "eq", right: "done" }, false],
      [{ left: "$.input.list.s", op: "exists" }, false],
      [{ left: "$.input.list[0].s", op: "eq", right: "done" }, true],
      [{ left: "$.input.obj[0]", op: "exists" }, false],
      [{ left: '$.input.obj["0"]', op: "eq", right: "zero" }, true],
      [{ left: '$.input.obj["a b"][1]', op: "gte", right: 7 }, true],
      [{ left: '$.input.obj["a b"][0]', op: "exists" }, false],
      [{ left: '$.input.obj["a b"][0]', op: "eq", right: null }, true],
      [{ left: "$", op: "truthy" }, true],
    ];
    const decided = await decide(cases.map(([g]) => g), { list: [{ s: "done" }], obj: { "0": "zero", "a b": [null, 7] } });
    expect(decided.map((d) => [d.guard, d.edge, d.node])).toEqual(cases.map(([g, expected]) => [g, expected, expected]));
  });

  it("an imported comparison guard is a valid edge condition", () => {
    const c = guardToCondition({ left: "$.a.list", op: "contains", right: { k: ["$.input.x"] } });
    const v = validateWorkflow({ nodes: [{ id: "a", type: "setVariable", config: { values: {} } }, { id: "b", type: "setVariable", config: { values: {} } }], edges: [{ from: "a", to: "b", condition: "condition" in c ? c.condition : null }] });
    expect(v.ok && v.workflow.edges[0]!.condition).toEqual({ left: "$.a.list", op: "contains", right: { k: ["$.input.x"] } });
  });

  it("guardToCondition refuses a comparison without left, an unknown op and a path that does not parse", () => {
    expect(guardToCondition({ op: "exists" })).toEqual({ code: "invalid_guard", message: "a comparison { left, op, right } needs left" });
    expect(guardToCondition({ left: 1, op: "near" })).toMatchObject({ code: "invalid_guard", message: expect.stringContaining('unknown guard op "near"') });
    expect(guardToCondition({ left: "$.a b", op: "exists" })).toMatchObject({ code: "invalid_guard", message: expect.stringMatching(/^left: /) });
    expect(guardToCondition({ left: 1, op: "in", right: ["$.ok", "$.a..b"] })).toMatchObject({ code: "invalid_guard", message: expect.stringMatching(/^right\[1\]: /) });
  });
});
