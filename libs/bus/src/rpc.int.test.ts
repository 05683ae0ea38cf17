/**
 * Rules checked against the real NATS server:
 * - request/serve round-trips data and headers; the handler sees the caller's meta and
 *   runs inside the caller's trace context;
 * - a Baton error thrown by the handler reaches the caller with the same code, status and
 *   retryability (headers baton-error-*); any other error becomes
 *   BATON_BUS_HANDLER_FAILED (500) without leaking its message;
 * - nobody serving → BATON_BUS_NO_RESPONDERS (503, retryable); no answer in time →
 *   BATON_BUS_TIMEOUT (504, retryable);
 * - servers in one queue group answer each request exactly once between them;
 * - stop() answers requests in flight before it resolves, and afterwards nobody answers;
 * - kv() opens a bucket named after the prefix, usable for put/get;
 * - kvKeys() lists the keys holding an entry (delete markers too), sorted, filtered by
 *   subject wildcards; an unknown bucket has none; entries that expired (max age) are gone
 *   and the listing still answers;
 * - kvCreate() writes a key only when it never held a value, and never creates a bucket.
 * - kvGet() reads a key's value without opening the bucket: null for a key never written,
 *   deleted or purged, and for a bucket that does not exist (which it does not create).
 */
import { describe, expect, it } from "@jest/globals";
import { context, ROOT_CONTEXT, trace } from "@opentelemetry/api";
import { defineError, hasCode } from "@baton/errors";
import type { BusMessage } from "@baton/bus";
import { dec, deferred, enc, suitePair, waitFor } from "./int-helpers.ts";

const NotFound = defineError("BATON_TEST_NOT_FOUND", (id: string) => `workflow ${id} not found`, { status: 404 });

const { prefix, admin, a, b } = await suitePair();

async function failure(p: Promise<unknown>): Promise<{ code: string; status: number; retryable: boolean; message: string }> {
  try {
    await p;
  } catch (err) {
    if (hasCode(err)) return { code: err.code, status: err.status, retryable: err.retryable, message: err.message };
    throw err;
  }
  throw new Error("expected a failure");
}

describe("request / serve", () => {
  it("round-trips data, meta and trace context", async () => {
    const subject = `${prefix}.rpc.test.echo`;
    let seen: { msg: BusMessage; traceId: string | undefined } | undefined;
    const sub = await b.serve(subject, async (msg) => {
      seen = { msg, traceId: trace.getSpanContext(context.active())?.traceId };
      return { data: enc(`echo ${dec(msg.data)}`), headers: { "x-answer": "yes" } };
    });
    const traceId = "0af7651916cd43dd8448eb211c80319c";
    const parent = trace.setSpanContext(ROOT_CONTEXT, { traceId, spanId: "b7ad6b7169203331", traceFlags: 1 });
    const reply = await context.with(parent, () => a.request(subject, enc("hi"), { meta: { tenantId: "t_1", type: "planner.plan" } }));
    await sub.stop();
    expect(dec(reply.data)).toBe("echo hi");
    expect(reply.meta.headers["x-answer"]).toBe("yes");
    expect(seen?.msg.meta).toMatchObject({ tenantId: "t_1", type: "planner.plan" });
    expect(seen?.traceId).toBe(traceId);
    expect(sub.processed).toBe(1);
  });

  it("carries a Baton error to the caller, and hides others", async () => {
    const subject = `${prefix}.rpc.test.fail`;
    const sub = await b.serve(subject, async (msg) => {
      if (dec(msg.data) === "known") throw NotFound("42");
      throw new Error("secret internals");
    });
    expect(await failure(a.request(subject, enc("known")))).toEqual({ code: "BATON_TEST_NOT_FOUND", status: 404, retryable: false, message: "workflow 42 not found" });
    const other = await failure(a.request(subject, enc("other")));
    await sub.stop();
    expect(other).toMatchObject({ code: "BATON_BUS_HANDLER_FAILED", status: 500, retryable: true });
    expect(other.message).not.toContain("secret");
  });

  it("reports no responders and timeouts", async () => {
    expect(await failure(a.request(`${prefix}.rpc.test.nobody`, enc("x")))).toMatchObject({ code: "BATON_BUS_NO_RESPONDERS", status: 503, retryable: true });
    const subject = `${prefix}.rpc.test.slow`;
    const gate = deferred();
    const sub = await b.serve(subject, async () => {
      await gate.promise;
      return { data: enc("late") };
    });
    expect(await failure(a.request(subject, enc("x"), { timeoutMs: 200 }))).toMatchObject({ code: "BATON_BUS_TIMEOUT", status: 504, retryable: true });
    gate.resolve();
    await sub.stop();
  });

  it("answers each request once within a queue group", async () => {
    const subject = `${prefix}.rpc.test.shared`;
    const answered: string[] = [];
    const handler = (who: string) => async (msg: BusMessage) => {
      answered.push(dec(msg.data));
      return { data: enc(who) };
    };
    const s1 = await a.serve(subject, handler("a"));
    const s2 = await b.serve(subject, handler("b"));
    const replies = await Promise.all(Array.from({ length: 20 }, (_, i) => a.request(subject, enc(String(i)))));
    await Promise.all([s1.stop(), s2.stop()]);
    expect(replies).toHaveLength(20);
    expect(answered.sort()).toEqual(Array.from({ length: 20 }, (_, i) => String(i)).sort());
    expect(s1.processed + s2.processed).toBe(20);
  });

  it("stop() answers requests in flight, then nobody answers", async () => {
    const subject = `${prefix}.rpc.test.stop`;
    const gate = deferred();
    let started = false;
    const sub = await b.serve(subject, async () => {
      started = true;
      await gate.promise;
      return { data: enc("done") };
    });
    const pending = a.request(subject, enc("x"), { timeoutMs: 10_000 });
    await waitFor(() => started);
    const log: string[] = [];
    const stopped = sub.stop().then(() => void log.push("stopped"));
    await new Promise((r) => setTimeout(r, 100));
    log.push("released");
    gate.resolve();
    await stopped;
    expect(log).toEqual(["released", "stopped"]);
    expect(dec((await pending).data)).toBe("done");
    expect((await failure(a.request(subject, enc("x")))).code).toBe("BATON_BUS_NO_RESPONDERS");
  });
});

describe("kv", () => {
  it("opens a bucket named after the prefix", async () => {
    const kv = await a.kv("registry");
    await kv.put("tool.web.search", enc("worker-1"));
    const again = await b.kv("registry");
    expect(dec((await again.get("tool.web.search"))!.value)).toBe("worker-1");
    expect((await admin.jsm.streams.info(`KV_${prefix}_registry`)).config.name).toBe(`KV_${prefix}_registry`);
    expect(await failure(a.kv("bad.name"))).toMatchObject({ code: "BATON_BUS_INVALID_OPTIONS" });
  });

  it("lists keys with kvKeys(), filtered, sorted, delete markers included", async () => {
    const kv = await a.kv("registry");
    await kv.put("tool.b.w1", enc("x"));
    await kv.put("tool.a.w1", enc("x"));
    await kv.put("tool.a.w2", enc("x"));
    await kv.delete("tool.a.w2");
    expect(await b.kvKeys("registry")).toEqual(["tool.a.w1", "tool.a.w2", "tool.b.w1", "tool.web.search"]);
    expect(await b.kvKeys("registry", "tool.a.*")).toEqual(["tool.a.w1", "tool.a.w2"]);
    expect((await kv.get("tool.a.w2"))!.operation).toBe("DEL");
    expect(await b.kvKeys("registry", "nothing.>")).toEqual([]);
    expect(await b.kvKeys("never_opened")).toEqual([]);
    expect(await failure(b.kvKeys("bad.name"))).toMatchObject({ code: "BATON_BUS_INVALID_OPTIONS" });
  });

  it("reads one key with kvGet(), null when it holds no value, without creating a bucket", async () => {
    const kv = await a.kv("results");
    await kv.put("call.1", enc("first"));
    await kv.put("call.2", enc("x"));
    await kv.delete("call.2");
    await kv.put("call.3", enc("x"));
    await kv.purge("call.3");
    await kv.put("call.1", enc("second"));
    const got = (await b.kvGet("results", "call.1"))!;
    expect(dec(got.value)).toBe("second");
    // When the server stored that value (the last put), as the bucket's own reader tells it.
    expect(got.storedAt).toEqual((await kv.get("call.1"))!.created);
    expect(await b.kvGet("results", "call.2")).toBeNull();
    expect(await b.kvGet("results", "call.3")).toBeNull();
    expect(await b.kvGet("results", "call.never")).toBeNull();
    expect(await b.kvGet("never_opened", "call.1")).toBeNull();
    await expect(admin.jsm.streams.info(`KV_${prefix}_never_opened`)).rejects.toThrow(/stream not found/);
    expect(await failure(b.kvGet("bad.name", "k"))).toMatchObject({ code: "BATON_BUS_INVALID_OPTIONS" });
  });

  it("writes a key with kvCreate() only when it never held a value, without creating a bucket", async () => {
    const kv = await a.kv("results");
    await kv.put("held.1", enc("the worker's"));
    expect(await b.kvCreate("results", "held.1", enc("the executor's"))).toBe(false);
    expect(dec((await b.kvGet("results", "held.1"))!.value)).toBe("the worker's");
    expect(await b.kvCreate("results", "fresh.1", enc("first"))).toBe(true);
    expect(await b.kvCreate("results", "fresh.1", enc("second"))).toBe(false);
    expect(dec((await kv.get("fresh.1"))!.value)).toBe("first");
    expect(await b.kvCreate("never_created", "k", enc("x"))).toBe(false);
    await expect(admin.jsm.streams.info(`KV_${prefix}_never_created`)).rejects.toThrow(/stream not found/);
    expect(await failure(b.kvCreate("bad.name", "k", enc("x")))).toMatchObject({ code: "BATON_BUS_INVALID_OPTIONS" });
    expect(await failure(b.kvCreate("results", "bad key", enc("x")))).toMatchObject({ code: "BATON_BUS_INVALID_OPTIONS" });
  });

  it("answers kvKeys() while entries expire, without the expired ones", async () => {
    const kv = await a.kv("expiring", { ttlMs: 1_000 });
    await kv.put("gone.w1", enc("x"));
    await kv.put("gone.w2", enc("x"));
    expect(await b.kvKeys("expiring")).toEqual(["gone.w1", "gone.w2"]);
    // Keep one key fresh while the others pass their max age.
    const deadline = Date.now() + 4_000;
    let keys: string[] = [];
    while (Date.now() < deadline) {
      await kv.put("live.w1", enc("x"));
      keys = await b.kvKeys("expiring");
      if (!keys.includes("gone.w1") && !keys.includes("gone.w2")) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(keys).toEqual(["live.w1"]);
  });
});
