/**
 * Tool sources: tools declared without code, shared through two NATS KV buckets of the
 * bus prefix.
 *
 * - `{prefix}_tool_sources`: one entry per source, key `{kind}.{name}`: an HTTP tool
 *   declaration (`kind: "http"`, the tool's name) or an MCP server configuration
 *   (`kind: "mcp"`, the server's name, the prefix of its tools), with the tenant that
 *   registered it. Written by the gateway (`/api/tool-sources`).
 * - `{prefix}_tool_source_status`: the same keys, written by the workers serving the
 *   sources: which tools a source yielded, or why it failed to load. The status carries the
 *   revision of the source entry it describes, so a status left from an older version of
 *   the source reads as `pending`.
 *
 * Declarations and configurations are stored as JSON objects; validating them is the
 * writer's job (`@baton/tools`' `httpToolDeclarationSchema` / `mcpServerConfigSchema`).
 */
import type { Bus, KV } from "@baton/bus";
import { ToolSdkInvalidOptions } from "./errors.ts";
import type { JsonObject } from "./tool.ts";

export const TOOL_SOURCES_BUCKET = "tool_sources";
export const TOOL_SOURCE_STATUS_BUCKET = "tool_source_status";

export type ToolSourceKind = "http" | "mcp";
export const TOOL_SOURCE_KINDS: readonly ToolSourceKind[] = ["http", "mcp"];

interface SourceBase {
  /** The HTTP tool's name, or the MCP server's name (the prefix of its tools' names). */
  name: string;
  /** The tenant that registered the source; its tools may be called by this tenant only. */
  tenantId: string;
  /** ISO-8601 time of the last write. */
  updatedAt: string;
}

/** An HTTP tool declared without code (an `HttpToolDeclaration` of `@baton/tools`). */
export interface HttpToolSource extends SourceBase {
  kind: "http";
  declaration: JsonObject;
}

/** An MCP server whose tools are served (an `McpServerConfig` of `@baton/tools`). */
export interface McpToolSource extends SourceBase {
  kind: "mcp";
  server: JsonObject;
}

export type ToolSource = HttpToolSource | McpToolSource;

/** What the serving workers report about a source. */
export interface ToolSourceStatus {
  /** `ready`: its tools are served; `failed`: it could not be loaded (see `error`). */
  state: "ready" | "failed";
  /** Names of the tools the source yielded (empty when it failed). */
  tools: string[];
  error?: { code: string; message: string };
  /** The revision of the source entry this status is about. */
  revision: number;
  workerId: string;
  /** ISO-8601. */
  at: string;
}

/** A stored source with its KV revision. */
export type StoredToolSource = ToolSource & { revision: number };

export interface ToolSourceStore {
  /** Writes a source; resolves with its new revision and whether it replaced an existing one. */
  put(source: ToolSource): Promise<{ revision: number; replaced: boolean }>;
  get(kind: ToolSourceKind, name: string): Promise<StoredToolSource | undefined>;
  /** Every source, sorted by kind then name. */
  list(): Promise<StoredToolSource[]>;
  /** Deletes a source (and its status); false when there was none. */
  delete(kind: ToolSourceKind, name: string): Promise<boolean>;
  /** Calls `onChange` after every write or delete of a source, until stopped. */
  watch(onChange: () => void): Promise<{ stop(): Promise<void> }>;
  setStatus(kind: ToolSourceKind, name: string, status: ToolSourceStatus): Promise<void>;
  getStatus(kind: ToolSourceKind, name: string): Promise<ToolSourceStatus | undefined>;
  deleteStatus(kind: ToolSourceKind, name: string): Promise<void>;
}

const NAME_RE = /^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/;
const enc = new TextEncoder();
const dec = new TextDecoder();

/** The KV key of a source: `{kind}.{name}`. */
export function toolSourceKey(kind: ToolSourceKind, name: string): string {
  if (!TOOL_SOURCE_KINDS.includes(kind)) throw ToolSdkInvalidOptions("tool source", [`kind: "${String(kind)}" is not one of http, mcp`]);
  if (!NAME_RE.test(name)) throw ToolSdkInvalidOptions("tool source", [`name: "${name}" must be dot-separated words of letters, digits, "_" or "-"`]);
  return `${kind}.${name}`;
}

function parseKey(key: string): { kind: ToolSourceKind; name: string } | undefined {
  const dot = key.indexOf(".");
  const kind = key.slice(0, dot) as ToolSourceKind;
  return dot > 0 && TOOL_SOURCE_KINDS.includes(kind) ? { kind, name: key.slice(dot + 1) } : undefined;
}

/** Opens the tool sources of the bus's prefix (creating the buckets when needed). */
export function createToolSourceStore(bus: Bus): ToolSourceStore {
  const sources = (): Promise<KV> => bus.kv(TOOL_SOURCES_BUCKET);
  const statuses = (): Promise<KV> => bus.kv(TOOL_SOURCE_STATUS_BUCKET);

  const read = async (kv: KV, key: string): Promise<StoredToolSource | undefined> => {
    const e = await kv.get(key);
    if (!e || e.operation !== "PUT" || e.length === 0) return undefined;
    return { ...(JSON.parse(dec.decode(e.value)) as ToolSource), revision: e.revision };
  };

  return {
    async put(source) {
      const key = toolSourceKey(source.kind, source.name);
      const kv = await sources();
      const prior = await read(kv, key);
      const revision = await kv.put(key, enc.encode(JSON.stringify(source)));
      return { revision, replaced: prior !== undefined };
    },
    async get(kind, name) {
      return read(await sources(), toolSourceKey(kind, name));
    },
    async list() {
      const kv = await sources();
      const out: StoredToolSource[] = [];
      for (const k of (await bus.kvKeys(TOOL_SOURCES_BUCKET)).filter((key) => parseKey(key) !== undefined)) {
        const s = await read(kv, k);
        if (s) out.push(s);
      }
      return out;
    },
    async delete(kind, name) {
      const key = toolSourceKey(kind, name);
      const kv = await sources();
      if (!(await read(kv, key))) return false;
      await kv.delete(key);
      await (await statuses()).delete(key).catch(() => undefined);
      return true;
    },
    async watch(onChange) {
      const iter = await (await sources()).watch({ include: "updates" });
      const loop = (async () => {
        for await (const _ of iter) onChange();
      })();
      return {
        async stop() {
          iter.stop();
          await loop.catch(() => undefined);
        },
      };
    },
    async setStatus(kind, name, status) {
      await (await statuses()).put(toolSourceKey(kind, name), enc.encode(JSON.stringify(status)));
    },
    async getStatus(kind, name) {
      const e = await (await statuses()).get(toolSourceKey(kind, name));
      if (!e || e.operation !== "PUT" || e.length === 0) return undefined;
      return JSON.parse(dec.decode(e.value)) as ToolSourceStatus;
    },
    async deleteStatus(kind, name) {
      await (await statuses()).delete(toolSourceKey(kind, name));
    },
  };
}
