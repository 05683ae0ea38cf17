-- Blob retention of learned sequences (docs/adr/008-blob-retention.md, "Learned sequences"):
-- a learned sequence copies its tool nodes' journal inputs as params, and an input above
-- BATON_LARGE_RESULT_BYTES is a blob reference. Learned sequences outlive their executions, so
-- their blobs must too: which sequence refers to which blob, kept like `blob_uses`.
--
-- The unique index on learned_sequences ("id", "tenantId") is the target of the tenant-paired
-- foreign key; it is built in the migration's transaction (not CONCURRENTLY), so inserts of
-- learned sequences wait while it is built. Nothing else changes on existing tables.

CREATE UNIQUE INDEX "learned_sequences_id_tenantId_key" ON "learned_sequences"("id", "tenantId");

CREATE TABLE "learned_blob_uses" (
    "tenantId" TEXT NOT NULL,
    "hash" VARCHAR NOT NULL,
    "sequenceId" INTEGER NOT NULL,

    CONSTRAINT "learned_blob_uses_pkey" PRIMARY KEY ("tenantId", "hash", "sequenceId")
);

-- The cascade from a sequence deletes by ("sequenceId", "tenantId").
CREATE INDEX "learned_blob_uses_sequenceId_tenantId_idx" ON "learned_blob_uses"("sequenceId", "tenantId");

ALTER TABLE "learned_blob_uses" ADD CONSTRAINT "learned_blob_uses_tenantId_fkey"
    FOREIGN KEY ("tenantId") REFERENCES "tenants"("id") ON DELETE CASCADE ON UPDATE CASCADE;
-- NO ACTION: a blob that still has uses cannot be deleted; the pruner never tries.
ALTER TABLE "learned_blob_uses" ADD CONSTRAINT "learned_blob_uses_tenantId_hash_fkey"
    FOREIGN KEY ("tenantId", "hash") REFERENCES "blobs"("tenantId", "hash") ON DELETE NO ACTION ON UPDATE CASCADE;
ALTER TABLE "learned_blob_uses" ADD CONSTRAINT "learned_blob_uses_sequenceId_tenantId_fkey"
    FOREIGN KEY ("sequenceId", "tenantId") REFERENCES "learned_sequences"("id", "tenantId") ON DELETE CASCADE ON UPDATE CASCADE;

-- Backfill: the blobs the sequences recorded so far refer to (`{ "$ref": "blob:<hex>" }` at any
-- depth of their tools), for the tenants that have blobs only. A blob already pruned is gone
-- for good and gets no row. The blobs found are locked in key order (as puts and uses lock
-- them) and marked used now: a pruner of an executor not yet upgraded that deleted one after
-- this statement's snapshot is waited for and the blob left out, and one that comes later
-- finds it locked, then used.
WITH refs AS (
    SELECT DISTINCT s."tenantId", s."id" AS "sequenceId", substr(r.ref #>> '{}', 6) AS "hash"
      FROM "learned_sequences" s
     CROSS JOIN LATERAL jsonb_path_query(s."tools", 'lax $.**."$ref" ? (@ like_regex "^blob:[0-9a-f]{64}$")') r(ref)
     WHERE s."tenantId" IN (SELECT DISTINCT "tenantId" FROM "blobs")
),
held AS (
    SELECT b."id" FROM "blobs" b
     WHERE EXISTS (SELECT 1 FROM refs WHERE refs."tenantId" = b."tenantId" AND refs."hash" = b."hash")
     ORDER BY b."tenantId", b."hash"
       FOR UPDATE OF b
),
touched AS (
    UPDATE "blobs" b SET "usedAt" = CURRENT_TIMESTAMP FROM held WHERE b."id" = held."id" RETURNING b."tenantId", b."hash"
)
INSERT INTO "learned_blob_uses" ("tenantId", "hash", "sequenceId")
SELECT refs."tenantId", refs."hash", refs."sequenceId" FROM refs JOIN touched ON touched."tenantId" = refs."tenantId" AND touched."hash" = refs."hash";
