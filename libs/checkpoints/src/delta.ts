/**
 * A small structural diff/patch for JSON values, used to keep checkpoint history as
 * deltas. A patch turns one value into another:
 *
 * - `{ "$": value }` — replace the whole value;
 * - `{ "o": { key: patch, … }, "r": [key, …] }` — an object: patch or set the keys in
 *   `o` (a new key's patch is a `$`), remove the keys in `r`;
 * - `{ "a": { index: patch, … }, "n": length }` — an array: cut or extend it to `n`
 *   items, then patch the listed indices. Used when it is shorter than replacing the
 *   array whole.
 *
 * `diffJson` returns `null` when the two values are equal. `applyPatch` never changes
 * its input: changed containers are copied, unchanged subtrees are shared.
 */

/** Any JSON value. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** A change from one JSON value to another (see the module comment). */
export type JsonPatch = { $: Json } | { o: Record<string, JsonPatch>; r?: string[] } | { a: Record<string, JsonPatch>; n: number };

type JsonObject = { [key: string]: Json };

function isObject(v: Json | undefined): v is JsonObject {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

const has = (o: object, k: string): boolean => Object.prototype.hasOwnProperty.call(o, k);

/** Sets an own property, even one named `__proto__` (plain assignment would change the prototype). */
function setKey(o: Record<string, unknown>, k: string, v: unknown): void {
  if (k === "__proto__") Object.defineProperty(o, k, { value: v, writable: true, enumerable: true, configurable: true });
  else o[k] = v;
}

/** Structural equality of two JSON values (object key order does not matter). */
export function jsonEqual(a: Json | undefined, b: Json | undefined): boolean {
  if (a === b) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!jsonEqual(a[i], b[i])) return false;
    return true;
  }
  if (Array.isArray(b)) return false;
  const ka = Object.keys(a);
  if (ka.length !== Object.keys(b).length) return false;
  for (const k of ka) if (!has(b, k) || !jsonEqual(a[k], b[k])) return false;
  return true;
}

/**
 * The patch that turns `from` into `to`, or `null` when they are equal. One walk: a
 * container's patch is `null` exactly when none of its items differ (as {@link jsonEqual}
 * decides), so each subtree is visited once instead of being compared again at every level.
 */
export function diffJson(from: Json, to: Json): JsonPatch | null {
  if (from === to) return null;
  if (typeof from !== "object" || typeof to !== "object" || from === null || to === null) return { $: to };
  if (Array.isArray(from)) return Array.isArray(to) ? diffArrays(from, to) : { $: to };
  if (Array.isArray(to)) return { $: to };
  return diffObjects(from, to);
}

// A key whose value is undefined is absent, as in JSON (the values diffed may be the objects a
// caller put, not parsed JSON; see immutableStates in redis.ts).
const present = (o: JsonObject, k: string): boolean => has(o, k) && o[k] !== undefined;
const keysOf = (o: JsonObject): string[] => Object.keys(o).filter((k) => o[k] !== undefined);

function diffObjects(from: JsonObject, to: JsonObject): JsonPatch | null {
  let o: Record<string, JsonPatch> | undefined;
  let shared = 0;
  for (const k of keysOf(to)) {
    let p: JsonPatch | null;
    if (present(from, k)) {
      shared++;
      p = diffJson(from[k] as Json, to[k] as Json);
    } else p = { $: to[k] as Json };
    if (p !== null) setKey((o ??= {}), k, p);
  }
  // Every key of `from` is in `to` unless `from` has more keys than the two share.
  if (shared < keysOf(from).length) return { o: o ?? {}, r: keysOf(from).filter((k) => !present(to, k)) };
  return o === undefined ? null : { o };
}

// In an array, undefined is JSON's null.
const item = (a: Json[], i: number): Json => (a[i] === undefined ? null : a[i]);

function diffArrays(from: Json[], to: Json[]): JsonPatch | null {
  let a: Record<string, JsonPatch> | undefined;
  for (let i = 0; i < to.length; i++) {
    const p = i < from.length ? diffJson(item(from, i), item(to, i)) : { $: item(to, i) };
    if (p !== null) (a ??= {})[i] = p;
  }
  if (a === undefined && from.length === to.length) return null;
  const byIndex: JsonPatch = { a: a ?? {}, n: to.length };
  // Whichever is shorter as JSON; a long array with a few changes is not serialised whole.
  const size = JSON.stringify(byIndex).length;
  return jsonLength(to, size) > size ? byIndex : { $: to };
}

// Characters JSON.stringify escapes (lone surrogates included); strings without them serialise as `"…"`.
const ESCAPED = /[\u0000-\u001f"\\\ud800-\udfff]/;

/**
 * `JSON.stringify(v).length`, counted without building the string; once the count
 * passes `limit`, it stops and returns some number above `limit`.
 */
function jsonLength(v: Json, limit: number): number {
  if (typeof v === "string") return ESCAPED.test(v) ? JSON.stringify(v).length : v.length + 2;
  if (typeof v === "number") return Number.isFinite(v) ? String(v).length : 4;
  if (typeof v === "boolean") return v ? 4 : 5;
  if (v === null) return 4;
  // The opening bracket, then each item with the comma or closing bracket after it.
  let n = 1;
  if (Array.isArray(v)) {
    if (v.length === 0) return 2;
    for (let i = 0; i < v.length && n <= limit; i++) n += jsonLength(v[i] as Json, limit - n) + 1;
    return n;
  }
  const keys = Object.keys(v);
  if (keys.length === 0) return 2;
  for (let i = 0; i < keys.length && n <= limit; i++) {
    const k = keys[i] as string;
    n += jsonLength(k, limit - n) + 1;
    n += jsonLength(v[k] as Json, limit - n) + 1;
  }
  return n;
}

/** Thrown by {@link applyPatch} when a patch does not fit the value it is applied to. */
export class PatchMismatch extends Error {
  constructor(message: string) {
    super(message);
    this.name = "PatchMismatch";
  }
}

/** Applies a patch made by {@link diffJson}; `null` returns `base` itself. */
export function applyPatch(base: Json, patch: JsonPatch | null): Json {
  if (patch === null) return base;
  if (typeof patch !== "object") throw new PatchMismatch("a patch must be an object");
  if (has(patch, "$")) return (patch as { $: Json }).$;
  if (has(patch, "o")) {
    if (!isObject(base)) throw new PatchMismatch("an object patch applied to a value that is not an object");
    const { o, r } = patch as { o: Record<string, JsonPatch>; r?: string[] };
    const out: JsonObject = {};
    for (const k of Object.keys(base)) setKey(out, k, base[k]);
    for (const k of Object.keys(o)) setKey(out, k, applyPatch(has(base, k) ? (base[k] as Json) : null, o[k] as JsonPatch));
    for (const k of r ?? []) delete out[k];
    return out;
  }
  if (has(patch, "a")) {
    if (!Array.isArray(base)) throw new PatchMismatch("an array patch applied to a value that is not an array");
    const { a, n } = patch as { a: Record<string, JsonPatch>; n: number };
    if (!Number.isSafeInteger(n) || n < 0) throw new PatchMismatch("an array patch needs a length");
    const out: Json[] = base.slice(0, n);
    while (out.length < n) out.push(null);
    for (const k of Object.keys(a)) {
      const i = Number(k);
      if (!Number.isSafeInteger(i) || i < 0 || i >= n) throw new PatchMismatch(`array patch index ${k} is out of range`);
      out[i] = applyPatch(i < base.length ? (base[i] as Json) : null, a[k] as JsonPatch);
    }
    return out;
  }
  throw new PatchMismatch("unknown patch shape");
}
