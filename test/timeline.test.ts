/**
 * The timeline check the integration tests run on every run's events (timelineProblems) finds
 * what it promises to: whole timelines pass (with retries, reviews, pauses in sub-runs); a
 * missing start or end, events after the end or out of order, a retry never made, a pause
 * never resumed, paused twice at once or resumed by a resume that does not fit it, nodes left
 * open or closed twice, other runs' or tenants' events are found.
 */
import { describe, expect, it } from "@jest/globals";
import type { SseEvent } from "./workflows.ts";
import { timelineProblems } from "./workflows.ts";

const T = "t_1";
let seq = 0;
function ev(event: string, data: Record<string, unknown> = {}): SseEvent {
  seq += 1;
  const exec = event.startsWith("execution.") ? { id: 5 } : { execution_id: 5 };
  return { id: String(seq), event, data: { type: event, seq, time: "", data: { tenant_id: T, ...exec, ...data } } };
}
const node = (event: string, nodeId: string, attempt: number, more: Record<string, unknown> = {}) => ev(event, { node_id: nodeId, attempt, ...more });

describe("timelineProblems", () => {
  it("passes a whole timeline: a retry, a review, an end", () => {
    const events = [
      ev("execution.started"),
      node("node.started", "a", 1), node("node.failed", "a", 1, { retrying: true }), node("node.started", "a", 2), node("node.completed", "a", 2),
      ev("execution.paused", { node_id: "r" }), ev("execution.resumed", { node_id: "r" }),
      ev("execution.completed"),
    ];
    expect(timelineProblems(events, 5, T)).toEqual([]);
    expect(timelineProblems([ev("execution.failed")], 5, T)).toEqual([]);
    expect(timelineProblems([ev("execution.cancelled")], 5, T)).toEqual([]);
  });

  it("finds a missing start or end, events after the end and out of order", () => {
    expect(timelineProblems([node("node.started", "a", 1), node("node.completed", "a", 1), ev("execution.completed")], 5, T)).toEqual(["#0 is node.started, not execution.started"]);
    expect(timelineProblems([ev("execution.started")], 5, T)).toEqual(["no execution.completed, execution.failed or execution.cancelled"]);
    const late = [ev("execution.started"), ev("execution.completed"), ev("execution.cancelled")];
    expect(timelineProblems(late, 5, T)).toEqual(["#1 execution.completed is not the last event (1 after it)"]);
    const [a, b] = [ev("execution.started"), ev("execution.completed")];
    expect(timelineProblems([b, a], 5, T)).toEqual(expect.arrayContaining([expect.stringContaining("seq")]));
  });

  it("finds a retry announced and never made, and a pause never resumed, in a run that completed", () => {
    const retry = [ev("execution.started"), node("node.started", "a", 1), node("node.failed", "a", 1, { retrying: true }), ev("execution.completed")];
    expect(timelineProblems(retry, 5, T)).toEqual(["node.failed a#1 said retrying, and no later attempt started"]);
    const pause = [ev("execution.started"), ev("execution.paused", { node_id: "r" }), ev("execution.completed")];
    expect(timelineProblems(pause, 5, T)).toEqual(["execution.paused r never resumed"]);
    // A run that was cancelled ends both.
    expect(timelineProblems([...retry.slice(0, 3), ev("execution.cancelled")], 5, T)).toEqual([]);
  });

  it("passes pauses in sub-runs, each ended by a resume naming a sub-run, also paused again later", () => {
    const events = [
      ev("execution.started"), node("node.started", "sub", 1),
      ev("execution.paused", { node_id: "sub", sub_execution_id: 9 }), ev("execution.paused", { node_id: "r", sub_execution_id: 0 }),
      ev("execution.resumed", { node_id: "sub", sub_execution_id: 9, decision: "sub_run" }), ev("execution.resumed", { node_id: "r", sub_execution_id: 0, decision: "approve" }),
      ev("execution.paused", { node_id: "sub", sub_execution_id: 10 }), ev("execution.resumed", { node_id: "sub", sub_execution_id: 10, decision: "cancelled" }),
      node("node.completed", "sub", 1), ev("execution.completed"),
    ];
    expect(timelineProblems(events, 5, T)).toEqual([]);
  });

  it("finds a node paused twice at once, and a resume that does not fit its pause", () => {
    const twice = [ev("execution.started"), ev("execution.paused", { node_id: "sub", sub_execution_id: 9 }), ev("execution.paused", { node_id: "sub", sub_execution_id: 10 }), ev("execution.cancelled")];
    expect(timelineProblems(twice, 5, T)).toEqual(["#2 execution.paused sub again before its execution.resumed"]);
    const mixed = [
      ev("execution.started"),
      ev("execution.paused", { node_id: "sub", sub_execution_id: 9 }), ev("execution.resumed", { node_id: "sub", sub_execution_id: 0, decision: "approve" }),
      ev("execution.paused", { node_id: "r", sub_execution_id: 0 }), ev("execution.resumed", { node_id: "r", sub_execution_id: 9, decision: "sub_run" }),
      ev("execution.paused", { node_id: "s2", sub_execution_id: 9 }), ev("execution.resumed", { node_id: "s2", sub_execution_id: 9, decision: "approve" }),
      ev("execution.completed"),
    ];
    expect(timelineProblems(mixed, 5, T)).toEqual([
      "#2 execution.resumed sub names no sub-run, its pause did",
      "#4 execution.resumed r names a sub-run, its pause did not",
      "#6 execution.resumed s2 of a pause in sub-runs with decision approve",
    ]);
  });

  it("finds nodes left open or closed twice, and other runs' or tenants' events", () => {
    const events = [ev("execution.started"), node("node.started", "a", 1), node("node.completed", "b", 1), ev("execution.completed", { tenant_id: "t_2" })];
    expect(timelineProblems(events, 5, T)).toEqual([
      "#2 node.completed b#1 without node.started",
      "#3 execution.completed: tenant t_2, expected t_1",
      "node.started a#1 never completed or failed",
    ]);
  });
});
