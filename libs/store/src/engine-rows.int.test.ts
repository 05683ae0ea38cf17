/**
 * Rules of the engine's rows (issue 3):
 * - create stores fork, deadline and sub-workflow columns; a fork's source must be the
 *   same tenant's, and forkedFromVersion needs forkedFromExecutionId; update sets deadlineAt;
 * - createChild is idempotent on (parent, node, childKey): repeated and racing calls
 *   make one row (`created` tells which call made it); getChild/listChildren find it (listChildren
 *   also by status);
 *   a parent of another tenant is not found;
 * - listActive pages through queued/running/paused executions of every tenant by id;
 * - recordMany upserts a batch in one statement with record()'s semantics (fields an
 *   entry does not carry are kept, null clears), merges writes of one attempt, and
 *   writes nothing when an entry's execution is not its tenant's;
 * - recordSteps merges the writes of one attempt by step (stepVersion), whatever order they
 *   land in: an entry of an earlier step landing after a later one's only fills columns the
 *   row does not have (it is not counted when there is nothing to fill), so both orders give
 *   the same row; two statements sharing rows listed in opposite orders take the locks in one
 *   order (no deadlock); an execution-row patch of an earlier step than the journal's latest
 *   row is left out; a row keeps the step of its beginning (an entry running or paused with a
 *   step number) as `beganStep` whatever writes follow or land first, also within one batch;
 * - executions.journalFloor reads it (null before the first fence);
 * - executions.fenceJournal raises an execution's journal floor by the room asked for past the
 *   highest of its floor, its journal's steps and its row's last patch (steps of a statement
 *   the fence waited for included); recordSteps then refuses (BATON_STORE_FENCED, nothing
 *   written) a batch with an entry or a patch numbered below its execution's floor, also a
 *   statement that was waiting for the fence's lock, and writes at or above it;
 * - recordSteps writes journal entries and execution-row patches in one statement: a patch
 *   changes only the columns it carries (null clears, updatedAt moves), patches of one
 *   execution merge in order, and a patch or entry of another tenant's execution makes the
 *   whole batch write nothing;
 * - an execution row's `subRunPauses` (node → sub-run id) starts `{}`, is set by a step's patch
 *   or update and kept by patches that do not carry it; a map whose values are not ids is
 *   refused; migration 0009 fills it for paused rows written before it, from their sub-runs;
 * - listForReplay orders by stepVersion (nulls last), then completedAt (rows still running first), then id;
 * - blobs are stored once per tenant under the sha256 of their canonical JSON
 *   (key order does not matter), read back singly or in bulk, and are tenant-scoped;
 * - workflows.getBySlug finds a workflow of the tenant only;
 * - workflows.versionAt gives the version current when a run's tree began: the first run up
 *   its parents and fork sources; null for a workflow created later or another tenant's run;
 * - learning.recordFromJournal records an execution's completed tool nodes in journal order
 *   (tool from the first tool call, "unknown" without one, params = input) with its agent
 *   and session, once per execution; another tenant's execution is not found and nothing
 *   is written.
 */
import { createHash } from "node:crypto";
import pg from "pg";
import { afterAll, describe, expect, it } from "@jest/globals";
import { canonicalJson } from "./blobs.ts";
import { migratedThrough, openTwoTenantStore } from "./testing.ts";
import type { NodeExecutionEntry } from "./types.ts";

// Opened while the module loads (top-level await): two tenants with a workflow each.
const { t, store, tenant, other, wf, theirWf } = await openTwoTenantStore("engine_rows");
afterAll(() => t.dispose());

const newExecution = (input = {}) => store.executions.create(tenant, { workflowId: wf.id, workflowVersion: 1, input });

describe("execution columns for forks, deadlines and children", () => {
  it("stores fork and deadline columns, and updates the deadline", async () => {
    const source = await newExecution({ q: 1 });
    const deadlineAt = new Date(Date.now() + 60_000);
    const fork = await store.executions.create(tenant, {
      workflowId: wf.id, workflowVersion: 1, input: { q: 1 }, forkedFromExecutionId: source.id, forkedFromVersion: 3, deadlineAt, definitionRef: "loop",
    });
    expect(fork).toMatchObject({ forkedFromExecutionId: source.id, forkedFromVersion: 3, deadlineAt, definitionRef: "loop", parentNodeId: null, childKey: null });
    const later = new Date(Date.now() + 120_000);
    expect((await store.executions.update(fork.id, { deadlineAt: later })).deadlineAt).toEqual(later);
    expect((await store.executions.update(fork.id, { deadlineAt: null })).deadlineAt).toBeNull();
  });

  it("refuses a fork of another tenant's execution and a version without a source", async () => {
    const theirs = await store.executions.create(other, { workflowId: theirWf.id, workflowVersion: 1, input: {} });
    await expect(store.executions.create(tenant, { workflowId: wf.id, workflowVersion: 1, input: {}, forkedFromExecutionId: theirs.id, forkedFromVersion: 1 }))
      .rejects.toMatchObject({ code: "BATON_STORE_NOT_FOUND" });
    await expect(store.executions.create(tenant, { workflowId: wf.id, workflowVersion: 1, input: {}, forkedFromVersion: 1 }))
      .rejects.toMatchObject({ code: "BATON_STORE_INVALID_INPUT" });
  });

  it("creates one child per (parent, node, key) however often and concurrently it is asked", async () => {
    const parent = await newExecution();
    const child = { tenantId: tenant, parentExecutionId: parent.id, parentNodeId: "each", childKey: "0.1", agentWorkflowId: wf.id, workflowVersion: 1, input: { item: 0 }, definitionRef: "each" };
    const first = await store.executions.createChild(child);
    expect(first.created).toBe(true);
    expect(first.row).toMatchObject({ parentExecutionId: parent.id, parentNodeId: "each", childKey: "0.1", definitionRef: "each", status: "queued", triggerEvent: "subworkflow", input: { item: 0 } });
    const again = await store.executions.createChild({ ...child, input: { item: "changed" } });
    expect(again).toEqual({ row: first.row, created: false });

    const racing = await Promise.all(Array.from({ length: 8 }, () => store.executions.createChild({ ...child, childKey: "1.1" })));
    expect(racing.filter((r) => r.created)).toHaveLength(1);
    expect(new Set(racing.map((r) => r.row.id)).size).toBe(1);

    expect(await store.executions.getChild(parent.id, "each", "1.1")).toEqual(racing[0]!.row);
    expect(await store.executions.getChild(parent.id, "each", "9.9")).toBeNull();
    expect((await store.executions.listChildren(tenant, parent.id)).map((c) => c.childKey)).toEqual(["0.1", "1.1"]);
    expect(await store.executions.listChildren(other, parent.id)).toEqual([]);
    await store.executions.update(racing[0]!.row.id, { status: "paused" });
    expect((await store.executions.listChildren(tenant, parent.id, { status: "paused" })).map((c) => c.childKey)).toEqual(["1.1"]);
    expect((await store.executions.listChildren(tenant, parent.id, { status: "queued" })).map((c) => c.childKey)).toEqual(["0.1"]);
    await store.executions.update(racing[0]!.row.id, { status: "queued" });
  });

  it("refuses a child of another tenant's parent", async () => {
    const parent = await newExecution();
    await expect(store.executions.createChild({ tenantId: other, parentExecutionId: parent.id, parentNodeId: "n", childKey: "k", agentWorkflowId: theirWf.id, workflowVersion: 1, input: {} }))
      .rejects.toMatchObject({ code: "BATON_STORE_NOT_FOUND" });
    await expect(store.executions.createChild({ tenantId: tenant, parentExecutionId: parent.id, parentNodeId: "", childKey: "k", agentWorkflowId: wf.id, workflowVersion: 1, input: {} }))
      .rejects.toMatchObject({ code: "BATON_STORE_INVALID_INPUT" });
  });

  it("lists active executions of every tenant by id, page by page", async () => {
    const mine = await newExecution();
    const theirs = await store.executions.create(other, { workflowId: theirWf.id, workflowVersion: 1, input: {} });
    const paused = await newExecution();
    await store.executions.update(paused.id, { status: "paused" });
    const done = await newExecution();
    await store.executions.update(done.id, { status: "completed" });

    const all: number[] = [];
    let afterId = 0;
    for (;;) {
      const batch = await store.executions.listActive({ limit: 2, afterId });
      if (batch.length === 0) break;
      all.push(...batch.map((e) => e.id));
      afterId = batch[batch.length - 1]!.id;
    }
    expect(all).toEqual([...all].sort((a, b) => a - b));
    expect(all).toEqual(expect.arrayContaining([mine.id, theirs.id, paused.id]));
    expect(all).not.toContain(done.id);
    const onlyPaused = await store.executions.listActive({ statuses: ["paused"] });
    expect(onlyPaused.map((e) => e.id)).toEqual([paused.id]);
    await expect(store.executions.listActive({ statuses: ["nope" as never] })).rejects.toMatchObject({ code: "BATON_STORE_INVALID_INPUT" });
  });
});

describe("journal batches", () => {
  it("records errorCode, retryable and stepVersion", async () => {
    const ex = await newExecution();
    const row = await store.nodeExecutions.record({ tenantId: tenant, executionId: ex.id, nodeId: "fetch", nodeType: "tool", attempt: 1, status: "failed", error: "timed out", errorCode: "BATON_TOOL_TIMEOUT", retryable: true, stepVersion: 4 });
    expect(row).toMatchObject({ errorCode: "BATON_TOOL_TIMEOUT", retryable: true, stepVersion: 4 });
  });

  it("upserts a batch with record()'s semantics", async () => {
    const ex = await newExecution();
    const base = { tenantId: tenant, executionId: ex.id, nodeType: "tool" };
    const startedAt = new Date(Date.now() - 5000);
    expect(await store.nodeExecutions.recordMany([
      { ...base, nodeId: "a", attempt: 1, status: "running", input: { x: 1 }, startedAt, stepVersion: 1 },
      { ...base, nodeId: "b", attempt: 1, status: "running", stepVersion: 1 },
      // Same attempt twice in one batch: merged in order.
      { ...base, nodeId: "b", attempt: 1, status: "completed", output: { ok: true } },
    ])).toBe(2);
    const completedAt = new Date();
    expect(await store.nodeExecutions.recordMany([
      { ...base, nodeId: "a", attempt: 1, status: "failed", error: "boom", errorCode: "E_BOOM", retryable: false, completedAt, durationMs: 7 },
      { ...base, nodeId: "b", attempt: 1, status: "completed", output: null, stepVersion: 2 },
      { ...base, nodeId: "a", attempt: 2, status: "running", stepVersion: 2 },
    ])).toBe(3);
    const rows = await store.nodeExecutions.listById(ex.id);
    const a1 = rows.find((r) => r.nodeId === "a" && r.attempt === 1)!;
    expect(a1).toMatchObject({ status: "failed", input: { x: 1 }, error: "boom", errorCode: "E_BOOM", retryable: false, stepVersion: 1, durationMs: 7, startedAt, completedAt });
    expect(rows.find((r) => r.nodeId === "b")).toMatchObject({ status: "completed", output: null, stepVersion: 2 });
    expect(rows).toHaveLength(3);
    expect(await store.nodeExecutions.recordMany([])).toBe(0);
  });

  it("latest: the row of a node's highest attempt, or null", async () => {
    const ex = await newExecution();
    const base = { tenantId: tenant, executionId: ex.id, nodeType: "humanReview" };
    // Written out of order: the latest is the highest attempt, not the last written.
    await store.nodeExecutions.recordMany([
      { ...base, nodeId: "r", attempt: 2, status: "paused", stepVersion: 5 },
      { ...base, nodeId: "r", attempt: 1, status: "failed", errorCode: "BATON_CANCELLED", stepVersion: 3 },
      { ...base, nodeId: "s", attempt: 3, status: "completed", stepVersion: 6 },
    ]);
    expect(await store.nodeExecutions.latest(ex.id, "r")).toMatchObject({ nodeId: "r", attempt: 2, status: "paused" });
    expect(await store.nodeExecutions.latest(ex.id, "s")).toMatchObject({ nodeId: "s", attempt: 3 });
    expect(await store.nodeExecutions.latest(ex.id, "none")).toBeNull();
    expect(await store.nodeExecutions.latest(-1, "r")).toBeNull();
  });

  it("writes nothing of a batch holding an entry of another tenant's execution", async () => {
    const ex = await newExecution();
    const theirs = await store.executions.create(other, { workflowId: theirWf.id, workflowVersion: 1, input: {} });
    await expect(store.nodeExecutions.recordMany([
      { tenantId: tenant, executionId: ex.id, nodeId: "a", nodeType: "t", attempt: 1, status: "running" },
      { tenantId: tenant, executionId: theirs.id, nodeId: "a", nodeType: "t", attempt: 1, status: "running" },
    ])).rejects.toMatchObject({ code: "BATON_STORE_NOT_FOUND" });
    expect(await store.nodeExecutions.listById(ex.id)).toEqual([]);
    expect(await store.nodeExecutions.listById(theirs.id)).toEqual([]);
    await expect(store.nodeExecutions.recordMany([{ tenantId: tenant, executionId: ex.id, nodeId: "a", nodeType: "t", attempt: 0, status: "x" }]))
      .rejects.toMatchObject({ code: "BATON_STORE_INVALID_INPUT" });
  });

  it("writes journal entries and execution patches together", async () => {
    const ex = await newExecution({ q: 1 });
    await store.executions.update(ex.id, { output: { old: true }, error: "old" });
    const before = (await store.executions.getById(ex.id))!;
    const startedAt = new Date("2026-11-21T10:00:00.000Z");
    const completedAt = new Date("2026-11-21T10:00:01.000Z");
    expect(await store.nodeExecutions.recordSteps({
      entries: [
        { tenantId: tenant, executionId: ex.id, nodeId: "a", nodeType: "tool", attempt: 1, status: "running", stepVersion: 1 },
        { tenantId: tenant, executionId: ex.id, nodeId: "a", nodeType: "tool", attempt: 1, status: "completed", output: { v: 1 }, stepVersion: 2 },
      ],
      executions: [
        { id: ex.id, tenantId: tenant, patch: { status: "running", currentState: "a", context: { step: 1 }, startedAt } },
        { id: ex.id, tenantId: tenant, patch: { status: "completed", output: null, completedAt, tokenUsage: { total: 3 } } },
      ],
    })).toEqual({ journaled: 1, updated: 1 });
    const after = (await store.executions.getById(ex.id))!;
    expect(after).toMatchObject({ status: "completed", currentState: "a", context: { step: 1 }, output: null, error: "old", startedAt, completedAt, tokenUsage: { total: 3 }, input: { q: 1 } });
    expect(after.updatedAt.getTime()).toBeGreaterThanOrEqual(before.updatedAt.getTime());
    expect(await store.nodeExecutions.listById(ex.id)).toEqual([expect.objectContaining({ nodeId: "a", status: "completed", output: { v: 1 }, stepVersion: 2 })]);
    expect(await store.nodeExecutions.recordSteps({ entries: [], executions: [] })).toEqual({ journaled: 0, updated: 0 });
  });

  it("merges the writes of one attempt by step, whichever lands first", async () => {
    const ex = await newExecution();
    const row = { tenantId: tenant, executionId: ex.id, nodeId: "x", nodeType: "tool", attempt: 1 };
    const startedAt = new Date("2026-11-21T10:00:00.000Z");
    // Step 5 completed x before step 4's "running" (with the input and the call) landed.
    expect(await store.nodeExecutions.recordSteps({ entries: [{ ...row, status: "completed", output: { v: 5 }, startedAt, stepVersion: 5 }], executions: [] })).toEqual({ journaled: 1, updated: 0 });
    expect(await store.nodeExecutions.recordSteps({
      entries: [
        { ...row, status: "running", input: { v: 4 }, toolCalls: [{ callId: "c4" }], output: { v: 4 }, startedAt: new Date("2026-11-21T09:00:00.000Z"), stepVersion: 4 },
        { ...row, nodeId: "y", status: "running", stepVersion: 4 },
      ],
      executions: [],
    })).toEqual({ journaled: 2, updated: 0 });
    let rows = await store.nodeExecutions.listById(ex.id);
    // The later step's status and columns stay; the earlier one only filled what was missing.
    expect(rows.find((r) => r.nodeId === "x")).toMatchObject({ status: "completed", output: { v: 5 }, input: { v: 4 }, toolCalls: [{ callId: "c4" }], startedAt, stepVersion: 5 });
    expect(rows.find((r) => r.nodeId === "y")).toMatchObject({ status: "running", stepVersion: 4 });
    // Landing again, with nothing left to fill, it writes nothing.
    expect(await store.nodeExecutions.recordSteps({ entries: [{ ...row, status: "running", input: { v: 4 }, stepVersion: 4 }], executions: [] })).toEqual({ journaled: 0, updated: 0 });
    // The same step written again (a redo after a crash) and later steps still write.
    expect(await store.nodeExecutions.recordSteps({ entries: [{ ...row, status: "completed", output: { v: 5 }, durationMs: 9, stepVersion: 5 }], executions: [] })).toEqual({ journaled: 1, updated: 0 });
    rows = await store.nodeExecutions.listById(ex.id);
    expect(rows.find((r) => r.nodeId === "x")).toMatchObject({ status: "completed", durationMs: 9, input: { v: 4 } });
  });

  it("keeps the step that began an attempt (its write running or paused) when later steps write the row, whichever lands first", async () => {
    const ex = await newExecution();
    const row = { tenantId: tenant, executionId: ex.id, nodeType: "tool", attempt: 1 };
    const rowOf = async (nodeId: string) => (await store.nodeExecutions.listById(ex.id)).find((r) => r.nodeId === nodeId);
    // One statement with a's beginning (step 3) and its end (step 4): the writes merge, the beginning's step stays.
    await store.nodeExecutions.recordSteps({ entries: [{ ...row, nodeId: "a", status: "running", input: { a: 0 }, stepVersion: 3 }, { ...row, nodeId: "a", status: "completed", output: { a: 1 }, stepVersion: 4 }], executions: [] });
    expect(await rowOf("a")).toMatchObject({ status: "completed", stepVersion: 4, beganStep: 3 });
    // b's end (step 6) lands before its beginning (step 5), which has nothing else to fill: it still counts, for the step.
    await store.nodeExecutions.recordSteps({ entries: [{ ...row, nodeId: "b", status: "completed", input: { b: 0 }, output: { b: 1 }, stepVersion: 6 }], executions: [] });
    expect(await rowOf("b")).toMatchObject({ status: "completed", stepVersion: 6, beganStep: null });
    expect(await store.nodeExecutions.recordSteps({ entries: [{ ...row, nodeId: "b", status: "running", input: { b: 0 }, stepVersion: 5 }], executions: [] })).toEqual({ journaled: 1, updated: 0 });
    expect(await rowOf("b")).toMatchObject({ status: "completed", stepVersion: 6, beganStep: 5, output: { b: 1 } });
    // A review's beginning is a pause; its end keeps the step.
    await store.nodeExecutions.recordSteps({ entries: [{ ...row, nodeId: "r", nodeType: "agent.humanReview", status: "paused", stepVersion: 7 }], executions: [] });
    await store.nodeExecutions.recordSteps({ entries: [{ ...row, nodeId: "r", nodeType: "agent.humanReview", status: "completed", output: { decision: "approve" }, stepVersion: 9 }], executions: [] });
    expect(await rowOf("r")).toMatchObject({ status: "completed", stepVersion: 9, beganStep: 7 });
    // Writes without a step number say nothing of it.
    await store.nodeExecutions.recordMany([{ ...row, nodeId: "n", status: "running" }]);
    expect(await rowOf("n")).toMatchObject({ status: "running", stepVersion: null, beganStep: null });
    const replay = await store.nodeExecutions.listForReplay(ex.id);
    expect(replay.map((r) => [r.nodeId, r.beganStep])).toEqual([["a", 3], ["b", 5], ["r", 7], ["n", null]]);
  });

  it("gives the same rows whichever of two steps' statements lands first", async () => {
    const startedAt = new Date("2026-11-21T10:00:00.000Z");
    const completedAt = new Date("2026-11-21T10:00:01.000Z");
    // Two steps of a graph: step 1 completes a and begins b and c; step 2 completes c, then
    // b (their answers came in that order). The two statements share two rows, listed in
    // opposite orders: written as listed, running together they could deadlock.
    const steps = (id: number): NodeExecutionEntry[][] => [
      [
        { tenantId: tenant, executionId: id, nodeId: "a", nodeType: "tool", attempt: 1, status: "completed", output: { a: 1 }, startedAt, completedAt, stepVersion: 1 },
        { tenantId: tenant, executionId: id, nodeId: "b", nodeType: "tool", attempt: 1, status: "running", input: { b: 0 }, toolCalls: [{ callId: "b1" }], startedAt: completedAt, stepVersion: 1 },
        { tenantId: tenant, executionId: id, nodeId: "c", nodeType: "tool", attempt: 1, status: "running", input: { c: 0 }, toolCalls: [{ callId: "c1" }], startedAt: completedAt, stepVersion: 1 },
      ],
      [
        { tenantId: tenant, executionId: id, nodeId: "c", nodeType: "tool", attempt: 1, status: "completed", input: { c: 0 }, output: { c: 1 }, durationMs: 2, startedAt: completedAt, completedAt, stepVersion: 2 },
        { tenantId: tenant, executionId: id, nodeId: "b", nodeType: "tool", attempt: 1, status: "completed", input: { b: 0 }, output: { b: 1 }, durationMs: 3, startedAt: completedAt, completedAt, stepVersion: 2 },
      ],
    ];
    const shape = (rows: Awaited<ReturnType<typeof store.nodeExecutions.listById>>) =>
      rows.map(({ nodeId, status, input, output, toolCalls, durationMs, startedAt: s, completedAt: c, stepVersion, beganStep }) => ({ nodeId, status, input, output, toolCalls, durationMs, s, c, stepVersion, beganStep }))
        .sort((x, y) => x.nodeId.localeCompare(y.nodeId));
    const results = [];
    for (const order of [[0, 1], [1, 0]]) {
      const ex = await newExecution();
      for (const i of order) await store.nodeExecutions.recordSteps({ entries: steps(ex.id)[i]!, executions: [] });
      results.push(shape(await store.nodeExecutions.listById(ex.id)));
    }
    expect(results[0]).toEqual([
      { nodeId: "a", status: "completed", input: null, output: { a: 1 }, toolCalls: null, durationMs: null, s: startedAt, c: completedAt, stepVersion: 1, beganStep: null },
      { nodeId: "b", status: "completed", input: { b: 0 }, output: { b: 1 }, toolCalls: [{ callId: "b1" }], durationMs: 3, s: completedAt, c: completedAt, stepVersion: 2, beganStep: 1 },
      { nodeId: "c", status: "completed", input: { c: 0 }, output: { c: 1 }, toolCalls: [{ callId: "c1" }], durationMs: 2, s: completedAt, c: completedAt, stepVersion: 2, beganStep: 1 },
    ]);
    for (const r of results) expect(r).toEqual(results[0]);
  });

  it("takes the rows' locks in one order, so two statements sharing rows do not deadlock", async () => {
    const ex = await newExecution();
    const entry = (nodeId: string, stepVersion: number): NodeExecutionEntry =>
      ({ tenantId: tenant, executionId: ex.id, nodeId, nodeType: "tool", attempt: 1, status: "completed", output: { nodeId, stepVersion }, stepVersion });
    await store.nodeExecutions.recordSteps({ entries: [entry("b", 1), entry("c", 1)], executions: [] });
    // Another session holds b. Statement 2 lists c before b, statement 3 b before c: written
    // as listed, 2 would hold c while waiting for b, and 3 would take b and wait for c.
    const holder = new pg.Client({ connectionString: t.options.databaseUrl });
    // pg_stat_activity is read from its own session: inside the holder's transaction it would not change.
    const watcher = new pg.Client({ connectionString: t.options.databaseUrl });
    await holder.connect();
    await watcher.connect();
    try {
      await holder.query("BEGIN");
      await holder.query(`SELECT 1 FROM "${t.options.schema}"."agent_workflow_node_executions" WHERE "executionId" = $1 AND "nodeId" = 'b' FOR UPDATE`, [ex.id]);
      const waiting = async (n: number): Promise<void> => {
        for (const until = Date.now() + 5_000; Date.now() < until;) {
          const r = await watcher.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database() AND query LIKE '%agent_workflow_node_executions%'`);
          if (r.rows[0]!.n >= n) return;
          await new Promise((resolve) => setTimeout(resolve, 5));
        }
        throw new Error(`fewer than ${n} statements came to wait for a row lock`);
      };
      // 3 queues for b first, so it gets b when the holder lets go, and then needs c.
      const third = store.nodeExecutions.recordSteps({ entries: [entry("b", 3), entry("c", 3)], executions: [] });
      await waiting(1);
      const second = store.nodeExecutions.recordSteps({ entries: [entry("c", 2), entry("b", 2)], executions: [] });
      await waiting(2);
      await holder.query("COMMIT");
      // 3 wrote first; 2, an earlier step, then had nothing to fill.
      expect(await Promise.all([second, third])).toEqual([{ journaled: 0, updated: 0 }, { journaled: 2, updated: 0 }]);
    } finally {
      await holder.end();
      await watcher.end();
    }
    const rows = await store.nodeExecutions.listById(ex.id);
    expect(rows.map((r) => [r.nodeId, r.stepVersion])).toEqual([["b", 3], ["c", 3]]);
  });

  it("leaves an execution row alone when a patch of an earlier step lands after a later step's rows", async () => {
    const ex = await newExecution();
    const row = { tenantId: tenant, executionId: ex.id, nodeId: "x", nodeType: "tool", attempt: 1 };
    expect(await store.nodeExecutions.recordSteps({
      entries: [{ ...row, status: "completed", stepVersion: 2 }],
      executions: [{ id: ex.id, tenantId: tenant, stepVersion: 2, patch: { status: "completed", output: { done: true } } }],
    })).toEqual({ journaled: 1, updated: 1 });
    // Step 1's records (the start: running) land late. The journal row only gains the step that began it.
    expect(await store.nodeExecutions.recordSteps({
      entries: [{ ...row, status: "running", stepVersion: 1 }],
      executions: [{ id: ex.id, tenantId: tenant, stepVersion: 1, patch: { status: "running", startedAt: new Date() } }],
    })).toEqual({ journaled: 1, updated: 0 });
    expect((await store.nodeExecutions.listById(ex.id))[0]).toMatchObject({ status: "completed", stepVersion: 2, beganStep: 1 });
    expect(await store.executions.getById(ex.id)).toMatchObject({ status: "completed", output: { done: true }, startedAt: null });
    // The latest step's own patch, and a patch without a step, still apply.
    expect(await store.nodeExecutions.recordSteps({ entries: [], executions: [{ id: ex.id, tenantId: tenant, stepVersion: 2, patch: { currentState: "x" } }] })).toEqual({ journaled: 0, updated: 1 });
    expect(await store.nodeExecutions.recordSteps({ entries: [], executions: [{ id: ex.id, tenantId: tenant, patch: { error: "noted" } }] })).toEqual({ journaled: 0, updated: 1 });
    expect(await store.executions.getById(ex.id)).toMatchObject({ status: "completed", currentState: "x", error: "noted" });
    await expect(store.nodeExecutions.recordSteps({ entries: [], executions: [{ id: ex.id, tenantId: tenant, stepVersion: 1.5, patch: {} }] }))
      .rejects.toMatchObject({ code: "BATON_STORE_INVALID_INPUT" });
  });

  it("refuses records numbered below the journal floor a fence set, whole, and writes those at or above it", async () => {
    const ex = await newExecution();
    const theirs = await newExecution();
    const row = { tenantId: tenant, executionId: ex.id, nodeType: "tool", attempt: 1 };
    await store.nodeExecutions.recordSteps({ entries: [{ ...row, nodeId: "a", status: "running", stepVersion: 3 }], executions: [] });
    expect(await store.executions.journalFloor(ex.id, tenant)).toBeNull();
    await expect(store.executions.fenceJournal(ex.id, other, 1000)).rejects.toMatchObject({ code: "BATON_STORE_NOT_FOUND" });
    expect(await store.executions.fenceJournal(ex.id, tenant, 1000)).toBe(1003);
    expect(await store.executions.journalFloor(ex.id, tenant)).toBe(1003);
    await expect(store.executions.journalFloor(ex.id, other)).rejects.toMatchObject({ code: "BATON_STORE_NOT_FOUND" });
    // Each fence rises past the floor before it (the history rebuilt after that one was numbered
    // from it, and may have written nothing yet).
    expect(await store.executions.fenceJournal(ex.id, tenant, 10)).toBe(1013);
    // An entry, or a patch, below the floor: nothing of the batch is written (not the other execution's entry either).
    const refused = { code: "BATON_STORE_FENCED", details: { executionId: ex.id, floor: 1013 } };
    await expect(store.nodeExecutions.recordSteps({
      entries: [{ ...row, nodeId: "a", status: "completed", stepVersion: 4 }, { ...row, executionId: theirs.id, nodeId: "z", status: "running", stepVersion: 1 }],
      executions: [],
    })).rejects.toMatchObject(refused);
    await expect(store.nodeExecutions.recordSteps({ entries: [], executions: [{ id: ex.id, tenantId: tenant, stepVersion: 1002, patch: { status: "completed" } }] }))
      .rejects.toMatchObject(refused);
    expect((await store.nodeExecutions.listById(ex.id)).map((r) => [r.nodeId, r.status])).toEqual([["a", "running"]]);
    expect(await store.nodeExecutions.listById(theirs.id)).toEqual([]);
    expect(await store.executions.getById(ex.id)).toMatchObject({ status: "queued" });
    // At the floor and above: written.
    expect(await store.nodeExecutions.recordSteps({
      entries: [{ ...row, nodeId: "a", status: "completed", stepVersion: 1013 }],
      executions: [{ id: ex.id, tenantId: tenant, stepVersion: 1014, patch: { status: "running" } }],
    })).toEqual({ journaled: 1, updated: 1 });
    // The next fence goes on from the highest of the floor, the journal's steps and the step of
    // the row's last patch (a step that wrote the row only: a pause in a sub-run).
    expect(await store.executions.fenceJournal(ex.id, tenant, 1000)).toBe(2014);
    expect(await store.nodeExecutions.recordSteps({ entries: [], executions: [{ id: ex.id, tenantId: tenant, stepVersion: 2500, patch: { status: "paused" } }] })).toEqual({ journaled: 0, updated: 1 });
    expect(await store.executions.fenceJournal(ex.id, tenant, 1000)).toBe(3500);
  });

  it("refuses a statement that waited for a fence's lock, by the floor the fence set", async () => {
    const ex = await newExecution();
    const entry = (nodeId: string, stepVersion: number): NodeExecutionEntry =>
      ({ tenantId: tenant, executionId: ex.id, nodeId, nodeType: "tool", attempt: 1, status: "completed", stepVersion });
    await store.nodeExecutions.recordSteps({ entries: [entry("a", 1)], executions: [] });
    // A statement of a step holds the row (as the journal statement's lock does) while a fence
    // comes: the fence waits for it and then sets the floor past its rows.
    const holder = new pg.Client({ connectionString: t.options.databaseUrl });
    await holder.connect();
    try {
      await holder.query("BEGIN");
      await holder.query(`SELECT 1 FROM "${t.options.schema}"."agent_workflow_executions" WHERE "id" = $1 FOR KEY SHARE`, [ex.id]);
      let fenced = false;
      const fence = store.executions.fenceJournal(ex.id, tenant, 1000).then((f) => ((fenced = true), f));
      await new Promise((r) => setTimeout(r, 100));
      expect(fenced).toBe(false);
      // The holder's statement writes step 2 and commits.
      await holder.query(`INSERT INTO "${t.options.schema}"."agent_workflow_node_executions" ("tenantId", "executionId", "nodeId", "nodeType", "attempt", "status", "stepVersion")
        VALUES ($1, $2, 'b', 'tool', 1, 'completed', 2)`, [tenant, ex.id]);
      await holder.query("COMMIT");
      // Past the step the holder wrote, by the whole room, as the rebuild numbers past the journal
      // it reads: a stale history numbered between the two would otherwise still write (ADR 004).
      const floor = await fence;
      expect(floor).toBe(1002);
      // Now the fence holds the row: a statement of a step coming meanwhile waits, then is refused.
      await holder.query("BEGIN");
      await holder.query(`SELECT 1 FROM "${t.options.schema}"."agent_workflow_executions" WHERE "id" = $1 FOR UPDATE`, [ex.id]);
      await holder.query(`UPDATE "${t.options.schema}"."agent_workflow_executions" SET "journalFloor" = 5000 WHERE "id" = $1`, [ex.id]);
      const late = store.nodeExecutions.recordSteps({ entries: [entry("c", 3000)], executions: [] });
      late.catch(() => undefined);
      await new Promise((r) => setTimeout(r, 100));
      await holder.query("COMMIT");
      await expect(late).rejects.toMatchObject({ code: "BATON_STORE_FENCED", details: { floor: 5000 } });
    } finally {
      await holder.end();
    }
    expect((await store.nodeExecutions.listById(ex.id)).map((r) => r.nodeId)).toEqual(["a", "b"]);
  });

  it("writes nothing of a step batch holding a patch of another tenant's execution", async () => {
    const ex = await newExecution();
    const theirs = await store.executions.create(other, { workflowId: theirWf.id, workflowVersion: 1, input: {} });
    await expect(store.nodeExecutions.recordSteps({
      entries: [{ tenantId: tenant, executionId: ex.id, nodeId: "a", nodeType: "t", attempt: 1, status: "running" }],
      executions: [
        { id: ex.id, tenantId: tenant, patch: { status: "running" } },
        { id: theirs.id, tenantId: tenant, patch: { status: "cancelled" } },
      ],
    })).rejects.toMatchObject({ code: "BATON_STORE_NOT_FOUND" });
    expect(await store.nodeExecutions.listById(ex.id)).toEqual([]);
    expect((await store.executions.getById(ex.id))!.status).toBe("queued");
    expect((await store.executions.getById(theirs.id))!.status).toBe("queued");
    await expect(store.nodeExecutions.recordSteps({ entries: [], executions: [{ id: ex.id, tenantId: tenant, patch: { status: "sleeping" as "running" } }] }))
      .rejects.toMatchObject({ code: "BATON_STORE_INVALID_INPUT" });
  });

  it("keeps an execution row's pauses in sub-runs as a patch or update sets them", async () => {
    const ex = await newExecution();
    expect(ex.subRunPauses).toEqual({});
    expect(await store.nodeExecutions.recordSteps({
      entries: [], executions: [{ id: ex.id, tenantId: tenant, stepVersion: 3, patch: { status: "paused", currentState: "b", subRunPauses: { a: 41, b: 42 } } }],
    })).toEqual({ journaled: 0, updated: 1 });
    expect(await store.executions.getById(ex.id)).toMatchObject({ status: "paused", currentState: "b", subRunPauses: { a: 41, b: 42 } });
    await store.nodeExecutions.recordSteps({ entries: [], executions: [{ id: ex.id, tenantId: tenant, stepVersion: 4, patch: { currentState: "a" } }] });
    expect((await store.executions.getById(ex.id))!.subRunPauses).toEqual({ a: 41, b: 42 });
    await store.nodeExecutions.recordSteps({ entries: [], executions: [{ id: ex.id, tenantId: tenant, stepVersion: 5, patch: { status: "running", subRunPauses: {} } }] });
    expect((await store.executions.getById(ex.id))!.subRunPauses).toEqual({});
    expect((await store.executions.update(ex.id, { subRunPauses: { c: 7 } })).subRunPauses).toEqual({ c: 7 });
    for (const bad of [{ c: 0 }, { c: "7" }, [7], null]) {
      await expect(store.executions.update(ex.id, { subRunPauses: bad as never })).rejects.toMatchObject({ code: "BATON_STORE_INVALID_INPUT" });
      await expect(store.nodeExecutions.recordSteps({ entries: [], executions: [{ id: ex.id, tenantId: tenant, patch: { subRunPauses: bad as never } }] }))
        .rejects.toMatchObject({ code: "BATON_STORE_INVALID_INPUT" });
    }
    expect((await store.executions.getById(ex.id))!.subRunPauses).toEqual({ c: 7 });
  });

  it("lists for replay by stepVersion, nulls last, then id", async () => {
    const ex = await newExecution();
    const base = { tenantId: tenant, executionId: ex.id, nodeType: "t", attempt: 1, status: "completed" };
    await store.nodeExecutions.recordMany([
      { ...base, nodeId: "late", stepVersion: 3 },
      { ...base, nodeId: "unversioned" },
      { ...base, nodeId: "early", stepVersion: 1 },
      { ...base, nodeId: "early-too", stepVersion: 1 },
    ]);
    expect((await store.nodeExecutions.listForReplay(ex.id)).map((r) => r.nodeId)).toEqual(["early", "early-too", "late", "unversioned"]);
  });

  it("lists the rows of one step in the order they completed, rows still running first", async () => {
    const ex = await newExecution();
    const base = { tenantId: tenant, executionId: ex.id, nodeType: "t", attempt: 1, stepVersion: 4 };
    await store.nodeExecutions.recordMany([
      { ...base, nodeId: "a", status: "completed", completedAt: new Date("2026-01-01T00:00:00.002Z") },
      { ...base, nodeId: "b", status: "completed", completedAt: new Date("2026-01-01T00:00:00.001Z") },
      { ...base, nodeId: "c", status: "running" },
    ]);
    expect((await store.nodeExecutions.listForReplay(ex.id)).map((r) => r.nodeId)).toEqual(["c", "b", "a"]);
  });
});

describe("blobs", () => {
  it("stores a value once under the sha256 of its canonical JSON", async () => {
    const value = { b: [1, { d: "x", c: null }], a: "é" };
    const text = '{"a":"é","b":[1,{"c":null,"d":"x"}]}';
    expect(canonicalJson(value)).toBe(text);
    const hash = createHash("sha256").update(text).digest("hex");
    const ex = await newExecution();
    const put = await store.blobs.put(tenant, ex.id, value);
    expect(put).toEqual({ ref: `blob:${hash}`, hash, size: Buffer.byteLength(text) });
    expect(await store.blobs.put(tenant, ex.id, { a: "é", b: [1, { c: null, d: "x" }] })).toEqual(put);
    expect(await store.prisma.blob.count({ where: { tenantId: tenant, hash } })).toBe(1);
    expect(await store.blobs.get(tenant, put.ref)).toMatchObject({ hash, size: put.size, data: value });
    expect(await store.blobs.get(other, hash)).toBeNull();
  });

  it("reads many at once and refuses malformed hashes", async () => {
    const ex = await newExecution();
    const one = await store.blobs.put(tenant, ex.id, "one");
    const two = await store.blobs.put(tenant, ex.id, [2]);
    const missing = "0".repeat(64);
    const got = await store.blobs.getMany(tenant, [one.ref, two.hash, missing]);
    expect([...got.keys()].sort()).toEqual([one.hash, two.hash].sort());
    expect(got.get(two.hash)?.data).toEqual([2]);
    await expect(store.blobs.get(tenant, "blob:xyz")).rejects.toMatchObject({ code: "BATON_STORE_INVALID_INPUT" });
  });
});

describe("workflows.getBySlug", () => {
  it("finds the tenant's workflow by slug only", async () => {
    expect((await store.workflows.getBySlug(tenant, wf.slug))?.id).toBe(wf.id);
    expect((await store.workflows.getBySlug(other, wf.slug))?.id).toBe(theirWf.id);
    expect(await store.workflows.getBySlug(tenant, "no-such-slug")).toBeNull();
  });
});

describe("workflows.versionAt", () => {
  // Timestamps have millisecond precision: a pause between the writes keeps them apart.
  const tick = () => new Promise((r) => setTimeout(r, 15));
  it("is the version current when the top-level run (or the run it was forked from) was created", async () => {
    const child = await store.workflows.create(tenant, { name: `pinned-${Date.now()}`, definition: { nodes: [] } });
    await tick();
    const top = await newExecution();
    await tick();
    expect((await store.workflows.update(tenant, child.id, { definition: { nodes: [], v: 2 } })).version).toBe(2);
    const { row: kid } = await store.executions.createChild({
      tenantId: tenant, parentExecutionId: top.id, parentNodeId: "sub", childKey: "1", agentWorkflowId: child.id, workflowVersion: 1, input: {},
    });
    const { row: grandchild } = await store.executions.createChild({
      tenantId: tenant, parentExecutionId: kid.id, parentNodeId: "sub", childKey: "1", agentWorkflowId: child.id, workflowVersion: 1, input: {},
    });
    const fork = await store.executions.create(tenant, { workflowId: wf.id, workflowVersion: 1, input: {}, forkedFromExecutionId: kid.id, forkedFromVersion: 1 });
    for (const run of [top, kid, grandchild, fork]) expect(await store.workflows.versionAt(tenant, child.id, run.id)).toBe(1);
    // A run begun after the update sees it; so does a restore, which is a new version.
    await tick();
    const later = await newExecution();
    expect(await store.workflows.versionAt(tenant, child.id, later.id)).toBe(2);
    const v1 = (await store.workflows.listVersions(tenant, child.id))[0]!;
    await tick();
    await store.workflows.restoreVersion(tenant, child.id, v1.id);
    expect(await store.workflows.versionAt(tenant, child.id, later.id)).toBe(2);
    await tick();
    expect(await store.workflows.versionAt(tenant, child.id, (await newExecution()).id)).toBe(3);
    // A workflow created after the run began had no version then.
    const newer = await store.workflows.create(tenant, { name: `newer-${Date.now()}`, definition: { nodes: [] } });
    expect(await store.workflows.versionAt(tenant, newer.id, top.id)).toBeNull();
    // Another tenant's run, or workflow, is not found.
    expect(await store.workflows.versionAt(other, child.id, top.id)).toBeNull();
    expect(await store.workflows.versionAt(tenant, theirWf.id, top.id)).toBeNull();
  });
});

describe("learned sequences from the journal", () => {
  it("records the completed tool nodes in journal order, once", async () => {
    const ex = await store.executions.create(tenant, { workflowId: wf.id, workflowVersion: 1, input: {}, agentId: 7, sessionId: 9 });
    const base = { tenantId: tenant, executionId: ex.id, attempt: 1 };
    const at = (s: number): Date => new Date(Date.now() - 10_000 + s * 1000);
    expect(await store.nodeExecutions.recordMany([
      { ...base, nodeId: "summarise", nodeType: "tool", status: "completed", input: { text: "x" }, toolCalls: [{ tool: "text.summarise" }], startedAt: at(3) },
      { ...base, nodeId: "search", nodeType: "tool", status: "completed", input: { q: "cats" }, toolCalls: [{ tool: "web.search" }], startedAt: at(1) },
      { ...base, nodeId: "flaky", nodeType: "tool", status: "failed", input: {}, toolCalls: [{ tool: "web.flaky" }], startedAt: at(2) },
      { ...base, nodeId: "decide", nodeType: "condition", status: "completed", startedAt: at(2) },
      { ...base, nodeId: "bare", nodeType: "tool", status: "completed", startedAt: at(4) },
    ])).toBe(5);

    expect(await store.learning.recordFromJournal({ tenantId: tenant, executionId: ex.id, successful: true })).toEqual({ tools: ["web.search", "text.summarise", "unknown"] });
    // A repeat (a redelivered event) keeps the first record.
    await store.learning.recordFromJournal({ tenantId: tenant, executionId: ex.id, successful: false });
    const rows = (await store.learning.list(tenant)).filter((r) => r.executionId === ex.id);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({
      agentId: 7,
      sessionId: 9,
      successful: true,
      tools: [
        { nodeId: "search", tool: "web.search", params: { q: "cats" } },
        { nodeId: "summarise", tool: "text.summarise", params: { text: "x" } },
        { nodeId: "bare", tool: "unknown", params: null },
      ],
    });
  });

  it("does not record another tenant's execution", async () => {
    const theirs = await store.executions.create(other, { workflowId: theirWf.id, workflowVersion: 1, input: {} });
    await expect(store.learning.recordFromJournal({ tenantId: tenant, executionId: theirs.id, successful: true })).rejects.toMatchObject({ code: "BATON_STORE_NOT_FOUND" });
    expect((await store.learning.list(tenant)).map((r) => r.executionId)).not.toContain(theirs.id);
    // Its own tenant still records it (nothing was written under the executionId).
    expect(await store.learning.recordFromJournal({ tenantId: other, executionId: theirs.id, successful: true })).toEqual({ tools: [] });
    expect((await store.learning.list(other)).map((r) => r.executionId)).toContain(theirs.id);
  });
});

describe("migration 0009", () => {
  it("fills the pauses in sub-runs of paused rows from their paused sub-runs and the sub-runs at their pause point", async () => {
    const { client, migrateRest, dispose } = await migratedThrough("subrun_mig", "0008_version_configs");
    try {
      await client.query(`INSERT INTO tenants (id, name) VALUES ('t1', 'one')`);
      await client.query(`INSERT INTO agent_workflows (id, "tenantId", name, slug, definition) VALUES (1, 't1', 'w', 'w', '{}')`);
      const run = (id: number, status: string, currentState: string | null, parent?: [number, string, string]) =>
        client.query(`INSERT INTO agent_workflow_executions (id, "tenantId", "agentWorkflowId", "workflowVersion", status, "currentState", "parentExecutionId", "parentNodeId", "childKey")
          VALUES ($1, 't1', 1, 1, $2, $3, $4, $5, $6)`, [id, status, currentState, parent?.[0] ?? null, parent?.[1] ?? null, parent?.[2] ?? null]);
      // 1: paused at `each` (a forEach: items 11 and 12 paused, 13 running) and at `sub`
      // (14, paused); `done`'s child ended long ago.
      await run(1, "paused", "sub");
      await run(11, "paused", "r", [1, "each", "1.0"]);
      await run(12, "paused", "r", [1, "each", "1.1"]);
      await run(13, "running", null, [1, "each", "1.2"]);
      await run(14, "paused", "r", [1, "sub", "1"]);
      await run(15, "completed", null, [1, "done", "1"]);
      // 2: paused at `sub`, whose child was decided (running again): the pause at its pause point is kept.
      await run(2, "paused", "sub");
      await run(21, "completed", null, [2, "sub", "1"]);
      await run(22, "running", null, [2, "sub", "2"]);
      // 3: paused at a review of its own; 4: running while a sub-run is paused (not announced yet).
      await run(3, "paused", "r");
      await run(4, "running", "a");
      await run(41, "paused", "r", [4, "a", "1"]);

      await migrateRest();
      const { rows } = await client.query<{ id: number; subRunPauses: unknown }>(`SELECT id, "subRunPauses" FROM agent_workflow_executions WHERE id < 10 ORDER BY id`);
      expect(rows).toEqual([
        { id: 1, subRunPauses: { each: 11, sub: 14 } },
        { id: 2, subRunPauses: { sub: 22 } },
        { id: 3, subRunPauses: {} },
        { id: 4, subRunPauses: {} },
      ]);
    } finally {
      await dispose();
    }
  });
});
