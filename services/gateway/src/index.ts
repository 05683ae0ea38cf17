/**
 * `@baton/gateway`: Baton's only public door — REST + OpenAPI, SSE event streams,
 * API-key auth with tenants and roles. It validates every input and never runs
 * workflow logic: commands and events go to the bus through {@link GatewayDeps}.
 */
export { buildApp } from "./app.ts";
export type {
  CancelExecutionCommand,
  DefinitionIssue,
  ExecutionEventEnvelope,
  GatewayCommands,
  GatewayDeps,
  GatewayEvents,
  GatewayOptions,
  Readiness,
  ResumeExecutionCommand,
  ReviewAction,
  StartExecutionCommand,
  ValidateWorkflow,
} from "./deps.ts";
export type { AuthContext } from "./plugins/auth.ts";
export type { Issue, Problem } from "./problem.ts";
export { PROBLEM_CONTENT_TYPE } from "./problem.ts";
export { TERMINAL_EVENT_TYPES, formatSseEvent } from "./sse.ts";
export * as GatewayErrors from "./errors.ts";
