// Rules checked here — the registries and the messages behind them (read from the descriptors):
// - every event type is `entity.action` and maps to a baton.v1 message that has `tenant_id`
//   (string, field 1) and `occurred_at` (google.protobuf.Timestamp, field 2);
// - every event's scope field exists and is an int32; eventScopeId reads it;
// - commands map to their messages, each with `tenant_id`; rpc requests carry `tenant_id`;
// - the contract declares no enums (Node type stripping cannot run TS enums) and all its ids are int32;
// - REGISTRY resolves every registered message by its `baton-schema` name;
// - createEvent stamps occurred_at unless given; the runtime lookups refuse unknown names.
import { describe, expect, it } from "@jest/globals";
import { ScalarType } from "@bufbuild/protobuf";
import type { DescMessage } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import {
  CancelExecutionSchema,
  ChildPausedSchema,
  ChildResultSchema,
  ContinueExecutionSchema,
  ExecutionTimerSchema,
  COMMANDS,
  commandSchema,
  createEvent,
  EVENT_ENTITIES,
  EVENT_SCOPE_FIELD,
  EVENTS,
  eventSchema,
  eventScopeId,
  file_baton_v1_commands,
  file_baton_v1_common,
  file_baton_v1_events,
  file_baton_v1_rpc,
  isCommandName,
  isEventType,
  isRpcName,
  REGISTRY,
  ResumeExecutionSchema,
  RPCS,
  StartExecutionSchema,
  ToolResultSchema,
  UnknownMessageType,
} from "./index.ts";
import type { EventType } from "./index.ts";

const eventTypes = Object.keys(EVENTS) as EventType[];
const files = [file_baton_v1_common, file_baton_v1_commands, file_baton_v1_events, file_baton_v1_rpc];

function field(schema: DescMessage, name: string) {
  return schema.fields.find((f) => f.name === name);
}

describe("EVENTS", () => {
  it("lists the event types of the brief", () => {
    expect(eventTypes.sort()).toEqual([
      "execution.cancelled", "execution.completed", "execution.emitted", "execution.failed", "execution.paused", "execution.resumed", "execution.started",
      "learning.sequence", "mcp.generated", "memory.created", "memory.deleted", "node.completed", "node.failed", "node.progress", "node.skipped", "node.started",
      "review.created", "review.resolved", "workflow.created", "workflow.deleted", "workflow.updated",
    ]);
    expect([...EVENT_ENTITIES].sort()).toEqual(["execution", "learning", "mcp", "memory", "node", "review", "workflow"]);
  });

  it.each(eventTypes)("%s has tenant_id and occurred_at", (type) => {
    const schema = EVENTS[type];
    expect(type).toMatch(/^[a-z]+\.[a-z]+$/);
    expect(schema.typeName).toMatch(/^baton\.v1\./);
    const tenant = field(schema, "tenant_id");
    expect(tenant).toMatchObject({ number: 1, fieldKind: "scalar", scalar: ScalarType.STRING });
    const at = field(schema, "occurred_at");
    expect(at?.number).toBe(2);
    expect(at?.fieldKind).toBe("message");
    expect(at?.message?.typeName).toBe("google.protobuf.Timestamp");
  });

  it.each(eventTypes)("%s has an int32 scope field", (type) => {
    const local = EVENT_SCOPE_FIELD[type];
    const f = EVENTS[type].fields.find((x) => x.localName === local);
    expect(f).toMatchObject({ fieldKind: "scalar", scalar: ScalarType.INT32 });
  });

  it("reads the scope id of a payload", () => {
    expect(eventScopeId("node.started", createEvent("node.started", { executionId: 42 }))).toBe(42);
    expect(eventScopeId("workflow.updated", createEvent("workflow.updated", { id: 7 }))).toBe(7);
    expect(eventScopeId("memory.deleted", createEvent("memory.deleted", { id: 9, agentId: 1 }))).toBe(9);
    expect(eventScopeId("mcp.generated", createEvent("mcp.generated", { mcpServerId: 3, agentWorkflowId: 11 }))).toBe(11);
  });
});

describe("COMMANDS and RPCS", () => {
  it("map names to their messages", () => {
    expect(COMMANDS).toEqual({
      "execution.start": StartExecutionSchema,
      "execution.resume": ResumeExecutionSchema,
      "execution.cancel": CancelExecutionSchema,
      "execution.timer": ExecutionTimerSchema,
      "execution.child_result": ChildResultSchema,
      "execution.child_paused": ChildPausedSchema,
      "execution.continue": ContinueExecutionSchema,
      "tool.result": ToolResultSchema,
    });
    expect(RPCS["planner.plan"].request.typeName).toBe("baton.v1.PlanRequest");
    expect(RPCS["planner.plan"].reply.typeName).toBe("baton.v1.PlanReply");
    expect(RPCS["memory.query"].request.typeName).toBe("baton.v1.MemoryQuery");
    expect(RPCS["memory.query"].reply.typeName).toBe("baton.v1.MemoryQueryReply");
  });

  it("carry the tenant in every command and request", () => {
    const schemas = [...Object.values(COMMANDS), ...Object.values(RPCS).map((r) => r.request)];
    for (const schema of schemas) expect(field(schema, "tenant_id")?.scalar).toBe(ScalarType.STRING);
  });
});

describe("the proto files", () => {
  it("declare no enums", () => {
    for (const file of files) {
      expect(file.enums).toHaveLength(0);
      for (const m of file.messages) expect(m.nestedEnums).toHaveLength(0);
    }
  });

  it("use int32 for every id", () => {
    for (const file of files) {
      for (const m of file.messages) {
        for (const f of m.fields.filter((x) => x.name === "id" || x.name.endsWith("_id"))) {
          const isText = ["tenant_id", "node_id", "parent_node_id", "call_id", "worker_id", "timer_id"].includes(f.name);
          expect([m.typeName, f.name, f.scalar]).toEqual([m.typeName, f.name, isText ? ScalarType.STRING : ScalarType.INT32]);
        }
      }
    }
  });

  it("are all in REGISTRY by their fully-qualified names", () => {
    for (const file of files) {
      for (const m of file.messages) expect(REGISTRY.getMessage(m.typeName)).toBe(m);
    }
    expect(REGISTRY.getMessage("baton.v1.NodeStarted")).toBe(EVENTS["node.started"]);
    expect(REGISTRY.getMessage("google.protobuf.Struct")?.typeName).toBe("google.protobuf.Struct");
  });
});

describe("runtime lookups", () => {
  it("createEvent stamps occurred_at with now unless given", () => {
    const before = Date.now();
    const ev = createEvent("execution.paused", { tenantId: "t_1", id: 1, nodeId: "review", reason: "approval" });
    const ms = Number(ev.occurredAt!.seconds) * 1000 + Math.floor(ev.occurredAt!.nanos / 1e6);
    expect(ms).toBeGreaterThanOrEqual(before - 1000);
    expect(ms).toBeLessThanOrEqual(Date.now() + 1000);
    const fixed = timestampFromDate(new Date("2020-01-01T00:00:00Z"));
    expect(createEvent("execution.paused", { occurredAt: fixed }).occurredAt).toEqual(fixed);
  });

  it("answers by name and refuses unknown names", () => {
    expect(isEventType("node.started")).toBe(true);
    expect(isEventType("toString")).toBe(false);
    expect(isCommandName("execution.cancel")).toBe(true);
    expect(isCommandName("node.started")).toBe(false);
    expect(isRpcName("memory.query")).toBe(true);
    expect(eventSchema("review.resolved")).toBe(EVENTS["review.resolved"]);
    expect(commandSchema("tool.result")).toBe(ToolResultSchema);
    expect(UnknownMessageType.is((() => { try { eventSchema("node.exploded"); } catch (e) { return e; } })())).toBe(true);
    expect(UnknownMessageType.is((() => { try { commandSchema("__proto__"); } catch (e) { return e; } })())).toBe(true);
  });
});
