/** Maps engine events to contract events. */
import type { EngineEvent, ExecutionState } from "@baton/engine";
import type { Messaging } from "@baton/messaging";
import { valueFromJson } from "@baton/contracts";

function n(v: unknown): number {
  return typeof v === "number" && Number.isFinite(v) ? Math.round(v) : 0;
}

export async function publishEngineEvent(m: Messaging, s: ExecutionState, e: EngineEvent, key: string): Promise<void> {
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
      return m.publishEvent("execution.paused", { ...exec, nodeId: e.nodeId, reason: e.reason }, key);
    case "execution.resumed":
      return m.publishEvent("execution.resumed", { ...exec, nodeId: e.nodeId, decision: e.decision }, key);
    case "execution.completed":
      return m.publishEvent("execution.completed", {
        ...exec, status: "success", output: valueFromJson(e.output),
        ...(s.tokenUsage ? { tokenUsage: { inputTokens: n(s.tokenUsage.inputTokens), outputTokens: n(s.tokenUsage.outputTokens), totalTokens: n(s.tokenUsage.totalTokens) } } : {}),
      }, key);
    case "execution.failed":
      return m.publishEvent("execution.failed", { ...exec, error: { code: e.error.code, message: e.error.message, retryable: false }, nodeId: e.error.nodeId ?? "" }, key);
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
