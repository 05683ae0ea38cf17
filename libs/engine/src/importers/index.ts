/**
 * Importers: convert workflows written in other formats into Baton's canonical
 * definition (plain JSON, /work/notes/model.md). Pure functions; docs/importers.md
 * has the mapping tables.
 */
import type { ImportFormat, ImportResult } from "./common.ts";
import { isJsonObject } from "../json.ts";
import { importSynthDev } from "../synthdev.ts";
import type { SynthdevSource } from "../synthdev.ts";
import { importWorkflowPlan } from "./plan.ts";
import { importStateMachine } from "./stateMachine.ts";
import { importToolSequence } from "./toolSequence.ts";

export type { ImportFormat, ImportIssue, ImportResult, ImportSourceMap, PartialImport, SourceOrigin } from "./common.ts";
export { partialImportIssues } from "./common.ts";
export { importWorkflowPlan } from "./plan.ts";
export { importToolSequence } from "./toolSequence.ts";
export { DEFAULT_MAX_VISITS, guardToCondition, importStateMachine } from "./stateMachine.ts";

/** Source formats {@link importWorkflow} accepts. */
export const IMPORT_FORMATS = ["plan", "toolSequence", "stateMachine", "synthdev"] as const satisfies readonly ImportFormat[];

/**
 * Imports `source` written in `format`: `"plan"` (LLM-planned DAG, {@link importWorkflowPlan}),
 * `"toolSequence"` (ordered tool steps, {@link importToolSequence}), `"stateMachine"`
 * (XState-like states, {@link importStateMachine}) or `"synthdev"` (a SynthDev workflow with its
 * script, roles and agentConfig, `{ workflow, script?, roles?, agentConfig? }`,
 * {@link importSynthDev}). An unknown format is an `unknown_format` error.
 */
export function importWorkflow(format: ImportFormat, source: unknown): ImportResult {
  switch (format) {
    case "plan":
      return importWorkflowPlan(source);
    case "toolSequence":
      return importToolSequence(source);
    case "stateMachine":
      return importStateMachine(source);
    case "synthdev":
      if (!isJsonObject(source)) {
        return { ok: false, errors: [{ path: "(source)", code: "invalid_source", message: "a SynthDev source is an object { workflow, script?, roles?, agentConfig? }" }] };
      }
      // importSynthDev checks the shape of each field itself (a script that is no text, ...).
      return importSynthDev(source as unknown as SynthdevSource);
    default:
      return {
        ok: false,
        errors: [{ path: "format", code: "unknown_format", message: `unknown import format ${JSON.stringify(format)}; one of: ${IMPORT_FORMATS.join(", ")}` }],
      };
  }
}
