/**
 * Rules: an error carries its catalogue code, status and retryability; options
 * override retryability per instance and keep the cause; `is` checks by code.
 */
import { describe, expect, it } from "@jest/globals";
import { defineError, hasCode, isRetryable } from "./index.ts";

const NotFound = defineError("T_NOT_FOUND", (what: string, id: string) => `${what} ${id} not found`, { status: 404 });
const Busy = defineError("T_BUSY", () => "busy", { status: 503, retryable: true });

describe("defineError", () => {
  it("builds errors with code, status and message", () => {
    const e = NotFound("workflow", "7");
    expect(e.code).toBe("T_NOT_FOUND");
    expect(e.status).toBe(404);
    expect(e.message).toBe("workflow 7 not found");
    expect(e.retryable).toBe(false);
    expect(NotFound.is(e)).toBe(true);
    expect(Busy.is(e)).toBe(false);
  });
  it("keeps cause and details and lets an instance override retryability", () => {
    const cause = new Error("socket closed");
    const e = Busy({ cause, retryable: false, details: { n: 1 } });
    expect(e.cause).toBe(cause);
    expect(e.retryable).toBe(false);
    expect(e.toJSON()).toEqual({ code: "T_BUSY", message: "busy", details: { n: 1 } });
  });
  it("treats unknown errors as retryable and Baton errors by their flag", () => {
    expect(isRetryable(new Error("x"))).toBe(true);
    expect(isRetryable(Busy())).toBe(true);
    expect(isRetryable(NotFound("a", "b"))).toBe(false);
    expect(hasCode({ code: "X" })).toBe(false);
  });
});
