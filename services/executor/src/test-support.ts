/** Shared by the executor's integration tests (not part of the package's API). */
import type { Redis } from "ioredis";
import { jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import type { Bus } from "@baton/bus";
import { deleteKeysByPrefix } from "@baton/checkpoints";
import { COMMANDS, decode, isCommandName } from "@baton/contracts";
import type { AnyCommand } from "@baton/messaging";
import { deletePrefix } from "@baton/sdk/testing";

/** Tears down what a suite made under `prefix`: its Redis keys and NATS streams and buckets, then closes the Redis client and drains the bus. */
export async function removeTestPrefix(prefix: string, redis: Redis, bus: Bus, natsUrl: string): Promise<void> {
  await deleteKeysByPrefix(redis, prefix);
  await redis.quit();
  await bus.drain();
  await deletePrefix(prefix, natsUrl);
}

/**
 * The commands `fn` sent (a recovery sweep, which sends what it finds instead of applying it),
 * read back from the commands stream and decoded, as a consumer gets them: the stream's
 * messages published while `fn` ran. For suites whose executor has no consumer, which hand
 * them to `handle` themselves.
 */
export async function commandsSentBy(bus: Bus, natsUrl: string, fn: () => Promise<unknown>): Promise<AnyCommand[]> {
  const nc = await connect({ servers: natsUrl });
  try {
    const jsm = await jetstreamManager(nc);
    const stream = bus.streams.commands;
    const before = (await jsm.streams.info(stream)).state.last_seq;
    await fn();
    const after = (await jsm.streams.info(stream)).state.last_seq;
    const cmdPrefix = `${bus.prefix}.cmd.`;
    const sent: AnyCommand[] = [];
    for (let seq = before + 1; seq <= after; seq++) {
      const msg = await jsm.streams.getMessage(stream, { seq });
      if (!msg) continue;
      const name = msg.subject.startsWith(cmdPrefix) ? msg.subject.slice(cmdPrefix.length) : "";
      if (!isCommandName(name)) throw new Error(`not a command: ${msg.subject}`);
      sent.push({ name, message: decode(COMMANDS[name], msg.data) } as AnyCommand);
    }
    return sent;
  } finally {
    await nc.close();
  }
}
