import type { Prisma, PrismaClient } from "./generated/client.ts";
import { guard, toStoreError } from "./db-errors.ts";
import { StoreInvalidInput, StoreNotFound } from "./errors.ts";
import { toExecution, toNodeExecution } from "./records.ts";
import type { ExecutionPatch, ExecutionsRepo, NodeExecutionEntry, NodeExecutionsRepo } from "./types.ts";
import {
  EXECUTION_STATUSES,
  isDbId,
  jsonIn,
  nullableJsonIn,
  oneOf,
  optionalInt,
  page,
  requireJson,
  requireJsonObject,
  requireTenantId,
  requireText,
} from "./values.ts";

const STATE_MAX = 500;
const ERROR_MAX = 100_000;

function optionalText(name: string, v: unknown, max: number): string | null | undefined {
  if (v === undefined || v === null) return v;
  return requireText(name, v, { max, allowEmpty: true });
}

function optionalDate(name: string, v: unknown): Date | null | undefined {
  if (v === undefined || v === null) return v;
  if (!(v instanceof Date) || Number.isNaN(v.getTime())) throw StoreInvalidInput(`${name} must be a valid Date`);
  return v;
}

function optionalJson(name: string, v: unknown): ReturnType<typeof nullableJsonIn> {
  if (v === undefined || v === null) return nullableJsonIn(v);
  return nullableJsonIn(requireJson(name, v));
}

function executionPatch(patch: ExecutionPatch): Prisma.AgentWorkflowExecutionUncheckedUpdateInput {
  if (typeof patch !== "object" || patch === null) throw StoreInvalidInput("patch must be an object");
  const data: Prisma.AgentWorkflowExecutionUncheckedUpdateInput = {};
  if (patch.status !== undefined) data.status = oneOf("status", patch.status, EXECUTION_STATUSES);
  if (patch.currentState !== undefined) data.currentState = optionalText("currentState", patch.currentState, STATE_MAX);
  if (patch.context !== undefined) data.context = jsonIn(requireJsonObject("context", patch.context));
  if (patch.checkpoint !== undefined) data.checkpoint = optionalJson("checkpoint", patch.checkpoint);
  if (patch.output !== undefined) data.output = optionalJson("output", patch.output);
  if (patch.error !== undefined) data.error = optionalText("error", patch.error, ERROR_MAX);
  if (patch.tokenUsage !== undefined) data.tokenUsage = jsonIn(requireJsonObject("tokenUsage", patch.tokenUsage));
  if (patch.startedAt !== undefined) data.startedAt = optionalDate("startedAt", patch.startedAt);
  if (patch.completedAt !== undefined) data.completedAt = optionalDate("completedAt", patch.completedAt);
  return data;
}

export function executionsRepo(prisma: PrismaClient): ExecutionsRepo {
  return {
    async create(tenantId, input) {
      requireTenantId(tenantId);
      if (typeof input !== "object" || input === null) throw StoreInvalidInput("execution input must be an object");
      if (!isDbId(input.workflowId)) throw StoreNotFound("workflow", String(input.workflowId));
      const workflowVersion = optionalInt("workflowVersion", input.workflowVersion, 1);
      if (workflowVersion == null) throw StoreInvalidInput("workflowVersion is required");
      const data: Prisma.AgentWorkflowExecutionUncheckedCreateInput = {
        tenantId,
        agentWorkflowId: input.workflowId,
        workflowVersion,
        status: "queued",
        input: jsonIn(requireJsonObject("input", input.input)),
        agentId: optionalInt("agentId", input.agentId) ?? null,
        sessionId: optionalInt("sessionId", input.sessionId) ?? null,
        triggerEvent: optionalText("triggerEvent", input.triggerEvent, STATE_MAX) ?? null,
      };
      const parentId = input.parentExecutionId;
      if (parentId !== undefined && parentId !== null) {
        if (!isDbId(parentId)) throw StoreNotFound("parent execution", String(parentId));
        const parent = await guard({ entity: "execution", id: parentId }, () =>
          prisma.agentWorkflowExecution.findFirst({ where: { id: parentId, tenantId }, select: { id: true } }),
        );
        if (!parent) throw StoreNotFound("parent execution", parentId);
        data.parentExecutionId = parentId;
      }
      const row = await guard({ entity: "workflow", id: input.workflowId }, () => prisma.agentWorkflowExecution.create({ data }));
      return toExecution(row);
    },

    async get(tenantId, id) {
      requireTenantId(tenantId);
      if (!isDbId(id)) return null;
      const row = await guard({ entity: "execution", id }, () => prisma.agentWorkflowExecution.findFirst({ where: { id, tenantId } }));
      return row ? toExecution(row) : null;
    },

    async getById(id) {
      if (!isDbId(id)) return null;
      const row = await guard({ entity: "execution", id }, () => prisma.agentWorkflowExecution.findUnique({ where: { id } }));
      return row ? toExecution(row) : null;
    },

    async list(tenantId, opts = {}) {
      requireTenantId(tenantId);
      const { take, skip } = page(opts);
      const where: Prisma.AgentWorkflowExecutionWhereInput = { tenantId };
      if (opts.workflowId !== undefined) {
        if (!isDbId(opts.workflowId)) return [];
        where.agentWorkflowId = opts.workflowId;
      }
      if (opts.status !== undefined) where.status = oneOf("status", opts.status, EXECUTION_STATUSES);
      const rows = await guard({ entity: "execution" }, () =>
        prisma.agentWorkflowExecution.findMany({ where, orderBy: { id: "desc" }, take, skip }),
      );
      return rows.map(toExecution);
    },

    async update(id, patch) {
      if (!isDbId(id)) throw StoreNotFound("execution", String(id));
      const data = executionPatch(patch);
      const row = await guard({ entity: "execution", id }, () => prisma.agentWorkflowExecution.update({ where: { id }, data }));
      return toExecution(row);
    },

    async delete(tenantId, id) {
      requireTenantId(tenantId);
      if (!isDbId(id)) return false;
      const res = await guard({ entity: "execution", id }, () => prisma.agentWorkflowExecution.deleteMany({ where: { id, tenantId } }));
      return res.count > 0;
    },
  };
}

export function nodeExecutionsRepo(prisma: PrismaClient): NodeExecutionsRepo {
  const orderBy: Prisma.AgentWorkflowNodeExecutionOrderByWithRelationInput[] = [{ startedAt: "asc" }, { id: "asc" }];
  return {
    async record(entry) {
      if (typeof entry !== "object" || entry === null) throw StoreInvalidInput("entry must be an object");
      const e: NodeExecutionEntry = entry;
      const tenantId = requireTenantId(e.tenantId);
      if (!isDbId(e.executionId)) throw StoreNotFound("execution", String(e.executionId));
      const executionId = e.executionId;
      const nodeId = requireText("nodeId", e.nodeId, { max: STATE_MAX });
      const nodeType = requireText("nodeType", e.nodeType, { max: STATE_MAX });
      const attempt = optionalInt("attempt", e.attempt, 1);
      if (attempt == null) throw StoreInvalidInput("attempt is required");
      const status = requireText("status", e.status, { max: 50 });

      const changes: Prisma.AgentWorkflowNodeExecutionUncheckedUpdateInput = { status, nodeType };
      if (e.input !== undefined) changes.input = optionalJson("input", e.input);
      if (e.output !== undefined) changes.output = optionalJson("output", e.output);
      if (e.toolCalls !== undefined) changes.toolCalls = optionalJson("toolCalls", e.toolCalls);
      if (e.tokenUsage !== undefined) changes.tokenUsage = optionalJson("tokenUsage", e.tokenUsage);
      if (e.error !== undefined) changes.error = optionalText("error", e.error, ERROR_MAX);
      if (e.durationMs !== undefined) changes.durationMs = optionalInt("durationMs", e.durationMs);
      if (e.completedAt !== undefined) changes.completedAt = optionalDate("completedAt", e.completedAt);
      const startedAt = optionalDate("startedAt", e.startedAt);
      if (startedAt) changes.startedAt = startedAt;

      // The journal row of an attempt can only belong to its execution's tenant (composite
      // foreign key), so checking the execution once makes the upsert tenant-safe.
      const owner = await guard({ entity: "execution", id: executionId }, () =>
        prisma.agentWorkflowExecution.findFirst({ where: { id: executionId, tenantId }, select: { id: true } }),
      );
      if (!owner) throw StoreNotFound("execution", executionId);

      const create = { ...changes, tenantId, executionId, nodeId, attempt } as Prisma.AgentWorkflowNodeExecutionUncheckedCreateInput;
      const upsert = () =>
        prisma.agentWorkflowNodeExecution.upsert({
          where: { executionId_nodeId_attempt: { executionId, nodeId, attempt } },
          create,
          update: changes,
        });
      try {
        return toNodeExecution(await upsert());
      } catch (err) {
        // Two first writes of the same attempt raced; the loser's write becomes an update.
        const mapped = toStoreError(err, { entity: "execution", id: executionId });
        if (mapped.code !== "BATON_STORE_CONFLICT") throw mapped;
        return toNodeExecution(await guard({ entity: "execution", id: executionId }, upsert));
      }
    },

    async list(tenantId, executionId) {
      requireTenantId(tenantId);
      if (!isDbId(executionId)) return [];
      const rows = await guard({ entity: "execution", id: executionId }, () =>
        prisma.agentWorkflowNodeExecution.findMany({ where: { executionId, tenantId }, orderBy }),
      );
      return rows.map(toNodeExecution);
    },

    async listById(executionId) {
      if (!isDbId(executionId)) return [];
      const rows = await guard({ entity: "execution", id: executionId }, () =>
        prisma.agentWorkflowNodeExecution.findMany({ where: { executionId }, orderBy }),
      );
      return rows.map(toNodeExecution);
    },
  };
}
