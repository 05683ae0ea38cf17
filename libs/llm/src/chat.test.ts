/**
 * chat() against the AI SDK's mock language model. Rules checked:
 * - the neutral messages reach the model as system text, tool calls and tool results, with
 *   tool names the provider accepts, and tool calls come back under their Baton names;
 * - usage, finish reason and structured output are reported; output that is not JSON is
 *   BATON_LLM_INVALID_RESPONSE;
 * - an invalid request is refused with BATON_LLM_BAD_REQUEST naming each field;
 * - 429 and 5xx are retried with backoff up to maxRetries; 4xx is not; a stream that has
 *   emitted tokens is not retried; cancellation throws the caller's reason;
 * - tokens reach onToken in order.
 */
import { describe, expect, it } from "@jest/globals";
import { APICallError, customProvider } from "ai";
import { convertArrayToReadableStream, MockLanguageModelV4 } from "ai/test";
import type { LanguageModelV4CallOptions, LanguageModelV4GenerateResult, LanguageModelV4StreamPart } from "@ai-sdk/provider";
import { hasCode } from "@baton/errors";
import { chat, createLlmRegistry, emptyLlmConfig } from "./index.ts";
import type { LlmRegistry } from "./index.ts";

const usage = { inputTokens: { total: 12, noCache: 12, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 7, text: 7, reasoning: 0 } };

function generated(content: LanguageModelV4GenerateResult["content"], finish: "stop" | "tool-calls" = "stop"): LanguageModelV4GenerateResult {
  return { content, finishReason: { unified: finish, raw: finish }, usage, warnings: [] };
}

function registryWith(model: MockLanguageModelV4, maxRetries = 2): LlmRegistry {
  return createLlmRegistry(emptyLlmConfig({ retryBaseDelayMs: 1, maxRetries }), {
    providers: { mock: customProvider({ languageModels: { m: model } }) },
  });
}

function apiError(statusCode: number): APICallError {
  return new APICallError({
    message: `HTTP ${statusCode}`,
    url: "http://mock/v1/chat/completions",
    requestBodyValues: {},
    statusCode,
    responseHeaders: statusCode === 429 ? { "retry-after": "0" } : {},
    responseBody: JSON.stringify({ error: { message: `status ${statusCode}` } }),
    isRetryable: statusCode === 429 || statusCode >= 500,
  });
}

describe("chat with the mock model", () => {
  it("sends system, tool calls and tool results; maps tool names both ways", async () => {
    const model = new MockLanguageModelV4({
      doGenerate: generated([{ type: "tool-call", toolCallId: "c2", toolName: "http_request", input: JSON.stringify({ url: "https://example.com" }) }], "tool-calls"),
    });
    const result = await registryWith(model).chat({
      model: "mock:m",
      system: "be brief",
      messages: [
        { role: "user", content: "fetch it" },
        { role: "assistant", content: "calling", toolCalls: [{ id: "c1", name: "http.request", args: { url: "https://a" } }] },
        { role: "tool", toolCallId: "c1", name: "http.request", content: { status: 500 }, isError: true },
      ],
      tools: [{ name: "http.request", description: "HTTP", inputSchema: { type: "object", properties: { url: { type: "string" } }, required: ["url"] } }],
      toolChoice: "required",
      temperature: 0.3,
      maxTokens: 99,
    });
    expect(result).toMatchObject({
      model: "mock:m",
      text: "",
      toolCalls: [{ id: "c2", name: "http.request", args: { url: "https://example.com" } }],
      finishReason: "tool-calls",
      usage: { inputTokens: 12, outputTokens: 7, totalTokens: 19 },
      message: { role: "assistant", content: null, toolCalls: [{ id: "c2", name: "http.request", args: { url: "https://example.com" } }] },
    });
    expect(result.raw).toBeUndefined();

    const call = model.doGenerateCalls[0] as LanguageModelV4CallOptions;
    expect(call.temperature).toBe(0.3);
    expect(call.maxOutputTokens).toBe(99);
    expect(call.toolChoice).toEqual({ type: "required" });
    expect(call.tools?.map((t) => t.name)).toEqual(["http_request"]);
    expect(call.prompt[0]).toMatchObject({ role: "system", content: "be brief" });
    expect(call.prompt[2]).toMatchObject({
      role: "assistant",
      content: [
        { type: "text", text: "calling" },
        { type: "tool-call", toolCallId: "c1", toolName: "http_request", input: { url: "https://a" } },
      ],
    });
    expect(call.prompt[3]).toMatchObject({
      role: "tool",
      content: [{ type: "tool-result", toolCallId: "c1", toolName: "http_request", output: { type: "error-json", value: { status: 500 } } }],
    });
  });

  it("returns structured output parsed", async () => {
    const model = new MockLanguageModelV4({ doGenerate: generated([{ type: "text", text: '{"city":"Paris","days":3}' }]) });
    const result = await registryWith(model).chat({
      model: "mock:m",
      messages: [{ role: "user", content: "plan" }],
      responseFormat: { type: "json", schema: { type: "object", properties: { city: { type: "string" }, days: { type: "number" } }, required: ["city", "days"] } },
    });
    expect(result.object).toEqual({ city: "Paris", days: 3 });
    expect(model.doGenerateCalls[0]!.responseFormat).toMatchObject({ type: "json" });
  });

  it.each([
    ["that is not JSON", "sorry, no JSON", "could not parse the response"],
    ["that does not match its schema, naming the field", '{"city":"Paris","days":"three"}', "answer/days must be number"],
  ])("reports structured output %s as BATON_LLM_INVALID_RESPONSE, without a second call", async (_what, answer, detail) => {
    const model = new MockLanguageModelV4({ doGenerate: generated([{ type: "text", text: answer }]) });
    const schema = { type: "object", properties: { city: { type: "string" }, days: { type: "number" } }, required: ["city", "days"] };
    const err = await chat({ model: "mock:m", messages: [{ role: "user", content: "plan" }], responseFormat: { type: "json", schema } }, { registry: registryWith(model) }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: "BATON_LLM_INVALID_RESPONSE", retryable: true });
    expect((err as Error).message).toContain(detail);
    expect(model.doGenerateCalls).toHaveLength(1);
  });

  it("checks structured output against 2020-12 and 2019-09 schemas too", async () => {
    for (const dialect of ["https://json-schema.org/draft/2020-12/schema", "https://json-schema.org/draft/2019-09/schema"]) {
      const schema = { $schema: dialect, type: "object", properties: { days: { type: "number" } }, required: ["days"] };
      const ok = new MockLanguageModelV4({ doGenerate: generated([{ type: "text", text: '{"days":3}' }]) });
      expect((await registryWith(ok).chat({ model: "mock:m", messages: [{ role: "user", content: "plan" }], responseFormat: { type: "json", schema } })).object).toEqual({ days: 3 });
      const bad = new MockLanguageModelV4({ doGenerate: generated([{ type: "text", text: '{"days":"x"}' }]) });
      await expect(registryWith(bad).chat({ model: "mock:m", messages: [{ role: "user", content: "plan" }], responseFormat: { type: "json", schema } }))
        .rejects.toMatchObject({ code: "BATON_LLM_INVALID_RESPONSE" });
    }
  });

  it("refuses a responseFormat schema that is not JSON Schema before calling the model", async () => {
    const model = new MockLanguageModelV4({ doGenerate: generated([{ type: "text", text: "{}" }]) });
    const err = await chat(
      { model: "mock:m", messages: [{ role: "user", content: "plan" }], responseFormat: { type: "json", schema: { type: "nonsense" } } },
      { registry: registryWith(model) },
    ).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: "BATON_LLM_BAD_REQUEST" });
    expect((err as Error).message).toContain("responseFormat.schema: not a valid JSON Schema");
    expect(model.doGenerateCalls).toHaveLength(0);
  });

  it("refuses an invalid request, naming each field", async () => {
    const model = new MockLanguageModelV4({ doGenerate: generated([{ type: "text", text: "x" }]) });
    const err = await registryWith(model)
      .chat({ model: "mock:m", messages: [{ role: "robot", content: "x" }], temperature: 7 } as never)
      .catch((e: unknown) => e);
    expect(hasCode(err, "BATON_LLM_BAD_REQUEST")).toBe(true);
    expect((err as Error).message).toContain("messages.0.role");
    expect((err as Error).message).toContain("temperature");
    expect(model.doGenerateCalls).toHaveLength(0);
  });

  it("retries 429 and 5xx, then succeeds", async () => {
    const answers: (Error | LanguageModelV4GenerateResult)[] = [apiError(429), apiError(503), generated([{ type: "text", text: "ok" }])];
    const model = new MockLanguageModelV4({
      doGenerate: async () => {
        const a = answers.shift()!;
        if (a instanceof Error) throw a;
        return a;
      },
    });
    const result = await registryWith(model).chat({ model: "mock:m", messages: [{ role: "user", content: "hi" }] });
    expect(result.text).toBe("ok");
    expect(model.doGenerateCalls).toHaveLength(3);
  });

  it("gives up after maxRetries with the last error's code", async () => {
    const model = new MockLanguageModelV4({
      doGenerate: async () => {
        throw apiError(500);
      },
    });
    const err = await registryWith(model, 1).chat({ model: "mock:m", messages: [{ role: "user", content: "hi" }] }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: "BATON_LLM_UNAVAILABLE", retryable: true });
    expect(model.doGenerateCalls).toHaveLength(2);
  });

  it("does not retry a 400 or a 401", async () => {
    for (const [status, code] of [[400, "BATON_LLM_BAD_REQUEST"], [401, "BATON_LLM_AUTH_FAILED"]] as const) {
      const model = new MockLanguageModelV4({
        doGenerate: async () => {
          throw apiError(status);
        },
      });
      const err = await registryWith(model).chat({ model: "mock:m", messages: [{ role: "user", content: "hi" }] }).catch((e: unknown) => e);
      expect(err).toMatchObject({ code, retryable: false });
      expect((err as Error).message).toContain(`status ${status}`);
      expect(model.doGenerateCalls).toHaveLength(1);
    }
  });

  it("streams tokens in order to onToken", async () => {
    const parts: LanguageModelV4StreamPart[] = [
      { type: "stream-start", warnings: [] },
      { type: "text-start", id: "t" },
      { type: "text-delta", id: "t", delta: "Hel" },
      { type: "text-delta", id: "t", delta: "lo " },
      { type: "text-delta", id: "t", delta: "world" },
      { type: "text-end", id: "t" },
      { type: "finish", finishReason: { unified: "stop", raw: "stop" }, usage },
    ];
    const model = new MockLanguageModelV4({ doStream: { stream: convertArrayToReadableStream(parts) } });
    const tokens: [string, number][] = [];
    const result = await registryWith(model).chat({ model: "mock:m", messages: [{ role: "user", content: "hi" }] }, { onToken: (d, i) => void tokens.push([d, i]) });
    expect(tokens).toEqual([["Hel", 0], ["lo ", 1], ["world", 2]]);
    expect(result).toMatchObject({ text: "Hello world", finishReason: "stop", usage: { totalTokens: 19 } });
    expect(model.doStreamCalls).toHaveLength(1);
  });

  it("does not retry a stream that failed after emitting tokens", async () => {
    const model = new MockLanguageModelV4({
      doStream: async () => ({
        stream: convertArrayToReadableStream<LanguageModelV4StreamPart>([
          { type: "text-start", id: "t" },
          { type: "text-delta", id: "t", delta: "partial" },
          { type: "error", error: apiError(503) },
        ]),
      }),
    });
    const tokens: string[] = [];
    const err = await registryWith(model).chat({ model: "mock:m", messages: [{ role: "user", content: "hi" }] }, { onToken: (d) => void tokens.push(d) }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: "BATON_LLM_UNAVAILABLE" });
    expect(tokens).toEqual(["partial"]);
    expect(model.doStreamCalls).toHaveLength(1);
  });

  it("throws the caller's reason when cancelled", async () => {
    const model = new MockLanguageModelV4({
      doGenerate: (opts) =>
        new Promise((_, reject) => opts.abortSignal?.addEventListener("abort", () => reject(opts.abortSignal!.reason as Error), { once: true })),
    });
    const ac = new AbortController();
    const pending = registryWith(model).chat({ model: "mock:m", messages: [{ role: "user", content: "hi" }] }, { signal: ac.signal });
    const reason = new Error("execution cancelled");
    ac.abort(reason);
    await expect(pending).rejects.toBe(reason);
  });
});
