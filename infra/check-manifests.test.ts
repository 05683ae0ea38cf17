/**
 * Rules checked: the repository's Dockerfile, docker-compose.yml and k8s/ pass the
 * manifest check (as a function and as the `node infra/check-manifests.ts` command);
 * a copy broken in known ways gets one problem per break — a service without image
 * or build, an unpinned third-party image, an unknown environment variable, an
 * invalid value, an unknown target, a Deployment without probes, resources or the
 * 30 s grace period, a probe on the wrong port, a module without a Deployment, a file
 * kustomization does not list, a Dockerfile without the Baton entry point, a bind mount of a
 * missing file, an observability env file with a foreign variable or an endpoint on no
 * service, a dashboard query or an alerting rule that does not parse — and the command then
 * exits 1.
 */
import { spawnSync } from "node:child_process";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { parse, parseAllDocuments, stringify } from "yaml";
import { checkManifests } from "./check-manifests.ts";

const ROOT = join(import.meta.dirname, "..");
const SCRIPT = join(import.meta.dirname, "check-manifests.ts");

interface K8sContainer {
  env: { name: string; value: string }[];
  readinessProbe?: unknown;
  resources?: unknown;
  livenessProbe: { httpGet: { port: number | string } };
}
interface K8sDoc {
  spec: { template: { spec: { containers: K8sContainer[]; terminationGracePeriodSeconds?: number } } };
  resources?: string[];
}
interface ComposeDoc {
  services: Record<string, { image?: string; ports?: string[]; environment?: Record<string, string> }>;
}

describe("the repository's manifests", () => {
  it("pass the check", () => {
    const report = checkManifests(ROOT);
    expect(report.problems).toEqual([]);
    expect(report.checked.composeServices).toBeGreaterThanOrEqual(10);
    expect(report.checked.k8sDocuments).toBeGreaterThanOrEqual(12);
  });

  it("pass the command, which exits 0", () => {
    const r = spawnSync(process.execPath, [SCRIPT, ROOT], { encoding: "utf8" });
    expect(r.stderr).toBe("");
    expect(r.status).toBe(0);
    expect(r.stdout).toContain("deployment manifests OK");
  });
});

describe("broken manifests", () => {
  let dir: string;
  let problems: string[];

  const editK8s = (file: string, edit: (doc: K8sDoc) => void): void => {
    const path = join(dir, "k8s", file);
    const docs = parseAllDocuments(readFileSync(path, "utf8")).map((d) => d.toJS() as K8sDoc);
    for (const d of docs) edit(d);
    writeFileSync(path, docs.map((d) => stringify(d)).join("---\n"));
  };
  const container = (d: K8sDoc): K8sContainer => d.spec.template.spec.containers[0]!;

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), "baton-manifests-"));
    for (const f of ["Dockerfile", "docker-compose.yml", "k8s", "infra/observability/prometheus.yml", "infra/observability/alerts.yml", "infra/observability/observability.env", "infra/observability/grafana"]) {
      cpSync(join(ROOT, f), join(dir, f), { recursive: true });
    }

    const compose = parse(readFileSync(join(dir, "docker-compose.yml"), "utf8"), { merge: true }) as ComposeDoc;
    const env = (service: string): Record<string, string> => compose.services[service]!.environment!;
    compose.services.cache = { ports: ["11211:11211"] };
    compose.services.postgres!.image = "postgres";
    env("baton").BATON_BOGUS = "1";
    env("executor").BATON_TARGET = "scheduler";
    env("gateway").BATON_API_KEY = "short";
    (compose.services.prometheus as { volumes: string[] }).volumes[0] = "./infra/observability/missing.yml:/etc/prometheus/prometheus.yml:ro";
    writeFileSync(join(dir, "docker-compose.yml"), stringify(compose));
    const envFile = join(dir, "infra/observability/observability.env");
    writeFileSync(envFile, readFileSync(envFile, "utf8").replace("http://jaeger:4318", "http://tempo:4318") + "BATON_THING=1\n");
    const alertsFile = join(dir, "infra/observability/alerts.yml");
    writeFileSync(alertsFile, readFileSync(alertsFile, "utf8").replace("increase(baton_checkpoint_rebuilds_total[15m])", "increase(baton_checkpoint_rebuilds_total[15m]"));
    const dashboardFile = join(dir, "infra/observability/grafana/dashboards/baton.json");
    writeFileSync(dashboardFile, readFileSync(dashboardFile, "utf8").replace("sum by (baton_execution_status) (rate(", "sum by (baton_execution_status) (rate(("));

    editK8s("executor.yaml", (d) => {
      delete container(d).readinessProbe;
      delete container(d).resources;
    });
    editK8s("worker.yaml", (d) => {
      container(d).env.push({ name: "BATON_WORKERS", value: "3" });
      d.spec.template.spec.terminationGracePeriodSeconds = 10;
    });
    editK8s("planner.yaml", (d) => {
      container(d).livenessProbe.httpGet.port = 9999;
      container(d).env.push({ name: "BATON_LLM_ALIASES", value: "{fast:" });
    });
    editK8s("learner.yaml", (d) => {
      container(d).env[0]!.value = "learnerx";
    });
    editK8s("kustomization.yaml", (d) => {
      d.resources = d.resources?.filter((r) => r !== "review.yaml");
    });
    const dockerfile = readFileSync(join(dir, "Dockerfile"), "utf8");
    writeFileSync(join(dir, "Dockerfile"), dockerfile.replace(/^ENTRYPOINT.*$/m, 'CMD ["node"]'));

    problems = checkManifests(dir).problems;
  });
  afterAll(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it.each([
    ["a service without image or build", "services.cache: has neither image nor build"],
    ["an unpinned third-party image", "services.postgres: image postgres is not pinned"],
    ["an unknown compose variable", "services.baton: environment BATON_BOGUS is not a variable"],
    ["an unknown compose target", 'services.executor: BATON_TARGET names unknown target "scheduler"'],
    ["an invalid value", "services.gateway: configuration is invalid"],
    ["the split profile missing a module", 'the "split" profile runs no executor'],
    ["a Deployment without readiness probe", "Deployment baton-executor: container baton: no readinessProbe"],
    ["a Deployment without resources", "Deployment baton-executor: container baton: no resources.requests.cpu"],
    ["an unknown k8s variable", "Deployment baton-worker: container baton: env BATON_WORKERS is not a variable"],
    ["a short grace period", "Deployment baton-worker: terminationGracePeriodSeconds must be 30"],
    ["a probe on the wrong port", "livenessProbe must use the module's health port 9464, not 9999"],
    ["an unknown k8s target", 'BATON_TARGET names unknown target "learnerx"'],
    ["a module without a Deployment", "k8s: no Deployment runs learner"],
    ["an invalid LLM setting", "Deployment baton-planner: container baton: configuration is invalid: invalid LLM configuration: BATON_LLM_ALIASES: not valid JSON"],
    ["a file kustomization does not list", "k8s/kustomization.yaml: does not list review.yaml"],
    ["a Dockerfile without the entry point", 'Dockerfile: expected it has ENTRYPOINT ["node", "bin/baton.ts"]'],
    ["a bind mount of a missing file", "services.prometheus: mounts ./infra/observability/missing.yml, which does not exist"],
    ["a telemetry endpoint on no compose service", "observability.env: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: http://tempo:4318/v1/traces names no compose service"],
    ["a variable that is not telemetry's in the observability env file", "observability.env: BATON_THING is not a telemetry variable"],
    ["an alerting rule that does not parse", "infra/observability/alerts.yml: alert BatonCheckpointsRebuilt: does not parse as PromQL"],
    ["a dashboard query that does not parse", 'dashboards/baton.json: panel 2 "Runs ended per minute, by status" A: does not parse as PromQL'],
  ])("reports %s", (_what, expected) => {
    expect(problems.some((p) => p.includes(expected))).toBe(true);
  });

  it("reports nothing about what was left intact", () => {
    expect(problems.filter((p) => p.includes("gateway.yaml") || p.includes("memory.yaml"))).toEqual([]);
  });

  it("makes the command exit 1 and print every problem", () => {
    const r = spawnSync(process.execPath, [SCRIPT, dir], { encoding: "utf8" });
    expect(r.status).toBe(1);
    expect(r.stderr).toContain(`deployment manifests: ${problems.length} problem(s)`);
    for (const p of problems) expect(r.stderr).toContain(p);
  });
});
