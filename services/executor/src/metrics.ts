/**
 * The executor's metrics (docs/observability.md): runs finished by status, their duration,
 * and node durations by node type and status, recorded when a step's events are confirmed,
 * from what the step journaled; and what recovery did: the commands the recovery sweep sent
 * for what was lost or left undone, and the checkpoints rebuilt from the journal. Nothing is
 * built when no meter provider records them.
 */
import { isFinished } from "@baton/engine";
import type { Effect, ExecutionState } from "@baton/engine";
import { getMeter, LONG_DURATION_BUCKETS_S, SHORT_DURATION_BUCKETS_S } from "@baton/telemetry";

export interface ExecutorMetrics {
  /** Records the journaled node outcomes of one step and, when it finished the run, the run. */
  step(prev: ExecutionState | null, state: ExecutionState, effects: readonly Effect[]): void;
  /** Counts a run that ended without running a step (cancelled while queued, a start that cannot run). */
  ended(status: "failed" | "cancelled", child: boolean): void;
  /** Counts a command the recovery sweep sent (not one another executor's sweep had sent already). */
  recovered(command: string): void;
  /** Counts a checkpoint rebuilt from the journal (Redis lost it, or held one it could not read or that was fenced). */
  rebuilt(): void;
}

const NONE: ExecutorMetrics = { step: () => undefined, ended: () => undefined, recovered: () => undefined, rebuilt: () => undefined };

/** The executor's instruments, created once per executor, on the meter provider registered now. */
export function createExecutorMetrics(): ExecutorMetrics {
  const { meter, enabled } = getMeter("@baton/executor");
  if (!enabled) return NONE;
  const executions = meter.createCounter("baton.executions", { unit: "{execution}", description: "Executions finished, by final status (completed, failed, cancelled)." });
  const executionDuration = meter.createHistogram("baton.execution.duration", {
    unit: "s",
    description: "Time from an execution's start to its end, by final status; paused time included.",
    advice: { explicitBucketBoundaries: [...LONG_DURATION_BUCKETS_S] },
  });
  const nodeDuration = meter.createHistogram("baton.node.duration", {
    unit: "s",
    description: "Duration of one node attempt that completed or failed, by node type and status.",
    advice: { explicitBucketBoundaries: [...SHORT_DURATION_BUCKETS_S] },
  });
  const recoveries = meter.createCounter("baton.recovery.commands", {
    unit: "{command}",
    description: "Commands the recovery sweep sent for runs whose command was lost or whose work was left undone, by command.",
  });
  const rebuilds = meter.createCounter("baton.checkpoint.rebuilds", { unit: "{checkpoint}", description: "Checkpoints rebuilt from the journal." });
  return {
    step(prev, state, effects) {
      for (const e of effects) {
        if (e.kind !== "journal") continue;
        const { status, durationMs, nodeType } = e.entry;
        if (durationMs === undefined || (status !== "completed" && status !== "failed")) continue;
        nodeDuration.record(durationMs / 1000, { "baton.node.type": nodeType, "baton.node.status": status });
      }
      // A run counts once, at the step that finished it (a step carried out again after a crash may count it again).
      if (!isFinished(state) || (prev !== null && isFinished(prev))) return;
      const attributes = { "baton.execution.status": state.status, "baton.execution.child": state.parent !== undefined };
      executions.add(1, attributes);
      const ms = Date.parse(state.finishedAt ?? "") - Date.parse(state.startedAt);
      if (Number.isFinite(ms) && ms >= 0) executionDuration.record(ms / 1000, attributes);
    },
    ended(status, child) {
      executions.add(1, { "baton.execution.status": status, "baton.execution.child": child });
    },
    recovered(command) {
      recoveries.add(1, { "baton.command": command });
    },
    rebuilt() {
      rebuilds.add(1);
    },
  };
}
