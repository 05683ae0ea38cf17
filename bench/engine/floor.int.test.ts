/**
 * The floor harness against the real NATS and Redis. Rules checked:
 * - one work item goes out through the JetStream work queue, its result comes back,
 *   and the checkpoint compare-and-set lands (version 1);
 * - a chain completes every node, each after the one before it; a fan-out's branches
 *   all complete after the fork and before the join.
 */
import { afterAll, beforeAll, expect, it } from "@jest/globals";
import { createFloor } from "./floor.ts";
import { fanOutGraph, sequentialGraph } from "./stats.ts";

let floor: Awaited<ReturnType<typeof createFloor>>;

beforeAll(async () => {
  floor = await createFloor({ natsUrl: process.env.BATON_NATS_URL ?? "nats://127.0.0.1:4222", redisUrl: process.env.BATON_REDIS_URL ?? "redis://127.0.0.1:6379" });
});
afterAll(async () => {
  await floor?.close();
});

it("round-trips one work item and writes its checkpoint", async () => {
  expect(await floor.roundTrip()).toBe(1);
});

it("completes graphs in dependency order", async () => {
  const chain = sequentialGraph(4);
  const t = await (await floor.prepare(chain))();
  const times = chain.nodes.map((n) => t.doneAt.get(n)!);
  expect(times.every((v, i) => i === 0 || v >= times[i - 1]!)).toBe(true);

  const fan = fanOutGraph(3);
  const f = await (await floor.prepare(fan))();
  for (const b of ["b1", "b2", "b3"]) {
    expect(f.doneAt.get(b)!).toBeGreaterThanOrEqual(f.doneAt.get("fork")!);
    expect(f.doneAt.get("join")!).toBeGreaterThanOrEqual(f.doneAt.get(b)!);
  }
});
