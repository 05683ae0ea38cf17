/**
 * The canonical workflow definition: a directed graph of typed nodes.
 *
 * ```json
 * { "start": "lookup",
 *   "nodes": [ { "id": "lookup", "type": "tool", "config": { "tool": "json.transform" }, "input": { "data": "$.input" } },
 *              { "id": "big", "type": "condition", "config": { "left": "$.lookup.total", "op": "gt", "right": 100 } } ],
 *   "edges": [ { "from": "lookup", "to": "big" } ] }
 * ```
 * Each node reads its `input` (values, with `$.path` strings read from the context)
 * and writes its output into the context at `output` (default `$.<id>`). Edges out of
 * a condition carry `when: "true" | "false"`; out of a human review `when:
 * "approved" | "rejected"`. A node with several incoming edges runs once every
 * incoming edge is decided and at least one was taken (dead-path elimination), so
 * the same rule serves branch merges and parallel joins.
 */
import { z } from "zod";
import type { JsonValue } from "./json.ts";

export const jsonValue: z.ZodType<JsonValue> = z.lazy(() =>
  z.union([z.string(), z.number(), z.boolean(), z.null(), z.array(jsonValue), z.record(z.string(), jsonValue)]),
);

export const retryPolicySchema = z.object({
  /** Attempts in all, the first included. @default 1 */
  maxAttempts: z.number().int().min(1).max(100).default(1),
});

export const nodeSchema = z.object({
  id: z.string().regex(/^[A-Za-z_][A-Za-z0-9_-]{0,63}$/, "node ids are 1-64 letters, digits, _ or -, starting with a letter or _"),
  type: z.string().min(1),
  name: z.string().optional(),
  description: z.string().optional(),
  config: z.record(z.string(), jsonValue).default({}),
  input: z.record(z.string(), jsonValue).optional(),
  /** Where the node's output goes in the context. @default "$.<id>" */
  output: z.string().optional(),
  retry: retryPolicySchema.optional(),
  /** Per-attempt time limit for the node's work (tool calls). */
  timeoutMs: z.number().int().min(1).max(86_400_000).optional(),
});

export const edgeSchema = z.object({
  from: z.string(),
  to: z.string(),
  when: z.string().optional(),
});

export const workflowDefinitionSchema = z.object({
  /** Definition format version. @default 1 */
  schemaVersion: z.literal(1).default(1),
  start: z.string().optional(),
  nodes: z.array(nodeSchema),
  edges: z.array(edgeSchema).default([]),
  /** Execution output: keys mapped to `$.path`s. Default: the last finished node's output. */
  output: z.record(z.string(), jsonValue).optional(),
});

export type NodeDefinition = z.infer<typeof nodeSchema>;
export type EdgeDefinition = z.infer<typeof edgeSchema>;
export type WorkflowDefinition = z.infer<typeof workflowDefinitionSchema> & { start: string };

/** Comparison operators of the condition node. */
export const CONDITION_OPS = ["eq", "ne", "gt", "gte", "lt", "lte", "exists", "truthy", "in", "contains"] as const;

export const conditionConfigSchema = z.object({
  left: jsonValue,
  op: z.enum(CONDITION_OPS),
  right: jsonValue.optional(),
});

export const toolConfigSchema = z.object({ tool: z.string().regex(/^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/, "tool names are dot-separated words") });

export const reviewConfigSchema = z.object({
  /** Shown to the reviewer and to `execution.paused` subscribers. @default "review required" */
  reason: z.string().default("review required"),
  /** What is under review; becomes `data` of the node output on approve. */
  subject: jsonValue.optional(),
});

export const setVariableConfigSchema = z.object({ values: z.record(z.string(), jsonValue) });

export interface NodeTypeSpec {
  /** Runs inside the executor without leaving it. */
  inline: boolean;
  /** Allowed `when` labels on outgoing edges; empty means edges carry no label. */
  branches: readonly string[];
  config: z.ZodType;
}

/** Node types this engine executes. */
export const NODE_TYPES: Readonly<Record<string, NodeTypeSpec>> = Object.freeze({
  tool: { inline: false, branches: [], config: toolConfigSchema },
  condition: { inline: true, branches: ["true", "false"], config: conditionConfigSchema },
  "agent.humanReview": { inline: false, branches: ["approved", "rejected"], config: reviewConfigSchema },
  setVariable: { inline: true, branches: [], config: setVariableConfigSchema },
});

/** Aliases accepted in definitions, mapped to the canonical type. */
export const NODE_TYPE_ALIASES: Readonly<Record<string, string>> = Object.freeze({ humanReview: "agent.humanReview" });

/** Types named by the seeds that this version cannot execute yet; validation says so. */
export const PLANNED_NODE_TYPES: readonly string[] = [
  "transform", "delay", "emit", "forEach", "whileLoop", "subworkflow",
  "agent.llm", "agent.toolExecutor", "agent.toolLoop", "agent.prompt", "agent.memory.read", "agent.memory.write",
  "agent.embed", "agent.rag", "agent.imageGen", "agent.subagent",
];

export function canonicalType(type: string): string {
  return NODE_TYPE_ALIASES[type] ?? type;
}
