/**
 * Rules checked against the real NATS JetStream, with two connections as two processes:
 * - two `consume` calls on the same durable of a work queue split the messages: each
 *   message is processed exactly once, both take part, and the queue ends empty;
 * - stop() stops fetching and resolves only after the handlers in flight have finished
 *   and their acks are confirmed; what was published afterwards is picked up by another
 *   process on the same durable: nothing is lost, nothing runs twice;
 * - drain() likewise waits for handlers in flight before closing the connection, and
 *   the bus then refuses work with BATON_BUS_CLOSED.
 */
import { describe, expect, it } from "@jest/globals";
import { hasCode } from "@baton/errors";
import { dec, deferred, enc, openBus, suitePair, waitFor } from "./int-helpers.ts";

const { prefix, admin, a, b } = await suitePair();

const queueEmpty = async (stream: string): Promise<boolean> => (await admin.jsm.streams.info(stream)).state.messages === 0;

describe("work queues", () => {
  it("split messages between processes, each processed exactly once", async () => {
    const subject = `${prefix}.tool.web.search`;
    const N = 40;
    for (let i = 0; i < N; i++) await a.publish(subject, enc(String(i)));
    const byA: string[] = [];
    const byB: string[] = [];
    const startedA = deferred();
    const startedB = deferred();
    const both = Promise.all([startedA.promise, startedB.promise]);
    const spec = { stream: "tools" as const, durable: "search-workers", filterSubjects: [`${prefix}.tool.web.>`], concurrency: 1 };
    // With concurrency 1 a process holding a message fetches no other, so the
    // first handler of each waits for the other process to start one.
    const subA = await a.consume(spec, async (msg) => {
      startedA.resolve();
      await both;
      byA.push(dec(msg.data));
    });
    const subB = await b.consume(spec, async (msg) => {
      startedB.resolve();
      await both;
      byB.push(dec(msg.data));
    });
    await waitFor(() => byA.length + byB.length >= N);
    await Promise.all([subA.stop(), subB.stop()]);

    const all = [...byA, ...byB];
    expect(all).toHaveLength(N);
    expect(new Set(all).size).toBe(N);
    expect(byA.length).toBeGreaterThan(0);
    expect(byB.length).toBeGreaterThan(0);
    expect(await queueEmpty(a.streams.tools)).toBe(true);
  });

  it("stop() waits for handlers in flight and loses nothing", async () => {
    const subject = `${prefix}.cmd.execution.resume`;
    const spec = { stream: "commands" as const, durable: "resumer", filterSubjects: [subject], concurrency: 3, ackWaitMs: 1000 };
    const events: string[] = [];
    const processedBy = new Map<string, string[]>();
    const record = (who: string, what: string): void => {
      processedBy.set(what, [...(processedBy.get(what) ?? []), who]);
    };
    const gate = deferred();
    let started = 0;
    const subA = await a.consume(spec, async (msg) => {
      started += 1;
      await gate.promise;
      record("a", dec(msg.data));
      events.push(`done ${dec(msg.data)}`);
    });
    for (let i = 0; i < 3; i++) await a.publish(subject, enc(`m${i}`));
    await waitFor(() => started === 3);

    const stopped = subA.stop().then(() => void events.push("stopped"));
    await new Promise((r) => setTimeout(r, 100));
    gate.resolve();
    await stopped;
    expect(events.slice(0, 3).sort()).toEqual(["done m0", "done m1", "done m2"]);
    expect(events[3]).toBe("stopped");
    expect(await queueEmpty(a.streams.commands)).toBe(true);

    for (let i = 3; i < 6; i++) await a.publish(subject, enc(`m${i}`));
    const subB = await b.consume(spec, async (msg) => void record("b", dec(msg.data)));
    await waitFor(() => processedBy.size === 6);
    await waitFor(() => queueEmpty(a.streams.commands));
    await subB.stop();
    expect([...processedBy.entries()].sort()).toEqual([
      ["m0", ["a"]],
      ["m1", ["a"]],
      ["m2", ["a"]],
      ["m3", ["b"]],
      ["m4", ["b"]],
      ["m5", ["b"]],
    ]);
  });

  it("drain() waits for handlers in flight, then the bus is closed", async () => {
    const c = await openBus(prefix);
    const subject = `${prefix}.cmd.execution.cancel`;
    const gate = deferred();
    const log: string[] = [];
    let started = false;
    await c.consume({ stream: "commands", durable: "canceller", filterSubjects: [subject] }, async () => {
      started = true;
      await gate.promise;
      log.push("handled");
    });
    await c.publish(subject, enc("x"));
    await waitFor(() => started);
    const drained = c.drain().then(() => void log.push("drained"));
    await new Promise((r) => setTimeout(r, 100));
    gate.resolve();
    await drained;
    expect(log).toEqual(["handled", "drained"]);
    expect(c.isConnected()).toBe(false);
    expect(await queueEmpty(c.streams.commands)).toBe(true);
    let error: unknown;
    try {
      await c.publish(subject, enc("late"));
    } catch (err) {
      error = err;
    }
    expect(hasCode(error, "BATON_BUS_CLOSED")).toBe(true);
  });
});
