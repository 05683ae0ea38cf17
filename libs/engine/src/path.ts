/**
 * `$.path` expressions (seed 004 "context accumulation"): `$` is the execution
 * context; `.name`, `["name"]` and `[index]` step into it. Reads of missing paths
 * give `undefined`; writes create objects on the way.
 */
import type { JsonObject, JsonValue } from "./json.ts";
import { isJsonObject } from "./json.ts";

export type PathSegment = string | number;

export interface ParsedPath {
  source: string;
  segments: PathSegment[];
}

const IDENT = /^[A-Za-z_][A-Za-z0-9_-]*/;

/** True when a string is meant as a path (starts with `$.`, `$[` or is `$`). */
export function looksLikePath(s: string): boolean {
  return s === "$" || s.startsWith("$.") || s.startsWith("$[");
}

/** Parses a `$.path`; returns an error message instead of throwing. */
export function parsePath(source: string): ParsedPath | { error: string } {
  if (!source.startsWith("$")) return { error: `path "${source}" must start with "$"` };
  const segments: PathSegment[] = [];
  let rest = source.slice(1);
  while (rest.length > 0) {
    if (rest.startsWith(".")) {
      const m = IDENT.exec(rest.slice(1));
      if (!m) return { error: `path "${source}": expected a name after "." at "${rest}"` };
      segments.push(m[0]);
      rest = rest.slice(1 + m[0].length);
    } else if (rest.startsWith("[")) {
      const close = rest.indexOf("]");
      if (close < 0) return { error: `path "${source}": unclosed "["` };
      const inner = rest.slice(1, close).trim();
      if (/^\d+$/.test(inner)) segments.push(Number(inner));
      else if (/^"[^"]*"$/.test(inner) || /^'[^']*'$/.test(inner)) segments.push(inner.slice(1, -1));
      else return { error: `path "${source}": "[${inner}]" is neither an index nor a quoted name` };
      rest = rest.slice(close + 1);
    } else {
      return { error: `path "${source}": unexpected "${rest[0] ?? ""}"` };
    }
  }
  // `__proto__` is no key a write can make: assigning it replaces an object's prototype.
  if (segments.includes("__proto__")) return { error: `path "${source}": "__proto__" cannot be a name in a path` };
  return { source, segments };
}

function mustParse(source: string): ParsedPath {
  const p = parsePath(source);
  if ("error" in p) throw new Error(p.error);
  return p;
}

/** Reads a path from a value; missing → undefined. */
export function readPath(root: JsonValue | undefined, path: string | ParsedPath): JsonValue | undefined {
  const p = typeof path === "string" ? mustParse(path) : path;
  let cur: JsonValue | undefined = root;
  for (const seg of p.segments) {
    if (cur === undefined || cur === null) return undefined;
    if (typeof seg === "number") {
      if (!Array.isArray(cur)) return undefined;
      cur = cur[seg];
    } else {
      if (!isJsonObject(cur)) return undefined;
      cur = Object.prototype.hasOwnProperty.call(cur, seg) ? cur[seg] : undefined;
    }
  }
  return cur;
}

/**
 * Returns a copy of `root` with `value` written at `path` (structural sharing elsewhere).
 * `through` gives the value to write into for each value the path passes through (not the one
 * it replaces): the engine passes one that resolves a large value's reference, so a write
 * under it changes the value, not the reference.
 */
export function writePath(root: JsonObject, path: string | ParsedPath, value: JsonValue, through?: (v: JsonValue) => JsonValue): JsonObject {
  const p = typeof path === "string" ? mustParse(path) : path;
  if (p.segments.length === 0) {
    return isJsonObject(value) ? value : { value };
  }
  const write = (at: JsonValue | undefined, i: number): JsonValue => {
    const node = through && at !== undefined && i > 0 ? through(at) : at;
    const seg = p.segments[i]!;
    const last = i === p.segments.length - 1;
    if (typeof seg === "number") {
      const arr = Array.isArray(node) ? [...node] : [];
      arr[seg] = last ? value : write(arr[seg], i + 1);
      for (let k = 0; k < arr.length; k++) if (arr[k] === undefined) arr[k] = null;
      return arr;
    }
    const obj: JsonObject = isJsonObject(node) ? { ...node } : {};
    obj[seg] = last ? value : write(obj[seg], i + 1);
    return obj;
  };
  return write(root, 0) as JsonObject;
}

/**
 * Resolves a node's input template: strings that look like paths are read from
 * the context; objects and arrays are resolved recursively; other values pass.
 */
export function resolveTemplate(template: JsonValue | undefined, context: JsonObject): JsonValue | undefined {
  if (typeof template === "string") return looksLikePath(template) ? readPath(context, template) : template;
  if (Array.isArray(template)) return template.map((t) => resolveTemplate(t, context) ?? null);
  if (isJsonObject(template)) {
    const out: JsonObject = {};
    for (const [k, v] of Object.entries(template)) {
      const r = resolveTemplate(v, context);
      if (r !== undefined) out[k] = r;
    }
    return out;
  }
  return template;
}

/**
 * Every string inside a template that {@link resolveTemplate} reads as a path, for validation:
 * other text (`"$5"`, `"$HOME"`) stays literal and is not collected.
 */
export function collectPaths(template: unknown, at: string, out: { at: string; path: string }[] = []): { at: string; path: string }[] {
  if (typeof template === "string") {
    if (looksLikePath(template)) out.push({ at, path: template });
  } else if (Array.isArray(template)) {
    template.forEach((t, i) => collectPaths(t, `${at}[${i}]`, out));
  } else if (typeof template === "object" && template !== null) {
    for (const [k, v] of Object.entries(template)) collectPaths(v, `${at}.${k}`, out);
  }
  return out;
}

/** A `{{$.path}}` placeholder of a text (agent prompts, templates); group 1 is the path. */
export const PLACEHOLDER = /\{\{\s*(\$[^}]*?)\s*\}\}/g;

/** The `{{$.path}}` placeholders of a text (as agent prompts and templates fill them), trimmed. */
export function placeholderPaths(text: string): string[] {
  return [...text.matchAll(PLACEHOLDER)].map((m) => m[1]!.trim());
}
