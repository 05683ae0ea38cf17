/**
 * Definition validation. Reports every problem at once, each with a path into the
 * definition (`nodes[2].type`), a stable code and a message.
 */
import { z } from "zod";
import { collectPaths, parsePath } from "./path.ts";
import type { WorkflowDefinition } from "./model.ts";
import { NODE_TYPES, PLANNED_NODE_TYPES, canonicalType, workflowDefinitionSchema } from "./model.ts";

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
export function validateWorkflow(input: unknown): ValidationResult {
  const parsed = workflowDefinitionSchema.safeParse(input);
  if (!parsed.success) {
    return {
      ok: false,
      errors: parsed.error.issues.map((i) => ({ path: zodPath(i.path) || "(definition)", code: "invalid_shape", message: i.message })),
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
      }
    }
    for (const ref of collectPaths(n.input ?? {}, `nodes[${i}].input`).concat(collectPaths(n.config, `nodes[${i}].config`))) {
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
    if (!ids.has(e.from)) errors.push({ path: `edges[${i}].from`, code: "dangling_edge", message: `edge from missing node "${e.from}"` });
    if (!ids.has(e.to)) errors.push({ path: `edges[${i}].to`, code: "dangling_edge", message: `edge to missing node "${e.to}"` });
    if (e.to === start) errors.push({ path: `edges[${i}].to`, code: "edge_into_start", message: `the start node "${start}" cannot have incoming edges` });
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

  // Cycles: loops need loop nodes (with iteration limits), so a plain cycle is an error.
  if (errors.length === 0 && start !== undefined) {
    const color = new Map<string, 1 | 2>();
    const cycle: string[] = [];
    const visit = (id: string, trail: string[]): boolean => {
      color.set(id, 1);
      for (const next of out.get(id) ?? []) {
        const c = color.get(next);
        if (c === 1) {
          cycle.push(...trail.slice(trail.indexOf(next)), id, next);
          return true;
        }
        if (c === undefined && visit(next, [...trail, id])) return true;
      }
      color.set(id, 2);
      return false;
    };
    for (const n of def.nodes) {
      if (!color.has(n.id) && visit(n.id, [])) {
        errors.push({ path: "edges", code: "unbounded_cycle", message: `cycle ${[...new Set(cycle)].join(" → ")} has no loop bound` });
        break;
      }
    }
    const reach = new Set<string>([start]);
    const queue = [start];
    while (queue.length) {
      for (const next of out.get(queue.shift()!) ?? []) {
        if (!reach.has(next)) {
          reach.add(next);
          queue.push(next);
        }
      }
    }
    def.nodes.forEach((n, i) => {
      if (!reach.has(n.id)) errors.push({ path: `nodes[${i}]`, code: "unreachable_node", message: `node "${n.id}" cannot be reached from the start node "${start}"` });
    });
  }

  if (errors.length > 0) return { ok: false, errors };
  return {
    ok: true,
    workflow: { ...def, start: start!, nodes: def.nodes.map((n) => ({ ...n, type: canonicalType(n.type) })) },
  };
}

/** JSON Schema of the definition format, for the OpenAPI document. */
export const workflowDefinitionJsonSchema = z.toJSONSchema(workflowDefinitionSchema, { io: "input", unrepresentable: "any" });
