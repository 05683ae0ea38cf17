/**
 * Every control-flow shape of the workflow model, through the real services (all in
 * one process): a definition is created with POST /api/agent-workflows, executed, and
 * the final execution, its journal (…/nodes) and its events (SSE …/events) are checked.
 * Rules checked:
 * - sequence, condition branches (the branch not taken is skipped), whileLoop
 *   iterations, static fan-out 1→3→1 with all / any / {n: 2} joins, forEach over a list
 *   with a tool (concurrency cap, reduce) and with an inline body (one child execution
 *   per item), subworkflow by slug, delay, emit, transform, setVariable;
 * - failures: retry then succeed, retries exhausted, node timeout (the tool call is
 *   aborted; with retries the next attempt answers), cancel while a tool runs (aborted,
 *   journal left consistent), during a retry's backoff, while paused, of a parent (its
 *   children are cancelled) and of one child; deadlines from the request and from
 *   limits.deadlineMs, also while paused or delayed, inherited by children;
 * - tool handlers get the node's idempotency key (same on every attempt) and a call id per
 *   attempt; subworkflow versions pin (without a version, to the one current when the
 *   top-level run began, also for its forks); limits.maxConcurrency and forEach concurrency cap
 *   the calls in flight;
 * - each validation error answers 400 problem+json on create; several errors are all listed;
 * - from its events alone an outside subscriber can rebuild each run's timeline: every
 *   event names the tenant and the execution, every node.started is closed by one
 *   node.completed or node.failed of the same node and attempt.
 */
import { describe, expect, it } from "@jest/globals";
import { waitFor } from "./helpers.ts";
import type { ExecutionRow, NodeRow, SseEvent } from "./workflows.ts";
import { children, collectEvents, createDefinition, eventNames, journal, startExecution, suiteInProcess, timelineProblems, uniq, waitForExecution } from "./workflows.ts";

const { config, a, rec, tenantId } = await suiteInProcess("engine-int");

interface Finished {
  id: number;
  execution: ExecutionRow;
  nodes: NodeRow[];
  events: SseEvent[];
  names: string[];
}

/** Creates the workflow, runs it to one of `statuses`, and reads back the execution, journal and events. */
async function run(definition: unknown, input: Record<string, unknown> = {}, extra: Record<string, unknown> = {}, checkTimeline = true): Promise<Finished> {
  const wf = await createDefinition(a, `wf-${uniq()}`, definition);
  const id = await startExecution(a, wf, input, extra);
  return finish(id, undefined, checkTimeline);
}

/** Waits for the run to end and reads it back; checks its timeline from events unless told not to (see the cancel tests). */
async function finish(id: number, statuses = ["completed", "failed", "cancelled"], checkTimeline = true): Promise<Finished> {
  const execution = await waitForExecution(a, id, statuses);
  const events = await collectEvents(a, config.apiKey!, id);
  const nodes = await journal(a, id);
  if (checkTimeline) expect(timelineProblems(events, id, tenantId)).toEqual([]);
  return { id, execution, nodes, events, names: eventNames(events) };
}

/** `nodeId:status` of the journal rows, ordered by start. */
const rows = (nodes: NodeRow[]) => [...nodes].sort((x, y) => x.startedAt.localeCompare(y.startedAt) || x.id - y.id).map((n) => `${n.nodeId}:${n.status}`);
const completed = (nodes: NodeRow[], nodeId: string) => nodes.filter((n) => n.nodeId === nodeId && n.status === "completed");

describe("control flow through the real services", () => {
  it("sequence: tool → tool → transform, in order, output mapped", async () => {
    const r = await run({
      nodes: [
        { id: "a", type: "tool", config: { tool: "echo" }, input: { who: "$.input.who" } },
        { id: "b", type: "tool", config: { tool: "text.template" }, input: { template: "hello {{who}}", values: { who: "$.a.who" } } },
        { id: "c", type: "transform", config: { expression: "$uppercase(b.text)" } },
      ],
      edges: [{ from: "a", to: "b" }, { from: "b", to: "c" }],
      output: { greeting: "$.c", raw: "$.b.text" },
    }, { who: "ada" }, { agentId: 7 });
    expect(r.execution.status).toBe("completed");
    expect(r.execution.output).toEqual({ greeting: "HELLO ADA", raw: "hello ada" });
    // execution.started names the agent that started the run, and no parent or fork.
    expect(r.events[0]!.data.data).toMatchObject({
      agent_workflow_id: expect.any(Number), agent_id: 7, workflow_version: 1,
      parent_execution_id: 0, parent_node_id: "", root_execution_id: 0, forked_from_execution_id: 0, forked_from_version: 0,
    });
    expect(rows(r.nodes)).toEqual(["a:completed", "b:completed", "c:completed"]);
    expect(r.names).toEqual([
      "execution.started", "node.started:a", "node.completed:a", "node.started:b", "node.completed:b", "node.started:c", "node.completed:c", "execution.completed",
    ]);
    // A run without LLM calls still reports its token usage, as zeros.
    expect(r.events.at(-1)!.data.data).toMatchObject({ status: "success", token_usage: { input_tokens: 0, output_tokens: 0, total_tokens: 0 } });
  });

  it("condition: the taken branch runs, the other is skipped, the merge runs once", async () => {
    const def = {
      start: "check",
      nodes: [
        { id: "check", type: "condition", config: { left: "$.input.n", op: "gt", right: 10 } },
        { id: "big", type: "setVariable", config: { values: { size: "big" } } },
        { id: "small", type: "setVariable", config: { values: { size: "small" } } },
        { id: "merge", type: "transform", config: { expression: "big.size ? big.size : small.size" } },
      ],
      edges: [{ from: "check", to: "big", when: "true" }, { from: "check", to: "small", when: "false" }, { from: "big", to: "merge" }, { from: "small", to: "merge" }],
    };
    const wf = await createDefinition(a, `cond-${uniq()}`, def);
    for (const [n, taken, skipped] of [[20, "big", "small"], [5, "small", "big"]] as const) {
      const r = await finish(await startExecution(a, wf, { n }));
      expect(r.execution.status).toBe("completed");
      expect(r.execution.output).toBe(taken);
      expect(rows(r.nodes)).toEqual(["check:completed", `${taken}:completed`, "merge:completed"]);
      expect(completed(r.nodes, "check")[0]!.output).toEqual({ result: n > 10 });
      expect(r.names).toContain(`node.skipped:${skipped}`);
      expect(r.names).not.toContain(`node.started:${skipped}`);
      expect(r.names.filter((x) => x === "node.started:merge")).toHaveLength(1);
    }
  });

  it("whileLoop whose any-join goes round before a review: each pass's review is closed and the run completes", async () => {
    const r = await run({
      start: "init",
      nodes: [
        { id: "init", type: "setVariable", config: { values: { "$.vars.i": 0 } } },
        { id: "loop", type: "whileLoop", config: { condition: "vars.i < 2", maxIterations: 5 } },
        { id: "fast", type: "transform", config: { expression: "vars.i + 1" }, output: "$.vars.i" },
        { id: "rev", type: "humanReview", config: { reason: "check" } },
        { id: "j", type: "setVariable", config: { values: { "$.vars.round": "$.vars.i" } }, join: "any" },
      ],
      edges: [
        { from: "init", to: "loop" }, { from: "loop", to: "fast", when: "body" }, { from: "loop", to: "rev", when: "body" },
        { from: "fast", to: "j" }, { from: "rev", to: "j" }, { from: "j", to: "loop" },
      ],
      output: { i: "$.vars.i" },
    });
    expect(r.execution.status).toBe("completed");
    expect(r.execution.output).toEqual({ i: 2 });
    expect(r.nodes.filter((n) => n.nodeId === "rev").map((n) => `${n.status}: ${n.error}`)).toEqual(["failed: loop iteration restarted", "failed: loop iteration restarted"]);
    const reviews = await waitFor("both reviews closed", async () => {
      const res = await a.call<{ items: { status: string; decision: { decision: string } | null }[] }>("GET", `/api/reviews?executionId=${r.id}`);
      return res.body.items.length === 2 && res.body.items.every((i) => i.status !== "pending") ? res.body.items : undefined;
    });
    expect(reviews.map((i) => [i.status, i.decision?.decision])).toEqual([["rejected", "cancelled"], ["rejected", "cancelled"]]);
  });

  it("whileLoop: the body runs once per iteration, each iteration journaled", async () => {
    const r = await run({
      start: "init",
      nodes: [
        { id: "init", type: "setVariable", config: { values: { "$.vars.i": 0 } } },
        { id: "loop", type: "whileLoop", config: { condition: "vars.i < input.n", maxIterations: 10 } },
        { id: "work", type: "tool", config: { tool: "echo" }, input: { i: "$.vars.i" } },
        { id: "inc", type: "transform", config: { expression: "work.i + 1" }, output: "$.vars.i" },
        { id: "done", type: "transform", config: { expression: "{ 'i': vars.i, 'loops': loop.iterations }" } },
      ],
      edges: [{ from: "init", to: "loop" }, { from: "loop", to: "work", when: "body" }, { from: "work", to: "inc" }, { from: "inc", to: "loop" }, { from: "loop", to: "done", when: "exit" }],
    }, { n: 3 });
    expect(r.execution.status).toBe("completed");
    expect(r.execution.output).toEqual({ i: 3, loops: 3 });
    const work = completed(r.nodes, "work").sort((x, y) => x.attempt - y.attempt);
    expect(work.map((w) => w.output)).toEqual([{ i: 0 }, { i: 1 }, { i: 2 }]);
    expect(r.names.filter((x) => x === "node.started:work")).toHaveLength(3);
    expect(completed(r.nodes, "done")).toHaveLength(1);
  });

  describe("static fan-out 1 → 3 → 1", () => {
    const fan = (join?: unknown) => ({
      start: "s",
      nodes: [
        { id: "s", type: "setVariable", config: { values: { x: 1 } } },
        { id: "a", type: "tool", config: { tool: "rec.sleep" }, input: { ms: 800, v: "A" } },
        { id: "b", type: "tool", config: { tool: "echo" }, input: { v: "B" } },
        { id: "c", type: "tool", config: { tool: "echo" }, input: { v: "C" } },
        { id: "j", type: "transform", config: { expression: "[a.v, b.v, c.v]" }, ...(join ? { join } : {}) },
      ],
      edges: [{ from: "s", to: "a" }, { from: "s", to: "b" }, { from: "s", to: "c" }, { from: "a", to: "j" }, { from: "b", to: "j" }, { from: "c", to: "j" }],
      output: { j: "$.j" },
    });

    it("join all: the join waits for every branch and sees all three", async () => {
      const r = await run(fan());
      expect(r.execution.status).toBe("completed");
      expect(r.execution.output).toEqual({ j: ["A", "B", "C"] });
      for (const n of ["a", "b", "c", "j"]) expect(completed(r.nodes, n)).toHaveLength(1);
      const jStart = r.names.indexOf("node.started:j");
      for (const n of ["a", "b", "c"]) expect(r.names.indexOf(`node.completed:${n}`)).toBeLessThan(jStart);
      // the three branches were started before any of them completed
      const firstDone = Math.min(...["a", "b", "c"].map((n) => r.names.indexOf(`node.completed:${n}`)));
      for (const n of ["a", "b", "c"]) expect(r.names.indexOf(`node.started:${n}`)).toBeLessThan(firstDone);
    });

    it("join any: the join runs once, on the first branch, and the run still waits for the others", async () => {
      const r = await run(fan("any"));
      expect(r.execution.status).toBe("completed");
      expect(completed(r.nodes, "j")).toHaveLength(1);
      expect(r.names.filter((x) => x === "node.started:j")).toHaveLength(1);
      const seen = (r.execution.output as { j: string[] | string }).j;
      expect([seen].flat()).toHaveLength(1);
      for (const n of ["a", "b", "c"]) expect(completed(r.nodes, n)).toHaveLength(1);
      expect(r.names.at(-1)).toBe("execution.completed");
    });

    it("join {n: 2}: the join runs once, after two branches", async () => {
      const r = await run(fan({ n: 2 }));
      expect(r.execution.status).toBe("completed");
      expect(completed(r.nodes, "j")).toHaveLength(1);
      const seen = (r.execution.output as { j: string[] }).j;
      expect(seen).toHaveLength(2);
      expect(["A", "B", "C"]).toEqual(expect.arrayContaining(seen));
      const jStart = r.names.indexOf("node.started:j");
      expect(["a", "b", "c"].filter((n) => r.names.indexOf(`node.completed:${n}`) < jStart)).toHaveLength(2);
    });
  });

  it("forEach with a tool: every item once, in order, at most `concurrency` at a time, then reduce", async () => {
    const gauge = `fe-${uniq()}`;
    const r = await run({
      nodes: [
        { id: "each", type: "forEach", config: { items: "$.input.xs", tool: "rec.sleep", concurrency: 2, itemInput: { ms: 150, v: "$.item", gauge }, reduce: "$sum(results.v)" } },
        { id: "list", type: "forEach", config: { items: "$.input.xs", tool: "echo", itemInput: { x: "$.item", i: "$.index" } } },
      ],
      edges: [{ from: "each", to: "list" }],
      output: { total: "$.each", list: "$.list" },
    }, { xs: [1, 2, 3, 4, 5] });
    expect(r.execution.status).toBe("completed");
    expect(r.execution.output).toEqual({ total: 15, list: [1, 2, 3, 4, 5].map((x, i) => ({ x, i })) });
    const levels = await rec.gauge(gauge);
    expect(levels).toHaveLength(5);
    expect(Math.max(...levels)).toBeLessThanOrEqual(2);
    expect(completed(r.nodes, "each")).toHaveLength(1);
  });

  it("forEach with an inline body: one child execution per item, outputs in item order", async () => {
    const r = await run({
      nodes: [{
        id: "each", type: "forEach",
        config: { items: "$.input.xs", concurrency: 2, body: { nodes: [{ id: "dbl", type: "transform", config: { expression: "input.item * 2" } }] } },
      }],
    }, { xs: [1, 2, 3] });
    expect(r.execution.status).toBe("completed");
    expect(r.execution.output).toEqual([2, 4, 6]);
    const kids = await children(a, r.id);
    expect(kids).toHaveLength(3);
    for (const k of kids) expect(k).toMatchObject({ status: "completed", parentExecutionId: r.id, parentNodeId: "each" });
    expect(new Set(kids.map((k) => k.childKey)).size).toBe(3);
    expect(kids.map((k) => k.output).sort()).toEqual([2, 4, 6]);
    const kidNodes = await journal(a, kids[0]!.id);
    expect(rows(kidNodes)).toEqual(["dbl:completed"]);
    for (const k of kids) {
      const ev = await collectEvents(a, config.apiKey!, k.id);
      expect(timelineProblems(ev, k.id, tenantId)).toEqual([]);
      expect(eventNames(ev)).toEqual(["execution.started", "node.started:dbl", "node.completed:dbl", "execution.completed"]);
      // A subscriber can hang the child's timeline under the parent's node from events alone.
      expect(ev[0]!.data.data).toMatchObject({ id: k.id, parent_execution_id: r.id, parent_node_id: "each", root_execution_id: r.id });
    }
  });

  it("a forEach body's fields beyond nodes, edges, start and output are warned of on create and have no effect", async () => {
    const definition = {
      nodes: [{
        id: "each", type: "forEach",
        config: { items: "$.input.xs", body: {
          schemaVersion: 2, inputSchema: { type: "object", required: ["nope"] }, limits: { deadlineMs: 1 },
          nodes: [{ id: "slow", type: "tool", config: { tool: "rec.sleep" }, input: { ms: 50, v: "$.input.item" } }], output: { v: "$.slow.v" },
        } },
      }],
    };
    const created = await a.call<{ id: number; warnings?: string[] }>("POST", "/api/agent-workflows", { name: `body-fields-${uniq()}`, definition });
    expect(created.status).toBe(201);
    expect((created.body.warnings ?? []).map((w) => w.slice(0, w.indexOf(":"))).sort()).toEqual(
      ["body.definition.nodes[0].config.body.inputSchema", "body.definition.nodes[0].config.body.limits", "body.definition.nodes[0].config.body.schemaVersion"],
    );
    const r = await finish(await startExecution(a, created.body.id, { xs: [1, 2] }));
    expect({ status: r.execution.status, error: r.execution.error, output: r.execution.output }).toEqual({ status: "completed", error: null, output: [{ v: 1 }, { v: 2 }] });
  });

  it("subworkflow by slug: the child runs as its own execution and its output is the node's", async () => {
    const slug = `shout-${uniq()}`;
    await createDefinition(a, `child-${slug}`, { nodes: [{ id: "c", type: "transform", config: { expression: "input.q & '!'" } }] }, { slug });
    const r = await run({
      nodes: [
        { id: "sub", type: "subworkflow", config: { workflow: { slug } }, input: { q: "$.input.q" } },
        { id: "after", type: "transform", config: { expression: "sub & '?'" } },
      ],
      edges: [{ from: "sub", to: "after" }],
    }, { q: "hi" });
    expect(r.execution.status).toBe("completed");
    expect(r.execution.output).toBe("hi!?");
    const kids = await children(a, r.id);
    expect(kids).toHaveLength(1);
    expect(kids[0]).toMatchObject({ status: "completed", parentNodeId: "sub", output: "hi!", input: { q: "hi" } });
  });

  it("delay: the node completes no earlier than its due time", async () => {
    const r = await run({
      nodes: [{ id: "before", type: "setVariable", config: { values: { x: 1 } } }, { id: "wait", type: "delay", config: { ms: 300 } }],
      edges: [{ from: "before", to: "wait" }],
    });
    expect(r.execution.status).toBe("completed");
    const wait = completed(r.nodes, "wait")[0]!;
    const { firedAt, dueAt } = wait.output as { firedAt: string; dueAt: string };
    expect(Date.parse(dueAt) - Date.parse(wait.startedAt)).toBeGreaterThanOrEqual(300);
    expect(Date.parse(firedAt)).toBeGreaterThanOrEqual(Date.parse(dueAt));
    expect(r.execution.output).toMatchObject({ firedAt });
  });

  it("emit: an execution.emitted event carries the name and the resolved data", async () => {
    const r = await run({
      nodes: [
        { id: "v", type: "setVariable", config: { values: { "$.vars.count": "$.input.n" } } },
        { id: "e", type: "emit", config: { event: "order.shipped", data: { count: "$.vars.count", fixed: "x" } } },
      ],
      edges: [{ from: "v", to: "e" }],
    }, { n: 3 });
    expect(r.execution.status).toBe("completed");
    const emitted = r.events.filter((e) => e.event === "execution.emitted");
    expect(emitted).toHaveLength(1);
    expect(emitted[0]!.data.data).toMatchObject({ node_id: "e", name: "order.shipped", data: { count: 3, fixed: "x" } });
    expect(r.execution.output).toEqual({ event: "order.shipped", data: { count: 3, fixed: "x" } });
  });

  it("setVariable and transform: $.path keys land in the context, plain keys in the output", async () => {
    const r = await run({
      nodes: [
        { id: "v", type: "setVariable", config: { values: { "$.vars.count": "$.input.n", plain: "$.input.a" } } },
        { id: "t", type: "transform", config: { expression: "{ 'times10': vars.count * 10, 'plain': v.plain, 'n': $count(input.list) }" } },
      ],
      edges: [{ from: "v", to: "t" }],
      output: { t: "$.t", vars: "$.vars", v: "$.v" },
    }, { n: 4, a: "x", list: [1, 2] });
    expect(r.execution.status).toBe("completed");
    expect(r.execution.output).toEqual({ t: { times10: 40, plain: "x", n: 2 }, vars: { count: 4 }, v: { plain: "x" } });
  });
});

describe("failure modes through the real services", () => {
  it("retry then succeed: failed attempts are journaled and announced as retrying", async () => {
    const key = `k-${uniq()}`;
    const r = await run({
      nodes: [{ id: "f", type: "tool", config: { tool: "flaky" }, input: { key, failures: 2 }, retry: { maxAttempts: 3, initialDelayMs: 50, jitter: 0 } }],
    });
    expect(r.execution.status).toBe("completed");
    expect(r.execution.output).toEqual({ calls: 3 });
    expect(await rec.flakyCount(key)).toBe(3);
    const f = r.nodes.filter((n) => n.nodeId === "f").sort((x, y) => x.attempt - y.attempt);
    expect(f.map((n) => `${n.attempt}:${n.status}`)).toEqual(["1:failed", "2:failed", "3:completed"]);
    const failedEvents = r.events.filter((e) => e.event === "node.failed");
    expect(failedEvents.map((e) => e.data.data.retrying)).toEqual([true, true]);
  });

  it("retries exhausted: the execution fails after maxAttempts calls", async () => {
    const key = `k-${uniq()}`;
    const r = await run({
      nodes: [{ id: "f", type: "tool", config: { tool: "flaky" }, input: { key, failures: 99 }, retry: { maxAttempts: 2, initialDelayMs: 50, jitter: 0 } }],
    });
    expect(r.execution.status).toBe("failed");
    expect(r.execution.error).toContain("after 2 attempt(s)");
    expect(await rec.flakyCount(key)).toBe(2);
    expect(r.nodes.filter((n) => n.nodeId === "f").map((n) => n.status)).toEqual(["failed", "failed"]);
    expect(r.names.at(-1)).toMatch(/^execution\.failed/);
  });

  it("node timeout: the call is aborted and the node fails with a timeout", async () => {
    const tag = uniq();
    const r = await run({ nodes: [{ id: "slow", type: "tool", config: { tool: "rec.sleep" }, input: { ms: 20_000, tag }, timeoutMs: 300 }] });
    expect(r.execution.status).toBe("failed");
    expect(r.execution.error).toMatch(/TIMEOUT/);
    const mine = (await rec.calls()).filter((c) => c.endsWith(`|${tag}`));
    expect(mine).toHaveLength(1);
    await waitFor("the sleep to be aborted", async () => ((await rec.aborted()).includes(mine[0]!) ? true : undefined));
    expect(await rec.finished()).not.toContain(mine[0]);
    expect(r.nodes.map((n) => `${n.nodeId}:${n.status}`)).toEqual(["slow:failed"]);
  });

  it("cancel while a tool runs: cancelled, the call aborted, no journal row left running", async () => {
    const tag = uniq();
    const wf = await createDefinition(a, `cancel-${tag}`, {
      nodes: [{ id: "first", type: "tool", config: { tool: "echo" } }, { id: "slow", type: "tool", config: { tool: "rec.sleep" }, input: { ms: 30_000, tag } }, { id: "never", type: "tool", config: { tool: "echo" } }],
      edges: [{ from: "first", to: "slow" }, { from: "slow", to: "never" }],
    });
    const id = await startExecution(a, wf);
    const call = await waitFor("the sleep to start", async () => (await rec.calls()).find((c) => c.endsWith(`|${tag}`)));
    const res = await a.call("POST", `/api/agent-workflow-executions/${id}/cancel`, { reason: "test says stop" });
    expect(res.status).toBe(202);
    const r = await finish(id, ["cancelled", "completed", "failed"]);
    expect(r.execution.status).toBe("cancelled");
    await waitFor("the sleep to be aborted", async () => ((await rec.aborted()).includes(call) ? true : undefined));
    expect(await rec.finished()).not.toContain(call);
    expect(r.nodes.some((n) => n.status === "running")).toBe(false);
    expect(rows(r.nodes)).toEqual(["first:completed", expect.stringMatching(/^slow:(failed|cancelled)$/)]);
    expect(r.names).not.toContain("node.started:never");
    expect(r.names.at(-1)).toBe("execution.cancelled");
    expect((await a.call("POST", `/api/agent-workflow-executions/${id}/cancel`, {})).status).toBe(409);
  });

  it("deadline from the execute request: the run fails with BATON_DEADLINE_EXCEEDED and the call is aborted", async () => {
    const tag = uniq();
    const r = await run({ nodes: [{ id: "slow", type: "tool", config: { tool: "rec.sleep" }, input: { ms: 30_000, tag } }] }, {}, { deadlineMs: 500 });
    expect(r.execution.status).toBe("failed");
    expect(r.execution.error).toContain("BATON_DEADLINE_EXCEEDED");
    const call = (await rec.calls()).find((c) => c.endsWith(`|${tag}`));
    expect(call).toBeDefined();
    await waitFor("the sleep to be aborted", async () => ((await rec.aborted()).includes(call!) ? true : undefined));
    expect(r.nodes.some((n) => n.status === "running")).toBe(false);
  });

  it("deadline from the definition's limits.deadlineMs", async () => {
    const r = await run({ limits: { deadlineMs: 400 }, nodes: [{ id: "slow", type: "tool", config: { tool: "rec.sleep" }, input: { ms: 30_000 } }] });
    expect(r.execution.status).toBe("failed");
    expect(r.execution.error).toContain("BATON_DEADLINE_EXCEEDED");
    expect(rows(r.nodes)).toEqual(["slow:failed"]);
  });

  // Was a bug (node.failed missing for nodes a cancel or deadline stopped), fixed in 0daf1ff.
  it("events close every node a cancel or deadline stopped (node.failed, as in the journal)", async () => {
    const cancelled = await createDefinition(a, `tl-${uniq()}`, { nodes: [{ id: "slow", type: "tool", config: { tool: "rec.sleep" }, input: { ms: 30_000, tag: "tl" } }] });
    const before = (await rec.calls()).length;
    const id = await startExecution(a, cancelled);
    await waitFor("the sleep to start", async () => ((await rec.calls()).length > before ? true : undefined));
    expect((await a.call("POST", `/api/agent-workflow-executions/${id}/cancel`, {})).status).toBe(202);
    const c = await finish(id, ["cancelled", "completed", "failed"], false);
    const d = await run({ limits: { deadlineMs: 300 }, nodes: [{ id: "slow", type: "tool", config: { tool: "rec.sleep" }, input: { ms: 30_000 } }] }, {}, {}, false);
    for (const r of [c, d]) {
      expect(timelineProblems(r.events, r.id, tenantId)).toEqual([]);
      const failed = r.events.find((e) => e.event === "node.failed");
      expect(failed?.data.data).toMatchObject({ node_id: "slow", attempt: 1, retrying: false, error: { code: "BATON_CANCELLED" } });
    }
  });
});

describe("retries of runs inside a run", () => {
  it("a subworkflow node's retry starts a new child when the child failed retryably; one that failed for good is not retried", async () => {
    const tag = uniq();
    const flakySlug = `flaky-child-${tag}`;
    const key = `sub-${tag}`;
    await createDefinition(a, flakySlug, { nodes: [{ id: "f", type: "tool", config: { tool: "flaky" }, input: { key, failures: 1 } }], output: { calls: "$.f.calls" } }, { slug: flakySlug });
    const wf = await createDefinition(a, `retry-sub-${tag}`, {
      nodes: [{ id: "sub", type: "subworkflow", config: { workflow: { slug: flakySlug } }, retry: { maxAttempts: 3, initialDelayMs: 50, jitter: 0 } }],
      output: { sub: "$.sub" },
    });
    const r = await finish(await startExecution(a, wf));
    expect({ status: r.execution.status, output: r.execution.output }).toEqual({ status: "completed", output: { sub: { calls: 2 } } });
    expect((await children(a, r.id)).map((c) => `${c.childKey}:${c.status}`).sort()).toEqual(["1:failed", "2:completed"]);
    expect(r.nodes.filter((n) => n.nodeId === "sub").map((n) => `${n.attempt}:${n.status}`)).toEqual(["1:failed", "2:completed"]);

    // A child that fails with a failure no attempt can fix (a rejected review) is not run again.
    const rejectSlug = `reject-child-${tag}`;
    await createDefinition(a, rejectSlug, { nodes: [{ id: "r", type: "transform", config: { expression: "$error('no')" } }] }, { slug: rejectSlug });
    const wf2 = await createDefinition(a, `retry-sub-final-${tag}`, {
      nodes: [{ id: "sub", type: "subworkflow", config: { workflow: { slug: rejectSlug } }, retry: { maxAttempts: 3, initialDelayMs: 50, jitter: 0 } }],
    });
    const r2 = await finish(await startExecution(a, wf2));
    expect(r2.execution.status).toBe("failed");
    expect(await children(a, r2.id)).toHaveLength(1);
  });

  it("a forEach over child runs retries an item whose child failed retryably", async () => {
    const key = `each-${uniq()}`;
    const r = await run({
      nodes: [{
        id: "each", type: "forEach", retry: { maxAttempts: 3, initialDelayMs: 50, jitter: 0 },
        config: { items: "$.input.xs", body: { nodes: [{ id: "f", type: "tool", config: { tool: "flaky" }, input: { key, failures: 1 } }], output: { calls: "$.f.calls" } } },
      }],
      output: { each: "$.each" },
    }, { xs: [1] });
    expect({ status: r.execution.status, output: r.execution.output }).toEqual({ status: "completed", output: { each: [{ calls: 2 }] } });
    expect((await children(a, r.id)).map((c) => c.status).sort()).toEqual(["completed", "failed"]);
  });
});

describe("timeouts, retries, deadlines and idempotency keys together", () => {
  it("a timed-out attempt is aborted and retried; the retry's answer completes the node", async () => {
    const key = `slow-${uniq()}`;
    const r = await run({ nodes: [{ id: "t", type: "tool", config: { tool: "slow.once" }, input: { key, ms: 20_000 }, timeoutMs: 300, retry: { maxAttempts: 2, initialDelayMs: 0 } }] });
    expect(r.execution.status).toBe("completed");
    expect(r.execution.output).toEqual({ calls: 2, attempt: 2 });
    const t = r.nodes.filter((n) => n.nodeId === "t").sort((x, y) => x.attempt - y.attempt);
    expect(t.map((n) => `${n.attempt}:${n.status}`)).toEqual(["1:failed", "2:completed"]);
    expect(t[0]!.error).toMatch(/TIMEOUT|timed out/i);
    await waitFor("the first attempt to be aborted", async () => ((await rec.aborted()).includes(`${r.id}.t.1`) ? true : undefined));
  });

  it("the handler gets the node's idempotency key, the same on every attempt, and a call id per attempt", async () => {
    const key = `k-${uniq()}`;
    const r = await run({
      nodes: [
        { id: "own", type: "tool", config: { tool: "rec.ctx" }, input: { failFirst: `${key}-own` }, idempotencyKey: "$.input.orderId", retry: { maxAttempts: 2, initialDelayMs: 0 } },
        { id: "dflt", type: "tool", config: { tool: "rec.ctx" }, input: { failFirst: `${key}-dflt` }, retry: { maxAttempts: 2, initialDelayMs: 0 } },
      ],
      edges: [{ from: "own", to: "dflt" }],
      output: { own: "$.own", dflt: "$.dflt" },
    }, { orderId: "order-77" });
    expect(r.execution.status).toBe("completed");
    expect(r.execution.output).toEqual({
      own: { idempotencyKey: "order-77", callId: `${r.id}.own.2`, executionId: r.id, tenantId, nodeId: "own", attempt: 2 },
      dflt: { idempotencyKey: `${r.id}.dflt`, callId: `${r.id}.dflt.2`, executionId: r.id, tenantId, nodeId: "dflt", attempt: 2 },
    });
    // The failed first attempts were told the same keys.
    const failed = r.nodes.filter((n) => n.status === "failed").map((n) => `${n.nodeId}:${n.error ?? ""}`).sort();
    expect(failed).toEqual([expect.stringMatching(/^dflt:.*\(key \d+\.dflt\) fails/), expect.stringMatching(/^own:.*\(key order-77\) fails/)]);
  });

  it("a deadline also ends a run paused at a review or waiting on a delay", async () => {
    const paused = await run({
      nodes: [{ id: "a", type: "tool", config: { tool: "echo" } }, { id: "review", type: "humanReview", config: { reason: "too slow" } }],
      edges: [{ from: "a", to: "review" }],
    }, {}, { deadlineMs: 600 });
    expect(paused.execution.status).toBe("failed");
    expect(paused.execution.error).toContain("BATON_DEADLINE_EXCEEDED");
    expect(rows(paused.nodes)).toEqual(["a:completed", "review:failed"]);
    // Its review is closed too, not left pending for ever.
    const closed = await waitFor("the review closed", async () => {
      const r = await a.call<{ items: { status: string; decision: { decision: string } | null }[] }>("GET", `/api/reviews?executionId=${paused.id}`);
      const item = r.body.items[0];
      return item && item.status !== "pending" ? item : undefined;
    });
    expect(closed).toMatchObject({ status: "rejected", decision: { decision: "cancelled" } });
    const delayed = await run({ nodes: [{ id: "w", type: "delay", config: { ms: 60_000 } }] }, {}, { deadlineMs: 500 });
    expect(delayed.execution.status).toBe("failed");
    expect(delayed.execution.error).toContain("BATON_DEADLINE_EXCEEDED");
    expect(rows(delayed.nodes)).toEqual(["w:failed"]);
  });

  it("a forEach's children inherit the parent's deadline", async () => {
    const tag = uniq();
    const r = await run({
      nodes: [{ id: "each", type: "forEach", config: { items: "$.input.xs", body: { nodes: [{ id: "z", type: "tool", config: { tool: "rec.sleep" }, input: { ms: 30_000, tag } }] } } }],
    }, { xs: [1, 2] }, { deadlineMs: 800 });
    expect(r.execution.status).toBe("failed");
    expect(r.execution.error).toContain("BATON_DEADLINE_EXCEEDED");
    const kids = await waitFor("children to end", async () => {
      const k = await children(a, r.id);
      return k.length === 2 && k.every((c) => c.status !== "running" && c.status !== "queued") ? k : undefined;
    });
    for (const k of kids) expect(["failed", "cancelled"]).toContain(k.status);
    expect(kids.every((k) => k.deadlineAt !== null)).toBe(true);
  });
});

describe("cancel reaches everything a run has out", () => {
  // Was a bug (the cancel rewrote the failed attempt's row as "cancelled"), fixed in 69a3047.
  it("cancel during a retry's backoff keeps the failed attempt's row and starts no further attempt", async () => {
    const key = `k-${uniq()}`;
    const wf = await createDefinition(a, `cancel-backoff-${uniq()}`, {
      nodes: [{ id: "f", type: "tool", config: { tool: "flaky" }, input: { key, failures: 99 }, retry: { maxAttempts: 3, initialDelayMs: 60_000, jitter: 0 } }],
    });
    const id = await startExecution(a, wf);
    await waitFor("the first attempt to fail", async () => ((await journal(a, id)).some((n) => n.nodeId === "f" && n.status === "failed") ? true : undefined));
    expect((await a.call("POST", `/api/agent-workflow-executions/${id}/cancel`, {})).status).toBe(202);
    const r = await finish(id, ["cancelled", "completed", "failed"], false);
    expect(r.execution.status).toBe("cancelled");
    expect(await rec.flakyCount(key)).toBe(1);
    const f = r.nodes.filter((n) => n.nodeId === "f");
    expect(f.map((n) => `${n.attempt}:${n.status}`)).toEqual(["1:failed"]);
    // The row tells what really happened to attempt 1: the tool failed (not "cancelled").
    expect(f[0]!.error).toContain("flaky failure 1");
    // …and the events close attempt 1 once (its node.failed with retrying: true), not twice.
    expect(timelineProblems(r.events, id, tenantId)).toEqual([]);
  });

  it("cancel of a long loop of inline steps: the loop gives way to the cancel", async () => {
    const wf = await createDefinition(a, `inline-loop-${uniq()}`, {
      start: "init",
      nodes: [
        { id: "init", type: "setVariable", config: { values: { "$.vars.i": 0 } } },
        { id: "loop", type: "whileLoop", config: { condition: "vars.i < 100000", maxIterations: 100_000 } },
        { id: "inc", type: "transform", config: { expression: "vars.i + 1" }, output: "$.vars.i" },
      ],
      edges: [{ from: "init", to: "loop" }, { from: "loop", to: "inc", when: "body" }, { from: "inc", to: "loop" }],
    });
    const id = await startExecution(a, wf);
    await waitFor("the loop going round", async () => ((await journal(a, id)).length > 20 ? true : undefined));
    expect((await a.call("POST", `/api/agent-workflow-executions/${id}/cancel`, { reason: "enough" })).status).toBe(202);
    const r = await finish(id, ["cancelled", "completed", "failed"]);
    expect(r.execution.status).toBe("cancelled");
    // Far from its 100,000 iterations: each iteration journals its two nodes.
    expect(r.nodes.length).toBeLessThan(20_000);
  }, 30_000);

  it("two reviews waiting at once: resume names the one it decides", async () => {
    const wf = await createDefinition(a, `two-reviews-${uniq()}`, {
      nodes: [
        { id: "a", type: "tool", config: { tool: "echo" } },
        { id: "r1", type: "humanReview", config: { reason: "first" } },
        { id: "r2", type: "humanReview", config: { reason: "second" } },
      ],
      edges: [{ from: "a", to: "r1" }, { from: "a", to: "r2" }],
    });
    const id = await startExecution(a, wf);
    await waitFor("both reviews waiting", async () => ((await journal(a, id)).filter((n) => n.status === "paused").length === 2 ? true : undefined));
    const resume = (body: Record<string, unknown>) => a.call<{ code?: string }>("POST", `/api/agent-workflow-executions/${id}/resume`, body);
    // A node that waits for nothing is refused, whatever the execution's pause point.
    const wrong = await resume({ action: "approve", nodeId: "a" });
    expect({ status: wrong.status, code: wrong.body.code }).toEqual({ status: 409, code: "BATON_GATEWAY_EXECUTION_NOT_PAUSED" });
    expect((await resume({ action: "reject", nodeId: "r1", comment: "no" })).status).toBe(202);
    await waitFor("r1 decided", async () => ((await journal(a, id)).find((n) => n.nodeId === "r1")?.status === "failed" ? true : undefined));
    const r = await finish(id, ["cancelled", "completed", "failed"]);
    // r1 had no rejection path: the run failed on it, and r2 was closed with it.
    expect(r.execution.error).toContain("BATON_REVIEW_REJECTED");
    expect(rows(r.nodes)).toEqual(expect.arrayContaining(["r1:failed", "r2:failed"]));
  });

  it("a review's record keeps who decided, the comment and an edit's data", async () => {
    const wf = await createDefinition(a, `review-record-${uniq()}`, {
      nodes: [{ id: "a", type: "tool", config: { tool: "echo" } }, { id: "rev", type: "humanReview", config: { reason: "ok?" } }],
      edges: [{ from: "a", to: "rev" }],
    });
    const decide = async (body: Record<string, unknown>) => {
      const id = await startExecution(a, wf);
      await waitForExecution(a, id, ["paused"]);
      expect((await a.call("POST", `/api/agent-workflow-executions/${id}/resume`, body)).status).toBe(202);
      return waitFor("the review decided", async () => {
        const r = await a.call<{ items: { status: string; reviewer: string | null; decision: unknown }[] }>("GET", `/api/reviews?executionId=${id}`);
        const item = r.body.items[0];
        return item && item.status !== "pending" ? item : undefined;
      });
    };
    expect(await decide({ action: "edit", reviewer: "alice", comment: "fixed the amount", data: { x: 42 } }))
      .toMatchObject({ status: "edited", reviewer: "alice", decision: { decision: "edit", comment: "fixed the amount", data: { x: 42 } } });
    expect(await decide({ action: "reject", reviewer: "bob", comment: "no" })).toMatchObject({ status: "rejected", reviewer: "bob", decision: { decision: "reject", comment: "no" } });
    const approved = await decide({ action: "approve" });
    expect(approved).toMatchObject({ status: "approved", reviewer: null, decision: { decision: "approve" } });
  });

  it("cancel while paused at a review: cancelled, the review row closed", async () => {
    const wf = await createDefinition(a, `cancel-paused-${uniq()}`, {
      nodes: [{ id: "a", type: "tool", config: { tool: "echo" } }, { id: "review", type: "humanReview", config: { reason: "ok?" } }, { id: "b", type: "tool", config: { tool: "echo" } }],
      edges: [{ from: "a", to: "review" }, { from: "review", to: "b" }],
    });
    const id = await startExecution(a, wf);
    await waitForExecution(a, id, ["paused"]);
    expect((await a.call("POST", `/api/agent-workflow-executions/${id}/cancel`, { reason: "no longer needed" })).status).toBe(202);
    const r = await finish(id, ["cancelled", "completed", "failed"]);
    expect(r.execution.status).toBe("cancelled");
    expect(rows(r.nodes)).toEqual(["a:completed", "review:failed"]);
    expect((await a.call("POST", `/api/agent-workflow-executions/${id}/resume`, { action: "approve" })).status).toBe(409);
  });

  it("cancel of a parent cancels its running children (forEach body and subworkflow) and aborts their calls", async () => {
    const slug = `sleepy-${uniq()}`;
    const tag = uniq();
    await createDefinition(a, `child-${slug}`, { nodes: [{ id: "z", type: "tool", config: { tool: "rec.sleep" }, input: { ms: 30_000, tag: `${tag}-sub` } }] }, { slug });
    const wf = await createDefinition(a, `cancel-kids-${tag}`, {
      start: "s",
      nodes: [
        { id: "s", type: "setVariable", config: { values: { go: true } } },
        { id: "each", type: "forEach", config: { items: "$.input.xs", concurrency: 2, body: { nodes: [{ id: "z", type: "tool", config: { tool: "rec.sleep" }, input: { ms: 30_000, tag: `${tag}-each` } }] } } },
        { id: "sub", type: "subworkflow", config: { workflow: { slug } } },
      ],
      edges: [{ from: "s", to: "each" }, { from: "s", to: "sub" }],
    });
    const id = await startExecution(a, wf, { xs: [1, 2, 3] });
    const started = await waitFor("three child calls to start", async () => {
      const mine = (await rec.calls()).filter((c) => c.includes(`|${tag}-`));
      return mine.length >= 3 ? mine : undefined;
    });
    expect((await a.call("POST", `/api/agent-workflow-executions/${id}/cancel`, {})).status).toBe(202);
    const r = await finish(id, ["cancelled", "completed", "failed"]);
    expect(r.execution.status).toBe("cancelled");
    const kids = await waitFor("children to end", async () => {
      const k = await children(a, id);
      return k.every((c) => ["cancelled", "failed", "completed"].includes(c.status)) ? k : undefined;
    });
    expect(kids).toHaveLength(3); // two items (concurrency 2) and the subworkflow
    expect(kids.map((k) => k.status)).toEqual(["cancelled", "cancelled", "cancelled"]);
    await waitFor("every child call to be aborted", async () => {
      const aborted = await rec.aborted();
      return started.every((c) => aborted.includes(c)) ? true : undefined;
    });
  });
});

describe("a child cancelled on its own", () => {
  it("fails its forEach (and so the parent), which cancels the sibling; with continueOnError the item records the cancel", async () => {
    const tag = uniq();
    const body = { nodes: [{ id: "z", type: "tool", config: { tool: "rec.sleep" }, input: { ms: 30_000, tag } }] };
    const strict = await createDefinition(a, `kid-cancel-${tag}`, { nodes: [{ id: "each", type: "forEach", config: { items: "$.input.xs", body } }] });
    const id = await startExecution(a, strict, { xs: [1, 2] });
    const kids = await waitFor("both children to run their call", async () => {
      const k = await children(a, id);
      const calls = await rec.calls();
      return k.length === 2 && k.every((c) => calls.some((x) => x.startsWith(`${c.id}.z.`))) ? k : undefined;
    });
    expect((await a.call("POST", `/api/agent-workflow-executions/${kids[0]!.id}/cancel`, { reason: "just this one" })).status).toBe(202);
    const r = await finish(id, ["completed", "failed", "cancelled"]);
    expect(r.execution.status).toBe("failed");
    expect(r.nodes.map((n) => `${n.nodeId}:${n.status}`)).toEqual(["each:failed"]);
    // The cancel's reason reaches the parent, under the parent's own code.
    expect(r.nodes[0]!.error).toContain("child run cancelled: just this one");
    expect(r.execution.error).toMatch(/^BATON_CHILD_CANCELLED: .*child run cancelled: just this one/);
    const after = await waitFor("the sibling to end", async () => {
      const k = await children(a, id);
      return k.every((c) => c.status !== "running") ? k : undefined;
    });
    expect(after.map((k) => k.status)).toEqual(["cancelled", "cancelled"]);

    const lenient = await createDefinition(a, `kid-cancel-ok-${tag}`, {
      nodes: [{ id: "each", type: "forEach", config: { items: "$.input.xs", continueOnError: true, body: { nodes: [{ id: "z", type: "tool", config: { tool: "rec.sleep" }, input: { ms: "$.input.item", tag } }] } } }],
    });
    const id2 = await startExecution(a, lenient, { xs: [30_000, 10] });
    const slowKid = await waitFor("the slow child's call", async () => {
      const k = await children(a, id2);
      const calls = await rec.calls();
      return k.find((c) => c.input?.item === 30_000 && calls.some((x) => x.startsWith(`${c.id}.z.`)));
    });
    expect((await a.call("POST", `/api/agent-workflow-executions/${slowKid.id}/cancel`, {})).status).toBe(202);
    const r2 = await finish(id2, ["completed", "failed", "cancelled"]);
    expect(r2.execution.status).toBe("completed");
    const out = r2.execution.output as unknown as unknown[];
    // No reason given: nothing more to say.
    expect(out[0]).toMatchObject({ error: { code: "BATON_CHILD_CANCELLED", message: "child run cancelled" } });
    expect(out[1]).toEqual({ slept: 10, v: null });
  });
});

describe("forks of runs that ended or ran inside another", () => {
  it("a fork of a failed run runs again what failed and what the failure stopped, then goes on", async () => {
    const key = `fork-failed-${uniq()}`;
    const src = await run({
      nodes: [
        { id: "s", type: "setVariable", config: { values: { "$.vars.k": key } } },
        { id: "bad", type: "tool", config: { tool: "flaky" }, input: { key, failures: 1 } },
        { id: "slow", type: "tool", config: { tool: "rec.sleep" }, input: { ms: 2000, v: "slow" } },
        { id: "j", type: "transform", config: { expression: "[bad.calls, slow.v]" } },
      ],
      edges: [{ from: "s", to: "bad" }, { from: "s", to: "slow" }, { from: "bad", to: "j" }, { from: "slow", to: "j" }],
      output: { j: "$.j" },
    });
    expect(src.execution.status).toBe("failed");
    const cps = (await a.call<{ items: { version: number }[] }>("GET", `/api/agent-workflow-executions/${src.id}/checkpoints`)).body.items;
    const forked = await a.call<{ id: number }>("POST", `/api/agent-workflow-executions/${src.id}/fork`, { version: cps[0]!.version });
    expect(forked.status).toBe(202);
    const fork = await finish(forked.body.id);
    expect({ status: fork.execution.status, output: fork.execution.output }).toEqual({ status: "completed", output: { j: [2, "slow"] } });
    expect(rows(fork.nodes)).toEqual(expect.arrayContaining(["bad:completed", "slow:completed", "j:completed"]));
  }, 30_000);

  it("a fork of a forEach body's run runs that body", async () => {
    const parent = await run({
      nodes: [{ id: "each", type: "forEach", config: { items: "$.input.xs", body: {
        nodes: [{ id: "z", type: "tool", config: { tool: "rec.sleep" }, input: { ms: 1, v: "$.input.item" } }, { id: "y", type: "transform", config: { expression: "z.v * 2" } }],
        edges: [{ from: "z", to: "y" }],
        output: { v: "$.y" },
      } } }],
      output: { each: "$.each" },
    }, { xs: [21] });
    expect(parent.execution.output).toEqual({ each: [{ v: 42 }] });
    const [child] = await children(a, parent.id);
    const cps = (await a.call<{ items: { version: number }[] }>("GET", `/api/agent-workflow-executions/${child!.id}/checkpoints`)).body.items;
    const first = cps.at(-1)!.version; // z still running there
    const forked = await a.call<{ id: number }>("POST", `/api/agent-workflow-executions/${child!.id}/fork`, { version: first });
    expect(forked.status).toBe(202);
    const fork = await finish(forked.body.id);
    expect({ status: fork.execution.status, output: fork.execution.output }).toEqual({ status: "completed", output: { v: 42 } });
    // Its own run: no parent, and its start names none.
    expect(fork.events[0]!.data.data).toMatchObject({ parent_execution_id: 0, root_execution_id: 0, forked_from_execution_id: child!.id });
  }, 30_000);
});

describe("more shapes", () => {
  it("forEach continueOnError keeps going and records the failed item", async () => {
    const key = `k-${uniq()}`;
    const r = await run({
      nodes: [{ id: "each", type: "forEach", config: { items: "$.input.xs", tool: "flaky", itemInput: { key: "$.item", failures: 1 }, continueOnError: true } }],
    }, { xs: [`${key}-a`, `${key}-a`, `${key}-b`] });
    expect(r.execution.status).toBe("completed");
    const out = r.execution.output as unknown as unknown[];
    expect(out).toHaveLength(3);
    expect(out.filter((o) => (o as { error?: unknown }).error !== undefined)).toHaveLength(2);
  });

  it("whileLoop at maxIterations fails with BATON_LOOP_LIMIT, or exits with onLimit: exit", async () => {
    const loop = (onLimit: string) => ({
      nodes: [
        { id: "loop", type: "whileLoop", config: { condition: "true", maxIterations: 2, onLimit } },
        { id: "work", type: "tool", config: { tool: "echo" }, input: { x: 1 } },
        { id: "done", type: "transform", config: { expression: "loop.iterations" } },
      ],
      edges: [{ from: "loop", to: "work", when: "body" }, { from: "work", to: "loop" }, { from: "loop", to: "done", when: "exit" }],
    });
    const failed = await run(loop("fail"));
    expect(failed.execution.status).toBe("failed");
    expect(failed.execution.error).toContain("BATON_LOOP_LIMIT");
    const exited = await run(loop("exit"));
    expect(exited.execution.status).toBe("completed");
    expect(exited.execution.output).toBe(2);
    expect(completed(exited.nodes, "work")).toHaveLength(2);
  });

  it("a run past limits.maxSteps fails with BATON_STEP_LIMIT; a loop that may go past it is accepted with a warning", async () => {
    // A loop of a thousand passes of inline nodes under a limit of 30 node starts: the limit
    // ends the run (the definition is stored with a step_limit warning).
    const r = await run({
      start: "s",
      limits: { maxSteps: 30 },
      nodes: [
        { id: "s", type: "setVariable", config: { values: {} } },
        { id: "a", type: "whileLoop", config: { condition: "true", maxIterations: 1000, onLimit: "exit" } },
        { id: "b", type: "setVariable", config: { values: { x: 1 } } },
      ],
      edges: [{ from: "s", to: "a" }, { from: "a", to: "b", when: "body" }, { from: "b", to: "a" }],
    });
    expect(r.execution.status).toBe("failed");
    expect(r.execution.error).toMatch(/^BATON_STEP_LIMIT: the execution made 30 node starts, limits\.maxSteps=30; node "[ab]" would have been one more/);
    expect(r.nodes).toHaveLength(30);
    expect(r.nodes.filter((n) => n.status === "running")).toEqual([]);
    expect(r.names.at(-1)).toMatch(/^execution\.failed:[ab]$/);
    expect(r.events.at(-1)!.data.data).toMatchObject({ error: { code: "BATON_STEP_LIMIT", retryable: false } });
    const created = await a.call<{ warnings?: string[] }>("POST", "/api/agent-workflows", {
      name: `steps-${uniq()}`,
      definition: { limits: { maxSteps: 10 }, start: "l", nodes: [{ id: "l", type: "whileLoop", config: { condition: "true", maxIterations: 6 } }, { id: "x", type: "setVariable", config: { values: {} } }], edges: [{ from: "l", to: "x", when: "body" }, { from: "x", to: "l" }] },
    });
    expect([created.status, created.body.warnings]).toEqual([201, [
      'body.definition.nodes[0].config.maxIterations: whileLoop "l" may go round 6 times over 2 nodes (12 node starts), more than limits.maxSteps (10) allows: a run that goes round that often fails with BATON_STEP_LIMIT; raise limits.maxSteps',
    ]]);
  });

  it("a tool node with several calls runs them all and keeps their order", async () => {
    const r = await run({ nodes: [{ id: "m", type: "tool", config: { calls: [{ tool: "rec.sleep", input: { ms: 200, v: 1 } }, { tool: "echo", input: { n: "$.input.x" } }, { tool: "math.sum", input: { values: [1, 2, 3] } }] } }] }, { x: 2 });
    expect(r.execution.status).toBe("completed");
    expect(r.execution.output).toEqual([{ slept: 200, v: 1 }, { n: 2 }, { sum: 6, count: 3 }]);
  });

  it("edge guards with branching first take only the first matching edge", async () => {
    const def = {
      start: "s",
      nodes: [
        { id: "s", type: "transform", config: { expression: "input.n * 2" }, branching: "first" },
        { id: "big", type: "setVariable", config: { values: { size: "big" } } },
        { id: "any", type: "setVariable", config: { values: { size: "any" } } },
      ],
      edges: [{ from: "s", to: "big", condition: "$output > 10" }, { from: "s", to: "any" }],
    };
    const wf = await createDefinition(a, `guards-${uniq()}`, def);
    const big = await finish(await startExecution(a, wf, { n: 6 }));
    expect(big.execution.output).toEqual({ size: "big" });
    expect(big.names).toContain("node.skipped:any");
    const small = await finish(await startExecution(a, wf, { n: 2 }));
    expect(small.execution.output).toEqual({ size: "any" });
    expect(small.names).toContain("node.skipped:big");
  });

  it("subworkflow by id with a pinned version, by slug at the current version, and a missing slug fails the node", async () => {
    const slug = `ver-${uniq()}`;
    const child = await createDefinition(a, `child-${slug}`, { nodes: [{ id: "c", type: "transform", config: { expression: "'v1'" } }] }, { slug });
    const put = await a.call("PUT", `/api/agent-workflows/${child}`, { definition: { nodes: [{ id: "c", type: "transform", config: { expression: "'v2'" } }] } });
    expect(put.status).toBe(200);
    const r = await run({
      start: "s",
      nodes: [
        { id: "s", type: "setVariable", config: { values: { go: true } } },
        { id: "pinned", type: "subworkflow", config: { workflow: { id: child, version: 1 } } },
        { id: "current", type: "subworkflow", config: { workflow: { slug } } },
      ],
      edges: [{ from: "s", to: "pinned" }, { from: "s", to: "current" }],
      output: { pinned: "$.pinned", current: "$.current" },
    });
    expect(r.execution.status).toBe("completed");
    expect(r.execution.output).toEqual({ pinned: "v1", current: "v2" });
    const missing = await run({ nodes: [{ id: "sub", type: "subworkflow", config: { workflow: { slug: `nope-${uniq()}` } } }] });
    expect(missing.execution.status).toBe("failed");
    expect(missing.execution.error).toContain("BATON_EXECUTOR_CHILD_WORKFLOW_MISSING");
  });

  it("a child by slug runs the version current when its top-level run began, though the workflow is updated mid-run; a fork keeps its source's", async () => {
    const slug = `mid-${uniq()}`;
    const child = await createDefinition(a, `child-${slug}`, { nodes: [{ id: "c", type: "transform", config: { expression: "'v1'" } }] }, { slug });
    const wf = await createDefinition(a, `parent-${slug}`, {
      start: "first",
      nodes: [
        { id: "first", type: "subworkflow", config: { workflow: { slug } } },
        { id: "wait", type: "humanReview", config: { reason: "update the child now" } },
        { id: "each", type: "forEach", config: { items: "$.input.items", workflow: { slug }, concurrency: 1 } },
      ],
      edges: [{ from: "first", to: "wait" }, { from: "wait", to: "each" }],
      output: { first: "$.first", each: "$.each" },
    });
    const id = await startExecution(a, wf, { items: [1, 2] });
    await waitForExecution(a, id, ["paused"]);
    const put = await a.call("PUT", `/api/agent-workflows/${child}`, { definition: { nodes: [{ id: "c", type: "transform", config: { expression: "'v2'" } }] } });
    expect(put.status).toBe(200);
    // A fork of the paused run, taken after the update, runs what its source would.
    const cps = (await a.call<{ items: { version: number; status: string }[] }>("GET", `/api/agent-workflow-executions/${id}/checkpoints`)).body.items;
    const forked = await a.call<{ id: number }>("POST", `/api/agent-workflow-executions/${id}/fork`, { version: cps.find((c) => c.status === "paused")!.version });
    expect(forked.status).toBe(202);
    for (const run of [id, forked.body.id]) {
      await waitForExecution(a, run, ["paused"]);
      expect((await a.call("POST", `/api/agent-workflow-executions/${run}/resume`, { action: "approve" })).status).toBe(202);
      const r = await finish(run);
      expect(r.execution.status).toBe("completed");
      expect(r.execution.output).toEqual({ first: "v1", each: ["v1", "v1"] });
    }
    // A run begun after the update runs the new version.
    const later = await startExecution(a, wf, { items: [1] });
    await waitForExecution(a, later, ["paused"]);
    expect((await a.call("POST", `/api/agent-workflow-executions/${later}/resume`, { action: "approve" })).status).toBe(202);
    expect((await finish(later)).execution.output).toEqual({ first: "v2", each: ["v2"] });
  });

  it("a sub-workflow that starts itself stops at the nesting limit: the deepest run's node fails with BATON_EXECUTOR_NESTING_TOO_DEEP, and so does every run above it", async () => {
    const slug = `self-${uniq()}`;
    const wf = await createDefinition(a, `recursive-${slug}`, {
      nodes: [{ id: "again", type: "subworkflow", config: { workflow: { slug } } }],
    }, { slug });
    const id = await startExecution(a, wf, {});
    const top = await waitForExecution(a, id, ["completed", "failed", "cancelled"], 60_000);
    expect(top.status).toBe("failed");
    expect(top.error).toContain("BATON_EXECUTOR_NESTING_TOO_DEEP");
    // Level 1 is the top; each level started exactly one child, down to level 32.
    let level = 1;
    for (let at = id; ; level++) {
      const kids = await children(a, at);
      if (kids.length === 0) break;
      expect(kids).toHaveLength(1);
      expect(kids[0]!.status).toBe("failed");
      at = kids[0]!.id;
    }
    expect(level).toBe(32);
  }, 90_000);

  it("limits.maxConcurrency caps the nodes doing outside work at once", async () => {
    const gauge = `mc-${uniq()}`;
    const r = await run({
      limits: { maxConcurrency: 2 },
      start: "s",
      nodes: [
        { id: "s", type: "setVariable", config: { values: { go: true } } },
        ...["a", "b", "c", "d"].map((id) => ({ id, type: "tool", config: { tool: "rec.sleep" }, input: { ms: 150, v: id, gauge } })),
        { id: "j", type: "transform", config: { expression: "[a.v, b.v, c.v, d.v]" } },
      ],
      edges: [...["a", "b", "c", "d"].flatMap((id) => [{ from: "s", to: id }, { from: id, to: "j" }])],
    });
    expect(r.execution.status).toBe("completed");
    expect(r.execution.output).toEqual(["a", "b", "c", "d"]);
    const levels = await rec.gauge(gauge);
    expect(levels).toHaveLength(4);
    expect(Math.max(...levels)).toBeLessThanOrEqual(2);
  });

  it("a failing expression fails its node and the run with BATON_EXPRESSION_FAILED", async () => {
    const r = await run({
      nodes: [{ id: "a", type: "tool", config: { tool: "echo" } }, { id: "x", type: "transform", config: { expression: "$error('nope')" } }],
      edges: [{ from: "a", to: "x" }],
    });
    expect(r.execution.status).toBe("failed");
    expect(r.execution.error).toContain("BATON_EXPRESSION_FAILED");
    expect(rows(r.nodes)).toEqual(["a:completed", "x:failed"]);
    const failed = r.events.find((e) => e.event === "node.failed");
    expect(failed?.data.data).toMatchObject({ node_id: "x", retrying: false, error: { code: "BATON_EXPRESSION_FAILED" } });
  });

  it("input failing the definition's inputSchema is refused", async () => {
    const wf = await createDefinition(a, `schema-${uniq()}`, {
      inputSchema: { type: "object", properties: { n: { type: "number" } }, required: ["n"] },
      nodes: [{ id: "t", type: "transform", config: { expression: "input.n + 1" } }],
    });
    const bad = await a.call<{ errors?: { path: string }[]; detail?: string }>("POST", `/api/agent-workflows/${wf}/execute`, { input: { n: "x" } });
    expect(bad.status).toBe(400);
    expect(bad.headers.get("content-type")).toContain("application/problem+json");
    const ok = await finish(await startExecution(a, wf, { n: 1 }));
    expect(ok.execution.output).toBe(2);
  });
});

describe("validation on create", () => {
  const node = (id: string, type = "transform", config: Record<string, unknown> = { expression: "1" }) => ({ id, type, config });
  const cases: [string, unknown][] = [
    ["invalid_shape", { nodes: "not a list" }],
    ["no_nodes", { nodes: [] }],
    ["missing_start", { start: "ghost", nodes: [node("a")] }],
    ["duplicate_node_id", { nodes: [node("a"), node("a")] }],
    ["unknown_node_type", { nodes: [node("a", "teleport", {})] }],
    ["invalid_config", { nodes: [node("a", "delay", { seconds: 3 })] }],
    ["dangling_edge", { nodes: [node("a")], edges: [{ from: "a", to: "ghost" }] }],
    ["invalid_branch", { nodes: [{ id: "c", type: "condition", config: { left: 1, op: "eq", right: 1 } }, node("b")], edges: [{ from: "c", to: "b", when: "maybe" }] }],
    ["invalid_expression", { nodes: [node("a", "transform", { expression: "((" })] }],
    ["invalid_path", { nodes: [{ ...node("a"), output: "$.input.x" }] }],
    ["unbounded_cycle", { nodes: [node("a"), node("b")], edges: [{ from: "a", to: "b" }, { from: "b", to: "a" }] }],
    ["unreachable_node", { start: "a", nodes: [node("a"), node("b")] }],
    ["join_never_fires", { nodes: [node("a"), { ...node("b"), join: { n: 3 } }], edges: [{ from: "a", to: "b" }] }],
    ["invalid_input_schema", { inputSchema: { type: "nonsense" }, nodes: [node("a")] }],
  ];

  it.each(cases)("%s answers 400 problem+json naming it", async (code, definition) => {
    const name = `bad-${code}-${uniq()}`;
    const res = await a.call<{ status: number; errors: { code: string; path: string; message: string }[] }>("POST", "/api/agent-workflows", { name, definition });
    expect(res.status).toBe(400);
    expect(res.headers.get("content-type")).toContain("application/problem+json");
    expect(res.body.status).toBe(400);
    expect(res.body.errors.map((e) => e.code)).toContain(code);
    for (const e of res.body.errors) expect(e.message).toEqual(expect.any(String));
  });

  it("a definition with several errors lists them all, and nothing is stored", async () => {
    const name = `bad-many-${uniq()}`;
    const res = await a.call<{ errors: { code: string; path: string }[] }>("POST", "/api/agent-workflows", {
      name,
      definition: {
        start: "ghost",
        nodes: [node("a", "teleport", {}), node("a"), node("d", "delay", { seconds: 1 }), node("x", "transform", { expression: "((" })],
        edges: [{ from: "a", to: "nowhere" }],
      },
    });
    expect(res.status).toBe(400);
    const codes = res.body.errors.map((e) => e.code);
    expect(codes).toEqual(expect.arrayContaining(["missing_start", "unknown_node_type", "duplicate_node_id", "invalid_config", "invalid_expression", "dangling_edge"]));
    expect(res.body.errors.find((e) => e.code === "invalid_config")!.path).toContain("nodes[2]");
    const list = await a.call<{ items: { name: string }[] }>("GET", "/api/agent-workflows?limit=200");
    expect(list.body.items.map((w) => w.name)).not.toContain(name);
  });
});
