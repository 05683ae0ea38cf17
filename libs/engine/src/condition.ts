import type { JsonObject, JsonValue } from "./json.ts";
import { resolveTemplate } from "./path.ts";
import type { conditionConfigSchema } from "./model.ts";
import type { z } from "zod";

function deepEqual(a: JsonValue | undefined, b: JsonValue | undefined): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/** Evaluates a condition node's comparison against the context. */
export function evaluateCondition(cfg: z.infer<typeof conditionConfigSchema>, context: JsonObject): boolean {
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
