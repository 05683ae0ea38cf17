/**
 * The journal statement's plan: the executor writes it on every step through a named
 * statement, which each connection plans once (a generic plan) and keeps. However many
 * executions the table holds, that plan must find the executions it checks and patches by
 * key, not scan (or hash) the whole table: a statement that did cost more with every
 * execution ever run. The same holds for what Postgres plans on its own (the foreign-key
 * check of every new journal row) and for the learner's statement, also on tables Postgres
 * has never analyzed (autovacuum off, or a new deployment), where every index looks alike;
 * and for the statement that records a learned sequence with its uses of blobs, which must
 * look the blobs up by key, not read the blobs table once per finished run.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { expect, it } from "@jest/globals";
import { recordStepsSql } from "./executions.ts";
import type pg from "pg";
import { openTestStore } from "./testing.ts";
import type { TestStore } from "./testing.ts";
import { quoteIdent } from "./values.ts";

/** A store on a fresh schema with one tenant and one workflow, and a plain client beside it. */
async function withWorkflow(prefix: string, test: (t: TestStore, db: pg.Client, tenant: string, wf: { id: number }) => Promise<void>): Promise<void> {
  const t = await openTestStore({ prefix });
  try {
    const db = await t.connect();
    const tenant = (await t.store.tenants.create("A")).id;
    const wf = await t.store.workflows.create(tenant, { name: "Flow", definition: { nodes: [] } });
    await test(t, db, tenant, wf);
  } finally {
    await t.dispose();
  }
}

/** Rows read by sequential scans of `table` since `before`, once the store's closing connections have sent their statistics (each sends its own: wait until the count stops moving). */
async function seqReadSince(db: pg.Client, table: string, before: number): Promise<number> {
  let read = -1;
  for (let i = 0, last = -2; i < 50 && read !== last; i++) {
    await sleep(200);
    last = read;
    read = (await seqRead(db, table)) - before;
  }
  return read;
}

/** Rows read by sequential scans of `table` (schema-qualified) so far. */
async function seqRead(db: pg.Client, table: string): Promise<number> {
  return Number((await db.query<{ n: string }>(`SELECT seq_tup_read AS n FROM pg_stat_user_tables WHERE relid = $1::regclass`, [table])).rows[0]!.n);
}

it("looks executions up by key, not by reading the table, once the table is past a few pages", () =>
  withWorkflow("steps_plan", async (t, db, tenant, wf) => {
    const q = quoteIdent(t.options.schema);
    // A table past a few pages: while it is a page or two, reading it is the cheaper plan,
    // and the planner rightly takes it.
    await db.query(
      `INSERT INTO ${q}."agent_workflow_executions" ("tenantId", "agentWorkflowId", "workflowVersion", "status")
       SELECT $1, $2, 1, 'running' FROM generate_series(1, 20000)`,
      [tenant, wf.id],
    );
    await db.query(`ANALYZE ${q}."agent_workflow_executions"`);
    const last = (await db.query<{ id: number }>(`SELECT max("id") AS id FROM ${q}."agent_workflow_executions"`)).rows[0]!.id;

    // The plan a connection keeps for the named statement.
    await db.query("SET plan_cache_mode = force_generic_plan");
    await db.query(`PREPARE steps(text, text) AS ${recordStepsSql(t.options.schema)}`);
    const entries = JSON.stringify([{ tenantId: tenant, executionId: last, nodeId: "n1", nodeType: "tool", attempt: 1, status: "completed", output: {}, stepVersion: 2 }]);
    const patches = JSON.stringify([{ id: last, tenantId: tenant, status: "completed", stepVersion: 2 }]);
    const plan = (await db.query<{ "QUERY PLAN": string }>(`EXPLAIN (COSTS OFF) EXECUTE steps('${entries}', '${patches}')`)).rows.map((r) => r["QUERY PLAN"]);

    expect(plan.join("\n")).toContain("agent_workflow_executions"); // the plan is the statement's
    expect(plan.filter((l) => /Seq Scan on agent_workflow/.test(l))).toEqual([]);

    // The statement for entries alone (a step that changes no execution row) checks the
    // tenants the same way.
    await db.query(`PREPARE entries(text) AS ${recordStepsSql(t.options.schema, { patches: false })}`);
    const alone = (await db.query<{ "QUERY PLAN": string }>(`EXPLAIN (COSTS OFF) EXECUTE entries('${entries}')`)).rows.map((r) => r["QUERY PLAN"]);
    expect(alone.join("\n")).toContain("agent_workflow_executions");
    expect(alone.join("\n")).not.toContain("Update on"); // no patch in it
    expect(alone.filter((l) => /Seq Scan on agent_workflow/.test(l))).toEqual([]);
  }));

it("on tables never analyzed, journal writes (with their foreign-key checks) and the learner read rows by key", () =>
  withWorkflow("steps_keys", async (t, db, tenant, wf) => {
    const tables = ["agent_workflow_executions", "agent_workflow_node_executions"];
    const never = await db.query<{ relname: string }>(
      `SELECT relname FROM pg_class WHERE relnamespace = $1::regnamespace AND relname = ANY ($2) AND reltuples < 0`,
      [t.options.schema, tables],
    );
    expect(never.rows.map((r) => r.relname).sort()).toEqual(tables); // the case under test: no statistics
    const runs = 150;
    for (let i = 0; i < runs; i++) {
      const e = await t.store.executions.create(tenant, { workflowId: wf.id, workflowVersion: 1, input: {} });
      await t.store.nodeExecutions.recordSteps({ entries: [{ tenantId: tenant, executionId: e.id, nodeId: "n1", nodeType: "tool", attempt: 1, status: "running", stepVersion: 1 }], executions: [] });
      await t.store.nodeExecutions.recordSteps({
        entries: [{ tenantId: tenant, executionId: e.id, nodeId: "n1", nodeType: "tool", attempt: 1, status: "completed", output: {}, stepVersion: 2 }],
        executions: [{ id: e.id, tenantId: tenant, stepVersion: 2, patch: { status: "completed" } }],
      });
      await t.store.learning.recordFromJournal({ tenantId: tenant, executionId: e.id, successful: true });
    }
    // Closing the store's connections sends their statistics.
    await t.store.close();
    type Usage = { index: string; scans: number; read: number };
    const usage = async (): Promise<Usage[]> =>
      (await db.query<{ index: string; scans: string; read: string }>(
        `SELECT indexrelname AS index, idx_scan AS scans, idx_tup_read AS read FROM pg_stat_user_indexes
          WHERE schemaname = $1 AND relname = ANY ($2) AND idx_scan > 0 ORDER BY 1`,
        [t.options.schema, tables],
      )).rows.map((r) => ({ index: r.index, scans: Number(r.scans), read: Number(r.read) }));
    let seen: Usage[] = [];
    for (let i = 0; i < 50; i++) {
      seen = await usage();
      // Every journal row's foreign-key check at least.
      if (seen.reduce((n, u) => n + u.scans, 0) >= runs * 2) break;
      await sleep(100);
    }
    expect(seen.reduce((n, u) => n + u.scans, 0)).toBeGreaterThanOrEqual(runs * 2);
    // A lookup by key reads a row or two (a row's older versions included); a scan of the
    // tenant's rows would read about half of them on average, here 75.
    const wide = seen.filter((u) => u.read / u.scans > 4);
    expect(wide).toEqual([]);
  }));

it("on a table never analyzed, a plan made while it was small does not outlive its growth", () =>
  withWorkflow("steps_grow", async (t, db, tenant, wf) => {
    const q = quoteIdent(t.options.schema);
    const runs = `${q}."agent_workflow_executions"`;
    const startAndEnd = async (): Promise<void> => {
      const e = await t.store.executions.create(tenant, { workflowId: wf.id, workflowVersion: 1, input: {} });
      for (const [status, stepVersion] of [["running", 1], ["completed", 2]] as const) {
        await t.store.nodeExecutions.recordSteps({
          entries: [{ tenantId: tenant, executionId: e.id, nodeId: "n1", nodeType: "tool", attempt: 1, status, stepVersion }],
          executions: [{ id: e.id, tenantId: tenant, stepVersion, patch: { status } }],
        });
      }
    };
    // While the table is a page, each connection the store uses plans the patch statement
    // (after five custom plans Postgres settles on a generic one): reading the page is cheaper.
    for (let i = 0; i < 10; i++) await startAndEnd();
    // The table grows past where a lookup by key is cheaper (about 3,000 rows), never analyzed.
    await db.query(`INSERT INTO ${runs} ("tenantId", "agentWorkflowId", "workflowVersion", "status") SELECT $1, $2, 1, 'completed' FROM generate_series(1, 6000)`, [tenant, wf.id]);
    const never = await db.query(`SELECT 1 FROM pg_class WHERE oid = $1::regclass AND reltuples < 0`, [`${t.options.schema}.agent_workflow_executions`]);
    expect(never.rowCount).toBe(1);
    const table = `${t.options.schema}.agent_workflow_executions`;
    const before = await seqRead(db, table);
    for (let i = 0; i < 20; i++) await startAndEnd();
    // Closing the store's connections sends their statistics.
    await t.store.close();
    const read = await seqReadSince(db, table, before);
    // A plan kept from the small table reads all 6,000 rows for each of the 40 patches.
    expect(read).toBeLessThan(6000);
  }));

it("recording a learned sequence does not read the blobs table, with or without references, on a table never analyzed", () =>
  withWorkflow("learned_plan", async (t, db, tenant, wf) => {
    const q = quoteIdent(t.options.schema);
    await db.query(
      `INSERT INTO ${q}."blobs" ("tenantId", "hash", "size", "data") SELECT $1, md5(g::text) || md5((g + 1)::text), 2, '{}'::jsonb FROM generate_series(1, 6000) g`,
      [tenant],
    );
    const table = `${t.options.schema}.blobs`;
    const before = await seqRead(db, table);
    for (let i = 0; i < 20; i++) {
      const e = await t.store.executions.create(tenant, { workflowId: wf.id, workflowVersion: 1, input: {} });
      const large = i % 2 === 0 ? await t.store.blobs.put(tenant, e.id, { big: i }) : undefined;
      await t.store.nodeExecutions.recordSteps({
        entries: [{ tenantId: tenant, executionId: e.id, nodeId: "n1", nodeType: "tool", attempt: 1, status: "completed", input: large ? { data: { $ref: large.ref, size: large.size } } : { small: i }, output: {}, stepVersion: 2 }],
        executions: [],
      });
      await t.store.learning.recordFromJournal({ tenantId: tenant, executionId: e.id, successful: true });
    }
    const uses = await db.query(`SELECT 1 FROM ${q}."learned_blob_uses"`);
    expect(uses.rowCount).toBe(10); // the statement under test did record the references
    await t.store.close();
    const read = await seqReadSince(db, table, before);
    // A plan that reads the table reads its 6,000 rows for each of the 20 sequences.
    expect(read).toBeLessThan(6000);
  }));
