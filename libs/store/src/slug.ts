/**
 * Workflow slugs: URL-safe, lowercase ASCII words joined by single dashes.
 */
import { StoreInvalidInput } from "./errors.ts";

/** The longest slug the store accepts or derives. */
export const SLUG_MAX = 100;
const SLUG_RE = /^[a-z0-9]+(?:-[a-z0-9]+)*$/;

/**
 * Derives a slug from a name: accents dropped, lowercase, every run of other
 * characters turned into one dash, at most {@link SLUG_MAX} characters. A name with no
 * usable character gives `"workflow"`.
 * @example slugify("Résumé → Summary v2") // "resume-summary-v2"
 */
export function slugify(name: string): string {
  const base = name
    .normalize("NFKD")
    .replace(/[\u0300-\u036f]/g, "")
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-+|-+$/g, "")
    .slice(0, SLUG_MAX)
    .replace(/-+$/g, "");
  return base.length > 0 ? base : "workflow";
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
