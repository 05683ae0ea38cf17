/**
 * The W3C Trace Context wire format (https://www.w3.org/TR/trace-context/), implemented
 * here because only `@opentelemetry/api` is a dependency: `traceparent` parsing and
 * formatting, and a `TextMapPropagator` for `traceparent` / `tracestate`.
 */
import { createTraceState, isSpanContextValid, trace, TraceFlags } from "@opentelemetry/api";
import type { Context, TextMapGetter, TextMapPropagator, TextMapSetter } from "@opentelemetry/api";

/** Header names of the W3C Trace Context. */
export const TRACE_PARENT_HEADER = "traceparent";
export const TRACE_STATE_HEADER = "tracestate";

/** The fields of a `traceparent` header. */
export interface TraceParent {
  /** Version byte; `0` for the version this code writes. */
  version: number;
  /** 32 lower-case hex digits, not all zero. */
  traceId: string;
  /** 16 lower-case hex digits, not all zero. */
  spanId: string;
  /** Trace flags byte; bit 0 is "sampled". */
  traceFlags: number;
}

const TRACE_PARENT_RE = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;
const ZERO_TRACE_ID = "0".repeat(32);
const ZERO_SPAN_ID = "0".repeat(16);
const MAX_TRACE_STATE_LENGTH = 512;

/**
 * Parses a `traceparent` header. Returns `undefined` for anything the specification says
 * to ignore: wrong shape, upper-case hex, version `ff`, all-zero ids, or trailing data on
 * version `00`. Higher versions may carry trailing fields, which are ignored.
 */
export function parseTraceParent(header: string | undefined | null): TraceParent | undefined {
  if (typeof header !== "string") return undefined;
  const value = header.trim();
  const m = TRACE_PARENT_RE.exec(value);
  if (m === null) return undefined;
  const [, versionHex, traceId, spanId, flagsHex, rest] = m as unknown as [string, string, string, string, string, string | undefined];
  if (versionHex === "ff") return undefined;
  const version = Number.parseInt(versionHex, 16);
  if (version === 0 && rest !== undefined) return undefined;
  if (traceId === ZERO_TRACE_ID || spanId === ZERO_SPAN_ID) return undefined;
  return { version, traceId, spanId, traceFlags: Number.parseInt(flagsHex, 16) };
}

/** Formats a version-`00` `traceparent` header; only the "sampled" flag bit is written. */
export function formatTraceParent(sc: { traceId: string; spanId: string; traceFlags: number }): string {
  const flags = (sc.traceFlags & TraceFlags.SAMPLED).toString(16).padStart(2, "0");
  return `00-${sc.traceId}-${sc.spanId}-${flags}`;
}

function firstValue(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[0] : v;
}

/**
 * A `TextMapPropagator` for the W3C `traceparent` and `tracestate` headers, equivalent to
 * `W3CTraceContextPropagator` of `@opentelemetry/core`.
 */
export class W3CTraceContextPropagator implements TextMapPropagator {
  inject(ctx: Context, carrier: unknown, setter: TextMapSetter): void {
    const sc = trace.getSpanContext(ctx);
    if (sc === undefined || !isSpanContextValid(sc)) return;
    setter.set(carrier, TRACE_PARENT_HEADER, formatTraceParent(sc));
    const state = sc.traceState?.serialize();
    if (state !== undefined && state !== "") setter.set(carrier, TRACE_STATE_HEADER, state);
  }

  extract(ctx: Context, carrier: unknown, getter: TextMapGetter): Context {
    const parsed = parseTraceParent(firstValue(getter.get(carrier, TRACE_PARENT_HEADER)));
    if (parsed === undefined) return ctx;
    const rawState = getter.get(carrier, TRACE_STATE_HEADER);
    const state = Array.isArray(rawState) ? rawState.join(",") : rawState;
    return trace.setSpanContext(ctx, {
      traceId: parsed.traceId,
      spanId: parsed.spanId,
      traceFlags: parsed.traceFlags & TraceFlags.SAMPLED,
      isRemote: true,
      ...(state !== undefined && state !== "" && state.length <= MAX_TRACE_STATE_LENGTH ? { traceState: createTraceState(state) } : {}),
    });
  }

  fields(): string[] {
    return [TRACE_PARENT_HEADER, TRACE_STATE_HEADER];
  }
}
