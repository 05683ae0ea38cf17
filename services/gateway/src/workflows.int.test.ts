/**
 * Rules checked (gateway on a real Postgres store, recording bus):
 * - every /api request needs a valid API key (Bearer or x-api-key), else 401 problem+json;
 *   a viewer may only read (403 on writes); operator and admin may write;
 * - a tenant never sees another tenant's workflows: 404 on their ids (not 403), absent from lists;
 * - workflows: create (201 + Location + workflow.created), list, get, update (new version,
 *   workflow.updated), versions, restore (new version with the old definition), delete (204,
 *   workflow.deleted, then 404);
 * - bad input is a 400 problem+json listing EVERY problem, each path naming the request part:
 *   engine validation (`body.definition.nodes[1].type`), zod body errors, params and query errors;
 *   nothing is written when a request is refused;
 * - slug conflicts are 409 with the store's code; unknown routes are 404 problem+json.
 */
import { gzipSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, test } from "@jest/globals";
import type { TestGateway } from "./test-support.ts";
import { bearer, openTestGateway, validDefinition, problemOf } from "./test-support.ts";
import { MAX_JSON_DEPTH } from "@baton/engine";

let gw: TestGateway;

beforeAll(async () => {
  gw = await openTestGateway();
});
afterAll(async () => {
  await gw.close();
});

async function createWorkflow(key: string, body: Record<string, unknown>) {
  return gw.app.inject({ method: "POST", url: "/api/agent-workflows", headers: bearer(key), payload: body });
}


describe("authentication and roles", () => {
  test("a request without a key is 401 problem+json", async () => {
    const res = await gw.app.inject({ method: "GET", url: "/api/agent-workflows" });
    problemOf(res, 401, "BATON_GATEWAY_UNAUTHENTICATED");
    expect(res.headers["www-authenticate"]).toMatch(/^Bearer/);
  });

  test("an unknown key is 401, in either header", async () => {
    problemOf(await gw.app.inject({ method: "GET", url: "/api/agent-workflows", headers: bearer("bk_not-a-real-key-000000") }), 401, "BATON_GATEWAY_UNAUTHENTICATED");
    problemOf(await gw.app.inject({ method: "GET", url: "/api/agent-workflows", headers: { "x-api-key": "bk_not-a-real-key-000000" } }), 401, "BATON_GATEWAY_UNAUTHENTICATED");
  });

  test("an Authorization header that is not `Bearer <key>` is 401 saying so, not that no key was sent", async () => {
    for (const authorization of ["Basic dXNlcjpwYXNz", `Bearer ${gw.a.admin} extra`, gw.a.admin, "Bearer"]) {
      const p = problemOf(await gw.app.inject({ method: "GET", url: "/api/agent-workflows", headers: { authorization } }), 401, "BATON_GATEWAY_UNAUTHENTICATED");
      expect({ authorization, detail: p.detail }).toEqual({ authorization, detail: expect.stringContaining("is not `Bearer <key>`") });
    }
    const none = problemOf(await gw.app.inject({ method: "GET", url: "/api/agent-workflows" }), 401, "BATON_GATEWAY_UNAUTHENTICATED");
    expect(none.detail).toContain("an API key is required");
  });

  test("a valid key works in Authorization: Bearer and in x-api-key", async () => {
    expect((await gw.app.inject({ method: "GET", url: "/api/agent-workflows", headers: bearer(gw.a.viewer) })).statusCode).toBe(200);
    expect((await gw.app.inject({ method: "GET", url: "/api/agent-workflows", headers: { "x-api-key": gw.a.viewer } })).statusCode).toBe(200);
  });

  test("a viewer may read but not write (403), and nothing is written", async () => {
    const res = await createWorkflow(gw.a.viewer, { name: "viewer try", definition: validDefinition() });
    problemOf(res, 403, "BATON_GATEWAY_FORBIDDEN");
    expect((await gw.store.workflows.list(gw.a.tenantId)).some((w) => w.name === "viewer try")).toBe(false);
  });

  test("an operator may write", async () => {
    const res = await createWorkflow(gw.a.operator, { name: "operator wf", definition: validDefinition() });
    expect(res.statusCode).toBe(201);
  });
});

describe("workflow lifecycle", () => {
  test("a workflow with a run still queued, running or paused is not deleted: 409, and nothing goes", async () => {
    const wf = (await createWorkflow(gw.a.admin, { name: "Busy", definition: validDefinition(1) })).json<{ id: number }>();
    const run = await gw.store.executions.create(gw.a.tenantId, { workflowId: wf.id, workflowVersion: 1, input: {} });
    const del = () => gw.app.inject({ method: "DELETE", url: `/api/agent-workflows/${wf.id}`, headers: bearer(gw.a.admin) });
    const p = problemOf(await del(), 409, "BATON_STORE_WORKFLOW_ACTIVE");
    expect(p.detail).toContain("cancel");
    expect(await gw.store.executions.get(gw.a.tenantId, run.id)).not.toBeNull();
    await gw.store.executions.update(run.id, { status: "cancelled" });
    expect((await del()).statusCode).toBe(204);
    expect(await gw.store.executions.get(gw.a.tenantId, run.id)).toBeNull();
  });

  test("create → get → list → update → versions → restore → delete", async () => {
    const created = await createWorkflow(gw.a.admin, {
      name: "Triage",
      slug: "triage",
      description: "sorts tickets",
      definition: validDefinition(1),
      agentConfig: { model: "openai:gpt-4o-mini" },
    });
    expect(created.statusCode).toBe(201);
    const wf = created.json<{ id: number; version: number; slug: string; createdAt: string; definition: unknown }>();
    expect(wf).toMatchObject({ name: "Triage", slug: "triage", version: 1, enabled: true, mcpExport: false, definition: validDefinition(1) });
    expect(created.headers.location).toBe(`/api/agent-workflows/${wf.id}`);
    expect(Number.isNaN(Date.parse(wf.createdAt))).toBe(false);
    expect(gw.bus.published).toContainEqual({ type: "workflow.created", tenantId: gw.a.tenantId, scopeId: wf.id, data: { id: wf.id, name: "Triage", slug: "triage" } });

    const got = await gw.app.inject({ method: "GET", url: `/api/agent-workflows/${wf.id}`, headers: bearer(gw.a.viewer) });
    expect(got.statusCode).toBe(200);
    expect(got.json()).toEqual(wf);

    const list = await gw.app.inject({ method: "GET", url: "/api/agent-workflows?limit=100", headers: bearer(gw.a.viewer) });
    expect(list.statusCode).toBe(200);
    expect(list.json<{ items: { id: number }[]; limit: number; offset: number }>()).toMatchObject({ limit: 100, offset: 0 });
    expect(list.json<{ items: { id: number }[] }>().items.map((w) => w.id)).toContain(wf.id);

    const updated = await gw.app.inject({
      method: "PUT",
      url: `/api/agent-workflows/${wf.id}`,
      headers: bearer(gw.a.operator),
      payload: { definition: validDefinition(2), changeDescription: "x is 2 now" },
    });
    expect(updated.statusCode).toBe(200);
    expect(updated.json()).toMatchObject({ id: wf.id, version: 2, definition: validDefinition(2) });
    expect(gw.bus.published).toContainEqual({ type: "workflow.updated", tenantId: gw.a.tenantId, scopeId: wf.id, data: { id: wf.id, name: "Triage", slug: "triage", version: 2 } });

    const versions = await gw.app.inject({ method: "GET", url: `/api/agent-workflows/${wf.id}/versions`, headers: bearer(gw.a.viewer) });
    expect(versions.statusCode).toBe(200);
    const items = versions.json<{ items: { id: number; version: number; workflowId: number; description: string | null; definition: unknown }[] }>().items;
    expect(items.map((v) => v.version)).toEqual([1, 2]);
    expect(items[1]).toMatchObject({ workflowId: wf.id, description: "x is 2 now", definition: validDefinition(2) });

    const restored = await gw.app.inject({
      method: "POST",
      url: `/api/agent-workflows/${wf.id}/versions/${items[0]!.id}/restore`,
      headers: bearer(gw.a.admin),
    });
    expect(restored.statusCode).toBe(200);
    expect(restored.json()).toMatchObject({ id: wf.id, version: 3, definition: validDefinition(1) });

    const missingVersion = await gw.app.inject({ method: "POST", url: `/api/agent-workflows/${wf.id}/versions/999999/restore`, headers: bearer(gw.a.admin) });
    problemOf(missingVersion, 404, "BATON_GATEWAY_NOT_FOUND");

    const deleted = await gw.app.inject({ method: "DELETE", url: `/api/agent-workflows/${wf.id}`, headers: bearer(gw.a.admin) });
    expect(deleted.statusCode).toBe(204);
    expect(deleted.body).toBe("");
    expect(gw.bus.published).toContainEqual({ type: "workflow.deleted", tenantId: gw.a.tenantId, scopeId: wf.id, data: { id: wf.id, slug: "triage" } });
    problemOf(await gw.app.inject({ method: "GET", url: `/api/agent-workflows/${wf.id}`, headers: bearer(gw.a.admin) }), 404, "BATON_GATEWAY_NOT_FOUND");
    problemOf(await gw.app.inject({ method: "DELETE", url: `/api/agent-workflows/${wf.id}`, headers: bearer(gw.a.admin) }), 404, "BATON_GATEWAY_NOT_FOUND");
  });

  test("a taken slug is 409 with the store's code", async () => {
    expect((await createWorkflow(gw.a.admin, { name: "Dup", slug: "dup", definition: validDefinition() })).statusCode).toBe(201);
    problemOf(await createWorkflow(gw.a.admin, { name: "Dup 2", slug: "dup", definition: validDefinition() }), 409, "BATON_STORE_SLUG_TAKEN");
  });

  test("names in other scripts get slugs of their own: two such workflows are both created", async () => {
    const slugs: string[] = [];
    for (const name of ["請假審批", "報銷流程"]) {
      const res = await createWorkflow(gw.a.admin, { name, definition: validDefinition() });
      expect(res.statusCode).toBe(201);
      slugs.push(res.json<{ slug: string }>().slug);
    }
    expect(slugs[0]).toMatch(/^workflow-[0-9a-f]{8}$/);
    expect(slugs[1]).toMatch(/^workflow-[0-9a-f]{8}$/);
    expect(slugs[0]).not.toBe(slugs[1]);
    // The same name again derives the same slug, taken: 409 as for any name.
    problemOf(await createWorkflow(gw.a.admin, { name: "請假審批", definition: validDefinition() }), 409, "BATON_STORE_SLUG_TAKEN");
  });
});

describe("tenant isolation", () => {
  test("tenant B gets 404 on tenant A's workflow, for every verb, and A's rows are not in B's list", async () => {
    const wf = (await createWorkflow(gw.a.admin, { name: "A only", definition: validDefinition() })).json<{ id: number }>();
    const asB = bearer(gw.b.admin);
    const calls = [
      { method: "GET" as const, url: `/api/agent-workflows/${wf.id}` },
      { method: "PUT" as const, url: `/api/agent-workflows/${wf.id}`, payload: { name: "stolen" } },
      { method: "GET" as const, url: `/api/agent-workflows/${wf.id}/versions` },
      { method: "POST" as const, url: `/api/agent-workflows/${wf.id}/execute`, payload: {} },
      { method: "DELETE" as const, url: `/api/agent-workflows/${wf.id}` },
    ];
    for (const c of calls) {
      const res = await gw.app.inject({ ...c, headers: asB });
      problemOf(res, 404, "BATON_GATEWAY_NOT_FOUND");
    }
    const list = await gw.app.inject({ method: "GET", url: "/api/agent-workflows?limit=200", headers: asB });
    expect(list.json<{ items: { id: number }[] }>().items.map((w) => w.id)).not.toContain(wf.id);
    // Still A's, unchanged.
    expect(await gw.store.workflows.get(gw.a.tenantId, wf.id)).toMatchObject({ name: "A only", version: 1 });
    expect(gw.bus.started.filter((s) => s.workflowId === wf.id)).toEqual([]);
  });

  test("the same slug may exist in two tenants", async () => {
    expect((await createWorkflow(gw.a.admin, { name: "Shared", slug: "shared", definition: validDefinition() })).statusCode).toBe(201);
    expect((await createWorkflow(gw.b.admin, { name: "Shared", slug: "shared", definition: validDefinition() })).statusCode).toBe(201);
  });
});

describe("bad input", () => {
  test("fields that have no effect are stored as given and named in the answer's warnings", async () => {
    const definition = { nodes: [{ id: "set", type: "setVariable", config: { values: { x: 1 } }, retries: 3 }] };
    const res = await createWorkflow(gw.a.admin, { name: "Typo", definition });
    expect(res.statusCode).toBe(201);
    const body = res.json<{ id: number; warnings?: string[]; definition: { nodes: Record<string, unknown>[] } }>();
    expect(body.warnings).toEqual(['body.definition.nodes[0].retries: "retries" is not a field here and has no effect']);
    expect(body.definition.nodes[0]!.retries).toBe(3);
    // An update without them answers without warnings.
    const upd = await gw.app.inject({ method: "PUT", url: `/api/agent-workflows/${body.id}`, headers: bearer(gw.a.admin), payload: { definition: validDefinition(2) } });
    expect(upd.statusCode).toBe(200);
    expect(upd.json()).not.toHaveProperty("warnings");
  });

  test("JSON nested deeper than MAX_JSON_DEPTH is 400 naming where, on every route, before any schema walks it", async () => {
    let deep: unknown = 1;
    for (let i = 0; i < 3000; i++) deep = [deep];
    const before = (await gw.store.workflows.list(gw.a.tenantId, { limit: 1000 })).length;
    const res = await createWorkflow(gw.a.admin, { name: "Deep", definition: { nodes: [{ id: "a", type: "setVariable", config: { values: { x: deep } } }], edges: [] } });
    const p = problemOf(res, 400, "BATON_GATEWAY_REQUEST_INVALID");
    expect(p.errors).toEqual([{ path: expect.stringMatching(/^body\.definition\.nodes\[0\]\.config\.values\.x(\[0\])+$/) as unknown as string, code: "too_deep", message: `the JSON nests more than ${MAX_JSON_DEPTH} levels deep here` }]);
    expect((await gw.store.workflows.list(gw.a.tenantId, { limit: 1000 })).length).toBe(before);
    const imported = await gw.app.inject({ method: "POST", url: "/api/agent-workflows/import", headers: { ...bearer(gw.a.admin), "content-type": "application/json" }, payload: JSON.stringify({ format: "toolSequence", source: { steps: [{ tool: "echo", params: { x: deep } }] } }) });
    problemOf(imported, 400, "BATON_GATEWAY_REQUEST_INVALID");
  });

  test("an invalid definition is 400 listing every engine problem, with request paths; nothing is written", async () => {
    const before = (await gw.store.workflows.list(gw.a.tenantId, { limit: 1000 })).length;
    const res = await createWorkflow(gw.a.admin, {
      name: "Broken",
      definition: {
        nodes: [
          { id: "a", type: "setVariable", config: { values: {} } },
          { id: "b", type: "no.such.type" },
          { id: "a", type: "setVariable", config: { values: {} } },
        ],
        edges: [{ from: "a", to: "ghost" }],
      },
    });
    const p = problemOf(res, 400, "BATON_GATEWAY_WORKFLOW_INVALID");
    const paths = p.errors!.map((e) => `${e.path} ${e.code}`);
    expect(paths).toEqual(
      expect.arrayContaining([
        "body.definition.nodes[1].type unknown_node_type",
        "body.definition.nodes[2].id duplicate_node_id",
        "body.definition.edges[0].to dangling_edge",
      ]),
    );
    expect((await gw.store.workflows.list(gw.a.tenantId, { limit: 1000 })).length).toBe(before);
  });

  test("every issue the validator returns is in the answer, in order", async () => {
    const issues = [
      { path: "nodes[0].type", code: "unknown_node_type", message: "unknown node type \"x\"" },
      { path: "nodes[3].config.tool", code: "invalid_config", message: "tool names are dot-separated words" },
      { path: "start", code: "missing_start", message: "no start node" },
      { path: "(definition)", code: "invalid_shape", message: "expected an object" },
    ];
    gw.setValidator(() => ({ ok: false, errors: issues }));
    try {
      const res = await createWorkflow(gw.a.admin, { name: "Stubbed", definition: { anything: true } });
      const p = problemOf(res, 400, "BATON_GATEWAY_WORKFLOW_INVALID");
      expect(p.errors).toEqual([
        { path: "body.definition.nodes[0].type", code: "unknown_node_type", message: "unknown node type \"x\"" },
        { path: "body.definition.nodes[3].config.tool", code: "invalid_config", message: "tool names are dot-separated words" },
        { path: "body.definition.start", code: "missing_start", message: "no start node" },
        { path: "body.definition", code: "invalid_shape", message: "expected an object" },
      ]);
      expect(p.detail).toMatch(/4 problems/);

      const wf = (await createWorkflow(gw.a.admin, { name: "Target" })).json<{ errors: unknown[] }>();
      expect(wf.errors).toHaveLength(1); // definition missing: a zod error, before the validator runs
    } finally {
      const { validateWorkflow } = await import("@baton/engine");
      gw.setValidator(validateWorkflow);
    }
  });

  test("an update with an invalid definition is refused and leaves the workflow as it was", async () => {
    const wf = (await createWorkflow(gw.a.admin, { name: "Keep me", definition: validDefinition() })).json<{ id: number }>();
    const res = await gw.app.inject({
      method: "PUT",
      url: `/api/agent-workflows/${wf.id}`,
      headers: bearer(gw.a.admin),
      payload: { definition: { nodes: [] } },
    });
    const p = problemOf(res, 400, "BATON_GATEWAY_WORKFLOW_INVALID");
    expect(p.errors).toContainEqual(expect.objectContaining({ path: "body.definition.nodes", code: "no_nodes" }));
    expect(await gw.store.workflows.get(gw.a.tenantId, wf.id)).toMatchObject({ version: 1, definition: validDefinition() });
  });

  test("zod body errors list every problem, unknown keys included", async () => {
    const res = await createWorkflow(gw.a.admin, { name: "", slug: "Not A Slug", definition: [], enabled: "yes", colour: "red" });
    const p = problemOf(res, 400, "BATON_GATEWAY_REQUEST_INVALID");
    const byPath = Object.fromEntries(p.errors!.map((e) => [e.path, e.code]));
    expect(byPath).toMatchObject({
      "body.name": "too_small",
      "body.slug": "invalid_format",
      "body.definition": "invalid_type",
      "body.enabled": "invalid_type",
      "body.colour": "unrecognized_key",
    });
  });

  test("an empty update is refused", async () => {
    const wf = (await createWorkflow(gw.a.admin, { name: "Empty update", definition: validDefinition() })).json<{ id: number }>();
    const res = await gw.app.inject({ method: "PUT", url: `/api/agent-workflows/${wf.id}`, headers: bearer(gw.a.admin), payload: { changeDescription: "nothing" } });
    problemOf(res, 400, "BATON_GATEWAY_REQUEST_INVALID");
  });

  test("params and query are validated and named", async () => {
    const p1 = problemOf(await gw.app.inject({ method: "GET", url: "/api/agent-workflows/abc", headers: bearer(gw.a.admin) }), 400, "BATON_GATEWAY_REQUEST_INVALID");
    expect(p1.errors!.map((e) => e.path)).toEqual(["params.id"]);
    const p2 = problemOf(await gw.app.inject({ method: "GET", url: "/api/agent-workflows/99999999999", headers: bearer(gw.a.admin) }), 400, "BATON_GATEWAY_REQUEST_INVALID");
    expect(p2.errors!.map((e) => e.path)).toEqual(["params.id"]);
    const p3 = problemOf(await gw.app.inject({ method: "GET", url: "/api/agent-workflows?limit=0&offset=-1", headers: bearer(gw.a.admin) }), 400, "BATON_GATEWAY_REQUEST_INVALID");
    expect(p3.errors!.map((e) => e.path).sort()).toEqual(["query.limit", "query.offset"]);
    // Numbers are decimal digits: what Number() would also read (hex, exponents, signs, spaces, decimals) is refused.
    const wf = (await createWorkflow(gw.a.admin, { name: "Decimal ids", definition: validDefinition() })).json<{ id: number }>();
    expect((await gw.app.inject({ method: "GET", url: `/api/agent-workflows/${wf.id}`, headers: bearer(gw.a.admin) })).statusCode).toBe(200);
    for (const id of [`0x${wf.id.toString(16)}`, `${wf.id}e0`, `+${wf.id}`, `${wf.id}.0`, `%20${wf.id}`, `0b${wf.id.toString(2)}`]) {
      const p = problemOf(await gw.app.inject({ method: "GET", url: `/api/agent-workflows/${id}`, headers: bearer(gw.a.admin) }), 400, "BATON_GATEWAY_REQUEST_INVALID");
      expect({ id, paths: p.errors!.map((e) => e.path) }).toEqual({ id, paths: ["params.id"] });
    }
    const p4 = problemOf(await gw.app.inject({ method: "GET", url: "/api/agent-workflows?limit=0x10&offset=1e2", headers: bearer(gw.a.admin) }), 400, "BATON_GATEWAY_REQUEST_INVALID");
    expect(p4.errors!.map((e) => e.path).sort()).toEqual(["query.limit", "query.offset"]);
  });

  test("a query parameter a list does not have (a misspelt filter, offset where it does not page) is a 400 naming it, on every list", async () => {
    const wf = (await createWorkflow(gw.a.admin, { name: "Query typos", definition: validDefinition() })).json<{ id: number }>();
    const ex = await gw.store.executions.create(gw.a.tenantId, { workflowId: wf.id, workflowVersion: 1, input: {} });
    for (const [url, name] of [
      ["/api/agent-workflows?limt=5", "limt"],
      [`/api/agent-workflows/${wf.id}/versions?ofset=1`, "ofset"],
      ["/api/agent-workflow-executions?stauts=paused", "stauts"],
      ["/api/agent-memory?agent_id=1", "agent_id"],
      ["/api/reviews?execution=1", "execution"],
      // The checkpoint list does not page: an offset would be ignored and its first page answered again.
      [`/api/agent-workflow-executions/${ex.id}/checkpoints?offset=10`, "offset"],
    ] as const) {
      const p = problemOf(await gw.app.inject({ method: "GET", url, headers: bearer(gw.a.viewer) }), 400, "BATON_GATEWAY_REQUEST_INVALID");
      expect({ url, errors: p.errors }).toEqual({ url, errors: [{ path: `query.${name}`, code: "unrecognized_key", message: `unknown query parameter "${name}"` }] });
    }
    // The parameters a list has still work.
    expect((await gw.app.inject({ method: "GET", url: `/api/agent-workflow-executions?workflowId=${wf.id}&status=queued&limit=5&offset=0`, headers: bearer(gw.a.viewer) })).json<{ items: unknown[] }>().items).toHaveLength(1);
  });

  test("a route that takes no query parameter refuses any, whatever its method, naming it; nothing is done", async () => {
    const wf = (await createWorkflow(gw.a.admin, { name: "No query", definition: validDefinition() })).json<{ id: number }>();
    const ex = await gw.store.executions.create(gw.a.tenantId, { workflowId: wf.id, workflowVersion: 1, input: {} });
    const started = gw.bus.started.length;
    const listed = async () => (await gw.app.inject({ method: "GET", url: "/api/agent-workflows?limit=200", headers: bearer(gw.a.admin) })).json<{ items: unknown[] }>().items.length;
    const before = await listed();
    for (const [method, url, name, payload] of [
      ["GET", `/api/agent-workflows/${wf.id}?bogus=1`, "bogus", undefined],
      ["HEAD", `/api/agent-workflows/${wf.id}?bogus=1`, "bogus", undefined],
      ["GET", "/api/tools?verbose", "verbose", undefined],
      ["GET", `/api/agent-workflow-executions/${ex.id}/events?lastEventId=3`, "lastEventId", undefined],
      ["POST", "/api/agent-workflows?dryRun=true", "dryRun", { name: "Not stored", definition: validDefinition() }],
      ["PUT", `/api/agent-workflows/${wf.id}?version=1`, "version", { name: "Not renamed" }],
      ["POST", `/api/agent-workflows/${wf.id}/execute?input=x`, "input", {}],
      ["DELETE", `/api/agent-workflows/${wf.id}?force=true`, "force", undefined],
      // A route that checks its body with its own validator refuses it too.
      ["POST", "/api/tool-sources/http?replace=1", "replace", { name: "x" }],
    ] as const) {
      const res = await gw.app.inject({ method, url, headers: bearer(gw.a.admin), ...(payload === undefined ? {} : { payload }) });
      if (method === "HEAD") {
        expect({ url, status: res.statusCode, type: res.headers["content-type"] }).toEqual({ url, status: 400, type: expect.stringContaining("application/problem+json") });
        continue;
      }
      const p = problemOf(res, 400, "BATON_GATEWAY_REQUEST_INVALID");
      expect({ method, url, errors: p.errors }).toEqual({ method, url, errors: [{ path: `query.${name}`, code: "unrecognized_key", message: `unknown query parameter "${name}"` }] });
    }
    // Nothing was created, renamed, started or deleted.
    expect(await listed()).toBe(before);
    expect((await gw.app.inject({ method: "GET", url: `/api/agent-workflows/${wf.id}`, headers: bearer(gw.a.admin) })).json()).toMatchObject({ name: "No query", version: 1 });
    expect(gw.bus.started.length).toBe(started);
    // Without the parameter, the same requests work.
    expect((await gw.app.inject({ method: "GET", url: `/api/agent-workflows/${wf.id}?`, headers: bearer(gw.a.admin) })).statusCode).toBe(200);
    expect((await gw.app.inject({ method: "GET", url: "/api/tools", headers: bearer(gw.a.admin) })).statusCode).not.toBe(400);
    // Probes, the OpenAPI document and Swagger UI take any query string, as their clients may add one.
    for (const url of ["/healthz?probe=1", "/readyz?probe=1", "/openapi.json?v=2", "/docs?x=1"]) {
      expect({ url, status: (await gw.app.inject({ method: "GET", url })).statusCode }).toEqual({ url, status: 200 });
    }
  });

  test("a query parameter given more than once is a 400 saying so, on every list", async () => {
    for (const url of ["/api/agent-workflows?limit=1&limit=2", "/api/agent-workflow-executions?status=queued&status=running", "/api/reviews?offset=0&offset=1&offset=2"]) {
      const p = problemOf(await gw.app.inject({ method: "GET", url, headers: bearer(gw.a.admin) }), 400, "BATON_GATEWAY_REQUEST_INVALID");
      const name = /\?(\w+)=/.exec(url)![1]!;
      const times = url.split(`${name}=`).length - 1;
      expect({ url, errors: p.errors }).toEqual({ url, errors: [{ path: `query.${name}`, code: "repeated_parameter", message: `given ${times} times; give it once` }] });
    }
  });

  test("a NUL character anywhere in a body is a 400 naming where, and nothing is stored", async () => {
    const before = (await gw.app.inject({ method: "GET", url: "/api/agent-workflows?limit=200", headers: bearer(gw.a.admin) })).json<{ items: unknown[] }>().items.length;
    for (const [payload, path] of [
      [{ name: "a\u0000b", definition: validDefinition() }, "body.name"],
      [{ name: "ok", description: "x\u0000", definition: validDefinition() }, "body.description"],
      [{ name: "ok", definition: { ...validDefinition(), nodes: [{ id: "a", type: "setVariable", config: { values: { "$.v": "x\u0000" } } }] } }, 'body.definition.nodes[0].config.values["$.v"]'],
      [{ name: "ok", definition: validDefinition(), agentConfig: { "k\u0000": 1 } }, 'body.agentConfig["k\\u0000"]'],
    ] as const) {
      const p = problemOf(await gw.app.inject({ method: "POST", url: "/api/agent-workflows", headers: { ...bearer(gw.a.admin), "content-type": "application/json" }, payload: JSON.stringify(payload) }), 400, "BATON_GATEWAY_REQUEST_INVALID");
      expect(p.errors!.map((e) => [e.path, e.code])).toEqual([[path, "invalid_string"]]);
    }
    expect((await gw.app.inject({ method: "GET", url: "/api/agent-workflows?limit=200", headers: bearer(gw.a.admin) })).json<{ items: unknown[] }>().items).toHaveLength(before);
  });

  test("an unpaired UTF-16 surrogate anywhere in a body is a 400 naming where (not the store's error, nor stored as U+FFFD); nothing is stored", async () => {
    const count = async () => (await gw.app.inject({ method: "GET", url: "/api/agent-workflows?limit=200", headers: bearer(gw.a.admin) })).json<{ items: unknown[] }>().items.length;
    const before = await count();
    const post = (url: string, payload: string) => gw.app.inject({ method: "POST", url, headers: { ...bearer(gw.a.admin), "content-type": "application/json" }, payload });
    const node = (x: string) => `{"nodes":[{"id":"set","type":"setVariable","config":{"values":{"x":${x}}}}]}`;
    for (const [payload, path] of [
      [`{"name":"Lone","definition":${node('"a\\ud800"')}}`, "body.definition.nodes[0].config.values.x"],
      [`{"name":"Lone","definition":${node('{"\\uDC00":1}')}}`, 'body.definition.nodes[0].config.values.x["\\udc00"]'],
      [`{"name":"Lone \\ud83d","definition":${node("1")}}`, "body.name"],
    ] as const) {
      const p = problemOf(await post("/api/agent-workflows", payload), 400, "BATON_GATEWAY_REQUEST_INVALID");
      expect(p.errors!.map((e) => [e.path, e.code])).toEqual([[path, "invalid_string"]]);
      expect(p.errors![0]!.message).toContain("unpaired UTF-16 surrogate");
    }
    expect(await count()).toBe(before);
    // With a NUL elsewhere, both are named.
    const both = problemOf(await post("/api/agent-workflows", `{"name":"a\\u0000","description":"\\udfff","definition":${node("1")}}`), 400, "BATON_GATEWAY_REQUEST_INVALID");
    expect(both.errors!.map((e) => e.path)).toEqual(["body.name", "body.description"]);
    // An execution's input: no run is created.
    const wf = (await createWorkflow(gw.a.admin, { name: "Surrogates", definition: validDefinition() })).json<{ id: number }>();
    const runs = (await gw.store.executions.list(gw.a.tenantId, { workflowId: wf.id })).length;
    const exec = problemOf(await post(`/api/agent-workflows/${wf.id}/execute`, '{"input":{"q":"\\ud800"}}'), 400, "BATON_GATEWAY_REQUEST_INVALID");
    expect(exec.errors!.map((e) => e.path)).toEqual(["body.input.q"]);
    expect((await gw.store.executions.list(gw.a.tenantId, { workflowId: wf.id })).length).toBe(runs);
    // A pair, escaped, is one character and fine.
    const paired = await post("/api/agent-workflows", `{"name":"Paired \\ud83d\\ude00","definition":${node('"\\ud83d\\ude00"')}}`);
    expect(paired.statusCode).toBe(201);
    expect(paired.json<{ name: string }>().name).toBe("Paired \u{1F600}");
  });

  test("a number past ±1.8e308 (JSON.parse's Infinity) anywhere in a body is a 400 naming where, not stored as null", async () => {
    const post = (url: string, payload: string) => gw.app.inject({ method: "POST", url, headers: { ...bearer(gw.a.admin), "content-type": "application/json" }, payload });
    const wf = (await createWorkflow(gw.a.admin, { name: "Huge numbers", definition: validDefinition() })).json<{ id: number }>();
    const runs = (await gw.store.executions.list(gw.a.tenantId, { workflowId: wf.id })).length;
    const exec = problemOf(await post(`/api/agent-workflows/${wf.id}/execute`, '{"input":{"ok":1e308,"big":[1, -1e400],"alsoBig":123e999}}'), 400, "BATON_GATEWAY_REQUEST_INVALID");
    expect(exec.errors).toEqual([
      { path: "body.input.big[1]", code: "invalid_number", message: expect.stringContaining("too large") },
      { path: "body.input.alsoBig", code: "invalid_number", message: expect.stringContaining("too large") },
    ]);
    expect((await gw.store.executions.list(gw.a.tenantId, { workflowId: wf.id })).length).toBe(runs);
    const memories = (await gw.store.memory.list(gw.a.tenantId, { agentId: 77 })).length;
    const mem = problemOf(await post("/api/agent-memory", '{"agentId":77,"key":"k","content":"c","metadata":{"score":1E+400}}'), 400, "BATON_GATEWAY_REQUEST_INVALID");
    expect(mem.errors!.map((e) => [e.path, e.code])).toEqual([["body.metadata.score", "invalid_number"]]);
    expect((await gw.store.memory.list(gw.a.tenantId, { agentId: 77 })).length).toBe(memories);
    // As large as a double goes is fine, and kept.
    const ok = await post(`/api/agent-workflows/${wf.id}/execute`, '{"input":{"n":1.7976931348623157e308}}');
    expect(ok.statusCode).toBe(202);
    const run = await gw.store.executions.get(gw.a.tenantId, ok.json<{ id: number }>().id);
    expect(run!.input).toEqual({ n: Number.MAX_VALUE });
  });

  test("a __proto__ key, or a constructor holding a prototype, anywhere in a body is a 400 naming each, and nothing is stored", async () => {
    const count = async () => (await gw.app.inject({ method: "GET", url: "/api/agent-workflows?limit=200", headers: bearer(gw.a.admin) })).json<{ items: unknown[] }>().items.length;
    const before = await count();
    const node = '{"id":"set","type":"setVariable","config":{"values":{"x":1}}}';
    const payload = `{"name":"Poison","__proto__":{"admin":true},"definition":{"nodes":[${node},{"id":"b","constructor":{"prototype":{"x":1}}}]}}`;
    const p = problemOf(await gw.app.inject({ method: "POST", url: "/api/agent-workflows", headers: { ...bearer(gw.a.admin), "content-type": "application/json" }, payload }), 400, "BATON_GATEWAY_REQUEST_INVALID");
    expect(p.errors!.map((e) => [e.path, e.code])).toEqual([
      ["body.__proto__", "forbidden_key"],
      ["body.definition.nodes[1].constructor", "forbidden_key"],
    ]);
    expect(p.detail).not.toContain("not valid JSON");
    expect(await count()).toBe(before);
    // Another route, the key deep in a value the client sends into a run.
    const wf = (await createWorkflow(gw.a.admin, { name: "Target", definition: validDefinition() })).json<{ id: number }>();
    const exec = await gw.app.inject({ method: "POST", url: `/api/agent-workflows/${wf.id}/execute`, headers: { ...bearer(gw.a.admin), "content-type": "application/json" }, payload: '{"input":{"a":[{"__proto__":{"x":1}}]}}' });
    expect(problemOf(exec, 400, "BATON_GATEWAY_REQUEST_INVALID").errors).toEqual([{ path: "body.input.a[0].__proto__", code: "forbidden_key", message: expect.any(String) }]);
    expect(gw.bus.started.some((c) => c.workflowId === wf.id)).toBe(false);
    // Plain `constructor` values are ordinary data; malformed JSON stays what it was.
    const ok = await createWorkflow(gw.a.admin, { name: "Ctor", definition: { nodes: [{ id: "set", type: "setVariable", config: { values: { constructor: "x" } } }] } });
    expect(ok.statusCode).toBe(201);
    const bad = await gw.app.inject({ method: "POST", url: "/api/agent-workflows", headers: { ...bearer(gw.a.admin), "content-type": "application/json" }, payload: '{"__proto__": {' });
    problemOf(bad, 400, "FST_ERR_CTP_INVALID_JSON_BODY");
  });

  test("a body that is not application/json (text/plain, a form, none named) is 415 saying what to send, nothing written; an empty one of any type is no body", async () => {
    const before = (await gw.store.workflows.list(gw.a.tenantId, { limit: 1000 })).length;
    const body = JSON.stringify({ name: "Wrong type", definition: validDefinition() });
    for (const type of ["text/plain", "application/x-www-form-urlencoded", "application/xml", undefined]) {
      const res = await gw.app.inject({ method: "POST", url: "/api/agent-workflows", headers: { ...bearer(gw.a.admin), ...(type === undefined ? {} : { "content-type": type }) }, payload: body });
      const p = problemOf(res, 415, "FST_ERR_CTP_INVALID_MEDIA_TYPE");
      expect({ type, detail: p.detail }).toEqual({ type, detail: "the body must be JSON, sent with content-type application/json" });
    }
    expect((await gw.store.workflows.list(gw.a.tenantId, { limit: 1000 })).length).toBe(before);
    // An empty body of any type is no body, as an empty JSON one is: a route whose body is optional takes it.
    const wf = (await createWorkflow(gw.a.admin, { name: "Empty bodies", definition: validDefinition() })).json<{ id: number }>();
    for (const type of ["text/plain;charset=UTF-8", "application/x-www-form-urlencoded", "application/octet-stream"]) {
      const res = await gw.app.inject({ method: "POST", url: `/api/agent-workflows/${wf.id}/execute`, headers: { ...bearer(gw.a.admin), "content-type": type }, payload: "" });
      expect({ type, status: res.statusCode }).toEqual({ type, status: 202 });
    }
    const version = (await gw.store.workflows.listVersions(gw.a.tenantId, wf.id))[0]!;
    const restore = await gw.app.inject({ method: "POST", url: `/api/agent-workflows/${wf.id}/versions/${version.id}/restore`, headers: { ...bearer(gw.a.admin), "content-type": "text/plain" }, payload: "" });
    expect(restore.statusCode).toBe(200);
  });

  test("a compressed body (content-encoding gzip) is 415 saying so, not \"not valid JSON\"; nothing is written", async () => {
    const before = (await gw.store.workflows.list(gw.a.tenantId, { limit: 1000 })).length;
    const body = gzipSync(JSON.stringify({ name: "Zipped", definition: validDefinition() }));
    const res = await gw.app.inject({ method: "POST", url: "/api/agent-workflows", headers: { ...bearer(gw.a.admin), "content-type": "application/json", "content-encoding": "gzip" }, payload: body });
    expect(problemOf(res, 415, "BATON_GATEWAY_ENCODING_UNSUPPORTED").detail).toBe('the body\'s content-encoding "gzip" is not supported: send the body uncompressed');
    expect((await gw.store.workflows.list(gw.a.tenantId, { limit: 1000 })).length).toBe(before);
    const plain = await gw.app.inject({ method: "POST", url: "/api/agent-workflows", headers: { ...bearer(gw.a.admin), "content-type": "application/json", "content-encoding": "identity" }, payload: JSON.stringify({ name: "Plain", definition: validDefinition() }) });
    expect(plain.statusCode).toBe(201);
    // No body, nothing to decode: the header alone changes nothing.
    const read = await gw.app.inject({ method: "GET", url: "/api/agent-workflows?limit=1", headers: { ...bearer(gw.a.admin), "content-encoding": "gzip" } });
    expect(read.statusCode).toBe(200);
  });

  test("a route that takes no body (delete, restore) answers as without one, whatever body comes: no 415 its OpenAPI entry does not list", async () => {
    const wf = (await createWorkflow(gw.a.admin, { name: "Bodiless", definition: validDefinition() })).json<{ id: number }>();
    const version = (await gw.store.workflows.listVersions(gw.a.tenantId, wf.id))[0]!;
    const doc = (await gw.app.inject({ method: "GET", url: "/openapi.json" })).json<{ paths: Record<string, Record<string, { requestBody?: unknown; responses: Record<string, unknown> }>> }>();
    for (const [method, path] of [["post", "/api/agent-workflows/{id}/versions/{versionId}/restore"], ["delete", "/api/agent-workflows/{id}"]] as const) {
      const op = doc.paths[path]![method]!;
      expect({ path, body: op.requestBody, has415: op.responses["415"] !== undefined }).toEqual({ path, body: undefined, has415: false });
    }
    // A content type that is no media type at all (`json`) too, which fastify refuses (415) before any parser.
    for (const [type, payload] of [["application/xml", "<x/>"], ["text/plain", "restore it"], ["application/json", "{not json"], ["json", "{}"], ["json", ""]] as const) {
      const res = await gw.app.inject({ method: "POST", url: `/api/agent-workflows/${wf.id}/versions/${version.id}/restore`, headers: { ...bearer(gw.a.admin), "content-type": type }, payload });
      expect({ type, status: res.statusCode }).toEqual({ type, status: 200 });
    }
    const zipped = await gw.app.inject({ method: "POST", url: `/api/agent-workflows/${wf.id}/versions/${version.id}/restore`, headers: { ...bearer(gw.a.admin), "content-type": "application/json", "content-encoding": "gzip" }, payload: gzipSync("{}") });
    expect(zipped.statusCode).toBe(200);
    const del = await gw.app.inject({ method: "DELETE", url: `/api/agent-workflows/${wf.id}`, headers: { ...bearer(gw.a.admin), "content-type": "text/plain" }, payload: "please" });
    expect(del.statusCode).toBe(204);
    const mem = (await gw.app.inject({ method: "POST", url: "/api/agent-memory", headers: bearer(gw.a.admin), payload: { agentId: 1, key: "k", content: "c" } })).json<{ id: number }>();
    const delMem = await gw.app.inject({ method: "DELETE", url: `/api/agent-memory/${mem.id}`, headers: { ...bearer(gw.a.admin), "content-type": "json;;" } });
    expect(delMem.statusCode).toBe(204);
  });

  test("a body past 4 MiB is 413 saying the limit", async () => {
    const res = await gw.app.inject({ method: "POST", url: "/api/agent-workflows", headers: { ...bearer(gw.a.admin), "content-type": "application/json" }, payload: JSON.stringify({ name: "Big", definition: validDefinition(), description: "x".repeat(4 * 1024 * 1024) }) });
    expect(problemOf(res, 413, "FST_ERR_CTP_BODY_TOO_LARGE").detail).toBe("the body is larger than 4 MiB (4194304 bytes), the most the gateway takes");
  });

  test("malformed JSON is a 400 problem, not a 500", async () => {
    const res = await gw.app.inject({
      method: "POST",
      url: "/api/agent-workflows",
      headers: { ...bearer(gw.a.admin), "content-type": "application/json" },
      payload: "{ not json",
    });
    expect(res.statusCode).toBe(400);
    expect(String(res.headers["content-type"])).toMatch(/^application\/problem\+json/);
  });

  test("malformed JSON is a 400 whose detail says where the JSON breaks", async () => {
    const res = await gw.app.inject({ method: "POST", url: "/api/agent-workflows", headers: { ...bearer(gw.a.admin), "content-type": "application/json" }, payload: '{"name": "x",\n "definition": {"nodes": [}}' });
    const p = problemOf(res, 400, "FST_ERR_CTP_INVALID_JSON_BODY");
    expect(p.detail).toMatch(/^the body is not valid JSON: Unexpected token '\}', .*"nodes": \[\}\}/);
    const cut = problemOf(await gw.app.inject({ method: "POST", url: "/api/agent-workflows", headers: { ...bearer(gw.a.admin), "content-type": "application/json" }, payload: '{"name": "x", "definition": {' }), 400, "FST_ERR_CTP_INVALID_JSON_BODY");
    expect(cut.detail).toMatch(/^the body is not valid JSON: .*position 29/);
  });

  test("an unexpected failure is a generic 500 problem that reveals nothing", async () => {
    gw.setValidator(() => {
      throw new Error("password=hunter2");
    });
    try {
      const res = await createWorkflow(gw.a.admin, { name: "Crash", definition: validDefinition() });
      const p = problemOf(res, 500, "BATON_GATEWAY_INTERNAL");
      expect(p.detail).toBe("internal server error");
      expect(res.body).not.toContain("hunter2");
    } finally {
      const { validateWorkflow } = await import("@baton/engine");
      gw.setValidator(validateWorkflow);
    }
  });

  test("a method a route does not have is 405 with Allow listing those it has, not 404", async () => {
    const wf = (await createWorkflow(gw.a.admin, { name: "Methods", definition: validDefinition() })).json<{ id: number }>();
    for (const [method, url, allow] of [
      ["PATCH", `/api/agent-workflows/${wf.id}`, "DELETE, GET, HEAD, PUT"],
      ["DELETE", "/api/agent-workflows", "GET, HEAD, POST"],
      ["GET", `/api/agent-workflows/${wf.id}/execute`, "POST"],
      ["POST", "/api/reviews", "GET, HEAD"],
      ["PUT", "/api/agent-memory/1", "DELETE, GET, HEAD"],
    ] as const) {
      const res = await gw.app.inject({ method, url, headers: bearer(gw.a.admin) });
      const p = problemOf(res, 405, "BATON_GATEWAY_METHOD_NOT_ALLOWED");
      expect({ url, allow: res.headers["allow"], detail: p.detail }).toEqual({ url, allow, detail: `${method} is not allowed on ${url}; it takes ${allow}` });
    }
    // And nothing was changed by them.
    expect((await gw.app.inject({ method: "GET", url: `/api/agent-workflows/${wf.id}`, headers: bearer(gw.a.admin) })).statusCode).toBe(200);
  });

  test("an unknown route is a 404 problem", async () => {
    problemOf(await gw.app.inject({ method: "GET", url: "/api/nothing-here", headers: bearer(gw.a.admin) }), 404, "BATON_GATEWAY_ROUTE_NOT_FOUND");
    problemOf(await gw.app.inject({ method: "GET", url: "/nothing" }), 404, "BATON_GATEWAY_ROUTE_NOT_FOUND");
  });
});
