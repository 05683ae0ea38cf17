/**
 * The blob pruner (docs/adr/008-blob-retention.md): every `intervalMs` it deletes blobs no
 * execution uses any more whose last use is older than the grace period, in batches of
 * `batchSize` (`store.blobs.prune`), until a batch comes back short or `maxBatches` were done.
 * Every executor replica runs one; a Postgres advisory lock lets one of them at a time do a
 * batch, and the others find nothing to do for that batch.
 *
 * Never throws out of its timer: a failed run is logged (`BATON_EXECUTOR_BLOB_PRUNE_FAILED`)
 * and the next interval tries again.
 */
import { defineError, errorMessage } from "@baton/errors";
import type { Store } from "@baton/store";
import type { Logger } from "@baton/telemetry";

/** A run of the pruner failed (the database is unreachable, …); the next interval runs again. */
export const BlobPruneFailed = defineError("BATON_EXECUTOR_BLOB_PRUNE_FAILED", (why: string) => `pruning unused blobs failed: ${why}`, { status: 503, retryable: true });

/** The first run comes at most this long after start. */
const FIRST_RUN_MAX_DELAY_MS = 60_000;

export interface BlobPrunerOptions {
  store: Pick<Store, "blobs">;
  logger: Logger;
  /** How often to prune; 0 = never (`start` does nothing). */
  intervalMs: number;
  /** A blob unused for this long (since it was last put, used, or found in use) is deleted. */
  graceMs: number;
  /** Blobs looked at per statement. @default 500 */
  batchSize?: number;
  /** Batches per run at most, so one run stays short; the rest waits for the next. @default 100 */
  maxBatches?: number;
  /** @default () => new Date() */
  clock?: () => Date;
}

/** What one run did. */
export interface BlobPruneRun {
  deleted: number;
  inUse: number;
  batches: number;
  /** False when another replica held the lock for the first batch. */
  ran: boolean;
}

export interface BlobPruner {
  /**
   * Starts the timer (unref'd: it never keeps the process alive): a first run after the interval
   * or a minute, whichever is shorter, then one an interval after each run ends. Nothing when
   * the interval is 0.
   */
  start(): void;
  /** Clears the timer and waits for a run in progress. */
  stop(): Promise<void>;
  /** One run now (also what the timer does); rejects when a batch fails. */
  runOnce(): Promise<BlobPruneRun>;
}

export function createBlobPruner(opts: BlobPrunerOptions): BlobPruner {
  const { store, logger, intervalMs, graceMs } = opts;
  const batchSize = opts.batchSize ?? 500;
  const maxBatches = opts.maxBatches ?? 100;
  const clock = opts.clock ?? (() => new Date());
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<unknown> | undefined;
  let stopped = false;

  async function runOnce(): Promise<BlobPruneRun> {
    const olderThan = new Date(clock().getTime() - graceMs);
    const run: BlobPruneRun = { deleted: 0, inUse: 0, batches: 0, ran: true };
    while (run.batches < maxBatches && !stopped) {
      const r = await store.blobs.prune({ olderThan, limit: batchSize });
      run.batches++;
      if (!r.ran) {
        if (run.batches === 1) run.ran = false;
        break;
      }
      run.deleted += r.deleted;
      run.inUse += r.inUse;
      if (r.deleted + r.inUse < batchSize) break;
    }
    return run;
  }

  async function runLogged(): Promise<void> {
    try {
      const r = await runOnce();
      if (r.deleted > 0) logger.info("unused blobs pruned", { deleted: r.deleted, stillUsed: r.inUse, batches: r.batches });
      else logger.debug("no unused blobs to prune", { stillUsed: r.inUse, ran: r.ran });
    } catch (err) {
      const e = BlobPruneFailed(errorMessage(err), { cause: err });
      logger.warn("pruning unused blobs failed; the next interval tries again", { code: e.code, error: e.message });
    }
  }

  /** The next run in `ms`; runs never overlap (the next is scheduled when one ends). */
  function schedule(ms: number): void {
    timer = setTimeout(() => {
      running = runLogged().finally(() => {
        running = undefined;
        if (!stopped) schedule(intervalMs);
      });
    }, ms);
    timer.unref();
  }

  return {
    start() {
      if (intervalMs <= 0 || timer) return;
      stopped = false;
      // The first run soon after start, not a whole interval later: replicas that restart more
      // often than the interval would otherwise never prune.
      schedule(Math.min(intervalMs, FIRST_RUN_MAX_DELAY_MS));
    },
    async stop() {
      stopped = true;
      clearTimeout(timer);
      timer = undefined;
      await running;
    },
    runOnce,
  };
}
