/**
 * Shared pieces of the importers: the result type, the issue list, node-id
 * allocation, `$.path` / JSONata rendering, reference templates in parameters,
 * and strongly connected components (for cycles).
 */
import jsonata from "jsonata";
import type { JsonObject, JsonValue } from "../json.ts";
import { isJsonObject } from "../json.ts";
import type { PathSegment } from "../path.ts";
import { parsePath } from "../path.ts";

/** One problem found in an import source. */
export interface ImportIssue {
  /** Where in the source, e.g. `steps[2].dependencies[0]` or `states.llm.on.DONE[1].guard`. */
  path: string;
  /** Stable, machine-readable code, e.g. `unknown_dependency`. */
  code: string;
  message: string;
}

/**
 * Where one generated node or edge came from: `path` is the source entry (`steps[2]`,
 * `states.review.on.next`); `fields` maps fields of the generated element (`config.tool`,
 * `input`) to where in the source that field's value came from, for the fields taken
 * from one place. Paths are written like {@link ImportIssue} paths.
 */
export interface SourceOrigin {
  path: string;
  fields?: Record<string, string>;
}

/**
 * Where the parts of an imported definition came from, so that a problem found in the
 * definition later (by validation) can be shown where the user can fix it: in the source.
 */
export interface ImportSourceMap {
  /** Top-level fields of the definition taken from the source: definition path → source path (`output` → `output`). */
  fields: Record<string, string>;
  /** Node id → its origin. Every node has one; a node the importer adds (`_start`, a `*_params` transform) points at the entry it was added for. */
  nodes: Record<string, SourceOrigin>;
  /** Origin of each entry of `definition.edges`, at the same index. */
  edges: SourceOrigin[];
}

/**
 * What every importer returns. On success `definition` is a canonical Baton
 * workflow definition (docs/importers.md, /work/notes/model.md) as plain JSON,
 * `warnings` lists what was adapted or dropped on the way, and `sourceMap` says
 * where each node and edge came from. On failure every problem of the source is
 * listed, each with a path into the source.
 */
export type ImportResult =
  | { ok: true; definition: JsonObject; warnings: string[]; sourceMap: ImportSourceMap }
  | { ok: false; errors: ImportIssue[]; partial?: PartialImport };

/**
 * What a failed import did convert: the nodes of the source elements that have no problem in
 * what their nodes are made of, alone (no edges), with their origins (a plan's or tool
 * sequence's steps whose tool and params convert, whatever their dependencies or order; a state
 * machine's states whose invoke converts: their nodes as imported), and the top-level material
 * they read that converted (`sourceMap.fields` names each such field, e.g. a SynthDev
 * workflow's roles). Validating it finds what the source's own checks cannot (a tool no worker
 * serves, a config that does not fit its node type), so a caller can report those problems in
 * the same answer as the source's. Its graph means nothing (elements are missing, there are no
 * edges), so only the problems of its nodes and material themselves are worth reporting:
 * {@link partialImportIssues}.
 */
export interface PartialImport {
  definition: JsonObject;
  sourceMap: ImportSourceMap;
}

/** `nodes[3].…` / `nodes[3][…`: a path into one field of a node of the top-level graph. */
const NODE_FIELD = /^nodes\[\d+\][.[]/;

/**
 * Of the problems validation finds in a {@link PartialImport}'s definition, those the whole
 * import has too, whatever the elements that did not convert: the problems in a node's own
 * fields (`nodes[2].config.ms`, `nodes[0].input.url`, `nodes[1].config.tools[0]`, anything in a
 * forEach body, which is whole in its node), and those in the top-level material the partial
 * carries (a field its `sourceMap.fields` names, e.g. `synthdev.roles`). Left out are the
 * problems of its graph, which lacks the elements that did not convert and every edge: a node
 * unreachable or a whileLoop without its body (`nodes[i]` itself), a join that can never fire
 * (`nodes[i].join`), cycles, edges and the start node (not under `nodes[i].`). The checks of a
 * node that look at others (a duplicate id, an id where another node makes the engine write)
 * only find what the whole import, which has every node of the partial, would find too.
 */
export function partialImportIssues<T extends { path: string; code: string }>(partial: PartialImport, issues: readonly T[]): T[] {
  const material = Object.keys(partial.sourceMap.fields);
  return issues.filter((i) => {
    if (NODE_FIELD.test(i.path)) return !(i.code === "join_never_fires" && /^nodes\[\d+\]\.join$/.test(i.path));
    return material.some((field) => within(i.path, field));
  });
}

/** Source formats understood by `importWorkflow` (a SynthDev workflow's importer is in ../synthdev.ts). */
export type ImportFormat = "plan" | "toolSequence" | "stateMachine" | "synthdev";

export const TOOL_NAME = /^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/;
const NODE_ID = /^[A-Za-z_][A-Za-z0-9_-]{0,63}$/;

export function fail(errors: ImportIssue[]): ImportResult {
  return { ok: false, errors };
}

/** Whether `path` is `element` or inside it (`steps[1].tool_name` is in `steps[1]`, `steps[10]` is not). */
export function within(path: string, element: string): boolean {
  return path === element || path.startsWith(`${element}.`) || path.startsWith(`${element}[`);
}

/** A node an import converted, for a {@link PartialImport}. */
export interface ConvertedNode {
  /** The node as the import made it (with its `id`). */
  node: JsonObject;
  origin: SourceOrigin;
  /**
   * Whether a problem of the source keeps the node out: it lies in a part of the source the node
   * is made of (a step's tool or params, a state's invoke), not in what becomes edges (a step's
   * dependencies, a state's transitions). Default: a problem anywhere in `origin.path`.
   */
  blockedBy?: (issue: ImportIssue) => boolean;
}

/**
 * A failure that carries what did convert ({@link PartialImport}): of `converted`, the nodes
 * that no problem blocks. `top` adds top-level fields the nodes need (a SynthDev workflow's
 * material), with where they came from.
 */
export function failWithNodes(
  errors: ImportIssue[], converted: readonly ConvertedNode[], top?: { fields: JsonObject; sourceMap: Record<string, string> },
): ImportResult {
  const clean = converted.filter((c) => !errors.some(c.blockedBy ?? ((e) => within(e.path, c.origin.path))));
  if (clean.length === 0) return fail(errors);
  const nodes: Record<string, SourceOrigin> = {};
  for (const c of clean) nodes[c.node.id as string] = c.origin;
  return {
    ok: false,
    errors,
    partial: {
      definition: { schemaVersion: 1, start: clean[0]!.node.id as string, nodes: clean.map((c) => c.node), edges: [], ...(top?.fields ?? {}) },
      sourceMap: { fields: top?.sourceMap ?? {}, nodes, edges: [] },
    },
  };
}

/** `a.b` / `a[0]` / `a["x y"]` joined the way the issue paths are written. */
export function at(base: string, key: string | number): string {
  if (typeof key === "number") return `${base}[${key}]`;
  const name = /^[A-Za-z_$][A-Za-z0-9_$]*$/.test(key) ? key : JSON.stringify(key);
  if (name !== key) return `${base}[${name}]`;
  return base === "" ? key : `${base}.${key}`;
}

/** First of `keys` present on `obj`, with the key it was found under. */
export function pick(obj: JsonObject, keys: readonly string[]): { key: string; value: JsonValue } | undefined {
  for (const key of keys) {
    if (Object.prototype.hasOwnProperty.call(obj, key) && obj[key] !== undefined) return { key, value: obj[key] };
  }
  return undefined;
}

/** Deep copy of a value as JSON (drops `undefined`, rejects what JSON cannot hold). */
export function asJson(v: unknown): JsonValue | undefined {
  if (v === null || typeof v === "string" || typeof v === "boolean") return v;
  if (typeof v === "number") return Number.isFinite(v) ? v : undefined;
  if (Array.isArray(v)) {
    const out: JsonValue[] = [];
    for (const x of v) {
      const j = asJson(x);
      if (j === undefined) return undefined;
      out.push(j);
    }
    return out;
  }
  if (typeof v === "object") {
    const out: JsonObject = {};
    for (const [k, x] of Object.entries(v as Record<string, unknown>)) {
      if (x === undefined) continue;
      const j = asJson(x);
      if (j === undefined) return undefined;
      out[k] = j;
    }
    return out;
  }
  return undefined;
}

/**
 * Node ids no importer hands out: a node's output goes to `$.<id>`, and these context keys are
 * the engine's (the execution input at `$.input`, a SynthDev run's runtime at `$.synthdev`).
 */
export const RESERVED_IDS: readonly string[] = ["input", "synthdev"];

/** Why an importer renamed a node, for its warning. */
export const ID_RULE = `node ids are letters, digits, _ or -, and ${RESERVED_IDS.map((r) => `"${r}"`).join(" and ")} are reserved`;

/**
 * Hands out node ids that satisfy the canonical id rule, are unique, and never
 * collide with {@link RESERVED_IDS}.
 */
export class IdAllocator {
  private readonly taken = new Set<string>(RESERVED_IDS);

  /** Reserves `id` as is; false when it is taken or not a valid id. */
  claim(id: string): boolean {
    if (!NODE_ID.test(id) || this.taken.has(id)) return false;
    this.taken.add(id);
    return true;
  }

  /** A fresh id derived from `base` (sanitised, suffixed `_2`, `_3`... when taken). */
  fresh(base: string): string {
    let clean = base.replace(/[^A-Za-z0-9_-]/g, "_");
    if (!/^[A-Za-z_]/.test(clean)) clean = `_${clean}`;
    clean = clean.slice(0, 56);
    if (this.claim(clean)) return clean;
    for (let n = 2; ; n++) {
      const id = `${clean}_${n}`;
      if (this.claim(id)) return id;
    }
  }
}

/** Renders path segments as a canonical `$.path`. */
export function renderPath(segments: readonly PathSegment[]): string {
  let out = "$";
  for (const s of segments) {
    if (typeof s === "number") out += `[${s}]`;
    else if (/^[A-Za-z_][A-Za-z0-9_-]*$/.test(s)) out += `.${s}`;
    else out += `["${s}"]`;
  }
  return out;
}

const JSONATA_WORDS = new Set(["and", "or", "in", "true", "false", "null", "function"]);

/** Renders path segments as a JSONata path over the context (`$.fetch.body[0]`). */
export function jsonataPath(segments: readonly PathSegment[]): string {
  let out = "$";
  for (const s of segments) {
    if (typeof s === "number") out += `[${s}]`;
    else if (/^[A-Za-z_][A-Za-z0-9_]*$/.test(s) && !JSONATA_WORDS.has(s)) out += `.${s}`;
    else out += `.\`${s.replace(/`/g, "")}\``;
  }
  return out;
}

/** A JSONata literal for a JSON value (JSONata accepts JSON literals). */
export function jsonataLiteral(v: JsonValue): string {
  return JSON.stringify(v);
}

/** A syntax error message for a JSONata expression, or undefined when it parses. */
export function jsonataSyntaxError(expr: string): string | undefined {
  try {
    jsonata(expr);
    return undefined;
  } catch (e) {
    return e instanceof Error ? e.message : String(e);
  }
}

/** Parses `name.a[0]["x"]` (a `$.path` without its `$.`) into segments. */
export function parseRef(ref: string): PathSegment[] | undefined {
  const p = parsePath(`$.${ref.trim()}`);
  return "error" in p ? undefined : p.segments;
}

/** How a reference inside a template resolves: a context path (as segments) or a problem. */
export type RefResolution = { segments: PathSegment[]; inputKey?: string; dependsOn?: string } | { code: string; message: string };

export interface TemplateOptions {
  /** Resolves the inside of `{{ ... }}` / `${...}` (and `$name` / `workflow://name` when `bareRefs`); `where` is the string's path in the source. */
  resolve: (segments: PathSegment[], raw: string, where: string) => RefResolution;
  /** Also read whole-string `$name.path` and `workflow://name/...` as references (WorkflowPlan). */
  bareRefs: boolean;
}

export interface TemplatedInput {
  /** The node input, with references as `$.paths`. */
  input: JsonObject;
  /** JSONata expressions (key → expression) for strings that need computing; empty when none. */
  computed: Array<{ key: string; expression: string }>;
  /** Top-level `$.input` keys referenced. */
  inputKeys: string[];
  /** Other nodes referenced (to be run before). */
  dependsOn: string[];
}

const WHOLE_TEMPLATE = /^\s*(?:\{\{\s*([^{}]+?)\s*\}\}|\$\{\s*([^{}]+?)\s*\})\s*$/;
/** `{{ref}}` or `${ref}`, unless escaped with a backslash (`\{{`, `\${`). */
const ANY_TEMPLATE = /(?<!\\)(?:\{\{\s*([^{}]+?)\s*\}\}|\$\{\s*([^{}]+?)\s*\})/g;
const unescape = (s: string): string => s.replace(/\\(\{\{|\$\{)/g, "$1");
const BARE_REF = /^\$([A-Za-z_][A-Za-z0-9_-]*(?:(?:\.[A-Za-z_][A-Za-z0-9_-]*)|\[\d+\])*)$/;
const WORKFLOW_URI = /^workflow:\/\/([^/\s]+)(?:\/[^\s]*)?$/;

/**
 * Translates a parameter object whose strings may hold references:
 * - a whole-string reference becomes a `$.path` (so the referenced value keeps its type);
 * - a string with references inside other text is computed by a JSONata string
 *   concatenation (a `transform` node the caller adds) and read from there;
 * - a literal string that would read as a `$.path` (`$`, `$.x`, `$[0]`) is also
 *   computed, as a JSONata string literal, so it reaches the tool unchanged;
 * - `\{{` and `\${` are literal `{{` / `${` (for tools that take templates themselves).
 * `computedAt(key)` gives the `$.path` where computed key `key` will be.
 */
export function translateParams(
  params: JsonObject,
  path: string,
  opts: TemplateOptions,
  computedAt: (key: string) => string,
  errors: ImportIssue[],
): TemplatedInput {
  const computed: Array<{ key: string; expression: string }> = [];
  const inputKeys = new Set<string>();
  const dependsOn = new Set<string>();

  const resolve = (raw: string, where: string): PathSegment[] | undefined => {
    const segments = parseRef(raw);
    if (!segments || segments.length === 0) {
      errors.push({ path: where, code: "invalid_reference", message: `"${raw}" is not a reference (expected name.path, e.g. step1.items[0])` });
      return undefined;
    }
    const r = opts.resolve(segments, raw, where);
    if ("code" in r) {
      errors.push({ path: where, code: r.code, message: r.message });
      return undefined;
    }
    if (r.inputKey !== undefined) inputKeys.add(r.inputKey);
    if (r.dependsOn !== undefined) dependsOn.add(r.dependsOn);
    return r.segments;
  };

  const compute = (expression: string): string => {
    const key = `p${computed.length}`;
    computed.push({ key, expression });
    return computedAt(key);
  };

  const walk = (v: JsonValue, where: string): JsonValue => {
    if (Array.isArray(v)) return v.map((x, i) => walk(x, at(where, i)));
    if (isJsonObject(v)) {
      const out: JsonObject = {};
      for (const [k, x] of Object.entries(v)) out[k] = walk(x, at(where, k));
      return out;
    }
    if (typeof v !== "string") return v;

    const whole = WHOLE_TEMPLATE.exec(v);
    if (whole) {
      const segs = resolve(whole[1] ?? whole[2] ?? "", where);
      return segs ? renderPath(segs) : v;
    }
    if (opts.bareRefs) {
      const bare = BARE_REF.exec(v);
      if (bare) {
        const segs = parseRef(bare[1]!);
        const r = segs ? opts.resolve(segs, bare[1]!, where) : undefined;
        // `$name` that names nothing known stays a literal (e.g. "$HOME").
        if (r && !("code" in r)) {
          if (r.inputKey !== undefined) inputKeys.add(r.inputKey);
          if (r.dependsOn !== undefined) dependsOn.add(r.dependsOn);
          return renderPath(r.segments);
        }
      }
      const uri = WORKFLOW_URI.exec(v);
      if (uri) {
        const segs = resolve(uri[1]!, where);
        return segs ? renderPath(segs) : v;
      }
    }
    ANY_TEMPLATE.lastIndex = 0;
    if (ANY_TEMPLATE.test(v)) {
      const parts: string[] = [];
      let last = 0;
      let ok = true;
      ANY_TEMPLATE.lastIndex = 0;
      for (let m = ANY_TEMPLATE.exec(v); m; m = ANY_TEMPLATE.exec(v)) {
        if (m.index > last) parts.push(jsonataLiteral(unescape(v.slice(last, m.index))));
        const segs = resolve(m[1] ?? m[2] ?? "", where);
        if (segs) parts.push(jsonataPath(segs));
        else ok = false;
        last = m.index + m[0].length;
      }
      if (last < v.length) parts.push(jsonataLiteral(unescape(v.slice(last))));
      return ok ? compute(parts.join(" & ")) : v;
    }
    const literal = unescape(v);
    if (literal === "$" || literal.startsWith("$.") || literal.startsWith("$[")) return compute(jsonataLiteral(literal));
    return literal;
  };

  const input = walk(params, path) as JsonObject;
  return { input, computed, inputKeys: [...inputKeys], dependsOn: [...dependsOn] };
}

/** The JSONata object constructor of a params node: `{ "p0": ..., "p1": ... }`. */
export function computedExpression(computed: ReadonlyArray<{ key: string; expression: string }>): string {
  return `{ ${computed.map((c) => `${JSON.stringify(c.key)}: ${c.expression}`).join(", ")} }`;
}

/** JSON Schema for an input object with the given required top-level keys. */
export function inputSchemaFor(keys: Iterable<string>): JsonObject | undefined {
  const sorted = [...new Set(keys)].sort();
  if (sorted.length === 0) return undefined;
  const properties: JsonObject = {};
  for (const k of sorted) properties[k] = {};
  return { type: "object", properties, required: sorted };
}

