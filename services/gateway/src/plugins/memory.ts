/** `/api/agent-memory`: long-term agent memory entries of the caller's tenant. */
import type { FastifyPluginAsyncZod } from "fastify-type-provider-zod";
import { z } from "zod";
import type { GatewayDeps } from "../deps.ts";
import { API_SECURITY, TAGS, idParams, memoryCreateBody, memoryListQuery, memorySchema, page, toMemory } from "../schemas.ts";
import { apiErrors, defined, orNotFound, publishAfterWrite } from "./common.ts";

export interface MemoryPluginOptions {
  deps: GatewayDeps;
}

export const memoryPlugin: FastifyPluginAsyncZod<MemoryPluginOptions> = async (app, { deps }) => {
  const { store } = deps;
  const tags = [TAGS.memory];

  app.get("/agent-memory", {
    schema: {
      tags,
      summary: "List memory entries",
      security: API_SECURITY,
      querystring: memoryListQuery,
      response: { 200: page(memorySchema), ...apiErrors },
    },
    handler: async (request) => {
      const { agentId, userId, limit, offset } = request.query;
      const rows = await store.memory.list(request.auth.tenantId, { ...defined({ agentId, userId }), limit, offset });
      return { items: rows.map(toMemory), limit, offset };
    },
  });

  app.post("/agent-memory", {
    schema: {
      tags,
      summary: "Create a memory entry",
      security: API_SECURITY,
      body: memoryCreateBody,
      response: { 201: memorySchema, ...apiErrors },
    },
    handler: async (request, reply) => {
      const { tenantId } = request.auth;
      const { agentId, userId, key, content, metadata } = request.body;
      const record = await store.memory.create(tenantId, {
        agentId,
        key,
        content,
        ...defined({ userId, metadata }),
      });
      const m = toMemory(record);
      await publishAfterWrite(deps, request.log, "memory.created", tenantId, m.id, { id: m.id, agent_id: m.agentId, key: m.key });
      return reply.code(201).header("location", `/api/agent-memory/${m.id}`).send(m);
    },
  });

  app.get("/agent-memory/:id", {
    schema: {
      tags,
      summary: "Get a memory entry",
      description: "The entry the `Location` of its create names.",
      security: API_SECURITY,
      params: idParams,
      response: { 200: memorySchema, ...apiErrors },
    },
    handler: async (request) => {
      const { id } = request.params;
      return toMemory(await orNotFound("memory entry", id, () => store.memory.get(request.auth.tenantId, id)));
    },
  });

  app.delete("/agent-memory/:id", {
    schema: {
      tags,
      summary: "Delete a memory entry",
      security: API_SECURITY,
      params: idParams,
      response: { 204: z.null().describe("Deleted"), ...apiErrors },
    },
    handler: async (request, reply) => {
      const { tenantId } = request.auth;
      const { id } = request.params;
      const deleted = await orNotFound("memory entry", id, () => store.memory.delete(tenantId, id));
      await publishAfterWrite(deps, request.log, "memory.deleted", tenantId, id, { id, agent_id: deleted.agentId });
      return reply.code(204).send(null);
    },
  });
};
