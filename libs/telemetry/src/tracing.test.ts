/**
 * Rules checked:
 * - injectTraceContext / extractTraceContext round-trip the active span context through a
 *   plain header record (header names matched case-insensitively on extraction), and
 *   inject nothing outside a span;
 * - the registered context manager keeps the active context across `await`;
 * - withSpan makes its span active for fn, returns fn's value, ends the span, and on a
 *   throw records the exception, sets status ERROR and `error.type`, then re-throws;
 * - without an OpenTelemetry SDK (no-op tracer) withSpan still carries the parent's trace
 *   context, so injection inside it propagates the caller's trace.
 */
import { describe, expect, it } from "@jest/globals";
import { context, ROOT_CONTEXT, SpanStatusCode, trace, TraceFlags } from "@opentelemetry/api";
import type { Context, Span, SpanContext, SpanOptions, SpanStatus, Tracer } from "@opentelemetry/api";
import { activeTraceId, ensureContextPropagation, extractTraceContext, getTracer, injectTraceContext, withRemoteParent, withSpan } from "@baton/telemetry";

const TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736";
const SPAN_ID = "00f067aa0ba902b7";
const parentCtx = (): Context => trace.setSpanContext(ROOT_CONTEXT, { traceId: TRACE_ID, spanId: SPAN_ID, traceFlags: TraceFlags.SAMPLED });

/** A minimal recording tracer: the SDK is not a dependency, and these tests only look at calls. */
interface Recorded {
  name: string;
  options: SpanOptions;
  exceptions: unknown[];
  status?: SpanStatus;
  attributes: Record<string, unknown>;
  ended: boolean;
  sc: SpanContext;
}
function recordingTracer(): { tracer: Tracer; spans: Recorded[] } {
  const spans: Recorded[] = [];
  let n = 0;
  const tracer = {
    startSpan(name: string, options: SpanOptions = {}, ctx: Context = context.active()): Span {
      const parent = trace.getSpanContext(ctx);
      n += 1;
      const rec: Recorded = {
        name,
        options,
        exceptions: [],
        attributes: {},
        ended: false,
        sc: { traceId: parent?.traceId ?? TRACE_ID, spanId: n.toString(16).padStart(16, "a"), traceFlags: 1 },
      };
      spans.push(rec);
      const self = (): Span => span;
      const span: Span = {
        spanContext: () => rec.sc,
        setAttribute: (k, v) => ((rec.attributes[k] = v), self()),
        setAttributes: () => self(),
        addEvent: () => self(),
        addLink: () => self(),
        addLinks: () => self(),
        setStatus: (s) => ((rec.status = s), self()),
        updateName: () => self(),
        end: () => void (rec.ended = true),
        isRecording: () => true,
        recordException: (e) => void rec.exceptions.push(e),
      };
      return span;
    },
    startActiveSpan(name: string, options: SpanOptions, ctx: Context, fn: (span: Span) => unknown): unknown {
      const span = tracer.startSpan(name, options, ctx);
      return context.with(trace.setSpan(ctx, span), () => fn(span));
    },
  };
  return { tracer: tracer as unknown as Tracer, spans };
}

describe("trace context propagation", () => {
  it("round-trips the active span context through headers", () => {
    const carrier = context.with(parentCtx(), () => injectTraceContext({ other: "x" }));
    expect(carrier).toEqual({ other: "x", traceparent: `00-${TRACE_ID}-${SPAN_ID}-01` });
    const sc = trace.getSpanContext(extractTraceContext({ TraceParent: carrier.traceparent! }));
    expect(sc).toMatchObject({ traceId: TRACE_ID, spanId: SPAN_ID, isRemote: true });
  });

  it("injects nothing outside a span and extracts the base context from empty headers", () => {
    expect(injectTraceContext({}, ROOT_CONTEXT)).toEqual({});
    expect(extractTraceContext({})).toBe(ROOT_CONTEXT);
  });

  it("withRemoteParent runs a callback, and what it starts later, in the trace the headers carry; without one, as it is", async () => {
    const seen = await new Promise<string | undefined>((resolve) => {
      withRemoteParent({ TraceParent: `00-${TRACE_ID}-${SPAN_ID}-01` }, () => {
        setImmediate(() => resolve(activeTraceId()));
      });
    });
    expect(seen).toBe(TRACE_ID);
    expect(injectTraceContext({}, withRemoteParent({ traceparent: `00-${TRACE_ID}-${SPAN_ID}-01` }, () => context.active()))).toEqual({ traceparent: `00-${TRACE_ID}-${SPAN_ID}-01` });
    expect(withRemoteParent({}, () => activeTraceId())).toBeUndefined();
    expect(withRemoteParent({ traceparent: "garbage" }, () => activeTraceId())).toBeUndefined();
    expect(activeTraceId()).toBeUndefined();
  });

  it("keeps the active context across await", async () => {
    ensureContextPropagation();
    const seen = await context.with(parentCtx(), async () => {
      await new Promise((r) => setImmediate(r));
      return activeTraceId();
    });
    expect(seen).toBe(TRACE_ID);
    expect(activeTraceId()).toBeUndefined();
  });
});

describe("withSpan", () => {
  it("runs fn in an active span, returns its value and ends the span", async () => {
    const { tracer, spans } = recordingTracer();
    const result = await withSpan(tracer, "work", { "baton.x": 1 }, async (span) => {
      await new Promise((r) => setImmediate(r));
      expect(trace.getActiveSpan()).toBe(span);
      return 42;
    });
    expect(result).toBe(42);
    expect(spans).toHaveLength(1);
    expect(spans[0]).toMatchObject({ name: "work", ended: true, exceptions: [] });
    expect(spans[0]!.options.attributes).toEqual({ "baton.x": 1 });
    expect(spans[0]!.status).toBeUndefined();
  });

  it("records exceptions and status ERROR, then re-throws", async () => {
    const { tracer, spans } = recordingTracer();
    const err = Object.assign(new Error("boom"), { code: "BATON_TEST_BOOM", status: 500 });
    await expect(withSpan(tracer, "fail", {}, () => {
      throw err;
    })).rejects.toBe(err);
    expect(spans[0]).toMatchObject({ ended: true, exceptions: [err], status: { code: SpanStatusCode.ERROR, message: "boom" } });
    expect(spans[0]!.attributes["error.type"]).toBe("BATON_TEST_BOOM");
  });

  it("uses the given parent context", async () => {
    const { tracer, spans } = recordingTracer();
    await withSpan(tracer, "child", {}, () => undefined, { parent: parentCtx() });
    expect(spans[0]!.sc.traceId).toBe(TRACE_ID);
  });

  it("carries the caller's trace context with the no-op tracer", async () => {
    const headers = await context.with(parentCtx(), () => withSpan(getTracer("test"), "publish", {}, () => injectTraceContext({})));
    expect(headers.traceparent).toBe(`00-${TRACE_ID}-${SPAN_ID}-01`);
  });
});
