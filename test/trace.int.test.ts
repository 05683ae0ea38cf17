/**
 * A client's trace through the real services (in-process Baton on NATS, Redis and Postgres):
 * - an execute request with a W3C `traceparent` header starts a run whose every event
 *   (execution.started, node.started / node.completed of a tool node and of an inline node,
 *   execution.completed) carries a `traceparent` of the client's trace: the gateway handles
 *   the request in the trace, the commands and tool calls carry it on, and the executor and
 *   the worker publish in it, with no OpenTelemetry SDK registered;
 * - a run started without one carries none.
 */
import { afterAll, beforeAll, expect, it } from "@jest/globals";
import { connect } from "@nats-io/transport-node";
import type { NatsConnection, Subscription } from "@nats-io/transport-node";
import { waitFor } from "./helpers.ts";
import { createDefinition, startExecution, suiteInProcess, waitForExecution } from "./workflows.ts";

const h = await suiteInProcess("trace-int");
const TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";
let nc: NatsConnection;
let sub: Subscription;
const seen: { subject: string; traceparent: string | undefined }[] = [];

beforeAll(async () => {
  nc = await connect({ servers: h.config.natsUrl });
  sub = nc.subscribe(`${h.config.prefix}.evt.>`, {
    callback: (_err, m) => {
      seen.push({ subject: m.subject, traceparent: m.headers?.get("traceparent") || undefined });
    },
  });
  await nc.flush();
});
afterAll(async () => {
  sub?.unsubscribe();
  await nc?.close();
});

const execute = (workflowId: number, headers: Record<string, string>): Promise<number> => startExecution(h.a, workflowId, { v: 1 }, {}, headers);

it("a client's traceparent reaches every event of the run it starts; a run without one carries none", async () => {
  const wf = await createDefinition(h.a, "traced", {
    nodes: [{ id: "call", type: "tool", config: { tool: "echo" }, input: { v: "$.input.v" } }, { id: "t", type: "transform", config: { expression: "call.v + 1" } }],
    edges: [{ from: "call", to: "t" }],
    output: { t: "$.t" },
  });
  const traced = await execute(wf, { traceparent: `00-${TRACE}-00f067aa0ba902b7-01` });
  const plain = await execute(wf, {});
  for (const id of [traced, plain]) expect(await waitForExecution(h.a, id, ["completed", "failed", "cancelled"])).toMatchObject({ status: "completed", output: { t: 2 } });
  // The run's own events (a workflow's events end with its id too).
  const of = (id: number) => seen.filter((e) => /\.evt\.(execution|node)\./.test(e.subject) && e.subject.endsWith(`.${id}`));
  const kinds = (id: number) => of(id).map((e) => e.subject.split(".").slice(2, 4).join("."));
  // The row says completed before the events that announce it are published (rows, then events).
  for (const id of [traced, plain]) await waitFor(`execution.completed of ${id}`, () => Promise.resolve(kinds(id).includes("execution.completed") ? true : undefined), 10_000);
  expect(kinds(traced)).toEqual(expect.arrayContaining(["execution.started", "node.started", "node.completed", "execution.completed"]));
  expect(of(traced).length).toBeGreaterThanOrEqual(6);
  for (const e of of(traced)) expect({ subject: e.subject, trace: e.traceparent?.split("-")[1] }).toEqual({ subject: e.subject, trace: TRACE });
  expect(of(plain).length).toBe(of(traced).length);
  for (const e of of(plain)) expect({ subject: e.subject, traceparent: e.traceparent }).toEqual({ subject: e.subject, traceparent: undefined });
});
