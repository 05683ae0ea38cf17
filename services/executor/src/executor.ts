/**
 * The executor: consumes execution commands, tool results, timers and child results,
 * applies them with the engine's pure `step`, and after every node writes the
 * checkpoint to Redis (compare-and-set on its version) before it carries out the
 * step's effects — except its tool calls, which go out while the checkpoint is written
 * (ADR 007, item 16: how a call out for a checkpoint never written is answered).
 *
 * Crash safety (ADR 002): the effects of a step are written into the checkpoint (the
 * outbox) in the same compare-and-set, then carried out with idempotency keys
 * (journal upserts, `Nats-Msg-Id` on every publish, child rows unique per key). A
 * command redelivered after a crash finds the outbox, carries it out again
 * harmlessly, and the command itself is ignored by `step` because the state already
 * reflects it. Every step is taken under a command, acknowledged once the step's records
 * and events are out. On start, and every minute, the executor also sweeps every active
 * execution for an unfinished outbox, ready nodes or a lost command, and sends the command
 * that goes on with it (`execution.continue`, or the lost one again). When Redis lost a
 * checkpoint, it is rebuilt from the journal in Postgres (ADR 004).
 */
import { randomUUID } from "node:crypto";
import { CheckpointCorrupt } from "@baton/checkpoints";
import type { Checkpoint, CheckpointStore } from "@baton/checkpoints";
import { encode, ToolCancelSchema, valueFromJson, valueToJson } from "@baton/contracts";
import type { CommandName } from "@baton/contracts";
import type { Command, Effect, EngineEvent, ExecutionState, ForkStart, JsonObject, JsonValue, LearnedSubRunPause, ReplayInput, WorkflowDefinition } from "@baton/engine";
import { BlobsNeeded, DEADLINE_TIMER_ID, forkStartOf, isJsonObject, forkStartRecord, isFinished, keptForkStart, outstandingCalls, outstandingCount, referencedTools, replayJournal, settledFanCall, step, subRunPauses, subRunReason, toolCallId, validateInput, validateWorkflow } from "@baton/engine";
import { defineError, errorMessage, hasCode } from "@baton/errors";
import type { AnyCommand, CommandInit, Messaging, RecordedToolResult } from "@baton/messaging";
import { decodeEventMessage } from "@baton/messaging";
import type { Service } from "@baton/runtime";
import { StoreFenced } from "@baton/store";
import type { Admission, ExecutionRecord, Store } from "@baton/store";
import type { BusMessage, Subscription } from "@baton/bus";
import type { Logger } from "@baton/telemetry";
import { CallLost, CommandFailed, DefinitionInvalid, DefinitionMissing, ExecutionMissing, NotStarted, RebuildAwaited } from "./errors.ts";
import { publishEngineEvent } from "./events.ts";
import { createExecutorMetrics } from "./metrics.ts";
import { createBlobPruner } from "./blob-pruner.ts";
import { BLOB_REF_RE, BlobsMissing, createLargeValues } from "./large.ts";
import { createLargeArgs } from "./large-args.ts";
import { sweepTurns } from "./sweep-turns.ts";
import type { SweepTurns } from "./sweep-turns.ts";
import type { Owner, ToolAnswer } from "./large.ts";

/** What the checkpoint holds: the engine state plus the effects not yet known to be carried out. */
export interface CheckpointState extends ExecutionState {
  /** Effects of the step that wrote this checkpoint, not yet known to be carried out. */
  outbox?: Effect[];
  /** Effects of earlier steps whose journal rows and events were still being written (pipelining). */
  carried?: { version: number; effects: Effect[] }[];
}

/**
 * The keys of {@link CheckpointState} that only the latest checkpoint needs: the effects still
 * to carry out. Give them to the Redis store as `unversionedKeys`, so every write does not
 * diff them and the history (time travel) does not keep them.
 */
export const CHECKPOINT_UNVERSIONED_KEYS: readonly (keyof CheckpointState)[] = Object.freeze(["outbox", "carried"]);

/**
 * How the executor's checkpoints are to be stored (options of `redisCheckpointStore`): the
 * {@link CHECKPOINT_UNVERSIONED_KEYS} beside the state, and `immutableStates`, since the
 * executor never changes a state it has written (each step of the engine makes a new state that
 * shares what it did not change), so a write costs what the step changed.
 */
export const CHECKPOINT_STORE_OPTIONS = Object.freeze({ unversionedKeys: CHECKPOINT_UNVERSIONED_KEYS, immutableStates: true });

/** The checkpoint store as the executor uses it; `getVersion`, `expire` and `dropUnversioned` are optional extras of the Redis store. */
export type ExecutorCheckpoints = CheckpointStore<CheckpointState> & {
  getVersion?(executionId: number, version: number): Promise<Checkpoint<CheckpointState> | null>;
  expire?(executionId: number, seconds?: number, opts?: { dropUnversioned?: boolean }): Promise<void>;
  /** Clears the outbox of `version` in place (a store with {@link CHECKPOINT_UNVERSIONED_KEYS} as its unversioned keys). */
  dropUnversioned?(executionId: number, version: number): Promise<boolean>;
  /** A rebuild's claim on a run while it works (see {@link REBUILD_CLAIM_MS}); a store without them leaves FENCED_WAIT_MS alone to judge. */
  claimRebuild?(executionId: number, floor: number, owner: string, ttlMs: number): Promise<boolean>;
  releaseRebuild?(executionId: number, floor: number, owner: string): Promise<void>;
  rebuildClaim?(executionId: number): Promise<{ floor: number; owner: string } | null>;
};

export interface ExecutorOptions {
  messaging: Messaging;
  store: Store;
  checkpoints: ExecutorCheckpoints;
  logger: Logger;
  /** Commands handled at once by this process. @default 32 */
  concurrency?: number;
  /** Durable consumer name shared by every executor replica. @default "executor" */
  durable?: string;
  /**
   * Deliveries of a command before the consumer gives it up. A command that failed on each of
   * them with an error that is no service being unreachable (an uncoded fault) fails its run
   * (BATON_EXECUTOR_COMMAND_FAILED). @default 20 (about 14 minutes of retries)
   */
  commandMaxDeliver?: number;
  /** How long a taken command may go unacknowledged before another replica gets it. @default 30_000 */
  ackWaitMs?: number;
  /**
   * Tool results, node outputs, journal inputs and event payloads larger than this (bytes of
   * JSON) are stored once as blobs and referenced; tool-call arguments larger than this travel
   * through an object bucket (large-args.ts). @default 65_536
   */
  largeResultBytes?: number;
  /**
   * Top-level executions (children are not counted nor held back) of one tenant running or
   * paused at once. Admission is atomic across replicas (`store.executions.admit`); a start
   * beyond the cap is acknowledged and its row stays `queued` until a slot frees: the end of
   * one of the tenant's runs starts the oldest waiting ones, and the recovery sweep does too.
   * 0 = no cap. @default 0
   */
  tenantMaxRunning?: number;
  /** Whether a tool is registered; a start whose definition names an unknown tool fails (it would wait forever). */
  hasTool?: (name: string) => Promise<boolean>;
  /** Sweep active executions for unfinished work (outboxes, lost checkpoints) on start. @default true */
  recoverOnStart?: boolean;
  /** Sweep again every this many ms (0 = only on start). @default 60_000 */
  recoverEveryMs?: number;
  /**
   * Delete blobs no execution uses any more this often (blob-pruner.ts; one replica at a time).
   * 0 = never. @default 0 (the executor module passes `BATON_BLOB_PRUNE_INTERVAL_SECONDS`)
   */
  blobPruneIntervalMs?: number;
  /** How long an unused blob is kept after its last use (`BATON_BLOB_GRACE_SECONDS`). @default 8 days */
  blobGraceMs?: number;
  /**
   * Delete finished runs this long after they finished, in the blob pruner's runs, before the
   * blobs (`BATON_EXECUTION_RETENTION_DAYS`). 0 = keep them for ever. @default 0
   */
  executionRetentionMs?: number;
  /**
   * Delete learned tool sequences this long after they were recorded, in the blob pruner's runs,
   * before the blobs (`BATON_LEARNED_RETENTION_DAYS`). 0 = keep them for ever. @default 0
   */
  learnedRetentionMs?: number;
  /** @default () => new Date() */
  clock?: () => Date;
}

export interface Executor extends Service {
  /**
   * Applies one command now (used by the consumer; exposed for tests and tools). `delivery`:
   * the consumer's delivery count; a direct call is taken as a last delivery.
   */
  handle(cmd: AnyCommand, delivery?: number): Promise<void>;
  /** Finishes any unfinished outbox and rebuilds lost checkpoints of active executions. */
  recover(): Promise<number>;
}

const EffectsFailed = defineError("BATON_EXECUTOR_EFFECTS_FAILED", (id: number, why: string) => `execution ${id}: the step is checkpointed but its effects failed (${why}); the command is retried`, { status: 503, retryable: true });
const TenantBusy = defineError("BATON_EXECUTOR_TENANT_BUSY", (tenant: string, cap: number) => `tenant ${tenant} already runs ${cap} executions; this one waits queued for a slot`, { status: 429, retryable: true });
const TimerNotDue = defineError("BATON_EXECUTOR_TIMER_NOT_DUE", (timerId: string) => `timer ${timerId} is not due yet`, { status: 425, retryable: true });
const ForkStartMissing = defineError("BATON_EXECUTOR_FORK_START_MISSING", (id: number) => `fork ${id} has no starting state on its row (its start command was never taken)`, { status: 409 });
const ForkSourceMissing = defineError("BATON_EXECUTOR_FORK_SOURCE_MISSING", (id: number, v: number) => `checkpoint version ${v} of execution ${id} is gone`, { status: 404 });
const ResultBeforeCall = defineError("BATON_EXECUTOR_RESULT_BEFORE_CALL", (callId: string, id: number) => `execution ${id} has no call ${callId} (yet): the result is delivered again`, { status: 409, retryable: true });
const ChildInputInvalid = defineError("BATON_EXECUTOR_CHILD_INPUT_INVALID", (ref: string, issues: string) => `the input of sub-workflow ${ref} does not match its inputSchema: ${issues}`, { status: 422 });
const ChildWorkflowMissing = defineError("BATON_EXECUTOR_CHILD_WORKFLOW_MISSING", (ref: string) => `sub-workflow ${ref} does not exist`, { status: 404 });

const NestingTooDeep = defineError(
  "BATON_EXECUTOR_NESTING_TOO_DEEP",
  (id: number, max: number) => `execution ${id} is already ${max} sub-workflow levels deep; a sub-workflow that starts itself needs a condition that ends it`,
  { status: 422 },
);

/** Sub-workflow runs nest at most this deep (the top-level run is level 1). */
export const MAX_NESTING = 32;

/** Whether two maps of names to ids (pauses in sub-runs) hold the same entries. */
function sameIds(a: Readonly<Record<string, number>>, b: Readonly<Record<string, number>>): boolean {
  const keys = Object.keys(a);
  return keys.length === Object.keys(b).length && keys.every((k) => a[k] === b[k]);
}

type EngineStart = Command & { kind: "start" };

/** A fork's start as its row keeps it (the gateway writes it when it creates the fork; see @baton/engine fork.ts). */
function forkStartOnRow(row: ExecutionRecord): ForkStart | undefined {
  return keptForkStart(row.checkpoint);
}

/** How long an execution's records must have been idle before its outbox is dropped from Redis. */
const OUTBOX_CLEAR_DELAY_MS = 250;
/**
 * How long a rebuild that finds steps without their journal rows waits before reading the
 * journal again: a replica still writing them (alive, its statement in flight) is done by then,
 * and its events go out; what is still missing is written by the rebuild.
 */
const UNRECORDED_GRACE_MS = 1_000;
/**
 * How long after its records were refused (BATON_STORE_FENCED) an executor leaves a run to the
 * rebuild whose fence refused them, while Redis still holds a checkpoint numbered below that
 * floor: the rebuild writes its checkpoint once it has read the journal, which can take
 * {@link UNRECORDED_GRACE_MS} and more. Rebuilding at once fenced that rebuild out in turn, and
 * with several executors holding commands of one run, each rebuild refused the one before, for
 * minutes (chaos seed 966). Past this, the rebuilder is taken for dead and the run rebuilt here.
 */
const FENCED_WAIT_MS = 3_000;
/**
 * A rebuild claims its run in Redis for this long, renewing the claim every third of it while
 * it works (for at most REBUILD_CLAIM_MAX_MS): an executor left waiting past FENCED_WAIT_MS
 * waits on while a claim of that rebuild, or of a later one, stands, so that a slow rebuild (a
 * long journal, many blobs) is not fenced out by the executors waiting for it, each as slow in
 * turn. A rebuild that died, or stalled, lets its claim lapse.
 */
const REBUILD_CLAIM_MS = FENCED_WAIT_MS;
/**
 * At most this long: a command waiting on a claim comes back every REBUILD_CLAIM_MS, so that one
 * waits through about 15 deliveries, short of the 20 after which the consumer gives it up.
 */
const REBUILD_CLAIM_MAX_MS = 45_000;
/** How long a rebuild reads a run's events for (pausesTold, allStepsTold) before it takes what it read last per subject, or its row, at its word. */
const EVENTS_READ_MS = 2_000;
/**
 * How long a step's records may take, from the start of its journal statement to its events,
 * before the executor checks that no rebuild fenced the journal meanwhile (notFenced): half
 * a rebuild's grace, so that events published sooner are on the stream when a rebuild that
 * fenced after their rows reads it again.
 */
const STALE_RECORDS_MS = UNRECORDED_GRACE_MS / 2;

/**
 * Room a rebuild of a checkpoint from the journal leaves above the journal's highest step
 * number, for the steps of the lost checkpoint that wrote no rows: its steps (and the journal
 * floor it sets, fenceJournal) are numbered from there.
 */
const REBUILD_ROOM = 1000;

/**
 * The journal floor when `err` (or an error it wraps) is the store's refusal of records numbered
 * below it (`BATON_STORE_FENCED`): their checkpoint was rebuilt from the journal without them.
 */
function fencedFloor(err: unknown): { executionId: number; floor: number } | undefined {
  for (let e = err, depth = 0; e !== undefined && e !== null && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    if (!hasCode(e, "BATON_STORE_FENCED")) continue;
    const d = e.details as { executionId?: unknown; floor?: unknown } | undefined;
    if (typeof d?.executionId === "number" && typeof d.floor === "number") return { executionId: d.executionId, floor: d.floor };
  }
  return undefined;
}

/**
 * Commands the executor's consumer may hold unacknowledged. A timer that is not due yet is
 * answered with a delayed redelivery and stays pending on the consumer until it is due (a run's
 * deadline, up to 30 days; a delay, up to 366; a node's timeout, also after the node answered),
 * so this bounds the timers waiting at once, not the commands in work (`concurrency` does). With
 * the bus's default of 256, 256 waiting timers held back every other command.
 */
export const COMMANDS_MAX_ACK_PENDING = 1_000_000;

/** Inline steps in a row after which an execution lets the commands queued behind it go first. */
const INLINE_STEPS_PER_TURN = 256;

/**
 * How long past its due time a timer, past its record a worker's answer, and past its child's
 * end a child's result, is left to its command before the recovery sweep takes that command for
 * lost (given up after an outage that outlasted its deliveries, or terminated) and sends it
 * again (see lostCommands).
 */
const LOST_COMMAND_GRACE_MS = 60_000;

/**
 * The most tool calls the recovery sweep reads from the tools queue to tell a lost call (taken by
 * a worker that acked it and went away unanswered) from one still queued or being handled; with
 * more queued, it cannot tell, and leaves such calls waiting (see lostCommands).
 */
const LOST_CALL_SCAN_LIMIT = 5_000;

/**
 * How long a checkpoint holding effects or ready nodes must have gone without a step before the
 * recovery sweep sends its run `execution.continue`. A run mid-step holds them for a moment (its
 * outbox until its records are written, ready nodes until its next inline step), with a command
 * behind that step; a continue then only redid what was being done. Well under the tool queue's
 * duplicate window (2 minutes by default), so that the calls a continue sends again are still
 * dropped as duplicates.
 */
const IDLE_CHECKPOINT_GRACE_MS = 10_000;

/**
 * Whether a run has ready nodes and waits on nothing else. Ready nodes of a run that waits on
 * something (a call, a timer, a child, a review) wait for a slot under `limits.maxConcurrency`
 * and start with the command that ends that wait (the recovery sweep sends it again when lost);
 * only a run waiting on nothing needs `execution.continue` for them.
 */
function readyWithNothingElse(state: ExecutionState): boolean {
  return state.ready.length > 0 && !Object.values(state.nodes).some((r) => r.status === "running" || r.status === "paused");
}

/** Statuses of an execution row that has ended. */
const TERMINAL: ReadonlySet<string> = new Set(["completed", "failed", "cancelled"]);
/** The events that end a run's timeline. */
const END_EVENTS: ReadonlySet<string> = new Set(["execution.completed", "execution.failed", "execution.cancelled"]);
/**
 * The kinds of event a run's steps publish. The run's subjects (`{p}.evt.*.*.{tenant}.{run}`)
 * also carry a tool's `node.progress`, the review and learner services' events, and the events
 * of a workflow or memory whose own id is the run's: none of those says what the run published.
 */
const STEP_EVENTS: Readonly<Record<EngineEvent["kind"], true>> = {
  "execution.started": true, "execution.completed": true, "execution.failed": true, "execution.paused": true, "execution.resumed": true,
  "execution.cancelled": true, "execution.emitted": true, "node.started": true, "node.completed": true, "node.failed": true, "node.skipped": true,
};

/** The highest step a run's events told, and each kind's (publishedThrough). */
interface StepsTold { through?: number; byKind: Partial<Record<EngineEvent["kind"], number>> }

/** The highest step that wrote a journal row (0: none). */
function highestStep(journal: readonly { stepVersion: number | null }[]): number {
  return journal.reduce((m, j) => Math.max(m, j.stepVersion ?? 0), 0);
}

/** The code and message of an execution row's error, written as `CODE: message` (records()). */
function errorOfRow(error: string | null): { code: string; message: string } {
  const m = /^([A-Z][A-Z0-9_]*): ([\s\S]*)$/.exec(error ?? "");
  return m ? { code: m[1]!, message: m[2]! } : { code: "BATON_CHILD_FAILED", message: error ?? "the sub-workflow run failed" };
}

/** The reason a cancelled run's row keeps (its error, `BATON_CANCELLED: <reason>`); "cancelled" when it keeps none. */
function cancelReasonOf(error: string | null): string {
  const e = errorOfRow(error);
  return e.code === "BATON_CANCELLED" && e.message ? e.message : "cancelled";
}

/**
 * Whether the events stream, holding everything published since `since` (Bus.eventsKeptSince),
 * holds every event of the run of `row`: since before the run was created, with a second's
 * leeway for the clocks of NATS and Postgres.
 */
function keepsAllOf(since: Date | null, row: ExecutionRecord): boolean {
  return since !== null && since.getTime() <= row.createdAt.getTime() - 1_000;
}

/** A command the recovery sweep sends for a run; `what` names it within the run (its message id). */
type SweepCommand = { [N in CommandName]: { name: N; init: CommandInit<N>; what: string } }[CommandName];

/** The ids of the calls the tools queue held at a read made at `notBefore` or later (undefined: too many to tell). */
type QueuedCalls = (notBefore: number) => Promise<Set<string> | undefined>;

/** Internal: a command was ignored against the cached checkpoint; apply it again from Redis. */
class StaleCheckpoint extends Error {}

/** What applying commands found beyond the steps it wrote (see handleNow and handle). */
interface ApplyOutcome {
  /** Tool results the execution's checkpoint (read from Redis) ignored that may be early (mayBeEarly). */
  unknown: Set<Command>;
  /** Calls sent for a step whose checkpoint was not written: call id → its node and attempt. */
  unconfirmed: Map<string, { nodeId: string; attempt: number }>;
  /**
   * The command was delivered before: an earlier delivery may have sent the calls of the steps
   * it leads to and never written their checkpoint. Those calls go marked as sent again, so that
   * a worker answers from its record: the queue drops a call it already has only within the
   * tools stream's duplicate window (two minutes), and a delivery backing off comes later. (So
   * do the calls of a run whose checkpoint was rebuilt: `ExecutionState.rebuilt`.)
   */
  redelivered?: boolean;
}
const newOutcome = (): ApplyOutcome => ({ unknown: new Set(), unconfirmed: new Map() });

/** Tool results of one execution applied together (see handle). */
interface ResultBatch {
  tenantId: string;
  commands: Command[];
  settled: Promise<void>;
  outcome: ApplyOutcome;
}

/**
 * A result whose call its execution's checkpoint does not know is delivered again this many
 * times (backing off from 250 ms to 8 s, about 24 s in all) before it is taken as stale and
 * dropped: calls go out while their checkpoint is being written, so the answer can reach
 * another replica before the checkpoint does.
 */
const UNKNOWN_RESULT_DELIVERIES = 8;

type StepRecords = Parameters<Store["nodeExecutions"]["recordSteps"]>[0];

/**
 * What a rebuild from the journal gives: the rebuilt checkpoint, or, when the journal holds no
 * row yet, no state and the floor it fenced the journal at: the start is applied afresh, its
 * steps numbered past that floor.
 */
type Rebuilt = { state: CheckpointState; version: number } | { state: null; floor: number };
/** A run's announced pauses in sub-runs (node → sub-run) and its pause point, as a rebuild takes them (ReplayInput.announced). */
type PausesTold = { subRunPauses: Record<string, number>; pausePoint: string | null };

/** A step whose journal rows and events are to be written: `prev` null = a redo after a crash (write everything again). */
interface StepToRecord {
  prev: ExecutionState | null;
  state: ExecutionState;
  effects: Effect[];
  /** The checkpoint version the step wrote. */
  version: number;
}

/**
 * Journal rows and execution-row updates of every execution this process runs, written in as
 * few statements as keep up. A write goes out at the end of the current microtask when fewer
 * than `maxInFlight()` statements are running; otherwise it waits for one of them, and
 * everything that queued meanwhile goes together (up to `maxRows` rows a statement). An idle
 * process so writes at once, and a busy one makes one round trip for many steps. Every
 * caller's promise settles with the statement that carried its records.
 */
function batchedRecords(store: Store, maxInFlight: () => number, maxRows = 500): { write(records: StepRecords): Promise<void> } {
  const pending: { records: StepRecords; resolve: () => void; reject: (err: unknown) => void }[] = [];
  let scheduled = false;
  let inFlight = 0;
  const size = (r: StepRecords): number => r.entries.length + r.executions.length;
  const run = async (batch: typeof pending): Promise<void> => {
    try {
      await store.nodeExecutions.recordSteps({ entries: batch.flatMap((w) => w.records.entries), executions: batch.flatMap((w) => w.records.executions) });
      for (const w of batch) w.resolve();
    } catch (err) {
      if (batch.length > 1 && fencedFloor(err)) {
        // One execution's records were refused (its checkpoint was rebuilt without them), and
        // with them the whole statement: the others' are written on their own.
        await Promise.all(batch.map((w) => store.nodeExecutions.recordSteps(w.records).then(w.resolve, w.reject)));
      } else {
        for (const w of batch) w.reject(err);
      }
    } finally {
      inFlight--;
      schedule();
    }
  };
  const flush = (): void => {
    scheduled = false;
    while (pending.length > 0 && inFlight < maxInFlight()) {
      const batch: typeof pending = [];
      let n = 0;
      while (pending.length > 0 && (n === 0 || n + size(pending[0]!.records) <= maxRows)) {
        const w = pending.shift()!;
        n += size(w.records);
        batch.push(w);
      }
      inFlight++;
      void run(batch);
    }
  };
  const schedule = (): void => {
    if (scheduled || pending.length === 0 || inFlight >= maxInFlight()) return;
    scheduled = true;
    queueMicrotask(flush);
  };
  return {
    write(records) {
      return new Promise<void>((resolve, reject) => {
        pending.push({ records, resolve, reject });
        schedule();
      });
    },
  };
}

/** Settles once the current cascade of microtasks has run (before any I/O or timer). */
function endOfCascade(): Promise<void> {
  return new Promise<void>((resolve) => process.nextTick(resolve));
}

export function createExecutor(opts: ExecutorOptions): Executor {
  const { messaging, store, checkpoints, logger } = opts;
  const clock = opts.clock ?? (() => new Date());
  const largeResultBytes = opts.largeResultBytes ?? 65_536;
  const definitions = new Map<string, WorkflowDefinition>();
  // One execution writing records: its statements overlap (up to four), so its rows, and the
  // events that wait for them, keep pace with its steps (a fan-out's branches each finish in
  // a step of their own). Several: a statement waits for the running one and carries the rows
  // of all of them, so Postgres does one statement's work for many steps (at 16 executions of
  // the sequential benchmark graph, 1.5 statements per execution instead of 3.4).
  const recordWriter = batchedRecords(store, () => (pipes.size > 1 ? 1 : 4));
  /** This executor, as the owner of its rebuilds' claims. */
  const instance = randomUUID();
  const locks = new Map<number, Promise<void>>();
  const metrics = createExecutorMetrics();

  // The latest checkpoint of each execution as this process last read or wrote it: a step
  // starts from it instead of reading Redis. A write by another replica (or a checkpoint
  // lost from Redis) makes it stale; the compare-and-set then fails, the entry is dropped,
  // and handle() applies the command again from a fresh read.
  const latest = new Map<number, Checkpoint<CheckpointState>>();
  const LATEST_MAX = 4096;
  const remember = (cp: Checkpoint<CheckpointState>): void => {
    latest.delete(cp.executionId);
    latest.set(cp.executionId, cp);
    if (latest.size > LATEST_MAX) latest.delete(latest.keys().next().value!);
  };
  /**
   * Executions whose records this process had refused (BATON_STORE_FENCED), with the journal
   * floor that refused them: the state they came from was lost and the run rebuilt from the
   * journal without them. The cached checkpoint goes; the next apply reads Redis, and a
   * checkpoint there numbered below the floor (a rebuild that lost the race with another one's
   * fence) is rebuilt again, over it, rather than written on (see applyNow). `at`: when this
   * process learned that floor.
   */
  const fenced = new Map<number, { floor: number; at: number }>();
  const fencedOut = (err: unknown): void => {
    const f = fencedFloor(err);
    if (!f) return;
    latest.delete(f.executionId);
    const known = fenced.get(f.executionId);
    if (!known || f.floor > known.floor) fenced.set(f.executionId, { floor: f.floor, at: clock().getTime() });
    if (fenced.size > LATEST_MAX) fenced.delete(fenced.keys().next().value!);
    logger.warn("a step's records were refused: its checkpoint was rebuilt from the journal without them; the step is applied again from the rebuilt one", { executionId: f.executionId, floor: f.floor });
  };
  async function readCheckpoint(executionId: number): Promise<Checkpoint<CheckpointState> | null> {
    const known = latest.get(executionId);
    if (known) return known;
    let cp: Checkpoint<CheckpointState> | null;
    try {
      cp = await checkpoints.get(executionId);
    } catch (err) {
      if (!CheckpointCorrupt.is(err)) throw err;
      // A record that cannot be decoded holds nothing the run can go on from, and every command
      // would fail on it for good. The journal is the source of truth: the checkpoint (and its
      // history) is removed and rebuilt from it, as one Redis lost is (ADR 004).
      logger.error("the execution's checkpoint cannot be decoded; it is removed and rebuilt from the journal", { executionId, code: err.code, error: err.message });
      await checkpoints.delete(executionId);
      return null;
    }
    if (cp) remember(cp);
    return cp;
  }
  async function writeCheckpoint(executionId: number, state: CheckpointState, expectedVersion: number, opts?: { firstVersionAfter?: number }): Promise<Checkpoint<CheckpointState>> {
    try {
      const written = await checkpoints.put(executionId, state, expectedVersion, opts);
      remember({ executionId, version: written.version, state, updatedAt: written.updatedAt });
      return written;
    } catch (err) {
      latest.delete(executionId);
      throw err;
    }
  }
  let sub: Subscription | undefined;
  let sweeper: NodeJS.Timeout | undefined;
  let sweeping: Promise<unknown> | undefined;

  async function definitionFor(tenantId: string, workflowId: number, version: number, ref: string | null): Promise<WorkflowDefinition> {
    const key = `${workflowId}:${version}:${ref ?? ""}`;
    const cached = definitions.get(key);
    if (cached) return cached;
    let parsed: WorkflowDefinition;
    if (ref) {
      // A body of a forEach node: walk the path of node ids from the whole definition.
      const parts = ref.split("/");
      let def = await definitionFor(tenantId, workflowId, version, null);
      for (const id of parts) {
        const n = def.nodes.find((x) => x.id === id);
        const body = n?.config.body;
        if (!body) throw DefinitionInvalid(workflowId, version, `node "${id}" of ${ref} has no body`);
        // A body is `{ start?, nodes, edges?, output? }` (bodySchema): anything else in it has no
        // effect, as validation warns when the definition is stored.
        const { start, nodes, edges, output } = body as Record<string, unknown>;
        const v = validateWorkflow({ nodes, ...(start !== undefined ? { start } : {}), ...(edges !== undefined ? { edges } : {}), ...(output !== undefined ? { output } : {}) });
        if (!v.ok) throw DefinitionInvalid(workflowId, version, v.errors.map((e) => `${ref}: ${e.path}: ${e.message}`).join("; "));
        // A body's LLM nodes take the workflow's defaults, as its other nodes do.
        def = def.agentConfig ? { ...v.workflow, agentConfig: def.agentConfig } : v.workflow;
      }
      parsed = def;
    } else {
      const v = await store.workflows.getVersion(tenantId, workflowId, version);
      if (!v) throw DefinitionMissing(workflowId, version);
      // The workflow's agentConfig at this version (seed 004's column) holds its LLM nodes'
      // defaults under the definition's own, which wins field by field.
      const own = v.definition.agentConfig;
      const agentConfig = { ...v.agentConfig, ...(isJsonObject(own) ? own : {}) };
      const result = validateWorkflow(Object.keys(agentConfig).length > 0 ? { ...v.definition, agentConfig } : v.definition);
      if (!result.ok) throw DefinitionInvalid(workflowId, version, result.errors.map((e) => `${e.path}: ${e.message}`).join("; "));
      parsed = result.workflow;
    }
    if (definitions.size > 1000) definitions.delete(definitions.keys().next().value!);
    definitions.set(key, parsed);
    return parsed;
  }

  /** Runs `fn` after every earlier call for the same execution in this process has finished. */
  async function serially<T>(executionId: number, fn: () => Promise<T>): Promise<T> {
    const prev = locks.get(executionId) ?? Promise.resolve();
    const run = prev.then(fn, fn);
    const tail = run.then(() => undefined, () => undefined);
    locks.set(executionId, tail);
    try {
      return await run;
    } finally {
      if (locks.get(executionId) === tail) locks.delete(executionId);
    }
  }

  /**
   * A finished child's result for its parent, from the child's row, as the child sent it when
   * it ended. The row keeps the error as text; whether it was retryable is in the child's last
   * checkpoint (kept for the checkpoint TTL after the end). Without it, it counts as final.
   */
  async function childResultOfRow(parent: Owner, nodeId: string, childKey: string, row: ExecutionRecord): Promise<CommandInit<"execution.child_result">> {
    const retryable = row.status === "failed" && (await readCheckpoint(row.id))?.state.error?.retryable === true;
    return {
      executionId: parent.executionId, tenantId: parent.tenantId, nodeId, childKey, childExecutionId: row.id, status: row.status,
      ...(row.status === "completed" ? { output: valueFromJson(row.output ?? null) } : {}),
      ...(row.status === "failed" ? { error: { ...errorOfRow(row.error), retryable } } : {}),
      ...(row.status === "cancelled" ? { error: { code: "BATON_CANCELLED", message: cancelReasonOf(row.error), retryable: false } } : {}),
    };
  }

  async function startChild(state: ExecutionState, e: Effect & { kind: "startChild" }): Promise<void> {
    let workflowId = state.workflowId;
    let version = state.workflowVersion;
    if (e.workflow) {
      const w = e.workflow.id !== undefined ? await store.workflows.get(state.tenantId, e.workflow.id) : await store.workflows.getBySlug(state.tenantId, e.workflow.slug!);
      if (!w) {
        await messaging.sendCommand("execution.child_result", {
          executionId: state.executionId, tenantId: state.tenantId, nodeId: e.nodeId, childKey: e.childKey, status: "failed",
          error: { code: "BATON_EXECUTOR_CHILD_WORKFLOW_MISSING", message: ChildWorkflowMissing(e.workflow.slug ?? String(e.workflow.id)).message, retryable: false },
        }, `child-missing:${state.executionId}:${e.nodeId}:${e.childKey}`);
        return;
      }
      workflowId = w.id;
      // Without a version, the one current when this run's tree began (its top-level run, or
      // the run it was forked from): updating a workflow does not change runs already running,
      // so a forEach's children all run one version. A workflow created since has no such
      // version, and runs its current one.
      version = e.workflow.version ?? (await store.workflows.versionAt(state.tenantId, w.id, state.executionId)) ?? w.version;
    }
    // The child's input must match its workflow's inputSchema, as a run started through the
    // gateway must: otherwise the parent's node fails (its retries and branches see the code)
    // and no child row is made.
    const issues = await childInputIssues(state.tenantId, workflowId, version, e);
    if (issues) {
      const err = ChildInputInvalid(e.workflow ? (e.workflow.slug ?? String(e.workflow.id)) : e.definitionRef ?? "", issues);
      await messaging.sendCommand("execution.child_result", {
        executionId: state.executionId, tenantId: state.tenantId, nodeId: e.nodeId, childKey: e.childKey, status: "failed",
        error: { code: err.code, message: err.message, retryable: false },
      }, `child-invalid:${state.executionId}:${e.nodeId}:${e.childKey}`);
      return;
    }
    // A workflow that starts itself (directly or through others) would nest without end.
    if (state.parent) {
      const { depth } = await ancestry(state.tenantId, state.executionId);
      if (depth >= MAX_NESTING) {
        const err = NestingTooDeep(state.executionId, MAX_NESTING);
        await messaging.sendCommand("execution.child_result", {
          executionId: state.executionId, tenantId: state.tenantId, nodeId: e.nodeId, childKey: e.childKey, status: "failed",
          error: { code: err.code, message: err.message, retryable: false },
        }, `child-too-deep:${state.executionId}:${e.nodeId}:${e.childKey}`);
        return;
      }
    }
    const { row, created } = await store.executions.createChild({
      tenantId: state.tenantId, parentExecutionId: state.executionId, parentNodeId: e.nodeId, childKey: e.childKey,
      agentWorkflowId: workflowId, workflowVersion: version, input: e.input,
      ...(e.definitionRef ? { definitionRef: e.definitionRef } : {}),
      ...(state.deadlineAt ? { deadlineAt: new Date(state.deadlineAt) } : {}),
    });
    if (!created && TERMINAL.has(row.status)) {
      // Started before, and finished: this start is carried out again (a checkpoint rebuilt
      // from the journal, which has no row per forEach item, or a crash's outbox), and the
      // child's result may have reached a state that did not wait for it, or none. A finished
      // child ignores a start, so its result is sent again from its row, under a message id of
      // its own: the first one may still be in the duplicate window, and the parent drops a repeat.
      await messaging.sendCommand("execution.child_result", await childResultOfRow(state, e.nodeId, e.childKey, row), `child-result:${row.id}:again:${randomUUID()}`);
      return;
    }
    // The child's input may hold references to the parent's blobs: the child uses them too
    // (it may outlive the parent's row). Before its start, so no step of it reads one unrecorded.
    await large.adopt({ tenantId: state.tenantId, executionId: row.id }, e.input);
    await messaging.sendCommand("execution.start", {
      executionId: row.id, tenantId: state.tenantId, workflowId, workflowVersion: version,
      parentExecutionId: state.executionId, parentNodeId: e.nodeId, childKey: e.childKey, triggerEvent: "subworkflow",
      definitionRef: e.definitionRef ?? "", deadline: state.deadlineAt ?? "", rootExecutionId: state.rootExecutionId ?? state.executionId,
    }, `start:${row.id}`);
  }

  /**
   * What is wrong with a child's input against the inputSchema of the definition it would run,
   * as one line; undefined when nothing is (or there is no schema). A definition that cannot be
   * loaded is left to the child's own start, which fails it and tells the parent.
   */
  async function childInputIssues(tenantId: string, workflowId: number, version: number, e: Effect & { kind: "startChild" }): Promise<string | undefined> {
    let definition: WorkflowDefinition;
    try {
      definition = await definitionFor(tenantId, workflowId, version, e.definitionRef ?? null);
    } catch (err) {
      if (hasCode(err) && !err.retryable) return undefined;
      throw err;
    }
    try {
      const issues = validateInput(definition, e.input);
      return issues.length === 0 ? undefined : issues.map((i) => `${i.path}: ${i.message}`).join("; ");
    } catch (err) {
      return `its inputSchema cannot be used: ${errorMessage(err)}`;
    }
  }

  /**
   * Tool calls, timers and children: they go out as soon as the checkpoint holds them.
   * Cancellations wait for the step's rows (see {@link sendCancellations}).
   * `resent`: effects carried out again (after a crash, or from a rebuilt checkpoint), whose
   * tool calls may have been answered already; workers look for a recorded answer first. Such a
   * call that the queue drops as a repeat (sent within its duplicate window) reaches no worker:
   * its recorded answer, when there is one, is sent to the run (answerFromRecords).
   */
  async function dispatch(state: ExecutionState, effects: Effect[], resent = false, calls = true): Promise<void> {
    const outward: Promise<unknown>[] = calls ? [resent ? sendCalls(state, effects, true).then((dropped) => answerFromRecords(state, dropped)) : sendCalls(state, effects)] : [];
    for (const e of effects) {
      switch (e.kind) {
        case "callTool":
        case "cancelTools":
        case "cancelChildren":
          break;
        case "setTimer":
          // Keyed by the due time too: an outbox carried out again sends the same timer, which
          // the stream drops, but a state rebuilt from the journal may set a timer of the same
          // id anew (a forEach item's retry counts its attempts again), after the first one
          // fired; with the id alone, the stream would drop it as a repeat and the run would wait forever.
          outward.push(messaging.sendCommand("execution.timer", { executionId: state.executionId, tenantId: state.tenantId, timerId: e.timerId, dueAt: e.dueAt }, `timer:${state.executionId}:${e.timerId}:${e.dueAt}`));
          break;
        case "startChild":
          outward.push(startChild(state, e));
          break;
        case "emit":
        case "journal":
        case "review":
          break;
      }
    }
    await Promise.all(outward);
  }

  /**
   * The tool calls and children that steps stopped (a cancel, a deadline, a timeout, a branch
   * no longer waited for), told once the steps' rows are written, never before: a step whose
   * records the journal refuses (its checkpoint was lost, and the run rebuilt without it) must
   * not stop work the rebuilt run still waits for. A call stopped that way would answer
   * `BATON_TOOL_CANCELLED`, and a child end `cancelled`, to a run that never asked, and fail it
   * before the cancel, delivered again, reached it (chaos seed 832, docs/dev/chaos.md). The
   * checkpoint's outbox holds them until then, so a crash in between sends them with its redo;
   * they go before the steps' events, since a run's end drops its checkpoint once those are out.
   */
  function sendCancellations(steps: readonly { state: ExecutionState; effects: readonly Effect[] }[]): Promise<unknown> | undefined {
    let outward: Promise<unknown>[] | undefined;
    for (const { state, effects } of steps) {
      for (const e of effects) {
        if (e.kind === "cancelTools") {
          (outward ??= []).push(cancelCalls(state.tenantId, e.callIds, e.reason));
        } else if (e.kind === "cancelChildren") {
          for (const key of e.childKeys) {
            (outward ??= []).push(store.executions.getChild(state.executionId, e.nodeId, key).then((child) =>
              child ? messaging.sendCommand("execution.cancel", { executionId: child.id, tenantId: state.tenantId, reason: e.reason }, `cancel:${child.id}`) : undefined));
          }
        }
      }
    }
    return outward && Promise.all(outward);
  }

  /**
   * Puts a step's tool calls on their queues. Resolves with the calls the queue already had
   * (`duplicate`): an earlier attempt at the same step sent them and never wrote its checkpoint
   * (see apply), or, for calls `resent`, the steps carried out again sent them before. A call goes with its whole arguments: the
   * checkpoint holds references for their large parts (large.ts), which a step's own calls
   * replace from memory and calls `resent` from a checkpoint from the blob store. Arguments
   * above the threshold go through their object bucket first, and the call carries a
   * reference (large-args.ts).
   */
  async function sendCalls(state: ExecutionState, effects: Effect[], resent = false, maybeSent = false): Promise<(Effect & { kind: "callTool" })[]> {
    const calls = effects.filter((e): e is Effect & { kind: "callTool" } => e.kind === "callTool");
    if (calls.length === 0) return [];
    // A step's own calls have their arguments at hand: no await, so they still leave together.
    const found = large.callArgs({ tenantId: state.tenantId, executionId: state.executionId }, calls, resent);
    const whole = found instanceof Promise ? await found : found;
    const sending = Promise.all(calls.map((e, i) => {
      const send = (args: JsonObject): Promise<{ duplicate: boolean }> => messaging.callTool({
        callId: e.callId, executionId: state.executionId, tenantId: state.tenantId, nodeId: e.nodeId, attempt: e.attempt,
        tool: e.tool, args, timeoutMs: e.timeoutMs ?? 0, idempotencyKey: e.idempotencyKey, rootExecutionId: state.rootExecutionId ?? state.executionId, resent: resent || maybeSent,
      });
      const args = largeArgs.outgoing(e.callId, whole[i]!, large.measured(whole[i]!));
      return args instanceof Promise ? args.then(send) : send(args);
    }));
    // The workers wait for these while this turn goes on to the checkpoint: when this is the
    // only step being applied, out now rather than at the turn's end. Under load the calls
    // of a turn share one write.
    if (applying <= 1) messaging.bus.sendNow();
    const sent = await sending;
    return calls.filter((_, i) => sent[i]!.duplicate);
  }

  /**
   * Sends the run, as `tool.result` commands, the recorded answers of calls carried out again
   * that the queue dropped as repeats. Each was sent within the queue's duplicate window, by
   * steps whose checkpoint was then lost (a rebuild from the journal sends them again: the
   * items of a forEach, whose answers the journal does not hold) or whose effects a crash left
   * undone. The first send's answer went to a state that is gone, and the worker never gets
   * the repeat: without this the run waited for the recovery sweep, a minute per answer (chaos
   * seed 959: a forEach of eight items took four minutes to end after the faults stopped). An
   * answer the run already has, or one on its way, leaves the command ignored. A call with no
   * record is still with a worker, whose answer comes as usual. The sweep stays the backstop.
   */
  async function answerFromRecords(state: ExecutionState, dropped: readonly (Effect & { kind: "callTool" })[]): Promise<void> {
    const window = Math.floor(clock().getTime() / 10_000);
    for (const c of dropped) {
      try {
        const recorded = await messaging.recordedToolResult(c.callId);
        if (!recorded) continue;
        logger.info("a call sent again had been answered; its recorded answer is sent to the run", { executionId: state.executionId, callId: c.callId });
        await messaging.sendCommand("tool.result", recordedResultInit(state, c.nodeId, c.attempt, c.callId, recorded.result), `recorded:${window}:${state.executionId}:${c.callId}`);
      } catch (err) {
        logger.warn("the recorded answer of a call sent again could not be sent; the recovery sweep sends it", { executionId: state.executionId, callId: c.callId, error: errorMessage(err) });
      }
    }
  }

  /** A `tool.result` command carrying a worker's recorded answer, as the worker sent it (a large output, a reference). */
  function recordedResultInit(state: ExecutionState, nodeId: string, attempt: number, callId: string, rec: RecordedToolResult): CommandInit<"tool.result"> {
    return {
      callId, executionId: state.executionId, tenantId: state.tenantId, nodeId, attempt, ok: rec.ok, durationMs: rec.durationMs, workerId: rec.workerId,
      ...(rec.ok ? { output: valueFromJson(rec.output ?? null) } : {}), ...(rec.error ? { error: rec.error } : {}),
    };
  }

  function cancelCalls(tenantId: string, callIds: string[], reason: string): Promise<void> {
    return messaging.bus.broadcast(messaging.subjects.toolCancel(), encode(ToolCancelSchema, { callIds, reason }), { tenantId, type: "tools.cancel" });
  }

  /**
   * The answers already recorded for calls the queue had before this step sent them. Such a
   * call was sent by an attempt at the step that never wrote its checkpoint (the executor
   * crashed, or lost the compare-and-set); its answer may have come while no checkpoint knew
   * the call, and been dropped. The record is the answer; a call not answered yet is answered
   * through the queue as usual, now that the checkpoint knows it.
   */
  async function recordedAnswers(owner: Owner, calls: readonly (Effect & { kind: "callTool" })[]): Promise<Command[]> {
    const found: Command[] = [];
    for (const c of calls) {
      const rec = await messaging.recordedToolResult(c.callId);
      if (!rec) continue;
      logger.info("a call sent again had been answered; its recorded answer is applied", { callId: c.callId });
      found.push(await toolResultCommand(owner, { nodeId: c.nodeId, callId: c.callId, ...rec.result }));
    }
    return found;
  }

  /**
   * The journal rows, the execution row (on status changes), then the events — one after
   * another, so subscribers (and SSE clients, which stop at the terminal event) see a step's
   * events in order and find the rows they announce. Then, at the end, the parent is told.
   * `prev` null = a redo after a crash: write everything again.
   */
  async function record(prev: ExecutionState | null, state: ExecutionState, effects: Effect[], checkpointVersion: number): Promise<void> {
    const steps = [{ prev, state, effects, version: checkpointVersion }];
    const since = performance.now();
    const numbered = await writeRecords(steps);
    await sendCancellations(steps);
    if (performance.now() - since > STALE_RECORDS_MS) await notFenced(numbered);
    await publishRecords(numbered);
  }

  /**
   * The journal rows and execution-row updates of consecutive steps of one execution, in one
   * statement (the store merges writes of one row by step). Resolves with the steps, numbered
   * as their events and rows are, once the rows are written.
   */
  async function writeRecords(steps: readonly StepToRecord[], carried: readonly StepToRecord[] = []): Promise<StepToRecord[]> {
    // Step number: rises across checkpoint rebuilds, so event ids and journal order never repeat.
    const number = (s: StepToRecord): StepToRecord => ({ ...s, version: s.version + (s.state.versionBase ?? 0) });
    const numbered = steps.map(number);
    // The journal rows of earlier links not known written (schedule); their execution-row
    // patches, if any, are theirs to write: a later link's statement carries only rows.
    const before = carried.map(number).map((s) => ({ entries: records(s.prev, s.state, s.effects, s.version).entries, executions: [] }));
    const written = [...before, ...numbered.map((s) => records(s.prev, s.state, s.effects, s.version))];
    const batch: StepRecords = written.length === 1 ? written[0]! : { entries: written.flatMap((r) => r.entries), executions: written.flatMap((r) => r.executions) };
    if (batch.entries.length > 0 || batch.executions.length > 0) await recordWriter.write(batch);
    return numbered;
  }

  /**
   * The events of consecutive steps whose rows are written, in order; settles when the server
   * has confirmed them all and a finished execution's parent has been told.
   */
  async function publishRecords(numbered: readonly StepToRecord[]): Promise<void> {
    // Published without waiting in between: each publish is written to the one connection
    // synchronously, in call order, so the stream keeps the steps' order; only the acks overlap.
    const confirmed: Promise<void>[] = [];
    for (const s of numbered) {
      let i = 0;
      for (const e of s.effects) {
        i++;
        // An event a rebuild tells again goes under the id its first step gave it, when known: a
        // stalled executor's late copy is then dropped by the stream (Effect `origin`).
        if (e.kind === "emit") confirmed.push(publishEngineEvent(messaging, s.state, e.event, `evt:${s.state.executionId}:${e.origin?.step ?? s.version}:${e.origin?.index ?? i}`));
      }
    }
    // Subscribers (the SSE stream, a parent waiting on node events) wait for these: when
    // one execution is writing records, out now; with more, a turn's events share a write.
    if (confirmed.length > 0 && pipes.size <= 1) messaging.bus.sendNow();
    await Promise.all(confirmed);
    for (const [i, s] of numbered.entries()) {
      metrics.step(s.prev, s.state, s.effects);
      // Steps redone together share their checkpoint's state: its end or pause is told once, after the last.
      if (s.prev === null && numbered.slice(i + 1).some((n) => n.prev === null && n.state.executionId === s.state.executionId)) continue;
      if (isFinished(s.state)) {
        if (s.prev === null || !isFinished(s.prev)) await finished(s.state);
      } else if (s.state.parent && pauseChanged(s.prev, s.state)) {
        await tellParentPaused(s.state, s.version);
      }
    }
  }

  /**
   * Whether a sub-run's step made it paused or running again, which its parent is told. A step
   * carried out again (`prev` null, after a crash) tells again unless the run never paused:
   * its first telling may have been lost, and the parent takes news of a step once.
   */
  function pauseChanged(prev: ExecutionState | null, state: ExecutionState): boolean {
    if (prev === null) return state.pauseSeq > 0;
    return (prev.status === "paused") !== (state.status === "paused");
  }

  /** Tells a sub-run's parent that it is paused (a review waits in it) or runs on; `step`: the step's number. */
  async function tellParentPaused(state: ExecutionState, step: number): Promise<void> {
    const parent = state.parent!;
    await messaging.sendCommand("execution.child_paused", {
      executionId: parent.executionId, tenantId: state.tenantId, nodeId: parent.nodeId, childKey: parent.childKey, childExecutionId: state.executionId,
      paused: state.status === "paused", seq: step, reason: state.status === "paused" ? (state.pause?.reason ?? "") : "",
    }, `child-paused:${state.executionId}:${step}`);
  }

  /** Carries out effects again: after a crash (`prev` null) or from a checkpoint rebuilt from the journal. */
  async function perform(prev: ExecutionState | null, state: ExecutionState, effects: Effect[], checkpointVersion: number): Promise<void> {
    await Promise.all([dispatch(state, effects, true), record(prev, state, effects, checkpointVersion)]);
  }

  /**
   * Carries out again the effects of the steps a checkpoint holds (its carried groups, then its
   * outbox), after a crash or a failure. Their rows and the execution row go in one statement
   * (all or none), their events out in the steps' order, and the run's end or pause is told
   * once, after the last: every step is redone with the checkpoint's state, its last, so one
   * at a time the first one's records would write the row as ended and end the run (outbox
   * dropped with the expiry, parent told, slot freed) before a later one's failed, for good.
   */
  async function performAll(state: ExecutionState, groups: readonly { version: number; effects: Effect[] }[]): Promise<void> {
    if (groups.length === 0) return;
    await Promise.all([
      (async () => {
        for (const g of groups) await dispatch(state, g.effects, true);
      })(),
      (async () => {
        const steps = groups.map((g) => ({ prev: null, state, effects: g.effects, version: g.version }));
        const numbered = await writeRecords(steps);
        await sendCancellations(steps);
        await publishRecords(numbered);
      })(),
    ]);
  }

  /** The journal rows of a step, and the execution row when the status (or pause point) changed. */
  function records(prev: ExecutionState | null, state: ExecutionState, effects: Effect[], version: number): StepRecords {
    const entries = effects.flatMap((e) => (e.kind === "journal" ? [{
      tenantId: state.tenantId, executionId: state.executionId, nodeId: e.entry.nodeId, nodeType: e.entry.nodeType, attempt: e.entry.attempt, status: e.entry.status,
      ...(e.entry.input !== undefined ? { input: e.entry.input } : {}),
      ...(e.entry.output !== undefined ? { output: e.entry.output } : {}),
      ...(e.entry.error !== undefined ? { error: e.entry.error } : {}),
      ...(e.entry.errorCode !== undefined ? { errorCode: e.entry.errorCode } : {}),
      ...(e.entry.retryable !== undefined ? { retryable: e.entry.retryable } : {}),
      ...(e.entry.toolCalls !== undefined ? { toolCalls: e.entry.toolCalls } : {}),
      ...(e.entry.tokenUsage !== undefined ? { tokenUsage: e.entry.tokenUsage } : {}),
      ...(e.entry.durationMs !== undefined ? { durationMs: e.entry.durationMs } : {}),
      ...(e.entry.startedAt ? { startedAt: new Date(e.entry.startedAt) } : {}),
      ...(e.entry.completedAt ? { completedAt: new Date(e.entry.completedAt) } : {}),
      stepVersion: version,
    }] : []));
    const executions = changesRow(prev, state)
      ? [{
          id: state.executionId,
          tenantId: state.tenantId,
          stepVersion: version,
          patch: {
            status: state.status,
            currentState: state.pause?.nodeId ?? state.lastNode ?? null,
            context: state.context,
            ...(prev === null ? { startedAt: new Date(state.startedAt) } : {}),
            ...(state.output !== undefined ? { output: state.output } : {}),
            ...(state.error ? { error: `${state.error.code}: ${state.error.message}` } : {}),
            ...(state.finishedAt ? { completedAt: new Date(state.finishedAt) } : {}),
            ...(state.deadlineAt ? { deadlineAt: new Date(state.deadlineAt) } : {}),
            ...(state.tokenUsage ? { tokenUsage: state.tokenUsage } : {}),
            subRunPauses: subRunPauses(state),
          },
        }]
      : [];
    return { entries, executions };
  }

  /**
   * Whether a step changes the execution row: its status, pause point or pauses in sub-runs
   * changed (or a redo, which writes everything). The row is written before the step's events,
   * so it says what was announced (rebuild() relies on it).
   */
  function changesRow(prev: ExecutionState | null, state: ExecutionState): boolean {
    return prev === null || prev.status !== state.status || prev.pause?.nodeId !== state.pause?.nodeId
      || ((prev.subRuns !== undefined || state.subRuns !== undefined) && !sameIds(subRunPauses(prev), subRunPauses(state)));
  }

  async function finished(state: ExecutionState): Promise<void> {
    if (state.parent) {
      await messaging.sendCommand("execution.child_result", {
        executionId: state.parent.executionId, tenantId: state.tenantId, nodeId: state.parent.nodeId, childKey: state.parent.childKey,
        childExecutionId: state.executionId, status: state.status,
        ...(state.status === "completed" ? { output: valueFromJson(state.output ?? null) } : {}),
        // A cancelled child tells its reason too (state.error: BATON_CANCELLED, the reason).
        ...(state.status !== "completed" && state.error ? { error: { code: state.error.code, message: state.error.message, retryable: state.status === "failed" && state.error.retryable === true } } : {}),
      }, `child-result:${state.executionId}`);
    }
    latest.delete(state.executionId);
    // The run's last effects are carried out: its checkpoint stays until it expires, without
    // its outbox, so that a command still to come (a deadline timer, a result after a cancel)
    // does not take it for a crash's leftovers and carry out the last step again. In the same
    // round trip as the expiry, and in place: a new version would make the checkpoint permanent.
    await checkpoints.expire?.(state.executionId, undefined, { dropUnversioned: true });
    if (!state.parent) await slotFreed(state.tenantId, state.executionId);
  }

  async function toEngineCommand(cmd: AnyCommand): Promise<{ executionId: number; tenantId: string; command: Command }> {
    switch (cmd.name) {
      case "execution.start": {
        const m = cmd.message;
        // The input is the row's, taken at admission (applyNow): a start names its row and does
        // not carry the input, which may be larger than a message may be. One from an older
        // sender that still carries it is read the same way.
        const command: EngineStart = {
          kind: "start",
          input: {},
          ...(m.deadline ? { deadline: new Date(m.deadline).toISOString() } : {}),
          ...(m.parentExecutionId && m.parentNodeId ? { parent: { executionId: m.parentExecutionId, nodeId: m.parentNodeId, childKey: m.childKey } } : {}),
          ...(m.rootExecutionId ? { root: m.rootExecutionId } : {}),
          ...(m.definitionRef ? { definitionRef: m.definitionRef } : {}),
        };
        // A fork's starting state is read at admission (forkFrom): from its row once kept there.
        if (m.forkOfExecutionId) forkRefs.set(command, { executionId: m.forkOfExecutionId, version: m.forkOfVersion, ...(m.contextPatch ? { contextPatch: m.contextPatch } : {}) });
        return { executionId: m.executionId, tenantId: m.tenantId, command };
      }
      case "execution.resume": {
        const m = cmd.message;
        const action = m.action === "edit" || m.action === "reject" ? m.action : "approve";
        return {
          executionId: m.executionId,
          tenantId: m.tenantId,
          command: { kind: "resume", nodeId: m.nodeId, action, ...(m.data ? { data: m.data } : {}), ...(m.comment ? { comment: m.comment } : {}), ...(m.reviewer ? { reviewer: m.reviewer } : {}), ...(m.attempt ? { attempt: m.attempt } : {}) },
        };
      }
      case "execution.cancel":
        return { executionId: cmd.message.executionId, tenantId: cmd.message.tenantId, command: { kind: "cancel", reason: cmd.message.reason || "cancelled" } };
      case "execution.continue":
        return { executionId: cmd.message.executionId, tenantId: cmd.message.tenantId, command: { kind: "continue" } };
      case "execution.timer": {
        const m = cmd.message;
        const wait = Date.parse(m.dueAt) - clock().getTime();
        if (wait > 0) throw TimerNotDue(m.timerId, { retryDelayMs: wait });
        return { executionId: m.executionId, tenantId: m.tenantId, command: { kind: "timer", timerId: m.timerId } };
      }
      case "execution.child_result": {
        const m = cmd.message;
        const status = m.status === "completed" || m.status === "cancelled" ? m.status : "failed";
        return {
          executionId: m.executionId,
          tenantId: m.tenantId,
          command: {
            kind: "childResult", nodeId: m.nodeId, childKey: m.childKey, status,
            ...(status === "completed" ? { output: await childOutput({ tenantId: m.tenantId, executionId: m.executionId }, valueToJson(m.output) ?? null) } : {}),
            ...(m.error ? { error: { code: m.error.code, message: m.error.message, ...(m.error.retryable ? { retryable: true } : {}) } } : {}),
          },
        };
      }
      case "execution.child_paused": {
        const m = cmd.message;
        return {
          executionId: m.executionId,
          tenantId: m.tenantId,
          command: { kind: "childPaused", nodeId: m.nodeId, childKey: m.childKey, childExecutionId: m.childExecutionId, paused: m.paused, seq: m.seq, ...(m.reason ? { reason: m.reason } : {}) },
        };
      }
      case "tool.result": {
        const m = cmd.message;
        const command = await toolResultCommand({ tenantId: m.tenantId, executionId: m.executionId }, { nodeId: m.nodeId, callId: m.callId, ok: m.ok, durationMs: m.durationMs, ...(m.ok ? { output: valueToJson(m.output) ?? null } : {}), ...(m.error ? { error: m.error } : {}) });
        resultAttempts.set(command, m.attempt);
        return { executionId: m.executionId, tenantId: m.tenantId, command };
      }
    }
  }

  /** Large values (large.ts): tool results, node outputs and inputs, the final output. */
  const large = createLargeValues({ store, bus: messaging.bus, logger, thresholdBytes: largeResultBytes });
  /** Deletes finished runs past their retention, then the blobs no execution uses any more (blob-pruner.ts). */
  const pruner = createBlobPruner({
    store, logger, intervalMs: opts.blobPruneIntervalMs ?? 0, graceMs: opts.blobGraceMs ?? 8 * 86_400_000, retentionMs: opts.executionRetentionMs ?? 0, learnedRetentionMs: opts.learnedRetentionMs ?? 0, clock,
  });
  /** Tool-call arguments above the same threshold travel by reference (large-args.ts). */
  const largeArgs = createLargeArgs({ bus: messaging.bus, logger, thresholdBytes: largeResultBytes });

  function toolResultCommand(owner: Owner, a: ToolAnswer): Promise<Command> {
    return large.toolResultCommand(owner, a);
  }

  /**
   * Whether a tool result the state (read from Redis, not the cache) ignored may be early
   * rather than stale: its execution is live and its node has not moved past the call's
   * attempt. A repeat of an answer already applied to a finished attempt or fan item, or an
   * answer of an earlier attempt, is stale and dropped at once.
   */
  function mayBeEarly(c: Command, s: ExecutionState | null): boolean {
    if (c.kind !== "toolResult" || s === null || (s.status !== "running" && s.status !== "paused")) return false;
    const run = s.nodes[c.nodeId];
    const attempt = resultAttempts.get(c);
    if (!run || attempt === undefined) return true;
    if (run.attempt !== attempt) return run.attempt < attempt;
    if (settledFanCall(run, s.executionId, c.nodeId, c.callId)) return false;
    return run.status === "running" || run.status === "paused";
  }

  /** Large values are stored once and referenced, so checkpoints, events and the journal stay small. */
  function canonical(owner: Owner, value: JsonValue): Promise<JsonValue> {
    return large.canonical(owner, value);
  }

  /** A child's output as its parent keeps it: the child's blobs it refers to become the parent's uses too (the child's row may go first). */
  async function childOutput(parent: Owner, value: JsonValue): Promise<JsonValue> {
    await large.adopt(parent, value);
    return canonical(parent, value);
  }

  async function stepLoaded(args: Parameters<typeof step>[0], blobs: Map<string, JsonValue>): Promise<Awaited<ReturnType<typeof step>>> {
    const executionId = args.state?.executionId ?? args.identity!.executionId;
    const tenantId = args.state?.tenantId ?? args.identity!.tenantId;
    const missingBlobs = new Set<string>();
    for (;;) {
      try {
        return await large.shrinkStep(await step({ ...args, blobs, missingBlobs }), args.definition, args.state?.context);
      } catch (err) {
        if (!(err instanceof BlobsNeeded)) throw err;
        await loadBlobs({ tenantId, executionId }, err.refs, blobs, missingBlobs);
      }
    }
  }

  /**
   * Reads the blobs `refs` name into `blobs`; those the tenant has none of go into `missing`,
   * so that the step taken again fails the run (BATON_ENGINE_BLOBS_MISSING) instead of asking
   * for them for ever.
   */
  async function loadBlobs(owner: Owner, refs: readonly string[], blobs: Map<string, JsonValue>, missing: Set<string>): Promise<void> {
    // A reference of another form than the store's (`blob:abc`, written by hand) names no blob.
    const hashes = refs.filter((r) => BLOB_REF_RE.test(r)).map((r) => r.slice("blob:".length));
    for (const r of (await store.blobs.getMany(owner.tenantId, hashes)).values()) blobs.set(`blob:${r.hash}`, r.data);
    const gone = refs.filter((r) => !blobs.has(r));
    if (gone.length === 0) return;
    for (const r of gone) missing.add(r);
    const err = BlobsMissing(owner.executionId, gone.join(", "));
    logger.warn("the execution refers to blobs that are not stored; it fails", { executionId: owner.executionId, code: err.code, error: err.message });
  }

  /**
   * The runs above a sub-workflow run whose parent is `parentId`: how many (its nesting depth)
   * and the topmost (its root). A deleted parent ends the chain. Reads one row per level, so
   * it is used off the step path only: when a child starts, and when a run is rebuilt.
   */
  async function ancestry(tenantId: string, parentId: number | null): Promise<{ depth: number; root?: number }> {
    let depth = 0;
    let root: number | undefined;
    for (let id = parentId; id !== null && depth <= MAX_NESTING; depth++) {
      const parent = await store.executions.get(tenantId, id);
      if (!parent) break;
      root = parent.id;
      id = parent.parentExecutionId;
    }
    return { depth, ...(root !== undefined ? { root } : {}) };
  }

  /**
   * The start command as the row records it; a fork's from the starting state its row keeps.
   * A sub-workflow run's root (the top of its chain of parents) is not on its row: it is found
   * by walking the parents' rows, which happens only when a run is rebuilt.
   */
  async function startCommandOf(row: ExecutionRecord): Promise<EngineStart> {
    const fork = forkStartOnRow(row);
    if (row.forkedFromExecutionId !== null && !fork) throw ForkStartMissing(row.id);
    const { root } = await ancestry(row.tenantId, row.parentExecutionId);
    return {
      kind: "start",
      input: row.input,
      ...(row.deadlineAt ? { deadline: row.deadlineAt.toISOString() } : {}),
      ...(row.parentExecutionId && row.parentNodeId ? { parent: { executionId: row.parentExecutionId, nodeId: row.parentNodeId, childKey: row.childKey ?? "" } } : {}),
      ...(root !== undefined ? { root } : {}),
      ...(row.definitionRef ? { definitionRef: row.definitionRef } : {}),
      ...(fork ? { fork } : {}),
    };
  }

  /**
   * The state a fork starts from: kept on its row (by the gateway, which creates the fork, or
   * by an earlier admission), else — a fork created before the gateway kept it — read from
   * the source's checkpoint history in Redis (and kept on the row by this admission).
   */
  async function forkFrom(row: ExecutionRecord, start: EngineStart): Promise<ForkStart | undefined> {
    const kept = forkStartOnRow(row);
    if (kept) return kept;
    const ref = forkRefs.get(start);
    if (!ref) {
      if (row.forkedFromExecutionId !== null) throw ForkStartMissing(row.id);
      return undefined;
    }
    const source = await checkpoints.getVersion?.(ref.executionId, ref.version) ?? null;
    if (!source) throw ForkSourceMissing(ref.executionId, ref.version);
    return forkStartOf(source.state, ref.executionId, ref.version, ref.contextPatch);
  }

  /** A tenant's oldest waiting executions are sent their start again, as many as its cap leaves room for (see admit). */
  async function wakeQueued(tenantId: string, cause: string, idleMs = 0): Promise<number> {
    const cap = opts.tenantMaxRunning ?? 0;
    const rows = await store.executions.listStartable({ tenantId, cap, limit: 100, idleMs });
    for (const r of rows) {
      await messaging.sendCommand("execution.start", {
        executionId: r.id, tenantId, workflowId: r.agentWorkflowId, workflowVersion: r.workflowVersion,
        triggerEvent: r.triggerEvent ?? "", deadline: r.deadlineAt?.toISOString() ?? "",
      }, `start:${r.id}:${cause}`);
    }
    if (rows.length > 0) logger.info("waiting executions sent their start again", { tenantId, executionIds: rows.map((r) => r.id), cause });
    return rows.length;
  }

  /** After a run of the tenant ended (a slot may be free): start the next waiting ones. Failures are left to the sweep. */
  async function slotFreed(tenantId: string, executionId: number): Promise<void> {
    if ((opts.tenantMaxRunning ?? 0) <= 0) return;
    await wakeQueued(tenantId, `after:${executionId}`).catch((err: unknown) =>
      logger.warn("could not start the executions waiting for a slot; the recovery sweep will", { tenantId, error: errorMessage(err) }));
  }

  /**
   * A cancel of an execution that never started: the row goes from queued to cancelled (a start
   * racing it finds it cancelled and is dropped), `execution.cancelled` is published and a
   * parent waiting for it is told. A cancel that finds the row cancelled this way already (a
   * redelivery after a crash) publishes again; the message id makes that harmless.
   */
  async function cancelQueued(row: ExecutionRecord, reason: string): Promise<void> {
    if (row.status === "queued") {
      const done = await store.executions.cancelQueued(row.id, row.tenantId, clock(), reason);
      // It started meanwhile: the redelivered cancel applies to its checkpoint.
      if (!done) throw NotStarted(row.id, { retryDelayMs: 250 });
    }
    await messaging.publishEvent("execution.cancelled", { tenantId: row.tenantId, id: row.id, agentWorkflowId: row.agentWorkflowId, reason }, `evt:${row.id}:cancelled-queued`);
    metrics.ended("cancelled", row.parentExecutionId !== null);
    if (row.parentExecutionId && row.parentNodeId) {
      await messaging.sendCommand("execution.child_result", {
        executionId: row.parentExecutionId, tenantId: row.tenantId, nodeId: row.parentNodeId, childKey: row.childKey ?? "",
        childExecutionId: row.id, status: "cancelled", error: { code: "BATON_CANCELLED", message: reason, retryable: false },
      }, `child-result:${row.id}`);
    }
    logger.info("queued execution cancelled", { executionId: row.id });
  }

  /**
   * Redis lost the checkpoint of an active execution: replay the journal, write the result,
   * re-issue outstanding work. No state when the journal is empty: no step's records were
   * written (the executor died between admission and the first checkpoint, or before that
   * step's records, or it stalled before them), so the start is to be applied afresh, records
   * and events included, numbered past the floor the journal was fenced at.
   */
  async function rebuild(row: ExecutionRecord, definition: WorkflowDefinition, blobs: Map<string, JsonValue>, over?: { version: number }, endUntold = false): Promise<Rebuilt> {
    // This process's records of the run still being written land first (or fail: then they are
    // the replay's to write, see unrecorded below).
    await recordsDone(row.id)?.catch(() => undefined);
    // The journal is fenced before the read the rebuild goes by: a statement of the lost
    // checkpoint's steps still running lands first; one that comes later (its executor stalled
    // between its checkpoint and its records) is refused, and its events never go out, since
    // the rebuilt state takes that step again (chaos seed 603; ADR 004). An empty journal too:
    // the start is then applied afresh, and numbered past the floor, not from 1 again, where a
    // stalled executor's first steps, landing later, would share its step numbers and so its
    // events' message ids (chaos seed 810).
    const fence = await store.executions.fenceJournal(row.id, row.tenantId, REBUILD_ROOM);
    const claim = claimRebuild(row.id, fence);
    try {
      return await rebuildFenced(row, definition, blobs, fence, over, endUntold);
    } finally {
      await claim.release();
    }
  }

  /**
   * Claims run `executionId` for this rebuild, which fenced its journal at `floor`, and renews the
   * claim while it works (REBUILD_CLAIM_MS) until released. A claim that could not be written
   * only leaves the executors waiting for this rebuild to judge by FENCED_WAIT_MS.
   */
  function claimRebuild(executionId: number, floor: number): { release(): Promise<void> } {
    if (!checkpoints.claimRebuild) return { release: async () => undefined };
    const since = performance.now();
    const renew = (): void => {
      if (performance.now() - since > REBUILD_CLAIM_MAX_MS) return;
      checkpoints.claimRebuild!(executionId, floor, instance, REBUILD_CLAIM_MS).catch((err: unknown) => logger.warn("a rebuild's claim could not be written", { executionId, floor, error: errorMessage(err) }));
    };
    renew();
    const timer = setInterval(renew, REBUILD_CLAIM_MS / 3);
    timer.unref();
    return {
      release: async () => {
        clearInterval(timer);
        await checkpoints.releaseRebuild?.(executionId, floor, instance).catch(() => undefined);
      },
    };
  }

  /** Whether a rebuild by another executor that fenced the journal at `floor` or later holds its claim on the run. */
  async function rebuildUnderWay(executionId: number, floor: number): Promise<boolean> {
    const held = await checkpoints.rebuildClaim?.(executionId).catch(() => null);
    return held != null && held.floor >= floor && held.owner !== instance;
  }

  /** The rebuild of {@link rebuild} once it has fenced the journal at `fence`. */
  async function rebuildFenced(row: ExecutionRecord, definition: WorkflowDefinition, blobs: Map<string, JsonValue>, fence: number, over: { version: number } | undefined, endUntold: boolean): Promise<Rebuilt> {
    if (!TERMINAL.has(row.status)) {
      // A statement that landed before the fence may have ended the run (a cancel, its last
      // step) after the row was read: rebuilt from that row, the run would go on as if it had
      // not, and a later command could end it otherwise (chaos seed 994: a cancelled run rebuilt
      // running, which a child's result then failed). Applied again, the command reads the row
      // as it is now.
      const now = await store.executions.getById(row.id);
      if (now && TERMINAL.has(now.status)) throw new StaleCheckpoint();
    }
    let journal = await store.nodeExecutions.listForReplay(row.id);
    // An empty journal: the start is applied afresh, unless the run ended (it ended at its
    // start, writing no row) or a checkpoint is rebuilt over; then the replay tells its steps.
    if (journal.length === 0 && !over && !endUntold) return { state: null, floor: fence };
    const identity = { executionId: row.id, tenantId: row.tenantId, workflowId: row.agentWorkflowId, workflowVersion: row.workflowVersion, ...(row.agentId !== null ? { agentId: row.agentId } : {}) };
    // A pause in sub-runs is not journaled: it is learned again from the sub-runs' rows, with
    // the reasons they would tell, and compared with what the row says was announced.
    const pausedSubRuns = await pausedSubRunsOf(row);
    let replay: Awaited<ReturnType<typeof replayJournal>> | undefined;
    const missingBlobs = new Set<string>();
    let regraced = false;
    // The last step whose events went out: steps past it whose rows are in the journal had
    // their executor die between the rows and the events (chaos seed 841), told again below.
    let published = await publishedThrough(row, highestStep(journal));
    let announced = await announcedPauses(row, published);
    for (;;) {
      try {
        replay = await replayJournal({
          definition, identity, start: await startCommandOf(row), startedAt: (row.startedAt ?? row.createdAt).toISOString(), blobs, missingBlobs, pausedSubRuns,
          announced,
          // The row keeps the cancel's reason in its error (`BATON_CANCELLED: <reason>`); a run cancelled before it did tells "cancelled".
          ...(row.status === "cancelled" ? { cancelled: cancelReasonOf(row.error) } : {}),
          ...published,
          journal: journal.map((j) => ({
            nodeId: j.nodeId, nodeType: j.nodeType, attempt: j.attempt, status: j.status as never,
            ...(j.output !== null ? { output: j.output } : {}), ...(j.error !== null ? { error: j.error } : {}),
            ...(j.errorCode !== null ? { errorCode: j.errorCode } : {}), ...(j.retryable !== null ? { retryable: j.retryable } : {}),
            ...(j.durationMs !== null ? { durationMs: j.durationMs } : {}),
            startedAt: j.startedAt.toISOString(), ...(j.completedAt ? { completedAt: j.completedAt.toISOString() } : {}),
            stepVersion: j.stepVersion, beganStep: j.beganStep,
          })),
        });
        // Steps whose records are not in the journal: their executor died writing them (the
        // rebuild writes them), or another replica is writing them now. Give that one a moment
        // (its statements take milliseconds), then read the journal again.
        if (replay.unrecorded.length && !regraced) {
          regraced = true;
          await new Promise((r) => setTimeout(r, UNRECORDED_GRACE_MS));
          journal = await store.nodeExecutions.listForReplay(row.id);
          published = await publishedThrough(row, highestStep(journal));
          announced = await announcedPauses(row, published);
          continue;
        }
        break;
      } catch (err) {
        if (!(err instanceof BlobsNeeded)) throw err;
        await loadBlobs({ tenantId: row.tenantId, executionId: row.id }, err.refs, blobs, missingBlobs);
      }
    }
    // Journal step numbers already include earlier bases; leave room for steps that wrote no rows.
    // At least the fence's floor, which refuses every record numbered below it. The fence counts
    // every row written before it (ADR 004, "the fence counts the steps of the statements it
    // waited for"), so the two differ only when another rebuild fenced since and wrote past it:
    // that one's fence then refuses this one's records.
    const floor = Math.max(fence, highestStep(journal) + REBUILD_ROOM);
    if (replay.unplaced.length) logger.warn("journal rows the replay could not place", { executionId: row.id, rows: replay.unplaced.map((j) => `${j.nodeId}#${j.attempt}`) });
    // Large values the replay recomputed or resolved are referenced, as a step's would be.
    const shrunk = await large.shrinkRebuilt({ state: replay.state, effects: [...replay.rearm, ...replay.unrecorded], more: false }, definition);
    const rearm = shrunk.effects.slice(0, replay.rearm.length);
    const unrecorded = shrunk.effects.slice(replay.rearm.length);
    // Numbered past every version and step written before the loss: a replica that still holds
    // one of them in its cache cannot find it in Redis again and write over this state (an
    // ABA), and the journal's step numbers go on from there (records()).
    // Rebuilt: steps lost with the checkpoint may have sent calls that this state's later steps
    // send again under the same ids, past the queue's duplicate window (see sendCalls).
    let state: ExecutionState = { ...shrunk.state, versionBase: 0, rebuilt: true };
    // The records of the steps whose rows and events were never written (an executor died
    // writing them, and their outbox went with the checkpoint), then the events of the pauses
    // in sub-runs that changed while the checkpoint was lost (the journal does not hold them;
    // the row says what was announced).
    const told: Effect[] = [...unrecorded, ...replay.subRunNews.map((event): Effect => ({ kind: "emit", event }))];
    // The outbox holds them too, so a failure or a crash before they are written and published
    // leaves them to the next delivery, which redoes it (a pause learned here and left out of it
    // was never announced, while the redo wrote the row saying it was: chaos seed 810).
    const outbox = [...rearm, ...told];
    // Over a checkpoint numbered below the floor (see applyNow): in its place (compare-and-set),
    // its versions going on, with a base that numbers the steps from just past the floor. Not
    // the floor itself: the versions go on from the old checkpoint's (a thousand and more after
    // a rebuild), and steps numbered that far past the floor were past the next rebuild's fence
    // too (it leaves REBUILD_ROOM above the steps recorded), which then refused none of this
    // state's records: two states of one run both had their steps written and told (chaos seed 1013).
    if (over) state = { ...state, versionBase: floor - over.version };
    let written;
    try {
      written = over
        ? await writeCheckpoint(row.id, { ...state, outbox }, over.version)
        : await writeCheckpoint(row.id, { ...state, outbox }, 0, { firstVersionAfter: floor });
      if (!over && written.version <= floor) {
        // A store that numbers from 1 again: keep the step numbers apart with a base instead.
        state = { ...state, versionBase: floor - written.version };
        written = await writeCheckpoint(row.id, { ...state, outbox }, written.version);
      }
    } catch (err) {
      // Another replica wrote a checkpoint since the read, numbered below this rebuild's fence
      // (a rebuild that fenced before this one, or a step on the lost state): it is rebuilt
      // over, at once, when the command is applied again. No other rebuild is known to be under
      // way (this one fenced last), so none is waited for (FENCED_WAIT_MS); one that fenced
      // since refuses records in turn, and is waited for then.
      if (hasCode(err) && err.code === "BATON_CHECKPOINT_CONFLICT") {
        const known = fenced.get(row.id);
        if (!known || fence > known.floor) fenced.set(row.id, { floor: fence, at: -Infinity });
      }
      throw err;
    }
    logger.warn("checkpoint rebuilt from the journal", { executionId: row.id, status: state.status, rearmed: rearm.length, announcedThrough: published.announcedThrough ?? null });
    metrics.rebuilt();
    if (endUntold && !told.some((e) => e.kind === "emit" && END_EVENTS.has(e.event.kind))) {
      // A contradiction: the stream holds no end of the run, and the replay finds it told. What it read, for whoever looks into it (chaos seed 959).
      logger.warn("a finished run's end was never published, and its rebuild finds nothing of it to tell", { executionId: row.id, announcedThrough: published.announcedThrough ?? null, announcedByKind: published.announcedByKind ?? null, createdAt: row.createdAt.toISOString() });
    }
    if (unrecorded.length) logger.warn("records of lost steps written again", { executionId: row.id, announcedThrough: published.announcedThrough ?? null, announcedByKind: published.announcedByKind ?? null, rows: unrecorded.flatMap((e) => (e.kind === "journal" ? [`${e.entry.nodeId}#${e.entry.attempt}:${e.entry.status}`] : [])) });
    // A row that does not say what the rebuilt state does is written again, whole; so is the row
    // of a run whose last steps were lost with their records (still active, the state finished):
    // carried out as a redo, the run's end is then written and told (its parent, its slot).
    const ended = isFinished(state) && (row.status !== state.status || endUntold);
    await perform(ended || rowOutdated(row, state) ? null : state, state, outbox, written.version);
    // A finished run's outbox went with its expiry (finished()): a new version would make the checkpoint permanent.
    if (ended && checkpoints.expire) return { state, version: written.version };
    const cleared = await writeCheckpoint(row.id, { ...state, outbox: [] }, written.version);
    return { state, version: cleared.version };
  }

  /**
   * Whether a run whose row has ended never published its end: the stream has no terminal event
   * of it, though it would still hold one (it holds an earlier event of the run, or messages from
   * before the run). Its last step's rows landed and its events did not; read only when a
   * command finds such a run without a checkpoint, which a run that ended well keeps for as long
   * as the stream keeps its events. A read that fails says no.
   */
  async function endUntold(row: ExecutionRecord): Promise<boolean> {
    try {
      const last = await messaging.bus.lastPerSubject(`${messaging.bus.prefix}.evt.execution.*.${row.tenantId}.${row.id}`);
      const types = last.map((m) => messaging.subjects.parseEvent(m.subject)?.type);
      if (types.some((t) => t !== undefined && END_EVENTS.has(t))) return false;
      if (last.length > 0) return true;
      const since = await messaging.bus.eventsKeptSince();
      return keepsAllOf(since, row);
    } catch (err) {
      logger.warn("the events of a finished run could not be read; a command for it is ignored", { executionId: row.id, error: errorMessage(err) });
      return false;
    }
  }

  /**
   * The highest step of a run whose events are on the event stream, from their message ids
   * (`evt:{run}:{step}:{n}`): a run's steps publish their events in order, each step's after
   * the previous step's are confirmed, so every step up to it was announced. The last event of
   * each of the run's subjects is read (the last overall is one of them); one subject per event
   * kind, so the last step of each kind comes with it. 0 when the run has no event on a stream
   * that would still hold them (none published). Neither, when that cannot be told (none kept,
   * ids of another form) or the read failed: the replay then takes every step whose rows are in
   * the journal as announced.
   *
   * The last event of a kind is not always its highest step: a stale history's copy of an
   * earlier step, published late (chaos seed 1116's third telling), can come after a later
   * history's events. When the last events put the highest step told below `journaled` (the
   * journal's highest step), the rebuild would tell the steps past it; before it does, every
   * step event of the run up to the last one read is read, and each kind's highest step taken.
   */
  async function publishedThrough(row: ExecutionRecord, journaled: number): Promise<Pick<ReplayInput, "announcedThrough" | "announcedByKind">> {
    let last;
    try {
      last = (await messaging.bus.lastPerSubject(messaging.subjects.executionEventsFilter(row.tenantId, row.id)))
        .filter((m) => Object.hasOwn(STEP_EVENTS, messaging.subjects.parseEvent(m.subject)?.type ?? ""));
    } catch (err) {
      logger.warn("the events a run published could not be read; its rebuild takes every journaled step as announced", { executionId: row.id, error: errorMessage(err) });
      return {};
    }
    const told = stepsTold(row.id, last);
    if (told.through !== undefined && told.through < journaled) {
      const until = Math.max(...last.map((m) => m.seq));
      const all = await allStepsTold(row, until).catch((err: unknown) => {
        logger.warn("the step events of a run could not all be read; its rebuild takes the last of each kind as the highest told", { executionId: row.id, error: errorMessage(err) });
        return undefined;
      });
      if (all?.through !== undefined) return { announcedThrough: all.through, announcedByKind: all.byKind };
    }
    if (told.through !== undefined) return { announcedThrough: told.through, announcedByKind: told.byKind };
    if (last.length > 0) return {};
    // No event of the run on the stream: none published (its first steps' rows written, their
    // executor dead before the events), or none kept any more. When the stream holds everything
    // published since before the run was created (its creation, while it has dropped nothing, or
    // its oldest message; a second's leeway for the clocks of NATS and Postgres), it would hold
    // the run's too: none was published.
    const since = await messaging.bus.eventsKeptSince().catch((err: unknown) => {
      logger.warn("the events stream could not be read; a rebuild of a run with no event on it takes every journaled step as announced", { executionId: row.id, error: errorMessage(err) });
      return null;
    });
    if (keepsAllOf(since, row)) return { announcedThrough: 0, announcedByKind: {} };
    // Chaos seeds 959 and 984 each showed a run rebuilt with no event on the stream and nothing told; this says why, should it recur.
    logger.warn("no event of the run is on the stream, which may not hold all from before the run: its rebuild takes every journaled step as announced", { executionId: row.id, eventsKeptSince: since?.toISOString() ?? null, createdAt: row.createdAt.toISOString() });
    return {};
  }

  /**
   * The highest step among run `runId`'s step events `messages` (their ids `evt:{run}:{step}:{n}`),
   * and each kind's, added to `told`.
   */
  function stepsTold(runId: number, messages: Iterable<BusMessage>, told: StepsTold = { byKind: {} }): StepsTold {
    for (const m of messages) {
      const id = /^evt:(\d+):(\d+):\d+$/.exec(m.meta.idempotencyKey ?? "");
      if (!id || Number(id[1]) !== runId) continue;
      const step = Number(id[2]);
      told.through = Math.max(told.through ?? 0, step);
      const kind = messaging.subjects.parseEvent(m.subject)?.type;
      if (kind !== undefined && Object.hasOwn(STEP_EVENTS, kind)) told.byKind[kind as EngineEvent["kind"]] = Math.max(told.byKind[kind as EngineEvent["kind"]] ?? 0, step);
    }
    return told;
  }

  /** {@link stepsTold} of every step event of the run on the stream, up to sequence `until` (rare: a rebuild that would tell steps again). */
  async function allStepsTold(row: ExecutionRecord, until: number): Promise<StepsTold> {
    const told: StepsTold = { byKind: {} };
    let reached = 0;
    const done = new AbortController();
    await messaging.bus.replay(messaging.subjects.executionEventsFilter(row.tenantId, row.id), { signal: AbortSignal.any([done.signal, AbortSignal.timeout(EVENTS_READ_MS)]) }, (msg) => {
      if (Object.hasOwn(STEP_EVENTS, messaging.subjects.parseEvent(msg.subject)?.type ?? "")) stepsTold(row.id, [msg], told);
      reached = msg.seq;
      if (reached >= until) done.abort();
    });
    if (reached < until) throw new Error(`the read stopped at sequence ${reached}, before ${until}`);
    return told;
  }

  /**
   * What the run had announced of its pauses in sub-runs, for a rebuild: what its row says,
   * unless the step that last patched the row never had its events published (its executor died
   * between the two, and Redis lost the checkpoint holding them). Then the row may name pauses
   * that were never told: when the run never published an `execution.paused`, nothing was
   * announced; else the announced pauses are read from its pause events (pausesTold). Before,
   * the rebuild took the row's word, and told an `execution.resumed` with no `execution.paused`
   * before it (chaos seed 975).
   */
  async function announcedPauses(row: ExecutionRecord, published: Pick<ReplayInput, "announcedThrough" | "announcedByKind">): Promise<PausesTold> {
    const told = { subRunPauses: row.subRunPauses, pausePoint: row.status === "paused" ? row.currentState : null };
    const through = published.announcedThrough;
    if (through === undefined || row.patchedStep === null || row.patchedStep <= through) return told;
    if (published.announcedByKind?.["execution.paused"] === undefined) return { subRunPauses: {}, pausePoint: null };
    return (await pausesTold(row)) ?? told;
  }

  /**
   * The pauses a run's events left standing: its `execution.paused` and `execution.resumed`
   * events read in order (rare: a rebuild whose row may name pauses never told). The pause point
   * is the node last told paused that still is. Undefined when they cannot all be read, or the
   * stream may have dropped some (it holds nothing from before the run).
   */
  async function pausesTold(row: ExecutionRecord): Promise<PausesTold | undefined> {
    const subjects = (["execution.paused", "execution.resumed"] as const).map((type) => messaging.subjects.event(type, row.tenantId, row.id));
    try {
      // A stream that no longer holds everything since the run began may have dropped a pause
      // that still stands; the row says it was told.
      const since = await messaging.bus.eventsKeptSince();
      if (!keepsAllOf(since, row)) return undefined;
      const last = (await Promise.all(subjects.map((s) => messaging.bus.lastPerSubject(s)))).flat();
      const until = Math.max(0, ...last.map((m) => m.seq));
      // Node → the sub-run its pause names (0: its own review), in the order last told.
      const paused = new Map<string, number>();
      let read = 0;
      if (until > 0) {
        const done = new AbortController();
        await messaging.bus.replay(subjects, { signal: AbortSignal.any([done.signal, AbortSignal.timeout(EVENTS_READ_MS)]) }, (msg) => {
          const e = decodeEventMessage(messaging.bus.prefix, msg);
          if (e?.type === "execution.paused") {
            paused.delete(e.message.nodeId);
            paused.set(e.message.nodeId, e.message.subExecutionId);
          } else if (e?.type === "execution.resumed") {
            paused.delete(e.message.nodeId);
          }
          read = msg.seq;
          if (read >= until) done.abort();
        });
      }
      if (read < until) throw new Error(`the read stopped at sequence ${read}, before ${until}`);
      const subRunPauses = Object.fromEntries([...paused].filter(([, sub]) => sub > 0));
      return { subRunPauses, pausePoint: [...paused.keys()].pop() ?? null };
    } catch (err) {
      logger.warn("the pause events of a run could not be read; its rebuild takes the pauses its row names as announced", { executionId: row.id, error: errorMessage(err) });
      return undefined;
    }
  }

  /** Whether an execution row differs from what a rebuilt, unfinished state would write: its status, pause point or pauses in sub-runs. */
  function rowOutdated(row: ExecutionRecord, state: ExecutionState): boolean {
    if (isFinished(state)) return false;
    return row.status !== state.status || (state.status === "paused" && row.currentState !== (state.pause?.nodeId ?? null))
      || !sameIds(row.subRunPauses, subRunPauses(state));
  }

  /**
   * A run's sub-runs that are paused (their rows say so), each with the reason it would tell
   * its parent (pauseReasonOf), as a checkpoint rebuilt from the journal learns them again.
   */
  async function pausedSubRunsOf(row: ExecutionRecord): Promise<LearnedSubRunPause[]> {
    const learned: LearnedSubRunPause[] = [];
    // One after another: a forEach may have many paused, and a rebuild is rare.
    for (const c of await store.executions.listChildren(row.tenantId, row.id, { status: "paused" })) {
      if (!c.parentNodeId || c.childKey === null) continue;
      const reason = await pauseReasonOf(c);
      learned.push({ nodeId: c.parentNodeId, childKey: c.childKey, childExecutionId: c.id, ...(reason ? { reason } : {}) });
    }
    return learned;
  }

  /**
   * The reason a paused run gives its parent (its pause point's): its checkpoint's; when Redis
   * lost that too, from its rows — its own review's (the review node's journal row, else its
   * pending review), else that of its paused sub-run at that node (the one its row names),
   * nested. Undefined when nothing says (the parent's pause then reads `review in sub-run <id>`).
   */
  async function pauseReasonOf(run: ExecutionRecord, depth = 0): Promise<string | undefined> {
    const cp = await checkpoints.get(run.id);
    if (cp?.state.status === "paused" && cp.state.pause) return cp.state.pause.reason;
    const at = run.currentState;
    if (!at || depth >= MAX_NESTING) return undefined;
    const own = await store.nodeExecutions.latest(run.id, at);
    if (own?.status === "paused") {
      const reason = isJsonObject(own.input) ? own.input.reason : undefined;
      if (typeof reason === "string") return reason;
      return (await store.reviews.list(run.tenantId, { status: "pending", executionId: run.id })).find((r) => r.nodeId === at)?.reason;
    }
    const below = (await store.executions.listChildren(run.tenantId, run.id, { status: "paused" })).filter((c) => c.parentNodeId === at);
    const sub = below.find((c) => c.id === run.subRunPauses[at]) ?? below[0];
    return sub ? subRunReason(sub.id, await pauseReasonOf(sub, depth + 1)) : undefined;
  }

  /**
   * Applies `first`, then `more` (tool results that queued up behind it) in the same step:
   * one checkpoint write, one dispatch and one batch of records for all of them.
   */
  /** Steps being applied now, across executions (see sendCalls). */
  let applying = 0;

  /**
   * Applies a command; when the cached checkpoint was behind another replica's writes (or
   * Redis lost it), applies it again from what Redis holds now and says so (true).
   */
  async function applyFresh(executionId: number, tenantId: string, command: Command, more: readonly Command[], outcome: ApplyOutcome): Promise<boolean> {
    try {
      await apply(executionId, tenantId, command, more, outcome);
      return false;
    } catch (err) {
      if (!(err instanceof StaleCheckpoint) && !(hasCode(err) && err.code === "BATON_CHECKPOINT_CONFLICT")) throw err;
      latest.delete(executionId);
      await apply(executionId, tenantId, command, more, outcome);
      return true;
    }
  }

  /**
   * {@link applyFresh}, then cancels the calls that the step which lost its compare-and-set sent
   * and the step taken again did not (see {@link cancelOrphans}). Every path that applies a
   * command goes through here, so no orphan call keeps a worker busy for nothing.
   */
  async function applyFreshAndCancelOrphans(executionId: number, tenantId: string, command: Command, more: readonly Command[], outcome: ApplyOutcome): Promise<void> {
    if (await applyFresh(executionId, tenantId, command, more, outcome)) await cancelOrphans(executionId, tenantId, outcome.unconfirmed);
  }

  /**
   * Leaves the rest of a long run of inline steps for later: `execution.continue` goes to the
   * back of the commands stream, so the commands queued meanwhile go first, and the steps left
   * are taken under a command of their own, delivered again until their records and events are
   * out. (Taken in this process with no command behind them, a crash between the last step's
   * rows and its events left the run's end untold: nothing would deliver anything again.) Sent
   * before the command that took these steps is acknowledged; `step` (the checkpoint's step
   * number) keeps one message per turn.
   */
  async function continueLater(executionId: number, tenantId: string, step: number): Promise<void> {
    try {
      await messaging.sendCommand("execution.continue", { executionId, tenantId, reason: "inline steps left for later" }, `continue:${executionId}:${step}`);
    } catch (err) {
      // Delivered again, the command finds its step applied and goes on with the ready nodes.
      throw EffectsFailed(executionId, errorMessage(err), { cause: err, retryDelayMs: 1_000 });
    }
  }

  async function apply(executionId: number, tenantId: string, first: Command, more: readonly Command[] = [], outcome: ApplyOutcome = newOutcome()): Promise<void> {
    applying++;
    try {
      await applyNow(executionId, tenantId, first, more, outcome);
    } catch (err) {
      // Records of this apply's (or a redo's, or a rebuild's) refused by the journal's floor:
      // the command is applied again, to the rebuilt checkpoint. Never a reason to give it up,
      // even where the refusal comes bare (a rebuild's own records, racing another rebuild's
      // fence): a start taken as one that can never run would fail the run (chaos seed 861).
      fencedOut(err);
      if (fencedFloor(err) && !(hasCode(err) && err.retryable)) throw EffectsFailed(executionId, errorMessage(err), { cause: err, retryDelayMs: 250 });
      throw err;
    } finally {
      applying--;
    }
  }

  async function applyNow(executionId: number, tenantId: string, given: Command, more: readonly Command[], outcome: ApplyOutcome): Promise<void> {
    let first = given;
    // The checkpoint carries the execution's identity; the row is read only when there is none.
    const fromCache = latest.has(executionId);
    // Taken before the read: while this waits, the pipe may finish the effects of the version
    // read (and go), which leaves them done, not lost (see inFlight below).
    const pipeAtRead = pipes.get(executionId);
    const cp = await readCheckpoint(executionId);
    let row: ExecutionRecord | null = null;
    let admission: Admission["outcome"] | undefined;
    if (cp === null && first.kind === "start") {
      // Admission: the row goes from queued to running here, once, and under the tenant's cap
      // (top-level runs only: a parent holds its slot while its children run). For a start
      // that is not a fork, this statement is also its read of the row.
      let fork: ForkStart | undefined;
      if (forkRefs.has(first)) {
        const before = await store.executions.getById(executionId);
        if (!before || before.tenantId !== tenantId) throw ExecutionMissing(executionId);
        fork = await forkFrom(before, first);
      }
      const cap = first.parent ? 0 : (opts.tenantMaxRunning ?? 0);
      const taken = await store.executions.admit({ id: executionId, tenantId, cap, startedAt: clock(), ...(fork ? { checkpoint: { forkStart: forkStartRecord(fork) } } : {}) });
      if (taken.outcome === "missing") throw ExecutionMissing(executionId);
      row = taken.row;
      switch (taken.outcome) {
        case "finished":
          if (row.startedAt !== null && (await endUntold(row))) {
            // It ended at its start (a fork of a finished state, a start that failed at once):
            // its records landed, its executor died before its events, and Redis lost the
            // checkpoint. Nothing but this start comes to such a run: rebuilt from its row and
            // its journal (maybe empty), which tells the start's events and its end.
            logger.warn("a finished execution's end was never published and its checkpoint is lost; it is rebuilt from the journal", { executionId, status: row.status });
            await rebuild(row, await definitionFor(tenantId, row.agentWorkflowId, row.workflowVersion, row.definitionRef), new Map(), undefined, true);
            return;
          }
          logger.info("start of an execution that ended before it started ignored", { executionId, status: row.status });
          return;
        case "busy": {
          // Acknowledged: the row waits queued, and the end of one of the tenant's runs (or the
          // recovery sweep) sends its start again, as often as needed, with no delivery limit.
          // A run with a deadline is also sent its deadline timer, which starts it from the row
          // when due: admitted past its deadline whatever the cap, it fails before any node runs,
          // rather than when a slot frees. Sent before this start is acknowledged, so a crash in
          // between sends it again; the message id keeps one.
          if (row.deadlineAt) {
            const dueAt = row.deadlineAt.toISOString();
            await messaging.sendCommand("execution.timer", { executionId, tenantId, timerId: DEADLINE_TIMER_ID, dueAt }, `queued-deadline:${executionId}:${dueAt}`);
          }
          const busy = TenantBusy(tenantId, cap);
          logger.info("execution waits for a slot", { executionId, code: busy.code, error: busy.message });
          return;
        }
        case "changed":
          throw NotStarted(executionId, { retryDelayMs: 250 });
        case "admitted":
        case "started":
          break;
      }
      // A start sent again from the row (a waiting run woken up) names no source: the row has it.
      fork ??= forkStartOnRow(row);
      if (row.forkedFromExecutionId !== null && !fork) throw ForkStartMissing(executionId);
      if (fork) {
        // The source's blobs the starting state refers to are the fork's too (the source's row
        // may be deleted first). Also for a fork that waited queued and was woken from its row.
        await large.adopt({ tenantId, executionId }, forkStartRecord(fork));
        first = { ...first, fork };
      }
      // References in the input of a run started through the API (to blobs of the tenant's
      // other runs) are this run's uses too, so the pruner keeps those blobs while it reads them.
      // A sub-run's input was adopted by its parent before the start was sent.
      if (row.parentExecutionId === null) await large.adopt({ tenantId, executionId }, row.input);
      first = { ...first, input: row.input };
      admission = taken.outcome;
    } else if (cp === null) {
      row = await store.executions.getById(executionId);
      if (!row || row.tenantId !== tenantId) throw ExecutionMissing(executionId);
    } else if (cp.state.tenantId !== tenantId) {
      throw ExecutionMissing(executionId);
    }
    const ident = cp
      ? { workflowId: cp.state.workflowId, workflowVersion: cp.state.workflowVersion, definitionRef: cp.state.definitionRef ?? null }
      : { workflowId: row!.agentWorkflowId, workflowVersion: row!.workflowVersion, definitionRef: row!.definitionRef };
    let state: CheckpointState | null = cp?.state ?? null;
    let version = cp?.version ?? 0;
    const definition = await definitionFor(tenantId, ident.workflowId, ident.workflowVersion, ident.definitionRef);
    const blobs = new Map<string, JsonValue>();
    // A start applied afresh over a fenced, empty journal (see rebuild): its first checkpoint
    // is numbered past this floor.
    let numberFrom: number | undefined;
    const fence = fenced.get(executionId);
    if (fence !== undefined && cp) {
      const { floor } = fence;
      if (cp.version + (cp.state.versionBase ?? 0) < floor) {
        // A checkpoint whose steps' records the journal refuses (numbered below its floor): the
        // state of a rebuild whose fence another rebuild's passed, or one older still. The
        // rebuild that fenced may still be writing its checkpoint: it is given the time to, and
        // this command comes back to read it (FENCED_WAIT_MS).
        // Past that, as long as the rebuild (or a later one) holds its claim: it is alive and working.
        const waited = clock().getTime() - fence.at;
        if (waited < FENCED_WAIT_MS || (await rebuildUnderWay(executionId, floor))) {
          latest.delete(executionId);
          throw RebuildAwaited(executionId, floor, { retryDelayMs: waited < FENCED_WAIT_MS ? Math.max(250, FENCED_WAIT_MS - waited) : REBUILD_CLAIM_MS });
        }
        // Rebuilt again from the journal, in its place, rather than written on.
        row ??= await store.executions.getById(executionId);
        if (!row || row.tenantId !== tenantId) throw ExecutionMissing(executionId);
        logger.warn("the checkpoint is numbered below the journal's floor; it is rebuilt from the journal", { executionId, version: cp.version, floor });
        const rebuilt = await rebuild(row, definition, blobs, { version: cp.version });
        if (rebuilt.state) ({ state, version } = rebuilt);
      }
      fenced.delete(executionId);
    }
    if (state === null && first.kind === "start" && opts.hasTool) {
      const unknown: string[] = [];
      for (const name of referencedTools(definition)) if (!(await opts.hasTool(name))) unknown.push(name);
      if (unknown.length) throw DefinitionInvalid(ident.workflowId, ident.workflowVersion, `no worker has registered the tool(s) ${unknown.map((t) => `"${t}"`).join(", ")}`);
    }
    if (admission === "started") {
      // Admitted by an earlier delivery (or by another replica) whose checkpoint is not in
      // Redis: never written (a crash right after admission) or lost. Rebuild from the row and
      // the journal, then this start is ignored as already applied; with nothing journaled
      // yet, the start is applied as if admitted now.
      const rebuilt = await rebuild(row!, definition, blobs);
      if (rebuilt.state) ({ state, version } = rebuilt);
      else numberFrom = rebuilt.floor;
    }
    if (state === null && first.kind !== "start") {
      if (row!.status === "running" || row!.status === "paused") {
        const rebuilt = await rebuild(row!, definition, blobs);
        if (!rebuilt.state) {
          // Admitted, and nothing journaled: take the start first (from the row), then this command.
          await applyNow(executionId, tenantId, await startCommandOf(row!), [], newOutcome());
          return applyNow(executionId, tenantId, first, more, outcome);
        }
        ({ state, version } = rebuilt);
      } else if (row!.status === "queued" || (first.kind === "cancel" && row!.status === "cancelled" && row!.startedAt === null)) {
        // The deadline timer of a run waiting for a slot (see admission): its start, from the row.
        if (first.kind === "timer" && first.timerId === DEADLINE_TIMER_ID && row!.status === "queued") {
          return applyNow(executionId, tenantId, await startCommandOf(row!), [], outcome);
        }
        if (first.kind !== "cancel") throw NotStarted(executionId);
        await cancelQueued(row!, first.reason);
        return;
      } else if (await endUntold(row!)) {
        // Its last step's rows landed (the row says it ended) and its executor died before the
        // events, and Redis then lost the checkpoint holding them (chaos seed 861): the rebuild
        // tells them, and the run's end (parent, slot, expiry), from the journal.
        logger.warn("a finished execution's end was never published and its checkpoint is lost; it is rebuilt from the journal", { executionId, status: row!.status });
        const rebuilt = await rebuild(row!, definition, blobs, undefined, true);
        if (!rebuilt.state) return;
        ({ state, version } = rebuilt);
      } else {
        logger.debug("command for a finished execution without checkpoint ignored", { executionId, command: first.kind });
        return;
      }
    }

    // Effects this process is still writing (pipelined), or finished writing since the read,
    // or finished before it while Redis has not been told yet (carriedOut), are in flight or
    // done, not lost; anything else in the checkpoint's outbox was left by a crash and is
    // carried out again. Commands of one execution are applied one at a time
    // (serially), so no other pipe can have started since the read.
    let pipe = pipeAtRead;
    if (pipe?.failed) {
      // Records of an earlier step failed: everything still unwritten is in the checkpoint; redo it.
      pipes.delete(executionId);
      pipe = undefined;
    }
    const inFlight = (pipe !== undefined && pipe.versions.has(version)) || carriedOut.get(executionId) === version;
    if (pipe !== undefined && !inFlight && pipes.get(executionId) === pipe) {
      // This process is still writing the records of steps the checkpoint read does not go on
      // from: another history's (Redis lost the checkpoint they were in, and another replica
      // rebuilt the run without them), or steps another replica has since carried out again
      // before writing on them. They finish (or are refused) on their own; the steps taken now
      // start a pipe of their own and carry nothing of that one. Carried into this checkpoint,
      // the other history's steps would be redone with it, under its numbers: refused by the
      // journal's floor on every delivery (the run stuck), or published twice.
      pipes.delete(executionId);
      pipe = undefined;
    }
    if (state && !inFlight && (state.outbox?.length || state.carried?.length)) {
      try {
        await performAll(state, [...(state.carried ?? []), ...(state.outbox?.length ? [{ version, effects: state.outbox }] : [])]);
      } catch (err) {
        throw EffectsFailed(executionId, errorMessage(err), { cause: err, retryDelayMs: 1_000 });
      }
      // Carried out to the end, a finished run's effects went with its expiry (finished()): a
      // new version would make the checkpoint permanent.
      if (!isFinished(state) || !checkpoints.expire) {
        const cleared = await writeCheckpoint(executionId, { ...state, outbox: [], carried: [] }, version);
        version = cleared.version;
      }
    }
    // The engine copies the state it steps from: leave the effects (handled above) out of it.
    if (state && (state.outbox !== undefined || state.carried !== undefined)) {
      const { outbox: _outbox, carried: _carried, ...rest } = state;
      state = rest;
    }
    let command: Command = first;
    let inlineSteps = 0;
    // Answers of calls this step found sent before (recordedAnswers), applied after it.
    const recorded: Command[] = [];
    const identity = { executionId, tenantId, workflowId: ident.workflowId, workflowVersion: ident.workflowVersion, ...(row?.agentId != null ? { agentId: row.agentId } : {}) };
    for (;;) {
      const now = clock();
      let r = await stepLoaded({ definition, state, command, now: now.toISOString(), identity }, blobs);
      // The cached state may be behind another replica's writes, and a command it does not
      // know about (a result for a call started since) would be dropped: check with Redis.
      if (r.ignored !== undefined && command === first && fromCache && first.kind !== "continue") throw new StaleCheckpoint();
      if (command === first) {
        // Each command of the batch is stamped after the one before, at least by a millisecond,
        // so its journal rows' completedAt keep the order they were applied in, which a replay
        // follows within one step (listForReplay): an any-join rebuilt sees the same arrival.
        let stamped = now.getTime();
        for (const next of more) {
          let base = r.ignored === undefined ? r : { state, effects: [], more: false };
          // What a command made ready runs before the next command is applied, as had it come
          // alone: an any-join that the first arrival made ready sees only that arrival.
          while (base.more) {
            const c = await stepLoaded({ definition, state: base.state, command: { kind: "continue" }, now: clock().toISOString(), identity }, blobs);
            base = r = { state: c.state, effects: [...base.effects, ...c.effects], more: c.more };
          }
          stamped = Math.max(clock().getTime(), stamped + 1);
          const n = await stepLoaded({ definition, state: base.state, command: next, now: new Date(stamped).toISOString(), identity }, blobs);
          if (n.ignored !== undefined) {
            if (fromCache) throw new StaleCheckpoint();
            logger.debug("command ignored", { executionId, command: next.kind, why: n.ignored });
            if (mayBeEarly(next, base.state)) outcome.unknown.add(next);
            continue;
          }
          r = { state: n.state, effects: [...base.effects, ...n.effects], more: n.more };
        }
      }
      if (r.ignored !== undefined) {
        if (command.kind !== "continue") logger.debug("command ignored", { executionId, command: command.kind, why: r.ignored });
        if (command === first && mayBeEarly(first, state)) outcome.unknown.add(first);
        const answer = recorded.shift();
        if (answer) {
          command = answer;
          continue;
        }
        // A redelivered command finds its step already applied; a crash may have left ready
        // nodes behind that step, so go on with them.
        if (command.kind !== "continue" && state && (state.status === "running" || state.status === "paused") && state.ready.length > 0) {
          command = { kind: "continue" };
          continue;
        }
        break;
      }
      if (command.kind === "continue" && r.effects.length === 0 && !r.more) break;
      // The checkpoint carries this step's effects and those of earlier steps still being written.
      const p = pipeOf(executionId);
      const carried = p.groups.map((g) => ({ version: g.version, effects: g.effects }));
      // The step's tool calls go out while its checkpoint is written: waiting for the
      // compare-and-set first cost a Redis round trip per node. Should the checkpoint not be
      // written, the calls are out for a step that never was: a lost compare-and-set is
      // applied again at once and handleNow cancels what that does not send again; after a
      // crash the redelivered command sends them again, finds them sent (recordedAnswers),
      // and an answer that came in between is delivered again for a while (handle).
      const calls = sendCalls(r.state, r.effects, false, outcome.redelivered === true || r.state.rebuilt === true);
      calls.catch(() => undefined); // awaited below, once the checkpoint is written
      let written: Awaited<ReturnType<typeof writeCheckpoint>>;
      try {
        if (version === 0 && numberFrom !== undefined) {
          // Numbered past the floor: the steps' records are not refused, their events' ids are
          // not those of a stalled executor's first steps, and no cached version of those is
          // found in Redis again (as a rebuilt checkpoint is numbered, see rebuild).
          written = await writeCheckpoint(executionId, { ...r.state, outbox: r.effects, carried }, 0, { firstVersionAfter: numberFrom });
          if (written.version <= numberFrom) {
            // A store that numbers from 1 again: keep the step numbers apart with a base instead.
            r = { ...r, state: { ...r.state, versionBase: numberFrom } };
            written = await writeCheckpoint(executionId, { ...r.state, outbox: r.effects, carried }, written.version);
          }
        } else {
          written = await writeCheckpoint(executionId, { ...r.state, outbox: r.effects, carried }, version);
        }
      } catch (err) {
        for (const e of r.effects) if (e.kind === "callTool") outcome.unconfirmed.set(e.callId, { nodeId: e.nodeId, attempt: e.attempt });
        throw err;
      }
      const prev = state;
      version = written.version;
      state = r.state;
      // Timers and children go out now; journal rows, then cancellations and events, follow in
      // order, off the lock, and the command is acknowledged only once they are out (see handle).
      let again: Awaited<typeof calls>;
      try {
        [again] = await Promise.all([calls, dispatch(state, r.effects, false, false)]);
      } catch (err) {
        pipes.delete(executionId);
        throw EffectsFailed(executionId, errorMessage(err), { cause: err, retryDelayMs: 1_000 });
      }
      schedule(executionId, prev, state, r.effects, version);
      if (again.length > 0) recorded.push(...(await recordedAnswers({ tenantId, executionId }, again)));
      // As above: what this step made ready runs before a recorded answer is applied.
      if (r.more) {
        if (++inlineSteps >= INLINE_STEPS_PER_TURN && recorded.length === 0) {
          // A long run of inline steps (a loop of transforms) gives way to the commands queued
          // behind it, a cancel or a deadline among them, and goes on after them from its
          // checkpoint, under a command of its own.
          await continueLater(executionId, tenantId, version + (state.versionBase ?? 0));
          break;
        }
        command = { kind: "continue" };
        continue;
      }
      inlineSteps = 0;
      const answer = recorded.shift();
      if (!answer) break;
      command = answer;
    }
    if (state && isFinished(state)) logger.info("execution finished", { executionId, status: state.status });
  }

  interface Pipe {
    /** Steps whose records are being written, in order. */
    groups: { version: number; effects: Effect[] }[];
    /** Checkpoint versions written by this process whose records are not written yet. */
    versions: Set<number>;
    tail: Promise<void>;
    /** Settles when the rows of every link so far are written. */
    journaled: Promise<void>;
    /**
     * What a link that leaves the execution row alone waits for before its statement: the
     * rows of the last link that changed the row, and of every link before that one.
     */
    ordered: Promise<void>;
    /** The steps of the link whose statement has not started yet; later steps join it. */
    waiting: StepToRecord[];
    /**
     * The links whose rows are not known written, in order: in flight, or failed. A link's
     * statement carries theirs too, so that whichever statement lands, the journal never holds a
     * link's rows without the rows of the links before it (see schedule).
     */
    unwritten: StepToRecord[][];
    /** Links whose events are not out yet, in step order (see announce). */
    announce: Announcement[];
    /** A batch of links' events is being published and confirmed. */
    announcing: boolean;
    /** Why a link's rows or events failed: no later link's events go out. */
    poisoned?: { error: unknown };
    /**
     * Writing a step's records failed. The pipe stays, with its groups, so later steps of the
     * same apply still carry those effects in their checkpoints (and their own records,
     * chained behind, do not run); the next apply drops it and redoes what the checkpoint holds.
     */
    failed?: boolean;
  }
  const pipes = new Map<number, Pipe>();

  /** A link waiting for its events to go out: `steps` is set (numbered) once its rows are written. */
  interface Announcement {
    steps?: StepToRecord[];
    /** When the link's journal statement started (`performance.now()`). */
    since?: number;
    error?: { error: unknown };
    resolve(): void;
    reject(err: unknown): void;
  }

  /**
   * Publishes the events of the links at the head of the queue whose rows are written, all
   * together, and the next ones once the server has confirmed those: a link's events never
   * go out before an earlier link's are confirmed, nor at all when those failed, and links
   * whose rows came in meanwhile share one wait instead of one round trip each.
   */
  function announce(p: Pipe): void {
    if (p.announcing) return;
    const batch: Announcement[] = [];
    while (p.announce.length > 0 && (p.announce[0]!.steps !== undefined || p.announce[0]!.error !== undefined)) {
      const a = p.announce.shift()!;
      p.poisoned ??= a.error;
      if (p.poisoned) a.reject(p.poisoned.error);
      else batch.push(a);
    }
    if (batch.length === 0) return;
    p.announcing = true;
    const steps = batch.flatMap((a) => a.steps!);
    const since = Math.min(...batch.map((a) => a.since ?? Number.POSITIVE_INFINITY));
    void (performance.now() - since > STALE_RECORDS_MS ? notFenced(steps).then(() => publishRecords(steps)) : publishRecords(steps)).then(
      () => {
        for (const a of batch) a.resolve();
      },
      (err: unknown) => {
        p.poisoned ??= { error: err };
        for (const a of batch) a.reject(err);
      },
    ).finally(() => {
      p.announcing = false;
      announce(p);
    });
  }

  /**
   * Before the events of steps whose records took long (the executor stalled, a statement was
   * slow): whether a rebuild fenced the journal after their rows landed. That rebuild read those
   * rows and tells their events itself (under its own step numbers) unless it finds them on the
   * stream when it reads it again, a second after its fence; published from here too, later, they
   * would go out twice. They are then refused as records below the floor are: not published,
   * and the command is applied again to the rebuilt checkpoint (ADR 004, amended 2026-11-28).
   * Steps published within {@link STALE_RECORDS_MS} of their statement need no check.
   */
  async function notFenced(steps: readonly StepToRecord[]): Promise<void> {
    const { executionId, tenantId } = steps[0]!.state;
    // A step below the floor had its rows land before the fence (below it they are refused).
    const first = Math.min(...steps.map((s) => s.version));
    const floor = await store.executions.journalFloor(executionId, tenantId);
    if (floor === null || first >= floor) return;
    logger.warn("a rebuild fenced the journal after a step's rows landed; the rebuild tells its events, not this executor", { executionId, steps: steps.map((s) => s.version), floor });
    throw StoreFenced(executionId, floor, { details: { executionId, floor } });
  }

  /** Outboxes to drop from Redis once their execution has been idle a moment; stop() drops them at once. */
  const clearing = new Map<number, { run: () => Promise<void>; timer: NodeJS.Timeout }>();
  function takeClearing(executionId: number): { run: () => Promise<void>; timer: NodeJS.Timeout } | undefined {
    const c = clearing.get(executionId);
    clearing.delete(executionId);
    return c;
  }
  /**
   * Per execution, the checkpoint version whose outbox this process carried out to the end
   * while Redis may still hold it (until the delayed drop lands, or for good when the drop
   * failed): a read of that version from Redis finds effects that are done, not a crash's.
   */
  const carriedOut = new Map<number, number>();

  function pipeOf(executionId: number): Pipe {
    let p = pipes.get(executionId);
    if (!p) {
      p = { groups: [], versions: new Set(), tail: Promise.resolve(), journaled: Promise.resolve(), ordered: Promise.resolve(), waiting: [], unwritten: [], announce: [], announcing: false };
      pipes.set(executionId, p);
    }
    return p;
  }

  /**
   * Queues a step's records behind the previous steps' (a link). The events of a link go out
   * once its rows are written and the previous links' events are confirmed (announce), so
   * subscribers see them in step order and find the rows they announce. The statements of
   * links that leave the execution row alone overlap (the store merges journal writes by
   * step in any order), so at one execution the rows keep pace with the steps, not with a
   * round trip each; a link that changes the execution row waits for every row before it,
   * and the links after it wait for its rows. Steps that come while a link waits join it.
   * The last link done clears the outbox.
   *
   * Overlapping statements can land out of order, and an earlier one can fail (a transient
   * fault) where a later one lands: the journal would then hold a step's rows without those of
   * an earlier step, until the redelivered command redoes them from the checkpoint. Were Redis to
   * lose that checkpoint first, a rebuild would read the gap as the run: the earlier step's
   * outcome missing, and what followed from it not reached, though its rows are there (chaos
   * seed 5006: a cancel then left a forEach's row running, its children unknown to the run). So
   * a link's statement also carries the rows of the links before it not known written yet (the
   * store merges writes of a row by step, so a row written twice is the same).
   */
  function schedule(executionId: number, prev: ExecutionState | null, state: ExecutionState, effects: Effect[], version: number): void {
    // This step's checkpoint replaced the outbox a clear was waiting to drop.
    const pending = takeClearing(executionId);
    if (pending) clearTimeout(pending.timer);
    carriedOut.delete(executionId);
    const p = pipeOf(executionId);
    p.groups.push({ version, effects });
    p.versions.add(version);
    const step: StepToRecord = { prev, state, effects, version };
    const rowChange = changesRow(prev, state);
    // The link already waiting takes this step too, unless this step has to wait for more.
    if (p.waiting.length > 0 && !rowChange) {
      p.waiting.push(step);
      return;
    }
    const steps = [step];
    p.waiting = steps;
    let announced!: Announcement;
    const published = new Promise<void>((resolve, reject) => (announced = { resolve, reject }));
    p.announce.push(announced);
    p.unwritten.push(steps);
    const link = (rowChange ? p.journaled : p.ordered).then(() => {
      if (p.waiting === steps) p.waiting = [];
      announced.since = performance.now();
      return writeRecords(steps, p.unwritten.slice(0, p.unwritten.indexOf(steps)).flat());
    });
    const failed = (err: unknown): void => {
      announced.error = { error: err };
      announce(p);
    };
    void link.then(
      (numbered) => {
        // Its rows are written, and with them those of every link before it.
        p.unwritten.splice(0, p.unwritten.indexOf(steps) + 1);
        const ready = (): void => {
          announced.steps = numbered;
          announce(p);
        };
        // Rows written: what the steps stopped is told now (sendCancellations), then their events.
        const stopping = sendCancellations(steps);
        if (stopping) void stopping.then(ready, failed);
        else ready();
      },
      failed,
    );
    const rows = link.then(() => undefined);
    p.journaled = Promise.all([p.journaled, rows]).then(() => undefined);
    if (rowChange) p.ordered = p.journaled;
    p.tail = published.then(
      () => {
        const done = new Set(steps.map((s) => s.version));
        p.groups = p.groups.filter((g) => !done.has(g.version));
        if (p.groups.length > 0 || pipes.get(executionId) !== p) return;
        pipes.delete(executionId);
        const last = steps[steps.length - 1]!;
        // A finished run's outbox went with its expiry (finished()).
        if (isFinished(last.state)) return;
        // Nothing is in flight: drop the outbox from the checkpoint, unless a newer step wrote one.
        const notCleared = (err: unknown): void => logger.debug("outbox not cleared; the next step replaces it", { executionId, error: errorMessage(err) });
        if (checkpoints.dropUnversioned) {
          // The cached state now says so at once (a step started from it before this saw the pipe
          // and carries nothing over). Redis is told a little later, in place (no new version;
          // the store checks the version), and only if no step came since: the next step's
          // checkpoint replaces the outbox anyway, so a busy execution costs no extra write.
          const cached = latest.get(executionId);
          if (cached?.version === last.version) remember({ ...cached, state: { ...cached.state, outbox: [], carried: [] } });
          const drop = checkpoints.dropUnversioned.bind(checkpoints);
          carriedOut.set(executionId, last.version);
          clearing.set(executionId, {
            run: () => drop(executionId, last.version).then(() => {
              if (carriedOut.get(executionId) === last.version) carriedOut.delete(executionId);
            }, notCleared),
            timer: setTimeout(() => void takeClearing(executionId)?.run(), OUTBOX_CLEAR_DELAY_MS).unref(),
          });
          return;
        }
        void serially(executionId, async () => {
          if (pipes.has(executionId)) return;
          const cp = await readCheckpoint(executionId);
          if (!cp || cp.version !== last.version || isFinished(cp.state) || (!cp.state.outbox?.length && !cp.state.carried?.length)) return;
          await writeCheckpoint(executionId, { ...cp.state, outbox: [], carried: [] }, last.version);
        }).catch(notCleared);
      },
      (err: unknown) => {
        // Leave the effects in the checkpoint: the redelivered command carries them out again,
        // unless the journal refused them (their checkpoint was rebuilt without them): then the
        // cached state goes, and the command is applied again to the rebuilt one.
        p.failed = true;
        fencedOut(err);
        throw err;
      },
    );
    // handle() awaits the tail; a failure nobody waits for must not crash the process.
    p.tail.catch(() => undefined);
    p.journaled.catch(() => undefined);
    p.ordered.catch(() => undefined);
  }

  /** The records of an execution's steps scheduled so far, as one promise. */
  function recordsDone(executionId: number): Promise<void> | undefined {
    return pipes.get(executionId)?.tail;
  }

  /**
   * Tool results waiting for their execution's lock, by execution: the first to arrive
   * leads, later ones join it until the lock is free, and then all are applied in one step
   * (a fan-out's results come back together). Each command is acknowledged when the step's
   * records are written, as if alone.
   */
  const queued = new Map<number, ResultBatch>();
  /** The attempt each tool result from the bus answers (see mayBeEarly). */
  const resultAttempts = new WeakMap<Command, number>();
  /** The source each fork's start command names (see forkFrom). */
  const forkRefs = new WeakMap<Command, Omit<ForkStart, "state">>();

  /**
   * Applies a command. `delivery`: how often the consumer has delivered it (a direct call is
   * taken as the last delivery); a tool result whose call the checkpoint does not know is
   * delivered again, backing off, until its {@link UNKNOWN_RESULT_DELIVERIES}th delivery.
   */
  async function handle(cmd: AnyCommand, delivery = Number.POSITIVE_INFINITY): Promise<void> {
    const { executionId, tenantId, command } = await toEngineCommand(cmd);
    const redelivered = Number.isFinite(delivery) && delivery > 1;
    if (command.kind !== "toolResult") return handleNow(cmd, executionId, tenantId, command, undefined, { ...newOutcome(), redelivered });
    const open = queued.get(executionId);
    let batch: ResultBatch;
    if (open && open.tenantId === tenantId) {
      batch = open;
      batch.commands.push(command);
      if (redelivered) batch.outcome.redelivered = true;
    } else {
      const b: ResultBatch = { tenantId, commands: [command], settled: Promise.resolve(), outcome: { ...newOutcome(), redelivered } };
      if (!open) queued.set(executionId, b);
      const lead = (): Promise<void> => handleNow(cmd, executionId, tenantId, command, () => {
        // The lock is ours: whatever joined so far is applied with the leader; later results wait for the next turn.
        if (queued.get(executionId) === b) queued.delete(executionId);
        return b.commands.slice(1);
      }, b.outcome);
      // A fan-out's answers arrive together, in one delivery whose messages are handed over
      // over a cascade of microtasks. While the execution has other calls out, the leader
      // takes the lock at the end of that cascade, so the answers that came with it join its
      // step instead of the next one; an execution's only call is applied at once.
      const known = latest.get(executionId)?.state;
      b.settled = known !== undefined && outstandingCount(known, 2) > 1 ? endOfCascade().then(lead) : lead();
      batch = b;
    }
    await batch.settled;
    if (batch.outcome.unknown.has(command) && command.kind === "toolResult") {
      if (delivery < UNKNOWN_RESULT_DELIVERIES) throw ResultBeforeCall(command.callId, executionId, { retryDelayMs: Math.min(250 * 2 ** (delivery - 1), 8_000) });
      // Its call may come yet: sent by a step whose checkpoint was never written, and sent
      // again when that step is taken again, when the queue drops it as a duplicate and this
      // answer is all there is (the worker may have died before recording it). Recorded, it
      // answers the call then (recordedAnswers); a worker's record is never replaced.
      if (cmd.name === "tool.result") await recordDropped(cmd.message);
      logger.debug("a result for a call its execution does not have was dropped", { executionId, callId: command.callId, deliveries: delivery });
    }
  }

  /** Records a start that can never run: the row failed, its slot freed, `execution.failed`, and the parent told. */
  async function startFailed(cmd: Extract<AnyCommand, { name: "execution.start" }>, code: string, message: string): Promise<void> {
    const { executionId, tenantId } = cmd.message;
    await store.executions.update(executionId, { status: "failed", error: `${code}: ${message}`, completedAt: clock() }).catch(() => undefined);
    if (!cmd.message.parentExecutionId) await slotFreed(tenantId, executionId);
    await messaging.publishEvent("execution.failed", { tenantId, id: executionId, agentWorkflowId: cmd.message.workflowId, error: { code, message, retryable: false }, nodeId: "" }, `evt:${executionId}:start-failed`).catch(() => undefined);
    metrics.ended("failed", Boolean(cmd.message.parentExecutionId));
    if (cmd.message.parentExecutionId && cmd.message.parentNodeId) {
      await messaging.sendCommand("execution.child_result", {
        executionId: cmd.message.parentExecutionId, tenantId, nodeId: cmd.message.parentNodeId, childKey: cmd.message.childKey,
        childExecutionId: executionId, status: "failed", error: { code, message, retryable: false },
      }, `child-result:${executionId}`);
    }
    logger.warn("execution could not start", { executionId, code, error: message });
  }

  /**
   * A command's last delivery failed. When the error is an uncoded fault (an engine or executor
   * bug, the same on every delivery), not a service out of reach (those errors carry codes),
   * the run is failed with BATON_EXECUTOR_COMMAND_FAILED instead of waiting for ever for a
   * command the consumer drops now; the command is then done. Otherwise, or when failing the
   * run fails too, the error stands and the consumer gives the command up as before.
   */
  async function lastDeliveryFailed(cmd: AnyCommand, deliveries: number, err: unknown): Promise<void> {
    if (hasCode(err)) throw err;
    const { executionId, tenantId } = cmd.message as { executionId?: unknown; tenantId?: unknown };
    if (typeof executionId !== "number" || typeof tenantId !== "string") throw err;
    const failure = CommandFailed(cmd.name, deliveries, errorMessage(err));
    logger.error("a command failed on every delivery; its execution fails", { executionId, command: cmd.name, code: failure.code, error: failure.message });
    try {
      if (cmd.name === "execution.start") await startFailed(cmd, failure.code, failure.message);
      else await handleNow(cmd, executionId, tenantId, { kind: "abort", error: { code: failure.code, message: failure.message } });
    } catch (abortErr) {
      logger.error("the execution could not be failed either", { executionId, code: failure.code, error: errorMessage(abortErr) });
      throw err;
    }
  }

  async function recordDropped(m: Extract<AnyCommand, { name: "tool.result" }>["message"]): Promise<void> {
    const output = m.ok ? valueToJson(m.output) ?? null : undefined;
    const error = m.error ? { code: m.error.code, message: m.error.message, retryable: m.error.retryable } : undefined;
    await messaging.recordToolResult(m.callId, { ok: m.ok, durationMs: m.durationMs, workerId: m.workerId, ...(output !== undefined ? { output } : {}), ...(error ? { error } : {}) });
  }

  async function handleNow(cmd: AnyCommand, executionId: number, tenantId: string, command: Command, joined?: () => Command[], outcome = newOutcome()): Promise<void> {
    let written: Promise<void> | undefined;
    await serially(executionId, async () => {
      const more = joined?.() ?? [];
      // A continue is sent for what a crash (or Redis) may have left in the checkpoint, which
      // this process's cache would not show: read Redis.
      if (command.kind === "continue") latest.delete(executionId);
      try {
        await applyFreshAndCancelOrphans(executionId, tenantId, command, more, outcome);
        written = recordsDone(executionId);
      } catch (err) {
        if (hasCode(err) && !err.retryable && cmd.name === "execution.start") {
          // A start that can never run (missing or invalid definition): record why, do not retry.
          await startFailed(cmd, err.code, err.message);
          return;
        }
        throw err;
      }
    });
    // Acknowledge the command only once its journal rows and events are written.
    if (written) {
      try {
        await written;
      } catch (err) {
        throw EffectsFailed(executionId, errorMessage(err), { cause: err, retryDelayMs: 1_000 });
      }
    }
  }

  /**
   * Calls sent for a step that lost its compare-and-set, which the step applied again (from
   * what Redis holds) did not send, and which that state can never send again: they are
   * cancelled, since nothing waits for their answers. A call id names its node and attempt, so
   * a state that has not yet started that attempt (one rebuilt from a journal that lacks it, or
   * a result it took as early) sends the same id later, and the queue takes that send as the
   * one already made: such a call is left to run, and its record answers it then. Only a call
   * whose attempt is over in the state that won (a later attempt, or that one ended), or whose
   * run ended, is cancelled; with no state at hand, none is.
   */
  async function cancelOrphans(executionId: number, tenantId: string, sent: ReadonlyMap<string, { nodeId: string; attempt: number }>): Promise<void> {
    if (sent.size === 0) return;
    const current = latest.get(executionId)?.state ?? (await checkpoints.get(executionId).catch(() => null))?.state;
    if (!current) return;
    const wanted = outstandingCalls(current);
    const over = ({ nodeId, attempt }: { nodeId: string; attempt: number }): boolean => {
      if (isFinished(current)) return true;
      const run = current.nodes[nodeId];
      return run !== undefined && (run.attempt > attempt || (run.attempt === attempt && (run.status === "completed" || run.status === "failed")));
    };
    const orphans = [...sent].filter(([id, call]) => !wanted.has(id) && over(call)).map(([id]) => id);
    if (orphans.length === 0) return;
    logger.info("calls of a step that lost its checkpoint write are cancelled", { executionId, callIds: orphans });
    await cancelCalls(tenantId, orphans, "sent for a step that another executor's write replaced");
  }

  /**
   * Queued top-level executions whose start is not coming: turned away by the tenant's cap
   * while no run of the tenant ended since (the wake-up lost to a crash), or left queued
   * otherwise (a cap lifted, a start command given up). Their start is sent again: with a cap,
   * as many as it leaves room for; without one, to rows queued for a minute.
   */
  async function wakeAllQueued(sweep: string): Promise<number> {
    const capped = (opts.tenantMaxRunning ?? 0) > 0;
    const idleMs = capped ? 0 : 60_000;
    let count = 0;
    for (const tenantId of await store.executions.queuedTenants(idleMs)) {
      try {
        count += await wakeQueued(tenantId, sweep, idleMs);
      } catch (err) {
        logger.warn("could not start a tenant's waiting executions; the next sweep retries", { tenantId, error: errorMessage(err) });
      }
    }
    return count;
  }

  /**
   * What a live run waits for that is overdue: its timers past their due time (by
   * {@link LOST_COMMAND_GRACE_MS}), the answers its workers recorded (that long ago), the
   * results of its children that ended (that long ago), the starts of its children still queued
   * (that long after), and a failure for each call no worker answered that the tools queue no
   * longer holds (lostCall). Their commands were lost (given up by the
   * consumer, or terminated); nothing else would send them again, and the run would wait for ever. The
   * recovery sweep sends them again; one that came meanwhile leaves the resent one ignored (the
   * timer is gone, the child no longer waited for). `what` names the command within the run.
   */
  async function lostCommands(state: ExecutionState, idleSince: number | undefined, queuedCalls: QueuedCalls): Promise<SweepCommand[]> {
    if (isFinished(state)) return [];
    const now = clock().getTime();
    // Every call of a run that took no step for the grace, and holds no effects still to carry
    // out (`idleSince`: its last step, when so), went onto the tools queue at least that long ago.
    const settledAt = idleSince === undefined ? undefined : idleSince + LOST_COMMAND_GRACE_MS;
    const timed = new Set(Object.values(state.timers ?? {}).flatMap((t) => (t.kind === "timeout" && t.callId ? [t.callId] : [])));
    const { executionId, tenantId } = state;
    const lost: SweepCommand[] = [];
    for (const [timerId, timer] of Object.entries(state.timers ?? {})) {
      if (Date.parse(timer.dueAt) + LOST_COMMAND_GRACE_MS <= now) lost.push({ name: "execution.timer", init: { executionId, tenantId, timerId, dueAt: timer.dueAt }, what: `timer:${timerId}` });
    }
    // Calls whose worker recorded an answer (it records every answer it sends) more than the
    // grace ago: that answer was lost. One recorded since may still be on its way, or queued
    // behind the run's other commands. A call with no record is still being worked on, or
    // waits for a worker.
    for (const [nodeId, run] of Object.entries(state.nodes)) {
      if (run.status !== "running" && run.status !== "paused") continue;
      const callIds = [...(run.callId ? [run.callId] : []), ...(run.fan?.items ?? []).flatMap((it) => (it.status === "running" && it.key ? [it.key] : []))];
      for (const callId of callIds) {
        const recorded = await messaging.recordedToolResult(callId);
        if (recorded && recorded.recordedAt.getTime() + LOST_COMMAND_GRACE_MS <= now) {
          lost.push({ name: "tool.result", init: recordedResultInit(state, nodeId, run.attempt, callId, recorded.result), what: `result:${callId}` });
        }
        // A call with no answer, sent long enough ago, that the queue no longer holds: a worker
        // acked it before answering and went away, or the stream dropped it. Its timeout, if it
        // has one, fails the attempt anyway.
        // (A forEach's items over child runs are keyed by child key, not call id: not calls.)
        const isCall = callId === run.callId || callId.startsWith(`${toolCallId(executionId, nodeId, run.attempt)}.`);
        if (recorded || !isCall || settledAt === undefined || settledAt > now || timed.has(callId)) continue;
        const failure = await lostCall(state, callId, () => queuedCalls(settledAt));
        if (failure) lost.push({ name: "tool.result", init: recordedResultInit(state, nodeId, run.attempt, callId, failure), what: `result:${callId}` });
      }
    }
    const waitsFor = (nodeId: string, childKey: string): boolean => {
      const run = state.nodes[nodeId];
      return run?.status === "running" && (run.childKey === childKey || (run.fan?.items.some((it) => it.status === "running" && it.key === childKey) ?? false));
    };
    if (!Object.values(state.nodes).some((run) => run.status === "running" && (run.childKey !== undefined || run.fan !== undefined))) return lost;
    for (const c of await store.executions.listChildren(tenantId, executionId)) {
      if (!c.parentNodeId || c.childKey === null || !waitsFor(c.parentNodeId, c.childKey)) continue;
      if (c.status === "queued") {
        // Its start went out with the parent's effects (all carried out: no outbox) and nothing
        // took it for a minute: given up by the consumer (an outage longer than its deliveries).
        // Children wait for no slot, so nothing else would start it. A start that was only late
        // finds the child started and is ignored.
        if (idleSince === undefined || c.updatedAt.getTime() + LOST_COMMAND_GRACE_MS > now) continue;
        logger.warn("a child's start was lost; the recovery sweep sends it again", { executionId, childExecutionId: c.id });
        lost.push({
          name: "execution.start",
          init: {
            executionId: c.id, tenantId, workflowId: c.agentWorkflowId, workflowVersion: c.workflowVersion, parentExecutionId: executionId, parentNodeId: c.parentNodeId,
            childKey: c.childKey, triggerEvent: c.triggerEvent ?? "subworkflow", definitionRef: c.definitionRef ?? "", deadline: c.deadlineAt?.toISOString() ?? "",
            rootExecutionId: state.rootExecutionId ?? executionId,
          },
          what: `start:${c.id}`,
        });
        continue;
      }
      if (!TERMINAL.has(c.status)) continue;
      if ((c.completedAt?.getTime() ?? c.updatedAt.getTime()) + LOST_COMMAND_GRACE_MS > now) continue;
      logger.warn("a child's result was lost; the recovery sweep sends it again from the child's row", { executionId, childExecutionId: c.id, status: c.status });
      lost.push({ name: "execution.child_result", init: await childResultOfRow(state, c.parentNodeId, c.childKey, c), what: `child:${c.id}` });
    }
    return lost;
  }

  /**
   * The failure a lost call is answered with, recorded as its result first (so a worker that gets
   * the call after all answers with it, and the record, not a later answer, is what the run
   * gets); undefined when the call is still queued, or the queue holds too many calls to tell,
   * or an answer was recorded meanwhile (it reaches the run as any other). The queue is read
   * before the record: a worker records its answer before it acks the call, so a call gone
   * from the queue with no record after that was never answered.
   */
  async function lostCall(state: ExecutionState, callId: string, queuedCalls: () => Promise<Set<string> | undefined>): Promise<RecordedToolResult | undefined> {
    const queued = await queuedCalls();
    if (queued === undefined || queued.has(callId)) return undefined;
    if (await messaging.recordedToolResult(callId)) return undefined;
    const error = CallLost(callId);
    const failure: RecordedToolResult = { ok: false, error: { code: error.code, message: error.message, retryable: true }, durationMs: 0, workerId: "executor" };
    if (!(await messaging.recordToolResult(callId, failure))) return undefined;
    logger.warn("a tool call was taken from the queue and never answered; it fails", { executionId: state.executionId, callId, code: error.code });
    return failure;
  }

  /**
   * The recovery sweep: for every live run, what a crash, Redis or the consumer left undone is
   * sent again as commands, never applied here, so that each step it leads to is taken under a
   * command delivered again until the step's records and events are out (a step taken with no
   * command behind it, its executor dead between its rows and its events, was never told: the
   * run's end, when it was the last). `execution.continue` for a run whose checkpoint is lost or
   * unreadable, or has held effects not carried out, or ready nodes while waiting on nothing else
   * (readyWithNothingElse), with no step for {@link IDLE_CHECKPOINT_GRACE_MS}; the lost commands
   * (lostCommands) as they were. Message ids are per run, command and ten seconds, so executors
   * sweeping together send each once, and a command given up is sent again by the next sweep.
   * Resolves with the number of runs something was sent for, queued runs woken included, and
   * the number of runs it could not look at (each logged; the next sweep tries them again).
   */
  async function sweepActive(): Promise<{ count: number; failed: number }> {
    let afterId = 0;
    let count = 0;
    let failed = 0;
    const sweep = `sweep:${Math.floor(clock().getTime() / 10_000)}`;
    // The calls the tools queue holds, read once per sweep when a run has a call that may be
    // lost, and again for a run that went idle after the read (its calls may be newer).
    let scan: { at: number; ids: Promise<Set<string> | undefined> } | undefined;
    const queuedCalls: QueuedCalls = (notBefore) => {
      if (!scan || scan.at < notBefore) {
        const ids = messaging.queuedToolCalls(LOST_CALL_SCAN_LIMIT).catch((err: unknown) => {
          logger.warn("could not read the tools queue; calls that may be lost are looked at again by the next sweep", { error: errorMessage(err) });
          return undefined;
        });
        scan = { at: clock().getTime(), ids };
      }
      return scan.ids;
    };
    for (;;) {
      const rows = await store.executions.listActive({ statuses: ["running", "paused"], limit: 200, afterId });
      if (rows.length === 0) return { count: count + (await wakeAllQueued(sweep)), failed };
      for (const row of rows) {
        afterId = row.id;
        try {
          const sends = await serially(row.id, async () => {
            // The sweep looks for what a crash or Redis left behind: read Redis, not the cache.
            latest.delete(row.id);
            const cp = await readCheckpoint(row.id);
            const sends: SweepCommand[] = [];
            const idle = cp !== null && Date.parse(cp.updatedAt) + IDLE_CHECKPOINT_GRACE_MS <= clock().getTime();
            if (!cp || (idle && (cp.state.outbox?.length || readyWithNothingElse(cp.state)))) {
              sends.push({ name: "execution.continue", init: { executionId: row.id, tenantId: row.tenantId, reason: "recovery sweep" }, what: "continue" });
            }
            if (cp) sends.push(...(await lostCommands(cp.state, cp.state.outbox?.length ? undefined : Date.parse(cp.updatedAt), queuedCalls)));
            return sends;
          });
          if (sends.length === 0) continue;
          count++;
          for (const c of sends) {
            if (c.name !== "execution.continue") logger.warn("a command of the execution is overdue; the recovery sweep sends it again", { executionId: row.id, command: c.name, what: c.what });
            const { duplicate } = await messaging.sendCommand(c.name, c.init, `${sweep}:${row.id}:${c.what}`);
            if (!duplicate) metrics.recovered(c.name);
          }
        } catch (err) {
          failed++;
          logger.warn("recovery of an execution failed; the next sweep retries", { executionId: row.id, error: errorMessage(err) });
        }
      }
    }
  }

  /** The recovery sweep (sweepActive), resolving with the number of runs something was sent for. */
  async function recover(): Promise<number> {
    return (await sweepActive()).count;
  }

  /**
   * The periodic sweep, when it is this executor's turn in the window (sweep-turns.ts): one
   * executor sweeps per interval, not every one. A sweep that looked at every run is recorded
   * as done for the window.
   */
  async function sweepInTurn(turns: SweepTurns): Promise<void> {
    const turn = await turns.take(clock().getTime());
    if (!turn.sweep) return;
    const { count, failed } = await sweepActive();
    if (count > 0) logger.info("recovered executions", { count });
    if (failed === 0) await turns.done(turn.window);
  }

  return {
    handle,
    recover,
    async start() {
      pruner.start();
      const maxDeliver = opts.commandMaxDeliver ?? 20;
      sub = await messaging.consumeCommands(opts.durable ?? "executor", (cmd, msg) => handle(cmd, msg.deliveryCount).catch((err: unknown) => {
        if (msg.deliveryCount < maxDeliver) throw err;
        return lastDeliveryFailed(cmd, msg.deliveryCount, err);
      }), {
        concurrency: opts.concurrency ?? 32,
        ackWaitMs: opts.ackWaitMs ?? 30_000,
        maxDeliver,
        maxAckPending: COMMANDS_MAX_ACK_PENDING,
        // Every command is applied idempotently (a redelivery finds its step applied), so a
        // lost ack costs one more delivery, not a wrong result.
        ack: "plain",
      });
      if (opts.recoverOnStart ?? true) {
        const n = await recover();
        if (n > 0) logger.info("recovered executions", { count: n });
      }
      const every = opts.recoverEveryMs ?? 60_000;
      if (every > 0) {
        const turns = sweepTurns(messaging.bus, every, randomUUID(), (err) => logger.warn("could not read or record the recovery sweep's turn; sweeping when in doubt", { error: errorMessage(err) }));
        sweeper = setInterval(() => {
          if (sweeping) return;
          sweeping = sweepInTurn(turns)
            .catch((err: unknown) => logger.warn("recovery sweep failed", { error: errorMessage(err) }))
            .finally(() => (sweeping = undefined));
        }, every);
        sweeper.unref();
      }
    },
    async stop() {
      clearInterval(sweeper);
      await Promise.all([sweeping, pruner.stop()]);
      await sub?.stop();
      const drops = [...clearing.values()];
      clearing.clear();
      for (const c of drops) clearTimeout(c.timer);
      await Promise.all(drops.map((c) => c.run()));
    },
  };
}
