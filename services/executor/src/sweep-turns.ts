/**
 * Whose turn it is to run the periodic recovery sweep, so that executors do not all sweep.
 *
 * The sweep reads the checkpoint of every live run (and, for each call still out, the worker's
 * answer record). Every executor used to do it every interval; with many executors and many
 * runs paused for people (a review can wait for days) that is executors × runs reads a minute.
 * Time is cut into windows of the sweep's interval (by each executor's clock). In a window:
 *
 * 1. when a sweep of the window went through (`done.{every}.{window}`), nobody sweeps again;
 * 2. the first executor to claim the window (`claim.{every}.{window}`, created only when absent)
 *    sweeps, and records `done` when every run was looked at;
 * 3. another executor sweeps too when the window before has no `done`: a claimant that fails, or
 *    is alive but cannot sweep, holds up one window, not every one.
 *
 * A sweep is idempotent (its commands carry per-window message ids), so two in one window
 * cost reads, not correctness; the first window after a start may see several. When NATS cannot
 * answer, the executor sweeps (recovery matters more than the load). The records live in the KV
 * bucket `{prefix}_recovery_sweeps` for an hour.
 */
import type { Bus } from "@baton/bus";

/** The KV bucket of the sweep's claims and completions. */
export const SWEEPS_BUCKET = "recovery_sweeps";
const SWEEPS_TTL_MS = 3_600_000;

export interface SweepTurn {
  /** Whether this executor sweeps now. */
  sweep: boolean;
  /** The window, to pass to {@link SweepTurns.done} once the sweep went through. */
  window: number;
}

export interface SweepTurns {
  /** Whether this executor sweeps in the window that holds `nowMs`. Never rejects: on an error it says sweep. */
  take(nowMs: number): Promise<SweepTurn>;
  /** Records that the window's sweep looked at every run. */
  done(window: number): Promise<void>;
}

/**
 * @param everyMs the sweep's interval (the window's length; executors with different intervals
 *   keep apart records)
 * @param who this executor, written into its claims (for whoever inspects the bucket)
 * @param onError told when NATS could not answer (the executor then sweeps)
 */
export function sweepTurns(bus: Bus, everyMs: number, who: string, onError: (err: unknown) => void): SweepTurns {
  let opened: Promise<unknown> | undefined;
  // kvGet/kvCreate never create the bucket: open it (creating it) once.
  const open = (): Promise<unknown> =>
    (opened ??= bus.kv(SWEEPS_BUCKET, { ttlMs: SWEEPS_TTL_MS }).catch((err: unknown) => {
      opened = undefined;
      throw err;
    }));
  const key = (kind: "claim" | "done", window: number): string => `${kind}.${everyMs}.${window}`;
  const mark = new TextEncoder().encode(who);
  return {
    async take(nowMs) {
      const window = Math.floor(nowMs / everyMs);
      try {
        await open();
        if ((await bus.kvGet(SWEEPS_BUCKET, key("done", window))) !== null) return { sweep: false, window };
        if (await bus.kvCreate(SWEEPS_BUCKET, key("claim", window), mark)) return { sweep: true, window };
        return { sweep: (await bus.kvGet(SWEEPS_BUCKET, key("done", window - 1))) === null, window };
      } catch (err) {
        onError(err);
        return { sweep: true, window };
      }
    },
    async done(window) {
      try {
        await open();
        await bus.kvCreate(SWEEPS_BUCKET, key("done", window), mark);
      } catch (err) {
        onError(err);
      }
    },
  };
}
