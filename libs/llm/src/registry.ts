/**
 * The model registry: AI SDK providers built from {@link LlmConfig}, behind the AI SDK's
 * `createProviderRegistry`, with Baton's aliases, default model and configuration checks.
 */
import { createProviderRegistry, embedMany, generateImage } from "ai";
import { toLlmError } from "./chat.ts";
import type { LanguageModel } from "ai";
import type { ProviderV4 } from "@ai-sdk/provider";
import { createAnthropic } from "@ai-sdk/anthropic";
import { createGoogleGenerativeAI } from "@ai-sdk/google";
import { createOpenAI } from "@ai-sdk/openai";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { BUILTIN_PROVIDERS, PROVIDER_KEY_ENV } from "./config.ts";
import type { BuiltinProvider, LlmConfig } from "./config.ts";
import { runChat } from "./chat.ts";
import type { ChatOptions } from "./chat.ts";
import { LlmModelNotConfigured } from "./errors.ts";
import type { ChatRequest, ChatResult } from "./messages.ts";

export interface ResolvedModel {
  /** `provider:model` after alias and default resolution. */
  ref: string;
  provider: string;
  modelId: string;
  /** Speaks OpenAI chat completions (openai and the BATON_LLM_PROVIDERS servers). */
  openAiChat: boolean;
}

export type ModelCheck = ({ ok: true } & ResolvedModel) | { ok: false; message: string };

export interface LlmRegistry {
  readonly config: LlmConfig;
  /** Names of the configured providers (built-in ones with a key, compatible servers, extras). */
  providers(): string[];
  /** Resolves an alias / `provider:model` / nothing (default model); throws BATON_LLM_MODEL_NOT_CONFIGURED. */
  resolve(ref?: string): ResolvedModel;
  /** Like {@link resolve} without throwing: the message names the configuration to set. */
  check(ref?: string): ModelCheck;
  /** The AI SDK model of a reference. */
  languageModel(ref?: string): LanguageModel;
  /** One LLM call; see {@link runChat}. */
  chat(request: ChatRequest, opts?: ChatOptions): Promise<ChatResult>;
  /** Embeds texts with an embedding model (`provider:model`). */
  embed(ref: string, values: string[], opts?: { signal?: AbortSignal }): Promise<{ embeddings: number[][]; usage: { tokens: number } }>;
  /** Generates images; each is returned as base64 with its media type. */
  image(ref: string, prompt: string, opts?: { size?: string; n?: number; signal?: AbortSignal }): Promise<{ images: { base64: string; mediaType: string }[] }>;
}

export interface LlmRegistryOptions {
  /**
   * Extra providers by name, e.g. a `customProvider` of AI SDK mock models in tests.
   * Chat-completions compatibility is assumed false for them.
   */
  providers?: Record<string, ProviderV4>;
  /** fetch used by every provider (tests, proxies). @default globalThis.fetch */
  fetch?: typeof globalThis.fetch;
}

/** openai's default `languageModel` is the Responses API; Baton speaks chat completions to it. */
function chatCompletionsOnly(p: ReturnType<typeof createOpenAI>): ProviderV4 {
  return {
    specificationVersion: "v4",
    languageModel: (id) => p.chat(id),
    embeddingModel: (id) => p.embeddingModel(id),
    imageModel: (id) => p.imageModel(id),
  };
}

function hint(provider: string): string {
  if ((BUILTIN_PROVIDERS as readonly string[]).includes(provider)) {
    const [primary, fallback] = PROVIDER_KEY_ENV[provider as BuiltinProvider];
    return `set ${primary} (or ${fallback})`;
  }
  return `add it to BATON_LLM_PROVIDERS, e.g. {"${provider}":{"baseURL":"http://…/v1"}}`;
}

/** Builds the registry; no network traffic happens until a call. */
export function createLlmRegistry(config: LlmConfig, opts: LlmRegistryOptions = {}): LlmRegistry {
  const fetchOpt = opts.fetch ? { fetch: opts.fetch } : {};
  const providers: Record<string, ProviderV4> = {};
  const openAiChat = new Set<string>();
  if (config.openai) {
    providers.openai = chatCompletionsOnly(createOpenAI({ apiKey: config.openai.apiKey, ...(config.openai.baseURL ? { baseURL: config.openai.baseURL } : {}), ...fetchOpt }));
    openAiChat.add("openai");
  }
  if (config.anthropic) {
    providers.anthropic = createAnthropic({ apiKey: config.anthropic.apiKey, ...(config.anthropic.baseURL ? { baseURL: config.anthropic.baseURL } : {}), ...fetchOpt });
  }
  if (config.google) {
    providers.google = createGoogleGenerativeAI({ apiKey: config.google.apiKey, ...(config.google.baseURL ? { baseURL: config.google.baseURL } : {}), ...fetchOpt });
  }
  for (const [name, c] of Object.entries(config.compatible)) {
    providers[name] = createOpenAICompatible({
      name,
      baseURL: c.baseURL,
      includeUsage: true,
      ...(c.apiKey ? { apiKey: c.apiKey } : {}),
      ...(c.headers ? { headers: c.headers } : {}),
      ...fetchOpt,
    });
    openAiChat.add(name);
  }
  for (const [name, p] of Object.entries(opts.providers ?? {})) {
    providers[name] = p;
    openAiChat.delete(name);
  }
  const sdkRegistry = createProviderRegistry(providers);

  const resolve = (ref?: string): ResolvedModel => {
    const start = ref?.trim() || config.defaultModel;
    if (start === undefined) throw LlmModelNotConfigured("no model given and BATON_LLM_DEFAULT_MODEL is not set");
    let cur: string = start;
    const seen: string[] = [];
    for (let next = config.aliases[cur]; next !== undefined; next = config.aliases[cur]) {
      if (seen.includes(cur)) throw LlmModelNotConfigured(`model alias "${seen[0]}" is circular: ${[...seen, cur].join(" → ")} (BATON_LLM_ALIASES)`);
      seen.push(cur);
      cur = next;
    }
    const at = cur.indexOf(":");
    if (at <= 0 || at === cur.length - 1) {
      const via = seen.length > 0 ? ` (alias "${seen[0]}" leads to it)` : "";
      throw LlmModelNotConfigured(
        `model "${cur}"${via} is neither a "provider:model" reference nor an alias; known aliases: ${Object.keys(config.aliases).join(", ") || "none"} (BATON_LLM_ALIASES)`,
      );
    }
    const provider = cur.slice(0, at);
    const modelId = cur.slice(at + 1);
    if (providers[provider] === undefined) {
      const via = seen.length > 0 ? ` (model "${seen[0]}" is an alias of "${cur}")` : "";
      throw LlmModelNotConfigured(`provider "${provider}" is not configured${via}: ${hint(provider)}`);
    }
    return { ref: cur, provider, modelId, openAiChat: openAiChat.has(provider) };
  };

  const languageModel = (ref?: string): LanguageModel => {
    const r = resolve(ref);
    return sdkRegistry.languageModel(r.ref as `${string}:${string}`);
  };

  const registry: LlmRegistry = {
    config,
    providers: () => Object.keys(providers).sort(),
    resolve,
    check(ref) {
      try {
        return { ok: true, ...resolve(ref) };
      } catch (err) {
        if (LlmModelNotConfigured.is(err)) return { ok: false, message: err.message };
        throw err;
      }
    },
    languageModel,
    chat: (request, chatOpts) => runChat({ config, resolve, languageModel: (r) => sdkRegistry.languageModel(r.ref as `${string}:${string}`) }, request, chatOpts),
    async embed(ref, values, o = {}) {
      const r = resolve(ref);
      try {
        const out = await embedMany({ model: sdkRegistry.embeddingModel(r.ref as `${string}:${string}`), values, maxRetries: config.maxRetries, ...(o.signal ? { abortSignal: o.signal } : {}) });
        return { embeddings: out.embeddings, usage: { tokens: out.usage?.tokens ?? 0 } };
      } catch (err) {
        throw toLlmError(err, r.ref);
      }
    },
    async image(ref, prompt, o = {}) {
      const r = resolve(ref);
      try {
        const out = await generateImage({
          model: sdkRegistry.imageModel(r.ref as `${string}:${string}`), prompt, n: o.n ?? 1, maxRetries: config.maxRetries,
          ...(o.size ? { size: o.size as `${number}x${number}` } : {}), ...(o.signal ? { abortSignal: o.signal } : {}),
        });
        return { images: out.images.map((i) => ({ base64: i.base64, mediaType: i.mediaType })) };
      } catch (err) {
        throw toLlmError(err, r.ref);
      }
    },
  };
  return registry;
}

/** One LLM call through `opts.registry`; the same as `registry.chat(request, opts)`. */
export function chat(request: ChatRequest, opts: ChatOptions & { registry: LlmRegistry }): Promise<ChatResult> {
  const { registry, ...rest } = opts;
  return registry.chat(request, rest);
}
