-- 0001_init: Baton's definitions store (seed 004 §3 + tenants, API keys, reviews,
-- learned sequences). Hand-written to match prisma/schema.prisma exactly; names follow
-- Prisma's conventions. Unqualified names: the migrator sets search_path to the target
-- schema. Never edit an applied migration: add a new one.

-- CreateTable
CREATE TABLE "tenants" (
    "id" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "createdAt" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "tenants_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "api_keys" (
    "id" SERIAL NOT NULL,
    "tenantId" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "role" TEXT NOT NULL,
    "keyHash" TEXT NOT NULL,
    "prefix" TEXT NOT NULL,
    "createdAt" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "lastUsedAt" TIMESTAMPTZ(3),
    "revokedAt" TIMESTAMPTZ(3),

    CONSTRAINT "api_keys_pkey" PRIMARY KEY ("id"),
    CONSTRAINT "api_keys_role_check" CHECK ("role" IN ('admin', 'operator', 'viewer'))
);

-- CreateTable
CREATE TABLE "agent_workflows" (
    "id" SERIAL NOT NULL,
    "tenantId" TEXT NOT NULL,
    "name" VARCHAR NOT NULL,
    "slug" VARCHAR NOT NULL,
    "description" TEXT NOT NULL DEFAULT '',
    "definition" JSONB NOT NULL,
    "agentConfig" JSONB NOT NULL DEFAULT '{}',
    "memoryConfig" JSONB NOT NULL DEFAULT '{}',
    "mcpExport" BOOLEAN NOT NULL DEFAULT false,
    "enabled" BOOLEAN NOT NULL DEFAULT true,
    "version" INTEGER NOT NULL DEFAULT 1,
    "createdAt" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "agent_workflows_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "agent_workflow_versions" (
    "id" SERIAL NOT NULL,
    "tenantId" TEXT NOT NULL,
    "agentWorkflowId" INTEGER NOT NULL,
    "version" INTEGER NOT NULL,
    "definition" JSONB NOT NULL,
    "description" TEXT,
    "createdAt" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "agent_workflow_versions_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "agent_workflow_executions" (
    "id" SERIAL NOT NULL,
    "tenantId" TEXT NOT NULL,
    "agentWorkflowId" INTEGER NOT NULL,
    "workflowVersion" INTEGER NOT NULL,
    "agentId" INTEGER,
    "sessionId" INTEGER,
    "status" VARCHAR NOT NULL DEFAULT 'queued',
    "currentState" VARCHAR,
    "input" JSONB NOT NULL DEFAULT '{}',
    "output" JSONB,
    "context" JSONB NOT NULL DEFAULT '{}',
    "checkpoint" JSONB,
    "triggerEvent" VARCHAR,
    "tokenUsage" JSONB NOT NULL DEFAULT '{}',
    "parentExecutionId" INTEGER,
    "error" TEXT,
    "startedAt" TIMESTAMPTZ(3),
    "completedAt" TIMESTAMPTZ(3),
    "createdAt" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "agent_workflow_executions_pkey" PRIMARY KEY ("id"),
    CONSTRAINT "agent_workflow_executions_status_check" CHECK ("status" IN ('queued', 'running', 'paused', 'completed', 'failed', 'cancelled'))
);

-- CreateTable
CREATE TABLE "agent_workflow_node_executions" (
    "id" SERIAL NOT NULL,
    "tenantId" TEXT NOT NULL,
    "executionId" INTEGER NOT NULL,
    "nodeId" VARCHAR NOT NULL,
    "nodeType" VARCHAR NOT NULL,
    "attempt" INTEGER NOT NULL DEFAULT 1,
    "status" VARCHAR NOT NULL,
    "input" JSONB,
    "output" JSONB,
    "tokenUsage" JSONB,
    "toolCalls" JSONB,
    "error" TEXT,
    "durationMs" INTEGER,
    "startedAt" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "completedAt" TIMESTAMPTZ(3),

    CONSTRAINT "agent_workflow_node_executions_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "agent_memory" (
    "id" SERIAL NOT NULL,
    "tenantId" TEXT NOT NULL,
    "agentId" INTEGER NOT NULL,
    "userId" INTEGER,
    "key" VARCHAR NOT NULL,
    "content" TEXT NOT NULL,
    "metadata" JSONB NOT NULL DEFAULT '{}',
    "createdAt" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "agent_memory_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "mcp_server_definitions" (
    "id" SERIAL NOT NULL,
    "tenantId" TEXT NOT NULL,
    "agentWorkflowId" INTEGER NOT NULL,
    "name" VARCHAR NOT NULL,
    "slug" VARCHAR NOT NULL,
    "toolDefinitions" JSONB NOT NULL DEFAULT '[]',
    "status" VARCHAR NOT NULL DEFAULT 'active',
    "lastGeneratedAt" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "createdAt" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "mcp_server_definitions_pkey" PRIMARY KEY ("id"),
    CONSTRAINT "mcp_server_definitions_status_check" CHECK ("status" IN ('active', 'disabled'))
);

-- CreateTable
CREATE TABLE "reviews" (
    "id" SERIAL NOT NULL,
    "tenantId" TEXT NOT NULL,
    "executionId" INTEGER NOT NULL,
    "nodeId" VARCHAR NOT NULL,
    "pauseSeq" INTEGER NOT NULL,
    "status" VARCHAR NOT NULL DEFAULT 'pending',
    "reason" TEXT NOT NULL DEFAULT '',
    "payload" JSONB NOT NULL DEFAULT '{}',
    "decision" JSONB,
    "reviewer" TEXT,
    "createdAt" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "resolvedAt" TIMESTAMPTZ(3),

    CONSTRAINT "reviews_pkey" PRIMARY KEY ("id"),
    CONSTRAINT "reviews_status_check" CHECK ("status" IN ('pending', 'approved', 'edited', 'rejected'))
);

-- CreateTable
CREATE TABLE "learned_sequences" (
    "id" SERIAL NOT NULL,
    "tenantId" TEXT NOT NULL,
    "executionId" INTEGER NOT NULL,
    "agentId" INTEGER,
    "sessionId" INTEGER,
    "tools" JSONB NOT NULL,
    "successful" BOOLEAN NOT NULL,
    "createdAt" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "learned_sequences_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE UNIQUE INDEX "api_keys_keyHash_key" ON "api_keys"("keyHash");

-- CreateIndex
CREATE INDEX "api_keys_tenantId_idx" ON "api_keys"("tenantId");

-- CreateIndex
CREATE UNIQUE INDEX "agent_workflows_tenantId_slug_key" ON "agent_workflows"("tenantId", "slug");

-- CreateIndex
CREATE UNIQUE INDEX "agent_workflows_id_tenantId_key" ON "agent_workflows"("id", "tenantId");

-- CreateIndex
CREATE INDEX "agent_workflows_tenantId_idx" ON "agent_workflows"("tenantId");

-- CreateIndex
CREATE UNIQUE INDEX "agent_workflow_versions_agentWorkflowId_version_key" ON "agent_workflow_versions"("agentWorkflowId", "version");

-- CreateIndex
CREATE INDEX "agent_workflow_versions_tenantId_idx" ON "agent_workflow_versions"("tenantId");

-- CreateIndex
CREATE UNIQUE INDEX "agent_workflow_executions_id_tenantId_key" ON "agent_workflow_executions"("id", "tenantId");

-- CreateIndex
CREATE INDEX "agent_workflow_executions_tenantId_status_idx" ON "agent_workflow_executions"("tenantId", "status");

-- CreateIndex
CREATE INDEX "agent_workflow_executions_agentWorkflowId_idx" ON "agent_workflow_executions"("agentWorkflowId");

-- CreateIndex
CREATE INDEX "agent_workflow_executions_parentExecutionId_idx" ON "agent_workflow_executions"("parentExecutionId");

-- CreateIndex
CREATE UNIQUE INDEX "agent_workflow_node_executions_executionId_nodeId_attempt_key" ON "agent_workflow_node_executions"("executionId", "nodeId", "attempt");

-- CreateIndex
CREATE INDEX "agent_workflow_node_executions_tenantId_idx" ON "agent_workflow_node_executions"("tenantId");

-- CreateIndex
CREATE INDEX "agent_memory_tenantId_agentId_userId_idx" ON "agent_memory"("tenantId", "agentId", "userId");

-- CreateIndex
CREATE UNIQUE INDEX "mcp_server_definitions_tenantId_slug_key" ON "mcp_server_definitions"("tenantId", "slug");

-- CreateIndex
CREATE UNIQUE INDEX "mcp_server_definitions_agentWorkflowId_key" ON "mcp_server_definitions"("agentWorkflowId");

-- CreateIndex
CREATE INDEX "mcp_server_definitions_tenantId_idx" ON "mcp_server_definitions"("tenantId");

-- CreateIndex
CREATE UNIQUE INDEX "reviews_executionId_nodeId_pauseSeq_key" ON "reviews"("executionId", "nodeId", "pauseSeq");

-- CreateIndex
CREATE INDEX "reviews_tenantId_status_idx" ON "reviews"("tenantId", "status");

-- CreateIndex
CREATE UNIQUE INDEX "learned_sequences_executionId_key" ON "learned_sequences"("executionId");

-- CreateIndex
CREATE INDEX "learned_sequences_tenantId_agentId_idx" ON "learned_sequences"("tenantId", "agentId");

-- AddForeignKey
ALTER TABLE "api_keys" ADD CONSTRAINT "api_keys_tenantId_fkey" FOREIGN KEY ("tenantId") REFERENCES "tenants"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "agent_workflows" ADD CONSTRAINT "agent_workflows_tenantId_fkey" FOREIGN KEY ("tenantId") REFERENCES "tenants"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "agent_workflow_versions" ADD CONSTRAINT "agent_workflow_versions_tenantId_fkey" FOREIGN KEY ("tenantId") REFERENCES "tenants"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "agent_workflow_versions" ADD CONSTRAINT "agent_workflow_versions_agentWorkflowId_tenantId_fkey" FOREIGN KEY ("agentWorkflowId", "tenantId") REFERENCES "agent_workflows"("id", "tenantId") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "agent_workflow_executions" ADD CONSTRAINT "agent_workflow_executions_tenantId_fkey" FOREIGN KEY ("tenantId") REFERENCES "tenants"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "agent_workflow_executions" ADD CONSTRAINT "agent_workflow_executions_agentWorkflowId_tenantId_fkey" FOREIGN KEY ("agentWorkflowId", "tenantId") REFERENCES "agent_workflows"("id", "tenantId") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "agent_workflow_executions" ADD CONSTRAINT "agent_workflow_executions_parentExecutionId_fkey" FOREIGN KEY ("parentExecutionId") REFERENCES "agent_workflow_executions"("id") ON DELETE SET NULL ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "agent_workflow_node_executions" ADD CONSTRAINT "agent_workflow_node_executions_tenantId_fkey" FOREIGN KEY ("tenantId") REFERENCES "tenants"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "agent_workflow_node_executions" ADD CONSTRAINT "agent_workflow_node_executions_executionId_tenantId_fkey" FOREIGN KEY ("executionId", "tenantId") REFERENCES "agent_workflow_executions"("id", "tenantId") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "agent_memory" ADD CONSTRAINT "agent_memory_tenantId_fkey" FOREIGN KEY ("tenantId") REFERENCES "tenants"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "mcp_server_definitions" ADD CONSTRAINT "mcp_server_definitions_tenantId_fkey" FOREIGN KEY ("tenantId") REFERENCES "tenants"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "mcp_server_definitions" ADD CONSTRAINT "mcp_server_definitions_agentWorkflowId_tenantId_fkey" FOREIGN KEY ("agentWorkflowId", "tenantId") REFERENCES "agent_workflows"("id", "tenantId") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "reviews" ADD CONSTRAINT "reviews_tenantId_fkey" FOREIGN KEY ("tenantId") REFERENCES "tenants"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "reviews" ADD CONSTRAINT "reviews_executionId_tenantId_fkey" FOREIGN KEY ("executionId", "tenantId") REFERENCES "agent_workflow_executions"("id", "tenantId") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "learned_sequences" ADD CONSTRAINT "learned_sequences_tenantId_fkey" FOREIGN KEY ("tenantId") REFERENCES "tenants"("id") ON DELETE CASCADE ON UPDATE CASCADE;
