/**
 * Objects: byte strings larger than a NATS message may be, stored in a JetStream stream of
 * their own as parts, and read back whole. A writer that has only NATS (a tool worker) puts
 * a large value here and sends a reference instead of the value; the reader gets it, keeps
 * it where it belongs, and deletes it. The stream's max age removes what nobody collected.
 *
 * Bucket `b` of prefix `p` is the stream `OBJ_{p}_{b}` (like KV's `KV_{p}_{b}`), subjects
 * `$BATON.OBJ.{p}_{b}.{name}.{part}`. A name is one subject token (`[A-Za-z0-9_-]+`), so the
 * parts of one object never match another's filter.
 */
import { DiscardPolicy, JetStreamApiCodes, JetStreamApiError, RetentionPolicy, StorageType } from "@nats-io/jetstream";
import type { JetStreamClient, JetStreamManager } from "@nats-io/jetstream";
import { nanos } from "@nats-io/nats-core";
import { BusInvalidOptions, BusPublishFailed } from "./errors.ts";

/** Options of {@link ObjectStore.put}. */
export interface ObjectPutOptions {
  /**
   * Age after which objects of the bucket expire, in ms; 0 keeps them. A property of the
   * bucket, set by whoever creates it first. @default 86_400_000
   */
  ttlMs?: number;
}

/** Where an object went: its byte size and the number of parts a reader asks for. */
export interface ObjectInfo {
  size: number;
  parts: number;
}

/** Large byte strings on JetStream (see the module comment). Get one from {@link Bus.objects}. */
export interface ObjectStore {
  /** Bytes per part: at most half the server's `max_payload`, at most 256 KiB. */
  readonly partBytes: number;
  /** Stores `data` under `name` (replacing an object of that name), creating the bucket when needed. */
  put(name: string, data: Uint8Array, opts?: ObjectPutOptions): Promise<ObjectInfo>;
  /** The object written as `info`, or null when any part is gone (deleted, expired, never written). */
  get(name: string, info: ObjectInfo): Promise<Uint8Array | null>;
  /** Removes every part of `name`; a missing object or bucket is not an error. */
  delete(name: string): Promise<void>;
}

export const OBJECT_NAME_RE = /^[A-Za-z0-9_-]+$/;
const DEFAULT_OBJECT_TTL_MS = 86_400_000;

export function objectStore(js: JetStreamClient, jsm: JetStreamManager, bucketName: string, maxPayload: number): ObjectStore {
  const stream = `OBJ_${bucketName}`;
  const subjectOf = (name: string, part: number | ">"): string => `$BATON.OBJ.${bucketName}.${name}.${part}`;
  const partBytes = Math.max(1024, Math.min(256 * 1024, Math.floor(maxPayload / 2)));
  let created: Promise<void> | undefined;
  const requireName = (name: string): void => {
    if (!OBJECT_NAME_RE.test(name)) throw BusInvalidOptions("object name", [`"${name}" must be letters, digits, "_" or "-"`]);
  };
  const ensure = (ttlMs: number): Promise<void> => {
    created ??= (async () => {
      try {
        await jsm.streams.info(stream);
      } catch (err) {
        if (!(err instanceof JetStreamApiError && err.code === JetStreamApiCodes.StreamNotFound)) throw err;
        await jsm.streams
          .add({ name: stream, subjects: [`$BATON.OBJ.${bucketName}.>`], retention: RetentionPolicy.Limits, storage: StorageType.File, discard: DiscardPolicy.Old, max_age: nanos(ttlMs) })
          .catch(async (e: unknown) => {
            // Created meanwhile by another process: use it as it is.
            await jsm.streams.info(stream).catch(() => {
              throw e;
            });
          });
      }
    })();
    created.catch(() => (created = undefined));
    return created;
  };
  return {
    partBytes,
    async put(name, data, opts = {}) {
      requireName(name);
      await ensure(opts.ttlMs ?? DEFAULT_OBJECT_TTL_MS);
      // A put of a name again (a redelivered call) replaces the old parts.
      await jsm.streams.purge(stream, { filter: subjectOf(name, ">") });
      const parts = Math.max(1, Math.ceil(data.byteLength / partBytes));
      await Promise.all(
        Array.from({ length: parts }, async (_, i) => {
          const subject = subjectOf(name, i);
          try {
            await js.publish(subject, data.subarray(i * partBytes, Math.min(data.byteLength, (i + 1) * partBytes)));
          } catch (err) {
            throw BusPublishFailed(subject, { cause: err });
          }
        }),
      );
      return { size: data.byteLength, parts };
    },
    async get(name, info) {
      requireName(name);
      if (!Number.isInteger(info.parts) || info.parts < 1 || !Number.isInteger(info.size) || info.size < 0) {
        throw BusInvalidOptions("object info", ["parts must be a positive integer and size a non-negative integer"]);
      }
      let chunks: (Uint8Array | null)[];
      try {
        chunks = await Promise.all(
          Array.from({ length: info.parts }, async (_, i) => (await jsm.streams.getMessage(stream, { last_by_subj: subjectOf(name, i) }))?.data ?? null),
        );
      } catch (err) {
        if (err instanceof JetStreamApiError && (err.code === JetStreamApiCodes.StreamNotFound || err.code === JetStreamApiCodes.NoMessageFound)) return null;
        throw err;
      }
      if (chunks.some((c) => c === null)) return null;
      const out = new Uint8Array(info.size);
      let at = 0;
      for (const c of chunks as Uint8Array[]) {
        if (at + c.byteLength > info.size) return null;
        out.set(c, at);
        at += c.byteLength;
      }
      return at === info.size ? out : null;
    },
    async delete(name) {
      requireName(name);
      try {
        await jsm.streams.purge(stream, { filter: subjectOf(name, ">") });
      } catch (err) {
        if (err instanceof JetStreamApiError && err.code === JetStreamApiCodes.StreamNotFound) return;
        throw err;
      }
    },
  };
}

/** The object name of any string key (e.g. a call id): its base64url form, one subject token. */
export function objectName(key: string): string {
  return Buffer.from(key, "utf8").toString("base64url") || "_";
}

/**
 * A reference to an object, as JSON that travels instead of the value: `$ref` is
 * `object:{bucket}/{name}`; `size` and `parts` are what {@link ObjectStore.get} needs;
 * `sha256` is the hex digest of the object's bytes. Never a `blob:` reference (those are
 * the store's), so nothing takes one for the other.
 */
export interface ObjectRef {
  bucket: string;
  name: string;
  size: number;
  parts: number;
  sha256: string;
}

const OBJECT_REF_PREFIX = "object:";
const SHA256_RE = /^[0-9a-f]{64}$/;

/** The JSON form of an {@link ObjectRef}. */
export function objectRefJson(ref: ObjectRef): { $ref: string; size: number; parts: number; sha256: string } {
  return { $ref: `${OBJECT_REF_PREFIX}${ref.bucket}/${ref.name}`, size: ref.size, parts: ref.parts, sha256: ref.sha256 };
}

/** The {@link ObjectRef} a JSON value is, or undefined when it is anything else. Cheap for values that are not. */
export function parseObjectRef(value: unknown): ObjectRef | undefined {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return undefined;
  const v = value as { $ref?: unknown; size?: unknown; parts?: unknown; sha256?: unknown };
  if (typeof v.$ref !== "string" || !v.$ref.startsWith(OBJECT_REF_PREFIX)) return undefined;
  const [bucket, name, ...rest] = v.$ref.slice(OBJECT_REF_PREFIX.length).split("/");
  if (rest.length > 0 || bucket === undefined || name === undefined || !OBJECT_NAME_RE.test(bucket) || !OBJECT_NAME_RE.test(name)) return undefined;
  if (!Number.isInteger(v.size) || (v.size as number) < 0 || !Number.isInteger(v.parts) || (v.parts as number) < 1) return undefined;
  if (typeof v.sha256 !== "string" || !SHA256_RE.test(v.sha256)) return undefined;
  return { bucket, name, size: v.size as number, parts: v.parts as number, sha256: v.sha256 };
}
