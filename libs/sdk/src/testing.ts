/**
 * Test support for tool workers against a real NATS (`@baton/sdk/testing`): random
 * prefixes, a collector of the ToolResults workers send, tool calls, and clean-up of
 * every stream and KV bucket of a prefix.
 */
import { randomBytes } from "node:crypto";
import { jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import type { Bus, Subscription } from "@baton/bus";
import { ToolResultSchema, decode, valueToJson } from "@baton/contracts";
import type { JsonObject, JsonValue } from "@baton/contracts";
import { createMessaging } from "@baton/messaging";
import type { ToolContext } from "./tool.ts";

export const TEST_NATS_URL = process.env.BATON_NATS_URL ?? "nats://127.0.0.1:4222";

export function randomToolPrefix(): string {
  return `tw_${randomBytes(5).toString("hex")}`;
}

/** A ToolResult as plain data. */
export interface CollectedResult {
  callId: string;
  tool: string;
  ok: boolean;
  output: JsonValue | undefined;
  error: { code: string; message: string; retryable: boolean } | undefined;
  workerId: string;
  durationMs: number;
}

export interface ResultCollector {
  /** Every result received, in order (duplicates included). */
  readonly all: CollectedResult[];
  /** Resolves with the first result of `callId` (polls; the test's timeout bounds it). */
  waitFor(callId: string): Promise<CollectedResult>;
  stop(): Promise<void>;
}

/** Consumes `{p}.cmd.tool.result` (durable `test_results`) the way the executor does. */
export async function collectResults(bus: Bus): Promise<ResultCollector> {
  const all: CollectedResult[] = [];
  const m = createMessaging(bus);
  const sub: Subscription = await bus.consume(
    { stream: "commands", durable: "test_results", filterSubjects: [m.subjects.command("tool.result")], ackWaitMs: 5_000 },
    async (msg) => {
      const r = decode(ToolResultSchema, msg.data);
      all.push({
        callId: r.callId,
        tool: r.tool,
        ok: r.ok,
        output: valueToJson(r.output),
        error: r.error ? { code: r.error.code, message: r.error.message, retryable: r.error.retryable } : undefined,
        workerId: r.workerId,
        durationMs: r.durationMs,
      });
    },
  );
  return {
    all,
    async waitFor(callId) {
      for (;;) {
        const r = all.find((x) => x.callId === callId);
        if (r) return r;
        await new Promise((res) => setTimeout(res, 20));
      }
    },
    stop: () => sub.stop(),
  };
}

/** Puts a tool call on the tool's queue, as the executor does. */
export async function callTool(bus: Bus, tool: string, args: JsonObject, extra: { callId?: string; idempotencyKey?: string; timeoutMs?: number; tenantId?: string } = {}): Promise<string> {
  const callId = extra.callId ?? `1.n_${randomBytes(4).toString("hex")}.1`;
  await createMessaging(bus).callTool({
    callId,
    tool,
    tenantId: extra.tenantId ?? "t_test",
    executionId: 1,
    nodeId: "n",
    attempt: 1,
    args,
    ...(extra.idempotencyKey ? { idempotencyKey: extra.idempotencyKey } : {}),
    ...(extra.timeoutMs ? { timeoutMs: extra.timeoutMs } : {}),
  });
  return callId;
}

/** Deletes the prefix's streams, KV buckets (`KV_{prefix}_*`) and object buckets (`OBJ_{prefix}_*`). */
export async function deletePrefix(prefix: string, servers = TEST_NATS_URL): Promise<void> {
  const nc = await connect({ servers });
  try {
    const jsm = await jetstreamManager(nc);
    const base = prefix.toUpperCase().replace(/[^A-Z0-9]/g, "_");
    const kv = `KV_${prefix.replace(/[^A-Za-z0-9_-]/g, "_")}_`;
    const obj = `OBJ_${prefix.replace(/[^A-Za-z0-9_-]/g, "_")}_`;
    for await (const name of jsm.streams.names()) {
      if (name.startsWith(`${base}_`) || name.startsWith(kv) || name.startsWith(obj)) await jsm.streams.delete(name).catch(() => false);
    }
  } finally {
    await nc.close();
  }
}

/**
 * A handler context for calling a tool directly in a unit test: execution 1, node "n",
 * attempt 1, no-op progress and streaming unless overridden.
 * @example await tool.handler(input, toolContext({ signal: ac.signal }))
 */
export function toolContext(overrides: Partial<ToolContext> = {}): ToolContext {
  return {
    idempotencyKey: "1.n",
    callId: "1.n.1",
    executionId: 1,
    rootExecutionId: 1,
    tenantId: "t",
    nodeId: "n",
    attempt: 1,
    signal: new AbortController().signal,
    progress: () => undefined,
    stream: () => undefined,
    ...overrides,
  };
}
