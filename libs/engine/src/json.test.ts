import { describe, expect, it } from "@jest/globals";
import { MAX_JSON_DEPTH, tooDeepAt } from "./index.ts";

/** An array nested `n` deep around `inner`. */
function nested(n: number, inner: unknown = 1): unknown {
  let v = inner;
  for (let i = 0; i < n; i++) v = [v];
  return v;
}

describe("tooDeepAt", () => {
  it("accepts values up to the limit and names where one goes past it", () => {
    expect(tooDeepAt({ a: nested(MAX_JSON_DEPTH - 1) })).toBeUndefined();
    expect(tooDeepAt(nested(MAX_JSON_DEPTH))).toBeUndefined();
    expect(tooDeepAt(nested(MAX_JSON_DEPTH + 1))).toBe(`$${"[0]".repeat(MAX_JSON_DEPTH)}`);
    expect(tooDeepAt({ ok: 1, x: { "a b": nested(3) } }, 3)).toBe('$.x["a b"][0]');
  });

  it("checks a value nested far deeper than the stack would allow a recursive walk", () => {
    expect(tooDeepAt(nested(200_000))).toMatch(/^\$(\[0\]){128}$/);
    expect(tooDeepAt({ wide: Array.from({ length: 10_000 }, (_, i) => ({ i })) })).toBeUndefined();
  });
});
