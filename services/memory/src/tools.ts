/**
 * The memory tools the agent nodes call (`agent.memory.read`, `agent.rag` →
 * `memory.search`; `agent.memory.write` → `memory.write`), served by the memory
 * service through the worker SDK so they are sharded like any tool.
 */
import { z } from "zod";
import { defineTool } from "@baton/sdk";
import type { ToolSpec } from "@baton/sdk";
import type { Messaging } from "@baton/messaging";
import type { Store } from "@baton/store";

export function memoryTools(opts: { store: Store; messaging?: Messaging }): ToolSpec[] {
  const { store, messaging } = opts;
  const search = defineTool({
    name: "memory.search",
    description: "The agent's long-term memories most relevant to a text query (tenant-isolated).",
    input: z.object({ agentId: z.number().int().positive().nullable().optional(), query: z.string().max(10_000), limit: z.number().int().min(1).max(100).default(5) }),
    handler: async (input, ctx) => {
      const rows = await store.memory.search(ctx.tenantId, { ...(input.agentId ? { agentId: input.agentId } : {}), query: input.query, limit: input.limit });
      return { entries: rows.map((r) => ({ id: r.id, agentId: r.agentId, key: r.key, content: r.content, metadata: r.metadata ?? {} })) };
    },
  });
  const write = defineTool({
    name: "memory.write",
    description: "Stores a memory for the agent.",
    input: z.object({ agentId: z.number().int().positive(), key: z.string().min(1).max(512), content: z.string().min(1), metadata: z.record(z.string(), z.json()).default({}) }),
    handler: async (input, ctx) => {
      const row = await store.memory.create(ctx.tenantId, { agentId: input.agentId, key: input.key, content: input.content, metadata: input.metadata });
      await messaging?.publishEvent("memory.created", { tenantId: ctx.tenantId, id: row.id, agentId: row.agentId, key: row.key }, `memory-created:${row.id}`);
      return { id: row.id, key: row.key };
    },
  });
  return [search, write];
}
