import { PrismaPg } from "@prisma/adapter-pg";
import pg from "pg";
import { PrismaClient } from "./generated/client.ts";
import { blobsRepo } from "./blobs.ts";
import { guard } from "./db-errors.ts";
import { StoreInvalidInput } from "./errors.ts";
import { executionsRepo, nodeExecutionsRepo } from "./executions.ts";
import { learningRepo } from "./learning.ts";
import { mcpServersRepo } from "./mcp.ts";
import { memoryRepo } from "./memory.ts";
import { reviewsRepo } from "./reviews.ts";
import { tenantsRepo } from "./tenants.ts";
import type { Store, StoreOptions } from "./types.ts";
import { requireSchemaName } from "./values.ts";
import { workflowsRepo } from "./workflows.ts";

function positiveInt(name: string, v: number | undefined, fallback: number): number {
  if (v === undefined) return fallback;
  if (!Number.isInteger(v) || v < 1) throw StoreInvalidInput(`${name} must be a positive integer`);
  return v;
}

/**
 * Opens a store on a Postgres schema migrated by {@link migrate}. Connections are made
 * lazily; call {@link Store.ping} to check the database at start-up and
 * {@link Store.close} to release the pool.
 */
export function createStore(opts: StoreOptions): Store {
  if (typeof opts?.databaseUrl !== "string" || opts.databaseUrl.length === 0) throw StoreInvalidInput("databaseUrl is required");
  const schema = requireSchemaName(opts.schema);
  // One pool, shared by Prisma and by the few hot statements written in plain SQL.
  const pool = new pg.Pool({
    connectionString: opts.databaseUrl,
    max: positiveInt("poolSize", opts.poolSize, 10),
    connectionTimeoutMillis: positiveInt("connectTimeoutMs", opts.connectTimeoutMs, 5000),
  });
  // Idle-connection errors (server restart) surface on the next query as BATON_STORE_UNAVAILABLE.
  pool.on("error", () => {});
  const adapter = new PrismaPg(pool, { schema, onPoolError: () => {}, onConnectionError: () => {}, disposeExternalPool: true });
  const prisma = new PrismaClient({ adapter });
  let closed: Promise<void> | undefined;
  return {
    prisma,
    schema,
    close() {
      closed ??= prisma.$disconnect().then(() => (pool.ended ? undefined : pool.end()));
      return closed;
    },
    async ping() {
      await guard({}, () => prisma.$queryRaw`SELECT 1`);
    },
    tenants: tenantsRepo(prisma, schema),
    workflows: workflowsRepo(prisma, schema, pool),
    executions: executionsRepo(prisma, schema, pool),
    nodeExecutions: nodeExecutionsRepo(prisma, schema, pool),
    reviews: reviewsRepo(prisma, schema, pool),
    memory: memoryRepo(prisma, schema),
    learning: learningRepo(prisma, schema, pool),
    mcpServers: mcpServersRepo(prisma),
    blobs: blobsRepo(prisma, schema, pool),
  };
}
