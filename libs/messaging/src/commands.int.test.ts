/**
 * Rules of `consumeCommands` against the real NATS JetStream:
 * - a command of a kind this process does not know (a newer Baton's, during an upgrade) is
 *   handed back (nak, delayed by UNKNOWN_COMMAND_RETRY_MS) for a process that knows it: it
 *   is neither given to the handler nor terminated, and stays in the work queue;
 * - the commands behind it are still handled.
 */
import { describe, expect, it } from "@jest/globals";
import { suitePair, waitFor, watchTerminations } from "../../bus/src/int-helpers.ts";
import { createMessaging } from "./index.ts";
import type { AnyCommand } from "./index.ts";

const { prefix, admin, a } = await suitePair();

describe("consumeCommands", () => {
  it("hands back a command of an unknown kind instead of terminating it", async () => {
    const messaging = createMessaging(a);
    const stream = a.streams.commands;
    const durable = "executor-old";
    const terminated = watchTerminations(admin.nc, stream, durable);
    const { seq } = await a.publish(`${prefix}.cmd.execution.from_the_future`, new TextEncoder().encode("{}"), { tenantId: "t1", type: "execution.from_the_future" });
    await messaging.sendCommand("execution.cancel", { executionId: 7, tenantId: "t1", reason: "stop" }, "cancel:7");

    const handled: AnyCommand[] = [];
    const sub = await messaging.consumeCommands(durable, async (cmd) => {
      handled.push(cmd);
    }, { ackWaitMs: 60_000 });
    try {
      await waitFor(() => handled.length === 1);
      // The unknown command was delivered (it came first) and is waiting for its next delivery.
      await waitFor(async () => {
        const info = await admin.jsm.consumers.info(stream, durable);
        return info.num_pending === 0 && info.num_ack_pending === 1;
      });
    } finally {
      await sub.stop();
    }
    expect(handled.map((c) => c.name)).toEqual(["execution.cancel"]);
    expect(terminated.seqs).toEqual([]);
    const left = await admin.jsm.streams.getMessage(stream, { seq });
    expect(left?.subject).toBe(`${prefix}.cmd.execution.from_the_future`);
  });
});
