/**
 * A state-machine comparison guard `{ left, op, right }` means what the condition node's op of
 * the same name means: for every op, on the same context, the generated JSONata (evaluated as
 * the engine evaluates an edge condition) and condition.ts give the same answer. Operands are
 * paths to values of every kind (missing, null, {}, [], "", 0, numbers, numeric strings,
 * booleans, arrays of those, objects with their keys in either order), literals, and templates
 * with paths inside.
 */
import { describe, expect, it } from "@jest/globals";
import type { JsonObject, JsonValue } from "../json.ts";
import { evaluateCondition } from "../condition.ts";
import { evaluateExpression, truthy } from "../expr.ts";
import { COMPARISON_OPS } from "./guards.ts";
import { guardToJsonata } from "./stateMachine.ts";

const MISSING = Symbol("missing");
type Value = JsonValue | typeof MISSING;

const VALUES: Value[] = [
  MISSING, null, {}, [], "", 0, 1, -1, 2.5, 3, "2", "3", "10", " 5 ", "-0", "0x10", "abc", "a", "Abc", true, false,
  [0], [1, 2], ["a"], ["a", "b"], [null], [[1]], [[]], [" -3 "], ["Infinity"], [{}], [true],
  { a: 1 }, { a: 1, b: 2 }, { b: 2, a: 1 }, { a: [1] }, { a: null },
];
const show = (v: Value): string => (v === MISSING ? "missing" : JSON.stringify(v));

async function both(cfg: { left: JsonValue; op: string; right?: JsonValue }, context: JsonObject): Promise<[boolean, boolean]> {
  const node = evaluateCondition(cfg as never, context);
  const g = guardToJsonata(cfg.right === undefined ? { left: cfg.left, op: cfg.op } : cfg);
  if ("code" in g) throw new Error(g.message);
  const guard = truthy(await evaluateExpression(g.expression, context, "2026-01-01T00:00:00.000Z", { output: null }));
  return [guard, node];
}

describe("comparison guards mean what the condition node's ops mean", () => {
  it.each(COMPARISON_OPS.map((op) => [op]))("%s: two $.paths, every pair of values", async (op) => {
    const differ: string[] = [];
    for (const a of VALUES) {
      for (const b of VALUES) {
        const v: JsonObject = {};
        if (a !== MISSING) v.a = a;
        if (b !== MISSING) v.b = b;
        const [guard, node] = await both({ left: "$.v.a", op, right: "$.v.b" }, { input: {}, v });
        if (guard !== node) differ.push(`${show(a)} ${op} ${show(b)}: guard ${guard}, node ${node}`);
      }
    }
    expect(differ).toEqual([]);
  });

  it.each(COMPARISON_OPS.map((op) => [op]))("%s: a path against a literal on either side, and no right at all", async (op) => {
    const differ: string[] = [];
    for (const a of VALUES) {
      const v: JsonObject = a === MISSING ? {} : { a };
      for (const b of VALUES) {
        if (b === MISSING) continue;
        for (const cfg of [{ left: "$.v.a", op, right: b }, { left: b, op, right: "$.v.a" }]) {
          const [guard, node] = await both(cfg, { input: {}, v });
          if (guard !== node) differ.push(`${JSON.stringify(cfg)} with a = ${show(a)}: guard ${guard}, node ${node}`);
        }
      }
      const [guard, node] = await both({ left: "$.v.a", op }, { input: {}, v });
      if (guard !== node) differ.push(`${show(a)} ${op} (no right): guard ${guard}, node ${node}`);
    }
    expect(differ).toEqual([]);
  });

  it("resolves paths inside array and object operands like a node input (missing → null in arrays, key left out in objects)", async () => {
    const differ: string[] = [];
    const operands: JsonValue[] = [["$.v.a", "x"], ["$.v.gone", 1], [["$.v.a"]], { k: "$.v.a" }, { k: "$.v.gone", j: 1 }, { k: ["$.v.a"] }];
    const some: Value[] = [MISSING, null, [], {}, "", 0, 3, "3", [1, 2], { a: 1 }];
    for (const a of some) {
      const v: JsonObject = a === MISSING ? {} : { a };
      for (const x of operands) {
        for (const y of [...operands, ["x"], [1], [null], { k: 1, j: 1 }, { j: 1 }, "$.v.a"]) {
          for (const op of COMPARISON_OPS) {
            const [guard, node] = await both({ left: x, op, right: y }, { input: {}, v });
            if (guard !== node) differ.push(`${JSON.stringify(x)} ${op} ${JSON.stringify(y)} with a = ${show(a)}: guard ${guard}, node ${node}`);
          }
        }
      }
    }
    expect(differ).toEqual([]);
  });

  it("reads paths as $.path reads do: no mapping over arrays, indexes only into arrays, $ is the whole context", async () => {
    const context: JsonObject = { input: {}, list: [{ s: "done" }], obj: { "0": "zero", "a b": [null, 7] } };
    const cases: Array<[{ left: JsonValue; op: string; right?: JsonValue }, boolean]> = [
      [{ left: "$.list.s", op: "eq", right: "done" }, false],
      [{ left: "$.list.s", op: "exists" }, false],
      [{ left: "$.list[0].s", op: "eq", right: "done" }, true],
      [{ left: "$.obj[0]", op: "exists" }, false],
      [{ left: '$.obj["0"]', op: "eq", right: "zero" }, true],
      [{ left: '$.obj["a b"][1]', op: "gte", right: 7 }, true],
      [{ left: '$.obj["a b"][0]', op: "exists" }, false],
      [{ left: '$.obj["a b"][0]', op: "eq", right: null }, true],
      [{ left: "$", op: "truthy" }, true],
    ];
    for (const [cfg, expected] of cases) expect([cfg, ...(await both(cfg, context))]).toEqual([cfg, expected, expected]);
  });

  it("guardToJsonata refuses a comparison without left and a path that does not parse", () => {
    expect(guardToJsonata({ op: "exists" })).toEqual({ code: "invalid_guard", message: "a comparison { left, op, right } needs left" });
    expect(guardToJsonata({ left: "$.a b", op: "exists" })).toMatchObject({ code: "invalid_guard" });
    expect(guardToJsonata({ left: 1, op: "in", right: ["$.ok", "$.a..b"] })).toMatchObject({ code: "invalid_guard" });
  });
});
