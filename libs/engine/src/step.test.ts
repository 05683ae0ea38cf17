/**
 * Rules checked: a start creates the state and readies the start node; each
 * `continue` moves one node; condition branches are taken and the other branch
 * is skipped (dead-path elimination) while the join still runs; tool results
 * complete nodes and duplicates are ignored; retryable failures retry up to
 * maxAttempts; human review pauses and approve / edit / reject resume it;
 * cancel finishes the execution; finished executions ignore every command.
 */
import { describe, expect, it } from "@jest/globals";
import { readFileSync } from "node:fs";
import { step, validateWorkflow } from "./index.ts";
import type { Command, Effect, ExecutionState, JsonObject, JsonValue, WorkflowDefinition } from "./index.ts";

const quickstart = JSON.parse(readFileSync(new URL("../../../examples/quickstart/workflow.json", import.meta.url), "utf8")) as { definition: unknown };
const input = (JSON.parse(readFileSync(new URL("../../../examples/quickstart/input.json", import.meta.url), "utf8")) as { input: JsonObject }).input;

function def(d: unknown): WorkflowDefinition {
  const v = validateWorkflow(d);
  if (!v.ok) throw new Error(JSON.stringify(v.errors));
  return v.workflow;
}

const identity = { executionId: 7, tenantId: "t_1", workflowId: 1, workflowVersion: 1 };
let clock = 0;
const now = () => new Date(Date.UTC(2026, 0, 1, 0, 0, clock++)).toISOString();

type Tools = Record<string, (args: JsonObject) => { ok: true; output: JsonValue } | { ok: false; retryable: boolean; message: string }>;

/** Drives an execution until it waits on nothing but people, collecting every effect. */
function drive(d: WorkflowDefinition, tools: Tools, state: ExecutionState | null, first: Command): { state: ExecutionState; effects: Effect[] } {
  const effects: Effect[] = [];
  const queue: Command[] = [first];
  let s = state;
  while (queue.length) {
    const r = step({ definition: d, state: s, command: queue.shift()!, now: now(), identity });
    s = r.state;
    effects.push(...r.effects);
    if (r.more) queue.push({ kind: "continue" });
    for (const e of r.effects) {
      if (e.kind !== "callTool") continue;
      const res = tools[e.tool]!(e.args);
      queue.push(res.ok
        ? { kind: "toolResult", nodeId: e.nodeId, callId: e.callId, ok: true, output: res.output, durationMs: 1 }
        : { kind: "toolResult", nodeId: e.nodeId, callId: e.callId, ok: false, error: { code: "E", message: res.message, retryable: res.retryable }, durationMs: 1 });
    }
  }
  return { state: s!, effects };
}

const sum: Tools[string] = (a) => {
  const items = a.values as { amount: number }[];
  return { ok: true, output: { sum: items.reduce((x, i) => x + i.amount, 0), count: items.length } };
};
const template: Tools[string] = (a) => ({ ok: true, output: { text: `${JSON.stringify(a.template)}|${JSON.stringify(a.values)}` } });
const events = (effects: Effect[]) => effects.flatMap((e) => (e.kind === "emit" ? [`${e.event.kind}${"nodeId" in e.event ? ":" + e.event.nodeId : ""}`] : []));

describe("step", () => {
  const d = def(quickstart.definition);

  it("runs tool → condition → taken branch → review and pauses there, skipping the other branch", () => {
    const { state, effects } = drive(d, { "math.sum": sum, "text.template": template }, null, { kind: "start", input });
    expect(state.status).toBe("paused");
    expect(state.pause).toEqual({ nodeId: "review", reason: "Expense report needs a manager's approval", seq: 1 });
    expect(state.nodes.routine!.status).toBe("skipped");
    expect(state.nodes.flag!.status).toBe("completed");
    expect(events(effects)).toEqual([
      "execution.started", "node.started:total", "node.completed:total", "node.started:large", "node.completed:large",
      "node.started:flag", "node.completed:flag", "node.started:review", "execution.paused:review",
    ]);
    expect(effects.find((e) => e.kind === "review")).toMatchObject({ subject: { employee: "Ada", amount: 455 } });
  });

  it("takes the false branch for small amounts and still reaches the join", () => {
    const { state } = drive(d, { "math.sum": sum, "text.template": template }, null, { kind: "start", input: { employee: "Bo", items: [{ amount: 5 }] } });
    expect(state.nodes.flag!.status).toBe("skipped");
    expect(state.nodes.routine!.status).toBe("completed");
    expect(state.context.note).toEqual({ text: "routine expense" });
    expect(state.status).toBe("paused");
  });

  it("approve continues to the last tool and completes with the mapped output", () => {
    const paused = drive(d, { "math.sum": sum, "text.template": template }, null, { kind: "start", input }).state;
    const { state, effects } = drive(d, { "math.sum": sum, "text.template": template }, paused, { kind: "resume", nodeId: "review", action: "approve", reviewer: "grace" });
    expect(state.status).toBe("completed");
    expect(events(effects)).toEqual(["execution.resumed:review", "node.completed:review", "node.started:file", "node.completed:file", "execution.completed"]);
    expect(state.output).toMatchObject({ decision: "approve", amount: 455 });
  });

  it("edit hands the edited data to the next node", () => {
    const paused = drive(d, { "math.sum": sum, "text.template": template }, null, { kind: "start", input }).state;
    const { state } = drive(d, { "math.sum": sum, "text.template": template }, paused, { kind: "resume", nodeId: "review", action: "edit", data: { employee: "Ada", amount: 400 } });
    expect(state.status).toBe("completed");
    expect(state.output).toMatchObject({ decision: "edit", amount: 400 });
    expect(JSON.stringify((state.context.file as JsonObject).text)).toContain('amount');
  });

  it("reject without a rejected edge fails the execution with a stable code", () => {
    const paused = drive(d, { "math.sum": sum, "text.template": template }, null, { kind: "start", input }).state;
    const { state } = drive(d, {}, paused, { kind: "resume", nodeId: "review", action: "reject", comment: "no receipts" });
    expect(state.status).toBe("failed");
    expect(state.error).toMatchObject({ code: "BATON_REVIEW_REJECTED", nodeId: "review" });
  });

  it("ignores a resume for another node, a duplicate tool result and any command after the end", () => {
    const paused = drive(d, { "math.sum": sum, "text.template": template }, null, { kind: "start", input }).state;
    expect(step({ definition: d, state: paused, command: { kind: "resume", nodeId: "total", action: "approve" }, now: now() }).ignored).toMatch(/not paused/);
    const dup = step({ definition: d, state: paused, command: { kind: "toolResult", nodeId: "total", callId: "7.total.1", ok: true, output: 1, durationMs: 1 }, now: now() });
    expect(dup.ignored).toBeDefined();
    expect(dup.state).toEqual(paused);
    const done = drive(d, { "math.sum": sum, "text.template": template }, paused, { kind: "resume", nodeId: "review", action: "approve" }).state;
    expect(step({ definition: d, state: done, command: { kind: "cancel", reason: "x" }, now: now() }).ignored).toMatch(/completed/);
    expect(step({ definition: d, state: done, command: { kind: "start", input: {} }, now: now() }).ignored).toBeDefined();
  });

  it("retries retryable failures up to maxAttempts, then fails the execution", () => {
    const flaky = def({ start: "a", nodes: [{ id: "a", type: "tool", config: { tool: "f" }, retry: { maxAttempts: 3 } }] });
    let calls = 0;
    const okOnThird = drive(flaky, { f: () => (++calls < 3 ? { ok: false, retryable: true, message: "busy" } : { ok: true, output: "done" }) }, null, { kind: "start", input: {} });
    expect(okOnThird.state.status).toBe("completed");
    expect(okOnThird.state.nodes.a!.attempt).toBe(3);
    expect(okOnThird.effects.filter((e) => e.kind === "callTool").map((e) => (e as { callId: string }).callId)).toEqual(["7.a.1", "7.a.2", "7.a.3"]);
    const never = drive(flaky, { f: () => ({ ok: false, retryable: true, message: "down" }) }, null, { kind: "start", input: {} });
    expect(never.state.status).toBe("failed");
    expect(never.state.error!.message).toContain("after 3 attempt(s)");
    const fatal = drive(flaky, { f: () => ({ ok: false, retryable: false, message: "bad args" }) }, null, { kind: "start", input: {} });
    expect(fatal.state.nodes.a!.attempt).toBe(1);
    expect(fatal.state.status).toBe("failed");
  });

  it("runs parallel branches and joins when both have finished", () => {
    const fan = def({
      start: "s",
      nodes: [{ id: "s", type: "setVariable", config: { values: { x: 1 } } }, { id: "a", type: "tool", config: { tool: "t" } }, { id: "b", type: "tool", config: { tool: "t" } }, { id: "j", type: "setVariable", config: { values: { a: "$.a", b: "$.b" } } }],
      edges: [{ from: "s", to: "a" }, { from: "s", to: "b" }, { from: "a", to: "j" }, { from: "b", to: "j" }],
    });
    let s = step({ definition: fan, state: null, command: { kind: "start", input: {} }, now: now(), identity }).state;
    s = step({ definition: fan, state: s, command: { kind: "continue" }, now: now() }).state;
    const ra = step({ definition: fan, state: s, command: { kind: "continue" }, now: now() });
    const rb = step({ definition: fan, state: ra.state, command: { kind: "continue" }, now: now() });
    expect(rb.state.nodes.a!.status).toBe("running");
    expect(rb.state.nodes.b!.status).toBe("running");
    const afterA = step({ definition: fan, state: rb.state, command: { kind: "toolResult", nodeId: "a", callId: "7.a.1", ok: true, output: "A", durationMs: 1 }, now: now() });
    expect(afterA.state.ready).toEqual([]);
    const afterB = step({ definition: fan, state: afterA.state, command: { kind: "toolResult", nodeId: "b", callId: "7.b.1", ok: true, output: "B", durationMs: 1 }, now: now() });
    expect(afterB.state.ready).toEqual(["j"]);
    const end = step({ definition: fan, state: afterB.state, command: { kind: "continue" }, now: now() });
    expect(end.state.status).toBe("completed");
    expect(end.state.output).toEqual({ a: "A", b: "B" });
  });

  it("cancel marks running nodes and ends the execution as cancelled", () => {
    const one = def({ start: "a", nodes: [{ id: "a", type: "tool", config: { tool: "t" } }] });
    let s = step({ definition: one, state: null, command: { kind: "start", input: {} }, now: now(), identity }).state;
    s = step({ definition: one, state: s, command: { kind: "continue" }, now: now() }).state;
    const r = step({ definition: one, state: s, command: { kind: "cancel", reason: "user" }, now: now() });
    expect(r.state.status).toBe("cancelled");
    expect(r.effects).toContainEqual(expect.objectContaining({ kind: "journal", entry: expect.objectContaining({ nodeId: "a", status: "failed", error: "cancelled" }) }));
    const late = step({ definition: one, state: r.state, command: { kind: "toolResult", nodeId: "a", callId: "7.a.1", ok: true, output: 1, durationMs: 1 }, now: now() });
    expect(late.ignored).toBeDefined();
  });
});
