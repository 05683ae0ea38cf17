/**
 * Rules checked: a target brings its dependencies, started first and stopped
 * last; unknown modules and cycles are refused; a module that fails to start
 * fails the start with its name; readiness is true only when all run and can take
 * work, and a running module that cannot is reported `unavailable`; stop is idempotent.
 */
import { describe, expect, it } from "@jest/globals";
import { createModuleManager, resolveOrder } from "./index.ts";
import type { ModuleDefinition } from "./index.ts";

/** Whether the bus module's connection is up (its `ready()`). */
let busUp = true;

function defs(log: string[], failing = ""): ModuleDefinition<null>[] {
  const mk = (name: string, deps: string[]): ModuleDefinition<null> => ({
    name,
    deps,
    init: () => ({
      start: async () => {
        if (name === failing) throw new Error("boom");
        log.push(`start ${name}`);
      },
      stop: async () => void log.push(`stop ${name}`),
      ...(name === "bus" ? { ready: () => busUp } : {}),
    }),
  });
  return [mk("bus", []), mk("store", []), mk("executor", ["bus", "store"]), mk("gateway", ["bus", "store"]), mk("worker", ["bus"])];
}

describe("modules", () => {
  it("orders dependencies first and only what the target needs", () => {
    expect(resolveOrder(defs([]), ["worker"])).toEqual(["bus", "worker"]);
    expect(resolveOrder(defs([]), ["gateway", "executor"])).toEqual(["bus", "store", "gateway", "executor"]);
  });
  it("refuses unknown modules and cycles", () => {
    expect(() => resolveOrder(defs([]), ["nope"])).toThrow(expect.objectContaining({ code: "BATON_RUNTIME_UNKNOWN_MODULE" }));
    const cyc: ModuleDefinition<null>[] = [{ name: "a", deps: ["b"], init: () => ({}) }, { name: "b", deps: ["a"], init: () => ({}) }];
    expect(() => resolveOrder(cyc, ["a"])).toThrow(expect.objectContaining({ code: "BATON_RUNTIME_MODULE_CYCLE" }));
  });
  it("starts in order, is ready, stops in reverse once", async () => {
    const log: string[] = [];
    const m = createModuleManager(defs(log), ["executor"], null);
    expect(m.ready()).toBe(false);
    await m.start();
    expect(m.ready()).toBe(true);
    expect(m.states()).toEqual({ bus: "running", store: "running", executor: "running" });
    // A running module whose connection is down is named, and the process is not ready.
    busUp = false;
    expect(m.ready()).toBe(false);
    expect(m.states()).toEqual({ bus: "unavailable", store: "running", executor: "running" });
    busUp = true;
    expect(m.ready()).toBe(true);
    await Promise.all([m.stop(), m.stop()]);
    expect(log).toEqual(["start bus", "start store", "start executor", "stop executor", "stop store", "stop bus"]);
    expect(m.states().bus).toBe("terminated");
  });
  it("names the module that failed to start and reports runtime failures", async () => {
    const log: string[] = [];
    const m = createModuleManager(defs(log, "store"), ["executor"], null);
    await expect(m.start()).rejects.toMatchObject({ code: "BATON_RUNTIME_START_FAILED", message: expect.stringContaining('"store"') });
    expect(m.states().store).toBe("failed");
    await m.stop();
    // A module whose start failed is still stopped, to release what its init took.
    expect(log).toEqual(["start bus", "stop store", "stop bus"]);
    const m2 = createModuleManager(defs([]), ["worker"], null);
    await m2.start();
    const seen: string[] = [];
    m2.onFailure((n) => seen.push(n));
    m2.fail("worker", new Error("consumer died"));
    expect(seen).toEqual(["worker"]);
    expect(m2.ready()).toBe(false);
    await m2.stop();
  });
});
