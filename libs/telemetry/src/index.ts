/**
 * Baton's telemetry on `@opentelemetry/api` alone: tracers, W3C trace-context propagation
 * through message headers, a span helper, and the JSON-lines logger every service uses.
 * Exporting spans is the job of an OpenTelemetry SDK the deployment may add; without one
 * the trace context still flows, so logs and messages stay correlated.
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
export { AsyncLocalStorageContextManager, ensureContextPropagation } from "./context.ts";
export type { PropagationSetup } from "./context.ts";
export { formatTraceParent, parseTraceParent, TRACE_PARENT_HEADER, TRACE_STATE_HEADER, W3CTraceContextPropagator } from "./traceparent.ts";
export type { TraceParent } from "./traceparent.ts";
