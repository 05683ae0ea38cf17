/**
 * Rules checked (real NATS and Postgres):
 * - turns: in a window the first executor to claim sweeps and another does not once the window
 *   before went through; a window whose sweep went through is not swept again; a claimant that
 *   never finishes holds up one window, after which another executor sweeps; executors with
 *   different intervals keep apart turns; when NATS cannot answer, the executor sweeps;
 * - executors: two executors sweeping every 400 ms make about one sweep per window between
 *   them (each used to sweep every window); when one of them fails every sweep it claims, the
 *   other still sweeps at least every other window.
 */
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { randomBytes } from "node:crypto";
import type { Redis } from "ioredis";
import { connectBus } from "@baton/bus";
import type { Bus } from "@baton/bus";
import { createRedis, redisCheckpointStore } from "@baton/checkpoints";
import { createMessaging } from "@baton/messaging";
import { openTestStore } from "@baton/store/testing";
import type { TestStore } from "@baton/store/testing";
import type { Store } from "@baton/store";
import { createLogger } from "@baton/telemetry";
import { CHECKPOINT_STORE_OPTIONS, createExecutor } from "./executor.ts";
import type { CheckpointState } from "./executor.ts";
import { sweepTurns } from "./sweep-turns.ts";
import { removeTestPrefix } from "./test-support.ts";

const NATS = process.env.BATON_NATS_URL ?? "nats://127.0.0.1:4222";
const prefix = `xt${randomBytes(4).toString("hex")}`;
let t: TestStore;
let bus: Bus;
let redis: Redis;

beforeAll(async () => {
  t = await openTestStore({ prefix: "exec_turns" });
  bus = await connectBus({ servers: NATS, prefix, name: "sweep-turns-test", logger: createLogger("test", "silent") });
  redis = createRedis(process.env.BATON_REDIS_URL ?? "redis://127.0.0.1:6379");
});

afterAll(async () => {
  await t?.dispose();
  await removeTestPrefix(prefix, redis, bus, NATS);
});

describe("sweep turns", () => {
  const EVERY = 60_000;
  const at = (window: number): number => window * EVERY + 1_000;
  const errors: unknown[] = [];
  const turnsOf = (who: string, every = EVERY) => sweepTurns(bus, every, who, (err) => errors.push(err));

  it("lets one executor sweep a window, and another after a window that did not go through", async () => {
    const a = turnsOf("a");
    const b = turnsOf("b");
    const w0 = 1000;
    // The first window: nothing went through before it, so both sweep.
    expect(await a.take(at(w0))).toEqual({ sweep: true, window: w0 });
    expect(await b.take(at(w0))).toEqual({ sweep: true, window: w0 });
    await a.done(w0);
    // Done: nobody sweeps that window again.
    expect((await b.take(at(w0) + 5_000)).sweep).toBe(false);
    expect((await a.take(at(w0) + 5_000)).sweep).toBe(false);
    // The next window: a claims it; b leaves it to a, the window before having gone through.
    expect(await a.take(at(w0 + 1))).toEqual({ sweep: true, window: w0 + 1 });
    expect(await b.take(at(w0 + 1))).toEqual({ sweep: false, window: w0 + 1 });
    await a.done(w0 + 1);
    // a claims the next one and never finishes it: b leaves that window to a...
    expect((await a.take(at(w0 + 2))).sweep).toBe(true);
    expect((await b.take(at(w0 + 2))).sweep).toBe(false);
    // ...and sweeps the one after, though a claimed it too.
    expect((await a.take(at(w0 + 3))).sweep).toBe(true);
    expect((await b.take(at(w0 + 3))).sweep).toBe(true);
    // An executor with another interval keeps its own turns.
    expect((await turnsOf("c", 30_000).take(at(w0 + 1))).sweep).toBe(true);
    expect(errors).toEqual([]);
  });

  it("says sweep when NATS cannot answer", async () => {
    const closed = await connectBus({ servers: NATS, prefix, name: "sweep-turns-closed", logger: createLogger("test", "silent") });
    await closed.drain();
    const seen: unknown[] = [];
    const turns = sweepTurns(closed, EVERY, "x", (err) => seen.push(err));
    expect((await turns.take(at(2000))).sweep).toBe(true);
    await turns.done(2000);
    expect(seen).toHaveLength(2);
    expect(seen[0]).toMatchObject({ code: "BATON_BUS_CLOSED" });
  });
});

describe("executors sweeping by turns", () => {
  const EVERY = 400;

  /** An executor sweeping every EVERY ms whose sweeps are counted (each starts by listing the active runs); `broken` fails them. */
  function counted(name: string, broken = false): { sweeps: () => number; start: () => Promise<void>; stop: () => Promise<void> } {
    let sweeps = 0;
    const executions = new Proxy(t.store.executions, {
      get(target, key, receiver) {
        const v = Reflect.get(target, key, receiver) as unknown;
        if (key !== "listActive" || typeof v !== "function") return typeof v === "function" ? (v as (...a: unknown[]) => unknown).bind(target) : v;
        return async (...args: unknown[]) => {
          sweeps++;
          if (broken) throw new Error(`${name} cannot read its runs`);
          return (v as (...a: unknown[]) => Promise<unknown>).apply(target, args);
        };
      },
    });
    const store = { ...t.store, executions } as Store;
    const ex = createExecutor({
      messaging: createMessaging(bus),
      store,
      checkpoints: redisCheckpointStore<CheckpointState>(redis, { prefix, ...CHECKPOINT_STORE_OPTIONS }),
      logger: createLogger(name, "silent"),
      recoverOnStart: false,
      recoverEveryMs: EVERY,
    });
    return { sweeps: () => sweeps, start: async () => ex.start?.(), stop: async () => ex.stop?.() };
  }

  async function windowsOf(run: () => Promise<void>): Promise<number> {
    const first = Math.floor(Date.now() / EVERY);
    await run();
    return Math.floor(Date.now() / EVERY) - first + 1;
  }

  it("make about one sweep per window between them", async () => {
    const a = counted("a");
    const b = counted("b");
    await Promise.all([a.start(), b.start()]);
    const windows = await windowsOf(() => new Promise((r) => setTimeout(r, 12 * EVERY)));
    await Promise.all([a.stop(), b.stop()]);
    const total = a.sweeps() + b.sweeps();
    // Each executor ticks once a window: without turns that is two sweeps a window. The first
    // window may see both, and a slow sweep one more.
    expect(total).toBeGreaterThanOrEqual(windows - 3);
    expect(total).toBeLessThanOrEqual(windows + 2);
  });

  it("go on when one executor claims windows and cannot sweep them", async () => {
    const broken = counted("broken", true);
    const healthy = counted("healthy");
    await Promise.all([broken.start(), healthy.start()]);
    const windows = await windowsOf(() => new Promise((r) => setTimeout(r, 12 * EVERY)));
    await Promise.all([broken.stop(), healthy.stop()]);
    // The broken one's claims hold up a window each; the healthy one sweeps at least every other one.
    expect(healthy.sweeps()).toBeGreaterThanOrEqual(Math.floor(windows / 2) - 1);
    expect(broken.sweeps()).toBeGreaterThan(0);
  });
});
