/**
 * Checks Baton's deployment manifests against its configuration:
 *
 *   ./baton node infra/check-manifests.ts [repo root]
 *
 * - Dockerfile: node:24-slim, `npm install`, Prisma generation, `node bin/baton.ts` entry.
 * - docker-compose.yml: every service has an image or a build; third-party images are
 *   pinned and health-checked; Baton services use only the environment variables
 *   `@baton/config`, `@baton/llm` and `@baton/telemetry` (the standard OTEL_* ones) read, with values their parsers accept, name only known targets,
 *   never start local servers, and
 *   probe /readyz on their module's health port; dependencies exist; the default
 *   set runs target `all` and the "split" profile runs every module; bind mounts exist and
 *   named volumes are declared.
 * - The "observability" profile: infra/observability/observability.env sets telemetry variables
 *   Baton accepts, pointing at services of the profiles it turns on; Grafana's data sources
 *   point at compose services; the dashboards are well formed and every query parses, as does
 *   every alerting rule.
 * - k8s/: every file parses; kustomization lists every file; ConfigMap/Secret keys and
 *   container env are known variables with valid values; every Deployment has /readyz and /healthz probes
 *   on its module's health port, resource requests and limits, and a 30 s grace
 *   period; every module has a Deployment; the migration Job runs `migrate`;
 *   Services select a Deployment and target one of its ports.
 *
 * Exits 1 and prints every problem when something is wrong.
 */
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parse, parseAllDocuments } from "yaml";
import { ALL_MODULES, envSchema, loadConfig } from "@baton/config";
import { LLM_ENV_VARS, llmConfigFromEnv } from "@baton/llm";
import { TELEMETRY_ENV_VARS, telemetrySettingsFromEnv } from "@baton/telemetry";
import { checkDashboard, checkQueries, repositoryDashboards, repositoryRules } from "./observability/dashboard.ts";

/** The variables the brief requires the manifests to be able to set. */
const REQUIRED_ENV = [
  "BATON_NATS_URL",
  "BATON_REDIS_URL",
  "BATON_DATABASE_URL",
  "BATON_PORT",
  "BATON_API_KEY",
  "BATON_TARGET",
  "BATON_EMBEDDED",
  "BATON_HEALTH_PORT",
];
const DEFAULT_GATEWAY_PORT = 3000;
const DEFAULT_HEALTH_PORT = 9464;
const GRACE_SECONDS = 30;

/** The result of {@link checkManifests}. */
export interface ManifestReport {
  /** One line per problem, `file: where: what`. Empty when all is well. */
  problems: string[];
  /** What was checked, for the success message. */
  checked: { composeServices: number; k8sDocuments: number };
}

type Obj = Record<string, unknown>;

const isObj = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);
const asObj = (v: unknown): Obj => (isObj(v) ? v : {});
const asArr = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
const str = (v: unknown): string | undefined => (typeof v === "string" ? v : typeof v === "number" || typeof v === "boolean" ? String(v) : undefined);

/** Checks the manifests under `root`; never throws for a bad manifest, reports it. */
export function checkManifests(root: string): ManifestReport {
  const problems: string[] = [];
  const allowedEnv = new Set([...Object.keys(envSchema.shape), ...LLM_ENV_VARS, ...TELEMETRY_ENV_VARS]);
  const targets = new Set<string>(["all", ...ALL_MODULES]);
  for (const name of REQUIRED_ENV) {
    if (!allowedEnv.has(name)) problems.push(`@baton/config: envSchema: ${name} is not a documented variable`);
  }
  const ctx: Ctx = { root, problems, allowedEnv, targets };
  checkDockerfile(ctx);
  const composeServices = checkCompose(ctx);
  checkObservability(ctx);
  const k8sDocuments = checkK8s(ctx);
  return { problems, checked: { composeServices, k8sDocuments } };
}

interface Ctx {
  root: string;
  problems: string[];
  allowedEnv: Set<string>;
  targets: Set<string>;
}

function readText(ctx: Ctx, file: string): string | undefined {
  const path = join(ctx.root, file);
  if (!existsSync(path)) {
    ctx.problems.push(`${file}: missing`);
    return undefined;
  }
  return readFileSync(path, "utf8");
}

/** Problems with a BATON_TARGET value: each comma-separated part must be a known target. */
function checkTarget(ctx: Ctx, where: string, value: string | undefined): string[] {
  if (value === undefined) return [];
  const parts = value.split(",").map((p) => p.trim());
  for (const p of parts) {
    if (!ctx.targets.has(p)) ctx.problems.push(`${where}: BATON_TARGET names unknown target "${p}" (known: ${[...ctx.targets].join(", ")})`);
  }
  return parts;
}

/** The port where a process with these targets answers /readyz and /healthz. */
function healthPort(parts: string[], env: Map<string, string>): number {
  if (parts.includes("all") || parts.includes("gateway")) return Number(env.get("BATON_PORT") ?? DEFAULT_GATEWAY_PORT);
  return Number(env.get("BATON_HEALTH_PORT") ?? DEFAULT_HEALTH_PORT);
}

/** The values must pass Baton's own configuration parsing (`${X:-default}` counts as its default). */
function checkValues(ctx: Ctx, where: string, env: Map<string, string>): void {
  const values: Record<string, string> = {};
  for (const [k, v] of env) {
    if (!ctx.allowedEnv.has(k) || k === "BATON_TARGET") continue; // reported on their own
    const interpolated = /^\$\{[A-Za-z_][A-Za-z0-9_]*(?::?-(.*))?\}$/.exec(v);
    if (interpolated) {
      if (interpolated[1] !== undefined) values[k] = interpolated[1];
      continue;
    }
    values[k] = v;
  }
  for (const read of [loadConfig, llmConfigFromEnv, (env: Record<string, string>) => telemetrySettingsFromEnv(env, "baton")]) {
    try {
      read(values);
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      ctx.problems.push(`${where}: configuration is invalid: ${message.replace(/\s*\n\s*/g, "; ")}`);
    }
  }
}

function checkDockerfile(ctx: Ctx): void {
  const text = readText(ctx, "Dockerfile");
  if (text === undefined) return;
  const expect: [RegExp, string][] = [
    [/^FROM\s+node:24-slim\b/m, "is based on node:24-slim"],
    [/\bnpm install\b/, "installs dependencies with npm install"],
    [/node scripts\/generate\.ts prisma/, "generates the Prisma client (node scripts/generate.ts prisma)"],
    [/^ENTRYPOINT\s+\["node",\s*"bin\/baton\.ts"\]/m, 'has ENTRYPOINT ["node", "bin/baton.ts"]'],
    [/BATON_EMBEDDED=false/, "sets BATON_EMBEDDED=false"],
  ];
  for (const [re, what] of expect) if (!re.test(text)) ctx.problems.push(`Dockerfile: expected it ${what}`);
  for (const m of text.matchAll(/\b(BATON_[A-Z0-9_]+)=/g)) {
    if (!ctx.allowedEnv.has(m[1]!)) ctx.problems.push(`Dockerfile: ENV ${m[1]} is not a variable @baton/config reads`);
  }
}

function envMap(raw: unknown): Map<string, string> {
  const env = new Map<string, string>();
  if (Array.isArray(raw)) {
    for (const item of raw) {
      const s = str(item) ?? "";
      const eq = s.indexOf("=");
      env.set(eq < 0 ? s : s.slice(0, eq), eq < 0 ? "" : s.slice(eq + 1));
    }
  } else {
    for (const [k, v] of Object.entries(asObj(raw))) env.set(k, str(v) ?? "");
  }
  return env;
}

function checkCompose(ctx: Ctx): number {
  const file = "docker-compose.yml";
  const text = readText(ctx, file);
  if (text === undefined) return 0;
  let doc: Obj;
  try {
    doc = asObj(parse(text, { merge: true }));
  } catch (err) {
    ctx.problems.push(`${file}: does not parse: ${err instanceof Error ? err.message : String(err)}`);
    return 0;
  }
  for (const m of text.matchAll(/\$\{([A-Za-z_][A-Za-z0-9_]*)/g)) {
    if (!ctx.allowedEnv.has(m[1]!)) ctx.problems.push(`${file}: interpolates \${${m[1]}}, which is not a variable @baton/config reads`);
  }
  const services = asObj(doc.services);
  const names = Object.keys(services);
  if (names.length === 0) ctx.problems.push(`${file}: no services`);
  const defaultTargets = new Set<string>();
  const splitTargets = new Set<string>();

  for (const name of names) {
    const where = `${file}: services.${name}`;
    const svc = asObj(services[name]);
    const image = str(svc.image);
    const build = svc.build;
    if (image === undefined && build === undefined) ctx.problems.push(`${where}: has neither image nor build`);
    if (build !== undefined) {
      const b = typeof build === "string" ? { context: build } : asObj(build);
      const context = resolve(ctx.root, str(b.context) ?? ".");
      const dockerfile = join(context, str(b.dockerfile) ?? "Dockerfile");
      if (!existsSync(dockerfile)) ctx.problems.push(`${where}: build uses ${dockerfile}, which does not exist`);
    }
    const dependsOn = Array.isArray(svc.depends_on) ? svc.depends_on.map((d) => str(d) ?? "") : Object.keys(asObj(svc.depends_on));
    for (const d of dependsOn) if (!names.includes(d)) ctx.problems.push(`${where}: depends on unknown service "${d}"`);
    for (const v of asArr(svc.volumes)) {
      // "src:target[:mode]" or { source }; a lone "/path" is an anonymous volume.
      const source = typeof v === "string" ? (v.includes(":") ? v.split(":")[0] : undefined) : str(asObj(v).source);
      if (source === undefined) continue;
      if (/^\.{1,2}\//.test(source)) {
        if (!existsSync(join(ctx.root, source))) ctx.problems.push(`${where}: mounts ${source}, which does not exist`);
      } else if (!source.startsWith("/") && !Object.hasOwn(asObj(doc.volumes), source)) ctx.problems.push(`${where}: uses volume ${source}, which the file does not declare`);
    }

    const isBaton = build !== undefined || /^baton(:|$)/.test(image ?? "");
    if (!isBaton) {
      if (image !== undefined && (!image.includes(":") || image.endsWith(":latest"))) ctx.problems.push(`${where}: image ${image} is not pinned to a version`);
      if (svc.healthcheck === undefined) ctx.problems.push(`${where}: has no healthcheck`);
      continue;
    }

    const env = envMap(svc.environment);
    for (const k of env.keys()) if (!ctx.allowedEnv.has(k)) ctx.problems.push(`${where}: environment ${k} is not a variable @baton/config reads`);
    if (env.get("BATON_EMBEDDED") !== "false") ctx.problems.push(`${where}: must set BATON_EMBEDDED=false (no local servers in containers)`);
    checkValues(ctx, where, env);
    const command = asArr(svc.command).map((c) => str(c) ?? "").join(" ") || (str(svc.command) ?? "");
    if (/\bmigrate\b/.test(command)) continue; // one-shot: no target, no healthcheck

    const parts = checkTarget(ctx, where, env.get("BATON_TARGET"));
    if (parts.length === 0) ctx.problems.push(`${where}: sets no BATON_TARGET`);
    const profiles = asArr(svc.profiles).map((p) => str(p) ?? "");
    for (const p of parts) (profiles.length === 0 ? defaultTargets : profiles.includes("split") ? splitTargets : new Set<string>()).add(p);
    const port = healthPort(parts, env);
    const test = asArr(asObj(svc.healthcheck).test).map((t) => str(t) ?? "").join(" ") || (str(asObj(svc.healthcheck).test) ?? "");
    if (!test.includes(`:${port}/readyz`)) ctx.problems.push(`${where}: healthcheck must probe /readyz on port ${port}`);
  }

  if (!defaultTargets.has("all")) ctx.problems.push(`${file}: no service without a profile runs BATON_TARGET=all`);
  if (splitTargets.size > 0 || names.some((n) => asArr(asObj(services[n]).profiles).includes("split"))) {
    for (const m of ALL_MODULES) if (!splitTargets.has(m)) ctx.problems.push(`${file}: the "split" profile runs no ${m}`);
  }
  return names.length;
}

/**
 * The "observability" profile: its env file sets only telemetry variables Baton accepts, pointing
 * at services of the profiles it turns on; Grafana's data sources point at compose services; and
 * the dashboards are well formed and parse (infra/observability/dashboard.ts).
 */
function checkObservability(ctx: Ctx): void {
  const envFile = "infra/observability/observability.env";
  const composeText = readText(ctx, "docker-compose.yml");
  const text = readText(ctx, envFile);
  if (composeText === undefined || text === undefined) return;
  const services = asObj(asObj(parse(composeText, { merge: true })).services);
  const profilesOf = (name: string) => asArr(asObj(services[name]).profiles).map((p) => str(p) ?? "");
  const env: Record<string, string> = {};
  for (const line of text.split("\n").map((l) => l.trim())) {
    if (line === "" || line.startsWith("#")) continue;
    const eq = line.indexOf("=");
    if (eq <= 0) ctx.problems.push(`${envFile}: "${line}" is not NAME=value`);
    else env[line.slice(0, eq)] = line.slice(eq + 1);
  }
  const profiles = (env.COMPOSE_PROFILES ?? "").split(",").filter((p) => p !== "");
  if (!profiles.includes("observability")) ctx.problems.push(`${envFile}: COMPOSE_PROFILES does not turn on the "observability" profile`);
  for (const p of profiles) if (!Object.keys(services).some((n) => profilesOf(n).includes(p))) ctx.problems.push(`${envFile}: COMPOSE_PROFILES names profile "${p}", which no service has`);
  for (const k of Object.keys(env)) if (k !== "COMPOSE_PROFILES" && !TELEMETRY_ENV_VARS.includes(k)) ctx.problems.push(`${envFile}: ${k} is not a telemetry variable Baton reads`);
  try {
    if (telemetrySettingsFromEnv(env, "baton") === undefined) ctx.problems.push(`${envFile}: turns no telemetry on`);
  } catch (err) {
    ctx.problems.push(`${envFile}: configuration is invalid: ${(err instanceof Error ? err.message : String(err)).replace(/\s*\n\s*/g, "; ")}`);
  }
  const reachable = (where: string, url: string) => {
    let host: string;
    try {
      host = new URL(url).hostname;
    } catch {
      return; // reported by the configuration check
    }
    if (!Object.hasOwn(services, host)) ctx.problems.push(`${where}: ${url} names no compose service`);
    else if (profilesOf(host).length > 0 && !profilesOf(host).some((p) => profiles.includes(p))) ctx.problems.push(`${where}: service ${host} is not in the profiles it turns on`);
  };
  for (const [k, v] of Object.entries(env)) if (k.endsWith("_ENDPOINT")) reachable(`${envFile}: ${k}`, v);

  let dashboards: ReturnType<typeof repositoryDashboards>;
  try {
    dashboards = repositoryDashboards(ctx.root);
  } catch (err) {
    ctx.problems.push(`infra/observability/grafana: ${err instanceof Error ? err.message : String(err)}`);
    return;
  }
  for (const d of dashboards.datasources) reachable(`infra/observability/grafana/provisioning/datasources/baton.yaml: ${d.name ?? "?"}`, d.url ?? "");
  for (const { file, dashboard } of dashboards.files) {
    for (const p of checkDashboard(dashboard, dashboards.datasourceUids)) ctx.problems.push(`${file.slice(ctx.root.length + 1)}: ${p}`);
  }
  try {
    for (const p of checkQueries(repositoryRules(ctx.root))) ctx.problems.push(`infra/observability/alerts.yml: ${p}`);
  } catch (err) {
    ctx.problems.push(`infra/observability/alerts.yml: ${err instanceof Error ? err.message : String(err)}`);
  }
}

interface K8sDoc {
  file: string;
  doc: Obj;
}

interface Container {
  where: string;
  c: Obj;
  env: Map<string, string>;
  ports: Map<string, number>;
}

function checkK8s(ctx: Ctx): number {
  const dir = join(ctx.root, "k8s");
  if (!existsSync(dir) || !statSync(dir).isDirectory()) {
    ctx.problems.push("k8s: missing");
    return 0;
  }
  const files = readdirSync(dir).filter((f) => /\.ya?ml$/.test(f)).sort();
  const docs: K8sDoc[] = [];
  let kustomization: Obj | undefined;
  for (const f of files) {
    const file = `k8s/${f}`;
    for (const d of parseAllDocuments(readFileSync(join(dir, f), "utf8"))) {
      if (d.errors.length > 0) {
        ctx.problems.push(`${file}: does not parse: ${d.errors.map((e) => e.message).join("; ")}`);
        continue;
      }
      const value: unknown = d.toJS();
      if (value === null || value === undefined) continue;
      const doc = asObj(value);
      if (doc.kind === "Kustomization") {
        kustomization = doc;
        continue;
      }
      for (const field of ["apiVersion", "kind"]) if (str(doc[field]) === undefined) ctx.problems.push(`${file}: a document has no ${field}`);
      if (str(asObj(doc.metadata).name) === undefined) ctx.problems.push(`${file}: a ${str(doc.kind) ?? "document"} has no metadata.name`);
      docs.push({ file, doc });
    }
  }

  if (!kustomization) ctx.problems.push("k8s/kustomization.yaml: missing");
  else {
    const listed = asArr(kustomization.resources).map((r) => str(r) ?? "");
    for (const r of listed) if (!existsSync(join(dir, r))) ctx.problems.push(`k8s/kustomization.yaml: resource ${r} does not exist`);
    for (const f of files) if (f !== "kustomization.yaml" && !listed.includes(f)) ctx.problems.push(`k8s/kustomization.yaml: does not list ${f}`);
  }

  const byKind = (kind: string): K8sDoc[] => docs.filter((d) => d.doc.kind === kind);
  const nameOf = (d: K8sDoc): string => str(asObj(d.doc.metadata).name) ?? "?";
  const configMaps = new Map<string, Map<string, string>>();
  const secrets = new Map<string, Map<string, string>>();
  for (const d of byKind("ConfigMap")) configMaps.set(nameOf(d), envMap(d.doc.data));
  for (const d of byKind("Secret")) secrets.set(nameOf(d), new Map([...envMap(d.doc.stringData), ...envMap(d.doc.data)]));
  for (const [kind, map] of [["ConfigMap", configMaps], ["Secret", secrets]] as const) {
    for (const [name, data] of map) {
      for (const k of data.keys()) if (!ctx.allowedEnv.has(k)) ctx.problems.push(`k8s: ${kind} ${name}: key ${k} is not a variable @baton/config reads`);
    }
  }

  const containersOf = (d: K8sDoc, podSpec: Obj): Container[] =>
    asArr(podSpec.containers).map((raw, i) => {
      const c = asObj(raw);
      const where = `${d.file}: ${str(d.doc.kind)} ${nameOf(d)}: container ${str(c.name) ?? i}`;
      const env = new Map<string, string>();
      for (const ref of asArr(c.envFrom).map(asObj)) {
        const cm = str(asObj(ref.configMapRef).name);
        const sec = str(asObj(ref.secretRef).name);
        if (cm !== undefined) {
          const data = configMaps.get(cm);
          if (!data) ctx.problems.push(`${where}: envFrom ConfigMap ${cm} does not exist`);
          for (const [k, v] of data ?? []) env.set(k, v);
        }
        if (sec !== undefined) {
          const data = secrets.get(sec);
          if (!data) ctx.problems.push(`${where}: envFrom Secret ${sec} does not exist`);
          for (const [k, v] of data ?? []) env.set(k, v);
        }
      }
      for (const e of asArr(c.env).map(asObj)) {
        const name = str(e.name) ?? "";
        if (!ctx.allowedEnv.has(name)) ctx.problems.push(`${where}: env ${name} is not a variable @baton/config reads`);
        env.set(name, str(e.value) ?? "");
      }
      const ports = new Map<string, number>();
      for (const p of asArr(c.ports).map(asObj)) {
        const n = Number(p.containerPort);
        ports.set(String(n), n);
        if (str(p.name) !== undefined) ports.set(str(p.name)!, n);
      }
      const resources = asObj(c.resources);
      for (const kind of ["requests", "limits"]) {
        for (const r of ["cpu", "memory"]) {
          if (str(asObj(resources[kind])[r]) === undefined) ctx.problems.push(`${where}: no resources.${kind}.${r}`);
        }
      }
      if (!/^baton(:|$)/.test(str(c.image) ?? "")) ctx.problems.push(`${where}: image ${str(c.image)} is not the Baton image "baton"`);
      return { where, c, env, ports };
    });

  const deploymentTargets = new Set<string>();
  const deployments: { labels: Obj; containers: Container[] }[] = [];
  for (const d of byKind("Deployment")) {
    const spec = asObj(d.doc.spec);
    const template = asObj(spec.template);
    const labels = asObj(asObj(template.metadata).labels);
    const podSpec = asObj(template.spec);
    const where = `${d.file}: Deployment ${nameOf(d)}`;
    for (const [k, v] of Object.entries(asObj(asObj(spec.selector).matchLabels))) {
      if (labels[k] !== v) ctx.problems.push(`${where}: selector ${k}=${str(v)} does not match the pod labels`);
    }
    if (podSpec.terminationGracePeriodSeconds !== GRACE_SECONDS) {
      ctx.problems.push(`${where}: terminationGracePeriodSeconds must be ${GRACE_SECONDS}`);
    }
    const containers = containersOf(d, podSpec);
    if (containers.length === 0) ctx.problems.push(`${where}: no containers`);
    for (const c of containers) {
      checkValues(ctx, c.where, c.env);
      const parts = checkTarget(ctx, c.where, c.env.get("BATON_TARGET"));
      if (parts.length === 0) ctx.problems.push(`${c.where}: sets no BATON_TARGET`);
      for (const p of parts) deploymentTargets.add(p);
      const port = healthPort(parts, c.env);
      for (const [probe, path] of [["readinessProbe", "/readyz"], ["livenessProbe", "/healthz"]] as const) {
        const get = asObj(asObj(c.c[probe]).httpGet);
        if (c.c[probe] === undefined) {
          ctx.problems.push(`${c.where}: no ${probe}`);
          continue;
        }
        if (get.path !== path) ctx.problems.push(`${c.where}: ${probe} must GET ${path}`);
        const probePort = c.ports.get(str(get.port) ?? "") ?? Number(get.port);
        if (probePort !== port) ctx.problems.push(`${c.where}: ${probe} must use the module's health port ${port}, not ${str(get.port)}`);
      }
    }
    deployments.push({ labels, containers });
  }
  for (const m of ALL_MODULES) {
    if (!deploymentTargets.has(m) && !deploymentTargets.has("all")) ctx.problems.push(`k8s: no Deployment runs ${m}`);
  }

  const jobs = byKind("Job");
  if (jobs.length === 0) ctx.problems.push("k8s: no Job runs the migrations");
  for (const d of jobs) {
    const podSpec = asObj(asObj(asObj(d.doc.spec).template).spec);
    const where = `${d.file}: Job ${nameOf(d)}`;
    const containers = containersOf(d, podSpec);
    const runsMigrate = containers.some((c) => [...asArr(c.c.command), ...asArr(c.c.args)].some((a) => a === "migrate"));
    if (!runsMigrate) ctx.problems.push(`${where}: does not run "migrate"`);
    if (!["Never", "OnFailure"].includes(str(podSpec.restartPolicy) ?? "")) ctx.problems.push(`${where}: restartPolicy must be Never or OnFailure`);
    for (const c of containers) {
      checkValues(ctx, c.where, c.env);
      checkTarget(ctx, c.where, c.env.get("BATON_TARGET"));
    }
  }

  for (const d of byKind("Service")) {
    const spec = asObj(d.doc.spec);
    const where = `${d.file}: Service ${nameOf(d)}`;
    const selector = asObj(spec.selector);
    const match = deployments.find((dep) => Object.keys(selector).length > 0 && Object.entries(selector).every(([k, v]) => dep.labels[k] === v));
    if (!match) {
      ctx.problems.push(`${where}: selects no Deployment`);
      continue;
    }
    for (const p of asArr(spec.ports).map(asObj)) {
      const target = str(p.targetPort ?? p.port) ?? "";
      if (!match.containers.some((c) => c.ports.has(target))) ctx.problems.push(`${where}: targetPort ${target} is not a port of the selected pods`);
    }
  }
  return docs.length + (kustomization ? 1 : 0);
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const root = resolve(process.argv[2] ?? join(import.meta.dirname, ".."));
  const report = checkManifests(root);
  if (report.problems.length > 0) {
    process.stderr.write(`deployment manifests: ${report.problems.length} problem(s)\n${report.problems.map((p) => `  ${p}`).join("\n")}\n`);
    process.exit(1);
  }
  process.stdout.write(
    `deployment manifests OK: Dockerfile, ${report.checked.composeServices} compose services, ${report.checked.k8sDocuments} k8s documents\n`,
  );
}
