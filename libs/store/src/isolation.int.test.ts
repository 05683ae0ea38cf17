/**
 * Rules of tenant isolation: tenant B, using tenant A's ids, never sees, changes or
 * deletes A's workflows, versions, executions, journal rows, reviews, memory, learned
 * sequences, MCP server definitions or API keys — reads give null or nothing, writes give 404 or false — and A's rows are
 * unchanged afterwards. B cannot attach its own rows to A's parents either.
 */
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { openTestStore, type TestStore } from "./testing.ts";
import type { ExecutionRecord, MemoryRecord, Store, WorkflowRecord } from "./types.ts";

let t: TestStore;
let store: Store;
let a: string;
let b: string;
let wf: WorkflowRecord;
let ex: ExecutionRecord;
let mem: MemoryRecord;

beforeAll(async () => {
  t = await openTestStore({ prefix: "isolation" });
  store = t.store;
  a = (await store.tenants.create("A")).id;
  b = (await store.tenants.create("B")).id;
  wf = await store.workflows.create(a, { name: "Secret", definition: { nodes: ["a"] } });
  await store.workflows.update(a, wf.id, { definition: { nodes: ["a", "b"] } });
  wf = (await store.workflows.get(a, wf.id))!;
  ex = await store.executions.create(a, { workflowId: wf.id, workflowVersion: 2, input: { secret: true } });
  await store.nodeExecutions.record({ tenantId: a, executionId: ex.id, nodeId: "n", nodeType: "t", attempt: 1, status: "running", input: { secret: 1 } });
  await store.reviews.createPending({ tenantId: a, executionId: ex.id, nodeId: "n", pauseSeq: 1, reason: "secret", payload: { secret: 1 } });
  mem = await store.memory.create(a, { agentId: 1, key: "secret key", content: "secret content" });
  await store.learning.recordSequence({ tenantId: a, executionId: ex.id, agentId: 1, tools: ["x"], successful: true });
});
afterAll(() => t?.dispose());

describe("tenant B with tenant A's ids", () => {
  it("cannot see A's workflows or their versions", async () => {
    expect(await store.workflows.get(b, wf.id)).toBeNull();
    expect(await store.workflows.list(b)).toEqual([]);
    expect(await store.workflows.listVersions(b, wf.id)).toEqual([]);
    expect(await store.workflows.getVersion(b, wf.id, 1)).toBeNull();
  });

  it("cannot update, restore or delete A's workflows", async () => {
    await expect(store.workflows.update(b, wf.id, { name: "pwned" })).rejects.toMatchObject({ code: "BATON_STORE_NOT_FOUND" });
    const [v1] = await store.workflows.listVersions(a, wf.id);
    await expect(store.workflows.restoreVersion(b, wf.id, v1!.id)).rejects.toMatchObject({ code: "BATON_STORE_NOT_FOUND" });
    expect(await store.workflows.delete(b, wf.id)).toBe(false);
    expect(await store.workflows.get(a, wf.id)).toEqual(wf);
    expect(await store.workflows.listVersions(a, wf.id)).toHaveLength(2);
  });

  it("cannot start executions of A's workflow or hang sub-executions under A's", async () => {
    await expect(store.executions.create(b, { workflowId: wf.id, workflowVersion: 1, input: {} })).rejects.toMatchObject({ code: "BATON_STORE_NOT_FOUND" });
    const own = await store.workflows.create(b, { name: "Own", definition: {} });
    await expect(store.executions.create(b, { workflowId: own.id, workflowVersion: 1, input: {}, parentExecutionId: ex.id })).rejects.toMatchObject({
      code: "BATON_STORE_NOT_FOUND",
    });
  });

  it("cannot see or delete A's executions", async () => {
    expect(await store.executions.get(b, ex.id)).toBeNull();
    expect(await store.executions.list(b)).toEqual([]);
    expect(await store.executions.list(b, { workflowId: wf.id })).toEqual([]);
    expect(await store.executions.delete(b, ex.id)).toBe(false);
    expect(await store.executions.get(a, ex.id)).toMatchObject({ id: ex.id, input: { secret: true } });
  });

  it("cannot read or write A's journal", async () => {
    expect(await store.nodeExecutions.list(b, ex.id)).toEqual([]);
    await expect(store.nodeExecutions.record({ tenantId: b, executionId: ex.id, nodeId: "n", nodeType: "t", attempt: 1, status: "completed", output: "pwned" })).rejects.toMatchObject({
      code: "BATON_STORE_NOT_FOUND",
    });
    await expect(store.nodeExecutions.record({ tenantId: b, executionId: ex.id, nodeId: "new", nodeType: "t", attempt: 1, status: "running" })).rejects.toMatchObject({
      code: "BATON_STORE_NOT_FOUND",
    });
    const rows = await store.nodeExecutions.list(a, ex.id);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ status: "running", output: null });
  });

  it("cannot see, create or resolve A's reviews", async () => {
    expect(await store.reviews.list(b)).toEqual([]);
    expect(await store.reviews.list(b, { executionId: ex.id })).toEqual([]);
    await expect(store.reviews.createPending({ tenantId: b, executionId: ex.id, nodeId: "n", pauseSeq: 1, reason: "", payload: {} })).rejects.toMatchObject({
      code: "BATON_STORE_NOT_FOUND",
    });
    await expect(store.reviews.createPending({ tenantId: b, executionId: ex.id, nodeId: "n", pauseSeq: 2, reason: "", payload: {} })).rejects.toMatchObject({
      code: "BATON_STORE_NOT_FOUND",
    });
    expect(await store.reviews.resolve(b, ex.id, "n", { status: "approved", decision: null })).toBeNull();
    expect(await store.reviews.list(a, { status: "pending" })).toHaveLength(1);
  });

  it("cannot see, search or delete A's memory", async () => {
    expect(await store.memory.list(b)).toEqual([]);
    expect(await store.memory.list(b, { agentId: 1 })).toEqual([]);
    expect(await store.memory.search(b, { query: "secret" })).toEqual([]);
    expect(await store.memory.delete(b, mem.id)).toBeNull();
    expect(await store.memory.list(a)).toEqual([mem]);
  });

  it("cannot see A's learned sequences", async () => {
    expect(await store.learning.list(b)).toEqual([]);
    expect(await store.learning.list(a)).toHaveLength(1);
  });

  it("cannot see, regenerate or disable A's MCP server definitions", async () => {
    const def = await store.mcpServers.upsert(a, wf.id, { name: "Secret tools", toolDefinitions: [{ name: "secret" }] });
    expect(await store.mcpServers.get(b, def.id)).toBeNull();
    expect(await store.mcpServers.getBySlug(b, def.slug)).toBeNull();
    expect(await store.mcpServers.getByWorkflow(b, wf.id)).toBeNull();
    expect(await store.mcpServers.list(b)).toEqual([]);
    await expect(store.mcpServers.upsert(b, wf.id, { name: "pwned", toolDefinitions: [] })).rejects.toMatchObject({ code: "BATON_STORE_NOT_FOUND" });
    expect(await store.mcpServers.setStatus(b, def.id, "disabled")).toBeNull();
    expect(await store.mcpServers.get(a, def.id)).toEqual(def);
  });

  it("cannot see or revoke A's API keys", async () => {
    const key = await store.tenants.createApiKey(a, { role: "admin" });
    expect(await store.tenants.listApiKeys(b)).toEqual([]);
    expect(await store.tenants.revokeApiKey(b, key.id)).toBe(false);
    expect(await store.tenants.resolveApiKey(key.rawKey)).toMatchObject({ tenantId: a });
  });
});
