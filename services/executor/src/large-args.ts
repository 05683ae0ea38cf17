/**
 * Large tool-call arguments (docs/tools.md, "Large arguments"), the mirror of large results
 * (large.ts, @baton/sdk large.ts): arguments whose JSON is larger than the executor's
 * threshold (`largeResultBytes`, and never more than a sixth of the server's `max_payload`
 * inline) are put in the object bucket {@link LARGE_ARGS_BUCKET} under the base64url of the
 * call id, and the ToolCall's `args` are `{ "$ref": "object:tool_args_large/<name>", "size",
 * "parts", "sha256" }`. So a call is never refused at NATS's max payload, and the tools stream
 * does not hold large values. The worker reads the object before it checks the input.
 *
 * Who deletes the object: the worker, once the call's answer is recorded (a redelivery, or the
 * call sent again, is answered from the record without reading the arguments). The bucket's max
 * age ({@link LARGE_ARGS_TTL_MS}, fixed by whoever creates the bucket first) removes the objects
 * of calls no worker ever answered (cancelled while queued, a tool without workers).
 *
 * Values at or under the threshold are sent as they are, without an await, so the calls of a
 * step still leave together; arguments the executor measured already (large.ts) are not
 * measured again.
 *
 * A call sent again after a crash may have its arguments read back from the blob store
 * (large.ts keeps large arguments in the checkpoint by reference), where an object's keys
 * come back in another order: the same value as the object the queued call refers to, which
 * is then kept as it is (compared as canonical JSON, only when the bytes differ).
 */
import { createHash } from "node:crypto";
import { objectName, objectRefJson } from "@baton/bus";
import type { Bus, ObjectInfo } from "@baton/bus";
import type { JsonObject } from "@baton/engine";
import { errorMessage } from "@baton/errors";
import { canonicalJson } from "@baton/store";
import type { Logger } from "@baton/telemetry";

/** The object bucket of large arguments (LARGE_ARGS_BUCKET of @baton/sdk): stream `OBJ_{prefix}_tool_args_large`. */
export const LARGE_ARGS_BUCKET = "tool_args_large";
/** Max age of the arguments bucket: as long as a worker keeps its results (`resultTtlMs`'s default). */
export const LARGE_ARGS_TTL_MS = 86_400_000;
/** Arguments inline in a ToolCall are at most this share of `max_payload`: protobuf's Struct can be much larger than the JSON. */
const INLINE_SHARE_OF_MAX_PAYLOAD = 1 / 6;

export interface LargeArgsOptions {
  bus: Bus;
  logger: Logger;
  /** Arguments whose JSON is larger than this many bytes travel by reference. */
  thresholdBytes: number;
  /** @default LARGE_ARGS_TTL_MS */
  ttlMs?: number;
}

export interface LargeArgs {
  /**
   * The `args` a ToolCall carries: `args` itself when small enough to travel inline (returned
   * synchronously), else (a promise of) a reference to the object that holds them. `bytes`:
   * the size of their JSON when it was measured already.
   */
  outgoing(callId: string, args: JsonObject, bytes?: number): JsonObject | Promise<JsonObject>;
}

const sha256 = (data: Uint8Array): string => createHash("sha256").update(data).digest("hex");

export function createLargeArgs(opts: LargeArgsOptions): LargeArgs {
  const { bus, logger, thresholdBytes } = opts;
  const ttlMs = opts.ttlMs ?? LARGE_ARGS_TTL_MS;

  /** Whether `stored` holds `args`, whatever the order of their keys. */
  function sameValue(stored: Uint8Array, args: JsonObject): boolean {
    try {
      return canonicalJson(JSON.parse(new TextDecoder().decode(stored)) as JsonObject) === canonicalJson(args);
    } catch {
      return false;
    }
  }

  async function byReference(callId: string, args: JsonObject, text: string): Promise<JsonObject> {
    const bytes = new TextEncoder().encode(text);
    let digest = sha256(bytes);
    const name = objectName(callId);
    const objects = bus.objects(LARGE_ARGS_BUCKET);
    let info: ObjectInfo = { size: bytes.byteLength, parts: Math.max(1, Math.ceil(bytes.byteLength / objects.partBytes)) };
    // The same call sent again (a step applied twice, effects carried out again after a crash)
    // keeps the object it has: writing it again would take it away from a worker reading it.
    const existing = await objects.get(name, info).catch((err: unknown) => {
      logger.debug("an arguments object could not be looked up; it is written", { callId, err: errorMessage(err) });
      return null;
    });
    const stored = existing === null ? undefined : sha256(existing);
    // The same value with its keys in another order (read back from the blob store) keeps the object too.
    if (existing !== null && stored !== digest && sameValue(existing, args)) digest = stored!;
    else if (stored !== digest) info = await objects.put(name, bytes, { ttlMs });
    logger.debug("tool-call arguments sent by reference", { callId, bytes: bytes.byteLength, parts: info.parts });
    return objectRefJson({ bucket: LARGE_ARGS_BUCKET, name, ...info, sha256: digest });
  }

  return {
    outgoing(callId, args, bytes) {
      const inline = Math.min(thresholdBytes, Math.floor(bus.maxPayload() * INLINE_SHARE_OF_MAX_PAYLOAD));
      if (bytes !== undefined && bytes <= inline) return args;
      const text = JSON.stringify(args);
      if (text.length * 3 <= inline || Buffer.byteLength(text, "utf8") <= inline) return args;
      return byReference(callId, args, text);
    },
  };
}
