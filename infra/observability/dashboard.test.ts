/**
 * Rules checked: the repository's dashboard is well formed against its provisioning and every
 * query parses as PromQL; OTLP names become Prometheus's (unit suffix, `_total`, histogram
 * series, escaped labels), and an unknown unit is refused rather than guessed; the check reports
 * a query that does not parse, a metric not exported, a label the metric lacks, a grouping label
 * no selected metric has, an unprovisioned data source and a repeated panel id.
 * (test/otel.int.test.ts checks the dashboard's names against a real export.)
 */
import { join } from "node:path";
import { describe, expect, it } from "@jest/globals";
import { checkDashboard, commonLabels, dashboardQueries, prometheusName, prometheusSeries, querySelectors, repositoryDashboards } from "./dashboard.ts";

const ROOT = join(import.meta.dirname, "../..");

describe("the repository's dashboard", () => {
  it("is well formed and every query parses", () => {
    const { files, datasourceUids } = repositoryDashboards(ROOT);
    expect(files.map((f) => f.file.slice(ROOT.length + 1))).toEqual(["infra/observability/grafana/dashboards/baton.json"]);
    expect([...datasourceUids].sort()).toEqual(["baton-jaeger", "baton-prometheus"]);
    for (const { dashboard } of files) {
      expect(checkDashboard(dashboard, datasourceUids)).toEqual([]);
      expect(dashboardQueries(dashboard).length).toBeGreaterThanOrEqual(10);
    }
  });
});

describe("Prometheus names", () => {
  it("follow the OTLP translation", () => {
    expect(prometheusName({ name: "baton.executions", unit: "{execution}", kind: "counter" })).toBe("baton_executions_total");
    expect(prometheusName({ name: "http.server.request.duration", unit: "s", kind: "histogram" })).toBe("http_server_request_duration_seconds");
    expect(prometheusName({ name: "queue.depth", kind: "gauge" })).toBe("queue_depth");
    expect(() => prometheusName({ name: "x", unit: "furlong", kind: "gauge" })).toThrow(/furlong/);
    const series = prometheusSeries([{ name: "baton.tool.duration", unit: "s", kind: "histogram", attributes: ["baton.tool.name", "error.type"] }], commonLabels(ROOT));
    expect([...series.keys()]).toEqual(["baton_tool_duration_seconds_bucket", "baton_tool_duration_seconds_sum", "baton_tool_duration_seconds_count"]);
    expect([...series.get("baton_tool_duration_seconds_bucket")!]).toEqual(expect.arrayContaining(["job", "instance", "deployment_environment_name", "baton_tool_name", "error_type", "le"]));
    expect(series.get("baton_tool_duration_seconds_count")!.has("le")).toBe(false);
  });

  it("are read from a query with Grafana's variables in it", () => {
    expect(querySelectors('sum by (a, b) (rate(m_total{job=~"$job", c="x"}[$__rate_interval])) or vector(0)')).toEqual({
      metrics: [{ name: "m_total", labels: ["job", "c"] }],
      grouping: ["a", "b"],
      problems: [],
    });
  });
});

describe("the check", () => {
  const series = prometheusSeries([{ name: "m", unit: "{x}", kind: "counter", attributes: ["a"] }], ["job"]);
  const dash = (exprs: string[], over: Record<string, unknown> = {}) => ({
    uid: "u",
    title: "t",
    panels: exprs.map((expr, i) => ({ id: i + 1, type: "timeseries", title: `p${i}`, gridPos: { x: 0, y: i, w: 24, h: 1 }, datasource: { uid: "ds" }, targets: [{ refId: "A", expr }], ...over })),
  });
  const check = (exprs: string[], over?: Record<string, unknown>) => checkDashboard(dash(exprs, over), new Set(["ds"]), series);

  it("passes a good query", () => {
    expect(check(['sum by (a) (rate(m_total{job=~"$job"}[$__rate_interval]))'])).toEqual([]);
  });

  it("reports every problem", () => {
    expect(check(["sum(rate(m_total[5m]) / ", "rate(other_total[5m])", 'm_total{b="1"}', "sum by (z) (m_total)"])).toEqual([
      expect.stringMatching(/^panel 1 "p0" A: does not parse as PromQL/),
      'panel 2 "p1" A: metric other_total is not exported',
      'panel 3 "p2" A: m_total has no label b',
      'panel 4 "p3" A: groups by z, a label none of m_total has',
    ]);
    expect(check(["m_total", "m_total"], { id: 7, datasource: { uid: "nope" } })).toEqual([
      'panel 7 "p0": data source "nope" is not provisioned',
      'panel 7 "p1": id 7 is used twice',
      'panel 7 "p1": data source "nope" is not provisioned',
    ]);
  });
});
