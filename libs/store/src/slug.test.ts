/**
 * Rules: a derived slug is lowercase ASCII words joined by single dashes, accents are
 * dropped, it is never empty and never longer than SLUG_MAX; explicit slugs are checked
 * against the same shape.
 */
import { describe, expect, it } from "@jest/globals";
import { isSlug, requireSlug, SLUG_MAX, slugify } from "./slug.ts";

function codeOf(fn: () => unknown): unknown {
  try {
    fn();
  } catch (err) {
    return (err as { code?: unknown }).code;
  }
  return undefined;
}

describe("slugify", () => {
  it("lowercases, drops accents and joins words with one dash", () => {
    expect(slugify("Résumé → Summary v2")).toBe("resume-summary-v2");
    expect(slugify("  Hello,   World!! ")).toBe("hello-world");
    expect(slugify("a__b--c")).toBe("a-b-c");
  });
  it("never returns an empty or too long slug", () => {
    expect(slugify("日本語")).toBe("workflow");
    expect(slugify("!!!")).toBe("workflow");
    const long = slugify(`${"ab ".repeat(80)}`);
    expect(long.length).toBeLessThanOrEqual(SLUG_MAX);
    expect(isSlug(long)).toBe(true);
  });
  it("accepts only well-formed explicit slugs", () => {
    expect(requireSlug("my-flow-2")).toBe("my-flow-2");
    for (const bad of ["", "My-Flow", "a--b", "-a", "a-", "a b", "x".repeat(SLUG_MAX + 1), 7]) {
      expect(codeOf(() => requireSlug(bad))).toBe("BATON_STORE_INVALID_INPUT");
    }
  });
});
