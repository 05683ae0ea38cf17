/**
 * The worker SDK against a real NATS, in one process. Rules checked:
 * - input is checked before the handler (zod and JSON Schema); a violation answers
 *   BATON_TOOL_INVALID_INPUT, not retryable, naming the field path, and the handler never runs;
 * - output is checked after it (BATON_TOOL_INVALID_OUTPUT, naming the field);
 * - a handler past its time limit gets its signal aborted and answers BATON_TOOL_TIMEOUT (retryable);
 * - a ToolCancel broadcast aborts the running handler: BATON_TOOL_CANCELLED, not retryable;
 * - thrown errors keep their code and retryability; a plain Error is BATON_TOOL_FAILED, retryable;
 * - ctx.progress publishes node.progress; ctx carries the call's idempotency key (call id when absent);
 * - a redelivered call whose result is recorded is answered from the record, not run again;
 * - the executor's view of the same contract: a call sent again within the duplicate window
 *   is reported as a duplicate, and its result reads back from the record (messaging);
 * - in-progress acks keep a call longer than ackWait from being redelivered;
 * - redeliveries of a call that reach the worker still running it (its process stalled past
 *   ackWait) wait for that run and answer from its record: the handler runs once;
 * - the last allowed delivery answers BATON_TOOL_DELIVERIES_EXHAUSTED instead of vanishing;
 * - arguments sent by reference are read from their object before the input is checked, and the
 *   object is deleted once the call is answered; an object that is gone or does not match its
 *   sha256 answers BATON_TOOL_ARGS_OBJECT_LOST (retryable), another call's object
 *   BATON_TOOL_ARGS_OBJECT_INVALID, and the handler never runs;
 * - quick calls delivered together are answered together: the answers are written at once,
 *   once all of them are handed to the bus, not the first alone;
 * - the registry lists descriptors (JSON Schema) with live worker counts, hides tools from
 *   other tenants, and drops a worker whose presence is not refreshed within its TTL.
 */
import { createHash } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { jetstream } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { z } from "zod";
import { connectBus, objectName, objectRefJson } from "@baton/bus";
import type { Bus } from "@baton/bus";
import { NodeProgressSchema, ToolCallSchema, decode, encode, streamNames } from "@baton/contracts";
import type { JsonObject } from "@baton/contracts";
import { createMessaging } from "@baton/messaging";
import { createLogger } from "@baton/telemetry";
import { cancelToolCalls, createToolRegistry, createWorker, defineTool, LARGE_ARGS_BUCKET, toolDurable } from "./index.ts";
import type { ToolContext, ToolSpec, Worker } from "./index.ts";
import { callTool, collectResults, deletePrefix, randomToolPrefix, TEST_NATS_URL } from "./testing.ts";
import type { ResultCollector } from "./testing.ts";

const silent = createLogger("test", "silent");

function deferred<T = void>(): { promise: Promise<T>; resolve: (v: T) => void } {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

/**
 * Polls `cond` until it holds. Fails after `ms` with what it last saw (or with the fact that
 * `cond` itself did not answer), instead of running into jest's silent test timeout.
 */
async function until(cond: () => boolean | Promise<boolean>, ms = 20_000, what = "the condition"): Promise<void> {
  const deadline = Date.now() + ms;
  let last = "never evaluated";
  for (;;) {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<"late">((r) => (timer = setTimeout(() => r("late"), Math.max(1, deadline - Date.now()))));
    const got = await Promise.race([Promise.resolve(cond()).then((ok) => (ok ? "ok" : "no")), late]).finally(() => clearTimeout(timer));
    if (got === "ok") return;
    if (got === "late") throw new Error(`${what}: no answer within ${ms} ms (the check itself was still running; last result: ${last})`);
    last = "false";
    if (Date.now() >= deadline) throw new Error(`${what}: still false after ${ms} ms`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

describe("tool worker SDK", () => {
  const prefix = randomToolPrefix();
  let bus: Bus;
  let results: ResultCollector;
  let worker: Worker;
  const runs = new Map<string, number>();
  const seen = new Map<string, ToolContext>();
  const cancelStarted = deferred<string>();
  let cancelAbortReason: unknown;
  let timeoutAborted = false;
  const count = (name: string, ctx: ToolContext): void => {
    runs.set(name, (runs.get(name) ?? 0) + 1);
    seen.set(ctx.callId, ctx);
  };

  const tools: ToolSpec[] = [
    defineTool({
      name: "t.sum",
      description: "sums numbers",
      input: z.object({ values: z.array(z.number()), label: z.string().optional() }),
      output: z.object({ sum: z.number() }),
      retry: { maxAttempts: 3 },
      handler: async ({ values }, ctx) => {
        count("t.sum", ctx);
        return { sum: values.reduce((a, b) => a + b, 0) };
      },
    }),
    defineTool({
      name: "t.badout",
      description: "returns a string where a number is promised",
      input: z.object({}),
      output: z.object({ result: z.object({ n: z.number() }) }),
      handler: async () => ({ result: { n: "seven" } }),
    }),
    {
      name: "t.json",
      description: "JSON Schema input",
      inputJsonSchema: { type: "object", properties: { city: { type: "string" }, days: { type: "integer", minimum: 1 } }, required: ["city", "days"] },
      tenants: ["t_other"],
      handler: async (input) => ({ got: input as never }),
    },
    defineTool({
      name: "t.slow",
      description: "never ends on its own",
      input: z.object({}),
      timeoutMs: 300,
      handler: async (_in, ctx) => {
        await new Promise<void>((resolve) => ctx.signal.addEventListener("abort", () => resolve(), { once: true }));
        timeoutAborted = ctx.signal.aborted;
        return {};
      },
    }),
    defineTool({
      name: "t.cancel",
      description: "waits to be cancelled",
      input: z.object({}),
      handler: async (_in, ctx) => {
        cancelStarted.resolve(ctx.callId);
        await new Promise<void>((resolve) => ctx.signal.addEventListener("abort", () => resolve(), { once: true }));
        cancelAbortReason = ctx.signal.reason;
        return {};
      },
    }),
    defineTool({
      name: "t.throw",
      description: "throws what it is told",
      input: z.object({ kind: z.enum(["plain", "coded"]) }),
      handler: async ({ kind }) => {
        if (kind === "plain") throw new Error("disk on fire");
        throw Object.assign(new Error("quota exceeded"), { code: "ACME_QUOTA", retryable: false });
      },
    }),
    defineTool({
      name: "t.progress",
      description: "reports progress",
      input: z.object({}),
      handler: async (_in, ctx) => {
        count("t.progress", ctx);
        ctx.progress(0.5, "half way", { step: 1 });
        return { done: true };
      },
    }),
    defineTool({
      name: "t.long",
      description: "runs longer than ackWait",
      input: z.object({ ms: z.number() }),
      handler: async ({ ms }, ctx) => {
        count("t.long", ctx);
        await new Promise((r) => setTimeout(r, ms));
        return { slept: ms };
      },
    }),
  ];

  beforeAll(async () => {
    bus = await connectBus({ servers: TEST_NATS_URL, prefix, name: "sdk-test", logger: silent });
    results = await collectResults(bus);
    worker = createWorker({ bus, tools, concurrency: 4, workerId: "w-1", logger: silent, ackWaitMs: 600, presenceTtlMs: 1_500 });
    await worker.start();
  });

  afterAll(async () => {
    await worker.drain();
    await results.stop();
    await bus.drain();
    await deletePrefix(prefix);
  });

  it("runs a valid call and passes the call's keys in the context", async () => {
    const callId = await callTool(bus, "t.sum", { values: [1, 2, 3] }, { idempotencyKey: "1.n" });
    const r = await results.waitFor(callId);
    expect(r).toMatchObject({ ok: true, output: { sum: 6 }, workerId: "w-1", tool: "t.sum" });
    expect(seen.get(callId)).toMatchObject({ idempotencyKey: "1.n", callId, executionId: 1, nodeId: "n", tenantId: "t_test", attempt: 1 });
    const plain = await callTool(bus, "t.sum", { values: [] });
    await results.waitFor(plain);
    expect(seen.get(plain)!.idempotencyKey).toBe(plain);
  });

  it("refuses invalid input before the handler, naming the field", async () => {
    const before = runs.get("t.sum") ?? 0;
    const callId = await callTool(bus, "t.sum", { values: [1, "two"], label: 3 });
    const r = await results.waitFor(callId);
    expect(r.ok).toBe(false);
    expect(r.error).toMatchObject({ code: "BATON_TOOL_INVALID_INPUT", retryable: false });
    expect(r.error!.message).toContain("values[1]");
    expect(r.error!.message).toContain("label");
    expect(runs.get("t.sum") ?? 0).toBe(before);
  });

  it("checks JSON Schema inputs too", async () => {
    const callId = await callTool(bus, "t.json", { city: "Lyon", days: 0 });
    const r = await results.waitFor(callId);
    expect(r.error).toMatchObject({ code: "BATON_TOOL_INVALID_INPUT", retryable: false });
    expect(r.error!.message).toContain("days");
    const ok = await callTool(bus, "t.json", { city: "Lyon", days: 2 });
    expect(await results.waitFor(ok)).toMatchObject({ ok: true, output: { got: { city: "Lyon", days: 2 } } });
  });

  it("refuses invalid output, naming the field", async () => {
    const r = await results.waitFor(await callTool(bus, "t.badout", {}));
    expect(r.error).toMatchObject({ code: "BATON_TOOL_INVALID_OUTPUT", retryable: false });
    expect(r.error!.message).toContain("result.n");
  });

  it("times out a handler past its limit, aborting its signal", async () => {
    const r = await results.waitFor(await callTool(bus, "t.slow", {}));
    expect(r.error).toMatchObject({ code: "BATON_TOOL_TIMEOUT", retryable: true });
    await until(() => timeoutAborted);
  });

  it("aborts a running handler on a ToolCancel broadcast", async () => {
    const callId = await callTool(bus, "t.cancel", {});
    expect(await cancelStarted.promise).toBe(callId);
    await cancelToolCalls(bus, [callId], "execution cancelled");
    const r = await results.waitFor(callId);
    expect(r.error).toMatchObject({ code: "BATON_TOOL_CANCELLED", retryable: false });
    expect(r.error!.message).toContain("execution cancelled");
    expect((cancelAbortReason as { code?: string }).code).toBe("BATON_TOOL_CANCELLED");
  });

  it("keeps a thrown error's code and retryability; plain errors are BATON_TOOL_FAILED", async () => {
    const plain = await results.waitFor(await callTool(bus, "t.throw", { kind: "plain" }));
    expect(plain.error).toMatchObject({ code: "BATON_TOOL_FAILED", retryable: true });
    expect(plain.error!.message).toContain("disk on fire");
    const coded = await results.waitFor(await callTool(bus, "t.throw", { kind: "coded" }));
    expect(coded.error).toMatchObject({ code: "ACME_QUOTA", message: "quota exceeded", retryable: false });
  });

  it("publishes node.progress events", async () => {
    const events: { callId: string; fraction: number; message: string }[] = [];
    const ac = new AbortController();
    const subject = `${prefix}.evt.node.progress.*.*`;
    const replay = bus.replay(subject, { signal: ac.signal }, (m) => {
      const p = decode(NodeProgressSchema, m.data);
      events.push({ callId: p.callId, fraction: p.fraction, message: p.message });
    });
    const callId = await callTool(bus, "t.progress", {});
    await results.waitFor(callId);
    await until(() => events.some((e) => e.callId === callId));
    ac.abort();
    await replay;
    expect(events.find((e) => e.callId === callId)).toEqual({ callId, fraction: 0.5, message: "half way" });
  });

  it("answers a redelivered call from its recorded result without running it again", async () => {
    const callId = await callTool(bus, "t.progress", {});
    await results.waitFor(callId);
    const runsBefore = runs.get("t.progress");
    const ran = worker.completed;
    const sent = worker.answered;
    // The same call sent again by the executor (after a crash), past JetStream's
    // de-duplication (another message id); `resent` tells the worker to look for a record.
    const call = { callId, tool: "t.progress", tenantId: "t_test", executionId: 1, nodeId: "n", attempt: 1, args: {}, resent: true };
    await bus.publish(`${prefix}.tool.t.progress`, encode(ToolCallSchema, call), { idempotencyKey: `${callId}-again` });
    await until(() => worker.answered === sent + 1);
    expect(runs.get("t.progress")).toBe(runsBefore);
    expect(worker.completed).toBe(ran);
  });

  it("reports a call sent twice as a duplicate, and reads its recorded result back", async () => {
    const messaging = createMessaging(bus);
    const callId = `1.n_${Math.random().toString(36).slice(2, 10)}.1`;
    const call = { callId, tool: "t.sum", tenantId: "t_test", executionId: 1, nodeId: "n", attempt: 1, args: { values: [2, 3] } };
    expect(await messaging.recordedToolResult(callId)).toBeNull();
    expect(await messaging.callTool(call)).toEqual({ duplicate: false });
    await results.waitFor(callId);
    expect(await messaging.callTool(call)).toEqual({ duplicate: true });
    expect(await messaging.recordedToolResult(callId)).toMatchObject({ result: { ok: true, output: { sum: 5 }, workerId: "w-1" }, recordedAt: expect.any(Date) });
  });

  it("keeps a call running longer than ackWait from being redelivered", async () => {
    const before = runs.get("t.long") ?? 0;
    const callId = await callTool(bus, "t.long", { ms: 2_500 });
    const r = await results.waitFor(callId);
    expect(r.ok).toBe(true);
    expect(runs.get("t.long")).toBe(before + 1);
  });

  it("answers the last allowed delivery with BATON_TOOL_DELIVERIES_EXHAUSTED", async () => {
    const tool = defineTool({ name: "t.lost", description: "d", input: z.object({}), handler: async (_i, ctx) => (count("t.lost", ctx), {}) });
    const opts = { bus, tools: [tool], logger: silent, ackWaitMs: 400, maxDeliver: 2 } as const;
    const w1 = createWorker({ ...opts, workerId: "w-lost-1" });
    await w1.start();
    await w1.drain();
    const callId = await callTool(bus, "t.lost", {});
    // A worker that takes the call and dies: a raw fetch that never acks.
    const nc = await connect({ servers: TEST_NATS_URL });
    const consumer = await jetstream(nc).consumers.get(streamNames(prefix).tools, toolDurable("t.lost"));
    const taken = await consumer.next({ expires: 5_000 });
    expect(taken?.info.deliveryCount).toBe(1);
    const w2 = createWorker({ ...opts, workerId: "w-lost-2" });
    await w2.start();
    const r = await results.waitFor(callId);
    await w2.drain();
    await nc.close();
    expect(r.error).toMatchObject({ code: "BATON_TOOL_DELIVERIES_EXHAUSTED", retryable: true });
    expect(runs.get("t.lost") ?? 0).toBe(0);
  });

  // Regression (bench/chaos --workers, seed 400): a worker process stalled (SIGSTOP, an event
  // loop blocked) past ackWait gets the redeliveries of the call it holds; on waking it ran the
  // handler once per delivery, at the same time, since none was recorded yet.
  it("runs a call once when its redeliveries reach the worker still running it", async () => {
    let stalled = 0;
    let ran = 0;
    const tool = defineTool({
      name: "t.stall",
      description: "d",
      input: z.object({}),
      handler: async () => {
        ran++;
        if (stalled++ === 0) {
          // The process stalls (nothing is read or sent) for several ack waits: the call is redelivered meanwhile.
          const end = Date.now() + 1_500;
          while (Date.now() < end) { /* blocked */ }
          await new Promise((r) => setTimeout(r, 800));
        }
        return { ran };
      },
    });
    const w = createWorker({ bus, tools: [tool], logger: silent, ackWaitMs: 300, concurrency: 4, workerId: "w-stall" });
    await w.start();
    try {
      const callId = await callTool(bus, "t.stall", {});
      const r = await results.waitFor(callId);
      expect(r).toMatchObject({ ok: true });
      // The redeliveries are answered from the record once the run ends.
      await until(() => w.inFlight === 0, 10_000, "every delivery to be handled");
      expect(ran).toBe(1);
    } finally {
      await w.drain();
    }
  });

  it("reads arguments sent by reference from their object, deletes it once answered, and answers a lost or foreign object with a code", async () => {
    const objects = bus.objects(LARGE_ARGS_BUCKET);
    const sha = (b: Uint8Array): string => createHash("sha256").update(b).digest("hex");
    /** Puts `args` as the executor does, under the object name of `owner` (the call itself by default). */
    const byRef = async (callId: string, args: JsonObject, opts: { owner?: string; corrupt?: boolean } = {}) => {
      const bytes = new TextEncoder().encode(JSON.stringify(args));
      const name = objectName(opts.owner ?? callId);
      const info = await objects.put(name, bytes);
      return { ref: objectRefJson({ bucket: LARGE_ARGS_BUCKET, name, ...info, sha256: sha(opts.corrupt ? new Uint8Array([1]) : bytes) }), info, name };
    };
    const before = runs.get("t.sum") ?? 0;
    // ~100 KB of arguments, more than a call carries inline.
    const values = Array.from({ length: 50_000 }, (_, i) => i % 10);
    const okId = "1.n_args_ok.1";
    const ok = await byRef(okId, { values });
    await callTool(bus, "t.sum", ok.ref, { callId: okId });
    expect(await results.waitFor(okId)).toMatchObject({ ok: true, output: { sum: 225_000 } });
    expect(runs.get("t.sum")).toBe(before + 1);
    await until(async () => (await objects.get(ok.name, ok.info)) === null, 10_000, "the arguments object deleted");

    const goneId = "1.n_args_gone.1";
    await callTool(bus, "t.sum", objectRefJson({ bucket: LARGE_ARGS_BUCKET, name: objectName(goneId), size: 100, parts: 1, sha256: "0".repeat(64) }), { callId: goneId });
    const gone = await results.waitFor(goneId);
    expect(gone).toMatchObject({ ok: false, error: { code: "BATON_TOOL_ARGS_OBJECT_LOST", retryable: true } });
    expect(gone.error!.message).toContain("is gone");

    const corruptId = "1.n_args_corrupt.1";
    await callTool(bus, "t.sum", (await byRef(corruptId, { values: [1, 2] }, { corrupt: true })).ref, { callId: corruptId });
    const corrupt = await results.waitFor(corruptId);
    expect(corrupt).toMatchObject({ ok: false, error: { code: "BATON_TOOL_ARGS_OBJECT_LOST", retryable: true } });
    expect(corrupt.error!.message).toContain("does not match its sha256");

    const foreignId = "1.n_args_foreign.1";
    await callTool(bus, "t.sum", (await byRef(foreignId, { values: [1, 2] }, { owner: "1.n_other.1" })).ref, { callId: foreignId });
    expect(await results.waitFor(foreignId)).toMatchObject({ ok: false, error: { code: "BATON_TOOL_ARGS_OBJECT_INVALID", retryable: false } });
    expect(runs.get("t.sum")).toBe(before + 1);
  });

  it("lists tools with schemas and live worker counts, scoped by tenant", async () => {
    const registry = createToolRegistry(bus);
    const all = await registry.list();
    const sum = all.find((t) => t.name === "t.sum")!;
    expect(sum).toMatchObject({ kind: "worker", workers: 1, timeoutMs: 30_000, retry: { maxAttempts: 3 }, description: "sums numbers" });
    expect(sum.inputSchema).toMatchObject({ type: "object", properties: { values: { type: "array", items: { type: "number" } } }, required: ["values"] });
    expect(sum.outputSchema).toMatchObject({ properties: { sum: { type: "number" } } });
    expect(all.find((t) => t.name === "t.json")).toMatchObject({ tenants: ["t_other"], inputSchema: { required: ["city", "days"] } });
    expect((await registry.list({ tenantId: "t_test" })).map((t) => t.name)).not.toContain("t.json");
    expect((await registry.list({ tenantId: "t_other" })).map((t) => t.name)).toContain("t.json");
    // The drained workers of the previous test are gone; their tool stays known.
    expect(await registry.get("t.lost")).toMatchObject({ workers: 0 });
    expect(await registry.has("t.sum")).toBe(true);
    expect(await registry.has("t.nope")).toBe(false);
    expect(await registry.get("t.nope")).toBeUndefined();

    const second = createWorker({ bus, tools: [tools[0]!], workerId: "w-2", logger: silent, presenceTtlMs: 1_500 });
    await second.start();
    expect((await registry.get("t.sum"))!.workers).toBe(2);
    await second.drain();
    expect((await registry.get("t.sum"))!.workers).toBe(1);
  });

  // test/examples.int.test.ts once read the example worker's tools between their descriptors
  // and its presence, and found 0 workers.
  it("never lists a tool without the worker that registers it", async () => {
    const registry = createToolRegistry(bus);
    const base = (await registry.get("t.sum"))!;
    const names = Array.from({ length: 30 }, (_, i) => `t.fresh${i}`);
    let registered = false;
    const seen: number[] = [];
    const polling = (async () => {
      while (!registered) {
        const d = await registry.get(names[0]!);
        if (d) seen.push(d.workers);
      }
    })();
    const reg = await registry.register("w-fresh", names.map((name) => ({ ...base, name })));
    registered = true;
    await polling;
    expect(seen.filter((w) => w !== 1)).toEqual([]);
    expect((await registry.get(names[0]!))!.workers).toBe(1);
    await reg.stop();
    for (const n of names) await registry.remove(n);
  });

  it("drops a worker whose presence is not refreshed after the TTL", async () => {
    const registry = createToolRegistry(bus, { presenceTtlMs: 1_500 });
    const descriptor = (await registry.get("t.sum"))!;
    // A worker that registered and died: no heartbeat, no unregister.
    const ghost = await registry.register("ghost", [descriptor], { heartbeatMs: 3_600_000 });
    expect((await registry.get("t.sum"))!.workers).toBe(2);
    let seen = -1;
    await until(async () => (seen = (await registry.get("t.sum"))!.workers) === 1, 20_000, "the ghost worker to drop out").catch((err: Error) => {
      throw new Error(`${err.message}; live workers last counted: ${seen}`);
    });
    // The live worker (heartbeat every TTL/3) stays.
    expect((await registry.list()).find((t) => t.name === "t.sum")!.workers).toBe(1);
    await ghost.stop();
  });
});

describe("calls delivered together", () => {
  const prefix = randomToolPrefix();
  let bus: Bus;
  let workerBus: Bus;
  let results: ResultCollector;
  let worker: Worker;

  beforeAll(async () => {
    bus = await connectBus({ servers: TEST_NATS_URL, prefix, name: "sdk-test-batch", logger: silent });
    workerBus = await connectBus({ servers: TEST_NATS_URL, prefix, name: "sdk-test-batch-worker", logger: silent });
    results = await collectResults(bus);
    worker = createWorker({
      bus: workerBus,
      tools: [defineTool({ name: "t.quick", description: "answers at once", input: z.object({ i: z.number() }), output: z.object({ i: z.number() }), handler: async ({ i }) => ({ i }) })],
      concurrency: 16,
      workerId: "w-batch",
      logger: silent,
    });
  });

  afterAll(async () => {
    await worker.drain();
    await results.stop();
    await workerBus.drain();
    await bus.drain();
    await deletePrefix(prefix);
  });

  it("are answered together: the answers are written at once when all of them are handed over, not the first alone", async () => {
    // What the worker had handed to its bus each time it asked for an immediate write.
    const answersAtSendNow: number[] = [];
    let answers = 0;
    // The calls handed to the worker, grouped by the event-loop turn that delivered them: four
    // calls in one frame, as an executor's fan-out step sends them, usually reach the worker in
    // one socket read, but on a loaded machine the read may split them.
    const deliveries: number[] = [];
    let open = false;
    const publish = workerBus.publish.bind(workerBus);
    const sendNow = workerBus.sendNow.bind(workerBus);
    const consume = workerBus.consume.bind(workerBus);
    workerBus.publish = (subject, data, meta) => {
      if (subject.endsWith(".cmd.tool.result")) answers++;
      return publish(subject, data, meta);
    };
    workerBus.sendNow = () => {
      answersAtSendNow.push(answers);
      sendNow();
    };
    workerBus.consume = (spec, handler) => consume(spec, (msg) => {
      if (!open) {
        open = true;
        deliveries.push(0);
        setImmediate(() => (open = false));
      }
      deliveries[deliveries.length - 1]! += 1;
      return handler(msg);
    });
    try {
      // Rounds of four calls until one turn delivers more than one of them (the first, almost
      // always: its calls are in the stream before the worker's first pull): those must leave
      // in one write, once all of them are answered.
      for (let round = 1; round <= 5 && !deliveries.some((n) => n > 1); round++) {
        const ids = await Promise.all([0, 1, 2, 3].map((i) => callTool(bus, "t.quick", { i })));
        if (round === 1) await worker.start();
        for (const id of ids) await results.waitFor(id);
        expect(answers).toBe(4 * round);
      }
      expect(deliveries.some((n) => n > 1)).toBe(true);
      // One write per delivering turn, each when every call delivered so far was answered.
      let sum = 0;
      expect(answersAtSendNow).toEqual(deliveries.map((n) => (sum += n)));
    } finally {
      workerBus.publish = publish;
      workerBus.sendNow = sendNow;
      workerBus.consume = consume;
    }
  });
});

