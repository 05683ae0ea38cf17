/**
 * Rules checked (gateway on a real Postgres store, recording bus), for a workflow's versions:
 * - POST .../versions/:versionId/restore finds the version by its row id within the workflow
 *   and tenant: a row of another workflow (same tenant), of another tenant, or no row is 404
 *   problem+json naming the version, and nothing is written (no new version, no event);
 *   a row of this workflow is restored as a new version.
 */
import { afterAll, beforeAll, describe, expect, test } from "@jest/globals";
import type { TestGateway } from "./test-support.ts";
import { bearer, openTestGateway, validDefinition } from "./test-support.ts";

let gw: TestGateway;

beforeAll(async () => {
  gw = await openTestGateway();
});
afterAll(async () => {
  await gw.close();
});

type Res = { statusCode: number; headers: Record<string, unknown>; json: () => unknown };
type Problem = { code: string; detail: string; errors?: { path: string; code: string; message: string }[] };

function problemOf(res: Res, status: number, code: string): Problem {
  expect({ status: res.statusCode, type: String(res.headers["content-type"]).split(";")[0] }).toEqual({ status, type: "application/problem+json" });
  const body = res.json() as Problem;
  expect(body.code).toBe(code);
  return body;
}

const restore = (id: number, versionId: number, key = gw.a.operator) =>
  gw.app.inject({ method: "POST", url: `/api/agent-workflows/${id}/versions/${versionId}/restore`, headers: bearer(key) });

/** A workflow of tenant A with versions 1..`count`, version n holding `validDefinition(n)`. */
async function workflowWithVersions(name: string, count: number): Promise<number> {
  const wf = await gw.store.workflows.create(gw.a.tenantId, { name, definition: validDefinition(1) as never });
  for (let v = 2; v <= count; v++) await gw.store.workflows.update(gw.a.tenantId, wf.id, { definition: validDefinition(v) as never });
  return wf.id;
}

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
