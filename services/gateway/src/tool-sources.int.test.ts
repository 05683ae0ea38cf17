/**
 * `/api/tool-sources` on a real tool source store (NATS KV) and a real Postgres store.
 * Rules checked:
 * - a valid HTTP declaration is stored for the caller's tenant: 201 when new, 200 when it
 *   replaces the caller's own source; the answer says `pending` until a worker reports;
 * - an invalid declaration is 400 problem+json listing every invalid field (`body.*`), and
 *   nothing is stored; so is a URL with credentials in it; a `tenants` other than the caller's is refused too;
 * - MCP servers: stdio needs role admin (403 BATON_GATEWAY_STDIO_FORBIDDEN for an operator),
 *   http is allowed to operators; viewers may not write at all;
 * - names are global: another tenant's source name, or a tool written in code, is 409;
 * - the list and reads are tenant-scoped (other tenants' sources are 404), header and env
 *   values are never sent back, and the status a worker wrote shows only for the revision it
 *   is about;
 * - DELETE answers 204, then the source is gone; without a store the routes answer 503.
 */
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import { connectBus } from "@baton/bus";
import type { Bus } from "@baton/bus";
import { createToolRegistry, createToolSourceStore, createWorker, defineTool } from "@baton/sdk";
import type { ToolSourceStore, Worker } from "@baton/sdk";
import { deletePrefix, randomToolPrefix, TEST_NATS_URL } from "@baton/sdk/testing";
import { createLogger } from "@baton/telemetry";
import { buildApp } from "./app.ts";
import { bearer, openTestGateway } from "./test-support.ts";
import type { TestGateway } from "./test-support.ts";

const weather = {
  name: "weather.current",
  description: "Current weather of a city",
  method: "GET",
  url: "https://api.example.com/weather/{city}",
  query: ["units"],
  headers: { authorization: "Bearer secret-token" },
  inputSchema: { type: "object", properties: { city: { type: "string" }, units: { type: "string" } }, required: ["city"] },
};

const stdioServer = { name: "files", transport: { type: "stdio", command: "node", args: ["server.js"], env: { TOKEN: "s3cret" } } };
const httpServer = { name: "remote", transport: { type: "http", url: "https://mcp.example.com/mcp", headers: { "x-key": "k" } } };

describe("/api/tool-sources", () => {
  const prefix = randomToolPrefix();
  let gw: TestGateway;
  let app: FastifyInstance;
  let bus: Bus;
  let store: ToolSourceStore;
  let codeWorker: Worker;

  beforeAll(async () => {
    gw = await openTestGateway();
    bus = await connectBus({ servers: TEST_NATS_URL, prefix, name: "gateway-tool-sources-test", logger: createLogger("test", "silent") });
    store = createToolSourceStore(bus);
    const code = defineTool({ name: "code.tool", description: "written in code", input: z.object({}), handler: async () => ({}) });
    codeWorker = createWorker({ bus, tools: [code], workerId: "code", logger: createLogger("test", "silent") });
    await codeWorker.start();
    app = await buildApp({ ...gw.deps, tools: createToolRegistry(bus), toolSources: store });
  });

  afterAll(async () => {
    await app.close();
    await codeWorker.drain();
    await bus.drain();
    await deletePrefix(prefix);
    await gw.close();
  });

  it("stores an HTTP declaration for the caller's tenant: 201, then 200 when replaced", async () => {
    const res = await app.inject({ method: "POST", url: "/api/tool-sources/http", headers: bearer(gw.a.operator), payload: weather });
    expect(res.statusCode).toBe(201);
    expect(res.json()).toMatchObject({ kind: "http", name: "weather.current", status: "pending", tools: [] });
    expect(res.json<{ declaration: { headers: unknown } }>().declaration.headers).toEqual({ authorization: "<redacted>" });
    const s = await store.get("http", "weather.current");
    expect(s).toMatchObject({ kind: "http", tenantId: gw.a.tenantId, declaration: { url: weather.url, headers: weather.headers } });

    const again = await app.inject({ method: "POST", url: "/api/tool-sources/http", headers: bearer(gw.a.operator), payload: { ...weather, description: "v2" } });
    expect(again.statusCode).toBe(200);
    expect(await store.get("http", "weather.current")).toMatchObject({ declaration: { description: "v2" } });
  });

  it("answers 400 naming every invalid field, and stores nothing", async () => {
    const res = await app.inject({
      method: "POST",
      url: "/api/tool-sources/http",
      headers: bearer(gw.a.operator),
      payload: { name: "bad..name", method: "FETCH", url: "ftp://x/{nope}", inputSchema: { type: "string" }, extra: 1, tenants: [gw.b.tenantId] },
    });
    expect(res.statusCode).toBe(400);
    expect(res.headers["content-type"]).toContain("application/problem+json");
    const body = res.json<{ code: string; errors: { path: string }[] }>();
    expect(body.code).toBe("BATON_GATEWAY_REQUEST_INVALID");
    const paths = body.errors.map((e) => e.path);
    expect(paths).toEqual(expect.arrayContaining(["body.name", "body.description", "body.method", "body.inputSchema", "body.extra", "body.tenants"]));
    // The URL's own checks (scheme, placeholders) run once the fields' types are right.
    const url = await app.inject({
      method: "POST",
      url: "/api/tool-sources/http",
      headers: bearer(gw.a.operator),
      payload: { ...weather, name: "bad.url", url: "ftp://{host}/x/{nope}", query: ["missing"] },
    });
    expect(url.statusCode).toBe(400);
    const urlPaths = url.json<{ errors: { path: string }[] }>().errors.map((e) => e.path);
    expect(urlPaths).toEqual(expect.arrayContaining(["body.url", "body.query[0]"]));
    expect((await store.list()).map((x) => x.name)).toEqual(["weather.current"]);

    const mcp = await app.inject({ method: "POST", url: "/api/tool-sources/mcp", headers: bearer(gw.a.admin), payload: { name: "x", transport: { type: "smoke" } } });
    expect(mcp.statusCode).toBe(400);
    expect(mcp.json<{ errors: { path: string }[] }>().errors.map((e) => e.path)).toContain("body.transport.type");
  });

  it("refuses credentials in a source's URL (every call would be refused, and the URL is sent back), and stores nothing", async () => {
    const before = (await store.list()).map((x) => x.name);
    const http = await app.inject({ method: "POST", url: "/api/tool-sources/http", headers: bearer(gw.a.operator), payload: { ...weather, name: "creds.http", url: "https://bot:s3cret@api.example.com/weather/{city}" } });
    expect(http.statusCode).toBe(400);
    expect(http.json<{ errors: { path: string; code: string }[] }>().errors.map((e) => [e.path, e.code])).toEqual([["body.url", "url_credentials"]]);
    expect(http.body).not.toContain("s3cret");
    const mcp = await app.inject({ method: "POST", url: "/api/tool-sources/mcp", headers: bearer(gw.a.operator), payload: { name: "creds", transport: { type: "http", url: "https://token@mcp.example.com/mcp" } } });
    expect(mcp.statusCode).toBe(400);
    expect(mcp.json<{ errors: { path: string; code: string }[] }>().errors.map((e) => [e.path, e.code])).toEqual([["body.transport.url", "url_credentials"]]);
    expect((await store.list()).map((x) => x.name)).toEqual(before);
  });

  it("refuses oversized declarations with a 400 naming them, and serves names up to 200 characters", async () => {
    const post = (payload: unknown) => app.inject({ method: "POST", url: "/api/tool-sources/http", headers: bearer(gw.a.operator), payload: payload as object });
    const paths = (res: Awaited<ReturnType<typeof post>>) => ({ status: res.statusCode, paths: res.json<{ errors?: { path: string }[] }>().errors?.map((e) => e.path) });
    expect(paths(await post({ ...weather, name: "big.one", description: "d".repeat(2_000_000) }))).toEqual({ status: 400, paths: ["body.description", "body"] });
    expect(paths(await post({ ...weather, name: `n${"x".repeat(70_000)}` }))).toEqual({ status: 400, paths: ["body.name"] });
    expect(paths(await post({ ...weather, name: `n${"x".repeat(200)}` }))).toEqual({ status: 400, paths: ["body.name"] });
    // A name of 150 characters is stored, read and deleted by its path.
    const long = `long.${"y".repeat(145)}`;
    expect((await post({ ...weather, name: long })).statusCode).toBe(201);
    expect((await app.inject({ method: "GET", url: `/api/tool-sources/http/${long}`, headers: bearer(gw.a.operator) })).statusCode).toBe(200);
    expect((await app.inject({ method: "DELETE", url: `/api/tool-sources/http/${long}`, headers: bearer(gw.a.operator) })).statusCode).toBe(204);
    expect((await store.list()).map((x) => x.name)).not.toContain("big.one");
  });

  it("lets only admins register stdio MCP servers; operators may register HTTP ones; viewers nothing", async () => {
    const op = await app.inject({ method: "POST", url: "/api/tool-sources/mcp", headers: bearer(gw.a.operator), payload: stdioServer });
    expect(op.statusCode).toBe(403);
    expect(op.json()).toMatchObject({ code: "BATON_GATEWAY_STDIO_FORBIDDEN" });
    expect(await store.get("mcp", "files")).toBeUndefined();

    const admin = await app.inject({ method: "POST", url: "/api/tool-sources/mcp", headers: bearer(gw.a.admin), payload: stdioServer });
    expect(admin.statusCode).toBe(201);
    expect(admin.json<{ server: { transport: { env: unknown; command: string } } }>().server.transport).toMatchObject({ command: "node", env: { TOKEN: "<redacted>" } });

    const remote = await app.inject({ method: "POST", url: "/api/tool-sources/mcp", headers: bearer(gw.a.operator), payload: httpServer });
    expect(remote.statusCode).toBe(201);

    const viewer = await app.inject({ method: "POST", url: "/api/tool-sources/http", headers: bearer(gw.a.viewer), payload: { ...weather, name: "viewer.tool" } });
    expect(viewer.statusCode).toBe(403);
  });

  it("refuses names another tenant's source or a tool written in code holds (409)", async () => {
    const other = await app.inject({ method: "POST", url: "/api/tool-sources/http", headers: bearer(gw.b.admin), payload: weather });
    expect(other.statusCode).toBe(409);
    expect(other.json()).toMatchObject({ code: "BATON_GATEWAY_TOOL_SOURCE_NAME_TAKEN" });
    expect((await store.get("http", "weather.current"))?.tenantId).toBe(gw.a.tenantId);

    const code = await app.inject({ method: "POST", url: "/api/tool-sources/http", headers: bearer(gw.b.admin), payload: { ...weather, name: "code.tool" } });
    expect(code.statusCode).toBe(409);
    expect(code.json<{ detail: string }>().detail).toContain("code");
  });

  it("lists and reads the caller's sources only, with the status of the current revision", async () => {
    const mine = await app.inject({ method: "GET", url: "/api/tool-sources", headers: bearer(gw.a.viewer) });
    expect(mine.statusCode).toBe(200);
    expect(mine.json<{ items: { kind: string; name: string }[] }>().items.map((s) => `${s.kind}:${s.name}`)).toEqual(["http:weather.current", "mcp:files", "mcp:remote"]);
    const theirs = await app.inject({ method: "GET", url: "/api/tool-sources", headers: bearer(gw.b.admin) });
    expect(theirs.json<{ items: unknown[] }>().items).toEqual([]);
    expect((await app.inject({ method: "GET", url: "/api/tool-sources/http/weather.current", headers: bearer(gw.b.admin) })).statusCode).toBe(404);

    const s = (await store.get("mcp", "files"))!;
    await store.setStatus("mcp", "files", { state: "failed", tools: [], error: { code: "BATON_TOOL_MCP_CONNECT_FAILED", message: "spawn node ENOENT" }, revision: s.revision, workerId: "w", at: new Date().toISOString() });
    const failed = await app.inject({ method: "GET", url: "/api/tool-sources/mcp/files", headers: bearer(gw.a.viewer) });
    expect(failed.json()).toMatchObject({ status: "failed", error: { code: "BATON_TOOL_MCP_CONNECT_FAILED" } });

    // A status about an older revision does not describe the source any more.
    await store.setStatus("mcp", "remote", { state: "ready", tools: ["remote.a"], revision: 1, workerId: "w", at: new Date().toISOString() });
    const stale = await app.inject({ method: "GET", url: "/api/tool-sources/mcp/remote", headers: bearer(gw.a.viewer) });
    expect(stale.json()).toMatchObject({ status: "pending", tools: [] });
    const r = (await store.get("mcp", "remote"))!;
    await store.setStatus("mcp", "remote", { state: "ready", tools: ["remote.a"], revision: r.revision, workerId: "w", at: new Date().toISOString() });
    const ready = await app.inject({ method: "GET", url: "/api/tool-sources/mcp/remote", headers: bearer(gw.a.viewer) });
    expect(ready.json()).toMatchObject({ status: "ready", tools: ["remote.a"] });
  });

  it("deletes with 204; other tenants' and unknown sources are 404", async () => {
    expect((await app.inject({ method: "DELETE", url: "/api/tool-sources/mcp/remote", headers: bearer(gw.b.admin) })).statusCode).toBe(404);
    const del = await app.inject({ method: "DELETE", url: "/api/tool-sources/mcp/remote", headers: bearer(gw.a.operator) });
    expect(del.statusCode).toBe(204);
    expect(await store.get("mcp", "remote")).toBeUndefined();
    expect(await store.getStatus("mcp", "remote")).toBeUndefined();
    expect((await app.inject({ method: "DELETE", url: "/api/tool-sources/mcp/remote", headers: bearer(gw.a.operator) })).statusCode).toBe(404);
    const badKind = await app.inject({ method: "DELETE", url: "/api/tool-sources/ftp/x", headers: bearer(gw.a.operator) });
    expect(badKind.statusCode).toBe(400);
    expect(badKind.json<{ errors: { path: string }[] }>().errors.map((e) => e.path)).toContain("params.kind");
  });

  it("answers 503 without a tool source store", async () => {
    const res = await gw.app.inject({ method: "GET", url: "/api/tool-sources", headers: bearer(gw.a.viewer) });
    expect(res.statusCode).toBe(503);
    expect(res.json()).toMatchObject({ code: "BATON_GATEWAY_TOOL_SOURCES_UNAVAILABLE" });
  });
});
