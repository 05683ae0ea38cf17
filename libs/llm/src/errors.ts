/**
 * The LLM library's error catalogue. Codes are stable and never reused; callers check
 * them with `hasCode(err, "BATON_LLM_…")` or `LlmRateLimited.is(err)`.
 *
 * Retryable: BATON_LLM_RATE_LIMITED, BATON_LLM_UNAVAILABLE, BATON_LLM_TIMEOUT,
 * BATON_LLM_INVALID_RESPONSE, BATON_LLM_FAILED. `chat()` itself retries only the first two
 * (with exponential backoff); the others are left to the engine's node retry policy.
 */
import { defineError } from "@baton/errors";

/** The provider answered 429. Retryable; `retryDelayMs` carries the provider's Retry-After when it sent one. */
export const LlmRateLimited = defineError(
  "BATON_LLM_RATE_LIMITED",
  (model: string, detail: string) => `model ${model} is rate limited: ${detail}`,
  { status: 429, retryable: true },
);

/** The provider answered 5xx / 408, or could not be reached. Retryable. */
export const LlmUnavailable = defineError(
  "BATON_LLM_UNAVAILABLE",
  (model: string, detail: string) => `model ${model} is unavailable: ${detail}`,
  { status: 503, retryable: true },
);

/** The call (all attempts included) ran past its `timeoutMs`. Retryable. */
export const LlmTimeout = defineError(
  "BATON_LLM_TIMEOUT",
  (model: string, timeoutMs: number) => `call of model ${model} timed out after ${timeoutMs} ms`,
  { status: 504, retryable: true },
);

/** The request is invalid (bad message sequence, bad schema, provider answered 4xx). Not retryable. */
export const LlmBadRequest = defineError(
  "BATON_LLM_BAD_REQUEST",
  (model: string, detail: string) => `bad request to model ${model}: ${detail}`,
  { status: 400 },
);

/** The provider refused the credentials (401 / 403). Not retryable. */
export const LlmAuthFailed = defineError(
  "BATON_LLM_AUTH_FAILED",
  (model: string, detail: string) => `model ${model}: the provider refused the credentials: ${detail}`,
  { status: 502 },
);

/**
 * The model reference cannot be resolved: unknown alias, malformed reference, or a
 * provider that is not configured. The message names the configuration to set. Not retryable.
 */
export const LlmModelNotConfigured = defineError(
  "BATON_LLM_MODEL_NOT_CONFIGURED",
  (message: string) => message,
  { status: 400 },
);

/** The tenant used up its daily token budget (BATON_LLM_TENANT_DAILY_TOKENS). Not retryable. */
export const LlmBudgetExceeded = defineError(
  "BATON_LLM_BUDGET_EXCEEDED",
  (tenantId: string, used: number, limit: number) => `tenant "${tenantId}" used ${used} of its ${limit} LLM tokens for today (UTC)`,
  { status: 429 },
);

/** The model's answer could not be used (structured output that fails its schema, unparsable body). Retryable. */
export const LlmInvalidResponse = defineError(
  "BATON_LLM_INVALID_RESPONSE",
  (model: string, detail: string) => `model ${model} gave an unusable response: ${detail}`,
  { status: 502, retryable: true },
);

/** Any other failure of the call. Retryable, like every unknown error. */
export const LlmFailed = defineError(
  "BATON_LLM_FAILED",
  (model: string, detail: string) => `call of model ${model} failed: ${detail}`,
  { status: 502, retryable: true },
);

/** LLM configuration (environment) is invalid; `details` lists every problem. */
export const LlmInvalidConfig = defineError(
  "BATON_LLM_INVALID_CONFIG",
  (problems: string[]) => `invalid LLM configuration: ${problems.join("; ")}`,
  { status: 500 },
);
