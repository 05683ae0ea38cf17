/**
 * Rules checked for settle(), the one place that maps a handler's outcome to JetStream:
 * - success acks;
 * - a non-retryable Baton error terms at once, with its code in the decision and reason;
 * - a retryable error naks, with the error's retryDelayMs if any, else backoffMs
 *   (last entry repeating), else an exponential delay from baseDelayMs capped at maxDelayMs;
 * - unknown errors (not Baton errors, thrown strings) are retryable;
 * - the last allowed delivery terms instead of nak; maxDeliver <= 0 means unlimited.
 */
import { describe, expect, it } from "@jest/globals";
import { defineError } from "@baton/errors";
import { DEFAULT_BASE_DELAY_MS, DEFAULT_MAX_DELAY_MS, settle } from "@baton/bus";

const Permanent = defineError("BATON_TEST_PERMANENT", (what: string) => `bad ${what}`, { status: 400 });
const Transient = defineError("BATON_TEST_TRANSIENT", () => "try later", { status: 503, retryable: true });

describe("settle", () => {
  it("acks success", () => {
    expect(settle(undefined, 1, 10)).toEqual({ action: "ack" });
    expect(settle(undefined, 10, 10)).toEqual({ action: "ack" });
  });

  it("terms non-retryable errors at once", () => {
    const d = settle(Permanent("input"), 1, 10);
    expect(d).toEqual({ action: "term", code: "BATON_TEST_PERMANENT", reason: expect.stringContaining("BATON_TEST_PERMANENT") });
    expect(settle(Transient({ retryable: false }), 1, 10)).toMatchObject({ action: "term", code: "BATON_TEST_TRANSIENT" });
  });

  it("naks retryable errors with exponential backoff, capped", () => {
    expect(settle(Transient(), 1, 100)).toEqual({ action: "nak", delayMs: DEFAULT_BASE_DELAY_MS });
    expect(settle(Transient(), 2, 100)).toEqual({ action: "nak", delayMs: 2 * DEFAULT_BASE_DELAY_MS });
    expect(settle(Transient(), 4, 100)).toEqual({ action: "nak", delayMs: 8 * DEFAULT_BASE_DELAY_MS });
    expect(settle(Transient(), 30, 100)).toEqual({ action: "nak", delayMs: DEFAULT_MAX_DELAY_MS });
    expect(settle(Transient(), 5000, 0)).toEqual({ action: "nak", delayMs: DEFAULT_MAX_DELAY_MS });
    expect(settle(Transient(), 3, 100, { baseDelayMs: 10, maxDelayMs: 25 })).toEqual({ action: "nak", delayMs: 25 });
  });

  it("prefers the error's retryDelayMs, then backoffMs", () => {
    expect(settle(Transient({ retryDelayMs: 1234 }), 3, 10, { backoffMs: [5] })).toEqual({ action: "nak", delayMs: 1234 });
    expect(settle(Transient(), 1, 10, { backoffMs: [5, 50, 500] })).toEqual({ action: "nak", delayMs: 5 });
    expect(settle(Transient(), 3, 10, { backoffMs: [5, 50, 500] })).toEqual({ action: "nak", delayMs: 500 });
    expect(settle(Transient(), 7, 10, { backoffMs: [5, 50, 500] })).toEqual({ action: "nak", delayMs: 500 });
  });

  it("treats unknown errors as retryable", () => {
    expect(settle(new TypeError("bug"), 1, 10)).toEqual({ action: "nak", delayMs: DEFAULT_BASE_DELAY_MS });
    expect(settle("a string", 1, 10)).toEqual({ action: "nak", delayMs: DEFAULT_BASE_DELAY_MS });
    expect(settle(null, 1, 10)).toEqual({ action: "nak", delayMs: DEFAULT_BASE_DELAY_MS });
  });

  it("terms on the last allowed delivery", () => {
    expect(settle(Transient(), 9, 10)).toMatchObject({ action: "nak" });
    const last = settle(Transient(), 10, 10);
    expect(last).toMatchObject({ action: "term", code: "BATON_TEST_TRANSIENT" });
    expect(last.action === "term" && last.reason).toContain("delivery 10 of 10");
    expect(settle(new Error("x"), 11, 10)).toMatchObject({ action: "term", reason: expect.stringContaining("error: x") });
  });

  it("never terms retryable errors when deliveries are unlimited", () => {
    expect(settle(Transient(), 1_000_000, -1)).toMatchObject({ action: "nak" });
    expect(settle(Transient(), 1_000_000, 0)).toMatchObject({ action: "nak" });
  });
});
