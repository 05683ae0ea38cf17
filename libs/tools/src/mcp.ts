/**
 * MCP servers as Baton tools. `connectMcpTools` connects to one server (stdio or Streamable
 * HTTP) with the official SDK's client, lists its tools and turns each into a ToolSpec whose
 * handler calls `tools/call`.
 *
 * Reconnection: when the transport has closed (the server process exited, the HTTP session
 * is gone), the next call opens a new connection first. A call that fails because its HTTP
 * session is unknown to the server (404: the request was not handled) is sent once more on a
 * new connection. A connection that closes while a call is in flight is not retried here —
 * the call may have run — it fails with the retryable `BATON_TOOL_MCP_CONNECTION_LOST`.
 */
import { hasCode } from "@baton/errors";
import { formatIssues, type JsonSchema, type JsonValue, type ToolSpec } from "@baton/sdk";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport, StreamableHTTPError } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { ErrorCode, McpError, type Tool } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";
import { McpConfigInvalid, McpConnectFailed, McpConnectionLost, McpProtocolError, McpToolError } from "./errors.ts";
import { abortError, createHttpClient } from "./http-client.ts";
import type { HttpPolicy } from "./policy.ts";

const TOOL_NAME = /^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/;

/** How to reach an MCP server, and the prefix of its tools' Baton names. */
export const mcpServerConfigSchema = z
  .object({
    /** Prefix of the Baton tool names: `${name}.${mcpToolName}`. Dot-separated words. */
    name: z.string().max(200).regex(TOOL_NAME, "server names are dot-separated words (letters, digits, _ and -)"),
    transport: z.discriminatedUnion("type", [
      z
        .object({
          type: z.literal("stdio"),
          command: z.string().min(1),
          args: z.array(z.string()).optional(),
          /** Added to the SDK's safe default environment (HOME, PATH, ...). */
          env: z.record(z.string(), z.string()).optional(),
          cwd: z.string().min(1).optional(),
        })
        .strict(),
      z
        .object({
          type: z.literal("http"),
          /** The Streamable HTTP endpoint, e.g. `https://mcp.example.com/mcp`. Reached through the HTTP policy. */
          url: z.url({ protocol: /^https?$/, error: "url must be an absolute http or https URL" }),
          headers: z.record(z.string(), z.string()).optional(),
        })
        .strict(),
    ]),
    /** Per-call time limit of this server's tools. @default 60000 */
    timeoutMs: z.int().min(1).max(30 * 60_000).optional(),
    /** Tenants allowed to call this server's tools; absent = every tenant. */
    tenants: z.array(z.string().min(1)).optional(),
  })
  .strict();

export type McpServerConfig = z.input<typeof mcpServerConfigSchema>;

/** Options of {@link connectMcpTools}. */
export interface ConnectMcpOptions {
  /** Policy for `http` transports (the same guard as `http.request`). @default {} (public hosts only) */
  http?: HttpPolicy;
  /** Time limit of the connection handshake and of listing tools. @default 30000 */
  connectTimeoutMs?: number;
  /** What to do with a stdio server's stderr. @default "inherit" */
  stderr?: "inherit" | "ignore" | "pipe";
  /** Client name and version sent in `initialize`. @default { name: "baton", version: "0.1.0" } */
  clientInfo?: { name: string; version: string };
}

export interface McpTools {
  /** One ToolSpec per MCP tool, named `${server.name}.${sanitized tool name}`. */
  tools: ToolSpec[];
  /** Closes the connection (and stops a stdio server). Calls after this fail. */
  close(): Promise<void>;
}

/** `get_weather` → `get_weather`; `files/read` → `files.read`; `say hi!` → `say_hi_`. */
export function sanitizeToolName(name: string): string {
  const words = name
    .split(/[./:]+/)
    .map((w) => w.replace(/[^A-Za-z0-9_-]/g, "_"))
    .filter((w) => w.length > 0);
  return words.length > 0 ? words.join(".") : "_";
}

/** Validates a server configuration; throws `BATON_TOOL_MCP_CONFIG_INVALID` whose `details` lists `path: message` problems. */
export function parseMcpServerConfig(config: unknown): z.output<typeof mcpServerConfigSchema> {
  const r = mcpServerConfigSchema.safeParse(config);
  if (r.success) return r.data;
  const problems = formatIssues(r.error.issues).split("; ");
  throw McpConfigInvalid(problems, { details: problems });
}

function textContent(content: unknown): string {
  if (!Array.isArray(content)) return "";
  return content
    .filter((c): c is { type: "text"; text: string } => (c as { type?: unknown }).type === "text" && typeof (c as { text?: unknown }).text === "string")
    .map((c) => c.text)
    .join("\n");
}

/** True when the request never reached a live session, so sending it again cannot run it twice. */
function notDelivered(err: unknown): boolean {
  if (err instanceof StreamableHTTPError) return err.code === 404;
  return err instanceof Error && err.message === "Not connected";
}

/** Connects to an MCP server and returns its tools as ToolSpecs. */
export async function connectMcpTools(server: McpServerConfig, opts: ConnectMcpOptions = {}): Promise<McpTools> {
  const cfg = parseMcpServerConfig(server);
  const connectTimeoutMs = opts.connectTimeoutMs ?? 30_000;
  const callTimeoutMs = cfg.timeoutMs ?? 60_000;
  const clientInfo = opts.clientInfo ?? { name: "baton", version: "0.1.0" };
  const httpClient = cfg.transport.type === "http" ? createHttpClient(opts.http ?? {}) : undefined;

  let current: Client | undefined;
  let connecting: Promise<Client> | undefined;
  let closed = false;

  const makeTransport = (): Transport => {
    const t = cfg.transport;
    if (t.type === "stdio") {
      return new StdioClientTransport({
        command: t.command,
        ...(t.args ? { args: t.args } : {}),
        ...(t.env ? { env: t.env } : {}),
        ...(t.cwd ? { cwd: t.cwd } : {}),
        stderr: opts.stderr ?? "inherit",
      });
    }
    return new StreamableHTTPClientTransport(new URL(t.url), {
      fetch: (url, init) => httpClient!.fetch(url, init),
      ...(t.headers ? { requestInit: { headers: t.headers } } : {}),
    });
  };

  const connect = async (): Promise<Client> => {
    const client = new Client(clientInfo, { capabilities: {} });
    client.onclose = () => {
      if (current === client) current = undefined;
    };
    try {
      await client.connect(makeTransport(), { timeout: connectTimeoutMs });
    } catch (err) {
      await client.close().catch(() => undefined);
      if (hasCode(err) && !err.retryable) throw err;
      throw McpConnectFailed(cfg.name, err instanceof Error ? err.message : String(err), { cause: err });
    }
    if (closed) {
      await client.close();
      throw McpConnectFailed(cfg.name, "closed");
    }
    current = client;
    return client;
  };

  const getClient = async (): Promise<Client> => {
    if (closed) throw McpConnectFailed(cfg.name, "the connection was closed with close()");
    if (current) return current;
    connecting ??= connect().finally(() => (connecting = undefined));
    return connecting;
  };

  const drop = async (client: Client): Promise<void> => {
    if (current === client) current = undefined;
    await client.close().catch(() => undefined);
  };

  const first = await getClient();
  const listed: Tool[] = [];
  try {
    let cursor: string | undefined;
    do {
      const page = await first.listTools(cursor === undefined ? {} : { cursor }, { timeout: connectTimeoutMs });
      listed.push(...page.tools);
      cursor = page.nextCursor;
    } while (cursor !== undefined);
  } catch (err) {
    closed = true;
    await first.close().catch(() => undefined);
    throw McpConnectFailed(cfg.name, `tools/list failed: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
  }

  const taken = new Set<string>();
  const uniqueName = (tool: Tool): string => {
    const base = `${cfg.name}.${sanitizeToolName(tool.name)}`;
    let name = base;
    for (let n = 2; taken.has(name); n++) name = `${base}_${n}`;
    taken.add(name);
    return name;
  };

  const toSpec = (tool: Tool): ToolSpec => {
    const name = uniqueName(tool);
    const outputJsonSchema: JsonSchema = {
      type: "object",
      properties: {
        content: { type: "array" },
        ...(tool.outputSchema ? { structuredContent: tool.outputSchema as JsonSchema } : {}),
      },
      required: ["content"],
    };
    return {
      name,
      description: tool.description ?? tool.title ?? `MCP tool ${tool.name} of ${cfg.name}`,
      inputJsonSchema: tool.inputSchema as JsonSchema,
      outputJsonSchema,
      timeoutMs: callTimeoutMs,
      ...(cfg.tenants ? { tenants: cfg.tenants } : {}),
      async handler(input, ctx) {
        const args = input !== null && typeof input === "object" && !Array.isArray(input) ? (input as Record<string, unknown>) : {};
        let client = await getClient();
        for (let resent = false; ; resent = true) {
          try {
            const result = await client.callTool({ name: tool.name, arguments: args }, undefined, {
              signal: ctx.signal,
              timeout: callTimeoutMs,
              onprogress: (p) => ctx.progress(p.total ? p.progress / p.total : -1, p.message),
            });
            const content = (result.content ?? []) as JsonValue;
            if (result.isError) {
              throw McpToolError(name, textContent(result.content) || "isError without text content", {
                details: { content, ...(result.structuredContent ? { structuredContent: result.structuredContent as JsonValue } : {}) },
              });
            }
            return {
              content,
              ...(result.structuredContent === undefined ? {} : { structuredContent: result.structuredContent as JsonValue }),
            };
          } catch (err) {
            if (McpToolError.is(err)) throw err;
            if (ctx.signal.aborted) throw abortError(ctx.signal, name);
            if (notDelivered(err) && !resent) {
              await drop(client);
              client = await getClient();
              continue;
            }
            if (err instanceof McpError) {
              if (err.code === (ErrorCode.ConnectionClosed as number)) {
                await drop(client);
                throw McpConnectionLost(cfg.name, name, { cause: err });
              }
              throw McpProtocolError(name, err.message, { cause: err, retryable: err.code === (ErrorCode.RequestTimeout as number) });
            }
            if (hasCode(err)) throw err;
            await drop(client);
            throw McpProtocolError(name, err instanceof Error ? err.message : String(err), { cause: err, retryable: true });
          }
        }
      },
    };
  };

  return {
    tools: listed.map(toSpec),
    async close() {
      closed = true;
      const c = current ?? (connecting ? await connecting.catch(() => undefined) : undefined);
      current = undefined;
      if (c) await c.close();
    },
  };
}
