/**
 * Rules: a derived slug is lowercase ASCII words joined by single dashes, accents are
 * dropped, it is never empty and never longer than SLUG_MAX; names with letters of other
 * scripts get a hash suffix, so different names do not share a slug; explicit slugs are checked
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
    expect(slugify("!!!")).toBe("workflow");
    const long = slugify(`${"ab ".repeat(80)}`);
    expect(long.length).toBeLessThanOrEqual(SLUG_MAX);
    expect(isSlug(long)).toBe(true);
  });
  it("spells the Latin letters that have no accent to drop", () => {
    expect(slugify("Straße Ærø Łódź")).toBe("strasse-aero-lodz");
  });
  it("tells apart names in other scripts by a hash of the name, where they would share a slug", () => {
    const a = slugify("請假審批");
    const b = slugify("報銷流程");
    expect(a).toMatch(/^workflow-[0-9a-f]{8}$/);
    expect(b).toMatch(/^workflow-[0-9a-f]{8}$/);
    expect(a).not.toBe(b);
    expect(slugify("請假審批")).toBe(a);
    // The ASCII part stays readable; the names differ only in what it cannot spell.
    const v1 = slugify("Заявка v2");
    const v2 = slugify("Отчёт v2");
    expect(v1).toMatch(/^v2-[0-9a-f]{8}$/);
    expect(v1).not.toBe(v2);
    const long = slugify(`${"ab ".repeat(80)}日本`);
    expect(long.length).toBeLessThanOrEqual(SLUG_MAX);
    expect(isSlug(long)).toBe(true);
    expect(long).toMatch(/-[0-9a-f]{8}$/);
  });
  it("accepts only well-formed explicit slugs", () => {
    expect(requireSlug("my-flow-2")).toBe("my-flow-2");
    for (const bad of ["", "My-Flow", "a--b", "-a", "a-", "a b", "x".repeat(SLUG_MAX + 1), 7]) {
      expect(codeOf(() => requireSlug(bad))).toBe("BATON_STORE_INVALID_INPUT");
    }
  });
});
