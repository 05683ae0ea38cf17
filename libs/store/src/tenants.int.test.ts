/**
 * Rules of tenants and API keys:
 * - a tenant gets a `t_<random>` id; get returns it, unknown ids give null;
 * - a generated key is `bk_` + 32 base64url characters; only its sha256 is stored, with
 *   an 8-character display prefix; the raw key never appears in the database;
 * - resolve gives tenant, role and key id; unknown and revoked keys give null;
 *   resolving records lastUsedAt; revoking is tenant-scoped and happens once;
 * - keys for unknown tenants are 404, duplicate raw keys 409, bad roles and short keys 400;
 * - ensureLocalKey: a given key is created once (admin, tenant `local`), a revoked given
 *   key is refused, without a key a new one is returned only when no active local key
 *   exists, and concurrent calls create one key;
 * - ping succeeds on a live server; a store on an unreachable server fails with
 *   BATON_STORE_UNAVAILABLE (retryable), a store on an unmigrated schema with
 *   BATON_STORE_SCHEMA_NOT_MIGRATED.
 */
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { createStore } from "./store.ts";
import { hashApiKey, LOCAL_TENANT_ID } from "./tenants.ts";
import { openTestStore, randomSchemaName, TEST_DATABASE_URL, type TestStore } from "./testing.ts";
import type { Store } from "./types.ts";

let t: TestStore;
let store: Store;

beforeAll(async () => {
  t = await openTestStore({ prefix: "tenants" });
  store = t.store;
});
afterAll(() => t?.dispose());

describe("tenants", () => {
  it("creates tenants with t_ ids and reads them back", async () => {
    const a = await store.tenants.create("Acme");
    expect(a.id).toMatch(/^t_[0-9a-f]{20}$/);
    expect(a.name).toBe("Acme");
    expect(await store.tenants.get(a.id)).toEqual(a);
    expect(await store.tenants.get("t_nope")).toBeNull();
    expect((await store.tenants.create("Acme")).id).not.toBe(a.id);
    await expect(store.tenants.create("  ")).rejects.toMatchObject({ code: "BATON_STORE_INVALID_INPUT", status: 400 });
  });
});

describe("API keys", () => {
  it("generates a key, stores only its hash and a prefix, and resolves it", async () => {
    const tenant = await store.tenants.create("Keys");
    const key = await store.tenants.createApiKey(tenant.id, { name: "ci", role: "operator" });
    expect(key.rawKey).toMatch(/^bk_[A-Za-z0-9_-]{32}$/);
    expect(key.prefix).toBe(key.rawKey.slice(0, 8));

    const row = await store.prisma.apiKey.findUniqueOrThrow({ where: { id: key.id } });
    expect(row.keyHash).toBe(hashApiKey(key.rawKey));
    expect(JSON.stringify(row)).not.toContain(key.rawKey);

    expect(await store.tenants.resolveApiKey(key.rawKey)).toEqual({ tenantId: tenant.id, role: "operator", keyId: key.id });
    expect((await store.prisma.apiKey.findUniqueOrThrow({ where: { id: key.id } })).lastUsedAt).toBeInstanceOf(Date);
    expect(await store.tenants.resolveApiKey(`${key.rawKey}x`)).toBeNull();
    expect(await store.tenants.resolveApiKey("")).toBeNull();
  });

  it("defaults to the viewer role and accepts a given raw key", async () => {
    const tenant = await store.tenants.create("Given");
    const raw = "my-very-own-key-0001";
    const key = await store.tenants.createApiKey(tenant.id, { rawKey: raw });
    expect(key).toMatchObject({ rawKey: raw, prefix: "my-very-" });
    expect(await store.tenants.resolveApiKey(raw)).toMatchObject({ tenantId: tenant.id, role: "viewer" });
    await expect(store.tenants.createApiKey(tenant.id, { rawKey: raw })).rejects.toMatchObject({ code: "BATON_STORE_CONFLICT", status: 409 });
  });

  it("revokes a key once and only within its tenant; revoked keys do not resolve", async () => {
    const a = await store.tenants.create("A");
    const b = await store.tenants.create("B");
    const key = await store.tenants.createApiKey(a.id, { role: "admin" });
    expect(await store.tenants.revokeApiKey(b.id, key.id)).toBe(false);
    expect(await store.tenants.resolveApiKey(key.rawKey)).not.toBeNull();
    expect(await store.tenants.revokeApiKey(a.id, key.id)).toBe(true);
    expect(await store.tenants.revokeApiKey(a.id, key.id)).toBe(false);
    expect(await store.tenants.resolveApiKey(key.rawKey)).toBeNull();
    const listed = await store.tenants.listApiKeys(a.id);
    expect(listed).toHaveLength(1);
    expect(listed[0]!.revokedAt).toBeInstanceOf(Date);
    expect(listed[0]).not.toHaveProperty("keyHash");
    expect(await store.tenants.listApiKeys(b.id)).toEqual([]);
  });

  it("rejects unknown tenants, bad roles and weak keys", async () => {
    const tenant = await store.tenants.create("Bad");
    await expect(store.tenants.createApiKey("t_missing")).rejects.toMatchObject({ code: "BATON_STORE_NOT_FOUND", status: 404 });
    await expect(store.tenants.createApiKey(tenant.id, { role: "root" as never })).rejects.toMatchObject({ code: "BATON_STORE_INVALID_INPUT" });
    await expect(store.tenants.createApiKey(tenant.id, { rawKey: "short" })).rejects.toMatchObject({ code: "BATON_STORE_INVALID_INPUT" });
    await expect(store.tenants.createApiKey(tenant.id, { rawKey: "has spaces in the key" })).rejects.toMatchObject({ code: "BATON_STORE_INVALID_INPUT" });
  });
});

describe("ensureLocalKey", () => {
  it("creates a given key once, as admin of the local tenant", async () => {
    const local = await openTestStore({ prefix: "local" });
    try {
      const raw = "local-dev-key-0123456789";
      expect(await local.store.tenants.ensureLocalKey(raw)).toEqual({ tenantId: LOCAL_TENANT_ID, rawKey: raw, created: true });
      expect(await local.store.tenants.ensureLocalKey(raw)).toEqual({ tenantId: LOCAL_TENANT_ID, rawKey: raw, created: false });
      expect(await local.store.tenants.resolveApiKey(raw)).toMatchObject({ tenantId: LOCAL_TENANT_ID, role: "admin" });
      expect(await local.store.tenants.get(LOCAL_TENANT_ID)).toMatchObject({ id: "local", name: "local" });
      // A local key exists: without a raw key nothing new is made, and nothing can be shown.
      expect(await local.store.tenants.ensureLocalKey()).toEqual({ tenantId: LOCAL_TENANT_ID, rawKey: "", created: false });

      const keyId = (await local.store.tenants.resolveApiKey(raw))!.keyId;
      await local.store.tenants.revokeApiKey(LOCAL_TENANT_ID, keyId);
      await expect(local.store.tenants.ensureLocalKey(raw)).rejects.toMatchObject({ code: "BATON_STORE_API_KEY_REVOKED", status: 403 });
      // No active local key any more: a fresh one is made and shown once.
      const fresh = await local.store.tenants.ensureLocalKey();
      expect(fresh).toMatchObject({ tenantId: LOCAL_TENANT_ID, created: true });
      expect(await local.store.tenants.resolveApiKey(fresh.rawKey)).toMatchObject({ role: "admin" });
    } finally {
      await local.dispose();
    }
  });

  it("creates exactly one key when several starters call it at once", async () => {
    const local = await openTestStore({ prefix: "local" });
    try {
      const results = await Promise.all(Array.from({ length: 5 }, () => local.store.tenants.ensureLocalKey()));
      expect(results.filter((r) => r.created)).toHaveLength(1);
      expect(results.filter((r) => !r.created).every((r) => r.rawKey === "")).toBe(true);
      expect(await local.store.tenants.listApiKeys(LOCAL_TENANT_ID)).toHaveLength(1);
    } finally {
      await local.dispose();
    }
  });
});

describe("connectivity", () => {
  it("pings a live server", async () => {
    await expect(store.ping()).resolves.toBeUndefined();
  });

  it("maps an unreachable server to BATON_STORE_UNAVAILABLE", async () => {
    const down = createStore({ databaseUrl: "postgresql://postgres@127.0.0.1:1/test", connectTimeoutMs: 1000 });
    try {
      await expect(down.ping()).rejects.toMatchObject({ code: "BATON_STORE_UNAVAILABLE", status: 503, retryable: true });
      await expect(down.tenants.get("t_x")).rejects.toMatchObject({ code: "BATON_STORE_UNAVAILABLE" });
    } finally {
      await down.close();
    }
  });

  it("maps a schema that was never migrated to BATON_STORE_SCHEMA_NOT_MIGRATED", async () => {
    const bare = createStore({ databaseUrl: TEST_DATABASE_URL, schema: randomSchemaName("bare") });
    try {
      await expect(bare.tenants.create("x")).rejects.toMatchObject({ code: "BATON_STORE_SCHEMA_NOT_MIGRATED", status: 500 });
    } finally {
      await bare.close();
    }
  });
});
