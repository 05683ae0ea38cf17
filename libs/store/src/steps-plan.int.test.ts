/**
 * The journal statement's plan: the executor writes it on every step through a named
 * statement, which each connection plans once (a generic plan) and keeps. However many
 * executions the table holds, that plan must find the executions it checks and patches by
 * key, not scan (or hash) the whole table: a statement that did cost more with every
 * execution ever run.
 */
import { expect, it } from "@jest/globals";
import { recordStepsSql } from "./executions.ts";
import { openTestStore } from "./testing.ts";
import { quoteIdent } from "./values.ts";

it("looks executions up by key, not by reading the table, once the table is past a few pages", async () => {
  const t = await openTestStore({ prefix: "steps_plan" });
  try {
    const db = await t.connect();
    const tenant = (await t.store.tenants.create("A")).id;
    const wf = await t.store.workflows.create(tenant, { name: "Flow", definition: { nodes: [] } });
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
  } finally {
    await t.dispose();
  }
});
