/**
 * One LLM call: `generateText` (or `streamText` when tokens are wanted) with a time limit
 * over all attempts, retries with exponential backoff on 429 / 5xx / unreachable provider,
 * and every failure turned into a BATON_LLM_* error.
 */
import { APICallError, generateText, jsonSchema, Output, stepCountIs, streamText, tool } from "ai";
import type { LanguageModel, ToolChoice, ToolSet } from "ai";
import { jsonSchemaCheck } from "@baton/engine";
import { hasCode } from "@baton/errors";
import type { BatonError } from "@baton/errors";
import type { LlmConfig } from "./config.ts";
import {
  LlmAuthFailed,
  LlmBadRequest,
  LlmFailed,
  LlmInvalidResponse,
  LlmModelNotConfigured,
  LlmRateLimited,
  LlmTimeout,
  LlmUnavailable,
} from "./errors.ts";
import { chatRequestSchema, toModelMessages, toolNameMap } from "./messages.ts";
import type { ChatRequest, ChatResult, LlmUsage, ToolCall } from "./messages.ts";
import type { ResolvedModel } from "./registry.ts";

export interface ChatOptions {
  /** Cancels the call (execution cancelled, tool timeout); the signal's reason is thrown. */
  signal?: AbortSignal;
  /**
   * Called with each text delta, in order (`index` 0, 1, 2, …); the call then streams.
   * A call that has emitted tokens is not retried (the tokens cannot be taken back).
   */
  onToken?: (delta: string, index: number) => void | Promise<void>;
}

export interface ChatDeps {
  config: LlmConfig;
  resolve(ref?: string): ResolvedModel;
  languageModel(resolved: ResolvedModel): LanguageModel;
}

/** Codes `chat` retries itself. */
const RETRIED = new Set(["BATON_LLM_RATE_LIMITED", "BATON_LLM_UNAVAILABLE"]);

function retryAfterMs(headers: Record<string, string> | undefined): number | undefined {
  if (!headers) return undefined;
  const ms = Number(headers["retry-after-ms"]);
  if (Number.isFinite(ms) && ms >= 0) return ms;
  const raw = headers["retry-after"];
  if (raw === undefined) return undefined;
  const s = Number(raw);
  if (Number.isFinite(s) && s >= 0) return s * 1000;
  const at = Date.parse(raw);
  return Number.isNaN(at) ? undefined : Math.max(0, at - Date.now());
}

function bodyDetail(err: APICallError): string {
  const body = err.responseBody?.slice(0, 300);
  return `HTTP ${err.statusCode}${body ? `: ${body}` : ""}`;
}

const NETWORK_CODES = /^(ECONNREFUSED|ECONNRESET|ENOTFOUND|EAI_AGAIN|ETIMEDOUT|EPIPE|EHOSTUNREACH|ENETUNREACH|UND_ERR_\w+)$/;

/**
 * fetch failures (`TypeError: fetch failed` with a socket error as cause). Checked by name
 * and code, not `instanceof`: the error may come from another realm (jest's VM context).
 */
function isNetworkError(err: unknown): boolean {
  let e: unknown = err;
  for (let i = 0; i < 4 && e && typeof e === "object"; i++) {
    const o = e as { name?: unknown; message?: unknown; code?: unknown; cause?: unknown };
    if (typeof o.code === "string" && NETWORK_CODES.test(o.code)) return true;
    if (o.name === "TypeError" && typeof o.message === "string" && /fetch failed/i.test(o.message)) return true;
    e = o.cause;
  }
  return false;
}

/** Any failure of an attempt as a Baton error. */
export function toLlmError(err: unknown, model: string): BatonError {
  if (hasCode(err)) return err;
  const cause = { cause: err };
  let e: unknown = err;
  // RetryError / wrapped errors: the provider's own error is what tells.
  for (let i = 0; i < 5 && e && typeof e === "object" && !APICallError.isInstance(e); i++) {
    const o = e as { lastError?: unknown; cause?: unknown };
    e = o.lastError ?? o.cause;
  }
  if (APICallError.isInstance(e)) {
    const status = e.statusCode;
    if (status === 429) {
      const delay = retryAfterMs(e.responseHeaders);
      return LlmRateLimited(model, bodyDetail(e), { ...cause, ...(delay !== undefined ? { retryDelayMs: delay } : {}) });
    }
    if (status === undefined) return LlmUnavailable(model, e.message, cause);
    if (status >= 500 || status === 408) return LlmUnavailable(model, bodyDetail(e), cause);
    if (status === 401 || status === 403) return LlmAuthFailed(model, bodyDetail(e), cause);
    return LlmBadRequest(model, bodyDetail(e), cause);
  }
  const o = typeof err === "object" && err !== null ? (err as { name?: unknown; message?: unknown }) : {};
  const name = typeof o.name === "string" ? o.name : "";
  const message = typeof o.message === "string" ? o.message : String(err);
  if (/NoSuchModel|NoSuchProvider/.test(name)) return LlmModelNotConfigured(message, cause);
  if (/InvalidPrompt|InvalidArgument|InvalidMessageRole|MessageConversion|UnsupportedFunctionality|InvalidToolInput|NoSuchTool/.test(name)) {
    return LlmBadRequest(model, message, cause);
  }
  if (/NoObjectGenerated|NoOutputGenerated|JSONParse|TypeValidation|InvalidResponseData|EmptyResponseBody/.test(name)) {
    // The reason is at the end of the cause chain (e.g. which field broke responseFormat.schema).
    let root: unknown = err;
    while (typeof root === "object" && root !== null && (root as { cause?: unknown }).cause instanceof Error) root = (root as { cause: Error }).cause;
    const reason = root !== err && root instanceof Error ? ` (${root.message})` : "";
    return LlmInvalidResponse(model, message + reason, cause);
  }
  if (isNetworkError(err)) return LlmUnavailable(model, message, cause);
  return LlmFailed(model, message, cause);
}

function usageOf(u: { inputTokens: number | undefined; outputTokens: number | undefined; totalTokens?: number | undefined }): LlmUsage {
  const inputTokens = u.inputTokens ?? 0;
  const outputTokens = u.outputTokens ?? 0;
  return { inputTokens, outputTokens, totalTokens: u.totalTokens ?? inputTokens + outputTokens };
}

const FINISH_TO_OPENAI: Record<string, string> = {
  stop: "stop",
  length: "length",
  "tool-calls": "tool_calls",
  "content-filter": "content_filter",
};

interface Collected {
  text: string;
  toolCalls: { toolCallId: string; toolName: string; input: unknown }[];
  finishReason: ChatResult["finishReason"];
  usage: LlmUsage;
  output: unknown;
  body: unknown;
  response: { id: string; timestamp: Date; modelId: string };
}

/** A chat-completion object assembled from a streamed call (what the non-streamed call returns). */
function chatCompletionOf(c: Collected): Record<string, unknown> {
  return {
    id: c.response.id,
    object: "chat.completion",
    created: Math.floor(c.response.timestamp.getTime() / 1000),
    model: c.response.modelId,
    choices: [
      {
        index: 0,
        message: {
          role: "assistant",
          content: c.text === "" && c.toolCalls.length > 0 ? null : c.text,
          ...(c.toolCalls.length > 0
            ? { tool_calls: c.toolCalls.map((t) => ({ id: t.toolCallId, type: "function", function: { name: t.toolName, arguments: JSON.stringify(t.input ?? {}) } })) }
            : {}),
        },
        finish_reason: FINISH_TO_OPENAI[c.finishReason] ?? "stop",
      },
    ],
    usage: { prompt_tokens: c.usage.inputTokens, completion_tokens: c.usage.outputTokens, total_tokens: c.usage.totalTokens },
  };
}

/** Settles with `p`, or rejects with the signal's reason as soon as it aborts (a provider may ignore the signal). */
function abortable<T>(p: Promise<T>, signal: AbortSignal): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(signal.reason as Error);
    if (signal.aborted) onAbort();
    else signal.addEventListener("abort", onAbort, { once: true });
    p.then(
      (v) => (signal.removeEventListener("abort", onAbort), resolve(v)),
      (e: unknown) => (signal.removeEventListener("abort", onAbort), reject(e as Error)),
    );
  });
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason as Error);
    const t = setTimeout(() => (signal.removeEventListener("abort", onAbort), resolve()), ms);
    const onAbort = (): void => (clearTimeout(t), reject(signal.reason as Error));
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

/**
 * The check of a structured answer against `responseFormat.schema` (the AI SDK only parses
 * it). A schema that does not compile is the caller's error.
 */
function outputValidator(ref: string, schema: object): (value: unknown) => { success: true; value: unknown } | { success: false; error: Error } {
  let check: (value: unknown) => string | undefined;
  try {
    check = jsonSchemaCheck(schema, "answer");
  } catch (err) {
    throw LlmBadRequest(ref, `responseFormat.schema: not a valid JSON Schema: ${(err as Error).message}`);
  }
  return (value) => {
    const problem = check(value);
    return problem === undefined ? { success: true, value } : { success: false, error: new Error(`the answer does not match responseFormat.schema: ${problem}`) };
  };
}

/**
 * One LLM call. Validates the request (BATON_LLM_BAD_REQUEST naming each field),
 * resolves the model (BATON_LLM_MODEL_NOT_CONFIGURED), then calls it: streamed when
 * `opts.onToken` is given. See docs/llm.md.
 */
export async function runChat(deps: ChatDeps, request: ChatRequest, opts: ChatOptions = {}): Promise<ChatResult> {
  const parsed = chatRequestSchema.safeParse(request);
  const label = typeof (request as { model?: unknown } | undefined)?.model === "string" ? (request as { model: string }).model : "(default)";
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join(".") || "(request)"}: ${i.message}`);
    throw LlmBadRequest(label, problems.join("; "), { details: problems });
  }
  const req = parsed.data;
  const resolved = deps.resolve(req.model);
  const model = deps.languageModel(resolved);
  const ref = resolved.ref;

  const { map: names, problems: nameProblems } = toolNameMap((req.tools ?? []).map((t) => t.name));
  if (nameProblems.length > 0) throw LlmBadRequest(ref, nameProblems.join("; "));
  const tools: ToolSet | undefined = req.tools?.length
    ? Object.fromEntries(
        req.tools.map((t) => [names.toProvider(t.name), tool({ ...(t.description ? { description: t.description } : {}), inputSchema: jsonSchema(t.inputSchema as Parameters<typeof jsonSchema>[0]) })]),
      )
    : undefined;
  if (typeof req.toolChoice === "object" && !req.tools?.some((t) => t.name === (req.toolChoice as { name: string }).name)) {
    throw LlmBadRequest(ref, `toolChoice: names "${req.toolChoice.name}", which is not in tools`);
  }
  const toolChoice: ToolChoice<ToolSet> | undefined =
    req.toolChoice === undefined ? undefined : typeof req.toolChoice === "string" ? req.toolChoice : { type: "tool", toolName: names.toProvider(req.toolChoice.name) };
  const messages = toModelMessages(req.messages, names);
  const output = req.responseFormat
    ? Output.object({
        schema: jsonSchema(req.responseFormat.schema as Parameters<typeof jsonSchema>[0], { validate: outputValidator(ref, req.responseFormat.schema) }),
        ...(req.responseFormat.name ? { name: req.responseFormat.name } : {}),
        ...(req.responseFormat.description ? { description: req.responseFormat.description } : {}),
      })
    : undefined;

  const timeoutMs = req.timeoutMs ?? deps.config.timeoutMs;
  const maxRetries = req.maxRetries ?? deps.config.maxRetries;
  const deadline = new AbortController();
  const timer = setTimeout(() => deadline.abort(LlmTimeout(ref, timeoutMs)), timeoutMs);
  const signal = opts.signal ? AbortSignal.any([deadline.signal, opts.signal]) : deadline.signal;
  const started = Date.now();

  const common = {
    model,
    ...(req.system !== undefined ? { system: req.system } : {}),
    messages,
    allowSystemInMessages: true,
    ...(tools ? { tools } : {}),
    ...(toolChoice ? { toolChoice } : {}),
    ...(req.temperature !== undefined ? { temperature: req.temperature } : {}),
    ...(req.topP !== undefined ? { topP: req.topP } : {}),
    ...(req.maxTokens !== undefined ? { maxOutputTokens: req.maxTokens } : {}),
    ...(req.stopSequences ? { stopSequences: req.stopSequences } : {}),
    ...(req.seed !== undefined ? { seed: req.seed } : {}),
    ...(output ? { output } : {}),
    stopWhen: stepCountIs(1),
    maxRetries: 0,
    abortSignal: signal,
  };

  let emitted = 0;
  const generate = async (): Promise<Collected> => {
    // The provider's body is `raw` (the SDK drops it unless asked).
    const r = await generateText({ ...common, include: { responseBody: true } });
    let out: unknown;
    if (output) out = r.output;
    return {
      text: r.text,
      toolCalls: r.toolCalls,
      finishReason: r.finishReason,
      usage: usageOf(r.totalUsage),
      output: out,
      body: r.response.body,
      response: r.response,
    };
  };
  const stream = async (onToken: NonNullable<ChatOptions["onToken"]>): Promise<Collected> => {
    let failure: { error: unknown } | undefined;
    const r = streamText({ ...common, onError: () => undefined });
    for await (const part of r.fullStream) {
      if (signal.aborted) break;
      if (part.type === "text-delta" && part.text !== "") await onToken(part.text, emitted++);
      else if (part.type === "error") failure ??= { error: part.error };
    }
    if (signal.aborted) throw signal.reason;
    if (failure) throw failure.error;
    const [text, toolCalls, finishReason, usage, response] = await Promise.all([r.text, r.toolCalls, r.finishReason, r.totalUsage, r.response]);
    const out = output ? await r.output : undefined;
    return { text, toolCalls, finishReason, usage: usageOf(usage), output: out, body: undefined, response };
  };

  try {
    for (let attempt = 1; ; attempt++) {
      try {
        const c = await abortable(opts.onToken ? stream(opts.onToken) : generate(), signal);
        const toolCalls: ToolCall[] = c.toolCalls.map((t) => ({ id: t.toolCallId, name: names.fromProvider(t.toolName), args: (t.input ?? {}) as ToolCall["args"] }));
        const raw = c.body !== undefined && c.body !== null ? c.body : resolved.openAiChat ? chatCompletionOf(c) : undefined;
        return {
          model: ref,
          text: c.text,
          toolCalls,
          finishReason: c.finishReason,
          usage: c.usage,
          message: { role: "assistant", content: c.text === "" && toolCalls.length > 0 ? null : c.text, ...(toolCalls.length > 0 ? { toolCalls } : {}) },
          ...(output ? { object: c.output as ChatResult["object"] } : {}),
          ...(raw !== undefined ? { raw: raw as ChatResult["raw"] } : {}),
        };
      } catch (err) {
        if (deadline.signal.aborted) throw deadline.signal.reason as BatonError;
        if (opts.signal?.aborted) throw opts.signal.reason;
        const e = toLlmError(err, ref);
        if (!RETRIED.has(e.code) || attempt > maxRetries || emitted > 0) throw e;
        const backoff = Math.min(deps.config.retryMaxDelayMs, deps.config.retryBaseDelayMs * 2 ** (attempt - 1));
        const delay = Math.min(deps.config.retryMaxDelayMs, Math.max(backoff, e.retryDelayMs ?? 0));
        if (Date.now() - started + delay >= timeoutMs) throw e;
        try {
          await sleep(delay, signal);
        } catch {
          if (deadline.signal.aborted) throw deadline.signal.reason as BatonError;
          throw opts.signal?.reason;
        }
      }
    }
  } finally {
    clearTimeout(timer);
  }
}
