/**
 * Rules checked (W3C Trace Context, https://www.w3.org/TR/trace-context/):
 * - a valid version-00 `traceparent` parses into trace id, span id and flags; surrounding
 *   spaces are ignored;
 * - invalid headers are ignored: wrong lengths, upper-case hex, version ff, all-zero ids,
 *   trailing data on version 00, non-hex characters; future versions may carry more fields;
 * - formatting writes version 00 with two-digit flags and only the sampled bit;
 * - the propagator injects nothing without a valid span context, injects traceparent and
 *   tracestate otherwise, and extraction gives a remote span context with the trace state.
 */
import { describe, expect, it } from "@jest/globals";
import { defaultTextMapGetter, defaultTextMapSetter, ROOT_CONTEXT, trace, TraceFlags } from "@opentelemetry/api";
import { formatTraceParent, parseTraceParent, W3CTraceContextPropagator } from "@baton/telemetry";
import { createTraceState } from "@opentelemetry/api";

const TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736";
const SPAN_ID = "00f067aa0ba902b7";

describe("parseTraceParent", () => {
  it("parses a valid version-00 header", () => {
    expect(parseTraceParent(`00-${TRACE_ID}-${SPAN_ID}-01`)).toEqual({ version: 0, traceId: TRACE_ID, spanId: SPAN_ID, traceFlags: 1 });
    expect(parseTraceParent(`  00-${TRACE_ID}-${SPAN_ID}-00 `)).toEqual({ version: 0, traceId: TRACE_ID, spanId: SPAN_ID, traceFlags: 0 });
  });

  it.each([
    ["empty", ""],
    ["short trace id", `00-${TRACE_ID.slice(1)}-${SPAN_ID}-01`],
    ["long span id", `00-${TRACE_ID}-${SPAN_ID}0-01`],
    ["upper-case hex", `00-${TRACE_ID.toUpperCase()}-${SPAN_ID}-01`],
    ["version ff", `ff-${TRACE_ID}-${SPAN_ID}-01`],
    ["zero trace id", `00-${"0".repeat(32)}-${SPAN_ID}-01`],
    ["zero span id", `00-${TRACE_ID}-${"0".repeat(16)}-01`],
    ["trailing data on version 00", `00-${TRACE_ID}-${SPAN_ID}-01-extra`],
    ["non-hex flags", `00-${TRACE_ID}-${SPAN_ID}-0x`],
    ["missing dashes", `00${TRACE_ID}${SPAN_ID}01`],
  ])("ignores %s", (_name, header) => {
    expect(parseTraceParent(header)).toBeUndefined();
  });

  it("ignores non-strings", () => {
    expect(parseTraceParent(undefined)).toBeUndefined();
    expect(parseTraceParent(null)).toBeUndefined();
  });

  it("accepts future versions with extra fields", () => {
    expect(parseTraceParent(`cc-${TRACE_ID}-${SPAN_ID}-01-what-the-future-holds`)).toEqual({
      version: 0xcc,
      traceId: TRACE_ID,
      spanId: SPAN_ID,
      traceFlags: 1,
    });
  });
});

describe("formatTraceParent", () => {
  it("writes version 00 with two-digit flags, sampled bit only", () => {
    expect(formatTraceParent({ traceId: TRACE_ID, spanId: SPAN_ID, traceFlags: TraceFlags.SAMPLED })).toBe(`00-${TRACE_ID}-${SPAN_ID}-01`);
    expect(formatTraceParent({ traceId: TRACE_ID, spanId: SPAN_ID, traceFlags: 0 })).toBe(`00-${TRACE_ID}-${SPAN_ID}-00`);
    expect(formatTraceParent({ traceId: TRACE_ID, spanId: SPAN_ID, traceFlags: 0xff })).toBe(`00-${TRACE_ID}-${SPAN_ID}-01`);
  });

  it("round-trips through parse", () => {
    const header = formatTraceParent({ traceId: TRACE_ID, spanId: SPAN_ID, traceFlags: 1 });
    expect(parseTraceParent(header)).toMatchObject({ traceId: TRACE_ID, spanId: SPAN_ID, traceFlags: 1 });
  });
});

describe("W3CTraceContextPropagator", () => {
  const propagator = new W3CTraceContextPropagator();

  it("injects nothing without a valid span context", () => {
    const carrier: Record<string, string> = {};
    propagator.inject(ROOT_CONTEXT, carrier, defaultTextMapSetter);
    expect(carrier).toEqual({});
  });

  it("injects traceparent and tracestate", () => {
    const ctx = trace.setSpanContext(ROOT_CONTEXT, {
      traceId: TRACE_ID,
      spanId: SPAN_ID,
      traceFlags: TraceFlags.SAMPLED,
      traceState: createTraceState("congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"),
    });
    const carrier: Record<string, string> = {};
    propagator.inject(ctx, carrier, defaultTextMapSetter);
    expect(carrier).toEqual({ traceparent: `00-${TRACE_ID}-${SPAN_ID}-01`, tracestate: "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7" });
  });

  it("extracts a remote span context with its trace state", () => {
    const ctx = propagator.extract(ROOT_CONTEXT, { traceparent: `00-${TRACE_ID}-${SPAN_ID}-01`, tracestate: "rojo=00f067aa0ba902b7" }, defaultTextMapGetter);
    const sc = trace.getSpanContext(ctx);
    expect(sc).toMatchObject({ traceId: TRACE_ID, spanId: SPAN_ID, traceFlags: 1, isRemote: true });
    expect(sc?.traceState?.get("rojo")).toBe("00f067aa0ba902b7");
  });

  it("leaves the context alone for an invalid traceparent", () => {
    const ctx = propagator.extract(ROOT_CONTEXT, { traceparent: "garbage" }, defaultTextMapGetter);
    expect(ctx).toBe(ROOT_CONTEXT);
  });

  it("names its fields", () => {
    expect(propagator.fields()).toEqual(["traceparent", "tracestate"]);
  });
});
