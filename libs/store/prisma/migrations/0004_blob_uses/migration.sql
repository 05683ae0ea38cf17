-- Blob retention (docs/adr/008-blob-retention.md): which execution refers to which blob, and
-- when a blob was last used, so blobs no execution refers to any more can be pruned.
--
-- Safe on a live table: the new column has a constant default (Postgres 11+ stores it in the
-- catalog, no rewrite: every existing blob reads the migration's time, so none is pruned
-- before a whole grace period has passed), the new table is empty until the backfill below,
-- which only reads the other tables.

ALTER TABLE "blobs" ADD COLUMN "usedAt" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP;

-- The pruner reads the oldest blobs first.
CREATE INDEX "blobs_usedAt_idx" ON "blobs"("usedAt");

CREATE TABLE "blob_uses" (
    "tenantId" TEXT NOT NULL,
    "hash" VARCHAR NOT NULL,
    "executionId" INTEGER NOT NULL,

    CONSTRAINT "blob_uses_pkey" PRIMARY KEY ("tenantId", "hash", "executionId")
);

-- The cascade from an execution deletes by ("executionId", "tenantId").
CREATE INDEX "blob_uses_executionId_tenantId_idx" ON "blob_uses"("executionId", "tenantId");

ALTER TABLE "blob_uses" ADD CONSTRAINT "blob_uses_tenantId_fkey"
    FOREIGN KEY ("tenantId") REFERENCES "tenants"("id") ON DELETE CASCADE ON UPDATE CASCADE;
-- NO ACTION: a blob that still has uses cannot be deleted; the pruner never tries.
ALTER TABLE "blob_uses" ADD CONSTRAINT "blob_uses_tenantId_hash_fkey"
    FOREIGN KEY ("tenantId", "hash") REFERENCES "blobs"("tenantId", "hash") ON DELETE NO ACTION ON UPDATE CASCADE;
ALTER TABLE "blob_uses" ADD CONSTRAINT "blob_uses_executionId_tenantId_fkey"
    FOREIGN KEY ("executionId", "tenantId") REFERENCES "agent_workflow_executions"("id", "tenantId") ON DELETE CASCADE ON UPDATE CASCADE;

-- Backfill: the blobs existing executions refer to. Every reference a checkpoint holds is also
-- in a row: node outputs and inputs in the journal, a run's input (a child's, with its
-- parent's references), output and kept fork state (`checkpoint`) in its execution row. Only
-- the tenants that have blobs are read, and only rows whose JSON names one.
INSERT INTO "blob_uses" ("tenantId", "hash", "executionId")
SELECT DISTINCT r."tenantId", m.hash, r."executionId"
  FROM (
        SELECT n."tenantId", n."executionId", concat_ws(' ', n."input"::text, n."output"::text, n."toolCalls"::text) AS doc
          FROM "agent_workflow_node_executions" n
         WHERE n."tenantId" IN (SELECT DISTINCT "tenantId" FROM "blobs")
        UNION ALL
        SELECT e."tenantId", e."id", concat_ws(' ', e."input"::text, e."output"::text, e."context"::text, e."checkpoint"::text)
          FROM "agent_workflow_executions" e
         WHERE e."tenantId" IN (SELECT DISTINCT "tenantId" FROM "blobs")
       ) r
 CROSS JOIN LATERAL (SELECT (regexp_matches(r.doc, '"blob:([0-9a-f]{64})"', 'g'))[1] AS hash) m
 WHERE r.doc LIKE '%"blob:%'
   AND EXISTS (SELECT 1 FROM "blobs" b WHERE b."tenantId" = r."tenantId" AND b."hash" = m.hash);
