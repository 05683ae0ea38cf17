// Rules checked here — the bus payload codec:
// - encode writes proto3 JSON with proto (snake_case) field names, UTF-8, and always writes
//   implicit-presence fields (0, false, "", []) but leaves unset message fields out;
// - encode accepts a message or a plain init object; decode(encode(x)) gives back x, including
//   nested Struct data, Timestamps (to the nanosecond) and Value outputs of every JSON kind;
// - decode ignores unknown fields and accepts lowerCamelCase names too;
// - decode throws BATON_CONTRACTS_DECODE (400, not retryable) for bad UTF-8, bad JSON, a non-object,
//   wrong field types, out-of-range int32, bad timestamps;
// - encode refuses (BATON_CONTRACTS_ENCODE) values receivers would reject instead of sending them;
// - valueFromJson / valueToJson / toJsonValue convert between plain JSON and Value fields.
import { describe, expect, it } from "@jest/globals";
import { create } from "@bufbuild/protobuf";
import { timestampDate, timestampFromDate } from "@bufbuild/protobuf/wkt";
import {
  ContractDecodeFailed,
  ContractEncodeFailed,
  createEvent,
  decode,
  encode,
  EVENTS,
  ExecutionCompletedSchema,
  MemoryQueryReplySchema,
  NodeCompletedSchema,
  NodeFailedSchema,
  NodeStartedSchema,
  StartExecutionSchema,
  toJsonValue,
  ToolResultSchema,
  valueFromJson,
  valueToJson,
} from "./index.ts";
import type { JsonValue } from "./index.ts";
import { caught } from "./test-helpers.ts";

const text = (b: Uint8Array): string => new TextDecoder().decode(b);
const bytes = (s: string): Uint8Array => new TextEncoder().encode(s);

describe("encode", () => {
  it("writes proto field names and every implicit field, and omits unset message fields", () => {
    const json = JSON.parse(text(encode(NodeFailedSchema, { tenantId: "t_1", executionId: 42, nodeId: "fetch", nodeType: "agent.toolExecutor" }))) as Record<string, unknown>;
    expect(json).toEqual({
      tenant_id: "t_1",
      execution_id: 42,
      node_id: "fetch",
      node_type: "agent.toolExecutor",
      attempt: 0,
      retrying: false,
    });
    expect(json).not.toHaveProperty("error");
    expect(json).not.toHaveProperty("occurred_at");
  });

  it("accepts a created message as well as an init object", () => {
    const init = { tenantId: "t_1", executionId: 7, nodeId: "a", nodeType: "agent.llm", attempt: 2 };
    expect(text(encode(NodeStartedSchema, create(NodeStartedSchema, init)))).toBe(text(encode(NodeStartedSchema, init)));
  });

  it("writes a Timestamp as RFC 3339 and a Struct as a plain object", () => {
    const json = JSON.parse(text(encode(StartExecutionSchema, {
      executionId: 1,
      tenantId: "t_1",
      input: { q: "weather in Paris", opts: { units: "metric", days: [1, 2] } },
    }))) as Record<string, unknown>;
    expect(json.input).toEqual({ q: "weather in Paris", opts: { units: "metric", days: [1, 2] } });
    const ev = JSON.parse(text(encode(EVENTS["workflow.created"], {
      tenantId: "t_1",
      occurredAt: timestampFromDate(new Date("2025-03-04T05:06:07.089Z")),
      id: 3,
      name: "n",
      slug: "s",
    }))) as Record<string, unknown>;
    expect(ev.occurred_at).toBe("2025-03-04T05:06:07.089Z");
  });

  it.each<[string, Record<string, unknown>, RegExp]>([
    ["a fractional int32", { executionId: 1.5 }, /execution_id: expected an int32.*1\.5/],
    ["an int32 above 2^31-1", { executionId: 2 ** 31 }, /execution_id: expected an int32/],
    ["a number in a string field", { nodeId: 5 }, /node_id: expected a string/],
    ["a string in a bool field", { retrying: "yes" }, /retrying: expected a boolean/],
    ["a non-string in a nested message", { error: { code: 1 } }, /error\.code: expected a string/],
  ])("refuses %s", (_name, init, message) => {
    const err = caught(() => encode(NodeFailedSchema, init as never));
    expect(ContractEncodeFailed.is(err)).toBe(true);
    expect((err as Error).message).toMatch(message);
  });

  it("refuses NaN in a Struct and a Value without a kind", () => {
    expect(ContractEncodeFailed.is(caught(() => encode(StartExecutionSchema, { input: { x: NaN } })))).toBe(true);
    const err = caught(() => encode(NodeCompletedSchema, { output: { a: 1 } as never }));
    expect(ContractEncodeFailed.is(err)).toBe(true);
    expect((err as Error).message).toMatch(/output: .*valueFromJson/);
  });
});

describe("decode", () => {
  it("round-trips a command with nested Struct data", () => {
    const input = { goal: "triage", nested: { list: [1, "two", null, { deep: [true, false] }], empty: {} }, n: -3.25 };
    const back = decode(StartExecutionSchema, encode(StartExecutionSchema, {
      executionId: 9,
      tenantId: "t_9",
      workflowId: 4,
      workflowVersion: 2,
      input,
      parentExecutionId: 0,
      triggerEvent: "api",
    }));
    expect(back.input).toEqual(input);
    expect(back).toMatchObject({ executionId: 9, tenantId: "t_9", workflowId: 4, workflowVersion: 2, triggerEvent: "api" });
  });

  it("round-trips an event with a Timestamp to the nanosecond", () => {
    const ev = createEvent("node.started", { tenantId: "t_1", executionId: 1, nodeId: "n", nodeType: "agent.llm", attempt: 1 });
    ev.occurredAt = { ...ev.occurredAt!, seconds: 1_700_000_000n, nanos: 123_456_789 };
    const back = decode(NodeStartedSchema, encode(NodeStartedSchema, ev));
    expect(back.occurredAt?.seconds).toBe(1_700_000_000n);
    expect(back.occurredAt?.nanos).toBe(123_456_789);
    expect(timestampDate(back.occurredAt!).toISOString()).toBe("2023-11-14T22:13:20.123Z");
  });

  it.each<[string, JsonValue]>([
    ["an object", { answer: 42, tags: ["a", "b"], meta: { ok: true } }],
    ["an array", [1, { a: null }]],
    ["a string", "done"],
    ["a number", 3.5],
    ["a boolean", false],
    ["null", null],
  ])("round-trips a Value output holding %s", (_name, output) => {
    const back = decode(ExecutionCompletedSchema, encode(ExecutionCompletedSchema, {
      tenantId: "t_1",
      id: 5,
      agentWorkflowId: 2,
      status: "success",
      tokenUsage: { inputTokens: 10, outputTokens: 5, totalTokens: 15 },
      output: valueFromJson(output),
    }));
    expect(valueToJson(back.output)).toEqual(output);
    expect(back.tokenUsage).toMatchObject({ inputTokens: 10, outputTokens: 5, totalTokens: 15 });
  });

  it("round-trips repeated messages and a tool result with an error", () => {
    const reply = decode(MemoryQueryReplySchema, encode(MemoryQueryReplySchema, {
      entries: [
        { id: 1, agentId: 3, key: "k1", content: "c1", metadata: { score: 0.9 } },
        { id: 2, agentId: 3, key: "k2", content: "c2" },
      ],
    }));
    expect(reply.entries.map((e) => [e.id, e.key, e.metadata])).toEqual([[1, "k1", { score: 0.9 }], [2, "k2", undefined]]);
    const res = decode(ToolResultSchema, encode(ToolResultSchema, {
      callId: "c-1", ok: false, error: { code: "BATON_TOOL_TIMEOUT", message: "timed out", retryable: true }, tool: "http.get",
    }));
    expect(res.error).toMatchObject({ code: "BATON_TOOL_TIMEOUT", message: "timed out", retryable: true });
    expect(res.output).toBeUndefined();
  });

  it("ignores unknown fields and accepts lowerCamelCase names", () => {
    const msg = decode(NodeStartedSchema, bytes('{"executionId":7,"node_id":"x","added_in_v1_1":{"a":1}}'));
    expect(msg.executionId).toBe(7);
    expect(msg.nodeId).toBe("x");
  });

  it.each<[string, Uint8Array]>([
    ["invalid UTF-8", new Uint8Array([0x7b, 0xff, 0x7d])],
    ["an empty payload", new Uint8Array()],
    ["invalid JSON", bytes('{"execution_id": ')],
    ["a JSON array", bytes("[]")],
    ["JSON null", bytes("null")],
    ["a string in an int32 field", bytes('{"execution_id":"seven"}')],
    ["an out-of-range int32", bytes('{"execution_id":2147483648}')],
    ["a bad timestamp", bytes('{"occurred_at":"yesterday"}')],
    ["a number in a string field", bytes('{"node_id":12}')],
  ])("throws BATON_CONTRACTS_DECODE for %s", (_name, payload) => {
    const err = caught(() => decode(NodeStartedSchema, payload));
    expect(ContractDecodeFailed.is(err)).toBe(true);
    expect(err).toMatchObject({ code: "BATON_CONTRACTS_DECODE", status: 400, retryable: false });
    expect((err as Error).message).toContain("baton.v1.NodeStarted");
  });
});

describe("JSON helpers", () => {
  it("valueToJson gives undefined for an unset Value", () => {
    expect(valueToJson(undefined)).toBeUndefined();
  });

  it("valueFromJson refuses what JSON cannot hold", () => {
    expect(ContractEncodeFailed.is(caught(() => valueFromJson({ a: undefined } as never)))).toBe(true);
  });

  it("toJsonValue applies JSON.stringify semantics", () => {
    const data = { when: new Date("2025-01-02T03:04:05.000Z"), skip: undefined, fn: () => 1, bad: NaN, list: [undefined, 1] };
    expect(toJsonValue(data)).toEqual({ when: "2025-01-02T03:04:05.000Z", bad: null, list: [null, 1] });
    expect(ContractEncodeFailed.is(caught(() => toJsonValue(undefined)))).toBe(true);
    expect(ContractEncodeFailed.is(caught(() => toJsonValue({ n: 1n })))).toBe(true);
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    expect(ContractEncodeFailed.is(caught(() => toJsonValue(cyclic)))).toBe(true);
  });
});
