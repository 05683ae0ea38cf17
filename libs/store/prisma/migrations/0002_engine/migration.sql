-- Issue 3 (workflow engine): sub-workflow children, forks, deadlines, a richer
-- journal for rebuilding checkpoints, and content-addressed blobs for large results.

ALTER TABLE "agent_workflow_executions"
    ADD COLUMN "parentNodeId" VARCHAR,
    ADD COLUMN "childKey" VARCHAR,
    ADD COLUMN "definitionRef" VARCHAR,
    ADD COLUMN "forkedFromExecutionId" INTEGER,
    ADD COLUMN "forkedFromVersion" INTEGER,
    ADD COLUMN "deadlineAt" TIMESTAMPTZ(3);

-- One child execution per (parent, node, key): a redelivered "start child" finds the row it made.
CREATE UNIQUE INDEX "agent_workflow_executions_parentExecutionId_parentNodeId_childK" ON "agent_workflow_executions"("parentExecutionId", "parentNodeId", "childKey");

ALTER TABLE "agent_workflow_executions" ADD CONSTRAINT "agent_workflow_executions_forkedFromExecutionId_fkey"
    FOREIGN KEY ("forkedFromExecutionId") REFERENCES "agent_workflow_executions"("id") ON DELETE SET NULL ON UPDATE CASCADE;

ALTER TABLE "agent_workflow_node_executions"
    ADD COLUMN "errorCode" VARCHAR,
    ADD COLUMN "retryable" BOOLEAN,
    -- The checkpoint version whose step wrote this row: orders the journal for replay.
    ADD COLUMN "stepVersion" INTEGER;

CREATE TABLE "blobs" (
    "id" SERIAL NOT NULL,
    "tenantId" TEXT NOT NULL,
    -- sha256 of the canonical JSON, hex.
    "hash" VARCHAR NOT NULL,
    "size" INTEGER NOT NULL,
    "data" JSONB NOT NULL,
    "createdAt" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "blobs_pkey" PRIMARY KEY ("id")
);

CREATE UNIQUE INDEX "blobs_tenantId_hash_key" ON "blobs"("tenantId", "hash");

ALTER TABLE "blobs" ADD CONSTRAINT "blobs_tenantId_fkey"
    FOREIGN KEY ("tenantId") REFERENCES "tenants"("id") ON DELETE CASCADE ON UPDATE CASCADE;
