import type { JsonObject, JsonValue } from "./json.ts";
import { resolveTemplate } from "./path.ts";
import type { Comparison, Condition } from "./model.ts";
import { evaluateExpression, truthy } from "./expr.ts";

function deepEqual(a: JsonValue | undefined, b: JsonValue | undefined): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/**
 * Evaluates a comparison (a condition node's config, a whileLoop's or an edge's structured
 * condition) against the context. Operands are resolved like a node input: a `$.path` string
 * is read from the context (a missing path is nothing), paths inside arrays and objects too.
 * - `eq` / `ne`: the operands' JSON text is (not) the same; nothing equals only nothing;
 * - `gt`, `gte`, `lt`, `lte`: JavaScript's comparison of two values of the same `typeof`, and
 *   false for two of different types (`"2" < 3` is false, not an error);
 * - `exists`: `left` is neither nothing nor null;
 * - `truthy`: JavaScript's truthiness, except that `[]` is false (`{}` is true);
 * - `in`: `right` is an array with an element equal to `left`;
 * - `contains`: a substring, for two strings; else `left` is an array with an element equal to `right`.
 */
export function evaluateCondition(cfg: Comparison, context: JsonObject): boolean {
  const left = resolveTemplate(cfg.left, context);
  const right = resolveTemplate(cfg.right, context);
  switch (cfg.op) {
    case "eq": return deepEqual(left, right);
    case "ne": return !deepEqual(left, right);
    case "gt": return typeof left === typeof right && (left as number) > (right as number);
    case "gte": return typeof left === typeof right && (left as number) >= (right as number);
    case "lt": return typeof left === typeof right && (left as number) < (right as number);
    case "lte": return typeof left === typeof right && (left as number) <= (right as number);
    case "exists": return left !== undefined && left !== null;
    case "truthy": return Boolean(left) && !(Array.isArray(left) && left.length === 0);
    case "in": return Array.isArray(right) && right.some((r) => deepEqual(r, left));
    case "contains":
      if (typeof left === "string" && typeof right === "string") return left.includes(right);
      return Array.isArray(left) && left.some((l) => deepEqual(l, right));
  }
}

/**
 * Whether an edge guard lets its edge be taken, as the step function decides it. `context` holds
 * the source node's output already (at its output path), which is where a comparison reads it;
 * a JSONata guard also gets it as `$output`. Throws `ExpressionFailed` for a JSONata guard that
 * cannot be evaluated; a comparison never fails.
 */
export async function evaluateGuard(guard: Condition, context: JsonObject, now: string, output: JsonValue): Promise<boolean> {
  if (typeof guard !== "string") return evaluateCondition(guard, context);
  return truthy(await evaluateExpression(guard, context, now, { output }));
}
