/**
 * The built-in worker's error catalogue (tool sources). Codes are stable and never reused.
 */
import { defineError } from "@baton/errors";

/** A tool of a source was called for a tenant other than the one that registered the source. Not retryable. */
export const ToolSourceTenantRefused = defineError(
  "BATON_TOOL_SOURCE_TENANT_REFUSED",
  (tool: string, tenantId: string) => `tool "${tool}" is not available to tenant "${tenantId}"`,
  { status: 403 },
);

/** A source yields a tool name that another source, or a tool written in code, already uses; the source is not served. */
export const ToolSourceConflict = defineError(
  "BATON_TOOL_SOURCE_CONFLICT",
  (source: string, tool: string, owner: string) => `source ${source} is not served: tool "${tool}" is already provided by ${owner}`,
  { status: 409 },
);

/** A stored source could not be turned into tools (invalid declaration, MCP server that does not start). */
export const ToolSourceLoadFailed = defineError(
  "BATON_TOOL_SOURCE_LOAD_FAILED",
  (source: string, reason: string) => `source ${source} could not be loaded: ${reason}`,
  { status: 502 },
);
