/**
 * @baton/llm — LLM calls on the Vercel AI SDK (v7).
 *
 * - {@link llmConfigFromEnv} / {@link createLlmRegistry}: providers (openai, anthropic, google,
 *   any OpenAI-compatible server), aliases, default model, `check(ref)` for validation.
 * - `registry.chat(request, opts)`: one call in a provider-neutral JSON shape, streamed
 *   when `opts.onToken` is given, with timeout and retries; errors are BATON_LLM_*.
 * - {@link resolveModelSettings}: a workflow's `agentConfig` with a node's overrides.
 * - {@link createTokenBudget}: per-tenant daily token budget on NATS KV.
 *
 * Test helpers (a local OpenAI-compatible server) are in `@baton/llm/testing`.
 */
export {
  BUILTIN_PROVIDERS,
  DEFAULT_LLM_MAX_RETRIES,
  DEFAULT_LLM_RETRY_BASE_DELAY_MS,
  DEFAULT_LLM_RETRY_MAX_DELAY_MS,
  DEFAULT_LLM_TIMEOUT_MS,
  emptyLlmConfig,
  LLM_ENV_VARS,
  llmConfigFromEnv,
  modelSettingsSchema,
  PROVIDER_KEY_ENV,
  resolveModelSettings,
} from "./config.ts";
export type { BuiltinProvider, CompatibleProviderConfig, HostedProviderConfig, LlmConfig, ModelSettings } from "./config.ts";
export { chat, createLlmRegistry } from "./registry.ts";
export type { LlmRegistry, LlmRegistryOptions, ModelCheck, ResolvedModel } from "./registry.ts";
export { toLlmError } from "./chat.ts";
export type { ChatOptions } from "./chat.ts";
export { chatMessageSchema, chatRequestSchema, chatResultSchema, chatToolSchema, finishReasons, toolCallSchema, usageSchema } from "./messages.ts";
export type { ChatMessage, ChatRequest, ChatResult, ChatTool, LlmUsage, ToolCall } from "./messages.ts";
export { createTokenBudget, tenantKeyToken, TOKEN_BUDGET_BUCKET, TOKEN_BUDGET_BUCKET_OPTIONS } from "./budget.ts";
export type { TokenBudget, TokenBudgetOptions } from "./budget.ts";
export * from "./errors.ts";
