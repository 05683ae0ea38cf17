/**
 * The gateway's error catalogue. Codes are stable and never reused; clients and
 * tests check `code`. Every error the gateway answers with is rendered as
 * `application/problem+json` by the one error handler in problem.ts.
 */
import { defineError } from "@baton/errors";

/** A request part (params, query, body) failed its schema; `details` lists every issue. */
export const RequestInvalid = defineError(
  "BATON_GATEWAY_REQUEST_INVALID",
  (part: string, count: number) => `invalid request ${part}: ${count} problem${count === 1 ? "" : "s"}, listed in errors`,
  { status: 400 },
);

/** A workflow definition failed the engine's validation; `details` lists every issue. */
export const WorkflowDefinitionInvalid = defineError(
  "BATON_GATEWAY_WORKFLOW_INVALID",
  (count: number) => `invalid workflow definition: ${count} problem${count === 1 ? "" : "s"}, listed in errors`,
  { status: 400 },
);

/** An execution input failed the definition's `inputSchema`; `details` lists every issue. */
export const ExecutionInputInvalid = defineError(
  "BATON_GATEWAY_INPUT_INVALID",
  (count: number) => `execution input does not match the workflow's inputSchema: ${count} problem${count === 1 ? "" : "s"}, listed in errors`,
  { status: 400 },
);

/** An import source could not be turned into a workflow; `details` lists every issue (paths into `body.source`). */
export const ImportInvalid = defineError(
  "BATON_GATEWAY_IMPORT_INVALID",
  (format: string, count: number) => `cannot import this ${format} document: ${count} problem${count === 1 ? "" : "s"}, listed in errors`,
  { status: 400 },
);

/** Time-travel routes on a gateway built without a checkpoint store. */
export const CheckpointsUnavailable = defineError(
  "BATON_GATEWAY_CHECKPOINTS_UNAVAILABLE",
  () => "checkpoint history is not available on this gateway (it runs without a checkpoint store)",
  { status: 503 },
);

/** No API key, or one the store does not know (or revoked). */
export const Unauthenticated = defineError("BATON_GATEWAY_UNAUTHENTICATED", (why: string) => why, { status: 401 });

/** The key's role may not do this (viewers may only read). */
export const Forbidden = defineError(
  "BATON_GATEWAY_FORBIDDEN",
  (role: string, method: string) => `role "${role}" may not ${method} here; writing needs role operator or admin`,
  { status: 403 },
);

/** The resource does not exist for this tenant. Another tenant's rows are reported the same way. */
export const NotFound = defineError(
  "BATON_GATEWAY_NOT_FOUND",
  (kind: string, id: number | string) => `${kind} ${id} not found`,
  { status: 404 },
);

/** Node's HTTP parser refused the request (a bad request line or header): answered before any route. */
export const MalformedRequest = defineError("BATON_GATEWAY_MALFORMED_REQUEST", () => "the request is not valid HTTP (a malformed request line or header)", { status: 400 });

/** The request's headers are larger than the HTTP server takes (Node's `maxHeaderSize`). */
export const HeadersTooLarge = defineError("BATON_GATEWAY_HEADERS_TOO_LARGE", () => "the request's headers are larger than the server accepts", { status: 431 });

/** The request was not received whole within the HTTP server's request timeout. */
export const RequestTimeout = defineError("BATON_GATEWAY_REQUEST_TIMEOUT", () => "the request was not received in time", { status: 408 });

/** A body sent compressed (`Content-Encoding: gzip`, …): the gateway reads bodies as sent. */
export const EncodingUnsupported = defineError(
  "BATON_GATEWAY_ENCODING_UNSUPPORTED",
  (encoding: string) => `the body's content-encoding "${encoding}" is not supported: send the body uncompressed`,
  { status: 415 },
);

/** No route matches the method and path. */
export const RouteNotFound = defineError(
  "BATON_GATEWAY_ROUTE_NOT_FOUND",
  (method: string, url: string) => `no route ${method} ${url}`,
  { status: 404 },
);

/** The path names a route, but not for this method; the answer's `Allow` header lists those it has. */
export const MethodNotAllowed = defineError(
  "BATON_GATEWAY_METHOD_NOT_ALLOWED",
  (method: string, url: string, allowed: string) => `${method} is not allowed on ${url}; it takes ${allowed}`,
  { status: 405 },
);

/** Executing a workflow whose `enabled` is false. */
export const WorkflowDisabled = defineError(
  "BATON_GATEWAY_WORKFLOW_DISABLED",
  (id: number) => `workflow ${id} is disabled; enable it before executing`,
  { status: 409 },
);

/** Resuming an execution that is not waiting for a person. */
export const ExecutionNotPaused = defineError(
  "BATON_GATEWAY_EXECUTION_NOT_PAUSED",
  (id: number, status: string) => `execution ${id} is ${status}; only a paused execution can be resumed`,
  { status: 409 },
);

/**
 * Resuming a run that waits on a review in one of its sub-runs (child executions), not one of
 * its own: the decision goes to the sub-run's resume. `details.pendingReviews` lists them.
 */
export const ReviewInSubRun = defineError(
  "BATON_GATEWAY_REVIEW_IN_SUBRUN",
  (id: number, subExecutionId: number, nodeId: string) =>
    `execution ${id} waits on a review in its sub-run ${subExecutionId} (node "${nodeId}"): send the decision to POST /api/agent-workflow-executions/${subExecutionId}/resume`,
  { status: 409 },
);

/** A second decision for one pause: the first one sent is the one the engine takes. */
export const ReviewAlreadyDecided = defineError(
  "BATON_GATEWAY_REVIEW_ALREADY_DECIDED",
  (id: number, nodeId: string) => `a decision for "${nodeId}" of execution ${id} was already sent; only the first decision of a pause is taken`,
  { status: 409 },
);

/** Cancelling an execution that already ended. */
export const ExecutionFinished = defineError(
  "BATON_GATEWAY_EXECUTION_FINISHED",
  (id: number, status: string) => `execution ${id} already ended (${status})`,
  { status: 409 },
);

/** The start command could not be handed to the bus; the execution row was marked failed. */
export const ExecutionStartFailed = defineError(
  "BATON_GATEWAY_EXECUTION_START_FAILED",
  (id: number) => `execution ${id} could not be started (the message bus is unavailable); it was marked failed, retry later`,
  { status: 503, retryable: true },
);

/** A resume or cancel command could not be handed to the bus. */
export const CommandUnavailable = defineError(
  "BATON_GATEWAY_COMMAND_UNAVAILABLE",
  (what: string, id: number) => `could not ${what} execution ${id} (the message bus is unavailable); retry later`,
  { status: 503, retryable: true },
);

/** Anything unexpected. The detail sent to clients is always this generic text. */
export const Internal = defineError("BATON_GATEWAY_INTERNAL", () => "internal server error", { status: 500 });

/** The gateway was built without a tool registry. */
export const ToolsUnavailable = defineError(
  "BATON_GATEWAY_TOOLS_UNAVAILABLE",
  () => "the tool registry is not available in this gateway",
  { status: 503, retryable: true },
);

/** The gateway was built without the tool source store. */
export const ToolSourcesUnavailable = defineError(
  "BATON_GATEWAY_TOOL_SOURCES_UNAVAILABLE",
  () => "tool sources are not available in this gateway",
  { status: 503, retryable: true },
);

/** An MCP server started as a local command (stdio) runs code on the worker's host: only admins may register one. */
export const StdioSourceForbidden = defineError(
  "BATON_GATEWAY_STDIO_FORBIDDEN",
  (role: string) => `role "${role}" may not register an MCP server with the stdio transport (it runs a command on the worker's host); that needs role admin`,
  { status: 403 },
);

/** The source's name, or its tool's name, is already taken by another tenant's source or by a tool written in code. */
export const ToolSourceNameTaken = defineError(
  "BATON_GATEWAY_TOOL_SOURCE_NAME_TAKEN",
  (kind: string, name: string, by: string) => `${kind} source name "${name}" is already used by ${by}`,
  { status: 409 },
);
