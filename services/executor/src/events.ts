/** Maps engine events to contract events. */
import type { EngineEvent, ExecutionState, JsonValue } from "@baton/engine";
import type { Messaging } from "@baton/messaging";
import { valueFromJson } from "@baton/contracts";
import { hasCode } from "@baton/errors";

/** What an event carries in place of a payload the bus refuses as too large (the journal keeps it whole). */
export const OMITTED_PAYLOAD_CODE = "BATON_EXECUTOR_EVENT_PAYLOAD_OMITTED";

/**
 * Publishes an engine event. Payloads are kept under the large-value threshold before this
 * (large.ts); when one still exceeds the server's max payload (a value of many small parts
 * that also holds references, which cannot be one blob), the event goes out with the
 * payload replaced by `{ "$omitted": "BATON_EXECUTOR_EVENT_PAYLOAD_OMITTED", bytes, where }`
 * rather than not at all: an event that can never be published would hold back every later
 * event of its run (they go out in step order), and the run would never finish.
 */
export async function publishEngineEvent(m: Messaging, s: ExecutionState, e: EngineEvent, key: string): Promise<void> {
  try {
    await publishAs(m, s, e, key);
  } catch (err) {
    const smaller = hasCode(err, "BATON_BUS_PAYLOAD_TOO_LARGE") ? withoutPayload(e) : undefined;
    if (!smaller) throw err;
    await publishAs(m, s, smaller, key);
  }
}

function omitted(v: JsonValue, where: string): JsonValue {
  return { $omitted: OMITTED_PAYLOAD_CODE, bytes: Buffer.byteLength(JSON.stringify(v)), where };
}

/** The event with its one large payload replaced, or undefined for an event that has none. */
function withoutPayload(e: EngineEvent): EngineEvent | undefined {
  switch (e.kind) {
    case "node.completed":
      return { ...e, output: omitted(e.output, "the journal row of this node (GET /api/agent-workflow-executions/:id/nodes)") };
    case "execution.completed":
      return { ...e, output: omitted(e.output, "the execution's output (GET /api/agent-workflow-executions/:id)") };
    case "execution.emitted":
      return { ...e, data: omitted(e.data, "the emit node's journal row") };
    default:
      return undefined;
  }
}

function n(v: unknown): number {
  return typeof v === "number" && Number.isFinite(v) ? Math.round(v) : 0;
}

async function publishAs(m: Messaging, s: ExecutionState, e: EngineEvent, key: string): Promise<void> {
  const base = { tenantId: s.tenantId };
  const exec = { ...base, id: s.executionId, agentWorkflowId: s.workflowId };
  const node = { ...base, executionId: s.executionId };
  switch (e.kind) {
    case "execution.started":
      return m.publishEvent("execution.started", {
        ...exec, workflowVersion: s.workflowVersion, agentId: s.agentId ?? 0,
        parentExecutionId: s.parent?.executionId ?? 0, parentNodeId: s.parent?.nodeId ?? "", rootExecutionId: s.rootExecutionId ?? 0,
        forkedFromExecutionId: s.forkedFrom?.executionId ?? 0, forkedFromVersion: s.forkedFrom?.version ?? 0,
      }, key);
    case "execution.paused":
      return m.publishEvent("execution.paused", { ...exec, nodeId: e.nodeId, reason: e.reason, subExecutionId: e.subExecutionId ?? 0 }, key);
    case "execution.resumed":
      return m.publishEvent("execution.resumed", {
        ...exec, nodeId: e.nodeId, decision: e.decision, reviewer: e.reviewer ?? "", comment: e.comment ?? "",
        ...(e.data !== undefined ? { data: valueFromJson(e.data) } : {}), subExecutionId: e.subExecutionId ?? 0,
      }, key);
    case "execution.completed":
      return m.publishEvent("execution.completed", {
        ...exec, status: "success", output: valueFromJson(e.output),
        // Always set, zeros for a run without LLM calls (seed 004 §8 lists it in the payload).
        tokenUsage: { inputTokens: n(s.tokenUsage?.inputTokens), outputTokens: n(s.tokenUsage?.outputTokens), totalTokens: n(s.tokenUsage?.totalTokens) },
      }, key);
    case "execution.failed":
      return m.publishEvent("execution.failed", { ...exec, error: { code: e.error.code, message: e.error.message, retryable: e.error.retryable === true }, nodeId: e.error.nodeId ?? "" }, key);
    case "execution.cancelled":
      return m.publishEvent("execution.cancelled", { ...exec, reason: e.reason }, key);
    case "node.started":
      return m.publishEvent("node.started", { ...node, nodeId: e.nodeId, nodeType: e.nodeType, attempt: e.attempt }, key);
    case "node.completed":
      return m.publishEvent("node.completed", { ...node, nodeId: e.nodeId, nodeType: e.nodeType, attempt: e.attempt, durationMs: e.durationMs, output: valueFromJson(e.output) }, key);
    case "node.skipped":
      return m.publishEvent("node.skipped", { ...node, nodeId: e.nodeId, nodeType: e.nodeType }, key);
    case "execution.emitted":
      return m.publishEvent("execution.emitted", { ...exec, nodeId: e.nodeId, name: e.name, data: valueFromJson(e.data) }, key);
    case "node.failed":
      return m.publishEvent("node.failed", { ...node, nodeId: e.nodeId, nodeType: e.nodeType, attempt: e.attempt, error: { code: e.code, message: e.error, retryable: e.retrying }, retrying: e.retrying }, key);
  }
}
