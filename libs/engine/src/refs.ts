/**
 * Large values by reference (seed 001 "tool result canonicalization"): a tool result
 * above the size threshold is stored once and the context holds `{ "$ref": "blob:<sha256>", "size": n }`.
 * Reads (`$.path`, expressions) see through references; the executor loads the blobs
 * a step needs and runs the step again when it asks for them.
 *
 * A reference to a value that reports token usage (`{ usage: { inputTokens, outputTokens,
 * totalTokens } }`, an LLM's or an embedding model's answer) keeps those numbers beside it,
 * `{ "$ref", "size", "usage" }`, so a node that stores the answer without reading it still
 * counts them (see {@link usageOf}). It is a reference all the same: reading through it gives
 * the whole value, whose own `usage` it is.
 */
import type { JsonObject, JsonValue } from "./json.ts";
import { isJsonObject } from "./json.ts";

export interface BlobRef {
  $ref: string;
  size: number;
  /** The token counts of the value's `usage`, when it has one. */
  usage?: JsonObject;
}

/** The token counts a reference keeps of a value. */
const USAGE_KEYS = ["inputTokens", "outputTokens", "totalTokens"] as const;

/**
 * The token counts of `value.usage` (the numbers the engine sums into a node's and the
 * execution's `tokenUsage`), or undefined when it reports none: what a reference to `value` keeps.
 */
export function usageOf(value: JsonValue | undefined): JsonObject | undefined {
  if (!isJsonObject(value) || !isJsonObject(value.usage)) return undefined;
  const out: JsonObject = {};
  for (const k of USAGE_KEYS) {
    const n = value.usage[k];
    if (typeof n === "number" && Number.isFinite(n)) out[k] = n;
  }
  return Object.keys(out).length > 0 ? out : undefined;
}

/**
 * Whether a value is a blob reference: an object whose `$ref` starts with `blob:` (other `$ref`s,
 * a JSON Schema's `"#/$defs/x"`, are plain data). The store names blobs `blob:<sha256 in hex>`;
 * a reference of another form names no blob.
 */
export function isBlobRef(v: JsonValue | undefined): v is JsonObject & { $ref: string } {
  return isJsonObject(v) && typeof v.$ref === "string" && v.$ref.startsWith("blob:");
}

/** Every blob reference inside a value. */
export function collectRefs(v: JsonValue | undefined, out: Set<string> = new Set()): Set<string> {
  if (isBlobRef(v)) out.add(v.$ref);
  else if (Array.isArray(v)) for (const x of v) collectRefs(x, out);
  else if (isJsonObject(v)) for (const x of Object.values(v)) collectRefs(x, out);
  return out;
}

/** Thrown by a step that needs blobs it was not given; the executor loads them and steps again. */
export class BlobsNeeded extends Error {
  override name = "BlobsNeeded";
  readonly refs: string[];
  constructor(refs: string[]) {
    super(`blobs needed: ${refs.join(", ")}`);
    this.refs = refs;
  }
}

/**
 * Thrown by a step that reads through references to blobs the caller found missing from the
 * store ({@link StepInput.missingBlobs}): the value cannot be read, now or later. The step
 * catches it and fails the execution with {@link BLOBS_MISSING}.
 */
export class BlobsMissing extends Error {
  override name = "BlobsMissing";
  readonly refs: string[];
  constructor(refs: string[]) {
    super(`the execution refers to blobs that are not stored: ${refs.join(", ")}`);
    this.refs = refs;
  }
}

/** The error code of a run failed because a value it holds refers to a blob that is not stored. */
export const BLOBS_MISSING = "BATON_ENGINE_BLOBS_MISSING";

/**
 * A copy of `v` with every reference replaced by its blob; throws {@link BlobsMissing} when a
 * reference is among `gone` (blobs known not to be stored), else {@link BlobsNeeded} for those
 * not in `blobs`.
 */
export function resolveRefs(v: JsonValue, blobs: ReadonlyMap<string, JsonValue>, gone?: ReadonlySet<string>): JsonValue {
  const refs = collectRefs(v);
  if (refs.size === 0) return v;
  const missing = [...refs].filter((r) => !blobs.has(r));
  const lost = gone ? missing.filter((r) => gone.has(r)) : [];
  if (lost.length > 0) throw new BlobsMissing(lost);
  if (missing.length > 0) throw new BlobsNeeded(missing);
  const walk = (x: JsonValue): JsonValue => {
    if (isBlobRef(x)) return walk(blobs.get(x.$ref)!);
    if (Array.isArray(x)) return x.map(walk);
    if (isJsonObject(x)) {
      const o: JsonObject = {};
      for (const [k, y] of Object.entries(x)) o[k] = walk(y);
      return o;
    }
    return x;
  };
  return walk(v);
}
