/** Shared pieces of the end-to-end tests: isolated config, an HTTP client, waiting. */
import { randomBytes } from "node:crypto";
import { createServer } from "node:net";
import pg from "pg";
import { createRedis, deleteKeysByPrefix } from "@baton/checkpoints";
import type { BatonConfig } from "@baton/config";
import { loadConfig } from "@baton/config";
import { errorMessage } from "@baton/errors";
import { streamNames } from "@baton/contracts";
import { jetstreamManager } from "@nats-io/jetstream";
import type { JetStreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";

export const DATABASE_URL = process.env.BATON_TEST_DATABASE_URL ?? "postgresql://postgres@127.0.0.1:5432/test";

/** A config whose bus prefix, Redis keys and Postgres schema belong to this test alone. */
export function isolatedConfig(overrides: Record<string, string> = {}): { config: BatonConfig; env: Record<string, string> } {
  const id = randomBytes(4).toString("hex");
  const env: Record<string, string> = {
    BATON_BUS_PREFIX: `t${id}`,
    BATON_DATABASE_URL: DATABASE_URL,
    BATON_DATABASE_SCHEMA: `t_${id}`,
    BATON_API_KEY: `bk_test_${randomBytes(12).toString("hex")}`,
    BATON_PORT: "0",
    BATON_HEALTH_PORT: "0",
    BATON_EMBEDDED: "false",
    BATON_LOG_LEVEL: "warn",
    BATON_DATA_DIR: `/tmp/baton-test-${id}`,
    ...overrides,
  };
  return { config: loadConfig(env), env };
}

export async function dropSchema(schema: string): Promise<void> {
  const client = new pg.Client({ connectionString: DATABASE_URL });
  await client.connect();
  try {
    await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  } finally {
    await client.end();
  }
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const addr = s.address();
      const port = typeof addr === "object" && addr ? addr.port : 0;
      s.close(() => resolve(port));
    });
  });
}

export interface Api {
  base: string;
  /** @param extra more request headers (e.g. a W3C `traceparent`) */
  call<T = Record<string, unknown>>(method: string, path: string, body?: unknown, key?: string | null, extra?: Record<string, string>): Promise<{ status: number; body: T; headers: Headers }>;
}

export function api(port: number, apiKey: string): Api {
  const base = `http://127.0.0.1:${port}`;
  return {
    base,
    async call<T>(method: string, path: string, body?: unknown, key: string | null = apiKey, extra: Record<string, string> = {}) {
      const headers: Record<string, string> = { ...extra };
      if (key) headers.authorization = `Bearer ${key}`;
      if (body !== undefined) headers["content-type"] = "application/json";
      const res = await fetch(base + path, { method, headers, ...(body !== undefined ? { body: JSON.stringify(body) } : {}) });
      const text = await res.text();
      return { status: res.status, headers: res.headers, body: (text ? JSON.parse(text) : {}) as T };
    },
  };
}

/** Polls until `fn` returns a value other than undefined, or fails after `timeoutMs`. */
export async function waitFor<T>(what: string, fn: () => Promise<T | undefined>, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v !== undefined) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${last instanceof Error ? `: ${last.message}` : ""}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Reads an SSE stream until it ends, returning the events. */
export async function readSse(url: string, apiKey: string, signal?: AbortSignal): Promise<{ id: string; event: string; data: unknown }[]> {
  const res = await fetch(url, { headers: { authorization: `Bearer ${apiKey}`, accept: "text/event-stream" }, ...(signal ? { signal } : {}) });
  if (!res.ok || !res.body) throw new Error(`SSE answered ${res.status}`);
  const text = await res.text();
  return text
    .split("\n\n")
    .filter((block) => block.split("\n").some((l) => l.startsWith("data:")))
    .map((block) => {
      const field = (name: string) => block.split("\n").find((l) => l.startsWith(name + ":"))?.slice(name.length + 1).trim() ?? "";
      return { id: field("id"), event: field("event"), data: JSON.parse(field("data")) as unknown };
    });
}

/** Deletes the streams, KV buckets and object buckets of a test's bus prefix. */
export async function deleteStreams(natsUrl: string, prefix: string): Promise<void> {
  const nc = await connect({ servers: natsUrl });
  // A stream that exists and could not be deleted is said, not left behind unseen (one chaos
  // round's streams once stayed); one that does not exist is fine.
  const left: string[] = [];
  const remove = async (jsm: JetStreamManager, name: string): Promise<void> => {
    for (let attempt = 1; ; attempt++) {
      try {
        await jsm.streams.delete(name);
        return;
      } catch (err) {
        if (/stream not found/i.test(errorMessage(err))) return;
        if (attempt >= 3) {
          left.push(`${name} (${errorMessage(err)})`);
          return;
        }
      }
    }
  };
  try {
    const jsm = await jetstreamManager(nc);
    for (const name of Object.values(streamNames(prefix)) as string[]) await remove(jsm, name);
    // The KV and object buckets of the prefix (tool registry, tool results, large results):
    // streams `KV_{prefix}_*` and `OBJ_{prefix}_*`.
    const bucket = prefix.replace(/[^A-Za-z0-9_-]/g, "_");
    for await (const name of jsm.streams.names()) {
      if (name.startsWith(`KV_${bucket}_`) || name.startsWith(`OBJ_${bucket}_`)) await remove(jsm, name);
    }
  } finally {
    await nc.close();
  }
  if (left.length > 0) console.warn(`streams of prefix ${prefix} left behind: ${left.join(", ")}`);
}

/**
 * Removes what a Baton run on an {@link isolatedConfig} leaves behind: its Postgres schema,
 * its streams and KV buckets, and its Redis keys (checkpoints and their history).
 */
export async function removeIsolated(config: BatonConfig): Promise<void> {
  await dropSchema(config.databaseSchema);
  await deleteStreams(config.natsUrl, config.prefix);
  const redis = createRedis(config.redisUrl);
  try {
    await deleteKeysByPrefix(redis, config.prefix);
  } finally {
    await redis.quit();
  }
}
