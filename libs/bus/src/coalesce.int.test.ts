/**
 * Rules checked against the real NATS server:
 * - frames written in many microtasks of one event-loop turn leave in one socket write
 *   (without the wrapping, nats.js makes one write per microtask), and all arrive in order;
 * - sendNow writes the queued frames at once, and later frames of the turn are coalesced again;
 * - a connection is wrapped once; after a reconnect its new transport can be wrapped again.
 */
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import type { Socket } from "node:net";
import { connect } from "@nats-io/transport-node";
import type { NatsConnection } from "@nats-io/nats-core";
import { coalesceWrites, sendNow } from "./coalesce.ts";
import { NATS_URL, waitFor } from "./int-helpers.ts";

const socketOf = (nc: NatsConnection): Socket => (nc as unknown as { protocol: { transport: { socket: Socket } } }).protocol.transport.socket;

/** Counts the socket's system-level writes (one per `_write`, one per `_writev`). */
function countWrites(sock: Socket): { count(): number; restore(): void } {
  let n = 0;
  const s = sock as unknown as { _write: (...a: unknown[]) => void; _writev?: (...a: unknown[]) => void };
  const write = s._write;
  const writev = s._writev;
  s._write = function (this: unknown, ...a: unknown[]) {
    n++;
    return write.apply(this, a);
  };
  if (writev) {
    s._writev = function (this: unknown, ...a: unknown[]) {
      n++;
      return writev.apply(this, a);
    };
  }
  return { count: () => n, restore: () => ((s._write = write), writev && (s._writev = writev)) };
}

/** Publishes `n` messages, each from its own microtask, within one event-loop turn. */
async function publishAcrossMicrotasks(nc: NatsConnection, subject: string, n: number): Promise<void> {
  for (let i = 0; i < n; i++) {
    nc.publish(subject, String(i));
    await Promise.resolve();
  }
}

describe("coalesceWrites", () => {
  let reader: NatsConnection;
  beforeAll(async () => {
    reader = await connect({ servers: NATS_URL });
  });
  afterAll(() => reader.close());

  async function run(coalesce: boolean): Promise<{ writes: number; received: string[] }> {
    const nc = await connect({ servers: NATS_URL });
    try {
      if (coalesce) expect(coalesceWrites(nc)).toBe(true);
      const subject = `coalesce.${coalesce}.${process.pid}`;
      const received: string[] = [];
      const sub = reader.subscribe(subject, { callback: (_e, m) => void received.push(m.string()) });
      await reader.flush();
      await nc.flush();
      const counter = countWrites(socketOf(nc));
      await publishAcrossMicrotasks(nc, subject, 50);
      await new Promise((r) => setImmediate(r));
      const writes = counter.count();
      counter.restore();
      await waitFor(() => received.length === 50);
      sub.unsubscribe();
      return { writes, received };
    } finally {
      await nc.close();
    }
  }

  it("sends a turn's frames in one write, in order", async () => {
    const plain = await run(false);
    const coalesced = await run(true);
    const all = Array.from({ length: 50 }, (_, i) => String(i));
    expect(plain.received).toEqual(all);
    expect(coalesced.received).toEqual(all);
    // nats.js alone flushes once per microtask; wrapped, the turn goes out at once.
    expect(plain.writes).toBeGreaterThanOrEqual(25);
    expect(coalesced.writes).toBe(1);
  });

  it("sendNow writes what is queued at once; the rest of the turn is coalesced again", async () => {
    const nc = await connect({ servers: NATS_URL });
    try {
      expect(coalesceWrites(nc)).toBe(true);
      const subject = `coalesce.now.${process.pid}`;
      const received: string[] = [];
      const sub = reader.subscribe(subject, { callback: (_e, m) => void received.push(m.string()) });
      await reader.flush();
      await nc.flush();
      const counter = countWrites(socketOf(nc));
      nc.publish(subject, "urgent");
      // Corked, and nats.js would write only after this microtask: nothing is written yet.
      expect(counter.count()).toBe(0);
      expect(sendNow(nc)).toBe(true);
      expect(counter.count()).toBe(1);
      await publishAcrossMicrotasks(nc, subject, 20);
      await new Promise((r) => setImmediate(r));
      expect(counter.count()).toBe(2);
      counter.restore();
      await waitFor(() => received.length === 21);
      expect(received).toEqual(["urgent", ...Array.from({ length: 20 }, (_, i) => String(i))]);
      sub.unsubscribe();
    } finally {
      await nc.close();
    }
    expect(sendNow({} as NatsConnection)).toBe(false);
  });

  it("wraps a transport once, and the new transport of a reconnect again", async () => {
    const nc = await connect({ servers: NATS_URL, reconnectTimeWait: 10 });
    try {
      expect(coalesceWrites(nc)).toBe(true);
      expect(coalesceWrites(nc)).toBe(false);
      const before = socketOf(nc);
      const reconnected = (async () => {
        for await (const s of nc.status()) if (s.type === "reconnect") return;
      })();
      await nc.reconnect();
      await reconnected;
      expect(socketOf(nc)).not.toBe(before);
      expect(coalesceWrites(nc)).toBe(true);
      const subject = `coalesce.reconnect.${process.pid}`;
      const received: string[] = [];
      const sub = reader.subscribe(subject, { callback: (_e, m) => void received.push(m.string()) });
      await reader.flush();
      await publishAcrossMicrotasks(nc, subject, 10);
      await waitFor(() => received.length === 10);
      sub.unsubscribe();
    } finally {
      await nc.close();
    }
  });
});
