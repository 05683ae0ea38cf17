/**
 * Rules of workflows and their versions:
 * - create makes version 1 and its versions row together; defaults are filled in;
 * - a slug is derived from the name when absent; slugs are unique per tenant (409
 *   BATON_STORE_SLUG_TAKEN), the same slug is fine in another tenant; bad slugs are 400;
 * - update applies the patch, bumps the version by one and adds a versions row holding
 *   the new definition and the change description; concurrent updates get distinct versions;
 * - getVersion/listVersions read history (listVersions one page, oldest first, limit/offset
 *   checked); getVersionByRowId reads one versions row of that workflow and tenant (null for
 *   another's); restoreVersion makes a new version whose definition is the restored one (the
 *   history is never rewritten);
 * - list is newest first with limit/offset; delete removes the workflow and its versions;
 * - updating/restoring a missing workflow is 404; invalid input is 400, never a half-written record;
 * - a workflow has at most one MCP server definition: upsert creates it, then regenerates
 *   it in place (new tools, new lastGeneratedAt, status kept unless given); its slug is
 *   unique per tenant; deleting the workflow deletes it.
 */
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { openTestStore, type TestStore } from "./testing.ts";
import type { Store, WorkflowInput } from "./types.ts";

let t: TestStore;
let store: Store;
let tenant: string;
let other: string;

const graph = (label: string) => ({ nodes: [{ id: "start", type: "agent.llm", label }], edges: [] });

beforeAll(async () => {
  t = await openTestStore({ prefix: "workflows" });
  store = t.store;
  tenant = (await store.tenants.create("A")).id;
  other = (await store.tenants.create("B")).id;
});
afterAll(() => t?.dispose());

describe("workflows.create", () => {
  it("creates version 1 with its versions row and defaults", async () => {
    const wf = await store.workflows.create(tenant, { name: "Ticket Triage!", definition: graph("v1") });
    expect(wf).toMatchObject({
      tenantId: tenant, name: "Ticket Triage!", slug: "ticket-triage", description: "", definition: graph("v1"),
      agentConfig: {}, memoryConfig: {}, mcpExport: false, enabled: true, version: 1,
    });
    expect(wf.createdAt).toBeInstanceOf(Date);
    const versions = await store.workflows.listVersions(tenant, wf.id);
    expect(versions).toEqual([expect.objectContaining({ agentWorkflowId: wf.id, version: 1, definition: graph("v1"), description: null, tenantId: tenant })]);
    expect(await store.workflows.get(tenant, wf.id)).toEqual(wf);
  });

  it("keeps slugs unique per tenant only", async () => {
    await store.workflows.create(tenant, { name: "Dup", slug: "dup", definition: graph("a") });
    await expect(store.workflows.create(tenant, { name: "Something else", slug: "dup", definition: graph("b") })).rejects.toMatchObject({
      code: "BATON_STORE_SLUG_TAKEN",
      status: 409,
    });
    // Derived slugs conflict the same way.
    await expect(store.workflows.create(tenant, { name: "DUP", definition: graph("c") })).rejects.toMatchObject({ code: "BATON_STORE_SLUG_TAKEN" });
    await expect(store.workflows.create(other, { name: "Dup", slug: "dup", definition: graph("d") })).resolves.toMatchObject({ slug: "dup", tenantId: other });
    // The failed creates left nothing behind.
    expect((await store.workflows.list(tenant)).filter((w) => w.slug === "dup")).toHaveLength(1);
  });

  it("rejects invalid input with 400 and writes nothing", async () => {
    const before = await store.prisma.agentWorkflow.count();
    const bad: WorkflowInput[] = [
      { name: "", definition: {} },
      { name: "x", slug: "Not A Slug", definition: {} },
      { name: "x", definition: [] as never },
      { name: "x", definition: null as never },
      { name: "x", definition: {}, mcpExport: "yes" as never },
      { name: "x", definition: {}, agentConfig: "gpt" as never },
      { name: "x\u0000y", definition: {} },
      { name: "x", definition: { s: "nul\u0000" } },
    ];
    for (const input of bad) {
      await expect(store.workflows.create(tenant, input)).rejects.toMatchObject({ code: "BATON_STORE_INVALID_INPUT", status: 400 });
    }
    expect(await store.prisma.agentWorkflow.count()).toBe(before);
  });
});

describe("workflows.update and versions", () => {
  it("bumps the version and records each definition with its change description", async () => {
    const wf = await store.workflows.create(tenant, { name: "Versioned", definition: graph("v1"), description: "first" });
    const v2 = await store.workflows.update(tenant, wf.id, { definition: graph("v2"), changeDescription: "add step" });
    expect(v2).toMatchObject({ version: 2, definition: graph("v2"), description: "first", slug: "versioned" });
    expect(v2.updatedAt.getTime()).toBeGreaterThanOrEqual(wf.updatedAt.getTime());
    const v3 = await store.workflows.update(tenant, wf.id, { name: "Renamed", enabled: false, agentConfig: { model: "m" } });
    expect(v3).toMatchObject({ version: 3, name: "Renamed", slug: "versioned", enabled: false, agentConfig: { model: "m" }, definition: graph("v2") });

    const versions = await store.workflows.listVersions(tenant, wf.id);
    expect(versions.map((v) => [v.version, v.definition, v.description])).toEqual([
      [1, graph("v1"), null],
      [2, graph("v2"), "add step"],
      [3, graph("v2"), null],
    ]);
    expect(await store.workflows.getVersion(tenant, wf.id, 2)).toMatchObject({ version: 2, definition: graph("v2") });
    expect(await store.workflows.getVersion(tenant, wf.id, 9)).toBeNull();
  });

  it("with ifVersion, writes only while the workflow is at that version; else a retryable 409 and nothing written", async () => {
    const wf = await store.workflows.create(tenant, { name: "Conditional", definition: graph("v1") });
    const v2 = await store.workflows.update(tenant, wf.id, { definition: graph("v2") }, { ifVersion: 1 });
    expect(v2).toMatchObject({ version: 2, definition: graph("v2") });
    await expect(store.workflows.update(tenant, wf.id, { definition: graph("stale") }, { ifVersion: 1 })).rejects.toMatchObject({
      code: "BATON_STORE_WORKFLOW_VERSION_MOVED",
      status: 409,
      retryable: true,
      message: expect.stringContaining("is at version 2, not 1") as unknown,
    });
    expect(await store.workflows.get(tenant, wf.id)).toMatchObject({ version: 2, definition: graph("v2") });
    expect((await store.workflows.listVersions(tenant, wf.id)).map((v) => v.version)).toEqual([1, 2]);
    // Two updates conditional on the same version, at once: one is written, the other moved.
    const both = await Promise.allSettled([graph("a"), graph("b")].map((definition) => store.workflows.update(tenant, wf.id, { definition }, { ifVersion: 2 })));
    expect(both.map((r) => r.status).sort()).toEqual(["fulfilled", "rejected"]);
    expect(both.find((r) => r.status === "rejected")).toMatchObject({ reason: { code: "BATON_STORE_WORKFLOW_VERSION_MOVED" } });
    expect((await store.workflows.listVersions(tenant, wf.id)).map((v) => v.version)).toEqual([1, 2, 3]);
    // Not the tenant's, or gone: not found, whatever the version.
    await expect(store.workflows.update("other-tenant", wf.id, { name: "x" }, { ifVersion: 3 })).rejects.toMatchObject({ code: "BATON_STORE_NOT_FOUND", status: 404 });
  });

  it("restores an old version as a new version", async () => {
    const wf = await store.workflows.create(tenant, { name: "Restorable", definition: graph("v1") });
    await store.workflows.update(tenant, wf.id, { definition: graph("v2") });
    const [v1] = await store.workflows.listVersions(tenant, wf.id);
    const restored = await store.workflows.restoreVersion(tenant, wf.id, v1!.id);
    expect(restored).toMatchObject({ version: 3, definition: graph("v1") });
    const versions = await store.workflows.listVersions(tenant, wf.id);
    expect(versions.map((v) => v.version)).toEqual([1, 2, 3]);
    expect(versions[2]).toMatchObject({ definition: graph("v1"), description: "restored from version 1" });
    // A versions row of another workflow cannot be restored into this one.
    const elsewhere = await store.workflows.create(tenant, { name: "Elsewhere", definition: graph("x") });
    const [ev1] = await store.workflows.listVersions(tenant, elsewhere.id);
    await expect(store.workflows.restoreVersion(tenant, wf.id, ev1!.id)).rejects.toMatchObject({ code: "BATON_STORE_NOT_FOUND", status: 404 });
  });

  it("lists one page of versions, oldest first, and refuses a bad page", async () => {
    const wf = await store.workflows.create(tenant, { name: "Paged", definition: graph("v1") });
    for (let v = 2; v <= 5; v++) await store.workflows.update(tenant, wf.id, { definition: graph(`v${v}`) });
    const page = async (limit: number, offset: number) => (await store.workflows.listVersions(tenant, wf.id, { limit, offset })).map((v) => v.version);
    expect(await page(2, 0)).toEqual([1, 2]);
    expect(await page(2, 2)).toEqual([3, 4]);
    expect(await page(2, 4)).toEqual([5]);
    expect(await page(2, 5)).toEqual([]);
    expect(await store.workflows.listVersions(other, wf.id, { limit: 2 })).toEqual([]);
    for (const opts of [{ limit: 0 }, { limit: 1001 }, { limit: 1.5 }, { offset: -1 }]) {
      await expect(store.workflows.listVersions(tenant, wf.id, opts)).rejects.toMatchObject({ code: "BATON_STORE_INVALID_INPUT", status: 400 });
    }
  });

  it("reads one version by its row id, only within its workflow and tenant", async () => {
    const wf = await store.workflows.create(tenant, { name: "By row", definition: graph("v1") });
    await store.workflows.update(tenant, wf.id, { definition: graph("v2"), changeDescription: "second" });
    const [, v2] = await store.workflows.listVersions(tenant, wf.id);
    expect(await store.workflows.getVersionByRowId(tenant, wf.id, v2!.id)).toEqual(v2);
    const sibling = await store.workflows.create(tenant, { name: "By row sibling", definition: graph("s") });
    expect(await store.workflows.getVersionByRowId(tenant, sibling.id, v2!.id)).toBeNull();
    expect(await store.workflows.getVersionByRowId(other, wf.id, v2!.id)).toBeNull();
    for (const [id, versionId] of [[wf.id, 0], [wf.id, -1], [0, v2!.id], [wf.id, 2 ** 31]] as const) {
      expect(await store.workflows.getVersionByRowId(tenant, id, versionId)).toBeNull();
    }
  });

  it("gives concurrent updates distinct, consecutive versions", async () => {
    const wf = await store.workflows.create(tenant, { name: "Busy", definition: graph("0") });
    const updates = await Promise.all(Array.from({ length: 6 }, (_, i) => store.workflows.update(tenant, wf.id, { definition: graph(String(i + 1)) })));
    expect(updates.map((u) => u.version).sort((a, b) => a - b)).toEqual([2, 3, 4, 5, 6, 7]);
    expect((await store.workflows.listVersions(tenant, wf.id)).map((v) => v.version)).toEqual([1, 2, 3, 4, 5, 6, 7]);
  });

  it("refuses a slug taken by another workflow, and missing workflows, without bumping", async () => {
    const a = await store.workflows.create(tenant, { name: "Slug A", definition: graph("a") });
    await store.workflows.create(tenant, { name: "Slug B", definition: graph("b") });
    await expect(store.workflows.update(tenant, a.id, { slug: "slug-b" })).rejects.toMatchObject({ code: "BATON_STORE_SLUG_TAKEN" });
    expect((await store.workflows.get(tenant, a.id))!.version).toBe(1);
    expect(await store.workflows.listVersions(tenant, a.id)).toHaveLength(1);
    await expect(store.workflows.update(tenant, 987654, { name: "x" })).rejects.toMatchObject({ code: "BATON_STORE_NOT_FOUND", status: 404 });
    await expect(store.workflows.update(tenant, -1, { name: "x" })).rejects.toMatchObject({ code: "BATON_STORE_NOT_FOUND" });
    await expect(store.workflows.restoreVersion(tenant, 987654, 1)).rejects.toMatchObject({ code: "BATON_STORE_NOT_FOUND" });
  });
});

describe("workflows.list and delete", () => {
  it("lists newest first with limit and offset, and deletes with the version history", async () => {
    const t2 = (await store.tenants.create("Lister")).id;
    const made = [];
    for (let i = 0; i < 5; i++) made.push(await store.workflows.create(t2, { name: `wf ${i}`, definition: graph(String(i)) }));
    expect((await store.workflows.list(t2)).map((w) => w.name)).toEqual(["wf 4", "wf 3", "wf 2", "wf 1", "wf 0"]);
    expect((await store.workflows.list(t2, { limit: 2, offset: 1 })).map((w) => w.name)).toEqual(["wf 3", "wf 2"]);
    await expect(store.workflows.list(t2, { limit: 0 })).rejects.toMatchObject({ code: "BATON_STORE_INVALID_INPUT" });

    const gone = made[0]!;
    expect(await store.workflows.delete(t2, gone.id)).toBe(true);
    expect(await store.workflows.delete(t2, gone.id)).toBe(false);
    expect(await store.workflows.get(t2, gone.id)).toBeNull();
    expect(await store.prisma.agentWorkflowVersion.count({ where: { agentWorkflowId: gone.id } })).toBe(0);
    expect(await store.workflows.get(t2, 2 ** 40)).toBeNull();
  });
});

describe("MCP server definitions", () => {
  it("creates one definition per workflow and regenerates it in place", async () => {
    const wf = await store.workflows.create(tenant, { name: "Exported", definition: graph("x"), mcpExport: true });
    const first = await store.mcpServers.upsert(tenant, wf.id, { name: "Exported tools", toolDefinitions: [{ name: "run" }] });
    expect(first).toMatchObject({ agentWorkflowId: wf.id, slug: "exported-tools", status: "active", toolDefinitions: [{ name: "run" }] });
    await store.mcpServers.setStatus(tenant, first.id, "disabled");
    const again = await store.mcpServers.upsert(tenant, wf.id, { name: "Exported tools", toolDefinitions: [{ name: "run" }, { name: "status" }] });
    expect(again).toMatchObject({ id: first.id, status: "disabled", toolDefinitions: [{ name: "run" }, { name: "status" }] });
    expect(again.lastGeneratedAt.getTime()).toBeGreaterThanOrEqual(first.lastGeneratedAt.getTime());
    expect(await store.mcpServers.getBySlug(tenant, "exported-tools")).toEqual(again);
    expect(await store.mcpServers.getByWorkflow(tenant, wf.id)).toEqual(again);
    expect(await store.mcpServers.get(tenant, first.id)).toEqual(again);
    expect((await store.mcpServers.list(tenant)).map((m) => m.id)).toContain(first.id);

    const other = await store.workflows.create(tenant, { name: "Exported 2", definition: graph("y") });
    await expect(store.mcpServers.upsert(tenant, other.id, { name: "x", slug: "exported-tools", toolDefinitions: [] })).rejects.toMatchObject({
      code: "BATON_STORE_SLUG_TAKEN",
    });
    await expect(store.mcpServers.upsert(tenant, 999999, { name: "x", toolDefinitions: [] })).rejects.toMatchObject({ code: "BATON_STORE_NOT_FOUND" });

    await store.workflows.delete(tenant, wf.id);
    expect(await store.mcpServers.get(tenant, first.id)).toBeNull();
  });
});
