/**
 * Rules (the nats.js 3.4 request patch, settled-requests.ts):
 * - once patched, an answered request releases its subscription and timer without building
 *   an error (upstream rejects the settled promise with a new RequestError every time);
 * - a cancel of a request still waiting rejects it as before;
 * - against the real server, answered requests still resolve, and a request nobody answers
 *   still fails (no responders, timeout) with nats.js's own errors.
 */
import { afterAll, beforeAll, describe, expect, it, jest } from "@jest/globals";
import { connect } from "@nats-io/transport-node";
import type { NatsConnection } from "@nats-io/nats-core";
import { RequestOne } from "@nats-io/nats-core/internal";
import { skipSettledRequestErrors } from "./settled-requests.ts";
import { NATS_URL } from "./int-helpers.ts";

/** A RequestOne with its collaborators replaced by spies. */
function fakeRequest() {
  const parts = {
    deferred: { resolve: jest.fn(), reject: jest.fn() },
    timer: { cancel: jest.fn() },
    mux: { cancel: jest.fn() },
  };
  return Object.assign<object, typeof parts>(Object.create(RequestOne.prototype) as object, parts);
}

describe("skipSettledRequestErrors", () => {
  let nc: NatsConnection;
  beforeAll(async () => {
    expect(skipSettledRequestErrors()).toBe(true);
    expect(skipSettledRequestErrors()).toBe(true); // once per process
    nc = await connect({ servers: NATS_URL, noAsyncTraces: true });
  });
  afterAll(async () => {
    await nc.close();
  });

  it("settles an answered request once and builds no error for its release", () => {
    const r = fakeRequest();
    const msg = { data: new Uint8Array() };
    (RequestOne.prototype.resolver as (this: unknown, err: Error | null, m: unknown) => void).call(r, null, msg);
    expect(r.deferred.resolve).toHaveBeenCalledWith(msg);
    expect(r.deferred.reject).not.toHaveBeenCalled();
    expect(r.mux.cancel).toHaveBeenCalledWith(r);
    expect(r.timer.cancel).toHaveBeenCalled();
  });

  it("still rejects a request cancelled while it waits", () => {
    const r = fakeRequest();
    RequestOne.prototype.cancel.call(r);
    expect(r.deferred.reject).toHaveBeenCalledTimes(1);
    expect(r.deferred.reject.mock.calls[0]![0]).toMatchObject({ name: "RequestError", message: "cancelled" });
    expect(r.mux.cancel).toHaveBeenCalledWith(r);
  });

  it("leaves real requests working: answered, no responders, timed out", async () => {
    const subject = `baton.test.settled.${process.pid}.${Date.now()}`;
    const sub = nc.subscribe(subject, { callback: (_err, m) => void m.respond(m.data) });
    await nc.flush();
    const answers = await Promise.all(Array.from({ length: 50 }, (_, i) => nc.request(subject, String(i), { timeout: 2_000 })));
    expect(answers.map((m) => m.string())).toEqual(Array.from({ length: 50 }, (_, i) => String(i)));
    await expect(nc.request(`${subject}.nobody`, "x", { timeout: 2_000 })).rejects.toMatchObject({ name: "RequestError" });
    sub.unsubscribe();
    const silent = nc.subscribe(`${subject}.silent`, { callback: () => undefined });
    await nc.flush();
    await expect(nc.request(`${subject}.silent`, "x", { timeout: 100 })).rejects.toMatchObject({ name: "TimeoutError" });
    silent.unsubscribe();
  });
});
