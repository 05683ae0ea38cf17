/**
 * Rules checked (gateway on a real Postgres store, recording bus), for a workflow's versions:
 * - GET /api/agent-workflows/:id/versions answers one page, `{ items, limit, offset }`, with the
 *   parameters, bounds and errors of the other lists: `limit` 1-200 (default 50), `offset` ≥ 0
 *   (default 0), decimal digits only; anything else is a 400 problem+json naming
 *   `query.limit` / `query.offset`;
 * - the order is oldest first (version 1 first), as docs/time-travel.md says: pages follow each
 *   other without gap or overlap, a page shorter than `limit` is the last, a page past the end
 *   is empty; the OpenAPI document shows the parameters and the paged answer;
 * - another tenant's workflow, or no workflow, is 404 whatever the page;
 * - POST .../versions/:versionId/restore finds the version by its row id within the workflow
 *   and tenant: a row of another workflow (same tenant), of another tenant, or no row is 404
 *   problem+json naming the version, and nothing is written (no new version, no event);
 *   a row of this workflow is restored as a new version.
 */
import { afterAll, beforeAll, describe, expect, test } from "@jest/globals";
import type { TestGateway } from "./test-support.ts";
import { bearer, openTestGateway, validDefinition, problemOf } from "./test-support.ts";

let gw: TestGateway;

beforeAll(async () => {
  gw = await openTestGateway();
});
afterAll(async () => {
  await gw.close();
});



const get = (url: string, key = gw.a.viewer) => gw.app.inject({ method: "GET", url, headers: bearer(key) });
const restore = (id: number, versionId: number, key = gw.a.operator) =>
  gw.app.inject({ method: "POST", url: `/api/agent-workflows/${id}/versions/${versionId}/restore`, headers: bearer(key) });

interface VersionPage {
  items: { id: number; workflowId: number; version: number; definition: unknown }[];
  limit: number;
  offset: number;
}

/** A workflow of tenant A with versions 1..`count`, version n holding `validDefinition(n)`. */
async function workflowWithVersions(name: string, count: number): Promise<number> {
  const wf = await gw.store.workflows.create(gw.a.tenantId, { name, definition: validDefinition(1) as never });
  for (let v = 2; v <= count; v++) await gw.store.workflows.update(gw.a.tenantId, wf.id, { definition: validDefinition(v) as never });
  return wf.id;
}

async function pageOf(id: number, query: string): Promise<VersionPage> {
  const res = await get(`/api/agent-workflows/${id}/versions${query}`);
  expect(res.statusCode).toBe(200);
  return res.json<VersionPage>();
}

const numbers = (p: VersionPage) => p.items.map((v) => v.version);

describe("GET /api/agent-workflows/:id/versions", () => {
  let seven: number;
  beforeAll(async () => {
    seven = await workflowWithVersions("Seven versions", 7);
  });

  test("pages follow each other, oldest first, without gap or overlap; the short page is the last", async () => {
    const first = await pageOf(seven, "?limit=3");
    expect({ ...first, items: numbers(first) }).toEqual({ items: [1, 2, 3], limit: 3, offset: 0 });
    expect(first.items[0]).toMatchObject({ workflowId: seven, version: 1, definition: validDefinition(1) });
    const second = await pageOf(seven, "?limit=3&offset=3");
    expect({ ...second, items: numbers(second) }).toEqual({ items: [4, 5, 6], limit: 3, offset: 3 });
    const last = await pageOf(seven, "?limit=3&offset=6");
    expect({ ...last, items: numbers(last) }).toEqual({ items: [7], limit: 3, offset: 6 });
    expect(last.items[0]).toMatchObject({ version: 7, definition: validDefinition(7) });
    // Exactly at the end, and far past it: an empty page, not an error.
    expect(await pageOf(seven, "?limit=3&offset=7")).toEqual({ items: [], limit: 3, offset: 7 });
    expect(await pageOf(seven, "?offset=2147483647")).toEqual({ items: [], limit: 50, offset: 2147483647 });
    // The newest `limit` versions start at the workflow's version − limit.
    expect(numbers(await pageOf(seven, "?limit=2&offset=5"))).toEqual([6, 7]);
    // The largest page the other lists allow.
    expect(numbers(await pageOf(seven, "?limit=200"))).toEqual([1, 2, 3, 4, 5, 6, 7]);
  });

  test("without parameters the page is the first 50, as in the other lists", async () => {
    const many = await workflowWithVersions("Fifty-one versions", 51);
    const first = await pageOf(many, "");
    expect({ limit: first.limit, offset: first.offset, versions: numbers(first) }).toEqual({ limit: 50, offset: 0, versions: Array.from({ length: 50 }, (_, i) => i + 1) });
    expect(numbers(await pageOf(many, "?offset=50"))).toEqual([51]);
  });

  test("a limit or offset out of bounds, or not in decimal digits, is a 400 naming the parameter", async () => {
    for (const [query, paths] of [
      ["?limit=0", ["query.limit"]],
      ["?limit=201", ["query.limit"]],
      ["?limit=abc", ["query.limit"]],
      ["?limit=1e2", ["query.limit"]],
      ["?offset=-1", ["query.offset"]],
      ["?offset=2147483648", ["query.offset"]],
      ["?limit=0&offset=0x10", ["query.limit", "query.offset"]],
    ] as const) {
      const p = problemOf(await get(`/api/agent-workflows/${seven}/versions${query}`), 400, "BATON_GATEWAY_REQUEST_INVALID");
      expect({ query, paths: p.errors!.map((e) => e.path).sort() }).toEqual({ query, paths });
    }
  });

  test("another tenant's workflow, or no workflow, is 404 whatever the page", async () => {
    problemOf(await get(`/api/agent-workflows/${seven}/versions?limit=1`, gw.b.admin), 404, "BATON_GATEWAY_NOT_FOUND");
    problemOf(await get(`/api/agent-workflows/2147483647/versions?limit=1&offset=1`), 404, "BATON_GATEWAY_NOT_FOUND");
  });

  test("the OpenAPI document shows limit and offset and the paged answer", async () => {
    const doc = (await gw.app.inject({ method: "GET", url: "/openapi.json" })).json<{
      paths: Record<string, Record<string, { parameters?: { name: string; in: string }[]; responses: Record<string, { content: Record<string, { schema: { properties?: Record<string, unknown>; required?: string[] } }> }> }>>;
    }>();
    const op = doc.paths["/api/agent-workflows/{id}/versions"]!.get!;
    expect(op.parameters!.filter((p) => p.in === "query").map((p) => p.name).sort()).toEqual(["limit", "offset"]);
    const schema = op.responses["200"]!.content["application/json"]!.schema;
    expect(Object.keys(schema.properties ?? {}).sort()).toEqual(["items", "limit", "offset"]);
    expect([...(schema.required ?? [])].sort()).toEqual(["items", "limit", "offset"]);
  });
});

describe("POST /api/agent-workflows/:id/versions/:versionId/restore", () => {
  /** What a refused restore must leave as it was: the workflow, its versions, the events. */
  async function snapshot(tenantId: string, id: number) {
    const wf = await gw.store.workflows.get(tenantId, id);
    return { version: wf?.version, definition: wf?.definition, versions: (await gw.store.workflows.listVersions(tenantId, id)).length, events: gw.bus.published.length };
  }

  test("a version row of another workflow is 404 naming it, and nothing is written", async () => {
    const target = await workflowWithVersions("Restore target", 2);
    const elsewhere = await workflowWithVersions("Restore elsewhere", 2);
    const [foreign] = await gw.store.workflows.listVersions(gw.a.tenantId, elsewhere);
    const before = await snapshot(gw.a.tenantId, target);
    const elsewhereBefore = await snapshot(gw.a.tenantId, elsewhere);
    const p = problemOf(await restore(target, foreign!.id), 404, "BATON_GATEWAY_NOT_FOUND");
    expect(p.detail).toContain(String(foreign!.id));
    expect(await snapshot(gw.a.tenantId, target)).toEqual(before);
    expect(await snapshot(gw.a.tenantId, elsewhere)).toEqual(elsewhereBefore);
  });

  test("a version row of another tenant, or no row, is 404 and nothing is written", async () => {
    const mine = await workflowWithVersions("Restore mine", 2);
    const theirs = await gw.store.workflows.create(gw.b.tenantId, { name: "Theirs", definition: validDefinition(9) as never });
    const [theirRow] = await gw.store.workflows.listVersions(gw.b.tenantId, theirs.id);
    const [myRow] = await gw.store.workflows.listVersions(gw.a.tenantId, mine);
    const before = await snapshot(gw.a.tenantId, mine);
    const theirsBefore = await snapshot(gw.b.tenantId, theirs.id);
    problemOf(await restore(mine, theirRow!.id), 404, "BATON_GATEWAY_NOT_FOUND");
    problemOf(await restore(mine, 2147483647), 404, "BATON_GATEWAY_NOT_FOUND");
    // B naming A's workflow and A's row: the workflow is not B's.
    problemOf(await restore(mine, myRow!.id, gw.b.admin), 404, "BATON_GATEWAY_NOT_FOUND");
    // B naming its own workflow and A's row: the row is not B's.
    problemOf(await restore(theirs.id, myRow!.id, gw.b.admin), 404, "BATON_GATEWAY_NOT_FOUND");
    expect(await snapshot(gw.a.tenantId, mine)).toEqual(before);
    expect(await snapshot(gw.b.tenantId, theirs.id)).toEqual(theirsBefore);
  });

  test("a version row of this workflow is restored as a new version", async () => {
    const id = await workflowWithVersions("Restore here", 3);
    const [v1] = await gw.store.workflows.listVersions(gw.a.tenantId, id);
    const res = await restore(id, v1!.id);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ id, version: 4, definition: validDefinition(1) });
    expect(gw.bus.published).toContainEqual(expect.objectContaining({ type: "workflow.updated", scopeId: id, data: expect.objectContaining({ version: 4 }) as unknown }));
    expect(await gw.store.workflows.getVersion(gw.a.tenantId, id, 4)).toMatchObject({ version: 4, definition: validDefinition(1) });
  });
});
