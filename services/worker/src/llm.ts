/**
 * The `llm.chat` tool: one LLM call through `@baton/llm`, with the tenant's token budget
 * checked before and charged after, and text deltas handed to `publishToken` (which the
 * worker connects to the subject the gateway forwards over SSE).
 */
import { z } from "zod";
import { defineTool } from "@baton/sdk";
import type { ToolSpec } from "@baton/sdk";
import { chatRequestSchema, chatResultSchema } from "@baton/llm";
import type { LlmRegistry, TokenBudget } from "@baton/llm";
import { errorMessage } from "@baton/errors";
import type { Logger } from "@baton/telemetry";

/** One text delta of a streamed `llm.chat` call. `index` counts from 0 within the call. */
export interface LlmTokenEvent {
  executionId: number;
  tenantId: string;
  nodeId: string;
  callId: string;
  delta: string;
  index: number;
}

export interface LlmToolsOptions {
  registry: LlmRegistry;
  /** Per-tenant daily budget; absent = no budget. */
  budget?: TokenBudget;
  /**
   * Receives each text delta, in order. Without it, deltas go to the handler context's
   * `stream()`. Calls stream unless their input says `stream: false`. Failures to publish
   * are logged and ignored: tokens are best effort, the result is not.
   */
  publishToken?: (event: LlmTokenEvent) => void | Promise<void>;
  /**
   * The tool's own time limit, a backstop above the call's `timeoutMs` (which gives
   * BATON_LLM_TIMEOUT). @default 600_000
   */
  toolTimeoutMs?: number;
  /** Where failures to charge the budget or publish a token are reported. */
  logger?: Logger;
}

export const DEFAULT_LLM_TOOL_TIMEOUT_MS = 600_000;

/** `llm.chat`. */
export function llmTools(opts: LlmToolsOptions): ToolSpec[] {
  const { registry, budget, publishToken, logger } = opts;
  const toolTimeoutMs = opts.toolTimeoutMs ?? DEFAULT_LLM_TOOL_TIMEOUT_MS;
  const input = chatRequestSchema.extend({
    /** Stream tokens to the execution's SSE subscribers. @default true when the worker publishes tokens */
    stream: z.boolean().optional(),
    timeoutMs: z.number().int().positive().max(toolTimeoutMs).optional(),
  });

  const chat = defineTool({
    name: "llm.chat",
    description:
      "One LLM call: `messages` (system / user / assistant with toolCalls / tool results), optional `tools` (JSON Schema), " +
      "`responseFormat` for structured output. Returns text, toolCalls, finishReason, usage and the assistant message to append.",
    input,
    output: chatResultSchema,
    timeoutMs: toolTimeoutMs,
    retry: { maxAttempts: 2, initialDelayMs: 2_000 },
    handler: async ({ stream, ...request }, ctx) => {
      await budget?.check(ctx.tenantId);
      const sink: ((delta: string, index: number) => void | Promise<void>) | undefined = publishToken
        ? (delta, index) =>
            publishToken({ executionId: ctx.executionId, tenantId: ctx.tenantId, nodeId: ctx.nodeId, callId: ctx.callId, delta, index })
        : typeof ctx.stream === "function"
          ? (delta) => ctx.stream(delta)
          : undefined;
      const onToken =
        sink && stream !== false
          ? async (delta: string, index: number): Promise<void> => {
              try {
                await sink(delta, index);
              } catch (err) {
                // Best effort: a lost token must not fail the call.
                if (index === 0) logger?.warn("llm token publish failed", { callId: ctx.callId, error: errorMessage(err) });
              }
            }
          : undefined;
      const result = await registry.chat(request, { signal: ctx.signal, ...(onToken ? { onToken } : {}) });
      // The call succeeded and was paid for: a failed charge is reported, not turned into a
      // failure that would make the engine pay for the call again.
      await budget?.add(ctx.tenantId, result.usage).catch((err: unknown) =>
        logger?.warn("llm token budget not charged", { tenantId: ctx.tenantId, tokens: result.usage.totalTokens, error: errorMessage(err) }),
      );
      return result;
    },
  });
  return [chat] as ToolSpec[];
}
