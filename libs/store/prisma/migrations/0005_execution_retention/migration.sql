-- Execution retention (docs/adr/008-blob-retention.md, "Execution retention"): finished runs
-- older than BATON_EXECUTION_RETENTION_DAYS are deleted by the executor's pruner.
--
-- Two plain indexes; no column changes. Each is built under a lock that holds writes to the
-- executions for the time the build takes (migrations run in a transaction, so not
-- CONCURRENTLY); nothing else waits on them.

-- The pruner reads finished runs oldest first by "completedAt" (queued and running rows have
-- none). Not ("tenantId", "completedAt"): no index starts with "tenantId" and then another
-- column than "id" (ADR 007, item 26), and the pruner works across tenants.
CREATE INDEX "agent_workflow_executions_completedAt_idx" ON "agent_workflow_executions"("completedAt");

-- Deleting an execution sets "forkedFromExecutionId" to NULL on its forks (ON DELETE SET NULL):
-- without an index, every deleted execution read the whole table to find them.
CREATE INDEX "agent_workflow_executions_forkedFromExecutionId_idx" ON "agent_workflow_executions"("forkedFromExecutionId");
