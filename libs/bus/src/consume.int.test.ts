/**
 * Rules checked against the real NATS JetStream (each test its own durable, the suite its
 * own prefix and streams):
 * - publish → consume round trip keeps data, subject and the tenant / type / schema /
 *   idempotency headers, and the handler runs inside the publisher's trace context;
 * - a repeated Nats-Msg-Id within the duplicate window is stored once (`duplicate: true`,
 *   same sequence);
 * - a retryable error is redelivered (after the error's retryDelayMs) until the handler
 *   succeeds;
 * - a non-retryable error is terminated at once (the server's MSG_TERMINATED advisory
 *   names the message) and never redelivered; the term is logged with the error code;
 * - a retryable error on the last of maxDeliver deliveries is terminated;
 * - `concurrency` caps the handlers in flight in one process;
 * - working() keeps a handler slower than ackWait from being redelivered;
 * - several filter subjects deliver exactly the matching events; before NATS 2.10 the
 *   server is asked for the narrowest one filter covering them, so other events never
 *   leave it (a durable made without a filter keeps none: that server cannot add one in
 *   place); filters outside the stream are refused with BATON_BUS_INVALID_OPTIONS;
 * - consuming again with changed settings updates the durable in place.
 */
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { context, ROOT_CONTEXT, trace } from "@opentelemetry/api";
import { AckPolicy, DeliverPolicy } from "@nats-io/jetstream";
import { defineError } from "@baton/errors";
import type { Bus, BusMessage } from "@baton/bus";
import { serverAtLeast } from "./consumer.ts";
import { captureLogger, deferred, dec, enc, openAdmin, openBus, randomPrefix, waitFor, watchTerminations } from "./int-helpers.ts";
import type { Admin, CapturedLogger } from "./int-helpers.ts";

const Permanent = defineError("BATON_TEST_PERMANENT", () => "cannot ever work", { status: 422 });
const Transient = defineError("BATON_TEST_TRANSIENT", () => "try again", { status: 503, retryable: true });

const prefix = randomPrefix();
let admin: Admin;
let bus: Bus;
let log: CapturedLogger;

beforeAll(async () => {
  admin = await openAdmin();
  log = captureLogger();
  bus = await openBus(prefix, { logger: log.logger });
});

afterAll(async () => {
  await bus.drain();
  await admin.cleanup(prefix);
});

/** Publishes a sentinel after the messages under test and waits for it: everything earlier has been delivered by then. */
async function flushThrough(subject: string, seen: () => string[]): Promise<void> {
  await bus.publish(subject, enc("sentinel"));
  await waitFor(() => seen().includes("sentinel"));
}

describe("consume", () => {
  it("round-trips data and headers, inside the publisher's trace context", async () => {
    const subject = `${prefix}.evt.node.started.t_1.42`;
    const traceId = "4bf92f3577b34da6a3ce929d0e0e4736";
    const got = deferred<{ msg: BusMessage; traceId: string | undefined }>();
    const sub = await bus.consume({ stream: "events", durable: "roundtrip", filterSubjects: [`${prefix}.evt.node.>`] }, async (msg) => {
      got.resolve({ msg, traceId: trace.getSpanContext(context.active())?.traceId });
    });
    const parent = trace.setSpanContext(ROOT_CONTEXT, { traceId, spanId: "00f067aa0ba902b7", traceFlags: 1 });
    const ack = await context.with(parent, () =>
      bus.publish(subject, enc("hello"), { tenantId: "t_1", type: "node.started", schema: "baton.v1.NodeStarted", idempotencyKey: "rt-1", headers: { "x-extra": "1" } }),
    );
    const { msg, traceId: seenTraceId } = await got.promise;
    await sub.stop();

    expect(dec(msg.data)).toBe("hello");
    expect(msg.subject).toBe(subject);
    expect(msg.seq).toBe(ack.seq);
    expect(msg.deliveryCount).toBe(1);
    expect(msg.timestamp).toBeInstanceOf(Date);
    expect(msg.meta).toMatchObject({ tenantId: "t_1", type: "node.started", schema: "baton.v1.NodeStarted", idempotencyKey: "rt-1" });
    expect(msg.meta.headers).toMatchObject({ "baton-tenant": "t_1", "x-extra": "1", traceparent: expect.stringContaining(traceId) });
    expect(seenTraceId).toBe(traceId);
    expect(sub.processed).toBe(1);
  });

  it("de-duplicates by Nats-Msg-Id", async () => {
    const subject = `${prefix}.evt.workflow.created.t_1.7`;
    const first = await bus.publish(subject, enc("a"), { idempotencyKey: "dup-1" });
    const second = await bus.publish(subject, enc("b"), { idempotencyKey: "dup-1" });
    const other = await bus.publish(subject, enc("c"), { idempotencyKey: "dup-2" });
    expect(first.duplicate).toBe(false);
    expect(second).toEqual({ seq: first.seq, duplicate: true });
    expect(other.duplicate).toBe(false);
    expect(other.seq).toBeGreaterThan(first.seq);
  });

  it("redelivers retryable errors until the handler succeeds", async () => {
    const subject = `${prefix}.cmd.execution.start`;
    const counts: number[] = [];
    const done = deferred();
    const sub = await bus.consume({ stream: "commands", durable: "retry", filterSubjects: [subject], maxDeliver: 5 }, async (msg) => {
      counts.push(msg.deliveryCount);
      if (msg.deliveryCount < 3) throw Transient({ retryDelayMs: 20 });
      done.resolve();
    });
    await bus.publish(subject, enc("x"));
    await done.promise;
    await waitFor(async () => (await admin.jsm.streams.info(bus.streams.commands)).state.messages === 0);
    await sub.stop();
    expect(counts).toEqual([1, 2, 3]);
  });

  it("with plain acks, removes handled messages from the work queue once stop() resolves", async () => {
    const subject = `${prefix}.tool.plain.ack`;
    let handled = 0;
    const sub = await bus.consume({ stream: "tools", durable: "plain", filterSubjects: [subject], ack: "plain", ackWaitMs: 60_000 }, async () => {
      handled++;
    });
    for (let i = 0; i < 20; i++) await bus.publish(subject, enc(String(i)));
    await waitFor(() => handled === 20);
    await sub.stop();
    // Without the acks the 20 messages would stay in the stream for the minute of ackWait.
    const info = await admin.jsm.consumers.info(bus.streams.tools, "plain");
    expect(info.num_ack_pending).toBe(0);
    expect((await admin.jsm.streams.info(bus.streams.tools)).state.messages).toBe(0);
    expect(sub.processed).toBe(20);
  });

  it("with plain acks, acknowledges handled messages without stop() too: held for the next write, or sent a moment later", async () => {
    const subject = `${prefix}.tool.plain.later`;
    let handled = 0;
    const sub = await bus.consume({ stream: "tools", durable: "plain-later", filterSubjects: [subject], ack: "plain", ackWaitMs: 60_000 }, async () => {
      handled++;
    });
    try {
      for (let i = 0; i < 5; i++) await bus.publish(subject, enc(String(i)));
      await waitFor(() => handled === 5);
      // No publish follows: the last acks go out by themselves, long before ackWait would redeliver.
      await waitFor(async () => (await admin.jsm.consumers.info(bus.streams.tools, "plain-later")).num_ack_pending === 0);
      expect((await admin.jsm.streams.info(bus.streams.tools)).state.messages).toBe(0);
    } finally {
      await sub.stop();
    }
  });

  it("terminates non-retryable errors at once and logs the code", async () => {
    const subject = `${prefix}.evt.node.failed.t_1.1`;
    const durable = "permanent";
    const terms = watchTerminations(admin.nc, bus.streams.events, durable);
    await admin.nc.flush();
    const seen: string[] = [];
    const sub = await bus.consume({ stream: "events", durable, filterSubjects: [`${prefix}.evt.node.failed.>`] }, async (msg) => {
      seen.push(dec(msg.data));
      if (dec(msg.data) === "bad") throw Permanent();
    });
    const { seq } = await bus.publish(subject, enc("bad"));
    await waitFor(() => terms.seqs.includes(seq));
    await flushThrough(subject, () => seen);
    await sub.stop();
    expect(seen).toEqual(["bad", "sentinel"]);
    const info = await admin.jsm.consumers.info(bus.streams.events, durable);
    expect(info.num_ack_pending).toBe(0);
    expect(info.num_redelivered).toBe(0);
    expect(log.lines).toContainEqual(expect.objectContaining({ msg: "message terminated", durable, seq, code: "BATON_TEST_PERMANENT" }));
  });

  it("terminates when maxDeliver is exhausted", async () => {
    const subject = `${prefix}.evt.node.retried.t_1.1`;
    const durable = "exhausted";
    const terms = watchTerminations(admin.nc, bus.streams.events, durable);
    await admin.nc.flush();
    const counts: number[] = [];
    const seen: string[] = [];
    const sub = await bus.consume({ stream: "events", durable, filterSubjects: [`${prefix}.evt.node.retried.>`], maxDeliver: 3, backoffMs: [10] }, async (msg) => {
      seen.push(dec(msg.data));
      if (dec(msg.data) === "flaky") {
        counts.push(msg.deliveryCount);
        throw new Error("still failing");
      }
    });
    const { seq } = await bus.publish(subject, enc("flaky"));
    await waitFor(() => terms.seqs.includes(seq));
    await flushThrough(subject, () => seen);
    await sub.stop();
    expect(counts).toEqual([1, 2, 3]);
    expect((await admin.jsm.consumers.info(bus.streams.events, durable)).num_ack_pending).toBe(0);
    expect(log.lines).toContainEqual(expect.objectContaining({ msg: "message terminated", durable, seq, deliveryCount: 3 }));
  });

  it("caps handlers in flight at `concurrency`", async () => {
    const subject = `${prefix}.tool.slow`;
    for (let i = 0; i < 8; i++) await bus.publish(subject, enc(String(i)));
    let inFlight = 0;
    let maxInFlight = 0;
    const twoRunning = deferred();
    const sub = await bus.consume({ stream: "tools", durable: "capped", filterSubjects: [subject], concurrency: 2 }, async () => {
      inFlight += 1;
      maxInFlight = Math.max(maxInFlight, inFlight);
      if (inFlight === 2) twoRunning.resolve();
      // The first handlers wait for a second one: this only ends if two run at once.
      await twoRunning.promise;
      await new Promise((r) => setTimeout(r, 5));
      inFlight -= 1;
    });
    await waitFor(() => sub.processed === 8);
    await sub.stop();
    expect(maxInFlight).toBe(2);
  });

  it("working() keeps a slow handler from being redelivered", async () => {
    const subject = `${prefix}.tool.long`;
    let calls = 0;
    const sub = await bus.consume({ stream: "tools", durable: "long", filterSubjects: [subject], ackWaitMs: 1000 }, async (msg) => {
      calls += 1;
      for (let i = 0; i < 10; i++) {
        await new Promise((r) => setTimeout(r, 250));
        msg.working();
      }
    });
    await bus.publish(subject, enc("x"));
    await waitFor(() => sub.processed === 1);
    const info = await admin.jsm.consumers.info(bus.streams.tools, "long");
    await sub.stop();
    expect(calls).toBe(1);
    expect(info.num_redelivered).toBe(0);
    expect(info.num_ack_pending).toBe(0);
  });

  it("delivers exactly the events matching several filters", async () => {
    const seen: string[] = [];
    const sub = await bus.consume(
      { stream: "events", durable: "multi", filterSubjects: [`${prefix}.evt.execution.*.t_9.>`, `${prefix}.evt.review.>`] },
      async (msg) => void seen.push(msg.subject),
    );
    const subjects = [`${prefix}.evt.execution.started.t_9.1`, `${prefix}.evt.node.started.t_9.1`, `${prefix}.evt.review.created.t_9.1`, `${prefix}.evt.execution.started.t_8.1`];
    for (const s of subjects) await bus.publish(s, enc("x"));
    await bus.publish(`${prefix}.evt.review.created.t_9.sentinel`, enc("sentinel"));
    await waitFor(() => seen.includes(`${prefix}.evt.review.created.t_9.sentinel`));
    await sub.stop();
    expect(seen).toEqual([`${prefix}.evt.execution.started.t_9.1`, `${prefix}.evt.review.created.t_9.1`, `${prefix}.evt.review.created.t_9.sentinel`]);
  });

  it.each([
    ["a new durable", "narrowed-new", false],
    // As an earlier Baton left it on NATS before 2.10 (every event delivered, skipped in the client).
    ["a durable made without a filter", "narrowed-old", true],
  ])("asks the server only for what several filters can match: %s", async (_, durable, made) => {
    if (made) await admin.jsm.consumers.add(bus.streams.events, { durable_name: durable, ack_policy: AckPolicy.Explicit, deliver_policy: DeliverPolicy.New });
    const filters = [`${prefix}.evt.execution.completed.*.*`, `${prefix}.evt.execution.failed.*.*`];
    const seen: string[] = [];
    const sub = await bus.consume({ stream: "events", durable, filterSubjects: filters, deliverPolicy: "new" }, async (msg) => void seen.push(msg.subject));
    for (let i = 0; i < 5; i++) await bus.publish(`${prefix}.evt.node.completed.t_1.${i}`, enc("node"));
    for (const s of [`execution.started.t_1.1`, `execution.completed.t_1.1`, `execution.failed.t_1.2`]) await bus.publish(`${prefix}.evt.${s}`, enc("x"));
    await flushThrough(`${prefix}.evt.execution.failed.t_1.sentinel`, () => seen.map((s) => s.split(".").at(-1)!));
    const info = await admin.jsm.consumers.info(bus.streams.events, durable);
    await sub.stop();
    expect(seen).toEqual([`${prefix}.evt.execution.completed.t_1.1`, `${prefix}.evt.execution.failed.t_1.2`, `${prefix}.evt.execution.failed.t_1.sentinel`]);
    if (serverAtLeast(admin.nc.info!.version, 2, 10)) {
      expect(info.config.filter_subjects).toEqual(filters);
      expect(info.delivered.consumer_seq).toBe(3);
    } else if (!made) {
      // One filter per consumer: the narrowest covering both. The node events never left the server.
      expect(info.config.filter_subject).toBe(`${prefix}.evt.execution.>`);
      expect(info.delivered.consumer_seq).toBe(4);
    } else {
      // That server cannot add a filter in place (it would deliver nothing): the durable is kept as it was.
      expect(info.config.filter_subject).toBeUndefined();
      expect(info.delivered.consumer_seq).toBe(9);
    }
  });

  it("refuses filters outside the stream before touching the server", async () => {
    await expect(bus.consume({ stream: "events", durable: "outside", filterSubjects: [`${prefix}.cmd.>`] }, async () => {})).rejects.toMatchObject({
      code: "BATON_BUS_INVALID_OPTIONS",
    });
    await expect(admin.jsm.consumers.info(bus.streams.events, "outside")).rejects.toThrow();
  });

  it("updates an existing durable in place", async () => {
    const spec = { stream: "events" as const, durable: "updated", filterSubjects: [`${prefix}.evt.memory.>`] };
    await (await bus.consume(spec, async () => {})).stop();
    await (await bus.consume({ ...spec, ackWaitMs: 2_000, maxDeliver: 4 }, async () => {})).stop();
    const info = await admin.jsm.consumers.info(bus.streams.events, "updated");
    expect(info.config).toMatchObject({ ack_wait: 2e9, max_deliver: 4, filter_subject: `${prefix}.evt.memory.>` });
  });
});
