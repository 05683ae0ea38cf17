/**
 * @baton/messaging — the typed face of the bus: events, commands, tool calls and
 * requests named by the contract (`@baton/contracts`), encoded as its messages and
 * carried by `@baton/bus` with tenant, type, schema and idempotency headers.
 */
import type { Bus, BusMessage, ConsumerSpec, Subscription } from "@baton/bus";
import {
  COMMANDS, EVENTS, RPCS, ToolCallSchema, createEvent, decode, encode, eventScopeId, isCommandName, subjects as makeSubjects,
} from "@baton/contracts";
import type {
  CommandName, EventInit, EventMessage, EventType, JsonValue, MessageInitShape, RpcName, RpcReply, RpcRequest, Subjects,
} from "@baton/contracts";
import { defineError } from "@baton/errors";

export const UnexpectedSubject = defineError("BATON_MESSAGING_UNEXPECTED_SUBJECT", (subject: string) => `no contract message is carried on "${subject}"`, { status: 400 });
/**
 * A command on the commands subject whose kind this process does not know: most likely sent by
 * a newer Baton while an upgrade is under way. Retryable, so the commands consumer hands it
 * back (nak) for a process that knows it instead of terminating it; after the consumer's last
 * delivery it is terminated like any other failure.
 */
export const UnknownCommand = defineError(
  "BATON_MESSAGING_UNKNOWN_COMMAND",
  (name: string) => `the command "${name}" is not one this process knows (sent by a newer version?); left for another consumer`,
  { status: 400, retryable: true },
);
/** How long an unknown command waits before it is offered again (ConsumerSpec.maxDeliver bounds the tries). */
export const UNKNOWN_COMMAND_RETRY_MS = 15_000;
export const RemoteError = defineError("BATON_MESSAGING_REMOTE_ERROR", (code: string, message: string) => `${code}: ${message}`, { status: 502 });

export type CommandInit<N extends CommandName> = MessageInitShape<(typeof COMMANDS)[N]>;
export type AnyCommand = { [N in CommandName]: { name: N; message: ReturnType<typeof decode<(typeof COMMANDS)[N]>> } }[CommandName];
export type AnyEvent = { [T in EventType]: { type: T; message: EventMessage<T> } }[EventType];

export type ToolCallInit = MessageInitShape<typeof ToolCallSchema> & { tool: string; callId: string; tenantId: string };

export type ConsumeOptions = Omit<ConsumerSpec, "stream" | "filterSubjects" | "durable">;

/**
 * The record of a tool call's result, JSON in the KV bucket {@link RESULTS_BUCKET} under
 * {@link resultKey}: written by the worker that ran the call (first record wins), read by a
 * worker that gets the call again and by the executor for a call it finds it sent before.
 */
export interface RecordedToolResult {
  ok: boolean;
  output?: JsonValue;
  error?: { code: string; message: string; retryable: boolean };
  durationMs: number;
  workerId: string;
}

/** The KV bucket of tool call results (`{prefix}_tool_results`). */
export const RESULTS_BUCKET = "tool_results";
const KV_KEY_RE = /^[A-Za-z0-9_=/-]+(\.[A-Za-z0-9_=/-]+)*$/;

/** The KV key of a call's result: the call id when it is a valid key, else `b64.{base64url}`. */
export function resultKey(callId: string): string {
  return KV_KEY_RE.test(callId) ? callId : `b64.${Buffer.from(callId).toString("base64url")}`;
}

export interface Messaging {
  readonly bus: Bus;
  readonly subjects: Subjects;
  /** Publishes an event on `{p}.{type}.{tenant}.{scope}`. */
  publishEvent<T extends EventType>(type: T, init: EventInit<T>, idempotencyKey?: string): Promise<void>;
  /**
   * Sends a command on `{p}.cmd.{name}`; the key de-duplicates resends. `duplicate`: the
   * commands stream already had this key (within its duplicate window), so this send added nothing.
   */
  sendCommand<N extends CommandName>(name: N, init: CommandInit<N>, idempotencyKey: string): Promise<{ duplicate: boolean }>;
  /**
   * Puts a tool call on the tool's work queue; the call id is its idempotency key.
   * `duplicate`: the queue already had this call id (within the stream's duplicate window),
   * so this send added nothing.
   */
  callTool(init: ToolCallInit): Promise<{ duplicate: boolean }>;
  /**
   * The recorded result of a tool call and when it was recorded (by the NATS server's clock),
   * or null when no worker has recorded one (yet).
   */
  recordedToolResult(callId: string): Promise<{ result: RecordedToolResult; recordedAt: Date } | null>;
  /**
   * Records a tool call's result unless one is recorded already (a worker's record is never
   * replaced): true when this one was written. For an answer whose worker may not have
   * recorded it, so that the call, when sent again, is answered with it.
   */
  recordToolResult(callId: string, result: RecordedToolResult): Promise<boolean>;
  /**
   * The ids of the tool calls the tools queue still holds (waiting for a worker, or taken and not
   * acked yet), or undefined when it holds more than `limit`. A worker acks a call only once
   * its answer is recorded and sent, so a call neither held nor recorded was taken by a worker
   * that went away without answering (or dropped by the stream). One request per call held.
   */
  queuedToolCalls(limit: number): Promise<Set<string> | undefined>;
  /**
   * Consumes the commands stream. A command of a kind this process does not know (a newer
   * Baton's, during an upgrade) is handed back every {@link UNKNOWN_COMMAND_RETRY_MS} for a
   * process that knows it, until the consumer's `maxDeliver`; it never reaches `handler`.
   */
  consumeCommands(durable: string, handler: (cmd: AnyCommand, msg: BusMessage) => Promise<void>, opts?: ConsumeOptions): Promise<Subscription>;
  consumeEvents(durable: string, types: readonly EventType[], handler: (ev: AnyEvent, msg: BusMessage) => Promise<void>, opts?: ConsumeOptions): Promise<Subscription>;
  request<N extends RpcName>(name: N, init: MessageInitShape<(typeof RPCS)[N]["request"]>, timeoutMs?: number): Promise<RpcReply<N>>;
  serve<N extends RpcName>(name: N, handler: (req: RpcRequest<N>) => Promise<MessageInitShape<(typeof RPCS)[N]["reply"]>>): Promise<Subscription>;
}

const utf8 = new TextDecoder();

export function createMessaging(bus: Bus): Messaging {
  const s = makeSubjects(bus.prefix);
  const cmdPrefix = `${bus.prefix}.cmd.`;

  const decodeEvent = (msg: BusMessage): AnyEvent => {
    const parsed = s.parseEvent(msg.subject);
    if (!parsed) throw UnexpectedSubject(msg.subject);
    return { type: parsed.type, message: decode(EVENTS[parsed.type], msg.data) } as AnyEvent;
  };

  return {
    bus,
    subjects: s,
    async publishEvent(type, init, idempotencyKey) {
      const ev = createEvent(type, init);
      const schema = EVENTS[type];
      await bus.publish(s.event(type, ev.tenantId, eventScopeId(type, ev)), encode(schema, ev as never), {
        tenantId: ev.tenantId,
        type,
        schema: schema.typeName,
        ...(idempotencyKey ? { idempotencyKey } : {}),
      });
    },
    async sendCommand(name, init, idempotencyKey) {
      const schema = COMMANDS[name];
      const { duplicate } = await bus.publish(s.command(name), encode(schema, init as never), {
        tenantId: (init as { tenantId?: string }).tenantId ?? "",
        type: name,
        schema: schema.typeName,
        idempotencyKey,
      });
      return { duplicate };
    },
    async callTool(init) {
      const { duplicate } = await bus.publish(s.toolCall(init.tool), encode(ToolCallSchema, init), {
        tenantId: init.tenantId,
        type: "tool.call",
        schema: ToolCallSchema.typeName,
        idempotencyKey: init.callId,
      });
      return { duplicate };
    },
    async recordedToolResult(callId) {
      const entry = await bus.kvGet(RESULTS_BUCKET, resultKey(callId));
      if (entry === null || entry.value.length === 0) return null;
      return { result: JSON.parse(utf8.decode(entry.value)) as RecordedToolResult, recordedAt: entry.storedAt };
    },
    recordToolResult(callId, result) {
      return bus.kvCreate(RESULTS_BUCKET, resultKey(callId), new TextEncoder().encode(JSON.stringify(result)));
    },
    queuedToolCalls(limit) {
      return bus.heldMessageIds("tools", limit);
    },
    consumeCommands(durable, handler, opts = {}) {
      return bus.consume({ ...opts, stream: "commands", durable, filterSubjects: [s.allCommands()] }, async (msg) => {
        const name = msg.subject.startsWith(cmdPrefix) ? msg.subject.slice(cmdPrefix.length) : "";
        if (!isCommandName(name)) throw name === "" ? UnexpectedSubject(msg.subject) : UnknownCommand(name, { retryDelayMs: UNKNOWN_COMMAND_RETRY_MS });
        await handler({ name, message: decode(COMMANDS[name], msg.data) } as AnyCommand, msg);
      });
    },
    consumeEvents(durable, types, handler, opts = {}) {
      return bus.consume({ ...opts, stream: "events", durable, filterSubjects: types.map((t) => s.eventsOfType(t)) }, async (msg) => {
        await handler(decodeEvent(msg), msg);
      });
    },
    async request(name, init, timeoutMs) {
      const rpc = RPCS[name];
      const reply = await bus.request(s.rpc(name), encode(rpc.request, init as never), {
        ...(timeoutMs ? { timeoutMs } : {}),
        meta: { tenantId: (init as { tenantId?: string }).tenantId ?? "", type: name, schema: rpc.request.typeName },
      });
      const code = reply.meta.headers["baton-error-code"];
      if (code) throw RemoteError(code, reply.meta.headers["baton-error-message"] ?? "");
      return decode(rpc.reply, reply.data) as RpcReply<typeof name>;
    },
    serve(name, handler) {
      const rpc = RPCS[name];
      return bus.serve(s.rpc(name), async (msg) => {
        const req = decode(rpc.request, msg.data) as RpcRequest<typeof name>;
        const reply = await handler(req);
        return { data: encode(rpc.reply, reply as never) };
      });
    },
  };
}

/** Decodes an event a subscriber received (e.g. from `bus.replay`). */
export function decodeEventMessage(prefix: string, msg: Pick<BusMessage, "subject" | "data">): AnyEvent | undefined {
  const parsed = makeSubjects(prefix).parseEvent(msg.subject);
  if (!parsed) return undefined;
  return { type: parsed.type, message: decode(EVENTS[parsed.type], msg.data) } as AnyEvent;
}
