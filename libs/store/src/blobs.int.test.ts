/**
 * Rules (blob retention, docs/adr/008-blob-retention.md):
 * - a put records that its execution uses the blob, once however often it is put, in the
 *   same statement as the blob; a put again refreshes `usedAt`; an execution of another
 *   tenant is not found and nothing is written;
 * - `use` records uses of stored blobs for another execution, refreshes them, and returns
 *   the hashes the tenant has no blob for;
 * - `prune` deletes, oldest first and at most `limit` per call, blobs whose `usedAt` is older
 *   than the cutoff and that no execution uses; used ones are kept and touched; newer ones
 *   are not looked at; deleting an execution (or its workflow) deletes its uses, so its blobs
 *   become prunable while a blob another execution uses stays; the deletion marks the blobs
 *   those executions used as used now, so they are pruned a grace period after it;
 * - two tenants with the same value have two independent blobs;
 * - deleting a tenant deletes its blobs and uses;
 * - one process prunes at a time (a transaction-scoped advisory lock);
 * - the migration backfills uses from the rows that existed before it.
 */
import { createHash } from "node:crypto";
import { afterAll, beforeEach, describe, expect, it } from "@jest/globals";
import pg from "pg";
import { createStore } from "./store.ts";
import { migratedThrough, openTwoTenantStore } from "./testing.ts";

// Opened while the module loads (top-level await): two tenants with a workflow each.
const { t, store, db, tenant, other, wf, theirWf } = await openTwoTenantStore("blobs");
afterAll(() => t.dispose());

// Each test starts with no blobs, so prune's counts are its own.
beforeEach(async () => {
  await store.prisma.blobUse.deleteMany({});
  await store.prisma.blob.deleteMany({});
});

const newExecution = (tenantId = tenant) =>
  store.executions.create(tenantId, { workflowId: tenantId === tenant ? wf.id : theirWf.id, workflowVersion: 1, input: {} });
const usesOf = async (tenantId: string, hash: string): Promise<number[]> =>
  (await store.prisma.blobUse.findMany({ where: { tenantId, hash }, orderBy: { executionId: "asc" } })).map((u) => u.executionId);
/** Sets a blob's usedAt (as if last used then). */
const age = (tenantId: string, hash: string, usedAt: Date) => store.prisma.blob.update({ where: { tenantId_hash: { tenantId, hash } }, data: { usedAt } });
const future = () => new Date(Date.now() + 60_000);
const past = new Date("2020-01-01T00:00:00Z");

describe("put and use", () => {
  it("records the execution's use once, in the put", async () => {
    const ex = await newExecution();
    const a = await store.blobs.put(tenant, ex.id, { big: "a" });
    await store.blobs.put(tenant, ex.id, { big: "a" });
    expect(await usesOf(tenant, a.hash)).toEqual([ex.id]);
    const ex2 = await newExecution();
    expect(await store.blobs.put(tenant, ex2.id, { big: "a" })).toEqual(a);
    expect(await usesOf(tenant, a.hash)).toEqual([ex.id, ex2.id]);
    expect(await store.prisma.blob.count()).toBe(1);
  });

  it("refreshes usedAt when the blob is put again", async () => {
    const ex = await newExecution();
    const a = await store.blobs.put(tenant, ex.id, "again");
    await age(tenant, a.hash, past);
    const before = Date.now();
    await store.blobs.put(tenant, ex.id, "again");
    const row = await store.blobs.get(tenant, a.hash);
    expect(row!.usedAt.getTime()).toBeGreaterThanOrEqual(before - 1000);
    expect(row!.createdAt.getTime()).toBeLessThanOrEqual(row!.usedAt.getTime());
  });

  it("refuses another tenant's execution and writes nothing", async () => {
    const theirs = await newExecution(other);
    await expect(store.blobs.put(tenant, theirs.id, "x")).rejects.toMatchObject({ code: "BATON_STORE_NOT_FOUND" });
    await expect(store.blobs.put(tenant, 0, "x")).rejects.toMatchObject({ code: "BATON_STORE_INVALID_INPUT" });
    expect(await store.prisma.blob.count()).toBe(0);
  });

  it("records uses of stored blobs for another execution and names the missing ones", async () => {
    const ex = await newExecution();
    const child = await newExecution();
    const a = await store.blobs.put(tenant, ex.id, "shared");
    await age(tenant, a.hash, past);
    const missing = "0".repeat(64);
    expect(await store.blobs.use(tenant, child.id, [a.ref, missing, a.hash])).toEqual([missing]);
    expect(await store.blobs.use(tenant, child.id, [a.ref])).toEqual([]);
    expect(await usesOf(tenant, a.hash)).toEqual([ex.id, child.id]);
    expect((await store.blobs.get(tenant, a.hash))!.usedAt.getTime()).toBeGreaterThan(past.getTime());
    // Another tenant's blob of the same value is not the tenant's.
    const theirs = await newExecution(other);
    expect(await store.blobs.use(other, theirs.id, [a.hash])).toEqual([a.hash]);
    expect(await store.blobs.use(tenant, child.id, [])).toEqual([]);
    await expect(store.blobs.use(tenant, child.id, ["nope"])).rejects.toMatchObject({ code: "BATON_STORE_INVALID_INPUT" });
  });
});

describe("prune", () => {
  it("deletes only unused blobs older than the cutoff, and touches the used ones", async () => {
    const ex = await newExecution();
    const used = await store.blobs.put(tenant, ex.id, "used");
    const unused = await store.blobs.put(tenant, ex.id, "unused");
    const recent = await store.blobs.put(tenant, ex.id, "recent");
    await store.prisma.blobUse.deleteMany({ where: { hash: { in: [unused.hash, recent.hash] } } });
    await age(tenant, used.hash, past);
    await age(tenant, unused.hash, past);
    expect(await store.blobs.prune({ olderThan: new Date("2021-01-01T00:00:00Z"), limit: 100 })).toEqual({ ran: true, deleted: 1, inUse: 1 });
    expect(await store.blobs.get(tenant, unused.hash)).toBeNull();
    expect(await store.blobs.get(tenant, recent.hash)).not.toBeNull();
    const kept = await store.blobs.get(tenant, used.hash);
    expect(kept!.usedAt.getTime()).toBeGreaterThan(past.getTime());
    // The used one was touched: the same cutoff does not look at it again.
    expect(await store.blobs.prune({ olderThan: new Date("2021-01-01T00:00:00Z"), limit: 100 })).toEqual({ ran: true, deleted: 0, inUse: 0 });
  });

  it("respects the limit, oldest first", async () => {
    const ex = await newExecution();
    const puts = [];
    for (let i = 0; i < 5; i++) puts.push(await store.blobs.put(tenant, ex.id, { n: i }));
    await store.prisma.blobUse.deleteMany({});
    for (let i = 0; i < 5; i++) await age(tenant, puts[i]!.hash, new Date(past.getTime() + (5 - i) * 1000));
    expect(await store.blobs.prune({ olderThan: future(), limit: 2 })).toMatchObject({ deleted: 2 });
    // The two oldest (the last two put) are gone.
    expect([...(await store.blobs.getMany(tenant, puts.map((p) => p.hash))).keys()].sort()).toEqual(puts.slice(0, 3).map((p) => p.hash).sort());
    // missing names what getMany leaves out, without reading the data; another tenant has none of them.
    expect(await store.blobs.missing(tenant, puts.map((p) => p.ref))).toEqual(puts.slice(3).map((p) => p.hash));
    expect(await store.blobs.missing("another-tenant", [puts[0]!.hash])).toEqual([puts[0]!.hash]);
    await expect(store.blobs.missing(tenant, ["blob:abc"])).rejects.toMatchObject({ code: "BATON_STORE_INVALID_INPUT" });
    expect(await store.blobs.prune({ olderThan: future(), limit: 2 })).toMatchObject({ deleted: 2 });
    expect(await store.blobs.prune({ olderThan: future(), limit: 2 })).toMatchObject({ deleted: 1 });
    expect(await store.blobs.prune({ olderThan: future(), limit: 2 })).toMatchObject({ deleted: 0, inUse: 0 });
    await expect(store.blobs.prune({ olderThan: future(), limit: 0 })).rejects.toMatchObject({ code: "BATON_STORE_INVALID_INPUT" });
    await expect(store.blobs.prune({ olderThan: new Date(Number.NaN), limit: 1 })).rejects.toMatchObject({ code: "BATON_STORE_INVALID_INPUT" });
  });

  it("deleting an execution deletes its uses: its blob becomes prunable, a blob another execution uses stays", async () => {
    const gone = await newExecution();
    const stays = await newExecution();
    const own = await store.blobs.put(tenant, gone.id, "only the deleted one");
    const shared = await store.blobs.put(tenant, gone.id, "both");
    await store.blobs.put(tenant, stays.id, "both");
    expect(await store.blobs.prune({ olderThan: future(), limit: 100 })).toEqual({ ran: true, deleted: 0, inUse: 2 });
    expect(await store.executions.delete(tenant, gone.id)).toBe(true);
    expect(await usesOf(tenant, own.hash)).toEqual([]);
    expect(await usesOf(tenant, shared.hash)).toEqual([stays.id]);
    expect(await store.blobs.prune({ olderThan: future(), limit: 100 })).toEqual({ ran: true, deleted: 1, inUse: 1 });
    expect(await store.blobs.get(tenant, own.hash)).toBeNull();
    expect(await store.blobs.get(tenant, shared.hash)).not.toBeNull();
  });

  it("deleting a workflow deletes its executions' uses", async () => {
    const flow = await store.workflows.create(tenant, { name: "Doomed", definition: { nodes: [] } });
    const ex = await store.executions.create(tenant, { workflowId: flow.id, workflowVersion: 1, input: {} });
    const b = await store.blobs.put(tenant, ex.id, "doomed");
    await store.executions.update(ex.id, { status: "completed" }); // a workflow with runs still active is not deleted
    await store.workflows.delete(tenant, flow.id);
    expect(await usesOf(tenant, b.hash)).toEqual([]);
    expect(await store.blobs.prune({ olderThan: future(), limit: 100 })).toMatchObject({ deleted: 1 });
  });

  it("deleting a workflow or an execution marks the blobs they used as used now: the grace counts from the deletion", async () => {
    const flow = await store.workflows.create(tenant, { name: "Deleted with its runs", definition: { nodes: [] } });
    const run = await store.executions.create(tenant, { workflowId: flow.id, workflowVersion: 1, input: {} });
    const lone = await newExecution();
    const stays = await newExecution();
    const ofWorkflow = await store.blobs.put(tenant, run.id, "the workflow's run's");
    const ofExecution = await store.blobs.put(tenant, lone.id, "the deleted execution's");
    const stillUsed = await store.blobs.put(tenant, stays.id, "used by a run that stays");
    const theirs = await store.blobs.put(other, (await newExecution(other)).id, "the workflow's run's");
    await store.prisma.blob.updateMany({ data: { usedAt: past } });
    await store.executions.update(run.id, { status: "failed" }); // a workflow with runs still active is not deleted

    expect(await store.workflows.delete(tenant, flow.id)).toBe(true);
    expect(await store.executions.delete(tenant, lone.id)).toBe(true);
    const rows = await store.blobs.getMany(tenant, [ofWorkflow.hash, ofExecution.hash, stillUsed.hash]);
    expect(rows.get(ofWorkflow.hash)!.usedAt.getTime()).toBeGreaterThan(past.getTime());
    expect(rows.get(ofExecution.hash)!.usedAt.getTime()).toBeGreaterThan(past.getTime());
    expect(rows.get(stillUsed.hash)!.usedAt).toEqual(past);
    // The other tenant's blob of the same content is not touched.
    expect((await store.blobs.get(other, theirs.hash))!.usedAt).toEqual(past);
    // Nothing used them for a long time, but they were used until just now: kept for a grace period.
    expect(await store.blobs.prune({ olderThan: new Date("2021-01-01T00:00:00Z"), limit: 100 })).toEqual({ ran: true, deleted: 0, inUse: 2 });
    expect(await store.blobs.prune({ olderThan: future(), limit: 100 })).toEqual({ ran: true, deleted: 2, inUse: 2 });
    // Deleting what is not the tenant's deletes and touches nothing.
    expect(await store.workflows.delete(other, wf.id)).toBe(false);
    expect(await store.executions.delete(other, stays.id)).toBe(false);
    expect((await store.blobs.get(tenant, stillUsed.hash))).not.toBeNull();
  });

  it("keeps two tenants' blobs of the same value apart", async () => {
    const mine = await newExecution();
    const theirs = await newExecution(other);
    const a = await store.blobs.put(tenant, mine.id, "same");
    const b = await store.blobs.put(other, theirs.id, "same");
    expect(b.hash).toBe(a.hash);
    await store.executions.delete(tenant, mine.id);
    expect(await store.blobs.prune({ olderThan: future(), limit: 100 })).toEqual({ ran: true, deleted: 1, inUse: 1 });
    expect(await store.blobs.get(tenant, a.hash)).toBeNull();
    expect(await store.blobs.get(other, a.hash)).not.toBeNull();
  });

  it("deleting a tenant deletes its blobs and their uses", async () => {
    const doomed = (await store.tenants.create("Doomed")).id;
    const flow = await store.workflows.create(doomed, { name: "Flow", definition: { nodes: [] } });
    const ex = await store.executions.create(doomed, { workflowId: flow.id, workflowVersion: 1, input: {} });
    await store.blobs.put(doomed, ex.id, "tenant's");
    await store.prisma.tenant.delete({ where: { id: doomed } });
    expect(await store.prisma.blob.count({ where: { tenantId: doomed } })).toBe(0);
    expect(await store.prisma.blobUse.count({ where: { tenantId: doomed } })).toBe(0);
  });

  it("does nothing while another process prunes", async () => {
    const ex = await newExecution();
    const b = await store.blobs.put(tenant, ex.id, "locked out");
    await store.prisma.blobUse.deleteMany({});
    const second = createStore(t.options);
    try {
      // Another connection holds the pruner's lock in its transaction while this store tries.
      await db.query("BEGIN");
      expect(await heldPruneLock(db)).toBe(true);
      expect(await second.blobs.prune({ olderThan: future(), limit: 100 })).toEqual({ ran: false, deleted: 0, inUse: 0 });
      await db.query("ROLLBACK");
      expect(await second.blobs.prune({ olderThan: future(), limit: 100 })).toEqual({ ran: true, deleted: 1, inUse: 0 });
      expect(await store.blobs.get(tenant, b.hash)).toBeNull();
    } finally {
      await second.close();
    }
  });
});

/** Takes the pruner's advisory lock in `client`'s transaction (the keys as blobs.ts computes them). */
async function heldPruneLock(client: pg.Client): Promise<boolean> {
  const key = (text: string) => createHash("sha256").update(text).digest().readInt32BE(0);
  const { rows } = await client.query<{ ok: boolean }>("SELECT pg_try_advisory_xact_lock($1::int, $2::int) AS ok", [key("baton:blob-prune"), key(`baton:blob-prune:${t.options.schema}`)]);
  return rows[0]!.ok;
}

describe("the migration", () => {
  it("backfills uses from the journal and the execution rows that refer to existing blobs", async () => {
    // A schema migrated up to 0003, with blobs and rows referring to them, then 0004.
    const { client, migrateRest, dispose } = await migratedThrough("blobs_mig", "0003_key_lookups");
    try {
      const h = (c: string) => c.repeat(64);
      await client.query(`INSERT INTO tenants (id, name) VALUES ('t1', 'one'), ('t2', 'two')`);
      await client.query(`INSERT INTO agent_workflows (id, "tenantId", name, slug, definition) VALUES (1, 't1', 'w', 'w', '{}'), (2, 't2', 'w', 'w', '{}')`);
      await client.query(`INSERT INTO agent_workflow_executions (id, "tenantId", "agentWorkflowId", "workflowVersion", input, checkpoint) VALUES
        (10, 't1', 1, 1, '{}', NULL),
        (11, 't1', 1, 1, $1::jsonb, $2::jsonb),
        (12, 't1', 1, 1, '{}', NULL),
        (20, 't2', 2, 1, '{}', NULL)`,
      [JSON.stringify({ list: { $ref: `blob:${h("a")}`, size: 9 } }), JSON.stringify({ forkStart: { state: { context: { x: { $ref: `blob:${h("b")}`, size: 9 } } } } })]);
      await client.query(`INSERT INTO agent_workflow_node_executions ("tenantId", "executionId", "nodeId", "nodeType", status, output) VALUES
        ('t1', 10, 'a', 'tool', 'completed', $1::jsonb),
        ('t1', 12, 'a', 'tool', 'completed', '{"small": 1}'),
        ('t2', 20, 'a', 'tool', 'completed', $2::jsonb)`,
      [JSON.stringify({ r: { $ref: `blob:${h("a")}`, size: 9 }, gone: { $ref: `blob:${h("f")}`, size: 9 } }), JSON.stringify({ $ref: `blob:${h("a")}`, size: 9 })]);
      await client.query(`INSERT INTO blobs ("tenantId", hash, size, data) VALUES ('t1', $1, 9, '1'), ('t1', $2, 9, '2'), ('t1', $3, 9, '3'), ('t2', $1, 9, '1')`, [h("a"), h("b"), h("c")]);

      await migrateRest();
      const { rows } = await client.query<{ tenantId: string; hash: string; executionId: number }>(`SELECT "tenantId", hash, "executionId" FROM blob_uses ORDER BY 1, 3, 2`);
      expect(rows).toEqual([
        { tenantId: "t1", hash: h("a"), executionId: 10 },
        { tenantId: "t1", hash: h("a"), executionId: 11 },
        { tenantId: "t1", hash: h("b"), executionId: 11 },
        { tenantId: "t2", hash: h("a"), executionId: 20 },
      ]);
      // Every existing blob counts as used at the migration: none is pruned before a grace period.
      const { rows: ages } = await client.query<{ n: number }>(`SELECT count(*)::int AS n FROM blobs WHERE "usedAt" > now() - interval '1 minute'`);
      expect(ages[0]!.n).toBe(4);
    } finally {
      await dispose();
    }
  });
});
