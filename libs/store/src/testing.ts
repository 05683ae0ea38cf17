/**
 * `@baton/store/testing` — helpers for integration tests against the real Postgres:
 * every test file gets its own freshly migrated schema with a random name, dropped
 * again by `dispose()`, so suites running in parallel never see each other's rows.
 */
import { randomBytes } from "node:crypto";
import pg from "pg";
import { migrate } from "./migrate.ts";
import { createStore } from "./store.ts";
import type { Store, StoreOptions, WorkflowRecord } from "./types.ts";
import { quoteIdent } from "./values.ts";

/** `BATON_TEST_DATABASE_URL`, else the local test database. */
export const TEST_DATABASE_URL = process.env["BATON_TEST_DATABASE_URL"] ?? "postgresql://postgres@127.0.0.1:5432/test";

/** A fresh schema name: `<prefix>_<16 hex>`. @param prefix @default "test" */
export function randomSchemaName(prefix = "test"): string {
  return `${prefix}_${randomBytes(8).toString("hex")}`;
}

/** Drops a schema and everything in it (no error when it does not exist). */
export async function dropSchema(databaseUrl: string, schema: string): Promise<void> {
  const client = new pg.Client({ connectionString: databaseUrl });
  client.on("error", () => {});
  await client.connect();
  try {
    await client.query(`DROP SCHEMA IF EXISTS ${quoteIdent(schema)} CASCADE`);
  } finally {
    await client.end();
  }
}

/** A store on its own migrated schema. */
export interface TestStore {
  store: Store;
  /** Options that open (or migrate) the same schema again. */
  options: Required<Pick<StoreOptions, "databaseUrl" | "schema">>;
  /**
   * A plain `pg` client on the same database, for what a test checks below the store
   * (catalog queries, plans). Ended by `dispose()`.
   */
  connect(): Promise<pg.Client>;
  /** Ends the clients of `connect()`, closes the store and drops the schema. */
  dispose(): Promise<void>;
}

/**
 * Creates a random schema, migrates it and opens a store on it.
 * @example
 * let t: TestStore;
 * beforeAll(async () => { t = await openTestStore(); });
 * afterAll(() => t.dispose());
 */
export async function openTestStore(opts: { databaseUrl?: string; prefix?: string } = {}): Promise<TestStore> {
  const options = { databaseUrl: opts.databaseUrl ?? TEST_DATABASE_URL, schema: randomSchemaName(opts.prefix) };
  await migrate(options);
  const store = createStore(options);
  const clients: pg.Client[] = [];
  return {
    store,
    options,
    async connect() {
      const client = new pg.Client({ connectionString: options.databaseUrl });
      client.on("error", () => {});
      clients.push(client);
      await client.connect();
      return client;
    },
    async dispose() {
      await Promise.all(clients.splice(0).map((c) => c.end().catch(() => undefined)));
      await store.close();
      await dropSchema(options.databaseUrl, options.schema);
    },
  };
}

/** A test store with two tenants, A and B, each with one empty workflow, and a plain `pg` client. */
export interface TwoTenantStore {
  t: TestStore;
  store: Store;
  db: pg.Client;
  /** Tenant A and its workflow. */
  tenant: string;
  wf: WorkflowRecord;
  /** Tenant B and its workflow. */
  other: string;
  theirWf: WorkflowRecord;
}

/** {@link openTestStore} with two tenants and a workflow each (for tests of what one tenant's data does to the other's). */
export async function openTwoTenantStore(prefix: string): Promise<TwoTenantStore> {
  const t = await openTestStore({ prefix });
  try {
    const store = t.store;
    const db = await t.connect();
    const tenant = (await store.tenants.create("A")).id;
    const other = (await store.tenants.create("B")).id;
    const wf = await store.workflows.create(tenant, { name: "Flow", definition: { nodes: [] } });
    const theirWf = await store.workflows.create(other, { name: "Flow", definition: { nodes: [] } });
    return { t, store, db, tenant, other, wf, theirWf };
  } catch (err) {
    await t.dispose();
    throw err;
  }
}
