import type { Prisma, PrismaClient } from "./generated/client.ts";
import { guard } from "./db-errors.ts";
import { SlugTaken, StoreInvalidInput, StoreNotFound } from "./errors.ts";
import { toMcpServer } from "./records.ts";
import { requireSlug, slugify } from "./slug.ts";
import type { McpServerInput, McpServersRepo } from "./types.ts";
import { isDbId, jsonIn, MCP_STATUSES, oneOf, page, requireJson, requireTenantId, requireText } from "./values.ts";

export function mcpServersRepo(prisma: PrismaClient): McpServersRepo {
  return {
    async upsert(tenantId, workflowId, input) {
      requireTenantId(tenantId);
      if (!isDbId(workflowId)) throw StoreNotFound("workflow", String(workflowId));
      if (typeof input !== "object" || input === null) throw StoreInvalidInput("MCP server input must be an object");
      const i: McpServerInput = input;
      const name = requireText("name", i.name, { max: 200 });
      const slug = i.slug === undefined ? slugify(name) : requireSlug(i.slug);
      const toolDefinitions = jsonIn(requireJson("toolDefinitions", i.toolDefinitions));
      const data: Prisma.McpServerDefinitionUncheckedUpdateInput = { name, slug, toolDefinitions, lastGeneratedAt: new Date() };
      if (i.status !== undefined) data.status = oneOf("status", i.status, MCP_STATUSES);
      const ctx = { entity: "workflow", id: workflowId, onUnique: (c: string) => (c.includes("slug") ? SlugTaken(slug) : undefined) };
      // The definition is keyed by workflow; checking the workflow's tenant first keeps the
      // upsert from touching another tenant's row.
      const owner = await guard(ctx, () => prisma.agentWorkflow.findFirst({ where: { id: workflowId, tenantId }, select: { id: true } }));
      if (!owner) throw StoreNotFound("workflow", workflowId);
      const row = await guard(ctx, () =>
        prisma.mcpServerDefinition.upsert({
          where: { agentWorkflowId: workflowId },
          create: { ...(data as Prisma.McpServerDefinitionUncheckedCreateInput), tenantId, agentWorkflowId: workflowId },
          update: data,
        }),
      );
      return toMcpServer(row);
    },

    async get(tenantId, id) {
      requireTenantId(tenantId);
      if (!isDbId(id)) return null;
      const row = await guard({ entity: "MCP server", id }, () => prisma.mcpServerDefinition.findFirst({ where: { id, tenantId } }));
      return row ? toMcpServer(row) : null;
    },

    async getByWorkflow(tenantId, workflowId) {
      requireTenantId(tenantId);
      if (!isDbId(workflowId)) return null;
      const row = await guard({ entity: "MCP server" }, () => prisma.mcpServerDefinition.findFirst({ where: { agentWorkflowId: workflowId, tenantId } }));
      return row ? toMcpServer(row) : null;
    },

    async getBySlug(tenantId, slug) {
      requireTenantId(tenantId);
      if (typeof slug !== "string") return null;
      const row = await guard({ entity: "MCP server" }, () => prisma.mcpServerDefinition.findUnique({ where: { tenantId_slug: { tenantId, slug } } }));
      return row ? toMcpServer(row) : null;
    },

    async list(tenantId, opts) {
      requireTenantId(tenantId);
      const { take, skip } = page(opts);
      const rows = await guard({ entity: "MCP server" }, () => prisma.mcpServerDefinition.findMany({ where: { tenantId }, orderBy: { id: "desc" }, take, skip }));
      return rows.map(toMcpServer);
    },

    async setStatus(tenantId, id, status) {
      requireTenantId(tenantId);
      const s = oneOf("status", status, MCP_STATUSES);
      if (!isDbId(id)) return null;
      const rows = await guard({ entity: "MCP server", id }, () =>
        prisma.mcpServerDefinition.updateManyAndReturn({ where: { id, tenantId }, data: { status: s } }),
      );
      return rows[0] ? toMcpServer(rows[0]) : null;
    },
  };
}
