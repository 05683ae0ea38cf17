/**
 * What the gateway needs from the rest of Baton. The gateway never runs workflow
 * logic: it reads and writes rows through the store, validates definitions with the
 * engine's pure validator, and hands commands and events to the bus through these
 * interfaces. Tests pass the real store and small recording commands/events.
 */
import type { CheckpointStore } from "@baton/checkpoints";
import type { ImportFormat, ImportSourceMap } from "@baton/engine";
import type { ToolSourceStore } from "@baton/sdk";
import type { Store } from "@baton/store";

/** One event of an execution as streamed to SSE clients. */
export interface ExecutionEventEnvelope {
  /** Event type, e.g. `node.started`, `execution.completed`. */
  type: string;
  /** Position in the execution's event stream; strictly increasing, used as the SSE `id`. */
  seq: number;
  /** ISO-8601 time the event happened. */
  time: string;
  data: unknown;
}

/** One problem found in a workflow definition, with a path into the definition (`nodes[2].type`). */
export interface DefinitionIssue {
  path: string;
  code: string;
  message: string;
}

type ValidationOutcome = { ok: true; workflow: unknown; warnings?: DefinitionIssue[] } | { ok: false; errors: DefinitionIssue[] };
/** Validates a definition; may be async (it asks the tool registry which tools exist). */
export type ValidateWorkflow = (definition: unknown) => ValidationOutcome | Promise<ValidationOutcome>;

/**
 * The start of an execution whose row is written. It names the row and nothing the row holds:
 * the executor reads the input (and a fork's starting state and context patch) from the row
 * it admits, so a start stays small whatever the input's size (NATS refuses messages over
 * its max_payload, 1 MB by default; the gateway takes bodies up to 4 MiB).
 */
export interface StartExecutionCommand {
  tenantId: string;
  executionId: number;
  workflowId: number;
  workflowVersion: number;
  /** Fork: start from this execution's checkpoint instead of from the beginning. */
  forkOfExecutionId?: number;
  /** Fork: the checkpoint version to start from. */
  forkOfVersion?: number;
  /** Deadline of the whole run (RFC 3339). */
  deadline?: string;
}

/**
 * What an importer returns (the engine's `importWorkflow`). `sourceMap` says where in the
 * source each generated node and edge came from; the import route uses it to point problems
 * of the generated definition into `body.source`. A failure may carry `partial`, what did
 * convert (the engine's `PartialImport`): the route validates it too and reports its nodes' own
 * problems (a tool no worker serves) with the source's, in one answer.
 */
export type ImportWorkflow = (
  format: ImportFormat,
  source: unknown,
) =>
  | { ok: true; definition: Record<string, unknown>; warnings: string[]; sourceMap?: ImportSourceMap }
  | { ok: false; errors: DefinitionIssue[]; partial?: { definition: Record<string, unknown>; sourceMap: ImportSourceMap } };

export type ReviewAction = "approve" | "edit" | "reject";

export interface ResumeExecutionCommand {
  tenantId: string;
  executionId: number;
  nodeId: string;
  /** Which pause of the node it decides: the attempt of the node's paused journal row. */
  attempt: number;
  action: ReviewAction;
  data?: Record<string, unknown>;
  comment?: string;
  reviewer?: string;
}

export interface CancelExecutionCommand {
  tenantId: string;
  executionId: number;
  reason?: string;
}

export interface GatewayCommands {
  startExecution(c: StartExecutionCommand): Promise<unknown>;
  /**
   * Sends a decision. Decisions for one pause (execution, node, attempt) share a key, so only
   * the first is taken: `duplicate` says another decision for that pause was sent first.
   */
  resumeExecution(c: ResumeExecutionCommand): Promise<{ duplicate: boolean }>;
  cancelExecution(c: CancelExecutionCommand): Promise<unknown>;
}

export interface GatewayEvents {
  /**
   * Publishes a fact (`workflow.created`, `memory.deleted`, …). `scopeId` is the
   * workflow id for workflow events and the memory id for memory events; `data`
   * uses the proto field names of the event's message (snake_case).
   */
  publish(type: string, tenantId: string, scopeId: number, data: Record<string, unknown>): Promise<void>;
  /**
   * Replays every event of one execution from the beginning (or from the event of stream
   * sequence `fromSeq`, when given), then follows live ones until `signal` aborts. Resolves
   * once it stopped.
   */
  streamExecution(
    tenantId: string,
    executionId: number,
    signal: AbortSignal,
    onEvent: (e: ExecutionEventEnvelope) => void,
    fromSeq?: number,
  ): Promise<void>;
  /**
   * Follows the LLM tokens streamed for an execution (its own and its sub-workflows') until
   * `signal` aborts. Ephemeral: only tokens that arrive while following are seen.
   */
  streamTokens?(tenantId: string, executionId: number, signal: AbortSignal, onToken: (t: TokenEnvelope) => void): Promise<void>;
}

/** One streamed piece of an LLM answer, as SSE clients get it (`event: token`). */
export interface TokenEnvelope {
  executionId: number;
  nodeId: string;
  callId: string;
  index: number;
  delta: string;
}

export interface Readiness {
  ready: boolean;
  /** Module name → state, e.g. `{ executor: "Running", store: "Running" }`. */
  modules: Record<string, string>;
}

/** A tool as the registry describes it (the `@baton/sdk` tool registry fits this shape). */
export interface ToolInfo {
  name: string;
  description: string;
  kind: "worker" | "http" | "mcp";
  inputSchema: Record<string, unknown>;
  outputSchema?: Record<string, unknown>;
  timeoutMs: number;
  retry?: { maxAttempts?: number; initialDelayMs?: number; backoffMultiplier?: number; maxDelayMs?: number };
  /** Tenants allowed to call it; absent = every tenant. Never shown to clients. */
  tenants?: string[];
  workers: number;
}

/** The tool registry, read by `/api/tools`. */
export interface ToolCatalog {
  /** The tools `tenantId` may call. */
  list(opts: { tenantId: string }): Promise<ToolInfo[]>;
  get(name: string): Promise<ToolInfo | undefined>;
}

export interface GatewayDeps {
  store: Store;
  validateWorkflow: ValidateWorkflow;
  /**
   * Whether an LLM call that names no model has one to use: `BATON_LLM_DEFAULT_MODEL` set, to a
   * model a configured provider serves. Without it, an LLM node or SynthDev agent that its
   * workflow gives no model is refused (`missing_model`), since its run would fail.
   * @default false
   */
  hasDefaultModel?: boolean;
  commands: GatewayCommands;
  events: GatewayEvents;
  readiness: () => Readiness;
  /**
   * JSON Schema of a workflow definition, shown in the OpenAPI document as the
   * `WorkflowDefinition` component (the engine's `workflowDefinitionJsonSchema`).
   * @default a free-form object
   */
  workflowDefinitionJsonSchema?: Record<string, unknown>;
  /**
   * Checkpoint history, for time travel (`/checkpoints`, `/fork`). Without it those
   * routes answer 503 `BATON_GATEWAY_CHECKPOINTS_UNAVAILABLE`.
   */
  checkpoints?: Pick<CheckpointStore, "history" | "getVersion">;
  /**
   * Turns plans, tool sequences, state machines and SynthDev workflows into definitions (the
   * engine's `importWorkflow`). Without it `POST /api/agent-workflows/import` is not served.
   */
  importWorkflow?: ImportWorkflow;
  /** The tool registry behind `/api/tools`; without it those routes answer 503 `BATON_GATEWAY_TOOLS_UNAVAILABLE`. */
  tools?: ToolCatalog;
  /**
   * Tools declared without code (`@baton/sdk`'s tool source store), behind `/api/tool-sources`;
   * without it those routes answer 503 `BATON_GATEWAY_TOOL_SOURCES_UNAVAILABLE`.
   */
  toolSources?: ToolSourceStore;
  /**
   * A review's edited `data` whose JSON is larger than this many bytes is stored once as a
   * blob of the execution, and the resume carries its reference (`{ "$ref": "blob:…", "size" }`,
   * read through like any large value): a command must fit in one message (NATS's
   * max_payload, 1 MB by default). Baton passes BATON_LARGE_RESULT_BYTES.
   * @default 65536
   */
  largeValueBytes?: number;
}

export interface GatewayOptions {
  /** Fastify's request logging (pino). @default false */
  logger?: boolean;
  /** How long a resolved (or unknown) API key is cached, in ms. @default 10000 */
  authCacheTtlMs?: number;
  /** Interval of SSE heartbeat comments, in ms. @default 15000 */
  sseHeartbeatMs?: number;
}
