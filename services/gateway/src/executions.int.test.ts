/**
 * Rules checked (gateway on a real Postgres store, recording bus):
 * - execute: 202 + Location + links; the row is queued and pinned to the workflow's current
 *   version, and the start command carries that version; a missing (or another tenant's)
 *   workflow is 404, a disabled one 409; when the start command cannot be sent the answer is a
 *   503 problem and no queued row is left behind (the row is marked failed with the reason);
 *   the stored definition is validated again, with the same tool lookup as on create: one
 *   that no longer passes (stored broken, or a tool gone since) is a 400 problem+json listing
 *   every problem under `definition`, and no row or start command is written;
 * - execution detail: status, currentState, output, error, tokenUsage, timestamps, per-node
 *   history, and the pending review while paused; the node list; list filters;
 * - resume: 409 unless paused; a paused run gets 202 and a resume command for its current node's
 *   latest pause (its attempt); a run paused in a sub-run (its review is a child's) shows that
 *   review as its pendingReview and answers 409 BATON_GATEWAY_REVIEW_IN_SUBRUN naming the
 *   sub-run, its node and resume URL, sending nothing, unless it has a review of its own
 *   waiting, which a resume without nodeId decides;
 *   `edit` needs `data`; cancel: 409 once ended, 202 otherwise;
 * - another tenant's executions, memory entries and reviews are 404 / absent from lists;
 * - memory: create (memory.created), list with filters, delete (memory.deleted, then 404);
 *   reviews: list with status and execution filters; an execution's reviews include those of
 *   its sub-runs at any depth (each with its own executionId; the pending ones are those its
 *   resume's 409 lists), newest first and paged across them; `subRuns=false` lists its own
 *   only; `subRuns` other than true/false, or without executionId, is a 400 naming it.
 */
import { afterAll, beforeAll, describe, expect, test } from "@jest/globals";
import type { TestGateway } from "./test-support.ts";
import { bearer, openTestGateway, validDefinition, problemOf } from "./test-support.ts";

let gw: TestGateway;
let workflowId: number;

beforeAll(async () => {
  gw = await openTestGateway();
  const wf = await gw.store.workflows.create(gw.a.tenantId, { name: "Runner", definition: validDefinition(1) as never });
  await gw.store.workflows.update(gw.a.tenantId, wf.id, { definition: validDefinition(2) as never });
  workflowId = wf.id;
});
afterAll(async () => {
  await gw.close();
});


async function execute(key: string, id: number, payload: unknown = { input: { q: "hello" } }) {
  return gw.app.inject({ method: "POST", url: `/api/agent-workflows/${id}/execute`, headers: bearer(key), payload: payload as Record<string, unknown> });
}

describe("execute", () => {
  test("202 with links; the row is queued and the command pinned to the current version", async () => {
    const res = await execute(gw.a.operator, workflowId, { input: { q: "hello" }, agentId: 7, sessionId: 9 });
    expect(res.statusCode).toBe(202);
    const body = res.json<{ id: number; status: string; links: Record<string, string> }>();
    expect(body).toEqual({
      id: expect.any(Number),
      status: "queued",
      links: {
        self: `/api/agent-workflow-executions/${body.id}`,
        events: `/api/agent-workflow-executions/${body.id}/events`,
        nodes: `/api/agent-workflow-executions/${body.id}/nodes`,
      },
    });
    expect(res.headers.location).toBe(`/api/agent-workflow-executions/${body.id}`);
    // The start names the row; the executor reads the input from it (a start stays small).
    expect(gw.bus.started).toContainEqual({ tenantId: gw.a.tenantId, executionId: body.id, workflowId, workflowVersion: 2 });
    expect(await gw.store.executions.get(gw.a.tenantId, body.id)).toMatchObject({
      status: "queued",
      agentWorkflowId: workflowId,
      workflowVersion: 2,
      input: { q: "hello" },
      agentId: 7,
      sessionId: 9,
      triggerEvent: "api",
    });
  });

  test("a body is optional; input defaults to {}", async () => {
    const res = await gw.app.inject({ method: "POST", url: `/api/agent-workflows/${workflowId}/execute`, headers: bearer(gw.a.admin) });
    expect(res.statusCode).toBe(202);
    const { id } = res.json<{ id: number }>();
    expect((await gw.store.executions.get(gw.a.tenantId, id))?.input).toEqual({});
    const emptyJson = await gw.app.inject({
      method: "POST",
      url: `/api/agent-workflows/${workflowId}/execute`,
      headers: { ...bearer(gw.a.admin), "content-type": "application/json" },
      payload: "",
    });
    expect(emptyJson.statusCode).toBe(202);
  });

  test("a bad body is 400 naming the fields", async () => {
    const p = problemOf(await execute(gw.a.admin, workflowId, { input: "text", agentId: -1 }), 400, "BATON_GATEWAY_REQUEST_INVALID");
    expect(p.errors!.map((e) => e.path).sort()).toEqual(["body.agentId", "body.input"]);
  });

  test("a missing workflow is 404; another tenant's too", async () => {
    problemOf(await execute(gw.a.admin, 987654), 404, "BATON_GATEWAY_NOT_FOUND");
    problemOf(await execute(gw.b.admin, workflowId), 404, "BATON_GATEWAY_NOT_FOUND");
  });

  test("a stored definition that does not pass validation is 400 listing every problem; nothing is written", async () => {
    const wf = await gw.store.workflows.create(gw.a.tenantId, {
      name: "Stored broken",
      definition: {
        inputSchema: { type: "nonsense" },
        nodes: [{ id: "a", type: "teleport" }, { id: "b", type: "setVariable", config: { values: {} } }],
        edges: [{ from: "a", to: "ghost" }],
      },
    });
    const started = gw.bus.started.length;
    const p = problemOf(await execute(gw.a.operator, wf.id, { input: {} }), 400, "BATON_GATEWAY_WORKFLOW_INVALID");
    expect(p.errors!.map((e) => `${e.code}@${e.path}`)).toEqual([
      "unknown_node_type@definition.nodes[0].type",
      "dangling_edge@definition.edges[0].to",
      "unreachable_node@definition.nodes[1]",
      "invalid_input_schema@definition.inputSchema",
    ]);
    expect(await gw.store.executions.list(gw.a.tenantId, { workflowId: wf.id })).toEqual([]);
    expect(gw.bus.started.length).toBe(started);
  });

  test("a tool unregistered since the workflow was created is refused at execute, as on create", async () => {
    const { validateWorkflowWithTools } = await import("@baton/engine");
    const registered = new Set(["weather.get"]);
    gw.setValidator((d) => validateWorkflowWithTools(d, async (name) => registered.has(name)));
    try {
      const definition = { nodes: [{ id: "w", type: "tool", config: { tool: "weather.get" }, input: { city: "$HOME" } }] };
      const created = await gw.app.inject({ method: "POST", url: "/api/agent-workflows", headers: bearer(gw.a.admin), payload: { name: "Weather", definition } });
      expect(created.statusCode).toBe(201);
      const id = created.json<{ id: number }>().id;
      registered.delete("weather.get");
      const started = gw.bus.started.length;
      const p = problemOf(await execute(gw.a.operator, id, { input: {} }), 400, "BATON_GATEWAY_WORKFLOW_INVALID");
      expect(p.errors).toEqual([{ path: "definition.nodes[0].config.tool", code: "unknown_tool", message: expect.stringContaining('tool "weather.get" is not registered') }]);
      expect(await gw.store.executions.list(gw.a.tenantId, { workflowId: id })).toEqual([]);
      expect(gw.bus.started.length).toBe(started);
      registered.add("weather.get");
      expect((await execute(gw.a.operator, id, { input: {} })).statusCode).toBe(202);
    } finally {
      const { validateWorkflow } = await import("@baton/engine");
      gw.setValidator(validateWorkflow);
    }
  });

  test("a disabled workflow is 409", async () => {
    const wf = await gw.store.workflows.create(gw.a.tenantId, { name: "Off", definition: validDefinition() as never, enabled: false });
    problemOf(await execute(gw.a.admin, wf.id), 409, "BATON_GATEWAY_WORKFLOW_DISABLED");
    expect(await gw.store.executions.list(gw.a.tenantId, { workflowId: wf.id })).toEqual([]);
  });

  test("when the start command fails: 503 problem and no queued row left behind", async () => {
    const wf = await gw.store.workflows.create(gw.a.tenantId, { name: "Bus down", definition: validDefinition() as never });
    gw.bus.failWith = new Error("no responders");
    try {
      const res = await execute(gw.a.admin, wf.id);
      const p = problemOf(res, 503, "BATON_GATEWAY_EXECUTION_START_FAILED");
      expect(JSON.stringify(p)).not.toContain("no responders");
    } finally {
      gw.bus.failWith = null;
    }
    const rows = await gw.store.executions.list(gw.a.tenantId, { workflowId: wf.id });
    expect(rows.filter((r) => r.status === "queued")).toEqual([]);
    for (const r of rows) expect(r).toMatchObject({ status: "failed", error: expect.stringContaining("could not be started") });
  });
});

describe("execution detail, nodes and lists", () => {
  test("detail carries status, current node, output, error, token usage, node history and the pending review", async () => {
    const ex = await gw.store.executions.create(gw.a.tenantId, { workflowId, workflowVersion: 2, input: { a: 1 } });
    const startedAt = new Date("2030-01-01T00:00:00.000Z");
    await gw.store.nodeExecutions.record({ tenantId: gw.a.tenantId, executionId: ex.id, nodeId: "set", nodeType: "setVariable", attempt: 1, status: "completed", output: { x: 2 }, durationMs: 3, startedAt });
    await gw.store.nodeExecutions.record({ tenantId: gw.a.tenantId, executionId: ex.id, nodeId: "check", nodeType: "agent.humanReview", attempt: 1, status: "paused", startedAt: new Date("2030-01-01T00:00:01.000Z") });
    await gw.store.executions.update(ex.id, { status: "paused", currentState: "check", tokenUsage: { total_tokens: 12 }, startedAt });
    const { review } = await gw.store.reviews.createPending({ tenantId: gw.a.tenantId, executionId: ex.id, nodeId: "check", pauseSeq: 1, reason: "approve the refund", payload: { amount: 40 } });

    const res = await gw.app.inject({ method: "GET", url: `/api/agent-workflow-executions/${ex.id}`, headers: bearer(gw.a.viewer) });
    expect(res.statusCode).toBe(200);
    const d = res.json<Record<string, unknown> & { nodes: Record<string, unknown>[] }>();
    expect(d).toMatchObject({
      id: ex.id,
      workflowId,
      workflowVersion: 2,
      status: "paused",
      currentState: "check",
      input: { a: 1 },
      output: null,
      error: null,
      tokenUsage: { total_tokens: 12 },
      startedAt: "2030-01-01T00:00:00.000Z",
      completedAt: null,
      createdAt: expect.any(String),
      pendingReview: { id: review.id, nodeId: "check", status: "pending", reason: "approve the refund", payload: { amount: 40 } },
    });
    expect(d.nodes.map((n) => [n.nodeId, n.status])).toEqual([["set", "completed"], ["check", "paused"]]);
    expect(d.nodes[0]).toMatchObject({ nodeType: "setVariable", attempt: 1, output: { x: 2 }, durationMs: 3, startedAt: "2030-01-01T00:00:00.000Z" });

    const nodes = await gw.app.inject({ method: "GET", url: `/api/agent-workflow-executions/${ex.id}/nodes`, headers: bearer(gw.a.viewer) });
    expect(nodes.statusCode).toBe(200);
    expect(nodes.json<{ items: { nodeId: string }[] }>().items.map((n) => n.nodeId)).toEqual(["set", "check"]);
  });

  test("a run that is not paused has no pending review", async () => {
    const ex = await gw.store.executions.create(gw.a.tenantId, { workflowId, workflowVersion: 2, input: {} });
    await gw.store.executions.update(ex.id, { status: "completed", output: { answer: 42 }, completedAt: new Date() });
    const d = (await gw.app.inject({ method: "GET", url: `/api/agent-workflow-executions/${ex.id}`, headers: bearer(gw.a.viewer) })).json<unknown>();
    expect(d).toMatchObject({ status: "completed", output: { answer: 42 }, pendingReview: null, nodes: [] });
  });

  test("the list filters by workflow and status and pages", async () => {
    const other = await gw.store.workflows.create(gw.a.tenantId, { name: "Other", definition: validDefinition() as never });
    const e1 = await gw.store.executions.create(gw.a.tenantId, { workflowId: other.id, workflowVersion: 1, input: {} });
    const e2 = await gw.store.executions.create(gw.a.tenantId, { workflowId: other.id, workflowVersion: 1, input: {} });
    await gw.store.executions.update(e2.id, { status: "running" });

    const all = await gw.app.inject({ method: "GET", url: `/api/agent-workflow-executions?workflowId=${other.id}`, headers: bearer(gw.a.viewer) });
    expect(all.json<{ items: { id: number }[] }>().items.map((e) => e.id).sort()).toEqual([e1.id, e2.id].sort());
    const running = await gw.app.inject({ method: "GET", url: `/api/agent-workflow-executions?workflowId=${other.id}&status=running`, headers: bearer(gw.a.viewer) });
    expect(running.json<{ items: { id: number }[] }>().items.map((e) => e.id)).toEqual([e2.id]);
    const paged = await gw.app.inject({ method: "GET", url: `/api/agent-workflow-executions?workflowId=${other.id}&limit=1&offset=1`, headers: bearer(gw.a.viewer) });
    expect(paged.json()).toMatchObject({ limit: 1, offset: 1, items: [expect.any(Object)] });
    problemOf(await gw.app.inject({ method: "GET", url: "/api/agent-workflow-executions?status=sleeping", headers: bearer(gw.a.viewer) }), 400, "BATON_GATEWAY_REQUEST_INVALID");
  });
});

describe("resume and cancel", () => {
  /** The journal row a review node writes when it pauses (the engine writes it with the run's status). */
  const pausedAt = (ex: { id: number }, nodeId: string, attempt = 1) =>
    gw.store.nodeExecutions.record({ tenantId: gw.a.tenantId, executionId: ex.id, nodeId, nodeType: "humanReview", attempt, status: "paused", startedAt: new Date() });

  test("resume on a run that is not paused is 409 and sends nothing", async () => {
    const ex = await gw.store.executions.create(gw.a.tenantId, { workflowId, workflowVersion: 2, input: {} });
    await gw.store.executions.update(ex.id, { status: "running", currentState: "set" });
    const before = gw.bus.resumed.length;
    const res = await gw.app.inject({ method: "POST", url: `/api/agent-workflow-executions/${ex.id}/resume`, headers: bearer(gw.a.operator), payload: { action: "approve" } });
    problemOf(res, 409, "BATON_GATEWAY_EXECUTION_NOT_PAUSED");
    expect(gw.bus.resumed.length).toBe(before);
  });

  test("resume on a paused run is 202 and sends the decision for its current node", async () => {
    const ex = await gw.store.executions.create(gw.a.tenantId, { workflowId, workflowVersion: 2, input: {} });
    await gw.store.executions.update(ex.id, { status: "paused", currentState: "review_1" });
    // An earlier pause of the node (a loop's last pass) ended; the decision is for the latest.
    await gw.store.nodeExecutions.record({ tenantId: gw.a.tenantId, executionId: ex.id, nodeId: "review_1", nodeType: "humanReview", attempt: 1, status: "failed", errorCode: "BATON_CANCELLED", startedAt: new Date() });
    await pausedAt(ex, "review_1", 2);
    const res = await gw.app.inject({
      method: "POST",
      url: `/api/agent-workflow-executions/${ex.id}/resume`,
      headers: bearer(gw.a.operator),
      payload: { action: "edit", data: { amount: 30 }, comment: "lower it", reviewer: "ana" },
    });
    expect(res.statusCode).toBe(202);
    expect(res.json()).toMatchObject({ id: ex.id, links: { self: `/api/agent-workflow-executions/${ex.id}` } });
    expect(gw.bus.resumed).toContainEqual({
      tenantId: gw.a.tenantId,
      executionId: ex.id,
      nodeId: "review_1",
      attempt: 2,
      action: "edit",
      data: { amount: 30 },
      comment: "lower it",
      reviewer: "ana",
    });
  });

  test("edit without data, or an unknown action, is 400", async () => {
    const ex = await gw.store.executions.create(gw.a.tenantId, { workflowId, workflowVersion: 2, input: {} });
    await gw.store.executions.update(ex.id, { status: "paused", currentState: "r" });
    const p1 = problemOf(
      await gw.app.inject({ method: "POST", url: `/api/agent-workflow-executions/${ex.id}/resume`, headers: bearer(gw.a.admin), payload: { action: "edit" } }),
      400,
      "BATON_GATEWAY_REQUEST_INVALID",
    );
    expect(p1.errors!.map((e) => e.path)).toEqual(["body.data"]);
    const p2 = problemOf(
      await gw.app.inject({ method: "POST", url: `/api/agent-workflow-executions/${ex.id}/resume`, headers: bearer(gw.a.admin), payload: { action: "maybe" } }),
      400,
      "BATON_GATEWAY_REQUEST_INVALID",
    );
    expect(p2.errors!.map((e) => e.path)).toEqual(["body.action"]);
  });

  test("data with approve or reject is 400 (the engine would drop it), and nothing is sent", async () => {
    const ex = await gw.store.executions.create(gw.a.tenantId, { workflowId, workflowVersion: 2, input: {} });
    await gw.store.executions.update(ex.id, { status: "paused", currentState: "r" });
    await pausedAt(ex, "r");
    const before = gw.bus.resumed.length;
    for (const action of ["approve", "reject"] as const) {
      const data = { amount: 30 };
      const res = await gw.app.inject({ method: "POST", url: `/api/agent-workflow-executions/${ex.id}/resume`, headers: bearer(gw.a.admin), payload: { action, data } });
      const p = problemOf(res, 400, "BATON_GATEWAY_REQUEST_INVALID");
      expect(p.errors).toEqual([{ path: "body.data", code: "custom", message: expect.stringContaining("only taken with action edit") }]);
    }
    expect(gw.bus.resumed.length).toBe(before);
    const ok = await gw.app.inject({ method: "POST", url: `/api/agent-workflow-executions/${ex.id}/resume`, headers: bearer(gw.a.admin), payload: { action: "approve" } });
    expect(ok.statusCode).toBe(202);
  });

  test("a viewer cannot resume", async () => {
    const ex = await gw.store.executions.create(gw.a.tenantId, { workflowId, workflowVersion: 2, input: {} });
    await gw.store.executions.update(ex.id, { status: "paused", currentState: "r" });
    problemOf(
      await gw.app.inject({ method: "POST", url: `/api/agent-workflow-executions/${ex.id}/resume`, headers: bearer(gw.a.viewer), payload: { action: "approve" } }),
      403,
      "BATON_GATEWAY_FORBIDDEN",
    );
  });

  test("cancel on an ended run is 409; on a running one 202 with the command sent", async () => {
    for (const status of ["completed", "failed", "cancelled"] as const) {
      const ex = await gw.store.executions.create(gw.a.tenantId, { workflowId, workflowVersion: 2, input: {} });
      await gw.store.executions.update(ex.id, { status });
      problemOf(
        await gw.app.inject({ method: "POST", url: `/api/agent-workflow-executions/${ex.id}/cancel`, headers: bearer(gw.a.admin) }),
        409,
        "BATON_GATEWAY_EXECUTION_FINISHED",
      );
    }
    const ex = await gw.store.executions.create(gw.a.tenantId, { workflowId, workflowVersion: 2, input: {} });
    await gw.store.executions.update(ex.id, { status: "running" });
    const res = await gw.app.inject({ method: "POST", url: `/api/agent-workflow-executions/${ex.id}/cancel`, headers: bearer(gw.a.admin), payload: { reason: "wrong input" } });
    expect(res.statusCode).toBe(202);
    expect(gw.bus.cancelled).toContainEqual({ tenantId: gw.a.tenantId, executionId: ex.id, reason: "wrong input" });
  });

  /** A parent paused at `sub` because its child waits at review `r` (as the executor leaves the rows), and the child's pending review. */
  async function pausedInSubRun() {
    const parent = await gw.store.executions.create(gw.a.tenantId, { workflowId, workflowVersion: 2, input: {} });
    await gw.store.nodeExecutions.record({ tenantId: gw.a.tenantId, executionId: parent.id, nodeId: "sub", nodeType: "subworkflow", attempt: 1, status: "running", startedAt: new Date() });
    await gw.store.executions.update(parent.id, { status: "paused", currentState: "sub" });
    const { row: child } = await gw.store.executions.createChild({ tenantId: gw.a.tenantId, parentExecutionId: parent.id, parentNodeId: "sub", childKey: "1", agentWorkflowId: workflowId, workflowVersion: 2, input: {} });
    await gw.store.executions.update(child.id, { status: "paused", currentState: "r" });
    await pausedAt(child, "r");
    const { review } = await gw.store.reviews.createPending({ tenantId: gw.a.tenantId, executionId: child.id, nodeId: "r", pauseSeq: 1, reason: "child's", payload: { n: 1 } });
    return { parent, child, review };
  }

  test("a run paused in a sub-run shows the sub-run's pending review, and its resume is 409 naming where to decide", async () => {
    const { parent, child, review } = await pausedInSubRun();
    const d = (await gw.app.inject({ method: "GET", url: `/api/agent-workflow-executions/${parent.id}`, headers: bearer(gw.a.viewer) })).json<Record<string, unknown>>();
    expect(d).toMatchObject({ status: "paused", currentState: "sub", pendingReview: { id: review.id, executionId: child.id, nodeId: "r", reason: "child's", status: "pending" } });

    const before = gw.bus.resumed.length;
    for (const payload of [{ action: "approve" }, { action: "approve", nodeId: "sub" }]) {
      const res = await gw.app.inject({ method: "POST", url: `/api/agent-workflow-executions/${parent.id}/resume`, headers: bearer(gw.a.operator), payload });
      const p = problemOf(res, 409, "BATON_GATEWAY_REVIEW_IN_SUBRUN") as unknown as { detail: string; pendingReviews: unknown[] };
      expect(p.detail).toContain(`sub-run ${child.id} (node "r")`);
      expect(p.pendingReviews).toEqual([{ reviewId: review.id, executionId: child.id, nodeId: "r", resume: `/api/agent-workflow-executions/${child.id}/resume` }]);
    }
    expect(gw.bus.resumed.length).toBe(before);
    // The sub-run decides it.
    const ok = await gw.app.inject({ method: "POST", url: `/api/agent-workflow-executions/${child.id}/resume`, headers: bearer(gw.a.operator), payload: { action: "approve" } });
    expect(ok.statusCode).toBe(202);
    expect(gw.bus.resumed.at(-1)).toMatchObject({ executionId: child.id, nodeId: "r", attempt: 1 });
  });

  test("a run paused in a sub-run with a review of its own decides its own without nodeId; naming another node is still 409", async () => {
    const { parent, child } = await pausedInSubRun();
    await pausedAt(parent, "own");
    await gw.store.reviews.createPending({ tenantId: gw.a.tenantId, executionId: parent.id, nodeId: "own", pauseSeq: 1, reason: "mine", payload: {} });
    const res = await gw.app.inject({ method: "POST", url: `/api/agent-workflow-executions/${parent.id}/resume`, headers: bearer(gw.a.operator), payload: { action: "reject" } });
    expect(res.statusCode).toBe(202);
    expect(gw.bus.resumed.at(-1)).toMatchObject({ executionId: parent.id, nodeId: "own", action: "reject" });
    const sub = await gw.app.inject({ method: "POST", url: `/api/agent-workflow-executions/${parent.id}/resume`, headers: bearer(gw.a.operator), payload: { action: "approve", nodeId: "sub" } });
    expect((problemOf(sub, 409, "BATON_GATEWAY_REVIEW_IN_SUBRUN") as unknown as { pendingReviews: { executionId: number }[] }).pendingReviews.map((r) => r.executionId)).toEqual([child.id]);
  });

  test("when the bus is down, resume and cancel answer 503", async () => {
    const ex = await gw.store.executions.create(gw.a.tenantId, { workflowId, workflowVersion: 2, input: {} });
    await gw.store.executions.update(ex.id, { status: "paused", currentState: "r" });
    await pausedAt(ex, "r");
    gw.bus.failWith = new Error("timeout");
    try {
      problemOf(
        await gw.app.inject({ method: "POST", url: `/api/agent-workflow-executions/${ex.id}/resume`, headers: bearer(gw.a.admin), payload: { action: "approve" } }),
        503,
        "BATON_GATEWAY_COMMAND_UNAVAILABLE",
      );
      problemOf(await gw.app.inject({ method: "POST", url: `/api/agent-workflow-executions/${ex.id}/cancel`, headers: bearer(gw.a.admin) }), 503, "BATON_GATEWAY_COMMAND_UNAVAILABLE");
    } finally {
      gw.bus.failWith = null;
    }
  });
});

describe("tenant isolation of executions, memory and reviews", () => {
  test("tenant B gets 404 on every route of A's execution, and A's rows are not in B's lists", async () => {
    const ex = await gw.store.executions.create(gw.a.tenantId, { workflowId, workflowVersion: 2, input: {} });
    await gw.store.executions.update(ex.id, { status: "paused", currentState: "r" });
    await gw.store.reviews.createPending({ tenantId: gw.a.tenantId, executionId: ex.id, nodeId: "r", pauseSeq: 1, reason: "check", payload: {} });
    const asB = bearer(gw.b.admin);
    const base = `/api/agent-workflow-executions/${ex.id}`;
    for (const c of [
      { method: "GET" as const, url: base },
      { method: "GET" as const, url: `${base}/nodes` },
      { method: "GET" as const, url: `${base}/events` },
      { method: "POST" as const, url: `${base}/resume`, payload: { action: "approve" } },
      { method: "POST" as const, url: `${base}/cancel` },
    ]) {
      problemOf(await gw.app.inject({ ...c, headers: asB }), 404, "BATON_GATEWAY_NOT_FOUND");
    }
    const list = await gw.app.inject({ method: "GET", url: "/api/agent-workflow-executions?limit=200", headers: asB });
    expect(list.json<{ items: unknown[] }>().items).toEqual([]);
    const reviews = await gw.app.inject({ method: "GET", url: `/api/reviews?executionId=${ex.id}`, headers: asB });
    expect(reviews.json<{ items: unknown[] }>().items).toEqual([]);
    expect(gw.bus.resumed.some((r) => r.executionId === ex.id)).toBe(false);
    expect(gw.bus.cancelled.some((r) => r.executionId === ex.id)).toBe(false);
  });
});

describe("memory", () => {
  test("create, list with filters, delete; events published; another tenant sees nothing", async () => {
    const created = await gw.app.inject({
      method: "POST",
      url: "/api/agent-memory",
      headers: bearer(gw.a.operator),
      payload: { agentId: 3, userId: 11, key: "preferred-language", content: "answers in French", metadata: { source: "chat" } },
    });
    expect(created.statusCode).toBe(201);
    const m = created.json<{ id: number }>();
    expect(m).toMatchObject({ agentId: 3, userId: 11, key: "preferred-language", content: "answers in French", metadata: { source: "chat" } });
    expect(gw.bus.published).toContainEqual({ type: "memory.created", tenantId: gw.a.tenantId, scopeId: m.id, data: { id: m.id, agent_id: 3, key: "preferred-language" } });
    // Its Location can be read back.
    expect(created.headers["location"]).toBe(`/api/agent-memory/${m.id}`);
    const read = await gw.app.inject({ method: "GET", url: created.headers["location"], headers: bearer(gw.a.viewer) });
    expect([read.statusCode, read.json()]).toEqual([200, m]);
    await gw.app.inject({ method: "POST", url: "/api/agent-memory", headers: bearer(gw.a.operator), payload: { agentId: 4, key: "k", content: "other agent" } });

    const byAgent = await gw.app.inject({ method: "GET", url: "/api/agent-memory?agentId=3", headers: bearer(gw.a.viewer) });
    expect(byAgent.json<{ items: { id: number }[] }>().items.map((x) => x.id)).toEqual([m.id]);
    const byUser = await gw.app.inject({ method: "GET", url: "/api/agent-memory?agentId=3&userId=12", headers: bearer(gw.a.viewer) });
    expect(byUser.json<{ items: unknown[] }>().items).toEqual([]);

    const asB = bearer(gw.b.admin);
    expect((await gw.app.inject({ method: "GET", url: "/api/agent-memory", headers: asB })).json<{ items: unknown[] }>().items).toEqual([]);
    problemOf(await gw.app.inject({ method: "DELETE", url: `/api/agent-memory/${m.id}`, headers: asB }), 404, "BATON_GATEWAY_NOT_FOUND");
    problemOf(await gw.app.inject({ method: "GET", url: `/api/agent-memory/${m.id}`, headers: asB }), 404, "BATON_GATEWAY_NOT_FOUND");

    const del = await gw.app.inject({ method: "DELETE", url: `/api/agent-memory/${m.id}`, headers: bearer(gw.a.admin) });
    expect(del.statusCode).toBe(204);
    expect(gw.bus.published).toContainEqual({ type: "memory.deleted", tenantId: gw.a.tenantId, scopeId: m.id, data: { id: m.id, agent_id: 3 } });
    problemOf(await gw.app.inject({ method: "DELETE", url: `/api/agent-memory/${m.id}`, headers: bearer(gw.a.admin) }), 404, "BATON_GATEWAY_NOT_FOUND");
    problemOf(await gw.app.inject({ method: "GET", url: `/api/agent-memory/${m.id}`, headers: bearer(gw.a.admin) }), 404, "BATON_GATEWAY_NOT_FOUND");
  });

  test("a bad memory entry is 400 listing every field", async () => {
    const p = problemOf(
      await gw.app.inject({ method: "POST", url: "/api/agent-memory", headers: bearer(gw.a.admin), payload: { agentId: "x", key: "", content: 5 } }),
      400,
      "BATON_GATEWAY_REQUEST_INVALID",
    );
    expect(p.errors!.map((e) => e.path).sort()).toEqual(["body.agentId", "body.content", "body.key"]);
    // Content of spaces only is blank too: named here, not refused later by the store under its own code.
    const blank = problemOf(
      await gw.app.inject({ method: "POST", url: "/api/agent-memory", headers: bearer(gw.a.admin), payload: { agentId: 1, key: "k", content: "   " } }),
      400,
      "BATON_GATEWAY_REQUEST_INVALID",
    );
    expect(blank.errors!.map((e) => e.path)).toEqual(["body.content"]);
  });
});

describe("reviews", () => {
  test("lists the tenant's reviews, filtered by status and execution", async () => {
    const ex = await gw.store.executions.create(gw.a.tenantId, { workflowId, workflowVersion: 2, input: {} });
    const { review: r1 } = await gw.store.reviews.createPending({ tenantId: gw.a.tenantId, executionId: ex.id, nodeId: "n1", pauseSeq: 1, reason: "first", payload: {} });
    await gw.store.reviews.resolve(gw.a.tenantId, ex.id, "n1", { status: "approved", decision: {}, reviewer: "ana" });
    const { review: r2 } = await gw.store.reviews.createPending({ tenantId: gw.a.tenantId, executionId: ex.id, nodeId: "n2", pauseSeq: 1, reason: "second", payload: {} });

    const all = await gw.app.inject({ method: "GET", url: `/api/reviews?executionId=${ex.id}`, headers: bearer(gw.a.viewer) });
    expect(all.statusCode).toBe(200);
    expect(all.json<{ items: { id: number }[] }>().items.map((r) => r.id).sort()).toEqual([r1.id, r2.id].sort());
    const pending = await gw.app.inject({ method: "GET", url: `/api/reviews?executionId=${ex.id}&status=pending`, headers: bearer(gw.a.viewer) });
    expect(pending.json<{ items: { id: number; reason: string }[] }>().items).toEqual([expect.objectContaining({ id: r2.id, reason: "second", status: "pending" })]);
    const approved = await gw.app.inject({ method: "GET", url: `/api/reviews?executionId=${ex.id}&status=approved`, headers: bearer(gw.a.viewer) });
    expect(approved.json<{ items: unknown[] }>().items).toEqual([expect.objectContaining({ id: r1.id, reviewer: "ana", resolvedAt: expect.any(String) })]);
  });
});

describe("reviews of a run with sub-runs", () => {
  type Item = { id: number; executionId: number; nodeId: string; status: string };
  const list = async (query: string): Promise<Item[]> => {
    const res = await gw.app.inject({ method: "GET", url: `/api/reviews?${query}`, headers: bearer(gw.a.viewer) });
    expect(res.statusCode).toBe(200);
    return res.json<{ items: Item[] }>().items;
  };
  const child = async (of: number, key: string, status: "paused" | "completed", currentState?: string) => {
    const { row } = await gw.store.executions.createChild({ tenantId: gw.a.tenantId, parentExecutionId: of, parentNodeId: "sub", childKey: key, agentWorkflowId: workflowId, workflowVersion: 2, input: {} });
    await gw.store.executions.update(row.id, { status, ...(currentState ? { currentState } : {}) });
    return row;
  };
  const review = async (executionId: number, nodeId: string) =>
    (await gw.store.reviews.createPending({ tenantId: gw.a.tenantId, executionId, nodeId, pauseSeq: 1, reason: nodeId, payload: {} })).review;

  /** A parent paused in a forEach whose item 1 waits at a review and whose item 2 waits on its own sub-run's review; item 3 was decided and completed. */
  async function run() {
    const parent = await gw.store.executions.create(gw.a.tenantId, { workflowId, workflowVersion: 2, input: {} });
    await gw.store.executions.update(parent.id, { status: "paused", currentState: "sub" });
    const c3 = await child(parent.id, "3", "completed");
    const decided = await review(c3.id, "r");
    await gw.store.reviews.resolve(gw.a.tenantId, c3.id, "r", { status: "approved", decision: {}, reviewer: "ana" });
    const c1 = await child(parent.id, "1", "paused", "r");
    const c2 = await child(parent.id, "2", "paused", "sub");
    const g = await child(c2.id, "1", "paused", "r");
    const inChild = await review(c1.id, "r");
    const inGrandchild = await review(g.id, "r");
    // Another run's review is not listed.
    await review((await gw.store.executions.create(gw.a.tenantId, { workflowId, workflowVersion: 2, input: {} })).id, "r");
    return { parent, c1, c2, c3, g, decided, inChild, inGrandchild };
  }

  test("an execution's reviews are its own and its sub-runs' at any depth, each naming its execution; the pending ones are those its resume's 409 lists", async () => {
    const { parent, c1, c3, g, decided, inChild, inGrandchild } = await run();
    expect((await list(`executionId=${parent.id}`)).map((r) => [r.id, r.executionId, r.nodeId, r.status])).toEqual([
      [inGrandchild.id, g.id, "r", "pending"],
      [inChild.id, c1.id, "r", "pending"],
      [decided.id, c3.id, "r", "approved"],
    ]);
    const pending = await list(`executionId=${parent.id}&status=pending`);
    const res = await gw.app.inject({ method: "POST", url: `/api/agent-workflow-executions/${parent.id}/resume`, headers: bearer(gw.a.operator), payload: { action: "approve" } });
    const waiting = (problemOf(res, 409, "BATON_GATEWAY_REVIEW_IN_SUBRUN") as unknown as { pendingReviews: { reviewId: number; executionId: number; nodeId: string }[] }).pendingReviews;
    expect(pending.map((r) => [r.id, r.executionId, r.nodeId])).toEqual(waiting.map((w) => [w.reviewId, w.executionId, w.nodeId]));
    expect((await list(`executionId=${parent.id}&status=approved`)).map((r) => r.id)).toEqual([decided.id]);
    // A sub-run's list holds what is below it, not what is above or beside it.
    expect((await list(`executionId=${c1.id}`)).map((r) => r.id)).toEqual([inChild.id]);
  });

  test("paged across the sub-runs: the pages, one after the other, are the whole list once", async () => {
    const { parent } = await run();
    const whole = (await list(`executionId=${parent.id}`)).map((r) => r.id);
    expect(whole).toHaveLength(3);
    const pages = [...await list(`executionId=${parent.id}&limit=2&offset=0`), ...await list(`executionId=${parent.id}&limit=2&offset=2`)].map((r) => r.id);
    expect(pages).toEqual(whole);
    expect(await list(`executionId=${parent.id}&limit=2&offset=4`)).toEqual([]);
  });

  test("subRuns=false lists the execution's own reviews only; a bad subRuns, or one without executionId, is 400 naming it", async () => {
    const { parent, c2 } = await run();
    const own = await review(parent.id, "own");
    expect((await list(`executionId=${parent.id}&subRuns=false`)).map((r) => r.id)).toEqual([own.id]);
    expect(await list(`executionId=${c2.id}&subRuns=false`)).toEqual([]);
    expect((await list(`executionId=${parent.id}&subRuns=true`)).map((r) => r.id)).toEqual((await list(`executionId=${parent.id}`)).map((r) => r.id));
    for (const query of ["executionId=1&subRuns=no", "subRuns=false", "subRuns=true"]) {
      const p = problemOf(await gw.app.inject({ method: "GET", url: `/api/reviews?${query}`, headers: bearer(gw.a.viewer) }), 400, "BATON_GATEWAY_REQUEST_INVALID");
      expect({ query, paths: p.errors!.map((e) => e.path) }).toEqual({ query, paths: ["query.subRuns"] });
    }
  });
});
