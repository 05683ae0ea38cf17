/**
 * The one place where Prisma and `pg` errors become catalogue errors. Errors are
 * recognised by their `code`/`name`, never with `instanceof` (the client is generated
 * per schema and the runtime may be loaded twice).
 */
import { BatonError, errorMessage, hasCode } from "@baton/errors";
import {
  StoreConflict,
  StoreInvalidInput,
  StoreNotFound,
  StoreQueryFailed,
  StoreTxConflict,
  StoreUnavailable,
  SchemaNotMigrated,
} from "./errors.ts";

/** What the failing operation was about, for messages of not-found and conflict errors. */
export interface ErrorContext {
  entity?: string;
  id?: string | number;
  /** Turns a unique violation into a more specific error (e.g. a taken slug); return undefined to fall back. */
  onUnique?: (constraint: string) => BatonError | undefined;
}

interface DriverCause {
  kind?: string;
  originalCode?: string;
  code?: string;
  originalMessage?: string;
  message?: string;
  constraint?: { index?: string; fields?: string[] };
}

const UNAVAILABLE_PRISMA = new Set(["P1001", "P1002", "P1003", "P1008", "P1010", "P1011", "P1017", "P2024", "P2037"]);
const UNAVAILABLE_KINDS = new Set([
  "DatabaseNotReachable",
  "DatabaseDoesNotExist",
  "DatabaseAccessDenied",
  "AuthenticationFailed",
  "ConnectionClosed",
  "SocketTimeout",
  "TooManyConnections",
  "TlsConnectionError",
]);
const NETWORK_CODES = new Set(["ECONNREFUSED", "ECONNRESET", "ETIMEDOUT", "EHOSTUNREACH", "ENETUNREACH", "ENOTFOUND", "EPIPE", "EAI_AGAIN"]);

function field<T>(err: unknown, key: string): T | undefined {
  return typeof err === "object" && err !== null ? ((err as Record<string, unknown>)[key] as T | undefined) : undefined;
}

function driverCause(err: unknown): DriverCause | undefined {
  const meta = field<Record<string, unknown>>(err, "meta");
  const dae = meta?.["driverAdapterError"] as { cause?: DriverCause } | undefined;
  return dae?.cause;
}

/** A Postgres SQLSTATE that means the server or connection is unusable right now. */
function isUnavailableSqlState(code: string | undefined): boolean {
  if (code === undefined) return false;
  return code.startsWith("08") || code === "57P01" || code === "57P02" || code === "57P03" || code === "53300" || code === "3D000" || code === "28P01" || code === "28000";
}

function constraintName(err: unknown, cause: DriverCause | undefined): string {
  const fromCause = cause?.constraint?.index ?? cause?.constraint?.fields?.join(",");
  if (fromCause) return fromCause;
  const pgConstraint = field<string>(err, "constraint");
  if (pgConstraint) return pgConstraint;
  const target = field<Record<string, unknown>>(err, "meta")?.["target"];
  return Array.isArray(target) ? target.join(",") : typeof target === "string" ? target : "";
}

/**
 * Maps any error thrown by Prisma or `pg` to a catalogue error. Baton errors pass
 * through unchanged.
 */
export function toStoreError(err: unknown, ctx: ErrorContext = {}): BatonError {
  if (hasCode(err)) return err;
  const name = field<string>(err, "name") ?? "";
  const code = field<string>(err, "code");
  const cause = driverCause(err);
  const sqlState = cause?.originalCode ?? cause?.code ?? (name === "error" || name === "DatabaseError" ? code : undefined);
  const what = ctx.entity ? `${ctx.entity}${ctx.id === undefined ? "" : ` ${ctx.id}`}` : "row";

  if (
    name === "PrismaClientInitializationError" ||
    (code !== undefined && (UNAVAILABLE_PRISMA.has(code) || NETWORK_CODES.has(code))) ||
    (cause?.kind !== undefined && UNAVAILABLE_KINDS.has(cause.kind)) ||
    isUnavailableSqlState(sqlState) ||
    /Connection terminated|connection timeout|timeout exceeded when trying to connect|Client has encountered a connection error/i.test(errorMessage(err))
  ) {
    return StoreUnavailable(unavailableDetail(err, cause?.kind ?? code, cause?.originalMessage), { cause: err });
  }
  if (code === "P2002" || sqlState === "23505") {
    const constraint = constraintName(err, cause);
    return ctx.onUnique?.(constraint) ?? StoreConflict(`${ctx.entity ?? "row"} (${constraint || "unique key"})`, { cause: err });
  }
  if (code === "P2003" || sqlState === "23503") {
    return StoreNotFound(ctx.entity ?? "referenced row", ctx.id ?? constraintName(err, cause), { cause: err });
  }
  if (code === "P2025" || code === "P2001" || code === "P2015" || code === "P2018") {
    return StoreNotFound(ctx.entity ?? "row", ctx.id ?? "", { cause: err });
  }
  if (code === "P2034" || sqlState === "40001" || sqlState === "40P01") {
    return StoreTxConflict({ cause: err });
  }
  if (code === "P2021" || code === "P2022" || sqlState === "42P01" || sqlState === "42703" || sqlState === "3F000") {
    return SchemaNotMigrated(cause?.originalMessage ?? errorMessage(err), { cause: err });
  }
  if (
    name === "PrismaClientValidationError" ||
    sqlState === "23514" || sqlState === "23502" || sqlState === "22001" || sqlState === "22003" || sqlState === "22P02" || sqlState === "22P05" ||
    code === "P2000" || code === "P2005" || code === "P2006" || code === "P2007" || code === "P2011" || code === "P2012" || code === "P2019" || code === "P2020" || code === "P2033"
  ) {
    return StoreInvalidInput(`${what}: ${cause?.originalMessage ?? firstLine(errorMessage(err))}`, { cause: err });
  }
  return StoreQueryFailed(cause?.originalMessage ?? firstLine(errorMessage(err)), { cause: err });
}

/**
 * Why the server cannot be used, in its own words with the code after them
 * (`database "baton" does not exist (3D000)`), so that an operator need not look the code up.
 */
function unavailableDetail(err: unknown, tag: string | undefined, serverMessage: string | undefined): string {
  const why = serverMessage ?? firstLine(errorMessage(err));
  if (!why) return tag ?? "unknown reason";
  return tag && !why.includes(tag) ? `${why} (${tag})` : why;
}

function firstLine(message: string): string {
  const lines = message.split("\n").map((l) => l.trim()).filter((l) => l.length > 0 && !l.startsWith("Invalid `"));
  return lines[lines.length - 1] ?? message;
}

/** Runs `fn`, mapping whatever it throws with {@link toStoreError}. */
export async function guard<T>(ctx: ErrorContext, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw toStoreError(err, ctx);
  }
}
