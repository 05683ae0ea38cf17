/**
 * Rules of migrate():
 * - it creates the target schema when missing and applies every migration there (not in `public`);
 * - a second run applies nothing (idempotent);
 * - concurrent runs on a fresh schema all succeed and apply each migration exactly once;
 * - each migration is recorded with its name and sha256; an applied migration whose
 *   file changed is refused with BATON_STORE_MIGRATION_CHECKSUM_MISMATCH and nothing is applied;
 * - a failing migration is rolled back whole (BATON_STORE_MIGRATION_FAILED), earlier ones stay;
 * - a new migration added later is applied on the next run;
 * - one marked `-- baton:no-transaction` runs its statements one at a time outside a
 *   transaction (CREATE INDEX CONCURRENTLY works there, and leaves a valid index); one that fails
 *   names the statement, keeps the statements before it, is not recorded, and runs from the top
 *   once fixed; an unmarked one that builds an index concurrently is refused and rolled back;
 * - an unreachable server is BATON_STORE_UNAVAILABLE (retryable); a held lock times out retryably.
 */
import { cp, mkdtemp, rm, writeFile, mkdir } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import pg from "pg";
import { migrate, migrationChecksum, MIGRATIONS_DIR, readMigrations } from "./migrate.ts";
import { dropSchema, randomSchemaName, TEST_DATABASE_URL } from "./testing.ts";

const databaseUrl = TEST_DATABASE_URL;
const schemas: string[] = [];
let db: pg.Client;
let tmp: string;

function freshSchema(): string {
  const s = randomSchemaName("mig");
  schemas.push(s);
  return s;
}

async function recorded(schema: string): Promise<{ name: string; checksum: string }[]> {
  const { rows } = await db.query<{ name: string; checksum: string }>(`SELECT "name", "checksum" FROM "${schema}"."_baton_migrations" ORDER BY "name"`);
  return rows;
}

async function tableExists(schema: string, table: string): Promise<boolean> {
  const { rows } = await db.query("SELECT 1 FROM information_schema.tables WHERE table_schema = $1 AND table_name = $2", [schema, table]);
  return rows.length > 0;
}

/** A private copy of the package's migrations that a test may edit. */
async function copyMigrations(): Promise<string> {
  const dir = await mkdtemp(join(tmp, "m-"));
  await cp(MIGRATIONS_DIR, dir, { recursive: true });
  return dir;
}

/** A fresh schema migrated from a private copy of the migrations, which a test may then add to. */
async function migratedCopy(): Promise<{ schema: string; dir: string }> {
  const schema = freshSchema();
  const dir = await copyMigrations();
  await migrate({ databaseUrl, schema, migrationsDir: dir });
  return { schema, dir };
}

/** Writes migration `name` into `dir` (its folder made if missing; its file replaced). */
async function putMigration(dir: string, name: string, sql: string): Promise<void> {
  await mkdir(join(dir, name), { recursive: true });
  await writeFile(join(dir, name, "migration.sql"), sql);
}

beforeAll(async () => {
  db = new pg.Client({ connectionString: databaseUrl });
  await db.connect();
  tmp = await mkdtemp(join(tmpdir(), "baton-migrate-"));
});
afterAll(async () => {
  for (const s of schemas) await dropSchema(databaseUrl, s);
  await db?.end();
  await rm(tmp, { recursive: true, force: true });
});

describe("migrate", () => {
  it("creates the schema, applies all migrations there and records name + sha256", async () => {
    const schema = freshSchema();
    const files = await readMigrations();
    expect(files.length).toBeGreaterThan(0);
    const res = await migrate({ databaseUrl, schema });
    expect(res.applied).toEqual(files.map((f) => f.name));
    expect(await recorded(schema)).toEqual(files.map((f) => ({ name: f.name, checksum: f.checksum })));
    expect(await tableExists(schema, "agent_workflows")).toBe(true);
    expect(files[0]!.checksum).toBe(migrationChecksum(files[0]!.sql.replace(/\n/g, "\r\n")));
  });

  it("is idempotent: a second run applies nothing", async () => {
    const schema = freshSchema();
    await migrate({ databaseUrl, schema });
    expect(await migrate({ databaseUrl, schema })).toEqual({ applied: [] });
  });

  it("lets concurrent starters race on a fresh schema: all succeed, each migration applied once", async () => {
    const schema = freshSchema();
    const results = await Promise.all(Array.from({ length: 4 }, () => migrate({ databaseUrl, schema })));
    const files = await readMigrations();
    expect(results.flatMap((r) => r.applied).sort()).toEqual(files.map((f) => f.name).sort());
    expect(results.filter((r) => r.applied.length > 0)).toHaveLength(1);
    expect(await recorded(schema)).toHaveLength(files.length);
  });

  it("refuses when an applied migration's file changed, and applies nothing", async () => {
    const { schema, dir } = await migratedCopy();
    const [first] = await readMigrations(dir);
    await putMigration(dir, first!.name, `${first!.sql}\n-- edited after release\n`);
    await putMigration(dir, "9000_later", 'CREATE TABLE "later" ("id" INTEGER);');
    await expect(migrate({ databaseUrl, schema, migrationsDir: dir })).rejects.toMatchObject({
      code: "BATON_STORE_MIGRATION_CHECKSUM_MISMATCH",
      status: 500,
      retryable: false,
    });
    expect(await tableExists(schema, "later")).toBe(false);
  });

  it("applies a migration added later, and rolls a failing one back whole", async () => {
    const { schema, dir } = await migratedCopy();

    await putMigration(dir, "9001_add_notes", 'CREATE TABLE "notes" ("id" SERIAL PRIMARY KEY);');
    await putMigration(dir, "9002_broken", 'CREATE TABLE "half" ("id" INTEGER);\nSELECT * FROM "no_such_table";');

    const err = await migrate({ databaseUrl, schema, migrationsDir: dir }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: "BATON_STORE_MIGRATION_FAILED", retryable: false });
    expect((err as Error).message).toContain("9002_broken");
    expect(await tableExists(schema, "notes")).toBe(true);
    expect(await tableExists(schema, "half")).toBe(false);
    expect((await recorded(schema)).map((r) => r.name)).toContain("9001_add_notes");
    expect((await recorded(schema)).map((r) => r.name)).not.toContain("9002_broken");

    await rm(join(dir, "9002_broken"), { recursive: true });
    expect(await migrate({ databaseUrl, schema, migrationsDir: dir })).toEqual({ applied: [] });
  });

  it("runs a migration marked no-transaction one statement at a time, outside a transaction", async () => {
    const { schema, dir } = await migratedCopy();
    // Unmarked: Postgres refuses the concurrent build inside the migration's transaction.
    await putMigration(dir, "9004_index", 'CREATE INDEX CONCURRENTLY "ix_journal_status" ON "agent_workflow_node_executions" ("status");\n');
    const refused = await migrate({ databaseUrl, schema, migrationsDir: dir }).catch((e: unknown) => e);
    expect(refused).toMatchObject({ code: "BATON_STORE_MIGRATION_FAILED" });
    expect((refused as Error).message).toContain("cannot run inside a transaction block");
    // Marked, with a second statement that fails: the first stays, nothing is recorded.
    const marked = (second: string) => [
      "-- baton:no-transaction",
      "-- Builds the index without holding writes to the journal for the whole build.",
      'DROP INDEX CONCURRENTLY IF EXISTS "ix_journal_status";',
      'CREATE INDEX CONCURRENTLY "ix_journal_status"',
      '  ON "agent_workflow_node_executions" ("status");',
      second,
      "",
    ].join("\n");
    await putMigration(dir, "9004_index", marked('SELECT * FROM "no_such_table";'));
    const failed = await migrate({ databaseUrl, schema, migrationsDir: dir }).catch((e: unknown) => e);
    expect(failed).toMatchObject({ code: "BATON_STORE_MIGRATION_FAILED", retryable: false });
    expect((failed as Error).message).toMatch(/9004_index failed: statement 3 of 3 \(outside a transaction.*no_such_table/);
    expect((await recorded(schema)).map((r) => r.name)).not.toContain("9004_index");
    const index = async () => (await db.query<{ valid: boolean }>(`SELECT i.indisvalid AS valid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relname = 'ix_journal_status'`, [schema])).rows;
    expect(await index()).toEqual([{ valid: true }]);
    // Fixed, it runs from the top (the index dropped and built again) and is recorded.
    await putMigration(dir, "9004_index", marked('ANALYZE "agent_workflow_node_executions";'));
    expect(await migrate({ databaseUrl, schema, migrationsDir: dir })).toEqual({ applied: ["9004_index"] });
    expect(await index()).toEqual([{ valid: true }]);
    expect((await recorded(schema)).map((r) => r.name)).toContain("9004_index");
    expect((await readMigrations(dir)).find((f) => f.name === "9004_index")).toMatchObject({ noTransaction: true });
  });

  it("times out retryably while another process holds the schema's lock", async () => {
    const schema = freshSchema();
    await migrate({ databaseUrl, schema });
    // Hold the lock the way another starter would: with a slow migration in progress.
    const dir = await copyMigrations();
    await putMigration(dir, "9003_slow", "SELECT pg_sleep(1.5);");
    const slow = migrate({ databaseUrl, schema, migrationsDir: dir });
    await new Promise((r) => setTimeout(r, 300));
    await expect(migrate({ databaseUrl, schema, lockTimeoutMs: 200 })).rejects.toMatchObject({
      code: "BATON_STORE_MIGRATION_LOCK_TIMEOUT",
      retryable: true,
    });
    expect((await slow).applied).toEqual(["9003_slow"]);
  });

  it("reports an unreachable server as BATON_STORE_UNAVAILABLE", async () => {
    await expect(migrate({ databaseUrl: "postgresql://postgres@127.0.0.1:1/test", schema: "x", connectTimeoutMs: 1000 })).rejects.toMatchObject({
      code: "BATON_STORE_UNAVAILABLE",
      status: 503,
      retryable: true,
    });
  });

  it("rejects unsafe schema names", async () => {
    await expect(migrate({ databaseUrl, schema: 'x"; DROP SCHEMA public; --' })).rejects.toMatchObject({ code: "BATON_STORE_INVALID_INPUT" });
  });
});
