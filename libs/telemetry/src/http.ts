import { context, SpanKind, SpanStatusCode, trace } from "@opentelemetry/api";
import type { Attributes, Span } from "@opentelemetry/api";
import { getMeter, SHORT_DURATION_BUCKETS_S } from "./metrics.ts";
import { extractTraceContext, getTracer } from "./tracing.ts";

/** Spans and the `http.server.request.duration` histogram of an HTTP server, by route template. */
export interface HttpServerTelemetry {
  /**
   * Call when a request's route is known. Runs `next` in the request's server span, child of
   * the trace its headers carry (W3C `traceparent`); when spans are not recorded, in that
   * remote parent alone, so what the request sends still carries the client's trace.
   * @param route the route template (`/api/executions/:id`), undefined when no route matched
   */
  onRequest(request: object, method: string, route: string | undefined, headers: Record<string, string | string[] | undefined>, next: () => void): void;
  /** Call when the response is sent: ends the span and records the duration. */
  onResponse(request: object, method: string, route: string | undefined, statusCode: number, durationMs: number): void;
  /**
   * Call when the client went away before the response was sent: ends the span as failed
   * (`error.type` `aborted`). No duration is recorded: the request has no status code.
   */
  onAbort(request: object): void;
}

const METHODS = new Set(["GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"]);

/** The semantic conventions' `http.request.method`: a known method, or `_OTHER` (bounded cardinality). */
function knownMethod(method: string): string {
  return METHODS.has(method) ? method : "_OTHER";
}

/**
 * HTTP server telemetry following the OpenTelemetry semantic conventions: a SERVER span named
 * `{method} {route}` and the histogram `http.server.request.duration` (seconds) with
 * `http.request.method`, `http.route` and `http.response.status_code` (and `error.type` for
 * 5xx answers). Never the path itself, so ids in paths add no series.
 */
export function createHttpServerTelemetry(scope: string): HttpServerTelemetry {
  const tracer = getTracer(scope);
  const { meter, enabled } = getMeter(scope);
  const duration = meter.createHistogram("http.server.request.duration", {
    unit: "s",
    description: "Duration of HTTP server requests.",
    advice: { explicitBucketBoundaries: [...SHORT_DURATION_BUCKETS_S] },
  });
  const spans = new WeakMap<object, Span>();

  return {
    onRequest(request, method, route, headers, next) {
      const active = context.active();
      const parent = extractTraceContext(headers, active);
      const m = knownMethod(method);
      const attributes: Attributes = { "http.request.method": m };
      if (route !== undefined) attributes["http.route"] = route;
      const span = tracer.startSpan(route === undefined ? m : `${m} ${route}`, { kind: SpanKind.SERVER, attributes }, parent);
      if (!span.isRecording()) {
        if (parent === active) next();
        else context.with(parent, next);
        return;
      }
      spans.set(request, span);
      context.with(trace.setSpan(parent, span), next);
    },
    onResponse(request, method, route, statusCode, durationMs) {
      const span = spans.get(request);
      const failed = statusCode >= 500;
      if (span !== undefined) {
        spans.delete(request);
        span.setAttribute("http.response.status_code", statusCode);
        if (failed) {
          span.setAttribute("error.type", String(statusCode));
          span.setStatus({ code: SpanStatusCode.ERROR });
        }
        span.end();
      }
      if (!enabled) return;
      const attributes: Attributes = { "http.request.method": knownMethod(method), "http.response.status_code": statusCode };
      if (route !== undefined) attributes["http.route"] = route;
      if (failed) attributes["error.type"] = String(statusCode);
      duration.record(durationMs / 1000, attributes);
    },
    onAbort(request) {
      const span = spans.get(request);
      if (span === undefined) return;
      spans.delete(request);
      span.setAttribute("error.type", "aborted");
      span.setStatus({ code: SpanStatusCode.ERROR, message: "the client closed the connection before the response" });
      span.end();
    },
  };
}
