/**
 * Errors as `application/problem+json` (RFC 9457) and the zod request validator.
 *
 * Every error answer has the shape {@link Problem}. Validation failures of params,
 * query and body list every issue in `errors`, each path naming the request part
 * (`body.definition.nodes[2].type`). Errors with a status below 500 (and the
 * deliberate 503s of Baton errors, which say "retry later") keep their code and
 * message; anything else becomes a 500 with a generic detail and is logged.
 */
import { STATUS_CODES } from "node:http";
import type { Socket } from "node:net";
import type { FastifyError, FastifyReply, FastifyRequest, FastifySchemaCompiler } from "fastify";
import { z } from "zod";
import type { $ZodIssue, $ZodType } from "zod/v4/core";
import { hasCode } from "@baton/errors";
import { HeadersTooLarge, Internal, MalformedRequest, MethodNotAllowed, RequestInvalid, RequestTimeout, RouteNotFound } from "./errors.ts";

export const PROBLEM_CONTENT_TYPE = "application/problem+json";
const GATEWAY_PREFIX = "BATON_GATEWAY_";
const UNAVAILABLE_DETAIL = "a service Baton depends on is unavailable; retry later";

/** One validation problem. */
export const issueSchema = z
  .object({
    path: z.string().describe("Where the problem is, naming the request part: `body.definition.nodes[2].type`"),
    code: z.string().describe("Machine-readable kind of problem, e.g. `invalid_type`, `unknown_node_type`"),
    message: z.string(),
  })
  .meta({ id: "ValidationIssue" });
export type Issue = z.infer<typeof issueSchema>;

/** A pending review named by a problem, with where to send its decision. */
export const pendingReviewRefSchema = z
  .object({
    reviewId: z.number().int(),
    executionId: z.number().int().describe("The (sub-run) execution the review belongs to"),
    nodeId: z.string().describe("Its review node: the `nodeId` of that execution's resume"),
    resume: z.string().describe("Where the decision goes: `/api/agent-workflow-executions/{executionId}/resume`"),
  })
  .meta({ id: "PendingReviewRef" });
export type PendingReviewRef = z.infer<typeof pendingReviewRefSchema>;

export const problemSchema = z
  .object({
    type: z.string().describe("URI reference identifying the kind of problem"),
    title: z.string().describe("HTTP status text"),
    status: z.number().int(),
    detail: z.string().describe("Human-readable explanation; never a stack trace"),
    code: z.string().describe("Stable error code, e.g. BATON_GATEWAY_NOT_FOUND"),
    errors: z.array(issueSchema).optional().describe("Every validation problem, when the request was invalid"),
    pendingReviews: z.array(pendingReviewRefSchema).optional()
      .describe("BATON_GATEWAY_REVIEW_IN_SUBRUN: the reviews the run waits on in its sub-runs, newest first; each is decided by its own execution's resume"),
  })
  .meta({ id: "Problem", description: "An error, as application/problem+json (RFC 9457)" });
export type Problem = z.infer<typeof problemSchema>;

/** `definition.nodes[2].type` from `["definition", "nodes", 2, "type"]`. */
export function formatPath(prefix: string, path: readonly PropertyKey[]): string {
  let out = prefix;
  for (const p of path) {
    if (typeof p === "number") out += `[${p}]`;
    else if (typeof p === "string" && /^[A-Za-z_$][\w$-]*$/.test(p)) out += out === "" ? p : `.${p}`;
    else out += `[${JSON.stringify(String(p))}]`;
  }
  return out;
}

/**
 * zod's `.int()` bounds a number to the safe integers (±2^53−1) on top of the field's own
 * `.min()`/`.max()`: a number past both gets two issues, the first naming a bound the field
 * does not have. That one is dropped when the field's own bound is reported too.
 */
function safeIntegerBoundBesideOwn(issue: $ZodIssue, all: readonly $ZodIssue[]): boolean {
  if ((issue.code !== "too_big" && issue.code !== "too_small") || issue.origin !== "int") return false;
  const bound = issue.code === "too_big" ? issue.maximum : issue.minimum;
  if (Math.abs(Number(bound)) !== Number.MAX_SAFE_INTEGER) return false;
  const at = JSON.stringify(issue.path);
  return all.some((o) => o !== issue && o.code === issue.code && JSON.stringify(o.path) === at);
}

/** Zod issues → the problem's `errors`; each unknown key becomes its own issue. */
export function zodIssuesToProblems(prefix: string, issues: readonly $ZodIssue[]): Issue[] {
  const out: Issue[] = [];
  for (const issue of issues) {
    if (safeIntegerBoundBesideOwn(issue, issues)) continue;
    if (issue.code === "unrecognized_keys") {
      for (const key of issue.keys) {
        const what = prefix === "query" && issue.path.length === 0 ? "query parameter" : "property";
        out.push({ path: formatPath(prefix, [...issue.path, key]), code: "unrecognized_key", message: `unknown ${what} "${key}"` });
      }
      continue;
    }
    out.push({ path: formatPath(prefix, issue.path), code: issue.code, message: issue.message });
  }
  return out;
}

const PART_NAMES: Record<string, string> = { body: "body", querystring: "query", params: "params", headers: "headers" };

/**
 * A query parameter given more than once (`?limit=1&limit=2`) reaches the schema as an array,
 * which zod reports as the wrong type ("expected string, received array"): said as what it is.
 */
function repeatedParameter(issue: Issue, query: unknown): Issue | undefined {
  const name = issue.path.startsWith("query.") ? issue.path.slice("query.".length) : undefined;
  if (name === undefined || typeof query !== "object" || query === null || !Object.hasOwn(query, name)) return undefined;
  const value: unknown = (query as Record<string, unknown>)[name];
  if (!Array.isArray(value)) return undefined;
  return { path: issue.path, code: "repeated_parameter", message: `given ${value.length} times; give it once` };
}

/**
 * Validator compiler for zod schemas. Unlike the type provider's own, it keeps
 * array indices apart from keys and names the request part in every path.
 */
export const validatorCompiler: FastifySchemaCompiler<$ZodType> = ({ schema, httpPart }) => {
  const part = PART_NAMES[httpPart ?? "body"] ?? String(httpPart);
  return (data: unknown) => {
    const result = z.safeParse(schema, data);
    if (result.success) return { value: result.data };
    let errors = zodIssuesToProblems(part, result.error.issues);
    if (httpPart === "querystring") errors = errors.map((e) => repeatedParameter(e, data) ?? e);
    return { error: RequestInvalid(part, errors.length, { details: errors }) };
  };
};

function isIssueList(v: unknown): v is Issue[] {
  return Array.isArray(v) && v.every((i) => typeof i === "object" && i !== null && typeof (i as Issue).path === "string");
}

/** The details of a BATON_GATEWAY_REVIEW_IN_SUBRUN error. */
function pendingReviewsOf(v: unknown): PendingReviewRef[] | undefined {
  if (typeof v !== "object" || v === null || !("pendingReviews" in v)) return undefined;
  const list = v.pendingReviews;
  return Array.isArray(list) ? (list as PendingReviewRef[]) : undefined;
}

function problem(status: number, code: string, detail: string, errors?: Issue[], pendingReviews?: PendingReviewRef[]): Problem {
  return {
    type: `urn:baton:error:${code}`,
    title: STATUS_CODES[status] ?? "Error",
    status,
    detail,
    code,
    ...(errors === undefined ? {} : { errors }),
    ...(pendingReviews === undefined ? {} : { pendingReviews }),
  };
}

/** Maps any thrown value to the problem the client sees. `internal` tells the caller to log it. */
export function toProblem(err: unknown): { problem: Problem; internal: boolean; retryAfterMs?: number } {
  if (hasCode(err) && (err.status < 500 || err.status === 503)) {
    const errors = isIssueList(err.details) ? err.details : undefined;
    // Another library's "unavailable" may name hosts or drivers: keep its code, not its text.
    const detail = err.status === 503 && !err.code.startsWith(GATEWAY_PREFIX) ? UNAVAILABLE_DETAIL : err.message;
    const out: { problem: Problem; internal: boolean; retryAfterMs?: number } = {
      problem: problem(err.status, err.code, detail, errors, pendingReviewsOf(err.details)),
      internal: false,
    };
    if (err.retryDelayMs !== undefined) out.retryAfterMs = err.retryDelayMs;
    return out;
  }
  // Fastify's own client errors: unparsable JSON, wrong content type, body too large, …
  const fe = err as Partial<FastifyError> | null;
  if (fe && typeof fe === "object" && typeof fe.statusCode === "number" && fe.statusCode >= 400 && fe.statusCode < 500) {
    const code = typeof fe.code === "string" && fe.code !== "" ? fe.code : "BATON_GATEWAY_BAD_REQUEST";
    return { problem: problem(fe.statusCode, code, typeof fe.message === "string" ? fe.message : "bad request"), internal: false };
  }
  const e = Internal();
  return { problem: problem(e.status, e.code, e.message), internal: true };
}

export function sendProblem(reply: FastifyReply, p: Problem, retryAfterMs?: number): FastifyReply {
  reply.code(p.status).type(PROBLEM_CONTENT_TYPE);
  if (p.status === 401) reply.header("www-authenticate", 'Bearer realm="baton"');
  if (retryAfterMs !== undefined) reply.header("retry-after", String(Math.max(1, Math.ceil(retryAfterMs / 1000))));
  // Sent as a string so a route's response schema never re-serializes (or rejects) it.
  return reply.send(JSON.stringify(p));
}

/** The largest request body (fastify's `bodyLimit`): workflow definitions can be big graphs. */
export const MAX_BODY_BYTES = 4 * 1024 * 1024;

/** fastify's 415 and 413 say only "Unsupported Media Type" and "Request body is too large": what the gateway takes instead. */
const FRAMEWORK_DETAILS: Readonly<Record<string, string>> = {
  FST_ERR_CTP_INVALID_MEDIA_TYPE: "the body must be JSON, sent with content-type application/json",
  FST_ERR_CTP_BODY_TOO_LARGE: `the body is larger than ${MAX_BODY_BYTES / (1024 * 1024)} MiB (${MAX_BODY_BYTES} bytes), the most the gateway takes`,
};

export function errorHandler(err: unknown, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  const { problem: p, internal, retryAfterMs } = toProblem(err);
  const detail = Object.hasOwn(FRAMEWORK_DETAILS, p.code) ? FRAMEWORK_DETAILS[p.code] : undefined;
  if (detail !== undefined) p.detail = detail;
  if (internal) request.log.error({ err }, "request failed");
  else if (p.status >= 500) request.log.warn({ err, code: p.code }, p.detail);
  return sendProblem(reply, p, retryAfterMs);
}

/** The longest path parameter the router hands to a route (fastify's `maxParamLength`). */
export const MAX_PARAM_LENGTH = 1024;

/**
 * The router's own refusals (fastify's `frameworkErrors`): a path that does not decode, or a
 * parameter past MAX_PARAM_LENGTH, as problem+json, with a detail that does not echo the path.
 */
export function frameworkError(err: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  if (err.code === "FST_ERR_MAX_PARAM_LENGTH") sendProblem(reply, problem(414, err.code, `a path parameter is longer than ${MAX_PARAM_LENGTH} characters`));
  else errorHandler(err, request, reply);
}

/**
 * Requests Node's HTTP parser refuses before fastify sees them (fastify's `clientErrorHandler`):
 * a malformed request line or header, headers past the size limit, a request not received in
 * time. fastify's default answers these as `application/json` of another shape, with no code.
 */
export function clientErrorHandler(err: Error & { code?: string }, socket: Socket): void {
  if (err.code === "ECONNRESET" || socket.destroyed) return;
  const e = err.code === "ERR_HTTP_REQUEST_TIMEOUT" ? RequestTimeout() : err.code === "HPE_HEADER_OVERFLOW" ? HeadersTooLarge() : MalformedRequest();
  const body = JSON.stringify(problem(e.status, e.code, e.message));
  if (socket.writable) {
    socket.write(
      `HTTP/1.1 ${e.status} ${STATUS_CODES[e.status] ?? "Error"}\r\nContent-Type: ${PROBLEM_CONTENT_TYPE}\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy(err);
}

/** A route's URL pattern (`/api/agent-workflows/:id`, `/docs/*`) as a regular expression over paths. */
export function routePattern(url: string): RegExp {
  const source = url
    .split(/(:[A-Za-z0-9_]+|\*)/)
    .map((part) => (part === "*" ? ".*" : part.startsWith(":") ? "[^/]*" : part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")))
    .join("");
  return new RegExp(`^${source}$`);
}

/**
 * The answer when no route matches: 405 with `Allow` when the path names a route of other
 * methods (`routes`: every route's method and pattern), else 404.
 */
export function notFoundHandler(routes: readonly { method: string; pattern: RegExp }[] = []) {
  return (request: FastifyRequest, reply: FastifyReply): FastifyReply => {
    const path = request.url.split("?")[0] ?? request.url;
    const allowed = [...new Set(routes.filter((r) => r.pattern.test(path)).map((r) => r.method))].sort();
    if (allowed.length > 0) {
      const e = MethodNotAllowed(request.method, path, allowed.join(", "));
      reply.header("allow", allowed.join(", "));
      return sendProblem(reply, problem(e.status, e.code, e.message));
    }
    const e = RouteNotFound(request.method, path);
    return sendProblem(reply, problem(e.status, e.code, e.message));
  };
}
