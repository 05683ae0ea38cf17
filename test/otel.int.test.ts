/**
 * Spans and metrics reach an OTLP/HTTP receiver from the real services (in-process Baton on
 * NATS, Redis and Postgres, with the OpenTelemetry SDK started as `bin/baton.ts` starts it):
 * - a client's execute request (W3C `traceparent`) gives a SERVER span `POST <route template>`
 *   in the client's trace, child of the client's span, and the bus spans of the gateway, the
 *   executor and the worker for that run are in the same trace;
 * - the resource carries the service name and OTEL_RESOURCE_ATTRIBUTES;
 * - metrics: `baton.executions` by final status (one completed, one failed run),
 *   `baton.execution.duration`, `baton.node.duration` by node type and status,
 *   `baton.tool.calls` / `baton.tool.duration` by tool and outcome, and
 *   `http.server.request.duration` by route template and status code, with no execution id
 *   in any metric attribute;
 * - `baton.recovery.commands` by command and `baton.checkpoint.rebuilds`: a paused run whose
 *   checkpoint Redis lost is sent `execution.continue` by the recovery sweep (every second
 *   here), which rebuilds it from the journal;
 * - the ops dashboard (infra/observability/grafana/dashboards/) and the alerting rules
 *   (infra/observability/alerts.yml) select only metrics and labels Prometheus makes of this
 *   export (after the tests above, so every metric has been recorded).
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { afterAll, expect, it } from "@jest/globals";
import { startTelemetry } from "@baton/telemetry";
import { checkDashboard, checkQueries, commonLabels, prometheusSeries, repositoryDashboards, repositoryRules } from "../infra/observability/dashboard.ts";
import { waitFor } from "./helpers.ts";
import { createDefinition, startExecution, suiteInProcess, waitForExecution } from "./workflows.ts";

type AnyValue = { stringValue?: string; intValue?: number | string; boolValue?: boolean; doubleValue?: number };
type KeyValue = { key: string; value: AnyValue };
interface OtlpSpan { traceId: string; spanId: string; parentSpanId?: string; name: string; kind: number; attributes?: KeyValue[] }
interface Point { attributes?: KeyValue[]; asInt?: number | string; asDouble?: number; count?: number | string; sum?: number }
interface OtlpMetric { name: string; unit?: string; sum?: { dataPoints: Point[]; isMonotonic?: boolean }; gauge?: { dataPoints: Point[] }; histogram?: { dataPoints: Point[] } }
interface Resource { attributes?: KeyValue[] }

const posts: { path: string; body: unknown }[] = [];
const receiver = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on("data", (c: Buffer) => chunks.push(c));
  req.on("end", () => {
    posts.push({ path: req.url ?? "", body: JSON.parse(Buffer.concat(chunks).toString("utf8")) as unknown });
    res.writeHead(200, { "content-type": "application/json" }).end("{}");
  });
});
await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve));
const telemetry = startTelemetry({
  serviceName: "baton-otel-int",
  env: {
    OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`,
    OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
    // Only the test's flush exports metrics.
    OTEL_METRIC_EXPORT_INTERVAL: "600000",
    OTEL_RESOURCE_ATTRIBUTES: "deployment.environment.name=otel-int",
  },
});
afterAll(async () => {
  await telemetry.shutdown();
  await new Promise<void>((resolve) => receiver.close(() => resolve()));
});
// A sweep every second, for the recovery test (a healthy run gets nothing from it).
const h = await suiteInProcess("otel-int", { BATON_RECOVERY_SWEEP_SECONDS: "1" });

const TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_SPAN = "00f067aa0ba902b7";

const attr = (kvs: KeyValue[] | undefined, key: string): unknown => {
  const v = kvs?.find((kv) => kv.key === key)?.value;
  if (v === undefined) return undefined;
  if (v.intValue !== undefined) return Number(v.intValue);
  return v.stringValue ?? v.boolValue ?? v.doubleValue;
};
const attrs = (kvs: KeyValue[] | undefined): Record<string, unknown> => Object.fromEntries((kvs ?? []).map((kv) => [kv.key, attr(kvs, kv.key)]));

const execute = (workflowId: number, headers: Record<string, string>): Promise<number> => startExecution(h.a, workflowId, { v: 1 }, {}, headers);

/** The metrics of the last export, which holds the cumulative totals. */
function lastMetrics(): OtlpMetric[] {
  const last = posts.filter((p) => p.path === "/v1/metrics").at(-1)?.body as { resourceMetrics: { resource: Resource; scopeMetrics: { metrics: OtlpMetric[] }[] }[] } | undefined;
  expect(last).toBeDefined();
  return last!.resourceMetrics.flatMap((r) => r.scopeMetrics.flatMap((s) => s.metrics));
}

/** The data points of metric `name`: attributes, and the count (histograms) or value (sums). */
function pointsOf(metrics: OtlpMetric[], name: string): { attributes: Record<string, unknown>; value: number; sum?: number }[] {
  const m = metrics.find((x) => x.name === name);
  if (!m) throw new Error(`metric ${name} not exported; got ${metrics.map((x) => x.name).join(", ")}`);
  return (m.sum ?? m.histogram)!.dataPoints.map((p) => ({
    attributes: attrs(p.attributes),
    value: Number(p.count ?? p.asInt ?? p.asDouble),
    ...(p.sum === undefined ? {} : { sum: p.sum }),
  }));
}

it("exports the run's spans in the client's trace and the dashboard's metrics", async () => {
  expect({ traces: telemetry.traces, metrics: telemetry.metrics }).toEqual({ traces: true, metrics: true });
  const ok = await createDefinition(h.a, "otel-ok", {
    nodes: [{ id: "call", type: "tool", config: { tool: "echo" }, input: { v: "$.input.v" } }, { id: "t", type: "transform", config: { expression: "call.v + 1" } }],
    edges: [{ from: "call", to: "t" }],
    output: { t: "$.t" },
  });
  const bad = await createDefinition(h.a, "otel-bad", { nodes: [{ id: "f", type: "tool", config: { tool: "flaky" }, input: { key: `otel-${h.config.prefix}`, failures: 100 } }], edges: [] });
  const traced = await execute(ok, { traceparent: `00-${TRACE}-${CLIENT_SPAN}-01` });
  const failed = await execute(bad, {});
  expect(await waitForExecution(h.a, traced, ["completed", "failed", "cancelled"])).toMatchObject({ status: "completed", output: { t: 2 } });
  expect(await waitForExecution(h.a, failed, ["completed", "failed", "cancelled"])).toMatchObject({ status: "failed" });
  await telemetry.forceFlush();

  // Spans.
  const resourceSpans = posts.filter((p) => p.path === "/v1/traces").flatMap((p) => (p.body as { resourceSpans: { resource: Resource; scopeSpans: { spans: OtlpSpan[] }[] }[] }).resourceSpans);
  expect(resourceSpans.length).toBeGreaterThan(0);
  expect(attrs(resourceSpans[0]!.resource.attributes)).toMatchObject({
    "service.name": "baton-otel-int",
    "deployment.environment.name": "otel-int",
    // Replicas of one module share a service.name; this tells their series apart.
    "service.instance.id": expect.stringMatching(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/),
  });
  const spans = resourceSpans.flatMap((r) => r.scopeSpans.flatMap((s) => s.spans));
  const inTrace = spans.filter((s) => s.traceId === TRACE);
  const server = inTrace.find((s) => s.name === "POST /api/agent-workflows/:id/execute");
  expect(server).toMatchObject({ kind: 2, parentSpanId: CLIENT_SPAN });
  expect(attrs(server!.attributes)).toMatchObject({ "http.request.method": "POST", "http.route": "/api/agent-workflows/:id/execute", "http.response.status_code": 202 });
  const names = new Set(inTrace.map((s) => s.name));
  // The gateway's command, the executor processing it, the tool call processed by the worker, and the run's events.
  expect([...names]).toEqual(expect.arrayContaining([
    "publish execution.start", "process executor", "publish tool.call", expect.stringMatching(/^process tool_echo_/), "publish execution.completed",
  ]));
  // Every span of the trace hangs off another span of it, or off the client's.
  const ids = new Set([...inTrace.map((s) => s.spanId), CLIENT_SPAN]);
  for (const s of inTrace) expect({ name: s.name, parentKnown: ids.has(s.parentSpanId ?? "") }).toEqual({ name: s.name, parentKnown: true });

  // Metrics: the last export holds the cumulative totals.
  const metrics = lastMetrics();
  const points = (name: string) => pointsOf(metrics, name);
  expect(points("baton.executions")).toEqual(expect.arrayContaining([
    { attributes: { "baton.execution.status": "completed", "baton.execution.child": false }, value: 1 },
    { attributes: { "baton.execution.status": "failed", "baton.execution.child": false }, value: 1 },
  ]));
  expect(points("baton.execution.duration")).toEqual(expect.arrayContaining([
    { attributes: { "baton.execution.status": "completed", "baton.execution.child": false }, value: 1, sum: expect.any(Number) },
  ]));
  expect(points("baton.node.duration")).toEqual(expect.arrayContaining([
    { attributes: { "baton.node.type": "tool", "baton.node.status": "completed" }, value: 1, sum: expect.any(Number) },
    { attributes: { "baton.node.type": "transform", "baton.node.status": "completed" }, value: 1, sum: expect.any(Number) },
    { attributes: { "baton.node.type": "tool", "baton.node.status": "failed" }, value: 1, sum: expect.any(Number) },
  ]));
  expect(points("baton.tool.calls")).toEqual(expect.arrayContaining([
    { attributes: { "baton.tool.name": "echo", "baton.tool.outcome": "ok" }, value: 1 },
    { attributes: { "baton.tool.name": "flaky", "baton.tool.outcome": "error", "error.type": "BATON_TOOL_FAILED" }, value: 1 },
  ]));
  expect(points("baton.tool.duration").map((p) => p.attributes)).toEqual(expect.arrayContaining([{ "baton.tool.name": "echo", "baton.tool.outcome": "ok" }]));
  const http = points("http.server.request.duration");
  expect(http).toEqual(expect.arrayContaining([
    { attributes: { "http.request.method": "POST", "http.route": "/api/agent-workflows/:id/execute", "http.response.status_code": 202 }, value: 2, sum: expect.any(Number) },
  ]));
  // Bounded cardinality: no metric attribute names a run or carries a raw path.
  for (const m of metrics) {
    for (const p of (m.sum ?? m.histogram)?.dataPoints ?? []) {
      for (const kv of p.attributes ?? []) expect({ metric: m.name, key: kv.key }).not.toEqual({ metric: m.name, key: expect.stringMatching(/execution\.id|executionId|url\.path/) });
    }
  }
  expect(http.filter((p) => /\/\d+/.test(typeof p.attributes["http.route"] === "string" ? p.attributes["http.route"] : ""))).toEqual([]);
});

it("counts what recovery did: the recovery sweep's commands by command, and checkpoints rebuilt from the journal", async () => {
  await telemetry.forceFlush();
  const before = (name: string, attributes: Record<string, unknown>): number =>
    pointsOf(lastMetrics(), name).find((p) => JSON.stringify(p.attributes) === JSON.stringify(attributes))?.value ?? 0;
  const has = (name: string): boolean => lastMetrics().some((m) => m.name === name);
  const continues = has("baton.recovery.commands") ? before("baton.recovery.commands", { "baton.command": "execution.continue" }) : 0;
  const rebuilds = has("baton.checkpoint.rebuilds") ? before("baton.checkpoint.rebuilds", {}) : 0;
  const wf = await createDefinition(h.a, "otel-review", { nodes: [{ id: "r", type: "agent.humanReview", config: { reason: "check" } }], edges: [] });
  const id = await execute(wf, {});
  expect(await waitForExecution(h.a, id, ["paused", "completed", "failed", "cancelled"])).toMatchObject({ status: "paused" });
  // Redis loses the paused run's checkpoint: the next sweep sends the run execution.continue, which rebuilds it.
  const key = `${h.config.prefix}:checkpoint:{${id}}`;
  expect(await h.redis.del(key, `${key}:history`, `${key}:fwd`)).toBeGreaterThanOrEqual(1);
  await waitFor("the checkpoint rebuilt by the sweep's continue", async () => ((await h.redis.exists(key)) === 1 ? true : undefined), 15_000);
  await telemetry.forceFlush();
  expect(before("baton.recovery.commands", { "baton.command": "execution.continue" })).toBeGreaterThan(continues);
  expect(before("baton.checkpoint.rebuilds", {})).toBe(rebuilds + 1);
  // The run is as it was: paused at its review.
  expect((await h.a.call<{ status: string }>("GET", `/api/agent-workflow-executions/${id}`)).body.status).toBe("paused");
});

it("ends the server span of a request whose client went away before the answer, as aborted", async () => {
  const { request } = await import("node:http");
  const trace = "5bf92f3577b34da6a3ce929d0e0e4737";
  const url = new URL(`${h.a.base}/api/agent-workflows`);
  // A body announced and never sent: the route waits for it; the client then closes.
  const req = request({ host: url.hostname, port: url.port, path: url.pathname, method: "POST", headers: { authorization: `Bearer ${h.config.apiKey!}`, "content-type": "application/json", "content-length": "100", traceparent: `00-${trace}-${CLIENT_SPAN}-01` } });
  req.on("error", () => undefined);
  req.write("{");
  await new Promise((r) => setTimeout(r, 200));
  req.destroy();
  let span: OtlpSpan | undefined;
  for (let i = 0; i < 50 && span === undefined; i++) {
    await new Promise((r) => setTimeout(r, 100));
    await telemetry.forceFlush();
    span = posts
      .filter((p) => p.path === "/v1/traces")
      .flatMap((p) => (p.body as { resourceSpans: { scopeSpans: { spans: (OtlpSpan & { status?: { code?: number } })[] }[] }[] }).resourceSpans)
      .flatMap((r) => r.scopeSpans.flatMap((s) => s.spans))
      .find((s) => s.traceId === trace && s.kind === 2);
  }
  expect(span).toMatchObject({ name: "POST /api/agent-workflows", parentSpanId: CLIENT_SPAN, status: { code: 2 } });
  expect(attrs(span!.attributes)).toMatchObject({ "error.type": "aborted" });
});

it("gives the ops dashboard and the alerting rules every metric and label their queries select", () => {
  const exported = lastMetrics().map((m) => ({
    name: m.name,
    ...(m.unit === undefined ? {} : { unit: m.unit }),
    kind: m.histogram ? ("histogram" as const) : m.sum?.isMonotonic === true ? ("counter" as const) : ("gauge" as const),
    attributes: new Set(((m.sum ?? m.gauge ?? m.histogram)?.dataPoints ?? []).flatMap((p) => (p.attributes ?? []).map((kv) => kv.key))),
  }));
  const root = join(import.meta.dirname, "..");
  const series = prometheusSeries(exported, commonLabels(root));
  // The names the dashboard relies on, as Prometheus's OTLP receiver spells them.
  expect([...series.keys()]).toEqual(expect.arrayContaining([
    "baton_executions_total", "baton_execution_duration_seconds_bucket", "baton_node_duration_seconds_count", "baton_tool_calls_total",
    "baton_tool_duration_seconds_bucket", "http_server_request_duration_seconds_count", "baton_recovery_commands_total", "baton_checkpoint_rebuilds_total",
  ]));
  const { files, datasourceUids } = repositoryDashboards(root);
  for (const { file, dashboard } of files) expect({ file, problems: checkDashboard(dashboard, datasourceUids, series) }).toEqual({ file, problems: [] });
  // And the alerting rules.
  expect(checkQueries(repositoryRules(root), series)).toEqual([]);
});
