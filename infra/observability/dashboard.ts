/**
 * Checks Baton's Grafana dashboard (infra/observability/grafana/dashboards/) and alerting rules
 * (infra/observability/alerts.yml) against the dashboard's provisioning and against the metrics
 * Baton exports:
 *
 * - structure: unique panel ids, a grid position for each panel, every data source one that
 *   infra/observability/grafana/provisioning/datasources/ provisions, a query on every target;
 * - every query and rule parses as PromQL (the Prometheus project's own grammar,
 *   `@prometheus-io/lezer-promql`), once Grafana's variables are replaced by values;
 * - with the metrics of a real OTLP export at hand (`prometheusSeries`), every metric a query
 *   selects is a series Prometheus makes of them, and every label it matches on or groups by is
 *   one those series carry.
 *
 * Prometheus's names for OTLP metrics follow its default translation
 * (`UnderscoreEscapingWithSuffixes`, the OpenTelemetry compatibility specification): dots
 * become underscores, the unit is appended (`s` → `_seconds`; a `{annotation}` unit adds
 * nothing), a monotonic sum gets `_total`, a histogram is `_bucket` (with `le`), `_sum` and
 * `_count`. Every series carries `job` (`service.name`) and `instance` (`service.instance.id`),
 * and the resource attributes infra/observability/prometheus.yml promotes.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { parser } from "@prometheus-io/lezer-promql";
import { parse } from "yaml";

/** A metric as an OTLP export describes it, with the attribute keys its data points carry. */
export interface ExportedMetric {
  name: string;
  unit?: string;
  kind: "counter" | "gauge" | "histogram";
  attributes: Iterable<string>;
}

/** Prometheus's name for an OTLP attribute or metric name part: anything but `[a-zA-Z0-9_]` becomes `_`. */
export const promLabel = (name: string): string => {
  const escaped = name.replace(/[^a-zA-Z0-9_]/g, "_");
  return /^[0-9]/.test(escaped) ? `key_${escaped}` : escaped;
};

/** The units Baton's metrics use, as Prometheus spells them. An unknown unit is an error, not a guess. */
const UNIT_SUFFIX: Record<string, string> = { s: "seconds", ms: "milliseconds", By: "bytes", "1": "" };

/** The base name Prometheus gives an OTLP metric (before a histogram's `_bucket` / `_sum` / `_count`). */
export function prometheusName(metric: Pick<ExportedMetric, "name" | "unit" | "kind">): string {
  let name = promLabel(metric.name);
  const unit = (metric.unit ?? "").replace(/\{[^}]*\}/g, "");
  if (unit !== "") {
    const suffix = UNIT_SUFFIX[unit];
    if (suffix === undefined) throw new Error(`metric ${metric.name}: unit "${metric.unit}" has no Prometheus suffix here; add it to UNIT_SUFFIX`);
    if (suffix !== "" && !name.endsWith(`_${suffix}`)) name += `_${suffix}`;
  }
  if (metric.kind === "counter" && !name.endsWith("_total")) name += "_total";
  return name;
}

/** The labels every series has: `job`, `instance`, and the resource attributes prometheus.yml promotes. */
export function commonLabels(root: string): string[] {
  const config = parse(readFileSync(join(root, "infra/observability/prometheus.yml"), "utf8")) as { otlp?: { promote_resource_attributes?: string[] } };
  return ["job", "instance", ...(config.otlp?.promote_resource_attributes ?? []).map(promLabel)];
}

/** Every series name Prometheus makes of `metrics`, with the label names it carries. */
export function prometheusSeries(metrics: ExportedMetric[], common: string[]): Map<string, Set<string>> {
  const series = new Map<string, Set<string>>();
  for (const m of metrics) {
    const base = prometheusName(m);
    const labels = [...common, ...[...m.attributes].map(promLabel)];
    if (m.kind === "histogram") {
      series.set(`${base}_bucket`, new Set([...labels, "le"]));
      series.set(`${base}_sum`, new Set(labels));
      series.set(`${base}_count`, new Set(labels));
    } else {
      series.set(base, new Set(labels));
    }
  }
  return series;
}

/** Grafana's variables, replaced by values a query can take, so the query parses as PromQL. */
export function withVariables(expr: string): string {
  return expr
    .replace(/\$__(rate_interval|interval|range)\b/g, "5m")
    .replace(/\[\[(\w+)\]\]|\$\{(\w+)(?::\w+)?\}|\$(\w+)/g, ".*");
}

/** One query of a dashboard: where it is and its PromQL. */
export interface DashboardQuery {
  panel: string;
  expr: string;
}

interface Panel {
  id?: unknown;
  type?: unknown;
  title?: unknown;
  gridPos?: { x?: unknown; y?: unknown; w?: unknown; h?: unknown };
  datasource?: { type?: unknown; uid?: unknown };
  targets?: { expr?: unknown; refId?: unknown; datasource?: { uid?: unknown } }[];
  panels?: Panel[];
}
interface Dashboard {
  uid?: unknown;
  title?: unknown;
  panels?: Panel[];
  templating?: { list?: { name?: unknown; datasource?: { uid?: unknown }; query?: unknown }[] };
}

const allPanels = (panels: Panel[] | undefined): Panel[] => (panels ?? []).flatMap((p) => [p, ...allPanels(p.panels)]);
const panelName = (p: Panel): string => `panel ${String(p.id)} "${String(p.title)}"`;

/** The PromQL queries of a dashboard's panels. */
export function dashboardQueries(dashboard: unknown): DashboardQuery[] {
  return allPanels((dashboard as Dashboard).panels).flatMap((p) =>
    (p.targets ?? []).map((t) => ({ panel: `${panelName(p)} ${String(t.refId)}`, expr: typeof t.expr === "string" ? t.expr : "" })));
}

/** A query's metric names and the label names it matches on or groups by; syntax errors as problems. */
export function querySelectors(expr: string): { metrics: { name: string; labels: string[] }[]; grouping: string[]; problems: string[] } {
  const text = withVariables(expr);
  const tree = parser.parse(text);
  const metrics: { name: string; labels: string[] }[] = [];
  const grouping: string[] = [];
  const problems: string[] = [];
  const cursor = tree.cursor();
  do {
    const node = cursor.node;
    if (node.type.isError) {
      // The first error is the one to fix; the parser's recovery often adds more at the same place.
      if (problems.length === 0) problems.push(`does not parse as PromQL at ${node.from}: ${JSON.stringify(text.slice(Math.max(0, node.from - 20), node.from + 20))}`);
    } else if (node.name === "VectorSelector") {
      const id = node.getChild("Identifier");
      const labels = node.getChild("LabelMatchers")?.getChildren("UnquotedLabelMatcher").map((m) => m.getChild("LabelName")).filter((n) => n !== null).map((n) => text.slice(n.from, n.to)) ?? [];
      if (id === null) problems.push(`selects series without a metric name: ${text.slice(node.from, node.to)}`);
      else metrics.push({ name: text.slice(id.from, id.to), labels });
    } else if (node.name === "GroupingLabels") {
      for (const n of node.getChildren("LabelName")) grouping.push(text.slice(n.from, n.to));
    }
  } while (cursor.next());
  return { metrics, grouping, problems };
}

/**
 * The problems of a dashboard: its structure against the provisioned data sources, each query's
 * syntax and, when `series` is given, each query's metrics and labels against them.
 */
export function checkDashboard(dashboard: unknown, datasourceUids: Set<string>, series?: Map<string, Set<string>>): string[] {
  const problems: string[] = [];
  const d = dashboard as Dashboard;
  if (typeof d.uid !== "string" || d.uid === "") problems.push("the dashboard has no uid");
  if (typeof d.title !== "string" || d.title === "") problems.push("the dashboard has no title");
  const ids = new Set<unknown>();
  for (const p of allPanels(d.panels)) {
    const where = panelName(p);
    if (typeof p.id !== "number") problems.push(`${where}: no numeric id`);
    else if (ids.has(p.id)) problems.push(`${where}: id ${p.id} is used twice`);
    ids.add(p.id);
    const g = p.gridPos;
    if (g === undefined || ![g.x, g.y, g.w, g.h].every((v) => typeof v === "number") || (g.x as number) + (g.w as number) > 24) problems.push(`${where}: no grid position within 24 columns`);
    if (p.type === "row") continue;
    const uid = p.datasource?.uid;
    if (typeof uid !== "string" || !datasourceUids.has(uid)) problems.push(`${where}: data source ${JSON.stringify(uid)} is not provisioned`);
    if ((p.targets ?? []).length === 0) problems.push(`${where}: no query`);
    for (const t of p.targets ?? []) {
      if (t.datasource?.uid !== undefined && t.datasource.uid !== uid) problems.push(`${where} ${String(t.refId)}: data source differs from its panel's`);
      if (typeof t.expr !== "string" || t.expr.trim() === "") problems.push(`${where} ${String(t.refId)}: empty query`);
    }
  }
  for (const v of d.templating?.list ?? []) {
    const uid = v.datasource?.uid;
    if (uid !== undefined && (typeof uid !== "string" || !datasourceUids.has(uid))) problems.push(`variable ${String(v.name)}: data source ${JSON.stringify(uid)} is not provisioned`);
  }
  problems.push(...checkQueries(dashboardQueries(dashboard), series));
  return problems;
}

/**
 * The problems of queries: each one's syntax and, when `series` is given, its metrics and labels
 * against them.
 */
export function checkQueries(queries: DashboardQuery[], series?: Map<string, Set<string>>): string[] {
  const problems: string[] = [];
  for (const q of queries) {
    if (q.expr === "") continue;
    const found = querySelectors(q.expr);
    problems.push(...found.problems.map((p) => `${q.panel}: ${p}`));
    if (series === undefined) continue;
    const used = new Set<string>();
    for (const m of found.metrics) {
      const labels = series.get(m.name);
      if (labels === undefined) {
        problems.push(`${q.panel}: metric ${m.name} is not exported`);
        continue;
      }
      used.add(m.name);
      for (const l of m.labels) if (!labels.has(l)) problems.push(`${q.panel}: ${m.name} has no label ${l}`);
    }
    for (const l of found.grouping) {
      if (used.size > 0 && ![...used].some((m) => series.get(m)!.has(l))) problems.push(`${q.panel}: groups by ${l}, a label none of ${[...used].join(", ")} has`);
    }
  }
  return problems;
}

/** The expressions of a Prometheus rules file, each named `alert <name>` or `record <name>`. */
export function ruleQueries(rules: unknown): DashboardQuery[] {
  const groups = (rules as { groups?: { rules?: { alert?: unknown; record?: unknown; expr?: unknown }[] }[] }).groups ?? [];
  const name = (v: unknown): string => (typeof v === "string" ? v : JSON.stringify(v));
  return groups.flatMap((g) => (g.rules ?? []).map((r) => ({
    panel: r.alert !== undefined ? `alert ${name(r.alert)}` : `record ${name(r.record)}`,
    expr: typeof r.expr === "string" ? r.expr : "",
  })));
}

/** The alerting rules of the repository (infra/observability/alerts.yml), as queries. */
export function repositoryRules(root: string): DashboardQuery[] {
  return ruleQueries(parse(readFileSync(join(root, "infra/observability/alerts.yml"), "utf8")));
}

/** The repository's dashboards, and the data sources its provisioning defines (with their uids apart). */
export function repositoryDashboards(root: string): {
  files: { file: string; dashboard: unknown }[];
  datasources: { name?: string; uid?: string; url?: string }[];
  datasourceUids: Set<string>;
} {
  const dir = join(root, "infra/observability/grafana");
  const provisioning = parse(readFileSync(join(dir, "provisioning/datasources/baton.yaml"), "utf8")) as { datasources?: { name?: string; uid?: string; url?: string }[] };
  const datasources = provisioning.datasources ?? [];
  const datasourceUids = new Set(datasources.map((d) => d.uid).filter((u): u is string => typeof u === "string"));
  const files = readdirSync(join(dir, "dashboards")).filter((f) => f.endsWith(".json")).sort().map((f) => join(dir, "dashboards", f));
  return { files: files.map((file) => ({ file, dashboard: JSON.parse(readFileSync(file, "utf8")) as unknown })), datasources, datasourceUids };
}
