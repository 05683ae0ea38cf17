import { createNoopMeter, metrics } from "@opentelemetry/api";
import type { Meter } from "@opentelemetry/api";

/** A meter, and whether anything records what it measures. */
export interface BatonMeter {
  readonly meter: Meter;
  /**
   * False while no meter provider is registered (no OpenTelemetry SDK): its instruments are
   * the API's no-ops, so a caller on a hot path skips building their attributes at all.
   */
  readonly enabled: boolean;
}

/**
 * The meter of one component, taken from the meter provider registered now. The API has no
 * proxy for meters: instruments created before an SDK registers stay no-ops, so components
 * create theirs when they are created, after {@link startTelemetry} ran.
 */
export function getMeter(name: string, version?: string): BatonMeter {
  const meter = metrics.getMeter(name, version);
  return { meter, enabled: meter !== createNoopMeter() };
}

/**
 * Bucket boundaries, in seconds, for durations of requests and steps (the OpenTelemetry
 * semantic conventions' advice for `http.server.request.duration`, from 5 ms to 10 s).
 */
export const SHORT_DURATION_BUCKETS_S: readonly number[] = Object.freeze([0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10]);

/** Bucket boundaries, in seconds, for whole runs: 10 ms to 1 h. */
export const LONG_DURATION_BUCKETS_S: readonly number[] = Object.freeze([0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600]);
