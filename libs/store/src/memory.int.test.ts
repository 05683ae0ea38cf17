/**
 * Rules of agent memory and learned sequences:
 * - memory entries are created with defaults, listed newest first and filtered by agent
 *   and user; delete returns the deleted record once, then null;
 * - search ranks by text relevance over key + content: entries matching more query words
 *   rank higher, a whole-query substring hit in the key ranks highest, words match by
 *   prefix and case-insensitively, LIKE wildcards in the query are literal, non-matching
 *   entries are left out, and agent filters and limits apply;
 * - a learned sequence is recorded once per execution (redeliveries are no-ops) and
 *   listed newest first, filterable by agent and success.
 */
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { openTestStore, type TestStore } from "./testing.ts";
import type { JsonValue, Store } from "./types.ts";

let t: TestStore;
let store: Store;
let tenant: string;

beforeAll(async () => {
  t = await openTestStore({ prefix: "memory" });
  store = t.store;
  tenant = (await store.tenants.create("A")).id;
});
afterAll(() => t?.dispose());

describe("memory", () => {
  it("creates, reads one, lists by agent and user, and deletes once", async () => {
    const a = await store.memory.create(tenant, { agentId: 1, key: "timezone", content: "User prefers UTC" });
    expect(a).toMatchObject({ tenantId: tenant, agentId: 1, userId: null, key: "timezone", content: "User prefers UTC", metadata: {} });
    const b = await store.memory.create(tenant, { agentId: 1, userId: 7, key: "language", content: "Speaks French", metadata: { source: "s1" } });
    await store.memory.create(tenant, { agentId: 2, key: "other", content: "Other agent" });
    expect((await store.memory.list(tenant, { agentId: 1 })).map((m) => m.id)).toEqual([b.id, a.id]);
    expect((await store.memory.list(tenant, { agentId: 1, userId: 7 })).map((m) => m.id)).toEqual([b.id]);
    expect(await store.memory.list(tenant)).toHaveLength(3);

    expect(await store.memory.get(tenant, b.id)).toEqual(b);
    expect(await store.memory.get("another-tenant", b.id)).toBeNull();
    expect(await store.memory.delete(tenant, b.id)).toEqual(b);
    expect(await store.memory.get(tenant, b.id)).toBeNull();
    expect(await store.memory.delete(tenant, b.id)).toBeNull();
    await expect(store.memory.create(tenant, { agentId: 0, key: "k", content: "c" })).rejects.toMatchObject({ code: "BATON_STORE_INVALID_INPUT" });
    await expect(store.memory.create(tenant, { agentId: 1, key: "", content: "c" })).rejects.toMatchObject({ code: "BATON_STORE_INVALID_INPUT" });
  });

  it("searches by text relevance over key and content", async () => {
    const s = (await store.tenants.create("Searcher")).id;
    const deploy = await store.memory.create(s, { agentId: 5, key: "deploy process", content: "Run the deploy pipeline, then check dashboards" });
    const both = await store.memory.create(s, { agentId: 5, key: "release notes", content: "Deploy notes live in the wiki; dashboards too" });
    const one = await store.memory.create(s, { agentId: 5, key: "misc", content: "Dashboards are in Grafana" });
    await store.memory.create(s, { agentId: 5, key: "unrelated", content: "Lunch is at noon" });
    await store.memory.create(s, { agentId: 6, key: "deploy process", content: "another agent's deploy notes" });

    const hits = await store.memory.search(s, { agentId: 5, query: "deploy dashboards" });
    expect(hits.map((h) => h.id)).toEqual(expect.arrayContaining([deploy.id, both.id, one.id]));
    expect(hits).toHaveLength(3);
    expect(hits[hits.length - 1]!.id).toBe(one.id); // one word matched
    for (let i = 1; i < hits.length; i++) expect(hits[i - 1]!.score).toBeGreaterThanOrEqual(hits[i]!.score);

    // The whole query found in a key outranks scattered word hits.
    expect((await store.memory.search(s, { agentId: 5, query: "deploy process" }))[0]!.id).toBe(deploy.id);
    // Prefix, case-insensitive.
    expect((await store.memory.search(s, { agentId: 5, query: "GRAF" })).map((h) => h.id)).toEqual([one.id]);
    // Wildcards are literal; nothing matches.
    expect(await store.memory.search(s, { agentId: 5, query: "%" })).toEqual([]);
    expect(await store.memory.search(s, { agentId: 5, query: "kubernetes" })).toEqual([]);
    // Without an agent filter every agent of the tenant is searched; limit applies.
    expect(await store.memory.search(s, { query: "deploy" })).toHaveLength(3);
    expect(await store.memory.search(s, { query: "deploy", limit: 1 })).toHaveLength(1);
    await expect(store.memory.search(s, { query: " " })).rejects.toMatchObject({ code: "BATON_STORE_INVALID_INPUT" });
  });
});

describe("learned sequences", () => {
  it("records once per execution and lists newest first", async () => {
    const tools: JsonValue = [{ tool: "search", params: { q: "x" } }, { tool: "summarise", params: {} }];
    await store.learning.recordSequence({ tenantId: tenant, executionId: 101, agentId: 1, sessionId: 2, tools, successful: true });
    await store.learning.recordSequence({ tenantId: tenant, executionId: 101, agentId: 1, sessionId: 2, tools: [], successful: false });
    await Promise.all(Array.from({ length: 4 }, () => store.learning.recordSequence({ tenantId: tenant, executionId: 102, tools: [], successful: false })));
    const all = await store.learning.list(tenant);
    expect(all.map((r) => [r.executionId, r.successful])).toEqual([
      [102, false],
      [101, true],
    ]);
    expect(all[1]).toMatchObject({ agentId: 1, sessionId: 2, tools });
    expect((await store.learning.list(tenant, { successful: true })).map((r) => r.executionId)).toEqual([101]);
    expect((await store.learning.list(tenant, { agentId: 1 })).map((r) => r.executionId)).toEqual([101]);
    await expect(store.learning.recordSequence({ tenantId: "t_missing", executionId: 103, tools: [], successful: true })).rejects.toMatchObject({
      code: "BATON_STORE_NOT_FOUND",
    });
  });
});
