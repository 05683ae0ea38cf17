/** Tools every Baton installation has: `http.request`, `json.transform`, `text.template`, `sleep`. */
import { defineTool, ToolInvalidInput, type JsonValue, type ToolSpec } from "@baton/sdk";
import jsonata from "jsonata";
import { z } from "zod";
import { HttpInvalidJson, HttpStatusError } from "./errors.ts";
import { abortError, createHttpClient, type GuardedHttpClient, type GuardedResponse } from "./http-client.ts";
import type { HttpPolicy } from "./policy.ts";
import { renderTemplate } from "./template.ts";

/** Options of {@link builtinTools}. */
export interface BuiltinToolsOptions {
  /** Where `http.request` may go. @default {} (public hosts only) */
  http?: HttpPolicy;
}

const METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"] as const;
const BODY_EXCERPT = 4096;

export const httpResponseSchema = z.object({
  status: z.int(),
  headers: z.record(z.string(), z.string()),
  body: z.json(),
});
export type HttpResponseOutput = z.infer<typeof httpResponseSchema>;

function retryAfterMs(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const seconds = Number(value);
  if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000);
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - Date.now());
}

/**
 * Turns a response into the tool output `{status, headers, body}`. A status >= 400 throws
 * `BATON_TOOL_HTTP_STATUS` (retryable for 5xx, 408 and 429) unless `failOnStatus` is false.
 */
export function responseOutput(
  res: GuardedResponse,
  method: string,
  responseType: "json" | "text" | undefined,
  failOnStatus = true,
): HttpResponseOutput {
  const text = res.body.toString("utf8");
  let body: JsonValue = text;
  const isJson = /\bjson\b/i.test(res.headers["content-type"] ?? "");
  if (responseType === "json" || (responseType === undefined && isJson)) {
    try {
      body = text.trim() === "" ? null : (JSON.parse(text) as JsonValue);
    } catch (err) {
      if (responseType === "json" && (res.status < 400 || !failOnStatus)) throw HttpInvalidJson(res.url, (err as Error).message, { cause: err });
    }
  }
  if (failOnStatus && res.status >= 400) {
    const retryable = res.status >= 500 || res.status === 408 || res.status === 429;
    const delay = retryable ? retryAfterMs(res.headers["retry-after"]) : undefined;
    throw HttpStatusError(method, res.url, res.status, {
      retryable,
      ...(delay === undefined ? {} : { retryDelayMs: delay }),
      details: { status: res.status, headers: res.headers, body: text.length > BODY_EXCERPT ? text.slice(0, BODY_EXCERPT) + "…" : text },
    });
  }
  return { status: res.status, headers: res.headers, body };
}

/** Encodes a JSON body: strings are sent as they are, anything else as JSON. */
export function encodeBody(body: JsonValue | undefined, headers: Record<string, string>): string | undefined {
  if (body === undefined) return undefined;
  if (typeof body === "string") return body;
  if (!Object.keys(headers).some((k) => k.toLowerCase() === "content-type")) headers["content-type"] = "application/json";
  return JSON.stringify(body);
}

export const httpRequestInput = z.object({
  method: z.preprocess((v) => (typeof v === "string" ? v.toUpperCase() : v), z.enum(METHODS)),
  url: z.url({ protocol: /^https?$/, error: "url must be an absolute http or https URL" }),
  headers: z.record(z.string(), z.string()).optional(),
  body: z.json().optional(),
  timeoutMs: z.int().min(1).max(120_000).optional(),
  responseType: z.enum(["json", "text"]).optional(),
  /** @default true: a status >= 400 fails the call (5xx, 408, 429 retryable). */
  failOnStatus: z.boolean().optional(),
});

function httpRequestTool(client: GuardedHttpClient): ToolSpec {
  return defineTool({
    name: "http.request",
    description:
      "Sends an HTTP request to an allowed host and returns {status, headers, body}. A JSON body (or `responseType: \"json\"`) is parsed; " +
      "a status >= 400 fails the call unless `failOnStatus` is false.",
    input: httpRequestInput,
    output: httpResponseSchema,
    timeoutMs: client.policy.maxTimeoutMs + 5_000,
    async handler(input, ctx) {
      const headers = { ...input.headers };
      const body = encodeBody(input.body, headers);
      const res = await client.request({
        method: input.method,
        url: input.url,
        headers,
        ...(body === undefined ? {} : { body }),
        ...(input.timeoutMs === undefined ? {} : { timeoutMs: input.timeoutMs }),
        signal: ctx.signal,
      });
      return responseOutput(res, input.method, input.responseType, input.failOnStatus ?? true);
    },
  });
}

interface JsonataError {
  code?: string;
  position?: number;
  token?: string;
  message?: string;
}

/** Runs a JSONata expression; a bad expression or an evaluation error is `BATON_TOOL_INVALID_INPUT` with its position. */
export async function evaluateJsonata(tool: string, expression: string, data: unknown, signal: AbortSignal, timeoutMs = 5_000): Promise<JsonValue> {
  const invalid = (err: unknown): Error => {
    const e = err as JsonataError;
    const where = typeof e.position === "number" ? ` at position ${e.position}` : "";
    const token = e.token === undefined ? "" : ` (near "${e.token}")`;
    return ToolInvalidInput(tool, `JSONata ${e.code ?? "error"}${where}${token}: ${e.message ?? String(err)}`, {
      cause: err,
      details: { code: e.code, position: e.position, token: e.token },
    });
  };
  let expr: jsonata.Expression;
  try {
    expr = jsonata(expression, { timeout: timeoutMs, stack: 500 });
  } catch (err) {
    throw invalid(err);
  }
  if (signal.aborted) throw abortError(signal, tool);
  let onAbort: (() => void) | undefined;
  const aborted = new Promise<never>((_, reject) => {
    onAbort = () => reject(abortError(signal, tool));
    signal.addEventListener("abort", onAbort, { once: true });
  });
  try {
    const result: unknown = await Promise.race([expr.evaluate(data), aborted]);
    // JSONata sequences and functions are not JSON; a round trip keeps only data (undefined -> null).
    return result === undefined ? null : (JSON.parse(JSON.stringify(result) ?? "null") as JsonValue);
  } catch (err) {
    if (signal.aborted) throw abortError(signal, tool);
    throw invalid(err);
  } finally {
    if (onAbort) signal.removeEventListener("abort", onAbort);
  }
}

const jsonTransform = defineTool({
  name: "json.transform",
  description: "Evaluates a JSONata `expression` over `data` and returns {result}.",
  input: z.object({ data: z.json(), expression: z.string().min(1) }),
  output: z.object({ result: z.json() }),
  timeoutMs: 10_000,
  async handler(input, ctx) {
    return { result: await evaluateJsonata("json.transform", input.expression, input.data, ctx.signal) };
  },
});

const textTemplate = defineTool({
  name: "text.template",
  description: "Fills {{name}} / {{a.b}} placeholders of `template` from `values` (objects as JSON, missing as empty) and returns {text}.",
  input: z.object({ template: z.string(), values: z.record(z.string(), z.json()).default({}) }),
  output: z.object({ text: z.string() }),
  timeoutMs: 5_000,
  async handler(input) {
    return { text: renderTemplate(input.template, input.values) };
  },
});

const MAX_SLEEP_MS = 10 * 60_000;

const sleep = defineTool({
  name: "sleep",
  description: "Waits `ms` milliseconds (at most 10 minutes; cancellable) and returns {slept}.",
  input: z.object({ ms: z.int().min(0).max(MAX_SLEEP_MS) }),
  output: z.object({ slept: z.int() }),
  timeoutMs: MAX_SLEEP_MS + 5_000,
  async handler(input, ctx) {
    await new Promise<void>((resolve, reject) => {
      if (ctx.signal.aborted) return reject(abortError(ctx.signal, "sleep"));
      const onAbort = (): void => {
        clearTimeout(timer);
        reject(abortError(ctx.signal, "sleep"));
      };
      const timer = setTimeout(() => {
        ctx.signal.removeEventListener("abort", onAbort);
        resolve();
      }, input.ms);
      ctx.signal.addEventListener("abort", onAbort, { once: true });
    });
    return { slept: input.ms };
  },
});

/**
 * The built-in tools: `http.request` (guarded by the HTTP policy), `json.transform`,
 * `text.template` and `sleep`. Accepts `{ http: policy }` or, for convenience, the policy itself
 * (`builtinTools(policyFromEnv(process.env))`).
 */
export function builtinTools(options: BuiltinToolsOptions | HttpPolicy = {}): ToolSpec[] {
  const policy = "http" in options ? (options.http ?? {}) : (options as HttpPolicy);
  return [httpRequestTool(createHttpClient(policy)), jsonTransform, textTemplate, sleep];
}
