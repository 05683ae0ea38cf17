/**
 * The tools library's error catalogue. Codes are stable and never reused; check them with
 * `HttpHostRefused.is(err)` or `hasCode(err, "BATON_TOOL_HTTP_HOST_REFUSED")`. Invalid input uses
 * `@baton/sdk`'s `ToolInvalidInput` (`BATON_TOOL_INVALID_INPUT`).
 */
import { defineError } from "@baton/errors";

/** The HTTP policy refused the target: scheme, host not allow-listed, or an address that is private / loopback / metadata. */
export const HttpHostRefused = defineError(
  "BATON_TOOL_HTTP_HOST_REFUSED",
  (host: string, reason: string) => `HTTP request to "${host}" refused: ${reason}`,
  { status: 403 },
);

/** The HTTP policy (options or environment) is invalid; `details` lists every problem. */
export const HttpPolicyInvalid = defineError(
  "BATON_TOOL_HTTP_POLICY_INVALID",
  (problems: string[]) => `invalid HTTP policy: ${problems.join("; ")}`,
  { status: 500 },
);

/** Connecting, or getting the whole response, took longer than allowed. Retryable. */
export const HttpTimeout = defineError(
  "BATON_TOOL_HTTP_TIMEOUT",
  (what: string, url: string, ms: number) => `${what} to ${url} timed out after ${ms} ms`,
  { status: 504, retryable: true },
);

/** DNS failure, connection refused or reset, TLS failure. Retryable. */
export const HttpNetworkError = defineError(
  "BATON_TOOL_HTTP_NETWORK_ERROR",
  (url: string, reason: string) => `request to ${url} failed: ${reason}`,
  { status: 502, retryable: true },
);

/** The response answered with status >= 400. Retryable for 5xx, 408 and 429; `details` has status, headers and a body excerpt. */
export const HttpStatusError = defineError(
  "BATON_TOOL_HTTP_STATUS",
  (method: string, url: string, status: number) => `${method} ${url} answered ${status}`,
  { status: 502 },
);

/** The response body is larger than the policy allows. */
export const HttpResponseTooLarge = defineError(
  "BATON_TOOL_HTTP_RESPONSE_TOO_LARGE",
  (url: string, limit: number) => `response from ${url} exceeds ${limit} bytes`,
  { status: 502 },
);

/** More redirects than allowed, or a redirect without a usable Location. */
export const HttpRedirectError = defineError(
  "BATON_TOOL_HTTP_REDIRECT",
  (url: string, why: string) => `redirect from ${url}: ${why}`,
  { status: 502 },
);

/** `responseType: "json"` was asked for and the body is not JSON. */
export const HttpInvalidJson = defineError(
  "BATON_TOOL_HTTP_INVALID_JSON",
  (url: string, why: string) => `response from ${url} is not JSON: ${why}`,
  { status: 502 },
);

/** The context's signal was aborted without a Baton error as its reason (the worker's own reasons are rethrown as they are). Retryable. */
export const ToolAborted = defineError(
  "BATON_TOOL_ABORTED",
  (tool: string, why: string) => `tool "${tool}" aborted: ${why}`,
  { status: 499, retryable: true },
);

/** An HTTP tool declaration is invalid; `details` lists every problem with its path. */
export const HttpToolDeclarationInvalid = defineError(
  "BATON_TOOL_HTTP_DECLARATION_INVALID",
  (problems: string[]) => `invalid HTTP tool declaration: ${problems.join("; ")}`,
  { status: 400 },
);

/** An MCP server configuration is invalid; `details` lists every problem with its path. */
export const McpConfigInvalid = defineError(
  "BATON_TOOL_MCP_CONFIG_INVALID",
  (problems: string[]) => `invalid MCP server configuration: ${problems.join("; ")}`,
  { status: 400 },
);

/** The MCP server could not be started or reached, or did not complete the handshake. Retryable. */
export const McpConnectFailed = defineError(
  "BATON_TOOL_MCP_CONNECT_FAILED",
  (server: string, reason: string) => `cannot connect to MCP server "${server}": ${reason}`,
  { status: 503, retryable: true },
);

/** The connection closed while a call was in flight; whether the call ran is unknown. Retryable (the next call reconnects). */
export const McpConnectionLost = defineError(
  "BATON_TOOL_MCP_CONNECTION_LOST",
  (server: string, tool: string) => `connection to MCP server "${server}" closed during a call to "${tool}"`,
  { status: 503, retryable: true },
);

/** The MCP tool answered with `isError: true`; the message is its text content. */
export const McpToolError = defineError(
  "BATON_TOOL_MCP_TOOL_ERROR",
  (tool: string, text: string) => `MCP tool "${tool}" failed: ${text}`,
  { status: 422 },
);

/** The MCP server answered the call with a JSON-RPC error (unknown tool, invalid params, ...). */
export const McpProtocolError = defineError(
  "BATON_TOOL_MCP_PROTOCOL_ERROR",
  (tool: string, reason: string) => `MCP call to "${tool}" failed: ${reason}`,
  { status: 502 },
);
