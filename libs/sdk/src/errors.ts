/**
 * The tool SDK's error catalogue. Codes are stable and never reused; a failed
 * ToolResult carries the code, and the engine retries the node only when
 * `retryable` is true.
 */
import { defineError } from "@baton/errors";

/** The call's input failed the tool's input schema; the message names every field path. Not retryable. */
export const ToolInvalidInput = defineError(
  "BATON_TOOL_INVALID_INPUT",
  (tool: string, problems: string) => `invalid input for tool ${tool}: ${problems}`,
  { status: 400 },
);

/** The handler returned a value that fails the tool's output schema. Not retryable: the same input gives the same output. */
export const ToolInvalidOutput = defineError(
  "BATON_TOOL_INVALID_OUTPUT",
  (tool: string, problems: string) => `tool ${tool} returned invalid output: ${problems}`,
  { status: 502 },
);

/** The handler ran past the tool's time limit; its signal was aborted. Retryable. */
export const ToolTimeout = defineError(
  "BATON_TOOL_TIMEOUT",
  (tool: string, timeoutMs: number) => `tool ${tool} timed out after ${timeoutMs} ms`,
  { status: 504, retryable: true },
);

/** The call was cancelled by a ToolCancel broadcast (execution cancelled, node deadline). Not retryable. */
export const ToolCancelled = defineError(
  "BATON_TOOL_CANCELLED",
  (tool: string, reason: string) => `tool ${tool} was cancelled${reason ? `: ${reason}` : ""}`,
  { status: 409 },
);

/** The handler threw an error without a code. Retryable, like every unknown error. */
export const ToolFailed = defineError(
  "BATON_TOOL_FAILED",
  (tool: string, message: string) => `tool ${tool} failed: ${message}`,
  { status: 500, retryable: true },
);

/** A worker received a call for a tool it does not serve. Not retryable. */
export const ToolUnknown = defineError(
  "BATON_TOOL_UNKNOWN",
  (tool: string) => `no tool named ${tool} is served here`,
  { status: 404 },
);

/**
 * JetStream delivered the call for the last allowed time (every earlier delivery went
 * to a worker that died or lost its connection before answering). The call is answered
 * with this failure instead of vanishing. Retryable: the engine may retry the node.
 */
export const ToolDeliveriesExhausted = defineError(
  "BATON_TOOL_DELIVERIES_EXHAUSTED",
  (tool: string, deliveries: number) => `tool ${tool}: ${deliveries} deliveries of the call ended without an answer (worker lost?)`,
  { status: 503, retryable: true },
);

/**
 * The handler's result is larger than the worker's `maxResultBytes` (its JSON): it is not
 * sent nor stored. Not retryable: running the handler again would give the same.
 */
export const ToolResultTooLarge = defineError(
  "BATON_TOOL_RESULT_TOO_LARGE",
  (tool: string, bytes: number, max: number) => `tool ${tool}: the result is ${bytes} bytes of JSON, more than the ${max} a worker sends`,
  { status: 413, retryable: false },
);

/**
 * The call's arguments were sent by reference (larger than the executor sends inline) and
 * their object cannot be read: expired, deleted, or its bytes do not match the reference.
 * The handler is not run. Retryable: a retry of the node sends the arguments again.
 */
export const ToolArgsObjectLost = defineError(
  "BATON_TOOL_ARGS_OBJECT_LOST",
  (tool: string, callId: string, why: string) => `tool ${tool}: the arguments of call ${callId} cannot be read: ${why}`,
  { status: 502, retryable: true },
);

/** The call's arguments refer to an arguments object that is not its own. The handler is not run. Not retryable. */
export const ToolArgsObjectInvalid = defineError(
  "BATON_TOOL_ARGS_OBJECT_INVALID",
  (tool: string, callId: string, ref: string) => `tool ${tool}: the arguments of call ${callId} refer to ${ref}, which is not its arguments object`,
  { status: 400 },
);

/** The worker is draining and gave up on a call past its grace period; the call goes back to the queue. */
export const ToolWorkerDraining = defineError(
  "BATON_TOOL_WORKER_DRAINING",
  (tool: string) => `worker draining; call of ${tool} handed back to the queue`,
  { status: 503, retryable: true },
);

/** Worker or registry options are invalid; `details` lists every problem. */
export const ToolSdkInvalidOptions = defineError(
  "BATON_TOOL_SDK_INVALID_OPTIONS",
  (what: string, problems: string[]) => `invalid ${what}: ${problems.join("; ")}`,
  { status: 500 },
);
