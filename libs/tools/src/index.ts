/**
 * @baton/tools — the tools every Baton installation has, HTTP tools declared without code,
 * and MCP servers as tools.
 *
 * - {@link builtinTools}: `http.request`, `json.transform`, `text.template`, `sleep`.
 * - {@link httpTool}: a ToolSpec from a JSON {@link HttpToolDeclaration}.
 * - {@link connectMcpTools}: the tools of one MCP server (stdio or Streamable HTTP).
 * - {@link policyFromEnv} / {@link HttpPolicy}: where outbound HTTP may go.
 */
export { builtinTools, evaluateJsonata, httpRequestInput, httpResponseSchema } from "./builtin.ts";
export type { BuiltinToolsOptions, HttpResponseOutput } from "./builtin.ts";
export { createHttpClient } from "./http-client.ts";
export type { GuardedHttpClient, GuardedRequest, GuardedResponse } from "./http-client.ts";
export { HTTP_TOOL_METHODS, httpTool, httpToolDeclarationSchema, parseHttpToolDeclaration } from "./http-tool.ts";
export type { HttpToolDeclaration } from "./http-tool.ts";
export { connectMcpTools, mcpServerConfigSchema, parseMcpServerConfig, sanitizeToolName } from "./mcp.ts";
export type { ConnectMcpOptions, McpServerConfig, McpTools } from "./mcp.ts";
export { compileHttpPolicy, nonPublicReason, policyFromEnv } from "./policy.ts";
export type { CompiledHttpPolicy, HttpPolicy, ResolvedAddress } from "./policy.ts";
export { renderTemplate } from "./template.ts";
export * from "./errors.ts";
