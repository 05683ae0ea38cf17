/**
 * `GET /api/blobs/:hash` (gateway on a real Postgres store): the value behind a
 * `{ "$ref": "blob:<sha256>" }` of the caller's tenant, by the reference or the bare hash;
 * another tenant's blob and an unknown hash are 404; a malformed hash is 400 naming the
 * parameter; no key is 401.
 */
import { afterAll, beforeAll, describe, expect, test } from "@jest/globals";
import type { TestGateway } from "./test-support.ts";
import { bearer, openTestGateway, validDefinition } from "./test-support.ts";

let gw: TestGateway;
const value = { report: "x".repeat(2000), rows: [1, 2, 3], nested: { ok: true } };
let stored: { ref: string; hash: string; size: number };

beforeAll(async () => {
  gw = await openTestGateway();
  const wf = await gw.store.workflows.create(gw.a.tenantId, { name: "Large", definition: validDefinition(1) as never });
  const ex = await gw.store.executions.create(gw.a.tenantId, { workflowId: wf.id, workflowVersion: 1, input: {} });
  stored = await gw.store.blobs.put(gw.a.tenantId, ex.id, value);
});
afterAll(async () => {
  await gw.close();
});

const get = (url: string, headers: Record<string, string> = bearer(gw.a.viewer)) => gw.app.inject({ method: "GET", url, headers });

function problem(res: Awaited<ReturnType<typeof get>>, status: number, code: string) {
  expect({ status: res.statusCode, type: String(res.headers["content-type"]).split(";")[0] }).toEqual({ status, type: "application/problem+json" });
  const body = res.json<{ code: string; detail: string; errors?: { path: string }[] }>();
  expect(body.code).toBe(code);
  return body;
}

describe("GET /api/blobs/:hash", () => {
  test("a viewer reads the value by its reference or its bare hash", async () => {
    for (const key of [stored.ref, stored.hash]) {
      const res = await get(`/api/blobs/${key}`);
      expect(res.statusCode).toBe(200);
      const body = res.json<{ ref: string; size: number; createdAt: string; value: unknown }>();
      expect(body).toEqual({ ref: stored.ref, size: stored.size, createdAt: expect.any(String), value });
      expect(Number.isNaN(Date.parse(body.createdAt))).toBe(false);
    }
  });

  test("another tenant's blob, and a hash nobody stored, are 404", async () => {
    expect(problem(await get(`/api/blobs/${stored.ref}`, bearer(gw.b.admin)), 404, "BATON_GATEWAY_NOT_FOUND").detail).toContain(stored.ref);
    problem(await get(`/api/blobs/blob:${"0".repeat(64)}`), 404, "BATON_GATEWAY_NOT_FOUND");
  });

  test("a malformed hash is 400 naming the parameter; no key is 401", async () => {
    for (const bad of ["blob:abc", "X".repeat(64), `object:${stored.hash}`]) {
      const body = problem(await get(`/api/blobs/${bad}`), 400, "BATON_GATEWAY_REQUEST_INVALID");
      expect(body.errors?.map((e) => e.path)).toEqual(["params.hash"]);
    }
    problem(await get(`/api/blobs/${stored.ref}`, {}), 401, "BATON_GATEWAY_UNAUTHENTICATED");
  });

  test("the route is in the OpenAPI document", async () => {
    const doc = (await gw.app.inject({ method: "GET", url: "/openapi.json" })).json<{ paths: Record<string, { get?: { tags?: string[] } }> }>();
    expect(doc.paths["/api/blobs/{hash}"]?.get?.tags).toEqual(["Blobs"]);
  });
});
