/**
 * The tool sources worker on a real NATS, with a real HTTP server. Rules checked:
 * - it serves the sources present when it starts, and picks up writes made afterwards: a
 *   changed declaration is served in its new form (the old worker replaced), calls answered;
 * - a source whose tool name a worker's code already serves, or whose declaration is
 *   invalid, is not served and its status says why (the other sources are served);
 * - a source's tool answers calls of its tenant and refuses other tenants'
 *   (BATON_TOOL_SOURCE_TENANT_REFUSED);
 * - stop() drains it: its tools have no live worker any more.
 */
import { createServer } from "node:http";
import type { Server } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { connectBus } from "@baton/bus";
import type { Bus } from "@baton/bus";
import { createToolRegistry, createToolSourceStore } from "@baton/sdk";
import type { ToolRegistry, ToolSourceStatus, ToolSourceStore, Worker } from "@baton/sdk";
import { callTool, collectResults, deletePrefix, randomToolPrefix, TEST_NATS_URL } from "@baton/sdk/testing";
import type { ResultCollector } from "@baton/sdk/testing";
import { createLogger } from "@baton/telemetry";
import { createBuiltinWorker } from "./index.ts";
import { createToolSourcesWorker } from "./sources.ts";
import type { ToolSourcesWorker } from "./sources.ts";

const logger = createLogger("test", "silent");

async function until<T>(_what: string, fn: () => Promise<T | undefined>): Promise<T> {
  for (;;) {
    const v = await fn().catch(() => undefined);
    if (v !== undefined) return v;
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe("tool sources worker", () => {
  const prefix = randomToolPrefix();
  let bus: Bus;
  let store: ToolSourceStore;
  let registry: ToolRegistry;
  let results: ResultCollector;
  let builtin: Worker;
  let sources: ToolSourcesWorker;
  let server: Server;
  let base: string;

  const decl = (name: string, path: string, description = "calls the test server") => ({
    name,
    description,
    method: "GET",
    url: `${base}${path}`,
    inputSchema: { type: "object", properties: { q: { type: "string" } } },
    query: ["q"],
  });
  const put = (name: string, declaration: Record<string, unknown>, tenantId = "tenant-a") =>
    store.put({ kind: "http", name, tenantId, declaration: declaration as never, updatedAt: new Date().toISOString() });
  const statusOf = (name: string, revision: number): Promise<ToolSourceStatus> =>
    until(`status of ${name}`, async () => {
      const st = await store.getStatus("http", name);
      return st && st.revision === revision ? st : undefined;
    });

  beforeAll(async () => {
    server = createServer((req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ path: req.url }));
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const addr = server.address();
    base = `http://127.0.0.1:${typeof addr === "object" && addr ? addr.port : 0}`;
    bus = await connectBus({ servers: TEST_NATS_URL, prefix, name: "sources-worker-test", logger });
    store = createToolSourceStore(bus);
    registry = createToolRegistry(bus);
    results = await collectResults(bus);
    builtin = createBuiltinWorker({ bus, logger, workerId: "builtin" });
    await builtin.start();
  });

  afterAll(async () => {
    await sources?.stop();
    await builtin?.drain();
    await results?.stop();
    await bus?.drain();
    await deletePrefix(prefix);
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  it("serves sources present at start and written later; refuses names code serves and invalid declarations", async () => {
    const first = await put("src.one", decl("src.one", "/one"));
    sources = createToolSourcesWorker({ bus, logger, http: { allowPrivate: true }, workerId: "test", debounceMs: 20 });
    await sources.start();
    expect(await statusOf("src.one", first.revision)).toMatchObject({ state: "ready", tools: ["src.one"] });
    expect(await registry.get("src.one")).toMatchObject({ kind: "http", tenants: ["tenant-a"], workers: 1 });

    const echo = await put("echo", decl("echo", "/echo"));
    const invalid = await put("src.bad", { name: "src.bad", method: "GET" });
    const second = await put("src.two", decl("src.two", "/two"));
    expect(await statusOf("src.two", second.revision)).toMatchObject({ state: "ready", tools: ["src.two"] });
    expect(await statusOf("echo", echo.revision)).toMatchObject({ state: "failed", error: { code: "BATON_TOOL_SOURCE_CONFLICT" } });
    expect(await statusOf("src.bad", invalid.revision)).toMatchObject({ state: "failed", error: { code: "BATON_TOOL_HTTP_DECLARATION_INVALID" } });
    expect(await registry.get("echo")).toMatchObject({ kind: "worker" });
    expect([...sources.tools]).toEqual(["src.one", "src.two"]);

    const callId = await callTool(bus, "src.two", { q: "x" }, { tenantId: "tenant-a" });
    expect(await results.waitFor(callId)).toMatchObject({ ok: true, output: { path: "/two?q=x" } });
  });

  it("serves a changed declaration in its new form", async () => {
    const changed = await put("src.one", decl("src.one", "/one-v2", "version 2"));
    expect(await statusOf("src.one", changed.revision)).toMatchObject({ state: "ready" });
    expect(await registry.get("src.one")).toMatchObject({ description: "version 2", workers: 1 });
    const callId = await callTool(bus, "src.one", { q: "y" }, { tenantId: "tenant-a" });
    expect(await results.waitFor(callId)).toMatchObject({ ok: true, output: { path: "/one-v2?q=y" } });
  });

  it("refuses calls of another tenant", async () => {
    const callId = await callTool(bus, "src.one", {}, { tenantId: "tenant-b" });
    expect(await results.waitFor(callId)).toMatchObject({ ok: false, error: { code: "BATON_TOOL_SOURCE_TENANT_REFUSED", retryable: false } });
  });

  it("removes deleted sources' tools from the registry, and stop() drains", async () => {
    await store.delete("http", "src.two");
    await until("src.two to leave the registry", async () => ((await registry.get("src.two")) === undefined ? true : undefined));
    expect(await registry.get("src.one")).toMatchObject({ workers: 1 });
    await sources.stop();
    expect(await registry.get("src.one")).toMatchObject({ workers: 0 });
  });
});
