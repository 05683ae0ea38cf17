/**
 * Input checks and JSON conversions shared by the repositories. The store checks what
 * it writes even though the gateway validates requests: internal callers (executor,
 * learner) write too, and a bad value must be a 400, never a 500.
 */
import { createHash } from "node:crypto";
import type { Pool, PoolClient } from "pg";
import { guard } from "./db-errors.ts";
import { Prisma } from "./generated/client.ts";
import { StoreInvalidInput } from "./errors.ts";
import type { ExecutionStatus, JsonObject, JsonValue, McpServerStatus, ReviewDecisionStatus, ReviewStatus, Role } from "./types.ts";

export const ROLES: readonly Role[] = ["admin", "operator", "viewer"];
export const EXECUTION_STATUSES: readonly ExecutionStatus[] = ["queued", "running", "paused", "completed", "failed", "cancelled"];
export const REVIEW_STATUSES: readonly ReviewStatus[] = ["pending", "approved", "edited", "rejected"];
export const MCP_STATUSES: readonly McpServerStatus[] = ["active", "disabled"];
export const REVIEW_DECISIONS: readonly ReviewDecisionStatus[] = ["approved", "edited", "rejected"];

const INT4_MAX = 2_147_483_647;

/** True for a value that can be a serial id; anything else cannot match a row. */
export function isDbId(id: unknown): id is number {
  return typeof id === "number" && Number.isInteger(id) && id >= 1 && id <= INT4_MAX;
}

export function requireId(name: string, id: unknown): number {
  if (!isDbId(id)) throw StoreInvalidInput(`${name} must be an integer between 1 and ${INT4_MAX}`);
  return id;
}

export function optionalInt(name: string, v: unknown, min = 0): number | null | undefined {
  if (v === undefined || v === null) return v;
  if (typeof v !== "number" || !Number.isInteger(v) || v < min || v > INT4_MAX) {
    throw StoreInvalidInput(`${name} must be an integer between ${min} and ${INT4_MAX}`);
  }
  return v;
}

export function requireTenantId(tenantId: unknown): string {
  if (typeof tenantId !== "string" || tenantId.length === 0 || tenantId.length > 100) {
    throw StoreInvalidInput("tenantId must be a non-empty string of at most 100 characters");
  }
  return tenantId;
}

export function requireText(name: string, v: unknown, opts: { max?: number; allowEmpty?: boolean } = {}): string {
  const max = opts.max ?? 10_000;
  if (typeof v !== "string" || (!opts.allowEmpty && v.trim().length === 0) || v.length > max) {
    throw StoreInvalidInput(`${name} must be a ${opts.allowEmpty ? "" : "non-empty "}string of at most ${max} characters`);
  }
  if (v.includes("\u0000")) throw StoreInvalidInput(`${name} must not contain NUL characters`);
  return v;
}

export function oneOf<T extends string>(name: string, v: unknown, allowed: readonly T[]): T {
  if (typeof v !== "string" || !(allowed as readonly string[]).includes(v)) {
    throw StoreInvalidInput(`${name} must be one of ${allowed.join(", ")}`);
  }
  return v as T;
}

export function page(opts: { limit?: number; offset?: number } | undefined, defaultLimit = 100, maxLimit = 1000): { take: number; skip: number } {
  const limit = opts?.limit ?? defaultLimit;
  const offset = opts?.offset ?? 0;
  if (!Number.isInteger(limit) || limit < 1 || limit > maxLimit) throw StoreInvalidInput(`limit must be an integer between 1 and ${maxLimit}`);
  if (!Number.isInteger(offset) || offset < 0 || offset > INT4_MAX) throw StoreInvalidInput("offset must be a non-negative integer");
  return { take: limit, skip: offset };
}

export function isJsonObject(v: unknown): v is JsonObject {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** Checks that `v` survives a JSON round trip (no functions, NaN, cycles, bigint, NUL in strings). */
export function requireJson(name: string, v: unknown): JsonValue {
  try {
    const text = JSON.stringify(v);
    if (text === undefined) throw new Error("not JSON");
    // Postgres jsonb rejects \u0000 in strings.
    if (text.includes("\\u0000")) throw StoreInvalidInput(`${name} must not contain NUL characters`);
  } catch (err) {
    if (StoreInvalidInput.is(err)) throw err;
    throw StoreInvalidInput(`${name} must be JSON-serialisable`);
  }
  if (typeof v === "number" && !Number.isFinite(v)) throw StoreInvalidInput(`${name} must be a finite number`);
  return v as JsonValue;
}

export function requireJsonObject(name: string, v: unknown): JsonObject {
  if (!isJsonObject(v)) throw StoreInvalidInput(`${name} must be a JSON object`);
  return requireJson(name, v) as JsonObject;
}

/** Value for a NOT NULL jsonb column (a JSON `null` is stored as the JSON literal). */
export function jsonIn(v: JsonValue): Prisma.InputJsonValue | typeof Prisma.JsonNull {
  return v === null ? Prisma.JsonNull : v;
}

/** Value for a nullable jsonb column: `null` becomes SQL NULL, `undefined` leaves the column alone. */
export function nullableJsonIn(v: JsonValue | null | undefined): Prisma.InputJsonValue | typeof Prisma.DbNull | undefined {
  if (v === undefined) return undefined;
  return v === null ? Prisma.DbNull : v;
}

/** Reads a jsonb column that holds an object; anything else reads as `{}`. */
export function objectOut(v: unknown): JsonObject {
  return isJsonObject(v) ? v : {};
}

/** A map of names to database ids (an execution row's `subRunPauses`); `name` for the error. */
export function requireIdMap(name: string, v: unknown): Record<string, number> {
  if (!isJsonObject(v)) throw StoreInvalidInput(`${name} must be a JSON object`);
  for (const [k, id] of Object.entries(v)) if (!isDbId(id)) throw StoreInvalidInput(`${name}.${k} must be a positive integer id`);
  return v as Record<string, number>;
}

/** Reads a jsonb column that holds a map of names to ids; entries that are no id are left out. */
export function idMapOut(v: unknown): Record<string, number> {
  return isJsonObject(v) ? Object.fromEntries(Object.entries(v).filter((e): e is [string, number] => isDbId(e[1]))) : {};
}

export function jsonOut(v: unknown): JsonValue {
  return (v ?? null) as JsonValue;
}

/**
 * A named statement (`pool.query(namedStatement(...))`): each connection parses and plans
 * it once instead of on every call. Named by a hash of the text, which holds the schema,
 * because one pool's connections may serve stores of several schemas (tests do).
 */
export function namedStatement(prefix: string, text: string): { name: string; text: string } {
  return { name: `baton_${prefix}_${createHash("sha1").update(text).digest("hex").slice(0, 16)}`, text };
}

/** `"my-schema"` → `"my-schema"` quoted as a Postgres identifier. */
export function quoteIdent(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}

const SCHEMA_RE = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;

export function requireSchemaName(schema: string | undefined): string {
  const s = schema ?? "public";
  if (!SCHEMA_RE.test(s)) throw StoreInvalidInput(`schema must match ${String(SCHEMA_RE)}`);
  return s;
}

/** A signed 32-bit key from a text, for `pg_advisory_xact_lock(int, int)` and its `try` form. */
export function lockKey(text: string): number {
  return createHash("sha256").update(text).digest().readInt32BE(0);
}

/** Rows one pruning statement may look at, at most. */
export const MAX_PRUNE_BATCH = 10_000;

/** The arguments of a pruning batch (`blobs.prune`, `executions.pruneFinished`, `learning.pruneOlder`), checked. */
export function pruneBatch(opts: { olderThan: Date; limit: number } | undefined): { olderThan: Date; limit: number } {
  const { olderThan, limit } = opts ?? {};
  if (!(olderThan instanceof Date) || Number.isNaN(olderThan.getTime())) throw StoreInvalidInput("olderThan must be a valid Date");
  if (!Number.isInteger(limit) || limit! < 1 || limit! > MAX_PRUNE_BATCH) throw StoreInvalidInput(`limit must be an integer from 1 to ${MAX_PRUNE_BATCH}`);
  return { olderThan, limit: limit! };
}

/**
 * One pruning batch (`blobs.prune`, `executions.pruneFinished`, `learning.pruneOlder`): checks its
 * arguments, runs `statement` with `(olderThan, limit, ...lock)` — the two halves of its advisory
 * lock key — and answers the statement's one row (`ran`: whether it got the lock, and its counts).
 */
export async function runPruneBatch<R extends { ran: boolean }>(
  pool: Pool,
  entity: string,
  statement: { name: string; text: string },
  lock: readonly number[],
  opts: { olderThan: Date; limit: number } | undefined,
): Promise<R> {
  const { olderThan, limit } = pruneBatch(opts);
  const res = await guard({ entity }, () => pool.query<R>({ ...statement, values: [olderThan.toISOString(), limit, ...lock] }));
  return res.rows[0]!;
}

/**
 * Runs `fn` on one pooled connection inside a transaction: committed when it resolves, rolled
 * back when it throws (the error then passes on). For the few statements that must share a
 * transaction on the plain pool (a lock taken in one statement, read past in the next).
 * `begin` replaces the plain `BEGIN`, to send a first statement with it in one round trip
 * (`BEGIN; SELECT pg_advisory_xact_lock(…)`); it is sent as it is, so it holds no outside text.
 */
export async function inTransaction<T>(pool: Pool, fn: (client: PoolClient) => Promise<T>, begin = "BEGIN"): Promise<T> {
  const client = await pool.connect();
  try {
    await client.query(begin);
    const out = await fn(client);
    await client.query("COMMIT");
    return out;
  } catch (err) {
    await client.query("ROLLBACK").catch(() => undefined);
    throw err;
  } finally {
    client.release();
  }
}
