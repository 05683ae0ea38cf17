/**
 * HTTP tools declared without code: a JSON declaration (name, method, URL with `{param}`
 * placeholders, query fields, body) becomes a ToolSpec that calls the endpoint through the
 * guarded HTTP client.
 */
import { formatIssues, ToolInvalidInput, type JsonSchema, type JsonValue, type ToolSpec } from "@baton/sdk";
import { z } from "zod";
import { encodeBody, responseOutput } from "./builtin.ts";
import { HttpToolDeclarationInvalid } from "./errors.ts";
import { createHttpClient } from "./http-client.ts";
import type { HttpPolicy } from "./policy.ts";
import { readPath, textOf } from "./template.ts";

const TOOL_NAME = /^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/;
const PLACEHOLDER = /\{([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*)\}/g;
/** The methods an HTTP tool may use. */
export const HTTP_TOOL_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"] as const;

function placeholders(text: string): string[] {
  return [...text.matchAll(PLACEHOLDER)].map((m) => m[1]!);
}

const jsonSchemaObject = z.record(z.string(), z.json());

/** The JSON declaration of an HTTP tool. */
export const httpToolDeclarationSchema = z
  .object({
    /** Dot-separated words, e.g. `weather.current`. */
    name: z.string().max(200).regex(TOOL_NAME, "tool names are dot-separated words (letters, digits, _ and -)"),
    description: z.string().min(1, "a description is required").max(10_000),
    method: z.preprocess((v) => (typeof v === "string" ? v.toUpperCase() : v), z.enum(HTTP_TOOL_METHODS)),
    /** Absolute http(s) URL; `{param}` placeholders (path and query only) are filled from the input, URL-encoded. */
    url: z.string().min(1),
    /** Header values may hold `{param}` placeholders. */
    headers: z.record(z.string(), z.string()).optional(),
    /** Input fields sent as query parameters (skipped when absent; arrays repeat the parameter). */
    query: z.array(z.string().min(1)).optional(),
    /**
     * `"input"`: the input as JSON, without the fields used by URL placeholders and `query`;
     * or a JSON template whose strings' `{param}` placeholders are filled (a string that is exactly
     * `"{param}"` takes the value with its type). Absent: no body.
     */
    body: z.union([z.literal("input"), z.json()]).optional(),
    /** JSON Schema of the input (an object schema). */
    inputSchema: jsonSchemaObject.refine((s) => s.type === undefined || s.type === "object", "inputSchema must describe an object (type: \"object\")"),
    /** JSON Schema of the output (of the body, or of {status, headers, body} with `output: "response"`). */
    outputSchema: jsonSchemaObject.optional(),
    /** `"body"` (default): the tool returns the response body; `"response"`: {status, headers, body}. */
    output: z.enum(["body", "response"]).optional(),
    responseType: z.enum(["json", "text"]).optional(),
    timeoutMs: z.int().min(1).max(120_000).optional(),
    retry: z
      .object({
        maxAttempts: z.int().min(1).max(20).optional(),
        initialDelayMs: z.int().min(0).optional(),
        backoffMultiplier: z.number().min(1).optional(),
        maxDelayMs: z.int().min(0).optional(),
      })
      .strict()
      .optional(),
    tenants: z.array(z.string().min(1)).optional(),
  })
  .strict()
  .superRefine((d, ctx) => {
    let url: URL | undefined;
    try {
      url = new URL(d.url.replace(PLACEHOLDER, "x"));
    } catch {
      ctx.addIssue({ code: "custom", path: ["url"], message: "url must be an absolute http or https URL" });
    }
    if (url) {
      if (url.protocol !== "http:" && url.protocol !== "https:") ctx.addIssue({ code: "custom", path: ["url"], message: "url must use http or https" });
      const origin = /^[^:]*:\/\/[^/?#]*/.exec(d.url)?.[0] ?? d.url;
      if (origin.includes("{")) {
        ctx.addIssue({ code: "custom", path: ["url"], message: "placeholders are allowed in the path and query only, not in the scheme or host" });
      }
    }
    const props = d.inputSchema.properties;
    const known = props && typeof props === "object" && !Array.isArray(props) ? new Set(Object.keys(props)) : undefined;
    if (known) {
      for (const p of placeholders(d.url)) {
        const top = p.split(".")[0]!;
        if (!known.has(top)) ctx.addIssue({ code: "custom", path: ["url"], message: `placeholder {${p}} is not a property of inputSchema` });
      }
      (d.query ?? []).forEach((q, i) => {
        if (!known.has(q)) ctx.addIssue({ code: "custom", path: ["query", i], message: `"${q}" is not a property of inputSchema` });
      });
    }
  });

export type HttpToolDeclaration = z.input<typeof httpToolDeclarationSchema>;
type ParsedDeclaration = z.output<typeof httpToolDeclarationSchema>;

/** Validates a declaration; throws `BATON_TOOL_HTTP_DECLARATION_INVALID` whose `details` lists `path: message` for every problem. */
export function parseHttpToolDeclaration(decl: unknown): ParsedDeclaration {
  const r = httpToolDeclarationSchema.safeParse(decl);
  if (r.success) return r.data;
  const problems = formatIssues(r.error.issues).split("; ");
  throw HttpToolDeclarationInvalid(problems, { details: problems });
}

function fill(text: string, input: unknown, tool: string, encode: (s: string) => string): string {
  return text.replace(PLACEHOLDER, (_, name: string) => {
    const v = readPath(input, name);
    if (v === undefined || v === null) throw ToolInvalidInput(tool, `{${name}} has no value in the input`);
    return encode(textOf(v));
  });
}

function fillBody(template: JsonValue, input: unknown, tool: string): JsonValue {
  if (typeof template === "string") {
    const whole = /^\{([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*)\}$/.exec(template);
    if (whole) {
      const v = readPath(input, whole[1]!);
      return v === undefined ? null : (v as JsonValue);
    }
    return fill(template, input, tool, (s) => s);
  }
  if (Array.isArray(template)) return template.map((t) => fillBody(t, input, tool));
  if (template !== null && typeof template === "object") {
    return Object.fromEntries(Object.entries(template).map(([k, v]) => [k, fillBody(v, input, tool)]));
  }
  return template;
}

/** Builds the ToolSpec of a declared HTTP tool. The declaration is validated first (see {@link parseHttpToolDeclaration}). */
export function httpTool(declaration: HttpToolDeclaration, policy: HttpPolicy = {}): ToolSpec {
  const d = parseHttpToolDeclaration(declaration);
  const client = createHttpClient(policy);
  const urlFields = new Set(placeholders(d.url).map((p) => p.split(".")[0]!));
  const queryFields = d.query ?? [];
  const mode = d.output ?? "body";
  let outputJsonSchema: JsonSchema | undefined = d.outputSchema;
  if (d.outputSchema && mode === "response") {
    outputJsonSchema = {
      type: "object",
      properties: { status: { type: "integer" }, headers: { type: "object" }, body: d.outputSchema },
      required: ["status", "headers", "body"],
    };
  }
  const timeoutMs = d.timeoutMs ?? client.policy.defaultTimeoutMs;
  return {
    name: d.name,
    description: d.description,
    inputJsonSchema: d.inputSchema,
    ...(outputJsonSchema ? { outputJsonSchema } : {}),
    timeoutMs: timeoutMs + 5_000,
    ...(d.retry ? { retry: d.retry } : {}),
    ...(d.tenants ? { tenants: d.tenants } : {}),
    async handler(raw, ctx) {
      const input: Record<string, unknown> = raw !== null && typeof raw === "object" && !Array.isArray(raw) ? (raw as Record<string, unknown>) : {};
      const url = new URL(fill(d.url, input, d.name, encodeURIComponent));
      for (const q of queryFields) {
        const v = input[q];
        if (v === undefined || v === null) continue;
        for (const one of Array.isArray(v) ? v : [v]) url.searchParams.append(q, textOf(one));
      }
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(d.headers ?? {})) headers[k] = fill(v, input, d.name, (s) => s.replace(/[\r\n]/g, " "));
      let bodyValue: JsonValue | undefined;
      if (d.body === "input") {
        bodyValue = Object.fromEntries(Object.entries(input).filter(([k]) => !urlFields.has(k) && !queryFields.includes(k))) as JsonValue;
      } else if (d.body !== undefined) {
        bodyValue = fillBody(d.body, input, d.name);
      }
      const body = encodeBody(bodyValue, headers);
      const res = await client.request(
        { method: d.method, url, headers, ...(body === undefined ? {} : { body }), timeoutMs, signal: ctx.signal },
        d.name,
      );
      const out = responseOutput(res, d.method, d.responseType);
      return mode === "body" ? out.body : out;
    },
  };
}
