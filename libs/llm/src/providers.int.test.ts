/**
 * chat() through the real `@ai-sdk/anthropic` and `@ai-sdk/google` providers against a local
 * HTTP server answering in each provider's own protocol (Anthropic Messages, Gemini
 * generateContent / streamGenerateContent). Rules checked, for both:
 * - plain text: text, finish reason, usage, the provider's raw body; the request carries the
 *   key header, the model id, the system prompt, the user message and the temperature;
 * - a tool call comes back under its Baton name; the tools go out under provider-safe names
 *   with their schemas; the tool's result reaches the server in the next request;
 * - streamed text arrives in order and makes the same result;
 * - a 429 is retried and the next answer used; a 401 is BATON_LLM_AUTH_FAILED, not retried.
 */
import { afterEach, describe, expect, it } from "@jest/globals";
import { createServer } from "node:http";
import type { IncomingHttpHeaders } from "node:http";
import { createLlmRegistry, llmConfigFromEnv } from "./index.ts";
import type { ChatRequest, LlmRegistry } from "./index.ts";
import { plainTextAnswer } from "./int-helpers.ts";

interface Seen {
  path: string;
  headers: IncomingHttpHeaders;
  body: Record<string, unknown>;
}
/** One answer: JSON (`body`), or server-sent events (`events`, each sent as one `data:` line). */
type Answer = { status?: number; body?: unknown; events?: unknown[] };

let close: (() => Promise<void>) | undefined;
afterEach(async () => {
  await close?.();
  close = undefined;
});

/** A local HTTP server giving the n-th request the n-th answer, recording every request. */
async function scripted(answers: Answer[]): Promise<{ url: string; seen: Seen[] }> {
  const seen: Seen[] = [];
  const server = createServer((req, res) => {
    let raw = "";
    req.on("data", (c: Buffer) => (raw += c.toString("utf8")));
    req.on("end", () => {
      seen.push({ path: req.url ?? "", headers: req.headers, body: raw ? (JSON.parse(raw) as Record<string, unknown>) : {} });
      const a = answers[seen.length - 1] ?? { status: 500, body: { error: { message: "no more answers in the script" } } };
      if (a.events) {
        res.writeHead(200, { "content-type": "text/event-stream" });
        for (const e of a.events) res.write(`data: ${JSON.stringify(e)}\n\n`);
        res.end();
        return;
      }
      res.writeHead(a.status ?? 200, { "content-type": "application/json" });
      res.end(JSON.stringify(a.body ?? {}));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  close = () => new Promise<void>((resolve) => server.close(() => resolve()));
  return { url: `http://127.0.0.1:${port}`, seen };
}

const weatherTool = { name: "weather.get", description: "Weather of a city", inputSchema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } };

interface Protocol {
  model: string;
  env(url: string): Record<string, string>;
  keyHeader: [string, string];
  path: RegExp;
  streamPath: RegExp;
  text(text: string, usage: { input: number; output: number }): unknown;
  toolCall(id: string, name: string, args: unknown): unknown;
  streamed(chunks: string[]): unknown[];
  error(status: number): Answer;
  /** What the request says of the system prompt, the user message, the temperature and the model. */
  request(body: Record<string, unknown>, path: string): { system: unknown; user: unknown; temperature: unknown; model: string };
  /** The tools as sent. */
  tools(body: Record<string, unknown>): unknown;
  /** The tool result as sent back in the next request. */
  toolResult(body: Record<string, unknown>): unknown;
}

const anthropic: Protocol = {
  // A model that takes sampling settings (the SDK drops temperature for Claude models it does not know).
  model: "anthropic:claude-sonnet-4-5",
  env: (url) => ({ BATON_ANTHROPIC_API_KEY: "ant-test", BATON_ANTHROPIC_BASE_URL: `${url}/v1` }),
  keyHeader: ["x-api-key", "ant-test"],
  path: /^\/v1\/messages$/,
  streamPath: /^\/v1\/messages$/,
  text: (text, usage) => ({
    id: "msg_1", type: "message", role: "assistant", model: "claude-test",
    content: [{ type: "text", text }], stop_reason: "end_turn", stop_sequence: null,
    usage: { input_tokens: usage.input, output_tokens: usage.output },
  }),
  toolCall: (id, name, args) => ({
    id: "msg_2", type: "message", role: "assistant", model: "claude-test",
    content: [{ type: "tool_use", id, name, input: args }], stop_reason: "tool_use", stop_sequence: null,
    usage: { input_tokens: 30, output_tokens: 8 },
  }),
  streamed: (chunks) => [
    { type: "message_start", message: { id: "msg_3", type: "message", role: "assistant", model: "claude-test", content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 12, output_tokens: 1 } } },
    { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } },
    ...chunks.map((text) => ({ type: "content_block_delta", index: 0, delta: { type: "text_delta", text } })),
    { type: "content_block_stop", index: 0 },
    { type: "message_delta", delta: { stop_reason: "end_turn", stop_sequence: null }, usage: { output_tokens: chunks.length } },
    { type: "message_stop" },
  ],
  error: (status) => ({ status, body: { type: "error", error: { type: status === 429 ? "rate_limit_error" : "authentication_error", message: `status ${status}` } } }),
  request: (body) => ({
    system: body.system,
    user: (body.messages as { content: unknown }[])[0]!.content,
    temperature: body.temperature,
    model: body.model as string,
  }),
  tools: (body) => body.tools,
  toolResult: (body) => (body.messages as { role: string; content: unknown }[]).at(-1),
};

const google: Protocol = {
  model: "google:gemini-test",
  env: (url) => ({ BATON_GOOGLE_API_KEY: "goog-test", BATON_GOOGLE_BASE_URL: `${url}/v1beta` }),
  keyHeader: ["x-goog-api-key", "goog-test"],
  path: /^\/v1beta\/models\/gemini-test:generateContent$/,
  streamPath: /^\/v1beta\/models\/gemini-test:streamGenerateContent\?alt=sse$/,
  text: (text, usage) => ({
    candidates: [{ content: { role: "model", parts: [{ text }] }, finishReason: "STOP", index: 0 }],
    usageMetadata: { promptTokenCount: usage.input, candidatesTokenCount: usage.output, totalTokenCount: usage.input + usage.output },
  }),
  toolCall: (_id, name, args) => ({
    candidates: [{ content: { role: "model", parts: [{ functionCall: { name, args } }] }, finishReason: "STOP", index: 0 }],
    usageMetadata: { promptTokenCount: 30, candidatesTokenCount: 8, totalTokenCount: 38 },
  }),
  streamed: (chunks) => chunks.map((text, i) => ({
    candidates: [{ content: { role: "model", parts: [{ text }] }, index: 0, ...(i === chunks.length - 1 ? { finishReason: "STOP" } : {}) }],
    ...(i === chunks.length - 1 ? { usageMetadata: { promptTokenCount: 12, candidatesTokenCount: chunks.length, totalTokenCount: 12 + chunks.length } } : {}),
  })),
  error: (status) => ({ status, body: { error: { code: status, message: `status ${status}`, status: status === 429 ? "RESOURCE_EXHAUSTED" : "UNAUTHENTICATED" } } }),
  request: (body, path) => ({
    system: body.systemInstruction,
    user: (body.contents as { parts: unknown }[])[0]!.parts,
    temperature: (body.generationConfig as { temperature?: unknown } | undefined)?.temperature,
    model: /models\/([^:]+):/.exec(path)![1]!,
  }),
  tools: (body) => body.tools,
  toolResult: (body) => (body.contents as { role: string; parts: unknown }[]).at(-1),
};

function registry(url: string, p: Protocol, extra: Record<string, string> = {}): LlmRegistry {
  return createLlmRegistry(llmConfigFromEnv({ ...p.env(url), BATON_LLM_RETRY_BASE_DELAY_MS: "1", ...extra }));
}

describe.each([["anthropic", anthropic], ["google", google]])("%s provider", (_name, p) => {
  it("answers plain text with usage and the provider's raw body", async () => {
    const { url, seen } = await scripted([{ body: p.text("Hello there", { input: 21, output: 3 }) }]);
    const result = await registry(url, p).chat({ model: p.model, system: "be nice", messages: [{ role: "user", content: "hi" }], temperature: 0.1 });
    expect(result).toMatchObject(plainTextAnswer("Hello there", { input: 21, output: 3 }, p.text("Hello there", { input: 21, output: 3 })));
    const req = seen[0]!;
    expect(req.path).toMatch(p.path);
    expect(req.headers[p.keyHeader[0]]).toBe(p.keyHeader[1]);
    const sent = p.request(req.body, req.path);
    expect(sent.model).toBe(p.model.split(":")[1]);
    expect(JSON.stringify(sent.system)).toContain("be nice");
    expect(JSON.stringify(sent.user)).toContain("hi");
    expect(sent.temperature).toBe(0.1);
  });

  it("returns a tool call under its Baton name, and sends the tool's result in the next request", async () => {
    const { url, seen } = await scripted([{ body: p.toolCall("toolu_1", "weather_get", { city: "Paris" }) }, { body: p.text("Paris: 20°", { input: 40, output: 4 }) }]);
    const llm = registry(url, p);
    const request: ChatRequest = { model: p.model, messages: [{ role: "user", content: "weather in Paris?" }], tools: [weatherTool] };
    const first = await llm.chat(request);
    expect(first.finishReason).toBe("tool-calls");
    expect(first.toolCalls).toEqual([{ id: expect.any(String), name: "weather.get", args: { city: "Paris" } }]);
    const tools = JSON.stringify(p.tools(seen[0]!.body));
    expect(tools).toContain('"weather_get"');
    expect(tools).toContain('"city"');

    const second = await llm.chat({
      ...request,
      messages: [...request.messages, first.message, { role: "tool", toolCallId: first.toolCalls[0]!.id, name: "weather.get", content: { celsius: 20 } }],
    });
    expect(second.text).toBe("Paris: 20°");
    const back = JSON.stringify(p.toolResult(seen[1]!.body));
    expect(back).toContain("celsius");
    expect(back).toContain(p === anthropic ? first.toolCalls[0]!.id : "weather_get");
  });

  it("streams text in order and makes the same result", async () => {
    const { url, seen } = await scripted([{ events: p.streamed(["Hel", "lo ", "there"]) }]);
    const tokens: string[] = [];
    const result = await registry(url, p).chat({ model: p.model, messages: [{ role: "user", content: "hi" }] }, { onToken: (t) => void tokens.push(t) });
    expect(tokens.join("")).toBe("Hello there");
    expect(result).toMatchObject({ text: "Hello there", finishReason: "stop", usage: { inputTokens: 12, outputTokens: 3 } });
    expect(seen[0]!.path).toMatch(p.streamPath);
  });

  it("retries a 429 and uses the next answer; a 401 is BATON_LLM_AUTH_FAILED, not retried", async () => {
    const { url, seen } = await scripted([p.error(429), { body: p.text("finally", { input: 1, output: 1 }) }, p.error(401)]);
    const llm = registry(url, p);
    expect((await llm.chat({ model: p.model, messages: [{ role: "user", content: "hi" }] })).text).toBe("finally");
    expect(seen).toHaveLength(2);
    await expect(llm.chat({ model: p.model, messages: [{ role: "user", content: "hi" }] })).rejects.toMatchObject({ code: "BATON_LLM_AUTH_FAILED", retryable: false });
    expect(seen).toHaveLength(3);
  });
});
