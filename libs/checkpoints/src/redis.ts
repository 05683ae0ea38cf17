/**
 * Redis backends of the checkpoint and idempotency contracts.
 *
 * Key layout (the `{id}` hash tag keeps an execution's keys in one cluster slot, so
 * one script can touch both):
 *   `<prefix>:checkpoint:{<executionId>}`          hash  v (version), s (state JSON), t (ms)
 *   `<prefix>:checkpoint:{<executionId>}:history`  list  newest first, one entry per version:
 *       `{"v":N,"t":ms}`             the latest version (its state is the hash's `s`);
 *       `{"v":N,"t":ms,"d":patch}`  a delta: applying it to version N+1's state gives N's;
 *       `{"v":N,"t":ms,"s":state}`  a full snapshot (every `snapshotEvery`-th version).
 *   `<prefix>:idempotency:<key>`                   string, the JSON value
 *
 * Deltas point backwards (newer → older), so trimming the oldest entries never
 * strands a delta without its base: a version is rebuilt from the nearest newer
 * snapshot, or from the latest state, by applying deltas down to it.
 */
import { createHash, hash } from "node:crypto";
import { Redis } from "ioredis";
import type { RedisOptions } from "ioredis";
import { errorMessage, hasCode } from "@baton/errors";
import { applyPatch, diffJson, type Json, type JsonPatch } from "./delta.ts";
import {
  CheckpointConflict,
  CheckpointCorrupt,
  CheckpointInvalidArgument,
  CheckpointInvalidState,
  CheckpointUnavailable,
} from "./errors.ts";
import type { Checkpoint, CheckpointStore, HistoryOptions, IdempotencyStore } from "./types.ts";

/** Options of {@link redisCheckpointStore}. Compiled (checked, defaults filled in) by {@link compileRedisCheckpointOptions}. */
export interface RedisCheckpointOptions {
  /** Prefix of every key, e.g. `"baton"`; lets several deployments or tests share one Redis. */
  prefix: string;
  /**
   * How many versions each execution's history keeps, the latest included (older ones
   * are trimmed on write). Env `BATON_CHECKPOINT_HISTORY` through `@baton/config`.
   * @default 100
   */
  historyLimit?: number;
  /**
   * Every `snapshotEvery`-th version is kept in the history as a full state; the
   * versions between are deltas. Lower means faster `getVersion`/`history` and more
   * storage; 1 keeps every version whole.
   * @default 20
   */
  snapshotEvery?: number;
  /**
   * How long the checkpoint and history of a finished execution stay, used by
   * `expire(executionId)` when it is called without `seconds`. Running executions
   * never expire: every write clears a TTL set before. Env
   * `BATON_CHECKPOINT_FINISHED_TTL_SECONDS` through `@baton/config`.
   * @default 604800 (7 days)
   */
  finishedTtlSeconds?: number;
  /**
   * @deprecated use `finishedTtlSeconds` (this is its old name; `finishedTtlSeconds` wins when both are given).
   */
  ttlSeconds?: number;
  /**
   * How many executions' latest state this store keeps in memory to compute the next
   * delta without reading it back from Redis (a miss costs one extra read). 0 disables it.
   * @default 64
   */
  stateCacheSize?: number;
  /**
   * Top-level keys of a state that belong to the latest version only: `put` stores them
   * beside the state, `get` and the state `put` returns have them, and `history` and
   * `getVersion` leave them out (no delta is computed over them, and no past version
   * keeps them). For what changes wholly on every write and is of no use once
   * superseded, such as the executor's outbox of effects still to carry out.
   * @default []
   */
  unversionedKeys?: readonly string[];
}

/** {@link RedisCheckpointOptions} with every default filled in, frozen. */
export type CompiledRedisCheckpointOptions = Readonly<Required<Omit<RedisCheckpointOptions, "ttlSeconds">>>;

/** The defaults of {@link RedisCheckpointOptions}. */
export const CHECKPOINT_DEFAULTS = Object.freeze({
  historyLimit: 100,
  snapshotEvery: 20,
  finishedTtlSeconds: 604_800,
  stateCacheSize: 64,
  unversionedKeys: Object.freeze<string[]>([]),
});

/** Checks the options and fills in the defaults; throws `BATON_CHECKPOINT_INVALID_ARGUMENT` naming a bad field. */
export function compileRedisCheckpointOptions(opts: RedisCheckpointOptions): CompiledRedisCheckpointOptions {
  if (typeof opts?.prefix !== "string" || opts.prefix.length === 0) throw CheckpointInvalidArgument("prefix", opts?.prefix, "a non-empty string");
  return Object.freeze({
    prefix: opts.prefix,
    historyLimit: requireInteger("historyLimit", opts.historyLimit ?? CHECKPOINT_DEFAULTS.historyLimit, 1),
    snapshotEvery: requireInteger("snapshotEvery", opts.snapshotEvery ?? CHECKPOINT_DEFAULTS.snapshotEvery, 1),
    finishedTtlSeconds: requireInteger("finishedTtlSeconds", opts.finishedTtlSeconds ?? opts.ttlSeconds ?? CHECKPOINT_DEFAULTS.finishedTtlSeconds, 1),
    stateCacheSize: requireInteger("stateCacheSize", opts.stateCacheSize ?? CHECKPOINT_DEFAULTS.stateCacheSize, 0),
    unversionedKeys: requireKeys(opts.unversionedKeys ?? CHECKPOINT_DEFAULTS.unversionedKeys),
  });
}

/** A {@link CheckpointStore} on Redis, plus TTLs for finished executions. */
export interface RedisCheckpointStore<S = unknown> extends CheckpointStore<S> {
  /**
   * Lets the checkpoint and history of a finished execution expire after `seconds`.
   * A later `put` makes them permanent again.
   * @param seconds @default the store's `finishedTtlSeconds`
   */
  expire(executionId: number, seconds?: number): Promise<void>;
  /**
   * Removes the `unversionedKeys` from the latest checkpoint when it is still version
   * `version`, in place: no new version, nothing in the history.
   * @returns whether it did (false: the latest version is another one, or there is none)
   */
  dropUnversioned(executionId: number, version: number): Promise<boolean>;
  /** The compiled options this store runs with. */
  readonly options: CompiledRedisCheckpointOptions;
}

/** Options of {@link redisIdempotencyStore}. */
export interface RedisIdempotencyOptions {
  /** Prefix of every key, e.g. `"baton"`. */
  prefix: string;
}

/**
 * An ioredis client with the options Baton's services need: connect at once, queue
 * commands while (re)connecting, and fail a command after a few reconnection
 * attempts instead of hanging forever.
 * @param options merged over the defaults: `lazyConnect: false`,
 *   `enableOfflineQueue: true`, `maxRetriesPerRequest: 3`, `connectTimeout: 5000`,
 *   reconnect back-off 50 ms doubling up to 2 s.
 */
export function createRedis(url: string, options: RedisOptions = {}): Redis {
  return new Redis(url, {
    lazyConnect: false,
    enableOfflineQueue: true,
    maxRetriesPerRequest: 3,
    connectTimeout: 5_000,
    retryStrategy: (times) => Math.min(50 * 2 ** Math.min(times, 6), 2_000),
    ...options,
  });
}

/**
 * Deletes every key under `prefix` (`prefix:*`: checkpoints, their history, idempotency
 * records) with SCAN, never KEYS, so a shared Redis is not blocked. For tearing down an
 * isolated prefix: tests, benchmarks, a throwaway deployment.
 * @returns how many keys were deleted
 */
export async function deleteKeysByPrefix(redis: Redis, prefix: string): Promise<number> {
  if (typeof prefix !== "string" || prefix.length === 0) throw CheckpointInvalidArgument("prefix", prefix, "a non-empty string");
  let cursor = "0";
  let deleted = 0;
  do {
    const [next, keys] = await redis.scan(cursor, "MATCH", `${prefix}:*`, "COUNT", 1000);
    if (keys.length > 0) deleted += await redis.del(...keys);
    cursor = next;
  } while (cursor !== "0");
  return deleted;
}

interface LuaScript {
  readonly source: string;
  readonly sha: string;
}

function lua(source: string): LuaScript {
  return { source, sha: createHash("sha1").update(source).digest("hex") };
}

async function runScript(redis: Redis, script: LuaScript, keys: string[], args: (string | number)[]): Promise<unknown> {
  try {
    return await redis.evalsha(script.sha, keys.length, ...keys, ...args);
  } catch (err) {
    if (!(err instanceof Error) || !err.message.startsWith("NOSCRIPT")) throw err;
    return await redis.eval(script.source, keys.length, ...keys, ...args);
  }
}

// The version check, the write (ARGV[6]: the unversioned keys' JSON object, kept in
// field 'u' and never in the history), turning the previous head into its delta (or
// snapshot) and the history append happen in one script, so no reader or writer ever
// sees one without the others. The delta was computed by the caller against a state
// it read: ARGV[5] is that state's sha1, and a different stored state (deleted and
// written again since) answers {2} so the caller diffs again. An empty ARGV[4] makes
// the previous version a snapshot of the stored state. The time comes from Redis, so
// all executors share one clock.
const PUT = lua(`
local current = tonumber(redis.call('HGET', KEYS[1], 'v') or '0')
local expected = tonumber(ARGV[1])
if current ~= expected then
  return {0, current}
end
if current > 0 then
  local old = redis.call('HMGET', KEYS[1], 's', 't')
  local payload = ARGV[4]
  if payload == '' then
    payload = '"s":' .. old[1]
  elseif redis.sha1hex(old[1]) ~= ARGV[5] then
    return {2, current}
  end
  local marker = '{"v":' .. string.format('%d', current) .. ','
  local head = redis.call('LINDEX', KEYS[2], 0)
  if head and string.sub(head, 1, string.len(marker)) == marker then
    redis.call('LSET', KEYS[2], 0, marker .. '"t":' .. old[2] .. ',' .. payload .. '}')
  end
end
local now = redis.call('TIME')
local ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local version = current + 1
redis.call('HSET', KEYS[1], 'v', version, 's', ARGV[2], 't', string.format('%d', ms))
if ARGV[6] == '' then
  redis.call('HDEL', KEYS[1], 'u')
else
  redis.call('HSET', KEYS[1], 'u', ARGV[6])
end
redis.call('PERSIST', KEYS[1])
redis.call('LPUSH', KEYS[2], '{"v":' .. string.format('%d', version) .. ',"t":' .. string.format('%d', ms) .. '}')
redis.call('LTRIM', KEYS[2], 0, tonumber(ARGV[3]) - 1)
redis.call('PERSIST', KEYS[2])
return {1, version, ms}
`);

// Reads what rebuilding version ARGV[1] needs, atomically: the history entries from
// the nearest newer snapshot (a multiple of ARGV[2]) down to the version, plus the
// latest state when no snapshot lies between.
const GET_VERSION = lua(`
local current = tonumber(redis.call('HGET', KEYS[1], 'v') or '0')
local target = tonumber(ARGV[1])
if target > current then
  return {current}
end
local every = tonumber(ARGV[2])
local base = math.min(math.ceil(target / every) * every, current)
local state = ''
if base == current then
  state = redis.call('HGET', KEYS[1], 's')
end
return {current, state, redis.call('LRANGE', KEYS[2], current - base, current - target)}
`);

const DROP_UNVERSIONED = lua(`
if tonumber(redis.call('HGET', KEYS[1], 'v') or '0') ~= tonumber(ARGV[1]) then
  return 0
end
redis.call('HDEL', KEYS[1], 'u')
return 1
`);

const REMEMBER = lua(`
local existing = redis.call('GET', KEYS[1])
if existing then
  return {0, existing}
end
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
return {1}
`);

function requireKeys(value: unknown): readonly string[] {
  if (!Array.isArray(value) || value.some((k) => typeof k !== "string" || k.length === 0)) {
    throw CheckpointInvalidArgument("unversionedKeys", value, "an array of non-empty strings");
  }
  return Object.freeze([...(value as string[])]);
}

function requireInteger(name: string, value: unknown, min: number): number {
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < min) {
    throw CheckpointInvalidArgument(name, value, min === 0 ? "a non-negative integer" : `an integer ≥ ${min}`);
  }
  return value;
}

function encodeState(state: unknown): string {
  let json: string | undefined;
  try {
    json = JSON.stringify(state);
  } catch (err) {
    throw CheckpointInvalidState(errorMessage(err), { cause: err });
  }
  if (json === undefined) throw CheckpointInvalidState(`a value of type ${typeof state} is not JSON`);
  return json;
}

function decodeJson(key: string, text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    throw CheckpointCorrupt(key, { cause: err });
  }
}

/** Baton errors pass through; a Redis type error is corruption; anything else is Redis being away. */
function wrapRedisError(operation: string, key: string, err: unknown): unknown {
  if (hasCode(err)) return err;
  if (err instanceof Error && err.message.includes("WRONGTYPE")) return CheckpointCorrupt(key, { cause: err });
  return CheckpointUnavailable(operation, { cause: err });
}

const sha1 = (text: string): string => hash("sha1", text);

/**
 * The latest state of an execution as this store last wrote or read it: its JSON and,
 * filled in when a put first needs them, the parsed value and the JSON's sha1. The value
 * is never handed to a caller (who might change it), so it always equals the JSON.
 */
interface LatestState {
  version: number;
  json: string;
  value?: Json | undefined;
  sha?: string;
}

/**
 * What `put` returns. The state is parsed from the written JSON when first read, not
 * before: most callers only need the version. Reading or assigning it turns it into a
 * plain data property.
 */
function writtenCheckpoint<S>(executionId: number, version: number, json: string, unversioned: string, updatedAt: string): Checkpoint<S> {
  const settle = (cp: Checkpoint<S>, value: S): S => {
    Object.defineProperty(cp, "state", { value, writable: true, enumerable: true, configurable: true });
    return value;
  };
  return {
    executionId,
    version,
    get state(): S {
      return settle(this, withUnversioned(JSON.parse(json), unversioned) as S);
    },
    set state(value: S) {
      settle(this, value);
    },
    updatedAt,
  };
}

/** The state with its unversioned keys (a JSON object, or "" for none) put back. */
function withUnversioned(state: unknown, unversioned: string): unknown {
  if (unversioned === "" || state === null || typeof state !== "object") return state;
  return Object.assign(state, JSON.parse(unversioned) as object);
}

interface HistoryEntry {
  v: number;
  t: number;
  s?: Json;
  d?: JsonPatch | null;
}

function parseEntry(key: string, text: string): HistoryEntry {
  const e = decodeJson(key, text) as Partial<HistoryEntry> | null;
  if (e === null || typeof e !== "object" || typeof e.v !== "number" || typeof e.t !== "number") throw CheckpointCorrupt(key);
  return e as HistoryEntry;
}

/**
 * Rebuilds versions from `entries` (newest first, contiguous). The first entry is
 * either the latest version (its state is `headState`) or a snapshot; otherwise
 * nothing can be rebuilt and the result is empty. Stops at a gap, which only a
 * damaged list has.
 */
function rebuild(key: string, entries: readonly string[], headState: Json | undefined): { version: number; t: number; state: Json }[] {
  const out: { version: number; t: number; state: Json }[] = [];
  let state: Json | undefined;
  for (const text of entries) {
    const e = parseEntry(key, text);
    const previous = out[out.length - 1];
    if (previous !== undefined && e.v !== previous.version - 1) break;
    if (e.s !== undefined) state = e.s;
    else if (state === undefined) {
      // The first entry is neither a snapshot nor the latest version: no base to rebuild from.
      if (headState === undefined || e.d !== undefined) return [];
      state = headState;
    } else if (e.d !== undefined) {
      try {
        state = applyPatch(state, e.d);
      } catch (err) {
        throw CheckpointCorrupt(key, { cause: err });
      }
    } else throw CheckpointCorrupt(key);
    out.push({ version: e.v, t: e.t, state });
  }
  return out;
}

/**
 * A checkpoint store on Redis. `put` is one Lua script: compare the version, write,
 * turn the previous version's history entry into a delta (or a snapshot), append,
 * trim. States are stored as JSON, so `get` returns a JSON round-trip of what was
 * put, and `history`/`getVersion` rebuild older versions from the deltas.
 */
export function redisCheckpointStore<S = unknown>(redis: Redis, opts: RedisCheckpointOptions): RedisCheckpointStore<S> {
  const options = compileRedisCheckpointOptions(opts);
  const { prefix, historyLimit, snapshotEvery, finishedTtlSeconds, stateCacheSize, unversionedKeys } = options;
  const unversioned = new Set(unversionedKeys);

  /** The state without its unversioned keys, and those keys as a JSON object ("" when none is set). */
  const split = (state: unknown): { versioned: unknown; rest: string } => {
    if (unversioned.size === 0 || state === null || typeof state !== "object" || Array.isArray(state)) return { versioned: state, rest: "" };
    const versioned: Record<string, unknown> = {};
    let rest: Record<string, unknown> | undefined;
    for (const [k, v] of Object.entries(state)) {
      if (!unversioned.has(k)) versioned[k] = v;
      else if (v !== undefined) (rest ??= {})[k] = v;
    }
    return { versioned, rest: rest ? encodeState(rest) : "" };
  };

  const checkpointKey = (id: number): string => `${prefix}:checkpoint:{${id}}`;
  const historyKey = (id: number): string => `${prefix}:checkpoint:{${id}}:history`;

  // executionId → its latest state as this process last wrote or read it.
  const cache = new Map<number, LatestState>();
  const remember = (executionId: number, latest: LatestState): void => {
    if (stateCacheSize === 0) return;
    cache.delete(executionId);
    cache.set(executionId, latest);
    if (cache.size > stateCacheSize) cache.delete(cache.keys().next().value as number);
  };

  const toCheckpoint = (executionId: number, r: { version: number; t: number; state: Json }): Checkpoint<S> => ({
    executionId,
    version: r.version,
    // Rebuilt versions share unchanged subtrees; callers get their own copy.
    state: structuredClone(r.state) as S,
    updatedAt: new Date(r.t).toISOString(),
  });

  /** The stored latest version and state JSON. */
  const readLatest = async (executionId: number): Promise<{ version: number; json: string | null }> => {
    const key = checkpointKey(executionId);
    let fields: (string | null)[];
    try {
      fields = await redis.hmget(key, "v", "s");
    } catch (err) {
      throw wrapRedisError("put", key, err);
    }
    const [v, s] = fields;
    return { version: v === null || v === undefined ? 0 : Number(v), json: s ?? null };
  };

  const store: RedisCheckpointStore<S> = {
    options,

    async get(executionId) {
      requireInteger("executionId", executionId, 0);
      const key = checkpointKey(executionId);
      let fields: (string | null)[];
      try {
        fields = await redis.hmget(key, "v", "s", "t", "u");
      } catch (err) {
        throw wrapRedisError("get", key, err);
      }
      const [v, s, t, u] = fields;
      if (v === null || v === undefined) return null;
      const version = Number(v);
      const ms = Number(t);
      if (!Number.isSafeInteger(version) || s === null || s === undefined || !Number.isFinite(ms)) throw CheckpointCorrupt(key);
      const state = decodeJson(key, s) as S;
      if (u && state !== null && typeof state === "object") Object.assign(state, decodeJson(key, u));
      remember(executionId, { version, json: s });
      return { executionId, version, state, updatedAt: new Date(ms).toISOString() };
    },

    async put(executionId, state, expectedVersion) {
      requireInteger("executionId", executionId, 0);
      requireInteger("expectedVersion", expectedVersion, 0);
      const { versioned, rest } = split(state);
      const json = encodeState(versioned);
      const key = checkpointKey(executionId);
      // The previous version becomes a snapshot every snapshotEvery versions, else a delta.
      const needsDelta = expectedVersion > 0 && expectedVersion % snapshotEvery !== 0;
      // The written state as JSON values (undefined fields dropped, dates as strings), parsed
      // only when a delta needs it. It stays this store's own: the caller gets another copy.
      let next: Json | undefined;
      let previous = cache.get(executionId);
      for (let attempt = 0; ; attempt++) {
        let payload = "";
        let previousSha = "";
        if (needsDelta) {
          if (previous?.version !== expectedVersion) {
            const latest = await readLatest(executionId);
            if (latest.version !== expectedVersion || latest.json === null) {
              cache.delete(executionId);
              throw CheckpointConflict(executionId, expectedVersion, latest.version, { details: { expected: expectedVersion, actual: latest.version } });
            }
            previous = { version: latest.version, json: latest.json };
          }
          next ??= decodeJson(key, json) as Json;
          previous.value ??= decodeJson(key, previous.json) as Json;
          previous.sha ??= sha1(previous.json);
          payload = `"d":${JSON.stringify(diffJson(next, previous.value))}`;
          previousSha = previous.sha;
        }
        let reply: unknown;
        try {
          reply = await runScript(redis, PUT, [key, historyKey(executionId)], [expectedVersion, json, historyLimit, payload, previousSha, rest]);
        } catch (err) {
          throw wrapRedisError("put", key, err);
        }
        const [ok, version, ms] = reply as [number, number, number?];
        if (ok === 1) {
          remember(executionId, { version, json, value: next });
          return writtenCheckpoint<S>(executionId, version, json, rest, new Date(ms ?? 0).toISOString());
        }
        cache.delete(executionId);
        previous = undefined;
        // 2: the stored state is not the one the delta was made from; read it and diff again.
        if (ok !== 2 || attempt >= 2) {
          throw CheckpointConflict(executionId, expectedVersion, version, { details: { expected: expectedVersion, actual: version } });
        }
      }
    },

    async history(executionId, historyOptions: HistoryOptions = {}) {
      requireInteger("executionId", executionId, 0);
      const limit = requireInteger("limit", historyOptions.limit ?? historyLimit, 1);
      const key = historyKey(executionId);
      let results: [Error | null, unknown][] | null;
      try {
        results = await redis.multi().hget(checkpointKey(executionId), "s").lrange(key, 0, limit - 1).exec();
      } catch (err) {
        throw wrapRedisError("history", key, err);
      }
      const failed = results?.find(([err]) => err !== null)?.[0];
      if (failed) throw wrapRedisError("history", key, failed);
      const head = results?.[0]?.[1] as string | null | undefined;
      const entries = (results?.[1]?.[1] ?? []) as string[];
      if (head === null || head === undefined || entries.length === 0) return [];
      return rebuild(key, entries, decodeJson(key, head) as Json).map((r) => toCheckpoint(executionId, r));
    },

    async getVersion(executionId, version) {
      requireInteger("executionId", executionId, 0);
      requireInteger("version", version, 1);
      const key = historyKey(executionId);
      let reply: unknown;
      try {
        reply = await runScript(redis, GET_VERSION, [checkpointKey(executionId), key], [version, snapshotEvery]);
      } catch (err) {
        throw wrapRedisError("getVersion", key, err);
      }
      const [current, head, entries] = reply as [number, string?, string[]?];
      if (version > current || entries === undefined || entries.length === 0) return null;
      let rebuilt = rebuild(key, entries, head ? (decodeJson(key, head) as Json) : undefined);
      if (rebuilt.length === 0) {
        // No snapshot where one was expected (written with another snapshotEvery): rebuild from the latest.
        rebuilt = (await store.history(executionId, { limit: current - version + 1 })).map((c) => ({
          version: c.version,
          t: Date.parse(c.updatedAt),
          state: c.state as Json,
        }));
      }
      const found = rebuilt.find((r) => r.version === version);
      return found ? toCheckpoint(executionId, found) : null;
    },

    async delete(executionId) {
      requireInteger("executionId", executionId, 0);
      const key = checkpointKey(executionId);
      cache.delete(executionId);
      try {
        await redis.del(key, historyKey(executionId));
      } catch (err) {
        throw wrapRedisError("delete", key, err);
      }
    },

    async dropUnversioned(executionId, version) {
      requireInteger("executionId", executionId, 0);
      requireInteger("version", version, 1);
      const key = checkpointKey(executionId);
      try {
        return (await runScript(redis, DROP_UNVERSIONED, [key], [version])) === 1;
      } catch (err) {
        throw wrapRedisError("dropUnversioned", key, err);
      }
    },

    async expire(executionId, seconds = finishedTtlSeconds) {
      requireInteger("executionId", executionId, 0);
      const ttl = requireInteger("seconds", seconds, 1);
      const key = checkpointKey(executionId);
      cache.delete(executionId);
      let results: [Error | null, unknown][] | null;
      try {
        results = await redis.multi().expire(key, ttl).expire(historyKey(executionId), ttl).exec();
      } catch (err) {
        throw wrapRedisError("expire", key, err);
      }
      const failed = results?.find(([err]) => err !== null)?.[0];
      if (failed) throw wrapRedisError("expire", key, failed);
    },
  };
  return store;
}

/**
 * An idempotency store on Redis: `remember` is one script (GET, else SET with EX),
 * values are stored as JSON.
 */
export function redisIdempotencyStore(redis: Redis, opts: RedisIdempotencyOptions): IdempotencyStore {
  const recordKey = (key: string): string => `${opts.prefix}:idempotency:${key}`;
  const requireKey = (key: unknown): string => {
    if (typeof key !== "string" || key.length === 0) throw CheckpointInvalidArgument("key", key, "a non-empty string");
    return key;
  };

  return {
    async remember<T>(key: string, value: T, ttl: number) {
      const full = recordKey(requireKey(key));
      requireInteger("ttlSeconds", ttl, 1);
      const json = encodeState(value);
      let reply: unknown;
      try {
        reply = await runScript(redis, REMEMBER, [full], [json, ttl]);
      } catch (err) {
        throw wrapRedisError("remember", full, err);
      }
      const [stored, existing] = reply as [number, string?];
      if (stored === 1) return { stored: true, value: decodeJson(full, json) as T };
      return { stored: false, value: decodeJson(full, existing ?? "") as T };
    },

    async get<T>(key: string) {
      const full = recordKey(requireKey(key));
      let text: string | null;
      try {
        text = await redis.get(full);
      } catch (err) {
        throw wrapRedisError("get", full, err);
      }
      return text === null ? null : (decodeJson(full, text) as T);
    },
  };
}
