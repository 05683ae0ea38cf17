// Rules checked here — names on the bus (docs/dev/contracts.md):
// - events are `{p}.{entity}.{action}.{tenantId}.{scopeId}`, commands `{p}.cmd.{name}`, tool calls
//   `{p}.tool.{toolName}` with dotted tool names kept, requests `{p}.rpc.{name}`;
// - streams are the prefix upper-cased, non-alphanumerics as `_`, plus _EVENTS/_COMMANDS/_TOOLS;
// - a prefix is one token of [A-Za-z0-9_-]; ids and tool names that would break the token
//   structure (empty, ".", "*", ">", whitespace) are refused; names outside the contract too;
// - the events stream subjects overlap neither the tools nor the commands stream (JetStream
//   refuses overlapping streams), and an execution's filters catch all of its events and no
//   workflow or memory event whose id happens to be equal.
import { describe, expect, it } from "@jest/globals";
import {
  COMMANDS,
  EVENTS,
  InvalidBusPrefix,
  InvalidSubjectToken,
  RESERVED_TOKENS,
  RPCS,
  streamNames,
  subjects,
  UnknownMessageType,
} from "./index.ts";
import type { EventType } from "./index.ts";
import { caught } from "./test-helpers.ts";

/** NATS subject matching: `*` matches one token, `>` one or more trailing tokens. */
function matches(filter: string, subject: string): boolean {
  const f = filter.split(".");
  const s = subject.split(".");
  for (let i = 0; i < f.length; i++) {
    if (f[i] === ">") return s.length > i;
    if (i >= s.length || (f[i] !== "*" && f[i] !== s[i])) return false;
  }
  return f.length === s.length;
}

/** Whether two subject filters can match a common subject. */
function overlap(a: string, b: string): boolean {
  const x = a.split(".");
  const y = b.split(".");
  for (let i = 0; ; i++) {
    if (i === x.length || i === y.length) return x.length === y.length;
    if (x[i] === ">" || y[i] === ">") return true;
    if (x[i] !== "*" && y[i] !== "*" && x[i] !== y[i]) return false;
  }
}

const s = subjects("baton");

describe("subjects", () => {
  it("builds event subjects", () => {
    expect(s.event("node.started", "t_1", 42)).toBe("baton.evt.node.started.t_1.42");
    expect(s.event("workflow.created", "t_abc-9", "7")).toBe("baton.evt.workflow.created.t_abc-9.7");
    expect(s.event("learning.sequence", "t_1", 3)).toBe("baton.evt.learning.sequence.t_1.3");
    expect(s.eventsOfType("execution.paused")).toBe("baton.evt.execution.paused.*.*");
  });

  it("builds command, tool and rpc subjects", () => {
    expect(s.command("execution.start")).toBe("baton.cmd.execution.start");
    expect(s.command("tool.result")).toBe("baton.cmd.tool.result");
    expect(s.toolCall("search")).toBe("baton.tool.search");
    expect(s.toolCall("github.issues.create")).toBe("baton.tool.github.issues.create");
    expect(s.rpc("planner.plan")).toBe("baton.rpc.planner.plan");
    expect(s.rpc("memory.query")).toBe("baton.rpc.memory.query");
    expect(s.allCommands()).toBe("baton.cmd.>");
    expect(s.allToolCalls()).toBe("baton.tool.>");
    expect(Object.keys(COMMANDS).map((c) => s.command(c as keyof typeof COMMANDS))).toEqual([
      "baton.cmd.execution.start", "baton.cmd.execution.resume", "baton.cmd.execution.cancel", "baton.cmd.execution.timer",
      "baton.cmd.execution.child_result", "baton.cmd.execution.child_paused", "baton.cmd.execution.continue", "baton.cmd.tool.result",
    ]);
    expect(Object.keys(RPCS)).toEqual(["planner.plan", "memory.query"]);
  });

  it("uses the given prefix everywhere", () => {
    const t = subjects("test_x-1");
    expect(t.prefix).toBe("test_x-1");
    expect(t.event("node.failed", "t", 1)).toBe("test_x-1.evt.node.failed.t.1");
    expect(t.toolCall("a.b")).toBe("test_x-1.tool.a.b");
    expect(t.allEvents().every((f) => f.startsWith("test_x-1."))).toBe(true);
  });

  it.each(["", "a.b", "a*", ">", "has space", "é", "a/b"])("refuses the prefix %j", (prefix) => {
    const err = caught(() => subjects(prefix));
    expect(InvalidBusPrefix.is(err)).toBe(true);
    expect(InvalidBusPrefix.is(caught(() => streamNames(prefix)))).toBe(true);
  });

  it.each<[string, () => unknown]>([
    ["an empty tenant", () => s.event("node.started", "", 1)],
    ["a tenant with a dot", () => s.event("node.started", "t.1", 1)],
    ["a wildcard tenant", () => s.event("node.started", "*", 1)],
    ["a tenant with a space", () => s.event("node.started", "t 1", 1)],
    ["a negative scope", () => s.event("node.started", "t", -1)],
    ["a fractional scope", () => s.event("node.started", "t", 1.5)],
    ["a scope with '>'", () => s.executionEvents("t", ">")],
    ["an empty tool", () => s.toolCall("")],
    ["a tool with an empty token", () => s.toolCall("a..b")],
    ["a tool with a trailing dot", () => s.toolCall("a.")],
    ["a wildcard tool", () => s.toolCall("a.*")],
    ["a tool with '>'", () => s.toolCall("a.>")],
    ["a tool with whitespace", () => s.toolCall("a\tb")],
  ])("refuses %s", (_name, fn) => {
    const err = caught(fn);
    expect(InvalidSubjectToken.is(err)).toBe(true);
    expect(err).toMatchObject({ status: 400, retryable: false });
  });

  it("refuses names outside the contract", () => {
    expect(UnknownMessageType.is(caught(() => s.event("node.exploded" as EventType, "t", 1)))).toBe(true);
    expect(UnknownMessageType.is(caught(() => s.command("execution.pause" as never)))).toBe(true);
    expect(UnknownMessageType.is(caught(() => s.rpc("planner.nap" as never)))).toBe(true);
  });

  it("parses event subjects of its prefix only", () => {
    expect(s.parseEvent("baton.evt.node.completed.t_1.42")).toEqual({ type: "node.completed", tenantId: "t_1", scopeId: "42" });
    expect(s.parseEvent("other.node.completed.t_1.42")).toBeUndefined();
    expect(s.parseEvent("baton.evt.node.exploded.t_1.42")).toBeUndefined();
    expect(s.parseEvent("baton.cmd.execution.start")).toBeUndefined();
    expect(s.parseEvent("baton.tool.a.b.c")).toBeUndefined();
  });

  it("gives every event type a subject its stream captures and parses back", () => {
    for (const type of Object.keys(EVENTS) as EventType[]) {
      const subject = s.event(type, "t_1", 5);
      expect(s.allEvents().filter((f) => matches(f, subject))).toHaveLength(1);
      expect(matches(s.eventsOfType(type), subject)).toBe(true);
      expect(s.parseEvent(subject)).toEqual({ type, tenantId: "t_1", scopeId: "5" });
    }
  });

  it("keeps the streams' subjects apart", () => {
    for (const events of s.allEvents()) {
      expect(overlap(events, s.allToolCalls())).toBe(false);
      expect(overlap(events, s.allCommands())).toBe(false);
      expect(overlap(events, s.rpc("planner.plan"))).toBe(false);
    }
    expect(overlap(s.allCommands(), s.allToolCalls())).toBe(false);
    // the single-wildcard form would collide with dotted tool names
    expect(matches("baton.*.*.*.*", s.toolCall("a.b.c"))).toBe(true);
    for (const type of Object.keys(EVENTS)) expect(RESERVED_TOKENS).not.toContain(type.split(".")[0]);
  });

  it("filters one execution's events exactly", () => {
    const filters = s.executionEvents("t_1", 42);
    const hit = (subject: string): boolean => filters.some((f) => matches(f, subject));
    for (const type of ["execution.started", "execution.completed", "node.started", "node.failed", "review.created", "review.resolved", "learning.sequence"] as const) {
      expect(hit(s.event(type, "t_1", 42))).toBe(true);
      expect(hit(s.event(type, "t_1", 43))).toBe(false);
      expect(hit(s.event(type, "t_2", 42))).toBe(false);
    }
    for (const type of ["workflow.updated", "memory.created", "mcp.generated"] as const) {
      expect(hit(s.event(type, "t_1", 42))).toBe(false);
    }
  });
});

describe("streamNames", () => {
  it("upper-cases the prefix and turns non-alphanumerics into _", () => {
    expect(streamNames("baton")).toEqual({ events: "BATON_EVENTS", commands: "BATON_COMMANDS", tools: "BATON_TOOLS" });
    expect(streamNames("baton-test_7x")).toEqual({
      events: "BATON_TEST_7X_EVENTS",
      commands: "BATON_TEST_7X_COMMANDS",
      tools: "BATON_TEST_7X_TOOLS",
    });
  });
});
