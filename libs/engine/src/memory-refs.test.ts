/**
 * Rule (docs/adr/008-blob-retention.md, "References outside executions"): a memory entry never
 * gets a blob reference from a run. An `agent.memory.write` node's call to `memory.write`
 * carries the values behind the references its content and metadata read; a step without
 * those blobs asks for them (BlobsNeeded) instead of sending the reference.
 */
import { describe, expect, it } from "@jest/globals";
import { step, validateWorkflow } from "./index.ts";
import type { Effect, JsonValue, WorkflowDefinition } from "./index.ts";

const identity = { executionId: 7, tenantId: "t_1", workflowId: 1, workflowVersion: 1 };
const now = new Date(Date.UTC(2026, 0, 1)).toISOString();
const REF = { $ref: `blob:${"a".repeat(64)}`, size: 70_000 };
const VALUE = { report: "a large report", rows: [1, 2, 3] };

function definition(): WorkflowDefinition {
  const v = validateWorkflow({
    start: "fetch",
    nodes: [
      { id: "fetch", type: "tool", config: { tool: "report.fetch" } },
      { id: "remember", type: "agent.memory.write", config: { agentId: 3, key: "report", content: "{{$.fetch.report}}", metadata: { whole: "$.fetch", rows: "$.fetch.rows" } } },
    ],
    edges: [{ from: "fetch", to: "remember" }],
  });
  if (!v.ok) throw new Error(JSON.stringify(v.errors));
  return v.workflow;
}

const memoryCalls = (effects: Effect[]) => effects.flatMap((e) => (e.kind === "callTool" && e.tool === "memory.write" ? [e.args] : []));

function hasRef(v: JsonValue): boolean {
  if (Array.isArray(v)) return v.some(hasRef);
  if (v !== null && typeof v === "object") return typeof v.$ref === "string" || Object.values(v).some(hasRef);
  return false;
}

describe("agent.memory.write and blob references", () => {
  it("sends the values behind the references, never a reference", async () => {
    const d = definition();
    const started = await step({ definition: d, state: null, command: { kind: "start", input: {} }, now, identity });
    // The tool's large result comes back as a reference (the executor stored it as a blob).
    const answered = { definition: d, state: started.state, command: { kind: "toolResult", nodeId: "fetch", callId: "7.fetch.1", ok: true, output: REF, durationMs: 1 }, now } as const;
    await expect(step(answered)).rejects.toMatchObject({ name: "BlobsNeeded", refs: [REF.$ref] });

    const r = await step({ ...answered, blobs: new Map([[REF.$ref, VALUE]]) });
    const [args] = memoryCalls(r.effects);
    expect(args).toEqual({ agentId: 3, key: "report", content: "a large report", metadata: { whole: VALUE, rows: [1, 2, 3] } });
    expect(hasRef(args!)).toBe(false);
    // The run itself keeps the reference.
    expect(r.state.context.fetch).toEqual(REF);
  });
});
