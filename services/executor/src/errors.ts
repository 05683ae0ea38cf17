import { defineError } from "@baton/errors";

export const ExecutionMissing = defineError("BATON_EXECUTOR_EXECUTION_MISSING", (id: number) => `execution ${id} does not exist`, { status: 404 });
export const DefinitionMissing = defineError("BATON_EXECUTOR_DEFINITION_MISSING", (wf: number, v: number) => `workflow ${wf} version ${v} does not exist`, { status: 404 });
export const DefinitionInvalid = defineError("BATON_EXECUTOR_DEFINITION_INVALID", (wf: number, v: number, why: string) => `workflow ${wf} version ${v} is not valid: ${why}`, { status: 422 });
export const NotStarted = defineError("BATON_EXECUTOR_NOT_STARTED", (id: number) => `execution ${id} has no checkpoint yet`, { status: 409, retryable: true });
