/**
 * Content-addressed blobs: a JSON value is stored once per tenant under the sha256 of
 * its canonical JSON, so the same large tool result written by many steps (or
 * redelivered) costs one row, and its reference `blob:<hash>` never changes.
 */
import { createHash } from "node:crypto";
import type { PrismaClient } from "./generated/client.ts";
import { guard } from "./db-errors.ts";
import { StoreInvalidInput } from "./errors.ts";
import { toBlob } from "./records.ts";
import type { BlobRecord, BlobsRepo, JsonValue } from "./types.ts";
import { jsonIn, requireJson, requireTenantId } from "./values.ts";

/** The prefix of a blob reference: `blob:<sha256 hex>`. */
export const BLOB_REF_PREFIX = "blob:";
const HASH_RE = /^[0-9a-f]{64}$/;
const MAX_GET_MANY = 1000;

/**
 * JSON with object keys sorted (by UTF-16 code units) at every depth and no
 * whitespace: equal values give equal text, whatever order their keys were built in.
 */
export function canonicalJson(value: JsonValue): string {
  if (value === null || typeof value !== "object") return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  const keys = Object.keys(value).sort();
  return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson(value[k] as JsonValue)}`).join(",")}}`;
}

/** `<hex>` or `blob:<hex>` → `<hex>`; anything else is refused. */
function requireHash(hash: unknown): string {
  const h = typeof hash === "string" && hash.startsWith(BLOB_REF_PREFIX) ? hash.slice(BLOB_REF_PREFIX.length) : hash;
  if (typeof h !== "string" || !HASH_RE.test(h)) throw StoreInvalidInput("hash must be 64 lower-case hex characters, optionally prefixed with blob:");
  return h;
}

export function blobsRepo(prisma: PrismaClient): BlobsRepo {
  return {
    async put(tenantId, data) {
      requireTenantId(tenantId);
      const value = requireJson("data", data);
      const text = canonicalJson(value);
      const hash = createHash("sha256").update(text).digest("hex");
      const size = Buffer.byteLength(text, "utf8");
      // ON CONFLICT DO NOTHING: a second put of the same value (or a racing one) writes nothing.
      await guard({ entity: "tenant", id: tenantId }, () =>
        prisma.blob.createMany({ data: [{ tenantId, hash, size, data: jsonIn(value) }], skipDuplicates: true }),
      );
      return { ref: `${BLOB_REF_PREFIX}${hash}`, hash, size };
    },

    async get(tenantId, hash) {
      requireTenantId(tenantId);
      const h = requireHash(hash);
      const row = await guard({ entity: "blob", id: h }, () => prisma.blob.findUnique({ where: { tenantId_hash: { tenantId, hash: h } } }));
      return row ? toBlob(row) : null;
    },

    async getMany(tenantId, hashes) {
      requireTenantId(tenantId);
      if (!Array.isArray(hashes)) throw StoreInvalidInput("hashes must be an array");
      const wanted = [...new Set(hashes.map(requireHash))];
      if (wanted.length > MAX_GET_MANY) throw StoreInvalidInput(`at most ${MAX_GET_MANY} hashes per call`);
      const out = new Map<string, BlobRecord>();
      if (wanted.length === 0) return out;
      const rows = await guard({ entity: "blob" }, () => prisma.blob.findMany({ where: { tenantId, hash: { in: wanted } } }));
      for (const row of rows) out.set(row.hash, toBlob(row));
      return out;
    },
  };
}
