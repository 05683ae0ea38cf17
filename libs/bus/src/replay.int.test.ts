/**
 * Rules checked against the real NATS JetStream:
 * - replay delivers the stored events matching the filter, in stream order, to a reader
 *   that arrives late, then keeps following new events until its signal aborts, and
 *   resolves then;
 * - events of other executions or tenants are not delivered;
 * - fromSeq starts at that stream sequence; several filters merge in stream order (on
 *   NATS before 2.10 by filtering the whole stream in the client);
 * - a filter outside the events stream is refused with BATON_BUS_INVALID_OPTIONS (the
 *   server would refuse it, and an ordered consumer would retry for ever);
 * - an already aborted signal resolves at once; an error thrown by onMessage rejects the
 *   replay; drain() ends running replays;
 * - a replay that ended leaves no consumer on the server (an ordered consumer would otherwise
 *   stay until its 5-minute inactivity threshold);
 * - lastPerSubject gives the last message of each subject the filter matches, with its
 *   headers (the message id), none when nothing matches, and leaves no consumer;
 * - eventsKeptSince gives the stream's creation while it has dropped no message (nothing
 *   published yet, or its first message still there), else the time of the oldest message it
 *   holds, and null when it has dropped every message.
 */
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import type { Bus, BusMessage } from "@baton/bus";
import { dec, enc, openAdmin, openBus, randomPrefix, waitFor } from "./int-helpers.ts";
import type { Admin } from "./int-helpers.ts";

const prefix = randomPrefix();
let admin: Admin;
let bus: Bus;
const seqs: Record<string, number> = {};

beforeAll(async () => {
  admin = await openAdmin();
  bus = await openBus(prefix);
  const history: [string, string][] = [
    ["execution.started", "1"],
    ["node.started", "1"],
    ["node.started", "2"],
    ["node.completed", "1"],
  ];
  for (const [type, exec] of history) {
    seqs[`${type}/${exec}`] = (await bus.publish(`${prefix}.evt.${type}.t_1.${exec}`, enc(`${type}/${exec}`), { tenantId: "t_1", type })).seq;
  }
  await bus.publish(`${prefix}.evt.node.started.t_2.1`, enc("other tenant"));
});

afterAll(async () => {
  await bus.drain();
  await admin.cleanup(prefix);
});

describe("replay", () => {
  it("deletes its consumer when it ends, whether aborted or ended by an error of the reader", async () => {
    const consumers = async () => (await admin.jsm.streams.info(bus.streams.events)).state.consumer_count;
    const before = await consumers();
    for (let i = 0; i < 5; i++) {
      const ac = new AbortController();
      let n = 0;
      const done = bus.replay(`${prefix}.evt.*.*.t_1.1`, { signal: ac.signal }, () => void n++);
      await waitFor(() => n > 0);
      ac.abort();
      await done;
    }
    await expect(bus.replay(`${prefix}.evt.*.*.t_1.1`, {}, () => {
      throw new Error("reader failed");
    })).rejects.toThrow("reader failed");
    expect(await consumers()).toBe(before);
  });

  it("delivers history to a late reader, then follows live events until aborted", async () => {
    const got: BusMessage[] = [];
    const ac = new AbortController();
    const done = bus.replay(`${prefix}.evt.*.*.t_1.1`, { signal: ac.signal }, (m) => void got.push(m));
    await waitFor(() => got.length === 3);
    await bus.publish(`${prefix}.evt.execution.completed.t_1.1`, enc("execution.completed/1"));
    await bus.publish(`${prefix}.evt.node.started.t_1.2`, enc("not mine"));
    await waitFor(() => got.length === 4);
    ac.abort();
    await done;
    expect(got.map((m) => dec(m.data))).toEqual(["execution.started/1", "node.started/1", "node.completed/1", "execution.completed/1"]);
    const seen = got.map((m) => m.seq);
    expect([...seen].sort((x, y) => x - y)).toEqual(seen);
    expect(got[0]!.meta).toMatchObject({ tenantId: "t_1", type: "execution.started" });
  });

  it("starts at fromSeq", async () => {
    const got: string[] = [];
    const ac = new AbortController();
    await bus.replay(`${prefix}.evt.*.*.t_1.1`, { fromSeq: seqs["node.started/1"]!, signal: ac.signal }, (m) => {
      got.push(dec(m.data));
      if (got.length === 3) ac.abort();
    });
    expect(got).toEqual(["node.started/1", "node.completed/1", "execution.completed/1"]);
  });

  it("merges several filters in stream order", async () => {
    const got: string[] = [];
    const ac = new AbortController();
    await bus.replay([`${prefix}.evt.execution.>`, `${prefix}.evt.node.started.t_1.2`], { signal: ac.signal }, (m) => {
      got.push(dec(m.data));
      if (got.length === 3) ac.abort();
    });
    expect(got).toEqual(["execution.started/1", "node.started/2", "execution.completed/1"]);
  });

  it("refuses filters outside the events stream", async () => {
    await expect(bus.replay(`${prefix}.cmd.>`, {}, () => undefined)).rejects.toMatchObject({ code: "BATON_BUS_INVALID_OPTIONS" });
    await expect(bus.replay(`${prefix}.*.*.t_1.1`, {}, () => undefined)).rejects.toMatchObject({ code: "BATON_BUS_INVALID_OPTIONS" });
  });

  it("resolves at once for an aborted signal and rejects when onMessage throws", async () => {
    await bus.replay(`${prefix}.evt.>`, { signal: AbortSignal.abort() }, () => {
      throw new Error("never called");
    });
    await expect(
      bus.replay(`${prefix}.evt.*.*.t_1.>`, {}, () => {
        throw new Error("reader broke");
      }),
    ).rejects.toThrow("reader broke");
  });

  it("ends running replays on drain", async () => {
    const other = await openBus(prefix);
    let n = 0;
    const done = other.replay(`${prefix}.evt.>`, {}, () => void (n += 1));
    await waitFor(() => n > 0);
    await other.drain();
    await done;
  });
});

describe("lastPerSubject", () => {
  it("gives the last message of each matching subject, with its message id", async () => {
    const consumers = async () => (await admin.jsm.streams.info(bus.streams.events)).state.consumer_count;
    const before = await consumers();
    const pub = (type: string, exec: string, id: string) => bus.publish(`${prefix}.evt.${type}.t_1.${exec}`, enc(id), { tenantId: "t_1", type, idempotencyKey: id });
    await pub("execution.started", "9", "evt:9:1:1");
    await pub("node.started", "9", "evt:9:1:2");
    await pub("node.completed", "9", "evt:9:2:1");
    await pub("node.started", "9", "evt:9:2:2");
    await pub("node.started", "90", "evt:90:7:1");
    const last = await bus.lastPerSubject(`${prefix}.evt.*.*.t_1.9`);
    const got = last.map((m) => [m.subject, dec(m.data), m.meta.idempotencyKey]).sort((a, b) => String(a[0]).localeCompare(String(b[0])));
    expect(got).toEqual([
      [`${prefix}.evt.execution.started.t_1.9`, "evt:9:1:1", "evt:9:1:1"],
      [`${prefix}.evt.node.completed.t_1.9`, "evt:9:2:1", "evt:9:2:1"],
      [`${prefix}.evt.node.started.t_1.9`, "evt:9:2:2", "evt:9:2:2"],
    ]);
    expect(await bus.lastPerSubject(`${prefix}.evt.*.*.t_1.404`)).toEqual([]);
    expect(await consumers()).toBe(before);
    await expect(bus.lastPerSubject(`${prefix}.cmd.>`)).rejects.toMatchObject({ code: "BATON_BUS_INVALID_OPTIONS" });
  });
});

describe("eventsKeptSince", () => {
  it("gives the stream's creation while it has dropped nothing, else when its oldest message was stored, null when it has dropped them all", async () => {
    // This file's stream holds every message published to it: since its creation.
    const info = await admin.jsm.streams.info(bus.streams.events);
    expect(info.state.first_seq).toBe(1);
    const since = await bus.eventsKeptSince();
    expect(since?.getTime()).toBe(new Date(info.created).getTime());
    const first = (await admin.jsm.streams.getMessage(bus.streams.events, { seq: seqs["execution.started/1"]! }))!;
    expect(since!.getTime()).toBeLessThanOrEqual(new Date(first.time).getTime());
    const other = await openBus(randomPrefix());
    const otherAdmin = await openAdmin();
    try {
      await other.ensureTopology();
      // Nothing published yet: everything since its creation, which is nothing.
      const created = new Date((await otherAdmin.jsm.streams.info(other.streams.events)).created).getTime();
      expect((await other.eventsKeptSince())?.getTime()).toBe(created);
      // Every message dropped: none kept.
      const subject = `${other.prefix}.evt.node.started.t_1.1`;
      await other.publish(subject, enc("a"), { tenantId: "t_1", type: "node.started" });
      await otherAdmin.jsm.streams.purge(other.streams.events);
      expect(await other.eventsKeptSince()).toBeNull();
      // Some dropped: since the oldest message kept.
      const { seq } = await other.publish(subject, enc("b"), { tenantId: "t_1", type: "node.started" });
      const kept = (await otherAdmin.jsm.streams.getMessage(other.streams.events, { seq }))!;
      expect((await other.eventsKeptSince())?.getTime()).toBe(new Date(kept.time).getTime());
    } finally {
      await other.drain();
      await otherAdmin.cleanup(other.prefix);
    }
  });
});

