/**
 * Rules of the JSON diff/patch behind delta history:
 * - applying diff(a, b) to a gives b (deep-equal), for objects, arrays, scalars and
 *   mixed changes, including keys named `__proto__`;
 * - equal values (whatever their key order) diff to null;
 * - applying never changes its input;
 * - a one-field change of a large value gives a small patch; arrays are patched by
 *   index when that is shorter, replaced whole otherwise;
 * - a patch that does not fit the value is refused.
 */
import { describe, expect, it } from "@jest/globals";
import { applyPatch, diffJson, jsonEqual, type Json } from "./delta.ts";

const pairs: [string, Json, Json][] = [
  ["scalar to scalar", 1, "one"],
  ["object keys set, changed and removed", { a: 1, b: { c: [1, 2], d: "x" }, gone: true }, { a: 2, b: { c: [1, 2], d: "y", e: null }, added: {} }],
  ["array grows", [1, 2, 3], [1, 2, 3, { x: 4 }]],
  ["array shrinks", [{ a: 1 }, { b: 2 }, { c: 3 }], [{ a: 1 }]],
  ["array item edited", [{ deep: { k: 1 } }, 2], [{ deep: { k: 2 } }, 2]],
  ["object becomes array", { a: 1 }, [1]],
  ["array becomes null", [1], null],
  ["empty containers", { a: {}, b: [] }, { a: [], b: {} }],
];

describe("diffJson / applyPatch", () => {
  it.each(pairs)("round-trips: %s", (_name, from, to) => {
    const before = JSON.stringify(from);
    const patch = diffJson(from, to);
    const wire = JSON.parse(JSON.stringify(patch)) as ReturnType<typeof diffJson>;
    expect(applyPatch(from, wire)).toEqual(to);
    expect(JSON.stringify(from)).toBe(before);
  });

  it("keeps keys named __proto__ as data", () => {
    const from = JSON.parse('{"__proto__": {"a": 1}, "x": 1}') as Json;
    const to = JSON.parse('{"__proto__": {"a": 2}, "x": 1}') as Json;
    const out = applyPatch(from, JSON.parse(JSON.stringify(diffJson(from, to))) as ReturnType<typeof diffJson>);
    expect(JSON.stringify(out)).toBe('{"__proto__":{"a":2},"x":1}');
    expect(Object.getPrototypeOf(out)).toBe(Object.prototype);
  });

  it("diffs equal values to null regardless of key order", () => {
    expect(diffJson({ a: 1, b: [1, { c: 2, d: 3 }] }, { b: [1, { d: 3, c: 2 }], a: 1 })).toBeNull();
    expect(jsonEqual([1], { 0: 1 })).toBe(false);
  });

  it("makes a small patch for a one-field change of a large value", () => {
    const big = { items: Array.from({ length: 500 }, (_, i) => ({ id: i, text: "x".repeat(50) })), counter: 1 };
    const next = { ...big, counter: 2, items: big.items.map((it, i) => (i === 250 ? { ...it, text: "changed" } : it)) };
    const patch = diffJson(big, next);
    expect(JSON.stringify(patch).length).toBeLessThan(100);
    expect(applyPatch(big, patch)).toEqual(next);
    // Every item changed: replacing the array is shorter than patching each index.
    expect(diffJson([1, 2, 3], [4, 5, 6])).toEqual({ $: [4, 5, 6] });
  });

  it("refuses a patch that does not fit", () => {
    expect(() => applyPatch([1], { o: {} })).toThrow("not an object");
    expect(() => applyPatch({}, { a: {}, n: 1 })).toThrow("not an array");
    expect(() => applyPatch([1], { a: { 5: { $: 1 } }, n: 1 })).toThrow("out of range");
  });
});
