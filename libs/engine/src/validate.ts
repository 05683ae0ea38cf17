/**
 * Definition validation. Reports every problem at once, each with a path into the
 * definition (`nodes[2].type`), a stable code and a message.
 */
import { z } from "zod";
import { Ajv } from "ajv";
import type { ErrorObject, ValidateFunction } from "ajv";
import { Ajv2019 } from "ajv/dist/2019.js";
import { Ajv2020 } from "ajv/dist/2020.js";
import { collectPaths, parsePath } from "./path.ts";
import type { WorkflowDefinition } from "./model.ts";
import { AGENT_TOOLS, NODE_TYPES, PLANNED_NODE_TYPES, bodySchema, canonicalType, forEachConfigSchema, toolConfigSchema, workflowDefinitionSchema } from "./model.ts";
import { expressionError } from "./expr.ts";
import { graphOf } from "./graph.ts";
import type { JsonValue } from "./json.ts";

/** What validation may check beyond the definition itself. */
export interface ValidateOptions {
  /** Whether a tool exists (and this tenant may call it); tool nodes naming others fail validation. */
  hasTool?: (name: string) => boolean;
  /** Whether an LLM model ref (`provider:model` or alias) is configured: undefined when it is, else what is missing. */
  checkModel?: (ref: string) => string | undefined;
}

/** Config keys that hold JSONata expressions rather than `$.path`s or nested graphs. */
const EXPRESSION_KEYS = new Set(["expression", "condition", "reduce"]);

export interface ValidationIssue {
  path: string;
  code: string;
  message: string;
}

export type ValidationResult = { ok: true; workflow: WorkflowDefinition } | { ok: false; errors: ValidationIssue[] };

function zodPath(path: PropertyKey[]): string {
  let out = "";
  for (const p of path) out += typeof p === "number" ? `[${p}]` : out === "" ? String(p) : `.${String(p)}`;
  return out;
}

/** Validates a workflow definition; on success returns it parsed, with defaults and canonical types. */
export function validateWorkflow(input: unknown, opts: ValidateOptions = {}): ValidationResult {
  const result = validateGraph(input, opts, "", workflowDefinitionSchema);
  if (result.ok && result.workflow.inputSchema !== undefined) {
    const err = schemaError(result.workflow.inputSchema);
    if (err) return { ok: false, errors: [{ path: "inputSchema", code: "invalid_input_schema", message: err }] };
  }
  return result;
}

function prefixed(prefix: string, path: string): string {
  return prefix === "" ? path : `${prefix}.${path}`;
}

function validateGraph(input: unknown, opts: ValidateOptions, prefix: string, schema: z.ZodType): ValidationResult {
  const parsed = schema.safeParse(input) as z.ZodSafeParseResult<z.infer<typeof workflowDefinitionSchema>>;
  if (!parsed.success) {
    return {
      ok: false,
      errors: parsed.error.issues.map((i) => ({ path: prefixed(prefix, zodPath(i.path) || "(definition)"), code: "invalid_shape", message: i.message })),
    };
  }
  const def = parsed.data;
  const errors: ValidationIssue[] = [];
  const ids = new Map<string, number>();

  def.nodes.forEach((n, i) => {
    if (ids.has(n.id)) {
      errors.push({ path: `nodes[${i}].id`, code: "duplicate_node_id", message: `node id "${n.id}" is used more than once (first at nodes[${ids.get(n.id)}])` });
    } else {
      ids.set(n.id, i);
    }
    const type = canonicalType(n.type);
    const spec = NODE_TYPES[type];
    if (!spec) {
      if (PLANNED_NODE_TYPES.includes(type)) {
        errors.push({ path: `nodes[${i}].type`, code: "unsupported_node_type", message: `node type "${n.type}" is not available in this version of Baton` });
      } else {
        errors.push({ path: `nodes[${i}].type`, code: "unknown_node_type", message: `unknown node type "${n.type}"; known types: ${Object.keys(NODE_TYPES).join(", ")}` });
      }
    } else {
      const c = spec.config.safeParse(n.config);
      if (!c.success) {
        for (const issue of c.error.issues) {
          errors.push({ path: `nodes[${i}].config${issue.path.length ? "." + zodPath(issue.path) : ""}`, code: "invalid_config", message: issue.message });
        }
      } else {
        checkNodeConfig(type, n.config, `nodes[${i}]`, opts, errors);
      }
    }
    const configPaths = Object.entries(n.config).filter(([k]) => !EXPRESSION_KEYS.has(k) && k !== "body");
    for (const ref of collectPaths(n.input ?? {}, `nodes[${i}].input`).concat(collectPaths(Object.fromEntries(configPaths), `nodes[${i}].config`))) {
      const p = parsePath(ref.path);
      if ("error" in p) errors.push({ path: ref.at, code: "invalid_path", message: p.error });
    }
    if (n.output !== undefined) {
      const p = parsePath(n.output);
      if ("error" in p) errors.push({ path: `nodes[${i}].output`, code: "invalid_path", message: p.error });
      else if (p.segments.length === 0 || p.segments[0] === "input") {
        errors.push({ path: `nodes[${i}].output`, code: "invalid_path", message: `output path "${n.output}" may not replace the context or write into $.input` });
      }
    }
  });
  for (const ref of collectPaths(def.output ?? {}, "output")) {
    const p = parsePath(ref.path);
    if ("error" in p) errors.push({ path: ref.at, code: "invalid_path", message: p.error });
  }

  const start = def.start ?? def.nodes[0]?.id;
  if (def.nodes.length === 0) {
    errors.push({ path: "nodes", code: "no_nodes", message: "a workflow needs at least one node" });
  } else if (start === undefined || !ids.has(start)) {
    errors.push({ path: "start", code: "missing_start", message: def.start === undefined ? "no start node" : `start node "${def.start}" does not exist` });
  }

  const out = new Map<string, string[]>();
  def.edges.forEach((e, i) => {
    if (e.condition !== undefined) {
      const err = expressionError(e.condition);
      if (err) errors.push({ path: `edges[${i}].condition`, code: "invalid_expression", message: err });
    }
    if (!ids.has(e.from)) errors.push({ path: `edges[${i}].from`, code: "dangling_edge", message: `edge from missing node "${e.from}"` });
    if (!ids.has(e.to)) errors.push({ path: `edges[${i}].to`, code: "dangling_edge", message: `edge to missing node "${e.to}"` });
    const fromIdx = ids.get(e.from);
    const from = fromIdx === undefined ? undefined : def.nodes[fromIdx];
    const spec = from ? NODE_TYPES[canonicalType(from.type)] : undefined;
    if (spec) {
      if (spec.branches.length > 0 && (e.when === undefined || !spec.branches.includes(e.when))) {
        if (!(e.when === undefined && canonicalType(from!.type) === "agent.humanReview")) {
          errors.push({ path: `edges[${i}].when`, code: "invalid_branch", message: `edges out of "${e.from}" (${from!.type}) need when: ${spec.branches.map((b) => `"${b}"`).join(" or ")}` });
        }
      } else if (spec.branches.length === 0 && e.when !== undefined) {
        errors.push({ path: `edges[${i}].when`, code: "invalid_branch", message: `edges out of "${e.from}" (${from!.type}) take no "when"` });
      }
    }
    out.set(e.from, [...(out.get(e.from) ?? []), e.to]);
  });

  if (errors.length === 0 && start !== undefined) {
    const g = graphOf(def);
    // Cycles are fine when bounded: each must pass through a whileLoop or a node with maxVisits.
    const seen = new Set<number>();
    for (const n of def.nodes) {
      if (!g.cyclic.has(n.id)) continue;
      const comp = g.scc.get(n.id)!;
      if (seen.has(comp)) continue;
      seen.add(comp);
      const members = def.nodes.filter((m) => g.scc.get(m.id) === comp);
      const bounded = members.some((m) => canonicalType(m.type) === "whileLoop" || m.maxVisits !== undefined);
      if (!bounded) {
        errors.push({ path: "edges", code: "unbounded_cycle", message: `cycle ${members.map((m) => m.id).join(" → ")} → ${members[0]!.id} has no loop bound: route it through a whileLoop node or give one of its nodes maxVisits` });
      }
    }
    def.nodes.forEach((n, i) => {
      if (canonicalType(n.type) === "whileLoop" && !g.reach.get(n.id)!.has(n.id)) {
        errors.push({ path: `nodes[${i}]`, code: "loop_without_body", message: `whileLoop "${n.id}" has no path from its body back to itself` });
      }
      if (n.join !== undefined && typeof n.join === "object") {
        // Edges from one branching node with different labels are exclusive: at most one of them is taken.
        const incoming = g.incoming.get(n.id) ?? [];
        const sources = new Map<string, Set<string>>();
        for (const e of incoming) sources.set(e.from, (sources.get(e.from) ?? new Set()).add(e.when ?? ""));
        let possible = 0;
        for (const [from, labels] of sources) {
          const fromNode = def.nodes[ids.get(from)!]!;
          possible += (NODE_TYPES[canonicalType(fromNode.type)]?.branches.length ?? 0) > 0 ? Math.min(1, labels.size) : labels.size;
        }
        if (n.join.n > possible) {
          errors.push({ path: `nodes[${i}].join`, code: "join_never_fires", message: `node "${n.id}" waits for ${n.join.n} incoming branches but at most ${possible} can arrive` });
        }
      }
    });
    const reach = new Set<string>([start, ...g.reach.get(start)!]);
    def.nodes.forEach((n, i) => {
      if (!reach.has(n.id)) errors.push({ path: `nodes[${i}]`, code: "unreachable_node", message: `node "${n.id}" cannot be reached from the start node "${start}"` });
    });
  }

  if (opts.checkModel) {
    const refs: { ref: string; at: string }[] = [];
    const ac = (def as { agentConfig?: { model?: string; levels?: Record<string, string> } }).agentConfig;
    if (ac?.model) refs.push({ ref: ac.model, at: "agentConfig.model" });
    for (const [level, ref] of Object.entries(ac?.levels ?? {})) refs.push({ ref, at: `agentConfig.levels.${level}` });
    def.nodes.forEach((n, i) => {
      if (typeof n.config.model === "string" && canonicalType(n.type).startsWith("agent.")) refs.push({ ref: n.config.model, at: `nodes[${i}].config.model` });
    });
    for (const { ref, at } of refs) {
      const problem = opts.checkModel(ref);
      if (problem) errors.push({ path: at, code: "model_not_configured", message: problem });
    }
  }
  if (errors.length > 0) return { ok: false, errors: errors.map((e) => ({ ...e, path: prefixed(prefix, e.path) })) };
  return {
    ok: true,
    workflow: { ...def, start: start!, nodes: def.nodes.map((n) => ({ ...n, type: canonicalType(n.type) })) },
  };
}

function checkNodeConfig(type: string, config: Record<string, JsonValue>, at: string, opts: ValidateOptions, errors: ValidationIssue[]): void {
  for (const key of EXPRESSION_KEYS) {
    const v = config[key];
    if (typeof v === "string") {
      const err = expressionError(v);
      if (err) errors.push({ path: `${at}.config.${key}`, code: "invalid_expression", message: err });
    }
  }
  const tools: { name: string; path: string }[] = [];
  if (type === "tool") {
    const cfg = toolConfigSchema.parse(config);
    if ("tool" in cfg) tools.push({ name: cfg.tool, path: `${at}.config.tool` });
    else cfg.calls.forEach((c, k) => tools.push({ name: c.tool, path: `${at}.config.calls[${k}].tool` }));
  }
  if (type === "forEach") {
    const cfg = forEachConfigSchema.parse(config);
    if (cfg.tool) tools.push({ name: cfg.tool, path: `${at}.config.tool` });
    if (cfg.body) {
      const body = validateGraph(cfg.body, opts, `${at}.config.body`, bodySchema);
      if (!body.ok) errors.push(...body.errors);
    }
  }
  if (AGENT_TOOLS[type]) tools.push({ name: AGENT_TOOLS[type], path: `${at}.type` });
  if (type === "synthdev.state") tools.push({ name: "sandbox.run", path: `${at}.type` }, { name: "llm.chat", path: `${at}.type` });
  if (type.startsWith("agent.") && Array.isArray(config.tools)) {
    config.tools.forEach((t, k) => {
      if (typeof t === "string") tools.push({ name: t, path: `${at}.config.tools[${k}]` });
    });
  }
  if (opts.hasTool) {
    for (const t of tools) {
      if (!opts.hasTool(t.name)) errors.push({ path: t.path, code: "unknown_tool", message: `tool "${t.name}" is not registered (no worker serves it, or this tenant may not call it)` });
    }
  }
}

// Draft-07 (and 06) by default; a schema that names 2019-09 or 2020-12 in `$schema` gets its own dialect.
const ajvOptions = { allErrors: true, strict: false };
const ajv = new Ajv(ajvOptions);
const ajv2019 = new Ajv2019(ajvOptions);
const ajv2020 = new Ajv2020(ajvOptions);
function ajvFor(schema: unknown): Ajv {
  const named = typeof schema === "object" && schema !== null ? (schema as { $schema?: unknown }).$schema : undefined;
  if (typeof named === "string" && named.includes("2020-12")) return ajv2020;
  if (typeof named === "string" && named.includes("2019-09")) return ajv2019;
  return ajv;
}
const compiledSchemas = new Map<string, ValidateFunction>();

/**
 * A check of values against a JSON Schema, compiled once per schema: undefined when a value
 * matches, else its problems (`answer/days must be number`). Throws when the schema does not
 * compile. Draft-07 unless `$schema` names 2019-09 or 2020-12.
 */
export function jsonSchemaCheck(schema: object, dataVar = "value"): (value: unknown) => string | undefined {
  const fn = compileSchema(schema);
  return (value) => (fn(value) ? undefined : ajv.errorsText(fn.errors, { dataVar }));
}

function compileSchema(schema: unknown): ValidateFunction {
  const key = JSON.stringify(schema);
  let fn = compiledSchemas.get(key);
  if (!fn) {
    fn = ajvFor(schema).compile(schema as object);
    if (compiledSchemas.size > 500) compiledSchemas.delete(compiledSchemas.keys().next().value!);
    compiledSchemas.set(key, fn);
  }
  return fn;
}

function schemaError(schema: unknown): string | undefined {
  try {
    compileSchema(schema);
    return undefined;
  } catch (err) {
    return `not a valid JSON Schema: ${(err as Error).message}`;
  }
}

/** Checks an execution input against the definition's `inputSchema`; every violation, each with a path. */
export function validateInput(definition: Pick<WorkflowDefinition, "inputSchema">, input: unknown): ValidationIssue[] {
  if (definition.inputSchema === undefined) return [];
  const fn = compileSchema(definition.inputSchema);
  if (fn(input)) return [];
  return (fn.errors ?? []).map((e: ErrorObject) => ({
    path: `input${e.instancePath.replace(/\/([^/]+)/g, (_, seg: string) => (/^\d+$/.test(seg) ? `[${seg}]` : `.${seg}`))}`,
    code: "invalid_input",
    message: e.keyword === "required" ? `missing required property "${(e.params as { missingProperty: string }).missingProperty}"` : e.message ?? "invalid",
  }));
}

/** JSON Schema of the definition format, for the OpenAPI document. */
export const workflowDefinitionJsonSchema = z.toJSONSchema(workflowDefinitionSchema, { io: "input", unrepresentable: "any" });

/** Tool names a definition (valid or not) refers to: tool nodes, multi-call nodes and forEach, bodies included. */
export function referencedTools(definition: unknown): string[] {
  const out = new Set<string>();
  const walk = (d: unknown): void => {
    if (typeof d !== "object" || d === null) return;
    const nodes = (d as { nodes?: unknown }).nodes;
    if (!Array.isArray(nodes)) return;
    for (const n of nodes as { type?: unknown; config?: Record<string, unknown> }[]) {
      const c = n?.config;
      if (typeof c !== "object" || c === null) continue;
      if ((n.type === "tool" || n.type === "forEach") && typeof c.tool === "string") out.add(c.tool);
      const type = typeof n.type === "string" ? canonicalType(n.type) : "";
      if (AGENT_TOOLS[type]) out.add(AGENT_TOOLS[type]);
      if (type === "synthdev.state") {
        out.add("sandbox.run");
        out.add("llm.chat");
      }
      if (type.startsWith("agent.") && Array.isArray(c.tools)) for (const t of c.tools) if (typeof t === "string") out.add(t);
      if (n.type === "tool" && Array.isArray(c.calls)) for (const call of c.calls as { tool?: unknown }[]) if (typeof call?.tool === "string") out.add(call.tool);
      if (n.type === "forEach") walk(c.body);
    }
  };
  walk(definition);
  return [...out];
}

/** Validates with the tools a lookup knows (e.g. a registry answering asynchronously). */
export async function validateWorkflowWithTools(definition: unknown, has: (name: string) => Promise<boolean>, opts: Omit<ValidateOptions, "hasTool"> = {}): Promise<ValidationResult> {
  const names = referencedTools(definition);
  const known = new Set<string>();
  await Promise.all(names.map(async (n) => {
    if (await has(n)) known.add(n);
  }));
  return validateWorkflow(definition, { ...opts, hasTool: (n) => known.has(n) });
}
