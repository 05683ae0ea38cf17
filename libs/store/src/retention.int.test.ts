/**
 * Rules of execution retention (`executions.pruneFinished`, docs/adr/008-blob-retention.md,
 * "Execution retention"), against real Postgres:
 * - a finished run (completed, failed, cancelled) whose `completedAt` is before the cutoff is
 *   deleted; a newer one, an active one (whatever its `completedAt`) and a finished one without
 *   `completedAt` are kept;
 * - a run goes whole or not at all: a finished parent with a child (or grandchild) that is
 *   active or finished since the cutoff is kept with its tree; a child is never deleted on its
 *   own, so an old finished child of an active parent stays;
 * - a finished tree is deleted with its journal rows, reviews and blob uses; the blobs stay,
 *   marked used now (their grace period counts from the deletion); a fork of a deleted run stays
 *   without its source;
 * - at most `limit` executions per call, oldest run first; a run cut by the limit loses its
 *   deepest executions first and keeps its top, still a tree, for the next call;
 * - tenants are independent: one tenant's active runs hold back nothing of another's;
 * - one process prunes at a time (a transaction-scoped advisory lock); bad arguments are refused.
 */
import { createHash } from "node:crypto";
import { afterAll, beforeEach, describe, expect, it } from "@jest/globals";
import type pg from "pg";
import { createStore } from "./store.ts";
import { openTwoTenantStore } from "./testing.ts";
import type { ExecutionRecord, ExecutionStatus } from "./types.ts";

// Opened while the module loads (top-level await): two tenants with a workflow each.
const { t, store, db, tenant, other, wf, theirWf } = await openTwoTenantStore("retention");
afterAll(() => t.dispose());

// Each test starts with no executions and no blobs, so the counts are its own.
beforeEach(async () => {
  await store.prisma.agentWorkflowExecution.deleteMany({});
  await store.prisma.blob.deleteMany({});
});

const DAY = 86_400_000;
const cutoff = new Date("2024-06-01T00:00:00Z");
const old = (days = 1) => new Date(cutoff.getTime() - days * DAY);
const recent = new Date(cutoff.getTime() + DAY);

let keySeq = 0;
/** An execution in `status`, finished at `completedAt` (unless null), a child of `parent` when given. */
async function run(status: ExecutionStatus, completedAt: Date | null, opts: { parent?: ExecutionRecord; tenantId?: string } = {}): Promise<ExecutionRecord> {
  const tenantId = opts.parent?.tenantId ?? opts.tenantId ?? tenant;
  const ex = await store.executions.create(tenantId, {
    workflowId: tenantId === tenant ? wf.id : theirWf.id, workflowVersion: 1, input: {},
    ...(opts.parent ? { parentExecutionId: opts.parent.id, parentNodeId: "sub", childKey: `k${++keySeq}` } : {}),
  });
  return store.executions.update(ex.id, { status, completedAt });
}
const exists = async (...ids: number[]): Promise<boolean[]> => {
  const rows = await store.prisma.agentWorkflowExecution.findMany({ where: { id: { in: ids } }, select: { id: true } });
  const found = new Set(rows.map((r) => r.id));
  return ids.map((id) => found.has(id));
};
const count = () => store.prisma.agentWorkflowExecution.count();

describe("pruneFinished", () => {
  it("deletes finished runs completed before the cutoff, and keeps newer, active and undated ones", async () => {
    const done = await run("completed", old(3));
    const failed = await run("failed", old(2));
    const cancelled = await run("cancelled", old(1));
    const newer = await run("completed", recent);
    const active = await Promise.all((["queued", "running", "paused"] as const).map((s) => run(s, old(5))));
    const undated = await run("completed", null);
    expect(await store.executions.pruneFinished({ olderThan: cutoff, limit: 100 })).toEqual({ ran: true, deleted: 3, runs: 3 });
    expect(await exists(done.id, failed.id, cancelled.id)).toEqual([false, false, false]);
    expect(await exists(newer.id, undated.id, ...active.map((a) => a.id))).toEqual([true, true, true, true, true]);
    expect(await store.executions.pruneFinished({ olderThan: cutoff, limit: 100 })).toEqual({ ran: true, deleted: 0, runs: 0 });
  });

  it("keeps a whole tree while any execution in it is active or finished since the cutoff; never a child alone", async () => {
    const p1 = await run("completed", old());
    const activeChild = await run("running", null, { parent: p1 });
    const p2 = await run("failed", old());
    const newerChild = await run("completed", recent, { parent: p2 });
    const p3 = await run("cancelled", old());
    const mid = await run("cancelled", old(), { parent: p3 });
    const grandchild = await run("paused", null, { parent: mid });
    const activeParent = await run("running", null);
    const oldChild = await run("completed", old(9), { parent: activeParent });
    const newerParent = await run("completed", recent);
    const oldChildOfNewer = await run("completed", old(9), { parent: newerParent });
    expect(await store.executions.pruneFinished({ olderThan: cutoff, limit: 100 })).toEqual({ ran: true, deleted: 0, runs: 0 });
    const all = [p1, activeChild, p2, newerChild, p3, mid, grandchild, activeParent, oldChild, newerParent, oldChildOfNewer];
    expect(await exists(...all.map((e) => e.id))).toEqual(all.map(() => true));

    // Once the grandchild finishes before the cutoff, the third tree goes whole; the others stay.
    await store.executions.update(grandchild.id, { status: "cancelled", completedAt: old() });
    expect(await store.executions.pruneFinished({ olderThan: cutoff, limit: 100 })).toEqual({ ran: true, deleted: 3, runs: 1 });
    expect(await exists(p3.id, mid.id, grandchild.id)).toEqual([false, false, false]);
    expect(await count()).toBe(all.length - 3);
    expect((await store.executions.getById(oldChild.id))?.parentExecutionId).toBe(activeParent.id);
  });

  it("deletes a finished tree with its journal, reviews and blob uses; keeps its blobs (touched) and its forks", async () => {
    const root = await run("completed", old(2));
    const child = await run("completed", old(3), { parent: root });
    const keep = await run("completed", recent);
    for (const ex of [root, child, keep]) {
      await store.nodeExecutions.record({ tenantId: tenant, executionId: ex.id, nodeId: "a", nodeType: "task", attempt: 1, status: "completed", output: { ok: ex.id } });
      await store.reviews.createPending({ tenantId: tenant, executionId: ex.id, nodeId: "a", pauseSeq: 1, reason: "check", payload: {} });
    }
    const mine = await store.blobs.put(tenant, child.id, { big: "only the tree's" });
    const shared = await store.blobs.put(tenant, root.id, { big: "shared" });
    await store.blobs.put(tenant, keep.id, { big: "shared" });
    await store.prisma.blob.updateMany({ data: { usedAt: new Date("2020-01-01T00:00:00Z") } });
    const fork = await store.executions.create(tenant, { workflowId: wf.id, workflowVersion: 1, input: {}, forkedFromExecutionId: root.id, forkedFromVersion: 2 });

    const before = Date.now();
    expect(await store.executions.pruneFinished({ olderThan: cutoff, limit: 100 })).toEqual({ ran: true, deleted: 2, runs: 1 });
    expect(await exists(root.id, child.id, keep.id, fork.id)).toEqual([false, false, true, true]);
    const gone = [root.id, child.id];
    expect(await store.prisma.agentWorkflowNodeExecution.count({ where: { executionId: { in: gone } } })).toBe(0);
    expect(await store.prisma.review.count({ where: { executionId: { in: gone } } })).toBe(0);
    expect(await store.prisma.blobUse.count({ where: { executionId: { in: gone } } })).toBe(0);
    expect(await store.nodeExecutions.list(tenant, keep.id)).toHaveLength(1);
    expect(await store.reviews.list(tenant, { executionId: keep.id })).toHaveLength(1);
    expect(await store.prisma.blobUse.count({ where: { executionId: keep.id } })).toBe(1);
    expect((await store.executions.getById(fork.id))?.forkedFromExecutionId).toBeNull();
    // The blobs stay, marked used by the deletion: the blob pruner deletes the unused one a
    // grace period later, not now.
    for (const b of [mine, shared]) expect((await store.blobs.get(tenant, b.hash))!.usedAt.getTime()).toBeGreaterThanOrEqual(before - 1000);
    expect(await store.blobs.prune({ olderThan: new Date(before - 60_000), limit: 100 })).toEqual({ ran: true, deleted: 0, inUse: 0 });
    expect(await store.blobs.prune({ olderThan: new Date(Date.now() + 60_000), limit: 100 })).toEqual({ ran: true, deleted: 1, inUse: 1 });
    expect(await store.blobs.get(tenant, mine.hash)).toBeNull();
    expect(await store.blobs.get(tenant, shared.hash)).not.toBeNull();
  });

  it("deletes at most limit executions, oldest run first; a run cut short keeps its top for the next call", async () => {
    const roots = [];
    for (let i = 5; i >= 1; i--) roots.push(await run("completed", old(i)));
    expect(await store.executions.pruneFinished({ olderThan: cutoff, limit: 2 })).toEqual({ ran: true, deleted: 2, runs: 2 });
    expect(await exists(...roots.map((r) => r.id))).toEqual([false, false, true, true, true]);

    // The oldest run now: a root, two children and a grandchild; a limit of 2 takes the deepest first
    // (the grandchild, then the first child).
    const root = await run("failed", old(30));
    const c1 = await run("completed", old(31), { parent: root });
    const c2 = await run("failed", old(31), { parent: root });
    const g = await run("completed", old(32), { parent: c1 });
    expect(await store.executions.pruneFinished({ olderThan: cutoff, limit: 2 })).toEqual({ ran: true, deleted: 2, runs: 0 });
    expect(await exists(root.id, c1.id, c2.id, g.id)).toEqual([true, false, true, false]);
    expect((await store.executions.getById(c2.id))?.parentExecutionId).toBe(root.id);
    expect(await store.executions.pruneFinished({ olderThan: cutoff, limit: 2 })).toEqual({ ran: true, deleted: 2, runs: 1 });
    expect(await exists(root.id, c2.id)).toEqual([false, false]);
    expect(await store.executions.pruneFinished({ olderThan: cutoff, limit: 2 })).toEqual({ ran: true, deleted: 2, runs: 2 });
    expect(await store.executions.pruneFinished({ olderThan: cutoff, limit: 2 })).toEqual({ ran: true, deleted: 1, runs: 1 });
    expect(await count()).toBe(0);
  });

  it("treats tenants independently", async () => {
    const mineOld = await run("completed", old());
    const mineNew = await run("completed", recent);
    const theirsOld = await run("failed", old(), { tenantId: other });
    const theirsActive = await run("running", null, { tenantId: other });
    const theirParent = await run("completed", old(), { tenantId: other });
    const theirActiveChild = await run("queued", null, { parent: theirParent });
    expect(await store.executions.pruneFinished({ olderThan: cutoff, limit: 100 })).toEqual({ ran: true, deleted: 2, runs: 2 });
    expect(await exists(mineOld.id, theirsOld.id)).toEqual([false, false]);
    expect(await exists(mineNew.id, theirsActive.id, theirParent.id, theirActiveChild.id)).toEqual([true, true, true, true]);
    expect(await store.executions.list(tenant)).toHaveLength(1);
    expect(await store.executions.list(other)).toHaveLength(3);
  });

  it("does nothing while another process prunes, and refuses bad arguments", async () => {
    const ex = await run("completed", old());
    const second = createStore(t.options);
    try {
      await db.query("BEGIN");
      expect(await heldPruneLock(db)).toBe(true);
      expect(await second.executions.pruneFinished({ olderThan: cutoff, limit: 100 })).toEqual({ ran: false, deleted: 0, runs: 0 });
      await db.query("ROLLBACK");
      expect(await second.executions.pruneFinished({ olderThan: cutoff, limit: 100 })).toEqual({ ran: true, deleted: 1, runs: 1 });
      expect(await exists(ex.id)).toEqual([false]);
    } finally {
      await second.close();
    }
    for (const bad of [{ olderThan: new Date("nope"), limit: 1 }, { olderThan: cutoff, limit: 0 }, { olderThan: cutoff, limit: 10_001 }, { olderThan: cutoff, limit: 1.5 }]) {
      await expect(store.executions.pruneFinished(bad)).rejects.toMatchObject({ code: "BATON_STORE_INVALID_INPUT" });
    }
  });
});

/** Takes the retention pruner's advisory lock in `client`'s transaction (the keys as executions.ts computes them). */
async function heldPruneLock(client: pg.Client): Promise<boolean> {
  const key = (text: string) => createHash("sha256").update(text).digest().readInt32BE(0);
  const { rows } = await client.query<{ ok: boolean }>("SELECT pg_try_advisory_xact_lock($1::int, $2::int) AS ok", [key("baton:execution-prune"), key(`baton:execution-prune:${t.options.schema}`)]);
  return rows[0]!.ok;
}
