/**
 * Rebuilding an execution's state from its journal, for when Redis lost the
 * checkpoint. The journal (node executions in Postgres) is the source of truth: the
 * step function is deterministic, so running it again from the start command and
 * feeding it each recorded outcome in order arrives at the state the lost
 * checkpoint held. Inline nodes are recomputed; outside work (tools, children,
 * reviews, timers) takes its recorded result. Work that was in flight when the
 * checkpoint was lost stays in flight: the caller re-issues it with the same ids,
 * so workers answer from their idempotency records instead of running it again.
 */
import type { JsonValue } from "./json.ts";
import { isJsonObject } from "./json.ts";
import type { WorkflowDefinition } from "./model.ts";
import { NODE_TYPES } from "./model.ts";
import type { Command, Effect, EngineEvent, ExecutionState, JournalEntry } from "./state.ts";
import { isFinished, step, SUB_RUN_DECISION, subRunPauses } from "./step.ts";
import type { StepInput } from "./step.ts";

export interface ReplayInput {
  /**
   * The run's row says it was cancelled: the cancel, with this reason, is taken after the
   * journal, so that the rebuilt run ends as the row says (and tells its end when that was
   * never published). Without it, a cancelled run whose checkpoint was lost replays to running
   * (chaos seed 994).
   */
  cancelled?: string;
  definition: WorkflowDefinition;
  identity: NonNullable<StepInput["identity"]>;
  /** The start command as first given (input, deadline, parent...). */
  start: Command & { kind: "start" };
  /**
   * Journal rows in the order they were written; `stepVersion`, where known, the step that
   * last wrote the row (see {@link announcedThrough}); `beganStep`, where known, the step that
   * began the row's attempt (its write running or paused), which a later step's write of the
   * row leaves alone.
   */
  journal: (JournalEntry & { stepVersion?: number | null; beganStep?: number | null })[];
  /**
   * The highest step whose events were published (the message ids on the event stream say
   * so), when known. A step's events go out after its rows, so an executor that died between
   * the two left rows in the journal whose events never went out: a replayed step that last
   * wrote a row numbered past this one is one of them, and its events, and every later step's,
   * are given back with the unrecorded (see unrecordedOf). 0: none published, every step is
   * given back. Undefined: not known, every step whose rows are in the journal counts as announced.
   */
  announcedThrough?: number;
  /**
   * By event kind, the step of the last event of that kind the run published, for the kinds
   * the stream holds one of. A step's rows may all be written again by a later step whose
   * events never went out either (a retry's start, then its failure: the row says `failed`, by
   * the later step), so no row tells that the earlier step was past `announcedThrough`; its
   * events are given back when one of them is of a kind last published before a step that
   * the journal places at or before it (see unrecordedOf).
   */
  announcedByKind?: Readonly<Partial<Record<EngineEvent["kind"], number>>>;
  /** Time of the start step (the execution's startedAt). */
  startedAt: string;
  blobs?: ReadonlyMap<string, JsonValue>;
  /** References the caller found not stored: a step that reads one fails the run (StepInput.missingBlobs). */
  missingBlobs?: ReadonlySet<string>;
  /**
   * The run's sub-runs that are paused (their rows say so): a pause in sub-runs is not in the
   * journal, so it is learned again from them, as news of step 0 (older than any news a
   * sub-run sends), after the journal; with the reason each would tell (its own pause
   * reason), when known.
   */
  pausedSubRuns?: LearnedSubRunPause[];
  /**
   * What the run had announced of its pauses in sub-runs when the checkpoint was lost (the
   * execution row's, written before a step's events): the nodes paused in sub-runs with the
   * sub-run each names ({@link subRunPauses}), and the pause point (`currentState`). Absent:
   * none announced. See {@link ReplayResult.subRunNews}; the pauses are learned again so that
   * the pause point, and the sub-run each node's pause names, are the announced ones where
   * they still wait.
   */
  announced?: { subRunPauses: Readonly<Record<string, number>>; pausePoint?: string | null };
}

/** A sub-run that is paused, as its row (and its own pause) says: the node that waits for it, which child it is, its reason. */
export interface LearnedSubRunPause {
  nodeId: string;
  childKey: string;
  childExecutionId: number;
  reason?: string;
}

export interface ReplayResult {
  state: ExecutionState;
  /** Effects that must be carried out again: calls, children, timers and reviews still outstanding. */
  rearm: Effect[];
  /** Journal rows the replay could not place (should be empty). */
  unplaced: JournalEntry[];
  /**
   * The records (journal and emit effects) of the replayed steps that never reached the journal
   * and the event stream (see unrecordedOf), with what those steps stopped (`cancelTools`,
   * `cancelChildren`). A step writes its checkpoint before its rows and events, so when the
   * executor died with a step's records unwritten and Redis then lost the checkpoint holding
   * them, no one else has them. The replay recomputes such steps (inline nodes, a node started
   * after them); these are their records, to be written and published. A step's stops are sent
   * after its rows and before its events, so a step whose events never went out may not have
   * sent them either (a cancel whose executor died after its rows left the calls and children
   * it stopped running); sending them again is harmless. Nothing the rebuilt state still waits
   * for is stopped.
   */
  unrecorded: Effect[];
  /**
   * What the run owes of its pauses in sub-runs (nothing once it has ended): the
   * `execution.paused` of each node learned paused that was not announced, and the
   * `execution.resumed` (decision `sub_run`, naming the announced sub-run) of each node
   * announced paused in which no review waits any more (its sub-runs were decided, or ended,
   * while the checkpoint was lost) — the events the run would have published had it kept its
   * checkpoint. See {@link ReplayInput.announced}.
   */
  subRunNews: EngineEvent[];
}

export async function replayJournal(input: ReplayInput): Promise<ReplayResult> {
  const { definition, identity, blobs, missingBlobs } = input;
  let now = input.startedAt;
  const effects: Effect[] = [];
  const refs = { ...(blobs ? { blobs } : {}), ...(missingBlobs ? { missingBlobs } : {}) };
  /** The effects of each step of the journal's replay, in order (see unrecordedOf). */
  const steps: Effect[][] = [];
  let replaying = true;
  const apply = async (state: ExecutionState | null, command: Command): Promise<ExecutionState> => {
    const r = await step({ definition, state, command, now, identity, ...refs });
    effects.push(...r.effects);
    if (replaying) steps.push(r.effects);
    let s = r.state;
    let more = r.more;
    while (more) {
      const c = await step({ definition, state: s, command: { kind: "continue" }, now, identity, ...refs });
      effects.push(...c.effects);
      if (replaying) steps.push(c.effects);
      s = c.state;
      more = c.more;
    }
    return s;
  };

  // Inline steps the run took after its next recorded outcome, not before (the executor takes
  // at most 256 in a row before the commands queued behind them): a continue whose rows the
  // journal numbers past the step of the outcome about to be applied waits for it, and so does
  // one whose rows it lacks (taken later, or never), unless the outcome cannot be placed without
  // it (its rows were lost while later ones landed).
  const rowStep = new Map<string, number>();
  const began = new Map<string, number>();
  const attempts = new Set<string>();
  const numbered = input.journal.every((j) => typeof j.stepVersion === "number");
  for (const j of input.journal) {
    attempts.add(`${j.nodeId}#${j.attempt}`);
    if (typeof j.stepVersion === "number") rowStep.set(`${j.nodeId}#${j.attempt}:${j.status}`, j.stepVersion);
    if (typeof j.beganStep === "number") began.set(`${j.nodeId}#${j.attempt}`, j.beganStep);
  }
  // A write the journal has (same node, attempt and status) gives the step's number; so does a
  // beginning whose row a later step wrote again (a start, then its end), by the row's
  // `beganStep` (rows written before the journal kept it give none); an attempt with no row at
  // all was not taken before the rows that landed.
  const after = (stepEffects: readonly Effect[], until: number): boolean =>
    numbered && stepEffects.some((e) => {
      if (e.kind !== "journal") return false;
      const attempt = `${e.entry.nodeId}#${e.entry.attempt}`;
      const n = rowStep.get(`${attempt}:${e.entry.status}`) ?? (e.entry.status === "running" || e.entry.status === "paused" ? began.get(attempt) : undefined);
      return n !== undefined ? n > until : until !== Infinity && !attempts.has(attempt);
    });
  /** Ready nodes wait for a continue. */
  let pending = false;
  const take = async (state: ExecutionState | null, command: Command): Promise<ExecutionState> => {
    const r = await step({ definition, state, command, now, identity, ...refs });
    effects.push(...r.effects);
    steps.push(r.effects);
    pending = r.more;
    return r.state;
  };
  /** The inline steps the run took before step `until` of the journal (all of them: Infinity). */
  const catchUp = async (state: ExecutionState, until: number): Promise<ExecutionState> => {
    let s = state;
    while (pending) {
      const c = await step({ definition, state: s, command: { kind: "continue" }, now, identity, ...refs });
      if (after(c.effects, until)) break;
      effects.push(...c.effects);
      steps.push(c.effects);
      s = c.state;
      pending = c.more;
    }
    return s;
  };

  let state = await take(null, input.start);
  const unplaced: JournalEntry[] = [];
  const types = new Map(definition.nodes.map((n) => [n.id, n.type]));
  for (const entry of input.journal) {
    const type = types.get(entry.nodeId);
    if (!type || NODE_TYPES[type]?.inline) continue;
    const at = typeof entry.stepVersion === "number" ? entry.stepVersion : Infinity;
    if (entry.status === "running") {
      // A retry's attempt that started and has no outcome yet: its backoff is over, so fire the
      // timer; the attempt is then outstanding and its call is sent again as a repeat.
      state = await catchUp(state, at);
      const waiting = state.nodes[entry.nodeId];
      if (waiting?.status === "running" && waiting.timerId?.startsWith("retry:") && waiting.attempt < entry.attempt) {
        if (entry.startedAt) now = entry.startedAt;
        state = await take(state, { kind: "timer", timerId: waiting.timerId });
      }
      continue;
    }
    if (entry.status !== "completed" && entry.status !== "failed") continue;
    if (entry.errorCode === "BATON_CANCELLED") continue;
    state = await catchUp(state, at);
    if (entry.completedAt) now = entry.completedAt;
    let run = state.nodes[entry.nodeId];
    // A retry waits on its backoff timer: fire it so the recorded attempt is outstanding.
    if (run?.status === "running" && run.timerId && run.attempt < entry.attempt) {
      state = await take(state, { kind: "timer", timerId: run.timerId });
      state = await catchUp(state, at);
      run = state.nodes[entry.nodeId];
    }
    const placed = (r: typeof run): boolean => r !== undefined && (r.status === "running" || r.status === "paused") && r.attempt === entry.attempt;
    if (!placed(run) && pending) {
      // Not started yet: by inline steps whose rows were lost while this one landed.
      state = await catchUp(state, Infinity);
      run = state.nodes[entry.nodeId];
    }
    if (!run || (run.status !== "running" && run.status !== "paused") || run.attempt !== entry.attempt) {
      // An outcome the engine itself decided (past `maxVisits`, a loop's limit), which the
      // replay has just decided again: in place.
      if (run?.attempt === entry.attempt && run.status === entry.status) continue;
      unplaced.push(entry);
      continue;
    }
    const cmd = commandFor(type, entry, run);
    if (!cmd) {
      unplaced.push(entry);
      continue;
    }
    state = await take(state, cmd);
  }
  state = await catchUp(state, Infinity);
  // A cancel is not journaled (the attempts it stopped are, failed with BATON_CANCELLED, and
  // skipped above): the row says so, and the cancel is taken last, as it was.
  if (input.cancelled !== undefined && (state.status === "running" || state.status === "paused")) state = await take(state, { kind: "cancel", reason: input.cancelled });

  replaying = false;
  const live = outstandingWork(state);
  const unrecorded = unrecordedOf(steps, input.journal, input.announcedThrough, input.announcedByKind).flatMap((e): Effect[] => {
    if (e.kind === "cancelTools") {
      const callIds = e.callIds.filter((id) => !live.calls.has(id));
      return callIds.length ? [{ ...e, callIds }] : [];
    }
    if (e.kind === "cancelChildren") {
      const childKeys = e.childKeys.filter((key) => !live.children.has(`${e.nodeId}/${key}`));
      return childKeys.length ? [{ ...e, childKeys }] : [];
    }
    return [e];
  });

  const announced = input.announced?.subRunPauses ?? {};
  const pausePoint = input.announced?.pausePoint ?? undefined;
  // The pause point after the journal: a review of the run's own, if one waits.
  const own = state.pause;
  const learned: EngineEvent[] = [];
  for (const p of learningOrder(input.pausedSubRuns ?? [], announced, pausePoint)) {
    const from = effects.length;
    const next = await apply(state, {
      kind: "childPaused", nodeId: p.nodeId, childKey: p.childKey, childExecutionId: p.childExecutionId, paused: true, seq: 0, ...(p.reason ? { reason: p.reason } : {}),
    });
    for (const e of effects.slice(from)) if (e.kind === "emit" && e.event.kind === "execution.paused") learned.push(e.event);
    state = next;
  }
  // Learning moves the pause point to the pauses learned; the row's was the run's own review.
  if (own && own.subExecutionId === undefined && own.nodeId === pausePoint && state.nodes[own.nodeId]?.status === "paused") state = { ...state, pause: own };

  const subRunNews: EngineEvent[] = [];
  if (!isFinished(state)) {
    const now = subRunPauses(state);
    for (const [nodeId, sub] of Object.entries(announced)) {
      if (now[nodeId] === undefined) subRunNews.push({ kind: "execution.resumed", nodeId, decision: SUB_RUN_DECISION, subExecutionId: sub });
    }
    for (const e of learned) if (e.kind === "execution.paused" && announced[e.nodeId] === undefined) subRunNews.push(e);
  }

  return { state, rearm: stillOutstanding(state, live, effects), unplaced, unrecorded, subRunNews };
}

/**
 * The records the journal lacks, from the first replayed step that has a row missing, or whose
 * events never went out: that step's and every later step's events and stops, and their rows
 * that are missing. A step's events go out only once its rows are written and the events of the
 * steps before it are out, so that step's events and all later ones were never published; rows of
 * later steps may have landed (statements overlap), and are not written again. A step's entry
 * is in the journal when its attempt has a row there: any row for a start, a finished one for
 * an end. A step's events never went out, its rows written, when the journal places one of its
 * writes (placesOf: the row it last wrote, or the attempt it began) at a step past
 * `announcedThrough`, the last step whose events were published (unknown: none counts as
 * unannounced). Its events never went out either when one of them is of a kind whose last
 * published event (`announcedByKind`) is numbered below a write that the journal places at or
 * before this step: steps are numbered in the order they were taken, so this step's number is
 * at least that write's (chaos seed 853: a retry's start, whose only row its failure wrote
 * again, both unannounced; on rows written before `beganStep`, the only way to tell).
 */
function unrecordedOf(steps: readonly Effect[][], journal: ReplayInput["journal"], announcedThrough?: number, announcedByKind?: ReplayInput["announcedByKind"]): Effect[] {
  const rows = new Map<string, boolean>();
  for (const j of journal) {
    const key = `${j.nodeId}#${j.attempt}`;
    rows.set(key, rows.get(key) === true || j.status !== "running");
  }
  const missing = (e: Effect): boolean => {
    if (e.kind !== "journal") return false;
    const finished = rows.get(`${e.entry.nodeId}#${e.entry.attempt}`);
    return finished === undefined || (e.entry.status !== "running" && !finished);
  };
  const places = placesOf(steps, journal);
  const starts: number[] = [];
  // Nothing published (no event of the run on a stream that would still hold them): every
  // step whose rows are written is told, from the first; so is a run whose steps wrote no row at
  // all (a fork of a finished run that ends at its start, a start that fails at once: chaos seed
  // 5005), whose start is otherwise never told.
  if (announcedThrough === 0 && (journal.length === 0 || journal.some((j) => typeof j.stepVersion === "number"))) starts.push(0);
  if (announcedThrough !== undefined) {
    const past = places.findIndex((p) => p.numbers.some((n) => n > announcedThrough));
    if (past >= 0) starts.push(past);
  }
  if (announcedByKind) {
    // The least number each replayed step can have: the highest of the rows it, or a step before it, wrote as the journal places them.
    let atLeast = 0;
    untold: for (const [i, effects] of steps.entries()) {
      atLeast = Math.max(atLeast, ...places[i]!.numbers);
      for (const e of effects) {
        const last = e.kind === "emit" ? announcedByKind[e.event.kind] : undefined;
        if (last !== undefined && last < atLeast) {
          starts.push(i);
          break untold;
        }
      }
    }
  }
  const firstMissing = steps.findIndex((effects) => effects.some(missing));
  if (firstMissing >= 0) starts.push(firstMissing);
  if (starts.length === 0) return [];
  const first = Math.min(...starts);
  const origins = originsOf(steps, places, announcedThrough);
  return steps.slice(first).flatMap((effects, k) => {
    const origin = origins.get(first + k);
    return effects.flatMap((e, i): Effect[] => {
      if (e.kind === "emit") return [origin ? { ...e, origin: { step: origin.step, index: origin.offset + i + 1 } } : e];
      return e.kind === "cancelTools" || e.kind === "cancelChildren" || missing(e) ? [e] : [];
    });
  });
}

/** Where the journal places a replayed step: the step numbers of the rows it wrote, and whether it places each of them. */
interface Place { numbers: number[]; whole: boolean }

/**
 * The live step number of each journal write of each replayed step, as the journal says: a row
 * (same node, attempt and status) that the replayed step wrote last carries it (`stepVersion`);
 * a beginning (a write running or paused) whose row a later step wrote again carries it in the
 * row's `beganStep` (chaos seeds 853 and 1147: a retry's start, or a run's start, whose only row
 * the attempt's end rewrote). A write placed by neither leaves its step not whole.
 */
function placesOf(steps: readonly Effect[][], journal: ReplayInput["journal"]): Place[] {
  /** The step number of each row, as `node#attempt:status` (its last write). */
  const rowStep = new Map<string, number>();
  /** The step that began each attempt, as `node#attempt`. */
  const began = new Map<string, number>();
  for (const j of journal) {
    const key = `${j.nodeId}#${j.attempt}`;
    if (typeof j.stepVersion === "number") rowStep.set(`${key}:${j.status}`, j.stepVersion);
    if (typeof j.beganStep === "number") began.set(key, j.beganStep);
  }
  // The replayed step that last wrote each of those rows (a later step may write the same again).
  const lastWriter = new Map<string, number>();
  steps.forEach((effects, i) => {
    for (const e of effects) {
      if (e.kind !== "journal") continue;
      const key = `${e.entry.nodeId}#${e.entry.attempt}:${e.entry.status}`;
      if (rowStep.has(key)) lastWriter.set(key, i);
    }
  });
  return steps.map((effects, i): Place => {
    const place: Place = { numbers: [], whole: true };
    for (const e of effects) {
      if (e.kind !== "journal") continue;
      const attempt = `${e.entry.nodeId}#${e.entry.attempt}`;
      const key = `${attempt}:${e.entry.status}`;
      const n = lastWriter.get(key) === i ? rowStep.get(key)
        : e.entry.status === "running" || e.entry.status === "paused" ? began.get(attempt) : undefined;
      if (n === undefined) place.whole = false;
      else place.numbers.push(n);
    }
    return place;
  });
}

/**
 * For the replayed steps the journal places, the live step that took them (Effect `origin`):
 * its number, and how many of its effects came before (a live step may take several commands,
 * each replayed as a step of its own, one after another). A replayed step is placed when each
 * row it writes is placed (placesOf), all by one live step past `announcedThrough` (never an id
 * of a step whose events went out). The first of a live step's replayed steps is taken to
 * begin it. Should a step the journal cannot place have begun it (a command whose rows later
 * steps wrote again, and that began no attempt), the places are off: they name other places
 * of the same unannounced step, and at worst a late copy goes out too, as without places.
 */
function originsOf(steps: readonly Effect[][], places: readonly Place[], announcedThrough: number | undefined): Map<number, { step: number; offset: number }> {
  const out = new Map<number, { step: number; offset: number }>();
  if (announcedThrough === undefined) return out;
  const stepOf = places.map(({ numbers, whole }): number | undefined => {
    const at = numbers[0];
    return whole && at !== undefined && at > announcedThrough && numbers.every((n) => n === at) ? at : undefined;
  });
  const begun = new Set<number>();
  for (let i = 0; i < steps.length; i++) {
    const step = stepOf[i];
    if (step === undefined) continue;
    if (i > 0 && stepOf[i - 1] === step) {
      // The live step of the one before goes on: placed after it, when that one was placed.
      const before = out.get(i - 1);
      if (before) out.set(i, { step, offset: before.offset + steps[i - 1]!.length });
    } else if (!begun.has(step)) {
      out.set(i, { step, offset: 0 });
    }
    begun.add(step);
  }
  return out;
}

/**
 * The order in which pauses in sub-runs are learned again: a node's pause names the first of
 * its sub-runs learned, and the pause point is the last node learned. So each node's
 * announced sub-run comes first, and the announced pause point's sub-runs last.
 */
function learningOrder(pauses: readonly LearnedSubRunPause[], announced: Readonly<Record<string, number>>, pausePoint: string | undefined): LearnedSubRunPause[] {
  const rank = (p: LearnedSubRunPause): number => (p.nodeId === pausePoint ? 2 : 0) + (announced[p.nodeId] === p.childExecutionId ? 0 : 1);
  return [...pauses].sort((a, b) => rank(a) - rank(b) || a.childExecutionId - b.childExecutionId);
}

/** The calls (by id) and children (as `node/childKey`) a state still waits for. */
function outstandingWork(state: ExecutionState): { calls: Set<string>; children: Set<string> } {
  const calls = new Set<string>();
  const children = new Set<string>();
  for (const [id, run] of Object.entries(state.nodes)) {
    if (run.status !== "running") continue;
    if (run.callId) calls.add(run.callId);
    if (run.childKey) children.add(`${id}/${run.childKey}`);
    for (const it of run.fan?.items ?? []) {
      if (it.status === "running" && it.key) {
        calls.add(it.key);
        children.add(`${id}/${it.key}`);
      }
    }
  }
  return { calls, children };
}

/** Of the effects issued on the way, those whose work the final state still waits for. */
function stillOutstanding(state: ExecutionState, { calls, children }: ReturnType<typeof outstandingWork>, effects: Effect[]): Effect[] {
  const out: Effect[] = [];
  for (const e of effects) {
    if (e.kind === "callTool" && calls.has(e.callId)) out.push(e);
    else if (e.kind === "startChild" && children.has(`${e.nodeId}/${e.childKey}`)) out.push(e);
    else if (e.kind === "review" && state.nodes[e.nodeId]?.status === "paused") out.push(e);
    else if (e.kind === "setTimer" && state.timers?.[e.timerId]) out.push(e);
  }
  return out;
}

function commandFor(type: string, entry: JournalEntry, run: ExecutionState["nodes"][string]): Command | undefined {
  const output = entry.output ?? null;
  if (type === "agent.humanReview") {
    const o = isJsonObject(output) ? output : {};
    const decision = o.decision === "edit" || o.decision === "reject" ? o.decision : entry.status === "failed" ? "reject" : "approve";
    return {
      kind: "resume", nodeId: entry.nodeId, action: decision,
      ...(decision === "edit" && isJsonObject(o.data) ? { data: o.data } : {}),
      ...(typeof o.comment === "string" ? { comment: o.comment } : {}),
      ...(typeof o.reviewer === "string" ? { reviewer: o.reviewer } : {}),
    };
  }
  if (type === "delay" && run.timerId) return { kind: "timer", timerId: run.timerId };
  const error = { code: entry.errorCode ?? "BATON_TOOL_FAILED", message: stripCode(entry.error ?? "failed"), retryable: entry.retryable ?? false };
  if (type === "agent.toolLoop" || type === "agent.toolExecutor" || type === "synthdev.state") {
    return entry.status === "completed"
      ? { kind: "recorded", nodeId: entry.nodeId, attempt: entry.attempt, ok: true, output }
      : { kind: "recorded", nodeId: entry.nodeId, attempt: entry.attempt, ok: false, error };
  }
  if (run.callId) {
    return entry.status === "completed"
      ? { kind: "toolResult", nodeId: entry.nodeId, callId: run.callId, ok: true, output, durationMs: entry.durationMs ?? 0 }
      : { kind: "toolResult", nodeId: entry.nodeId, callId: run.callId, ok: false, error, durationMs: entry.durationMs ?? 0 };
  }
  if (run.childKey) {
    return entry.status === "completed"
      ? { kind: "childResult", nodeId: entry.nodeId, childKey: run.childKey, status: "completed", output }
      : { kind: "childResult", nodeId: entry.nodeId, childKey: run.childKey, status: "failed", error };
  }
  // Fan nodes (forEach, multi-call tools) journal the node's outcome, not each item.
  if (run.fan) {
    return entry.status === "completed"
      ? { kind: "recorded", nodeId: entry.nodeId, attempt: entry.attempt, ok: true, output }
      : { kind: "recorded", nodeId: entry.nodeId, attempt: entry.attempt, ok: false, error };
  }
  return undefined;
}

function stripCode(message: string): string {
  const m = /^[A-Z][A-Z0-9_]+: (.*)$/s.exec(message);
  return m ? m[1]! : message;
}
