import { defineError } from "@baton/errors";

export const ExecutionMissing = defineError("BATON_EXECUTOR_EXECUTION_MISSING", (id: number) => `execution ${id} does not exist`, { status: 404 });
export const DefinitionMissing = defineError("BATON_EXECUTOR_DEFINITION_MISSING", (wf: number, v: number) => `workflow ${wf} version ${v} does not exist`, { status: 404 });
export const DefinitionInvalid = defineError("BATON_EXECUTOR_DEFINITION_INVALID", (wf: number, v: number, why: string) => `workflow ${wf} version ${v} is not valid: ${why}`, { status: 422 });
export const NotStarted = defineError("BATON_EXECUTOR_NOT_STARTED", (id: number) => `execution ${id} has no checkpoint yet`, { status: 409, retryable: true });
/**
 * The run's checkpoint is numbered below the journal's floor, which another executor's rebuild
 * raised moments ago: that rebuild is left to write its checkpoint, and the command comes back.
 */
export const RebuildAwaited = defineError(
  "BATON_EXECUTOR_REBUILD_AWAITED",
  (id: number, floor: number) => `execution ${id} is being rebuilt from its journal elsewhere (floor ${floor}); the command is applied again once its checkpoint is written`,
  { status: 409, retryable: true },
);
/**
 * A command failed on every one of its deliveries with an error no retry mended (a fault in
 * the engine or the executor, not an unreachable service): its run is failed with this code
 * rather than left waiting for a command that is gone.
 */
export const CommandFailed = defineError(
  "BATON_EXECUTOR_COMMAND_FAILED",
  (command: string, deliveries: number, why: string) => `the ${command} command could not be applied on any of its ${deliveries} deliveries: ${why}`,
  { status: 500 },
);
/**
 * A tool call that no worker answered and the tools queue no longer holds: a worker took it and
 * acked it before answering, then went away (a worker written without the SDK that broke the
 * order record, answer, ack), or the stream lost it. The recovery sweep fails the attempt with
 * this, retryable, so the node's `retry` runs it again instead of the run waiting for ever.
 */
export const CallLost = defineError(
  "BATON_EXECUTOR_CALL_LOST",
  (callId: string) => `tool call ${callId} was taken from the tools queue and never answered (its worker acked it before answering and went away, or the stream lost it)`,
  { status: 502, retryable: true },
);
