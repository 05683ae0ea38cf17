/**
 * Rules of executions, the node journal and reviews:
 * - an execution starts `queued` with the given input and version; update changes only
 *   the given columns (`null` clears), rejects unknown statuses, and is 404 for missing ids;
 * - list filters by workflow and status, newest first; a sub-execution's parent must be
 *   the same tenant's;
 * - journal writes are idempotent upserts on (executionId, nodeId, attempt): a
 *   redelivered write updates the same row, later writes keep fields they do not carry,
 *   a new attempt is a new row; concurrent first writes make one row; rows list in
 *   startedAt, id order;
 * - a pause creates one pending review however often it is delivered (`created` tells);
 *   resolve answers the latest pending review once (a second resolve gets null);
 * - the reviews a run waits on are its own pending ones and those of its paused sub-runs, at
 *   any depth through paused sub-runs only, newest first, and only for the run's tenant;
 * - the reviews of a run are its own and those of all its sub-runs at any depth, whatever
 *   their status, newest first, filtered by status, paged, and only for the run's tenant;
 * - deleting an execution (or its workflow) deletes its journal and reviews.
 */
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { openTestStore, type TestStore } from "./testing.ts";
import type { Store, WorkflowRecord } from "./types.ts";

let t: TestStore;
let store: Store;
let tenant: string;
let wf: WorkflowRecord;

beforeAll(async () => {
  t = await openTestStore({ prefix: "executions" });
  store = t.store;
  tenant = (await store.tenants.create("A")).id;
  wf = await store.workflows.create(tenant, { name: "Flow", definition: { nodes: [] } });
});
afterAll(() => t?.dispose());

const newExecution = (input = {}) => store.executions.create(tenant, { workflowId: wf.id, workflowVersion: 1, input });

describe("executions", () => {
  it("creates a queued execution and updates only the given columns", async () => {
    const ex = await store.executions.create(tenant, { workflowId: wf.id, workflowVersion: 1, input: { q: "hi" }, agentId: 3, sessionId: 4, triggerEvent: "manual" });
    expect(ex).toMatchObject({
      tenantId: tenant, agentWorkflowId: wf.id, workflowVersion: 1, status: "queued", input: { q: "hi" }, agentId: 3, sessionId: 4,
      triggerEvent: "manual", currentState: null, context: {}, checkpoint: null, output: null, tokenUsage: {}, error: null, startedAt: null,
    });
    const started = new Date();
    const running = await store.executions.update(ex.id, { status: "running", currentState: "plan", startedAt: started, context: { a: 1 } });
    expect(running).toMatchObject({ status: "running", currentState: "plan", startedAt: started, context: { a: 1 }, input: { q: "hi" } });
    const done = await store.executions.update(ex.id, { status: "completed", output: { answer: 42 }, tokenUsage: { total: 9 }, completedAt: new Date(), checkpoint: { v: 1 } });
    expect(done).toMatchObject({ status: "completed", currentState: "plan", output: { answer: 42 }, tokenUsage: { total: 9 }, checkpoint: { v: 1 } });
    const cleared = await store.executions.update(ex.id, { checkpoint: null, output: null });
    expect(cleared).toMatchObject({ checkpoint: null, output: null, status: "completed" });
    expect(await store.executions.getById(ex.id)).toEqual(cleared);
    expect(await store.executions.get(tenant, ex.id)).toEqual(cleared);
  });

  it("refuses bad updates and missing executions", async () => {
    const ex = await newExecution();
    await expect(store.executions.update(ex.id, { status: "done" as never })).rejects.toMatchObject({ code: "BATON_STORE_INVALID_INPUT", status: 400 });
    await expect(store.executions.update(ex.id, { context: [] as never })).rejects.toMatchObject({ code: "BATON_STORE_INVALID_INPUT" });
    await expect(store.executions.update(ex.id, { startedAt: new Date("nope") })).rejects.toMatchObject({ code: "BATON_STORE_INVALID_INPUT" });
    await expect(store.executions.update(999999, { status: "running" })).rejects.toMatchObject({ code: "BATON_STORE_NOT_FOUND", status: 404 });
    await expect(store.executions.create(tenant, { workflowId: 999999, workflowVersion: 1, input: {} })).rejects.toMatchObject({ code: "BATON_STORE_NOT_FOUND" });
    await expect(store.executions.create(tenant, { workflowId: wf.id, workflowVersion: 0, input: {} })).rejects.toMatchObject({ code: "BATON_STORE_INVALID_INPUT" });
    await expect(store.executions.create(tenant, { workflowId: wf.id, workflowVersion: 1, input: "x" as never })).rejects.toMatchObject({ code: "BATON_STORE_INVALID_INPUT" });
  });

  it("lists by workflow and status, newest first", async () => {
    const other = await store.workflows.create(tenant, { name: "Other flow", definition: {} });
    const a = await newExecution();
    const b = await store.executions.create(tenant, { workflowId: other.id, workflowVersion: 1, input: {} });
    const c = await newExecution();
    await store.executions.update(c.id, { status: "failed", error: "boom" });
    const mine = await store.executions.list(tenant, { workflowId: wf.id });
    expect(mine.map((e) => e.id).slice(0, 2)).toEqual([c.id, a.id]);
    expect(mine.some((e) => e.id === b.id)).toBe(false);
    expect((await store.executions.list(tenant, { status: "failed" })).map((e) => e.id)).toEqual([c.id]);
    expect((await store.executions.list(tenant, { limit: 1 })).map((e) => e.id)).toEqual([c.id]);
    await expect(store.executions.list(tenant, { status: "weird" as never })).rejects.toMatchObject({ code: "BATON_STORE_INVALID_INPUT" });
  });

  it("links sub-executions to a parent of the same tenant only", async () => {
    const parent = await newExecution();
    const child = await store.executions.create(tenant, { workflowId: wf.id, workflowVersion: 1, input: {}, parentExecutionId: parent.id });
    expect(child.parentExecutionId).toBe(parent.id);
    const stranger = (await store.tenants.create("Stranger")).id;
    const theirs = await store.workflows.create(stranger, { name: "Theirs", definition: {} });
    await expect(
      store.executions.create(stranger, { workflowId: theirs.id, workflowVersion: 1, input: {}, parentExecutionId: parent.id }),
    ).rejects.toMatchObject({ code: "BATON_STORE_NOT_FOUND" });
    // Deleting the parent keeps the child, unlinked.
    expect(await store.executions.delete(tenant, parent.id)).toBe(true);
    expect((await store.executions.get(tenant, child.id))!.parentExecutionId).toBeNull();
  });
});

describe("node journal", () => {
  it("upserts one row per attempt and keeps fields a later write does not carry", async () => {
    const ex = await newExecution();
    const startedAt = new Date(Date.now() - 1000);
    const first = await store.nodeExecutions.record({ tenantId: tenant, executionId: ex.id, nodeId: "plan", nodeType: "agent.llm", attempt: 1, status: "running", input: { prompt: "p" }, startedAt });
    const again = await store.nodeExecutions.record({ tenantId: tenant, executionId: ex.id, nodeId: "plan", nodeType: "agent.llm", attempt: 1, status: "running", input: { prompt: "p" }, startedAt });
    expect(again.id).toBe(first.id);
    const done = await store.nodeExecutions.record({
      tenantId: tenant, executionId: ex.id, nodeId: "plan", nodeType: "agent.llm", attempt: 1, status: "completed",
      output: { text: "ok" }, tokenUsage: { total: 5 }, durationMs: 120, completedAt: new Date(),
    });
    expect(done).toMatchObject({ id: first.id, status: "completed", input: { prompt: "p" }, output: { text: "ok" }, tokenUsage: { total: 5 }, durationMs: 120, startedAt });
    // Redelivered completion: same row, same content.
    const redelivered = await store.nodeExecutions.record({ tenantId: tenant, executionId: ex.id, nodeId: "plan", nodeType: "agent.llm", attempt: 1, status: "completed", output: { text: "ok" } });
    expect(redelivered).toMatchObject({ id: first.id, output: { text: "ok" }, durationMs: 120 });

    const retry = await store.nodeExecutions.record({ tenantId: tenant, executionId: ex.id, nodeId: "plan", nodeType: "agent.llm", attempt: 2, status: "failed", error: "timeout", toolCalls: [{ tool: "x" }] });
    expect(retry.id).not.toBe(first.id);
    const rows = await store.nodeExecutions.list(tenant, ex.id);
    expect(rows.map((r) => [r.nodeId, r.attempt, r.status])).toEqual([
      ["plan", 1, "completed"],
      ["plan", 2, "failed"],
    ]);
    expect(await store.nodeExecutions.listById(ex.id)).toEqual(rows);
  });

  it("makes one row when first writes of an attempt race", async () => {
    const ex = await newExecution();
    const writes = await Promise.all(
      Array.from({ length: 8 }, () => store.nodeExecutions.record({ tenantId: tenant, executionId: ex.id, nodeId: "tool", nodeType: "agent.toolExecutor", attempt: 1, status: "running" })),
    );
    expect(new Set(writes.map((w) => w.id)).size).toBe(1);
    expect(await store.nodeExecutions.list(tenant, ex.id)).toHaveLength(1);
  });

  it("orders rows by startedAt, then id", async () => {
    const ex = await newExecution();
    const base = Date.now();
    await store.nodeExecutions.record({ tenantId: tenant, executionId: ex.id, nodeId: "b", nodeType: "t", attempt: 1, status: "completed", startedAt: new Date(base + 2000) });
    await store.nodeExecutions.record({ tenantId: tenant, executionId: ex.id, nodeId: "a", nodeType: "t", attempt: 1, status: "completed", startedAt: new Date(base + 1000) });
    await store.nodeExecutions.record({ tenantId: tenant, executionId: ex.id, nodeId: "c", nodeType: "t", attempt: 1, status: "completed", startedAt: new Date(base + 1000) });
    expect((await store.nodeExecutions.list(tenant, ex.id)).map((r) => r.nodeId)).toEqual(["a", "c", "b"]);
  });

  it("refuses entries for missing executions and bad values", async () => {
    const ex = await newExecution();
    await expect(store.nodeExecutions.record({ tenantId: tenant, executionId: 999999, nodeId: "a", nodeType: "t", attempt: 1, status: "running" })).rejects.toMatchObject({ code: "BATON_STORE_NOT_FOUND" });
    await expect(store.nodeExecutions.record({ tenantId: tenant, executionId: ex.id, nodeId: "", nodeType: "t", attempt: 1, status: "running" })).rejects.toMatchObject({ code: "BATON_STORE_INVALID_INPUT" });
    await expect(store.nodeExecutions.record({ tenantId: tenant, executionId: ex.id, nodeId: "a", nodeType: "t", attempt: 0, status: "running" })).rejects.toMatchObject({ code: "BATON_STORE_INVALID_INPUT" });
  });
});

describe("reviews", () => {
  it("creates one pending review per pause however often the pause is delivered", async () => {
    const ex = await newExecution();
    const entry = { tenantId: tenant, executionId: ex.id, nodeId: "approve", pauseSeq: 1, reason: "check the draft", payload: { draft: "d" } };
    const first = await store.reviews.createPending(entry);
    expect(first.created).toBe(true);
    expect(first.review).toMatchObject({ status: "pending", reason: "check the draft", payload: { draft: "d" }, decision: null, resolvedAt: null });
    const again = await store.reviews.createPending({ ...entry, reason: "redelivered" });
    expect(again).toEqual({ review: first.review, created: false });
    const racing = await Promise.all(Array.from({ length: 5 }, () => store.reviews.createPending({ ...entry, pauseSeq: 2 })));
    expect(racing.filter((r) => r.created)).toHaveLength(1);
    expect(new Set(racing.map((r) => r.review.id)).size).toBe(1);
    expect(await store.reviews.list(tenant, { executionId: ex.id })).toHaveLength(2);
  });

  it("resolves the latest pending review once", async () => {
    const ex = await newExecution();
    await store.reviews.createPending({ tenantId: tenant, executionId: ex.id, nodeId: "approve", pauseSeq: 1, reason: "r", payload: {} });
    const resolved = await store.reviews.resolve(tenant, ex.id, "approve", { status: "edited", decision: { draft: "better" }, reviewer: "ana" });
    expect(resolved).toMatchObject({ pauseSeq: 1, status: "edited", decision: { draft: "better" }, reviewer: "ana" });
    expect(resolved!.resolvedAt).toBeInstanceOf(Date);
    expect(await store.reviews.resolve(tenant, ex.id, "approve", { status: "approved", decision: null })).toBeNull();

    await store.reviews.createPending({ tenantId: tenant, executionId: ex.id, nodeId: "approve", pauseSeq: 2, reason: "again", payload: {} });
    const racing = await Promise.all([
      store.reviews.resolve(tenant, ex.id, "approve", { status: "approved", decision: true }),
      store.reviews.resolve(tenant, ex.id, "approve", { status: "rejected", decision: "no" }),
    ]);
    expect(racing.filter((r) => r !== null)).toHaveLength(1);
    expect(await store.reviews.list(tenant, { executionId: ex.id, status: "pending" })).toEqual([]);
    await expect(store.reviews.resolve(tenant, ex.id, "approve", { status: "pending" as never, decision: 1 })).rejects.toMatchObject({ code: "BATON_STORE_INVALID_INPUT" });
  });

  it("lists the pending reviews a run waits on: its own and its paused sub-runs', at any depth, newest first", async () => {
    const parent = await newExecution();
    const child = async (of: number, key: string, status: "paused" | "running") => {
      const { row } = await store.executions.createChild({ tenantId: tenant, parentExecutionId: of, parentNodeId: "sub", childKey: key, agentWorkflowId: wf.id, workflowVersion: 1, input: {} });
      await store.executions.update(row.id, { status });
      return row;
    };
    const pending = (executionId: number, nodeId: string) => store.reviews.createPending({ tenantId: tenant, executionId, nodeId, pauseSeq: 1, reason: nodeId, payload: {} }).then((r) => r.review);
    const c1 = await child(parent.id, "1", "paused");
    const c2 = await child(parent.id, "2", "running");
    const g1 = await child(c1.id, "1", "paused");
    const own = await pending(parent.id, "own");
    const inChild = await pending(c1.id, "r1");
    const inGrandchild = await pending(g1.id, "r2");
    // A review of a sub-run that runs (not paused) is not one the run waits on, nor anything below it.
    await pending(c2.id, "stale");
    await child(c2.id, "1", "paused").then((g) => pending(g.id, "below-running"));
    const decided = await pending(c1.id, "done");
    await store.reviews.resolve(tenant, c1.id, "done", { status: "approved", decision: null });

    const found = await store.reviews.pendingInRun(tenant, parent.id);
    expect(found.map((r) => [r.executionId, r.nodeId])).toEqual([[g1.id, "r2"], [c1.id, "r1"], [parent.id, "own"]]);
    expect(found.map((r) => r.id)).toEqual([inGrandchild.id, inChild.id, own.id]);
    expect(found.some((r) => r.id === decided.id)).toBe(false);
    expect((await store.reviews.pendingInRun(tenant, c1.id)).map((r) => r.nodeId)).toEqual(["r2", "r1"]);
    expect(await store.reviews.pendingInRun(tenant, parent.id, { limit: 1 })).toHaveLength(1);
    const other = (await store.tenants.create("Other")).id;
    expect(await store.reviews.pendingInRun(other, parent.id)).toEqual([]);
  });

  it("lists the reviews of a run and of all its sub-runs, at any depth, newest first, by status and page", async () => {
    const parent = await newExecution();
    const child = async (of: number, key: string, status: "paused" | "running" | "completed") => {
      const { row } = await store.executions.createChild({ tenantId: tenant, parentExecutionId: of, parentNodeId: "sub", childKey: key, agentWorkflowId: wf.id, workflowVersion: 1, input: {} });
      await store.executions.update(row.id, { status });
      return row;
    };
    const pending = (executionId: number, nodeId: string) => store.reviews.createPending({ tenantId: tenant, executionId, nodeId, pauseSeq: 1, reason: nodeId, payload: {} }).then((r) => r.review);
    const c1 = await child(parent.id, "1", "paused");
    const c2 = await child(parent.id, "2", "completed");
    const g1 = await child(c2.id, "1", "completed");
    const gg = await child(c1.id, "1", "running");
    const own = await pending(parent.id, "own");
    const inChild = await pending(c1.id, "r1");
    const decided = await pending(g1.id, "done");
    await store.reviews.resolve(tenant, g1.id, "done", { status: "approved", decision: null });
    const deep = await pending(gg.id, "deep");
    // Not of this run: another run's.
    await pending((await newExecution()).id, "other");

    const ids = async (executionId: number, opts: Parameters<typeof store.reviews.listInRun>[2] = {}) =>
      (await store.reviews.listInRun(tenant, executionId, opts)).map((r) => [r.id, r.executionId, r.status]);
    expect(await ids(parent.id)).toEqual([[deep.id, gg.id, "pending"], [decided.id, g1.id, "approved"], [inChild.id, c1.id, "pending"], [own.id, parent.id, "pending"]]);
    expect(await ids(parent.id, { status: "pending" })).toEqual([[deep.id, gg.id, "pending"], [inChild.id, c1.id, "pending"], [own.id, parent.id, "pending"]]);
    expect(await ids(parent.id, { status: "approved" })).toEqual([[decided.id, g1.id, "approved"]]);
    expect(await ids(c1.id)).toEqual([[deep.id, gg.id, "pending"], [inChild.id, c1.id, "pending"]]);
    // Paged: the pages, one after the other, are the whole list once.
    const pages = [...await ids(parent.id, { limit: 3, offset: 0 }), ...await ids(parent.id, { limit: 3, offset: 3 })];
    expect(pages).toEqual(await ids(parent.id));
    expect(await ids(parent.id, { limit: 3, offset: 3 })).toHaveLength(1);
    const other = (await store.tenants.create("Other of listInRun")).id;
    expect(await store.reviews.listInRun(other, parent.id)).toEqual([]);
    expect(await store.reviews.listInRun(tenant, 999999)).toEqual([]);
    await expect(store.reviews.listInRun(tenant, parent.id, { status: "done" as never })).rejects.toMatchObject({ code: "BATON_STORE_INVALID_INPUT" });
  });

  it("is tied to an existing execution of the tenant", async () => {
    await expect(store.reviews.createPending({ tenantId: tenant, executionId: 999999, nodeId: "n", pauseSeq: 1, reason: "", payload: {} })).rejects.toMatchObject({
      code: "BATON_STORE_NOT_FOUND",
    });
  });
});

describe("cascades", () => {
  it("deleting an execution removes its journal and reviews; deleting a workflow removes its executions", async () => {
    const flow = await store.workflows.create(tenant, { name: "Cascade", definition: {} });
    const ex = await store.executions.create(tenant, { workflowId: flow.id, workflowVersion: 1, input: {} });
    await store.nodeExecutions.record({ tenantId: tenant, executionId: ex.id, nodeId: "a", nodeType: "t", attempt: 1, status: "running" });
    await store.reviews.createPending({ tenantId: tenant, executionId: ex.id, nodeId: "a", pauseSeq: 1, reason: "", payload: {} });
    const ex2 = await store.executions.create(tenant, { workflowId: flow.id, workflowVersion: 1, input: {} });

    expect(await store.executions.delete(tenant, ex.id)).toBe(true);
    expect(await store.prisma.agentWorkflowNodeExecution.count({ where: { executionId: ex.id } })).toBe(0);
    expect(await store.prisma.review.count({ where: { executionId: ex.id } })).toBe(0);

    // Not while one of its runs is still active: that run would lose its records and never end.
    await expect(store.workflows.delete(tenant, flow.id)).rejects.toMatchObject({ code: "BATON_STORE_WORKFLOW_ACTIVE", status: 409 });
    expect(await store.executions.get(tenant, ex2.id)).not.toBeNull();
    for (const status of ["running", "paused"] as const) {
      await store.executions.update(ex2.id, { status });
      await expect(store.workflows.delete(tenant, flow.id)).rejects.toMatchObject({ code: "BATON_STORE_WORKFLOW_ACTIVE" });
    }
    await store.executions.update(ex2.id, { status: "completed" });
    expect(await store.workflows.delete(tenant, flow.id)).toBe(true);
    expect(await store.executions.get(tenant, ex2.id)).toBeNull();
  });
});
