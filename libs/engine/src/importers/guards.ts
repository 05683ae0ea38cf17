/**
 * Comparison guards (`{ left, op, right }`) as JSONata edge conditions that mean exactly what
 * the condition node's op of the same name means (condition.ts): operands are resolved like a
 * node input (`$.path` strings read from the context, missing → nothing, nested templates in
 * objects and arrays resolved too), `eq` / `ne` / `in` / `contains` compare by JSON text,
 * `gt` ... `lte` compare only values of the same JavaScript type (as JavaScript does, booleans
 * and arrays included) and are false otherwise, `exists` is false for null, `truthy` is false
 * for `[]` and true for `{}`. A plain JSONata translation (`left = right`, `$exists(left)`,
 * `$boolean(left)`, `left < right`) differs on exactly these cases, and `<` on a string and a
 * number fails the run instead of being false.
 *
 * The expression is self-contained: it defines the helper functions it uses in a block.
 * Comparisons against a literal number, string, boolean or null get a short form.
 */
import type { JsonValue } from "../json.ts";
import { isJsonObject } from "../json.ts";
import { parsePath, type PathSegment } from "../path.ts";
import { jsonataLiteral } from "./common.ts";

export const COMPARISON_OPS = ["eq", "ne", "gt", "gte", "lt", "lte", "exists", "truthy", "in", "contains"] as const;
export type ComparisonOp = (typeof COMPARISON_OPS)[number];

/** Relational ops: the ordering value ($c / $o: -1, 0, 1) they accept. */
const ORDER: Readonly<Record<string, string>> = { gt: "= 1", gte: "in [0, 1]", lt: "= -1", lte: "in [-1, 0]" };
const JS_OP: Readonly<Record<string, string>> = { gt: ">", gte: ">=", lt: "<", lte: "<=" };
const MIRROR: Readonly<Record<string, string>> = { gt: "<", gte: "<=", lt: ">", lte: ">=" };

/**
 * Helper functions, each with the helpers it calls. Names are one letter: the expression is
 * generated, and the edge condition stays readable enough to see the comparison at its end.
 */
const HELPERS: Readonly<Record<string, { uses: readonly string[]; code: string }>> = {
  // One step of a `$.path` read (path.ts readPath): a name on an object, an index on an array, else nothing.
  g: { uses: [], code: `$g := function($v, $k) { $type($k) = "number" ? ($type($v) = "array" ? $v[$k]) : ($type($v) = "object" ? $lookup($v, $k)) }` },
  // A value as one array element, kept whole (not spliced into the array), nothing as null (resolveTemplate).
  w: { uses: [], code: `$w := function($v) { $exists($v) ? ($type($v) = "array" ? [[$v]] : [$v]) : [null] }` },
  // condition.ts deepEqual: JSON text equality (key order counts); nothing equals only nothing.
  e: { uses: [], code: `$e := function($a, $b) { $exists($a) ? ($exists($b) and $a = $b and ($type($a) in ["array", "object"] ? $string($a) = $string($b) : true)) : $not($exists($b)) }` },
  // JavaScript typeof.
  t: { uses: [], code: `$t := function($v) { $exists($v) ? ($type($v) in ["null", "array", "object"] ? "object" : $type($v)) : "undefined" }` },
  // Ordering of two numbers or two strings.
  o: { uses: [], code: `$o := function($a, $b) { $a < $b ? -1 : ($a > $b ? 1 : 0) }` },
  // JavaScript's primitive of an object-typed value: null stays null, an array is its elements joined by ",".
  p: { uses: [], code: `$p := function($v) { $type($v) = "null" ? null : $type($v) = "object" ? "[object Object]" : $count($v) = 0 ? "" : $join($map($v, function($x) { $type($x) = "null" ? "" : $type($x) = "string" ? $x : $type($x) in ["array", "object"] ? $p($x) : $string($x) }), ",") }` },
  // Sign of JavaScript's Number() of null or a string (undefined for NaN). Only the sign is needed: a
  // string is compared as a number only against null (0). A decimal below the smallest double (1e-400) counts as non-zero.
  s: {
    uses: [],
    code: `$s := function($v) { $type($v) = "null" ? 0 : ($x := $replace($v, /^\\s+|\\s+$/, ""); $x = "" ? 0 : $contains($x, /^[+-]?(\\d+\\.?\\d*|\\.\\d+)([eE][+-]?\\d+)?$|^[+-]?Infinity$/) ? ($contains($x, /^[+-]?[0.]*([eE].*)?$/) ? 0 : $substring($x, 0, 1) = "-" ? -1 : 1) : $contains($x, /^0([xX][0-9a-fA-F]+|[oO][0-7]+|[bB][01]+)$/) ? ($contains($x, /^0.0+$/) ? 0 : 1)) }`,
  },
  // JavaScript's a < b, a > b as an ordering of two values of the same typeof; undefined when they do not compare.
  c: {
    uses: ["t", "o", "p", "s"],
    code: `$c := function($a, $b) { ($y := $t($a); $y = $t($b) and $y != "undefined" ? ($y = "boolean" ? $o($a ? 1 : 0, $b ? 1 : 0) : $y = "object" ? ($m := $p($a); $n := $p($b); $type($m) = "string" and $type($n) = "string" ? $o($m, $n) : ($i := $s($m); $j := $s($n); $exists($i) and $exists($j) ? $o($i, $j))) : $o($a, $b))) }`,
  },
};

type Operand = { expr: string; helpers: Set<string>; literal?: JsonValue } | { error: string };

function isPathString(v: JsonValue): v is string {
  return typeof v === "string" && (v === "$" || v.startsWith("$.") || v.startsWith("$["));
}

function hasPath(v: JsonValue): boolean {
  if (isPathString(v)) return true;
  if (Array.isArray(v)) return v.some(hasPath);
  if (isJsonObject(v)) return Object.values(v).some(hasPath);
  return false;
}

function readExpr(segments: readonly PathSegment[], helpers: Set<string>): string {
  let out = "$$";
  segments.forEach((s, i) => {
    // The context is an object: its top-level names need no type check.
    if (i === 0 && typeof s === "string") out = `$lookup($$, ${jsonataLiteral(s)})`;
    else {
      helpers.add("g");
      out = `$g(${out}, ${jsonataLiteral(s)})`;
    }
  });
  return out;
}

/** The JSONata of an operand resolved like a node input template (path.ts resolveTemplate). */
function operand(v: JsonValue, helpers: Set<string>): Operand {
  if (!hasPath(v)) return { expr: jsonataLiteral(v), helpers, literal: v };
  const errors: string[] = [];
  const walk = (x: JsonValue): string => {
    if (isPathString(x)) {
      const p = parsePath(x);
      if ("error" in p) {
        errors.push(p.error);
        return "null";
      }
      return readExpr(p.segments, helpers);
    }
    if (!hasPath(x)) return jsonataLiteral(x);
    if (Array.isArray(x)) {
      helpers.add("w");
      return x.reduce<string>((acc, el) => `$append(${acc}, $w(${walk(el)}))`, "[]");
    }
    // Object constructors leave out keys whose value is nothing, as resolveTemplate does.
    return `{ ${Object.entries(x as Record<string, JsonValue>).map(([k, el]) => `${jsonataLiteral(k)}: ${walk(el)}`).join(", ")} }`;
  };
  const expr = walk(v);
  return errors.length > 0 ? { error: errors[0]! } : { expr, helpers };
}

const isPrimitive = (v: JsonValue | undefined): v is string | number | boolean | null =>
  v === null || typeof v === "string" || typeof v === "number" || typeof v === "boolean";

/**
 * The JSONata of a comparison; `right` undefined when the guard has none (it then resolves to
 * nothing, as the condition node's missing `right` does).
 */
export function comparisonToJsonata(op: ComparisonOp, left: JsonValue, right: JsonValue | undefined): { expression: string } | { error: string } {
  const helpers = new Set<string>();
  const l = operand(left, helpers);
  if ("error" in l) return l;
  const r = right === undefined ? undefined : operand(right, helpers);
  if (r !== undefined && "error" in r) return r;
  const lit = r?.literal;
  // $l and $r hold the operands; an unbound $r is nothing.
  let test: string;
  switch (op) {
    case "eq":
    case "ne":
      if ((right !== undefined && isPrimitive(lit)) || isPrimitive(l.literal)) {
        // JSONata `=` is false for nothing and compares primitives by type and value, like JSON text.
        test = op === "eq" ? `$l = $r` : `$not($l = $r)`;
      } else {
        helpers.add("e");
        test = op === "eq" ? `$e($l, $r)` : `$not($e($l, $r))`;
      }
      break;
    case "gt":
    case "gte":
    case "lt":
    case "lte":
      if (right !== undefined && (typeof lit === "number" || typeof lit === "string")) {
        test = `$type($l) = ${jsonataLiteral(typeof lit)} and $l ${JS_OP[op]} $r`;
      } else if (l.literal !== undefined && (typeof l.literal === "number" || typeof l.literal === "string")) {
        test = `$type($r) = ${jsonataLiteral(typeof l.literal)} and $r ${MIRROR[op]} $l`;
      } else {
        helpers.add("c");
        test = `$c($l, $r) ${ORDER[op]}`;
      }
      break;
    case "exists":
      // `!=` is false when a side is nothing.
      test = `$type($l) != "null"`;
      break;
    case "truthy":
      test = `$exists($l) and ($type($l) = "array" ? $count($l) > 0 : $type($l) = "object" ? true : $boolean($l))`;
      break;
    case "in":
      helpers.add("e");
      test = `$type($r) = "array" and true in $map($r, function($x) { $e($x, $l) })`;
      break;
    case "contains":
      helpers.add("e");
      test = `$type($l) = "string" and $type($r) = "string" ? $contains($l, $r) : ($type($l) = "array" and true in $map($l, function($x) { $e($x, $r) }))`;
      break;
  }
  const needed = new Set<string>();
  const need = (h: string): void => {
    if (needed.has(h)) return;
    for (const u of HELPERS[h]!.uses) need(u);
    needed.add(h);
  };
  for (const h of helpers) need(h);
  const defs = [...needed].map((h) => HELPERS[h]!.code);
  const binds = [`$l := ${l.expr}`, ...(r !== undefined ? [`$r := ${r.expr}`] : [])];
  return { expression: `(${[...defs, ...binds, test].join("; ")})` };
}
