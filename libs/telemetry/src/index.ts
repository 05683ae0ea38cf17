/**
 * Baton's telemetry: tracers, meters, W3C trace-context propagation through message headers,
 * a span helper, HTTP server spans and metrics, and the JSON-lines logger every service uses.
 * Spans and metrics are exported only when a process starts the OpenTelemetry SDK with
 * {@link startTelemetry} and the standard `OTEL_*` variables name an OTLP endpoint
 * (docs/observability.md); without one the trace context still flows, so logs and messages
 * stay correlated, and every span and instrument is a no-op.
 *
 * Importing this module registers Baton's context manager and W3C propagator as the
 * OpenTelemetry globals unless others are already registered, so `context.with` works
 * from the first line. To use an SDK's own instead, start the SDK before importing any
 * `@baton/*` package (the usual `node --import ./otel.ts` set-up).
 */
import { ensureContextPropagation } from "./context.ts";

ensureContextPropagation();

export { createLogger, isLogLevel } from "./logger.ts";
export type { LogFields, Logger, LoggerOptions, LogLevel } from "./logger.ts";
export { activeTraceId, extractTraceContext, getTracer, injectTraceContext, recordSpanError, withRemoteParent, withSpan } from "./tracing.ts";
export type { WithSpanOptions } from "./tracing.ts";
export { getMeter, LONG_DURATION_BUCKETS_S, SHORT_DURATION_BUCKETS_S } from "./metrics.ts";
export type { BatonMeter } from "./metrics.ts";
export { createHttpServerTelemetry } from "./http.ts";
export type { HttpServerTelemetry } from "./http.ts";
export { startTelemetry, TELEMETRY_ENV_VARS, TelemetryConfigInvalid, telemetrySettingsFromEnv } from "./sdk.ts";
export type { OtlpProtocol, SignalSettings, Telemetry, TelemetryOptions, TelemetrySettings } from "./sdk.ts";
export { AsyncLocalStorageContextManager, ensureContextPropagation } from "./context.ts";
export type { PropagationSetup } from "./context.ts";
export { formatTraceParent, parseTraceParent, TRACE_PARENT_HEADER, TRACE_STATE_HEADER, W3CTraceContextPropagator } from "./traceparent.ts";
export type { TraceParent } from "./traceparent.ts";
