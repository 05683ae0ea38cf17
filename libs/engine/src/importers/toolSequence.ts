/**
 * Importer for learned and user-submitted tool sequences (seed 000, "Data Structures" and
 * "Storage Strategy").
 *
 * Accepted source shapes:
 * - a `ToolWorkflow` / `UserWorkflow`: `{ "name", "description", "steps": [WorkflowStep...], ... }`;
 * - a bare array of `WorkflowStep`s;
 * - a procedural-memory record `{ "trigger", "action": "<JSON array of steps>" | [...], "pattern", ... }`;
 * - `ToolExecutionData`: `{ "toolSequence": [{ "toolName", "parameters", "duration", "success" }...] }`.
 *
 * A step is `{ "order"?: n, "toolName": "Bash", "parameters": {...}, "required"?: bool, "description"?: s }`
 * (aliases: `tool_name` | `tool`; `params` | `arguments`). When the steps carry `order`, they
 * run in that order (every step then needs a distinct one); otherwise in array order.
 *
 * Node ids are `step1`, `step2`... by position in that order. Parameter templates:
 * `{{input.x}}` and `{{x}}` (any name that is not an earlier step) read the execution input
 * (`$.input.x`); `{{step2.stdout}}` reads an earlier step's result (`$.step2.stdout`); `${...}`
 * is the same as `{{...}}`. A template that is the whole string keeps the referenced value's type;
 * templates inside text are joined by a `transform` node placed before the step; `\{{` and `\${`
 * are literal text (for tools such as `text.template` that fill templates themselves). Every input name
 * referenced becomes a required property of the definition's `inputSchema`.
 *
 * Mapping: the steps become a chain of `tool` nodes; the output is the last step's result
 * (the definition's default). `required: false` cannot be expressed (every node must succeed)
 * and is reported as a warning.
 *
 * A sequence with problems is refused with all of them, carrying the nodes of the steps whose
 * tool and parameters convert (`partial`), however wrong their order (it only places a step in
 * the chain), so that the tools they call are checked in the same answer.
 */
import type { JsonObject, JsonValue } from "../json.ts";
import { isJsonObject } from "../json.ts";
import type { ConvertedNode, ImportIssue, ImportResult, SourceOrigin } from "./common.ts";
import { IdAllocator, TOOL_NAME, at, asJson, computedExpression, fail, failWithNodes, inputSchemaFor, pick, renderPath, translateParams, within } from "./common.ts";

interface SeqStep {
  source: JsonObject;
  path: string;
  order?: number;
}

function locateSteps(source: JsonValue, errors: ImportIssue[]): { steps: JsonValue[]; base: string } | undefined {
  if (Array.isArray(source)) return { steps: source, base: "" };
  if (!isJsonObject(source)) {
    errors.push({ path: "(source)", code: "invalid_source", message: "a tool sequence is an array of steps or an object with steps, toolSequence or action" });
    return undefined;
  }
  for (const key of ["steps", "toolSequence"]) {
    const v = source[key];
    if (v === undefined) continue;
    if (Array.isArray(v)) return { steps: v, base: key };
    errors.push({ path: key, code: "invalid_steps", message: `${key} must be an array of steps` });
    return undefined;
  }
  const action = source.action;
  if (Array.isArray(action)) return { steps: action, base: "action" };
  if (typeof action === "string") {
    let parsed: unknown;
    try {
      parsed = JSON.parse(action);
    } catch (e) {
      errors.push({ path: "action", code: "invalid_json", message: `action is not valid JSON: ${e instanceof Error ? e.message : String(e)}` });
      return undefined;
    }
    const steps = asJson(parsed);
    if (Array.isArray(steps)) return { steps, base: "action" };
    errors.push({ path: "action", code: "invalid_steps", message: "action must hold a JSON array of steps" });
    return undefined;
  }
  errors.push({ path: "steps", code: "missing_steps", message: "no steps: expected steps, toolSequence or action" });
  return undefined;
}

/** Converts a seed-000 tool sequence into a chain of tool nodes (see the module comment). */
export function importToolSequence(seq: unknown): ImportResult {
  const errors: ImportIssue[] = [];
  const warnings: string[] = [];
  const source = asJson(seq);
  if (source === undefined) return fail([{ path: "(source)", code: "invalid_source", message: "the source is not JSON" }]);
  const found = locateSteps(source, errors);
  if (!found) return fail(errors);
  if (found.steps.length === 0) return fail([{ path: found.base || "(source)", code: "no_steps", message: "a tool sequence needs at least one step" }]);

  const steps: SeqStep[] = [];
  found.steps.forEach((raw, i) => {
    const path = at(found.base, i);
    if (!isJsonObject(raw)) {
      errors.push({ path, code: "invalid_step", message: "each step is an object with toolName and parameters" });
      return;
    }
    const step: SeqStep = { source: raw, path };
    if (raw.order !== undefined) {
      if (typeof raw.order !== "number" || !Number.isFinite(raw.order)) errors.push({ path: at(path, "order"), code: "invalid_order", message: "order must be a number" });
      else step.order = raw.order;
    }
    steps.push(step);
  });
  const ordered = steps.filter((s) => s.order !== undefined);
  if (ordered.length > 0 && ordered.length < steps.length) {
    for (const s of steps) if (s.source.order === undefined) errors.push({ path: at(s.path, "order"), code: "missing_order", message: "some steps have an order and this one has none" });
  }
  const seen = new Map<number, string>();
  for (const s of ordered) {
    if (seen.has(s.order!)) errors.push({ path: at(s.path, "order"), code: "duplicate_order", message: `order ${s.order} is also used by ${seen.get(s.order!)}` });
    else seen.set(s.order!, s.path);
  }
  if (ordered.length === steps.length) steps.sort((a, b) => a.order! - b.order!);

  const ids = new IdAllocator();
  const stepIds = steps.map((_, i) => `step${i + 1}`);
  for (const id of stepIds) ids.claim(id);
  const inputKeys = new Set<string>();
  const nodes: JsonObject[] = [];
  const edges: JsonObject[] = [];
  const nodeOrigins: Record<string, SourceOrigin> = {};
  const edgeOrigins: SourceOrigin[] = [];
  // For a failed import: each node with the parts of its step it is made of (its tool and its
  // parameters; the step's order only places it in the chain, which is edges).
  const converted: ConvertedNode[] = [];
  let prev: string | undefined;

  steps.forEach((s, i) => {
    const id = stepIds[i]!;
    const toolField = pick(s.source, ["toolName", "tool_name", "tool"]);
    let tool = "";
    if (toolField === undefined || toolField.value === "" || toolField.value === null) {
      errors.push({ path: at(s.path, toolField?.key ?? "toolName"), code: "missing_tool", message: "the step names no tool" });
    } else if (typeof toolField.value !== "string" || !TOOL_NAME.test(toolField.value)) {
      errors.push({ path: at(s.path, toolField.key), code: "invalid_tool_name", message: `tool name ${JSON.stringify(toolField.value)} is not dot-separated words of letters, digits, _ or -` });
    } else {
      tool = toolField.value;
    }
    const paramsField = pick(s.source, ["parameters", "params", "arguments"]);
    let params: JsonObject = {};
    if (paramsField !== undefined && paramsField.value !== null) {
      if (isJsonObject(paramsField.value)) params = paramsField.value;
      else errors.push({ path: at(s.path, paramsField.key), code: "invalid_params", message: "parameters must be an object of parameter names to values" });
    }
    let paramsId: string | undefined;
    const paramsPath = at(s.path, paramsField?.key ?? "parameters");
    const t = translateParams(params, paramsPath, {
      bareRefs: false,
      resolve: (segments) => {
        const [head, ...rest] = segments;
        if (head === "input") {
          if (rest.length === 0) return { segments: ["input"] };
          return { segments: ["input", ...rest], ...(typeof rest[0] === "string" ? { inputKey: rest[0] } : {}) };
        }
        const k = typeof head === "string" ? stepIds.indexOf(head) : -1;
        if (k === i) return { code: "self_reference", message: `"${String(head)}" is this step; a step can only read earlier steps' results` };
        if (k > i) return { code: "forward_reference", message: `"${String(head)}" runs after this step; a step can only read earlier steps' results` };
        if (k >= 0) return { segments: [head!, ...rest], dependsOn: head as string };
        return { segments: ["input", ...segments], ...(typeof head === "string" ? { inputKey: head } : {}) };
      },
    }, (key) => {
      paramsId ??= ids.fresh(`${id}_params`);
      return renderPath([paramsId, key]);
    }, errors);
    for (const k of t.inputKeys) inputKeys.add(k);
    if (s.source.required === false) {
      warnings.push(`${s.path || `step ${i + 1}`} (${tool || "?"}) is marked required: false; Baton runs every step as required, so its failure fails the workflow`);
    }

    const toolPath = at(s.path, toolField?.key ?? "toolName");
    const blockedBy = (e: ImportIssue): boolean => within(e.path, toolPath) || within(e.path, paramsPath);
    const entry = paramsId ?? id;
    // The edge into a step exists because of where the step is in the sequence.
    if (prev !== undefined) {
      edges.push({ from: prev, to: entry });
      edgeOrigins.push({ path: s.path });
    }
    if (paramsId !== undefined) {
      const transform: JsonObject = { id: paramsId, type: "transform", description: `computes the templated parameters of "${id}"`, config: { expression: computedExpression(t.computed) } };
      nodes.push(transform);
      nodeOrigins[paramsId] = { path: paramsPath };
      converted.push({ node: transform, origin: { path: paramsPath }, blockedBy });
      edges.push({ from: paramsId, to: id });
      edgeOrigins.push({ path: paramsPath });
    }
    const node: JsonObject = { id, type: "tool" };
    const fields: Record<string, string> = { "config.tool": toolPath, input: paramsPath };
    if (typeof s.source.description === "string") {
      node.description = s.source.description;
      fields.description = at(s.path, "description");
    }
    node.config = { tool };
    node.input = t.input;
    nodes.push(node);
    nodeOrigins[id] = { path: s.path, fields };
    converted.push({ node, origin: { path: s.path, fields }, blockedBy });
    prev = id;
  });
  if (errors.length > 0) return failWithNodes(errors, converted);

  const definition: JsonObject = { schemaVersion: 1, start: (nodes[0]!.id as string) };
  const schema = inputSchemaFor(inputKeys);
  if (schema) definition.inputSchema = schema;
  definition.nodes = nodes;
  definition.edges = edges;
  return { ok: true, definition, warnings, sourceMap: { fields: {}, nodes: nodeOrigins, edges: edgeOrigins } };
}
