/**
 * Large tool results (and, mirrored, large arguments: {@link LARGE_ARGS_BUCKET}): a result whose JSON is larger than a worker sends inline is stored in
 * the object bucket {@link LARGE_RESULTS_BUCKET} (`Bus.objects`, JetStream only: workers have
 * no database) as its canonical JSON, and the answer and the result record carry an
 * `object:` reference instead (`objectRefJson` of @baton/bus). The executor moves the value
 * into its blob store, where it is kept once and referenced (`blob:<sha256>`), and deletes
 * the object. The reference's `sha256` is the digest of the canonical JSON, which is the
 * blob's hash: an answer sent again after the object is gone still finds its blob.
 */
import { createHash } from "node:crypto";
import type { JsonValue } from "./tool.ts";

/** The object bucket of large tool results (stream `OBJ_{prefix}_tool_results_large`). */
export const LARGE_RESULTS_BUCKET = "tool_results_large";
/**
 * The object bucket of large tool-call arguments (stream `OBJ_{prefix}_tool_args_large`),
 * the mirror of {@link LARGE_RESULTS_BUCKET}: the executor puts a call's arguments there when
 * their JSON is larger than its threshold, and the call's `args` are an `object:` reference
 * to the object named for the call id. The worker reads them before it checks the input, and
 * deletes the object once the call's answer is recorded; the bucket's max age removes the
 * objects of calls no worker answered.
 */
export const LARGE_ARGS_BUCKET = "tool_args_large";
/** Results whose JSON is larger than this go through {@link LARGE_RESULTS_BUCKET}: the executor's blob threshold. */
export const DEFAULT_LARGE_RESULT_BYTES = 65_536;
/** Results larger than this fail with BATON_TOOL_RESULT_TOO_LARGE. */
export const DEFAULT_MAX_RESULT_BYTES = 16 * 1024 * 1024;
/**
 * A result inline in a message is at most this share of the server's max_payload: the
 * protobuf form of JSON can be larger than the JSON (a list of small numbers about 5.5 times).
 */
export const INLINE_SHARE_OF_MAX_PAYLOAD = 1 / 6;

/**
 * JSON with object keys sorted (by UTF-16 code units) at every depth and no whitespace: the
 * same text as `canonicalJson` of @baton/store, whose sha256 is a blob's hash.
 */
export function canonicalJson(value: JsonValue): string {
  if (value === null || typeof value !== "object") return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  const keys = Object.keys(value).sort();
  return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson(value[k] as JsonValue)}`).join(",")}}`;
}

export function sha256Hex(data: Uint8Array): string {
  return createHash("sha256").update(data).digest("hex");
}

/** UTF-8 bytes of `text`, counted only when its length alone does not show it is at most `limit`. */
export function exceeds(text: string, limit: number): boolean {
  return text.length * 3 > limit && Buffer.byteLength(text, "utf8") > limit;
}
