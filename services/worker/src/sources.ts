/**
 * Serves the tool sources (`@baton/sdk`'s tool source store): every HTTP tool declared
 * without code and every MCP server registered through `/api/tool-sources`.
 *
 * The SDK worker serves a fixed set of tools, so this runs one SDK worker of its own for
 * the sources and replaces it when they change: a watch on the sources bucket triggers a
 * reload (debounced), which builds the tools of new or changed sources, drains the old
 * worker (calls in flight finish; new calls wait in their work queue), starts a new one
 * with the new set, then closes the MCP connections of sources that went away. Sources
 * that did not change keep their MCP connection.
 *
 * A source that cannot be loaded (an MCP server that does not start, a name already taken)
 * is logged and skipped; its status (`failed`, with the error) is written next to it, as is
 * `ready` with the tool names of every source that loaded. Tools of removed sources are
 * removed from the registry. Every tool is scoped to the source's tenant: its `tenants` is
 * that tenant alone, and the handler refuses calls of any other tenant.
 */
import type { Bus } from "@baton/bus";
import { errorMessage, hasCode } from "@baton/errors";
import { createToolRegistry, createToolSourceStore, createWorker } from "@baton/sdk";
import type { StoredToolSource, ToolSourceStatus, ToolSpec, Worker } from "@baton/sdk";
import { createLogger } from "@baton/telemetry";
import type { Logger } from "@baton/telemetry";
import { connectMcpTools, httpTool } from "@baton/tools";
import type { HttpPolicy, HttpToolDeclaration, McpServerConfig } from "@baton/tools";
import { ToolSourceConflict, ToolSourceLoadFailed, ToolSourceTenantRefused } from "./errors.ts";

export interface ToolSourcesWorkerOptions {
  /** A connected bus; not closed by the worker. */
  bus: Bus;
  logger?: Logger;
  /** Where HTTP tools and MCP servers over HTTP may go (`policyFromEnv(process.env)`). @default any public host */
  http?: HttpPolicy;
  /** Base of the worker id in the registry; `:sources` is appended. @default "sources" */
  workerId?: string;
  /** Handlers running at once over all source tools. @default 16 */
  concurrency?: number;
  /** How long a replaced worker waits for calls in flight. @default 30_000 */
  drainGraceMs?: number;
  /** Changes closer together than this are loaded together. @default 200 */
  debounceMs?: number;
  /** Time limit of an MCP server's handshake and tool listing. @default 30_000 */
  mcpConnectTimeoutMs?: number;
  /** What to do with stdio MCP servers' stderr. @default "inherit" */
  mcpStderr?: "inherit" | "ignore";
  /** Registry presence TTL (tests shorten it). @default the SDK's */
  presenceTtlMs?: number;
  /** Results whose JSON is larger go through the object bucket (the SDK's `largeResultBytes`). @default the SDK's */
  largeResultBytes?: number;
  /** Results whose JSON is larger fail with BATON_TOOL_RESULT_TOO_LARGE (the SDK's `maxResultBytes`). @default the SDK's */
  maxResultBytes?: number;
}

export interface ToolSourcesWorker {
  /** Watches the sources and serves them. Sources that fail are skipped, never fatal. */
  start(): Promise<void>;
  /** Stops watching, drains the worker, closes every MCP connection. */
  stop(): Promise<void>;
  ready(): boolean;
  /** Names of the tools served now. */
  readonly tools: readonly string[];
}

interface Loaded {
  revision: number;
  tools: ToolSpec[];
  close?: () => Promise<void>;
}

const sourceLabel = (s: { kind: string; name: string }): string => `${s.kind}:${s.name}`;

/** Wraps a tool so it is listed for, and callable by, one tenant only. */
function scoped(spec: ToolSpec, tenantId: string, kind: "http" | "mcp"): ToolSpec {
  return {
    ...spec,
    kind,
    tenants: [tenantId],
    handler(input, ctx) {
      if (ctx.tenantId !== tenantId) throw ToolSourceTenantRefused(spec.name, ctx.tenantId);
      return spec.handler(input, ctx);
    },
  };
}

/** Builds (does not start) the worker serving the tool sources of the bus's prefix. */
export function createToolSourcesWorker(opts: ToolSourcesWorkerOptions): ToolSourcesWorker {
  const { bus } = opts;
  const logger = (opts.logger ?? createLogger("worker", "info")).child({ component: "tool-sources" });
  const workerId = `${opts.workerId ?? "sources"}:sources`;
  const debounceMs = opts.debounceMs ?? 200;
  const store = createToolSourceStore(bus);
  const registry = createToolRegistry(bus, opts.presenceTtlMs === undefined ? {} : { presenceTtlMs: opts.presenceTtlMs });

  let loaded = new Map<string, Loaded>();
  let served: string[] = [];
  let worker: Worker | undefined;
  let watch: { stop(): Promise<void> } | undefined;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> | undefined;
  let again = false;
  let started = false;
  let stopped = false;

  const load = async (s: StoredToolSource): Promise<Loaded> => {
    try {
      if (s.kind === "http") {
        const decl = { ...s.declaration, name: s.name, tenants: [s.tenantId] } as HttpToolDeclaration;
        return { revision: s.revision, tools: [scoped(httpTool(decl, opts.http ?? {}), s.tenantId, "http")] };
      }
      const server = { ...s.server, name: s.name, tenants: [s.tenantId] } as McpServerConfig;
      const mcp = await connectMcpTools(server, {
        http: opts.http ?? {},
        connectTimeoutMs: opts.mcpConnectTimeoutMs ?? 30_000,
        stderr: opts.mcpStderr ?? "inherit",
      });
      return { revision: s.revision, tools: mcp.tools.map((t) => scoped(t, s.tenantId, "mcp")), close: () => mcp.close() };
    } catch (err) {
      if (hasCode(err)) throw err;
      throw ToolSourceLoadFailed(sourceLabel(s), errorMessage(err), { cause: err });
    }
  };

  const status = async (s: StoredToolSource, st: Omit<ToolSourceStatus, "revision" | "workerId" | "at">): Promise<void> => {
    await store
      .setStatus(s.kind, s.name, { ...st, revision: s.revision, workerId, at: new Date().toISOString() })
      .catch((err: unknown) => logger.warn("tool source status not written", { source: sourceLabel(s), err: errorMessage(err) }));
  };

  const fail = async (s: StoredToolSource, err: unknown): Promise<void> => {
    const code = hasCode(err) ? err.code : ToolSourceLoadFailed.code;
    logger.warn("tool source not served", { source: sourceLabel(s), code, err: errorMessage(err) });
    await status(s, { state: "failed", tools: [], error: { code, message: errorMessage(err) } });
  };

  async function reload(): Promise<void> {
    const sources = await store.list();
    const next = new Map<string, Loaded>();
    const fresh: StoredToolSource[] = [];
    const owner = new Map<string, string>();
    // New and changed sources load in parallel: one slow MCP server does not hold up the others.
    // Sources that failed before are tried again.
    const built = await Promise.all(
      sources.map(async (s) => {
        const cur = loaded.get(`${s.kind}.${s.name}`);
        if (cur && cur.revision === s.revision) return { ok: true as const, entry: cur };
        try {
          return { ok: true as const, entry: await load(s) };
        } catch (err) {
          return { ok: false as const, err };
        }
      }),
    );
    for (const [i, s] of sources.entries()) {
      const key = `${s.kind}.${s.name}`;
      const cur = loaded.get(key);
      const b = built[i]!;
      if (!b.ok) {
        await fail(s, b.err);
        continue;
      }
      const entry = b.entry;
      if (entry !== cur) fresh.push(s);
      // Names are global: a tool written in code, or one of an earlier source, wins.
      let conflict: Error | undefined;
      for (const t of entry.tools) {
        const taken = owner.get(t.name);
        if (taken !== undefined) conflict = ToolSourceConflict(sourceLabel(s), t.name, `source ${taken}`);
        else if (!served.includes(t.name) && (await registry.get(t.name))?.kind === "worker") conflict = ToolSourceConflict(sourceLabel(s), t.name, "a worker's code");
        if (conflict) break;
      }
      if (conflict) {
        if (entry !== cur) await entry.close?.().catch(() => undefined);
        await fail(s, conflict);
        continue;
      }
      for (const t of entry.tools) owner.set(t.name, sourceLabel(s));
      next.set(key, entry);
    }

    const retired = [...loaded.values()].filter((l) => ![...next.values()].includes(l));
    const tools = [...next.values()].flatMap((l) => l.tools);
    const names = tools.map((t) => t.name).sort();
    const changed =
      retired.length > 0 || [...next.values()].some((l) => ![...loaded.values()].includes(l)) || (worker === undefined && tools.length > 0);
    if (changed) {
      const old = worker;
      worker = undefined;
      await old?.drain();
      if (tools.length > 0 && !stopped) {
        try {
          const w = createWorker({
            bus,
            tools,
            workerId,
            logger,
            ...(opts.concurrency === undefined ? {} : { concurrency: opts.concurrency }),
            ...(opts.drainGraceMs === undefined ? {} : { drainGraceMs: opts.drainGraceMs }),
            ...(opts.presenceTtlMs === undefined ? {} : { presenceTtlMs: opts.presenceTtlMs }),
            ...(opts.largeResultBytes === undefined ? {} : { largeResultBytes: opts.largeResultBytes }),
            ...(opts.maxResultBytes === undefined ? {} : { maxResultBytes: opts.maxResultBytes }),
          });
          await w.start();
          worker = w;
        } catch (err) {
          // Nothing is served now; keep the sources that were loaded before so the next reload
          // (any change) starts a worker again, and close the connections opened for this one.
          for (const l of next.values()) if (![...loaded.values()].includes(l)) await l.close?.().catch(() => undefined);
          throw err;
        }
      }
      logger.info("tool sources served", { sources: next.size, tools: names });
    }
    // `ready` only once the worker serving the tools has registered them.
    for (const s of fresh) {
      const entry = next.get(`${s.kind}.${s.name}`);
      if (entry) await status(s, { state: "ready", tools: entry.tools.map((t) => t.name) });
    }
    for (const l of retired) await l.close?.().catch((err: unknown) => logger.warn("MCP connection not closed cleanly", { err: errorMessage(err) }));
    // Tools no source provides any more leave the registry (a name now served by code stays).
    for (const name of served.filter((n) => !names.includes(n))) {
      const d = await registry.get(name).catch(() => undefined);
      if (d && d.kind !== "worker") await registry.remove(name).catch(() => undefined);
    }
    loaded = next;
    served = names;
  }

  const trigger = (): void => {
    if (stopped) return;
    if (running) {
      again = true;
      return;
    }
    running = (async () => {
      do {
        again = false;
        try {
          await reload();
        } catch (err) {
          logger.error("tool sources not reloaded", { err: errorMessage(err) });
        }
      } while (again && !stopped);
    })().finally(() => (running = undefined));
  };

  return {
    get tools() {
      return served;
    },
    async start() {
      if (started) return;
      started = true;
      // Watch first: a change made during the first load triggers another one.
      watch = await store.watch(() => {
        clearTimeout(timer);
        timer = setTimeout(trigger, debounceMs);
      });
      trigger();
      await running;
    },
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await watch?.stop();
      await running;
      await worker?.drain();
      worker = undefined;
      for (const l of loaded.values()) await l.close?.().catch(() => undefined);
      loaded = new Map();
    },
    ready: () => started && !stopped,
  };
}
