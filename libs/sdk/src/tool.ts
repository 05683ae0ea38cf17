/**
 * The tool contract shared by the worker SDK, the built-in tools and the registry.
 *
 * A tool is a name, a description, an input schema (zod, or JSON Schema for tools
 * that come from elsewhere: HTTP tools declared without code, MCP servers), an
 * optional output schema, a timeout, a retry policy and a tenant scope, plus the
 * handler that does the work.
 */
import type { z } from "zod";

export type JsonPrimitive = string | number | boolean | null;
export type JsonValue = JsonPrimitive | JsonValue[] | { [key: string]: JsonValue };
export type JsonObject = { [key: string]: JsonValue };
/** A JSON Schema document (draft 2020-12 or 7). */
export type JsonSchema = { [key: string]: JsonValue };

/** How the engine retries a node whose call failed with a retryable error. */
export interface ToolRetryPolicy {
  /** Attempts in all, the first included. @default 1 */
  maxAttempts?: number;
  /** Delay before the second attempt. @default 1000 */
  initialDelayMs?: number;
  /** @default 2 */
  backoffMultiplier?: number;
  /** @default 60_000 */
  maxDelayMs?: number;
}

/** What a handler gets besides its input. */
export interface ToolContext {
  /**
   * Stable key for the handler's own side effects: the same across redeliveries and
   * across retries of the same node (the workflow may set it explicitly).
   */
  idempotencyKey: string;
  /** This attempt's call id (`{execution}.{node}.{attempt}`), unique per attempt. */
  callId: string;
  executionId: number;
  tenantId: string;
  nodeId: string;
  attempt: number;
  /** Aborted on timeout, on cancellation of the execution, and when the worker drains past its grace period. */
  signal: AbortSignal;
  /** Reports progress; surfaces as a `node.progress` event. `fraction` in 0..1, or negative when unknown. */
  progress(fraction: number, message?: string, data?: JsonValue): void;
  /** The top execution of the sub-workflow tree this call belongs to (= executionId for a top-level run). */
  rootExecutionId: number;
  /**
   * Streams a piece of the answer (LLM tokens) to SSE clients of the execution and of its root.
   * Ephemeral (core NATS): the handler's returned value is what is recorded.
   */
  stream(delta: string): void;
}

export interface ToolSpec<I extends z.ZodType = z.ZodType, O extends z.ZodType = z.ZodType> {
  /** Dot-separated words: `http.request`, `github.issues.create`. */
  name: string;
  description: string;
  /** Input schema; the handler gets the parsed value. Give this or `inputJsonSchema`. */
  input?: I;
  /** Input as JSON Schema (tools declared without code, MCP tools). */
  inputJsonSchema?: JsonSchema;
  /** Output schema, checked after the handler returns. */
  output?: O;
  outputJsonSchema?: JsonSchema;
  /** Per-call time limit. @default 30_000 */
  timeoutMs?: number;
  /** Default retry policy of nodes that call this tool (a node's own `retry` wins). */
  retry?: ToolRetryPolicy;
  /** Tenants allowed to call the tool; absent = every tenant. */
  tenants?: string[];
  /** Where the tool comes from, as the registry shows it. @default "worker" */
  kind?: ToolDescriptor["kind"];
  handler(input: z.output<I>, ctx: ToolContext): Promise<z.input<O> | JsonValue>;
}

/** Declares a tool with types inferred from its zod schemas. */
export function defineTool<I extends z.ZodType, O extends z.ZodType = z.ZodType>(spec: ToolSpec<I, O>): ToolSpec<I, O> {
  return spec;
}

/** A registry entry: the tool without its handler, as JSON, plus who serves it. */
export interface ToolDescriptor {
  name: string;
  description: string;
  inputSchema: JsonSchema;
  outputSchema?: JsonSchema;
  timeoutMs: number;
  retry?: ToolRetryPolicy;
  tenants?: string[];
  /** Where the tool comes from: "worker" (code), "http" (declared without code), "mcp". */
  kind: "worker" | "http" | "mcp";
}
