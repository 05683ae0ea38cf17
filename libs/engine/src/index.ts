/**
 * @baton/engine — the pure part of Baton: the workflow graph model, validation,
 * `$.path` expressions and the step function. Imports nothing with side effects.
 */
export type { JsonObject, JsonPrimitive, JsonValue } from "./json.ts";
export { isJsonObject } from "./json.ts";
export { collectPaths, looksLikePath, parsePath, readPath, resolveTemplate, writePath } from "./path.ts";
export type { ParsedPath, PathSegment } from "./path.ts";
export {
  CONDITION_OPS, NODE_TYPES, NODE_TYPE_ALIASES, PLANNED_NODE_TYPES, canonicalType,
  edgeSchema, nodeSchema, workflowDefinitionSchema, jsonValue,
} from "./model.ts";
export type { EdgeDefinition, NodeDefinition, NodeTypeSpec, WorkflowDefinition } from "./model.ts";
export { validateWorkflow, workflowDefinitionJsonSchema } from "./validate.ts";
export type { ValidationIssue, ValidationResult } from "./validate.ts";
export { evaluateCondition } from "./condition.ts";
export { isFinished, isInline, step, toolCallId } from "./step.ts";
export type { StepInput, StepResult } from "./step.ts";
export type { Command, Effect, EngineEvent, ExecutionError, ExecutionState, ExecutionStatus, JournalEntry, NodeRun, NodeStatus } from "./state.ts";
