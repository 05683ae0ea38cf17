/**
 * Large values by reference (seed 001 "tool result canonicalization"): a tool result
 * above the size threshold is stored once and the context holds `{ "$ref": "blob:<sha256>", "size": n }`.
 * Reads (`$.path`, expressions) see through references; the executor loads the blobs
 * a step needs and runs the step again when it asks for them.
 */
import type { JsonObject, JsonValue } from "./json.ts";
import { isJsonObject } from "./json.ts";

export interface BlobRef {
  $ref: string;
  size: number;
}

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

/** A copy of `v` with every reference replaced by its blob; throws {@link BlobsNeeded} for missing ones. */
export function resolveRefs(v: JsonValue, blobs: ReadonlyMap<string, JsonValue>): JsonValue {
  const refs = collectRefs(v);
  if (refs.size === 0) return v;
  const missing = [...refs].filter((r) => !blobs.has(r));
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
