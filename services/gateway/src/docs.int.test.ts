/**
 * Rules checked:
 * - /openapi.json is an OpenAPI 3 document titled "Baton API", generated from the route
 *   schemas: it lists every route of seed 004 §4 that the gateway serves (and every route the
 *   app has, apart from the docs' own), with tags and summaries, the API-key security schemes
 *   on /api routes, problem+json error answers, and the engine's definition schema; the
 *   reviews list's query options (`subRuns`);
 * - /docs serves Swagger UI; /healthz, /readyz, /docs and /openapi.json need no key;
 * - /readyz is 200 only when the process is ready and lists module states, else 503.
 */
import { afterAll, beforeAll, describe, expect, test } from "@jest/globals";
import { StoreUnavailable } from "@baton/store";
import type { TestGateway } from "./test-support.ts";
import { openTestGateway } from "./test-support.ts";

let gw: TestGateway;
/** Warnings emitted while the gateway was built (a deprecated fastify option, say). */
const warnings: string[] = [];

beforeAll(async () => {
  const emitWarning = process.emitWarning;
  process.emitWarning = ((w: string | Error, ...rest: unknown[]) => {
    warnings.push(typeof w === "string" ? `${typeof rest[0] === "string" ? rest[0] : ""}: ${w}` : `${w.name}: ${w.message}`);
  });
  try {
    gw = await openTestGateway();
  } finally {
    process.emitWarning = emitWarning;
  }
});
afterAll(async () => {
  await gw.close();
});

test("building the gateway prints no fastify warning (every option is where fastify 5 reads it)", () => {
  expect(warnings.filter((w) => w.startsWith("FastifyWarning"))).toEqual([]);
});

/** Seed 004 §4 (MCP routes excepted) plus the SSE stream, the reviews list and issue 3's time travel, versions and children. */
const ROUTES: [string, string][] = [
  ["get", "/api/agent-workflows"],
  ["post", "/api/agent-workflows"],
  ["get", "/api/agent-workflows/{id}"],
  ["put", "/api/agent-workflows/{id}"],
  ["delete", "/api/agent-workflows/{id}"],
  ["get", "/api/agent-workflows/{id}/versions"],
  ["get", "/api/agent-workflows/{id}/versions/{version}"],
  ["get", "/api/blobs/{hash}"],
  ["post", "/api/agent-workflows/{id}/versions/{versionId}/restore"],
  ["post", "/api/agent-workflows/{id}/execute"],
  ["get", "/api/agent-workflow-executions"],
  ["get", "/api/agent-workflow-executions/{id}"],
  ["post", "/api/agent-workflow-executions/{id}/resume"],
  ["post", "/api/agent-workflow-executions/{id}/cancel"],
  ["get", "/api/agent-workflow-executions/{id}/nodes"],
  ["get", "/api/agent-workflow-executions/{id}/events"],
  ["get", "/api/agent-workflow-executions/{id}/children"],
  ["get", "/api/agent-workflow-executions/{id}/checkpoints"],
  ["get", "/api/agent-workflow-executions/{id}/checkpoints/{version}"],
  ["post", "/api/agent-workflow-executions/{id}/fork"],
  ["get", "/api/agent-memory"],
  ["post", "/api/agent-memory"],
  ["get", "/api/agent-memory/{id}"],
  ["delete", "/api/agent-memory/{id}"],
  ["get", "/api/reviews"],
  ["get", "/api/tools"],
  ["get", "/api/tools/{name}"],
  ["post", "/api/tool-sources/http"],
  ["post", "/api/tool-sources/mcp"],
  ["get", "/api/tool-sources"],
  ["get", "/api/tool-sources/{kind}/{name}"],
  ["delete", "/api/tool-sources/{kind}/{name}"],
  ["get", "/healthz"],
  ["get", "/readyz"],
];

interface Operation {
  summary?: string;
  tags?: string[];
  security?: unknown[];
  responses: Record<string, { content?: Record<string, { schema?: unknown }> }>;
  requestBody?: { required?: boolean; content: Record<string, { schema: unknown }> };
}
type Doc = {
  openapi: string;
  info: { title: string };
  paths: Record<string, Record<string, Operation>>;
  components: { securitySchemes: Record<string, unknown>; schemas: Record<string, Record<string, unknown>> };
};

describe("OpenAPI document", () => {
  let doc: Doc;
  beforeAll(async () => {
    const res = await gw.app.inject({ method: "GET", url: "/openapi.json" });
    expect(res.statusCode).toBe(200);
    doc = res.json<Doc>();
  });

  test("is OpenAPI 3 titled Baton API with the API-key security schemes", () => {
    expect(doc.openapi).toMatch(/^3\./);
    expect(doc.info.title).toBe("Baton API");
    expect(doc.components.securitySchemes).toMatchObject({
      bearerAuth: { type: "http", scheme: "bearer" },
      apiKeyHeader: { type: "apiKey", in: "header", name: "x-api-key" },
    });
  });

  test("lists every route with a tag and a summary; /api routes need a key", () => {
    for (const [method, path] of ROUTES) {
      const op = doc.paths[path]?.[method];
      expect({ route: `${method} ${path}`, present: op !== undefined }).toEqual({ route: `${method} ${path}`, present: true });
      expect(op!.summary).toEqual(expect.any(String));
      expect(op!.tags).toHaveLength(1);
      if (path.startsWith("/api/")) {
        expect(op!.security).toEqual([{ bearerAuth: [] }, { apiKeyHeader: [] }]);
        expect(op!.responses["401"]).toBeDefined();
      } else {
        expect(op!.security).toEqual([]);
      }
    }
  });

  test("documents exactly these routes, and the app serves each of them", () => {
    const documented = Object.entries(doc.paths).flatMap(([p, ops]) => Object.keys(ops).map((m) => `${m} ${p}`));
    expect(documented.sort()).toEqual(ROUTES.map(([m, p]) => `${m} ${p}`).sort());
    for (const [method, path] of ROUTES) {
      expect(gw.app.hasRoute({ method: method.toUpperCase(), url: path.replace(/\{(\w+)\}/g, ":$1") })).toBe(true);
    }
  });

  test("request bodies and answers carry their schemas; the definition is the engine's schema", () => {
    const create = doc.paths["/api/agent-workflows"]!.post!;
    const body = create.requestBody!.content["application/json"]!.schema as { properties: Record<string, unknown>; required: string[] };
    expect(body.required).toEqual(expect.arrayContaining(["name", "definition"]));
    expect(create.responses["201"]).toBeDefined();
    expect(JSON.stringify(create.responses["400"])).toContain("#/components/schemas/Problem");
    const def = doc.components.schemas["WorkflowDefinition"]!;
    expect(def).toMatchObject({ type: "object", required: ["nodes"] });
    // An edge guard is JSONata text or a comparison, as the engine's model says.
    expect(def).toMatchObject({
      properties: { edges: { items: { properties: { condition: { anyOf: [{ type: "string" }, { type: "object", required: ["left", "op"], properties: { op: { enum: expect.arrayContaining(["eq", "contains"]) } } }] } } } } },
    });
    expect(JSON.stringify(doc)).not.toContain("#/$defs/");
    expect(doc.components.schemas["Problem"]).toMatchObject({ properties: { code: expect.any(Object), errors: expect.any(Object) } });
  });

  test("errors are documented as they are sent, application/problem+json; a route with a body also answers 413 and 415", async () => {
    for (const [path, ops] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(ops)) {
        for (const [status, r] of Object.entries(op.responses)) {
          // (Not /readyz's 503, its readiness body: checked below.)
          if (Number(status) >= 400 && r.content && path !== "/readyz") expect({ route: `${method} ${path} ${status}`, types: Object.keys(r.content) }).toEqual({ route: `${method} ${path} ${status}`, types: ["application/problem+json"] });
        }
        if (op.requestBody) expect({ route: `${method} ${path}`, has: [op.responses["413"] !== undefined, op.responses["415"] !== undefined] }).toEqual({ route: `${method} ${path}`, has: [true, true] });
      }
    }
    // And so they are sent.
    const auth = { authorization: `Bearer ${gw.a.admin}` };
    const unsupported = await gw.app.inject({ method: "POST", url: "/api/agent-workflows", headers: { ...auth, "content-type": "application/xml" }, payload: "<x/>" });
    expect([unsupported.statusCode, unsupported.headers["content-type"]]).toEqual([415, expect.stringContaining("application/problem+json")]);
    const large = await gw.app.inject({ method: "POST", url: "/api/agent-workflows", headers: { ...auth, "content-type": "application/json" }, payload: JSON.stringify({ name: "x".repeat(5 * 1024 * 1024) }) });
    expect([large.statusCode, large.headers["content-type"]]).toEqual([413, expect.stringContaining("application/problem+json")]);
    // The router's own refusals too, before any route: a parameter past 1024 characters, a path that does not decode.
    const long = await gw.app.inject({ method: "GET", url: `/api/tools/${"a".repeat(1100)}`, headers: auth });
    expect([long.statusCode, long.headers["content-type"], long.json()]).toEqual([
      414,
      expect.stringContaining("application/problem+json"),
      expect.objectContaining({ status: 414, code: "FST_ERR_MAX_PARAM_LENGTH", detail: "a path parameter is longer than 1024 characters" }),
    ]);
    const undecodable = await gw.app.inject({ method: "GET", url: "/api/tools/%zz", headers: auth });
    expect([undecodable.statusCode, undecodable.headers["content-type"], undecodable.json<{ code: string }>().code]).toEqual([400, expect.stringContaining("application/problem+json"), "FST_ERR_BAD_URL"]);
  });
  test("each route documents the errors it can give, and an optional body as optional", async () => {
    const statuses = (method: string, path: string): string[] => Object.keys(doc.paths[path]![method]!.responses).filter((s) => Number(s) >= 400).sort();
    // No input: still a query parameter it does not take (400). A list: no 404 nor 414. A read:
    // no 403 nor 413. Every /api route: 500 and 503 (the key is checked against the database).
    expect(statuses("get", "/api/tools")).toEqual(["400", "401", "500", "503"]);
    expect(statuses("get", "/api/agent-workflows")).toEqual(["400", "401", "500", "503"]);
    expect(statuses("get", "/api/agent-workflows/{id}")).toEqual(["400", "401", "404", "414", "500", "503"]);
    expect(statuses("post", "/api/agent-workflows")).toEqual(["400", "401", "403", "409", "413", "415", "500", "503"]);
    // A DELETE reads a body (up to the limit: 413) but takes none (no 415).
    expect(statuses("delete", "/api/agent-memory/{id}")).toEqual(["400", "401", "403", "404", "413", "414", "500", "503"]);
    // Health answers are not problems: /readyz's 503 is its readiness body, as JSON.
    expect(Object.keys(doc.paths["/readyz"]!.get!.responses["503"]!.content!)).toEqual(["application/json"]);
    for (const [path, ops] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(ops)) {
        const s = Object.keys(op.responses);
        if (method === "get") expect({ route: `${method} ${path}`, has403: s.includes("403") }).toEqual({ route: `${method} ${path}`, has403: false });
        if (!path.includes("{")) expect({ route: `${method} ${path}`, has404: s.includes("404") }).toEqual({ route: `${method} ${path}`, has404: false });
      }
    }
    // And so they are answered: a read-only key reads, and is refused a write; a list has no 404.
    const viewer = { authorization: `Bearer ${gw.a.viewer}` };
    expect((await gw.app.inject({ method: "GET", url: "/api/agent-workflows", headers: viewer })).statusCode).toBe(200);
    expect((await gw.app.inject({ method: "POST", url: "/api/agent-workflows", headers: viewer, payload: { name: "x", definition: { nodes: [] } } })).statusCode).toBe(403);
    // execute and cancel take no body at all, so their bodies are documented as optional.
    for (const path of ["/api/agent-workflows/{id}/execute", "/api/agent-workflow-executions/{id}/cancel"]) expect(doc.paths[path]!.post!.requestBody!.required).toBe(false);
    expect(doc.paths["/api/agent-workflows"]!.post!.requestBody!.required).toBe(true);
  });

  test("every /api route documents each error it answers: a probe of every kind of error on every route", async () => {
    // Values that name nothing: the route's own "not there" answer.
    const sample: Record<string, string> = { id: "2147483000", version: "1", versionId: "2147483000", hash: "a".repeat(64), kind: "http", name: "nothing.here" };
    const urlOf = (path: string, long = false) => path.replace(/\{(\w+)\}/g, (_m, n: string) => (long ? "a".repeat(1100) : (sample[n] ?? "x")));
    const admin = { authorization: `Bearer ${gw.a.admin}` };
    const answered: { route: string; probe: string; status: number; documented: boolean }[] = [];
    const tenants = gw.store.tenants as { resolveApiKey: (key: string) => Promise<unknown> };
    const resolve = tenants.resolveApiKey.bind(tenants);
    let keys = 0;
    try {
      for (const [path, ops] of Object.entries(doc.paths)) {
        if (!path.startsWith("/api/")) continue;
        for (const [method, op] of Object.entries(ops)) {
          const url = urlOf(path);
          const reads = method === "get";
          type Probe = [string, { url: string; headers: Record<string, string>; payload?: string }];
          const probes: Probe[] = [
            ["unknown query parameter", { url: `${url}?bogus=1`, headers: admin }],
            ["no key", { url, headers: {} }],
            ["viewer", { url, headers: { authorization: `Bearer ${gw.a.viewer}` } }],
            ["nothing there", { url, headers: admin }],
            // A key not cached yet, checked while the database is down.
            ["database down", { url, headers: { authorization: `Bearer down-${++keys}` } }],
          ];
          if (path.includes("{")) probes.push(["path parameter too long", { url: urlOf(path, true), headers: admin }]);
          if (!reads) {
            probes.push(["body too large", { url, headers: { ...admin, "content-type": "application/json" }, payload: "x".repeat(5 * 1024 * 1024) }]);
            probes.push(["not JSON", { url, headers: { ...admin, "content-type": "application/xml" }, payload: "<x/>" }]);
          }
          for (const [probe, req] of probes) {
            tenants.resolveApiKey = probe === "database down" ? () => Promise.reject(StoreUnavailable("connection refused")) : resolve;
            const res = await gw.app.inject({ method: method.toUpperCase() as "GET", ...req });
            answered.push({ route: `${method} ${path}`, probe, status: res.statusCode, documented: op.responses[String(res.statusCode)] !== undefined });
          }
        }
      }
    } finally {
      tenants.resolveApiKey = resolve;
    }
    expect(answered.filter((a) => !a.documented)).toEqual([]);
    // And the probes got what they probe, so the check above is not empty.
    const got = (probe: string) => [...new Set(answered.filter((a) => a.probe === probe).map((a) => a.status))];
    expect(got("unknown query parameter")).toEqual([400]);
    expect(got("no key")).toEqual([401]);
    expect(got("path parameter too long")).toEqual([414]);
    expect(got("body too large")).toEqual([413]);
    expect(got("database down")).toEqual([503]);
    expect(got("viewer")).toContain(403);
    expect(got("not JSON")).toContain(415);
  });

  test("the reviews list documents its subRuns option, which says whether an execution's sub-runs are listed", () => {
    const op = doc.paths["/api/reviews"]!.get! as Operation & { parameters: { name: string; in: string; required: boolean; schema: unknown; description?: string }[] };
    expect(op.parameters.map((p) => p.name)).toEqual(expect.arrayContaining(["status", "executionId", "subRuns", "limit", "offset"]));
    expect(op.parameters.find((p) => p.name === "subRuns")).toMatchObject({ in: "query", required: false, schema: { enum: ["true", "false"] }, description: expect.stringContaining("sub-runs") });
    expect((op as { description?: string }).description).toContain("BATON_GATEWAY_REVIEW_IN_SUBRUN");
  });

  test("tool-source bodies are documented as strictly as they are checked", () => {
    const http = doc.components.schemas["HttpToolDeclarationInput"] as { additionalProperties?: unknown; properties: Record<string, Record<string, unknown>>; required: string[] };
    expect(http.additionalProperties).toBe(false);
    expect(http.required).toEqual(expect.arrayContaining(["name", "description", "method", "url", "inputSchema"]));
    expect(http.properties["method"]).toMatchObject({ enum: ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"] });
    expect(http.properties["timeoutMs"]).toMatchObject({ minimum: 1, maximum: 120_000 });
    expect(http.properties["name"]).toMatchObject({ maxLength: 200, pattern: expect.any(String) });
    expect(http.properties["retry"]).toMatchObject({ additionalProperties: false });
    const mcp = doc.components.schemas["McpServerConfigInput"] as { additionalProperties?: unknown; properties: Record<string, Record<string, unknown>> };
    expect(mcp.additionalProperties).toBe(false);
    expect(mcp.properties["timeoutMs"]).toMatchObject({ minimum: 1, maximum: 1_800_000 });
    expect(JSON.stringify(mcp.properties["transport"])).toContain('"stdio"');
  });
});

describe("docs and health without a key", () => {
  test("Swagger UI is served at /docs", async () => {
    const res = await gw.app.inject({ method: "GET", url: "/docs" });
    expect(res.statusCode).toBe(200);
    expect(res.headers["content-type"]).toMatch(/text\/html/);
  });

  test("/healthz is 200", async () => {
    const res = await gw.app.inject({ method: "GET", url: "/healthz" });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ status: "ok" });
  });

  test("/readyz is 200 when ready and 503 otherwise, listing module states", async () => {
    gw.readiness.ready = true;
    gw.readiness.modules = { gateway: "Running", executor: "Running" };
    const ok = await gw.app.inject({ method: "GET", url: "/readyz" });
    expect(ok.statusCode).toBe(200);
    expect(ok.json()).toEqual({ ready: true, modules: { gateway: "Running", executor: "Running" } });

    gw.readiness.ready = false;
    gw.readiness.modules = { gateway: "Running", executor: "Starting" };
    const notYet = await gw.app.inject({ method: "GET", url: "/readyz" });
    expect([notYet.statusCode, notYet.headers["content-type"]]).toEqual([503, expect.stringContaining("application/json")]);
    expect(notYet.json()).toEqual({ ready: false, modules: { gateway: "Running", executor: "Starting" } });
  });
});
