import { context, trace } from "@opentelemetry/api";

/** Log levels, lowest first. `silent` writes nothing. */
export type LogLevel = "debug" | "info" | "warn" | "error";

const LEVELS: Record<LogLevel | "silent", number> = { debug: 10, info: 20, warn: 30, error: 40, silent: 100 };

/** Structured fields of one log line. Errors are written as `{ name, message, code, ... }`. */
export type LogFields = Record<string, unknown>;

/** A JSON-lines logger; one object per line with `time`, `level`, `name`, `msg`, then fields. */
export interface Logger {
  readonly name: string;
  readonly level: LogLevel | "silent";
  debug(msg: string, fields?: LogFields): void;
  info(msg: string, fields?: LogFields): void;
  warn(msg: string, fields?: LogFields): void;
  error(msg: string, fields?: LogFields): void;
  /** True when a line of `level` would be written. */
  isLevelEnabled(level: LogLevel): boolean;
  /** A logger writing the same way with `bindings` added to every line. */
  child(bindings: LogFields): Logger;
}

export interface LoggerOptions {
  /** Where each line (without the newline) goes. @default a write to process.stderr */
  write?: (line: string) => void;
  /** Fields added to every line. @default {} */
  bindings?: LogFields;
  /** Time source. @default () => new Date() */
  now?: () => Date;
}

const CORE_KEYS = new Set(["time", "level", "name", "msg", "trace_id", "span_id"]);

/** True for the strings accepted as a level (including `silent`). */
export function isLogLevel(value: unknown): value is LogLevel | "silent" {
  return typeof value === "string" && Object.hasOwn(LEVELS, value);
}

function serializeError(err: Error, depth: number): Record<string, unknown> {
  const out: Record<string, unknown> = { name: err.name, message: err.message };
  const e = err as Error & { code?: unknown; status?: unknown; retryable?: unknown; details?: unknown };
  if (e.code !== undefined) out.code = e.code;
  if (typeof e.status === "number") out.status = e.status;
  if (typeof e.retryable === "boolean") out.retryable = e.retryable;
  if (e.details !== undefined) out.details = e.details;
  // Baton errors (string code + numeric status) are expected outcomes; a stack only helps for the rest.
  if (!(typeof e.code === "string" && typeof e.status === "number") && err.stack !== undefined) out.stack = err.stack;
  if (err.cause !== undefined && depth < 3) out.cause = err.cause instanceof Error ? serializeError(err.cause, depth + 1) : err.cause;
  return out;
}

function stringify(record: Record<string, unknown>): string {
  const seen = new WeakSet<object>();
  return JSON.stringify(record, (_key, value: unknown) => {
    if (typeof value === "bigint") return value.toString();
    if (value instanceof Error) return serializeError(value, 0);
    if (typeof value === "object" && value !== null) {
      if (seen.has(value)) return "[Circular]";
      seen.add(value);
    }
    return value;
  });
}

const stderrWrite = (line: string): void => {
  process.stderr.write(`${line}\n`);
};

/**
 * Creates a logger writing JSON lines (to stderr by default). Lines written inside an
 * active span carry its `trace_id` and `span_id`.
 * @param level @default "info"
 */
export function createLogger(name: string, level: LogLevel | "silent" = "info", options: LoggerOptions = {}): Logger {
  const write = options.write ?? stderrWrite;
  const now = options.now ?? (() => new Date());
  const threshold = LEVELS[level];
  const bindings = options.bindings ?? {};

  const log = (lvl: LogLevel, msg: string, fields: LogFields | undefined): void => {
    if (LEVELS[lvl] < threshold) return;
    const record: Record<string, unknown> = { time: now().toISOString(), level: lvl, name, msg };
    const sc = trace.getSpanContext(context.active());
    if (sc !== undefined && trace.isSpanContextValid(sc)) {
      record.trace_id = sc.traceId;
      record.span_id = sc.spanId;
    }
    for (const source of [bindings, fields ?? {}]) {
      for (const [k, v] of Object.entries(source)) {
        if (v === undefined) continue;
        record[CORE_KEYS.has(k) ? `field_${k}` : k] = v;
      }
    }
    try {
      write(stringify(record));
    } catch {
      // A log line must never break the caller.
    }
  };

  return {
    name,
    level,
    debug: (msg, fields) => log("debug", msg, fields),
    info: (msg, fields) => log("info", msg, fields),
    warn: (msg, fields) => log("warn", msg, fields),
    error: (msg, fields) => log("error", msg, fields),
    isLevelEnabled: (lvl) => LEVELS[lvl] >= threshold,
    child: (extra) => createLogger(name, level, { write, now, bindings: { ...bindings, ...extra } }),
  };
}
