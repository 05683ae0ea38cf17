/**
 * Definition validation. Reports every problem at once, each with a path into the
 * definition (`nodes[2].type`), a stable code and a message.
 */
import { z } from "zod";
import { Ajv } from "ajv";
import type { ErrorObject, ValidateFunction } from "ajv";
import { Ajv2019 } from "ajv/dist/2019.js";
import { Ajv2020 } from "ajv/dist/2020.js";
import { collectPaths, looksLikePath, parsePath, placeholderPaths } from "./path.ts";
import type { ParsedPath } from "./path.ts";
import type { Condition, Join, NodeDefinition, WorkflowDefinition } from "./model.ts";
import {
  AGENT_TOOLS, DEFAULT_MAX_STEPS, NODE_TYPES, PLANNED_NODE_TYPES, bodySchema, canonicalType, conditionConfigSchema, edgeSchema, joinSchema, llmConfigSchema, memoryReadConfigSchema, nodeSchema,
  promptConfigSchema, setVariableConfigSchema, subagentConfigSchema, toolConfigSchema, toolExecutorConfigSchema, toolLoopConfigSchema, whileLoopConfigSchema, workflowDefinitionSchema,
} from "./model.ts";
import { expressionError } from "./expr.ts";
import { synthdevAgentModel, synthdevMaterialSchema, synthdevStateConfigSchema } from "./synthdev.ts";
import type { SynthdevMaterial } from "./synthdev.ts";
import { backEdgeSources, cyclicComponents, dominators, graphOf, joinOf, loopBody, loopRegion, passNodes, reachAvoiding, reachableFrom, unboundedCycles } from "./graph.ts";
import type { Dominance, GraphInfo } from "./graph.ts";
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

/**
 * `warnings`: what the definition holds that the model does not know and that has no effect
 * (`unknown_field`, a typo such as `retries` for `retry`): at its top level and in its nodes
 * and edges. Saved as given; the answer to a create or update lists them.
 */
export type ValidationResult = { ok: true; workflow: WorkflowDefinition; warnings?: ValidationIssue[] } | { ok: false; errors: ValidationIssue[] };

/** Fields of `value` that `known` does not list, as `unknown_field` warnings at `at`. */
function unknownFields(value: unknown, known: ReadonlySet<string>, at: string, out: ValidationIssue[]): void {
  if (!isRecord(value)) return;
  for (const key of Object.keys(value)) {
    if (!known.has(key)) out.push({ path: at === "" ? key : `${at}.${key}`, code: "unknown_field", message: `"${key}" is not a field here and has no effect` });
  }
}
const NODE_FIELDS: ReadonlySet<string> = new Set(Object.keys(nodeSchema.shape));
const EDGE_FIELDS: ReadonlySet<string> = new Set(Object.keys(edgeSchema.shape));

function zodPath(path: PropertyKey[]): string {
  let out = "";
  for (const p of path) out += typeof p === "number" ? `[${p}]` : out === "" ? String(p) : `.${String(p)}`;
  return out;
}

/** Validates a workflow definition; on success returns it parsed, with defaults and canonical types. */
export function validateWorkflow(input: unknown, opts: ValidateOptions = {}): ValidationResult {
  return validateGraph(input, opts, "", workflowDefinitionSchema);
}

function prefixed(prefix: string, path: string): string {
  if (prefix === "") return path;
  if (path === "" || path === "(definition)") return prefix;
  return path.startsWith("[") ? `${prefix}${path}` : `${prefix}.${path}`;
}

/** `at` + a zod issue path, so that issues of one part of the definition keep pointing into it. */
function issuePath(at: string, path: PropertyKey[]): string {
  return prefixed(at, zodPath(path));
}

/** What the graph checks know of a node, also of one whose definition is broken elsewhere. */
interface GraphNode {
  id: string;
  index: number;
  /** The node, when its definition parsed. */
  node?: NodeDefinition;
  /** Canonical type, when it is a string. */
  type?: string;
  /** Whether the node bounds every cycle through it: maxVisits, or a broken node that might be a bound. A whileLoop bounds the cycles along its body edges (graphChecks). */
  bounded: boolean;
  /** Its `join`, also of a node broken elsewhere: undefined when left out, null when the join itself is broken. */
  join: Join | undefined | null;
}

/** An edge between two named nodes (its other fields may be broken). */
interface GraphEdge {
  index: number;
  from: string;
  to: string;
  /** The branch label, when it is a string. */
  when?: string;
  /** Its guard (`condition`), when it has one: the JSONata constant "true" or "false", or one that "varies". */
  guarded?: "true" | "false" | "varies";
}

/** Config fields the runtime always reads as a `$.path` (the schema makes them start with "$"). */
const PATH_FIELDS: Readonly<Record<string, readonly string[]>> = {
  delay: ["ms"],
  forEach: ["items"],
  "agent.llm": ["messages"],
  "agent.toolLoop": ["messages"],
  "agent.toolExecutor": ["toolCalls"],
  "agent.memory.read": ["agentId"],
  "agent.memory.write": ["agentId"],
  "agent.rag": ["agentId"],
};

/** Config texts whose `{{$.path}}` placeholders the runtime fills. */
const PLACEHOLDER_FIELDS: Readonly<Record<string, readonly string[]>> = {
  "agent.prompt": ["template"],
  "agent.llm": ["prompt", "system"],
  "agent.toolLoop": ["prompt", "system"],
  "agent.subagent": ["task"],
  "agent.memory.read": ["query"],
  "agent.memory.write": ["key", "content"],
  "agent.rag": ["query"],
  "agent.imageGen": ["prompt"],
};

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

type GraphSchema = typeof workflowDefinitionSchema | typeof bodySchema;

/**
 * Checks one graph (the workflow, or a forEach body) part by part, so that one broken part
 * hides nothing else: every top-level field, node and edge is parsed on its own, local checks
 * run on each part that parsed, and the graph checks run on every node and edge that names
 * its ends — each check only where a broken part cannot make it report a false problem.
 */
function validateGraph(input: unknown, opts: ValidateOptions, prefix: string, schema: GraphSchema): ValidationResult {
  if (!isRecord(input)) {
    const r = schema.safeParse(input);
    const issues = r.success ? [] : r.error.issues;
    return { ok: false, errors: issues.map((i) => ({ path: prefixed(prefix, zodPath(i.path) || "(definition)"), code: "invalid_shape", message: i.message })) };
  }
  const errors: ValidationIssue[] = [];
  const shapeIssues = (at: string, issues: readonly z.core.$ZodIssue[]): void => {
    for (const i of issues) errors.push({ path: issuePath(at, i.path) || "(definition)", code: "invalid_shape", message: i.message });
  };

  const top: Record<string, unknown> = {};
  for (const [key, field] of Object.entries(schema.shape)) {
    if (key === "nodes" || key === "edges") continue;
    const r = (field as z.ZodType).safeParse(input[key]);
    if (r.success) top[key] = r.data;
    else shapeIssues(key, r.error.issues);
  }

  // Nodes, each on its own.
  const nodesList = Array.isArray(input.nodes);
  if (!nodesList) shapeIssues("nodes", z.array(z.unknown()).safeParse(input.nodes).error?.issues ?? []);
  const rawNodes: unknown[] = nodesList ? (input.nodes as unknown[]) : [];
  let complete = nodesList;
  const parsed: { index: number; node: NodeDefinition }[] = [];
  const graphNodes = new Map<string, GraphNode>();
  rawNodes.forEach((raw, i) => {
    const r = nodeSchema.safeParse(raw);
    if (r.success) parsed.push({ index: i, node: r.data });
    else shapeIssues(`nodes[${i}]`, r.error.issues);
    const id = isRecord(raw) ? raw.id : undefined;
    if (typeof id !== "string") {
      complete = false;
      return;
    }
    const first = graphNodes.get(id);
    if (first) {
      errors.push({ path: `nodes[${i}].id`, code: "duplicate_node_id", message: `node id "${id}" is used more than once (first at nodes[${first.index}])` });
      return;
    }
    const rawType = isRecord(raw) && typeof raw.type === "string" ? canonicalType(raw.type) : undefined;
    const maxVisits = isRecord(raw) ? raw.maxVisits : undefined;
    const rawJoin = isRecord(raw) ? raw.join : undefined;
    const join = r.success ? r.data.join : rawJoin === undefined ? undefined : (joinSchema.safeParse(rawJoin).data ?? null);
    graphNodes.set(id, {
      id,
      index: i,
      ...(r.success ? { node: r.data } : {}),
      ...(rawType !== undefined ? { type: rawType } : {}),
      // A broken node counts as bounded when it may be meant as one: no check then blames a cycle through it.
      bounded: maxVisits !== undefined || (!r.success && rawType === undefined),
      join,
    });
  });

  // Fields with no effect: gathered here and from forEach bodies, reported only when the definition is valid.
  const warnings: ValidationIssue[] = [];
  const owned = engineKeys(parsed.map((p) => p.node));
  for (const { index, node } of parsed) checkNode(node, `nodes[${index}]`, opts, owned, errors, warnings);
  if (opts.hasTool && top.synthdev !== undefined) {
    for (const t of synthdevRoleTools(top.synthdev as SynthdevMaterial, parsed.map((p) => p.node))) {
      if (!opts.hasTool(t.name)) errors.push({ path: t.path, code: "unknown_tool", message: `tool "${t.name}" is not registered (no worker serves it, or this tenant may not call it)` });
    }
  }

  // Edges, each on its own.
  const edgesList = input.edges === undefined || Array.isArray(input.edges);
  if (!edgesList) {
    complete = false;
    shapeIssues("edges", z.array(z.unknown()).safeParse(input.edges).error?.issues ?? []);
  }
  const rawEdges: unknown[] = Array.isArray(input.edges) ? (input.edges as unknown[]) : [];
  const edges: GraphEdge[] = [];
  rawEdges.forEach((raw, i) => {
    const r = edgeSchema.safeParse(raw);
    if (!r.success) shapeIssues(`edges[${i}]`, comparisonIssues(raw, r.error.issues));
    const from = isRecord(raw) ? raw.from : undefined;
    const to = isRecord(raw) ? raw.to : undefined;
    if (r.success && r.data.condition !== undefined) checkCondition(r.data.condition, `edges[${i}].condition`, errors);
    if (typeof from !== "string" || typeof to !== "string") {
      complete = false;
      return;
    }
    if (!graphNodes.has(from)) errors.push({ path: `edges[${i}].from`, code: "dangling_edge", message: `edge from missing node "${from}"` });
    if (!graphNodes.has(to)) errors.push({ path: `edges[${i}].to`, code: "dangling_edge", message: `edge to missing node "${to}"` });
    if (!graphNodes.has(from) || !graphNodes.has(to)) return;
    const when = isRecord(raw) && typeof raw.when === "string" ? raw.when : undefined;
    const guard = isRecord(raw) ? raw.condition : undefined;
    const constant = typeof guard === "string" ? guard.trim() : undefined;
    const guarded: GraphEdge["guarded"] = guard === undefined ? undefined : constant === "true" || constant === "false" ? constant : "varies";
    edges.push({ index: i, from, to, ...(when !== undefined ? { when } : {}), ...(guarded !== undefined ? { guarded } : {}) });
    const source = graphNodes.get(from)!;
    const spec = source.node ? NODE_TYPES[canonicalType(source.node.type)] : undefined;
    if (!r.success || !spec) return;
    if (spec.branches.length > 0 && (r.data.when === undefined || !spec.branches.includes(r.data.when))) {
      if (!(r.data.when === undefined && source.type === "agent.humanReview")) {
        errors.push({ path: `edges[${i}].when`, code: "invalid_branch", message: `edges out of "${from}" (${source.node!.type}) need when: ${spec.branches.map((b) => `"${b}"`).join(" or ")}` });
      }
    } else if (spec.branches.length === 0 && r.data.when !== undefined) {
      errors.push({ path: `edges[${i}].when`, code: "invalid_branch", message: `edges out of "${from}" (${source.node!.type}) take no "when"` });
    }
  });

  for (const ref of collectPaths(top.output ?? {}, "output")) {
    const p = parsePath(ref.path);
    if ("error" in p) errors.push({ path: ref.at, code: "invalid_path", message: p.error });
  }

  // The start node.
  const first = rawNodes[0];
  const start = typeof top.start === "string" ? top.start : input.start === undefined && isRecord(first) && typeof first.id === "string" ? first.id : undefined;
  if (nodesList && rawNodes.length === 0) {
    errors.push({ path: "nodes", code: "no_nodes", message: "a workflow needs at least one node" });
  } else if (typeof top.start === "string" && !graphNodes.has(top.start)) {
    errors.push({ path: "start", code: "missing_start", message: `start node "${top.start}" does not exist` });
  }

  graphChecks([...graphNodes.values()], edges, start !== undefined && graphNodes.has(start) ? start : undefined, complete, errors);

  if (opts.checkModel) {
    const refs: { ref: string; at: string }[] = [];
    const ac = top.agentConfig as { model?: string; levels?: Record<string, string> } | undefined;
    if (ac?.model) refs.push({ ref: ac.model, at: "agentConfig.model" });
    for (const [level, ref] of Object.entries(ac?.levels ?? {})) refs.push({ ref, at: `agentConfig.levels.${level}` });
    for (const { index, node } of parsed) {
      if (typeof node.config.model === "string" && canonicalType(node.type).startsWith("agent.")) refs.push({ ref: node.config.model, at: `nodes[${index}].config.model` });
    }
    for (const { ref, at } of refs) {
      const problem = opts.checkModel(ref);
      if (problem) errors.push({ path: at, code: "model_not_configured", message: problem });
    }
  }
  const system = (top.agentConfig as { system?: unknown } | undefined)?.system;
  if (typeof system === "string") checkPlaceholders(system, "agentConfig.system", errors);
  if (top.inputSchema !== undefined) {
    const err = schemaError(top.inputSchema);
    if (err) errors.push({ path: "inputSchema", code: "invalid_input_schema", message: err });
    // An execution's input is always an object: a schema that names other types only could never be met.
    const type = isRecord(top.inputSchema) ? top.inputSchema.type : undefined;
    const types = typeof type === "string" ? [type] : Array.isArray(type) ? type : undefined;
    if (!err && types && !types.includes("object")) {
      errors.push({ path: "inputSchema.type", code: "invalid_input_schema", message: `an execution's input is an object; this schema allows only ${types.map((t) => JSON.stringify(t)).join(", ")}` });
    }
  }

  if (errors.length > 0) return { ok: false, errors: errors.map((e) => ({ ...e, path: prefixed(prefix, e.path) })) };
  const def = schema.parse(input) as z.infer<typeof workflowDefinitionSchema>;
  // Paths relative to this graph, as its errors are (a body's come with `nodes[i].config.body`).
  unknownFields(input, new Set(Object.keys(schema.shape)), "", warnings);
  rawNodes.forEach((raw, i) => unknownFields(raw, NODE_FIELDS, `nodes[${i}]`, warnings));
  rawEdges.forEach((raw, i) => unknownFields(raw, EDGE_FIELDS, `edges[${i}]`, warnings));
  def.nodes.forEach((n, i) => {
    // A child run is bounded by its deadline (its own limits.deadlineMs, or its parent's), not by a call's timeout.
    if (canonicalType(n.type) === "subworkflow" && n.timeoutMs !== undefined) {
      warnings.push({ path: `nodes[${i}].timeoutMs`, code: "no_effect", message: "timeoutMs does not bound a sub-workflow run and has no effect; give the child workflow limits.deadlineMs" });
    } else if (canonicalType(n.type) === "forEach" && n.timeoutMs !== undefined && n.config.tool === undefined) {
      warnings.push({ path: `nodes[${i}].timeoutMs`, code: "no_effect", message: "timeoutMs bounds each tool call of a forEach with a tool, not the child runs of one with a body or workflow, and has no effect here; give the child workflow limits.deadlineMs" });
    }
  });
  stepLimitWarnings(def, warnings);
  mutualLoopWarnings(def, warnings);
  const all = warnings.map((w) => ({ ...w, path: prefixed(prefix, w.path) }));
  return {
    ok: true,
    workflow: { ...def, start: start!, nodes: def.nodes.map((n) => ({ ...n, type: canonicalType(n.type) })) },
    ...(all.length > 0 ? { warnings: all } : {}),
  };
}

/**
 * A `whileLoop` whose passes may start more nodes than `limits.maxSteps` allows: its
 * `maxIterations` times the nodes of one pass, the loop and its whole body once each (an
 * estimate: a pass that takes one branch starts fewer, a loop nested in the body more). The
 * definition is valid — a loop may end early — but a run that goes round that often fails with
 * BATON_STEP_LIMIT, so the author is told.
 */
function stepLimitWarnings(def: z.infer<typeof workflowDefinitionSchema>, warnings: ValidationIssue[]): void {
  const limit = def.limits?.maxSteps ?? DEFAULT_MAX_STEPS;
  const loops = def.nodes.map((n, i) => ({ n, i })).filter(({ n }) => canonicalType(n.type) === "whileLoop");
  if (loops.length === 0) return;
  const g = graphOf(def);
  for (const { n, i } of loops) {
    const parsed = whileLoopConfigSchema.safeParse(n.config);
    if (!parsed.success) continue;
    const perPass = loopBody(g, n.id).size + 1;
    const starts = parsed.data.maxIterations * perPass;
    if (starts <= limit) continue;
    const which = def.limits?.maxSteps === undefined ? `the default limits.maxSteps (${limit})` : `limits.maxSteps (${limit})`;
    warnings.push({
      path: `nodes[${i}].config.maxIterations`,
      code: "step_limit",
      message: `whileLoop "${n.id}" may go round ${parsed.data.maxIterations} times over ${perPass} nodes (${starts} node starts), more than ${which} allows: a run that goes round that often fails with BATON_STEP_LIMIT; raise limits.maxSteps`,
    });
  }
}

/**
 * Two `whileLoop`s each in the other's body (neither nested in the other): a pass of one starts
 * a new run of the other unless that one started the first's current run (workflows.md, Loops,
 * "Loops each in the other's body"), so how often each goes round is hard to foresee. Valid,
 * but the author is told, once per pair, at the first of the two.
 */
function mutualLoopWarnings(def: z.infer<typeof workflowDefinitionSchema>, warnings: ValidationIssue[]): void {
  const loops = def.nodes.map((n, i) => ({ n, i })).filter(({ n }) => canonicalType(n.type) === "whileLoop");
  if (loops.length < 2) return;
  const g = graphOf(def);
  for (const [k, { n, i }] of loops.entries()) {
    const body = loopBody(g, n.id);
    for (const { n: m } of loops.slice(k + 1)) {
      if (m.id === n.id || !body.has(m.id) || !loopBody(g, m.id).has(n.id)) continue;
      warnings.push({
        path: `nodes[${i}]`,
        code: "mutual_loops",
        message: `whileLoops "${n.id}" and "${m.id}" are each in the other's body, so neither is inside the other: a pass of one starts a new run of the other only while that one did not make the first's run possible, so how often each goes round is hard to foresee; nest one loop inside the other instead`,
      });
    }
  }
}

/**
 * The issues of a field `condition` (an edge's guard, a whileLoop's config) that is an object
 * but no comparison: those of the comparison (`condition.op`: not one of the ops), where the
 * union of the two forms would only say that neither fits.
 */
function comparisonIssues(holder: unknown, issues: readonly z.core.$ZodIssue[]): z.core.$ZodIssue[] {
  const value = isRecord(holder) ? holder.condition : undefined;
  const union = (i: z.core.$ZodIssue): boolean => i.code === "invalid_union" && i.path.length === 1 && i.path[0] === "condition";
  if (!isRecord(value) || !issues.some(union)) return [...issues];
  const own = conditionConfigSchema.safeParse(value).error?.issues ?? [];
  return issues.flatMap((i) => (union(i) ? own.map((o) => ({ ...o, path: ["condition", ...o.path] })) : [i]));
}

/** A condition's JSONata parses, or its comparison's `$.path` operands do. */
function checkCondition(condition: Condition, at: string, errors: ValidationIssue[]): void {
  if (typeof condition === "string") {
    const err = expressionError(condition);
    if (err) errors.push({ path: at, code: "invalid_expression", message: err });
    return;
  }
  const refs = collectPaths(condition.left, `${at}.left`);
  if (condition.right !== undefined) collectPaths(condition.right, `${at}.right`, refs);
  for (const ref of refs) checkPath(ref.path, ref.at, errors);
}

function checkPath(path: string, at: string, errors: ValidationIssue[]): ParsedPath | undefined {
  const p = parsePath(path);
  if ("error" in p) {
    errors.push({ path: at, code: "invalid_path", message: p.error });
    return undefined;
  }
  return p;
}

function checkPlaceholders(text: string, at: string, errors: ValidationIssue[]): void {
  for (const path of placeholderPaths(text)) checkPath(path, at, errors);
}

/** A path the node writes to: it may neither replace the whole context nor write into `$.input`. */
function checkWritePath(path: string, at: string, what: string, errors: ValidationIssue[]): void {
  const p = checkPath(path, at, errors);
  if (p && (p.segments.length === 0 || p.segments[0] === "input")) {
    errors.push({ path: at, code: "invalid_path", message: `${what} "${path}" may not replace the context or write into $.input` });
  }
}

/** The node that makes the engine write a context key: its id and type, and what the engine writes there ("adds to the conversation"). */
export interface EngineKeyWriter {
  id: string;
  type: string;
  what: string;
}

/**
 * The context keys the engine writes (besides each node's output) for the nodes of one graph
 * that fit the node schema, each with the first node that makes it write there: a node with such
 * an id and no `output` is refused by validation. For importers, which name nodes.
 */
export function contextKeysWritten(nodes: readonly unknown[]): Map<string, EngineKeyWriter> {
  return engineKeys(nodes.flatMap((n) => nodeSchema.safeParse(n).data ?? []));
}

/**
 * The context keys the engine writes for the nodes of one graph (besides each node's output),
 * each with who writes it: the conversation at `$.messages` (agent nodes that add to it), the
 * tool calls of an LLM answer at `$.toolCalls`, a toolExecutor's results at `$.toolResults`, a
 * SynthDev run's state at `$.synthdev`. A node with such an id and no `output` would collide.
 */
function engineKeys(nodes: readonly NodeDefinition[]): Map<string, EngineKeyWriter> {
  const keys = new Map<string, EngineKeyWriter>();
  const add = (key: string, n: NodeDefinition, what: string): void => {
    if (!keys.has(key)) keys.set(key, { id: n.id, type: canonicalType(n.type), what });
  };
  // A conversation kept at another path (config.messages) is the definition's own choice.
  const atMessages = (path: string | undefined): boolean => {
    const p = parsePath(path ?? "$.messages");
    return !("error" in p) && p.segments[0] === "messages";
  };
  for (const n of nodes) {
    const c = n.config;
    switch (canonicalType(n.type)) {
      case "agent.prompt":
        if (promptConfigSchema.safeParse(c).data?.role !== undefined) add("messages", n, "adds to the conversation");
        break;
      case "agent.llm": {
        const cfg = llmConfigSchema.safeParse(c).data;
        if (cfg?.append) {
          if (atMessages(cfg.messages)) add("messages", n, "adds to the conversation");
          add("toolCalls", n, "puts the tool calls of its answer");
        }
        break;
      }
      case "agent.toolLoop": {
        const cfg = toolLoopConfigSchema.safeParse(c).data;
        if (cfg?.append && atMessages(cfg.messages)) add("messages", n, "adds to the conversation");
        break;
      }
      case "agent.toolExecutor": {
        if (toolExecutorConfigSchema.safeParse(c).data?.append) add("messages", n, "adds to the conversation");
        add("toolResults", n, "puts the results of its calls");
        break;
      }
      case "agent.memory.read":
        if (memoryReadConfigSchema.safeParse(c).data?.inject) add("messages", n, "adds to the conversation");
        break;
      case "agent.subagent":
        if (subagentConfigSchema.safeParse(c).data?.append) add("messages", n, "adds to the conversation");
        break;
      case "synthdev.state":
        add("synthdev", n, "keeps the SynthDev run's state");
        break;
    }
  }
  return keys;
}

/** The checks of one node that parsed: its type, config, paths and tools. */
function checkNode(
  n: NodeDefinition, at: string, opts: ValidateOptions, owned: ReadonlyMap<string, EngineKeyWriter>, errors: ValidationIssue[], warnings: ValidationIssue[],
): void {
  const type = canonicalType(n.type);
  const spec = NODE_TYPES[type];
  if (!spec) {
    if (PLANNED_NODE_TYPES.includes(type)) {
      errors.push({ path: `${at}.type`, code: "unsupported_node_type", message: `node type "${n.type}" is not available in this version of Baton` });
    } else {
      errors.push({ path: `${at}.type`, code: "unknown_node_type", message: `unknown node type "${n.type}"; known types: ${Object.keys(NODE_TYPES).join(", ")}` });
    }
  } else {
    const c = spec.config.safeParse(n.config);
    // A forEach body is checked as a graph of its own below, part by part.
    const issues = c.success ? [] : comparisonIssues(type === "whileLoop" ? n.config : undefined, c.error.issues)
      .filter((i) => !(type === "forEach" && i.path[0] === "body" && isRecord(n.config.body)));
    for (const issue of issues) {
      errors.push({ path: `${at}.config${issue.path.length ? "." + zodPath(issue.path) : ""}`, code: "invalid_config", message: issue.message });
    }
    if (issues.length === 0) checkNodeConfig(type, n.config, at, opts, errors);
    if (type === "forEach" && isRecord(n.config.body)) {
      const body = validateGraph(n.config.body, opts, `${at}.config.body`, bodySchema);
      if (!body.ok) errors.push(...body.errors);
      else if (body.warnings) warnings.push(...body.warnings);
    }
  }
  const strict = PATH_FIELDS[type] ?? [];
  for (const key of strict) {
    const v = n.config[key];
    if (typeof v === "string" && v.startsWith("$")) checkPath(v, `${at}.config.${key}`, errors);
  }
  for (const key of PLACEHOLDER_FIELDS[type] ?? []) {
    const v = n.config[key];
    if (typeof v === "string") checkPlaceholders(v, `${at}.config.${key}`, errors);
  }
  // Expression keys hold JSONata when they are text; a whileLoop's `condition` may also be a comparison with paths.
  const configPaths = Object.entries(n.config).filter(([k, v]) => !(EXPRESSION_KEYS.has(k) && typeof v === "string") && k !== "body" && !strict.includes(k));
  for (const ref of collectPaths(n.input ?? {}, `${at}.input`).concat(collectPaths(Object.fromEntries(configPaths), `${at}.config`))) {
    checkPath(ref.path, ref.at, errors);
  }
  if (n.output !== undefined) checkWritePath(n.output, `${at}.output`, "output path", errors);
  else if (n.id === "input") {
    errors.push({ path: `${at}.id`, code: "invalid_path", message: `node "input" would write its output to $.input, the execution's input: give it another id, or an output path` });
  } else if (owned.has(n.id)) {
    const w = owned.get(n.id)!;
    errors.push({ path: `${at}.id`, code: "invalid_path", message: `node "${n.id}" would write its output to $.${n.id}, where ${w.type} node "${w.id}" ${w.what}: give it another id, or an output path` });
  }
  if (n.idempotencyKey !== undefined && looksLikePath(n.idempotencyKey)) checkPath(n.idempotencyKey, `${at}.idempotencyKey`, errors);
}

/** Nodes the searches of the n-of join bound may visit in all (see graphChecks). */
const BETWEEN_BUDGET = 4_000_000;
/** How far up the dominator tree from a join's sources the n-of bound looks for a branching node. */
const CONTROLLER_DEPTH = 16;

/**
 * Checks that need the graph: cycles without a loop bound, loops without a body, unreachable
 * nodes and joins that never fire. `complete` is false when some node has no id or some edge
 * does not name both ends: then only the cycle check runs (a cycle among the known parts is
 * a cycle of the whole); the others could blame what a broken part would have provided.
 */
function graphChecks(nodes: GraphNode[], edges: GraphEdge[], start: string | undefined, complete: boolean, errors: ValidationIssue[]): void {
  const byId = new Map(nodes.map((n) => [n.id, n]));
  const plain = { nodes: nodes.map((n) => n.id), edges };
  // A whileLoop counts the passes along its body edges (and unlabelled ones, taken on every
  // pass too); leaving by `exit` counts nothing, so a cycle back through it that way has no bound.
  const counted = (e: GraphEdge): boolean => byId.get(e.from)?.type === "whileLoop" && e.when !== "exit";
  const out = new Map<string, GraphEdge[]>();
  for (const e of edges) {
    let o = out.get(e.from);
    if (!o) out.set(e.from, (o = []));
    o.push(e);
  }
  for (const comp of unboundedCycles(plain, (id) => byId.get(id)!.bounded, counted)) {
    const cycle = shortestCycle(comp, out);
    const more = comp.length > cycle.length ? ` (and more cycles among ${comp.map((id) => `"${id}"`).join(", ")})` : "";
    errors.push({
      path: "edges",
      code: "unbounded_cycle",
      message: `cycle ${[...cycle, cycle[0]].join(" → ")}${more} has no loop bound: route it through a whileLoop node or give one of its nodes maxVisits`,
    });
  }
  if (!complete) return;
  const cyclic = new Set(cyclicComponents(plain).flat());
  for (const n of nodes) {
    if (n.node && n.type === "whileLoop" && !cyclic.has(n.id)) {
      errors.push({ path: `nodes[${n.index}]`, code: "loop_without_body", message: `whileLoop "${n.id}" has no path from its body back to itself` });
    }
  }
  if (start === undefined) return;
  const reach = reachableFrom(plain, start);
  for (const n of nodes) {
    if (!reach.has(n.id)) errors.push({ path: `nodes[${n.index}]`, code: "unreachable_node", message: `node "${n.id}" cannot be reached from the start node "${start}"` });
  }
  // Each node's join as the engine runs it: its own, else `any` at a loop head and `all` elsewhere
  // (null: its join is broken, so it is not checked, and counts as running on any edge).
  const g = graphOf({ nodes, edges });
  const joinAt = new Map(nodes.map((n) => [n.id, n.join === null ? null : joinOf(g, start, n.id, n.join)]));
  const joins = nodes.filter((n) => reach.has(n.id) && joinAt.get(n.id) !== null && joinAt.get(n.id) !== "any");
  if (joins.length === 0) return;
  const dom = dominators(plain, start);
  const incoming = new Map<string, GraphEdge[]>();
  const outgoing = new Map<string, GraphEdge[]>();
  for (const e of edges) {
    let i = incoming.get(e.to);
    if (!i) incoming.set(e.to, (i = []));
    i.push(e);
    let o = outgoing.get(e.from);
    if (!o) outgoing.set(e.from, (o = []));
    o.push(e);
  }
  // For the bound of n-of joins: the nodes on the ways from an acyclic branching node `c` to a
  // node `t` it dominates. Every node on such a way is dominated by `c` (a way around `c` to one
  // of them would go on to `t` without `c`), so a backward search from `t` that stays among the
  // nodes `c` dominates finds them, visiting only what lies between the two. Each search is
  // kept; past a budget of nodes visited in all, an unanswered question counts every branch,
  // which can only make the bound larger: a join that can never fire may then go unreported
  // (at run time it is skipped), but none is refused wrongly.
  const betweenCache = new Map<string, Set<string>>();
  let budget = BETWEEN_BUDGET;
  const between = (c: string, t: string): Set<string> | undefined => {
    const key = `${c}\u0000${t}`;
    let r = betweenCache.get(key);
    if (r) return r;
    if (budget <= 0) return undefined;
    r = new Set<string>([t]);
    const todo = [t];
    while (todo.length > 0) {
      for (const e of incoming.get(todo.pop()!) ?? []) {
        const u = e.from;
        if (u === c || r.has(u) || dom.get(u)?.has(c) !== true) continue;
        r.add(u);
        todo.push(u);
      }
    }
    budget -= r.size;
    betweenCache.set(key, r);
    return r;
  };
  const reported = new Set<string>();
  for (const j of joins) {
    const join = joinAt.get(j.id)!;
    if (join === "any") continue;
    const into = incoming.get(j.id) ?? [];
    // An edge from a node that only runs after j (j dominates it) is decided only after j ran: j's first run cannot wait for it.
    const late = j.id === start ? [] : into.filter((e) => dom.get(e.from)?.has(j.id) === true);
    const lateNote = late.length === 0 ? "" : ` (the edge from "${late[0]!.from}" closes a loop back to "${j.id}", so it is decided only after "${j.id}" ran)`;
    if (j.id === start) {
      const again = startRound(j.id, join, into, byId, incoming, outgoing, g, joinAt);
      if (again !== undefined) {
        reported.add(j.id);
        errors.push({ path: `nodes[${j.index}].join`, code: "join_never_fires", message: again });
        continue;
      }
    }
    if (join === "all") {
      if (late.length > 0) {
        reported.add(j.id);
        errors.push({
          path: `nodes[${j.index}].join`,
          code: "join_never_fires",
          message: `node "${j.id}" has join "all", so it waits for every incoming edge${lateNote}: it never runs; leave join out (a loop head runs on any incoming edge) or use "any"`,
        });
      }
      continue;
    }
    const early = into.filter((e) => !late.includes(e));
    // The branching nodes that can make these edges exclude each other dominate their sources
    // (or are one): the sources and their nearest dominators, up to CONTROLLER_DEPTH up the
    // tree, in definition order. A controller further up is not looked at: the bound can only
    // be larger for it (the check may miss a join, never refuse one wrongly), and a definition
    // of thousands of branches and joins is checked in time linear in its size.
    const candidates = new Set<GraphNode>();
    for (const e of early) {
      let v: string | undefined = e.from;
      for (let k = 0; v !== undefined && k < CONTROLLER_DEPTH; k++) {
        const c = byId.get(v);
        if (c) candidates.add(c);
        const up = dom.idom(v);
        v = up === v ? undefined : up;
      }
    }
    const bound = exclusiveBound(early, [...candidates].sort((x, y) => x.index - y.index), outgoing, dom, cyclic, between);
    if (join.n > bound.possible) {
      reported.add(j.id);
      const why = bound.controller === undefined ? "" : ` (they come from branches of "${bound.controller}" that exclude each other)`;
      errors.push({
        path: `nodes[${j.index}].join`,
        code: "join_never_fires",
        message: `node "${j.id}" waits for ${join.n} incoming branches but at most ${bound.possible} can arrive${late.length > 0 ? " before its first run" : ""}${why}${lateNote}`,
      });
    }
  }
  // Joins that wait on each other: in a cycle none of whose nodes comes before the others
  // (s → x, s → y, x ⇄ y), explicit joins can each wait for an edge from the other, which no
  // dominator shows. A node can run a first time once its join can be met by nodes that can
  // run before it; every condition is taken as possibly true, and each node joins as the
  // engine has it join (a loop head without `join` on any edge), so what is found here can
  // never run.
  // A worklist: each node counts its incoming edges from nodes found runnable so far.
  const needs = new Map<string, number>();
  for (const n of nodes) {
    if (!reach.has(n.id)) continue;
    const from = (incoming.get(n.id) ?? []).filter((e) => reach.has(e.from)).length;
    const join = joinAt.get(n.id);
    needs.set(n.id, join === "all" ? Math.max(from, 1) : typeof join === "object" && join !== null ? join.n : 1);
  }
  const met = new Map<string, number>();
  const runnable = new Set<string>([start]);
  const work = [start];
  while (work.length) {
    const u = work.pop()!;
    for (const e of outgoing.get(u) ?? []) {
      if (runnable.has(e.to) || !needs.has(e.to)) continue;
      const m = (met.get(e.to) ?? 0) + 1;
      met.set(e.to, m);
      if (m >= needs.get(e.to)!) {
        runnable.add(e.to);
        work.push(e.to);
      }
    }
  }
  // A node left out by default only where the wait starts: on a cycle of nodes that cannot run,
  // none of them reported already (what follows such a cycle runs once it is mended).
  const stuck = [...reach].filter((id) => !runnable.has(id));
  const stuckSet = new Set(stuck);
  const starts = new Set<string>();
  for (const comp of cyclicComponents({ nodes: stuck, edges: edges.filter((e) => stuckSet.has(e.from) && stuckSet.has(e.to)) })) {
    if (!comp.some((id) => reported.has(id))) for (const id of comp) starts.add(id);
  }
  for (const j of joins) {
    if (runnable.has(j.id) || reported.has(j.id)) continue;
    const explicit = j.join !== undefined;
    if (!explicit && !starts.has(j.id)) continue;
    reported.add(j.id);
    const waits = (incoming.get(j.id) ?? []).filter((e) => reach.has(e.from) && !runnable.has(e.from)).map((e) => `"${e.from}"`);
    errors.push({
      path: `nodes[${j.index}].join`,
      code: "join_never_fires",
      message: explicit
        ? `node "${j.id}" never runs: its join waits for edges from ${waits.join(", ")}, which wait, in turn, for it (joins that wait on each other); leave join out or use "any" on one of them`
        : `node "${j.id}" never runs: it joins as "all" (the default; it is no loop head), so it waits for edges from ${waits.join(", ")}, which wait, in turn, for it; give it join: "any"`,
    });
  }
  branchWaits({ nodes, edges, start, reach, joinAt, dom, g, incoming, outgoing, byId, reported, errors });
}

/** Outcomes {@link branchWaits} tries per join and round, and walks of the graph it takes in all. */
const OUTCOMES_PER_JOIN = 256;
const BRANCH_WAIT_BUDGET = 4_000_000;

/**
 * What a whileLoop's condition can make it do on its first visit, and on a later visit of the
 * same run of it (after it went round its body at least once, so its count goes on), as the
 * engine decides: with `go` its condition and `i` its count, `go && i >= maxIterations` fails
 * (`onLimit: "fail"`) or exits, else `go` takes the body and `!go` the exit. A condition that only
 * counts (`$iteration < k`, `true`, `false`) decides by the count alone; any other may go either
 * way on any visit. `later` is empty when the loop never goes round; `passes`: how often it goes
 * round its body before it can go out on a later visit (at the least).
 */
function loopVisits(node: NodeDefinition | undefined): { first: readonly ("body" | "exit")[]; later: readonly ("body" | "exit")[]; passes: number } {
  const config = node?.config ?? {};
  const max = typeof config.maxIterations === "number" ? config.maxIterations : 1;
  const exitAtLimit = config.onLimit === "exit";
  const condition = config.condition;
  const text = typeof condition === "string" ? condition.trim() : undefined;
  const m = text === undefined ? null : /^\$iteration\s*(<=?)\s*(\d+)$/.exec(text);
  // k: the count below which the condition holds (Infinity for "true").
  const k = text === "true" ? Infinity : text === "false" ? 0 : m ? Number(m[2]) + (m[1] === "<=" ? 1 : 0) : undefined;
  if (k === undefined) return { first: ["body", "exit"], later: max >= 2 ? ["body", "exit"] : ["exit"], passes: 1 };
  if (k === 0) return { first: ["exit"], later: [], passes: 0 };
  // Counts 1, 2, … after going round: the body while below k and the limit, the exit at k (or at the limit with onLimit "exit").
  const later: ("body" | "exit")[] = [];
  if (k >= 2 && max >= 2) later.push("body");
  if (k <= max || exitAtLimit) later.push("exit");
  return { first: ["body"], later, passes: Math.min(k, max) };
}

/**
 * Joins that wait on each other for some outcome of the branches before them. A node `v` whose
 * join needs more than one edge waits for an edge from `w`, a node of its cycle, and `w` can run
 * before `v` only on a way in that does not pass through `v`. For an outcome of the conditions,
 * reviews, whileLoops and edge guards, a fixpoint over the joins as the engine runs them tells
 * what runs while `v` has not and what is skipped; when `v` is reached for sure and waits for a
 * node that neither runs nor is skipped and that `v` leads to through such nodes (each waits for
 * an edge from the one before; a set of waiting nodes nothing reached leads to is skipped once
 * the run is quiet), the run would stop with them waiting (BATON_JOIN_NEVER_FIRED). An n-join
 * waits so when fewer than n of its edges can be taken before it runs and the edges that surely
 * arrive and those it would wait for make up n.
 *
 * This is asked of `v`'s first run, and of each later round of a cycle `v` is in: a round
 * starts at the node an edge goes back to, `h`, with its region reset (loopRegion), and an edge
 * into the region from a node before `h` counts for the first round only (not a whileLoop's exit
 * edge, left open while it iterates), so the region's other nodes are reached from `h` alone.
 *
 * An outcome gives each branching node on the ways to the nodes `v` waits for one branch, and
 * each guard there, and on the edges into `v`, holds or not (a constant guard, "true" or "false",
 * as it says; a whileLoop whose condition only counts, `$iteration < 3`, goes the way its first
 * visit goes). A node that decides so must run at most once before `v`: it is on no cycle the
 * outcome leaves open that does not pass through `v` (else next time round it may decide
 * otherwise), but for a guard on an edge out of its node's cycle, which may fail every time
 * round. Outcomes are tried one by one, up to {@link OUTCOMES_PER_JOIN} per join and round, and
 * within {@link BRANCH_WAIT_BUDGET} edges walked in all (each join costs a few walks of the
 * graph): beyond them a join is not refused. A way to `v` counts only through nodes that cannot
 * be skipped with an edge in taken (an n-join of two or more only when n edges from the way
 * reach it). A whileLoop in a round, and a `branching: "first"` node, are taken to go every way;
 * so is a loop that goes round before `v` runs, but for its going out on a later visit when its
 * passes leave nothing behind ({@link loopVisits}, `closed`, `goesRound`: it then ends as going
 * out at once), also as the head of a round its body comes back to. What is found is a run the definition allows (every
 * branch and guard taken to go either way, each on its own, every cycle to go round) in which
 * the join never fires.
 */
function branchWaits(c: {
  nodes: GraphNode[];
  edges: GraphEdge[];
  start: string;
  reach: ReadonlySet<string>;
  joinAt: ReadonlyMap<string, Join | null>;
  dom: Dominance;
  g: GraphInfo;
  incoming: ReadonlyMap<string, GraphEdge[]>;
  outgoing: ReadonlyMap<string, GraphEdge[]>;
  byId: ReadonlyMap<string, GraphNode>;
  reported: Set<string>;
  errors: ValidationIssue[];
}): void {
  const { start, reach, joinAt, dom, g, incoming, outgoing, byId, reported, errors } = c;
  const scc = new Map<string, number>();
  cyclicComponents({ nodes: c.nodes.map((n) => n.id), edges: c.edges }).forEach((comp, k) => {
    for (const id of comp) scc.set(id, k);
  });
  /** An n-join of two or more, which may be skipped with an edge into it taken: no way the check counts on passes it. */
  const mayDrop = (id: string): boolean => {
    const j = joinAt.get(id);
    return j === null || (typeof j === "object" && j !== undefined && j.n > 1);
  };
  const labelOf = (e: GraphEdge): string | undefined => e.when ?? (byId.get(e.from)?.type === "agent.humanReview" ? "approved" : undefined);
  let budget = BRANCH_WAIT_BUDGET;
  const domTaken = dominators({ nodes: c.nodes.map((n) => n.id), edges: c.edges.filter((e) => e.guarded !== "false") }, start);

  /**
   * Whether whileLoop `l`'s passes leave nothing behind outside its body once it exits: every
   * edge out of its body, and its own edges but the exit ones, go to its body or to it. A pass
   * then runs only nodes that the next pass resets and the exit skips, so going round and then
   * out ends as going out at once does (but for the context, which conditions are taken to read
   * either way anyway).
   */
  const closedCache = new Map<string, boolean>();
  const closed = (l: string): boolean => {
    let r = closedCache.get(l);
    if (r !== undefined) return r;
    const body = loopBody(g, l);
    const within = (e: GraphEdge): boolean => e.to === l || body.has(e.to);
    r = (outgoing.get(l) ?? []).every((e) => e.when === "exit" || within(e)) && [...body].every((u) => (outgoing.get(u) ?? []).every(within));
    budget -= body.size;
    closedCache.set(l, r);
    return r;
  };
  /**
   * Whether whileLoop `l` can go round its body as often as it must before it goes out on a later
   * visit: no cycle among its body's nodes (each pass visits each of them once at most, and none
   * goes round a cycle of its own until its bound fails the run), no `maxVisits` that those visits
   * exceed (the loop's own counts its first visit too; a body node's counts per pass unless it is
   * also on a cycle through the loop's exit: {@link passNodes}), and a way from its body edges
   * back to it through its body, each node of which runs on the one edge of the way (a join "any"
   * or of one, or its only edge in) and takes the next one (a condition or review on that branch,
   * a whileLoop on a branch its first visit can take, a `branching: "first"` node only when the
   * edges listed before are guarded; no edge guarded "false").
   */
  const roundCache = new Map<string, boolean>();
  const goesRound = (l: string): boolean => {
    let r = roundCache.get(l);
    if (r !== undefined) return r;
    const body = loopBody(g, l);
    const passes = loopVisits(byId.get(l)?.node).passes;
    const bound = (u: string): number => byId.get(u)?.node?.maxVisits ?? Infinity;
    const perPass = passNodes(g, l);
    budget -= body.size;
    if (
      passes + 1 > bound(l) ||
      [...body].some((u) => byId.get(u)?.node === undefined || (!perPass.has(u) && passes > bound(u))) ||
      cyclicComponents({ nodes: [...body], edges: c.edges.filter((e) => body.has(e.from) && body.has(e.to)) }).length > 0
    ) {
      roundCache.set(l, false);
      return false;
    }
    const follows = (e: GraphEdge): boolean => {
      if (e.guarded === "false") return false;
      const from = byId.get(e.from);
      if (from?.node?.branching === "first") {
        const out = outgoing.get(e.from) ?? [];
        if (!out.slice(0, out.indexOf(e)).every((x) => x.guarded === "varies" || x.guarded === "false")) return false;
      }
      if (e.from === l) return e.when !== "exit";
      if (from?.type === "whileLoop") return e.when === undefined || (loopVisits(from.node).first as readonly string[]).includes(e.when);
      return true;
    };
    const single = (u: string): boolean => {
      const j = joinAt.get(u);
      if (j === null || j === undefined) return false;
      return j === "any" || (typeof j === "object" && j.n <= 1) || (incoming.get(u) ?? []).filter((e) => reach.has(e.from)).length === 1;
    };
    r = false;
    const seen = new Set<string>();
    const todo = [l];
    while (todo.length > 0 && !r) {
      for (const e of outgoing.get(todo.pop()!) ?? []) {
        budget--;
        if (!follows(e)) continue;
        if (e.to === l) {
          r = true;
          break;
        }
        if (!body.has(e.to) || seen.has(e.to) || !single(e.to)) continue;
        seen.add(e.to);
        todo.push(e.to);
      }
    }
    roundCache.set(l, r);
    return r;
  };

  /** Whether `v`, run from `root` with the edges `removed` dead, can wait for ever; the error when it can. */
  /**
   * `round.from`: the round's edge back comes from there, before `v` ran (so it must be reached without `v`).
   * `round.out`: `round.h` is a whileLoop whose body the edge back comes from (the round goes on its
   * count), and that can go out on this visit as it would on its first (closed, goesRound).
   */
  const check = (v: string, vn: GraphNode, join: "all" | { n: number }, root: string, removed: ReadonlySet<GraphEdge>, round?: { h: string; entry?: GraphEdge; from?: string; out?: boolean }): ValidationIssue | undefined => {
    const into = (incoming.get(v) ?? []).filter((e) => reach.has(e.from) && !removed.has(e));
    // An edge from a node after `v` (a loop's way back) is decided only after `v` ran: another check's concern.
    const late = (e: GraphEdge): boolean => e.from === v || dom.get(e.from)?.has(v) === true;
    const waitsOn = new Set(into.filter((e) => !late(e) && scc.get(e.from) === scc.get(v)).map((e) => e.from));
    if (waitsOn.size === 0 || budget <= 0) return undefined;
    budget -= 3 * c.edges.length;
    // The branching nodes and guards on the ways from the start to those nodes that avoid `v`.
    const next = (u: string): string[] => (outgoing.get(u) ?? []).filter((e) => !removed.has(e)).map((e) => e.to);
    const fwd = reachAvoiding([start, root], next, v);
    const back = reachAvoiding([...waitsOn], (u) => (incoming.get(u) ?? []).filter((e) => !removed.has(e)).map((e) => e.from), v);
    const relevant = new Set([...fwd].filter((u) => back.has(u)));
    // "*": every way (each edge of the node live), as a node without a choice.
    const choices: { id: string; options: readonly string[] }[] = [];
    const guards: GraphEdge[] = [];
    // WhileLoops whose exit in an outcome comes on a later visit, after going round their body.
    const later = new Set<string>();
    for (const u of relevant) {
      const n = byId.get(u);
      if (n?.node && n.node.branching !== "first") {
        if (n.type === "condition" || n.type === "agent.humanReview") choices.push({ id: u, options: NODE_TYPES[n.type]!.branches });
        if (n.type === "whileLoop" && round === undefined) {
          // The way its first visit goes; and out after going round its body, when that is as going out at once.
          const visits = loopVisits(n.node);
          const options = [...visits.first];
          if (!options.includes("exit") && visits.later.includes("exit") && !loopBody(g, u).has(v) && closed(u) && goesRound(u)) {
            options.push("exit");
            later.add(u);
          }
          choices.push({ id: u, options });
        } else if (n.type === "whileLoop" && u === round?.h && round.out === true) {
          // The round's head on a later visit of the same run of it: out, after going round its body,
          // when that ends as going out at once would; else every way, as any whileLoop in a round
          // (not in a round that only this visit tells from the first run: see the caller).
          const options = [...(removed.size > 0 ? ["*"] : []), "exit"];
          later.add(u);
          choices.push({ id: u, options });
        }
      }
      for (const e of outgoing.get(u) ?? []) if (e.guarded === "varies" && (relevant.has(e.to) || e.to === v) && !removed.has(e)) guards.push(e);
    }
    // The guards of the other edges into `v` decide how many can arrive too.
    for (const e of into) if (e.guarded === "varies" && fwd.has(e.from) && !guards.includes(e)) guards.push(e);
    let outcomes = 2 ** guards.length;
    for (const ch of choices) outcomes *= ch.options.length;
    if (outcomes > OUTCOMES_PER_JOIN) return undefined;
    for (let k = 0; k < outcomes && budget > 0; k++) {
      // Outcome k: a branch per choice, a holding or failing guard per guarded edge.
      const taken = new Map<string, string>();
      let rest = k;
      for (const ch of choices) {
        const b = ch.options[rest % ch.options.length]!;
        if (b !== "*") taken.set(ch.id, b);
        rest = Math.floor(rest / ch.options.length);
      }
      const failing = new Set<GraphEdge>();
      for (const e of guards) {
        if (rest % 2 === 1) failing.add(e);
        rest = Math.floor(rest / 2);
      }
      const live = (e: GraphEdge): boolean => {
        if (removed.has(e) || failing.has(e) || e.guarded === "false") return false;
        const b = taken.get(e.from);
        return b === undefined || labelOf(e) === b;
      };
      // What can run while `v` has not, and what is skipped: a fixpoint over the joins as the
      // engine runs them, from the start (and the round's first node). A node runs once its
      // join can be met by live edges from nodes that run (for `all`, every edge in decided: from
      // a node that runs, or is skipped); it is skipped once too few edges in could still be
      // taken (those from nodes that run, and those from undecided nodes that are no loop's way
      // back to it). Whatever is left waits: each such node waits for an edge from another.
      const runs = new Set<string>([start, root]);
      const skipped = new Set<string>();
      const back = (e: GraphEdge): boolean => dom.get(e.from)?.has(e.to) === true;
      for (let more = true; more && budget > 0; ) {
        more = false;
        for (const n of c.nodes) {
          const u = n.id;
          if (u === v || runs.has(u) || skipped.has(u) || !reach.has(u)) continue;
          const j = joinAt.get(u);
          if (j === null || j === undefined) continue;
          const ins = incoming.get(u) ?? [];
          budget -= ins.length;
          const fired = ins.filter((e) => runs.has(e.from) && live(e)).length;
          const open = ins.filter((e) => !runs.has(e.from) && !skipped.has(e.from));
          const need = j === "all" || j === "any" ? 1 : j.n;
          if (j === "all" ? fired >= 1 && open.length === 0 : fired >= need) runs.add(u);
          else if (fired + open.filter((e) => !back(e)).length < need) skipped.add(u);
          else continue;
          more = true;
        }
      }
      if ([...waitsOn].every((w) => runs.has(w) || skipped.has(w)) || (round?.from !== undefined && !runs.has(round.from))) continue;
      // A node that decides before `v` must do so once: it is on no cycle the outcome leaves open that avoids `v`.
      const cycling = c.edges.filter((e) => runs.has(e.from) && runs.has(e.to) && live(e));
      budget -= cycling.length;
      const again = new Set(cyclicComponents({ nodes: [...runs], edges: cycling }).flat());
      if ([...taken.keys()].some((id) => again.has(id) && runs.has(id))) continue;
      if ([...failing].some((e) => again.has(e.from) && scc.get(e.to) === scc.get(e.from))) continue;
      // `v` is reached for sure: a live way to it from the root through nodes that run and cannot be skipped with an edge in taken.
      // (An n-join of two or more on the way counts once n live, unguarded edges from the way reach it.)
      const sure = new Set<string>([root]);
      let reached = false;
      for (let grew = true; grew && budget > 0; ) {
        grew = false;
        const way = [...sure];
        while (way.length > 0) {
          for (const e of outgoing.get(way.pop()!) ?? []) {
            budget--;
            if (!live(e)) continue;
            if (e.to === v) reached = true;
            if (e.to === v || sure.has(e.to) || !runs.has(e.to)) continue;
            const j = joinAt.get(e.to);
            if (mayDrop(e.to) && !(typeof j === "object" && j !== null && (incoming.get(e.to) ?? []).filter((x) => sure.has(x.from) && live(x) && x.guarded === undefined).length >= j.n)) continue;
            sure.add(e.to);
            way.push(e.to);
            grew = true;
          }
        }
      }
      if (!reached) continue;
      // The edges `v` waits for: from nodes that neither run nor are skipped (for an n-join, those that count against a skip).
      // Only those from nodes that `v` leads to through such nodes: a set of waiting nodes that
      // nothing reached leads to is never entered, and is skipped once the run is quiet.
      const waiting = new Set<string>();
      const onward = [v];
      while (onward.length > 0) {
        for (const e of outgoing.get(onward.pop()!) ?? []) {
          budget--;
          if (e.to === v || waiting.has(e.to) || runs.has(e.to) || skipped.has(e.to) || removed.has(e)) continue;
          waiting.add(e.to);
          onward.push(e.to);
        }
      }
      const stuck = into.filter((e) => waiting.has(e.from) && (join === "all" || !late(e)));
      if (stuck.length === 0) continue;
      // At most `arrive` edges in can be taken before `v` runs, and those from the way that reaches it for sure are.
      const arrive = into.filter((e) => !late(e) && runs.has(e.from) && live(e)).length;
      const sureIn = Math.max(1, into.filter((e) => !late(e) && sure.has(e.from) && live(e) && (e.guarded === undefined || e.guarded === "true" || guards.includes(e))).length);
      if (join !== "all" && !(arrive < join.n && join.n <= sureIn + stuck.length)) continue;
      // The decisions that keep the waited-for nodes from running first: dead edges out of what runs into the rest.
      const cut = c.edges.filter((e) => runs.has(e.from) && !runs.has(e.to) && (e.to !== v || failing.has(e)) && !removed.has(e) && !live(e) && reach.has(e.to));
      // (A loop that goes round before it goes out leaves no dead edge behind: said first.)
      const rounds = [...later].filter((id) => runs.has(id) && taken.get(id) === "exit").map((id) => `"${id}" goes round its body and then takes its "exit" branch`);
      const why = [...new Set([...rounds, ...cut.map((e) => (failing.has(e) || e.guarded === "false" ? `the guard of the edge "${e.from}" → "${e.to}" does not hold` : later.has(e.from) && taken.get(e.from) === "exit" ? `"${e.from}" goes round its body and then takes its "exit" branch` : `"${e.from}" takes its "${taken.get(e.from)!}" branch`))])];
      const w = (stuck.find((e) => waitsOn.has(e.from)) ?? stuck[0]!).from;
      const entry = round ? ([...removed].find((x) => x.to === w) ?? round.entry) : undefined;
      const when = [
        ...(round ? [`the cycle through "${round.h}" goes round again${entry ? ` (the edge from "${entry.from}" into it counts for its first round only)` : ""}`] : []),
        ...why.slice(0, 3),
      ];
      const waits = join === "all" ? 'has join "all", so it waits for every incoming edge, the one' : `waits for ${join.n} incoming edges, at most ${arrive} of them from nodes that can run before it, and for the one`;
      return {
        path: `nodes[${vn.index}].join`,
        code: "join_never_fires",
        message: `node "${v}" ${waits} from "${w}" too; ${when.length > 0 ? `when ${when.join(" and ")}, ` : ""}"${w}" cannot run before "${v}" (it waits, in turn, for "${v}" or for nodes that wait for it), so the run stops with them waiting (BATON_JOIN_NEVER_FIRED): use join "any"${join === "all" ? "" : " or a smaller n"} on "${v}", or give "${w}" a way in that does not depend on ${round && why.length === 0 ? "the first round" : "that outcome"}`,
      };
    }
    return undefined;
  };

  /**
   * Whether the edge `b → h` closes a loop at run time though `h` does not come before `b` on
   * every way from the start (a cycle entered at several of its nodes): the engine runs `h`'s
   * region again when `b` ran after `h` along edges taken since. That is so in some run when
   * `b` joins as "all" and `h` has an edge to `b` that it may take (neither node a whileLoop
   * nor `branching: "first"`, no guard "false" on either edge): `b` runs only once that edge is
   * decided, after `h` ran, and then takes its edge back. The edge back must be the last edge
   * of `b`: the round starts `b` over too, and `b` decides the edges listed after it in the
   * new round (a dead one can let the nodes the round leaves waiting be skipped). And no edge
   * of `b` into its cycle listed before it, on its branch, has a guard that varies: such an edge
   * can close a loop first (and `b` is then started over before it takes the edge back), so the
   * round would come only when that guard fails, and what the guard read decides the round too.
   */
  const ranAfter = (e: GraphEdge): boolean => {
    const b = byId.get(e.from);
    const h = byId.get(e.to);
    if (e.from === e.to || e.guarded === "false" || joinAt.get(e.from) !== "all" || !b?.node || !h?.node) return false;
    if (b.type === "whileLoop" || h.type === "whileLoop" || b.node.branching === "first" || h.node.branching === "first") return false;
    const out = outgoing.get(e.from) ?? [];
    if (out[out.length - 1] !== e) return false;
    if (out.some((x) => x !== e && x.guarded === "varies" && scc.get(x.to) === scc.get(e.from) && (labelOf(x) === undefined || labelOf(x) === labelOf(e)))) return false;
    return (outgoing.get(e.to) ?? []).some((x) => x.to === e.from && x.guarded !== "false");
  };

  // The edges inside each cycle's component, the only ones that can close a loop through its nodes.
  const inside = new Map<number, GraphEdge[]>();
  for (const e of c.edges) {
    const k = scc.get(e.from);
    if (k === undefined || scc.get(e.to) !== k) continue;
    let list = inside.get(k);
    if (!list) inside.set(k, (list = []));
    list.push(e);
  }
  for (const vn of c.nodes) {
    if (budget <= 0) break;
    const v = vn.id;
    const join = joinAt.get(v);
    if (v === start || !reach.has(v) || reported.has(v) || !scc.has(v) || join === undefined || join === null || join === "any" || (typeof join === "object" && join.n < 2)) continue;
    let found = check(v, vn, join, start, new Set());
    // Later rounds: for each edge that closes a loop through `v` (its target comes before its
    // source on every way the run can take: a guard "false" is never taken), the region it
    // resets. A round that can start before `v` ran (its source is reached without `v`) comes
    // after every node before its head on the ways that avoid `v`.
    const closing = (inside.get(scc.get(v)!) ?? []).filter((e) => e.to !== v);
    const domAvoid = !found && closing.length > 0 && budget > 0
      ? dominators({ nodes: c.nodes.map((n) => n.id).filter((id) => id !== v), edges: c.edges.filter((e) => e.guarded !== "false" && e.from !== v && e.to !== v) }, start)
      : undefined;
    budget -= 3 * c.edges.length;
    for (const e of closing) {
      if (found || budget <= 0) break;
      const h = e.to;
      const early = domAvoid?.get(e.from)?.has(h) === true;
      // An edge back to a node that does not come first closes a loop too when its source ran
      // after that node because of it (see ranAfter): then it is asked as a round before `v`
      // ran when its source is reached without `v`.
      const after = !early && domTaken.get(e.from)?.has(h) !== true && ranAfter(e);
      if (!early && !after && domTaken.get(e.from)?.has(h) !== true) continue;
      const region = loopRegion(g, h, e.from, start);
      if (!region.has(v)) continue;
      const before = early ? domAvoid?.get(h) : domTaken.get(h);
      budget -= region.size;
      const removed = new Set<GraphEdge>();
      for (const u of region) {
        if (u === h) continue;
        // (Not a whileLoop's exit edge: left open while the loop iterates, it may come after the round.)
        for (const x of incoming.get(u) ?? []) if (!region.has(x.from) && before?.has(x.from) === true && !(x.when === "exit" && byId.get(x.from)?.type === "whileLoop")) removed.add(x);
      }
      // A whileLoop's body coming back to it goes on its count: on this visit it may go out where
      // its first visit cannot (a round with no edge from before it is else the first run again).
      const hn = byId.get(h);
      const again = hn?.type === "whileLoop" && ((e.from === h && e.when === "body") || loopBody(g, h).has(e.from));
      const out = again && loopVisits(hn.node).later.includes("exit") && closed(h) && goesRound(h);
      if (removed.size === 0 && !(out && !loopVisits(hn?.node).first.includes("exit"))) continue;
      const entry = [...removed][0];
      const from = early || (after && domAvoid?.has(e.from) === true) ? e.from : undefined;
      found = check(v, vn, join, h, removed, { h, ...(entry ? { entry } : {}), ...(from !== undefined ? { from } : {}), ...(out ? { out } : {}) });
    }
    if (found) {
      reported.add(v);
      errors.push(found);
    }
  }
}

/**
 * The nodes of the start's cycle that wait for ever in the round an edge back starts, as long as
 * the start does not run again (each with the node it waits for, on the way back to the start;
 * the start itself with none). The round starts `region` over, every edge out of it undecided
 * but for those its source decides after the edge back (`after`: taken when they go with it,
 * `withE`, else dead). A node waits for ever when, with every edge from such nodes undecided,
 * its join cannot be met by the other edges in (all of them taken, but a guard "false" or a dead
 * one), nor is it skipped (it keeps enough undecided edges in that are no loop's way back to it,
 * as the engine counts), and a chain of such edges leads to it from the start, which has an
 * edge in taken: then no set of nodes the run never entered holds it, and it is not skipped when
 * the run is quiet. The largest such set, found by dropping the nodes that may run or be skipped
 * until none is left to drop.
 */
function roundWaits(
  start: string, after: readonly GraphEdge[], withE: readonly GraphEdge[], region: ReadonlySet<string>, g: GraphInfo, joinAt: ReadonlyMap<string, Join | null>,
  incoming: ReadonlyMap<string, readonly GraphEdge[]>, outgoing: ReadonlyMap<string, readonly GraphEdge[]>,
): Map<string, string | undefined> {
  const decided = new Set(after);
  const dead = (x: GraphEdge): boolean => x.guarded === "false" || (decided.has(x) && !withE.includes(x));
  const waiting = new Set(region);
  // Per node: undecided edges in from waiting nodes, those of them no loop's way back, and the other edges in that may be taken.
  const fromWaiting = new Map<string, number>();
  const forward = new Map<string, number>();
  const other = new Map<string, number>();
  const backOf = (u: string): readonly string[] => backEdgeSources(g, start, u) ?? [];
  for (const u of region) {
    if (u === start) continue;
    let w = 0;
    let f = 0;
    let m = 0;
    for (const x of incoming.get(u) ?? []) {
      if (!decided.has(x) && waiting.has(x.from)) {
        w++;
        if (!backOf(u).includes(x.from)) f++;
      } else if (!dead(x)) m++;
    }
    fromWaiting.set(u, w);
    forward.set(u, f);
    other.set(u, m);
  }
  const waits = (u: string): boolean => {
    const j = joinAt.get(u);
    if (j === null || j === undefined) return false;
    const need = j === "all" || j === "any" ? 1 : j.n;
    const cannotRun = j === "all" ? fromWaiting.get(u)! >= 1 : other.get(u)! < need;
    return cannotRun && forward.get(u)! >= need;
  };
  const drop = (first: readonly string[]): void => {
    const todo = first.filter((u) => u !== start && waiting.has(u));
    for (const u of todo) waiting.delete(u);
    while (todo.length > 0) {
      const u = todo.pop()!;
      for (const x of outgoing.get(u) ?? []) {
        const t = x.to;
        if (decided.has(x) || t === start || !waiting.has(t)) continue;
        fromWaiting.set(t, fromWaiting.get(t)! - 1);
        if (!backOf(t).includes(u)) forward.set(t, forward.get(t)! - 1);
        if (!dead(x)) other.set(t, other.get(t)! + 1);
        if (!waits(t)) {
          waiting.delete(t);
          todo.push(t);
        }
      }
    }
  };
  drop([...waiting].filter((u) => u !== start && !waits(u)));
  for (;;) {
    // The chains from the start: what no chain reaches may be skipped as never entered.
    const by = new Map<string, string | undefined>([[start, undefined]]);
    const todo = [start];
    while (todo.length > 0) {
      const u = todo.shift()!;
      for (const x of outgoing.get(u) ?? []) {
        if (decided.has(x) || !waiting.has(x.to) || by.has(x.to)) continue;
        by.set(x.to, u);
        todo.push(x.to);
      }
    }
    const unreached = [...waiting].filter((u) => !by.has(u));
    if (unreached.length === 0) return by;
    drop(unreached);
  }
}

/**
 * Why the start node's own join can never let it run again, or undefined when some edge back to
 * it can start a round in which the join is met. Every node on a cycle through the start is on a
 * way back to it, so the first edge back taken after the start ran (e, from S) restarts them
 * all: their edges are forgotten, and only what S decides after e (its edges listed after e, in
 * definition order) can run them again: those of e's branch when S is a condition, review or
 * whileLoop (the others die), none after e when S has `branching: "first"`. The start then
 * waits, with e taken, for the edges it can still get: S's later edges into it of e's branch,
 * those from nodes reachable from them without passing through the start (as if every guard and
 * every branch after them could be taken), and for `all` those decided dead: S's later edges of
 * other branches, and the edges out of the nodes they skip (those whose every edge in is dead);
 * for an n-join of two or more not e itself when it is a self-loop (see below). Every other
 * node of the cycle waits on an edge from the start or from another such node, so it neither
 * runs nor is skipped: `all` waits for its edges forever, `{n}` is skipped while too few can arrive.
 * Which edge back comes first depends on the run: `{n}` is refused when no round can meet it,
 * `all` also when a round that cannot can come first (S's earlier edges into the start and, for
 * S other than the start, every other node's edges into it may not be taken: a guard, or
 * another branch of a condition or review), since the start then waits for ever.
 */
function startRound(
  start: string, join: "all" | { n: number }, into: readonly GraphEdge[], byId: ReadonlyMap<string, GraphNode>,
  incoming: ReadonlyMap<string, readonly GraphEdge[]>, outgoing: ReadonlyMap<string, readonly GraphEdge[]>, g: GraphInfo, joinAt: ReadonlyMap<string, Join | null>,
): string | undefined {
  if (into.length === 0) return undefined;
  // The branch an edge is taken with: the edges of a condition, review or whileLoop that go
  // with e are those of e's branch; after e, a `branching: "first"` node takes none.
  const branchOf = (x: GraphEdge): string | undefined => {
    const source = byId.get(x.from);
    if (!source?.node || source.type === undefined) return undefined;
    if (source.node.branching === "first") return `#${x.index}`;
    if ((NODE_TYPES[source.type]?.branches.length ?? 0) === 0) return undefined;
    return x.when ?? (source.type === "agent.humanReview" ? "approved" : undefined);
  };
  /** An edge that may not be taken when the others of its source are: a guard, or a condition's or review's branch. */
  const avoidable = (x: GraphEdge, e?: GraphEdge): boolean => {
    if (x.guarded === "varies" || x.guarded === "false") return true;
    // Of the same node as e: one of another branch is not taken with e (a whileLoop's too).
    if (e !== undefined) return byId.get(x.from)?.node?.branching !== "first" && branchOf(x) !== undefined && branchOf(x) !== branchOf(e);
    const type = byId.get(x.from)?.type;
    return type === "condition" || type === "agent.humanReview";
  };
  /**
   * Whether e can be the first edge back taken after the start ran: S decides its edges in
   * definition order, so S's earlier edges into the start must be avoidable; the start's own
   * edges are decided before any other node runs, and another node's come first only when every
   * other node's edges into the start are avoidable.
   */
  const canBeFirst = (e: GraphEdge): boolean => {
    if (e.guarded === "false") return false;
    const out = outgoing.get(e.from) ?? [];
    const earlier = out.slice(0, out.indexOf(e)).filter((x) => x.to === start);
    if (!earlier.every((x) => avoidable(x, e))) return false;
    return e.from === start || into.every((x) => x.from === e.from || avoidable(x));
  };
  /**
   * Whether the edge back `e`, once taken, stays taken while the start waits: no edge that a node
   * of the round may take (one not `stuck`) starts a round of another cycle whose region holds
   * e's source, which would forget `e` and leave the start never entered (skipped once the run is
   * quiet, not waiting). Its source's edges `after` it are taken into nodes the round just reset.
   */
  const kept = (e: GraphEdge, after: readonly GraphEdge[], stuck: ReadonlyMap<string, string | undefined>): boolean =>
    e.from === start || !g.cyclic.has(e.from) || ![...outgoing.values()].some((out) => out.some((x) => x.to !== start && !after.includes(x) && !stuck.has(x.from) &&
      x.guarded !== "false" && g.scc.get(x.from) === g.scc.get(x.to) && loopRegion(g, x.to, x.from, start).has(e.from)));
  let best: { e: GraphEdge; got: Set<GraphEdge>; first: boolean; held: ReadonlySet<GraphEdge>; stuck?: ReadonlyMap<string, string | undefined> } | undefined;
  let bestFirst: typeof best;
  let good = false;
  for (const e of into) {
    const out = outgoing.get(e.from) ?? [];
    // S's edges after e are decided in the new round: taken when they go with e, else dead.
    const after = out.slice(out.indexOf(e) + 1);
    const withE = after.filter((x) => branchOf(x) === branchOf(e));
    const runs = new Set<string>();
    const todo = withE.map((x) => x.to).filter((v) => v !== start);
    for (const v of todo) runs.add(v);
    while (todo.length > 0) {
      for (const x of outgoing.get(todo.pop()!) ?? []) {
        if (x.to === start || runs.has(x.to)) continue;
        runs.add(x.to);
        todo.push(x.to);
      }
    }
    // The nodes the dead ones skip (every edge in dead, or from a node skipped), whose edges then die too.
    const dead = new Set(after.filter((x) => !withE.includes(x)));
    const skipped = new Set<string>();
    for (let more = true; more; ) {
      more = false;
      for (const x of dead) {
        const t = x.to;
        if (t === start || skipped.has(t) || runs.has(t)) continue;
        if (!(incoming.get(t) ?? []).every((y) => dead.has(y))) continue;
        skipped.add(t);
        for (const y of outgoing.get(t) ?? []) dead.add(y);
        more = true;
      }
    }
    // An n-join of two or more is skipped at once with only e taken: the skip kills its edges out,
    // a self-loop e among them, and reaching it again forgets them, so such an e does not count.
    const lost = e.from === start && join !== "all" && join.n > 1;
    // For `all` an edge counts once decided (a dead one too); for `{n}` only when it may be taken.
    const got = new Set(into.filter((x) => (x === e && !lost) || withE.includes(x) || runs.has(x.from) || (join === "all" && dead.has(x))));
    // Not all of those run: a node the round starts over that waits for the start, or for nodes
    // that wait for it (its join), leaves its edge back undecided, and `all` waits for it too.
    const stuck = join === "all" ? roundWaits(start, after, withE, loopRegion(g, start, e.from, start), g, joinAt, incoming, outgoing) : undefined;
    const held = new Set(stuck && kept(e, after, stuck) ? into.filter((x) => got.has(x) && x !== e && !after.includes(x) && stuck.has(x.from)) : []);
    for (const x of held) got.delete(x);
    if (join === "all" ? got.size === into.length : got.size >= join.n) {
      good = true;
      continue;
    }
    // A round that cannot meet the join and that can come first is enough; else every round must fail.
    const first = canBeFirst(e);
    const round = { e, got, first, held, ...(stuck ? { stuck } : {}) };
    // (On a tie the later round, but for one that a node it reaches leaves waiting: that one says why.)
    const better = (than: typeof best): boolean => !than || got.size > than.got.size || (got.size === than.got.size && than.held.size === 0);
    if (better(best)) best = round;
    if (first && better(bestFirst)) bestFirst = round;
  }
  // For `all` such a round leaves the start waiting for ever (BATON_JOIN_NEVER_FIRED); an n-join is
  // only skipped in it, as one whose branches went another way: refused only when no round can meet it.
  if (good) best = join === "all" ? bestFirst : undefined;
  if (!best) return undefined;
  const { e, got, first, held, stuck } = best;
  const fix = 'leave join out (the start runs again on any edge back) or use "any"';
  const which = first && good ? `the edge back from "${e.from}" can be the first taken after it ran (those listed before it from the same node not taken), and it` : `an edge back to it, as the one from "${e.from}",`;
  if (join === "all") {
    const missing = into.find((x) => !got.has(x) && !held.has(x)) ?? into.find((x) => !got.has(x))!;
    // A node the round reaches that waits, by its join, for nodes that wait for the start: named with whom it waits for, back to the start.
    if (held.has(missing)) {
      const chain: string[] = [];
      for (let u: string | undefined = missing.from; u !== undefined && u !== start; u = stuck!.get(u)) {
        const j = joinAt.get(u);
        const how = `"${u}" (join ${typeof j === "object" && j !== null ? `{ "n": ${j.n} }` : `"${String(j)}"`})`;
        chain.push(`${how} ${chain.length === 0 ? "waits for the edge" : "for the one"} from "${stuck!.get(u)!}"`);
      }
      return `node "${start}" is the start and has join "all": ${which} starts its cycle's round over, and it then waits for the edge from "${missing.from}", which that round cannot decide before "${start}" ran again: ` +
        `${chain.join(", ")} (the round starts them over, and only "${start}" can take those edges again): it never runs again; ${fix}, or give "${missing.from}" a way in that does not wait for "${start}"`;
    }
    return `node "${start}" is the start and has join "all": ${which} starts its cycle's round over, and it then waits for the edge from "${missing.from}"` +
      `, which that round can only decide after "${start}" ran again (an edge back decides only what its source decides after it, in definition order and on its branch): it never runs again; ${fix}`;
  }
  return `node "${start}" is the start and waits for ${join.n} incoming edges, but an edge back to it starts its cycle's round over, and at most ${got.size} can then arrive before it runs again` +
    ` (the others are decided only after it ran, edges in definition order): it never runs again; ${fix}, or a smaller n`;
}

/**
 * An upper bound of how many of `edges` can be taken at once. A branching node (a condition, a
 * review, a node with branching "first") takes the edges of one branch only; a node it
 * dominates runs only when a branch leading to it was taken. When that node runs at most once
 * (it is on no cycle), edges from nodes behind different branches exclude each other; edges
 * out of the branching node itself always do, since a new decision replaces its old ones.
 */
function exclusiveBound(
  edges: GraphEdge[],
  nodes: GraphNode[],
  outgoing: Map<string, GraphEdge[]>,
  dom: Dominance,
  cyclic: Set<string>,
  between: (c: string, t: string) => Set<string> | undefined,
): { possible: number; controller?: string } {
  let possible = edges.length;
  let controller: string | undefined;
  for (const c of nodes) {
    if (!c.node || !dom.has(c.id)) continue;
    const type = canonicalType(c.node.type);
    // The branch an out-edge belongs to; undefined: taken with every branch.
    let branchOf: (e: GraphEdge) => string | undefined;
    if (c.node.branching === "first") branchOf = (e) => `#${e.index}`;
    else if ((NODE_TYPES[type]?.branches.length ?? 0) > 0) branchOf = (e) => e.when ?? (type === "agent.humanReview" ? "approved" : undefined);
    else continue;
    const out = outgoing.get(c.id) ?? [];
    const perBranch = new Map<string, number>();
    let free = 0;
    for (const e of edges) {
      let branches: Set<string> | undefined;
      if (e.from === c.id) {
        const b = branchOf(e);
        if (b !== undefined) branches = new Set([b]);
      } else if (!cyclic.has(c.id) && dom.get(e.from)?.has(c.id)) {
        const ways = between(c.id, e.from);
        branches = new Set();
        for (const x of out) {
          if (ways !== undefined && !ways.has(x.to)) continue;
          const b = branchOf(x);
          if (b === undefined) {
            branches = undefined;
            break;
          }
          branches.add(b);
        }
      }
      if (branches === undefined) free++;
      else for (const b of branches) perBranch.set(b, (perBranch.get(b) ?? 0) + 1);
    }
    const bound = free + Math.max(0, ...perBranch.values());
    if (bound < possible) {
      possible = bound;
      controller = c.id;
    }
  }
  return controller === undefined ? { possible } : { possible, controller };
}

/** A shortest cycle through the first node of a cyclic component, as the nodes on it. */
function shortestCycle(comp: string[], out: ReadonlyMap<string, readonly GraphEdge[]>): string[] {
  const inComp = new Set(comp);
  const head = comp[0]!;
  const prev = new Map<string, string>();
  const queue = [head];
  for (let i = 0; i < queue.length; i++) {
    const v = queue[i]!;
    for (const e of out.get(v) ?? []) {
      if (!inComp.has(e.to)) continue;
      if (e.to === head) {
        const path = [v];
        while (path[path.length - 1] !== head) path.push(prev.get(path[path.length - 1]!)!);
        return path.reverse();
      }
      if (!prev.has(e.to)) {
        prev.set(e.to, v);
        queue.push(e.to);
      }
    }
  }
  return comp;
}

function checkNodeConfig(type: string, config: Record<string, JsonValue>, at: string, opts: ValidateOptions, errors: ValidationIssue[]): void {
  for (const key of EXPRESSION_KEYS) {
    const v = config[key];
    if (typeof v === "string") {
      const err = expressionError(v);
      if (err) errors.push({ path: `${at}.config.${key}`, code: "invalid_expression", message: err });
    }
  }
  if (type === "setVariable") {
    const values = setVariableConfigSchema.parse(config).values;
    for (const key of Object.keys(values)) {
      if (looksLikePath(key)) checkWritePath(key, `${at}.config.values[${JSON.stringify(key)}]`, "setVariable key", errors);
    }
  }
  const tools: { name: string; path: string }[] = [];
  if (type === "tool") {
    const cfg = toolConfigSchema.parse(config);
    if ("tool" in cfg) tools.push({ name: cfg.tool, path: `${at}.config.tool` });
    else cfg.calls.forEach((c, k) => tools.push({ name: c.tool, path: `${at}.config.calls[${k}].tool` }));
  }
  if (type === "forEach" && typeof config.tool === "string") tools.push({ name: config.tool, path: `${at}.config.tool` });
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

/**
 * Whether a regular expression repeats, without bound, a group that can match one piece of
 * input in many ways: the group repeats something without bound and has no part that must
 * match exactly once (`(a+)+`, `(\w+\s?)*`, `(a+|b)+`). Backtracking over such a pattern grows
 * exponentially with the input, which a schema's `pattern` would let one request spend the
 * gateway's event loop on (`^(a+)+$` against 28 a's and a "!": 2.3 s). A group with a part
 * that must match once, such as the dot of `([a-z]+\.)+`, is left alone. A heuristic: it does
 * not see every backtracking trap (overlapping alternatives such as `(a|aa)+`), but the classic ones.
 */
export function nestedQuantifier(pattern: string): boolean {
  const unbounded = (i: number): boolean => pattern[i] === "*" || pattern[i] === "+" || (pattern[i] === "{" && /^\{\d*,\}/.test(pattern.slice(i)));
  const quantified = (i: number): boolean => unbounded(i) || pattern[i] === "?" || (pattern[i] === "{" && /^\{\d+(,\d*)?\}/.test(pattern.slice(i)));
  // Per open group: whether it repeats something without bound, whether it has a part that
  // must match exactly once, and whether it has alternatives.
  const groups: { repeats: boolean; once: boolean; alt: boolean }[] = [{ repeats: false, once: false, alt: false }];
  const atom = (next: number, inner?: { repeats: boolean; once: boolean; alt: boolean }): boolean => {
    const g = groups[groups.length - 1]!;
    const risky = inner !== undefined && inner.repeats && (!inner.once || inner.alt);
    if (risky && unbounded(next)) return true;
    if (unbounded(next) || (inner?.repeats ?? false)) g.repeats = true;
    if (!quantified(next) && (inner === undefined || (inner.once && !inner.alt))) g.once = true;
    return false;
  };
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i];
    if (c === "\\") {
      i++;
      if (atom(i + 1)) return true;
    } else if (c === "[") {
      for (i++; i < pattern.length && pattern[i] !== "]"; i++) if (pattern[i] === "\\") i++;
      if (atom(i + 1)) return true;
    } else if (c === "(") {
      groups.push({ repeats: false, once: false, alt: false });
      if (pattern[i + 1] === "?") i += pattern[i + 2] === "<" && pattern[i + 3] !== "=" && pattern[i + 3] !== "!" ? pattern.indexOf(">", i) - i : 2;
    } else if (c === ")") {
      const inner = groups.length > 1 ? groups.pop()! : { repeats: false, once: false, alt: false };
      if (atom(i + 1, inner)) return true;
    } else if (c === "|") {
      groups[groups.length - 1]!.alt = true;
    } else if (quantified(i)) {
      // The quantifier of the atom before, seen when that atom was read; skip its braces.
      if (pattern[i] === "{") i = pattern.indexOf("}", i);
    } else if (c !== "^" && c !== "$") {
      if (atom(i + 1)) return true;
    }
  }
  return false;
}

/** The regular expressions of schemas (`pattern`, `patternProperties`): refused when {@link nestedQuantifier}. */
function safeRegExp(pattern: string, flags?: string): RegExp {
  if (nestedQuantifier(pattern)) throw new Error(`pattern "${pattern}" repeats a group that repeats (such as (a+)+): it can take time exponential in the input; rewrite it without the nested repetition`);
  return new RegExp(pattern, flags);
}
safeRegExp.code = "new RegExp";

// Draft-07 (and 06) by default; a schema that names 2019-09 or 2020-12 in `$schema` gets its own
// dialect. Every schema is compiled by an instance of its own: an instance keeps each `$id` it
// compiled, so one tenant's schema could otherwise be `$ref`ed by another's (and its `$id`
// refused to everyone else).
const ajvOptions = { allErrors: true, strict: false, code: { regExp: safeRegExp } };
const ajv = new Ajv(ajvOptions);
function ajvFor(schema: unknown): Ajv {
  const named = typeof schema === "object" && schema !== null ? (schema as { $schema?: unknown }).$schema : undefined;
  if (typeof named === "string" && named.includes("2020-12")) return new Ajv2020(ajvOptions);
  if (typeof named === "string" && named.includes("2019-09")) return new Ajv2019(ajvOptions);
  return new Ajv(ajvOptions);
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
    // `$async: true` makes a validator that answers with a promise, which every check here
    // would take for "valid" (and whose rejection nothing handles).
    if ((fn as { $async?: unknown }).$async === true) throw new Error("$async schemas are not supported: leave out $async");
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
  let fn: ValidateFunction;
  try {
    fn = compileSchema(definition.inputSchema);
  } catch (err) {
    // A definition stored before a check that now refuses its schema: no input can be checked.
    return [{ path: "inputSchema", code: "invalid_input_schema", message: `not a valid JSON Schema: ${(err as Error).message}` }];
  }
  if (fn(input)) return [];
  return (fn.errors ?? []).map((e: ErrorObject) => {
    const params = e.params as { missingProperty?: string; additionalProperty?: string; unevaluatedProperty?: string };
    const extra = e.keyword === "additionalProperties" ? params.additionalProperty : e.keyword === "unevaluatedProperties" ? params.unevaluatedProperty : undefined;
    const at = inputPath(e.instancePath);
    if (extra !== undefined) return { path: `${at}.${extra}`, code: "invalid_input", message: `property "${extra}" is not allowed here` };
    return { path: at, code: "invalid_input", message: e.keyword === "required" ? `missing required property "${params.missingProperty}"` : e.message ?? "invalid" };
  });
}

/** `input` + a JSON Pointer into it as a `$.path`-like path: `/items/2/a~1b` → `input.items[2].a/b`. */
function inputPath(pointer: string): string {
  return `input${pointer.replace(/\/([^/]*)/g, (_, seg: string) => (/^\d+$/.test(seg) ? `[${seg}]` : `.${seg.replace(/~1/g, "/").replace(/~0/g, "~")}`))}`;
}

/**
 * The worker tools the agents of a SynthDev definition's states may call (seed 002's roles file):
 * the `includedTools` of the role of each state's agent, for the `synthdev.state` nodes among
 * `nodes`, each once, with where it is named (`synthdev.roles.coder.includedTools[0]`). Roles no
 * state's agent has are not called, and not listed (a roles file may serve several workflows).
 */
function synthdevRoleTools(material: SynthdevMaterial, nodes: readonly { type: string; config?: unknown }[]): { name: string; path: string }[] {
  const out = new Map<string, string>();
  for (const n of nodes) {
    if (canonicalType(n.type) !== "synthdev.state") continue;
    const name = synthdevStateConfigSchema.safeParse(n.config).data?.state;
    const agent = material.workflow.states.find((s) => s.name === name)?.agent;
    const role = material.workflow.agents.find((a) => a.agent_role === agent)?.agent_role;
    if (role === undefined || !Object.hasOwn(material.roles, role)) continue;
    const at = `synthdev.roles${/^[A-Za-z_$][A-Za-z0-9_$]*$/.test(role) ? `.${role}` : `[${JSON.stringify(role)}]`}`;
    material.roles[role]!.includedTools.forEach((tool, k) => out.set(`${at}.includedTools[${k}]`, tool));
  }
  return [...out].map(([path, name]) => ({ name, path }));
}

/**
 * The LLM nodes and SynthDev agents of a definition that would run with no model while the
 * installation has no default model (`hasDefaultModel` false: no `BATON_LLM_DEFAULT_MODEL`, or one
 * no provider serves), so that their first `llm.chat` call would fail; none when it has one:
 * - an `agent.llm` or `agent.toolLoop` node, forEach bodies included, with neither
 *   `config.model` nor `agentConfig.model`: `missing_model` at its `config.model`;
 * - a SynthDev state's agent for which `synthdevAgentModel` finds none (its role's level
 *   through `agentConfig.levels`, else `agentConfig.model`): once per agent, at the agent
 *   (`synthdev.workflow.agents[1]`); only the agents of the `synthdev.state` nodes among the
 *   definition's nodes, and none when the material does not parse (validation reports it).
 * The agentConfig is the one a run of the definition has: `workflowAgentConfig` (the workflow's
 * own, seed 004's column) under the definition's, field by field, as the executor merges them.
 */
export function agentsWithoutModel(definition: unknown, workflowAgentConfig: unknown, hasDefaultModel: boolean): ValidationIssue[] {
  if (hasDefaultModel || !isRecord(definition) || !Array.isArray(definition.nodes)) return [];
  const agentConfig = { ...(isRecord(workflowAgentConfig) ? workflowAgentConfig : {}), ...(isRecord(definition.agentConfig) ? definition.agentConfig : {}) };
  const nodes = definition.nodes as unknown[];
  return [...llmNodesWithoutModel(nodes, "", agentConfig), ...synthdevAgentsWithoutModel(definition.synthdev, nodes, agentConfig)];
}

/** `agentsWithoutModel` for the LLM nodes of one graph (`at`: the path of its `nodes`, "" at the top) and the forEach bodies in it. */
function llmNodesWithoutModel(nodes: readonly unknown[], at: string, agentConfig: Record<string, unknown>): ValidationIssue[] {
  const issues: ValidationIssue[] = [];
  const defaultModel = typeof agentConfig.model === "string" && agentConfig.model !== "";
  nodes.forEach((n, i) => {
    if (!isRecord(n) || typeof n.type !== "string" || (n.config !== undefined && !isRecord(n.config))) return;
    // A node without config has the default, {}.
    const config: Record<string, unknown> = n.config ?? {};
    const type = canonicalType(n.type);
    const here = `${at}nodes[${i}].config`;
    if ((type === "agent.llm" || type === "agent.toolLoop") && !defaultModel && (typeof config.model !== "string" || config.model === "")) {
      const id = typeof n.id === "string" ? n.id : `nodes[${i}]`;
      issues.push({ path: `${here}.model`, code: "missing_model", message: `node "${id}" has no model and the installation no default one (BATON_LLM_DEFAULT_MODEL): set config.model, or agentConfig.model (the definition's or the workflow's) for all its LLM nodes` });
    }
    if (type === "forEach" && isRecord(config.body) && Array.isArray(config.body.nodes)) {
      issues.push(...llmNodesWithoutModel(config.body.nodes as unknown[], `${here}.body.`, agentConfig));
    }
  });
  return issues;
}

/** `agentsWithoutModel` for a SynthDev definition's agents, with the run's merged agentConfig. */
function synthdevAgentsWithoutModel(synthdev: unknown, nodes: readonly unknown[], agentConfig: Record<string, unknown>): ValidationIssue[] {
  const material = synthdevMaterialSchema.safeParse(synthdev);
  if (!material.success) return [];
  const { workflow, roles } = material.data;
  const issues = new Map<number, ValidationIssue>();
  for (const n of nodes) {
    if (!isRecord(n) || typeof n.type !== "string" || canonicalType(n.type) !== "synthdev.state") continue;
    const name = synthdevStateConfigSchema.safeParse(n.config).data?.state;
    const agentRole = workflow.states.find((st) => st.name === name)?.agent;
    const j = workflow.agents.findIndex((a) => a.agent_role === agentRole);
    if (j < 0 || issues.has(j)) continue;
    const role = Object.hasOwn(roles, agentRole!) ? roles[agentRole!] : undefined;
    if (synthdevAgentModel(role, agentConfig) !== undefined) continue;
    const level = role?.level;
    issues.set(j, {
      path: `synthdev.workflow.agents[${j}]`,
      code: "missing_model",
      message: level !== undefined
        ? `agent "${agentRole!}" has no model and the installation no default one (BATON_LLM_DEFAULT_MODEL): agentConfig has neither levels.${level} (its role's level) nor model; set one of them`
        : `agent "${agentRole!}" has no model and the installation no default one (BATON_LLM_DEFAULT_MODEL): its role has no level and agentConfig has no model; set agentConfig.model (or give the role a level that agentConfig.levels maps)`,
    });
  }
  return [...issues.entries()].sort(([a], [b]) => a - b).map(([, i]) => i);
}

/** JSON Schema of the definition format, for the OpenAPI document. */
export const workflowDefinitionJsonSchema = z.toJSONSchema(workflowDefinitionSchema, { io: "input", unrepresentable: "any" });

/**
 * Tool names a definition (valid or not) refers to: tool nodes, multi-call nodes and forEach,
 * bodies included; agent nodes' tools, and those of the roles of a SynthDev definition's agents.
 */
export function referencedTools(definition: unknown): string[] {
  const out = new Set<string>();
  const material = isRecord(definition) ? synthdevMaterialSchema.safeParse(definition.synthdev) : undefined;
  if (material?.success && isRecord(definition) && Array.isArray(definition.nodes)) {
    const nodes = (definition.nodes as unknown[]).filter((n): n is { type: string } => isRecord(n) && typeof n.type === "string");
    for (const t of synthdevRoleTools(material.data, nodes)) out.add(t.name);
  }
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
