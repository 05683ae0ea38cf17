/**
 * Per-tenant daily token budget on a NATS KV bucket: one counter per tenant per UTC day
 * (key `{tenant}.{YYYY-MM-DD}`), updated with compare-and-set so concurrent workers never
 * lose an addition. The check happens before a call, the addition after it: calls that
 * run concurrently may together overshoot the limit by their own usage.
 */
import type { KV } from "@baton/bus";
import { LlmBudgetExceeded, LlmInvalidConfig } from "./errors.ts";
import type { LlmUsage } from "./messages.ts";

/** Bucket name to open with `bus.kv(TOKEN_BUDGET_BUCKET, TOKEN_BUDGET_BUCKET_OPTIONS)`. */
export const TOKEN_BUDGET_BUCKET = "llm_tokens";
/** Counters are kept two days, then expire with the bucket's max age. */
export const TOKEN_BUDGET_BUCKET_OPTIONS = { ttlMs: 48 * 3600_000 } as const;

export interface TokenBudgetOptions {
  /** Tokens per tenant per UTC day; 0 = unlimited (nothing is checked, usage is still counted). */
  dailyLimit: number;
  /** @default () => new Date() */
  now?: () => Date;
}

export interface TokenBudget {
  readonly dailyLimit: number;
  /** Throws BATON_LLM_BUDGET_EXCEEDED when the tenant's tokens of today reach the limit. */
  check(tenantId: string): Promise<void>;
  /** Adds a call's usage (its `totalTokens`); returns the tenant's total of today. */
  add(tenantId: string, usage: Pick<LlmUsage, "totalTokens">): Promise<number>;
  /** The tenant's tokens of today. */
  used(tenantId: string): Promise<number>;
}

const enc = new TextEncoder();
const dec = new TextDecoder();

/** A KV key token for any tenant id: safe characters kept, the rest hex-escaped as `=XX`. */
export function tenantKeyToken(tenantId: string): string {
  return Array.from(enc.encode(tenantId), (b) => {
    const c = String.fromCharCode(b);
    return /[A-Za-z0-9_-]/.test(c) ? c : `=${b.toString(16).padStart(2, "0")}`;
  }).join("") || "=";
}

export function createTokenBudget(kv: KV, opts: TokenBudgetOptions): TokenBudget {
  const { dailyLimit } = opts;
  if (!(Number.isInteger(dailyLimit) && dailyLimit >= 0)) throw LlmInvalidConfig(["dailyLimit: must be an integer of at least 0"]);
  const now = opts.now ?? (() => new Date());
  const key = (tenantId: string): string => `${tenantKeyToken(tenantId)}.${now().toISOString().slice(0, 10)}`;

  const read = async (k: string): Promise<{ value: number; revision: number } | undefined> => {
    const e = await kv.get(k);
    if (!e || e.operation !== "PUT") return undefined;
    const n = Number(dec.decode(e.value));
    return { value: Number.isFinite(n) ? n : 0, revision: e.revision };
  };
  const used = async (tenantId: string): Promise<number> => (await read(key(tenantId)))?.value ?? 0;

  return {
    dailyLimit,
    used,
    async check(tenantId) {
      if (dailyLimit === 0) return;
      const n = await used(tenantId);
      if (n >= dailyLimit) throw LlmBudgetExceeded(tenantId, n, dailyLimit);
    },
    async add(tenantId, usage) {
      const tokens = Math.max(0, Math.floor(usage.totalTokens));
      const k = key(tenantId);
      let lastErr: unknown;
      for (let i = 0; i < 50; i++) {
        if (i > 0) await new Promise((r) => setTimeout(r, Math.random() * Math.min(50, 2 * i)));
        const cur = await read(k);
        const next = (cur?.value ?? 0) + tokens;
        if (tokens === 0) return next;
        try {
          if (cur === undefined) await kv.create(k, enc.encode(String(next)));
          else await kv.update(k, enc.encode(String(next)), cur.revision);
          return next;
        } catch (err) {
          // Another writer won the race (wrong last sequence / key exists): read again.
          lastErr = err;
        }
      }
      throw lastErr;
    },
  };
}
