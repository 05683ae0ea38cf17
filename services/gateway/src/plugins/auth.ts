/**
 * API-key authentication for every route of the scope it is registered in.
 *
 * The key comes from `Authorization: Bearer <key>` or `x-api-key: <key>` and is
 * resolved by the store to a tenant and a role; answers (including "unknown key")
 * are cached in memory for a short time, keyed by the key's hash so raw keys are
 * not kept. Viewers may only read (GET/HEAD); operator and admin may write.
 */
import { createHash } from "node:crypto";
import type { FastifyInstance, FastifyPluginAsync, FastifyRequest } from "fastify";
import type { GatewayDeps } from "../deps.ts";
import { Forbidden, Unauthenticated } from "../errors.ts";

export type Role = "admin" | "operator" | "viewer";

/** Who is calling; set on every authenticated request as `request.auth`. */
export interface AuthContext {
  tenantId: string;
  role: string;
  keyId: number | string;
}

declare module "fastify" {
  interface FastifyRequest {
    /** The caller, resolved from the API key. Present on every `/api/*` request handler. */
    auth: AuthContext;
  }
}

const WRITE_ROLES: ReadonlySet<string> = new Set(["operator", "admin"]);
/** Methods every role may use; the others need a role in WRITE_ROLES (403 otherwise). */
export const READ_METHODS: ReadonlySet<string> = new Set(["GET", "HEAD"]);
const MAX_CACHE_ENTRIES = 10_000;

export interface AuthPluginOptions {
  deps: GatewayDeps;
  /** @default 10000 */
  cacheTtlMs?: number;
}

/** The raw key of a request, or undefined when it carries none. */
export function extractApiKey(request: FastifyRequest): string | undefined {
  const authz = request.headers.authorization;
  if (typeof authz === "string") {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(authz);
    if (m?.[1]) return m[1];
  }
  const header = request.headers["x-api-key"];
  const key = Array.isArray(header) ? header[0] : header;
  return key && key.trim() !== "" ? key.trim() : undefined;
}

interface CacheEntry {
  value: AuthContext | null;
  expiresAt: number;
}

/** A small TTL cache of key resolutions; expired entries are dropped when met, the oldest when full. */
function createKeyCache(ttlMs: number, resolve: (key: string) => Promise<AuthContext | null>) {
  const entries = new Map<string, CacheEntry>();
  return async (rawKey: string): Promise<AuthContext | null> => {
    const id = createHash("sha256").update(rawKey).digest("base64url");
    const now = Date.now();
    const hit = entries.get(id);
    if (hit && hit.expiresAt > now) return hit.value;
    if (hit) entries.delete(id);
    const value = await resolve(rawKey);
    if (ttlMs > 0) {
      if (entries.size >= MAX_CACHE_ENTRIES) {
        const oldest = entries.keys().next();
        if (!oldest.done) entries.delete(oldest.value);
      }
      entries.set(id, { value, expiresAt: now + ttlMs });
    }
    return value;
  };
}

async function authPluginImpl(app: FastifyInstance, opts: AuthPluginOptions): Promise<void> {
  const { store } = opts.deps;
  const lookup = createKeyCache(opts.cacheTtlMs ?? 10_000, async (key) => {
    const r = await store.tenants.resolveApiKey(key);
    return r ? { tenantId: r.tenantId, role: r.role, keyId: r.keyId } : null;
  });

  app.decorateRequest("auth", null as unknown as AuthContext);
  app.addHook("onRequest", async (request) => {
    const key = extractApiKey(request);
    if (key === undefined) {
      // An Authorization header of another form (Basic, a bare key, a Bearer with two words) is
      // a key sent wrongly, not none.
      const authz = request.headers.authorization;
      if (typeof authz === "string" && authz.trim() !== "") throw Unauthenticated("the Authorization header is not `Bearer <key>` (one key after Bearer); send that, or `x-api-key: <key>`");
      throw Unauthenticated("an API key is required: send `Authorization: Bearer <key>` or `x-api-key: <key>`");
    }
    const auth = await lookup(key);
    if (!auth) throw Unauthenticated("the API key is not valid");
    if (!READ_METHODS.has(request.method) && !WRITE_ROLES.has(auth.role)) throw Forbidden(auth.role, request.method);
    request.auth = auth;
  });
}

/**
 * Registered without encapsulation (like fastify-plugin), so the hook guards the
 * scope that registers it.
 */
export const authPlugin: FastifyPluginAsync<AuthPluginOptions> = Object.assign(authPluginImpl, {
  [Symbol.for("skip-override")]: true,
});
