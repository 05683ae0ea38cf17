/**
 * The checkpoint contract. Every backend passes the shared conformance suite in
 * `@baton/checkpoints/testing`.
 */

/** The hot state of one execution, as last written. */
export interface Checkpoint<S = unknown> {
  executionId: number;
  /** 1 for the first write, +1 for each write after it. */
  version: number;
  state: S;
  /** When this version was written (ISO 8601, the store's clock). */
  updatedAt: string;
}

/** Options of {@link CheckpointStore.history}. */
export interface HistoryOptions {
  /**
   * How many versions to return, newest first.
   * @default the store's history limit
   */
  limit?: number;
  /**
   * The states as rebuilt, sharing unchanged parts with each other, not copied: for a caller
   * that only reads them (a list of summaries). Copying each version's whole state cost most
   * of a list of large states.
   * @default false
   */
  readOnly?: boolean;
}

/**
 * Versioned, compare-and-set storage of execution checkpoints.
 *
 * The version is the fence that keeps a stale executor (one that lost its lease,
 * or is replaying an old message) from overwriting a newer state: every writer
 * states which version it read, and only one writer per version succeeds.
 */
export interface CheckpointStore<S = unknown> {
  /** The latest checkpoint, or `null` when none exists. */
  get(executionId: number): Promise<Checkpoint<S> | null>;
  /**
   * Writes `state` as version `expectedVersion + 1` when the stored version equals
   * `expectedVersion` (0 = no checkpoint may exist yet); otherwise throws
   * `BATON_CHECKPOINT_CONFLICT` (status 409, retryable) with details
   * `{ expected, actual }` and stores nothing. Atomic. Also appends the new version to a
   * bounded history.
   * @param opts.firstVersionAfter for a first write (`expectedVersion` 0): number it after this
   *   version instead of 1, so that a checkpoint written again after it was lost does not
   *   repeat versions a cache elsewhere may still hold (a store may ignore it: one in memory
   *   loses nothing)
   * @returns the checkpoint just written
   */
  put(executionId: number, state: S, expectedVersion: number, opts?: { firstVersionAfter?: number }): Promise<Checkpoint<S>>;
  /** Past versions, newest first (the latest is included), at most the store's history limit. */
  history(executionId: number, opts?: HistoryOptions): Promise<Checkpoint<S>[]>;
  /**
   * One version as it was written (deep-equal to what was put then), or `null` when the
   * execution never reached it or it was pruned from the history.
   */
  getVersion(executionId: number, version: number): Promise<Checkpoint<S> | null>;
  /** Removes the checkpoint and its history. Deleting what does not exist is not an error. */
  delete(executionId: number): Promise<void>;
}

/**
 * "Do this once" records: a side effect's result stored under its idempotency key,
 * so a redelivered message or a retried request returns the first result instead
 * of repeating the effect.
 */
export interface IdempotencyStore {
  /**
   * Records `value` under `key` if nothing is recorded there; returns the existing
   * value when something is. Atomic: of concurrent callers exactly one gets
   * `stored: true`, and all of them get the same `value`.
   * @param ttlSeconds how long the record is kept (a positive integer)
   */
  remember<T>(key: string, value: T, ttlSeconds: number): Promise<{ stored: boolean; value: T }>;
  /** The recorded value, or `null` when none is (or it expired). */
  get<T>(key: string): Promise<T | null>;
}
