/**
 * Redis backends of the checkpoint and idempotency contracts.
 *
 * Key layout (the `{id}` hash tag keeps an execution's keys in one cluster slot, so
 * one script can touch both):
 *   `<prefix>:checkpoint:{<executionId>}`          hash  v (version), s (state JSON), t (ms)
 *   `<prefix>:checkpoint:{<executionId>}:history`  list  newest first, `{"v":…,"t":…,"s":…}`
 *   `<prefix>:idempotency:<key>`                   string, the JSON value
 */
import { createHash } from "node:crypto";
import { Redis } from "ioredis";
import type { RedisOptions } from "ioredis";
import { errorMessage, hasCode } from "@baton/errors";
import {
  CheckpointConflict,
  CheckpointCorrupt,
  CheckpointInvalidArgument,
  CheckpointInvalidState,
  CheckpointUnavailable,
} from "./errors.ts";
import type { Checkpoint, CheckpointStore, HistoryOptions, IdempotencyStore } from "./types.ts";

/** Options of {@link redisCheckpointStore}. */
export interface RedisCheckpointOptions {
  /** Prefix of every key, e.g. `"baton"`; lets several deployments or tests share one Redis. */
  prefix: string;
  /**
   * How many versions each execution's history keeps (older ones are trimmed on write).
   * @default 50
   */
  historyLimit?: number;
  /**
   * Default time to live of a finished execution's checkpoint and history, used by
   * `expire(executionId)` when it is called without `seconds`. Running executions
   * never expire: every write clears a TTL set before.
   * @default undefined (no default; `expire` then needs `seconds`)
   */
  ttlSeconds?: number;
}

/** A {@link CheckpointStore} on Redis, plus TTLs for finished executions. */
export interface RedisCheckpointStore<S = unknown> extends CheckpointStore<S> {
  /**
   * Lets the checkpoint and history of a finished execution expire after `seconds`.
   * A later `put` makes them permanent again.
   * @param seconds @default the store's `ttlSeconds`
   */
  expire(executionId: number, seconds?: number): Promise<void>;
}

/** Options of {@link redisIdempotencyStore}. */
export interface RedisIdempotencyOptions {
  /** Prefix of every key, e.g. `"baton"`. */
  prefix: string;
}

const DEFAULT_HISTORY_LIMIT = 50;

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

// The version check, the write and the history append happen in one script, so no
// reader or writer ever sees one without the others. The time comes from Redis, so
// all executors share one clock.
const PUT = lua(`
local current = tonumber(redis.call('HGET', KEYS[1], 'v') or '0')
local expected = tonumber(ARGV[1])
if current ~= expected then
  return {0, current}
end
local now = redis.call('TIME')
local ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local version = current + 1
redis.call('HSET', KEYS[1], 'v', version, 's', ARGV[2], 't', string.format('%d', ms))
redis.call('PERSIST', KEYS[1])
redis.call('LPUSH', KEYS[2], '{"v":' .. string.format('%d', version) .. ',"t":' .. string.format('%d', ms) .. ',"s":' .. ARGV[2] .. '}')
redis.call('LTRIM', KEYS[2], 0, tonumber(ARGV[3]) - 1)
redis.call('PERSIST', KEYS[2])
return {1, version, ms}
`);

const REMEMBER = lua(`
local existing = redis.call('GET', KEYS[1])
if existing then
  return {0, existing}
end
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
return {1}
`);

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

/**
 * A checkpoint store on Redis. `put` is one Lua script: compare the version, write,
 * append to the history, trim it. States are stored as JSON, so `get` returns a
 * JSON round-trip of what was put.
 */
export function redisCheckpointStore<S = unknown>(redis: Redis, opts: RedisCheckpointOptions): RedisCheckpointStore<S> {
  const prefix = opts.prefix;
  const historyLimit = requireInteger("historyLimit", opts.historyLimit ?? DEFAULT_HISTORY_LIMIT, 1);
  const ttlSeconds = opts.ttlSeconds === undefined ? undefined : requireInteger("ttlSeconds", opts.ttlSeconds, 1);

  const checkpointKey = (id: number): string => `${prefix}:checkpoint:{${id}}`;
  const historyKey = (id: number): string => `${prefix}:checkpoint:{${id}}:history`;

  const fromHistoryEntry = (executionId: number, key: string, text: string): Checkpoint<S> => {
    const entry = decodeJson(key, text) as { v?: unknown; t?: unknown; s?: unknown } | null;
    if (entry === null || typeof entry.v !== "number" || typeof entry.t !== "number") throw CheckpointCorrupt(key);
    return { executionId, version: entry.v, state: entry.s as S, updatedAt: new Date(entry.t).toISOString() };
  };

  return {
    async get(executionId) {
      requireInteger("executionId", executionId, 0);
      const key = checkpointKey(executionId);
      let fields: (string | null)[];
      try {
        fields = await redis.hmget(key, "v", "s", "t");
      } catch (err) {
        throw wrapRedisError("get", key, err);
      }
      const [v, s, t] = fields;
      if (v === null || v === undefined) return null;
      const version = Number(v);
      const ms = Number(t);
      if (!Number.isSafeInteger(version) || s === null || s === undefined || !Number.isFinite(ms)) throw CheckpointCorrupt(key);
      return { executionId, version, state: decodeJson(key, s) as S, updatedAt: new Date(ms).toISOString() };
    },

    async put(executionId, state, expectedVersion) {
      requireInteger("executionId", executionId, 0);
      requireInteger("expectedVersion", expectedVersion, 0);
      const json = encodeState(state);
      const key = checkpointKey(executionId);
      let reply: unknown;
      try {
        reply = await runScript(redis, PUT, [key, historyKey(executionId)], [expectedVersion, json, historyLimit]);
      } catch (err) {
        throw wrapRedisError("put", key, err);
      }
      const [ok, version, ms] = reply as [number, number, number?];
      if (ok !== 1) {
        throw CheckpointConflict(executionId, expectedVersion, version, { details: { expected: expectedVersion, actual: version } });
      }
      return { executionId, version, state: decodeJson(key, json) as S, updatedAt: new Date(ms ?? 0).toISOString() };
    },

    async history(executionId, options: HistoryOptions = {}) {
      requireInteger("executionId", executionId, 0);
      const limit = requireInteger("limit", options.limit ?? historyLimit, 1);
      const key = historyKey(executionId);
      let entries: string[];
      try {
        entries = await redis.lrange(key, 0, limit - 1);
      } catch (err) {
        throw wrapRedisError("history", key, err);
      }
      return entries.map((text) => fromHistoryEntry(executionId, key, text));
    },

    async delete(executionId) {
      requireInteger("executionId", executionId, 0);
      const key = checkpointKey(executionId);
      try {
        await redis.del(key, historyKey(executionId));
      } catch (err) {
        throw wrapRedisError("delete", key, err);
      }
    },

    async expire(executionId, seconds = ttlSeconds) {
      requireInteger("executionId", executionId, 0);
      const ttl = requireInteger("seconds", seconds, 1);
      const key = checkpointKey(executionId);
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
