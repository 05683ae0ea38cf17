/**
 * Baton's worker as one piece, the same wherever it runs (the `worker` module of
 * `./baton start`, and `src/main.ts` as its own process): the built-in tools with the agent
 * nodes' `llm.*` tools (providers from the environment, docs/llm.md), plus any extra tools,
 * and the tool sources (HTTP tools declared without code, MCP servers; docs/tools.md).
 */
import type { Bus } from "@baton/bus";
import type { BatonConfig } from "@baton/config";
import { createLlmRegistry, createTokenBudget, llmConfigFromEnv, TOKEN_BUDGET_BUCKET, TOKEN_BUDGET_BUCKET_OPTIONS } from "@baton/llm";
import { createToolRegistry } from "@baton/sdk";
import type { ToolSpec } from "@baton/sdk";
import type { Logger } from "@baton/telemetry";
import { policyFromEnv } from "@baton/tools";
import { agentLlmTools } from "./agent-llm.ts";
import { createBuiltinWorker, workerLimits } from "./index.ts";
import { createToolSourcesWorker } from "./sources.ts";

export interface WorkerServiceOptions {
  bus: Bus;
  config: BatonConfig;
  logger: Logger;
  workerId: string;
  /** Where the LLM providers, the token budget and the HTTP policy are read from. @default process.env */
  env?: NodeJS.ProcessEnv;
  /** Served besides the built-in tools; one with a built-in's name replaces it. */
  extraTools?: readonly ToolSpec[];
}

/** The worker's parts, not started: `start` starts both, `stop` drains them (calls in flight finish). */
export interface WorkerService {
  start(): Promise<void>;
  stop(): Promise<void>;
  ready(): boolean;
}

export async function createWorkerService(opts: WorkerServiceOptions): Promise<WorkerService> {
  const { bus, config, logger, workerId } = opts;
  const env = opts.env ?? process.env;
  const common = {
    bus,
    http: policyFromEnv(env),
    logger: logger.child({ module: "worker" }),
    workerId,
    concurrency: config.workerConcurrency,
    // BATON_LARGE_RESULT_BYTES, BATON_TOOL_MAX_RESULT_BYTES.
    ...workerLimits(config),
    drainGraceMs: Math.max(0, config.shutdownGraceMs - 2_000),
  };
  const llmConfig = llmConfigFromEnv(env);
  const toolRegistry = createToolRegistry(bus);
  const budget = llmConfig.tenantDailyTokens > 0
    ? createTokenBudget(await bus.kv(TOKEN_BUDGET_BUCKET, TOKEN_BUDGET_BUCKET_OPTIONS), { dailyLimit: llmConfig.tenantDailyTokens })
    : undefined;
  const llmTools = agentLlmTools({
    registry: createLlmRegistry(llmConfig),
    describeTool: async (name) => {
      const d = await toolRegistry.get(name);
      return d ? { description: d.description, inputSchema: d.inputSchema } : null;
    },
    ...(budget ? { budget } : {}),
    logger: logger.child({ module: "llm" }),
  });
  const builtin = createBuiltinWorker({ ...common, extraTools: [...llmTools, ...(opts.extraTools ?? [])] });
  // HTTP tools declared without code and MCP servers (`/api/tool-sources`), watched in NATS KV.
  const sources = createToolSourcesWorker(common);
  return {
    async start() {
      await builtin.start();
      await sources.start();
    },
    async stop() {
      await Promise.all([sources.stop(), builtin.drain()]);
    },
    ready: () => builtin.ready() && sources.ready(),
  };
}
