/**
 * chat() through the real `@ai-sdk/openai` and `@ai-sdk/openai-compatible` providers against
 * a local HTTP server speaking OpenAI chat completions. Rules checked:
 * - plain text, a tool call, parallel tool calls: results carry text, calls (Baton tool
 *   names), finish reason, usage and the raw chat-completion body;
 * - tool results given in the next request reach the server as `tool` messages;
 * - streamed calls deliver tokens in order and assemble the same result shape;
 * - a 429 is retried and the next answer used; 429s past maxRetries give BATON_LLM_RATE_LIMITED;
 * - a server that does not answer gives BATON_LLM_TIMEOUT; one that cannot be reached,
 *   BATON_LLM_UNAVAILABLE; a 400 is BATON_LLM_BAD_REQUEST, not retried;
 * - an unconfigured provider fails before any request with a message naming the variable.
 */
import { afterEach, describe, expect, it } from "@jest/globals";
import { createServer as createNetServer } from "node:net";
import { hasCode } from "@baton/errors";
import { createLlmRegistry, llmConfigFromEnv } from "./index.ts";
import type { ChatRequest, LlmRegistry } from "./index.ts";
import { plainTextAnswer } from "./int-helpers.ts";
import { startOpenAiCompatibleServer } from "./testing.ts";
import type { OpenAiCompatibleServer, ScriptStep } from "./testing.ts";

let server: OpenAiCompatibleServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

async function setup(script: ScriptStep[], extraEnv: Record<string, string> = {}): Promise<{ server: OpenAiCompatibleServer; registry: LlmRegistry }> {
  server = await startOpenAiCompatibleServer(script);
  const registry = createLlmRegistry(
    llmConfigFromEnv({
      BATON_OPENAI_API_KEY: "sk-test",
      BATON_OPENAI_BASE_URL: server.url,
      BATON_LLM_PROVIDERS: JSON.stringify({ local: { baseURL: server.url, apiKey: "local-key" } }),
      BATON_LLM_ALIASES: JSON.stringify({ fast: "openai:gpt-4o-mini" }),
      BATON_LLM_RETRY_BASE_DELAY_MS: "1",
      ...extraEnv,
    }),
  );
  return { server, registry };
}

const weatherTool = { name: "weather.get", description: "Weather of a city", inputSchema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } };

describe.each([["openai", "fast"], ["openai-compatible", "local:llama3"]])("%s provider", (_kind, model) => {
  it("answers plain text with usage and the raw chat completion", async () => {
    const { server, registry } = await setup([{ text: "Hello there", usage: { prompt_tokens: 21, completion_tokens: 3 } }]);
    const result = await registry.chat({ model, system: "be nice", messages: [{ role: "user", content: "hi" }], temperature: 0.1 });
    expect(result).toMatchObject(plainTextAnswer("Hello there", { input: 21, output: 3 }, {
      object: "chat.completion", choices: [{ message: { role: "assistant", content: "Hello there" }, finish_reason: "stop" }], usage: { total_tokens: 24 },
    }));
    const sent = server.requests[0]!;
    expect(sent.body).toMatchObject({ temperature: 0.1, messages: [{ role: "system", content: "be nice" }, { role: "user", content: "hi" }] });
    expect(sent.headers.authorization).toBe(model === "fast" ? "Bearer sk-test" : "Bearer local-key");
    expect(sent.body.model).toBe(model === "fast" ? "gpt-4o-mini" : "llama3");
  });

  it("returns parallel tool calls, and sends their results in the next request", async () => {
    const { server, registry } = await setup([
      { toolCalls: [{ id: "c1", name: "weather_get", args: { city: "Paris" } }, { id: "c2", name: "weather_get", args: { city: "Rome" } }] },
      { text: "Paris 20°, Rome 25°" },
    ]);
    const request: ChatRequest = { model, messages: [{ role: "user", content: "weather in Paris and Rome?" }], tools: [weatherTool] };
    const first = await registry.chat(request);
    expect(first.finishReason).toBe("tool-calls");
    expect(first.toolCalls).toEqual([
      { id: "c1", name: "weather.get", args: { city: "Paris" } },
      { id: "c2", name: "weather.get", args: { city: "Rome" } },
    ]);
    expect(server.requests[0]!.body.tools).toEqual([
      { type: "function", function: { name: "weather_get", description: "Weather of a city", parameters: weatherTool.inputSchema } },
    ]);

    const second = await registry.chat({
      ...request,
      messages: [
        ...request.messages,
        first.message,
        { role: "tool", toolCallId: "c1", name: "weather.get", content: { tempC: 20 } },
        { role: "tool", toolCallId: "c2", name: "weather.get", content: "25 degrees" },
      ],
    });
    expect(second.text).toBe("Paris 20°, Rome 25°");
    expect(server.requests[1]!.body.messages).toEqual([
      { role: "user", content: "weather in Paris and Rome?" },
      {
        role: "assistant",
        content: null,
        tool_calls: [
          { id: "c1", type: "function", function: { name: "weather_get", arguments: '{"city":"Paris"}' } },
          { id: "c2", type: "function", function: { name: "weather_get", arguments: '{"city":"Rome"}' } },
        ],
      },
      { role: "tool", tool_call_id: "c1", content: '{"tempC":20}' },
      { role: "tool", tool_call_id: "c2", content: "25 degrees" },
    ]);
  });

  it("streams tokens in order and assembles the result", async () => {
    const { server, registry } = await setup([{ text: "one two three four", usage: { prompt_tokens: 4, completion_tokens: 4 } }]);
    const tokens: string[] = [];
    const result = await registry.chat({ model, messages: [{ role: "user", content: "count" }] }, { onToken: (d, i) => void tokens.push(`${i}:${d}`) });
    expect(tokens).toEqual(["0:one ", "1:two ", "2:three ", "3:four"]);
    expect(server.requests[0]!.body.stream).toBe(true);
    expect(result).toMatchObject({
      text: "one two three four",
      finishReason: "stop",
      usage: { inputTokens: 4, outputTokens: 4, totalTokens: 8 },
      raw: { object: "chat.completion", choices: [{ message: { content: "one two three four" }, finish_reason: "stop" }], usage: { total_tokens: 8 } },
    });
  });

  it("streams a tool call", async () => {
    const { registry } = await setup([{ toolCalls: [{ id: "c9", name: "weather_get", args: { city: "Oslo" } }] }]);
    const tokens: string[] = [];
    const result = await registry.chat({ model, messages: [{ role: "user", content: "weather?" }], tools: [weatherTool] }, { onToken: (d) => void tokens.push(d) });
    expect(tokens).toEqual([]);
    expect(result.toolCalls).toEqual([{ id: "c9", name: "weather.get", args: { city: "Oslo" } }]);
    expect(result.raw).toMatchObject({ choices: [{ message: { tool_calls: [{ id: "c9", function: { name: "weather_get", arguments: '{"city":"Oslo"}' } }] }, finish_reason: "tool_calls" }] });
  });
});

describe("failures", () => {
  it("retries a 429, then uses the answer", async () => {
    const { server, registry } = await setup([{ status: 429, headers: { "retry-after": "0" } }, { status: 502 }, { text: "finally" }]);
    const result = await registry.chat({ model: "fast", messages: [{ role: "user", content: "hi" }] });
    expect(result.text).toBe("finally");
    expect(server.requests).toHaveLength(3);
  });

  it("gives BATON_LLM_RATE_LIMITED once retries are spent", async () => {
    const { server, registry } = await setup([{ status: 429 }, { status: 429 }], { BATON_LLM_MAX_RETRIES: "1" });
    const err = await registry.chat({ model: "local:m", messages: [{ role: "user", content: "hi" }] }, { onToken: () => undefined }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: "BATON_LLM_RATE_LIMITED", retryable: true, status: 429 });
    expect((err as Error).message).toContain("Rate limit reached");
    expect(server.requests).toHaveLength(2);
  });

  it("gives BATON_LLM_TIMEOUT when the server does not answer", async () => {
    const { registry } = await setup([{ hang: true }]);
    const err = await registry.chat({ model: "fast", messages: [{ role: "user", content: "hi" }], timeoutMs: 300 }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: "BATON_LLM_TIMEOUT", retryable: true });
    expect((err as Error).message).toBe("call of model openai:gpt-4o-mini timed out after 300 ms");
  });

  it("gives BATON_LLM_UNAVAILABLE when the server cannot be reached", async () => {
    const port = await new Promise<number>((resolve) => {
      const s = createNetServer().listen(0, "127.0.0.1", () => {
        const a = s.address();
        s.close(() => resolve(typeof a === "object" && a ? a.port : 0));
      });
    });
    const { registry } = await setup([], { BATON_LLM_PROVIDERS: JSON.stringify({ dead: { baseURL: `http://127.0.0.1:${port}/v1` } }), BATON_LLM_MAX_RETRIES: "1" });
    const err = await registry.chat({ model: "dead:m", messages: [{ role: "user", content: "hi" }] }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: "BATON_LLM_UNAVAILABLE", retryable: true });
  });

  it("refuses an unconfigured provider before sending anything", async () => {
    const { server, registry } = await setup([]);
    expect(registry.check("anthropic:claude-sonnet-4")).toEqual({ ok: false, message: 'provider "anthropic" is not configured: set BATON_ANTHROPIC_API_KEY (or ANTHROPIC_API_KEY)' });
    const err = await registry.chat({ model: "anthropic:claude-sonnet-4", messages: [{ role: "user", content: "hi" }] }).catch((e: unknown) => e);
    expect(hasCode(err, "BATON_LLM_MODEL_NOT_CONFIGURED")).toBe(true);
    expect(server.requests).toHaveLength(0);
  });

  it("returns a 400 from the provider as BATON_LLM_BAD_REQUEST without retrying", async () => {
    const { server, registry } = await setup([{ status: 400, body: { error: { message: "context too long", type: "invalid_request_error" } } }]);
    const err = await registry.chat({ model: "fast", messages: [{ role: "user", content: "hi" }] }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: "BATON_LLM_BAD_REQUEST", retryable: false });
    expect((err as Error).message).toContain("context too long");
    expect(server.requests).toHaveLength(1);
  });
});
