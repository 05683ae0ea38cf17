/**
 * Redis backends of the checkpoint and idempotency contracts.
 *
 * Key layout (the `{id}` hash tag keeps an execution's keys in one cluster slot, so
 * one script can touch both):
 *   `<prefix>:checkpoint:{<executionId>}`          hash  v (version), s (state JSON), t (ms),
 *       n (a token new with every write), b (the version `s` was written at), u (the
 *       unversioned keys' JSON, when set)
 *   `<prefix>:checkpoint:{<executionId>}:fwd`      list  forward deltas since `s` was written, oldest
 *       first: the latest state is `s` with each applied in turn (only for large states, see
 *       `deltaAboveBytes`; absent otherwise). They count only when b + their number = v: a
 *       writer that knows nothing of them (an executor from before them) writes `s` alone,
 *       and its `s` is then the latest state.
 *   `<prefix>:checkpoint:{<executionId>}:history`  list  newest first, one entry per version:
 *       `{"v":N,"t":ms}`             the latest version (its state is the latest state);
 *       `{"v":N,"t":ms,"d":patch}`  a delta: applying it to version N+1's state gives N's;
 *       `{"v":N,"t":ms,"s":state}`  a full snapshot (every `snapshotEvery`-th version of a
 *                                    state written whole).
 *   `<prefix>:checkpoint:{<executionId>}:rebuild`  string `<floor>:<owner>`, with a TTL: a rebuild
 *       from the journal under way, which fenced the journal at `floor` (claimRebuild)
 *   `<prefix>:idempotency:<key>`                   string, the JSON value
 *
 * Deltas point backwards (newer → older), so trimming the oldest entries never
 * strands a delta without its base: a version is rebuilt from the latest state, or from
 * the nearest newer snapshot, by applying deltas down to it.
 */
import { createHash, hash, randomBytes } from "node:crypto";
import { Redis } from "ioredis";
import type { RedisOptions } from "ioredis";
import { errorMessage, hasCode } from "@baton/errors";
import { applyPatch, diffJson, type Json, type JsonPatch } from "./delta.ts";
import { sizeAgainst, sizeOf } from "./size.ts";
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
  /**
   * The caller never changes a state, nor anything in it, once it has put it, and its states
   * are plain JSON data (objects, arrays, strings, finite numbers, booleans, null; a key
   * whose value is undefined counts as absent). The store then keeps the state put as the
   * base of the next write's deltas instead of parsing back the JSON it wrote, and a part
   * the next state shares with it (the same object) is known unchanged without being walked:
   * a write costs in proportion to what changed, not to the state's size. The executor's
   * engine makes its states so (a step copies what it changes and shares the rest).
   * @default false
   */
  immutableStates?: boolean;
  /**
   * A state whose JSON, when last written whole, was larger than this many bytes is written
   * as a forward delta from the version before it, kept beside that whole state, until the
   * deltas add up to half its size or to {@link maxDeltas}; the next write is whole again.
   * Snapshots in the history are made only of states written whole, so a large state's
   * history is deltas (each past version is rebuilt from the latest). Without this, a state
   * of a few megabytes (a forEach over thousands of items) would be sent and stored whole
   * at every step. Env `BATON_CHECKPOINT_DELTA_ABOVE_BYTES` through `@baton/config`.
   * @default 65536
   */
  deltaAboveBytes?: number;
  /**
   * At most this many forward deltas are kept beside a whole state; reading the latest
   * state (after a restart, on another replica) applies them all.
   * @default 256
   */
  maxDeltas?: number;
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
  immutableStates: false,
  deltaAboveBytes: 65_536,
  maxDeltas: 256,
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
    immutableStates: requireBoolean("immutableStates", opts.immutableStates ?? CHECKPOINT_DEFAULTS.immutableStates),
    deltaAboveBytes: requireInteger("deltaAboveBytes", opts.deltaAboveBytes ?? CHECKPOINT_DEFAULTS.deltaAboveBytes, 0),
    maxDeltas: requireInteger("maxDeltas", opts.maxDeltas ?? CHECKPOINT_DEFAULTS.maxDeltas, 1),
  });
}

/** A {@link CheckpointStore} on Redis, plus TTLs for finished executions. */
export interface RedisCheckpointStore<S = unknown> extends CheckpointStore<S> {
  /**
   * Lets the checkpoint and history of a finished execution expire after `seconds`.
   * A later `put` makes them permanent again. With `dropUnversioned`, what the checkpoint keeps
   * beside the state (its unversioned keys) is dropped in the same round trip.
   * @param seconds @default the store's `finishedTtlSeconds`
   */
  expire(executionId: number, seconds?: number, opts?: { dropUnversioned?: boolean }): Promise<void>;
  /**
   * Removes the `unversionedKeys` from the latest checkpoint when it is still version
   * `version`, in place: no new version, nothing in the history.
   * @returns whether it did (false: the latest version is another one, or there is none)
   */
  dropUnversioned(executionId: number, version: number): Promise<boolean>;
  /**
   * Claims the execution for a rebuild from the journal that fenced it at `floor`, for `ttlMs`
   * (renewed by calling again): other executors wait for it rather than rebuild the run
   * themselves (ADR 004). A claim of a rebuild that fenced later (a higher floor) stands.
   * @returns whether the claim is now this one's
   */
  claimRebuild(executionId: number, floor: number, owner: string, ttlMs: number): Promise<boolean>;
  /** Drops the claim of `floor` and `owner`, if it still stands. */
  releaseRebuild(executionId: number, floor: number, owner: string): Promise<void>;
  /** The rebuild claim that stands, if any. */
  rebuildClaim(executionId: number): Promise<{ floor: number; owner: string } | null>;
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

// The version check, the write, turning the previous head into its delta (or snapshot) and
// the history append happen in one script, so no reader or writer ever sees one without the
// others. ARGV: [1] the expected version; [2] the state's JSON, or '' to write [7], a
// forward delta from the stored latest state, onto KEYS[3]; [3] the history limit; [4] the
// previous version's history payload: '"d":<backward delta>', or '' to make it a snapshot of
// the stored state (only when that state is whole, with no forward delta); [5] what the
// deltas were made against: 'n:<token>' (the stored token), or the sha1 of the stored state
// (written before tokens), or '' for nothing; a different stored state (deleted and written
// again since) answers {2} so the caller diffs again; [6] the unversioned keys' JSON object
// (field 'u', never in the history), '' for none; [8] this write's token; [9] for a first
// write (expected 0), the version to number after (so that a checkpoint written again after
// Redis lost it does not repeat versions a replica may still hold). The time comes from
// Redis, so all executors share one clock.
const PUT = lua(`
local current = tonumber(redis.call('HGET', KEYS[1], 'v') or '0')
local expected = tonumber(ARGV[1])
if current ~= expected then
  return {0, current}
end
if current > 0 then
  local old = redis.call('HMGET', KEYS[1], 's', 't', 'n')
  local against = ARGV[5]
  if string.sub(against, 1, 2) == 'n:' then
    if old[3] ~= string.sub(against, 3) then
      return {2, current}
    end
  elseif against ~= '' and redis.sha1hex(old[1]) ~= against then
    return {2, current}
  end
  local payload = ARGV[4]
  if payload == '' then
    if redis.call('EXISTS', KEYS[3]) == 1 then
      return {2, current}
    end
    payload = '"s":' .. old[1]
  end
  local marker = '{"v":' .. string.format('%d', current) .. ','
  local head = redis.call('LINDEX', KEYS[2], 0)
  if head and string.sub(head, 1, string.len(marker)) == marker then
    redis.call('LSET', KEYS[2], 0, marker .. '"t":' .. old[2] .. ',' .. payload .. '}')
  end
elseif ARGV[2] == '' then
  return {2, current}
end
local now = redis.call('TIME')
local ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local version = current + 1
if current == 0 then
  version = math.max(1, (tonumber(ARGV[9]) or 0) + 1)
end
if ARGV[2] == '' then
  redis.call('HSET', KEYS[1], 'v', version, 't', string.format('%d', ms), 'n', ARGV[8])
  redis.call('RPUSH', KEYS[3], ARGV[7])
  redis.call('PERSIST', KEYS[3])
else
  redis.call('HSET', KEYS[1], 'v', version, 's', ARGV[2], 't', string.format('%d', ms), 'n', ARGV[8], 'b', version)
  redis.call('DEL', KEYS[3])
end
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

// Reads what rebuilding version ARGV[1] needs, atomically: the latest state (whole, and its
// forward deltas) and the history entries from the latest down to the version.
const GET_VERSION = lua(`
local current = tonumber(redis.call('HGET', KEYS[1], 'v') or '0')
local target = tonumber(ARGV[1])
if target > current then
  return {current}
end
local stored = redis.call('HMGET', KEYS[1], 's', 'b')
return {current, stored[1], redis.call('LRANGE', KEYS[3], 0, -1), redis.call('LRANGE', KEYS[2], 0, current - target), stored[2]}
`);

const DROP_UNVERSIONED = lua(`
if tonumber(redis.call('HGET', KEYS[1], 'v') or '0') ~= tonumber(ARGV[1]) then
  return 0
end
redis.call('HDEL', KEYS[1], 'u')
return 1
`);

// A rebuild's claim: taken, or renewed, unless a rebuild that fenced the journal later holds it.
const CLAIM_REBUILD = lua(`
local held = redis.call('GET', KEYS[1])
if held then
  local floor = tonumber(string.match(held, '^(%d+):'))
  if floor and floor > tonumber(ARGV[1]) then
    return 0
  end
end
redis.call('SET', KEYS[1], ARGV[1] .. ':' .. ARGV[2], 'PX', ARGV[3])
return 1
`);

const RELEASE_REBUILD = lua(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
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

function requireBoolean(name: string, value: unknown): boolean {
  if (typeof value !== "boolean") throw CheckpointInvalidArgument(name, value, "a boolean");
  return value;
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
 * A token for one write: what a later delta names as its base (field `n`). Unique across
 * processes and restarts: a random prefix drawn once per process, then a counter. Drawing 12
 * random bytes per write cost about 2% of the executor's CPU in the sequential benchmark.
 */
const TOKEN_PREFIX = randomBytes(12).toString("base64url");
let tokenCount = 0;
const newToken = (): string => `${TOKEN_PREFIX}${(++tokenCount).toString(36)}`;

/**
 * The latest state of an execution as this store last wrote or read it. Its value is kept
 * only when this store wrote it with `immutableStates` (the caller's own object, which it
 * never changes), or parsed here from what Redis holds, when a put first needs it; it is
 * never handed to a caller, so it always equals what is stored.
 */
interface LatestState {
  version: number;
  /** `n:<token>`, or (for a state written before tokens) undefined: the sha1 of `whole` is used. */
  token: string | undefined;
  /** The stored whole state's JSON, when known (always when there are no forward deltas and no value). */
  whole?: string;
  /** The forward deltas stored after `whole`, as JSON, when read from Redis. */
  fwd?: readonly string[];
  value?: Json;
  /** The size of the last whole write, and of the forward deltas since. */
  wholeBytes: number;
  fwdBytes: number;
  fwdCount: number;
}

/** The forward deltas that belong to the whole state written at version `b` of version `v`: none when they do not add up (see the key layout). */
function forwardOf(fwd: string[], b: string | null | undefined, v: number): string[] {
  return fwd.length > 0 && b !== null && b !== undefined && Number(b) + fwd.length === v ? fwd : [];
}

/** The state `whole` and `fwd` make: `whole` parsed, each forward delta applied in turn. */
function latestValue(key: string, whole: string, fwd: readonly string[]): Json {
  let state = decodeJson(key, whole) as Json;
  for (const text of fwd) {
    try {
      state = applyPatch(state, decodeJson(key, text) as JsonPatch | null);
    } catch (err) {
      throw hasCode(err) ? err : CheckpointCorrupt(key, { cause: err });
    }
  }
  return state;
}

/**
 * What `put` returns. The state is made (from the written JSON, or from the value put) when
 * first read, not before: most callers only need the version. Reading or assigning it turns
 * it into a plain data property.
 */
function writtenCheckpoint<S>(executionId: number, version: number, json: () => string, unversioned: string, updatedAt: string): Checkpoint<S> {
  const settle = (cp: Checkpoint<S>, value: S): S => {
    Object.defineProperty(cp, "state", { value, writable: true, enumerable: true, configurable: true });
    return value;
  };
  return {
    executionId,
    version,
    get state(): S {
      return settle(this, withUnversioned(JSON.parse(json()), unversioned) as S);
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
 * Rebuilds versions from `entries` (newest first, contiguous, the first one the latest
 * version, whose state is `headState`): each entry's state is the one after it with the
 * entry's delta applied, or the entry's snapshot. Stops at a gap, which only a damaged list has.
 */
function rebuild(key: string, entries: readonly string[], headState: Json): { version: number; t: number; state: Json }[] {
  const out: { version: number; t: number; state: Json }[] = [];
  let state: Json | undefined;
  for (const text of entries) {
    const e = parseEntry(key, text);
    const previous = out[out.length - 1];
    if (previous !== undefined && e.v !== previous.version - 1) break;
    if (e.s !== undefined) state = e.s;
    else if (state === undefined) {
      // The latest version's entry carries neither a delta nor a snapshot.
      if (e.d !== undefined) throw CheckpointCorrupt(key);
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
 * A checkpoint store on Redis. `put` is one Lua script: compare the version, write (the
 * state whole, or a forward delta for a large one), turn the previous version's history
 * entry into a delta (or a snapshot), append, trim. States are stored as JSON, so `get`
 * returns a JSON round-trip of what was put, and `history`/`getVersion` rebuild older
 * versions from the latest by the deltas.
 */
export function redisCheckpointStore<S = unknown>(redis: Redis, opts: RedisCheckpointOptions): RedisCheckpointStore<S> {
  const options = compileRedisCheckpointOptions(opts);
  const { prefix, historyLimit, snapshotEvery, finishedTtlSeconds, stateCacheSize, unversionedKeys, immutableStates, deltaAboveBytes, maxDeltas } = options;
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
  const forwardKey = (id: number): string => `${prefix}:checkpoint:{${id}}:fwd`;
  const rebuildKey = (id: number): string => `${prefix}:checkpoint:{${id}}:rebuild`;
  const keysOf = (id: number): string[] => [checkpointKey(id), historyKey(id), forwardKey(id)];

  // executionId → its latest state as this process last wrote or read it.
  const cache = new Map<number, LatestState>();
  const remember = (executionId: number, latest: LatestState): void => {
    if (stateCacheSize === 0) return;
    cache.delete(executionId);
    cache.set(executionId, latest);
    if (cache.size > stateCacheSize) cache.delete(cache.keys().next().value as number);
  };
  const known = (stored: { version: number; whole: string; fwd: readonly string[]; stray: boolean }, n: string | null | undefined): LatestState => ({
    version: stored.version,
    token: n ? `n:${n}` : undefined,
    whole: stored.whole,
    fwd: stored.fwd,
    wholeBytes: stored.whole.length,
    fwdBytes: stored.fwd.reduce((sum, d) => sum + d.length, 0),
    // Stray deltas: the next write is whole (and drops them).
    fwdCount: stored.stray ? maxDeltas : stored.fwd.length,
  });
  const valueOf = (key: string, latest: LatestState): Json => (latest.value ??= latestValue(key, latest.whole!, latest.fwd ?? []));

  /** The stored latest version: its hash fields `fields` (after v and s) and its forward deltas, read together. */
  const readStored = async (executionId: number, operation: string, fields: readonly string[]): Promise<{ version: number; whole: string | null; fwd: string[]; stray: boolean; rest: (string | null)[] }> => {
    const key = checkpointKey(executionId);
    let results: [Error | null, unknown][] | null;
    try {
      results = await redis.multi().hmget(key, "v", "s", "b", ...fields).lrange(forwardKey(executionId), 0, -1).exec();
    } catch (err) {
      throw wrapRedisError(operation, key, err);
    }
    const failed = results?.find(([err]) => err !== null)?.[0];
    if (failed) throw wrapRedisError(operation, key, failed);
    const [v, s, b, ...rest] = (results?.[0]?.[1] ?? []) as (string | null)[];
    const listed = (results?.[1]?.[1] ?? []) as string[];
    const version = v === null || v === undefined ? 0 : Number(v);
    const fwd = forwardOf(listed, b, version);
    // Deltas that do not belong to `s` (left by a writer that knew nothing of them) go with the next write, which is whole.
    return { version, whole: s ?? null, fwd, stray: listed.length > fwd.length, rest };
  };

  const toCheckpoint = (executionId: number, r: { version: number; t: number; state: Json }, readOnly = false): Checkpoint<S> => ({
    executionId,
    version: r.version,
    // Rebuilt versions share unchanged subtrees; callers get their own copy, unless they only read.
    state: (readOnly ? r.state : structuredClone(r.state)) as S,
    updatedAt: new Date(r.t).toISOString(),
  });

  const store: RedisCheckpointStore<S> = {
    options,

    async get(executionId) {
      requireInteger("executionId", executionId, 0);
      const key = checkpointKey(executionId);
      const stored = await readStored(executionId, "get", ["t", "u", "n"]);
      const { version, whole, fwd, rest: [t, u, n] } = stored;
      if (version === 0 && whole === null) return null;
      const ms = Number(t);
      if (!Number.isSafeInteger(version) || version < 1 || whole === null || !Number.isFinite(ms)) throw CheckpointCorrupt(key);
      const latest = known({ ...stored, whole }, n);
      // The caller's copy: parsed again when the store needs its own.
      const state = (fwd.length > 0 ? latestValue(key, whole, fwd) : decodeJson(key, whole)) as S;
      if (u && state !== null && typeof state === "object") Object.assign(state, decodeJson(key, u));
      remember(executionId, latest);
      return { executionId, version, state, updatedAt: new Date(ms).toISOString() };
    },

    async put(executionId, state, expectedVersion, putOptions = {}) {
      requireInteger("executionId", executionId, 0);
      requireInteger("expectedVersion", expectedVersion, 0);
      const after = requireInteger("firstVersionAfter", putOptions.firstVersionAfter ?? 0, 0);
      const { versioned, rest } = split(state);
      const key = checkpointKey(executionId);
      // The state as JSON, made at most once; a delta write of a large state needs none.
      let json: string | undefined;
      const whole = (): string => (json ??= encodeState(versioned));
      // The written state as JSON values, which the next put diffs against: the caller's own
      // object when it never changes it (immutableStates), else parsed from the JSON (undefined
      // fields dropped, dates as strings), and then only when a delta needs it.
      let next: Json | undefined = immutableStates ? (versioned as Json) : undefined;
      const nextValue = (): Json => (next ??= decodeJson(key, whole()) as Json);
      let previous = cache.get(executionId);
      for (let attempt = 0; ; attempt++) {
        let payload = "";
        let against = "";
        let forward = "";
        if (expectedVersion > 0) {
          if (previous?.version !== expectedVersion) {
            const stored = await readStored(executionId, "put", ["n"]);
            if (stored.version !== expectedVersion || stored.whole === null) {
              cache.delete(executionId);
              throw CheckpointConflict(executionId, expectedVersion, stored.version, { details: { expected: expectedVersion, actual: stored.version } });
            }
            previous = known({ ...stored, whole: stored.whole }, stored.rest[0]);
          }
          const base = previous;
          // A large state goes as a forward delta while the deltas stay small beside the whole,
          // and while it is not much smaller than the whole (else the whole, stale, would stay).
          const asDelta = base.wholeBytes > deltaAboveBytes && base.fwdCount < maxDeltas && base.fwdBytes * 2 < base.wholeBytes &&
            (immutableStates ? sizeAgainst(versioned, base.value) : whole().length) * 2 > base.wholeBytes;
          // The previous version becomes a snapshot every snapshotEvery versions, else a delta;
          // only a state stored whole can be one (the script copies it).
          const snapshot = !asDelta && base.fwdCount === 0 && expectedVersion % snapshotEvery === 0;
          const before = snapshot ? undefined : valueOf(key, base);
          try {
            if (before !== undefined) payload = `"d":${JSON.stringify(diffJson(nextValue(), before))}`;
            if (asDelta) forward = JSON.stringify(diffJson(before!, nextValue()));
          } catch (err) {
            throw hasCode(err) ? err : CheckpointInvalidState(errorMessage(err), { cause: err });
          }
          against = base.token ?? (base.whole !== undefined && base.fwdCount === 0 ? sha1(base.whole) : "");
        }
        const token = newToken();
        let reply: unknown;
        try {
          reply = await runScript(redis, PUT, keysOf(executionId), [expectedVersion, forward === "" ? whole() : "", historyLimit, payload, against, rest, forward, token, after]);
        } catch (err) {
          throw wrapRedisError("put", key, err);
        }
        const [ok, version, ms] = reply as [number, number, number?];
        if (ok === 1) {
          const base = previous;
          if (forward !== "" && base !== undefined) {
            remember(executionId, { version, token: `n:${token}`, value: nextValue(), wholeBytes: base.wholeBytes, fwdBytes: base.fwdBytes + forward.length, fwdCount: base.fwdCount + 1 });
          } else {
            remember(executionId, { version, token: `n:${token}`, whole: whole(), ...(next !== undefined ? { value: next } : {}), wholeBytes: whole().length, fwdBytes: 0, fwdCount: 0 });
            // The next write measures the state to choose a delta: its parts are measured now, with the whole.
            if (immutableStates && whole().length > deltaAboveBytes) sizeOf(versioned);
          }
          // The caller's copy, from the JSON: made now when the caller may change the state it put.
          const made = immutableStates ? undefined : whole();
          return writtenCheckpoint<S>(executionId, version, () => made ?? whole(), rest, new Date(ms ?? 0).toISOString());
        }
        cache.delete(executionId);
        previous = undefined;
        // 2: the stored state is not the one the deltas were made from; read it and diff again.
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
        results = await redis.multi().hmget(checkpointKey(executionId), "s", "b", "v").lrange(forwardKey(executionId), 0, -1).lrange(key, 0, limit - 1).exec();
      } catch (err) {
        throw wrapRedisError("history", key, err);
      }
      const failed = results?.find(([err]) => err !== null)?.[0];
      if (failed) throw wrapRedisError("history", key, failed);
      const [head, b, v] = (results?.[0]?.[1] ?? []) as (string | null)[];
      const fwd = forwardOf((results?.[1]?.[1] ?? []) as string[], b, Number(v));
      const entries = (results?.[2]?.[1] ?? []) as string[];
      if (head === null || head === undefined || entries.length === 0) return [];
      return rebuild(key, entries, latestValue(key, head, fwd)).map((c) => toCheckpoint(executionId, c, historyOptions.readOnly === true));
    },

    async getVersion(executionId, version) {
      requireInteger("executionId", executionId, 0);
      requireInteger("version", version, 1);
      const key = historyKey(executionId);
      let reply: unknown;
      try {
        reply = await runScript(redis, GET_VERSION, keysOf(executionId), [version]);
      } catch (err) {
        throw wrapRedisError("getVersion", key, err);
      }
      const [current, head, fwd, entries, b] = reply as [number, string?, string[]?, string[]?, string?];
      if (version > current || !head || entries === undefined || entries.length === 0) return null;
      const found = rebuild(key, entries, latestValue(key, head, forwardOf(fwd ?? [], b, current))).find((r) => r.version === version);
      return found ? toCheckpoint(executionId, found) : null;
    },

    async delete(executionId) {
      requireInteger("executionId", executionId, 0);
      const key = checkpointKey(executionId);
      cache.delete(executionId);
      try {
        await redis.del(...keysOf(executionId));
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

    async claimRebuild(executionId, floor, owner, ttlMs) {
      requireInteger("executionId", executionId, 0);
      requireInteger("floor", floor, 0);
      requireInteger("ttlMs", ttlMs, 1);
      if (typeof owner !== "string" || !/^[^:\s]+$/.test(owner)) throw CheckpointInvalidArgument("owner", owner, "a non-empty string without \":\" or spaces");
      const key = rebuildKey(executionId);
      try {
        return (await runScript(redis, CLAIM_REBUILD, [key], [floor, owner, ttlMs])) === 1;
      } catch (err) {
        throw wrapRedisError("claimRebuild", key, err);
      }
    },

    async releaseRebuild(executionId, floor, owner) {
      requireInteger("executionId", executionId, 0);
      const key = rebuildKey(executionId);
      try {
        await runScript(redis, RELEASE_REBUILD, [key], [`${floor}:${owner}`]);
      } catch (err) {
        throw wrapRedisError("releaseRebuild", key, err);
      }
    },

    async rebuildClaim(executionId) {
      requireInteger("executionId", executionId, 0);
      const key = rebuildKey(executionId);
      let held: string | null;
      try {
        held = await redis.get(key);
      } catch (err) {
        throw wrapRedisError("rebuildClaim", key, err);
      }
      const m = held === null ? null : /^(\d+):(.+)$/.exec(held);
      return m ? { floor: Number(m[1]), owner: m[2]! } : null;
    },

    async expire(executionId, seconds = finishedTtlSeconds, opts = {}) {
      requireInteger("executionId", executionId, 0);
      const ttl = requireInteger("seconds", seconds, 1);
      const key = checkpointKey(executionId);
      cache.delete(executionId);
      let results: [Error | null, unknown][] | null;
      try {
        const multi = redis.multi();
        if (opts.dropUnversioned) multi.hdel(key, "u");
        results = await multi.expire(key, ttl).expire(historyKey(executionId), ttl).expire(forwardKey(executionId), ttl).exec();
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
