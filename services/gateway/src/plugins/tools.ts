/**
 * `/api/tools`: the tools registered by workers (registry in NATS KV), with their JSON
 * Schemas and the number of live workers serving each. Tenant-scoped: a tool whose
 * `tenants` excludes the caller is not listed, and reads as 404.
 */
import type { FastifyPluginAsyncZod } from "fastify-type-provider-zod";
import type { GatewayDeps, ToolCatalog, ToolInfo } from "../deps.ts";
import { NotFound, ToolsUnavailable } from "../errors.ts";
import { problemSchema } from "../problem.ts";
import { API_SECURITY, TAGS, toolListSchema, toolNameParams, toolSchema } from "../schemas.ts";
import { apiErrors } from "./common.ts";

export interface ToolsPluginOptions {
  deps: GatewayDeps;
}

/** Field by field, so `tenants` (other tenants' ids) never reaches a client. */
function toTool(t: ToolInfo) {
  return {
    name: t.name,
    description: t.description,
    kind: t.kind,
    inputSchema: t.inputSchema,
    ...(t.outputSchema ? { outputSchema: t.outputSchema } : {}),
    timeoutMs: t.timeoutMs,
    ...(t.retry ? { retry: t.retry } : {}),
    workers: t.workers,
  };
}

export const toolsPlugin: FastifyPluginAsyncZod<ToolsPluginOptions> = async (app, { deps }) => {
  const tags = [TAGS.tools];
  const catalog = (): ToolCatalog => {
    if (!deps.tools) throw ToolsUnavailable();
    return deps.tools;
  };

  app.get("/tools", {
    schema: {
      tags,
      summary: "List the tools this tenant may call",
      description: "Tools registered by workers, sorted by name, with input/output JSON Schemas and live worker counts.",
      security: API_SECURITY,
      response: { 200: toolListSchema, ...apiErrors, 503: problemSchema },
    },
    handler: async (request) => {
      const tools = await catalog().list({ tenantId: request.auth.tenantId });
      return { items: tools.map(toTool) };
    },
  });

  app.get("/tools/:name", {
    schema: {
      tags,
      summary: "Get one tool",
      security: API_SECURITY,
      params: toolNameParams,
      response: { 200: toolSchema, ...apiErrors, 503: problemSchema },
    },
    handler: async (request) => {
      const { name } = request.params;
      const tool = await catalog().get(name);
      if (!tool || (tool.tenants !== undefined && !tool.tenants.includes(request.auth.tenantId))) throw NotFound("tool", name);
      return toTool(tool);
    },
  });
};
