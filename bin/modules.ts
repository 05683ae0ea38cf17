/**
 * The whole dependency graph of Baton in one map: connections (bus, redis,
 * store) and the services built on them. `--target` names what a process runs;
 * dependencies come along.
 */
import { hostname } from "node:os";
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { Bus } from "@baton/bus";
import { connectBus } from "@baton/bus";
import type { CheckpointStore, IdempotencyStore } from "@baton/checkpoints";
import { createRedis, redisCheckpointStore, redisIdempotencyStore } from "@baton/checkpoints";
import type { BatonConfig } from "@baton/config";
import type { EventType } from "@baton/contracts";
import { decode, TokenDeltaSchema } from "@baton/contracts";
import { importWorkflow, validateWorkflowWithTools, workflowDefinitionJsonSchema } from "@baton/engine";
import type { CheckpointState } from "@baton/executor";
import { CHECKPOINT_STORE_OPTIONS, createExecutor } from "@baton/executor";
import { buildApp } from "@baton/gateway";
import type { GatewayDeps } from "@baton/gateway";
import { createLearner } from "@baton/learner";
import { createMemoryService } from "@baton/memory";
import type { Messaging } from "@baton/messaging";
import { createMessaging } from "@baton/messaging";
import { createPlanner } from "@baton/planner";
import { createReviewService } from "@baton/review";
import type { ModuleDefinition, ModuleManager, Service } from "@baton/runtime";
import type { Store } from "@baton/store";
import { createStore, migrate, watchDatabase } from "@baton/store";
import type { Logger } from "@baton/telemetry";
import type { ToolSpec } from "@baton/sdk";
import { createToolRegistry, createToolSourceStore } from "@baton/sdk";
import { createWorkerService } from "@baton/worker";
import { createLlmRegistry, llmConfigFromEnv } from "@baton/llm";
import type { Redis } from "ioredis";

export interface Ctx {
  config: BatonConfig;
  logger: Logger;
  /** Readiness of the whole process, for the gateway's /readyz. */
  manager: () => ModuleManager;
  /** Extra tools for the built-in worker (tests, embedders); a built-in's name replaces it. */
  tools?: readonly ToolSpec[];
  /** Called with the generated local API key on first start. */
  onApiKey?: (key: string) => void;
}

export interface BusService extends Service { bus: Bus; messaging: Messaging }
export interface RedisService extends Service { redis: Redis; checkpoints: CheckpointStore<CheckpointState>; idempotency: IdempotencyStore }
export interface StoreService extends Service { store: Store }
export interface GatewayService extends Service { port: number; apiKey: string | undefined }

const utf8 = new TextDecoder();
const EXECUTION_ENTITIES = new Set(["execution", "node", "review", "learning"]);

export const MODULES: readonly ModuleDefinition<Ctx>[] = [
  {
    name: "bus",
    deps: [],
    internal: true,
    async init({ config, logger }) {
      const bus = await connectBus({ servers: config.natsUrl, prefix: config.prefix, name: `baton-${config.target.join("+")}`, logger: logger.child({ module: "bus" }) });
      const svc: BusService = { bus, messaging: createMessaging(bus), stop: () => bus.drain(), ready: () => bus.isConnected() };
      return svc;
    },
  },
  {
    name: "redis",
    deps: [],
    internal: true,
    async init({ config }) {
      const redis = createRedis(config.redisUrl);
      await redis.ping();
      const svc: RedisService = {
        redis,
        checkpoints: redisCheckpointStore<CheckpointState>(redis, { ...CHECKPOINT_STORE_OPTIONS, prefix: config.prefix, historyLimit: config.checkpointHistory, finishedTtlSeconds: config.checkpointFinishedTtlSeconds, deltaAboveBytes: config.checkpointDeltaAboveBytes }),
        idempotency: redisIdempotencyStore(redis, { prefix: config.prefix }),
        stop: async () => void (await redis.quit()),
        ready: () => redis.status === "ready",
      };
      return svc;
    },
  },
  {
    name: "store",
    deps: [],
    internal: true,
    async init({ config, logger }) {
      const opts = { databaseUrl: config.databaseUrl, schema: config.databaseSchema };
      const { applied } = await migrate(opts);
      if (applied.length > 0) logger.info("database migrated", { applied });
      const store = createStore(opts);
      await store.ping();
      // The pool connects on demand; readiness follows a connection of the watch's own (ADR 016).
      const log = logger.child({ module: "store" });
      const watch = watchDatabase({
        databaseUrl: config.databaseUrl,
        onChange: (reachable, why) => (reachable ? log.info("the database can be reached again") : log.warn("the database cannot be reached; /readyz answers 503", { why })),
      });
      const svc: StoreService = {
        store,
        ready: () => watch.reachable(),
        stop: async () => {
          await watch.stop();
          await store.close();
        },
      };
      return svc;
    },
  },
  {
    name: "gateway",
    deps: ["bus", "store", "redis"],
    async init(ctx, get) {
      const { config, logger } = ctx;
      const { messaging, bus } = get<BusService>("bus");
      const { store } = get<StoreService>("store");
      const local = await store.tenants.ensureLocalKey(config.apiKey);
      if (local.created && !config.apiKey) {
        await mkdir(config.dataDir, { recursive: true });
        await writeFile(join(config.dataDir, "api-key"), local.rawKey + "\n", { mode: 0o600 });
        ctx.onApiKey?.(local.rawKey);
      }
      const tools = createToolRegistry(bus);
      // Agent nodes may name only models this installation has configured.
      const llm = createLlmRegistry(llmConfigFromEnv(process.env));
      const deps: GatewayDeps = {
        store: store,
        checkpoints: get<RedisService>("redis").checkpoints,
        // Tool nodes may name only tools some worker registered.
        validateWorkflow: (d) => validateWorkflowWithTools(d, (name) => tools.has(name), {
          checkModel: (ref) => {
            const c = llm.check(ref);
            return c.ok ? undefined : c.message;
          },
        }),
        // An LLM call that names no model takes BATON_LLM_DEFAULT_MODEL, when one a provider serves is set.
        hasDefaultModel: llm.check().ok,
        workflowDefinitionJsonSchema: workflowDefinitionJsonSchema,
        importWorkflow,
        tools,
        toolSources: createToolSourceStore(bus),
        largeValueBytes: config.largeResultBytes,
        readiness: () => {
          const m = ctx.manager();
          return { ready: m.ready(), modules: m.states() };
        },
        commands: {
          startExecution: (c) => messaging.sendCommand("execution.start", c, `start:${c.executionId}`),
          resumeExecution: (c) =>
            messaging.sendCommand("execution.resume", { tenantId: c.tenantId, executionId: c.executionId, nodeId: c.nodeId, attempt: c.attempt, action: c.action, ...(c.data ? { data: c.data as never } : {}), comment: c.comment ?? "", reviewer: c.reviewer ?? "" }, `resume:${c.executionId}:${c.nodeId}:${c.attempt}`),
          cancelExecution: (c) => messaging.sendCommand("execution.cancel", { tenantId: c.tenantId, executionId: c.executionId, reason: c.reason ?? "" }, `cancel:${c.executionId}`),
        },
        events: {
          publish: (type, tenantId, _scopeId, data) => messaging.publishEvent(type as EventType, { ...data, tenantId }),
          streamExecution: (tenantId, executionId, signal, onEvent, fromSeq) =>
            // One ordered consumer over the execution's subjects keeps its events in order.
            bus.replay(messaging.subjects.executionEventsFilter(tenantId, executionId), { signal, ...(fromSeq !== undefined ? { fromSeq } : {}) }, (msg) => {
              const parsed = messaging.subjects.parseEvent(msg.subject);
              if (!parsed || !EXECUTION_ENTITIES.has(parsed.type.slice(0, parsed.type.indexOf(".")))) return;
              onEvent({ type: parsed.type, seq: msg.seq, time: msg.timestamp.toISOString(), data: JSON.parse(utf8.decode(msg.data)) as unknown });
            }),
          streamTokens: async (tenantId, executionId, signal, onToken) => {
            const sub = await bus.serve(messaging.subjects.tokens(tenantId, executionId), async (msg) => {
              const t = decode(TokenDeltaSchema, msg.data);
              onToken({ executionId: t.executionId, nodeId: t.nodeId, callId: t.callId, index: t.index, delta: t.delta });
              return { data: new Uint8Array() };
            }, { queue: false });
            await new Promise<void>((resolve) => {
              if (signal.aborted) resolve();
              else signal.addEventListener("abort", () => resolve(), { once: true });
            });
            await sub.stop();
          },
        },
      };
      const app = await buildApp(deps, { logger: false });
      let port = config.port;
      const svc: GatewayService = {
        get port() {
          return port;
        },
        apiKey: config.apiKey ?? (local.created ? local.rawKey : undefined),
        async start() {
          await app.listen({ port: config.port, host: config.host });
          const addr = app.server.address();
          port = typeof addr === "object" && addr ? addr.port : config.port;
          logger.info("gateway listening", { url: `http://${config.host}:${port}`, docs: `http://${config.host}:${port}/docs` });
        },
        stop: () => app.close(),
      };
      return svc;
    },
  },
  {
    name: "executor",
    deps: ["bus", "redis", "store"],
    init({ config, logger }, get) {
      return createExecutor({
        messaging: get<BusService>("bus").messaging,
        checkpoints: get<RedisService>("redis").checkpoints,
        store: get<StoreService>("store").store,
        logger: logger.child({ module: "executor" }),
        concurrency: config.executorConcurrency,
        ackWaitMs: config.executorAckWaitMs,
        hasTool: (() => {
          const registry = createToolRegistry(get<BusService>("bus").bus);
          return (name: string) => registry.has(name);
        })(),
        tenantMaxRunning: config.tenantMaxRunning,
        recoverEveryMs: config.recoverySweepSeconds * 1000,
        largeResultBytes: config.largeResultBytes,
        blobPruneIntervalMs: config.blobPruneIntervalSeconds * 1000,
        blobGraceMs: config.blobGraceSeconds * 1000,
        executionRetentionMs: config.executionRetentionDays * 86_400_000,
        learnedRetentionMs: config.learnedRetentionDays * 86_400_000,
      });
    },
  },
  {
    // NATS only: results are recorded in a KV bucket, so a worker needs no Redis.
    name: "worker",
    deps: ["bus"],
    async init({ config, logger, tools }, get) {
      const { bus } = get<BusService>("bus");
      const svc: Service = await createWorkerService({ bus, config, logger, workerId: `${hostname()}:${process.pid}`, ...(tools ? { extraTools: tools } : {}) });
      return svc;
    },
  },
  { name: "planner", deps: ["bus"], init: (_ctx, get) => createPlanner({ messaging: get<BusService>("bus").messaging }) },
  {
    name: "memory",
    deps: ["bus", "store"],
    init: ({ logger }, get) => createMemoryService({
      messaging: get<BusService>("bus").messaging, store: get<StoreService>("store").store,
      logger: logger.child({ module: "memory" }), workerId: `memory:${hostname()}:${process.pid}`,
    }),
  },
  { name: "learner", deps: ["bus", "store"], init: ({ logger }, get) => createLearner({ messaging: get<BusService>("bus").messaging, store: get<StoreService>("store").store, logger: logger.child({ module: "learner" }) }) },
  { name: "review", deps: ["bus", "store"], init: ({ logger }, get) => createReviewService({ messaging: get<BusService>("bus").messaging, store: get<StoreService>("store").store, logger: logger.child({ module: "review" }) }) },
];
