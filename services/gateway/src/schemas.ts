/**
 * The API's wire shapes (zod; they are also the OpenAPI document) and the mapping
 * from store records to them. Records are mapped field by field so a column added
 * to the store never leaks to clients unannounced, and timestamps become ISO text.
 */
import { z } from "zod";
import { agentConfigSchema, IMPORT_FORMATS } from "@baton/engine";
import type {
  ExecutionRecord,
  JsonObject,
  MemoryRecord,
  NodeExecutionRecord,
  ReviewRecord,
  WorkflowRecord,
  WorkflowVersionRecord,
} from "@baton/store";

export const INT32_MAX = 2_147_483_647;

export const TAGS = {
  workflows: "Workflows",
  executions: "Executions",
  memory: "Memory",
  reviews: "Reviews",
  health: "Health",
  tools: "Tools",
  toolSources: "Tool sources",
  blobs: "Blobs",
} as const;

/** The API-key security requirement of every `/api/*` route. */
export const API_SECURITY: { [scheme: string]: string[] }[] = [{ bearerAuth: [] }, { apiKeyHeader: [] }];

// ---------------------------------------------------------------- inputs

/**
 * A whole number written in decimal digits, from the path or the query, between `min` and
 * `max`. Not `z.coerce.number()`, which reads what `Number()` does: `0x10`, `1e2`, `+1`, ` 1`
 * and `1.0` would all be taken for numbers.
 */
function decimal(min: number, max: number) {
  return z.string().regex(/^[0-9]{1,10}$/, "must be a whole number in decimal digits").transform(Number).pipe(z.number().int().min(min).max(max));
}

/** A serial row id taken from the path or query (int32, like the database column). */
export const rowId = decimal(1, INT32_MAX);

export const idParams = z.object({ id: rowId.describe("Row id") });

export const pageQuery = {
  limit: decimal(1, 200).default(50).describe("Page size (1-200, default 50)"),
  offset: decimal(0, INT32_MAX).default(0).describe("Rows to skip (default 0)"),
};

/**
 * A query string of these parameters and no others: a misspelt filter or one a route does not
 * have (`?stauts=paused`, `offset` on a list that does not page) would otherwise be ignored and
 * the answer look like the one asked for. Refused as unknown, like a body's unknown property.
 */
export const queryOf = <T extends z.ZodRawShape>(shape: T) => z.strictObject(shape);

/** The query of a plain paged list. */
export const pageListQuery = queryOf(pageQuery);

/**
 * A JSON object. Request bodies come from JSON.parse, so every value in one is JSON;
 * the cast only tells the type checker so.
 */
const jsonObject = z.record(z.string(), z.unknown()) as unknown as z.ZodType<JsonObject, JsonObject>;

/**
 * A workflow definition. Its full shape is checked by the engine's validator, which
 * reports every problem at once; here it only has to be a JSON object. In the
 * OpenAPI document it is the `WorkflowDefinition` component (the engine's schema).
 */
export const workflowDefinitionSchema = z
  .record(z.string(), z.unknown())
  .meta({ id: "WorkflowDefinition", description: "A workflow graph: nodes, edges, start node" }) as unknown as z.ZodType<JsonObject, JsonObject>;

/**
 * A workflow's LLM defaults (seed 004 `agentConfig`), checked as the engine checks a
 * definition's own: its nodes' defaults under the definition's `agentConfig`, which wins field
 * by field. Kept with each version, as the definition is.
 */
const workflowAgentConfig = (agentConfigSchema as unknown as z.ZodType<JsonObject, JsonObject>).describe(
  "Default LLM configuration of the workflow's LLM nodes (model, system, temperature, maxTokens, timeoutMs, levels); the definition's own agentConfig wins field by field",
);

export const slugSchema = z
  .string()
  .min(1)
  .max(100)
  .regex(/^[a-z0-9]+(?:-[a-z0-9]+)*$/, "a slug is lower-case letters and digits separated by single dashes");

export const workflowCreateBody = z.strictObject({
  name: z.string().trim().min(1).max(200),
  slug: slugSchema.optional().describe("URL-safe identifier, unique per tenant; derived from the name when absent (lowercase ASCII words; a name with letters of other scripts gets an 8-hex-digit suffix from a hash of the name)"),
  description: z.string().max(10_000).optional(),
  definition: workflowDefinitionSchema,
  agentConfig: workflowAgentConfig.optional(),
  memoryConfig: jsonObject.optional().describe("Memory settings: enabled, scope, retrieval strategy"),
  mcpExport: z.boolean().optional().describe("Expose the workflow as an MCP server"),
  enabled: z.boolean().optional(),
});

export const workflowUpdateBody = z
  .strictObject({
    name: z.string().trim().min(1).max(200).optional(),
    slug: slugSchema.optional(),
    description: z.string().max(10_000).optional(),
    definition: workflowDefinitionSchema.optional(),
    agentConfig: workflowAgentConfig.optional(),
    memoryConfig: jsonObject.optional(),
    mcpExport: z.boolean().optional(),
    enabled: z.boolean().optional(),
    changeDescription: z.string().max(10_000).optional().describe("What changed; stored with the new version"),
  })
  .refine((b) => Object.keys(b).some((k) => k !== "changeDescription"), {
    message: "nothing to update: send at least one field besides changeDescription",
  });

export const versionParams = z.object({ id: rowId, versionId: rowId.describe("Id of the version row (from the versions list)") });

export const versionNumberParams = z.object({ id: rowId, version: rowId.describe("Version number (1 = as created)") });

/** The longest deadline a run may be given: 30 days. */
export const DEADLINE_MAX_MS = 30 * 24 * 60 * 60 * 1000;

export const executeBody = z
  .strictObject({
    input: jsonObject.optional().describe("Initial state of the run; checked against the definition's `inputSchema` when it has one"),
    agentId: z.number().int().min(1).max(INT32_MAX).optional().describe("The agent that triggers the run"),
    sessionId: z.number().int().min(1).max(INT32_MAX).optional().describe("The agent session the run belongs to"),
    deadlineMs: z
      .number()
      .int()
      .min(1)
      .max(DEADLINE_MAX_MS)
      .optional()
      .describe("The whole run must end within this many milliseconds from now (1 ms to 30 days); it fails with a deadline error otherwise"),
  })
  .nullish();

export const importBody = z.strictObject({
  format: z.enum(IMPORT_FORMATS).describe(
    "plan: an LLM-planned DAG; toolSequence: ordered tool steps; stateMachine: XState-like states; " +
    "synthdev: a SynthDev workflow, source = { workflow, script, roles, agentConfig? } (docs/agents.md)",
  ),
  source: z.union([jsonObject, z.array(z.unknown())], { error: (issue) => `expected a JSON object (or, for toolSequence, an array of steps), received ${issue.input === null ? "null" : Array.isArray(issue.input) ? "array" : typeof issue.input}` }).describe("The document to import, in `format` (toolSequence also takes a bare array of steps)"),
  name: z.string().trim().min(1).max(200),
  slug: slugSchema.optional(),
  description: z.string().max(10_000).optional(),
});

export const checkpointParams = z.object({ id: rowId, version: rowId.describe("Checkpoint version (1 = the first step's state)") });

export const blobParams = z.object({
  hash: z
    .string()
    .regex(/^(blob:)?[0-9a-f]{64}$/, "must be a blob reference, blob:<sha256>, or its sha256 (64 lowercase hex digits)")
    .describe("The reference's `blob:<sha256>`, or the sha256 alone"),
});

export const checkpointListQuery = queryOf({
  limit: decimal(1, 1000).optional().describe("At most this many versions, newest first (default: every kept version)"),
});

export const forkBody = z.strictObject({
  version: z.number().int().min(1).max(INT32_MAX).describe("The source's checkpoint version to start from"),
  context: z
    .record(z.string(), z.unknown())
    .optional()
    .describe("Values written into the run's context before it continues, keyed by `$.path` (e.g. `{\"$.plan.steps[0]\": \"…\"}`); `$.input` is read-only; no `__proto__`, no array index above 10000, no path that with its value nests the context more than 128 levels deep"),
});

export const EXECUTION_STATUSES = ["queued", "running", "paused", "completed", "failed", "cancelled"] as const;
export const TERMINAL_STATUSES: ReadonlySet<string> = new Set(["completed", "failed", "cancelled"]);
export const executionStatus = z.enum(EXECUTION_STATUSES);

export const executionListQuery = queryOf({
  workflowId: rowId.optional(),
  status: executionStatus.optional(),
  ...pageQuery,
});

export const resumeBody = z
  .strictObject({
    action: z.enum(["approve", "edit", "reject"]).describe("approve: continue as proposed; edit: continue with `data`; reject: take the rejection path"),
    data: jsonObject.optional().describe("Required for edit, refused with approve and reject: the modified data replacing the node's proposal. Above BATON_LARGE_RESULT_BYTES of JSON it is stored as a blob of the execution and the next nodes read it through its `$ref`"),
    comment: z.string().max(10_000).optional(),
    reviewer: z.string().max(200).optional().describe("Who decided (user id or name)"),
    nodeId: z.string().min(1).max(500).optional()
      .describe("The review node this decision is for (`nodeId` of a pending review in GET /api/reviews). Default: the node the execution is paused at (`currentState`). Needed to choose when several reviews wait at once."),
  })
  .superRefine((b, ctx) => {
    if (b.action === "edit" && b.data === undefined) {
      ctx.addIssue({ code: "custom", path: ["data"], message: "data is required when action is edit" });
    }
    // The engine takes data only with edit: approve continues with the node's own subject.
    if (b.action !== "edit" && b.data !== undefined) {
      ctx.addIssue({ code: "custom", path: ["data"], message: `data is only taken with action edit; ${b.action} ${b.action === "approve" ? "continues with the node's subject as proposed" : "takes the rejection path"} (send edit to continue with this data)` });
    }
  });

export const cancelBody = z.strictObject({ reason: z.string().max(2_000).optional() }).nullish();

export const memoryListQuery = queryOf({
  agentId: rowId.optional(),
  userId: rowId.optional(),
  ...pageQuery,
});

export const memoryCreateBody = z.strictObject({
  agentId: z.number().int().min(1).max(INT32_MAX),
  userId: z.number().int().min(1).max(INT32_MAX).nullish(),
  key: z.string().trim().min(1).max(255),
  content: z.string().min(1).max(100_000).refine((c) => c.trim().length > 0, "must not be blank"),
  metadata: jsonObject.optional(),
});

export const REVIEW_STATUSES = ["pending", "approved", "edited", "rejected"] as const;
export const reviewListQuery = queryOf({
  status: z.enum(REVIEW_STATUSES).optional(),
  executionId: rowId.optional().describe("Only the reviews of this execution and, unless `subRuns=false`, of its sub-runs at any depth"),
  subRuns: z
    .enum(["true", "false"])
    .optional()
    .describe(
      "With `executionId`: `true` (the default) lists the reviews of its sub-runs too (subworkflow, forEach and subagent child executions, at any depth), " +
        "which pause it; `false` only the execution's own",
    ),
  ...pageQuery,
}).superRefine((q, ctx) => {
  if (q.subRuns !== undefined && q.executionId === undefined) {
    ctx.addIssue({ code: "custom", path: ["subRuns"], message: "subRuns needs executionId: it says whether that execution's sub-runs are listed" });
  }
});

// ---------------------------------------------------------------- outputs

const timestamp = z.string().describe("ISO-8601 date-time");
const nullableTimestamp = timestamp.nullable();

export const workflowSchema = z
  .object({
    id: z.number().int(),
    name: z.string(),
    slug: z.string(),
    description: z.string(),
    definition: workflowDefinitionSchema,
    agentConfig: z.unknown(),
    memoryConfig: z.unknown(),
    mcpExport: z.boolean(),
    enabled: z.boolean(),
    version: z.number().int().describe("Current version; every update adds one"),
    createdAt: timestamp,
    updatedAt: timestamp,
  })
  .meta({ id: "Workflow" });

export const workflowVersionSchema = z
  .object({
    id: z.number().int().describe("Version row id, used to restore"),
    workflowId: z.number().int(),
    version: z.number().int(),
    definition: workflowDefinitionSchema,
    agentConfig: z.unknown().describe("The workflow's agentConfig at this version (a restore brings it back; runs of this version use it)"),
    memoryConfig: z.unknown().describe("The workflow's memoryConfig at this version"),
    description: z.string().nullable(),
    createdAt: timestamp,
  })
  .meta({ id: "WorkflowVersion" });

const executionLinks = z.object({ self: z.string(), events: z.string(), nodes: z.string() });

export const executionSchema = z
  .object({
    id: z.number().int(),
    workflowId: z.number().int(),
    workflowVersion: z.number().int().describe("The definition version this run is pinned to"),
    agentId: z.number().int().nullable(),
    sessionId: z.number().int().nullable(),
    status: z.string().describe(`One of: ${EXECUTION_STATUSES.join(", ")}`),
    currentState: z.string().nullable().describe("The node the run is at"),
    input: z.unknown(),
    output: z.unknown(),
    error: z.string().nullable().describe("Why the run failed or was cancelled: `<code>: <message>` (`BATON_CANCELLED: <the cancel's reason>` for a cancel)"),
    tokenUsage: z.unknown(),
    triggerEvent: z.string().nullable(),
    parentExecutionId: z.number().int().nullable().describe("The execution that started this one as a sub-workflow"),
    parentNodeId: z.string().nullable().describe("The parent's node that waits for this run"),
    childKey: z.string().nullable().describe("Which of the parent node's children this is"),
    forkedFromExecutionId: z.number().int().nullable().describe("The execution this run was forked from"),
    forkedFromVersion: z.number().int().nullable().describe("The source's checkpoint version this run started from"),
    deadlineAt: nullableTimestamp.describe("When the whole run must have ended"),
    startedAt: nullableTimestamp,
    completedAt: nullableTimestamp,
    createdAt: timestamp,
    updatedAt: timestamp,
    links: executionLinks,
  })
  .meta({ id: "Execution" });

export const nodeExecutionSchema = z
  .object({
    id: z.number().int(),
    nodeId: z.string(),
    nodeType: z.string(),
    attempt: z.number().int(),
    status: z.string(),
    input: z.unknown(),
    output: z.unknown(),
    tokenUsage: z.unknown(),
    toolCalls: z.unknown(),
    error: z.string().nullable(),
    durationMs: z.number().int().nullable(),
    startedAt: timestamp,
    completedAt: nullableTimestamp,
  })
  .meta({ id: "NodeExecution" });

export const reviewSchema = z
  .object({
    id: z.number().int(),
    executionId: z.number().int().describe("The execution paused at the review, whose resume decides it: a sub-run's for a review inside a sub-run"),
    nodeId: z.string(),
    pauseSeq: z.number().int(),
    status: z.string().describe(`One of: ${REVIEW_STATUSES.join(", ")}`),
    reason: z.string(),
    payload: z.unknown().describe("What the reviewer is shown"),
    decision: z.unknown(),
    reviewer: z.string().nullable(),
    createdAt: timestamp,
    resolvedAt: nullableTimestamp,
  })
  .meta({ id: "Review" });

export const executionDetailSchema = executionSchema
  .extend({
    nodes: z.array(nodeExecutionSchema).describe("Per-node history, in start order"),
    pendingReview: reviewSchema.nullable().describe(
      "The review the run waits for, when paused: the newest pending one of its own or of its sub-runs (a review inside a " +
        "subworkflow or forEach child pauses the parent too). Its `executionId` is the execution whose resume decides it",
    ),
  })
  .meta({ id: "ExecutionDetail" });

export const executionAcceptedSchema = z.object({
  id: z.number().int(),
  status: z.literal("queued"),
  links: executionLinks,
});

export const commandAcceptedSchema = z.object({
  id: z.number().int(),
  status: z.string().describe("The status when the command was accepted; the executor changes it"),
  links: executionLinks,
});

export const checkpointSummarySchema = z
  .object({
    version: z.number().int(),
    updatedAt: timestamp,
    status: z.string().nullable().describe("The run's status at this version"),
    lastNode: z.string().nullable().describe("The node whose step wrote this version"),
    nodes: z.record(z.string(), z.string()).describe("Node id → its status at this version"),
  })
  .meta({ id: "CheckpointSummary" });

export const checkpointSchema = z
  .object({
    version: z.number().int(),
    updatedAt: timestamp,
    state: z.unknown().describe("The engine's full execution state at this version"),
  })
  .meta({ id: "Checkpoint" });

export const blobSchema = z
  .object({
    ref: z.string().describe("`blob:<sha256>` of the value's canonical JSON"),
    size: z.number().int().describe("Bytes of the value's canonical JSON"),
    createdAt: timestamp,
    value: z.unknown().describe("The value the reference stands for"),
  })
  .meta({ id: "Blob" });

export const writtenWorkflowSchema = workflowSchema
  .extend({
    warnings: z.array(z.string()).optional()
      .describe("Fields of the definition that have no effect (`<path>: <why>`, e.g. a typo such as `retries` for `retry`); absent when there are none. The definition is stored as given."),
  })
  .meta({ id: "WrittenWorkflow" });

export const importResultSchema = workflowSchema
  .extend({ warnings: z.array(z.string()).describe("What the importer adapted or dropped, then fields of the definition that have no effect") })
  .meta({ id: "ImportedWorkflow" });

export const memorySchema = z
  .object({
    id: z.number().int(),
    agentId: z.number().int(),
    userId: z.number().int().nullable(),
    key: z.string(),
    content: z.string(),
    metadata: z.unknown(),
    createdAt: timestamp,
    updatedAt: timestamp,
  })
  .meta({ id: "MemoryEntry" });

export function page<T extends z.ZodType>(item: T) {
  return z.object({ items: z.array(item), limit: z.number().int(), offset: z.number().int() });
}

// ---------------------------------------------------------------- mapping

const iso = (d: Date): string => d.toISOString();
const isoOrNull = (d: Date | null): string | null => (d === null ? null : d.toISOString());

export function executionLinksFor(id: number): z.infer<typeof executionLinks> {
  const self = `/api/agent-workflow-executions/${id}`;
  return { self, events: `${self}/events`, nodes: `${self}/nodes` };
}

export function toWorkflow(w: WorkflowRecord): z.infer<typeof workflowSchema> {
  return {
    id: w.id,
    name: w.name,
    slug: w.slug,
    description: w.description,
    definition: w.definition,
    agentConfig: w.agentConfig,
    memoryConfig: w.memoryConfig,
    mcpExport: w.mcpExport,
    enabled: w.enabled,
    version: w.version,
    createdAt: iso(w.createdAt),
    updatedAt: iso(w.updatedAt),
  };
}

export function toWorkflowVersion(v: WorkflowVersionRecord): z.infer<typeof workflowVersionSchema> {
  return {
    id: v.id,
    workflowId: v.agentWorkflowId,
    version: v.version,
    definition: v.definition,
    agentConfig: v.agentConfig,
    memoryConfig: v.memoryConfig,
    description: v.description,
    createdAt: iso(v.createdAt),
  };
}

export function toExecution(e: ExecutionRecord): z.infer<typeof executionSchema> {
  return {
    id: e.id,
    workflowId: e.agentWorkflowId,
    workflowVersion: e.workflowVersion,
    agentId: e.agentId,
    sessionId: e.sessionId,
    status: e.status,
    currentState: e.currentState,
    input: e.input,
    output: e.output,
    error: e.error,
    tokenUsage: e.tokenUsage,
    triggerEvent: e.triggerEvent,
    parentExecutionId: e.parentExecutionId,
    parentNodeId: e.parentNodeId,
    childKey: e.childKey,
    forkedFromExecutionId: e.forkedFromExecutionId,
    forkedFromVersion: e.forkedFromVersion,
    deadlineAt: isoOrNull(e.deadlineAt),
    startedAt: isoOrNull(e.startedAt),
    completedAt: isoOrNull(e.completedAt),
    createdAt: iso(e.createdAt),
    updatedAt: iso(e.updatedAt),
    links: executionLinksFor(e.id),
  };
}

export function toNodeExecution(n: NodeExecutionRecord): z.infer<typeof nodeExecutionSchema> {
  return {
    id: n.id,
    nodeId: n.nodeId,
    nodeType: n.nodeType,
    attempt: n.attempt,
    status: n.status,
    input: n.input,
    output: n.output,
    tokenUsage: n.tokenUsage,
    toolCalls: n.toolCalls,
    error: n.error,
    durationMs: n.durationMs,
    startedAt: iso(n.startedAt),
    completedAt: isoOrNull(n.completedAt),
  };
}

export function toReview(r: ReviewRecord): z.infer<typeof reviewSchema> {
  return {
    id: r.id,
    executionId: r.executionId,
    nodeId: r.nodeId,
    pauseSeq: r.pauseSeq,
    status: r.status,
    reason: r.reason,
    payload: r.payload,
    decision: r.decision,
    reviewer: r.reviewer,
    createdAt: iso(r.createdAt),
    resolvedAt: isoOrNull(r.resolvedAt),
  };
}

export function toMemory(m: MemoryRecord): z.infer<typeof memorySchema> {
  return {
    id: m.id,
    agentId: m.agentId,
    userId: m.userId,
    key: m.key,
    content: m.content,
    metadata: m.metadata,
    createdAt: iso(m.createdAt),
    updatedAt: iso(m.updatedAt),
  };
}

/** The overview of one checkpoint version; tolerant of states it does not understand. */
export function toCheckpointSummary(version: number, updatedAt: string, state: unknown): z.infer<typeof checkpointSummarySchema> {
  const s = typeof state === "object" && state !== null ? (state as Record<string, unknown>) : {};
  const nodes: Record<string, string> = {};
  if (typeof s.nodes === "object" && s.nodes !== null) {
    for (const [id, run] of Object.entries(s.nodes as Record<string, unknown>)) {
      const status = typeof run === "object" && run !== null ? (run as Record<string, unknown>).status : undefined;
      if (typeof status === "string") nodes[id] = status;
    }
  }
  return {
    version,
    updatedAt,
    status: typeof s.status === "string" ? s.status : null,
    lastNode: typeof s.lastNode === "string" ? s.lastNode : null,
    nodes,
  };
}

/** A tool name: dot-separated words (`http.request`, `github.issues.create`). */
export const toolNameParams = z.object({
  name: z.string().regex(/^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/, "dot-separated words of letters, digits, _ or -").max(200).describe("Tool name"),
});

const jsonSchemaDoc = z.record(z.string(), z.unknown()).describe("JSON Schema (draft 2020-12)");

export const toolSchema = z
  .object({
    name: z.string(),
    description: z.string(),
    kind: z.enum(["worker", "http", "mcp"]).describe("Where the tool comes from: worker code, an HTTP declaration, an MCP server"),
    inputSchema: jsonSchemaDoc,
    outputSchema: jsonSchemaDoc.optional(),
    timeoutMs: z.number().int().describe("Per-call time limit"),
    retry: z
      .object({
        maxAttempts: z.number().int().optional(),
        initialDelayMs: z.number().optional(),
        backoffMultiplier: z.number().optional(),
        maxDelayMs: z.number().optional(),
      })
      .optional()
      .describe("Default retry policy of nodes calling the tool"),
    workers: z.number().int().min(0).describe("Live worker processes serving the tool; 0 means calls wait in the queue"),
  })
  .meta({ id: "Tool" });

export const toolListSchema = z.object({ items: z.array(toolSchema) });
