/**
 * Rules checked:
 * - the SDK is off (undefined settings) without an OTLP endpoint, and with
 *   `OTEL_SDK_DISABLED=true` even when one is set;
 * - the general endpoint gets `/v1/traces` and `/v1/metrics`; a signal's own endpoint is used
 *   as it is and wins; `OTEL_{TRACES,METRICS}_EXPORTER=none` turns one signal off;
 * - protocol: http/protobuf by default, http/json when asked; grpc and other values, bad URLs,
 *   bad intervals and bad resource attributes are reported all at once, by code;
 * - `service.name`: OTEL_SERVICE_NAME, else the one in OTEL_RESOURCE_ATTRIBUTES, else the
 *   process's own; resource attribute values are percent-decoded;
 * - startTelemetry without an endpoint registers nothing: spans do not record, meters are
 *   the no-op one, and the handle's flush and shutdown do nothing;
 * - with an endpoint (default protocol), spans reach `POST /v1/traces` as protobuf on flush,
 *   a second start returns the running SDK, and shutdown flushes, then unregisters the providers.
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { describe, expect, it } from "@jest/globals";
import { hasCode } from "@baton/errors";
import { getMeter, getTracer, startTelemetry, TelemetryConfigInvalid, telemetrySettingsFromEnv } from "@baton/telemetry";

describe("telemetrySettingsFromEnv", () => {
  it("is off without an endpoint, and when the SDK is disabled", () => {
    expect(telemetrySettingsFromEnv({}, "baton")).toBeUndefined();
    expect(telemetrySettingsFromEnv({ OTEL_SERVICE_NAME: "x", OTEL_EXPORTER_OTLP_ENDPOINT: " " }, "baton")).toBeUndefined();
    expect(telemetrySettingsFromEnv({ OTEL_SDK_DISABLED: "true", OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318" }, "baton")).toBeUndefined();
    expect(telemetrySettingsFromEnv({ OTEL_SDK_DISABLED: "TRUE", OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318" }, "baton")).toBeUndefined();
  });

  it("takes the general endpoint with each signal's path, and a signal's own as it is", () => {
    expect(telemetrySettingsFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318/" }, "baton-executor")).toEqual({
      traces: { url: "http://c:4318/v1/traces", protocol: "http/protobuf" },
      metrics: { url: "http://c:4318/v1/metrics", protocol: "http/protobuf", exportIntervalMs: 60_000, exportTimeoutMs: 30_000 },
      resource: { "service.name": "baton-executor" },
    });
    expect(telemetrySettingsFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "https://t/custom" }, "b")?.traces).toEqual({ url: "https://t/custom", protocol: "http/protobuf" });
    const onlyMetrics = telemetrySettingsFromEnv({ OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: "http://m/v1/metrics", OTEL_EXPORTER_OTLP_PROTOCOL: "http/json", OTEL_METRIC_EXPORT_INTERVAL: "1000" }, "b");
    expect(onlyMetrics).toEqual({ metrics: { url: "http://m/v1/metrics", protocol: "http/json", exportIntervalMs: 1000, exportTimeoutMs: 1000 }, resource: { "service.name": "b" } });
    expect(telemetrySettingsFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", OTEL_TRACES_EXPORTER: "none" }, "b")).not.toHaveProperty("traces");
    expect(telemetrySettingsFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", OTEL_TRACES_EXPORTER: "none", OTEL_METRICS_EXPORTER: "none" }, "b")).toBeUndefined();
    expect(telemetrySettingsFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", OTEL_EXPORTER_OTLP_METRICS_PROTOCOL: "http/json" }, "b")).toMatchObject({
      traces: { protocol: "http/protobuf" },
      metrics: { protocol: "http/json" },
    });
  });

  it("names the service from OTEL_SERVICE_NAME, then OTEL_RESOURCE_ATTRIBUTES, then the process", () => {
    const endpoint = { OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318" };
    expect(telemetrySettingsFromEnv({ ...endpoint, OTEL_RESOURCE_ATTRIBUTES: "service.name=from-attrs,deployment.environment.name=st%20aging" }, "baton")?.resource).toEqual({
      "service.name": "from-attrs",
      "deployment.environment.name": "st aging",
    });
    expect(telemetrySettingsFromEnv({ ...endpoint, OTEL_SERVICE_NAME: "mine", OTEL_RESOURCE_ATTRIBUTES: "service.name=from-attrs" }, "baton")?.resource).toEqual({ "service.name": "mine" });
  });

  it("reports every unusable value at once, by code", () => {
    let thrown: unknown;
    try {
      telemetrySettingsFromEnv({
        OTEL_EXPORTER_OTLP_ENDPOINT: "collector:4318",
        OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: "http://m:4318/v1/metrics",
        OTEL_EXPORTER_OTLP_PROTOCOL: "grpc",
        OTEL_METRIC_EXPORT_INTERVAL: "soon",
        OTEL_RESOURCE_ATTRIBUTES: "novalue",
      }, "baton");
    } catch (err) {
      thrown = err;
    }
    expect(hasCode(thrown, TelemetryConfigInvalid.code)).toBe(true);
    const message = (thrown as Error).message;
    for (const part of ["OTEL_EXPORTER_OTLP_ENDPOINT", "grpc", "OTEL_METRIC_EXPORT_INTERVAL", "OTEL_RESOURCE_ATTRIBUTES"]) expect(message).toContain(part);
  });
});

describe("startTelemetry", () => {
  it("registers nothing without an endpoint, or when disabled", async () => {
    for (const env of [{}, { OTEL_SDK_DISABLED: "true", OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:9" }]) {
      const t = startTelemetry({ serviceName: "baton-test", env });
      expect({ traces: t.traces, metrics: t.metrics, serviceName: t.serviceName }).toEqual({ traces: false, metrics: false, serviceName: undefined });
      const span = getTracer("t").startSpan("s");
      expect(span.isRecording()).toBe(false);
      span.end();
      expect(getMeter("m").enabled).toBe(false);
      await t.forceFlush();
      await t.shutdown();
    }
  });

  it("exports spans as OTLP protobuf by default, once per process, and unregisters on shutdown", async () => {
    const posts: { path: string | undefined; type: string | undefined; bytes: number }[] = [];
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        posts.push({ path: req.url, type: req.headers["content-type"], bytes: Buffer.concat(chunks).byteLength });
        res.writeHead(200, { "content-type": "application/x-protobuf" }).end();
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    try {
      const endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const t = startTelemetry({ serviceName: "baton-test", env: { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${endpoint}/v1/traces` } });
      expect({ traces: t.traces, metrics: t.metrics, serviceName: t.serviceName }).toEqual({ traces: true, metrics: false, serviceName: "baton-test" });
      expect(startTelemetry({ serviceName: "other", env: { OTEL_EXPORTER_OTLP_ENDPOINT: endpoint } })).toBe(t);
      const span = getTracer("t").startSpan("recorded");
      expect(span.isRecording()).toBe(true);
      span.end();
      expect(getMeter("m").enabled).toBe(false);
      await t.forceFlush();
      expect(posts).toEqual([{ path: "/v1/traces", type: "application/x-protobuf", bytes: expect.any(Number) }]);
      expect(posts[0]!.bytes).toBeGreaterThan(0);
      // Shutdown flushes what is left.
      getTracer("t").startSpan("last").end();
      await t.shutdown();
      expect(posts.map((p) => p.path)).toEqual(["/v1/traces", "/v1/traces"]);
      expect(getTracer("t").startSpan("after").isRecording()).toBe(false);
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
