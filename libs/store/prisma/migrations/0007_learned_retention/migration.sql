-- Learned-sequence retention (docs/adr/008-blob-retention.md, "Learned-sequence retention"):
-- sequences older than BATON_LEARNED_RETENTION_DAYS are deleted by the executor's pruner, with
-- their uses of blobs.
--
-- One plain index; no column changes. It is built under a lock that holds inserts of learned
-- sequences for the time the build takes (migrations run in a transaction, so not
-- CONCURRENTLY); nothing else waits on it.

-- The pruner reads sequences oldest first by "createdAt", across tenants.
CREATE INDEX "learned_sequences_createdAt_idx" ON "learned_sequences"("createdAt");
