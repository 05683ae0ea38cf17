-- A workflow version snapshots the workflow's agentConfig and memoryConfig as well as its
-- definition: a run is pinned to the version it started on, and a restore brings them back
-- (issue 3, "Versioning"). Existing versions get the row's current values for its current
-- version, and empty objects (the columns' defaults) for older ones, whose values were not kept.
ALTER TABLE "agent_workflow_versions"
  ADD COLUMN "agentConfig" JSONB NOT NULL DEFAULT '{}',
  ADD COLUMN "memoryConfig" JSONB NOT NULL DEFAULT '{}';

UPDATE "agent_workflow_versions" v
   SET "agentConfig" = w."agentConfig", "memoryConfig" = w."memoryConfig"
  FROM "agent_workflows" w
 WHERE v."agentWorkflowId" = w."id" AND v."tenantId" = w."tenantId" AND v."version" = w."version";
