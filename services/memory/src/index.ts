/**
 * @baton/memory — agent memory behind a request on the bus: `memory.query`
 * answers the entries most relevant to a text query, tenant-isolated.
 */
import type { Subscription } from "@baton/bus";
import { errorMessage, hasCode } from "@baton/errors";
import type { Messaging } from "@baton/messaging";
import type { Service } from "@baton/runtime";
import type { Store } from "@baton/store";
import { createWorker } from "@baton/sdk";
import type { Worker } from "@baton/sdk";
import type { Logger } from "@baton/telemetry";
import { memoryTools } from "./tools.ts";

export { memoryTools } from "./tools.ts";

export interface MemoryServiceOptions {
  messaging: Messaging;
  store: Store;
  /** Serve `memory.search` / `memory.write` to agent nodes as tools. @default when given a logger */
  logger?: Logger;
  workerId?: string;
}

export function createMemoryService(opts: MemoryServiceOptions): Service {
  const { messaging, store } = opts;
  let sub: Subscription | undefined;
  const worker: Worker | undefined = opts.logger
    ? createWorker({ bus: messaging.bus, tools: memoryTools({ store, messaging }), logger: opts.logger, workerId: opts.workerId ?? `memory-${process.pid}`, concurrency: 16 })
    : undefined;
  return {
    async start() {
      await worker?.start();
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
      await worker?.drain();
      await sub?.stop();
    },
  };
}
