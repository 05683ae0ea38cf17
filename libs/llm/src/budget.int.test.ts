/**
 * The per-tenant daily token budget on a real NATS KV bucket. Rules checked:
 * - check() passes under the limit and throws BATON_LLM_BUDGET_EXCEEDED (not retryable)
 *   once the tenant's tokens of the UTC day reach it; 0 means unlimited;
 * - counters are per tenant and per UTC day;
 * - concurrent additions from several budget instances lose nothing (compare-and-set);
 * - any tenant id works as a key.
 */
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { randomBytes } from "node:crypto";
import { connect } from "@nats-io/transport-node";
import type { NatsConnection } from "@nats-io/nats-core";
import { Kvm } from "@nats-io/kv";
import type { KV } from "@nats-io/kv";
import { createTokenBudget, tenantKeyToken } from "./index.ts";

const NATS_URL = process.env.BATON_NATS_URL ?? "nats://127.0.0.1:4222";
let nc: NatsConnection;
let kv: KV;

beforeAll(async () => {
  nc = await connect({ servers: NATS_URL, name: "llm-budget-test" });
  kv = await new Kvm(nc).create(`llm_tokens_test_${randomBytes(4).toString("hex")}`, { history: 1 });
});

afterAll(async () => {
  await kv.destroy();
  await nc.close();
});

describe("token budget", () => {
  it("allows calls under the limit and refuses them once it is reached", async () => {
    const budget = createTokenBudget(kv, { dailyLimit: 100 });
    await budget.check("acme");
    expect(await budget.add("acme", { totalTokens: 60 })).toBe(60);
    await budget.check("acme");
    expect(await budget.add("acme", { totalTokens: 40 })).toBe(100);
    const err = await budget.check("acme").catch((e: unknown) => e);
    expect(err).toMatchObject({ code: "BATON_LLM_BUDGET_EXCEEDED", retryable: false, status: 429 });
    expect((err as Error).message).toBe('tenant "acme" used 100 of its 100 LLM tokens for today (UTC)');
    await budget.check("other-tenant");
  });

  it("counts per UTC day", async () => {
    let now = new Date("2026-03-01T23:59:59Z");
    const budget = createTokenBudget(kv, { dailyLimit: 10, now: () => now });
    await budget.add("daily", { totalTokens: 10 });
    await expect(budget.check("daily")).rejects.toMatchObject({ code: "BATON_LLM_BUDGET_EXCEEDED" });
    now = new Date("2026-03-02T00:00:00Z");
    await budget.check("daily");
    expect(await budget.used("daily")).toBe(0);
  });

  it("loses no concurrent addition", async () => {
    const a = createTokenBudget(kv, { dailyLimit: 0 });
    const b = createTokenBudget(kv, { dailyLimit: 0 });
    await Promise.all(Array.from({ length: 20 }, (_, i) => (i % 2 ? a : b).add("busy", { totalTokens: i + 1 })));
    expect(await a.used("busy")).toBe(210);
  });

  it("treats 0 as unlimited", async () => {
    const budget = createTokenBudget(kv, { dailyLimit: 0 });
    await budget.add("free", { totalTokens: 1_000_000 });
    await budget.check("free");
    expect(await budget.used("free")).toBe(1_000_000);
  });

  it("accepts any tenant id as a key", async () => {
    const budget = createTokenBudget(kv, { dailyLimit: 5 });
    await budget.add("org/team a.b*", { totalTokens: 5 });
    await expect(budget.check("org/team a.b*")).rejects.toMatchObject({ code: "BATON_LLM_BUDGET_EXCEEDED" });
    await budget.check("org_team_a_b_");
    expect(tenantKeyToken("a.b c")).toBe("a=2eb=20c");
  });
});
