/**
 * Rules (blob retention of learned sequences, docs/adr/008-blob-retention.md, "Learned
 * sequences"):
 * - recording a tool sequence from the journal records, in the same statement, that the
 *   sequence uses every blob its params refer to (at any depth, once each) and marks those
 *   blobs used now; a reference to a blob the tenant does not have records nothing; a repeat
 *   (a redelivered event) records nothing more;
 * - `recordSequence` does the same for the tools it is given;
 * - a blob a learned sequence uses is never pruned, also once the execution it was copied
 *   from is deleted; deleting the sequence (or its tenant) deletes its uses, and the blob is
 *   pruned like any other;
 * - a sequence never uses another tenant's blob, even one of the same content;
 * - migration 0006 backfills the uses of the sequences recorded before it;
 * - the retention (`pruneOlder`) deletes sequences created before its cutoff, oldest first, in
 *   batches, one process at a time, with their uses; their blobs' grace period starts then.
 */
import { afterAll, beforeEach, describe, expect, it } from "@jest/globals";
import { migratedThrough, openTwoTenantStore } from "./testing.ts";
import { lockKey } from "./values.ts";

// Opened while the module loads (top-level await): two tenants with a workflow each.
const { t, store, tenant, other, wf, theirWf } = await openTwoTenantStore("learned_blobs");
afterAll(() => t.dispose());

// Each test starts with no sequences and no blobs, so prune's counts are its own.
beforeEach(async () => {
  await store.prisma.learnedSequence.deleteMany({});
  await store.prisma.blobUse.deleteMany({});
  await store.prisma.blob.deleteMany({});
});

const newExecution = (tenantId = tenant) =>
  store.executions.create(tenantId, { workflowId: tenantId === tenant ? wf.id : theirWf.id, workflowVersion: 1, input: {} });
const ref = (b: { ref: string; size: number }) => ({ $ref: b.ref, size: b.size });
const past = new Date("2020-01-01T00:00:00Z");
const future = () => new Date(Date.now() + 60_000);
/** The hashes the tenant's learned sequence of `executionId` uses, sorted. */
async function learnedUses(tenantId: string, executionId: number): Promise<string[]> {
  const seq = await store.prisma.learnedSequence.findUnique({ where: { executionId } });
  if (!seq) return [];
  const rows = await store.prisma.learnedBlobUse.findMany({ where: { tenantId, sequenceId: seq.id } });
  return rows.map((r) => r.hash).sort();
}

describe("recording a sequence records the blobs its params refer to", () => {
  it("from the journal: every blob at any depth, once, marked used now; missing blobs and other nodes' blobs are left out", async () => {
    const ex = await newExecution();
    const a = await store.blobs.put(tenant, ex.id, { big: "a" });
    const b = await store.blobs.put(tenant, ex.id, { big: "b" });
    const out = await store.blobs.put(tenant, ex.id, { big: "an output" });
    const failed = await store.blobs.put(tenant, ex.id, { big: "a failed node's input" });
    await store.prisma.blob.updateMany({ data: { usedAt: past } });
    const base = { tenantId: tenant, executionId: ex.id, attempt: 1, nodeType: "tool" };
    const at = (s: number): Date => new Date(Date.now() - 10_000 + s * 1000);
    await store.nodeExecutions.recordMany([
      { ...base, nodeId: "fetch", status: "completed", toolCalls: [{ tool: "web.fetch" }], startedAt: at(1),
        input: { doc: ref(a), list: [ref(b), { nested: [ref(a)] }], note: "blob:not-a-ref" }, output: ref(out) },
      { ...base, nodeId: "send", status: "completed", toolCalls: [{ tool: "mail.send" }], startedAt: at(2), input: ref(b) },
      { ...base, nodeId: "lost", status: "completed", toolCalls: [{ tool: "x" }], startedAt: at(3), input: { x: { $ref: `blob:${"0".repeat(64)}`, size: 1 } } },
      { ...base, nodeId: "flaky", status: "failed", toolCalls: [{ tool: "y" }], startedAt: at(4), input: ref(failed) },
    ]);

    expect(await store.learning.recordFromJournal({ tenantId: tenant, executionId: ex.id, successful: true })).toEqual({ tools: ["web.fetch", "mail.send", "x"] });
    expect(await learnedUses(tenant, ex.id)).toEqual([a.hash, b.hash].sort());
    const touched = await store.blobs.getMany(tenant, [a.hash, b.hash, out.hash, failed.hash]);
    expect(touched.get(a.hash)!.usedAt.getTime()).toBeGreaterThan(past.getTime());
    expect(touched.get(b.hash)!.usedAt.getTime()).toBeGreaterThan(past.getTime());
    expect(touched.get(out.hash)!.usedAt).toEqual(past);
    expect(touched.get(failed.hash)!.usedAt).toEqual(past);

    // A redelivered event: the first record stands, no use is added.
    await store.learning.recordFromJournal({ tenantId: tenant, executionId: ex.id, successful: false });
    expect(await store.prisma.learnedBlobUse.count()).toBe(2);
  });

  it("through recordSequence too", async () => {
    const ex = await newExecution();
    const a = await store.blobs.put(tenant, ex.id, "given");
    await store.learning.recordSequence({ tenantId: tenant, executionId: ex.id, tools: [{ tool: "t", params: { v: ref(a) } }], successful: true });
    expect(await learnedUses(tenant, ex.id)).toEqual([a.hash]);
    await store.learning.recordSequence({ tenantId: tenant, executionId: ex.id, tools: [], successful: true });
    expect(await learnedUses(tenant, ex.id)).toEqual([a.hash]);
  });

  it("never uses another tenant's blob of the same content", async () => {
    const mine = await newExecution();
    const a = await store.blobs.put(tenant, mine.id, "mine");
    const theirs = await newExecution(other);
    // The other tenant's sequence names the hash of a blob only this tenant has.
    await store.learning.recordSequence({ tenantId: other, executionId: theirs.id, tools: [{ tool: "t", params: ref(a) }], successful: true });
    expect(await learnedUses(other, theirs.id)).toEqual([]);
    await store.executions.delete(tenant, mine.id);
    expect(await store.blobs.prune({ olderThan: future(), limit: 100 })).toEqual({ ran: true, deleted: 1, inUse: 0 });
  });
});

describe("pruning", () => {
  it("keeps a blob a learned sequence uses after its execution is deleted; it goes with the sequence", async () => {
    const ex = await newExecution();
    const learned = await store.blobs.put(tenant, ex.id, { input: "large" });
    const output = await store.blobs.put(tenant, ex.id, { output: "large" });
    await store.nodeExecutions.recordMany([
      { tenantId: tenant, executionId: ex.id, attempt: 1, nodeId: "a", nodeType: "tool", status: "completed", toolCalls: [{ tool: "t" }], input: { v: ref(learned) }, output: ref(output) },
    ]);
    await store.learning.recordFromJournal({ tenantId: tenant, executionId: ex.id, successful: true });
    expect(await store.executions.delete(tenant, ex.id)).toBe(true);

    // The run's uses are gone; the sequence's stays: the output's blob goes, the input's stays, readable.
    expect(await store.blobs.prune({ olderThan: future(), limit: 100 })).toEqual({ ran: true, deleted: 1, inUse: 1 });
    expect((await store.blobs.get(tenant, learned.hash))?.data).toEqual({ input: "large" });
    expect(await store.blobs.get(tenant, output.hash)).toBeNull();
    const [seq] = await store.learning.list(tenant);
    expect(seq!.tools).toEqual([{ nodeId: "a", tool: "t", params: { v: ref(learned) } }]);

    await store.prisma.learnedSequence.delete({ where: { id: seq!.id } });
    expect(await store.prisma.learnedBlobUse.count()).toBe(0);
    expect(await store.blobs.prune({ olderThan: future(), limit: 100 })).toEqual({ ran: true, deleted: 1, inUse: 0 });
  });

  it("deleting a tenant deletes its sequences' uses with its blobs", async () => {
    const doomed = (await store.tenants.create("Doomed")).id;
    const flow = await store.workflows.create(doomed, { name: "Flow", definition: { nodes: [] } });
    const ex = await store.executions.create(doomed, { workflowId: flow.id, workflowVersion: 1, input: {} });
    const b = await store.blobs.put(doomed, ex.id, "tenant's");
    await store.learning.recordSequence({ tenantId: doomed, executionId: ex.id, tools: [{ tool: "t", params: ref(b) }], successful: true });
    expect(await store.prisma.learnedBlobUse.count({ where: { tenantId: doomed } })).toBe(1);
    await store.prisma.tenant.delete({ where: { id: doomed } });
    expect(await store.prisma.learnedBlobUse.count({ where: { tenantId: doomed } })).toBe(0);
    expect(await store.prisma.blob.count({ where: { tenantId: doomed } })).toBe(0);
  });
});

describe("learned-sequence retention (pruneOlder)", () => {
  it("deletes the sequences created before the cutoff, oldest first, in batches, with their uses; their blobs' grace starts then", async () => {
    const seqs: { executionId: number; blob: { ref: string; hash: string; size: number } }[] = [];
    for (const [i, tenantId] of [tenant, tenant, other, tenant].entries()) {
      const ex = await newExecution(tenantId);
      const blob = await store.blobs.put(tenantId, ex.id, { input: `large ${i}` });
      await store.learning.recordSequence({ tenantId, executionId: ex.id, tools: [{ tool: "t", params: ref(blob) }], successful: i % 2 === 0 });
      await store.executions.delete(tenantId, ex.id);
      seqs.push({ executionId: ex.id, blob });
    }
    // The first three are old (the third another tenant's); the last was learned just now.
    const old = seqs.slice(0, 3).map((x) => x.executionId);
    await store.prisma.learnedSequence.updateMany({ where: { executionId: { in: old } }, data: { createdAt: past } });
    await store.prisma.learnedSequence.update({ where: { executionId: old[0]! }, data: { createdAt: new Date(past.getTime() - 1000) } });
    await store.prisma.blob.updateMany({ data: { usedAt: past } });
    const cutoff = new Date(Date.now() - 60_000);

    expect(await store.learning.pruneOlder({ olderThan: cutoff, limit: 1 })).toEqual({ ran: true, deleted: 1 });
    expect((await store.prisma.learnedSequence.findMany({ orderBy: { executionId: "asc" } })).map((x) => x.executionId)).toEqual(seqs.slice(1).map((x) => x.executionId));
    expect(await store.learning.pruneOlder({ olderThan: cutoff, limit: 10 })).toEqual({ ran: true, deleted: 2 });
    expect(await store.learning.pruneOlder({ olderThan: cutoff, limit: 10 })).toEqual({ ran: true, deleted: 0 });
    expect((await store.prisma.learnedSequence.findMany()).map((x) => x.executionId)).toEqual([seqs[3]!.executionId]);
    expect(await store.prisma.learnedBlobUse.count()).toBe(1);

    // The deleted sequences' blobs were touched: unused now, but inside their grace period.
    expect(await store.blobs.prune({ olderThan: cutoff, limit: 100 })).toEqual({ ran: true, deleted: 0, inUse: 1 });
    // Past it, they go; the kept sequence's stays.
    expect(await store.blobs.prune({ olderThan: future(), limit: 100 })).toEqual({ ran: true, deleted: 3, inUse: 1 });
    expect(await store.blobs.get(tenant, seqs[3]!.blob.hash)).not.toBeNull();
  });

  it("refuses a bad batch, and does nothing while another process holds its lock", async () => {
    await expect(store.learning.pruneOlder({ olderThan: new Date("x"), limit: 1 })).rejects.toMatchObject({ code: "BATON_STORE_INVALID_INPUT" });
    await expect(store.learning.pruneOlder({ olderThan: future(), limit: 0 })).rejects.toMatchObject({ code: "BATON_STORE_INVALID_INPUT" });
    const ex = await newExecution();
    await store.learning.recordSequence({ tenantId: tenant, executionId: ex.id, tools: [], successful: true });
    const db = await t.connect();
    await db.query("BEGIN");
    await db.query("SELECT pg_advisory_xact_lock($1::int, $2::int)", [lockKey("baton:learned-prune"), lockKey(`baton:learned-prune:${t.options.schema}`)]);
    expect(await store.learning.pruneOlder({ olderThan: future(), limit: 10 })).toEqual({ ran: false, deleted: 0 });
    await db.query("ROLLBACK");
    expect(await store.learning.pruneOlder({ olderThan: future(), limit: 10 })).toEqual({ ran: true, deleted: 1 });
  });
});

describe("the migration", () => {
  it("backfills the uses of the sequences recorded before it, for existing blobs only", async () => {
    // A schema migrated up to 0005, with learned sequences referring to blobs, then 0006.
    const { client, migrateRest, dispose } = await migratedThrough("learned_mig", "0005_execution_retention");
    try {
      const h = (c: string) => c.repeat(64);
      const r = (c: string) => ({ $ref: `blob:${h(c)}`, size: 9 });
      await client.query(`INSERT INTO tenants (id, name) VALUES ('t1', 'one'), ('t2', 'two')`);
      // Their executions are gone (learned sequences have no foreign key to them).
      await client.query(`INSERT INTO learned_sequences (id, "tenantId", "executionId", tools, successful) VALUES
        (1, 't1', 10, $1::jsonb, true), (2, 't1', 11, $2::jsonb, true), (3, 't1', 12, '[{"tool": "t", "params": {"small": 1}}]', true), (4, 't2', 20, $3::jsonb, false)`,
      [
        JSON.stringify([{ tool: "t", params: { a: r("a"), list: [r("b"), r("a")] } }, { tool: "u", params: r("f") }]),
        JSON.stringify([{ tool: "t", params: r("b") }]),
        JSON.stringify([{ tool: "t", params: { x: r("a"), y: r("c") } }]),
      ]);
      await client.query(`INSERT INTO blobs ("tenantId", hash, size, data, "usedAt") VALUES
        ('t1', $1, 9, '1', $4), ('t1', $2, 9, '2', $4), ('t1', $3, 9, '3', $4), ('t2', $1, 9, '1', $4)`, [h("a"), h("b"), h("c"), past]);

      await migrateRest();
      const { rows } = await client.query<{ tenantId: string; hash: string; sequenceId: number }>(`SELECT "tenantId", hash, "sequenceId" FROM learned_blob_uses ORDER BY 1, 3, 2`);
      expect(rows).toEqual([
        { tenantId: "t1", hash: h("a"), sequenceId: 1 },
        { tenantId: "t1", hash: h("b"), sequenceId: 1 },
        { tenantId: "t1", hash: h("b"), sequenceId: 2 },
        { tenantId: "t2", hash: h("a"), sequenceId: 4 },
      ]);
      // The blobs found were marked used at the migration; the others (t1's c) were not.
      const { rows: fresh } = await client.query<{ tenantId: string; hash: string }>(`SELECT "tenantId", hash FROM blobs WHERE "usedAt" > $1 ORDER BY 1, 2`, [past]);
      expect(fresh).toEqual([{ tenantId: "t1", hash: h("a") }, { tenantId: "t1", hash: h("b") }, { tenantId: "t2", hash: h("a") }]);
    } finally {
      await dispose();
    }
  });
});
