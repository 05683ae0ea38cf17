import { describe, expect, it } from "@jest/globals";
import { sizeAgainst, sizeOf } from "./size.ts";

/** A small seeded generator, so a failure names a reproducible case. */
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

const strings = ["", "plain", 'quote " and \\ backslash', "line\nbreak", "tab\there", "\u0001ctl", "é ü ✓", "\ud83d\ude00", "lone \ud800"];

function value(r: () => number, depth: number): unknown {
  const k = Math.floor(r() * (depth > 2 ? 5 : 8));
  switch (k) {
    case 0:
      return null;
    case 1:
      return r() < 0.5;
    case 2:
      return Math.floor(r() * 2000) - 1000 + (r() < 0.3 ? 0.25 : 0);
    case 3:
      return strings[Math.floor(r() * strings.length)];
    case 4:
      return undefined;
    case 5:
    case 6:
      return Array.from({ length: Math.floor(r() * 6) }, () => value(r, depth + 1));
    default: {
      const o: Record<string, unknown> = {};
      for (let i = Math.floor(r() * 5); i > 0; i--) o[strings[Math.floor(r() * strings.length)]! + i] = value(r, depth + 1);
      return o;
    }
  }
}

/** A copy of `v` with one part replaced, sharing everything else (as the engine changes a state). */
function changed(v: unknown, r: () => number): unknown {
  if (Array.isArray(v)) {
    const list = v as unknown[];
    if (list.length === 0 || r() < 0.15) return [...list, value(r, 2)];
    const copy = list.slice();
    const i = Math.floor(r() * list.length);
    copy[i] = r() < 0.6 ? changed(list[i], r) : value(r, 2);
    return copy;
  }
  if (v !== null && typeof v === "object") {
    const keys = Object.keys(v);
    const copy: Record<string, unknown> = { ...(v as Record<string, unknown>) };
    if (keys.length === 0 || r() < 0.15) copy[`k${Math.floor(r() * 100)}`] = value(r, 2);
    else if (r() < 0.1) delete copy[keys[0]!];
    else {
      const k = keys[Math.floor(r() * keys.length)]!;
      copy[k] = r() < 0.6 ? changed(copy[k], r) : value(r, 2);
    }
    return copy;
  }
  return value(r, 2);
}

const json = (v: unknown): number => (JSON.stringify(v) ?? "null").length;

describe("JSON sizes of immutable states", () => {
  it("sizeOf is the length of JSON.stringify, undefined keys left out and undefined items as null", () => {
    const r = rng(1);
    for (let i = 0; i < 300; i++) {
      const v = { items: [value(r, 0), value(r, 0)], x: value(r, 0) };
      expect([i, sizeOf(v)]).toEqual([i, json(v)]);
    }
  });

  it("sizeAgainst the state before gives the same length, along chains of changes that share the rest", () => {
    for (let seed = 1; seed <= 40; seed++) {
      const r = rng(seed);
      // A state like a forEach's: a long list of small items beside other parts.
      let state: unknown = { context: { input: { xs: Array.from({ length: 50 }, (_, i) => ({ i, s: strings[i % strings.length] })) } }, items: Array.from({ length: 40 }, () => value(r, 1)), meta: value(r, 0) };
      sizeOf(state);
      for (let step = 0; step < 30; step++) {
        const next = changed(state, r);
        expect([seed, step, sizeAgainst(next, state)]).toEqual([seed, step, json(next)]);
        state = next;
      }
    }
  });

  it("sizeAgainst a state never measured, or of another shape, measures the whole", () => {
    const a = { list: [1, 2, 3], o: { k: "v" } };
    const b = { list: [1, 2, 3, 4], o: [1] };
    expect(sizeAgainst(b, a)).toBe(json(b));
    expect(sizeAgainst([{ x: 1 }, { y: undefined }], { not: "an array" })).toBe(json([{ x: 1 }, { y: undefined }]));
    expect(sizeAgainst("text", null)).toBe(json("text"));
  });
});
