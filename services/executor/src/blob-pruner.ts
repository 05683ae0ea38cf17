/**
 * The blob pruner (docs/adr/008-blob-retention.md): every `intervalMs` it deletes blobs no
 * execution and no learned sequence uses any more whose last use is older than the grace
 * period, in batches of `batchSize` (`store.blobs.prune`), until a batch comes back short or
 * `maxBatches` were done.
 * Every executor replica runs one; a Postgres advisory lock lets one of them at a time do a
 * batch, and the others find nothing to do for that batch.
 *
 * With a retention (`retentionMs`, `BATON_EXECUTION_RETENTION_DAYS`; ADR 008, "Execution
 * retention"), each run first deletes finished runs older than it, the same way in batches of
 * `retentionBatchSize` (`store.executions.pruneFinished`, its own advisory lock), so the blobs
 * only they used lose their uses and are pruned a grace period later. A learned-sequence retention
 * (`learnedRetentionMs`, `BATON_LEARNED_RETENTION_DAYS`; ADR 008, "Learned-sequence retention")
 * deletes learned sequences older than it next (`store.learning.pruneOlder`), the same way.
 *
 * Never throws out of its timer: a failed part is logged (`BATON_EXECUTOR_EXECUTION_PRUNE_FAILED`,
 * `BATON_EXECUTOR_LEARNED_PRUNE_FAILED`, `BATON_EXECUTOR_BLOB_PRUNE_FAILED`), the other parts still
 * run, and the next interval tries again.
 */
import { defineError, errorMessage } from "@baton/errors";
import type { Store } from "@baton/store";
import type { Logger } from "@baton/telemetry";

/** A run of the pruner failed (the database is unreachable, …); the next interval runs again. */
export const BlobPruneFailed = defineError("BATON_EXECUTOR_BLOB_PRUNE_FAILED", (why: string) => `pruning unused blobs failed: ${why}`, { status: 503, retryable: true });

/** A run's deletion of finished executions failed; the blobs are still pruned and the next interval runs again. */
export const ExecutionPruneFailed = defineError("BATON_EXECUTOR_EXECUTION_PRUNE_FAILED", (why: string) => `deleting finished executions past their retention failed: ${why}`, { status: 503, retryable: true });

/** A run's deletion of learned sequences failed; the blobs are still pruned and the next interval runs again. */
export const LearnedPruneFailed = defineError("BATON_EXECUTOR_LEARNED_PRUNE_FAILED", (why: string) => `deleting learned sequences past their retention failed: ${why}`, { status: 503, retryable: true });

/** The first run comes at most this long after start. */
const FIRST_RUN_MAX_DELAY_MS = 60_000;

export interface BlobPrunerOptions {
  store: Pick<Store, "blobs" | "executions" | "learning">;
  logger: Logger;
  /** How often to prune; 0 = never (`start` does nothing). */
  intervalMs: number;
  /** A blob unused for this long (since it was last put, used, or found in use) is deleted. */
  graceMs: number;
  /** Blobs looked at per statement. @default 500 */
  batchSize?: number;
  /** Batches per run at most, so one run stays short; the rest waits for the next. @default 100 */
  maxBatches?: number;
  /**
   * Finished runs whose `completedAt` is older than this are deleted (with their sub-workflow
   * runs, journal, reviews and blob uses) at the start of each run; 0 = kept for ever. @default 0
   */
  retentionMs?: number;
  /** Executions deleted per statement at most. @default 200 */
  retentionBatchSize?: number;
  /**
   * Learned sequences recorded longer ago than this are deleted (with their uses of blobs) in
   * each run, after the executions and before the blobs; 0 = kept for ever. @default 0
   */
  learnedRetentionMs?: number;
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
  /** What the run deleted of finished executions first; absent when the retention is 0. */
  executions?: ExecutionPruneRun;
  /** What the run deleted of learned sequences next; absent when their retention is 0. */
  learned?: LearnedPruneRun;
}

/** The learned-sequence retention part of a run. */
export interface LearnedPruneRun {
  deleted: number;
  batches: number;
  /** False when another replica held the lock for the first batch. */
  ran: boolean;
  /** Recorded before this were deleted. */
  olderThan: Date;
}

/** The retention part of a run. */
export interface ExecutionPruneRun {
  /** Executions deleted, sub-workflow runs included. */
  deleted: number;
  /** Top-level runs deleted whole. */
  runs: number;
  batches: number;
  /** False when another replica held the lock for the first batch. */
  ran: boolean;
  /** Finished before this were deleted. */
  olderThan: Date;
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
  /** One run now (what the timer does: finished executions and learned sequences past their retention, then blobs); rejects when a batch fails. */
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

  const retentionMs = opts.retentionMs ?? 0;
  const retentionBatchSize = opts.retentionBatchSize ?? 200;
  const learnedRetentionMs = opts.learnedRetentionMs ?? 0;

  /**
   * Runs `batch` until `add` (which counts a batch into `run`) says it came back short, another
   * replica holds the lock, `maxBatches` were done or the pruner stops. `run.ran` is false when
   * the lock was held at the first batch.
   */
  async function inBatches<R extends { ran: boolean }, T extends { batches: number; ran: boolean }>(run: T, batch: () => Promise<R>, add: (r: R) => boolean): Promise<T> {
    while (run.batches < maxBatches && !stopped) {
      const r = await batch();
      run.batches++;
      if (!r.ran) {
        if (run.batches === 1) run.ran = false;
        break;
      }
      if (!add(r)) break;
    }
    return run;
  }

  /** Deletes finished runs past the retention, in batches; before the blobs, so theirs lose their uses. */
  async function pruneExecutions(): Promise<ExecutionPruneRun> {
    const olderThan = new Date(clock().getTime() - retentionMs);
    const run: ExecutionPruneRun = { deleted: 0, runs: 0, batches: 0, ran: true, olderThan };
    return inBatches(run, () => store.executions.pruneFinished({ olderThan, limit: retentionBatchSize }), (r) => {
      run.deleted += r.deleted;
      run.runs += r.runs;
      return r.deleted === retentionBatchSize;
    });
  }

  /** Deletes learned sequences past their retention, in batches; before the blobs, so theirs lose their uses. */
  async function pruneLearned(): Promise<LearnedPruneRun> {
    const olderThan = new Date(clock().getTime() - learnedRetentionMs);
    const run: LearnedPruneRun = { deleted: 0, batches: 0, ran: true, olderThan };
    return inBatches(run, () => store.learning.pruneOlder({ olderThan, limit: batchSize }), (r) => {
      run.deleted += r.deleted;
      return r.deleted === batchSize;
    });
  }

  async function pruneBlobs(): Promise<BlobPruneRun> {
    const olderThan = new Date(clock().getTime() - graceMs);
    const run: BlobPruneRun = { deleted: 0, inUse: 0, batches: 0, ran: true };
    return inBatches(run, () => store.blobs.prune({ olderThan, limit: batchSize }), (r) => {
      run.deleted += r.deleted;
      run.inUse += r.inUse;
      return r.deleted + r.inUse === batchSize;
    });
  }

  async function runOnce(): Promise<BlobPruneRun> {
    const executions = retentionMs > 0 ? await pruneExecutions() : undefined;
    const learned = learnedRetentionMs > 0 ? await pruneLearned() : undefined;
    const run = await pruneBlobs();
    return { ...run, ...(executions ? { executions } : {}), ...(learned ? { learned } : {}) };
  }

  async function runLogged(): Promise<void> {
    if (retentionMs > 0) {
      try {
        const r = await pruneExecutions();
        const fields = { deleted: r.deleted, runs: r.runs, batches: r.batches, completedBefore: r.olderThan.toISOString() };
        if (r.deleted > 0) logger.info("finished executions past their retention deleted", fields);
        else logger.debug("no finished executions past their retention", { ...fields, ran: r.ran });
      } catch (err) {
        const e = ExecutionPruneFailed(errorMessage(err), { cause: err });
        logger.warn("deleting finished executions past their retention failed; the next interval tries again", { code: e.code, error: e.message });
      }
    }
    if (learnedRetentionMs > 0) {
      try {
        const r = await pruneLearned();
        const fields = { deleted: r.deleted, batches: r.batches, recordedBefore: r.olderThan.toISOString() };
        if (r.deleted > 0) logger.info("learned sequences past their retention deleted", fields);
        else logger.debug("no learned sequences past their retention", { ...fields, ran: r.ran });
      } catch (err) {
        const e = LearnedPruneFailed(errorMessage(err), { cause: err });
        logger.warn("deleting learned sequences past their retention failed; the next interval tries again", { code: e.code, error: e.message });
      }
    }
    try {
      const r = await pruneBlobs();
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
