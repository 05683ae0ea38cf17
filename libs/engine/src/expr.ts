/**
 * JSONata expressions (transform nodes, conditions, edge guards, forEach reduce).
 * Never `eval`: JSONata is interpreted. `$now()` and `$millis()` are bound to the
 * step's clock so a replayed step evaluates the same way.
 */
import jsonata from "jsonata";
import type { JsonObject, JsonValue } from "./json.ts";

const compiled = new Map<string, jsonata.Expression>();

/** Compiles (and caches) an expression; throws a message with the position on a syntax error. */
export function compileExpression(source: string): jsonata.Expression {
  let e = compiled.get(source);
  if (!e) {
    e = jsonata(source);
    if (compiled.size > 2000) compiled.delete(compiled.keys().next().value!);
    compiled.set(source, e);
  }
  return e;
}

/** A syntax error of `source`, or undefined when it compiles. */
export function expressionError(source: string): string | undefined {
  try {
    compileExpression(source);
    return undefined;
  } catch (err) {
    const e = err as { message?: string; position?: number; code?: string };
    return `${e.message ?? String(err)}${e.position !== undefined ? ` (at character ${e.position})` : ""}`;
  }
}

/** Thrown when an expression fails at run time; the node fails with this message. */
export class ExpressionFailed extends Error {
  override name = "ExpressionFailed";
}

/** Evaluates `source` against `input`; the result is plain JSON (undefined → null). */
export async function evaluateExpression(source: string, input: JsonValue, now: string, bindings: JsonObject = {}): Promise<JsonValue> {
  let expr: jsonata.Expression;
  try {
    expr = compileExpression(source);
  } catch (err) {
    throw new ExpressionFailed(`expression "${source}" does not compile: ${(err as Error).message}`);
  }
  const ms = Date.parse(now);
  try {
    const out: unknown = await expr.evaluate(input, { ...bindings, now: () => now, millis: () => ms });
    return toJson(out);
  } catch (err) {
    throw new ExpressionFailed(`expression "${source}" failed: ${(err as Error).message}`);
  }
}

/** JSONata results may carry sequence flags and undefined; normalise to JSON. */
function toJson(v: unknown): JsonValue {
  if (v === undefined || v === null) return null;
  if (typeof v === "number") return Number.isFinite(v) ? v : null;
  if (typeof v === "string" || typeof v === "boolean") return v;
  if (Array.isArray(v)) return v.map((x) => toJson(x));
  if (typeof v === "object") {
    const out: JsonObject = {};
    for (const [k, x] of Object.entries(v)) if (x !== undefined && typeof x !== "function") out[k] = toJson(x);
    return out;
  }
  return null;
}

/** JSONata truthiness for guards: false, null, 0, "" and empty arrays are false. */
export function truthy(v: JsonValue): boolean {
  if (Array.isArray(v)) return v.length > 0;
  return Boolean(v);
}
