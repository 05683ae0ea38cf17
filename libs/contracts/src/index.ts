/**
 * `@baton/contracts` — Baton's wire contract: the `baton.v1` messages generated from
 * `proto/` (protobuf-es v2), the registries naming which message travels under which
 * event type / command / method, the subject and stream names, and the payload codec
 * (proto3 JSON with proto field names).
 *
 * @example
 * import { subjects, createEvent, encode, decode, EVENTS } from "@baton/contracts";
 * const s = subjects("baton");
 * const ev = createEvent("node.started", { tenantId: "t_1", executionId: 42, nodeId: "plan", nodeType: "agent.llm", attempt: 1 });
 * const subject = s.event("node.started", ev.tenantId, ev.executionId); // baton.node.started.t_1.42
 * const bytes = encode(EVENTS["node.started"], ev);
 * decode(EVENTS["node.started"], bytes).nodeId; // "plan"
 */

// Generated messages: `XSchema` descriptors and `X` message types.
export * from "./gen/baton/v1/common_pb.ts";
export * from "./gen/baton/v1/commands_pb.ts";
export * from "./gen/baton/v1/events_pb.ts";
export * from "./gen/baton/v1/rpc_pb.ts";

export {
  COMMANDS,
  commandSchema,
  createEvent,
  EVENT_ENTITIES,
  EVENT_SCOPE_FIELD,
  EVENTS,
  eventSchema,
  eventScopeId,
  isCommandName,
  isEventType,
  isRpcName,
  REGISTRY,
  RPCS,
} from "./registry.ts";
export type {
  CommandMessage,
  CommandName,
  EventEntity,
  EventInit,
  EventMessage,
  EventSchema,
  EventType,
  RpcName,
  RpcReply,
  RpcRequest,
} from "./registry.ts";

export { assertPrefix, DEFAULT_PREFIX, RESERVED_TOKENS, streamNames, subjects } from "./subjects.ts";
export type { ParsedEventSubject, StreamNames, Subjects } from "./subjects.ts";

export { decode, encode, toJsonValue, valueFromJson, valueToJson } from "./codec.ts";

export { HEADERS } from "./headers.ts";

export {
  ContractDecodeFailed,
  ContractEncodeFailed,
  InvalidBusPrefix,
  InvalidSubjectToken,
  UnknownMessageType,
} from "./errors.ts";

// The protobuf-es pieces every user of the contract needs, so services depend on this package only.
export { create, isMessage } from "@bufbuild/protobuf";
export type { DescMessage, JsonObject, JsonValue, MessageInitShape, MessageShape } from "@bufbuild/protobuf";
export { timestampDate, timestampFromDate, timestampFromMs, timestampMs, timestampNow, ValueSchema, StructSchema, TimestampSchema } from "@bufbuild/protobuf/wkt";
export type { Struct, Timestamp, Value } from "@bufbuild/protobuf/wkt";
