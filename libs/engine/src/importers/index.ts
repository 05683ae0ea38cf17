/**
 * Importers: convert workflows written in other formats into Baton's canonical
 * definition (plain JSON, /work/notes/model.md). Pure functions; docs/importers.md
 * has the mapping tables.
 */
import type { ImportFormat, ImportResult } from "./common.ts";
import { importWorkflowPlan } from "./plan.ts";
import { importStateMachine } from "./stateMachine.ts";
import { importToolSequence } from "./toolSequence.ts";

export type { ImportFormat, ImportIssue, ImportResult, ImportSourceMap, PartialImport, SourceOrigin } from "./common.ts";
export { PARTIAL_IMPORT_CODES } from "./common.ts";
export { importWorkflowPlan } from "./plan.ts";
export { importToolSequence } from "./toolSequence.ts";
export { DEFAULT_MAX_VISITS, guardToCondition, importStateMachine } from "./stateMachine.ts";

/** Source formats {@link importWorkflow} accepts. */
export const IMPORT_FORMATS: readonly ImportFormat[] = ["plan", "toolSequence", "stateMachine"];

/**
 * Imports `source` written in `format`: `"plan"` (LLM-planned DAG, {@link importWorkflowPlan}),
 * `"toolSequence"` (ordered tool steps, {@link importToolSequence}) or `"stateMachine"`
 * (XState-like states, {@link importStateMachine}). An unknown format is an `unknown_format` error.
 */
export function importWorkflow(format: ImportFormat, source: unknown): ImportResult {
  switch (format) {
    case "plan":
      return importWorkflowPlan(source);
    case "toolSequence":
      return importToolSequence(source);
    case "stateMachine":
      return importStateMachine(source);
    default:
      return {
        ok: false,
        errors: [{ path: "format", code: "unknown_format", message: `unknown import format ${JSON.stringify(format)}; one of: ${IMPORT_FORMATS.join(", ")}` }],
      };
  }
}
