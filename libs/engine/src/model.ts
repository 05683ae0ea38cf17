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
 * "approved" | "rejected"`; any edge may carry a guard `condition` (JSONata, or a comparison
 * `{ left, op, right }` as a condition node's config). A node with several incoming edges runs once every
 * incoming edge is decided and at least one was taken (dead-path elimination), so
 * the same rule serves branch merges and parallel joins.
 */
import { z } from "zod";
import type { JsonValue } from "./json.ts";
import { looksLikePath } from "./path.ts";
import { synthdevMaterialSchema, synthdevStateConfigSchema } from "./synthdev.ts";

export const jsonValue: z.ZodType<JsonValue> = z.lazy(() =>
  z.union([z.string(), z.number(), z.boolean(), z.null(), z.array(jsonValue), z.record(z.string(), jsonValue)]),
);

export const retryPolicySchema = z.object({
  /** Attempts in all, the first included. @default 1 */
  maxAttempts: z.number().int().min(1).max(100).default(1),
  /** Wait before the second attempt; 0 retries at once. @default 1000 */
  initialDelayMs: z.number().int().min(0).max(86_400_000).default(1000),
  /** Each further wait is the previous one times this. @default 2 */
  backoffMultiplier: z.number().min(1).max(10).default(2),
  /** Cap of one wait. @default 60000 */
  maxDelayMs: z.number().int().min(0).max(86_400_000).default(60_000),
  /** Each wait varies by up to this fraction either way (derived from the call id, so replays agree). @default 0.2 */
  jitter: z.number().min(0).max(1).default(0.2),
});

/** How a node's incoming edges combine: all decided and one taken (default), the first taken, or n taken. */
export const joinSchema = z.union([z.literal("all"), z.literal("any"), z.object({ n: z.number().int().min(1) })]);

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
  /** Key handed to tool handlers for their own side effects (a value or `$.path`). @default "<executionId>.<nodeId>" */
  idempotencyKey: z.string().min(1).max(256).optional(),
  /** @default "all" */
  join: joinSchema.optional(),
  /** "first": only the first out-edge (in definition order) whose label and guard match is taken. @default "all" */
  branching: z.enum(["all", "first"]).optional(),
  /** Bounds re-entering this node through a cycle. */
  maxVisits: z.number().int().min(1).max(100_000).optional(),
});

/** Comparison operators of the condition node. */
export const CONDITION_OPS = ["eq", "ne", "gt", "gte", "lt", "lte", "exists", "truthy", "in", "contains"] as const;

/**
 * A comparison `{ left, op, right }`, as a condition node's config, a whileLoop's condition or
 * an edge guard: `left` and `right` are values, `$.path` strings read from the context like a
 * node input (condition.ts, evaluateCondition, says what each op means).
 */
export const conditionConfigSchema = z.object({
  left: jsonValue,
  op: z.enum(CONDITION_OPS),
  right: jsonValue.optional(),
});

/**
 * A test written either way: a JSONata expression, true when its value is truthy, or a
 * comparison ({@link conditionConfigSchema}). An edge guard and a whileLoop's condition are one.
 */
export const conditionSchema = z.union([z.string().min(1), conditionConfigSchema], { error: "a condition is a JSONata expression (text) or a comparison { left, op, right }" });

export const edgeSchema = z.object({
  from: z.string(),
  to: z.string(),
  when: z.string().optional(),
  /**
   * Guard: the edge is taken only when it holds. A JSONata expression over the context, with
   * `$output` bound to the source node's output; or a comparison `{ left, op, right }` over
   * the context, which reads the source node's output where the node wrote it (`$.<id>`, or
   * its `output` path), as every later node does.
   */
  condition: conditionSchema.optional().describe(
    "Guard: a JSONata expression ($output is the source node's output), or a comparison { left, op, right } as a condition node's config, reading the output at $.<source id>; the edge is taken only when it holds",
  ),
});

export const limitsSchema = z.object({
  /** Nodes of one execution doing outside work (tool calls, children, items) at once. @default unlimited */
  maxConcurrency: z.number().int().min(1).max(10_000).optional().describe("Nodes of one execution doing outside work (tool calls, children, timers) at once; the rest wait ready. Default: unlimited"),
  /** The execution fails with BATON_DEADLINE_EXCEEDED this long after it starts. */
  deadlineMs: z.number().int().min(1).max(30 * 86_400_000).optional().describe("The execution fails with BATON_DEADLINE_EXCEEDED this long after it starts"),
  /**
   * Node starts one execution may make (every attempt of every node, as its journal rows
   * count them); the start that would exceed it fails the execution with BATON_STEP_LIMIT.
   * A safety net for a run that goes round longer than its definition meant. @default 100000
   */
  maxSteps: z.number().int().min(1).max(10_000_000).optional().describe("Node starts (every attempt of every node) one execution may make; the start that would exceed it fails the execution with BATON_STEP_LIMIT. Default: 100000"),
});

/** `limits.maxSteps` when a definition leaves it out. */
export const DEFAULT_MAX_STEPS = 100_000;

/** Workflow-level LLM defaults (seed 004 `agentConfig`); nodes override field by field. */
export const agentConfigSchema = z.object({
  /** `provider:model` or an alias. */
  model: z.string().min(1).optional(),
  system: z.string().optional(),
  temperature: z.number().min(0).max(2).optional(),
  maxTokens: z.number().int().min(1).max(1_000_000).optional(),
  timeoutMs: z.number().int().min(1).max(3_600_000).optional(),
  /** Model levels (SynthDev roles' `level`) → model refs, e.g. `{ "base": "openai:gpt-4o-mini", "smart": "anthropic:claude-sonnet-4" }`. */
  levels: z.record(z.string(), z.string().min(1)).optional(),
}).passthrough();

const definitionShape = {
  /** Definition format version. @default 1 */
  schemaVersion: z.literal(1).default(1),
  start: z.string().optional(),
  /** JSON Schema the execution input must satisfy. */
  inputSchema: z.record(z.string(), jsonValue).optional(),
  limits: limitsSchema.optional(),
  /** LLM defaults of the agent nodes. */
  agentConfig: agentConfigSchema.optional(),
  /** Safety limit of tool-calling loops. @default 10 */
  maxToolIterations: z.number().int().min(1).max(1000).optional(),
  /** A SynthDev workflow's own material (seed 002): workflow JSON, script and roles; see synthdev.ts. */
  synthdev: synthdevMaterialSchema.optional(),
  nodes: z.array(nodeSchema),
  edges: z.array(edgeSchema).default([]),
  /** Execution output: keys mapped to `$.path`s. Default: the last finished node's output. */
  output: z.record(z.string(), jsonValue).optional(),
};

export const workflowDefinitionSchema = z.object(definitionShape);

export type NodeDefinition = z.infer<typeof nodeSchema>;
export type EdgeDefinition = z.infer<typeof edgeSchema>;
export type WorkflowDefinition = z.infer<typeof workflowDefinitionSchema> & { start: string };
export type RetryPolicy = z.infer<typeof retryPolicySchema>;
export type Join = z.infer<typeof joinSchema>;
/** A comparison `{ left, op, right }` with the condition node's semantics (condition.ts). */
export type Comparison = z.infer<typeof conditionConfigSchema>;
/** An edge guard or a whileLoop's condition: JSONata text, or a {@link Comparison}. */
export type Condition = z.infer<typeof conditionSchema>;

const toolName = z.string().regex(/^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/, "tool names are dot-separated words");
export const toolConfigSchema = z.union([
  z.object({ tool: toolName }).strict(),
  z.object({ calls: z.array(z.object({ tool: toolName, input: z.record(z.string(), jsonValue).default({}) })).min(1).max(256) }).strict(),
], { error: "a tool node needs config.tool (one call with the node input) or config.calls (several calls at once)" });

export const reviewConfigSchema = z.object({
  /** Shown to the reviewer and to `execution.paused` subscribers. @default "review required" */
  reason: z.string().default("review required"),
  /** What is under review; becomes `data` of the node output on approve. */
  subject: jsonValue.optional(),
});

export const setVariableConfigSchema = z.object({ values: z.record(z.string(), jsonValue) });

export const transformConfigSchema = z.object({ expression: z.string().min(1) });

export const delayConfigSchema = z.union([
  z.object({ ms: z.union([z.number().int().min(0).max(366 * 86_400_000), z.string().startsWith("$")]) }).strict(),
  z.object({
    until: z.string().min(1).refine((u) => looksLikePath(u) || !Number.isNaN(Date.parse(u)), "until is an ISO time (2026-01-01T09:00:00Z) or a $.path"),
  }).strict(),
], { error: "a delay needs config.ms (milliseconds or a $.path) or config.until (an ISO time or a $.path)" });

export const emitConfigSchema = z.object({
  event: z.string().regex(/^[A-Za-z0-9_.-]{1,128}$/, "event names are letters, digits, _, - and ."),
  data: jsonValue.optional(),
});

export const workflowRefSchema = z.object({
  id: z.number().int().positive().optional(),
  slug: z.string().min(1).optional(),
  /** @default the version that was current when the top-level run began (docs/workflows.md, "Sub-workflows") */
  version: z.number().int().positive().optional(),
}).refine((r) => r.id !== undefined || r.slug !== undefined, { message: "a workflow reference needs id or slug" });

export const subworkflowConfigSchema = z.object({ workflow: workflowRefSchema });

export const whileLoopConfigSchema = z.object({
  /** JSONata (`$iteration` = the iterations so far) or a comparison; true → another pass along `body`. */
  condition: conditionSchema,
  maxIterations: z.number().int().min(1).max(100_000),
  /** What reaching maxIterations does. @default "fail" */
  onLimit: z.enum(["fail", "exit"]).default("fail"),
});

export const bodySchema = z.object({
  start: z.string().optional(),
  nodes: z.array(nodeSchema).min(1),
  edges: z.array(edgeSchema).default([]),
  output: z.record(z.string(), jsonValue).optional(),
});

export const forEachConfigSchema = z.object({
  /** `$.path` of the list. */
  items: z.string().startsWith("$"),
  /** Items in flight at once. @default 4 */
  concurrency: z.number().int().min(1).max(256).default(4),
  tool: toolName.optional(),
  workflow: workflowRefSchema.optional(),
  body: bodySchema.optional(),
  /** Input of each item's call or run; `$.item` and `$.index` are the item and its position. @default { "item": "$.item" } for workflows, "$.item" as the tool's args */
  itemInput: jsonValue.optional(),
  /** JSONata over `{ results, items }`; its value becomes the node output instead of the results. */
  reduce: z.string().min(1).optional(),
  /** Record a failed item as `{ "error": {code, message} }` instead of failing the node. @default false */
  continueOnError: z.boolean().default(false),
}).refine((c) => [c.tool, c.workflow, c.body].filter((x) => x !== undefined).length === 1, { message: "forEach needs exactly one of tool, workflow or body" });

export type ForEachConfig = z.infer<typeof forEachConfigSchema>;

// ---- agent nodes (seed 004 §2): LLM calls and their tools go to workers like any tool call ----

const llmSettings = {
  model: z.string().min(1).optional(),
  system: z.string().optional(),
  temperature: z.number().min(0).max(2).optional(),
  maxTokens: z.number().int().min(1).max(1_000_000).optional(),
  timeoutMs: z.number().int().min(1).max(3_600_000).optional(),
  /** `$.path` of the conversation. @default "$.messages" */
  messages: z.string().startsWith("$").optional(),
  /** A user message for this call, `{{$.path}}` placeholders filled from the context. */
  prompt: z.string().optional(),
  /** Names of registered tools the model may call. */
  tools: z.array(toolName).max(128).optional(),
  /** JSON Schema of a structured answer. */
  responseFormat: z.record(z.string(), jsonValue).optional(),
};

export const llmConfigSchema = z.object({
  ...llmSettings,
  /** Append the answer to the conversation and set `$.toolCalls`. @default true */
  append: z.boolean().default(true),
});

export const toolLoopConfigSchema = z.object({
  ...llmSettings,
  /** LLM → tools rounds before the loop stops. @default the workflow's maxToolIterations, else 10 */
  maxToolIterations: z.number().int().min(1).max(1000).optional(),
  /** Stop as soon as the model calls this tool (its arguments become the answer). */
  stopOnTool: toolName.optional(),
  /** Append the loop's messages to the conversation. @default true */
  append: z.boolean().default(true),
});

export const toolExecutorConfigSchema = z.object({
  /** `$.path` of the tool calls `[{ id, name, args }]`. @default "$.toolCalls" */
  toolCalls: z.string().startsWith("$").default("$.toolCalls"),
  /** Run the calls at once (default) or one by one. */
  parallel: z.boolean().default(true),
  append: z.boolean().default(true),
});

export const promptConfigSchema = z.object({
  /** Text with `{{$.path}}` placeholders. */
  template: z.string(),
  /** Append the text to the conversation with this role. */
  role: z.enum(["system", "user", "assistant"]).optional(),
});

export const subagentConfigSchema = z.object({
  agent: workflowRefSchema,
  /** A task for the sub-agent, `{{$.path}}` placeholders filled. */
  task: z.string().optional(),
  /** Pass the conversation (`$.messages` by default) to the sub-agent. @default true */
  shareMessages: z.boolean().default(true),
  /** Append the sub-agent's answer as an assistant message. @default true */
  append: z.boolean().default(true),
});

export const memoryReadConfigSchema = z.object({
  agentId: z.union([z.number().int(), z.string().startsWith("$")]).optional(),
  /** What to look for, `{{$.path}}` placeholders filled. @default the last user message */
  query: z.string().optional(),
  limit: z.number().int().min(1).max(100).default(5),
  /** Add the memories to the conversation as a system message. @default true */
  inject: z.boolean().default(true),
});

export const memoryWriteConfigSchema = z.object({
  agentId: z.union([z.number().int(), z.string().startsWith("$")]).optional(),
  /** `{{$.path}}` placeholders filled. @default "<executionId>.<nodeId>" */
  key: z.string().min(1).optional(),
  /** `{{$.path}}` placeholders filled. @default the last assistant message */
  content: z.string().optional(),
  metadata: z.record(z.string(), jsonValue).optional(),
});

export const embedConfigSchema = z.object({ model: z.string().min(1).optional(), values: jsonValue });
export const ragConfigSchema = z.object({ query: z.string(), topK: z.number().int().min(1).max(100).default(5), agentId: z.union([z.number().int(), z.string().startsWith("$")]).optional() });
export const imageGenConfigSchema = z.object({ model: z.string().min(1).optional(), prompt: z.string(), size: z.string().optional() });
export type WorkflowRef = z.infer<typeof workflowRefSchema>;

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
  condition: { inline: true, branches: ["true", "false"], config: z.union([conditionConfigSchema, transformConfigSchema]) },
  transform: { inline: true, branches: [], config: transformConfigSchema },
  setVariable: { inline: true, branches: [], config: setVariableConfigSchema },
  delay: { inline: false, branches: [], config: delayConfigSchema },
  emit: { inline: true, branches: [], config: emitConfigSchema },
  forEach: { inline: false, branches: [], config: forEachConfigSchema },
  whileLoop: { inline: true, branches: ["body", "exit"], config: whileLoopConfigSchema },
  subworkflow: { inline: false, branches: [], config: subworkflowConfigSchema },
  "agent.humanReview": { inline: false, branches: ["approved", "rejected"], config: reviewConfigSchema },
  "agent.prompt": { inline: true, branches: [], config: promptConfigSchema },
  "agent.llm": { inline: false, branches: [], config: llmConfigSchema },
  "agent.toolExecutor": { inline: false, branches: [], config: toolExecutorConfigSchema },
  "agent.toolLoop": { inline: false, branches: [], config: toolLoopConfigSchema },
  "agent.subagent": { inline: false, branches: [], config: subagentConfigSchema },
  "agent.memory.read": { inline: false, branches: [], config: memoryReadConfigSchema },
  "agent.memory.write": { inline: false, branches: [], config: memoryWriteConfigSchema },
  "agent.embed": { inline: false, branches: [], config: embedConfigSchema },
  "agent.rag": { inline: false, branches: [], config: ragConfigSchema },
  "agent.imageGen": { inline: false, branches: [], config: imageGenConfigSchema },
  "synthdev.state": { inline: false, branches: [], config: synthdevStateConfigSchema },
});

/** The worker tool behind each agent node that makes one call. */
export const AGENT_TOOLS: Readonly<Record<string, string>> = Object.freeze({
  "agent.llm": "llm.chat",
  "agent.toolLoop": "llm.chat",
  "agent.memory.read": "memory.search",
  "agent.rag": "memory.search",
  "agent.memory.write": "memory.write",
  "agent.embed": "llm.embed",
  "agent.imageGen": "llm.image",
});

/** Aliases accepted in definitions, mapped to the canonical type. */
export const NODE_TYPE_ALIASES: Readonly<Record<string, string>> = Object.freeze({ humanReview: "agent.humanReview" });

/** Types named by the seeds that this version cannot execute yet; validation says so. */
export const PLANNED_NODE_TYPES: readonly string[] = [];

export function canonicalType(type: string): string {
  return NODE_TYPE_ALIASES[type] ?? type;
}
