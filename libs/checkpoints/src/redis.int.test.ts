/**
 * Rules checked against the real Redis (BATON_REDIS_URL, default redis://127.0.0.1:6379):
 * - the Redis checkpoint store passes the checkpoint contract's conformance suite,
 *   with the defaults, a small history, frequent snapshots with pruning, whole
 *   snapshots only, and no state cache;
 * - history is stored as deltas: when one field of a large state changes over 200
 *   versions, the history's size stays near (historyLimit / snapshotEvery + 1) states,
 *   not historyLimit states;
 * - a large state is written as forward deltas beside its last whole write, each the size of
 *   what changed, and whole again once they add up to half its size or to maxDeltas; a
 *   store that has not seen it reads it back (whole + deltas) and goes on writing deltas;
 * - with immutableStates, a part the next state shares with the last one is not read at all;
 * - a checkpoint written before write tokens (no `n` field) is diffed against by its sha1;
 * - a delta is never made against a state that was replaced behind the store's back
 *   (delete and write again from another process), and history written with another
 *   snapshotEvery still reads back;
 * - the state put returns is the JSON round-trip of what was put, the caller's own:
 *   readable, assignable, and changing it (or the object that was put) changes no
 *   stored version nor any later delta;
 * - unversionedKeys (the executor's outbox) are read and written with the latest version
 *   only: past versions and the history never hold them, a put without them drops them, and
 *   dropUnversioned clears them in place at the version named and nowhere else;
 * - expire() puts a TTL on checkpoint and history, defaults to finishedTtlSeconds, and can drop
 *   the unversioned keys (a finished run's outbox) in the same round trip
 *   (7 days unless configured), and a later put makes the execution permanent again;
 * - a rebuild's claim (claimRebuild) lasts its TTL unless renewed, a claim of a later fence
 *   stands against an earlier one, and only its owner drops it;
 * - options are checked when the store is built and reported by name;
 * - deleteKeysByPrefix removes a prefix's keys (and not a longer prefix's), and refuses an empty one;
 * - damaged records and Redis being away surface as catalogue errors
 *   (BATON_CHECKPOINT_CORRUPT, BATON_CHECKPOINT_UNAVAILABLE), never as raw errors;
 * - idempotency: of concurrent remember() calls on one key exactly one stores, all
 *   get the stored value; records carry their TTL; unknown keys read as null.
 * Each suite uses its own random key prefix and deletes its keys afterwards.
 */
import { randomUUID } from "node:crypto";
import { createServer } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { createRedis, deleteKeysByPrefix, redisCheckpointStore, redisIdempotencyStore } from "@baton/checkpoints";
import type { Redis, RedisCheckpointOptions } from "@baton/checkpoints";
import { checkpointStoreConformance, type ConformanceOptions } from "@baton/checkpoints/testing";

const REDIS_URL = process.env.BATON_REDIS_URL ?? "redis://127.0.0.1:6379";

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

const variants: { name: string; options: Omit<RedisCheckpointOptions, "prefix">; suite: ConformanceOptions }[] = [
  { name: "defaults", options: {}, suite: {} },
  { name: "historyLimit 3", options: { historyLimit: 3 }, suite: { historyLimit: 3 } },
  { name: "historyLimit 10, snapshotEvery 4", options: { historyLimit: 10, snapshotEvery: 4 }, suite: { historyLimit: 10, timeTravelVersions: 30 } },
  { name: "snapshotEvery 1, no state cache", options: { snapshotEvery: 1, stateCacheSize: 0 }, suite: {} },
  { name: "snapshotEvery 7, no state cache", options: { snapshotEvery: 7, stateCacheSize: 0 }, suite: {} },
  // Every state written as forward deltas beside the last whole one.
  { name: "immutable states, every write a delta", options: { immutableStates: true, deltaAboveBytes: 0 }, suite: {} },
  { name: "immutable states, deltas, at most 3 between whole writes", options: { immutableStates: true, deltaAboveBytes: 0, maxDeltas: 3, snapshotEvery: 4 }, suite: { timeTravelVersions: 30 } },
  { name: "deltas, no state cache", options: { deltaAboveBytes: 0, stateCacheSize: 0, historyLimit: 10 }, suite: { historyLimit: 10 } },
];
for (const v of variants) {
  checkpointStoreConformance(
    `redis (${v.name})`,
    async () => {
      const redis = createRedis(REDIS_URL);
      const prefix = testPrefix();
      return {
        store: redisCheckpointStore(redis, { prefix, ...v.options }),
        cleanup: async () => {
          await deleteKeysByPrefix(redis, prefix);
          await redis.quit();
        },
      };
    },
    v.suite,
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
    await deleteKeysByPrefix(redis, prefix);
    await redis.quit();
  });

  it("keeps a rebuild's claim for its TTL, renewed by its owner; a claim of a later fence stands, and only its owner drops it", async () => {
    const store = redisCheckpointStore(redis, { prefix });
    expect(await store.rebuildClaim(70)).toBeNull();
    expect(await store.claimRebuild(70, 2001, "ex-a", 60_000)).toBe(true);
    expect(await store.rebuildClaim(70)).toEqual({ floor: 2001, owner: "ex-a" });
    const ttl = await redis.pttl(`${prefix}:checkpoint:{70}:rebuild`);
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(60_000);
    // A rebuild that fenced later takes it; the earlier one can no longer renew it.
    expect(await store.claimRebuild(70, 3001, "ex-b", 60_000)).toBe(true);
    expect(await store.claimRebuild(70, 2001, "ex-a", 60_000)).toBe(false);
    expect(await store.rebuildClaim(70)).toEqual({ floor: 3001, owner: "ex-b" });
    // Only the claim's owner, at its floor, drops it.
    await store.releaseRebuild(70, 2001, "ex-a");
    await store.releaseRebuild(70, 3001, "ex-a");
    expect(await store.rebuildClaim(70)).toEqual({ floor: 3001, owner: "ex-b" });
    await store.releaseRebuild(70, 3001, "ex-b");
    expect(await store.rebuildClaim(70)).toBeNull();
    // Unrenewed, it lapses.
    expect(await store.claimRebuild(70, 4001, "ex-a", 50)).toBe(true);
    await new Promise((r) => setTimeout(r, 120));
    expect(await store.rebuildClaim(70)).toBeNull();
    await expect(store.claimRebuild(70, 1, "has:colon", 1000)).rejects.toMatchObject({ code: "BATON_CHECKPOINT_INVALID_ARGUMENT" });
    await expect(store.claimRebuild(70, 1, "ok", 0)).rejects.toMatchObject({ code: "BATON_CHECKPOINT_INVALID_ARGUMENT" });
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

  it("numbers a first write after firstVersionAfter, so a lost and rewritten checkpoint repeats no version", async () => {
    const a = redisCheckpointStore<Record<string, unknown>>(redis, { prefix });
    await a.put(4, { n: 1 }, 0);
    await a.put(4, { n: 2 }, 1); // a caches version 2
    await redis.del(checkpointKey(4), historyKey(4)); // Redis loses it
    const b = redisCheckpointStore<Record<string, unknown>>(redis, { prefix });
    const rebuilt = await b.put(4, { n: 2, rebuilt: true }, 0, { firstVersionAfter: 1000 });
    expect(rebuilt.version).toBe(1001);
    await b.put(4, { n: 3 }, 1001);
    // a's cached version 2 is nowhere in Redis: its write is a conflict, not a write over b's state.
    await expect(a.put(4, { n: 99 }, 2)).rejects.toMatchObject({ code: "BATON_CHECKPOINT_CONFLICT" });
    expect((await b.get(4))!.state).toEqual({ n: 3 });
    expect((await b.history(4)).map((c) => c.version)).toEqual([1002, 1001]);
    // Ignored once a checkpoint exists.
    expect((await b.put(4, { n: 4 }, 1002, { firstVersionAfter: 5000 })).version).toBe(1003);
  });

  it("drops the unversioned keys in the same call as the expiry when asked, keeping version and TTL", async () => {
    const store = redisCheckpointStore<Record<string, unknown>>(redis, { prefix, unversionedKeys: ["outbox"] });
    await store.put(3, { done: true, outbox: [{ kind: "emit" }] }, 0);
    await store.expire(3, 120, { dropUnversioned: true });
    const cp = (await redisCheckpointStore<Record<string, unknown>>(redis, { prefix, unversionedKeys: ["outbox"] }).get(3))!;
    expect(cp.version).toBe(1);
    expect(cp.state).toEqual({ done: true });
    expect(await redis.ttl(checkpointKey(3))).toBeGreaterThan(0);
  });

  it("expires after finishedTtlSeconds when expire() gets no seconds (7 days by default)", async () => {
    const configured = redisCheckpointStore(redis, { prefix, finishedTtlSeconds: 3600 });
    await configured.put(2, "finished", 0);
    await configured.expire(2);
    const ttl = await redis.ttl(checkpointKey(2));
    expect(ttl).toBeGreaterThan(60);
    expect(ttl).toBeLessThanOrEqual(3600);

    const defaults = redisCheckpointStore(redis, { prefix });
    expect(defaults.options).toEqual({
      prefix, historyLimit: 100, snapshotEvery: 20, finishedTtlSeconds: 604_800, stateCacheSize: 64, unversionedKeys: [],
      immutableStates: false, deltaAboveBytes: 65_536, maxDeltas: 256,
    });
    await defaults.expire(2);
    expect(await redis.ttl(historyKey(2))).toBeGreaterThan(3600);
  });

  it("deleteKeysByPrefix removes every key under the prefix and nothing else", async () => {
    const mine = testPrefix();
    const store = redisCheckpointStore(redis, { prefix: mine });
    for (let id = 1; id <= 3; id++) await store.put(id, { id }, 0);
    await redis.set(`${mine}:idempotency:k`, "1");
    const neighbour = `${mine}x`;
    await redis.set(`${neighbour}:keep`, "1");
    try {
      expect(await deleteKeysByPrefix(redis, mine)).toBe(7); // 3 checkpoints, 3 histories, 1 record
      expect(await redis.keys(`${mine}:*`)).toEqual([]);
      expect(await redis.get(`${neighbour}:keep`)).toBe("1");
      expect(await deleteKeysByPrefix(redis, mine)).toBe(0);
      await expect(deleteKeysByPrefix(redis, "")).rejects.toMatchObject({ code: "BATON_CHECKPOINT_INVALID_ARGUMENT" });
    } finally {
      await redis.del(`${neighbour}:keep`);
    }
  });

  it("refuses bad options by name", () => {
    for (const bad of [{ historyLimit: 0 }, { snapshotEvery: 0 }, { finishedTtlSeconds: 1.5 }, { stateCacheSize: -1 }, { unversionedKeys: [""] }, { unversionedKeys: "outbox" as never }]) {
      const name = Object.keys(bad)[0]!;
      expect(() => redisCheckpointStore(redis, { prefix, ...bad })).toThrow(expect.objectContaining({ code: "BATON_CHECKPOINT_INVALID_ARGUMENT", message: expect.stringContaining(name) }));
    }
    expect(() => redisCheckpointStore(redis, { prefix: "" })).toThrow(expect.objectContaining({ code: "BATON_CHECKPOINT_INVALID_ARGUMENT" }));
  });

  it("keeps the history of 200 one-field changes of a large state near a few full states", async () => {
    const store = redisCheckpointStore(redis, { prefix });
    const large = { documents: Array.from({ length: 200 }, (_, i) => ({ id: i, body: `document ${i} `.repeat(20) })), counter: 0 };
    const stateBytes = JSON.stringify(large).length;
    for (let v = 0; v < 200; v++) await store.put(10, { ...large, counter: v }, v);
    const entries = await redis.lrange(historyKey(10), 0, -1);
    expect(entries).toHaveLength(100);
    const historyBytes = entries.reduce((sum, e) => sum + Buffer.byteLength(e), 0);
    // 100 versions / a snapshot every 20 = 5 full states; the 95 deltas are a few dozen bytes each.
    expect(historyBytes).toBeLessThan(6 * stateBytes);
    expect(historyBytes).toBeGreaterThan(4 * stateBytes);
    expect((await store.getVersion(10, 101))?.state).toEqual({ ...large, counter: 100 });
    expect((await store.getVersion(10, 123))?.state).toEqual({ ...large, counter: 122 });
  });

  it("writes a large state as forward deltas of what changed, and whole again once they add up", async () => {
    const store = redisCheckpointStore(redis, { prefix, immutableStates: true, deltaAboveBytes: 10_000, maxDeltas: 50 });
    const fwdKey = `${checkpointKey(20)}:fwd`;
    type Item = { i: number; status: string; pad: string };
    let state: { items: Item[]; n: number } = { items: Array.from({ length: 500 }, (_, i) => ({ i, status: "pending", pad: "x".repeat(40) })), n: 0 };
    const written: unknown[] = [];
    const step = async (v: number): Promise<void> => {
      const items = state.items.slice();
      items[v % 500] = { ...items[v % 500]!, status: `done at ${v}` };
      state = { items, n: v };
      await store.put(20, state, v);
      written.push(JSON.parse(JSON.stringify(state)));
    };
    await store.put(20, state, 0);
    written.push(JSON.parse(JSON.stringify(state)));
    const whole = await redis.hget(checkpointKey(20), "s");
    const wholeBytes = Buffer.byteLength(whole!);
    expect(wholeBytes).toBeGreaterThan(30_000);
    for (let v = 1; v <= 30; v++) await step(v);
    // The whole state was not written again: 30 small deltas went beside it.
    expect(await redis.hget(checkpointKey(20), "s")).toBe(whole);
    const fwd = await redis.lrange(fwdKey, 0, -1);
    expect(fwd).toHaveLength(30);
    for (const d of fwd) expect(Buffer.byteLength(d)).toBeLessThan(200);
    for (const e of (await redis.lrange(historyKey(20), 0, -1)).slice(1)) expect(Buffer.byteLength(e)).toBeLessThan(200);

    // Another store reads the latest back (whole + deltas), rebuilds past versions, and writes deltas on.
    const other = redisCheckpointStore(redis, { prefix, immutableStates: true, deltaAboveBytes: 10_000, maxDeltas: 50 });
    expect((await other.get(20))?.state).toEqual(written[30]);
    for (const v of [1, 2, 15, 30, 31]) expect((await other.getVersion(20, v))?.state).toEqual(written[v - 1]);
    state = (await other.get(20))!.state as typeof state;
    const items = state.items.slice();
    items[0] = { ...items[0]!, status: "by the other store" };
    state = { items, n: 31 };
    await other.put(20, state, 31);
    written.push(JSON.parse(JSON.stringify(state)));
    expect(await redis.llen(fwdKey)).toBe(31);
    expect((await store.get(20))?.state).toEqual(written[31]);

    // At 50 deltas the next write is whole, and the deltas go.
    for (let v = 32; v <= 51; v++) await step(v);
    expect(await redis.llen(fwdKey)).toBe(0);
    expect(await redis.hget(checkpointKey(20), "s")).toBe(JSON.stringify(written[51]));
    for (const v of [1, 31, 50, 51, 52]) expect((await store.getVersion(20, v))?.state).toEqual(written[v - 1]);
    expect((await store.history(20)).map((c) => c.state)).toEqual([...written].reverse());
    // Read only: the same states, not copied, so versions share what did not change between them.
    const shared = await store.history(20, { readOnly: true, limit: 2 });
    expect(shared.map((c) => c.state)).toEqual([written[51], written[50]]);
    const [newest, before] = shared.map((c) => c.state as typeof state);
    expect(newest!.items[150]).toBe(before!.items[150]);
    const copied = (await store.history(20, { limit: 2 })).map((c) => c.state as typeof state);
    expect(copied[0]!.items[150]).not.toBe(copied[1]!.items[150]);
    await store.expire(20, 120);
    await step(52);
    expect(await redis.ttl(fwdKey)).toBe(-1);
    await store.expire(20, 120);
    expect(await redis.ttl(fwdKey)).toBeGreaterThan(0);
    // A state that shrinks to under half the whole is written whole: the large one does not stay.
    const shrunk = { items: state.items.slice(0, 100), n: 53 };
    await store.put(20, shrunk, 53);
    expect(await redis.llen(fwdKey)).toBe(0);
    expect(await redis.hget(checkpointKey(20), "s")).toBe(JSON.stringify(shrunk));
    await store.delete(20);
    expect(await redis.exists(checkpointKey(20), historyKey(20), fwdKey)).toBe(0);
  });

  it("measures a state as JSON does, to tell when it shrank under half the whole", async () => {
    const store = redisCheckpointStore(redis, { prefix, immutableStates: true, deltaAboveBytes: 1_000 });
    const fwdKey = `${checkpointKey(24)}:fwd`;
    const odd = { quote: 'say "hi"\\n', emoji: "✓😀\u0001", gone: undefined, list: [1, null, { a: [] }, undefined], empty: {}, n: -1.5e-7 };
    const state = (k: number): unknown => ({ odd, pad: "x".repeat(k) });
    const base = JSON.stringify(state(0)).length;
    const whole = JSON.stringify(state(10_000)).length;
    await store.put(24, state(10_000), 0);
    // One byte over half the whole: a delta.
    await store.put(24, state(Math.floor(whole / 2) + 1 - base), 1);
    expect(await redis.llen(fwdKey)).toBe(1);
    // Exactly half: written whole.
    await store.put(24, state(Math.floor(whole / 2) - base), 2);
    expect(await redis.llen(fwdKey)).toBe(0);
    for (const [v, k] of [[2, Math.floor(whole / 2) + 1 - base], [3, Math.floor(whole / 2) - base]] as const) {
      expect((await store.getVersion(24, v))?.state).toEqual(JSON.parse(JSON.stringify(state(k))));
    }
  });

  it("ignores deltas that do not belong to the whole state (a writer that knew nothing of them), and drops them with the next write", async () => {
    const store = redisCheckpointStore(redis, { prefix, immutableStates: true, deltaAboveBytes: 100 });
    const fwdKey = `${checkpointKey(23)}:fwd`;
    const big = "x".repeat(1_000);
    for (let v = 0; v < 4; v++) await store.put(23, { big, n: v }, v);
    expect(await redis.llen(fwdKey)).toBe(3);
    // An executor from before deltas writes version 5 whole and leaves the list alone.
    await redis.hset(checkpointKey(23), "v", "5", "s", JSON.stringify({ big, n: "old writer" }));
    await redis.lpush(historyKey(23), JSON.stringify({ v: 5, t: Date.now() }));
    const reader = redisCheckpointStore(redis, { prefix, immutableStates: true, deltaAboveBytes: 100 });
    expect((await reader.get(23))?.state).toEqual({ big, n: "old writer" });
    expect((await reader.history(23, { limit: 1 }))[0]?.state).toEqual({ big, n: "old writer" });
    expect((await reader.getVersion(23, 5))?.state).toEqual({ big, n: "old writer" });
    await reader.put(23, { big, n: 6 }, 5);
    expect(await redis.llen(fwdKey)).toBe(0);
    expect((await store.get(23))?.state).toEqual({ big, n: 6 });
    await store.put(23, { big, n: 7 }, 6);
    expect(await redis.llen(fwdKey)).toBe(1);
    expect((await reader.get(23))?.state).toEqual({ big, n: 7 });
  });

  it("with immutableStates, does not read a part the next state shares with the last", async () => {
    const store = redisCheckpointStore(redis, { prefix, immutableStates: true, deltaAboveBytes: 0 });
    let readable = true;
    const reads: string[] = [];
    const shared = new Proxy(Array.from({ length: 1000 }, (_, i) => ({ i })), {
      get(target, key, receiver) {
        if (!readable) reads.push(String(key));
        return Reflect.get(target, key, receiver) as unknown;
      },
    });
    await store.put(21, { shared, n: 0 }, 0);
    readable = false;
    for (let v = 1; v <= 5; v++) await store.put(21, { shared, n: v }, v);
    expect(reads).toEqual([]);
    readable = true;
    expect((await store.getVersion(21, 1))?.state).toEqual({ shared: Array.from({ length: 1000 }, (_, i) => ({ i })), n: 0 });
    expect((await store.get(21))?.state).toMatchObject({ n: 5 });
  });

  it("diffs against a checkpoint written before write tokens by its sha1", async () => {
    const now = Date.now();
    await redis.hset(checkpointKey(22), "v", "1", "s", JSON.stringify({ a: 1, list: [1, 2] }), "t", String(now));
    await redis.lpush(historyKey(22), JSON.stringify({ v: 1, t: now }));
    const store = redisCheckpointStore(redis, { prefix });
    await store.put(22, { a: 2, list: [1, 2] }, 1);
    expect((await store.getVersion(22, 1))?.state).toEqual({ a: 1, list: [1, 2] });
    expect((await store.history(22)).map((c) => c.state)).toEqual([{ a: 2, list: [1, 2] }, { a: 1, list: [1, 2] }]);
    expect(await redis.hget(checkpointKey(22), "n")).toEqual(expect.any(String));
  });

  it("never applies a delta made against a state that was replaced by another process", async () => {
    const a = redisCheckpointStore(redis, { prefix });
    const b = redisCheckpointStore(redis, { prefix });
    await a.put(11, { who: "a", n: 1 }, 0); // a caches version 1
    await b.delete(11);
    await b.put(11, { who: "b", n: 1, extra: [1, 2] }, 0);
    await a.put(11, { who: "a", n: 2 }, 1);
    expect((await a.getVersion(11, 1))?.state).toEqual({ who: "b", n: 1, extra: [1, 2] });
    expect((await a.history(11)).map((c) => c.state)).toEqual([{ who: "a", n: 2 }, { who: "b", n: 1, extra: [1, 2] }]);
  });

  it("hands put's caller its own JSON round-trip of the state, which no later delta depends on", async () => {
    const store = redisCheckpointStore(redis, { prefix, snapshotEvery: 4 });
    const state = { at: new Date(0), gone: undefined, list: [1, { deep: "a" }], nested: { n: 1 } };
    const first = await store.put(13, state, 0);
    expect(Object.keys(first)).toEqual(["executionId", "version", "state", "updatedAt"]);
    expect(JSON.parse(JSON.stringify(first))).toEqual({ ...first, state: { at: "1970-01-01T00:00:00.000Z", list: [1, { deep: "a" }], nested: { n: 1 } } });
    const written: unknown[] = [JSON.parse(JSON.stringify(state))];
    // The caller changes what it put and what it got back, in place, between puts.
    const got = first.state as typeof state & { list: [number, { deep: string }] };
    got.list[1].deep = "changed by the caller";
    got.nested.n = 99;
    for (let v = 1; v < 10; v++) {
      state.list.push(v);
      state.nested.n = v + 1;
      const cp = await store.put(13, state, v);
      written.push(JSON.parse(JSON.stringify(state)));
      if (v % 3 === 0) (cp.state as typeof state).nested.n = -1;
      if (v % 2 === 0) cp.state = { replaced: true };
      if (v % 2 === 0) expect(cp.state).toEqual({ replaced: true });
    }
    expect(got.nested.n).toBe(99);
    expect((await store.get(13))?.state).toEqual(written[9]);
    for (let v = 1; v <= 10; v++) expect((await store.getVersion(13, v))?.state).toEqual(written[v - 1]);
    expect((await store.history(13)).map((c) => c.state)).toEqual([...written].reverse());
  });

  it("diffs against what Redis holds when another process rewrote the same versions, and refuses when it wrote ahead", async () => {
    const a = redisCheckpointStore(redis, { prefix });
    const b = redisCheckpointStore(redis, { prefix });
    const states = (who: string): { who: string; steps: number[]; vars: Record<string, number> }[] =>
      Array.from({ length: 3 }, (_, i) => ({ who, steps: Array.from({ length: i + 1 }, (_, k) => k), vars: { [who]: i } }));
    for (const [v, s] of states("a").entries()) await a.put(14, s, v); // a caches version 3
    await b.delete(14);
    for (const [v, s] of states("b").entries()) await b.put(14, s, v);
    await a.put(14, { who: "a", steps: [], vars: {} }, 3);
    const expected = [...states("b"), { who: "a", steps: [], vars: {} }];
    const reader = redisCheckpointStore(redis, { prefix });
    for (let v = 1; v <= 4; v++) expect((await reader.getVersion(14, v))?.state).toEqual(expected[v - 1]);

    await b.put(14, { who: "b", steps: [9], vars: { b: 9 } }, 4); // b is now one ahead of a's cache
    await expect(a.put(14, { who: "a", steps: [], vars: {} }, 4)).rejects.toMatchObject({ code: "BATON_CHECKPOINT_CONFLICT", details: { expected: 4, actual: 5 } });
    expect(await a.get(14)).toMatchObject({ version: 5, state: { who: "b", steps: [9], vars: { b: 9 } } });
    await a.put(14, { who: "a", steps: [1], vars: { a: 6 } }, 5);
    expected.push({ who: "b", steps: [9], vars: { b: 9 } }, { who: "a", steps: [1], vars: { a: 6 } });
    expect((await reader.history(14)).map((c) => c.state)).toEqual([...expected].reverse());
  });

  it("keeps unversionedKeys with the latest version only: no history, no delta over them", async () => {
    const store = redisCheckpointStore<Record<string, unknown>>(redis, { prefix, unversionedKeys: ["outbox", "carried"] });
    const big = Array.from({ length: 50 }, (_, i) => ({ kind: "journal", entry: { nodeId: `n${i}`, output: "x".repeat(40) } }));
    const versioned: Record<string, unknown>[] = [];
    for (let v = 0; v < 10; v++) {
      const state = { n: v, list: Array.from({ length: v }, (_, i) => i), outbox: big.map((e) => ({ ...e, step: v })), ...(v % 2 === 0 ? { carried: [{ version: v }] } : {}) };
      versioned.push({ n: v, list: state.list });
      const cp = await store.put(15, state, v);
      // The written state (parsed on first read) has them back.
      expect(cp.state).toEqual(state);
    }
    // The latest has them; a put without one of them drops it.
    expect((await store.get(15))?.state).toEqual({ ...versioned[9], outbox: big.map((e) => ({ ...e, step: 9 })) });
    await store.put(15, { n: 10, list: [] }, 10);
    expect((await store.get(15))?.state).toEqual({ n: 10, list: [] });
    expect(await redis.hget(checkpointKey(15), "u")).toBeNull();
    // Past versions are the versioned part only, and the history never stored the outboxes.
    versioned.push({ n: 10, list: [] });
    for (let v = 1; v <= 11; v++) expect((await store.getVersion(15, v))?.state).toEqual(versioned[v - 1]);
    expect((await store.history(15)).map((c) => c.state)).toEqual([...versioned].reverse());
    const historyBytes = (await redis.lrange(historyKey(15), 0, -1)).reduce((sum, e) => sum + Buffer.byteLength(e), 0);
    expect(historyBytes).toBeLessThan(JSON.stringify(big).length);

    // dropUnversioned clears them in place, only at the version named.
    await store.put(15, { n: 11, list: [], outbox: [1] }, 11);
    expect(await store.dropUnversioned(15, 11)).toBe(false);
    expect((await store.get(15))?.state).toEqual({ n: 11, list: [], outbox: [1] });
    expect(await store.dropUnversioned(15, 12)).toBe(true);
    expect(await store.get(15)).toMatchObject({ version: 12, state: { n: 11, list: [] } });
    expect((await store.get(15))?.state).not.toHaveProperty("outbox");
    expect(await store.dropUnversioned(16, 1)).toBe(false);
  });

  it("reads history written with another snapshotEvery", async () => {
    const writer = redisCheckpointStore(redis, { prefix, snapshotEvery: 3 });
    for (let v = 0; v < 12; v++) await writer.put(12, { v: v + 1, list: Array.from({ length: v + 1 }, (_, i) => i) }, v);
    const reader = redisCheckpointStore(redis, { prefix, snapshotEvery: 5 });
    for (let v = 1; v <= 12; v++) expect((await reader.getVersion(12, v))?.state).toEqual({ v, list: Array.from({ length: v }, (_, i) => i) });
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
    await deleteKeysByPrefix(redis, prefix);
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
