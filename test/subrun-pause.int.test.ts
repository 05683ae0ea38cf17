/**
 * A review inside a sub-run pauses the runs above it, through the real services (all in one
 * process, real NATS, Redis and Postgres). Rules checked:
 * - a subworkflow whose child pauses at a review: the parent is `paused`, its
 *   `execution.paused` names its subworkflow node, the child (`sub_execution_id`) and the
 *   child's reason; the review service records the child's review and none for the parent;
 *   the parent's detail shows the child's pending review (its executionId the child's); the
 *   parent's resume answers 409 BATON_GATEWAY_REVIEW_IN_SUBRUN naming the child and its node;
 *   approving the child resumes the parent (`execution.resumed`, decision `sub_run`), which
 *   runs on and completes;
 * - a forEach whose two children both pause: the parent is paused until both are decided, with
 *   one `execution.paused` and one `execution.resumed`, after the last decision;
 * - cancelling a parent paused in a sub-run cancels the child and closes its review;
 * - a review in a grandchild pauses the child and the top run, whose detail shows the
 *   grandchild's review; deciding it resumes both and everything completes;
 * - a run's review list (GET /api/reviews?executionId=) holds its sub-runs' reviews, naming
 *   them; with subRuns=false it holds none for a pause in a sub-run;
 * - a parent paused in a sub-run whose Redis checkpoint is lost is rebuilt from its journal
 *   and learns the pause again from the child's row (still paused, no pause announced twice),
 *   with the reason it had (`review in sub-run <id>: <the child's reason>`), also when the
 *   checkpoints of the runs below were lost too (a grandchild's review); one whose child was
 *   decided meanwhile is rebuilt running, its pause ended by one `execution.resumed`; one
 *   paused at two nodes, one of whose sub-runs was decided meanwhile, ends that node's pause
 *   at once (not at the run's end) and stays paused at the other, with its reason; each
 *   completes and no node runs again;
 * - every run's events make a whole timeline (timelineProblems).
 */
import { describe, expect, it } from "@jest/globals";
import { waitFor } from "./helpers.ts";
import type { ExecutionRow, SseEvent } from "./workflows.ts";
import { children, collectEvents, createDefinition, getExecution, journal, startExecution, suiteInProcess, timelineProblems, uniq, waitForExecution } from "./workflows.ts";

const h = await suiteInProcess("subrun-pause-int");
const { config, a, rec, tenantId } = h;

interface Review {
  id: number;
  executionId: number;
  nodeId: string;
  status: string;
  reason: string;
  decision: { decision: string } | null;
}

/** The state of the run's latest checkpoint (through the API). */
interface CheckpointedState {
  status: string;
  pause?: { nodeId: string; reason: string; subExecutionId?: number };
  subRuns?: Record<string, { nodeId: string; paused: boolean }>;
}
async function stateOf(id: number): Promise<CheckpointedState> {
  const list = await a.call<{ items: { version: number }[] }>("GET", `/api/agent-workflow-executions/${id}/checkpoints?limit=1`);
  const version = list.body.items[0]!.version;
  return (await a.call<{ state: CheckpointedState }>("GET", `/api/agent-workflow-executions/${id}/checkpoints/${version}`)).body.state;
}

/** The reviews of `id` and of its sub-runs at any depth (GET /api/reviews?executionId=). */
const reviewsOf = async (id: number): Promise<Review[]> => (await a.call<{ items: Review[] }>("GET", `/api/reviews?executionId=${id}`)).body.items;
/** The reviews of `id` itself (`subRuns=false`). */
const ownReviewsOf = async (id: number): Promise<Review[]> => (await a.call<{ items: Review[] }>("GET", `/api/reviews?executionId=${id}&subRuns=false`)).body.items;
const pendingReviewOf = (id: number): Promise<Review> =>
  waitFor(`a pending review of ${id}`, async () => (await reviewsOf(id)).find((r) => r.status === "pending"));
const decide = async (id: number, body: Record<string, unknown> = { action: "approve" }): Promise<void> => {
  const res = await a.call("POST", `/api/agent-workflow-executions/${id}/resume`, body);
  expect(res.status).toBe(202);
};
/** The only child of `id` (waits for it). */
const onlyChild = (id: number): Promise<ExecutionRow> => waitFor(`the child of ${id}`, async () => (await children(a, id))[0]);
const paused = (id: number): Promise<ExecutionRow> => waitForExecution(a, id, ["paused", "completed", "failed", "cancelled"]).then((e) => {
  expect({ id, status: e.status }).toEqual({ id, status: "paused" });
  return e;
});
/** The run's events to its end, checked for a whole timeline. */
async function eventsOf(id: number): Promise<SseEvent[]> {
  const events = await collectEvents(a, config.apiKey!, id);
  expect(timelineProblems(events, id, tenantId)).toEqual([]);
  return events;
}
interface PauseEvent {
  event: string;
  node_id: unknown;
  sub_execution_id: unknown;
  reason?: unknown;
  decision?: unknown;
}
/** The run's execution.paused and execution.resumed events, with the fields that tell them apart. */
const pauses = (events: SseEvent[]): PauseEvent[] => events.filter((e) => e.event === "execution.paused" || e.event === "execution.resumed").map((e) => {
  const d = e.data.data;
  return { event: e.event, node_id: d.node_id, sub_execution_id: d.sub_execution_id, ...(d.reason !== undefined ? { reason: d.reason } : {}), ...(d.decision !== undefined ? { decision: d.decision } : {}) };
});

/** A workflow whose one node is a review (the child every test nests), and its slug. */
async function reviewWorkflow(reason: string): Promise<string> {
  const slug = `review-${uniq()}`;
  await createDefinition(a, slug, {
    nodes: [
      { id: "check", type: "humanReview", config: { reason, subject: "$.input" } },
      { id: "done", type: "transform", config: { expression: "check.decision" } },
    ],
    edges: [{ from: "check", to: "done" }],
  }, { slug });
  return slug;
}

describe("a subworkflow whose child pauses at a review", () => {
  it("pauses the parent until the child is approved, with no review of the parent's own; the parent's resume is 409; then it completes", async () => {
    const slug = await reviewWorkflow("child check");
    const wf = await createDefinition(a, `parent-${uniq()}`, {
      nodes: [
        { id: "sub", type: "subworkflow", config: { workflow: { slug } }, input: { n: "$.input.n" } },
        { id: "after", type: "transform", config: { expression: "'after ' & sub" } },
      ],
      edges: [{ from: "sub", to: "after" }],
    });
    const id = await startExecution(a, wf, { n: 1 });
    const parent = await paused(id);
    const child = await onlyChild(id);
    expect(child).toMatchObject({ status: "paused", parentNodeId: "sub" });
    expect(parent.currentState).toBe("sub");

    const review = await pendingReviewOf(child.id);
    expect(review).toMatchObject({ executionId: child.id, nodeId: "check", reason: "child check" });
    const detail = await waitFor("the parent's pending review", async () => {
      const d = await a.call<{ status: string; pendingReview: Review | null }>("GET", `/api/agent-workflow-executions/${id}`);
      return d.body.pendingReview ? d.body : undefined;
    });
    expect(detail).toMatchObject({ status: "paused", pendingReview: { id: review.id, executionId: child.id, nodeId: "check" } });

    const refused = await a.call<{ code: string; detail: string; pendingReviews: unknown[] }>("POST", `/api/agent-workflow-executions/${id}/resume`, { action: "approve" });
    expect(refused.status).toBe(409);
    expect(refused.body).toMatchObject({
      code: "BATON_GATEWAY_REVIEW_IN_SUBRUN",
      pendingReviews: [{ reviewId: review.id, executionId: child.id, nodeId: "check", resume: `/api/agent-workflow-executions/${child.id}/resume` }],
    });
    expect(refused.body.detail).toContain(`sub-run ${child.id}`);

    await decide(child.id);
    const done = await waitForExecution(a, id, ["completed", "failed", "cancelled"]);
    expect({ status: done.status, output: done.output }).toEqual({ status: "completed", output: "after approve" });
    const events = await eventsOf(id);
    expect(pauses(events)).toEqual([
      { event: "execution.paused", node_id: "sub", sub_execution_id: child.id, reason: "review in sub-run " + child.id + ": child check" },
      { event: "execution.resumed", node_id: "sub", sub_execution_id: child.id, decision: "sub_run" },
    ]);
    // The resume came after the child's decision, and before the parent's node completed.
    const names = events.map((e) => `${e.event}:${typeof e.data.data.node_id === "string" ? e.data.data.node_id : ""}`);
    expect(names.indexOf("execution.resumed:sub")).toBeLessThan(names.indexOf("node.completed:sub"));
    await eventsOf(child.id);
    // Only the child's review exists; it was resolved (so the review service took the parent's pause and resume before).
    await waitFor("the child's review resolved", async () => ((await reviewsOf(child.id))[0]?.status === "approved" ? true : undefined));
    expect(await ownReviewsOf(id)).toEqual([]);
    // The parent's review list shows it, naming the child.
    expect((await reviewsOf(id)).map((r) => [r.id, r.executionId, r.status])).toEqual([[review.id, child.id, "approved"]]);
  }, 60_000);
});

describe("a forEach whose children both pause", () => {
  it("is paused until both are decided, and resumed once, after the last decision", async () => {
    const wf = await createDefinition(a, `each-${uniq()}`, {
      nodes: [{
        id: "each", type: "forEach",
        config: { items: "$.input.xs", concurrency: 2, body: { nodes: [{ id: "r", type: "humanReview", config: { reason: "item", subject: "$.input.item" } }], output: { d: "$.r.decision" } } },
      }],
    });
    const id = await startExecution(a, wf, { xs: ["a", "b"] });
    await paused(id);
    const kids = await waitFor("both children paused", async () => {
      const k = await children(a, id);
      return k.length === 2 && k.every((c) => c.status === "paused") ? k.sort((x, y) => x.childKey!.localeCompare(y.childKey!)) : undefined;
    });
    // In item order (their rows are made at once, in any order).
    const [first, second] = kids;
    await pendingReviewOf(first!.id);
    await decide(first!.id);
    expect((await waitForExecution(a, first!.id, ["completed", "failed", "cancelled"])).status).toBe("completed");
    // The first child is done: the parent still waits for the second's review.
    await new Promise((r) => setTimeout(r, 300));
    const between = await getExecution(a, id);
    expect(between.status).toBe("paused");
    const so = await collectEvents(a, config.apiKey!, id, (ev) => ev.some((e) => e.event === "execution.paused"));
    expect(so.filter((e) => e.event === "execution.resumed")).toEqual([]);

    await pendingReviewOf(second!.id);
    await decide(second!.id, { action: "edit", data: { x: 1 } });
    const done = await waitForExecution(a, id, ["completed", "failed", "cancelled"]);
    expect({ status: done.status, output: done.output }).toEqual({ status: "completed", output: [{ d: "approve" }, { d: "edit" }] });
    const events = await eventsOf(id);
    expect(pauses(events)).toEqual([
      { event: "execution.paused", node_id: "each", sub_execution_id: expect.any(Number), reason: expect.stringMatching(/^review in sub-run \d+: item$/) },
      { event: "execution.resumed", node_id: "each", sub_execution_id: second!.id, decision: "sub_run" },
    ]);
    expect(await ownReviewsOf(id)).toEqual([]);
  }, 60_000);
});

describe("cancel of a parent paused in a sub-run", () => {
  it("cancels the child and closes its review", async () => {
    const slug = await reviewWorkflow("never decided");
    const wf = await createDefinition(a, `cancel-${uniq()}`, { nodes: [{ id: "sub", type: "subworkflow", config: { workflow: { slug } } }] });
    const id = await startExecution(a, wf);
    await paused(id);
    const child = await onlyChild(id);
    await pendingReviewOf(child.id);
    expect((await a.call("POST", `/api/agent-workflow-executions/${id}/cancel`, { reason: "not needed" })).status).toBe(202);
    expect((await waitForExecution(a, id, ["completed", "failed", "cancelled"])).status).toBe("cancelled");
    expect((await waitForExecution(a, child.id, ["completed", "failed", "cancelled"])).status).toBe("cancelled");
    const closed = await waitFor("the child's review closed", async () => {
      const r = (await reviewsOf(child.id))[0];
      return r && r.status !== "pending" ? r : undefined;
    });
    expect(closed).toMatchObject({ status: "rejected", decision: { decision: "cancelled" } });
    // The parent's pause ends with its last event; no resume is announced.
    const events = await eventsOf(id);
    expect(pauses(events).map((p) => p.event)).toEqual(["execution.paused"]);
    expect(events.at(-1)!.event).toBe("execution.cancelled");
    expect(await ownReviewsOf(id)).toEqual([]);
  }, 60_000);
});

describe("a review in a grandchild", () => {
  it("pauses the child and the top run; deciding it resumes both", async () => {
    const leaf = await reviewWorkflow("deep");
    const middle = `middle-${uniq()}`;
    await createDefinition(a, middle, { nodes: [{ id: "inner", type: "subworkflow", config: { workflow: { slug: leaf } } }] }, { slug: middle });
    const wf = await createDefinition(a, `top-${uniq()}`, { nodes: [{ id: "outer", type: "subworkflow", config: { workflow: { slug: middle } } }] });
    const id = await startExecution(a, wf);
    await paused(id);
    const mid = await onlyChild(id);
    const grandchild = await onlyChild(mid.id);
    expect((await paused(mid.id)).currentState).toBe("inner");
    await paused(grandchild.id);
    const review = await pendingReviewOf(grandchild.id);
    const detail = await waitFor("the top run's pending review", async () => {
      const d = await a.call<{ pendingReview: Review | null }>("GET", `/api/agent-workflow-executions/${id}`);
      return d.body.pendingReview ?? undefined;
    });
    expect(detail).toMatchObject({ id: review.id, executionId: grandchild.id, nodeId: "check" });
    const refused = await a.call<{ code: string; pendingReviews: { executionId: number }[] }>("POST", `/api/agent-workflow-executions/${id}/resume`, { action: "approve" });
    expect({ status: refused.status, code: refused.body.code, at: refused.body.pendingReviews.map((r) => r.executionId) })
      .toEqual({ status: 409, code: "BATON_GATEWAY_REVIEW_IN_SUBRUN", at: [grandchild.id] });
    // The top run's pending reviews are the grandchild's, as the 409 says.
    expect((await reviewsOf(id)).filter((r) => r.status === "pending").map((r) => [r.id, r.executionId, r.nodeId])).toEqual([[review.id, grandchild.id, "check"]]);

    await decide(grandchild.id);
    const done = await waitForExecution(a, id, ["completed", "failed", "cancelled"]);
    expect({ status: done.status, output: done.output }).toEqual({ status: "completed", output: "approve" });
    expect(pauses(await eventsOf(mid.id))).toEqual([
      { event: "execution.paused", node_id: "inner", sub_execution_id: grandchild.id, reason: `review in sub-run ${grandchild.id}: deep` },
      { event: "execution.resumed", node_id: "inner", sub_execution_id: grandchild.id, decision: "sub_run" },
    ]);
    expect(pauses(await eventsOf(id))).toEqual([
      { event: "execution.paused", node_id: "outer", sub_execution_id: mid.id, reason: `review in sub-run ${mid.id}: review in sub-run ${grandchild.id}: deep` },
      { event: "execution.resumed", node_id: "outer", sub_execution_id: mid.id, decision: "sub_run" },
    ]);
    expect(await ownReviewsOf(id)).toEqual([]);
    expect(await ownReviewsOf(mid.id)).toEqual([]);
  }, 60_000);
});

describe("a parent paused in a sub-run loses its checkpoint", () => {
  const checkpointKeys = (id: number) => [`${config.prefix}:checkpoint:{${id}}`, `${config.prefix}:checkpoint:{${id}}:history`];

  it("rebuilt while the child still waits, it is still paused and completes once the child is decided", async () => {
    const slug = await reviewWorkflow("still waiting");
    const tag = uniq();
    const wf = await createDefinition(a, `lost-${uniq()}`, {
      start: "s",
      nodes: [
        { id: "s", type: "setVariable", config: { values: { go: true } } },
        { id: "sub", type: "subworkflow", config: { workflow: { slug } } },
        { id: "slow", type: "tool", config: { tool: "rec.sleep" }, input: { ms: 1500, tag } },
        { id: "end", type: "transform", config: { expression: "sub & ' ' & $string(slow.slept)" } },
      ],
      edges: [{ from: "s", to: "sub" }, { from: "s", to: "slow" }, { from: "sub", to: "end" }, { from: "slow", to: "end" }],
    });
    const id = await startExecution(a, wf);
    await paused(id);
    const child = await onlyChild(id);
    expect(await h.redis.del(...checkpointKeys(id))).toBeGreaterThanOrEqual(1);
    // The tool's answer is the parent's next command: it finds no checkpoint and rebuilds it.
    await waitFor("slow completed", async () => ((await journal(a, id)).some((n) => n.nodeId === "slow" && n.status === "completed") ? true : undefined));
    await new Promise((r) => setTimeout(r, 300));
    expect((await getExecution(a, id)).status).toBe("paused");
    expect(await h.redis.exists(checkpointKeys(id)[0]!)).toBe(1);
    // The rebuilt pause has the reason the lost one had.
    expect((await stateOf(id)).pause).toEqual({ nodeId: "sub", reason: `review in sub-run ${child.id}: still waiting`, seq: expect.any(Number), subExecutionId: child.id });

    await pendingReviewOf(child.id);
    await decide(child.id);
    const done = await waitForExecution(a, id, ["completed", "failed", "cancelled"]);
    expect({ status: done.status, output: done.output }).toEqual({ status: "completed", output: "approve 1500" });
    expect((await rec.calls()).filter((c) => c.endsWith(`|${tag}`))).toHaveLength(1);
    expect(pauses(await eventsOf(id))).toEqual([
      { event: "execution.paused", node_id: "sub", sub_execution_id: child.id, reason: `review in sub-run ${child.id}: still waiting` },
      { event: "execution.resumed", node_id: "sub", sub_execution_id: child.id, decision: "sub_run" },
    ]);
  }, 60_000);

  it("rebuilt while a grandchild's review waits and every checkpoint below was lost too, it has the nested reason", async () => {
    const leaf = await reviewWorkflow("deep and lost");
    const middle = `lost-middle-${uniq()}`;
    await createDefinition(a, middle, { nodes: [{ id: "inner", type: "subworkflow", config: { workflow: { slug: leaf } } }] }, { slug: middle });
    const tag = uniq();
    const wf = await createDefinition(a, `lost-top-${uniq()}`, {
      start: "s",
      nodes: [
        { id: "s", type: "setVariable", config: { values: { go: true } } },
        { id: "outer", type: "subworkflow", config: { workflow: { slug: middle } } },
        { id: "slow", type: "tool", config: { tool: "rec.sleep" }, input: { ms: 1500, tag } },
        { id: "end", type: "transform", config: { expression: "outer & ' ' & $string(slow.slept)" } },
      ],
      edges: [{ from: "s", to: "outer" }, { from: "s", to: "slow" }, { from: "outer", to: "end" }, { from: "slow", to: "end" }],
    });
    const id = await startExecution(a, wf);
    await paused(id);
    const mid = await onlyChild(id);
    const grandchild = await onlyChild(mid.id);
    await paused(mid.id);
    await paused(grandchild.id);
    await pendingReviewOf(grandchild.id);
    const reason = `review in sub-run ${mid.id}: review in sub-run ${grandchild.id}: deep and lost`;
    expect((await stateOf(id)).pause?.reason).toBe(reason);
    for (const x of [id, mid.id, grandchild.id]) expect(await h.redis.del(...checkpointKeys(x))).toBeGreaterThanOrEqual(1);
    // The tool's answer rebuilds the top run; the runs below have no checkpoint to read.
    await waitFor("slow completed", async () => ((await journal(a, id)).some((n) => n.nodeId === "slow" && n.status === "completed") ? true : undefined));
    await waitFor("the top run's checkpoint rebuilt", async () => ((await h.redis.exists(checkpointKeys(id)[0]!)) === 1 ? true : undefined));
    expect((await stateOf(id)).pause).toEqual({ nodeId: "outer", reason, seq: expect.any(Number), subExecutionId: mid.id });
    expect((await getExecution(a, id)).status).toBe("paused");

    await decide(grandchild.id);
    const done = await waitForExecution(a, id, ["completed", "failed", "cancelled"]);
    expect({ status: done.status, output: done.output }).toEqual({ status: "completed", output: "approve 1500" });
    expect((await rec.calls()).filter((c) => c.endsWith(`|${tag}`))).toHaveLength(1);
    expect(pauses(await eventsOf(id))).toEqual([
      { event: "execution.paused", node_id: "outer", sub_execution_id: mid.id, reason },
      { event: "execution.resumed", node_id: "outer", sub_execution_id: mid.id, decision: "sub_run" },
    ]);
    expect(pauses(await eventsOf(mid.id)).map((p) => [p.event, p.node_id, p.sub_execution_id])).toEqual([
      ["execution.paused", "inner", grandchild.id],
      ["execution.resumed", "inner", grandchild.id],
    ]);
  }, 60_000);

  it("rebuilt after the child was decided, it ends its pause once and completes", async () => {
    const slug = await reviewWorkflow("decided meanwhile");
    const wf = await createDefinition(a, `lost-decided-${uniq()}`, {
      nodes: [
        { id: "sub", type: "subworkflow", config: { workflow: { slug } } },
        { id: "end", type: "transform", config: { expression: "'got ' & sub" } },
      ],
      edges: [{ from: "sub", to: "end" }],
    });
    const id = await startExecution(a, wf);
    await paused(id);
    const child = await onlyChild(id);
    await pendingReviewOf(child.id);
    expect(await h.redis.del(...checkpointKeys(id))).toBeGreaterThanOrEqual(1);
    // The child's news that it runs on is the parent's next command: it rebuilds the parent,
    // whose row still says paused, from a journal in which nothing waits.
    await decide(child.id);
    const done = await waitForExecution(a, id, ["completed", "failed", "cancelled"]);
    expect({ status: done.status, output: done.output }).toEqual({ status: "completed", output: "got approve" });
    const events = await eventsOf(id);
    expect(pauses(events).map((p) => [p.event, p.node_id, p.sub_execution_id, p.decision])).toEqual([
      ["execution.paused", "sub", child.id, undefined],
      ["execution.resumed", "sub", child.id, "sub_run"],
    ]);
  }, 60_000);

  // The run pauses at `first`, then at `second` (its row's pause point); one of them is
  // decided while the checkpoint is lost.
  it.each(["first", "second"])("paused at two nodes, rebuilt after %s's sub-run was decided, ends that pause at once and stays paused at the other", async (decided) => {
    const slugs = { first: await reviewWorkflow("first check"), second: await reviewWorkflow("second check") };
    const wf = await createDefinition(a, `lost-two-${uniq()}`, {
      start: "s",
      nodes: [
        { id: "s", type: "setVariable", config: { values: { go: true } } },
        { id: "first", type: "subworkflow", config: { workflow: { slug: slugs.first } } },
        { id: "wait", type: "tool", config: { tool: "rec.sleep" }, input: { ms: 500 } },
        { id: "second", type: "subworkflow", config: { workflow: { slug: slugs.second } } },
        { id: "end", type: "transform", config: { expression: "first & ' ' & second" } },
      ],
      edges: [{ from: "s", to: "first" }, { from: "s", to: "wait" }, { from: "wait", to: "second" }, { from: "first", to: "end" }, { from: "second", to: "end" }],
    });
    const id = await startExecution(a, wf);
    const kids = await waitFor("both children paused, the parent at second", async () => {
      const k = await children(a, id);
      const row = await getExecution(a, id);
      const first = k.find((c) => c.parentNodeId === "first");
      const second = k.find((c) => c.parentNodeId === "second");
      return first?.status === "paused" && second?.status === "paused" && row.status === "paused" && row.currentState === "second" ? { first, second } : undefined;
    });
    const other = decided === "first" ? "second" : "first";
    const [gone, left] = [kids[decided as "first" | "second"], kids[other]];
    await pendingReviewOf(gone.id);
    // Both pauses announced (the parent's step is over) before the checkpoint goes.
    await collectEvents(a, config.apiKey!, id, (ev) => ev.filter((e) => e.event === "execution.paused").length === 2);
    expect(await h.redis.del(...checkpointKeys(id))).toBeGreaterThanOrEqual(1);
    // The decided child's news is the parent's next command: it rebuilds the parent.
    await decide(gone.id);
    const resumed = (ev: SseEvent[]) => ev.some((e) => e.event === "execution.resumed" && e.data.data.node_id === decided);
    const so = await collectEvents(a, config.apiKey!, id, resumed, 10_000);
    expect(pauses(so).at(-1)).toEqual({ event: "execution.resumed", node_id: decided, sub_execution_id: gone.id, decision: "sub_run" });
    // Still paused at the other node, with its reason.
    await waitFor(`${decided} completed`, async () => ((await journal(a, id)).some((n) => n.nodeId === decided && n.status === "completed") ? true : undefined));
    expect(await getExecution(a, id)).toMatchObject({ status: "paused", currentState: other });
    const state = await stateOf(id);
    expect({ status: state.status, pause: state.pause }).toEqual({
      status: "paused", pause: { nodeId: other, reason: `review in sub-run ${left.id}: ${other} check`, seq: expect.any(Number), subExecutionId: left.id },
    });

    await pendingReviewOf(left.id);
    await decide(left.id);
    const done = await waitForExecution(a, id, ["completed", "failed", "cancelled"]);
    expect({ status: done.status, output: done.output }).toEqual({ status: "completed", output: "approve approve" });
    expect(pauses(await eventsOf(id))).toEqual([
      { event: "execution.paused", node_id: "first", sub_execution_id: kids.first.id, reason: `review in sub-run ${kids.first.id}: first check` },
      { event: "execution.paused", node_id: "second", sub_execution_id: kids.second.id, reason: `review in sub-run ${kids.second.id}: second check` },
      { event: "execution.resumed", node_id: decided, sub_execution_id: gone.id, decision: "sub_run" },
      { event: "execution.resumed", node_id: other, sub_execution_id: left.id, decision: "sub_run" },
    ]);
  }, 60_000);
});
