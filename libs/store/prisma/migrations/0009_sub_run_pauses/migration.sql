-- What a run announced of its pauses in sub-runs: each node paused in sub-runs, with the
-- sub-run its pause names. The executor writes it with the row, before a step's events; a
-- checkpoint rebuilt from the journal compares it with the pauses it learns again from the
-- sub-runs' rows, to announce and end exactly those that changed while the checkpoint was
-- lost (docs/adr/004-durable-engine.md, "a review inside a sub-run pauses the runs above it").
ALTER TABLE "agent_workflow_executions" ADD COLUMN "subRunPauses" JSONB NOT NULL DEFAULT '{}';

-- Rows written before: a paused run had announced the pauses of its sub-runs that are paused
-- (the one with the lowest id named), and the one at its pause point (its newest sub-run).
UPDATE "agent_workflow_executions" x
   SET "subRunPauses" = s."pauses"
  FROM (SELECT n."id", jsonb_object_agg(n."nodeId", n."sub") AS "pauses"
          FROM (SELECT p."id", c."parentNodeId" AS "nodeId",
                       COALESCE(MIN(c."id") FILTER (WHERE c."status" = 'paused'), MAX(c."id")) AS "sub"
                  FROM "agent_workflow_executions" p
                  JOIN "agent_workflow_executions" c ON c."parentExecutionId" = p."id" AND c."tenantId" = p."tenantId"
                 WHERE p."status" = 'paused' AND c."parentNodeId" IS NOT NULL
                   AND (c."status" = 'paused' OR c."parentNodeId" = p."currentState")
                 GROUP BY p."id", c."parentNodeId") n
         GROUP BY n."id") s
 WHERE x."id" = s."id";
