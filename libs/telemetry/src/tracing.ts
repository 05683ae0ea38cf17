import { context, propagation, ROOT_CONTEXT, SpanStatusCode, trace } from "@opentelemetry/api";
import type { Attributes, Context, Span, SpanKind, TextMapGetter, Tracer } from "@opentelemetry/api";
import { ensureContextPropagation } from "./context.ts";

/**
 * The tracer of one component. Without an OpenTelemetry SDK it is a no-op tracer whose
 * spans still carry the parent's trace context, so propagation works either way.
 */
export function getTracer(name: string, version?: string): Tracer {
  return trace.getTracer(name, version);
}

/**
 * Writes the trace context of `ctx` (W3C `traceparent`, `tracestate`) into `carrier`.
 * Writes nothing when there is no valid span context.
 * @param ctx @default context.active()
 * @returns the same carrier
 */
export function injectTraceContext(carrier: Record<string, string>, ctx: Context = context.active()): Record<string, string> {
  ensureContextPropagation();
  propagation.inject(ctx, carrier);
  return carrier;
}

const caseInsensitiveGetter: TextMapGetter<Record<string, string | string[] | undefined>> = {
  keys: (carrier) => Object.keys(carrier),
  get(carrier, key) {
    const exact = carrier[key];
    if (exact !== undefined) return exact;
    const lower = key.toLowerCase();
    for (const k of Object.keys(carrier)) if (k.toLowerCase() === lower) return carrier[k];
    return undefined;
  },
};

/**
 * Reads the trace context from `carrier` (header names matched case-insensitively) and
 * returns `base` with the remote span context set; `base` itself when the carrier has
 * no valid `traceparent`.
 * @param base @default ROOT_CONTEXT
 */
export function extractTraceContext(carrier: Record<string, string | string[] | undefined>, base: Context = ROOT_CONTEXT): Context {
  ensureContextPropagation();
  return propagation.extract(base, carrier, caseInsensitiveGetter);
}

/**
 * Runs `fn` in the trace context that a request's headers carry (W3C `traceparent`, e.g. a
 * client's), so that what it sends carries the same trace; `fn` runs as it is when they carry
 * none. For a framework's request hook: `(req, reply, done) => withRemoteParent(req.headers, done)`.
 */
export function withRemoteParent<T>(headers: Record<string, string | string[] | undefined>, fn: () => T): T {
  const active = context.active();
  const ctx = extractTraceContext(headers, active);
  return ctx === active ? fn() : context.with(ctx, fn);
}

/** The W3C trace id of the active span, if any (for logs and error answers). */
export function activeTraceId(ctx: Context = context.active()): string | undefined {
  const sc = trace.getSpanContext(ctx);
  return sc !== undefined && trace.isSpanContextValid(sc) ? sc.traceId : undefined;
}

export interface WithSpanOptions {
  /** @default SpanKind.INTERNAL */
  kind?: SpanKind;
  /** Parent context of the span. @default context.active() */
  parent?: Context;
}

/**
 * Marks `span` as failed with `err`: records the exception, sets status ERROR with the
 * error's message, and `error.type` to the error's `code` (Baton errors) or name.
 */
export function recordSpanError(span: Span, err: unknown): void {
  const message = err instanceof Error ? err.message : String(err);
  span.recordException(err instanceof Error ? err : message);
  span.setStatus({ code: SpanStatusCode.ERROR, message });
  const code = typeof err === "object" && err !== null ? (err as { code?: unknown }).code : undefined;
  span.setAttribute("error.type", typeof code === "string" ? code : err instanceof Error ? err.name : "unknown");
}

/**
 * Runs `fn` inside a new active span named `name`. A thrown error (or rejected promise) is
 * recorded on the span with status ERROR and re-thrown; on success the status stays
 * UNSET, as OpenTelemetry recommends. The span always ends.
 */
export async function withSpan<T>(
  tracer: Tracer,
  name: string,
  attrs: Attributes,
  fn: (span: Span) => T | Promise<T>,
  options: WithSpanOptions = {},
): Promise<T> {
  ensureContextPropagation();
  const parent = options.parent ?? context.active();
  const span = tracer.startSpan(name, { attributes: attrs, ...(options.kind === undefined ? {} : { kind: options.kind }) }, parent);
  if (!span.isRecording()) {
    // No tracer provider records spans (no OpenTelemetry SDK registered): making this span
    // active would only repeat the parent's span context, at the cost of a context switch
    // per call on the hot path. `fn` runs in the parent's context, so what it sends carries
    // the same trace context either way.
    return parent === context.active() ? await fn(span) : await context.with(parent, () => fn(span));
  }
  return context.with(trace.setSpan(parent, span), async () => {
    try {
      return await fn(span);
    } catch (err) {
      recordSpanError(span, err);
      throw err;
    } finally {
      span.end();
    }
  });
}
