/**
 * The executor: consumes execution commands and tool results, applies them with
 * the engine's pure `step`, and after every node writes the checkpoint to Redis
 * (compare-and-set on its version) before it carries out the step's effects.
 *
 * Crash safety: the effects of a step are written into the checkpoint (the
 * outbox) in the same compare-and-set, then carried out with idempotency keys
 * (journal upserts, `Nats-Msg-Id` on every publish). A command redelivered after
 * a crash finds the outbox, carries it out again harmlessly, and the command
 * itself is ignored by `step` because the state already reflects it. So no
 * completed node runs twice and nothing is lost.
 */
import type { CheckpointStore } from "@baton/checkpoints";
import { valueToJson } from "@baton/contracts";
import type { Command, Effect, ExecutionState, JsonValue, WorkflowDefinition } from "@baton/engine";
import { isFinished, step, validateWorkflow } from "@baton/engine";
import { errorMessage, hasCode } from "@baton/errors";
import type { AnyCommand, Messaging } from "@baton/messaging";
import type { Service } from "@baton/runtime";
import type { Store } from "@baton/store";
import type { Subscription } from "@baton/bus";
import type { Logger } from "@baton/telemetry";
import { DefinitionInvalid, DefinitionMissing, ExecutionMissing, NotStarted } from "./errors.ts";
import { publishEngineEvent } from "./events.ts";

/** What the checkpoint holds: the engine state plus the effects not yet known to be carried out. */
export interface CheckpointState extends ExecutionState {
  outbox?: Effect[];
}

export interface ExecutorOptions {
  messaging: Messaging;
  store: Store;
  checkpoints: CheckpointStore<CheckpointState>;
  logger: Logger;
  /** Commands handled at once by this process. @default 32 */
  concurrency?: number;
  /** Durable consumer name shared by every executor replica. @default "executor" */
  durable?: string;
  /** @default () => new Date() */
  clock?: () => Date;
}

export interface Executor extends Service {
  /** Applies one command now (used by the consumer; exposed for tests and tools). */
  handle(cmd: AnyCommand): Promise<void>;
}

export function createExecutor(opts: ExecutorOptions): Executor {
  const { messaging, store, checkpoints, logger } = opts;
  const clock = opts.clock ?? (() => new Date());
  const definitions = new Map<string, WorkflowDefinition>();
  const locks = new Map<number, Promise<void>>();
  let sub: Subscription | undefined;

  async function definitionFor(tenantId: string, workflowId: number, version: number): Promise<WorkflowDefinition> {
    const key = `${workflowId}:${version}`;
    const cached = definitions.get(key);
    if (cached) return cached;
    const v = await store.workflows.getVersion(tenantId, workflowId, version);
    if (!v) throw DefinitionMissing(workflowId, version);
    const parsed = validateWorkflow(v.definition);
    if (!parsed.ok) throw DefinitionInvalid(workflowId, version, parsed.errors.map((e) => `${e.path}: ${e.message}`).join("; "));
    if (definitions.size > 1000) definitions.delete(definitions.keys().next().value!);
    definitions.set(key, parsed.workflow);
    return parsed.workflow;
  }

  /** Runs `fn` after every earlier call for the same execution in this process has finished. */
  async function serially(executionId: number, fn: () => Promise<void>): Promise<void> {
    const prev = locks.get(executionId) ?? Promise.resolve();
    const run = prev.then(fn, fn);
    const tail = run.catch(() => undefined);
    locks.set(executionId, tail);
    try {
      await run;
    } finally {
      if (locks.get(executionId) === tail) locks.delete(executionId);
    }
  }

  async function perform(state: ExecutionState, effects: Effect[], version: number): Promise<void> {
    // Durable records first, so a subscriber reacting to an event finds them.
    for (const e of effects) {
      if (e.kind !== "journal") continue;
      const j = e.entry;
      await store.nodeExecutions.record({
        tenantId: state.tenantId,
        executionId: state.executionId,
        nodeId: j.nodeId,
        nodeType: j.nodeType,
        attempt: j.attempt,
        status: j.status,
        ...(j.input !== undefined ? { input: j.input } : {}),
        ...(j.output !== undefined ? { output: j.output } : {}),
        ...(j.error !== undefined ? { error: j.error } : {}),
        ...(j.toolCalls !== undefined ? { toolCalls: j.toolCalls } : {}),
        ...(j.durationMs !== undefined ? { durationMs: j.durationMs } : {}),
        ...(j.startedAt ? { startedAt: new Date(j.startedAt) } : {}),
        ...(j.completedAt ? { completedAt: new Date(j.completedAt) } : {}),
      });
    }
    if (effects.length > 0) {
      const { outbox: _o, ...snapshot } = state as CheckpointState;
      await store.executions.update(state.executionId, {
        status: state.status,
        currentState: state.pause?.nodeId ?? state.lastNode ?? null,
        context: state.context,
        checkpoint: snapshot as unknown as JsonValue,
        ...(state.output !== undefined ? { output: state.output } : {}),
        ...(state.error ? { error: `${state.error.code}: ${state.error.message}` } : {}),
        ...(state.finishedAt ? { completedAt: new Date(state.finishedAt) } : {}),
      });
    }
    let i = 0;
    for (const e of effects) {
      i++;
      if (e.kind === "emit") {
        await publishEngineEvent(messaging, state, e.event, `evt:${state.executionId}:${version}:${i}`);
      } else if (e.kind === "callTool") {
        await messaging.callTool({
          callId: e.callId,
          executionId: state.executionId,
          tenantId: state.tenantId,
          nodeId: e.nodeId,
          attempt: e.attempt,
          tool: e.tool,
          args: e.args,
          timeoutMs: e.timeoutMs ?? 0,
        });
      }
    }
  }

  function toEngineCommand(cmd: AnyCommand): { executionId: number; tenantId: string; command: Command } {
    switch (cmd.name) {
      case "execution.start":
        return { executionId: cmd.message.executionId, tenantId: cmd.message.tenantId, command: { kind: "start", input: (cmd.message.input ?? {}) } };
      case "execution.resume": {
        const m = cmd.message;
        const action = m.action === "edit" || m.action === "reject" ? m.action : "approve";
        return {
          executionId: m.executionId,
          tenantId: m.tenantId,
          command: { kind: "resume", nodeId: m.nodeId, action, ...(m.data ? { data: m.data } : {}), ...(m.comment ? { comment: m.comment } : {}), ...(m.reviewer ? { reviewer: m.reviewer } : {}) },
        };
      }
      case "execution.cancel":
        return { executionId: cmd.message.executionId, tenantId: cmd.message.tenantId, command: { kind: "cancel", reason: cmd.message.reason || "cancelled" } };
      case "tool.result": {
        const m = cmd.message;
        const command: Command = m.ok
          ? { kind: "toolResult", nodeId: m.nodeId, callId: m.callId, ok: true, output: valueToJson(m.output) ?? null, durationMs: m.durationMs }
          : { kind: "toolResult", nodeId: m.nodeId, callId: m.callId, ok: false, durationMs: m.durationMs, error: { code: m.error?.code || "BATON_TOOL_FAILED", message: m.error?.message || "tool failed", retryable: m.error?.retryable ?? false } };
        return { executionId: m.executionId, tenantId: m.tenantId, command };
      }
      default:
        throw new Error(`the executor does not handle "${cmd.name}" yet`);
    }
  }

  async function apply(executionId: number, tenantId: string, first: Command): Promise<void> {
    const row = await store.executions.getById(executionId);
    if (!row || row.tenantId !== tenantId) throw ExecutionMissing(executionId);
    const cp = await checkpoints.get(executionId);
    let state: CheckpointState | null = cp?.state ?? null;
    let version = cp?.version ?? 0;
    if (state === null && first.kind !== "start") {
      if (row.status === "queued") throw NotStarted(executionId);
      throw NotStarted(executionId, { retryable: false });
    }
    const definition = await definitionFor(tenantId, row.agentWorkflowId, row.workflowVersion);

    // A crash may have left effects of the last write not carried out.
    if (state?.outbox?.length) {
      await perform(state, state.outbox, version);
    }
    let command: Command = first;
    let outboxPending = Boolean(state?.outbox?.length);
    for (;;) {
      const r = step({
        definition,
        state,
        command,
        now: clock().toISOString(),
        identity: { executionId, tenantId, workflowId: row.agentWorkflowId, workflowVersion: row.workflowVersion },
      });
      if (r.ignored !== undefined) {
        if (command.kind !== "continue") logger.debug("command ignored", { executionId, command: command.kind, why: r.ignored });
        // Another command may have left ready nodes behind (e.g. after a lost race).
        if (command.kind !== "continue" && state && state.status === "running" && state.ready.length > 0) {
          command = { kind: "continue" };
          continue;
        }
        break;
      }
      const written = await checkpoints.put(executionId, { ...r.state, outbox: r.effects }, version);
      version = written.version;
      state = r.state;
      outboxPending = r.effects.length > 0;
      await perform(state, r.effects, version);
      if (!r.more) break;
      command = { kind: "continue" };
    }
    if (state && outboxPending) {
      const written = await checkpoints.put(executionId, { ...state, outbox: [] }, version);
      version = written.version;
    }
    if (state && isFinished(state)) logger.info("execution finished", { executionId, status: state.status });
  }

  async function handle(cmd: AnyCommand): Promise<void> {
    const { executionId, tenantId, command } = toEngineCommand(cmd);
    await serially(executionId, async () => {
      try {
        await apply(executionId, tenantId, command);
      } catch (err) {
        if (hasCode(err) && !err.retryable && cmd.name === "execution.start") {
          // A start that can never run (missing or invalid definition): record why, do not retry.
          await store.executions.update(executionId, { status: "failed", error: `${err.code}: ${err.message}`, completedAt: clock() }).catch(() => undefined);
          await messaging.publishEvent("execution.failed", { tenantId, id: executionId, agentWorkflowId: cmd.message.workflowId, error: { code: err.code, message: err.message, retryable: false }, nodeId: "" }, `evt:${executionId}:start-failed`).catch(() => undefined);
          logger.warn("execution could not start", { executionId, code: err.code, error: errorMessage(err) });
          return;
        }
        throw err;
      }
    });
  }

  return {
    handle,
    async start() {
      sub = await messaging.consumeCommands("executor", (cmd) => handle(cmd), {
        concurrency: opts.concurrency ?? 32,
        ackWaitMs: 30_000,
        maxDeliver: 20,
      });
    },
    async stop() {
      await sub?.stop();
    },
  };
}
