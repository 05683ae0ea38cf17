/**
 * Rules checked against the real NATS server:
 * - objects(b).put stores bytes larger than the server's max_payload as parts of at most
 *   partBytes (half max_payload at most) in the stream `OBJ_{prefix}_{b}`, and get returns
 *   them whole;
 * - a put of the same name replaces the object; delete removes every part of it and only
 *   of it (a name that is a prefix of another's is not touched);
 * - get answers null for an object never written, deleted, or asked for with other parts,
 *   and for a bucket that does not exist; names outside `[A-Za-z0-9_-]+` are refused.
 */
import { randomBytes } from "node:crypto";
import { describe, expect, it } from "@jest/globals";
import { suitePair } from "./int-helpers.ts";

const { prefix, admin, a, b } = await suitePair();

describe("objects", () => {
  it("stores a value larger than max_payload in parts and reads it back whole from another connection", async () => {
    const data = randomBytes(a.maxPayload() * 2 + 12_345);
    const store = a.objects("big");
    expect(store.partBytes).toBeLessThanOrEqual(a.maxPayload() / 2);
    const info = await store.put("call_1", data);
    expect(info).toEqual({ size: data.byteLength, parts: Math.ceil(data.byteLength / store.partBytes) });
    const got = await b.objects("big").get("call_1", info);
    expect(got).not.toBeNull();
    expect(Buffer.from(got!).equals(data)).toBe(true);
    const si = await admin.jsm.streams.info(`OBJ_${prefix}_big`);
    expect(si.state.messages).toBe(info.parts);
  });

  it("replaces on a second put, deletes only the named object, and answers null for what is gone", async () => {
    const store = a.objects("big2");
    await store.put("x", new TextEncoder().encode("first version, longer"));
    const info = await store.put("x", new TextEncoder().encode("second"));
    const other = await store.put("x_1", new TextEncoder().encode("other"));
    expect(new TextDecoder().decode((await store.get("x", info)))).toBe("second");
    expect(await store.get("x", { size: info.size, parts: 2 })).toBeNull();
    await store.delete("x");
    expect(await store.get("x", info)).toBeNull();
    expect(new TextDecoder().decode((await store.get("x_1", other)))).toBe("other");
    await store.delete("never");
    expect(await a.objects("nobucket").get("y", { size: 1, parts: 1 })).toBeNull();
    await a.objects("nobucket").delete("y");
    await expect(store.put("a.b", new Uint8Array(1))).rejects.toMatchObject({ code: "BATON_BUS_INVALID_OPTIONS" });
  });
});
