/**
 * watchDatabase against the real Postgres behind a TCP proxy of the test's own, which the test
 * closes (the database out of reach: refused) and opens again, or whose connections it cuts
 * (the server ending them, as a restart or `pg_terminate_backend` does).
 */
import { afterEach, describe, expect, it } from "@jest/globals";
import { databaseProxy } from "./testing.ts";
import { watchDatabase } from "./watch.ts";
import type { DatabaseWatch } from "./watch.ts";

let watch: DatabaseWatch | undefined;
const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  await watch?.stop();
  watch = undefined;
  for (const c of closers.splice(0)) await c();
});

describe("watchDatabase", () => {
  it("says the database is unreachable while it refuses connections, and why, and reachable again once it answers", async () => {
    let p = await databaseProxy();
    const port = p.port;
    const changes: [boolean, string | undefined][] = [];
    watch = watchDatabase({ databaseUrl: p.url, intervalMs: 60_000, timeoutMs: 2000, onChange: (ok, why) => changes.push([ok, why]) });
    await watch.probed();
    expect(watch.reachable()).toBe(true);
    expect(watch.why()).toBeUndefined();

    await p.close();
    await watch.probed();
    expect(watch.reachable()).toBe(false);
    expect(watch.why()).toMatch(/^database unavailable: .*ECONNREFUSED/);

    p = await databaseProxy(port);
    closers.push(p.close);
    await watch.probed();
    expect(watch.reachable()).toBe(true);
    expect(watch.why()).toBeUndefined();
    expect(changes.map(([ok]) => ok)).toEqual([false, true]);
    expect(changes[0]?.[1]).toMatch(/ECONNREFUSED/);
  });

  it("takes a connection ended from the server's side as no outage: it connects again", async () => {
    const p = await databaseProxy();
    closers.push(p.close);
    const changes: boolean[] = [];
    watch = watchDatabase({ databaseUrl: p.url, intervalMs: 60_000, timeoutMs: 2000, onChange: (ok) => changes.push(ok) });
    await watch.probed();
    for (let i = 0; i < 3; i++) {
      p.cut();
      await watch.probed();
      expect(watch.reachable()).toBe(true);
    }
    expect(changes).toEqual([]);
  });

  it("probes on its own, every interval, without being asked", async () => {
    const p = await databaseProxy();
    const seen: boolean[] = [];
    watch = watchDatabase({ databaseUrl: p.url, intervalMs: 50, timeoutMs: 2000, onChange: (ok) => seen.push(ok) });
    await p.close();
    const deadline = Date.now() + 10_000;
    while (watch.reachable() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(watch.reachable()).toBe(false);
    expect(seen).toEqual([false]);
  });

  it("stops: no more probes, and a wait for one resolves", async () => {
    const p = await databaseProxy();
    closers.push(p.close);
    let connections = 0;
    p.server.on("connection", () => connections++);
    watch = watchDatabase({ databaseUrl: p.url, intervalMs: 20, timeoutMs: 2000 });
    await watch.probed();
    await watch.stop();
    const after = connections;
    await watch.probed();
    await new Promise((r) => setTimeout(r, 200));
    expect(connections).toBe(after);
  });
});
