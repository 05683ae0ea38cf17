/**
 * `/api/tools` on a real bus and tool registry (NATS KV). Rules checked:
 * - the list shows every tool the caller's tenant may call, with JSON Schemas and the
 *   live worker count, and hides tools whose `tenants` exclude the caller (never showing
 *   the `tenants` list itself);
 * - `GET /api/tools/:name` answers one tool, 404 for unknown names and for tools of other
 *   tenants, 400 problem+json for a malformed name;
 * - both routes need an API key and are in the OpenAPI document;
 * - without a registry the routes answer 503 BATON_GATEWAY_TOOLS_UNAVAILABLE.
 */
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import { connectBus } from "@baton/bus";
import type { Bus } from "@baton/bus";
import { createToolRegistry, createWorker, defineTool } from "@baton/sdk";
import type { Worker } from "@baton/sdk";
import { deletePrefix, randomToolPrefix, TEST_NATS_URL } from "@baton/sdk/testing";
import { createLogger } from "@baton/telemetry";
import { buildApp } from "./app.ts";
import { bearer, openTestGateway } from "./test-support.ts";
import type { TestGateway } from "./test-support.ts";

describe("/api/tools", () => {
  const prefix = randomToolPrefix();
  let gw: TestGateway;
  let app: FastifyInstance;
  let bus: Bus;
  const workers: Worker[] = [];

  beforeAll(async () => {
    gw = await openTestGateway();
    bus = await connectBus({ servers: TEST_NATS_URL, prefix, name: "gateway-tools-test", logger: createLogger("test", "silent") });
    const weather = defineTool({
      name: "weather.get",
      description: "Weather of a city",
      input: z.object({ city: z.string(), days: z.number().int().min(1).default(1) }),
      output: z.object({ tempC: z.number() }),
      timeoutMs: 5_000,
      retry: { maxAttempts: 2 },
      handler: async () => ({ tempC: 20 }),
    });
    const secret = defineTool({
      name: "b.secret",
      description: "Only for tenant B",
      input: z.object({}),
      tenants: [gw.b.tenantId],
      handler: async () => ({}),
    });
    for (const id of ["w1", "w2"]) {
      const w = createWorker({ bus, tools: id === "w1" ? [weather, secret] : [weather], workerId: id, logger: createLogger("test", "silent") });
      await w.start();
      workers.push(w);
    }
    app = await buildApp({ ...gw.deps, tools: createToolRegistry(bus) });
  });

  afterAll(async () => {
    await app.close();
    for (const w of workers) await w.drain();
    await bus.drain();
    await deletePrefix(prefix);
    await gw.close();
  });

  it("lists the caller's tools with schemas and live worker counts", async () => {
    const res = await app.inject({ method: "GET", url: "/api/tools", headers: bearer(gw.a.viewer) });
    expect(res.statusCode).toBe(200);
    const body = res.json<{ items: Record<string, unknown>[] }>();
    expect(body.items.map((t) => t.name)).toEqual(["weather.get"]);
    expect(body.items[0]).toEqual({
      name: "weather.get",
      description: "Weather of a city",
      kind: "worker",
      inputSchema: expect.objectContaining({ type: "object", required: ["city"], properties: expect.objectContaining({ city: { type: "string" } }) }),
      outputSchema: expect.objectContaining({ properties: { tempC: { type: "number" } } }),
      timeoutMs: 5_000,
      retry: { maxAttempts: 2 },
      workers: 2,
    });

    const b = await app.inject({ method: "GET", url: "/api/tools", headers: bearer(gw.b.admin) });
    const items = b.json<{ items: Record<string, unknown>[] }>().items;
    expect(items.map((t) => t.name)).toEqual(["b.secret", "weather.get"]);
    expect(items[0]).toMatchObject({ workers: 1 });
    expect(items[0]).not.toHaveProperty("tenants");
  });

  it("gets one tool, hiding other tenants' tools", async () => {
    const res = await app.inject({ method: "GET", url: "/api/tools/weather.get", headers: bearer(gw.a.viewer) });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ name: "weather.get", workers: 2 });

    const hidden = await app.inject({ method: "GET", url: "/api/tools/b.secret", headers: bearer(gw.a.viewer) });
    expect(hidden.statusCode).toBe(404);
    expect(hidden.json()).toMatchObject({ code: "BATON_GATEWAY_NOT_FOUND" });
    expect((await app.inject({ method: "GET", url: "/api/tools/b.secret", headers: bearer(gw.b.admin) })).statusCode).toBe(200);

    const unknown = await app.inject({ method: "GET", url: "/api/tools/no.such.tool", headers: bearer(gw.a.viewer) });
    expect(unknown.statusCode).toBe(404);

    const bad = await app.inject({ method: "GET", url: "/api/tools/bad..name", headers: bearer(gw.a.viewer) });
    expect(bad.statusCode).toBe(400);
    expect(bad.headers["content-type"]).toContain("application/problem+json");
    expect(bad.body).toContain("name");
  });

  it("needs an API key", async () => {
    const res = await app.inject({ method: "GET", url: "/api/tools" });
    expect(res.statusCode).toBe(401);
  });

  it("is in the OpenAPI document", async () => {
    const doc = (await app.inject({ method: "GET", url: "/openapi.json" })).json<{ paths: Record<string, unknown>; tags: { name: string }[] }>();
    expect(Object.keys(doc.paths)).toEqual(expect.arrayContaining(["/api/tools", "/api/tools/{name}"]));
    expect(doc.tags.map((t) => t.name)).toContain("Tools");
  });

  it("answers 503 without a registry", async () => {
    const res = await gw.app.inject({ method: "GET", url: "/api/tools", headers: bearer(gw.a.viewer) });
    expect(res.statusCode).toBe(503);
    expect(res.json()).toMatchObject({ code: "BATON_GATEWAY_TOOLS_UNAVAILABLE" });
  });
});
