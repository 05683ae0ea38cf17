import { createHash, randomBytes } from "node:crypto";
import type { PrismaClient } from "./generated/client.ts";
import { guard } from "./db-errors.ts";
import { ApiKeyRevoked, StoreConflict, StoreInvalidInput } from "./errors.ts";
import { toApiKey, toTenant } from "./records.ts";
import type { Role, TenantsRepo } from "./types.ts";
import { isDbId, oneOf, requireTenantId, requireText, ROLES } from "./values.ts";

/** Id of the single-user tenant made by `ensureLocalKey`. */
export const LOCAL_TENANT_ID = "local";
const KEY_PREFIX_LENGTH = 8;
const LAST_USED_RESOLUTION_MS = 60_000;
const RAW_KEY_RE = /^[\x21-\x7e]{16,256}$/;

/** sha256 hex of a raw API key: what `api_keys.keyHash` holds. */
export function hashApiKey(rawKey: string): string {
  return createHash("sha256").update(rawKey, "utf8").digest("hex");
}

/** A fresh raw API key: `bk_` + 32 base64url characters (192 random bits). */
export function generateApiKey(): string {
  return `bk_${randomBytes(24).toString("base64url")}`;
}

function newTenantId(): string {
  return `t_${randomBytes(10).toString("hex")}`;
}

export function tenantsRepo(prisma: PrismaClient, schema: string): TenantsRepo {
  const createKey = async (
    db: Pick<PrismaClient, "apiKey">,
    tenantId: string,
    opts: { name?: string; role?: Role; rawKey?: string },
  ): Promise<{ id: number; rawKey: string; prefix: string }> => {
    const role = oneOf("role", opts.role ?? "viewer", ROLES);
    const name = requireText("name", opts.name ?? "default", { max: 200 });
    const rawKey = opts.rawKey ?? generateApiKey();
    if (typeof rawKey !== "string" || !RAW_KEY_RE.test(rawKey)) {
      throw StoreInvalidInput("rawKey must be 16 to 256 printable ASCII characters without spaces");
    }
    const prefix = rawKey.slice(0, KEY_PREFIX_LENGTH);
    const row = await guard(
      { entity: "tenant", id: tenantId, onUnique: () => StoreConflict("API key") },
      () => db.apiKey.create({ data: { tenantId, name, role, keyHash: hashApiKey(rawKey), prefix } }),
    );
    return { id: row.id, rawKey, prefix };
  };

  return {
    async create(name) {
      requireText("name", name, { max: 200 });
      const row = await guard({ entity: "tenant" }, () => prisma.tenant.create({ data: { id: newTenantId(), name } }));
      return toTenant(row);
    },

    async get(id) {
      if (typeof id !== "string" || id.length === 0) return null;
      const row = await guard({ entity: "tenant", id }, () => prisma.tenant.findUnique({ where: { id } }));
      return row ? toTenant(row) : null;
    },

    async createApiKey(tenantId, opts = {}) {
      requireTenantId(tenantId);
      return createKey(prisma, tenantId, opts);
    },

    async resolveApiKey(rawKey) {
      if (typeof rawKey !== "string" || !RAW_KEY_RE.test(rawKey)) return null;
      const keyHash = hashApiKey(rawKey);
      const row = await guard({ entity: "API key" }, () => prisma.apiKey.findUnique({ where: { keyHash } }));
      if (!row || row.revokedAt !== null) return null;
      const now = Date.now();
      if (row.lastUsedAt === null || now - row.lastUsedAt.getTime() > LAST_USED_RESOLUTION_MS) {
        // Conditional, so a burst of requests writes once per resolution window.
        await guard({ entity: "API key" }, () =>
          prisma.apiKey.updateMany({
            where: { id: row.id, OR: [{ lastUsedAt: null }, { lastUsedAt: { lt: new Date(now - LAST_USED_RESOLUTION_MS) } }] },
            data: { lastUsedAt: new Date(now) },
          }),
        );
      }
      return { tenantId: row.tenantId, role: row.role as Role, keyId: row.id };
    },

    async revokeApiKey(tenantId, keyId) {
      requireTenantId(tenantId);
      if (!isDbId(keyId)) return false;
      const res = await guard({ entity: "API key", id: keyId }, () =>
        prisma.apiKey.updateMany({ where: { id: keyId, tenantId, revokedAt: null }, data: { revokedAt: new Date() } }),
      );
      return res.count > 0;
    },

    async listApiKeys(tenantId) {
      requireTenantId(tenantId);
      const rows = await guard({ entity: "API key" }, () => prisma.apiKey.findMany({ where: { tenantId }, orderBy: { id: "desc" } }));
      return rows.map(toApiKey);
    },

    async ensureLocalKey(rawKey) {
      if (rawKey !== undefined && (typeof rawKey !== "string" || !RAW_KEY_RE.test(rawKey))) {
        throw StoreInvalidInput("rawKey must be 16 to 256 printable ASCII characters without spaces");
      }
      return guard({ entity: "tenant", id: LOCAL_TENANT_ID }, () =>
        prisma.$transaction(async (tx) => {
          // Serialises concurrent starters of the same schema; released at commit.
          await tx.$executeRaw`SELECT pg_advisory_xact_lock(hashtext(${`baton:local-key:${schema}`}))`;
          await tx.tenant.createMany({ data: [{ id: LOCAL_TENANT_ID, name: "local" }], skipDuplicates: true });
          if (rawKey !== undefined) {
            const existing = await tx.apiKey.findUnique({ where: { keyHash: hashApiKey(rawKey) } });
            if (existing) {
              if (existing.revokedAt !== null) throw ApiKeyRevoked(existing.prefix);
              return { tenantId: existing.tenantId, rawKey, created: false };
            }
            await createKey(tx, LOCAL_TENANT_ID, { name: "local", role: "admin", rawKey });
            return { tenantId: LOCAL_TENANT_ID, rawKey, created: true };
          }
          const active = await tx.apiKey.count({ where: { tenantId: LOCAL_TENANT_ID, revokedAt: null } });
          if (active > 0) return { tenantId: LOCAL_TENANT_ID, rawKey: "", created: false };
          const key = await createKey(tx, LOCAL_TENANT_ID, { name: "local", role: "admin" });
          return { tenantId: LOCAL_TENANT_ID, rawKey: key.rawKey, created: true };
        }),
      );
    },
  };
}
