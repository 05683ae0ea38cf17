/**
 * The provider-neutral request / result shapes of {@link chat} (plain JSON, so they travel
 * on the bus and sit in workflow state), and their conversion to the AI SDK's messages.
 *
 * Messages:
 * - `{ role: "system", content }` — extra system text (the request's `system` comes first);
 * - `{ role: "user", content }`;
 * - `{ role: "assistant", content?, toolCalls? }` — `toolCalls: [{ id, name, args }]`, the same
 *   shape a result's `toolCalls` has, so a result's `message` is appended as is;
 * - `{ role: "tool", toolCallId, name, content, isError? }` — `content` is any JSON (a string is
 *   sent as text); `isError` marks a failed tool call.
 */
import { z } from "zod";
import type { ModelMessage } from "ai";

const json = z.json();

export const toolCallSchema = z.strictObject({
  id: z.string().min(1),
  name: z.string().min(1),
  args: json,
});
export type ToolCall = { id: string; name: string; args: z.infer<typeof json> };

export const chatMessageSchema = z.discriminatedUnion("role", [
  z.strictObject({ role: z.literal("system"), content: z.string() }),
  z.strictObject({ role: z.literal("user"), content: z.string() }),
  z.strictObject({
    role: z.literal("assistant"),
    content: z.string().nullable().optional(),
    toolCalls: z.array(toolCallSchema).optional(),
  }),
  z.strictObject({
    role: z.literal("tool"),
    toolCallId: z.string().min(1),
    name: z.string().min(1),
    content: json,
    isError: z.boolean().optional(),
  }),
]);
export type ChatMessage = z.infer<typeof chatMessageSchema>;

export const chatToolSchema = z.strictObject({
  /** Any tool name; names the provider would refuse (e.g. `http.request`) are mapped and mapped back. */
  name: z.string().min(1).max(128),
  description: z.string().optional(),
  /** JSON Schema of the arguments (an object schema). */
  inputSchema: z.record(z.string(), json),
});
export type ChatTool = z.infer<typeof chatToolSchema>;

export const chatRequestSchema = z.strictObject({
  /** Alias or `provider:model`; absent = BATON_LLM_DEFAULT_MODEL. */
  model: z.string().min(1).optional(),
  system: z.string().optional(),
  messages: z.array(chatMessageSchema).min(1),
  tools: z.array(chatToolSchema).optional(),
  toolChoice: z
    .union([z.enum(["auto", "none", "required"]), z.strictObject({ type: z.literal("tool"), name: z.string().min(1) })])
    .optional(),
  temperature: z.number().min(0).max(2).optional(),
  topP: z.number().min(0).max(1).optional(),
  maxTokens: z.number().int().positive().optional(),
  stopSequences: z.array(z.string()).optional(),
  seed: z.number().int().optional(),
  /** Structured output: the model is asked for JSON matching `schema` (sent to the provider, not re-checked here), returned parsed as `object`. */
  responseFormat: z
    .strictObject({
      type: z.literal("json"),
      schema: z.record(z.string(), json),
      name: z.string().optional(),
      description: z.string().optional(),
    })
    .optional(),
  /** Time limit of the call, all attempts included. @default BATON_LLM_TIMEOUT_MS */
  timeoutMs: z.number().int().positive().optional(),
  /** @default BATON_LLM_MAX_RETRIES */
  maxRetries: z.number().int().min(0).max(10).optional(),
});
export type ChatRequest = z.input<typeof chatRequestSchema>;

export const usageSchema = z.strictObject({
  inputTokens: z.number().int().min(0),
  outputTokens: z.number().int().min(0),
  totalTokens: z.number().int().min(0),
});
export type LlmUsage = z.infer<typeof usageSchema>;

export const finishReasons = ["stop", "length", "content-filter", "tool-calls", "error", "interrupted", "other"] as const;

export const chatResultSchema = z.strictObject({
  /** The resolved `provider:model`. */
  model: z.string(),
  text: z.string(),
  toolCalls: z.array(toolCallSchema),
  finishReason: z.enum(finishReasons),
  usage: usageSchema,
  /** The assistant message to append to `messages` for the next turn. */
  message: chatMessageSchema,
  /** Parsed structured output (requests with `responseFormat`). */
  object: json.optional(),
  /**
   * The provider's response body. openai / OpenAI-compatible: a chat-completion object
   * (for streamed calls, assembled from the chunks). Others: their native body when known.
   */
  raw: json.optional(),
});
export type ChatResult = z.infer<typeof chatResultSchema>;

/** Provider-safe tool names (OpenAI: `^[a-zA-Z0-9_-]{1,64}$`), mapped both ways. */
export interface ToolNames {
  toProvider(name: string): string;
  fromProvider(name: string): string;
}

const SAFE_NAME = /^[A-Za-z0-9_-]{1,64}$/;

export function toolNameMap(names: readonly string[]): { map: ToolNames; problems: string[] } {
  const forward = new Map<string, string>();
  const back = new Map<string, string>();
  const problems: string[] = [];
  const add = (name: string): void => {
    if (forward.has(name)) return;
    let safe = SAFE_NAME.test(name) ? name : name.replace(/[^A-Za-z0-9_-]/g, "_").slice(0, 64);
    if (back.has(safe) && back.get(safe) !== name) {
      problems.push(`tools: "${name}" and "${back.get(safe)}" map to the same provider name "${safe}"`);
      safe = `${safe.slice(0, 55)}_${forward.size}`;
    }
    forward.set(name, safe);
    back.set(safe, name);
  };
  names.forEach(add);
  return {
    problems,
    map: {
      toProvider: (n) => {
        add(n);
        return forward.get(n)!;
      },
      fromProvider: (n) => back.get(n) ?? n,
    },
  };
}

/** The neutral messages as AI SDK messages (system messages stay in place). */
export function toModelMessages(messages: readonly ChatMessage[], names: ToolNames): ModelMessage[] {
  return messages.map((m): ModelMessage => {
    switch (m.role) {
      case "system":
        return { role: "system", content: m.content };
      case "user":
        return { role: "user", content: m.content };
      case "assistant": {
        const calls = m.toolCalls ?? [];
        if (calls.length === 0) return { role: "assistant", content: m.content ?? "" };
        return {
          role: "assistant",
          content: [
            ...(m.content ? [{ type: "text" as const, text: m.content }] : []),
            ...calls.map((c) => ({ type: "tool-call" as const, toolCallId: c.id, toolName: names.toProvider(c.name), input: c.args })),
          ],
        };
      }
      case "tool": {
        const output =
          typeof m.content === "string"
            ? { type: m.isError ? ("error-text" as const) : ("text" as const), value: m.content }
            : { type: m.isError ? ("error-json" as const) : ("json" as const), value: m.content };
        return { role: "tool", content: [{ type: "tool-result", toolCallId: m.toolCallId, toolName: names.toProvider(m.name), output }] };
      }
    }
  });
}
