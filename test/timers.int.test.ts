/**
 * Rules checked:
 * - timers that are not due yet (a run's deadline, a delay, a node's timeout) wait on the
 *   executor's consumer of the commands stream; however many wait, the other commands (a
 *   start, a tool's answer) still reach the executor.
 */
import { expect, it } from "@jest/globals";
import { streamNames } from "@baton/contracts";
import { jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import type { BusService } from "../bin/modules.ts";
import { waitFor } from "./helpers.ts";
import { createDefinition, startExecution, suiteInProcess, uniq, waitForExecution } from "./workflows.ts";

const h = await suiteInProcess("timers-int");
const { config } = h;

it("300 timers waiting to be due do not hold back a run's start and its tool's answer", async () => {
  const { a, tenantId } = h;
  const { messaging } = h.baton.manager.get<BusService>("bus");
  const dueAt = new Date(Date.now() + 10 * 60_000).toISOString();
  // Timers of runs that ended long ago (their deadlines, say): each waits, unacknowledged, until due.
  for (let i = 0; i < 300; i++) {
    await messaging.sendCommand("execution.timer", { executionId: 1_000_000 + i, tenantId, timerId: "deadline", dueAt }, `timer-test:${i}`);
  }
  const nc = await connect({ servers: config.natsUrl });
  try {
    const jsm = await jetstreamManager(nc);
    await waitFor("the timers to wait on the consumer", async () => {
      const info = await jsm.consumers.info(streamNames(config.prefix).commands, "executor");
      return info.num_ack_pending >= 300 && info.num_pending === 0 ? true : undefined;
    }, 20_000);
  } finally {
    await nc.close();
  }
  const wf = await createDefinition(a, `after-timers-${uniq()}`, { nodes: [{ id: "t", type: "tool", config: { tool: "echo" }, input: { v: "$.input.v" } }] });
  const id = await startExecution(a, wf, { v: 7 });
  const done = await waitForExecution(a, id, ["completed", "failed", "cancelled"], 15_000);
  expect({ status: done.status, output: done.output }).toEqual({ status: "completed", output: { v: 7 } });
}, 60_000);
