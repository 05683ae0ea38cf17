/**
 * The opt-in OpenTelemetry SDK of a Baton process: spans through a batching span processor
 * and metrics through a periodic reader, both exported as OTLP over HTTP. Configured only by
 * the standard OpenTelemetry environment variables; with no OTLP endpoint set (or
 * `OTEL_SDK_DISABLED=true`) nothing is registered, so spans stay no-ops, instruments stay the
 * API's no-op ones and the hot path pays nothing.
 *
 * Baton's own context manager and W3C propagator (context.ts) stay the globals: the SDK only
 * adds a tracer provider and a meter provider.
 */
import { randomUUID } from "node:crypto";
import { diag, DiagLogLevel, metrics, trace } from "@opentelemetry/api";
import type { DiagLogger } from "@opentelemetry/api";
import { OTLPMetricExporter as OTLPJsonMetricExporter } from "@opentelemetry/exporter-metrics-otlp-http";
import { OTLPMetricExporter as OTLPProtoMetricExporter } from "@opentelemetry/exporter-metrics-otlp-proto";
import { OTLPTraceExporter as OTLPJsonTraceExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { OTLPTraceExporter as OTLPProtoTraceExporter } from "@opentelemetry/exporter-trace-otlp-proto";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { MeterProvider, PeriodicExportingMetricReader } from "@opentelemetry/sdk-metrics";
import { BatchSpanProcessor, TracerProvider } from "@opentelemetry/sdk-trace";
import { defineError } from "@baton/errors";
import { ensureContextPropagation } from "./context.ts";
import type { Logger } from "./logger.ts";

/** An OpenTelemetry environment variable has a value Baton cannot use. */
export const TelemetryConfigInvalid = defineError("BATON_TELEMETRY_CONFIG_INVALID", (problems: string[]) => `invalid OpenTelemetry configuration: ${problems.join("; ")}`);

/** OTLP transports Baton speaks. `grpc` is not one: point Baton at the collector's HTTP port (4318). */
export type OtlpProtocol = "http/protobuf" | "http/json";

/** Where and how one signal is exported. */
export interface SignalSettings {
  /** Full URL of the OTLP endpoint, e.g. `http://collector:4318/v1/traces`. */
  url: string;
  protocol: OtlpProtocol;
}

/** What {@link telemetrySettingsFromEnv} read. */
export interface TelemetrySettings {
  /** Spans: absent when neither an endpoint for traces is set nor traces are wanted. */
  traces?: SignalSettings;
  /** Metrics: absent when no endpoint for metrics is set or metrics are turned off. */
  metrics?: SignalSettings & { exportIntervalMs: number; exportTimeoutMs: number };
  /** The resource attributes, `service.name` included. */
  resource: Record<string, string>;
}

type Env = Readonly<Record<string, string | undefined>>;

/**
 * The OpenTelemetry variables a Baton process reads: {@link telemetrySettingsFromEnv}'s, and
 * those the OTLP exporters read themselves (headers, timeouts, compression, certificates).
 */
export const TELEMETRY_ENV_VARS: readonly string[] = Object.freeze([
  "OTEL_SDK_DISABLED",
  "OTEL_SERVICE_NAME",
  "OTEL_RESOURCE_ATTRIBUTES",
  "OTEL_TRACES_EXPORTER",
  "OTEL_METRICS_EXPORTER",
  "OTEL_METRIC_EXPORT_INTERVAL",
  "OTEL_METRIC_EXPORT_TIMEOUT",
  "OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE",
  ...["", "TRACES_", "METRICS_"].flatMap((s) =>
    ["ENDPOINT", "PROTOCOL", "HEADERS", "TIMEOUT", "COMPRESSION", "CERTIFICATE", "CLIENT_CERTIFICATE", "CLIENT_KEY"].map((v) => `OTEL_EXPORTER_OTLP_${s}${v}`)),
]);

const PROTOCOLS: readonly string[] = ["http/protobuf", "http/json"];

function nonEmpty(env: Env, name: string): string | undefined {
  const v = env[name]?.trim();
  return v === undefined || v === "" ? undefined : v;
}

/** `OTEL_RESOURCE_ATTRIBUTES`: `key=value` pairs separated by commas, values percent-encoded. */
function parseResourceAttributes(raw: string | undefined, problems: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  if (raw === undefined) return out;
  for (const pair of raw.split(",")) {
    if (pair.trim() === "") continue;
    const eq = pair.indexOf("=");
    const key = eq < 0 ? "" : pair.slice(0, eq).trim();
    if (key === "") {
      problems.push(`OTEL_RESOURCE_ATTRIBUTES: "${pair.trim()}" is not key=value`);
      continue;
    }
    try {
      out[key] = decodeURIComponent(pair.slice(eq + 1).trim());
    } catch {
      problems.push(`OTEL_RESOURCE_ATTRIBUTES: the value of "${key}" is not percent-encoded correctly`);
    }
  }
  return out;
}

function positiveMs(env: Env, name: string, fallback: number, problems: string[]): number {
  const raw = nonEmpty(env, name);
  if (raw === undefined) return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n <= 0) {
    problems.push(`${name}: "${raw}" is not a positive whole number of milliseconds`);
    return fallback;
  }
  return n;
}

function signal(env: Env, id: "TRACES" | "METRICS", path: string, problems: string[]): SignalSettings | undefined {
  const exporter = nonEmpty(env, `OTEL_${id}_EXPORTER`)?.toLowerCase();
  if (exporter === "none") return undefined;
  if (exporter !== undefined && exporter !== "otlp") problems.push(`OTEL_${id}_EXPORTER: "${exporter}" is not supported (otlp or none)`);
  const specific = nonEmpty(env, `OTEL_EXPORTER_OTLP_${id}_ENDPOINT`);
  const general = nonEmpty(env, "OTEL_EXPORTER_OTLP_ENDPOINT");
  // The signal's own endpoint is used as it is; the general one gets the signal's path.
  const url = specific ?? (general === undefined ? undefined : `${general.replace(/\/+$/, "")}/${path}`);
  if (url === undefined) return undefined;
  try {
    const u = new URL(url);
    if (u.protocol !== "http:" && u.protocol !== "https:") throw new Error("not http");
  } catch {
    problems.push(`${specific === undefined ? "OTEL_EXPORTER_OTLP_ENDPOINT" : `OTEL_EXPORTER_OTLP_${id}_ENDPOINT`}: "${url}" is not an http(s) URL`);
    return undefined;
  }
  const protocol = (nonEmpty(env, `OTEL_EXPORTER_OTLP_${id}_PROTOCOL`) ?? nonEmpty(env, "OTEL_EXPORTER_OTLP_PROTOCOL") ?? "http/protobuf").toLowerCase();
  if (!PROTOCOLS.includes(protocol)) {
    problems.push(`OTEL_EXPORTER_OTLP_${id}_PROTOCOL / OTEL_EXPORTER_OTLP_PROTOCOL: "${protocol}" is not supported (http/protobuf or http/json; for grpc use the collector's HTTP port)`);
    return undefined;
  }
  return { url, protocol: protocol as OtlpProtocol };
}

/**
 * Reads the standard OpenTelemetry variables. Returns undefined when the SDK is to stay off:
 * `OTEL_SDK_DISABLED=true`, or no OTLP endpoint for traces or metrics. Every problem is
 * reported at once, as one {@link TelemetryConfigInvalid}.
 *
 * Read: `OTEL_SDK_DISABLED`, `OTEL_EXPORTER_OTLP_ENDPOINT`, `OTEL_EXPORTER_OTLP_{TRACES,METRICS}_ENDPOINT`,
 * `OTEL_EXPORTER_OTLP[_{TRACES,METRICS}]_PROTOCOL` (@default http/protobuf),
 * `OTEL_{TRACES,METRICS}_EXPORTER` (otlp or none), `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`,
 * `OTEL_METRIC_EXPORT_INTERVAL` (@default 60000 ms), `OTEL_METRIC_EXPORT_TIMEOUT` (@default 30000 ms).
 * Headers, timeouts, compression and certificates (`OTEL_EXPORTER_OTLP_HEADERS`, ...) are read
 * by the OTLP exporters themselves, from `process.env`.
 * @param serviceName `service.name` when neither `OTEL_SERVICE_NAME` nor `OTEL_RESOURCE_ATTRIBUTES` names one
 */
export function telemetrySettingsFromEnv(env: Env, serviceName: string): TelemetrySettings | undefined {
  if (nonEmpty(env, "OTEL_SDK_DISABLED")?.toLowerCase() === "true") return undefined;
  const problems: string[] = [];
  const traces = signal(env, "TRACES", "v1/traces", problems);
  const metricSignal = signal(env, "METRICS", "v1/metrics", problems);
  const exportIntervalMs = positiveMs(env, "OTEL_METRIC_EXPORT_INTERVAL", 60_000, problems);
  const exportTimeoutMs = Math.min(positiveMs(env, "OTEL_METRIC_EXPORT_TIMEOUT", 30_000, problems), exportIntervalMs);
  const resource = parseResourceAttributes(nonEmpty(env, "OTEL_RESOURCE_ATTRIBUTES"), problems);
  if (problems.length > 0) throw TelemetryConfigInvalid(problems);
  if (traces === undefined && metricSignal === undefined) return undefined;
  // OTEL_SERVICE_NAME wins over a service.name in OTEL_RESOURCE_ATTRIBUTES (the specification's order).
  resource["service.name"] = nonEmpty(env, "OTEL_SERVICE_NAME") ?? resource["service.name"] ?? serviceName;
  return {
    ...(traces ? { traces } : {}),
    ...(metricSignal ? { metrics: { ...metricSignal, exportIntervalMs, exportTimeoutMs } } : {}),
    resource,
  };
}

/** The running SDK of this process (or the stand-in when it is off). */
export interface Telemetry {
  /** True when spans are exported. */
  readonly traces: boolean;
  /** True when metrics are exported. */
  readonly metrics: boolean;
  /** The resource's `service.name`; undefined when the SDK is off. */
  readonly serviceName: string | undefined;
  /** Exports what is buffered now: ended spans, and the metrics collected so far. */
  forceFlush(): Promise<void>;
  /** Flushes, then stops exporting and unregisters the providers. Idempotent. */
  shutdown(): Promise<void>;
}

export interface TelemetryOptions {
  /** `service.name` when neither `OTEL_SERVICE_NAME` nor `OTEL_RESOURCE_ATTRIBUTES` names one. */
  serviceName: string;
  /** `service.version`, unless `OTEL_RESOURCE_ATTRIBUTES` sets one. */
  serviceVersion?: string;
  /** @default process.env */
  env?: Env;
  /** Where the SDK's own warnings and errors (a collector that cannot be reached) go. */
  logger?: Logger;
}

const OFF: Telemetry = Object.freeze({
  traces: false,
  metrics: false,
  serviceName: undefined,
  forceFlush: () => Promise.resolve(),
  shutdown: () => Promise.resolve(),
});

let running: Telemetry | undefined;

function diagLogger(logger: Logger): DiagLogger {
  const child = logger.child({ component: "opentelemetry" });
  return {
    error: (msg) => child.error(msg),
    warn: (msg) => child.warn(msg),
    info: (msg) => child.debug(msg),
    debug: () => undefined,
    verbose: () => undefined,
  };
}

/**
 * Starts the OpenTelemetry SDK for this process when the environment asks for it (see
 * {@link telemetrySettingsFromEnv}), and registers its tracer and meter providers as the
 * OpenTelemetry globals. Call it once, at the top of a process's entry point, before
 * services are created (they create their instruments when they are created). One SDK per
 * process: a second call while one runs returns the running one.
 *
 * With no endpoint set nothing is registered and the returned handle does nothing.
 * @throws {@link TelemetryConfigInvalid} when a variable has a value that cannot be used
 */
export function startTelemetry(options: TelemetryOptions): Telemetry {
  if (running !== undefined) return running;
  const settings = telemetrySettingsFromEnv(options.env ?? process.env, options.serviceName);
  if (settings === undefined) return OFF;
  ensureContextPropagation();
  if (options.logger) diag.setLogger(diagLogger(options.logger), { logLevel: DiagLogLevel.WARN, suppressOverrideMessage: true });
  const resource = resourceFromAttributes({
    ...(options.serviceVersion === undefined ? {} : { "service.version": options.serviceVersion }),
    // One process, one instance: two replicas of a module share a service.name, and a metrics
    // backend (Prometheus's `instance` label) tells their cumulative series apart by this id.
    "service.instance.id": randomUUID(),
    ...settings.resource,
  });

  let tracerProvider: TracerProvider | undefined;
  if (settings.traces) {
    const { url, protocol } = settings.traces;
    const exporter = protocol === "http/json" ? new OTLPJsonTraceExporter({ url }) : new OTLPProtoTraceExporter({ url });
    tracerProvider = new TracerProvider({ resource, spanProcessors: [new BatchSpanProcessor({ exporter })] });
    if (!trace.setGlobalTracerProvider(tracerProvider)) {
      options.logger?.warn("another OpenTelemetry tracer provider is registered; Baton's is not used");
      void tracerProvider.shutdown().catch(() => undefined);
      tracerProvider = undefined;
    }
  }

  let meterProvider: MeterProvider | undefined;
  if (settings.metrics) {
    const { url, protocol, exportIntervalMs, exportTimeoutMs } = settings.metrics;
    const exporter = protocol === "http/json" ? new OTLPJsonMetricExporter({ url }) : new OTLPProtoMetricExporter({ url });
    meterProvider = new MeterProvider({
      resource,
      readers: [new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: exportIntervalMs, exportTimeoutMillis: exportTimeoutMs })],
    });
    if (!metrics.setGlobalMeterProvider(meterProvider)) {
      options.logger?.warn("another OpenTelemetry meter provider is registered; Baton's is not used");
      void meterProvider.shutdown().catch(() => undefined);
      meterProvider = undefined;
    }
  }

  if (tracerProvider === undefined && meterProvider === undefined) return OFF;
  let stopped: Promise<void> | undefined;
  const handle: Telemetry = {
    traces: tracerProvider !== undefined,
    metrics: meterProvider !== undefined,
    serviceName: settings.resource["service.name"],
    async forceFlush() {
      await Promise.all([tracerProvider?.forceFlush(), meterProvider?.forceFlush()]);
    },
    shutdown() {
      stopped ??= (async () => {
        // Metrics last: the span processor's export may still record into them.
        await tracerProvider?.shutdown();
        await meterProvider?.shutdown();
        if (tracerProvider) trace.disable();
        if (meterProvider) metrics.disable();
        if (running === handle) running = undefined;
      })();
      return stopped;
    },
  };
  running = handle;
  options.logger?.info("OpenTelemetry export on", {
    serviceName: handle.serviceName,
    ...(settings.traces ? { traces: settings.traces.url } : {}),
    ...(settings.metrics ? { metrics: settings.metrics.url, metricIntervalMs: settings.metrics.exportIntervalMs } : {}),
  });
  return handle;
}
