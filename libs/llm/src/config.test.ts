/**
 * LLM configuration and model resolution. Rules checked:
 * - keys come from BATON_* first, then the providers' usual variables; OpenAI-compatible
 *   servers and aliases come from JSON variables; every problem is reported at once;
 * - a reference resolves through aliases and the default model; check() names the
 *   configuration to set when a provider, alias or default is missing;
 * - a node's overrides win over the workflow's agentConfig, undefined ones do not;
 * - LLM_ENV_VARS names exactly the variables llmConfigFromEnv reads, and docs/llm.md
 *   documents each of them.
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "@jest/globals";
import { hasCode } from "@baton/errors";
import { createLlmRegistry, emptyLlmConfig, LLM_ENV_VARS, llmConfigFromEnv, resolveModelSettings } from "./index.ts";

describe("LLM_ENV_VARS", () => {
  it("names exactly what llmConfigFromEnv reads, each documented in docs/llm.md", () => {
    const read = new Set<string>();
    llmConfigFromEnv(new Proxy({}, { get: (_t, key) => (typeof key === "string" && read.add(key), undefined) }));
    expect([...read].sort()).toEqual([...LLM_ENV_VARS].sort());
    const doc = readFileSync(new URL("../../../docs/llm.md", import.meta.url), "utf8");
    expect(LLM_ENV_VARS.filter((v) => !doc.includes(`\`${v}\``))).toEqual([]);
  });
});

describe("llmConfigFromEnv", () => {
  it("reads keys, base URLs, compatible servers, aliases, default model and limits", () => {
    const cfg = llmConfigFromEnv({
      OPENAI_API_KEY: "fallback",
      BATON_OPENAI_API_KEY: "primary",
      BATON_OPENAI_BASE_URL: "http://proxy.local/v1",
      ANTHROPIC_API_KEY: "ant",
      BATON_LLM_PROVIDERS: JSON.stringify({ ollama: { baseURL: "http://localhost:11434/v1" }, vllm: { baseURL: "https://vllm.local/v1", apiKey: "v" } }),
      BATON_LLM_ALIASES: JSON.stringify({ fast: "openai:gpt-4o-mini", smart: "anthropic:claude-sonnet-4" }),
      BATON_LLM_DEFAULT_MODEL: "fast",
      BATON_LLM_TENANT_DAILY_TOKENS: "100000",
      BATON_LLM_TIMEOUT_MS: "5000",
    });
    expect(cfg.openai).toEqual({ apiKey: "primary", baseURL: "http://proxy.local/v1" });
    expect(cfg.anthropic).toEqual({ apiKey: "ant" });
    expect(cfg.google).toBeUndefined();
    expect(cfg.compatible).toEqual({ ollama: { baseURL: "http://localhost:11434/v1" }, vllm: { baseURL: "https://vllm.local/v1", apiKey: "v" } });
    expect(cfg.aliases).toEqual({ fast: "openai:gpt-4o-mini", smart: "anthropic:claude-sonnet-4" });
    expect(cfg.defaultModel).toBe("fast");
    expect(cfg.tenantDailyTokens).toBe(100000);
    expect(cfg.timeoutMs).toBe(5000);
    expect(cfg.maxRetries).toBe(2);
  });

  it("takes GOOGLE_GENERATIVE_AI_API_KEY when BATON_GOOGLE_API_KEY is unset", () => {
    expect(llmConfigFromEnv({ GOOGLE_GENERATIVE_AI_API_KEY: "g" }).google).toEqual({ apiKey: "g" });
    expect(llmConfigFromEnv({}).google).toBeUndefined();
  });

  it("reports every problem at once", () => {
    let err: unknown;
    try {
      llmConfigFromEnv({
        BATON_LLM_PROVIDERS: JSON.stringify({ openai: { baseURL: "http://x/v1" }, Bad: { baseURL: "http://x/v1" }, nourl: {} }),
        BATON_LLM_ALIASES: "{not json",
        BATON_LLM_TENANT_DAILY_TOKENS: "-3",
      });
    } catch (e) {
      err = e;
    }
    expect(hasCode(err, "BATON_LLM_INVALID_CONFIG")).toBe(true);
    const problems = (err as { details: string[] }).details;
    expect(problems.some((p) => p.startsWith("BATON_LLM_PROVIDERS.openai:") && p.includes("built-in"))).toBe(true);
    expect(problems.some((p) => p.startsWith("BATON_LLM_PROVIDERS.Bad:"))).toBe(true);
    expect(problems.some((p) => p.startsWith("BATON_LLM_PROVIDERS.nourl.baseURL:"))).toBe(true);
    expect(problems.some((p) => p.startsWith("BATON_LLM_ALIASES: not valid JSON"))).toBe(true);
    expect(problems.some((p) => p.startsWith("BATON_LLM_TENANT_DAILY_TOKENS:"))).toBe(true);
  });

  it("refuses JSON that is not an object, and aliases that are not model strings", () => {
    const problemsOf = (env: Record<string, string>): string[] => {
      try {
        llmConfigFromEnv(env);
        return [];
      } catch (e) {
        return (e as { details: string[] }).details;
      }
    };
    expect(problemsOf({ BATON_LLM_PROVIDERS: "[]", BATON_LLM_ALIASES: '"fast"' })).toEqual([
      'BATON_LLM_PROVIDERS: must be an object {"name": {"baseURL": "…", "apiKey"?: "…"}}',
      'BATON_LLM_ALIASES: must be an object {"alias": "provider:model"}',
    ]);
    expect(problemsOf({ BATON_LLM_ALIASES: JSON.stringify({ "a:b": "openai:x", fast: 3, ok: " openai:gpt " }) })).toEqual([
      'BATON_LLM_ALIASES.a:b: an alias name must not be empty or contain ":"',
      'BATON_LLM_ALIASES.fast: must be a "provider:model" string',
    ]);
    expect(llmConfigFromEnv({ BATON_LLM_ALIASES: JSON.stringify({ ok: " openai:gpt " }) }).aliases).toEqual({ ok: "openai:gpt" });
  });
});

describe("model references", () => {
  const registry = createLlmRegistry(
    emptyLlmConfig({
      openai: { apiKey: "k" },
      compatible: { ollama: { baseURL: "http://127.0.0.1:1/v1" } },
      aliases: { fast: "openai:gpt-4o-mini", local: "ollama:llama3", smart: "anthropic:claude-sonnet-4", loop1: "loop2", loop2: "loop1", word: "nocolon" },
      defaultModel: "fast",
    }),
  );

  it("resolves provider:model, aliases and the default model", () => {
    expect(registry.resolve("openai:gpt-4o")).toMatchObject({ ref: "openai:gpt-4o", provider: "openai", modelId: "gpt-4o", openAiChat: true });
    expect(registry.resolve("local")).toMatchObject({ ref: "ollama:llama3", provider: "ollama", openAiChat: true });
    expect(registry.resolve()).toMatchObject({ ref: "openai:gpt-4o-mini" });
    expect(registry.resolve("ollama:org/model:tag")).toMatchObject({ provider: "ollama", modelId: "org/model:tag" });
    expect(registry.check("fast")).toMatchObject({ ok: true, ref: "openai:gpt-4o-mini" });
    expect(registry.providers()).toEqual(["ollama", "openai"]);
  });

  it("names the missing configuration", () => {
    expect(registry.check("anthropic:claude-sonnet-4")).toEqual({
      ok: false,
      message: 'provider "anthropic" is not configured: set BATON_ANTHROPIC_API_KEY (or ANTHROPIC_API_KEY)',
    });
    const viaAlias = registry.check("smart");
    expect(viaAlias.ok).toBe(false);
    expect(!viaAlias.ok && viaAlias.message).toContain('provider "anthropic" is not configured (model "smart" is an alias of "anthropic:claude-sonnet-4")');
    const compat = registry.check("vllm:qwen");
    expect(!compat.ok && compat.message).toContain('provider "vllm" is not configured: add it to BATON_LLM_PROVIDERS');
    const unknown = registry.check("gpt5");
    expect(!unknown.ok && unknown.message).toContain('model "gpt5" is neither a "provider:model" reference nor an alias');
    const loop = registry.check("loop1");
    expect(!loop.ok && loop.message).toContain("circular");
    const noDefault = createLlmRegistry(emptyLlmConfig()).check(undefined);
    expect(noDefault).toEqual({ ok: false, message: "no model given and BATON_LLM_DEFAULT_MODEL is not set" });
  });

  it("builds the anthropic and google providers from their keys", () => {
    const full = createLlmRegistry(llmConfigFromEnv({ ANTHROPIC_API_KEY: "a", BATON_GOOGLE_API_KEY: "g" }));
    expect(full.providers()).toEqual(["anthropic", "google"]);
    const claude = full.languageModel("anthropic:claude-sonnet-4") as { provider: string; modelId: string };
    expect(claude.provider).toMatch(/^anthropic/);
    expect(claude.modelId).toBe("claude-sonnet-4");
    const gemini = full.languageModel("google:gemini-2.5-pro") as { provider: string; modelId: string };
    expect(gemini.provider).toMatch(/^google/);
    expect(full.resolve("google:gemini-2.5-pro").openAiChat).toBe(false);
  });

  it("throws BATON_LLM_MODEL_NOT_CONFIGURED from resolve", () => {
    expect(() => registry.resolve("google:gemini-2.5-pro")).toThrow(expect.objectContaining({ code: "BATON_LLM_MODEL_NOT_CONFIGURED", status: 400, retryable: false }));
  });
});

describe("resolveModelSettings", () => {
  it("lets the node override the workflow, except with undefined", () => {
    const merged = resolveModelSettings(
      { model: "smart", temperature: 0.2, maxTokens: 1000, timeoutMs: 30_000, maxToolIterations: 10 },
      { temperature: 0.9, maxTokens: undefined, model: "fast" },
    );
    expect(merged).toEqual({ model: "fast", temperature: 0.9, maxTokens: 1000, timeoutMs: 30_000, maxToolIterations: 10 });
    expect(resolveModelSettings(undefined, { model: "x" })).toEqual({ model: "x" });
    expect(resolveModelSettings({ model: "y" })).toEqual({ model: "y" });
  });
});
