/**
 * Rules (blob-pruner.ts, real Postgres):
 * - a run prunes in batches until a batch comes back short, at most maxBatches, with the cutoff
 *   `now - grace`: unused blobs older than it go, used ones and newer ones stay;
 * - started, it runs soon (the first run after at most the interval), logs what it deleted, and
 *   runs again an interval after each run; stopped, it runs no more;
 * - a failing run is logged with BATON_EXECUTOR_BLOB_PRUNE_FAILED and never thrown out of the
 *   timer; an interval of 0 never runs;
 * - with a retention, a run first deletes finished runs that ended longer ago than it (whole
 *   trees, in batches), then prunes blobs: the blobs only those runs used go once a grace period
 *   has passed since the deletion, in the same run when the cutoff is that late; it logs what it
 *   deleted; a failing deletion is logged with BATON_EXECUTOR_EXECUTION_PRUNE_FAILED and the
 *   blobs are still pruned; without a retention no execution is deleted;
 * - a blob the learned tool sequence of a run refers to (a large tool input) outlives the run's
 *   retention and any grace period, readable, for as long as the sequence is kept;
 * - with a learned-sequence retention, a run deletes the sequences recorded longer ago than it
 *   (after the executions, before the blobs), and their blobs go a grace period later; a failing
 *   deletion is logged with BATON_EXECUTOR_LEARNED_PRUNE_FAILED and the blobs are still pruned.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "@jest/globals";
import { createStore } from "@baton/store";
import type { Store } from "@baton/store";
import { openTestStore } from "@baton/store/testing";
import type { TestStore } from "@baton/store/testing";
import { createLogger } from "@baton/telemetry";
import { createBlobPruner } from "./blob-pruner.ts";
import type { BlobPrunerOptions } from "./blob-pruner.ts";

let t: TestStore;
let store: Store;
let tenant: string;
let wfId: number;

beforeAll(async () => {
  t = await openTestStore({ prefix: "pruner" });
  store = t.store;
  tenant = (await store.tenants.create("A")).id;
  wfId = (await store.workflows.create(tenant, { name: "Flow", definition: { nodes: [] } })).id;
});
afterAll(() => t?.dispose());
beforeEach(async () => {
  await store.prisma.learnedSequence.deleteMany({});
  await store.prisma.blobUse.deleteMany({});
  await store.prisma.blob.deleteMany({});
});

function capture() {
  const lines: Record<string, unknown>[] = [];
  const logger = createLogger("pruner-test", "debug", { write: (l) => lines.push(JSON.parse(l) as Record<string, unknown>) });
  return { logger, lines };
}

type Line = Record<string, unknown>;

/** Runs a pruner on its timer, logging into the returned lines, until `until` holds for them (at most 2 s), then stops it. */
async function onTimer(opts: Omit<BlobPrunerOptions, "logger">, until: (lines: Line[]) => boolean): Promise<Line[]> {
  const { logger, lines } = capture();
  const pruner = createBlobPruner({ ...opts, logger });
  pruner.start();
  for (let i = 0; i < 100 && !until(lines); i++) await sleep(20);
  await pruner.stop();
  return lines;
}
const logged = (msg: string) => (lines: Line[]): boolean => lines.some((l) => l.msg === msg);

/** `n` blobs put for a new execution; with `unused`, their uses are removed. */
async function blobs(n: number, tag: string, unused: boolean): Promise<string[]> {
  const ex = await store.executions.create(tenant, { workflowId: wfId, workflowVersion: 1, input: {} });
  const hashes: string[] = [];
  for (let i = 0; i < n; i++) hashes.push((await store.blobs.put(tenant, ex.id, { tag, i })).hash);
  if (unused) await store.prisma.blobUse.deleteMany({ where: { executionId: ex.id } });
  // Last used long ago: older than any grace below.
  await store.prisma.blob.updateMany({ where: { hash: { in: hashes } }, data: { usedAt: new Date("2020-01-01T00:00:00Z") } });
  return hashes;
}

describe("blob pruner", () => {
  it("prunes in batches until one comes back short, up to maxBatches, older than now - grace", async () => {
    const gone = await blobs(7, "gone", true);
    const kept = await blobs(2, "kept", false);
    const { logger } = capture();
    const pruner = createBlobPruner({ store, logger, intervalMs: 0, graceMs: 86_400_000, batchSize: 3, maxBatches: 2 });
    const first = await pruner.runOnce();
    expect(first).toMatchObject({ ran: true, batches: 2 });
    expect(first.deleted + first.inUse).toBe(6);
    const second = await pruner.runOnce();
    expect(first.deleted + second.deleted).toBe(7);
    expect(first.inUse + second.inUse).toBe(2);
    expect((await store.blobs.getMany(tenant, [...gone, ...kept])).size).toBe(2);
    // The used ones were touched: a run now looks at nothing; blobs used within the grace neither.
    await store.blobs.put(tenant, (await store.executions.create(tenant, { workflowId: wfId, workflowVersion: 1, input: {} })).id, "fresh");
    await store.prisma.blobUse.deleteMany({});
    expect(await pruner.runOnce()).toEqual({ ran: true, deleted: 0, inUse: 0, batches: 1 });
    expect(await store.prisma.blob.count()).toBe(3);
  });

  it("runs on its timer, logs what it deleted, and stops", async () => {
    await blobs(2, "timer", true);
    const { logger, lines } = capture();
    const pruner = createBlobPruner({ store, logger, intervalMs: 100, graceMs: 86_400_000 });
    pruner.start();
    for (let i = 0; i < 100 && !lines.some((l) => l.msg === "unused blobs pruned"); i++) await sleep(20);
    expect(lines.find((l) => l.msg === "unused blobs pruned")).toMatchObject({ level: "info", deleted: 2 });
    for (let i = 0; i < 100 && lines.filter((l) => l.msg === "no unused blobs to prune").length < 1; i++) await sleep(20);
    await pruner.stop();
    const after = lines.length;
    await blobs(1, "after-stop", true);
    await sleep(300);
    expect(lines.length).toBe(after);
    expect(await store.prisma.blob.count()).toBe(1);
  });

  it("logs a failing run with its code and keeps going; an interval of 0 never runs", async () => {
    const closed = createStore(t.options);
    await closed.close();
    const lines = await onTimer({ store: closed, intervalMs: 50, graceMs: 0 }, (ls) => ls.filter((l) => l.msg?.toString().startsWith("pruning unused blobs failed")).length >= 2);
    const failures = lines.filter((l) => l.level === "warn");
    expect(failures.length).toBeGreaterThanOrEqual(2);
    expect(failures[0]).toMatchObject({ code: "BATON_EXECUTOR_BLOB_PRUNE_FAILED" });

    await blobs(1, "never", true);
    const idle = capture();
    const never = createBlobPruner({ store, logger: idle.logger, intervalMs: 0, graceMs: 0 });
    never.start();
    await sleep(200);
    await never.stop();
    expect(idle.lines).toEqual([]);
    expect(await store.prisma.blob.count()).toBe(1);
  });
});

describe("execution retention", () => {
  const DAY = 86_400_000;
  const retentionMs = 30 * DAY;
  const graceMs = 8 * DAY;
  const ago = (ms: number) => new Date(Date.now() - ms);

  /** A run in `status` that finished at `completedAt` (null: not finished), a child of `parent` when given. */
  async function execution(status: "running" | "completed" | "failed", completedAt: Date | null, parent?: number) {
    const ex = await store.executions.create(tenant, {
      workflowId: wfId, workflowVersion: 1, input: {},
      ...(parent === undefined ? {} : { parentExecutionId: parent, parentNodeId: "sub", childKey: `c${Math.random()}` }),
    });
    return store.executions.update(ex.id, { status, completedAt });
  }
  const stillThere = async (...ids: number[]) => (await store.prisma.agentWorkflowExecution.findMany({ where: { id: { in: ids } } })).map((e) => e.id).sort((a, b) => a - b);

  it("deletes finished runs past the retention first; the blobs only they used go once past the grace", async () => {
    const oldRun = await execution("completed", ago(40 * DAY));
    const oldChild = await execution("failed", ago(41 * DAY), oldRun.id);
    const dueLater = await execution("completed", ago(23 * DAY));
    const recentRun = await execution("completed", ago(DAY));
    const active = await execution("running", null);
    const onlyOld = (await store.blobs.put(tenant, oldChild.id, { only: "the old run's" })).hash;
    const shared = (await store.blobs.put(tenant, oldRun.id, { shared: true })).hash;
    await store.blobs.put(tenant, recentRun.id, { shared: true });
    const onlyDue = (await store.blobs.put(tenant, dueLater.id, { only: "the run due later" })).hash;
    const activeOwn = (await store.blobs.put(tenant, active.id, { active: true })).hash;
    await store.prisma.blob.updateMany({ data: { usedAt: new Date("2020-01-01T00:00:00Z") } });

    // Now: the run that ended 40 days ago goes with its child; its blob lost its last use just now.
    const now = createBlobPruner({ store, logger: capture().logger, intervalMs: 0, graceMs, retentionMs, retentionBatchSize: 1 });
    const first = await now.runOnce();
    expect(first.executions).toMatchObject({ ran: true, deleted: 2, runs: 1, batches: 3 });
    expect(first).toMatchObject({ ran: true, deleted: 0 });
    expect(await stillThere(oldRun.id, oldChild.id, dueLater.id, recentRun.id, active.id)).toEqual([dueLater.id, recentRun.id, active.id]);
    expect(await store.blobs.get(tenant, onlyOld)).not.toBeNull();

    // A grace period later: the run due by then is deleted first, so its blob goes in the same
    // run as the old run's; blobs other executions use stay.
    const later = createBlobPruner({ store, logger: capture().logger, intervalMs: 0, graceMs, retentionMs, clock: () => new Date(Date.now() + graceMs + 60_000) });
    const second = await later.runOnce();
    expect(second.executions).toMatchObject({ ran: true, deleted: 1, runs: 1, batches: 1 });
    expect(second).toMatchObject({ ran: true, deleted: 2 });
    expect(await stillThere(dueLater.id, recentRun.id, active.id)).toEqual([recentRun.id, active.id]);
    expect([...(await store.blobs.getMany(tenant, [onlyOld, shared, onlyDue, activeOwn])).keys()].sort()).toEqual([shared, activeOwn].sort());

    // Without a retention nothing is deleted however old.
    const keepAll = createBlobPruner({ store, logger: capture().logger, intervalMs: 0, graceMs, clock: () => new Date(Date.now() + 1000 * DAY) });
    expect((await keepAll.runOnce()).executions).toBeUndefined();
    expect(await stillThere(recentRun.id, active.id)).toEqual([recentRun.id, active.id]);
    await store.executions.delete(tenant, recentRun.id);
  });

  it("keeps the blobs a learned tool sequence refers to after its run is deleted", async () => {
    const run = await execution("completed", ago(40 * DAY));
    const input = await store.blobs.put(tenant, run.id, { large: "tool input" });
    const output = await store.blobs.put(tenant, run.id, { large: "tool output" });
    await store.nodeExecutions.recordMany([{
      tenantId: tenant, executionId: run.id, attempt: 1, nodeId: "fetch", nodeType: "tool", status: "completed",
      toolCalls: [{ tool: "web.fetch" }], input: { doc: { $ref: input.ref, size: input.size } }, output: { $ref: output.ref, size: output.size },
    }]);
    // What the learner does when the run finishes.
    await store.learning.recordFromJournal({ tenantId: tenant, executionId: run.id, successful: true });
    await store.prisma.blob.updateMany({ data: { usedAt: new Date("2020-01-01T00:00:00Z") } });

    // The run is deleted now and pruned a grace period later: the output's blob goes, the
    // learned input's stays (however much later), and reads back.
    expect((await createBlobPruner({ store, logger: capture().logger, intervalMs: 0, graceMs, retentionMs }).runOnce()).executions).toMatchObject({ deleted: 1 });
    const later = createBlobPruner({ store, logger: capture().logger, intervalMs: 0, graceMs, retentionMs, clock: () => new Date(Date.now() + 10 * graceMs) });
    expect(await later.runOnce()).toMatchObject({ ran: true, deleted: 1, inUse: 1 });
    expect(await later.runOnce()).toMatchObject({ ran: true, deleted: 0, inUse: 1 });
    expect(await stillThere(run.id)).toEqual([]);
    expect((await store.blobs.get(tenant, input.hash))?.data).toEqual({ large: "tool input" });
    expect(await store.blobs.get(tenant, output.hash)).toBeNull();
  });

  it("with a learned-sequence retention, deletes the sequences past it; their blobs go a grace period later", async () => {
    const runs = [await execution("completed", ago(40 * DAY)), await execution("completed", ago(40 * DAY))];
    const inputs = [];
    for (const run of runs) {
      const input = await store.blobs.put(tenant, run.id, { large: `input of ${run.id}` });
      await store.learning.recordSequence({ tenantId: tenant, executionId: run.id, tools: [{ tool: "t", params: { $ref: input.ref, size: input.size } }], successful: true });
      await store.executions.delete(tenant, run.id);
      inputs.push(input);
    }
    await store.prisma.learnedSequence.update({ where: { executionId: runs[0]!.id }, data: { createdAt: ago(100 * DAY) } });
    await store.prisma.blob.updateMany({ data: { usedAt: new Date("2020-01-01T00:00:00Z") } });
    const learnedRetentionMs = 90 * DAY;

    const { logger, lines } = capture();
    const now = await createBlobPruner({ store, logger, intervalMs: 0, graceMs, learnedRetentionMs }).runOnce();
    expect(now.learned).toMatchObject({ ran: true, deleted: 1, batches: 1 });
    expect(now.executions).toBeUndefined();
    expect(now).toMatchObject({ ran: true, deleted: 0, inUse: 1 });
    expect((await store.learning.list(tenant)).map((l) => l.executionId)).toEqual([runs[1]!.id]);
    expect(lines).toEqual([]);

    const later = await createBlobPruner({ store, logger, intervalMs: 0, graceMs, learnedRetentionMs, clock: () => new Date(Date.now() + graceMs + 60_000) }).runOnce();
    expect(later).toMatchObject({ ran: true, deleted: 1, inUse: 1 });
    expect(await store.blobs.get(tenant, inputs[0]!.hash)).toBeNull();
    expect(await store.blobs.get(tenant, inputs[1]!.hash)).not.toBeNull();

    // Its deletion failing: logged with its code, the blobs pruned all the same.
    await blobs(2, "after-learned-failure", true);
    const failing = { blobs: store.blobs, executions: store.executions, learning: { ...store.learning, pruneOlder: () => Promise.reject(new Error("lock timeout")) } };
    const seen = await onTimer({ store: failing, intervalMs: 50, graceMs, learnedRetentionMs }, logged("unused blobs pruned"));
    expect(seen.find((l) => l.level === "warn")).toMatchObject({ code: "BATON_EXECUTOR_LEARNED_PRUNE_FAILED" });
    expect(seen.find((l) => l.msg === "unused blobs pruned")).toMatchObject({ deleted: 2 });
    await store.prisma.learnedSequence.deleteMany({});
  });

  it("logs what it deleted on its timer; a failing deletion is logged with its code and the blobs are still pruned", async () => {
    const run = await execution("completed", ago(31 * DAY));
    const lines = await onTimer({ store, intervalMs: 100, graceMs, retentionMs }, logged("finished executions past their retention deleted"));
    expect(lines.find((l) => l.msg === "finished executions past their retention deleted")).toMatchObject({ level: "info", deleted: 1, runs: 1, batches: 1 });
    expect(await stillThere(run.id)).toEqual([]);

    // The real store, but its deletion of executions fails: the blobs are pruned all the same.
    await blobs(2, "after-failure", true);
    const failing = { blobs: store.blobs, learning: store.learning, executions: { ...store.executions, pruneFinished: () => Promise.reject(new Error("statement timeout")) } };
    const seen = await onTimer({ store: failing, intervalMs: 50, graceMs, retentionMs }, logged("unused blobs pruned"));
    expect(seen.find((l) => l.level === "warn")).toMatchObject({ code: "BATON_EXECUTOR_EXECUTION_PRUNE_FAILED" });
    expect(seen.find((l) => l.msg === "unused blobs pruned")).toMatchObject({ deleted: 2 });
    const direct = createBlobPruner({ store: failing, logger: capture().logger, intervalMs: 0, graceMs, retentionMs });
    await expect(direct.runOnce()).rejects.toThrow("statement timeout");
  });
});
