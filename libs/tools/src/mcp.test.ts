/**
 * Rules, against a real MCP server (the SDK's McpServer, __fixtures__/mcp-tools.ts) over
 * stdio (a spawned node process) and over Streamable HTTP (a node:http server in this test):
 * - each MCP tool becomes `${server}.${tool}` with the MCP input schema as inputJsonSchema;
 * - a call returns {content, structuredContent?}; `isError` becomes the non-retryable
 *   BATON_TOOL_MCP_TOOL_ERROR carrying the text content;
 * - progress notifications reach ctx.progress;
 * - a closed transport is reopened on the next call (stdio: the process died; HTTP: the
 *   server forgot the session and answers 404, and the call is sent again on a new session);
 * - the HTTP transport goes through the HTTP policy (loopback refused by default);
 * - configurations are validated with clear paths.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "@jest/globals";
import { randomUUID } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { fileURLToPath } from "node:url";
import type { ToolContext, ToolSpec } from "@baton/sdk";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { createFixtureServer } from "./__fixtures__/mcp-tools.ts";
import { connectMcpTools, mcpServerConfigSchema, parseMcpServerConfig, sanitizeToolName, type McpTools } from "./index.ts";
import { toolContext } from "@baton/sdk/testing";

const progress: Array<[number, string | undefined]> = [];
function context(signal: AbortSignal = new AbortController().signal): ToolContext {
  return toolContext({ signal, progress: (f, m) => void progress.push([f, m]) });
}

function find(set: McpTools, name: string): ToolSpec {
  const t = set.tools.find((s) => s.name === name);
  if (!t) throw new Error(`no ${name} in ${set.tools.map((s) => s.name).join(", ")}`);
  return t;
}

const stdioScript = fileURLToPath(new URL("./__fixtures__/mcp-stdio-server.ts", import.meta.url));
const open: McpTools[] = [];
afterEach(async () => {
  for (const s of open.splice(0)) await s.close();
});

async function sharedChecks(set: McpTools, prefix: string): Promise<void> {
  expect(set.tools.map((t) => t.name).sort()).toEqual([`${prefix}.add`, `${prefix}.crash`, `${prefix}.echo`, `${prefix}.fail`, `${prefix}.get-pid`]);
  const echo = find(set, `${prefix}.echo`);
  expect(echo.description).toBe("Echoes text.");
  expect(echo.inputJsonSchema).toMatchObject({ type: "object", properties: { text: { type: "string" } }, required: ["text"] });
  expect(await echo.handler({ text: "hi" }, context())).toEqual({ content: [{ type: "text", text: "hi" }], structuredContent: { echoed: "hi" } });

  progress.length = 0;
  expect(await find(set, `${prefix}.add`).handler({ a: 2, b: 3 }, context())).toEqual({ content: [{ type: "text", text: "5" }] });
  expect(progress).toEqual([[0.5, "half"]]);

  await expect(find(set, `${prefix}.fail`).handler({ reason: "no budget" }, context())).rejects.toMatchObject({
    code: "BATON_TOOL_MCP_TOOL_ERROR",
    retryable: false,
    message: `MCP tool "${prefix}.fail" failed: refused: no budget`,
  });

  await expect(echo.handler({ text: 42 }, context())).rejects.toMatchObject({ code: "BATON_TOOL_MCP_TOOL_ERROR" });
}

describe("MCP over stdio", () => {
  it("lists and calls the server's tools", async () => {
    const set = await connectMcpTools({ name: "fx", transport: { type: "stdio", command: process.execPath, args: [stdioScript] } }, { stderr: "ignore" });
    open.push(set);
    await sharedChecks(set, "fx");
  });

  it("reopens the connection after the server process died", async () => {
    const set = await connectMcpTools({ name: "fx", transport: { type: "stdio", command: process.execPath, args: [stdioScript] } }, { stderr: "ignore" });
    open.push(set);
    const pid = find(set, "fx.get-pid");
    const first = (await pid.handler({}, context())) as { content: Array<{ text: string }> };
    await expect(find(set, "fx.crash").handler({}, context())).rejects.toMatchObject({ code: "BATON_TOOL_MCP_CONNECTION_LOST", retryable: true });
    const second = (await pid.handler({}, context())) as { content: Array<{ text: string }> };
    expect(Number(second.content[0]!.text)).toBeGreaterThan(0);
    expect(second.content[0]!.text).not.toBe(first.content[0]!.text);
  });

  it("fails to connect to a command that does not exist, retryably", async () => {
    await expect(
      connectMcpTools({ name: "nope", transport: { type: "stdio", command: "/nonexistent/mcp-server" } }, { stderr: "ignore", connectTimeoutMs: 5_000 }),
    ).rejects.toMatchObject({ code: "BATON_TOOL_MCP_CONNECT_FAILED", retryable: true });
  });
});

describe("MCP over Streamable HTTP", () => {
  let server: http.Server;
  let url: string;
  const sessions = new Map<string, StreamableHTTPServerTransport>();
  let initializations = 0;
  const apiKeys = new Set<string>();

  beforeAll(async () => {
    server = http.createServer((req, res) => {
      void (async () => {
        const sid = req.headers["mcp-session-id"];
        if (typeof req.headers["x-api-key"] === "string") apiKeys.add(req.headers["x-api-key"]);
        let transport = typeof sid === "string" ? sessions.get(sid) : undefined;
        if (!transport) {
          if (typeof sid === "string") {
            res.writeHead(404, { "content-type": "application/json" }).end(JSON.stringify({ jsonrpc: "2.0", error: { code: -32001, message: "Session not found" }, id: null }));
            return;
          }
          const t = new StreamableHTTPServerTransport({
            sessionIdGenerator: () => randomUUID(),
            onsessioninitialized: (id) => {
              initializations++;
              sessions.set(id, t);
            },
          });
          await createFixtureServer().connect(t);
          transport = t;
        }
        await transport.handleRequest(req, res);
      })().catch((err: unknown) => {
        if (!res.headersSent) res.writeHead(500).end(String(err));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`;
  });

  afterAll(async () => {
    for (const t of sessions.values()) await t.close();
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  it("lists and calls the server's tools", async () => {
    const set = await connectMcpTools({ name: "remote", transport: { type: "http", url, headers: { "x-api-key": "k1" } } }, { http: { allowPrivate: true } });
    open.push(set);
    await sharedChecks(set, "remote");
    expect([...apiKeys]).toEqual(["k1"]);
  });

  it("sends the call again on a new session when the server forgot the old one", async () => {
    const set = await connectMcpTools({ name: "remote", transport: { type: "http", url } }, { http: { allowPrivate: true } });
    open.push(set);
    const before = initializations;
    for (const t of sessions.values()) await t.close();
    sessions.clear();
    expect(await find(set, "remote.echo").handler({ text: "again" }, context())).toMatchObject({ structuredContent: { echoed: "again" } });
    expect(initializations).toBe(before + 1);
  });

  it("refuses a loopback MCP server under the default HTTP policy", async () => {
    await expect(connectMcpTools({ name: "remote", transport: { type: "http", url } })).rejects.toMatchObject({
      code: "BATON_TOOL_HTTP_HOST_REFUSED",
      retryable: false,
    });
  });
});

describe("configuration", () => {
  it("validates with paths", () => {
    expect(mcpServerConfigSchema.safeParse({ name: "gh", transport: { type: "http", url: "https://mcp.example.com/mcp", headers: { authorization: "x" } } }).success).toBe(true);
    let details: string[] = [];
    try {
      parseMcpServerConfig({ name: "bad name", transport: { type: "stdio", args: "x" } });
    } catch (err) {
      expect((err as { code: string }).code).toBe("BATON_TOOL_MCP_CONFIG_INVALID");
      details = (err as { details: string[] }).details;
    }
    expect(details).toEqual(expect.arrayContaining([expect.stringMatching(/^name: /), expect.stringMatching(/^transport\.command: /), expect.stringMatching(/^transport\.args: /)]));
  });

  it("sanitizes tool names to dot-separated words", () => {
    expect(sanitizeToolName("get_weather")).toBe("get_weather");
    expect(sanitizeToolName("files/read")).toBe("files.read");
    expect(sanitizeToolName("say hi!")).toBe("say_hi_");
    expect(sanitizeToolName("a..b:c")).toBe("a.b.c");
  });
});
