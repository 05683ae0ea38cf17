/**
 * Row → record conversions. Records are detached plain objects: callers may keep and
 * change them without touching Prisma's instances.
 */
import type {
  AgentMemory,
  AgentWorkflow,
  AgentWorkflowExecution,
  AgentWorkflowNodeExecution,
  AgentWorkflowVersion,
  ApiKey,
  Blob,
  LearnedSequence,
  McpServerDefinition,
  Review,
  Tenant as TenantRow,
} from "./generated/client.ts";
import type {
  ApiKeyRecord,
  BlobRecord,
  ExecutionRecord,
  ExecutionStatus,
  LearnedSequenceRecord,
  McpServerRecord,
  McpServerStatus,
  MemoryRecord,
  NodeExecutionRecord,
  ReviewRecord,
  ReviewStatus,
  Role,
  Tenant,
  WorkflowRecord,
  WorkflowVersionRecord,
} from "./types.ts";
import { idMapOut, jsonOut, objectOut } from "./values.ts";

export function toTenant(r: TenantRow): Tenant {
  return { id: r.id, name: r.name, createdAt: r.createdAt };
}

export function toApiKey(r: ApiKey): ApiKeyRecord {
  return {
    id: r.id,
    tenantId: r.tenantId,
    name: r.name,
    role: r.role as Role,
    prefix: r.prefix,
    createdAt: r.createdAt,
    lastUsedAt: r.lastUsedAt,
    revokedAt: r.revokedAt,
  };
}

export function toWorkflow(r: AgentWorkflow): WorkflowRecord {
  return {
    id: r.id,
    tenantId: r.tenantId,
    name: r.name,
    slug: r.slug,
    description: r.description,
    definition: objectOut(r.definition),
    agentConfig: objectOut(r.agentConfig),
    memoryConfig: objectOut(r.memoryConfig),
    mcpExport: r.mcpExport,
    enabled: r.enabled,
    version: r.version,
    createdAt: r.createdAt,
    updatedAt: r.updatedAt,
  };
}

export function toWorkflowVersion(r: AgentWorkflowVersion): WorkflowVersionRecord {
  return {
    id: r.id,
    tenantId: r.tenantId,
    agentWorkflowId: r.agentWorkflowId,
    version: r.version,
    definition: objectOut(r.definition),
    agentConfig: objectOut(r.agentConfig),
    memoryConfig: objectOut(r.memoryConfig),
    description: r.description,
    createdAt: r.createdAt,
  };
}

export function toExecution(r: AgentWorkflowExecution): ExecutionRecord {
  return {
    id: r.id,
    tenantId: r.tenantId,
    agentWorkflowId: r.agentWorkflowId,
    workflowVersion: r.workflowVersion,
    agentId: r.agentId,
    sessionId: r.sessionId,
    status: r.status as ExecutionStatus,
    currentState: r.currentState,
    input: objectOut(r.input),
    output: r.output === null ? null : jsonOut(r.output),
    context: objectOut(r.context),
    checkpoint: r.checkpoint === null ? null : jsonOut(r.checkpoint),
    triggerEvent: r.triggerEvent,
    tokenUsage: objectOut(r.tokenUsage),
    subRunPauses: idMapOut(r.subRunPauses),
    patchedStep: r.patchedStep,
    parentExecutionId: r.parentExecutionId,
    parentNodeId: r.parentNodeId,
    childKey: r.childKey,
    definitionRef: r.definitionRef,
    forkedFromExecutionId: r.forkedFromExecutionId,
    forkedFromVersion: r.forkedFromVersion,
    deadlineAt: r.deadlineAt,
    error: r.error,
    startedAt: r.startedAt,
    completedAt: r.completedAt,
    createdAt: r.createdAt,
    updatedAt: r.updatedAt,
  };
}

export function toNodeExecution(r: AgentWorkflowNodeExecution): NodeExecutionRecord {
  return {
    id: r.id,
    tenantId: r.tenantId,
    executionId: r.executionId,
    nodeId: r.nodeId,
    nodeType: r.nodeType,
    attempt: r.attempt,
    status: r.status,
    input: r.input === null ? null : jsonOut(r.input),
    output: r.output === null ? null : jsonOut(r.output),
    tokenUsage: r.tokenUsage === null ? null : jsonOut(r.tokenUsage),
    toolCalls: r.toolCalls === null ? null : jsonOut(r.toolCalls),
    error: r.error,
    errorCode: r.errorCode,
    retryable: r.retryable,
    stepVersion: r.stepVersion,
    beganStep: r.beganStep,
    durationMs: r.durationMs,
    startedAt: r.startedAt,
    completedAt: r.completedAt,
  };
}

export function toReview(r: Review): ReviewRecord {
  return {
    id: r.id,
    tenantId: r.tenantId,
    executionId: r.executionId,
    nodeId: r.nodeId,
    pauseSeq: r.pauseSeq,
    status: r.status as ReviewStatus,
    reason: r.reason,
    payload: jsonOut(r.payload),
    decision: r.decision === null ? null : jsonOut(r.decision),
    reviewer: r.reviewer,
    createdAt: r.createdAt,
    resolvedAt: r.resolvedAt,
  };
}

export function toMemory(r: AgentMemory): MemoryRecord {
  return {
    id: r.id,
    tenantId: r.tenantId,
    agentId: r.agentId,
    userId: r.userId,
    key: r.key,
    content: r.content,
    metadata: objectOut(r.metadata),
    createdAt: r.createdAt,
    updatedAt: r.updatedAt,
  };
}

export function toLearnedSequence(r: LearnedSequence): LearnedSequenceRecord {
  return {
    id: r.id,
    tenantId: r.tenantId,
    executionId: r.executionId,
    agentId: r.agentId,
    sessionId: r.sessionId,
    tools: jsonOut(r.tools),
    successful: r.successful,
    createdAt: r.createdAt,
  };
}

export function toMcpServer(r: McpServerDefinition): McpServerRecord {
  return {
    id: r.id,
    tenantId: r.tenantId,
    agentWorkflowId: r.agentWorkflowId,
    name: r.name,
    slug: r.slug,
    toolDefinitions: jsonOut(r.toolDefinitions),
    status: r.status as McpServerStatus,
    lastGeneratedAt: r.lastGeneratedAt,
    createdAt: r.createdAt,
    updatedAt: r.updatedAt,
  };
}

export function toBlob(r: Blob): BlobRecord {
  return { tenantId: r.tenantId, hash: r.hash, size: r.size, data: jsonOut(r.data), createdAt: r.createdAt, usedAt: r.usedAt };
}
