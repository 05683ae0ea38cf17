/**
 * `heldMessageIds` against the real NATS JetStream (the suite its own prefix and streams):
 * - it gives the `Nats-Msg-Id` of every message a work queue still holds, across the gaps its
 *   acked messages leave, and a message taken and not acked yet is still held;
 * - past `limit` messages it cannot tell, and says so (undefined).
 */
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import type { Bus } from "@baton/bus";
import { deferred, enc, openAdmin, openBus, randomPrefix, waitFor } from "./int-helpers.ts";
import type { Admin } from "./int-helpers.ts";

const prefix = randomPrefix();
let admin: Admin;
let bus: Bus;

beforeAll(async () => {
  admin = await openAdmin();
  bus = await openBus(prefix);
});

afterAll(async () => {
  await bus.drain();
  await admin.cleanup(prefix);
});

describe("heldMessageIds", () => {
  it("lists the ids of the messages a work queue holds: not the acked ones, the taken and unacked ones too", async () => {
    expect(await bus.heldMessageIds("tools", 10)).toEqual(new Set());
    for (let i = 0; i < 6; i++) await bus.publish(`${prefix}.tool.held.${i % 2 ? "odd" : "even"}`, enc(String(i)), { idempotencyKey: `call-${i}` });
    // A worker takes the odd ones: it acks call-1 and call-5, and holds call-3 without an ack.
    const release = deferred<void>();
    const sub = await bus.consume({ stream: "tools", durable: "held-odd", filterSubjects: [`${prefix}.tool.held.odd`], ack: "plain", concurrency: 3 }, async (msg) => {
      if (msg.meta.idempotencyKey === "call-3") await release.promise;
    });
    try {
      await waitFor(async () => (await admin.jsm.streams.info(bus.streams.tools)).state.messages === 4);
      expect(await bus.heldMessageIds("tools", 10)).toEqual(new Set(["call-0", "call-2", "call-3", "call-4"]));
      // More messages than the limit: it cannot tell which it holds.
      expect(await bus.heldMessageIds("tools", 3)).toBeUndefined();
    } finally {
      release.resolve();
      await sub.stop();
    }
    expect(await bus.heldMessageIds("tools", 10)).toEqual(new Set(["call-0", "call-2", "call-4"]));
  });
});
