/**
 * LLM configuration: options → with defaults → compiled. {@link llmConfigFromEnv} reads the
 * environment and reports every problem at once; {@link resolveModelSettings} merges a
 * workflow's `agentConfig` with a node's overrides.
 */
import { z } from "zod";
import { LlmInvalidConfig } from "./errors.ts";

/** The providers built in (API key from the environment). */
export const BUILTIN_PROVIDERS = ["openai", "anthropic", "google"] as const;
export type BuiltinProvider = (typeof BUILTIN_PROVIDERS)[number];

export interface HostedProviderConfig {
  apiKey: string;
  /** Overrides the provider's API base URL (proxies, test servers). */
  baseURL?: string;
}

export interface CompatibleProviderConfig {
  /** Base URL of the OpenAI-compatible API, e.g. `http://localhost:11434/v1`. */
  baseURL: string;
  apiKey?: string;
  /** Extra HTTP headers sent with every request. */
  headers?: Record<string, string>;
}

export interface LlmConfig {
  openai?: HostedProviderConfig;
  anthropic?: HostedProviderConfig;
  google?: HostedProviderConfig;
  /** OpenAI-compatible servers by provider name (`ollama`, `vllm`, …). */
  compatible: Record<string, CompatibleProviderConfig>;
  /** Alias → `provider:model` (or another alias). */
  aliases: Record<string, string>;
  /** Model of requests that name none. */
  defaultModel?: string;
  /** Embedding model of `llm.embed` calls that name none (`BATON_LLM_EMBEDDING_MODEL`). */
  defaultEmbeddingModel?: string;
  /** Image model of `llm.image` calls that name none (`BATON_LLM_IMAGE_MODEL`). */
  defaultImageModel?: string;
  /** Tokens a tenant may use per UTC day; 0 = unlimited. @default 0 */
  tenantDailyTokens: number;
  /** Time limit of one call, all attempts included. @default 60_000 */
  timeoutMs: number;
  /** Retries after a 429 / 5xx / unreachable provider (attempts = 1 + maxRetries). @default 2 */
  maxRetries: number;
  /** Delay before the first retry; doubles each time. @default 500 */
  retryBaseDelayMs: number;
  /** Cap of a retry delay (a provider's Retry-After included). @default 20_000 */
  retryMaxDelayMs: number;
}

export const DEFAULT_LLM_TIMEOUT_MS = 60_000;
export const DEFAULT_LLM_MAX_RETRIES = 2;
export const DEFAULT_LLM_RETRY_BASE_DELAY_MS = 500;
export const DEFAULT_LLM_RETRY_MAX_DELAY_MS = 20_000;

/** Environment variables that configure a built-in provider's key (first set wins). */
export const PROVIDER_KEY_ENV: Record<BuiltinProvider, [string, string]> = {
  openai: ["BATON_OPENAI_API_KEY", "OPENAI_API_KEY"],
  anthropic: ["BATON_ANTHROPIC_API_KEY", "ANTHROPIC_API_KEY"],
  google: ["BATON_GOOGLE_API_KEY", "GOOGLE_GENERATIVE_AI_API_KEY"],
};

/** Every environment variable {@link llmConfigFromEnv} reads (docs/llm.md, "Configuration"). */
export const LLM_ENV_VARS: readonly string[] = Object.freeze([
  ...BUILTIN_PROVIDERS.flatMap((p) => [...PROVIDER_KEY_ENV[p], `BATON_${p.toUpperCase()}_BASE_URL`]),
  "BATON_LLM_PROVIDERS",
  "BATON_LLM_ALIASES",
  "BATON_LLM_DEFAULT_MODEL",
  "BATON_LLM_EMBEDDING_MODEL",
  "BATON_LLM_IMAGE_MODEL",
  "BATON_LLM_TENANT_DAILY_TOKENS",
  "BATON_LLM_TIMEOUT_MS",
  "BATON_LLM_MAX_RETRIES",
  "BATON_LLM_RETRY_BASE_DELAY_MS",
  "BATON_LLM_RETRY_MAX_DELAY_MS",
]);

const PROVIDER_NAME_RE = /^[a-z][a-z0-9_-]*$/;

/** A configuration with every default filled in and nothing configured. */
export function emptyLlmConfig(overrides: Partial<LlmConfig> = {}): LlmConfig {
  return {
    compatible: {},
    aliases: {},
    tenantDailyTokens: 0,
    timeoutMs: DEFAULT_LLM_TIMEOUT_MS,
    maxRetries: DEFAULT_LLM_MAX_RETRIES,
    retryBaseDelayMs: DEFAULT_LLM_RETRY_BASE_DELAY_MS,
    retryMaxDelayMs: DEFAULT_LLM_RETRY_MAX_DELAY_MS,
    ...overrides,
  };
}

const compatibleSchema = z.strictObject({
  baseURL: z.url({ protocol: /^https?$/ }),
  apiKey: z.string().min(1).optional(),
  headers: z.record(z.string(), z.string()).optional(),
});

/**
 * Reads the LLM configuration from the environment (see docs/llm.md for the table).
 * Throws BATON_LLM_INVALID_CONFIG listing every problem.
 */
export function llmConfigFromEnv(env: Record<string, string | undefined> = process.env): LlmConfig {
  const problems: string[] = [];
  const get = (name: string): string | undefined => {
    const v = env[name]?.trim();
    return v ? v : undefined;
  };
  const cfg = emptyLlmConfig();

  for (const p of BUILTIN_PROVIDERS) {
    const [primary, fallback] = PROVIDER_KEY_ENV[p];
    const apiKey = get(primary) ?? get(fallback);
    const baseEnv = `BATON_${p.toUpperCase()}_BASE_URL`;
    const baseURL = get(baseEnv);
    if (baseURL !== undefined && !/^https?:\/\//.test(baseURL)) problems.push(`${baseEnv}: must be an http(s) URL`);
    if (apiKey !== undefined) cfg[p] = { apiKey, ...(baseURL ? { baseURL } : {}) };
  }

  const json = (name: string): unknown => {
    const raw = get(name);
    if (raw === undefined) return undefined;
    try {
      return JSON.parse(raw) as unknown;
    } catch (err) {
      problems.push(`${name}: not valid JSON (${(err as Error).message})`);
      return undefined;
    }
  };

  /** The entries of a variable holding a JSON object (none when unset or not an object, which is reported). */
  const jsonEntries = (name: string, shape: string): [string, unknown][] => {
    const v = json(name);
    if (v === undefined) return [];
    if (typeof v === "object" && v !== null && !Array.isArray(v)) return Object.entries(v);
    problems.push(`${name}: must be an object ${shape}`);
    return [];
  };

  for (const [name, value] of jsonEntries("BATON_LLM_PROVIDERS", '{"name": {"baseURL": "…", "apiKey"?: "…"}}')) {
    if (!PROVIDER_NAME_RE.test(name)) problems.push(`BATON_LLM_PROVIDERS.${name}: name must be lower-case letters, digits, "_" or "-"`);
    else if ((BUILTIN_PROVIDERS as readonly string[]).includes(name)) problems.push(`BATON_LLM_PROVIDERS.${name}: "${name}" is a built-in provider; pick another name`);
    const parsed = compatibleSchema.safeParse(value);
    if (!parsed.success) {
      for (const i of parsed.error.issues) problems.push(`BATON_LLM_PROVIDERS.${[name, ...i.path.map(String)].join(".")}: ${i.message}`);
    } else cfg.compatible[name] = parsed.data;
  }

  for (const [name, target] of jsonEntries("BATON_LLM_ALIASES", '{"alias": "provider:model"}')) {
    if (name.includes(":") || name === "") problems.push(`BATON_LLM_ALIASES.${name}: an alias name must not be empty or contain ":"`);
    else if (typeof target !== "string" || target.trim() === "") problems.push(`BATON_LLM_ALIASES.${name}: must be a "provider:model" string`);
    else cfg.aliases[name] = target.trim();
  }

  const defaultModel = get("BATON_LLM_DEFAULT_MODEL");
  if (defaultModel !== undefined) cfg.defaultModel = defaultModel;
  const embeddingModel = get("BATON_LLM_EMBEDDING_MODEL");
  if (embeddingModel !== undefined) cfg.defaultEmbeddingModel = embeddingModel;
  const imageModel = get("BATON_LLM_IMAGE_MODEL");
  if (imageModel !== undefined) cfg.defaultImageModel = imageModel;

  const int = (name: string, min: number, fallback: number): number => {
    const raw = get(name);
    if (raw === undefined) return fallback;
    const n = Number(raw);
    if (!Number.isInteger(n) || n < min) {
      problems.push(`${name}: must be an integer of at least ${min}`);
      return fallback;
    }
    return n;
  };
  cfg.tenantDailyTokens = int("BATON_LLM_TENANT_DAILY_TOKENS", 0, 0);
  cfg.timeoutMs = int("BATON_LLM_TIMEOUT_MS", 1, DEFAULT_LLM_TIMEOUT_MS);
  cfg.maxRetries = int("BATON_LLM_MAX_RETRIES", 0, DEFAULT_LLM_MAX_RETRIES);
  cfg.retryBaseDelayMs = int("BATON_LLM_RETRY_BASE_DELAY_MS", 0, DEFAULT_LLM_RETRY_BASE_DELAY_MS);
  cfg.retryMaxDelayMs = int("BATON_LLM_RETRY_MAX_DELAY_MS", 0, DEFAULT_LLM_RETRY_MAX_DELAY_MS);

  if (problems.length > 0) throw LlmInvalidConfig(problems, { details: problems });
  return cfg;
}

/**
 * A workflow's default LLM settings (`agentConfig`) or a node's overrides. Unknown keys
 * are kept (other agent settings such as `maxToolIterations` live beside these).
 */
export const modelSettingsSchema = z.looseObject({
  /** Alias or `provider:model`. */
  model: z.string().min(1).optional(),
  temperature: z.number().min(0).max(2).optional(),
  topP: z.number().min(0).max(1).optional(),
  maxTokens: z.number().int().positive().optional(),
  stopSequences: z.array(z.string()).optional(),
  seed: z.number().int().optional(),
  timeoutMs: z.number().int().positive().optional(),
  maxRetries: z.number().int().min(0).max(10).optional(),
});
export type ModelSettings = z.infer<typeof modelSettingsSchema>;

/**
 * A node's settings: the workflow's `agentConfig`, with every override the node sets
 * (keys whose value is `undefined` do not override).
 */
export function resolveModelSettings(agentConfig: ModelSettings | undefined, nodeOverrides?: ModelSettings): ModelSettings {
  const out: ModelSettings = { ...(agentConfig ?? {}) };
  for (const [k, v] of Object.entries(nodeOverrides ?? {})) if (v !== undefined) out[k] = v;
  return out;
}
