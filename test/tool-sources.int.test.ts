/**
 * Tools declared without code, end to end: all services in one process (startBaton) on the
 * real NATS, Redis and Postgres, a real HTTP server and a real MCP server (the stdio fixture
 * of `@baton/tools`). Rules checked:
 * - an HTTP tool registered through `POST /api/tool-sources/http` is served by the built-in
 *   worker: it shows in `GET /api/tools` (kind http, a live worker), and a workflow calling it
 *   runs to completion with the server's answer;
 * - an MCP server registered through `POST /api/tool-sources/mcp` (stdio) has its tools listed
 *   as `{server}.{tool}` and a workflow calls one; a server that does not start is reported as
 *   `failed` with its error code while the other sources are still served;
 * - the tools belong to the registering tenant: another tenant does not see them;
 * - another tenant may name a source's tool in a workflow, but the worker refuses the call
 *   (BATON_TOOL_SOURCE_TENANT_REFUSED);
 * - deleting a source removes its tool from the registry; deleting an MCP server stops its
 *   process;
 * - a declared tool aimed at a refused host (cloud metadata) fails its node with
 *   BATON_TOOL_HTTP_HOST_REFUSED at once, without retries.
 */
import { createServer } from "node:http";
import type { IncomingMessage, Server } from "node:http";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { createStore } from "@baton/store";
import { createLogger } from "@baton/telemetry";
import { startBaton } from "../bin/start.ts";
import type { BatonHandle } from "../bin/start.ts";
import { api, isolatedConfig, removeIsolated, waitFor } from "./helpers.ts";
import type { Api } from "./helpers.ts";
import { waitForStatus } from "./quickstart.ts";

const mcpFixture = fileURLToPath(new URL("../libs/tools/src/__fixtures__/mcp-stdio-server.ts", import.meta.url));

interface Source {
  kind: string;
  name: string;
  status: "pending" | "ready" | "failed";
  tools: string[];
  error?: { code: string; message: string };
}
interface Tool {
  name: string;
  kind: string;
  workers: number;
  inputSchema: Record<string, unknown>;
}

const { config, env } = isolatedConfig({ BATON_HTTP_ALLOW_PRIVATE: "true" });
const savedAllowPrivate = process.env.BATON_HTTP_ALLOW_PRIVATE;
let baton: BatonHandle;
let a: Api;
let b: Api;
let server: Server;
let serverUrl: string;
const seen: { method: string; url: string; auth: string | undefined }[] = [];

/** Waits until a worker reported on the source (ready or failed). */
function settled(name: string, kind = "http"): Promise<Source> {
  return waitFor(`tool source ${kind}/${name} to be loaded`, async () => {
    const r = await a.call<Source>("GET", `/api/tool-sources/${kind}/${name}`);
    return r.status === 200 && r.body.status !== "pending" ? r.body : undefined;
  });
}

function servedTool(name: string): Promise<Tool> {
  return waitFor(`tool ${name} to have a live worker`, async () => {
    const r = await a.call<Tool>("GET", `/api/tools/${name}`);
    return r.status === 200 && r.body.workers > 0 ? r.body : undefined;
  });
}

async function runWorkflow(slug: string, definition: Record<string, unknown>, input: Record<string, unknown> = {}) {
  const created = await a.call<{ id: number }>("POST", "/api/agent-workflows", { name: slug, slug, definition });
  if (created.status !== 201) throw new Error(`create answered ${created.status}: ${JSON.stringify(created.body)}`);
  const started = await a.call<{ id: number }>("POST", `/api/agent-workflows/${created.body.id}/execute`, { input });
  if (started.status !== 202) throw new Error(`execute answered ${started.status}: ${JSON.stringify(started.body)}`);
  return waitForStatus(a, started.body.id, ["completed", "failed"]);
}

beforeAll(async () => {
  server = createServer((req: IncomingMessage, res) => {
    seen.push({ method: req.method ?? "", url: req.url ?? "", auth: req.headers.authorization });
    const url = new URL(req.url ?? "/", "http://localhost");
    const m = /^\/greet\/([^/]+)$/.exec(url.pathname);
    if (!m) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({ greeting: `hello ${decodeURIComponent(m[1]!)}${url.searchParams.get("punct") ?? ""}` }));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const addr = server.address();
  serverUrl = `http://127.0.0.1:${typeof addr === "object" && addr ? addr.port : 0}`;

  // The worker module reads the HTTP policy from the process environment.
  process.env.BATON_HTTP_ALLOW_PRIVATE = env.BATON_HTTP_ALLOW_PRIVATE;
  baton = await startBaton({ config, logger: createLogger("tool-sources", "warn") });
  a = api(baton.gatewayPort!, config.apiKey!);
  const store = createStore({ databaseUrl: config.databaseUrl, schema: config.databaseSchema });
  try {
    const other = await store.tenants.create("other tenant");
    b = api(baton.gatewayPort!, (await store.tenants.createApiKey(other.id, { role: "admin", name: "other-admin" })).rawKey);
  } finally {
    await store.close();
  }
}, 60_000);

afterAll(async () => {
  await baton?.stop();
  if (savedAllowPrivate === undefined) delete process.env.BATON_HTTP_ALLOW_PRIVATE;
  else process.env.BATON_HTTP_ALLOW_PRIVATE = savedAllowPrivate;
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  await removeIsolated(config);
});

describe("tools declared without code", () => {
  it("serves an HTTP tool registered through the gateway, and a workflow calls it", async () => {
    const res = await a.call<Source>("POST", "/api/tool-sources/http", {
      name: "greet.hello",
      description: "Greets someone",
      method: "GET",
      url: `${serverUrl}/greet/{name}`,
      query: ["punct"],
      headers: { authorization: "Bearer declared-secret" },
      inputSchema: { type: "object", properties: { name: { type: "string" }, punct: { type: "string" } }, required: ["name"] },
      outputSchema: { type: "object", properties: { greeting: { type: "string" } }, required: ["greeting"] },
    });
    expect(res.status).toBe(201);
    expect(await settled("greet.hello")).toMatchObject({ status: "ready", tools: ["greet.hello"] });

    const tool = await servedTool("greet.hello");
    expect(tool).toMatchObject({ kind: "http", inputSchema: { required: ["name"] } });
    const listed = await a.call<{ items: Tool[] }>("GET", "/api/tools");
    expect(listed.body.items.map((t) => t.name)).toContain("greet.hello");
    // Another tenant neither sees the tool nor the source.
    expect((await b.call<{ items: Tool[] }>("GET", "/api/tools")).body.items.map((t) => t.name)).not.toContain("greet.hello");
    expect((await b.call("GET", "/api/tool-sources/http/greet.hello")).status).toBe(404);

    const done = await runWorkflow("greet-http", {
      nodes: [{ id: "g", type: "tool", config: { tool: "greet.hello" }, input: { name: "$.input.who", punct: "!" } }],
      output: { greeting: "$.g.greeting" },
    }, { who: "Ada Lovelace" });
    expect(done.status).toBe("completed");
    expect(done.output).toEqual({ greeting: "hello Ada Lovelace!" });
    expect(seen).toContainEqual({ method: "GET", url: "/greet/Ada%20Lovelace?punct=%21", auth: "Bearer declared-secret" });
  });

  it("serves an MCP server's tools (stdio), reports one that does not start, and a workflow calls a tool", async () => {
    const res = await a.call<Source>("POST", "/api/tool-sources/mcp", {
      name: "fx",
      transport: { type: "stdio", command: process.execPath, args: [mcpFixture] },
      timeoutMs: 10_000,
    });
    expect(res.status).toBe(201);
    const broken = await a.call<Source>("POST", "/api/tool-sources/mcp", { name: "broken", transport: { type: "stdio", command: "/nonexistent/mcp-server" } });
    expect(broken.status).toBe(201);

    const fx = await settled("fx", "mcp");
    expect(fx.status).toBe("ready");
    expect(fx.tools).toEqual(expect.arrayContaining(["fx.add", "fx.echo", "fx.fail", "fx.get-pid"]));
    const failed = await settled("broken", "mcp");
    expect(failed).toMatchObject({ status: "failed", tools: [], error: { code: "BATON_TOOL_MCP_CONNECT_FAILED" } });

    const add = await servedTool("fx.add");
    expect(add).toMatchObject({ kind: "mcp", inputSchema: { properties: { a: { type: "number" }, b: { type: "number" } } } });
    // The HTTP tool registered before is still served after the worker was replaced.
    expect((await servedTool("greet.hello")).workers).toBeGreaterThan(0);

    const done = await runWorkflow("mcp-add", {
      nodes: [{ id: "add", type: "tool", config: { tool: "fx.add" }, input: { a: "$.input.a", b: 3 } }],
      output: { result: "$.add" },
    }, { a: 2 });
    expect(done.status).toBe("completed");
    expect(done.output).toEqual({ result: { content: [{ type: "text", text: "5" }] } });

    // Tenant B can name the tool (names are global) but the worker refuses its calls.
    const created = await b.call<{ id: number }>("POST", "/api/agent-workflows", {
      name: "b-add",
      slug: "b-add",
      definition: { nodes: [{ id: "add", type: "tool", config: { tool: "fx.add" }, input: { a: 1, b: 1 } }] },
    });
    expect(created.status).toBe(201);
    const started = await b.call<{ id: number }>("POST", `/api/agent-workflows/${created.body.id}/execute`, { input: {} });
    expect(started.status).toBe(202);
    const refused = await waitFor("tenant B's execution to end", async () => {
      const r = await b.call<{ status: string; error: string | null }>("GET", `/api/agent-workflow-executions/${started.body.id}`);
      return ["completed", "failed"].includes(r.body.status) ? r.body : undefined;
    });
    expect(refused.status).toBe("failed");
    expect(refused.error).toContain("BATON_TOOL_SOURCE_TENANT_REFUSED");
  });

  it("removes a deleted source's tool from the registry", async () => {
    expect((await a.call("DELETE", "/api/tool-sources/http/greet.hello")).status).toBe(204);
    await waitFor("greet.hello to leave the registry", async () => ((await a.call("GET", "/api/tools/greet.hello")).status === 404 ? true : undefined));
    const tools = (await a.call<{ items: Tool[] }>("GET", "/api/tools")).body.items;
    expect(tools.map((t) => t.name)).not.toContain("greet.hello");
    // The other sources are untouched.
    expect(tools.find((t) => t.name === "fx.add")?.workers).toBeGreaterThan(0);
    expect((await a.call<{ items: Source[] }>("GET", "/api/tool-sources")).body.items.map((s) => `${s.kind}:${s.name}`)).toEqual(["mcp:broken", "mcp:fx"]);
  });

  it("stops a removed MCP server", async () => {
    const done = await runWorkflow("mcp-pid", { nodes: [{ id: "pid", type: "tool", config: { tool: "fx.get-pid" }, input: {} }], output: { r: "$.pid" } });
    expect(done.status).toBe("completed");
    const pid = Number((done.output as { r: { content: { text: string }[] } }).r.content[0]!.text);
    expect(Number.isInteger(pid) && pid > 0).toBe(true);
    const alive = (): boolean => {
      try {
        process.kill(pid, 0);
        return true;
      } catch {
        return false;
      }
    };
    expect(alive()).toBe(true);
    expect((await a.call("DELETE", "/api/tool-sources/mcp/fx")).status).toBe(204);
    await waitFor("the MCP server process to exit", async () => (alive() ? undefined : true));
    await waitFor("fx.add to leave the registry", async () => ((await a.call("GET", "/api/tools/fx.add")).status === 404 ? true : undefined));
  });

  it("fails the node with BATON_TOOL_HTTP_HOST_REFUSED for a refused host, without retrying", async () => {
    const res = await a.call("POST", "/api/tool-sources/http", {
      name: "meta.probe",
      description: "Reads the cloud metadata service (always refused)",
      method: "GET",
      url: "http://169.254.169.254/latest/meta-data",
      inputSchema: { type: "object" },
      retry: { maxAttempts: 5, initialDelayMs: 60_000 },
    });
    expect(res.status).toBe(201);
    await settled("meta.probe");
    await servedTool("meta.probe");

    // With 5 attempts 60 s apart, only a non-retryable failure ends the run within the wait.
    const done = await runWorkflow("meta-probe", { nodes: [{ id: "probe", type: "tool", config: { tool: "meta.probe" }, input: {} }] });
    expect(done.status).toBe("failed");
    expect(done.error).toContain("BATON_TOOL_HTTP_HOST_REFUSED");
    expect(done.nodes.find((n) => n.nodeId === "probe")).toMatchObject({ status: "failed", attempt: 1 });
  });
});
