/**
 * Rules checked against the real NATS JetStream:
 * - connectBus creates the three streams with the layout of docs/dev/contracts.md
 *   (events: limits retention on `{p}.evt.>`, max age and duplicate window from the
 *   options; commands and tools: work queues on `{p}.cmd.>` / `{p}.tool.>`);
 * - ensureTopology is idempotent: twice in a row, and from several connections and calls
 *   at once, leaves exactly those streams;
 * - a process with other options updates the settings Baton owns;
 * - a stream of the right name but the wrong retention is refused with
 *   BATON_BUS_TOPOLOGY_FAILED rather than silently used;
 * - an unreachable server fails with BATON_BUS_CONNECT_FAILED and no open handles.
 */
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { hasCode } from "@baton/errors";
import { connectBus, streamNames } from "@baton/bus";
import type { Bus } from "@baton/bus";
import { openAdmin, openBus, randomPrefix } from "./int-helpers.ts";
import type { Admin } from "./int-helpers.ts";

const prefix = randomPrefix();
const conflictPrefix = randomPrefix();
let admin: Admin;
const buses: Bus[] = [];

beforeAll(async () => {
  admin = await openAdmin();
});

afterAll(async () => {
  await Promise.all(buses.map((b) => b.drain()));
  for (const name of Object.values(streamNames(conflictPrefix))) await admin.jsm.streams.delete(name).catch(() => false);
  await admin.cleanup(prefix);
});

describe("topology", () => {
  it("is created by connectBus, idempotently, also under concurrency", async () => {
    const [a, b] = await Promise.all([openBus(prefix), openBus(prefix)]);
    buses.push(a, b);
    await a.ensureTopology();
    await a.ensureTopology();
    await Promise.all([a.ensureTopology(), b.ensureTopology(), a.ensureTopology()]);

    expect(a.streams).toEqual(streamNames(prefix));
    const names: string[] = [];
    for await (const n of admin.jsm.streams.names()) if (n.startsWith(prefix.toUpperCase())) names.push(n);
    expect(names.sort()).toEqual(Object.values(streamNames(prefix)).sort());

    const events = await admin.jsm.streams.info(a.streams.events);
    expect(events.config).toMatchObject({ retention: "limits", max_age: 7 * 24 * 3600 * 1e9, duplicate_window: 120 * 1e9 });
    expect(events.config.subjects).toEqual([`${prefix}.evt.>`]);
    const commands = await admin.jsm.streams.info(a.streams.commands);
    expect(commands.config).toMatchObject({ retention: "workqueue", subjects: [`${prefix}.cmd.>`] });
    const tools = await admin.jsm.streams.info(a.streams.tools);
    expect(tools.config).toMatchObject({ retention: "workqueue", subjects: [`${prefix}.tool.>`] });
  });

  it("updates the settings Baton owns", async () => {
    const c = await openBus(prefix, { eventsMaxAgeMs: 3_600_000, duplicateWindowMs: 30_000 });
    buses.push(c);
    const events = await admin.jsm.streams.info(c.streams.events);
    expect(events.config).toMatchObject({ max_age: 3600 * 1e9, duplicate_window: 30 * 1e9 });
    const commands = await admin.jsm.streams.info(c.streams.commands);
    expect(commands.config.duplicate_window).toBe(30 * 1e9);
  });

  it("refuses a same-named stream with another retention", async () => {
    await admin.jsm.streams.add({ name: streamNames(conflictPrefix).commands, subjects: [`${conflictPrefix}.cmd.>`], retention: "limits" });
    let error: unknown;
    try {
      buses.push(await openBus(conflictPrefix));
    } catch (err) {
      error = err;
    }
    expect(hasCode(error, "BATON_BUS_TOPOLOGY_FAILED")).toBe(true);
    expect((error as Error).message).toContain("retention");
  });

  it("fails with BATON_BUS_CONNECT_FAILED when no server answers", async () => {
    let error: unknown;
    try {
      buses.push(await connectBus({ servers: "nats://127.0.0.1:1", name: "nobody" }));
    } catch (err) {
      error = err;
    }
    expect(hasCode(error, "BATON_BUS_CONNECT_FAILED")).toBe(true);
    expect((error as { status: number }).status).toBe(503);
  });
});
