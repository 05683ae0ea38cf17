/**
 * Workflow slugs: URL-safe, lowercase ASCII words joined by single dashes.
 */
import { createHash } from "node:crypto";
import { StoreInvalidInput } from "./errors.ts";

/** The longest slug the store accepts or derives. */
export const SLUG_MAX = 100;
const SLUG_RE = /^[a-z0-9]+(?:-[a-z0-9]+)*$/;

/** Latin letters that do not decompose into a base letter and an accent. */
const LATIN_EXTRA: Readonly<Record<string, string>> = { ß: "ss", æ: "ae", œ: "oe", ø: "o", ł: "l", đ: "d", ð: "d", þ: "th", ı: "i" };

/**
 * Derives a slug from a name: accents dropped, lowercase, every run of other
 * characters turned into one dash, at most {@link SLUG_MAX} characters. Letters and digits
 * that have no ASCII form (other scripts: 日本語, Ελληνικά, Русский) cannot be spelled in a
 * slug; a name that has any gets a suffix of 8 hex digits from a hash of the whole name, so
 * two such names that differ get different slugs (and the same name the same one), where
 * they would otherwise all be `"workflow"` or share their ASCII part. A name with no usable
 * character and nothing of another script gives `"workflow"`.
 * @example slugify("Résumé → Summary v2") // "resume-summary-v2"
 * @example slugify("請假審批") // "workflow-" + 8 hex digits
 */
export function slugify(name: string): string {
  const plain = name
    .normalize("NFKD")
    .replace(/[\u0300-\u036f]/g, "")
    .toLowerCase()
    .replace(/[ßæœøłđðþı]/g, (c) => LATIN_EXTRA[c]!);
  const cut = (s: string, max: number): string => s.slice(0, max).replace(/-+$/g, "");
  const base = cut(plain.replace(/[^a-z0-9]+/g, "-").replace(/^-+|-+$/g, ""), SLUG_MAX);
  if (!/[\p{L}\p{N}]/u.test(plain.replace(/[a-z0-9]+/g, ""))) return base.length > 0 ? base : "workflow";
  const suffix = createHash("sha256").update(name.normalize("NFC")).digest("hex").slice(0, 8);
  return `${cut(base, SLUG_MAX - suffix.length - 1) || "workflow"}-${suffix}`;
}

/** True when `slug` is a valid slug. */
export function isSlug(slug: string): boolean {
  return slug.length <= SLUG_MAX && SLUG_RE.test(slug);
}

/** Returns `slug` or throws `BATON_STORE_INVALID_INPUT`. */
export function requireSlug(slug: unknown): string {
  if (typeof slug !== "string" || !isSlug(slug)) {
    throw StoreInvalidInput(`slug must match ${String(SLUG_RE)} and be at most ${SLUG_MAX} characters`);
  }
  return slug;
}
