/**
 * The journal statement's plan: the executor writes it on every step through a named
 * statement, which each connection plans once (a generic plan) and keeps. However many
 * executions the table holds, that plan must find the executions it checks and patches by
 * key, not scan (or hash) the whole table: a statement that did cost more with every
 * execution ever run.
 */
import pg from "pg";
import { afterAll, beforeAll, expect, it } from "@jest/globals";
import { recordStepsSql } from "./executions.ts";
import { openTestStore, type TestStore } from "./testing.ts";
import { quoteIdent } from "./values.ts";

let t: TestStore;
let db: pg.Client;

beforeAll(async () => {
  t = await openTestStore({ prefix: "steps_plan" });
  db = new pg.Client({ connectionString: t.options.databaseUrl });
  await db.connect();
});
afterAll(async () => {
  await db?.end();
  await t?.dispose();
});

it("looks executions up by key, not by reading the table, once the table is past a few pages", async () => {
  const tenant = (await t.store.tenants.create("A")).id;
  const wf = await t.store.workflows.create(tenant, { name: "Flow", definition: { nodes: [] } });
  const q = quoteIdent(t.options.schema);
  const entry = (executionId: number) => ({ tenantId: tenant, executionId, nodeId: "n1", nodeType: "tool", attempt: 1, status: "completed", output: {}, stepVersion: 2 });
  const plan = async (): Promise<string> => {
    // A fresh session each time: the plan is made from the table as it is now.
    await db.query("DEALLOCATE ALL");
    await db.query("SET plan_cache_mode = force_generic_plan");
    await db.query(`PREPARE steps(text, text) AS ${recordStepsSql(t.options.schema)}`);
    const last = (await db.query<{ id: number }>(`SELECT max("id") AS id FROM ${q}."agent_workflow_executions"`)).rows[0]!.id;
    const params = [JSON.stringify([entry(last)]), JSON.stringify([{ id: last, tenantId: tenant, status: "completed", stepVersion: 2 }])];
    const rows = (await db.query<{ "QUERY PLAN": string }>(`EXPLAIN (COSTS OFF) EXECUTE steps(${params.map((p) => `'${p}'`).join(", ")})`)).rows;
    return rows.map((r) => r["QUERY PLAN"]).join("\n");
  };

  // (While the table is a page or two, reading it is the cheaper plan, and the planner takes it.)
  for (const size of [20_000]) {
    await db.query(
      `INSERT INTO ${q}."agent_workflow_executions" ("tenantId", "agentWorkflowId", "workflowVersion", "status")
       SELECT $1, $2, 1, 'running' FROM generate_series(1, $3::int - (SELECT count(*) FROM ${q}."agent_workflow_executions")::int)`,
      [tenant, wf.id, size],
    );
    await db.query(`ANALYZE ${q}."agent_workflow_executions"`);
    const text = await plan();
    expect(text).toContain("agent_workflow_executions"); // the plan is the statement's
    expect({ size, seqScans: text.split("\n").filter((l) => /Seq Scan on agent_workflow/.test(l)) }).toEqual({ size, seqScans: [] });
  }
});
