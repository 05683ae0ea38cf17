/**
 * Test helpers of @baton/llm: a real local HTTP server speaking the OpenAI chat-completions
 * protocol, driven by a script, so tests exercise the real `@ai-sdk/openai` /
 * `@ai-sdk/openai-compatible` providers without reaching any LLM.
 *
 * @example
 * const server = await startOpenAiCompatibleServer([
 *   { toolCalls: [{ name: "get_weather", args: { city: "Paris" } }] },
 *   (req) => ({ text: `got ${JSON.stringify(req.body.messages.at(-1))}` }),
 * ]);
 * // BATON_LLM_PROVIDERS={"local":{"baseURL": server.url}}
 * await server.close();
 */
import { createServer } from "node:http";
import type { IncomingMessage, ServerResponse } from "node:http";

export interface ScriptedToolCall {
  /** @default `call_{n}` */
  id?: string;
  name: string;
  args: unknown;
}

/** A successful completion. */
export interface ScriptedCompletion {
  text?: string;
  toolCalls?: ScriptedToolCall[];
  /** @default "tool_calls" when there are tool calls, else "stop" */
  finishReason?: string;
  /** @default { prompt_tokens: 10, completion_tokens: 5 } */
  usage?: { prompt_tokens: number; completion_tokens: number };
  /** How a streamed text is cut into deltas. @default the text split after each space */
  chunks?: string[];
}

/** An HTTP error answer, e.g. `{ status: 429, headers: { "retry-after": "0" } }`. */
export interface ScriptedError {
  status: number;
  headers?: Record<string, string>;
  /** @default an OpenAI-style error object */
  body?: unknown;
}

/** Never answers (until the server closes): for timeouts. */
export interface ScriptedHang {
  hang: true;
}

export type ScriptedReply = ScriptedCompletion | ScriptedError | ScriptedHang;

export interface RecordedRequest {
  method: string;
  path: string;
  headers: IncomingMessage["headers"];
  /** The parsed JSON body (`model`, `messages`, `tools`, `stream`, …). */
  body: { [key: string]: unknown; messages?: Array<Record<string, unknown>>; stream?: boolean; model?: string };
}

/** Request n (0-based) gets step n; a function step sees the request. Requests past the script get a 500. */
export type ScriptStep = ScriptedReply | ((req: RecordedRequest, index: number) => ScriptedReply | Promise<ScriptedReply>);

export interface OpenAiCompatibleServer {
  /** Base URL ending in `/v1`, for `baseURL`. */
  url: string;
  /** Every request to /v1/chat/completions, in order. */
  requests: RecordedRequest[];
  /** Texts sent to /v1/embeddings (answered with deterministic 8-dimensional vectors). */
  embeddings: string[];
  /** Prompts sent to /v1/images/generations (answered with a 1x1 PNG). */
  images: string[];
  close(): Promise<void>;
}

async function readBody(req: IncomingMessage): Promise<string> {
  const parts: Buffer[] = [];
  for await (const c of req) parts.push(c as Buffer);
  return Buffer.concat(parts).toString("utf8");
}

function send(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { "content-type": "application/json", ...headers });
  res.end(JSON.stringify(body));
}

function defaultError(status: number): unknown {
  if (status === 429) return { error: { message: "Rate limit reached for requests", type: "requests", code: "rate_limit_exceeded" } };
  return { error: { message: `scripted error ${status}`, type: status >= 500 ? "server_error" : "invalid_request_error", code: null } };
}

/** Starts the server on 127.0.0.1 (random port). */
export async function startOpenAiCompatibleServer(script: ScriptStep[] | ((req: RecordedRequest, index: number) => ScriptedReply | Promise<ScriptedReply>)): Promise<OpenAiCompatibleServer> {
  const requests: RecordedRequest[] = [];
  const embeddings: string[] = [];
  const images: string[] = [];
  let seq = 0;
  const stepFor = (i: number): ScriptStep | undefined => (typeof script === "function" ? script : script[i]);

  const server = createServer((req, res) => {
    void (async () => {
      const text = await readBody(req);
      const path = (req.url ?? "/").split("?")[0]!;
      if (req.method === "POST" && path.endsWith("/embeddings")) {
        // Deterministic 8-dimensional vectors from the text, so tests can compare them.
        const b = JSON.parse(text) as { input: string | string[] };
        const inputs = Array.isArray(b.input) ? b.input : [b.input];
        embeddings.push(...inputs);
        return send(res, 200, {
          object: "list",
          data: inputs.map((t, index) => ({ object: "embedding", index, embedding: Array.from({ length: 8 }, (_, k) => (t.charCodeAt(k % Math.max(1, t.length)) || 0) / 128) })),
          model: "embed-test",
          usage: { prompt_tokens: inputs.join(" ").length, total_tokens: inputs.join(" ").length },
        });
      }
      if (req.method === "POST" && path.endsWith("/images/generations")) {
        const b = JSON.parse(text) as { prompt: string; n?: number };
        images.push(b.prompt);
        // A 1x1 PNG.
        const png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";
        return send(res, 200, { created: Math.floor(Date.now() / 1000), data: Array.from({ length: b.n ?? 1 }, () => ({ b64_json: png })) });
      }
      if (req.method !== "POST" || !path.endsWith("/chat/completions")) return send(res, 404, { error: { message: `no route ${req.method} ${path}` } });
      let body: RecordedRequest["body"];
      try {
        body = JSON.parse(text) as RecordedRequest["body"];
      } catch {
        return send(res, 400, { error: { message: "body is not JSON", type: "invalid_request_error" } });
      }
      const recorded: RecordedRequest = { method: req.method, path, headers: req.headers, body };
      const index = requests.push(recorded) - 1;
      const step = stepFor(index);
      if (step === undefined) return send(res, 500, { error: { message: `script has no step for request ${index}`, type: "server_error" } });
      const reply = typeof step === "function" ? await step(recorded, index) : step;
      if ("hang" in reply) return;
      if ("status" in reply) return send(res, reply.status, reply.body ?? defaultError(reply.status), reply.headers);

      const id = `chatcmpl-${index}`;
      const created = Math.floor(Date.now() / 1000);
      const model = typeof body.model === "string" ? body.model : "unknown";
      const calls = (reply.toolCalls ?? []).map((c) => ({ id: c.id ?? `call_${++seq}`, name: c.name, arguments: JSON.stringify(c.args) }));
      const finish = reply.finishReason ?? (calls.length > 0 ? "tool_calls" : "stop");
      const u = reply.usage ?? { prompt_tokens: 10, completion_tokens: 5 };
      const usage = { ...u, total_tokens: u.prompt_tokens + u.completion_tokens };
      const content = reply.text ?? (calls.length > 0 ? null : "");

      if (body.stream !== true) {
        return send(res, 200, {
          id,
          object: "chat.completion",
          created,
          model,
          choices: [
            {
              index: 0,
              message: {
                role: "assistant",
                content,
                ...(calls.length > 0 ? { tool_calls: calls.map((c) => ({ id: c.id, type: "function", function: { name: c.name, arguments: c.arguments } })) } : {}),
              },
              finish_reason: finish,
            },
          ],
          usage,
        });
      }

      res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" });
      const chunk = (delta: Record<string, unknown>, finishReason: string | null = null): void => {
        res.write(`data: ${JSON.stringify({ id, object: "chat.completion.chunk", created, model, choices: [{ index: 0, delta, finish_reason: finishReason }] })}\n\n`);
      };
      chunk({ role: "assistant", content: "" });
      const deltas = reply.chunks ?? (reply.text ? reply.text.match(/[^ ]+ */g) ?? [reply.text] : []);
      for (const d of deltas) chunk({ content: d });
      calls.forEach((c, i) => {
        chunk({ tool_calls: [{ index: i, id: c.id, type: "function", function: { name: c.name, arguments: "" } }] });
        const half = Math.ceil(c.arguments.length / 2);
        for (const piece of [c.arguments.slice(0, half), c.arguments.slice(half)]) {
          if (piece) chunk({ tool_calls: [{ index: i, function: { arguments: piece } }] });
        }
      });
      chunk({}, finish);
      const opts = body.stream_options as { include_usage?: boolean } | undefined;
      if (opts?.include_usage) res.write(`data: ${JSON.stringify({ id, object: "chat.completion.chunk", created, model, choices: [], usage })}\n\n`);
      res.end("data: [DONE]\n\n");
    })().catch((err: unknown) => {
      if (!res.headersSent) send(res, 500, { error: { message: String(err), type: "server_error" } });
      else res.destroy();
    });
  });

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  const addr = server.address();
  const port = typeof addr === "object" && addr ? addr.port : 0;
  return {
    url: `http://127.0.0.1:${port}/v1`,
    requests,
    embeddings,
    images,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
