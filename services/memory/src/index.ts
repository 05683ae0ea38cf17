/**
 * @baton/memory — agent memory behind a request on the bus: `memory.query`
 * answers the entries most relevant to a text query, tenant-isolated.
 */
import type { Subscription } from "@baton/bus";
import { errorMessage, hasCode } from "@baton/errors";
import type { Messaging } from "@baton/messaging";
import type { Service } from "@baton/runtime";
import type { Store } from "@baton/store";

export interface MemoryServiceOptions {
  messaging: Messaging;
  store: Store;
}

export function createMemoryService(opts: MemoryServiceOptions): Service {
  const { messaging, store } = opts;
  let sub: Subscription | undefined;
  return {
    async start() {
      sub = await messaging.serve("memory.query", async (req) => {
        if (!req.tenantId) return { entries: [], error: { code: "BATON_MEMORY_BAD_REQUEST", message: "tenant_id is required", retryable: false } };
        try {
          const rows = await store.memory.search(req.tenantId, { ...(req.agentId ? { agentId: req.agentId } : {}), query: req.query, limit: req.limit > 0 ? Math.min(req.limit, 100) : 10 });
          return {
            entries: rows.map((r) => ({ id: r.id, agentId: r.agentId, key: r.key, content: r.content, metadata: (r.metadata ?? {}) as Record<string, never> })),
          };
        } catch (err) {
          return { entries: [], error: { code: hasCode(err) ? err.code : "BATON_MEMORY_FAILED", message: errorMessage(err), retryable: hasCode(err) ? err.retryable : true } };
        }
      });
    },
    async stop() {
      await sub?.stop();
    },
  };
}
