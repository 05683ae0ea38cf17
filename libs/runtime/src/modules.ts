/**
 * Modules: every part of Baton (connections, services, workers) is a module with a
 * name, its dependencies and a start / stop lifecycle. One map of definitions
 * holds the whole dependency graph; a target names the modules a process runs and
 * their dependencies come along. If a module fails, the manager reports it so the
 * process can stop.
 *
 * States: new → starting → running → stopping → terminated, or failed.
 */
import { defineError } from "@baton/errors";

export const ModuleUnknown = defineError("BATON_RUNTIME_UNKNOWN_MODULE", (name: string, known: string) => `unknown module "${name}" (known: ${known})`, { status: 400 });
export const ModuleCycle = defineError("BATON_RUNTIME_MODULE_CYCLE", (path: string) => `module dependency cycle: ${path}`);
export const ModuleStartFailed = defineError("BATON_RUNTIME_START_FAILED", (name: string, why: string) => `module "${name}" failed to start: ${why}`);

export type ModuleState = "new" | "starting" | "running" | "stopping" | "terminated" | "failed";

/** A running piece of the system. */
export interface Service {
  /** Called after every dependency is running. */
  start?(): Promise<void>;
  /** Stops taking new work, finishes what is in flight, releases resources. */
  stop?(): Promise<void>;
  /** Whether the service can take work now; defaults to true while running. */
  ready?(): boolean;
}

export interface ModuleDefinition<Ctx> {
  name: string;
  deps: readonly string[];
  /** Builds the service; can read the services of its dependencies from `get`. */
  init(ctx: Ctx, get: <T>(name: string) => T): Promise<Service> | Service;
  /** Not started unless a target or another module needs it. @default false */
  internal?: boolean;
}

export interface ModuleManager {
  /** Starts the targets and their dependencies in dependency order. */
  start(): Promise<void>;
  /** Stops every started module in reverse order; safe to call twice. */
  stop(): Promise<void>;
  /**
   * Each module's state; a running module that cannot take work now (its `ready()` is false:
   * the bus or Redis connection down, Postgres out of reach) is `unavailable`, so a 503 from
   * /readyz says which.
   */
  states(): Record<string, ModuleState | "unavailable">;
  ready(): boolean;
  /** The service a module built (after start). */
  get<T>(name: string): T;
  /** Marks a running module failed (e.g. its consumer died) and notifies listeners. */
  fail(name: string, err: unknown): void;
  onFailure(listener: (name: string, err: unknown) => void): void;
  /** The modules this manager runs, in start order. */
  readonly order: readonly string[];
}

/** Orders the targets and their transitive dependencies so dependencies come first. */
export function resolveOrder<Ctx>(defs: readonly ModuleDefinition<Ctx>[], targets: readonly string[]): string[] {
  const byName = new Map(defs.map((d) => [d.name, d]));
  const order: string[] = [];
  const mark = new Map<string, "visiting" | "done">();
  const visit = (name: string, trail: string[]): void => {
    const def = byName.get(name);
    if (!def) throw ModuleUnknown(name, [...byName.keys()].join(", "));
    const m = mark.get(name);
    if (m === "done") return;
    if (m === "visiting") throw ModuleCycle([...trail, name].join(" → "));
    mark.set(name, "visiting");
    for (const dep of def.deps) visit(dep, [...trail, name]);
    mark.set(name, "done");
    order.push(name);
  };
  for (const t of targets) visit(t, []);
  return order;
}

export function createModuleManager<Ctx>(defs: readonly ModuleDefinition<Ctx>[], targets: readonly string[], ctx: Ctx): ModuleManager {
  const byName = new Map(defs.map((d) => [d.name, d]));
  const order = resolveOrder(defs, targets);
  const state = new Map<string, ModuleState>(order.map((n) => [n, "new"]));
  const services = new Map<string, Service>();
  const listeners: ((name: string, err: unknown) => void)[] = [];
  let stopping: Promise<void> | undefined;

  const get = <T>(name: string): T => {
    const s = services.get(name);
    if (!s) throw new Error(`module "${name}" is not running in this process`);
    return s as T;
  };

  const serviceReady = (name: string): boolean => services.get(name)?.ready?.() ?? true;

  const fail = (name: string, err: unknown): void => {
    if (state.get(name) === "failed") return;
    state.set(name, "failed");
    for (const l of listeners) l(name, err);
  };

  return {
    order,
    get,
    fail,
    onFailure: (l) => void listeners.push(l),
    states: () => Object.fromEntries([...state].map(([n, st]) => [n, st === "running" && !serviceReady(n) ? "unavailable" : st])),
    ready: () => order.every((n) => state.get(n) === "running" && serviceReady(n)),
    async start() {
      for (const name of order) {
        const def = byName.get(name)!;
        state.set(name, "starting");
        try {
          const svc = await def.init(ctx, get);
          services.set(name, svc);
          await svc.start?.();
          state.set(name, "running");
        } catch (err) {
          state.set(name, "failed");
          throw ModuleStartFailed(name, err instanceof Error ? err.message : String(err), { cause: err });
        }
      }
    },
    stop() {
      stopping ??= (async () => {
        const errors: unknown[] = [];
        for (const name of [...order].reverse()) {
          const svc = services.get(name);
          const st = state.get(name);
          if (!svc || st === "terminated" || st === "new") continue;
          if (st !== "failed") state.set(name, "stopping");
          try {
            await svc.stop?.();
            if (st !== "failed") state.set(name, "terminated");
          } catch (err) {
            state.set(name, "failed");
            errors.push(err);
          }
        }
        if (errors.length > 0) throw new AggregateError(errors, "some modules failed to stop");
      })();
      return stopping;
    },
  };
}
