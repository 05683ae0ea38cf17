/**
 * Content-addressed blobs: a JSON value is stored once per tenant under the sha256 of
 * its canonical JSON, so the same large tool result written by many steps (or
 * redelivered) costs one row, and its reference `blob:<hash>` never changes.
 *
 * Retention (docs/adr/008-blob-retention.md): every put names the execution that will refer
 * to the blob and records that use (`blob_uses`, deleted with the execution); values that
 * carry references into another execution record uses for it too (`use`); a learned sequence
 * records its uses when it is recorded (`learned_blob_uses`, learning.ts). `prune` deletes
 * blobs with no use left whose `usedAt` is older than the grace period.
 */
import { createHash } from "node:crypto";
import type { Pool } from "pg";
import type { PrismaClient } from "./generated/client.ts";
import { guard } from "./db-errors.ts";
import { StoreInvalidInput } from "./errors.ts";
import { toBlob } from "./records.ts";
import type { BlobRecord, BlobsRepo, JsonValue } from "./types.ts";
import { isDbId, lockKey, namedStatement, quoteIdent, requireJson, requireTenantId, runPruneBatch } from "./values.ts";

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



export function blobsRepo(prisma: PrismaClient, schema: string, pool: Pool): BlobsRepo {
  const blobs = `${quoteIdent(schema)}."blobs"`;
  const uses = `${quoteIdent(schema)}."blob_uses"`;
  const learnedUses = `${quoteIdent(schema)}."learned_blob_uses"`;
  // The blob and its use in one statement. A blob stored already has its `usedAt` refreshed:
  // the update locks its row, so a pruner deleting it waits for this put (and then the insert
  // stores it again) or is waited for, and one that had read it as unused finds it used now.
  const PUT = namedStatement("blob_put", `WITH b AS (
      INSERT INTO ${blobs} ("tenantId", "hash", "size", "data") VALUES ($1, $2, $3, $4::jsonb)
      ON CONFLICT ("tenantId", "hash") DO UPDATE SET "usedAt" = CURRENT_TIMESTAMP
      RETURNING "tenantId", "hash"
    )
    INSERT INTO ${uses} ("tenantId", "hash", "executionId") SELECT "tenantId", "hash", $5 FROM b
    ON CONFLICT DO NOTHING`);
  // Uses of blobs stored already (by another execution): rows locked in hash order, so two
  // calls naming the same blobs never deadlock, refreshed, and used; missing ones are returned.
  const USE = namedStatement("blob_use", `WITH l AS (
      SELECT "id" FROM ${blobs} WHERE "tenantId" = $1 AND "hash" = ANY($2::varchar[]) ORDER BY "hash" FOR UPDATE
    ), b AS (
      UPDATE ${blobs} x SET "usedAt" = CURRENT_TIMESTAMP FROM l WHERE x."id" = l."id" RETURNING x."tenantId", x."hash"
    ), u AS (
      INSERT INTO ${uses} ("tenantId", "hash", "executionId") SELECT "tenantId", "hash", $3 FROM b ON CONFLICT DO NOTHING
    )
    SELECT "hash" FROM b`);
  // One batch of the pruner (see BlobsRepo.prune). Rows another transaction holds (a put) are
  // skipped; a row updated since the statement's snapshot is re-read and kept out when its
  // `usedAt` is no longer older than the cutoff. A blob is in use while an execution or a
  // learned sequence uses it (a primary-key probe of each uses table). Blobs found in use are
  // touched, so the oldest blobs are not read again on every run while their users live.
  const PRUNE = namedStatement("blob_prune", `WITH lock AS (SELECT pg_try_advisory_xact_lock($3::int, $4::int) AS ok),
    batch AS (
      SELECT b."id", b."tenantId", b."hash" FROM ${blobs} b
       WHERE b."usedAt" < $1::timestamptz AND (SELECT ok FROM lock)
       ORDER BY b."usedAt" LIMIT $2
       FOR UPDATE OF b SKIP LOCKED
    ),
    used AS (
      SELECT x."id" FROM batch x
       WHERE EXISTS (SELECT 1 FROM ${uses} u WHERE u."tenantId" = x."tenantId" AND u."hash" = x."hash")
          OR EXISTS (SELECT 1 FROM ${learnedUses} l WHERE l."tenantId" = x."tenantId" AND l."hash" = x."hash")
    ),
    gone AS (
      DELETE FROM ${blobs} d USING batch x WHERE d."id" = x."id" AND NOT EXISTS (SELECT 1 FROM used WHERE used."id" = x."id") RETURNING d."id"
    ),
    kept AS (
      UPDATE ${blobs} k SET "usedAt" = CURRENT_TIMESTAMP FROM used WHERE k."id" = used."id" RETURNING k."id"
    )
    SELECT (SELECT ok FROM lock) AS "ran", (SELECT count(*)::int FROM gone) AS "deleted", (SELECT count(*)::int FROM kept) AS "inUse"`);
  const pruneLock = [lockKey("baton:blob-prune"), lockKey(`baton:blob-prune:${schema}`)];

  return {
    async put(tenantId, executionId, data) {
      requireTenantId(tenantId);
      if (!isDbId(executionId)) throw StoreInvalidInput("executionId must be an execution id");
      const value = requireJson("data", data);
      const text = canonicalJson(value);
      const hash = createHash("sha256").update(text).digest("hex");
      const size = Buffer.byteLength(text, "utf8");
      await guard({ entity: "execution", id: executionId }, () => pool.query({ ...PUT, values: [tenantId, hash, size, text, executionId] }));
      return { ref: `${BLOB_REF_PREFIX}${hash}`, hash, size };
    },

    async use(tenantId, executionId, hashes) {
      requireTenantId(tenantId);
      if (!isDbId(executionId)) throw StoreInvalidInput("executionId must be an execution id");
      if (!Array.isArray(hashes)) throw StoreInvalidInput("hashes must be an array");
      const wanted = [...new Set(hashes.map(requireHash))];
      if (wanted.length > MAX_GET_MANY) throw StoreInvalidInput(`at most ${MAX_GET_MANY} hashes per call`);
      if (wanted.length === 0) return [];
      const res = await guard({ entity: "execution", id: executionId }, () => pool.query<{ hash: string }>({ ...USE, values: [tenantId, wanted, executionId] }));
      const found = new Set(res.rows.map((r) => r.hash));
      return wanted.filter((h) => !found.has(h));
    },

    prune(opts) {
      return runPruneBatch<{ ran: boolean; deleted: number; inUse: number }>(pool, "blob", PRUNE, pruneLock, opts);
    },

    async get(tenantId, hash) {
      requireTenantId(tenantId);
      const h = requireHash(hash);
      const row = await guard({ entity: "blob", id: h }, () => prisma.blob.findUnique({ where: { tenantId_hash: { tenantId, hash: h } } }));
      return row ? toBlob(row) : null;
    },

    async missing(tenantId, hashes) {
      requireTenantId(tenantId);
      if (!Array.isArray(hashes)) throw StoreInvalidInput("hashes must be an array");
      const wanted = [...new Set(hashes.map(requireHash))];
      if (wanted.length > MAX_GET_MANY) throw StoreInvalidInput(`at most ${MAX_GET_MANY} hashes per call`);
      if (wanted.length === 0) return [];
      const rows = await guard({ entity: "blob" }, () => prisma.blob.findMany({ where: { tenantId, hash: { in: wanted } }, select: { hash: true } }));
      const found = new Set(rows.map((r) => r.hash));
      return wanted.filter((h) => !found.has(h));
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
