/**
 * Rules of admission (`executions.admit`, `cancelQueued`, `listStartable`, `queuedTenants`):
 * - admit moves a queued row to running (startedAt set) once: a second admit says `started`,
 *   an ended row says `finished`, another tenant's row `missing`;
 * - with a cap, many admits racing on separate connections admit exactly the cap; rows
 *   `running` or `paused` of the tenant's top-level runs hold slots, children and other
 *   tenants' rows do not; a turned-away row stays queued (`busy`); older queued top-level rows
 *   that could start hold their place, so a newer row does not take their slot; a row past its
 *   deadline is admitted whatever the cap and holds no place;
 * - the `checkpoint` given is kept on the row also when it must wait, and never replaced;
 * - cancelQueued cancels a queued row only, and an admit after it finds it `finished`;
 *   an admitted row is not cancelled this way;
 * - listStartable gives a tenant's oldest queued top-level rows, as many as the cap leaves
 *   free, forks only once their checkpoint is kept; queuedTenants lists tenants having some.
 */
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { openTestStore, type TestStore } from "./testing.ts";
import type { Store, WorkflowRecord } from "./types.ts";

let t: TestStore;
let store: Store;
/** Each tenant's workflow. */
const workflows = new Map<string, WorkflowRecord>();

beforeAll(async () => {
  t = await openTestStore({ prefix: "admission" });
  store = t.store;
});
afterAll(() => t?.dispose());

async function newTenant(name: string): Promise<string> {
  const id = (await store.tenants.create(name)).id;
  workflows.set(id, await store.workflows.create(id, { name: "Flow", definition: { nodes: [] } }));
  return id;
}
const wf = (tenant: string): WorkflowRecord => workflows.get(tenant)!;
const queued = (tenant: string, extra: Record<string, unknown> = {}) => store.executions.create(tenant, { workflowId: wf(tenant).id, workflowVersion: 1, input: {}, ...extra });
const admit = (tenant: string, id: number, cap = 0, checkpoint?: Record<string, never> | { forkStart: { v: number } }) =>
  store.executions.admit({ id, tenantId: tenant, cap, startedAt: new Date(), ...(checkpoint ? { checkpoint } : {}) });

/** A new tenant whose only slot (cap 1) a running row, `holder`, holds. */
async function tenantAtCap(name: string): Promise<{ tenant: string; holder: { id: number } }> {
  const tenant = await newTenant(name);
  const holder = await queued(tenant);
  expect((await admit(tenant, holder.id, 1)).outcome).toBe("admitted");
  return { tenant, holder };
}

describe("executions.admit", () => {
  it("admits a queued row once; ended, foreign and unknown rows are not admitted", async () => {
    const tenant = await newTenant("A");
    const other = await newTenant("B");
    const row = await queued(tenant);
    const first = await admit(tenant, row.id);
    expect(first.outcome).toBe("admitted");
    expect(first.row).toMatchObject({ id: row.id, status: "running" });
    expect(first.row!.startedAt).toBeInstanceOf(Date);
    expect((await admit(tenant, row.id)).outcome).toBe("started");
    expect((await admit(other, row.id)).outcome).toBe("missing");
    expect((await admit(tenant, 2_000_000_000)).outcome).toBe("missing");
    await store.executions.update(row.id, { status: "completed" });
    expect((await admit(tenant, row.id)).outcome).toBe("finished");
  });

  it("with a cap, admits racing on separate connections take exactly the free slots", async () => {
    const tenant = await newTenant("C");
    const other = await newTenant("D");
    // Held slots: one running and one paused top-level run. Not counted: a running child, another tenant's run.
    const held = await Promise.all([queued(tenant), queued(tenant)]);
    await store.executions.update(held[0].id, { status: "running" });
    await store.executions.update(held[1].id, { status: "paused" });
    const child = await store.executions.createChild({ tenantId: tenant, parentExecutionId: held[0].id, parentNodeId: "n", childKey: "1", agentWorkflowId: wf(tenant).id, workflowVersion: 1, input: {} });
    expect((await admit(tenant, child.row.id)).outcome).toBe("admitted");
    const theirs = await queued(other);
    expect((await admit(other, theirs.id)).outcome).toBe("admitted");

    const rows = await Promise.all(Array.from({ length: 12 }, () => queued(tenant)));
    const outcomes = await Promise.all(rows.map((r) => admit(tenant, r.id, 5)));
    expect(outcomes.filter((o) => o.outcome === "admitted")).toHaveLength(3);
    expect(outcomes.filter((o) => o.outcome === "busy")).toHaveLength(9);
    for (const o of outcomes.filter((x) => x.outcome === "busy")) expect(o.row).toMatchObject({ status: "queued", startedAt: null });
  });

  it("with a cap, a newer row does not take the slot an older queued row waits for", async () => {
    const tenant = await newTenant("E");
    const older = await queued(tenant);
    const newer = await queued(tenant);
    // One slot free; the older run's start is still on its way (woken, or sent by the gateway).
    expect((await admit(tenant, newer.id, 1)).outcome).toBe("busy");
    expect((await admit(tenant, older.id, 1)).outcome).toBe("admitted");
    await store.executions.update(older.id, { status: "completed" });
    expect((await admit(tenant, newer.id, 1)).outcome).toBe("admitted");
    // A fork that cannot start yet (its starting state not kept) holds no place.
    const src = await queued(tenant);
    await store.executions.update(src.id, { status: "completed" });
    const fork = await queued(tenant, { forkedFromExecutionId: src.id, forkedFromVersion: 1 });
    const after = await queued(tenant);
    await store.executions.update(newer.id, { status: "completed" });
    expect(fork.id).toBeLessThan(after.id);
    expect((await admit(tenant, after.id, 1)).outcome).toBe("admitted");
  });

  it("with a cap, a row whose deadline has passed is admitted whatever the cap, and holds no place in the line", async () => {
    const { tenant } = await tenantAtCap("F");
    const late = await queued(tenant, { deadlineAt: new Date(Date.now() - 1_000) });
    const inTime = await queued(tenant, { deadlineAt: new Date(Date.now() + 60_000) });
    // The cap is reached: a run with time left waits; one past its deadline goes through (its start step fails it).
    expect((await admit(tenant, inTime.id, 1)).outcome).toBe("busy");
    expect(await admit(tenant, late.id, 1)).toMatchObject({ outcome: "admitted", row: { status: "running" } });

    // A waiting row past its deadline does not keep a newer row from a free slot.
    const tenant2 = await newTenant("G");
    const waitingLate = await queued(tenant2, { deadlineAt: new Date(Date.now() - 1_000) });
    const fresh = await queued(tenant2);
    expect(waitingLate.id).toBeLessThan(fresh.id);
    expect((await admit(tenant2, fresh.id, 1)).outcome).toBe("admitted");
  });

  it("keeps the checkpoint given, also when the row must wait, and never replaces it", async () => {
    const { tenant, holder } = await tenantAtCap("E");
    const row = await queued(tenant);
    const waiting = await admit(tenant, row.id, 1, { forkStart: { v: 1 } });
    expect(waiting.outcome).toBe("busy");
    expect(waiting.row!.checkpoint).toEqual({ forkStart: { v: 1 } });
    await store.executions.update(holder.id, { status: "completed" });
    const later = await admit(tenant, row.id, 1, { forkStart: { v: 2 } });
    expect(later.outcome).toBe("admitted");
    expect(later.row!.checkpoint).toEqual({ forkStart: { v: 1 } });
  });
});

describe("executions.cancelQueued", () => {
  it("cancels a queued row only; a start after it is not admitted", async () => {
    const tenant = await newTenant("F");
    const row = await queued(tenant);
    expect(await store.executions.cancelQueued(row.id, "someone-else", new Date())).toBeNull();
    const at = new Date();
    const cancelled = await store.executions.cancelQueued(row.id, tenant, at, "not needed");
    expect(cancelled).toMatchObject({ id: row.id, status: "cancelled", startedAt: null, completedAt: at, error: "BATON_CANCELLED: not needed" });
    expect(await store.executions.cancelQueued(row.id, tenant, new Date())).toBeNull();
    expect((await admit(tenant, row.id)).outcome).toBe("finished");

    const started = await queued(tenant);
    await admit(tenant, started.id);
    expect(await store.executions.cancelQueued(started.id, tenant, new Date())).toBeNull();
    expect((await store.executions.getById(started.id))!.status).toBe("running");
  });
});

describe("executions.listStartable and queuedTenants", () => {
  it("lists the oldest waiting top-level rows, as many as the cap leaves free; forks once their start is kept", async () => {
    const tenant = await newTenant("G");
    const running = await queued(tenant);
    await admit(tenant, running.id);
    const a = await queued(tenant);
    const fork = await queued(tenant, { forkedFromExecutionId: running.id, forkedFromVersion: 1 });
    const b = await queued(tenant);
    await store.executions.createChild({ tenantId: tenant, parentExecutionId: running.id, parentNodeId: "n", childKey: "1", agentWorkflowId: wf(tenant).id, workflowVersion: 1, input: {} });

    expect((await store.executions.listStartable({ tenantId: tenant, cap: 0 })).map((r) => r.id)).toEqual([a.id, b.id]);
    expect((await store.executions.listStartable({ tenantId: tenant, cap: 2 })).map((r) => r.id)).toEqual([a.id]);
    expect(await store.executions.listStartable({ tenantId: tenant, cap: 1 })).toEqual([]);
    expect(await store.executions.listStartable({ tenantId: tenant, cap: 0, idleMs: 60_000 })).toEqual([]);
    expect((await admit(tenant, fork.id, 1, { forkStart: { v: 1 } })).outcome).toBe("busy");
    expect((await store.executions.listStartable({ tenantId: tenant, cap: 3 })).map((r) => r.id)).toEqual([a.id, fork.id]);
    expect(await store.executions.queuedTenants()).toContain(tenant);
    expect(await store.executions.queuedTenants(60_000)).not.toContain(tenant);
  });
});
