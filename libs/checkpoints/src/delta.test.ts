/**
 * Rules of the JSON diff/patch behind delta history:
 * - applying diff(a, b) to a gives b (deep-equal), for objects, arrays, scalars and
 *   mixed changes, including keys named `__proto__`;
 * - equal values (whatever their key order) diff to null;
 * - applying never changes its input;
 * - a one-field change of a large value gives a small patch; arrays are patched by
 *   index when that is shorter, replaced whole otherwise;
 * - a patch that does not fit the value is refused;
 * - diffJson makes exactly the patch of its plain definition (compare whole subtrees,
 *   recurse into unequal containers, choose index patch or whole array by comparing
 *   both serialised), on thousands of random pairs with escaped strings, surrogates,
 *   `__proto__` keys, numbers of every form and long arrays.
 */
import { describe, expect, it } from "@jest/globals";
import { applyPatch, diffJson, jsonEqual, type Json, type JsonPatch } from "./delta.ts";

/** The plain definition of diffJson (its first implementation): the reference the fast one must match. */
function referenceDiff(from: Json, to: Json): JsonPatch | null {
  const isObject = (v: Json): v is { [key: string]: Json } => typeof v === "object" && v !== null && !Array.isArray(v);
  const has = (o: object, k: string): boolean => Object.prototype.hasOwnProperty.call(o, k);
  const setKey = (o: Record<string, JsonPatch>, k: string, v: JsonPatch): void => {
    Object.defineProperty(o, k, { value: v, writable: true, enumerable: true, configurable: true });
  };
  if (jsonEqual(from, to)) return null;
  if (isObject(from) && isObject(to)) {
    const o: Record<string, JsonPatch> = {};
    for (const k of Object.keys(to)) {
      if (!has(from, k)) setKey(o, k, { $: to[k]! });
      else {
        const p = referenceDiff(from[k]!, to[k]!);
        if (p !== null) setKey(o, k, p);
      }
    }
    const r = Object.keys(from).filter((k) => !has(to, k));
    return r.length > 0 ? { o, r } : { o };
  }
  if (Array.isArray(from) && Array.isArray(to)) {
    const a: Record<string, JsonPatch> = {};
    for (let i = 0; i < to.length; i++) {
      if (i >= from.length) a[i] = { $: to[i]! };
      else {
        const p = referenceDiff(from[i]!, to[i]!);
        if (p !== null) a[i] = p;
      }
    }
    const byIndex: JsonPatch = { a, n: to.length };
    return JSON.stringify(byIndex).length < JSON.stringify(to).length ? byIndex : { $: to };
  }
  return { $: to };
}

/** A small seeded generator (mulberry32), so a failure reproduces. */
function random(seed: number): () => number {
  let t = seed;
  return () => {
    t = (t + 0x6d2b79f5) | 0;
    let x = Math.imul(t ^ (t >>> 15), 1 | t);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

const STRINGS = ["", "a", "plain text", 'quote " and \\ backslash', "new\nline\ttab\u0001", "✓ unicode", "😀 pair", "lone \ud800 surrogate", "x".repeat(300)];
const NUMBERS = [0, 1, -1, 1.5, 1e21, 1e-7, 123456789, Number.MAX_SAFE_INTEGER, -2.5e-300];
const KEYS = ["a", "b", "id", "__proto__", "with space", "0", "10", "ключ", 'q"uote'];

/** Random JSON, built with JSON.parse so `__proto__` keys are data, as in parsed states. */
function randomJson(rnd: () => number, depth: number): Json {
  const pick = <T>(xs: T[]): T => xs[Math.floor(rnd() * xs.length)]!;
  const r = rnd();
  if (depth <= 0 || r < 0.35) return pick<Json>([...STRINGS, ...NUMBERS, true, false, null]);
  if (r < 0.65) return Array.from({ length: Math.floor(rnd() * (rnd() < 0.1 ? 60 : 6)) }, () => randomJson(rnd, depth - 1));
  const entries = Array.from({ length: Math.floor(rnd() * 6) }, () => `${JSON.stringify(pick(KEYS))}:${JSON.stringify(randomJson(rnd, depth - 1))}`);
  return JSON.parse(`{${entries.join(",")}}`) as Json;
}

/** A copy of `v` with a few random changes: values replaced, keys added or removed, arrays grown or cut. */
function mutate(rnd: () => number, v: Json, depth: number): Json {
  if (rnd() < 0.08) return randomJson(rnd, depth);
  if (Array.isArray(v)) {
    const out = v.map((item) => (rnd() < 0.2 ? mutate(rnd, item, depth - 1) : item));
    if (rnd() < 0.2) out.push(randomJson(rnd, depth - 1));
    if (rnd() < 0.15) out.splice(Math.floor(rnd() * (out.length + 1)));
    return JSON.parse(JSON.stringify(out)) as Json;
  }
  if (typeof v === "object" && v !== null) {
    const entries = Object.keys(v).flatMap((k) => (rnd() < 0.1 ? [] : [[k, rnd() < 0.3 ? mutate(rnd, v[k]!, depth - 1) : v[k]!] as const]));
    if (rnd() < 0.2) entries.push([KEYS[Math.floor(rnd() * KEYS.length)]!, randomJson(rnd, depth - 1)]);
    return JSON.parse(`{${entries.map(([k, x]) => `${JSON.stringify(k)}:${JSON.stringify(x)}`).join(",")}}`) as Json;
  }
  return v;
}

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

  it("makes exactly the patch of its plain definition, on random values", () => {
    const rnd = random(20_250_301);
    for (let i = 0; i < 3_000; i++) {
      const from = randomJson(rnd, 4);
      const to = i % 10 === 0 ? randomJson(rnd, 4) : mutate(rnd, from, 4);
      const patch = diffJson(from, to);
      expect(JSON.stringify(patch)).toBe(JSON.stringify(referenceDiff(from, to)));
      expect(applyPatch(from, JSON.parse(JSON.stringify(patch)) as JsonPatch | null)).toEqual(to);
    }
  });

  it("chooses between an index patch and the whole array as its plain definition does, at every length", () => {
    // Around the break-even point the two forms' lengths are equal or one apart.
    for (let n = 0; n < 40; n++) {
      const items: ((i: number) => Json)[] = [
        ...["x", "xxxxxxxxxx", 'esc"aped', "😀", "\ud800"].map((text) => (i: number) => `${text}${i}`),
        ...[1, 1e21, 1.5e-7, -3].map((x) => (i: number) => x * (i + 1)),
        (i) => i % 2 === 0,
        (i) => (i % 3 === 0 ? null : { k: i, "__proto__": [i] }),
        (i) => (i % 2 === 0 ? {} : [[], i]),
      ];
      for (const item of items) {
        const long = Array.from({ length: n }, (_, i) => item(i));
        for (const [from, to] of [[long, long.slice(0, n >> 1)], [long.slice(0, n >> 1), long], [long, long.map((x, i) => (i === n - 1 ? "changed" : x))], [[...long, { deep: long }], long]] as Json[][]) {
          expect(JSON.stringify(diffJson(from!, to!))).toBe(JSON.stringify(referenceDiff(from!, to!)));
        }
      }
    }
  });

  it("refuses a patch that does not fit", () => {
    expect(() => applyPatch([1], { o: {} })).toThrow("not an object");
    expect(() => applyPatch({}, { a: {}, n: 1 })).toThrow("not an array");
    expect(() => applyPatch([1], { a: { 5: { $: 1 } }, n: 1 })).toThrow("out of range");
  });
});
