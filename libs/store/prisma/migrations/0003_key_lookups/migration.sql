-- Indexes that find an execution, and an execution's journal rows, by key whichever one the
-- planner takes. Postgres plans a foreign-key check once per connection and keeps the plan;
-- on a table it has not analyzed (autovacuum off, or a new table), every candidate index
-- looks equally cheap, and the check of each new journal row ("id" and "tenantId") took
-- ("tenantId", "status"): it read every execution of the tenant, so a journal write cost
-- more with every execution ever run. The same went for the learner's read of an
-- execution's journal through ("tenantId") alone. Now every index that starts with
-- "tenantId" has the row's key right after it (ADR 007, item 26).

DROP INDEX "agent_workflow_executions_tenantId_status_idx";
-- A tenant's executions, newest first.
CREATE INDEX "agent_workflow_executions_tenantId_id_idx" ON "agent_workflow_executions"("tenantId", "id");
-- Executions by status in id order (the recovery sweep, and listing by status).
CREATE INDEX "agent_workflow_executions_status_id_idx" ON "agent_workflow_executions"("status", "id");

DROP INDEX "agent_workflow_node_executions_tenantId_idx";
CREATE INDEX "agent_workflow_node_executions_tenantId_executionId_idx" ON "agent_workflow_node_executions"("tenantId", "executionId");
