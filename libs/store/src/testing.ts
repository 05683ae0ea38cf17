/**
 * `@baton/store/testing` — helpers for integration tests against the real Postgres:
 * every test file gets its own freshly migrated schema with a random name, dropped
 * again by `dispose()`, so suites running in parallel never see each other's rows.
 */
import { randomBytes } from "node:crypto";
import { once } from "node:events";
import { createConnection, createServer } from "node:net";
import type { AddressInfo, Server, Socket } from "node:net";
import { cp, mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { MIGRATIONS_DIR, migrate } from "./migrate.ts";
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

/** A schema migrated up to one migration, for testing what a later one does to existing rows. */
export interface PartlyMigrated {
  schema: string;
  /** Connected, with the schema as its search_path. */
  client: pg.Client;
  /** Runs every remaining migration. */
  migrateRest(): Promise<void>;
  /** Ends the client and drops the schema. */
  dispose(): Promise<void>;
}

/** A fresh schema migrated through `last` (a migration's folder name, e.g. `"0003_key_lookups"`) and no further. */
export async function migratedThrough(prefix: string, last: string): Promise<PartlyMigrated> {
  const names = (await readdir(MIGRATIONS_DIR)).filter((n) => /^\d{4}_/.test(n)).sort();
  if (!names.includes(last)) throw new Error(`no migration ${last}`);
  const schema = randomSchemaName(prefix);
  const tmp = await mkdtemp(join(tmpdir(), "baton-mig-"));
  try {
    for (const name of names.filter((n) => n <= last)) await cp(join(MIGRATIONS_DIR, name), join(tmp, name), { recursive: true });
    await migrate({ databaseUrl: TEST_DATABASE_URL, schema, migrationsDir: tmp });
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
  const client = new pg.Client({ connectionString: TEST_DATABASE_URL });
  await client.connect();
  await client.query(`SET search_path TO ${quoteIdent(schema)}`);
  return {
    schema,
    client,
    async migrateRest() {
      await migrate({ databaseUrl: TEST_DATABASE_URL, schema });
    },
    async dispose() {
      await client.end();
      await dropSchema(TEST_DATABASE_URL, schema);
    },
  };
}

/** A TCP proxy in front of a Postgres server, which a test can cut off. */
export interface DatabaseProxy {
  readonly server: Server;
  readonly port: number;
  /** `databaseUrl` with its host and port pointing through the proxy. */
  readonly url: string;
  /** Ends every connection through the proxy, as a server restart or `pg_terminate_backend` would. */
  cut(): void;
  /** Cuts the connections and stops listening: new connections are refused until a proxy listens on `port` again. */
  close(): Promise<void>;
}

/**
 * A proxy to the Postgres of `databaseUrl` (the test database by default) on `port` (0: any
 * free one), so that a test can take the database out of reach and bring it back without
 * stopping the server others share.
 */
export async function databaseProxy(port = 0, databaseUrl = TEST_DATABASE_URL): Promise<DatabaseProxy> {
  const target = new URL(databaseUrl);
  const sockets = new Set<Socket>();
  const server = createServer((inbound) => {
    const outbound = createConnection({ host: target.hostname, port: Number(target.port || 5432) });
    for (const s of [inbound, outbound]) {
      sockets.add(s);
      s.on("error", () => {});
      s.on("close", () => {
        sockets.delete(s);
        inbound.destroy();
        outbound.destroy();
      });
    }
    inbound.pipe(outbound).pipe(inbound);
  });
  server.listen(port, "127.0.0.1");
  await once(server, "listening");
  const bound = (server.address() as AddressInfo).port;
  const url = new URL(databaseUrl);
  url.hostname = "127.0.0.1";
  url.port = String(bound);
  const cut = (): void => {
    for (const s of sockets) s.destroy();
  };
  return {
    server,
    port: bound,
    url: url.href,
    cut,
    close: async () => {
      cut();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
