/**
 * A second `POST …/cancel` while the first is still to be carried out, through the real
 * services: the gateway and the review service in one Baton, the executor in another, stopped
 * while the cancels come, so that the run is neither `cancelled` nor about to be when the second
 * arrives (the tenant may run one execution at a time, so a second run waits `queued`).
 * Rules checked:
 * - both cancels answer 202 with the run's status; the commands stream holds one cancel for the
 *   run (the second has the first's message id); one sent again after the stream's duplicate
 *   window (another message id) is a command of its own, and the executor gets both;
 * - when the executor is back, a run waiting `queued` for a slot and a run `paused` at a review
 *   are each cancelled once: one `execution.cancelled`, with the first cancel's reason, and no
 *   event of the run after the last; the queued run never starts; the paused run's review node
 *   fails once and its review is closed once (one `review.resolved`, decision `cancelled`); the
 *   row is `cancelled`;
 * - a cancel after that answers 409 BATON_GATEWAY_EXECUTION_FINISHED.
 */
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import type { NatsConnection } from "@nats-io/transport-node";
import { loadConfig } from "@baton/config";
import { streamNames } from "@baton/contracts";
import { createLogger } from "@baton/telemetry";
import type { BusService, StoreService } from "../bin/modules.ts";
import { startBaton } from "../bin/start.ts";
import type { BatonHandle } from "../bin/start.ts";
import { api, isolatedConfig, removeIsolated, waitFor } from "./helpers.ts";
import type { Api } from "./helpers.ts";
import { createDefinition, getExecution, startExecution, uniq, waitForExecution } from "./workflows.ts";

const { config, env } = isolatedConfig({ BATON_TENANT_MAX_RUNNING: "1" });
let front: BatonHandle | undefined;
let executor: BatonHandle | undefined;
let nc: NatsConnection | undefined;
let a: Api;
let tenantId: string;

const startExecutor = async (): Promise<void> => {
  executor = await startBaton({ config: loadConfig({ ...env, BATON_TARGET: "executor" }), logger: createLogger("cancel-twice-executor", "warn"), healthServer: false });
};
const stopExecutor = async (): Promise<void> => {
  await executor?.stop();
  executor = undefined;
};

beforeAll(async () => {
  front = await startBaton({ config: loadConfig({ ...env, BATON_TARGET: "gateway,review" }), logger: createLogger("cancel-twice", "warn") });
  await startExecutor();
  a = api(front.gatewayPort!, config.apiKey!);
  nc = await connect({ servers: config.natsUrl });
  tenantId = (await front.manager.get<StoreService>("store").store.tenants.resolveApiKey(config.apiKey!))!.tenantId;
}, 60_000);

afterAll(async () => {
  await stopExecutor();
  await front?.stop();
  await nc?.close();
  await removeIsolated(config);
});

/** The commands waiting in the commands stream (a work queue: a handled command leaves it), by subject. */
async function waitingCommands(): Promise<Record<string, number>> {
  const jsm = await jetstreamManager(nc!);
  const info = await jsm.streams.info(streamNames(config.prefix).commands, { subjects_filter: ">" });
  return { ...(info.state.subjects ?? {}) };
}
const cancelSubject = `${config.prefix}.cmd.execution.cancel`;
/** Waits until the executor has handled every command sent so far. */
const commandsHandled = (): Promise<true> => waitFor("every command handled", async () => (Object.keys(await waitingCommands()).length === 0 ? true : undefined));

/** Every event of the run, `type` with the node, reason or decision that tells them apart, in stream order, read once the bus has been quiet for `quietMs`. */
async function eventsOf(id: number, quietMs = 750): Promise<string[]> {
  const { bus, messaging } = front!.manager.get<BusService>("bus");
  const seen: string[] = [];
  let last = Date.now();
  const ac = new AbortController();
  const replay = bus.replay(messaging.subjects.executionEventsFilter(tenantId, id), { signal: ac.signal }, (msg) => {
    const type = messaging.subjects.parseEvent(msg.subject)?.type ?? msg.subject;
    // The filter is by scope id: a workflow's events whose id is the run's match it too.
    if (!["execution.", "node.", "review."].some((entity) => type.startsWith(entity))) return;
    const d = JSON.parse(new TextDecoder().decode(msg.data)) as Record<string, unknown>;
    const tell = [d.node_id ?? d.nodeId, d.reason, d.decision].filter((x) => typeof x === "string" && x !== "");
    seen.push([type, ...tell].join(":"));
    last = Date.now();
  });
  await waitFor("the run's events to settle", () => Promise.resolve(Date.now() - last >= quietMs ? true : undefined));
  ac.abort();
  await replay;
  return seen;
}

const cancel = (id: number, reason: string) => a.call<{ id: number; status: string; code?: string }>("POST", `/api/agent-workflow-executions/${id}/cancel`, { reason });

/** The second cancel, as the gateway would send it past the duplicate window: the same command under another message id. */
async function cancelAfterWindow(id: number, reason: string): Promise<void> {
  const { messaging } = front!.manager.get<BusService>("bus");
  const sent = await messaging.sendCommand("execution.cancel", { tenantId, executionId: id, reason }, `cancel:${id}:after-the-window`);
  expect(sent.duplicate).toBe(false);
}

/** Sends two cancels while no executor runs, then one past the window, then lets an executor carry them out. */
async function cancelTwiceWhileUnhandled(id: number, status: string): Promise<void> {
  await commandsHandled();
  await stopExecutor();
  const first = await cancel(id, "first");
  const second = await cancel(id, "second");
  expect([first.status, first.body.status, second.status, second.body.status]).toEqual([202, status, 202, status]);
  expect((await waitingCommands())[cancelSubject]).toBe(1);
  await cancelAfterWindow(id, "after the window");
  expect((await waitingCommands())[cancelSubject]).toBe(2);
  await startExecutor();
  expect((await waitForExecution(a, id, ["completed", "failed", "cancelled"], 30_000)).status).toBe("cancelled");
  await commandsHandled();
}

describe("a second cancel while the first is still to be carried out", () => {
  it("is accepted and changes nothing: a queued run and a paused run are each cancelled once, with the first cancel's reason", async () => {
    const wf = await createDefinition(a, `cancel-twice-${uniq()}`, { nodes: [{ id: "check", type: "humanReview", config: { reason: "wait" } }] });
    const paused = await startExecution(a, wf);
    expect((await waitForExecution(a, paused, ["paused", "completed", "failed", "cancelled"])).status).toBe("paused");
    await waitFor("the review recorded", async () => {
      const r = await a.call<{ items: { status: string }[] }>("GET", `/api/reviews?executionId=${paused}`);
      return r.body.items[0]?.status === "pending" ? true : undefined;
    });
    // The paused run holds the tenant's one slot: this one waits queued.
    const queued = await startExecution(a, wf);
    await commandsHandled();
    expect((await getExecution(a, queued)).status).toBe("queued");

    await cancelTwiceWhileUnhandled(queued, "queued");
    const q = await getExecution(a, queued);
    // The row keeps the first cancel's reason too.
    expect({ status: q.status, startedAt: q.startedAt, error: q.error }).toEqual({ status: "cancelled", startedAt: null, error: "BATON_CANCELLED: first" });
    expect(await eventsOf(queued)).toEqual(["execution.cancelled:first"]);

    await cancelTwiceWhileUnhandled(paused, "paused");
    await waitFor("the review closed", async () => {
      const r = await a.call<{ items: { status: string }[] }>("GET", `/api/reviews?executionId=${paused}`);
      return r.body.items[0]?.status === "rejected" ? true : undefined;
    });
    const events = await eventsOf(paused);
    const count = (prefix: string) => events.filter((e) => e.startsWith(prefix)).length;
    expect({ cancelled: count("execution.cancelled"), failed: count("node.failed:check"), created: count("review.created"), resolved: count("review.resolved") })
      .toEqual({ cancelled: 1, failed: 1, created: 1, resolved: 1 });
    expect(events).toContain("execution.cancelled:first");
    expect(events).toContain("review.resolved:check:cancelled");
    expect((await getExecution(a, paused)).error).toBe("BATON_CANCELLED: first");
    // Only the review service's answers to it come after the run's last event.
    expect(events.slice(events.indexOf("execution.cancelled:first") + 1).every((e) => e.startsWith("review."))).toBe(true);
    const reviews = (await a.call<{ items: { status: string; decision: { decision: string } }[] }>("GET", `/api/reviews?executionId=${paused}`)).body.items;
    expect(reviews.map((r) => [r.status, r.decision.decision])).toEqual([["rejected", "cancelled"]]);

    for (const id of [queued, paused]) {
      const again = await cancel(id, "once more");
      expect([again.status, again.body.code]).toEqual([409, "BATON_GATEWAY_EXECUTION_FINISHED"]);
    }
  }, 90_000);
});
