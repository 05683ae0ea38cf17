/**
 * Admission of executions through the real services (gateway, worker and executor in this
 * process, a second executor replica beside it for one test), with `BATON_TENANT_MAX_RUNNING=2`.
 * Rules checked:
 * - a burst of starts never runs more than the cap at once, in one executor and across two
 *   replicas; every run completes, the waiting ones in the order they were started;
 * - a start turned away by the cap waits queued with no redelivery to run out: the recovery
 *   sweep starts it when a slot freed without a run of the tenant ending (no wake-up);
 * - a queued run can be cancelled: it ends `cancelled` (no start, no journal, `completedAt`),
 *   its events end with `execution.cancelled`, and it never starts afterwards;
 * - a child's input is checked against its workflow's `inputSchema`: the parent's node fails
 *   with BATON_EXECUTOR_CHILD_INPUT_INVALID listing the violations (its journal row carries
 *   the code, for the parent's retries and branches), and no child row is made;
 * - a fork from a paused checkpoint with an edited context runs through the executor to the
 *   edited result and records the execution and version it came from; a fork taken
 *   mid-forEach runs only the items not done at that version;
 * - a queued run whose deadline passes while it waits for a slot fails then (its deadline
 *   timer admits it past the cap), and none of its nodes runs;
 * - an execution started on version 1 keeps running version 1 when the workflow is updated
 *   while it is paused.
 */
import { describe, expect, it } from "@jest/globals";
import { loadConfig } from "@baton/config";
import { createLogger } from "@baton/telemetry";
import type { Executor } from "@baton/executor";
import { startBaton } from "../bin/start.ts";
import { waitFor } from "./helpers.ts";
import { children, collectEvents, createDefinition, eventNames, forkAtPause, getExecution, journal, startExecution, suiteInProcess, uniq, waitForExecution } from "./workflows.ts";

const CAP = 2;
const h = await suiteInProcess("admission-int", { BATON_TENANT_MAX_RUNNING: String(CAP) });
const { config, env, a, store, rec, tenantId } = h;

/** A one-node workflow: `rec.sleep` for `ms`, counted on the gauge `gauge`. */
function sleeper(gauge: string, ms: number): Promise<number> {
  return createDefinition(a, `sleep-${uniq()}`, { nodes: [{ id: "s", type: "tool", config: { tool: "rec.sleep" }, input: { ms, gauge, v: "$.input.i" } }] });
}

/** Starts `n` runs at once and waits for all of them; returns the ids in start order and the order they began in. */
async function burst(gauge: string, n: number, ms: number): Promise<{ ids: number[]; began: number[] }> {
  const wf = await sleeper(gauge, ms);
  const ids = await Promise.all(Array.from({ length: n }, (_, i) => startExecution(a, wf, { i })));
  for (const id of ids) {
    const done = await waitForExecution(a, id, ["completed", "failed", "cancelled"], 60_000);
    expect({ id, status: done.status }).toEqual({ id, status: "completed" });
  }
  const began = (await rec.calls()).map((c) => Number(c.split(".")[0])).filter((id) => ids.includes(id));
  return { ids, began };
}

describe(`BATON_TENANT_MAX_RUNNING=${CAP}`, () => {
  it("a burst of starts in one executor runs at most the cap at once, and every run completes", async () => {
    const { ids, began } = await burst("one-executor", 6, 700);
    const gauge = await rec.gauge("one-executor");
    expect(gauge).toHaveLength(6);
    expect(Math.max(...gauge)).toBeLessThanOrEqual(CAP);
    // The first CAP to be admitted may be any of the burst; after that the oldest waiting runs
    // go first. Runs woken by the same freed slots are admitted at once and may begin in either
    // order; a younger run may begin before an older one only then, not a whole run (700 ms) later.
    const waited = began.slice(CAP);
    const startedAt = new Map(await Promise.all(waited.map(async (id) => [id, Date.parse((await getExecution(a, id)).startedAt!)] as const)));
    const inversions = waited.flatMap((x, i) =>
      waited.slice(i + 1).filter((y) => y < x).map((y) => ({ older: y, younger: x, apartMs: Math.abs(startedAt.get(x)! - startedAt.get(y)!) })));
    expect(inversions.filter((v) => v.apartMs >= 350)).toEqual([]);
    expect(began.sort()).toEqual([...ids].sort());
  }, 90_000);

  it("two executor replicas together still run at most the cap at once", async () => {
    const replica = await startBaton({ config: loadConfig({ ...env, BATON_TARGET: "executor" }), logger: createLogger("admission-replica", "warn") });
    try {
      await burst("two-replicas", 8, 500);
      const gauge = await rec.gauge("two-replicas");
      expect(gauge).toHaveLength(8);
      expect(Math.max(...gauge)).toBeLessThanOrEqual(CAP);
    } finally {
      await replica.stop();
    }
  }, 90_000);

  it("a start turned away waits queued with no delivery limit; the recovery sweep starts it when a slot frees without a wake-up", async () => {
    const wf = await sleeper("sweep", 10);
    // Two runs the executor knows nothing of hold the tenant's slots.
    const ghosts = await Promise.all([1, 2].map(async () => {
      const row = await store.executions.create(tenantId, { workflowId: wf, workflowVersion: 1, input: {} });
      await store.executions.update(row.id, { status: "running", startedAt: new Date() });
      return row.id;
    }));
    try {
      const id = await startExecution(a, wf, { i: 1 });
      // Turned away and acknowledged: it stays queued, and nothing retries it in the meantime.
      await new Promise((r) => setTimeout(r, 2_500));
      expect((await getExecution(a, id)).status).toBe("queued");
      expect(await rec.gauge("sweep")).toEqual([]);
      // A slot frees with no run of the tenant ending in an executor: only the sweep can see it.
      await store.executions.update(ghosts[0]!, { status: "completed", completedAt: new Date() });
      const executor = h.baton.manager.get<Executor>("executor");
      expect(await executor.recover()).toBeGreaterThanOrEqual(1);
      expect((await waitForExecution(a, id, ["completed", "failed", "cancelled"])).status).toBe("completed");
    } finally {
      for (const g of ghosts) await store.executions.update(g, { status: "completed", completedAt: new Date() });
    }
  }, 60_000);

  it("a queued run can be cancelled: it ends cancelled with its event, and never starts", async () => {
    const wf = await sleeper("cancel", 2_000);
    const running = await Promise.all([1, 2].map((i) => startExecution(a, wf, { i })));
    await waitFor("both slots taken", async () => ((await rec.gauge("cancel")).length === 2 ? true : undefined));
    const id = await startExecution(a, wf, { i: 3 });
    await new Promise((r) => setTimeout(r, 500));
    expect((await getExecution(a, id)).status).toBe("queued");

    const answer = await a.call("POST", `/api/agent-workflow-executions/${id}/cancel`, { reason: "not needed" });
    expect(answer.status).toBe(202);
    const done = await waitForExecution(a, id, ["cancelled", "completed", "failed"], 10_000);
    expect(done).toMatchObject({ status: "cancelled", startedAt: null, error: "BATON_CANCELLED: not needed" });
    expect(done.completedAt).not.toBeNull();
    const events = await collectEvents(a, config.apiKey!, id, undefined, 5_000);
    expect(eventNames(events)).toEqual(["execution.cancelled"]);

    // The slots free; the cancelled run is not among those started.
    for (const r of running) expect((await waitForExecution(a, r, ["completed", "failed", "cancelled"])).status).toBe("completed");
    await new Promise((r) => setTimeout(r, 500));
    expect((await getExecution(a, id)).status).toBe("cancelled");
    expect(await journal(a, id)).toEqual([]);
    expect((await rec.calls()).filter((c) => c.startsWith(`${id}.`))).toEqual([]);
  }, 60_000);

  it("a queued run whose deadline passes while it waits fails then, without waiting for a slot: none of its nodes runs", async () => {
    const wf = await sleeper("late", 8_000);
    const running = await Promise.all([1, 2].map((i) => startExecution(a, wf, { i })));
    await waitFor("both slots taken", async () => ((await rec.gauge("late")).length === 2 ? true : undefined));
    const id = await startExecution(a, wf, { i: 3 }, { deadlineMs: 300 });
    const done = await waitForExecution(a, id, ["cancelled", "completed", "failed"], 5_000);
    expect({ status: done.status, error: done.error }).toEqual({ status: "failed", error: expect.stringContaining("BATON_DEADLINE_EXCEEDED") });
    // It ended while both slots were still taken.
    for (const r of running) expect((await getExecution(a, r)).status).toBe("running");
    for (const r of running) expect((await waitForExecution(a, r, ["completed", "failed", "cancelled"], 20_000)).status).toBe("completed");
    expect(eventNames(await collectEvents(a, config.apiKey!, id, undefined, 5_000))).toEqual(["execution.started", "execution.failed"]);
    expect(await journal(a, id)).toEqual([]);
    expect((await rec.calls()).filter((c) => c.startsWith(`${id}.`))).toEqual([]);
  }, 60_000);
});

describe("child input, forks and versions through the executor", () => {
  it("a subworkflow child whose input breaks its inputSchema fails the parent's node with the violations; no child row is made", async () => {
    const slug = `typed-${uniq()}`;
    await createDefinition(a, `child-${slug}`, {
      inputSchema: { type: "object", properties: { n: { type: "number" } }, required: ["n"] },
      nodes: [{ id: "c", type: "transform", config: { expression: "input.n + 1" } }],
    }, { slug });
    const wf = await createDefinition(a, `parent-${slug}`, {
      nodes: [
        { id: "sub", type: "subworkflow", config: { workflow: { slug } }, input: { n: "$.input.n" } },
        { id: "after", type: "transform", config: { expression: "sub * 2" } },
      ],
      edges: [{ from: "sub", to: "after" }],
    });

    const bad = await startExecution(a, wf, { n: "oops" });
    const failed = await waitForExecution(a, bad, ["completed", "failed", "cancelled"]);
    expect(failed.status).toBe("failed");
    expect(failed.error).toContain("BATON_EXECUTOR_CHILD_INPUT_INVALID");
    expect(failed.error).toContain("input.n");
    const sub = (await store.nodeExecutions.list(tenantId, bad)).find((n) => n.nodeId === "sub")!;
    expect({ status: sub.status, errorCode: sub.errorCode }).toEqual({ status: "failed", errorCode: "BATON_EXECUTOR_CHILD_INPUT_INVALID" });
    expect(sub.error).toContain("input.n: must be number");
    expect(await children(a, bad)).toEqual([]);

    // The same parent with a good input runs its child.
    const good = await startExecution(a, wf, { n: 4 });
    const done = await waitForExecution(a, good, ["completed", "failed", "cancelled"]);
    expect({ status: done.status, output: done.output }).toEqual({ status: "completed", output: 10 });
  }, 60_000);

  const reviewed = (k: number) => ({
    nodes: [
      { id: "a", type: "tool", config: { tool: "rec.sleep" }, input: { ms: 10, v: "$.input.v" } },
      { id: "b", type: "transform", config: { expression: "a.v * 10" } },
      { id: "review", type: "humanReview", config: { reason: "ok?" } },
      { id: "c", type: "transform", config: { expression: `b + ${k}` } },
    ],
    edges: [{ from: "a", to: "b" }, { from: "b", to: "review" }, { from: "review", to: "c" }],
    output: { c: "$.c" },
  });

  it("a fork from a paused checkpoint with an edited context completes with the edited value and records where it came from", async () => {
    const wf = await createDefinition(a, `fork-${uniq()}`, reviewed(1));
    const { src, at, id } = await forkAtPause(a, wf, { v: 2 }, { "$.b": 100 });
    expect((await a.call("POST", `/api/agent-workflow-executions/${id}/resume`, { action: "approve" })).status).toBe(202);
    const done = await waitForExecution(a, id, ["completed", "failed", "cancelled"]);
    expect(done).toMatchObject({ status: "completed", output: { c: 101 }, forkedFromExecutionId: src, forkedFromVersion: at, workflowVersion: 1 });
    // The fork took a's result from the source: the tool did not run again.
    expect((await rec.calls()).filter((c) => c.startsWith(`${id}.`))).toEqual([]);
    expect((await journal(a, id)).map((n) => `${n.nodeId}:${n.status}`).sort()).toEqual(["c:completed", "review:completed"]);
    // Its execution.started says where it came from, for subscribers that only read events.
    const started = (await collectEvents(a, config.apiKey!, id))[0]!;
    expect([started.event, started.data.data]).toEqual(["execution.started", expect.objectContaining({ id, forked_from_execution_id: src, forked_from_version: at })]);

    // The source is unchanged and still finishes on its own values.
    await a.call("POST", `/api/agent-workflow-executions/${src}/resume`, { action: "approve" });
    expect((await waitForExecution(a, src, ["completed", "failed"])).output).toEqual({ c: 21 });
  }, 60_000);

  it("a fork taken mid-forEach keeps the items done at that version and runs only the others", async () => {
    const wf = await createDefinition(a, `fork-each-${uniq()}`, {
      nodes: [{ id: "each", type: "forEach", config: { items: "$.input.xs", tool: "rec.sleep", concurrency: 1, itemInput: { ms: "$.item.ms", v: "$.item.v" } } }],
      output: { vs: "$.each" },
    });
    const xs = [{ ms: 10, v: 1 }, { ms: 10, v: 2 }, { ms: 3000, v: 3 }, { ms: 10, v: 4 }];
    const src = await startExecution(a, wf, { xs });
    await waitFor("the third item to start", async () => ((await rec.calls()).filter((c) => c.startsWith(`${src}.`)).length === 3 ? true : undefined));
    const cps = (await a.call<{ items: { version: number }[] }>("GET", `/api/agent-workflow-executions/${src}/checkpoints`)).body.items;
    const at = Math.max(...cps.map((c) => c.version));
    expect((await a.call("POST", `/api/agent-workflow-executions/${src}/cancel`, {})).status).toBe(202);
    const forked = await a.call<{ id: number }>("POST", `/api/agent-workflow-executions/${src}/fork`, { version: at });
    expect(forked.status).toBe(202);
    const done = await waitForExecution(a, forked.body.id, ["completed", "failed", "cancelled"], 90_000);
    expect({ status: done.status, error: done.error }).toEqual({ status: "completed", error: null });
    expect((done.output as { vs: { v: number }[] }).vs.map((r) => r.v)).toEqual([1, 2, 3, 4]);
    // Items 0 and 1 were done at that version: only items 2 and 3 ran in the fork.
    expect((await rec.calls()).filter((c) => c.startsWith(`${forked.body.id}.`)).map((c) => c.split(".").at(-1)).sort()).toEqual(["2", "3"]);
  }, 120_000);

  it("an execution started on version 1 keeps running version 1 after the workflow is updated while it is paused", async () => {
    const wf = await createDefinition(a, `pinned-${uniq()}`, reviewed(1));
    const id = await startExecution(a, wf, { v: 3 });
    expect((await waitForExecution(a, id, ["paused", "failed"])).status).toBe("paused");
    const updated = await a.call<{ version: number }>("PUT", `/api/agent-workflows/${wf}`, { definition: reviewed(1000), changeDescription: "v2" });
    expect({ status: updated.status, version: updated.body.version }).toEqual({ status: 200, version: 2 });

    await a.call("POST", `/api/agent-workflow-executions/${id}/resume`, { action: "approve" });
    const done = await waitForExecution(a, id, ["completed", "failed", "cancelled"]);
    expect(done).toMatchObject({ status: "completed", output: { c: 31 }, workflowVersion: 1 });
    // A run started now takes version 2.
    const later = await startExecution(a, wf, { v: 3 });
    expect(await waitForExecution(a, later, ["paused", "failed"])).toMatchObject({ status: "paused", workflowVersion: 2 });
    await a.call("POST", `/api/agent-workflow-executions/${later}/resume`, { action: "approve" });
    expect((await waitForExecution(a, later, ["completed", "failed"])).output).toEqual({ c: 1030 });
  }, 60_000);
});
