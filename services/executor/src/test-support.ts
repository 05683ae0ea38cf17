/** Shared by the executor's integration tests (not part of the package's API). */
import type { Redis } from "ioredis";
import type { Bus } from "@baton/bus";
import { deleteKeysByPrefix } from "@baton/checkpoints";
import { deletePrefix } from "@baton/sdk/testing";

/** Tears down what a suite made under `prefix`: its Redis keys and NATS streams and buckets, then closes the Redis client and drains the bus. */
export async function removeTestPrefix(prefix: string, redis: Redis, bus: Bus, natsUrl: string): Promise<void> {
  await deleteKeysByPrefix(redis, prefix);
  await redis.quit();
  await bus.drain();
  await deletePrefix(prefix, natsUrl);
}
