/**
 * Rules checked for the bus's pure parts:
 * - stream names are the prefix upper-cased with non-alphanumerics turned into "_", plus
 *   _EVENTS / _COMMANDS / _TOOLS; subjects follow docs/dev/contracts.md;
 * - options get their defaults, are frozen, and every problem is reported at once as
 *   BATON_BUS_INVALID_OPTIONS;
 * - NATS subject matching (`*`, `>`), whether a filter lies within a stream's subjects,
 *   and subject / filter / durable validation;
 * - consumer specs get their defaults and report every problem at once;
 * - several filters go to the server from NATS 2.10; before, events consumers filter in
 *   the client and work queues are refused with BATON_BUS_UNSUPPORTED;
 * - stream and consumer drift detection compares only the fields Baton owns.
 */
import { describe, expect, it } from "@jest/globals";
import { hasCode } from "@baton/errors";
import { compileBusOptions, streamNames, streamSubjects, subjectMatches } from "@baton/bus";
import { compileConsumerSpec, coveringFilter, planFilters, serverAtLeast } from "./consumer.ts";
import { filterWithin, isValidDurable, isValidFilter, isValidSubject } from "./options.ts";
import { consumerDrift, streamDrift, streamSpecs } from "./topology.ts";
import type { ConsumerConfig, StreamConfig } from "@nats-io/jetstream";

function codeOf(fn: () => unknown): { code: string; details: unknown } | undefined {
  try {
    fn();
  } catch (err) {
    if (hasCode(err)) return { code: err.code, details: err.details };
    throw err;
  }
  return undefined;
}

describe("names", () => {
  it("derives stream names from the prefix", () => {
    expect(streamNames("baton")).toEqual({ events: "BATON_EVENTS", commands: "BATON_COMMANDS", tools: "BATON_TOOLS" });
    expect(streamNames("acme.baton-dev")).toEqual({ events: "ACME_BATON_DEV_EVENTS", commands: "ACME_BATON_DEV_COMMANDS", tools: "ACME_BATON_DEV_TOOLS" });
  });

  it("lists the subjects of each stream", () => {
    expect(streamSubjects("p")).toEqual({
      events: ["p.evt.>"],
      commands: ["p.cmd.>"],
      tools: ["p.tool.>"],
    });
  });
});

describe("compileBusOptions", () => {
  it("applies defaults and freezes", () => {
    const o = compileBusOptions({ name: "baton-test" });
    expect(o).toMatchObject({
      servers: ["nats://127.0.0.1:4222"],
      prefix: "baton",
      eventsMaxAgeMs: 7 * 24 * 3600 * 1000,
      duplicateWindowMs: 120_000,
      replicas: 1,
      streams: { events: "BATON_EVENTS", commands: "BATON_COMMANDS", tools: "BATON_TOOLS" },
    });
    expect(Object.isFrozen(o)).toBe(true);
    expect(compileBusOptions({ name: "x", servers: "nats://a:4222, nats://b:4222" }).servers).toEqual(["nats://a:4222", "nats://b:4222"]);
  });

  it("reports every problem at once", () => {
    const e = codeOf(() => compileBusOptions({ name: "", prefix: "bad prefix", servers: "", eventsMaxAgeMs: -1, duplicateWindowMs: 0.5, replicas: 9 }));
    expect(e?.code).toBe("BATON_BUS_INVALID_OPTIONS");
    expect(e?.details).toHaveLength(6);
    expect(codeOf(() => compileBusOptions({ name: "x", eventsMaxAgeMs: 1000, duplicateWindowMs: 2000 }))?.details).toEqual([
      "duplicateWindowMs: must not exceed eventsMaxAgeMs",
    ]);
  });
});

describe("subjects", () => {
  it.each([
    ["a.b.c", "a.b.c", true],
    ["a.*.c", "a.b.c", true],
    ["a.*", "a.b.c", false],
    ["a.>", "a.b.c", true],
    ["a.>", "a", false],
    ["a.b.c.>", "a.b.c", false],
    ["p.*.*.t_1.42", "p.node.started.t_1.42", true],
    ["p.*.*.t_1.42", "p.node.started.t_1.420", false],
    [">", "x", true],
  ])("%s matches %s: %s", (filter, subject, expected) => {
    expect(subjectMatches(filter, subject)).toBe(expected);
  });

  it.each([
    ["p.evt.*.*.t_1.42", "p.evt.>", true],
    ["p.evt.>", "p.evt.>", true],
    ["p.evt", "p.evt.>", false],
    ["p.>", "p.evt.>", false],
    ["p.*.node.x", "p.evt.>", false],
    ["p.cmd.execution.start", "p.cmd.>", true],
    ["p.tool.a.b", "p.tool.*", false],
    ["p.tool.a", "p.tool.*", true],
    ["p.tool.*", "p.tool.*", true],
    ["p.tool.>", "p.tool.*", false],
  ])("%s is within %s: %s", (filter, pattern, expected) => {
    expect(filterWithin(filter, pattern)).toBe(expected);
  });

  it("validates subjects, filters and durables", () => {
    expect(isValidSubject("baton.tool.web.search")).toBe(true);
    expect(isValidSubject("baton.*")).toBe(false);
    expect(isValidSubject("baton..x")).toBe(false);
    expect(isValidSubject("a b")).toBe(false);
    expect(isValidFilter("baton.*.*.t_1.>")).toBe(true);
    expect(isValidFilter("baton.>.x")).toBe(false);
    expect(isValidFilter(">")).toBe(true);
    expect(isValidDurable("executor-tools_1")).toBe(true);
    expect(isValidDurable("a.b")).toBe(false);
  });
});

describe("consumer specs", () => {
  it("applies defaults", () => {
    expect(compileConsumerSpec({ stream: "commands", durable: "exec", filterSubjects: ["p.cmd.>"] })).toEqual({
      stream: "commands",
      durable: "exec",
      filterSubjects: ["p.cmd.>"],
      ackWaitMs: 30_000,
      maxDeliver: 10,
      maxAckPending: 256,
      concurrency: 16,
      backoffMs: undefined,
      deliverPolicy: "all",
      ack: "confirmed",
    });
    expect(compileConsumerSpec({ stream: "events", durable: "x", filterSubjects: ["p.>"], maxDeliver: 0 }).maxDeliver).toBe(-1);
  });

  it("reports every problem at once", () => {
    const e = codeOf(() =>
      compileConsumerSpec({ stream: "nope" as "events", durable: "a.b", filterSubjects: ["p.>.x"], ackWaitMs: 0, concurrency: 0, backoffMs: [-1], ack: "maybe" as "plain" }),
    );
    expect(e?.code).toBe("BATON_BUS_INVALID_OPTIONS");
    expect(e?.details).toHaveLength(7);
    expect(codeOf(() => compileConsumerSpec({ stream: "tools", durable: "t", filterSubjects: ["p.tool.>"], deliverPolicy: "new" }))?.code).toBe(
      "BATON_BUS_INVALID_OPTIONS",
    );
  });

  it("plans filters by server version", () => {
    const one = compileConsumerSpec({ stream: "tools", durable: "t", filterSubjects: ["p.tool.a"] });
    expect(planFilters(one, "2.9.10", ["p.tool.>"])).toEqual({ server: { filter_subject: "p.tool.a" }, client: undefined });
    const events = compileConsumerSpec({ stream: "events", durable: "e", filterSubjects: ["p.evt.node.>", "p.evt.execution.>"] });
    expect(planFilters(events, "2.10.0", ["p.evt.>"])).toEqual({ server: { filter_subjects: ["p.evt.node.>", "p.evt.execution.>"] }, client: undefined });
    // Before 2.10: the narrowest one filter covering them all, and the rest is skipped in the client.
    expect(planFilters(events, "2.9.10", ["p.evt.>"])).toEqual({ server: { filter_subject: "p.evt.>" }, client: ["p.evt.node.>", "p.evt.execution.>"] });
    expect(planFilters(events, "2.9.10", ["p.evt.node.>", "p.evt.execution.>"])).toEqual({ server: {}, client: ["p.evt.node.>", "p.evt.execution.>"] });
    const learner = compileConsumerSpec({ stream: "events", durable: "l", filterSubjects: ["p.evt.execution.completed.*.*", "p.evt.execution.failed.*.*"] });
    expect(planFilters(learner, "2.9.10", ["p.evt.>"])).toEqual({ server: { filter_subject: "p.evt.execution.>" }, client: learner.filterSubjects });
    const work = compileConsumerSpec({ stream: "tools", durable: "t", filterSubjects: ["p.tool.a", "p.tool.b"] });
    expect(codeOf(() => planFilters(work, "2.9.10", ["p.tool.>"]))?.code).toBe("BATON_BUS_UNSUPPORTED");
    expect(serverAtLeast("2.11.0", 2, 10)).toBe(true);
    expect(serverAtLeast("3.0.0", 2, 11)).toBe(true);
    expect(serverAtLeast("2.9.10", 2, 10)).toBe(false);
  });

  it.each([
    [["p.evt.execution.completed.*.*", "p.evt.execution.failed.*.*"], "p.evt.execution.>"],
    [["p.evt.*.x.>", "p.evt.*.y"], "p.evt.*.>"],
    // `p.evt.review.>` needs at least one token after `review`: `p.evt.review` is not covered by it.
    [["p.evt.review", "p.evt.review.created"], "p.evt.>"],
    [["p.evt.node.>", "p.evt.execution.>"], "p.evt.>"],
    // Nothing narrower than `p.>`, which is wider than the stream: the server cannot take it.
    [["p.evt.node.>", "p.cmd.x"], undefined],
    [["a.b", "c.d"], undefined],
  ])("covers %j with %s", (filters, cover) => {
    const got = coveringFilter(filters, ["p.evt.>"]);
    expect(got).toBe(cover);
    if (got !== undefined) for (const f of filters) expect(filterWithin(f, got)).toBe(true);
  });
});

describe("drift", () => {
  const specs = streamSpecs(compileBusOptions({ name: "x", prefix: "p" }));

  it("describes the streams", () => {
    expect(specs.events).toMatchObject({ name: "P_EVENTS", retention: "limits", storage: "file", max_age: 7 * 24 * 3600 * 1e9, duplicate_window: 120 * 1e9 });
    expect(specs.commands).toMatchObject({ name: "P_COMMANDS", retention: "workqueue", subjects: ["p.cmd.>"], max_age: 0 });
    expect(specs.tools).toMatchObject({ name: "P_TOOLS", retention: "workqueue", subjects: ["p.tool.>"] });
  });

  it("finds stream drift in owned fields only", () => {
    const current = { ...specs.events, subjects: [...specs.events.subjects].reverse(), max_msgs: 5 } as unknown as StreamConfig;
    expect(streamDrift(current, specs.events)).toEqual([]);
    expect(streamDrift({ ...current, max_age: 1 }, specs.events)).toEqual(["max_age"]);
    expect(streamDrift({ ...current, subjects: ["p.node.>"] }, specs.events)).toEqual(["subjects"]);
  });

  it("finds consumer drift, treating one filter and a one-element list alike", () => {
    const want = { durable_name: "d", ack_policy: "explicit", deliver_policy: "all", ack_wait: 1e9, max_deliver: 3, max_ack_pending: 10, filter_subject: "p.x" } as const;
    const current = { ...want, filter_subjects: undefined, filter_subject: undefined } as unknown as ConsumerConfig;
    expect(consumerDrift({ ...current, filter_subjects: ["p.x"] }, want)).toEqual([]);
    expect(consumerDrift({ ...current, filter_subject: "p.x", ack_wait: 2e9 }, want)).toEqual(["ack_wait"]);
    expect(consumerDrift(current, want)).toEqual(["filter"]);
  });
});
