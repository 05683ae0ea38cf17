/**
 * The tool worker: takes tool calls from the JetStream work queue (shared by
 * every worker process, so calls are sharded across them), runs the handler with
 * a time limit, and sends the result back to the executor as a command.
 *
 * A redelivered call whose result is already recorded is answered from the
 * record instead of running again; handlers get the call's idempotency key for
 * their own side effects.
 */
import type { IdempotencyStore } from "@baton/checkpoints";
import { ToolCallSchema, decode, valueFromJson } from "@baton/contracts";
import type { JsonObject, JsonValue } from "@baton/engine";
import { errorMessage, hasCode } from "@baton/errors";
import type { Messaging } from "@baton/messaging";
import type { Service } from "@baton/runtime";
import type { Subscription } from "@baton/bus";
import type { Logger } from "@baton/telemetry";
import { ToolTimeout, ToolUnknown } from "./errors.ts";

export interface ToolContext {
  /** Stable across redeliveries and retries of the same attempt. */
  idempotencyKey: string;
  executionId: number;
  tenantId: string;
  nodeId: string;
  attempt: number;
  /** Aborted on timeout or shutdown. */
  signal: AbortSignal;
}

export interface ToolDefinition {
  description: string;
  /** @default 30_000 */
  timeoutMs?: number;
  handler(args: JsonObject, ctx: ToolContext): Promise<JsonValue>;
}

export interface ToolWorkerOptions {
  messaging: Messaging;
  idempotency: IdempotencyStore;
  tools: Record<string, ToolDefinition>;
  logger: Logger;
  workerId: string;
  /** Calls this process runs at once. @default 16 */
  concurrency?: number;
  /** How long a taken call may go without a heartbeat before JetStream redelivers it. @default 30_000 */
  ackWaitMs?: number;
}

interface RecordedResult {
  ok: boolean;
  output?: JsonValue;
  error?: { code: string; message: string; retryable: boolean };
  durationMs: number;
  workerId: string;
}

export function createToolWorker(opts: ToolWorkerOptions): Service & { readonly inFlight: number } {
  const { messaging, idempotency, tools, logger } = opts;
  const ackWaitMs = opts.ackWaitMs ?? 30_000;
  const shutdown = new AbortController();
  let sub: Subscription | undefined;
  let inFlight = 0;

  async function run(tool: string, args: JsonObject, ctx: Omit<ToolContext, "signal">, onBeat: () => void): Promise<RecordedResult> {
    const started = Date.now();
    const def = tools[tool];
    if (!def) {
      const e = ToolUnknown(tool);
      return { ok: false, error: { code: e.code, message: e.message, retryable: false }, durationMs: 0, workerId: opts.workerId };
    }
    const timeoutMs = def.timeoutMs ?? 30_000;
    const ac = new AbortController();
    const onShutdown = () => ac.abort(shutdown.signal.reason);
    shutdown.signal.addEventListener("abort", onShutdown);
    const beat = setInterval(onBeat, Math.max(100, Math.floor(ackWaitMs / 3)));
    let timer: NodeJS.Timeout | undefined;
    try {
      const output = await Promise.race([
        def.handler(args, { ...ctx, signal: ac.signal }),
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => {
            const e = ToolTimeout(tool, timeoutMs);
            ac.abort(e);
            reject(e);
          }, timeoutMs);
        }),
      ]);
      return { ok: true, output: output ?? null, durationMs: Date.now() - started, workerId: opts.workerId };
    } catch (err) {
      const code = hasCode(err) ? err.code : "BATON_TOOL_FAILED";
      const retryable = hasCode(err) ? err.retryable : true;
      return { ok: false, error: { code, message: errorMessage(err), retryable }, durationMs: Date.now() - started, workerId: opts.workerId };
    } finally {
      clearTimeout(timer);
      clearInterval(beat);
      shutdown.signal.removeEventListener("abort", onShutdown);
    }
  }

  return {
    get inFlight() {
      return inFlight;
    },
    async start() {
      sub = await messaging.bus.consume(
        {
          stream: "tools",
          durable: "workers",
          filterSubjects: [messaging.subjects.allToolCalls()],
          concurrency: opts.concurrency ?? 16,
          ackWaitMs,
          maxDeliver: 5,
        },
        async (msg) => {
          const call = decode(ToolCallSchema, msg.data);
          inFlight++;
          try {
            const key = `tool-result:${call.callId}`;
            let result = await idempotency.get<RecordedResult>(key);
            if (result) {
              logger.debug("tool call already done; resending its result", { callId: call.callId });
            } else {
              result = await run(call.tool, (call.args ?? {}), {
                idempotencyKey: call.callId,
                executionId: call.executionId,
                tenantId: call.tenantId,
                nodeId: call.nodeId,
                attempt: call.attempt,
              }, () => msg.working());
              result = (await idempotency.remember(key, result, 7 * 24 * 3600)).value;
            }
            await messaging.sendCommand("tool.result", {
              callId: call.callId,
              executionId: call.executionId,
              tenantId: call.tenantId,
              nodeId: call.nodeId,
              attempt: call.attempt,
              tool: call.tool,
              ok: result.ok,
              ...(result.ok ? { output: valueFromJson(result.output ?? null) } : {}),
              ...(result.error ? { error: result.error } : {}),
              durationMs: result.durationMs,
              workerId: result.workerId,
            }, `result:${call.callId}`);
          } finally {
            inFlight--;
          }
        },
      );
    },
    async stop() {
      // Finish what is in flight (the subscription waits for handlers), then abort stragglers.
      await sub?.stop();
      shutdown.abort(new Error("worker stopping"));
    },
  };
}
