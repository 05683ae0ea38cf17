/**
 * Importer for LLM-planned workflows (seed 001, "Structured Workflow Plan Schema").
 *
 * Accepted source shape (the seed's `WorkflowPlan` / `WorkflowStepPlan` as JSON):
 * ```json
 * { "name": "find_best_photos", "description": "...", "estimated_duration": 30, "confidence": 0.9,
 *   "steps": [
 *     { "name": "assess", "tool_name": "assess_quality_batch",
 *       "params": { "image_paths": "{{context.image_paths}}", "method": "clip_learned" },
 *       "dependencies": [], "reason": "score every photo" },
 *     { "name": "rank", "tool_name": "rank_images", "params": { "quality_scores": "{{assess.result}}" },
 *       "dependencies": ["assess"], "reason": "order by score" } ] }
 * ```
 * Field aliases: step `name` | `id`; `tool_name` | `tool` | `toolName`; `params` | `parameters` |
 * `arguments`; `dependencies` | `depends_on` | `dependsOn`; `reason` | `description`.
 * `name`, `description`, `estimated_duration` and `confidence` of the plan have no place in a
 * definition and are not carried over.
 *
 * References in parameter strings (to the execution input or to an earlier step's result):
 * `{{step.path}}`, `${step.path}`, `$step.path` (whole string), `workflow://step/<resultId>`
 * (the seed's result reference; the result id is dropped); `step.result...` is the same as
 * `step...` (the seed stores a step's tool result under `result`); `input.x` and `context.x`
 * always name the execution input (`$.input.x`, the seed's user context), even if a step has
 * that name. A reference that is the whole string keeps the value's type; references inside
 * text are joined by a `transform` node placed before the step. `\{{` and `\${` are literal
 * text. Every input name referenced becomes a required property of `inputSchema`.
 *
 * Mapping: each step → a `tool` node (id = step name), params → `input`, reason →
 * `description`, each dependency (and each referenced step not listed as one, with a warning)
 * → an edge. Several root steps hang off a `_start` node (`setVariable`, no values) so they
 * run in parallel; the output maps every sink step's id to its result.
 *
 * A plan with problems is refused with all of them, carrying the nodes of the steps whose tool
 * and params convert (`partial`), however wrong their dependencies (edges), so that the tools
 * they call are checked in the same answer.
 */
import type { JsonObject } from "../json.ts";
import { isJsonObject } from "../json.ts";
import type { ConvertedNode, ImportIssue, ImportResult, SourceOrigin, TemplateOptions } from "./common.ts";
import {
  ID_RULE, IdAllocator, TOOL_NAME, at, asJson, computedExpression, fail, failWithNodes, inputSchemaFor, pick, renderPath, translateParams, within,
} from "./common.ts";
import { cyclicComponents } from "../graph.ts";

interface PlanStep {
  index: number;
  name: string;
  id: string;
  tool: string;
  /** `steps[i]`, and where its tool name and reason are. */
  path: string;
  toolPath: string;
  reasonPath?: string;
  params: JsonObject;
  paramsPath: string;
  depsPath: string;
  deps: string[];
  /** Declared dependencies with their position in the source list. */
  declared: Array<[string, number]>;
  /** Steps referenced in params → where the first reference to each is (`steps[1].params.x`). */
  referenced: Map<string, string>;
  reason?: string;
}

/** Converts a seed-001 `WorkflowPlan` into a canonical definition (see the module comment). */
export function importWorkflowPlan(plan: unknown): ImportResult {
  const source = asJson(plan);
  if (!isJsonObject(source)) {
    return fail([{ path: "(source)", code: "invalid_source", message: "a workflow plan is a JSON object with a steps array" }]);
  }
  const errors: ImportIssue[] = [];
  const warnings: string[] = [];
  const rawSteps = source.steps;
  if (!Array.isArray(rawSteps)) {
    return fail([{ path: "steps", code: "missing_steps", message: "the plan needs a steps array" }]);
  }
  if (rawSteps.length === 0) {
    return fail([{ path: "steps", code: "no_steps", message: "a workflow plan must have at least one step" }]);
  }

  const ids = new IdAllocator();
  const steps: PlanStep[] = [];
  const byName = new Map<string, PlanStep>();
  rawSteps.forEach((raw, index) => {
    const p = at("steps", index);
    if (!isJsonObject(raw)) {
      errors.push({ path: p, code: "invalid_step", message: "each step is an object with name, tool_name, params and dependencies" });
      return;
    }
    const nameField = pick(raw, ["name", "id"]);
    const name = typeof nameField?.value === "string" ? nameField.value.trim() : "";
    if (name === "") {
      errors.push({ path: at(p, nameField?.key ?? "name"), code: "missing_step_name", message: "the step has no name" });
    } else if (byName.has(name)) {
      errors.push({ path: at(p, nameField!.key), code: "duplicate_step", message: `duplicate step name "${name}" (first at steps[${byName.get(name)!.index}])` });
      return;
    }
    const toolField = pick(raw, ["tool_name", "tool", "toolName"]);
    let tool = "";
    if (toolField === undefined || toolField.value === "" || toolField.value === null) {
      errors.push({ path: at(p, toolField?.key ?? "tool_name"), code: "missing_tool", message: `step "${name || index}" names no tool` });
    } else if (typeof toolField.value !== "string" || !TOOL_NAME.test(toolField.value)) {
      errors.push({ path: at(p, toolField.key), code: "invalid_tool_name", message: `tool name ${JSON.stringify(toolField.value)} is not dot-separated words of letters, digits, _ or -` });
    } else {
      tool = toolField.value;
    }
    const paramsField = pick(raw, ["params", "parameters", "arguments"]);
    let params: JsonObject = {};
    if (paramsField !== undefined && paramsField.value !== null) {
      if (isJsonObject(paramsField.value)) params = paramsField.value;
      else errors.push({ path: at(p, paramsField.key), code: "invalid_params", message: "params must be an object of parameter names to values" });
    }
    const depsField = pick(raw, ["dependencies", "depends_on", "dependsOn"]);
    const deps: string[] = [];
    const declared: Array<[string, number]> = [];
    if (depsField !== undefined && depsField.value !== null) {
      if (!Array.isArray(depsField.value)) {
        errors.push({ path: at(p, depsField.key), code: "invalid_dependencies", message: "dependencies must be an array of step names" });
      } else {
        depsField.value.forEach((d, j) => {
          if (typeof d !== "string" || d === "") errors.push({ path: at(at(p, depsField.key), j), code: "invalid_dependencies", message: "a dependency is a step name" });
          else {
            declared.push([d, j]);
            if (!deps.includes(d)) deps.push(d);
          }
        });
      }
    }
    const reasonField = pick(raw, ["reason", "description"]);
    if (name === "") return;
    let id = name;
    if (!ids.claim(name)) {
      id = ids.fresh(name);
      warnings.push(`step "${name}" became node "${id}" (${ID_RULE})`);
    }
    const step: PlanStep = {
      index, name, id, tool, params,
      path: p,
      toolPath: at(p, toolField?.key ?? "tool_name"),
      paramsPath: at(p, paramsField?.key ?? "params"),
      depsPath: at(p, depsField?.key ?? "dependencies"),
      deps,
      declared,
      referenced: new Map(),
      ...(typeof reasonField?.value === "string" ? { reason: reasonField.value, reasonPath: at(p, reasonField.key) } : {}),
    };
    steps.push(step);
    byName.set(name, step);
  });

  for (const s of steps) {
    for (const [d, j] of s.declared) {
      if (!byName.has(d)) errors.push({ path: at(s.depsPath, j), code: "unknown_dependency", message: `step "${s.name}" depends on unknown step "${d}"` });
    }
  }

  // Parameters: references become $.paths; referenced steps are dependencies too.
  const inputKeys = new Set<string>();
  const translated = new Map<string, ReturnType<typeof translateParams>>();
  const paramsNodeId = new Map<string, string>();
  for (const s of steps) {
    const opts: TemplateOptions = {
      bareRefs: true,
      resolve: (segments, _raw, where) => {
        const [head, ...rest] = segments;
        if (head === "input" || head === "context") {
          if (rest.length === 0) return { segments: ["input"] };
          return { segments: ["input", ...rest], ...(typeof rest[0] === "string" ? { inputKey: rest[0] } : {}) };
        }
        const target = typeof head === "string" ? byName.get(head) : undefined;
        if (!target) {
          return { code: "unknown_reference", message: `"${String(head)}" is neither a step of this plan nor input/context` };
        }
        if (target === s) return { code: "self_reference", message: `step "${s.name}" refers to its own result` };
        const path = rest[0] === "result" ? rest.slice(1) : rest;
        if (!s.referenced.has(target.name)) s.referenced.set(target.name, where);
        return { segments: [target.id, ...path], dependsOn: target.name };
      },
    };
    // Step ids are all claimed by now, so the computed-parameter node's id cannot collide.
    const computedAt = (key: string): string => {
      if (!paramsNodeId.has(s.name)) paramsNodeId.set(s.name, ids.fresh(`${s.id}_params`));
      return renderPath([paramsNodeId.get(s.name)!, key]);
    };
    const t = translateParams(s.params, s.paramsPath, opts, computedAt, errors);
    translated.set(s.name, t);
    for (const k of t.inputKeys) inputKeys.add(k);
    for (const d of t.dependsOn) {
      if (!s.deps.includes(d)) {
        s.deps.push(d);
        warnings.push(`step "${s.name}" uses the result of "${d}" without listing it in dependencies; it was added`);
      }
    }
  }

  const names = steps.map((s) => s.name);
  for (const comp of cyclicComponents({ nodes: names, edges: names.flatMap((n) => (byName.get(n)?.deps ?? []).map((d) => ({ from: n, to: d }))) })) {
    const first = byName.get(comp[0]!)!;
    // Where the first step's part of the cycle is written: the dependency it lists, else the
    // parameter whose reference made it one (a step may have no dependencies field at all).
    const inCycle = first.deps.find((d) => comp.includes(d))!;
    const j = first.declared.find(([name]) => name === inCycle)?.[1];
    errors.push({
      path: j !== undefined ? at(first.depsPath, j) : first.referenced.get(inCycle) ?? first.paramsPath,
      code: "dependency_cycle",
      message: comp.length === 1 ? `step "${first.name}" depends on itself` : `steps ${comp.map((c) => `"${c}"`).join(", ")} depend on each other in a cycle`,
    });
  }
  /** The nodes a step becomes: the transform of its parameters when it has text templates to fill, then its tool node. */
  const stepNodes = (s: PlanStep): { node: JsonObject; origin: SourceOrigin }[] => {
    const t = translated.get(s.name)!;
    const out: { node: JsonObject; origin: SourceOrigin }[] = [];
    const paramsId = paramsNodeId.get(s.name);
    if (paramsId !== undefined) {
      out.push({
        node: { id: paramsId, type: "transform", description: `computes the templated parameters of "${s.id}"`, config: { expression: computedExpression(t.computed) } },
        origin: { path: s.paramsPath },
      });
    }
    const node: JsonObject = { id: s.id, type: "tool" };
    if (s.reason !== undefined) node.description = s.reason;
    node.config = { tool: s.tool };
    node.input = t.input;
    out.push({ node, origin: { path: s.path, fields: { "config.tool": s.toolPath, input: s.paramsPath, ...(s.reasonPath !== undefined ? { description: s.reasonPath } : {}) } } });
    return out;
  };

  if (errors.length > 0) {
    // A step's nodes are made of its tool and its params; its dependencies (and a cycle through
    // them, also one made by a reference in its params) are edges, and keep no node out.
    const converted: ConvertedNode[] = steps.flatMap((s) => {
      const blockedBy = (e: ImportIssue): boolean => e.code !== "dependency_cycle" && (within(e.path, s.toolPath) || within(e.path, s.paramsPath));
      return stepNodes(s).map((n) => ({ ...n, blockedBy }));
    });
    return failWithNodes(errors, converted);
  }

  const nodes: JsonObject[] = [];
  const edges: JsonObject[] = [];
  const nodeOrigins: Record<string, SourceOrigin> = {};
  const edgeOrigins: SourceOrigin[] = [];
  const edge = (from: string, to: string, origin: string): void => {
    edges.push({ from, to });
    edgeOrigins.push({ path: origin });
  };
  const roots = steps.filter((s) => s.deps.length === 0);
  // The entry of a step is its parameters' transform when it has text templates to fill.
  let start = paramsNodeId.get(roots[0]!.name) ?? roots[0]!.id;
  if (roots.length > 1) {
    start = ids.fresh("_start");
    nodes.push({ id: start, type: "setVariable", config: { values: {} } });
    nodeOrigins[start] = { path: "steps" };
    for (const r of roots) edge(start, paramsNodeId.get(r.name) ?? r.id, r.path);
  }
  for (const s of steps) {
    const entry = paramsNodeId.get(s.name) ?? s.id;
    for (const d of s.deps) {
      // A dependency the step lists, else one added because a parameter reads that step's result.
      const j = s.declared.find(([name]) => name === d)?.[1];
      edge(byName.get(d)!.id, entry, j === undefined ? s.paramsPath : at(s.depsPath, j));
    }
    if (entry !== s.id) edge(entry, s.id, s.paramsPath);
    for (const { node, origin } of stepNodes(s)) {
      nodes.push(node);
      nodeOrigins[node.id as string] = origin;
    }
  }
  const dependedOn = new Set(steps.flatMap((s) => s.deps));
  const output: JsonObject = {};
  for (const s of steps) if (!dependedOn.has(s.name)) output[s.id] = `$.${s.id}`;

  const definition: JsonObject = { schemaVersion: 1, start };
  const schema = inputSchemaFor(inputKeys);
  if (schema) definition.inputSchema = schema;
  definition.nodes = nodes;
  definition.edges = edges;
  definition.output = output;
  return { ok: true, definition, warnings, sourceMap: { fields: {}, nodes: nodeOrigins, edges: edgeOrigins } };
}
