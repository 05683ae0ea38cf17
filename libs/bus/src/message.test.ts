import { headers as natsHeaders, MsgHdrsImpl } from "@nats-io/nats-core";
import { describe, expect, it } from "@jest/globals";
import { buildHeaders, headerRecord, HEADERS, metaFromHeaders } from "./message.ts";

/** The headers as nats.js's own `set` would build them, for comparison. */
function viaSet(entries: [string, string][]): [string, string[]][] {
  const h = natsHeaders();
  for (const [k, v] of entries) h.set(k, v);
  return [...h];
}

describe("buildHeaders", () => {
  it("puts meta headers, then trace headers, then Baton's own, later ones winning in place", () => {
    const h = buildHeaders(
      { tenantId: "t1", type: "node.started", schema: "baton.v1.NodeStarted", idempotencyKey: "k1", headers: { "x-a": "1", [HEADERS.tenant]: "spoofed", traceparent: "old" } },
      { traceparent: "00-abc-def-01" },
    );
    expect(h).toBeDefined();
    expect([...h!]).toEqual(
      viaSet([
        ["x-a", "1"],
        [HEADERS.tenant, "t1"],
        ["traceparent", "00-abc-def-01"],
        [HEADERS.type, "node.started"],
        [HEADERS.schema, "baton.v1.NodeStarted"],
        [HEADERS.msgId, "k1"],
      ]),
    );
    // What a receiver makes of them.
    const back = headerRecord(MsgHdrsImpl.decode((h as MsgHdrsImpl).encode()));
    expect(back).toEqual({ "x-a": "1", [HEADERS.tenant]: "t1", traceparent: "00-abc-def-01", [HEADERS.type]: "node.started", [HEADERS.schema]: "baton.v1.NodeStarted", [HEADERS.msgId]: "k1" });
    expect(metaFromHeaders(back)).toMatchObject({ tenantId: "t1", type: "node.started", schema: "baton.v1.NodeStarted", idempotencyKey: "k1" });
  });

  it("trims values as nats.js does, and gives no headers when there is nothing to say", () => {
    expect(buildHeaders({ headers: { "x-b": "  v  " } }, {})!.get("x-b")).toBe("v");
    expect(buildHeaders(undefined, {})).toBeUndefined();
    expect(buildHeaders({ headers: {} }, {})).toBeUndefined();
  });

  it("refuses a value with a line break and a name nats.js would refuse", () => {
    expect(() => buildHeaders({ idempotencyKey: "a\r\nb" }, {})).toThrow(/cannot contain/);
    expect(() => buildHeaders({ headers: { "bad:name": "v" } }, {})).toThrow(/not a valid character/);
    expect(() => buildHeaders({ headers: { "sp ace": "v" } }, {})).toThrow(/not a valid character/);
  });
});
