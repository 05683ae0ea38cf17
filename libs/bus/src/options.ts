import type { Logger } from "@baton/telemetry";
import { BusInvalidOptions } from "./errors.ts";

/** Options of {@link connectBus}. */
export interface BusOptions {
  /** NATS server URL(s); a comma-separated string is split. @default "nats://127.0.0.1:4222" */
  servers?: string | string[];
  /**
   * First subject token(s) of every subject and the base of every stream name
   * (`baton` → `BATON_EVENTS`). Tests use a random one. @default "baton"
   */
  prefix?: string;
  /** Connection name shown by the server, e.g. "baton-executor". */
  name: string;
  /** How long the events stream keeps events. @default 604_800_000 (7 days) */
  eventsMaxAgeMs?: number;
  /** JetStream's `Nats-Msg-Id` de-duplication window on every stream. @default 120_000 (2 min) */
  duplicateWindowMs?: number;
  /** Stream replicas; 3 for a NATS cluster. @default 1 */
  replicas?: number;
  /** Logger for terms, failures and connection changes. @default createLogger("bus", "info") */
  logger?: Logger;
}

/** The three streams and their names. */
export type StreamKey = "events" | "commands" | "tools";

/** BusOptions with every default applied, validated and frozen. */
export interface CompiledBusOptions {
  readonly servers: readonly string[];
  readonly prefix: string;
  readonly name: string;
  readonly eventsMaxAgeMs: number;
  readonly duplicateWindowMs: number;
  readonly replicas: number;
  readonly logger: Logger | undefined;
  readonly streams: Readonly<Record<StreamKey, string>>;
}

export const DEFAULT_SERVERS = "nats://127.0.0.1:4222";
export const DEFAULT_PREFIX = "baton";
export const DEFAULT_EVENTS_MAX_AGE_MS = 7 * 24 * 60 * 60 * 1000;
export const DEFAULT_DUPLICATE_WINDOW_MS = 2 * 60 * 1000;

const PREFIX_RE = /^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/;

/** `baton` → `BATON`, `acme.baton-dev` → `ACME_BATON_DEV` (docs/dev/contracts.md). */
export function streamBase(prefix: string): string {
  return prefix.toUpperCase().replace(/[^A-Z0-9]/g, "_");
}

/** Stream names for a prefix: `{P}_EVENTS`, `{P}_COMMANDS`, `{P}_TOOLS`. */
export function streamNames(prefix: string): Record<StreamKey, string> {
  const base = streamBase(prefix);
  return { events: `${base}_EVENTS`, commands: `${base}_COMMANDS`, tools: `${base}_TOOLS` };
}

/** Event entities (all under `{p}.evt.>` on the events stream). */
export const EVENT_ENTITIES = ["workflow", "execution", "node", "review", "memory", "learning", "mcp"] as const;

/** The subjects each stream captures. */
export function streamSubjects(prefix: string): Record<StreamKey, string[]> {
  return {
    events: [`${prefix}.evt.>`],
    commands: [`${prefix}.cmd.>`],
    tools: [`${prefix}.tool.>`],
  };
}

function isPositiveInt(v: unknown): v is number {
  return typeof v === "number" && Number.isInteger(v) && v > 0;
}

/** Applies defaults and validates; reports every problem at once as BATON_BUS_INVALID_OPTIONS. */
export function compileBusOptions(opts: BusOptions): CompiledBusOptions {
  const problems: string[] = [];
  const rawServers = opts.servers ?? DEFAULT_SERVERS;
  const servers = (Array.isArray(rawServers) ? rawServers : rawServers.split(","))
    .map((s) => s.trim())
    .filter((s) => s !== "");
  if (servers.length === 0) problems.push("servers: at least one server URL is needed");
  const prefix = opts.prefix ?? DEFAULT_PREFIX;
  if (!PREFIX_RE.test(prefix)) problems.push(`prefix: "${prefix}" must be subject tokens of letters, digits, "_" or "-" joined by "."`);
  if (typeof opts.name !== "string" || opts.name.trim() === "") problems.push("name: a connection name is needed");
  const eventsMaxAgeMs = opts.eventsMaxAgeMs ?? DEFAULT_EVENTS_MAX_AGE_MS;
  if (!isPositiveInt(eventsMaxAgeMs)) problems.push("eventsMaxAgeMs: must be a positive integer");
  const duplicateWindowMs = opts.duplicateWindowMs ?? DEFAULT_DUPLICATE_WINDOW_MS;
  if (!isPositiveInt(duplicateWindowMs)) problems.push("duplicateWindowMs: must be a positive integer");
  else if (isPositiveInt(eventsMaxAgeMs) && duplicateWindowMs > eventsMaxAgeMs) problems.push("duplicateWindowMs: must not exceed eventsMaxAgeMs");
  const replicas = opts.replicas ?? 1;
  if (!isPositiveInt(replicas) || replicas > 5) problems.push("replicas: must be an integer from 1 to 5");
  if (problems.length > 0) throw BusInvalidOptions("BusOptions", problems, { details: problems });
  return Object.freeze({
    servers: Object.freeze(servers),
    prefix,
    name: opts.name,
    eventsMaxAgeMs,
    duplicateWindowMs,
    replicas,
    logger: opts.logger,
    streams: Object.freeze(streamNames(prefix)),
  });
}

/**
 * True when `subject` matches the NATS subject `filter` (`*` one token, `>` one or more
 * trailing tokens).
 */
export function subjectMatches(filter: string, subject: string): boolean {
  const f = filter.split(".");
  const s = subject.split(".");
  for (let i = 0; i < f.length; i++) {
    const t = f[i];
    if (t === ">") return s.length > i;
    if (i >= s.length) return false;
    if (t !== "*" && t !== s[i]) return false;
  }
  return f.length === s.length;
}

/**
 * True when every subject `filter` matches is also matched by `pattern`, i.e. a consumer
 * with that filter fits a stream taking `pattern`.
 */
export function filterWithin(filter: string, pattern: string): boolean {
  const f = filter.split(".");
  const p = pattern.split(".");
  for (let i = 0; i < p.length; i++) {
    const pt = p[i];
    if (pt === ">") return f.length > i;
    const ft = f[i];
    if (ft === undefined || ft === ">") return false;
    if (pt !== "*" && ft !== pt) return false;
  }
  return f.length === p.length;
}

const DURABLE_RE = /^[A-Za-z0-9_-]+$/;
const SUBJECT_RE = /^[^\s.*>]+(\.[^\s.*>]+)*$/;
const FILTER_RE = /^([^\s.*>]+|\*)(\.([^\s.*>]+|\*))*(\.>)?$|^>$/;

/** True for a concrete subject (no wildcards, no empty tokens, no spaces). */
export function isValidSubject(subject: string): boolean {
  return SUBJECT_RE.test(subject);
}

/** True for a subject filter (wildcards allowed, `>` only last). */
export function isValidFilter(filter: string): boolean {
  return FILTER_RE.test(filter);
}

/** True for a durable consumer name. */
export function isValidDurable(name: string): boolean {
  return DURABLE_RE.test(name);
}
