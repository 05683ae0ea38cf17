/**
 * Rules checked against the real NATS server:
 * - frames written in many microtasks of one event-loop turn leave in one socket write
 *   (without the wrapping, nats.js makes one write per microtask), and all arrive in order;
 * - sendNow writes the queued frames at once, and later frames of the turn are coalesced again;
 * - a connection is wrapped once; after a reconnect its new transport can be wrapped again;
 * - a frame given to sendLater rides on the connection's next write, goes out by itself after
 *   LATER_MAX_MS when there is none, and at once with sendLaterNow.
 */
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import type { Socket } from "node:net";
import { connect } from "@nats-io/transport-node";
import type { NatsConnection } from "@nats-io/nats-core";
import { coalesceWrites, LATER_MAX_MS, sendLater, sendLaterNow, sendNow } from "./coalesce.ts";
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

  describe("sendLater", () => {
    async function withConnection(fn: (nc: NatsConnection, subject: string, received: string[]) => Promise<void>): Promise<void> {
      const nc = await connect({ servers: NATS_URL });
      const subject = `coalesce.later.${process.pid}.${Math.random().toString(36).slice(2)}`;
      const received: string[] = [];
      const sub = reader.subscribe(subject, { callback: (_e, m) => void received.push(m.string()) });
      try {
        expect(coalesceWrites(nc)).toBe(true);
        await reader.flush();
        await nc.flush();
        await fn(nc, subject, received);
      } finally {
        sub.unsubscribe();
        await nc.close();
      }
    }

    it("holds a frame until the connection's next write, and sends it with that write", async () => {
      await withConnection(async (nc, subject, received) => {
        const counter = countWrites(socketOf(nc));
        expect(sendLater(nc, () => nc.publish(subject, "held"))).toBe(true);
        await new Promise((r) => setImmediate(r));
        // Nothing else was written this turn: the frame waits.
        expect(counter.count()).toBe(0);
        nc.publish(subject, "urgent");
        sendNow(nc);
        expect(counter.count()).toBe(1);
        await new Promise((r) => setTimeout(r, LATER_MAX_MS * 3));
        // The held frame went out with that write, not by itself later.
        expect(counter.count()).toBe(1);
        counter.restore();
        await waitFor(() => received.length === 2);
        expect(received).toEqual(["urgent", "held"]);
      });
    });

    it("rides on a turn's coalesced write as well", async () => {
      await withConnection(async (nc, subject, received) => {
        const counter = countWrites(socketOf(nc));
        sendLater(nc, () => nc.publish(subject, "held"));
        await publishAcrossMicrotasks(nc, subject, 3);
        await new Promise((r) => setImmediate(r));
        expect(counter.count()).toBe(1);
        counter.restore();
        await waitFor(() => received.length === 4);
        expect(received).toEqual(["0", "1", "2", "held"]);
      });
    });

    it("sends a frame by itself when nothing else is written for a while", async () => {
      await withConnection(async (nc, subject, received) => {
        const counter = countWrites(socketOf(nc));
        const t0 = Date.now();
        sendLater(nc, () => nc.publish(subject, "a"));
        sendLater(nc, () => nc.publish(subject, "b"));
        await waitFor(() => received.length === 2);
        expect(Date.now() - t0).toBeGreaterThanOrEqual(LATER_MAX_MS - 2);
        expect(counter.count()).toBe(1);
        counter.restore();
        expect(received).toEqual(["a", "b"]);
      });
    });

    it("sendLaterNow writes the held frames at once; a frame that throws (closed connection) does not stop the rest", async () => {
      await withConnection(async (nc, subject, received) => {
        sendLater(nc, () => {
          throw new Error("closed");
        });
        sendLater(nc, () => nc.publish(subject, "c"));
        sendLaterNow(nc);
        await nc.flush();
        await reader.flush();
        await waitFor(() => received.length === 1);
        expect(received).toEqual(["c"]);
      });
      // Not a nats.js connection: the frame is sent at once.
      let sent = false;
      expect(sendLater({} as NatsConnection, () => (sent = true))).toBe(false);
      expect(sent).toBe(true);
    });
  });
});
