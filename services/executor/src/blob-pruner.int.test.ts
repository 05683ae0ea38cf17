/**
 * Rules (blob-pruner.ts, real Postgres):
 * - a run prunes in batches until a batch comes back short, at most maxBatches, with the cutoff
 *   `now - grace`: unused blobs older than it go, used ones and newer ones stay;
 * - started, it runs soon (the first run after at most the interval), logs what it deleted, and
 *   runs again an interval after each run; stopped, it runs no more;
 * - a failing run is logged with BATON_EXECUTOR_BLOB_PRUNE_FAILED and never thrown out of the
 *   timer; an interval of 0 never runs.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "@jest/globals";
import { createStore } from "@baton/store";
import type { Store } from "@baton/store";
import { openTestStore } from "@baton/store/testing";
import type { TestStore } from "@baton/store/testing";
import { createLogger } from "@baton/telemetry";
import { createBlobPruner } from "./blob-pruner.ts";

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
  await store.prisma.blobUse.deleteMany({});
  await store.prisma.blob.deleteMany({});
});

function capture() {
  const lines: Record<string, unknown>[] = [];
  const logger = createLogger("pruner-test", "debug", { write: (l) => lines.push(JSON.parse(l) as Record<string, unknown>) });
  return { logger, lines };
}

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
    const { logger, lines } = capture();
    const pruner = createBlobPruner({ store: closed, logger, intervalMs: 50, graceMs: 0 });
    pruner.start();
    for (let i = 0; i < 100 && lines.filter((l) => l.msg?.toString().startsWith("pruning unused blobs failed")).length < 2; i++) await sleep(20);
    await pruner.stop();
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
