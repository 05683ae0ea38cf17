/**
 * Subject and stream names on the bus (docs/dev/contracts.md).
 *
 * | what | subject | stream |
 * |---|---|---|
 * | events | `{p}.evt.{entity}.{action}.{tenantId}.{scopeId}` | `{P}_EVENTS` |
 * | commands | `{p}.cmd.{name}` | `{P}_COMMANDS` |
 * | tool calls | `{p}.tool.{toolName}` (tool names may contain dots) | `{P}_TOOLS` |
 * | requests | `{p}.rpc.{service}.{method}` (core NATS) | — |
 */
import { InvalidBusPrefix, InvalidSubjectToken, UnknownMessageType } from "./errors.ts";
import { EVENT_ENTITIES, isCommandName, isEventType, isRpcName } from "./registry.ts";
import type { CommandName, EventEntity, EventType, RpcName } from "./registry.ts";

/** The default bus prefix (config `BATON_BUS_PREFIX`). */
export const DEFAULT_PREFIX = "baton";

/** Second tokens reserved for non-event subjects; no event entity may use them. */
export const RESERVED_TOKENS: readonly string[] = Object.freeze(["cmd", "tool", "rpc"]);

const PREFIX_RE = /^[A-Za-z0-9_-]+$/;
// A NATS subject token: not empty, no separator, no wildcard, no whitespace or control characters.
const TOKEN_RE = /^[^.*>\s\p{Cc}]+$/u;

/** Names of the subjects of one bus prefix. Build with {@link subjects}. */
export interface Subjects {
  /** The validated prefix. */
  readonly prefix: string;
  /**
   * The subject of one event: `{p}.evt.{type}.{tenantId}.{scopeId}`, e.g. `baton.evt.node.started.t_1.42`.
   * `scopeId` is the execution id for execution, node, review and learning events, the
   * workflow id for workflow and mcp events, the memory id for memory events
   * (see `eventScopeId`).
   */
  event(type: EventType, tenantId: string, scopeId: number | string): string;
  /**
   * Filters matching all events of one execution, one per execution-scoped entity:
   * `{p}.execution.*.{t}.{e}`, `{p}.node.*.{t}.{e}`, `{p}.review.*.{t}.{e}`,
   * `{p}.learning.*.{t}.{e}`. Not the single `{p}.*.*.{t}.{e}`, which would also catch
   * the workflow and memory events whose (unrelated) id happens to equal the execution id.
   */
  executionEvents(tenantId: string, executionId: number | string): readonly string[];
  /** One filter over every event of one execution (`{p}.evt.*.*.{t}.{e}`); it also matches workflow/memory events whose own id equals the execution id, which the reader drops by type. Works on servers without multi-filter consumers (NATS < 2.10). */
  executionEventsFilter(tenantId: string, executionId: number | string): string;
  /** Filter matching one event type across tenants and scopes: `{p}.{type}.*.*`. */
  eventsOfType(type: EventType): string;
  /**
   * The subjects of the events stream, one per entity: `{p}.{entity}.*.*.*`. Not one
   * `{p}.*.*.*.*`, which would overlap the tools stream (`{p}.tool.a.b.c`) and make
   * JetStream refuse one of the two streams.
   */
  allEvents(): readonly string[];
  /** The subject of a command: `{p}.cmd.{name}`, e.g. `baton.cmd.execution.start`. */
  command(name: CommandName): string;
  /** The subject of the commands stream: `{p}.cmd.>`. */
  allCommands(): string;
  /** The work-queue subject of a tool: `{p}.tool.{tool}`; dotted tool names keep their dots. */
  toolCall(tool: string): string;
  /** The subject of the tools stream: `{p}.tool.>`. */
  allToolCalls(): string;
  /** Core-NATS broadcast of `ToolCancel` to every worker: `{p}.rpc.tools.cancel` (no reply). */
  toolCancel(): string;
  /** Core-NATS stream of `TokenDelta`s of one execution: `{p}.rpc.tokens.{tenantId}.{executionId}`. */
  tokens(tenantId: string, executionId: number | string): string;
  /** The request subject of a method: `{p}.rpc.{name}`, e.g. `baton.rpc.planner.plan`. */
  rpc(name: RpcName): string;
  /** Splits an event subject of this prefix; `undefined` when it is not one. */
  parseEvent(subject: string): ParsedEventSubject | undefined;
}

/** An event subject taken apart by {@link Subjects.parseEvent}. */
export interface ParsedEventSubject {
  readonly type: EventType;
  readonly tenantId: string;
  readonly scopeId: string;
}

/** The stream names of one bus prefix. */
export interface StreamNames {
  /** `{P}_EVENTS`: limits retention. */
  readonly events: string;
  /** `{P}_COMMANDS`: work queue. */
  readonly commands: string;
  /** `{P}_TOOLS`: work queue. */
  readonly tools: string;
}

/**
 * Checks a bus prefix: one NATS token of `[A-Za-z0-9_-]`.
 * @throws `BATON_CONTRACTS_INVALID_PREFIX`
 */
export function assertPrefix(prefix: string): string {
  if (typeof prefix !== "string" || !PREFIX_RE.test(prefix)) throw InvalidBusPrefix(String(prefix));
  return prefix;
}

function token(what: string, value: string | number): string {
  if (typeof value === "number") {
    if (!Number.isSafeInteger(value) || value < 0) throw InvalidSubjectToken(what, String(value));
    return String(value);
  }
  if (typeof value !== "string" || !TOKEN_RE.test(value)) throw InvalidSubjectToken(what, String(value));
  return value;
}

function toolName(tool: string): string {
  if (typeof tool !== "string" || tool.split(".").some((t) => !TOKEN_RE.test(t))) {
    throw InvalidSubjectToken("tool name", String(tool));
  }
  return tool;
}

function eventType(type: string): EventType {
  if (!isEventType(type)) throw UnknownMessageType("event type", type);
  return type;
}

const EXECUTION_ENTITIES: readonly EventEntity[] = Object.freeze(["execution", "node", "review", "learning"]);

/**
 * Subject builders for a bus prefix.
 * @param prefix one NATS token of `[A-Za-z0-9_-]`; {@link DEFAULT_PREFIX} in production, random in tests.
 * @throws `BATON_CONTRACTS_INVALID_PREFIX` for a bad prefix. The builders throw
 *   `BATON_CONTRACTS_INVALID_SUBJECT_TOKEN` for ids or tool names that would break the
 *   subject (empty, `.`, `*`, `>`, whitespace) and `BATON_CONTRACTS_UNKNOWN_TYPE` for names
 *   outside the contract.
 * @example
 * const s = subjects("baton");
 * s.event("node.started", "t_1", 42); // "baton.node.started.t_1.42"
 * s.toolCall("github.issues.create"); // "baton.tool.github.issues.create"
 */
export function subjects(prefix: string): Subjects {
  const p = assertPrefix(prefix);
  const allEvents = Object.freeze(EVENT_ENTITIES.map((e) => `${p}.evt.${e}.*.*.*`));
  return Object.freeze({
    prefix: p,
    event: (type: EventType, tenantId: string, scopeId: number | string) =>
      `${p}.evt.${eventType(type)}.${token("tenant id", tenantId)}.${token("scope id", scopeId)}`,
    executionEvents: (tenantId: string, executionId: number | string) => {
      const t = token("tenant id", tenantId);
      const e = token("execution id", executionId);
      return Object.freeze(EXECUTION_ENTITIES.map((entity) => `${p}.evt.${entity}.*.${t}.${e}`));
    },
    executionEventsFilter: (tenantId: string, executionId: number | string) => `${p}.evt.*.*.${token("tenant id", tenantId)}.${token("execution id", executionId)}`,
    eventsOfType: (type: EventType) => `${p}.evt.${eventType(type)}.*.*`,
    allEvents: () => allEvents,
    command: (name: CommandName) => {
      if (!isCommandName(name)) throw UnknownMessageType("command", name);
      return `${p}.cmd.${name}`;
    },
    allCommands: () => `${p}.cmd.>`,
    toolCall: (tool: string) => `${p}.tool.${toolName(tool)}`,
    allToolCalls: () => `${p}.tool.>`,
    toolCancel: () => `${p}.rpc.tools.cancel`,
    tokens: (tenantId: string, executionId: number | string) => `${p}.rpc.tokens.${token("tenant id", tenantId)}.${token("execution id", executionId)}`,
    rpc: (name: RpcName) => {
      if (!isRpcName(name)) throw UnknownMessageType("rpc", name);
      return `${p}.rpc.${name}`;
    },
    parseEvent: (subject: string): ParsedEventSubject | undefined => {
      const parts = subject.split(".");
      if (parts.length !== 6 || parts[0] !== p || parts[1] !== "evt") return undefined;
      const [, , entity, action, tenantId, scopeId] = parts as [string, string, string, string, string, string];
      const type = `${entity}.${action}`;
      if (!isEventType(type) || !TOKEN_RE.test(tenantId) || !TOKEN_RE.test(scopeId)) return undefined;
      return { type, tenantId, scopeId };
    },
  });
}

/**
 * The JetStream stream names of a bus prefix: the prefix upper-cased, every character
 * other than a letter or digit turned into `_`, then `_EVENTS`, `_COMMANDS`, `_TOOLS`.
 * @example streamNames("baton-test") // { events: "BATON_TEST_EVENTS", commands: "BATON_TEST_COMMANDS", tools: "BATON_TEST_TOOLS" }
 * @throws `BATON_CONTRACTS_INVALID_PREFIX`
 */
export function streamNames(prefix: string): StreamNames {
  const P = assertPrefix(prefix).toUpperCase().replace(/[^A-Z0-9]/g, "_");
  return Object.freeze({ events: `${P}_EVENTS`, commands: `${P}_COMMANDS`, tools: `${P}_TOOLS` });
}
