/**
 * Rules of clonePlain (the engine's copy of a state before a step changes it):
 * - it equals what structuredClone makes for plain data, undefined-valued keys included;
 * - the copy shares nothing mutable with the source;
 * - an own "__proto__" key stays an own key; a Date or Map inside is copied by structuredClone.
 */
import { describe, expect, it } from "@jest/globals";
import { clonePlain } from "./json.ts";

describe("clonePlain", () => {
  const source = {
    status: "running",
    n: 3,
    flag: false,
    nothing: null,
    gone: undefined,
    nodes: { a: { status: "completed", attempt: 1, output: { list: [1, "two", { three: [3] }] } } },
    ready: ["b", "c"],
    empty: {},
    none: [],
  };

  it("equals structuredClone's copy, undefined-valued keys included", () => {
    const copy = clonePlain(source);
    expect(copy).toStrictEqual(structuredClone(source));
    expect(Object.keys(copy)).toEqual(Object.keys(source));
    expect("gone" in copy).toBe(true);
  });

  it("shares nothing mutable with the source", () => {
    const copy = clonePlain(source);
    copy.nodes.a.output.list.push(4);
    (copy.nodes.a.output.list[2] as { three: number[] }).three.push(4);
    copy.ready.pop();
    expect(source.nodes.a.output.list).toEqual([1, "two", { three: [3] }]);
    expect(source.ready).toEqual(["b", "c"]);
    expect(copy.nodes).not.toBe(source.nodes);
  });

  it("keeps an own __proto__ key as a key and copies other objects with structuredClone", () => {
    const parsed = JSON.parse('{"__proto__": {"polluted": true}, "x": 1}') as Record<string, unknown>;
    const copy = clonePlain(parsed);
    expect(Object.getPrototypeOf(copy)).toBe(Object.prototype);
    expect(Object.keys(copy)).toEqual(["__proto__", "x"]);
    expect((copy as { polluted?: boolean }).polluted).toBeUndefined();
    const at = new Date(0);
    const withDate = clonePlain({ at, m: new Map([["k", 1]]) });
    expect(withDate.at).toEqual(at);
    expect(withDate.at).not.toBe(at);
    expect(withDate.m.get("k")).toBe(1);
    expect(clonePlain(7)).toBe(7);
    expect(clonePlain(null)).toBeNull();
  });
});
