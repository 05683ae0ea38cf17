/**
 * Rules checked, with the real servers (BATON_NATS_URL / BATON_REDIS_URL /
 * BATON_DATABASE_URL, defaulting to the local ones) and the installed binaries:
 * - servers that answer are used and nothing is started; the database named in the
 *   URL is created when missing, and a second call finds it;
 * - NATS (with JetStream) and Redis that do not answer on a local port are started
 *   from their binaries under <dataDir>/data/<service>, answer, and stop() ends them;
 * - Postgres that does not answer on a local port is initialised and started (as
 *   the postgres system user when the tests run as root), its database is created,
 *   and a second start reuses the cluster;
 * - servers on other machines, or local ones whose binary is missing, give one
 *   BATON_INFRA_UNAVAILABLE error naming each of them and `docker compose`, without
 *   passwords, and nothing is started; a URL that does not parse is
 *   BATON_INFRA_INVALID_URL.
 */
import { randomBytes } from "node:crypto";
import { chmod, mkdtemp, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { connect as natsConnect } from "@nats-io/transport-node";
import { jetstreamManager } from "@nats-io/jetstream";
import { Client, escapeIdentifier } from "pg";
import { createRedis } from "@baton/checkpoints";
import { ensureLocalInfra, locateServer, probe } from "./local-infra.ts";
import type { LocalInfra } from "./local-infra.ts";
import { freePort } from "../test/helpers.ts";

const NATS_URL = process.env.BATON_NATS_URL ?? "nats://127.0.0.1:4222";
const REDIS_URL = process.env.BATON_REDIS_URL ?? "redis://127.0.0.1:6379";
const DATABASE_URL = process.env.BATON_DATABASE_URL ?? "postgresql://postgres@127.0.0.1:5432/baton";

function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.href;
}

function withPort(url: string, port: number): string {
  const u = new URL(url);
  u.hostname = "127.0.0.1";
  u.port = String(port);
  return u.href;
}

async function databaseExists(url: string, database: string): Promise<boolean> {
  const client = new Client({ connectionString: withDatabase(url, "postgres") });
  await client.connect();
  try {
    return (await client.query("SELECT 1 FROM pg_database WHERE datname = $1", [database])).rowCount === 1;
  } finally {
    await client.end();
  }
}

async function dropDatabase(url: string, database: string): Promise<void> {
  const client = new Client({ connectionString: withDatabase(url, "postgres") });
  await client.connect();
  try {
    await client.query(`DROP DATABASE IF EXISTS ${escapeIdentifier(database)} WITH (FORCE)`);
  } finally {
    await client.end();
  }
}

/** A temporary data dir that the postgres system user can enter (mkdtemp makes it 0700). */
async function tempDataDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "baton-infra-"));
  await chmod(dir, 0o755);
  return dir;
}

const cleanups: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const c of cleanups.reverse()) await c();
});

describe("ensureLocalInfra with the servers reachable", () => {
  const database = `baton_test_${randomBytes(6).toString("hex")}`;
  afterAll(async () => {
    await dropDatabase(DATABASE_URL, database);
  });

  it("starts nothing, creates the missing database, and finds it the second time", async () => {
    const dataDir = await tempDataDir();
    cleanups.push(() => rm(dataDir, { recursive: true, force: true }));
    const logs: string[] = [];
    const opts = { natsUrl: NATS_URL, redisUrl: REDIS_URL, databaseUrl: withDatabase(DATABASE_URL, database), dataDir, log: (m: string) => logs.push(m) };

    const first = await ensureLocalInfra(opts);
    expect(first.started).toEqual([]);
    expect(await databaseExists(DATABASE_URL, database)).toBe(true);
    expect(logs).toContain(`created database ${database}`);
    await first.stop();

    logs.length = 0;
    const second = await ensureLocalInfra(opts);
    expect(second.started).toEqual([]);
    expect(logs.some((m) => m.startsWith("created database"))).toBe(false);
    await second.stop();
  });
});

describe("ensureLocalInfra with NATS and Redis down on local ports", () => {
  let infra: LocalInfra | undefined;
  let dataDir: string;
  let natsPort: number;
  let redisPort: number;

  beforeAll(async () => {
    dataDir = await tempDataDir();
    natsPort = await freePort();
    redisPort = await freePort();
  });
  afterAll(async () => {
    await infra?.stop();
    await rm(dataDir, { recursive: true, force: true });
  });

  it("starts them from their binaries, they answer, and stop() ends them", async () => {
    expect(locateServer("nats")).toBeDefined();
    expect(locateServer("redis")).toBeDefined();
    infra = await ensureLocalInfra({
      natsUrl: `nats://127.0.0.1:${natsPort}`,
      redisUrl: `redis://127.0.0.1:${redisPort}`,
      databaseUrl: withDatabase(DATABASE_URL, "postgres"),
      dataDir,
      log: () => undefined,
    });
    expect(infra.started).toEqual(["nats", "redis"]);
    expect((await stat(join(dataDir, "data", "nats"))).isDirectory()).toBe(true);
    expect((await stat(join(dataDir, "data", "redis"))).isDirectory()).toBe(true);

    const redis = createRedis(`redis://127.0.0.1:${redisPort}`);
    try {
      expect(await redis.ping()).toBe("PONG");
    } finally {
      await redis.quit();
    }
    const nc = await natsConnect({ servers: `127.0.0.1:${natsPort}` });
    try {
      const jsm = await jetstreamManager(nc);
      const account = await jsm.getAccountInfo();
      expect(account.streams).toBe(0);
    } finally {
      await nc.close();
    }

    await infra.stop();
    expect(await probe("127.0.0.1", natsPort, 500)).toBe(false);
    expect(await probe("127.0.0.1", redisPort, 500)).toBe(false);
    await infra.stop();
  });
});

describe("ensureLocalInfra with Postgres down on a local port", () => {
  const installed = locateServer("postgres") !== undefined;
  let dataDir: string;
  let url: string;
  const open: LocalInfra[] = [];

  beforeAll(async () => {
    dataDir = await tempDataDir();
    url = withDatabase(withPort(DATABASE_URL, await freePort()), "baton");
  });
  afterAll(async () => {
    for (const i of open) await i.stop();
    await rm(dataDir, { recursive: true, force: true });
  });

  (installed ? it : it.skip)("initialises and starts it, creates the database, and reuses the cluster on the next start", async () => {
    const logs: string[] = [];
    const opts = { natsUrl: NATS_URL, redisUrl: REDIS_URL, databaseUrl: url, dataDir, log: (m: string) => logs.push(m) };
    const first = await ensureLocalInfra(opts);
    open.push(first);
    expect(first.started).toEqual(["postgres"]);
    expect(logs.some((m) => m.startsWith("initialising a Postgres cluster"))).toBe(true);
    expect(logs).toContain("created database baton");

    const client = new Client({ connectionString: url });
    await client.connect();
    try {
      expect((await client.query("SELECT current_database() AS db")).rows).toEqual([{ db: "baton" }]);
    } finally {
      await client.end();
    }
    await first.stop();
    expect(await probe("127.0.0.1", Number(new URL(url).port), 500)).toBe(false);

    logs.length = 0;
    const second = await ensureLocalInfra(opts);
    open.push(second);
    expect(second.started).toEqual(["postgres"]);
    expect(logs.some((m) => m.startsWith("initialising"))).toBe(false);
    expect(logs.some((m) => m.startsWith("created database"))).toBe(false);
    await second.stop();
  });
});

describe("ensureLocalInfra when servers cannot be reached or started", () => {
  it("names every unreachable remote server and docker compose, without passwords", async () => {
    const dataDir = await tempDataDir();
    cleanups.push(() => rm(dataDir, { recursive: true, force: true }));
    const err = await ensureLocalInfra({
      natsUrl: "nats://baton-missing.invalid:4222",
      redisUrl: "redis://:s3cret-redis@baton-missing.invalid:6379",
      databaseUrl: "postgresql://postgres:s3cret-pg@baton-missing.invalid:5432/baton",
      dataDir,
      log: () => undefined,
    }).then(
      () => undefined,
      (e: unknown) => e as Error & { code?: string },
    );
    expect(err).toBeDefined();
    expect(err!.code).toBe("BATON_INFRA_UNAVAILABLE");
    expect(err!.message).toContain("NATS at nats://baton-missing.invalid:4222");
    expect(err!.message).toContain("Redis at redis://");
    expect(err!.message).toContain("Postgres at postgresql://");
    expect(err!.message).toContain("start them with: docker compose up -d nats redis postgres");
    expect(err!.message).toContain("docker compose up");
    expect(err!.message).not.toContain("s3cret");
  });

  it("refuses a URL that does not parse, without repeating it", async () => {
    await expect(
      ensureLocalInfra({ natsUrl: NATS_URL, redisUrl: "redis://:pw-secret@[bad", databaseUrl: DATABASE_URL, dataDir: tmpdir(), log: () => undefined }),
    ).rejects.toMatchObject({ code: "BATON_INFRA_INVALID_URL", message: "the Redis URL is not a valid URL" });
  });

  it("says which binary is missing for a local server and starts nothing", async () => {
    const dataDir = await tempDataDir();
    cleanups.push(() => rm(dataDir, { recursive: true, force: true }));
    const natsPort = await freePort();
    const redisPort = await freePort();
    const err = await ensureLocalInfra({
      natsUrl: `nats://127.0.0.1:${natsPort}`,
      redisUrl: `redis://127.0.0.1:${redisPort}`,
      databaseUrl: DATABASE_URL,
      dataDir,
      log: () => undefined,
      searchDirs: [dataDir],
    }).then(
      () => undefined,
      (e: unknown) => e as Error & { code?: string },
    );
    expect(err?.code).toBe("BATON_INFRA_UNAVAILABLE");
    expect(err?.message).toContain(`NATS at nats://127.0.0.1:${natsPort}`);
    expect(err?.message).toContain("nats-server is not installed");
    expect(err?.message).toContain("redis-server is not installed");
    expect(err?.message).not.toContain("Postgres at");
    expect(err?.message).toContain("docker compose up -d nats redis postgres");
    expect(await probe("127.0.0.1", redisPort, 500)).toBe(false);
  });
});
