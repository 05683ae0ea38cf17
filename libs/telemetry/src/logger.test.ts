/**
 * Rules checked:
 * - each line is one JSON object with time, level, name, msg and the fields;
 * - lines below the logger's level are not written; `silent` writes nothing;
 * - child() adds bindings to every line and keeps name, level and destination;
 * - errors are written as { name, message, code, status, retryable }, with a stack only
 *   for errors that are not Baton errors; causes are followed;
 * - inside an active span, lines carry trace_id and span_id;
 * - fields cannot overwrite the core keys; cycles and BigInts do not break a line.
 */
import { describe, expect, it } from "@jest/globals";
import { context, ROOT_CONTEXT, trace } from "@opentelemetry/api";
import { createLogger, ensureContextPropagation, isLogLevel } from "@baton/telemetry";

function capture(level: Parameters<typeof createLogger>[1] = "debug") {
  const lines: Record<string, unknown>[] = [];
  const logger = createLogger("test", level, { write: (l) => lines.push(JSON.parse(l) as Record<string, unknown>), now: () => new Date(0) });
  return { logger, lines };
}

describe("createLogger", () => {
  it("writes one JSON object per line", () => {
    const { logger, lines } = capture();
    logger.info("hello", { executionId: 7 });
    expect(lines).toEqual([{ time: "1970-01-01T00:00:00.000Z", level: "info", name: "test", msg: "hello", executionId: 7 }]);
  });

  it("filters by level", () => {
    const { logger, lines } = capture("warn");
    logger.debug("d");
    logger.info("i");
    logger.warn("w");
    logger.error("e");
    expect(lines.map((l) => l.level)).toEqual(["warn", "error"]);
    expect(logger.isLevelEnabled("info")).toBe(false);
    expect(logger.isLevelEnabled("error")).toBe(true);
  });

  it("writes nothing when silent", () => {
    const { logger, lines } = capture("silent");
    logger.error("e");
    expect(lines).toEqual([]);
  });

  it("adds child bindings", () => {
    const { logger, lines } = capture("info");
    const child = logger.child({ service: "executor" }).child({ executionId: 3 });
    child.debug("hidden");
    child.info("x", { node: "a" });
    expect(lines).toEqual([{ time: expect.any(String), level: "info", name: "test", msg: "x", service: "executor", executionId: 3, node: "a" }]);
    expect(child.level).toBe("info");
  });

  it("serializes errors, with stacks only for unexpected ones", () => {
    const { logger, lines } = capture();
    const baton = Object.assign(new Error("nope", { cause: new TypeError("inner") }), { code: "BATON_X", status: 409, retryable: false });
    logger.error("failed", { err: baton, other: new RangeError("bad") });
    const line = lines[0]!;
    expect(line.err).toMatchObject({ name: "Error", message: "nope", code: "BATON_X", status: 409, retryable: false, cause: { name: "TypeError", message: "inner" } });
    expect(line.err).not.toHaveProperty("stack");
    expect(line.other).toMatchObject({ name: "RangeError", message: "bad", stack: expect.stringContaining("RangeError") });
  });

  it("adds trace and span ids inside an active span", () => {
    ensureContextPropagation();
    const { logger, lines } = capture();
    const ctx = trace.setSpanContext(ROOT_CONTEXT, { traceId: "4bf92f3577b34da6a3ce929d0e0e4736", spanId: "00f067aa0ba902b7", traceFlags: 1 });
    context.with(ctx, () => logger.info("in span"));
    logger.info("outside");
    expect(lines[0]).toMatchObject({ trace_id: "4bf92f3577b34da6a3ce929d0e0e4736", span_id: "00f067aa0ba902b7" });
    expect(lines[1]).not.toHaveProperty("trace_id");
  });

  it("keeps core keys and survives cycles and BigInts", () => {
    const { logger, lines } = capture();
    const cyclic: Record<string, unknown> = { a: 1 };
    cyclic.self = cyclic;
    logger.info("m", { msg: "spoof", level: "x", big: 10n, cyclic });
    expect(lines[0]).toMatchObject({ msg: "m", level: "info", field_msg: "spoof", field_level: "x", big: "10", cyclic: { a: 1, self: "[Circular]" } });
  });

  it("recognises level names", () => {
    expect(isLogLevel("warn")).toBe(true);
    expect(isLogLevel("silent")).toBe(true);
    expect(isLogLevel("verbose")).toBe(false);
  });
});
