/**
 * The tool registry, shared through two NATS KV buckets of the bus prefix:
 *
 * - `{prefix}_tools`: one entry per tool name, its {@link ToolDescriptor} (JSON). Written by
 *   every worker that serves the tool when it starts (last writer wins); kept when the
 *   workers go, so a workflow naming the tool stays valid while no worker runs.
 * - `{prefix}_tool_workers`: one presence entry per (tool, worker), key `{tool}.{workerId}`,
 *   re-put every `heartbeatMs`. An entry whose last put is older than `presenceTtlMs` does
 *   not count (a worker that died without unregistering); the bucket's max age, also
 *   `presenceTtlMs`, eventually removes it.
 *
 * The bucket settings are fixed by whoever creates a bucket first.
 */
import type { Bus, KV } from "@baton/bus";
import { ToolSdkInvalidOptions } from "./errors.ts";
import type { ToolDescriptor } from "./tool.ts";

/** A registry entry with the number of live workers serving it. */
export type RegisteredTool = ToolDescriptor & {
  /** Workers whose presence entry is alive. 0: calls wait in the queue until one starts. */
  workers: number;
};

export interface ToolRegistryOptions {
  /**
   * Age after which a worker's presence entry expires unless refreshed. A property of the
   * bucket, fixed when it is first created. @default 15_000
   */
  presenceTtlMs?: number;
  /** How long `has()` trusts a name it found. @default 30_000 */
  cacheTtlMs?: number;
}

/** A worker's registration: refreshes its presence until stopped. */
export interface Registration {
  /** Stops the heartbeat and deletes the presence entries. */
  stop(): Promise<void>;
}

export interface ToolRegistry {
  /** Every registered tool visible to `tenantId` (all of them without one), sorted by name. */
  list(opts?: { tenantId?: string }): Promise<RegisteredTool[]>;
  /** One tool, or undefined when no worker ever registered it. */
  get(name: string): Promise<RegisteredTool | undefined>;
  /** Cheap existence check for validation: names found are cached for `cacheTtlMs`. */
  has(name: string): Promise<boolean>;
  /**
   * Writes the descriptors and the presence entries of `workerId`, then refreshes the
   * presence every `heartbeatMs` (default: a third of the presence TTL).
   */
  register(workerId: string, tools: readonly ToolDescriptor[], opts?: { heartbeatMs?: number }): Promise<Registration>;
  /** Deletes a tool's descriptor (its workers' next start registers it again). */
  remove(name: string): Promise<void>;
  /** The presence TTL this registry was opened with. */
  readonly presenceTtlMs: number;
}

export const DEFAULT_PRESENCE_TTL_MS = 15_000;
export const DESCRIPTORS_BUCKET = "tools";
export const PRESENCE_BUCKET = "tool_workers";

const KEY_TOKEN_RE = /^[A-Za-z0-9_-]+$/;

/** A worker id usable as one KV key token: other characters become `_`. */
export function workerKeyToken(workerId: string): string {
  const t = workerId.replace(/[^A-Za-z0-9_-]/g, "_");
  return t === "" ? "_" : t;
}

function assertToolName(name: string): void {
  if (!name.split(".").every((t) => KEY_TOKEN_RE.test(t))) {
    throw ToolSdkInvalidOptions("tool name", [`"${name}" must be dot-separated words of letters, digits, "_" or "-"`]);
  }
}

function visible(t: ToolDescriptor, tenantId: string | undefined): boolean {
  return tenantId === undefined || t.tenants === undefined || t.tenants.includes(tenantId);
}

const enc = new TextEncoder();
const dec = new TextDecoder();

/** Opens the registry of the bus's prefix (creating its buckets when needed). */
export function createToolRegistry(bus: Bus, opts: ToolRegistryOptions = {}): ToolRegistry {
  const presenceTtlMs = opts.presenceTtlMs ?? DEFAULT_PRESENCE_TTL_MS;
  const cacheTtlMs = opts.cacheTtlMs ?? 30_000;
  if (!(Number.isInteger(presenceTtlMs) && presenceTtlMs >= 1_000)) {
    throw ToolSdkInvalidOptions("ToolRegistryOptions", ["presenceTtlMs: must be an integer of at least 1000"]);
  }
  const descriptors = (): Promise<KV> => bus.kv(DESCRIPTORS_BUCKET);
  const presence = (): Promise<KV> => bus.kv(PRESENCE_BUCKET, { ttlMs: presenceTtlMs });
  const known = new Map<string, number>();

  const readDescriptor = async (name: string): Promise<ToolDescriptor | undefined> => {
    const e = await (await descriptors()).get(name);
    if (!e || e.operation !== "PUT" || e.length === 0) return undefined;
    return JSON.parse(dec.decode(e.value)) as ToolDescriptor;
  };

  /**
   * Presence keys refreshed within the TTL. The bucket's max age alone is not trusted:
   * NATS 2.9 keeps postponing age expiry while other keys of the bucket are updated,
   * so an entry counts only when its last put is younger than the TTL.
   */
  const livePresence = async (filter?: string): Promise<string[]> => {
    const kv = await presence();
    const keys = await bus.kvKeys(PRESENCE_BUCKET, filter);
    const now = Date.now();
    const entries = await Promise.all(keys.map((k) => kv.get(k)));
    return entries.filter((e) => e !== null && e.operation === "PUT" && now - e.created.getTime() < presenceTtlMs).map((e) => e!.key);
  };

  /** tool name → live worker count; the worker is the last token of `{tool}.{worker}`. */
  const workerCounts = async (): Promise<Map<string, number>> => {
    const counts = new Map<string, number>();
    for (const k of await livePresence()) {
      const tool = k.slice(0, k.lastIndexOf("."));
      counts.set(tool, (counts.get(tool) ?? 0) + 1);
    }
    return counts;
  };

  const putPresence = async (kv: KV, workerId: string, names: readonly string[]): Promise<void> => {
    const value = enc.encode(JSON.stringify({ workerId, at: new Date().toISOString() }));
    await Promise.all(names.map((n) => kv.put(`${n}.${workerKeyToken(workerId)}`, value)));
  };

  return {
    presenceTtlMs,
    async list({ tenantId } = {}) {
      const [names, counts] = await Promise.all([bus.kvKeys(DESCRIPTORS_BUCKET), workerCounts()]);
      const tools: RegisteredTool[] = [];
      for (const name of names) {
        const d = await readDescriptor(name);
        if (!d) continue;
        known.set(name, Date.now());
        if (visible(d, tenantId)) tools.push({ ...d, workers: counts.get(name) ?? 0 });
      }
      return tools;
    },
    async get(name) {
      assertToolName(name);
      const d = await readDescriptor(name);
      if (!d) return undefined;
      known.set(name, Date.now());
      const workers = (await livePresence(`${name}.*`)).length;
      return { ...d, workers };
    },
    async has(name) {
      const at = known.get(name);
      if (at !== undefined && Date.now() - at < cacheTtlMs) return true;
      if (!name.split(".").every((t) => KEY_TOKEN_RE.test(t))) return false;
      const d = await readDescriptor(name);
      if (d) known.set(name, Date.now());
      else known.delete(name);
      return d !== undefined;
    },
    async register(workerId, tools, { heartbeatMs = Math.floor(presenceTtlMs / 3) } = {}) {
      for (const t of tools) assertToolName(t.name);
      const names = tools.map((t) => t.name);
      const [dkv, pkv] = await Promise.all([descriptors(), presence()]);
      // Presence first: a tool listed is never seen without the worker that registers it
      // (`GET /api/tools` read between the two said 0 workers; a presence key of a tool not
      // listed yet counts for nothing).
      await putPresence(pkv, workerId, names);
      for (const t of tools) await dkv.put(t.name, enc.encode(JSON.stringify(t)));
      let stopped = false;
      let beating: Promise<void> = Promise.resolve();
      const timer = setInterval(() => {
        beating = putPresence(pkv, workerId, names).catch(() => undefined);
      }, heartbeatMs);
      timer.unref();
      return {
        async stop() {
          if (stopped) return;
          stopped = true;
          clearInterval(timer);
          await beating;
          await Promise.all(names.map((n) => pkv.delete(`${n}.${workerKeyToken(workerId)}`).catch(() => undefined)));
        },
      };
    },
    async remove(name) {
      assertToolName(name);
      known.delete(name);
      await (await descriptors()).delete(name);
    },
  };
}
