/**
 * Large tool-call arguments (large-args.ts) against a real NATS. Rules checked:
 * - arguments at or under the threshold are returned as they are, synchronously;
 * - larger ones are put in the `tool_args_large` object bucket under the call id's object name
 *   and replaced by an `object:` reference whose size, parts and sha256 read the object back;
 * - the same call sent again keeps the object it has (not written again), so a worker reading
 *   it meanwhile is not disturbed; different arguments under the same call id replace it;
 * - so do the same arguments with their keys in another order (read back from the blob store
 *   after a crash): the reference names the object as it is;
 * - a size measured already is not measured again: arguments under the threshold by it go inline.
 */
import { createHash, randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { jetstreamManager } from "@nats-io/jetstream";
import type { JetStreamManager } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/nats-core";
import { connect } from "@nats-io/transport-node";
import { connectBus, objectName, parseObjectRef } from "@baton/bus";
import type { Bus } from "@baton/bus";
import type { JsonObject } from "@baton/engine";
import { deletePrefix } from "@baton/sdk/testing";
import { createLogger } from "@baton/telemetry";
import { createLargeArgs, LARGE_ARGS_BUCKET } from "./large-args.ts";

const NATS = process.env.BATON_NATS_URL ?? "nats://127.0.0.1:4222";
const prefix = `xla${randomBytes(4).toString("hex")}`;
let bus: Bus;
let jsm: JetStreamManager;
let nc: NatsConnection;

beforeAll(async () => {
  bus = await connectBus({ servers: NATS, prefix, name: "executor-large-args-test", logger: createLogger("test", "silent") });
  nc = await connect({ servers: NATS });
  jsm = await jetstreamManager(nc);
});

afterAll(async () => {
  await bus.drain();
  await nc.close();
  await deletePrefix(prefix, NATS);
});

describe("large tool-call arguments", () => {
  it("sends small arguments inline and large ones by reference, keeping the object of a call sent again", async () => {
    const large = createLargeArgs({ bus, logger: createLogger("test", "silent"), thresholdBytes: 4096 });
    const small: JsonObject = { a: 1, s: "x".repeat(100) };
    expect(large.outgoing("9.n.1", small)).toBe(small);

    const args: JsonObject = { data: "y".repeat(600_000), n: 3 };
    const sent = await large.outgoing("9.big.1", args);
    const ref = parseObjectRef(sent)!;
    expect(ref).toMatchObject({ bucket: LARGE_ARGS_BUCKET, name: objectName("9.big.1"), size: JSON.stringify(args).length });
    expect(ref.parts).toBeGreaterThan(1);
    const bytes = (await bus.objects(LARGE_ARGS_BUCKET).get(ref.name, ref))!;
    expect(createHash("sha256").update(bytes).digest("hex")).toBe(ref.sha256);
    expect(JSON.parse(new TextDecoder().decode(bytes))).toEqual(args);

    const stream = `OBJ_${prefix}_${LARGE_ARGS_BUCKET}`;
    const seq = (await jsm.streams.info(stream)).state.last_seq;
    expect(await large.outgoing("9.big.1", args)).toEqual(sent);
    expect((await jsm.streams.info(stream)).state.last_seq).toBe(seq);

    const changed = parseObjectRef(await large.outgoing("9.big.1", { ...args, n: 4 }))!;
    expect(changed.sha256).not.toBe(ref.sha256);
    expect(JSON.parse(new TextDecoder().decode((await bus.objects(LARGE_ARGS_BUCKET).get(changed.name, changed))))).toMatchObject({ n: 4 });
  });

  it("keeps the object of a call sent again with the same arguments in another key order", async () => {
    const large = createLargeArgs({ bus, logger: createLogger("test", "silent"), thresholdBytes: 4096 });
    const first = parseObjectRef(await large.outgoing("9.order.1", { data: { z: "q".repeat(10_000), a: 1 }, n: 1 }))!;
    const stream = `OBJ_${prefix}_${LARGE_ARGS_BUCKET}`;
    const seq = (await jsm.streams.info(stream)).state.last_seq;
    const again = parseObjectRef(await large.outgoing("9.order.1", { n: 1, data: { a: 1, z: "q".repeat(10_000) } }))!;
    expect(again).toEqual(first);
    expect((await jsm.streams.info(stream)).state.last_seq).toBe(seq);
  });

  it("takes a size measured already: arguments at or under the threshold by it go inline unmeasured", () => {
    const large = createLargeArgs({ bus, logger: createLogger("test", "silent"), thresholdBytes: 4096 });
    const args: JsonObject = { s: "x".repeat(10_000) };
    expect(large.outgoing("9.measured.1", args, 100)).toBe(args);
  });
});
