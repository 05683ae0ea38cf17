/**
 * @baton/engine — the pure part of Baton: the workflow graph model, validation,
 * `$.path` expressions and the step function. Imports nothing with side effects.
 */
export type { JsonObject, JsonPrimitive, JsonValue } from "./json.ts";
export { isJsonObject, MAX_JSON_DEPTH, tooDeepAt } from "./json.ts";
export { collectPaths, looksLikePath, parsePath, readPath, resolveTemplate, writePath } from "./path.ts";
export type { ParsedPath, PathSegment } from "./path.ts";
export {
  agentConfigSchema, CONDITION_OPS, NODE_TYPES, NODE_TYPE_ALIASES, PLANNED_NODE_TYPES, canonicalType,
  bodySchema, edgeSchema, nodeSchema, workflowDefinitionSchema, jsonValue, retryPolicySchema,
} from "./model.ts";
export type { Comparison, Condition, EdgeDefinition, Join, NodeDefinition, NodeTypeSpec, RetryPolicy, WorkflowDefinition, WorkflowRef } from "./model.ts";
export { jsonSchemaCheck, referencedTools, agentsWithoutModel, validateInput, validateWorkflow, validateWorkflowWithTools, workflowDefinitionJsonSchema } from "./validate.ts";
export type { ValidateOptions, ValidationIssue, ValidationResult } from "./validate.ts";
export { compileExpression, evaluateExpression, expressionError } from "./expr.ts";
export { BLOBS_MISSING, BlobsMissing, BlobsNeeded, collectRefs, isBlobRef, resolveRefs, usageOf } from "./refs.ts";
export type { BlobRef } from "./refs.ts";
export { graphOf } from "./graph.ts";
export { evaluateCondition, evaluateGuard } from "./condition.ts";
export { backoffDelay, DEADLINE_TIMER_ID, forkState, isFinished, isInline, outstandingCalls, outstandingCount, settledFanCall, step, SUB_RUN_DECISION, subRunPauses, subRunReason, TIMEOUT_GRACE_MS, toolCallId } from "./step.ts";
export type { StepInput, StepResult } from "./step.ts";
export type { Command, Effect, EngineEvent, ExecutionError, ExecutionState, ExecutionStatus, FanItem, FanState, JournalEntry, NodeRun, NodeStatus, SubRunPause, TimerState } from "./state.ts";
export { forkStartOf, forkStartRecord, keptForkStart } from "./fork.ts";
export type { ForkStart } from "./fork.ts";
export { replayJournal } from "./replay.ts";
export type { LearnedSubRunPause, ReplayInput, ReplayResult } from "./replay.ts";
export { importSynthDev, perspective, scriptFunctions, synthdevWorkflowSchema, synthdevRoleSchema } from "./synthdev.ts";
export type { SynthdevImportResult, SynthdevSource, SynthdevWorkflow } from "./synthdev.ts";
export { DEFAULT_MAX_VISITS, guardToCondition, IMPORT_FORMATS, importStateMachine, importToolSequence, importWorkflow, importWorkflowPlan, partialImportIssues } from "./importers/index.ts";
export type { ImportFormat, ImportIssue, ImportResult, ImportSourceMap, PartialImport, SourceOrigin } from "./importers/index.ts";
