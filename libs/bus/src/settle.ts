import { errorMessage, hasCode, isRetryable } from "@baton/errors";

/** What to tell JetStream about one delivery. */
export type SettleDecision =
  | { action: "ack" }
  | { action: "nak"; delayMs: number }
  | { action: "term"; reason: string; code?: string };

/** How retry delays are chosen when the error does not suggest one. */
export interface SettleOptions {
  /**
   * Delay before the n-th retry is `backoffMs[n - 1]`, the last entry repeating. When
   * given, replaces the exponential schedule.
   */
  backoffMs?: readonly number[];
  /** Delay before the first retry of the exponential schedule. @default 1_000 */
  baseDelayMs?: number;
  /** Cap of the exponential schedule. @default 60_000 */
  maxDelayMs?: number;
}

export const DEFAULT_BASE_DELAY_MS = 1_000;
export const DEFAULT_MAX_DELAY_MS = 60_000;

function errorCode(err: unknown): string | undefined {
  return hasCode(err) ? err.code : undefined;
}

/**
 * The one place where a handler's outcome becomes JetStream's ack / nak / term.
 *
 * - success (`err` undefined) → ack;
 * - an error that is not retryable (`isRetryable` of `@baton/errors`) → term;
 * - a retryable error on the last allowed delivery (`deliveryCount >= maxDeliver`,
 *   `maxDeliver <= 0` meaning unlimited) → term;
 * - otherwise → nak after the error's `retryDelayMs`, else `backoffMs`, else
 *   `baseDelayMs * 2^(deliveryCount - 1)` capped at `maxDelayMs`.
 */
export function settle(err: unknown, deliveryCount: number, maxDeliver: number, options: SettleOptions = {}): SettleDecision {
  if (err === undefined) return { action: "ack" };
  const code = errorCode(err);
  const withCode = code === undefined ? {} : { code };
  const message = errorMessage(err);
  if (!isRetryable(err)) return { action: "term", reason: `not retryable: ${code ?? "error"}: ${message}`, ...withCode };
  if (maxDeliver > 0 && deliveryCount >= maxDeliver) {
    return { action: "term", reason: `delivery ${deliveryCount} of ${maxDeliver} failed: ${code ?? "error"}: ${message}`, ...withCode };
  }
  return { action: "nak", delayMs: retryDelay(err, deliveryCount, options) };
}

function retryDelay(err: unknown, deliveryCount: number, options: SettleOptions): number {
  const suggested = hasCode(err) ? err.retryDelayMs : undefined;
  if (suggested !== undefined && Number.isFinite(suggested) && suggested >= 0) return Math.round(suggested);
  const n = Math.max(1, Math.floor(deliveryCount));
  const backoff = options.backoffMs;
  if (backoff !== undefined && backoff.length > 0) return backoff[Math.min(n, backoff.length) - 1]!;
  const base = options.baseDelayMs ?? DEFAULT_BASE_DELAY_MS;
  const cap = options.maxDelayMs ?? DEFAULT_MAX_DELAY_MS;
  // 2^(n-1) overflows to Infinity for huge n; Math.min keeps the cap.
  return Math.min(cap, base * 2 ** (n - 1));
}
