/**
 * Rules checked against the real Redis (BATON_REDIS_URL, default redis://127.0.0.1:6379):
 * - the Redis checkpoint store passes the checkpoint contract's conformance suite,
 *   with the default history limit and with a small one;
 * - expire() puts a TTL on checkpoint and history, falls back to ttlSeconds, needs a
 *   TTL from somewhere, and a later put makes the execution permanent again;
 * - damaged records and Redis being away surface as catalogue errors
 *   (BATON_CHECKPOINT_CORRUPT, BATON_CHECKPOINT_UNAVAILABLE), never as raw errors;
 * - idempotency: of concurrent remember() calls on one key exactly one stores, all
 *   get the stored value; records carry their TTL; unknown keys read as null.
 * Each suite uses its own random key prefix and deletes its keys afterwards.
 */
import { randomUUID } from "node:crypto";
import { createServer } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { createRedis, redisCheckpointStore, redisIdempotencyStore } from "@baton/checkpoints";
import type { Redis } from "@baton/checkpoints";
import { checkpointStoreConformance } from "@baton/checkpoints/testing";

const REDIS_URL = process.env.BATON_REDIS_URL ?? "redis://127.0.0.1:6379";

async function deleteByPrefix(redis: Redis, prefix: string): Promise<void> {
  let cursor = "0";
  do {
    const [next, keys] = await redis.scan(cursor, "MATCH", `${prefix}:*`, "COUNT", 500);
    if (keys.length > 0) await redis.del(...keys);
    cursor = next;
  } while (cursor !== "0");
}

function testPrefix(): string {
  return `baton-test:${randomUUID()}`;
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === "string") throw new Error("no port");
  return address.port;
}

for (const historyLimit of [undefined, 3]) {
  checkpointStoreConformance(
    `redis (historyLimit ${historyLimit ?? "default"})`,
    async () => {
      const redis = createRedis(REDIS_URL);
      const prefix = testPrefix();
      return {
        store: redisCheckpointStore(redis, { prefix, ...(historyLimit === undefined ? {} : { historyLimit }) }),
        cleanup: async () => {
          await deleteByPrefix(redis, prefix);
          await redis.quit();
        },
      };
    },
    historyLimit === undefined ? {} : { historyLimit },
  );
}

describe("redisCheckpointStore", () => {
  let redis: Redis;
  const prefix = testPrefix();
  const checkpointKey = (id: number): string => `${prefix}:checkpoint:{${id}}`;
  const historyKey = (id: number): string => `${prefix}:checkpoint:{${id}}:history`;

  beforeAll(() => {
    redis = createRedis(REDIS_URL);
  });
  afterAll(async () => {
    await deleteByPrefix(redis, prefix);
    await redis.quit();
  });

  it("sets a TTL on checkpoint and history with expire(), and a later put clears it", async () => {
    const store = redisCheckpointStore(redis, { prefix });
    await store.put(1, { done: true }, 0);
    await store.expire(1, 120);
    for (const key of [checkpointKey(1), historyKey(1)]) {
      const ttl = await redis.ttl(key);
      expect(ttl).toBeGreaterThan(0);
      expect(ttl).toBeLessThanOrEqual(120);
    }
    await store.put(1, { done: false }, 1);
    expect(await redis.ttl(checkpointKey(1))).toBe(-1);
    expect(await redis.ttl(historyKey(1))).toBe(-1);
  });

  it("uses ttlSeconds when expire() gets no seconds, and needs one of the two", async () => {
    const withDefault = redisCheckpointStore(redis, { prefix, ttlSeconds: 3600 });
    await withDefault.put(2, "finished", 0);
    await withDefault.expire(2);
    expect(await redis.ttl(checkpointKey(2))).toBeGreaterThan(60);

    const without = redisCheckpointStore(redis, { prefix });
    await expect(without.expire(2)).rejects.toMatchObject({ code: "BATON_CHECKPOINT_INVALID_ARGUMENT", status: 400 });
  });

  it("refuses bad arguments with BATON_CHECKPOINT_INVALID_ARGUMENT", async () => {
    const store = redisCheckpointStore(redis, { prefix });
    await expect(store.put(-1, {}, 0)).rejects.toMatchObject({ code: "BATON_CHECKPOINT_INVALID_ARGUMENT" });
    await expect(store.put(3, {}, 1.5)).rejects.toMatchObject({ code: "BATON_CHECKPOINT_INVALID_ARGUMENT" });
    await expect(store.history(3, { limit: 0 })).rejects.toMatchObject({ code: "BATON_CHECKPOINT_INVALID_ARGUMENT" });
    expect(() => redisCheckpointStore(redis, { prefix, historyLimit: 0 })).toThrow(expect.objectContaining({ code: "BATON_CHECKPOINT_INVALID_ARGUMENT" }));
  });

  it("reports damaged records as BATON_CHECKPOINT_CORRUPT", async () => {
    const store = redisCheckpointStore(redis, { prefix });
    await redis.hset(checkpointKey(4), { v: "1", s: "{not json", t: "0" });
    await expect(store.get(4)).rejects.toMatchObject({ code: "BATON_CHECKPOINT_CORRUPT" });
    await redis.set(checkpointKey(5), "a string where a hash belongs");
    await expect(store.put(5, {}, 0)).rejects.toMatchObject({ code: "BATON_CHECKPOINT_CORRUPT" });
    await expect(store.get(5)).rejects.toMatchObject({ code: "BATON_CHECKPOINT_CORRUPT" });
  });

  it("reports an unreachable Redis as retryable BATON_CHECKPOINT_UNAVAILABLE", async () => {
    const port = await freePort();
    const away = createRedis(`redis://127.0.0.1:${port}`, { enableOfflineQueue: false, retryStrategy: () => null });
    away.on("error", () => undefined);
    try {
      const store = redisCheckpointStore(away, { prefix });
      await expect(store.get(1)).rejects.toMatchObject({ code: "BATON_CHECKPOINT_UNAVAILABLE", status: 503, retryable: true });
      await expect(store.put(1, {}, 0)).rejects.toMatchObject({ code: "BATON_CHECKPOINT_UNAVAILABLE", retryable: true });
    } finally {
      away.disconnect();
    }
  });
});

describe("redisIdempotencyStore", () => {
  let redis: Redis;
  const prefix = testPrefix();

  beforeAll(() => {
    redis = createRedis(REDIS_URL);
  });
  afterAll(async () => {
    await deleteByPrefix(redis, prefix);
    await redis.quit();
  });

  it("stores exactly one of 20 concurrent remember() calls and hands every caller that value", async () => {
    const store = redisIdempotencyStore(redis, { prefix });
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, caller) => store.remember("tool-call:42", { caller, result: [caller] }, 60)),
    );
    const stored = results.filter((r) => r.stored);
    expect(stored).toHaveLength(1);
    const winner = stored[0]!.value;
    for (const r of results) expect(r.value).toEqual(winner);
    expect(await store.get("tool-call:42")).toEqual(winner);
  });

  it("keeps a record for its TTL and reads unknown keys as null", async () => {
    const store = redisIdempotencyStore(redis, { prefix });
    expect(await store.get("never-written")).toBeNull();
    const first = await store.remember("k", "first", 90);
    expect(first).toEqual({ stored: true, value: "first" });
    const second = await store.remember("k", "second", 90);
    expect(second).toEqual({ stored: false, value: "first" });
    const ttl = await redis.ttl(`${prefix}:idempotency:k`);
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(90);
  });

  it("refuses an empty key, a non-positive TTL and a value that is not JSON", async () => {
    const store = redisIdempotencyStore(redis, { prefix });
    await expect(store.remember("", 1, 10)).rejects.toMatchObject({ code: "BATON_CHECKPOINT_INVALID_ARGUMENT" });
    await expect(store.remember("x", 1, 0)).rejects.toMatchObject({ code: "BATON_CHECKPOINT_INVALID_ARGUMENT" });
    await expect(store.remember("x", undefined, 10)).rejects.toMatchObject({ code: "BATON_CHECKPOINT_INVALID_STATE" });
    expect(await store.get("x")).toBeNull();
  });
});
