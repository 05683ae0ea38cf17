/**
 * Which `baton.v1` message travels under which name: event types, command names and
 * request/reply methods.
 */
import { create, createRegistry } from "@bufbuild/protobuf";
import type { DescMessage, MessageInitShape, MessageShape, Registry } from "@bufbuild/protobuf";
import { file_google_protobuf_struct, file_google_protobuf_timestamp, timestampNow } from "@bufbuild/protobuf/wkt";
import { file_baton_v1_common } from "./gen/baton/v1/common_pb.ts";
import {
  CancelExecutionSchema,
  ChildPausedSchema,
  ChildResultSchema,
  ContinueExecutionSchema,
  ExecutionTimerSchema,
  file_baton_v1_commands,
  ResumeExecutionSchema,
  StartExecutionSchema,
  ToolResultSchema,
} from "./gen/baton/v1/commands_pb.ts";
import {
  ExecutionCancelledSchema,
  ExecutionCompletedSchema,
  ExecutionEmittedSchema,
  ExecutionFailedSchema,
  ExecutionPausedSchema,
  ExecutionResumedSchema,
  ExecutionStartedSchema,
  file_baton_v1_events,
  LearningSequenceRecordedSchema,
  McpGeneratedSchema,
  MemoryCreatedSchema,
  MemoryDeletedSchema,
  NodeCompletedSchema,
  NodeFailedSchema,
  NodeProgressSchema,
  NodeSkippedSchema,
  NodeStartedSchema,
  ReviewCreatedSchema,
  ReviewResolvedSchema,
  WorkflowCreatedSchema,
  WorkflowDeletedSchema,
  WorkflowUpdatedSchema,
} from "./gen/baton/v1/events_pb.ts";
import {
  file_baton_v1_rpc,
  MemoryQueryReplySchema,
  MemoryQuerySchema,
  PlanReplySchema,
  PlanRequestSchema,
} from "./gen/baton/v1/rpc_pb.ts";
import { UnknownMessageType } from "./errors.ts";

/**
 * Every event type (`entity.action`, the `baton-type` header and the subject's second
 * and third tokens) and the schema of its payload.
 */
export const EVENTS = Object.freeze({
  "workflow.created": WorkflowCreatedSchema,
  "workflow.updated": WorkflowUpdatedSchema,
  "workflow.deleted": WorkflowDeletedSchema,
  "execution.started": ExecutionStartedSchema,
  "execution.completed": ExecutionCompletedSchema,
  "execution.failed": ExecutionFailedSchema,
  "execution.paused": ExecutionPausedSchema,
  "execution.resumed": ExecutionResumedSchema,
  "execution.cancelled": ExecutionCancelledSchema,
  "execution.emitted": ExecutionEmittedSchema,
  "node.started": NodeStartedSchema,
  "node.completed": NodeCompletedSchema,
  "node.failed": NodeFailedSchema,
  "node.skipped": NodeSkippedSchema,
  "node.progress": NodeProgressSchema,
  "review.created": ReviewCreatedSchema,
  "review.resolved": ReviewResolvedSchema,
  "memory.created": MemoryCreatedSchema,
  "memory.deleted": MemoryDeletedSchema,
  "learning.sequence": LearningSequenceRecordedSchema,
  "mcp.generated": McpGeneratedSchema,
});

/** An event type such as `"node.started"`. */
export type EventType = keyof typeof EVENTS;
/** The schema of an event type's payload. */
export type EventSchema<T extends EventType> = (typeof EVENTS)[T];
/** The payload message of an event type. */
export type EventMessage<T extends EventType> = MessageShape<EventSchema<T>>;
/** A payload init (plain object, camelCase fields) of an event type. */
export type EventInit<T extends EventType> = MessageInitShape<EventSchema<T>>;

/** The entity part of an event type, e.g. `"node"`. */
export type EventEntity = EventType extends `${infer E}.${string}` ? E : never;

/** The entities of all event types, each once, in registry order. */
export const EVENT_ENTITIES: readonly EventEntity[] = Object.freeze([
  ...new Set(Object.keys(EVENTS).map((t) => t.slice(0, t.indexOf(".")) as EventEntity)),
]);

type IntFields<M> = { [K in keyof M]-?: M[K] extends number ? K : never }[keyof M];

/**
 * The payload field (protobuf-es local name) whose value is an event's scope id, the
 * subject's last token: the execution id for execution, node, review and learning
 * events, the workflow id for workflow and mcp events, the memory id for memory events.
 */
export const EVENT_SCOPE_FIELD: { readonly [T in EventType]: IntFields<EventMessage<T>> } = Object.freeze({
  "workflow.created": "id",
  "workflow.updated": "id",
  "workflow.deleted": "id",
  "execution.started": "id",
  "execution.completed": "id",
  "execution.failed": "id",
  "execution.paused": "id",
  "execution.resumed": "id",
  "execution.cancelled": "id",
  "execution.emitted": "id",
  "node.started": "executionId",
  "node.completed": "executionId",
  "node.failed": "executionId",
  "node.skipped": "executionId",
  "node.progress": "executionId",
  "review.created": "executionId",
  "review.resolved": "executionId",
  "memory.created": "id",
  "memory.deleted": "id",
  "learning.sequence": "executionId",
  "mcp.generated": "agentWorkflowId",
});

/** Every command name (subject `{p}.cmd.{name}`) and the schema of its payload. */
export const COMMANDS = Object.freeze({
  "execution.start": StartExecutionSchema,
  "execution.resume": ResumeExecutionSchema,
  "execution.cancel": CancelExecutionSchema,
  "execution.timer": ExecutionTimerSchema,
  "execution.child_result": ChildResultSchema,
  "execution.child_paused": ChildPausedSchema,
  "execution.continue": ContinueExecutionSchema,
  "tool.result": ToolResultSchema,
});

/** A command name such as `"execution.start"`. */
export type CommandName = keyof typeof COMMANDS;
/** The payload message of a command. */
export type CommandMessage<N extends CommandName> = MessageShape<(typeof COMMANDS)[N]>;

/** Every request/reply method (subject `{p}.rpc.{name}`, core NATS) and its request and reply schemas. */
export const RPCS = Object.freeze({
  "planner.plan": Object.freeze({ request: PlanRequestSchema, reply: PlanReplySchema }),
  "memory.query": Object.freeze({ request: MemoryQuerySchema, reply: MemoryQueryReplySchema }),
});

/** A request/reply method name such as `"planner.plan"`. */
export type RpcName = keyof typeof RPCS;
/** The request message of a method. */
export type RpcRequest<N extends RpcName> = MessageShape<(typeof RPCS)[N]["request"]>;
/** The reply message of a method. */
export type RpcReply<N extends RpcName> = MessageShape<(typeof RPCS)[N]["reply"]>;

/**
 * All `baton.v1` messages (and the well-known types they use) by fully-qualified name,
 * e.g. `REGISTRY.getMessage("baton.v1.NodeStarted")` for the `baton-schema` header.
 */
export const REGISTRY: Registry = createRegistry(
  file_google_protobuf_struct,
  file_google_protobuf_timestamp,
  file_baton_v1_common,
  file_baton_v1_commands,
  file_baton_v1_events,
  file_baton_v1_rpc,
);

/** True when `type` is an event type of the contract. */
export function isEventType(type: string): type is EventType {
  return Object.hasOwn(EVENTS, type);
}

/** True when `name` is a command name of the contract. */
export function isCommandName(name: string): name is CommandName {
  return Object.hasOwn(COMMANDS, name);
}

/** True when `name` is a request/reply method of the contract. */
export function isRpcName(name: string): name is RpcName {
  return Object.hasOwn(RPCS, name);
}

/**
 * The schema of an event type, for types known only at run time (e.g. from the
 * `baton-type` header).
 * @throws `BATON_CONTRACTS_UNKNOWN_TYPE` when the type is not in {@link EVENTS}.
 */
export function eventSchema<T extends EventType>(type: T | string): EventSchema<T> {
  if (!isEventType(type)) throw UnknownMessageType("event type", type);
  return EVENTS[type] as EventSchema<T>;
}

/**
 * The schema of a command, for names known only at run time.
 * @throws `BATON_CONTRACTS_UNKNOWN_TYPE` when the name is not in {@link COMMANDS}.
 */
export function commandSchema<N extends CommandName>(name: N | string): (typeof COMMANDS)[N] {
  if (!isCommandName(name)) throw UnknownMessageType("command", name);
  return COMMANDS[name] as (typeof COMMANDS)[N];
}

/**
 * Builds an event payload; `occurredAt` defaults to now.
 * @example
 * const ev = createEvent("node.started", { tenantId: "t_1", executionId: 42, nodeId: "plan", nodeType: "agent.llm", attempt: 1 });
 */
export function createEvent<T extends EventType>(type: T, init: EventInit<T>): EventMessage<T> {
  const schema: DescMessage = eventSchema(type);
  const msg = create(schema, init as MessageInitShape<DescMessage>) as EventMessage<T>;
  if (msg.occurredAt === undefined) msg.occurredAt = timestampNow();
  return msg;
}

/** The scope id of an event payload: the last token of its subject (see {@link EVENT_SCOPE_FIELD}). */
export function eventScopeId<T extends EventType>(type: T, message: EventMessage<T>): number {
  const field = EVENT_SCOPE_FIELD[type];
  return message[field] as number;
}
