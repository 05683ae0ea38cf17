/**
 * Engine events against the real NATS server: an event whose payload the server refuses as
 * larger than its max payload still goes out, with the payload replaced by an `$omitted`
 * marker (a run's events go out in order, so one that could never be published would hold
 * back every later event of its run); events within the limit go out whole.
 */
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { randomBytes } from "node:crypto";
import { connectBus } from "@baton/bus";
import type { Bus, BusMessage } from "@baton/bus";
import { decode, EVENTS, valueToJson } from "@baton/contracts";
import type { ExecutionState, JsonValue } from "@baton/engine";
import { createMessaging } from "@baton/messaging";
import type { Messaging } from "@baton/messaging";
import { deletePrefix } from "@baton/sdk/testing";
import { createLogger } from "@baton/telemetry";
import { OMITTED_PAYLOAD_CODE, publishEngineEvent } from "./events.ts";

const NATS = process.env.BATON_NATS_URL ?? "nats://127.0.0.1:4222";
const prefix = `xev${randomBytes(4).toString("hex")}`;
let bus: Bus;
let messaging: Messaging;

const state = { executionId: 7, tenantId: "t_ev", workflowId: 3 } as ExecutionState;

beforeAll(async () => {
  bus = await connectBus({ servers: NATS, prefix, name: "executor-events-test", logger: createLogger("test", "silent") });
  await bus.ensureTopology();
  messaging = createMessaging(bus);
});

afterAll(async () => {
  await bus.drain();
  await deletePrefix(prefix, NATS);
});

/** The events of execution 7 stored so far, in order. */
async function stored(count: number): Promise<BusMessage[]> {
  const got: BusMessage[] = [];
  const ac = new AbortController();
  const done = bus.replay(`${prefix}.evt.>`, { signal: ac.signal }, (m) => {
    got.push(m);
    if (got.length >= count) ac.abort();
  });
  const timer = setTimeout(() => ac.abort(), 5_000);
  await done;
  clearTimeout(timer);
  return got;
}

describe("publishEngineEvent", () => {
  it("publishes an event whose payload exceeds the server's max with the payload omitted, and a small one whole", async () => {
    // Many small parts: larger than a message may be.
    const huge: JsonValue = Array.from({ length: Math.ceil(bus.maxPayload() / 100) + 10 }, (_, i) => ({ i, text: "x".repeat(90) }));
    await publishEngineEvent(messaging, state, { kind: "node.completed", nodeId: "big", nodeType: "transform", attempt: 1, durationMs: 3, output: huge }, "evt:7:1:1");
    await publishEngineEvent(messaging, state, { kind: "execution.emitted", nodeId: "e", name: "progress", data: huge }, "evt:7:1:2");
    await publishEngineEvent(messaging, state, { kind: "node.completed", nodeId: "small", nodeType: "transform", attempt: 1, durationMs: 1, output: { ok: true } }, "evt:7:2:1");

    const got = await stored(3);
    expect(got.map((m) => m.meta.type)).toEqual(["node.completed", "execution.emitted", "node.completed"]);
    const big = decode(EVENTS["node.completed"], got[0]!.data);
    expect(big).toMatchObject({ nodeId: "big", executionId: 7, tenantId: "t_ev", attempt: 1 });
    const marker = valueToJson(big.output) as { $omitted: string; bytes: number; where: string };
    expect(marker.$omitted).toBe(OMITTED_PAYLOAD_CODE);
    expect(marker.bytes).toBe(Buffer.byteLength(JSON.stringify(huge)));
    expect(marker.bytes).toBeGreaterThan(bus.maxPayload());
    expect(marker.where).toMatch(/journal/);
    const emitted = decode(EVENTS["execution.emitted"], got[1]!.data);
    expect(valueToJson(emitted.data)).toMatchObject({ $omitted: OMITTED_PAYLOAD_CODE });
    expect(valueToJson(decode(EVENTS["node.completed"], got[2]!.data).output)).toEqual({ ok: true });
  });

  it("still fails on an error that is not about the payload's size", async () => {
    const closed = await connectBus({ servers: NATS, prefix, name: "executor-events-closed", logger: createLogger("test", "silent") });
    await closed.drain();
    await expect(
      publishEngineEvent(createMessaging(closed), state, { kind: "node.completed", nodeId: "n", nodeType: "tool", attempt: 1, durationMs: 1, output: 1 }, "evt:7:3:1"),
    ).rejects.toMatchObject({ code: "BATON_BUS_CLOSED" });
  });
});
