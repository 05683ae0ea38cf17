/**
 * The migrator. Prisma's schema engine is not shipped with Baton, so migrations are
 * hand-written SQL files (`prisma/migrations/<NNNN_name>/migration.sql`) applied here:
 *
 * - one Postgres advisory lock per target schema serialises concurrent starters;
 * - each migration runs in its own transaction together with its `_baton_migrations`
 *   record (name + sha256), so a crash leaves it either fully applied or not at all;
 * - a migration whose first line is `-- baton:no-transaction` runs outside a transaction
 *   instead, one statement at a time, so that it can build an index on a large table with
 *   `CREATE INDEX CONCURRENTLY` (which Postgres refuses inside a transaction) without holding
 *   writes to the table for the whole build. Its statements end with `;` at the end of a line
 *   and must each be safe to run again: a failure leaves the statements before it applied
 *   and the migration unrecorded, and the next start runs it from the top (drop a
 *   half-built index first: `DROP INDEX CONCURRENTLY IF EXISTS …;`);
 * - an applied migration whose file changed is refused, never re-run.
 */
import { createHash } from "node:crypto";
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { errorMessage } from "@baton/errors";
import { toStoreError } from "./db-errors.ts";
import { MigrationChecksumMismatch, MigrationFailed, MigrationLockTimeout, StoreInvalidInput } from "./errors.ts";
import type { MigrateOptions, MigrateResult } from "./types.ts";
import { quoteIdent, requireSchemaName } from "./values.ts";

/** Where the package's migrations live. */
export const MIGRATIONS_DIR = fileURLToPath(new URL("../prisma/migrations/", import.meta.url));
/** The table recording applied migrations, in the target schema. */
export const MIGRATIONS_TABLE = "_baton_migrations";

const NAME_RE = /^\d{4}_[a-z0-9_]+$/;
/** The first line of a migration that runs outside a transaction. */
const NO_TRANSACTION_RE = /^\s*--\s*baton:no-transaction\s*$/;
const LOCK_POLL_MS = 50;

/** A migration file as read from disk. */
export interface MigrationFile {
  name: string;
  sql: string;
  /** sha256 hex of the SQL with line endings normalised to `\n`. */
  checksum: string;
  /** Its first line is `-- baton:no-transaction`: its statements run one at a time, outside a transaction. */
  noTransaction: boolean;
}

/**
 * The statements of a migration that runs outside a transaction: each ends with `;` at the end
 * of a line (comment lines are left out). Such a migration builds indexes and the like, never
 * function bodies, so a `;` at a line's end always ends a statement.
 */
export function migrationStatements(sql: string): string[] {
  const out: string[] = [];
  let current: string[] = [];
  for (const line of sql.replace(/\r\n/g, "\n").split("\n")) {
    if (/^\s*(--.*)?$/.test(line)) continue;
    current.push(line);
    if (/;\s*(--.*)?$/.test(line)) {
      out.push(current.join("\n").trim());
      current = [];
    }
  }
  const rest = current.join("\n").trim();
  if (rest) out.push(rest);
  return out;
}

/** sha256 hex of a migration's SQL; CRLF checkouts give the same checksum as LF ones. */
export function migrationChecksum(sql: string): string {
  return createHash("sha256").update(sql.replace(/\r\n/g, "\n"), "utf8").digest("hex");
}

/** Reads `<dir>/<NNNN_name>/migration.sql` files, sorted by name. */
export async function readMigrations(dir: string = MIGRATIONS_DIR): Promise<MigrationFile[]> {
  const entries = await readdir(dir, { withFileTypes: true });
  const names = entries.filter((e) => e.isDirectory() && NAME_RE.test(e.name)).map((e) => e.name).sort();
  return Promise.all(
    names.map(async (name) => {
      const sql = await readFile(join(dir, name, "migration.sql"), "utf8");
      return { name, sql, checksum: migrationChecksum(sql), noTransaction: NO_TRANSACTION_RE.test(sql.split("\n", 1)[0] ?? "") };
    }),
  );
}

/** A stable 64-bit advisory lock key per schema (as a decimal string for `$1::bigint`). */
function lockKey(schema: string): string {
  const digest = createHash("sha256").update(`baton:migrate:${schema}`).digest();
  return digest.readBigInt64BE(0).toString();
}

async function acquireLock(client: pg.Client, schema: string, timeoutMs: number): Promise<void> {
  const key = lockKey(schema);
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const res = await client.query<{ locked: boolean }>("SELECT pg_try_advisory_lock($1::bigint) AS locked", [key]);
    if (res.rows[0]?.locked) return;
    if (Date.now() >= deadline) throw MigrationLockTimeout(schema, timeoutMs);
    await sleep(LOCK_POLL_MS);
  }
}

/**
 * Brings a Postgres schema up to date: creates it when missing, then applies the
 * migrations not yet recorded in its `_baton_migrations` table, in name order, each in
 * its own transaction. Safe to call from many processes at once: an advisory lock
 * makes them take turns, and the later ones find nothing to do.
 *
 * Throws `BATON_STORE_MIGRATION_CHECKSUM_MISMATCH` when an applied migration's file
 * changed, `BATON_STORE_MIGRATION_FAILED` when a migration's SQL fails (it is rolled
 * back), `BATON_STORE_MIGRATION_LOCK_TIMEOUT` and `BATON_STORE_UNAVAILABLE` (retryable).
 */
export async function migrate(opts: MigrateOptions): Promise<MigrateResult> {
  if (typeof opts?.databaseUrl !== "string" || opts.databaseUrl.length === 0) throw StoreInvalidInput("databaseUrl is required");
  const schema = requireSchemaName(opts.schema);
  const lockTimeoutMs = opts.lockTimeoutMs ?? 60_000;
  const files = await readMigrations(opts.migrationsDir ?? MIGRATIONS_DIR);
  const qschema = quoteIdent(schema);
  const table = `${qschema}.${quoteIdent(MIGRATIONS_TABLE)}`;

  const client = new pg.Client({
    connectionString: opts.databaseUrl,
    connectionTimeoutMillis: opts.connectTimeoutMs ?? 5000,
    application_name: "baton-migrate",
  });
  // A dropped connection is reported by the pending query; without a listener it would crash the process.
  client.on("error", () => {});
  try {
    await client.connect();
  } catch (err) {
    await client.end().catch(() => {});
    throw toStoreError(err);
  }

  let locked = false;
  try {
    await acquireLock(client, schema, lockTimeoutMs);
    locked = true;
    await client.query(`CREATE SCHEMA IF NOT EXISTS ${qschema}`);
    await client.query(`SET search_path TO ${qschema}`);
    await client.query(
      `CREATE TABLE IF NOT EXISTS ${table} ("name" TEXT PRIMARY KEY, "checksum" TEXT NOT NULL, "appliedAt" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP)`,
    );
    const { rows } = await client.query<{ name: string; checksum: string }>(`SELECT "name", "checksum" FROM ${table}`);
    const applied = new Map(rows.map((r) => [r.name, r.checksum]));

    const pending: MigrationFile[] = [];
    for (const file of files) {
      const recorded = applied.get(file.name);
      if (recorded === undefined) pending.push(file);
      else if (recorded !== file.checksum) throw MigrationChecksumMismatch(file.name, recorded, file.checksum);
    }

    const done: string[] = [];
    const record = (file: MigrationFile) => client.query(`INSERT INTO ${table} ("name", "checksum") VALUES ($1, $2)`, [file.name, file.checksum]);
    for (const file of pending) {
      if (file.noTransaction) {
        const statements = migrationStatements(file.sql);
        for (const [i, statement] of statements.entries()) {
          try {
            await client.query(statement);
          } catch (err) {
            const mapped = toStoreError(err);
            if (mapped.retryable) throw mapped;
            throw MigrationFailed(file.name, `statement ${i + 1} of ${statements.length} (outside a transaction: the ones before it stay applied, and the migration runs from the top on the next start): ${errorMessage(err)}`, { cause: err });
          }
        }
        await record(file);
        done.push(file.name);
        continue;
      }
      try {
        await client.query("BEGIN");
        await client.query(file.sql);
        await record(file);
        await client.query("COMMIT");
      } catch (err) {
        await client.query("ROLLBACK").catch(() => {});
        const mapped = toStoreError(err);
        if (mapped.retryable) throw mapped;
        throw MigrationFailed(file.name, errorMessage(err), { cause: err });
      }
      done.push(file.name);
    }
    return { applied: done };
  } catch (err) {
    throw toStoreError(err);
  } finally {
    if (locked) await client.query("SELECT pg_advisory_unlock($1::bigint)", [lockKey(schema)]).catch(() => {});
    await client.end().catch(() => {});
  }
}
