/**
 * Test support for the gateway's integration tests: a gateway app on a real
 * Postgres store (its own random schema) with two tenants and keys of every role,
 * and a small recording stand-in for the bus side (commands and events). The real
 * bus path is covered by the end-to-end tests; here the gateway's own behaviour is
 * under test. Checkpoints live in the real Redis under a random key prefix.
 */
import { randomUUID } from "node:crypto";
import { expect } from "@jest/globals";
import type { FastifyInstance } from "fastify";
import { createRedis, deleteKeysByPrefix, redisCheckpointStore } from "@baton/checkpoints";
import type { RedisCheckpointStore } from "@baton/checkpoints";
import { validateWorkflow, workflowDefinitionJsonSchema } from "@baton/engine";
import type { Store } from "@baton/store";
import { openTestStore } from "@baton/store/testing";
import { buildApp } from "./app.ts";
import type {
  CancelExecutionCommand,
  ExecutionEventEnvelope,
  GatewayCommands,
  GatewayDeps,
  GatewayEvents,
  GatewayOptions,
  Readiness,
  ResumeExecutionCommand,
  StartExecutionCommand,
  ValidateWorkflow,
} from "./deps.ts";

export interface PublishedEvent {
  type: string;
  tenantId: string;
  scopeId: number;
  data: Record<string, unknown>;
}

interface Listener {
  key: string;
  onEvent: (e: ExecutionEventEnvelope) => void;
}

/** Records every command and event; executions' event logs are kept in memory and streamed like the bus does. */
export interface RecordingBus {
  commands: GatewayCommands;
  events: GatewayEvents;
  started: StartExecutionCommand[];
  resumed: ResumeExecutionCommand[];
  cancelled: CancelExecutionCommand[];
  published: PublishedEvent[];
  /** Each event stream asked for: the execution and where it starts (`fromSeq`, or undefined for the beginning). */
  streams: { executionId: number; fromSeq: number | undefined }[];
  /** When set, `startExecution` (and resume/cancel) reject with it. */
  failWith: Error | null;
  /** Appends an event to an execution's log and delivers it to live streams. */
  emit(tenantId: string, executionId: number, type: string, data?: Record<string, unknown>): ExecutionEventEnvelope;
  /** Streams currently following an execution (0 once every client is gone). */
  openStreams(): number;
  /** Resolves when at least `n` streams are following. */
  waitForStreams(n: number): Promise<void>;
  /** Resolves when no stream is following any more. */
  waitForNoStreams(): Promise<void>;
}

export function createRecordingBus(): RecordingBus {
  const logs = new Map<string, ExecutionEventEnvelope[]>();
  const listeners = new Set<Listener>();
  const waiters: { ok: () => boolean; resolve: () => void }[] = [];
  const key = (t: string, id: number) => `${t}/${id}`;
  const wake = () => {
    for (const w of [...waiters]) {
      if (w.ok()) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve();
      }
    }
  };

  const bus: RecordingBus = {
    started: [],
    resumed: [],
    cancelled: [],
    published: [],
    streams: [],
    failWith: null,
    commands: {
      async startExecution(c) {
        if (bus.failWith) throw bus.failWith;
        bus.started.push(c);
      },
      async resumeExecution(c) {
        if (bus.failWith) throw bus.failWith;
        bus.resumed.push(c);
        return { duplicate: false };
      },
      async cancelExecution(c) {
        if (bus.failWith) throw bus.failWith;
        bus.cancelled.push(c);
      },
    },
    events: {
      async publish(type, tenantId, scopeId, data) {
        bus.published.push({ type, tenantId, scopeId, data });
      },
      async streamExecution(tenantId, executionId, signal, onEvent, fromSeq) {
        bus.streams.push({ executionId, fromSeq });
        if (signal.aborted) return;
        const k = key(tenantId, executionId);
        for (const e of logs.get(k) ?? []) if (fromSeq === undefined || e.seq >= fromSeq) onEvent(e);
        if (signal.aborted) return;
        const listener: Listener = { key: k, onEvent };
        listeners.add(listener);
        wake();
        await new Promise<void>((resolve) => signal.addEventListener("abort", () => resolve(), { once: true }));
        listeners.delete(listener);
        wake();
      },
    },
    emit(tenantId, executionId, type, data = {}) {
      const k = key(tenantId, executionId);
      const log = logs.get(k) ?? [];
      logs.set(k, log);
      const e: ExecutionEventEnvelope = { type, seq: log.length + 1, time: new Date().toISOString(), data };
      log.push(e);
      for (const l of [...listeners]) if (l.key === k) l.onEvent(e);
      return e;
    },
    openStreams: () => listeners.size,
    waitForStreams(n) {
      return new Promise<void>((resolve) => {
        waiters.push({ ok: () => listeners.size >= n, resolve });
        wake();
      });
    },
    waitForNoStreams() {
      return new Promise<void>((resolve) => {
        waiters.push({ ok: () => listeners.size === 0, resolve });
        wake();
      });
    },
  };
  return bus;
}

export interface TestGateway {
  app: FastifyInstance;
  /** What the app was built with, to build another app on the same store and bus. */
  deps: GatewayDeps;
  store: Store;
  bus: RecordingBus;
  /** Tenant ids and raw API keys. */
  a: { tenantId: string; admin: string; operator: string; viewer: string };
  b: { tenantId: string; admin: string };
  /** What `/readyz` reports. */
  readiness: Readiness;
  /** The checkpoint store the app reads (real Redis, random prefix); tests write states with `put`. */
  checkpoints: RedisCheckpointStore;
  /** Replaces the definition validator (the engine's by default). */
  setValidator(v: ValidateWorkflow): void;
  /** Closes the app and the store and drops the schema. */
  close(): Promise<void>;
}

/**
 * Records the status of every answer `app.inject({ method, url, … })` gets from a route the
 * OpenAPI document lists; `undocumented()` returns those the route's entry does not list
 * (`post /api/agent-workflows 422`). So every test that makes a route answer something also
 * checks that the document says it can. Requests no documented route matches (404, 405, /docs)
 * and HEAD (not in the document) are not recorded.
 */
function recordAnswers(app: FastifyInstance): { undocumented: () => Promise<string[]> } {
  const seen = new Set<string>();
  const inject = app.inject.bind(app) as (o: unknown) => Promise<{ statusCode: number }>;
  (app as unknown as { inject: (o: unknown) => Promise<unknown> }).inject = async (o: unknown) => {
    const res = await inject(o);
    if (typeof o === "object" && o !== null) {
      const { method, url } = o as { method?: string; url?: string };
      if (typeof url === "string") seen.add(`${(method ?? "GET").toLowerCase()} ${url.split("?")[0]} ${res.statusCode}`);
    }
    return res;
  };
  return {
    async undocumented() {
      const res = (await inject({ method: "GET", url: "/openapi.json" })) as unknown as { json: () => { paths: Record<string, Record<string, { responses: Record<string, unknown> }>> } };
      const paths = res.json().paths;
      // A static segment before a parameter: `/agent-workflows/import` is not `/agent-workflows/{id}`.
      const patterns = Object.keys(paths)
        .map((p) => ({ p, re: new RegExp(`^${p.replace(/[.*+?^$()|[\]\\]/g, "\\$&").replace(/\{\w+\}/g, "[^/]+")}$`), params: p.split("{").length }))
        .sort((a, b) => a.params - b.params);
      const out = new Set<string>();
      for (const entry of seen) {
        const [method = "", path = "", status = ""] = [entry.slice(0, entry.indexOf(" ")), entry.slice(entry.indexOf(" ") + 1, entry.lastIndexOf(" ")), entry.slice(entry.lastIndexOf(" ") + 1)];
        const route = patterns.find((x) => x.re.test(path))?.p;
        const op = route === undefined ? undefined : paths[route]?.[method];
        if (op && op.responses[status] === undefined) out.add(`${method} ${route} ${status}`);
      }
      return [...out].sort();
    },
  };
}

/** A gateway on a freshly migrated schema of the test database, with tenants A and B. */
export async function openTestGateway(opts: GatewayOptions = {}, extra: Pick<GatewayDeps, "importWorkflow"> = {}): Promise<TestGateway> {
  const t = await openTestStore({ prefix: "gateway" });
  const redis = createRedis(process.env["BATON_REDIS_URL"] ?? "redis://127.0.0.1:6379");
  const redisPrefix = `baton-test:gateway:${randomUUID()}`;
  const checkpoints = redisCheckpointStore(redis, { prefix: redisPrefix, historyLimit: 50, snapshotEvery: 5 });
  const { store } = t;
  const bus = createRecordingBus();
  let validator: ValidateWorkflow = validateWorkflow;
  const readiness: Readiness = { ready: true, modules: { gateway: "Running" } };

  const ta = await store.tenants.create("tenant A");
  const tb = await store.tenants.create("tenant B");
  const a = {
    tenantId: ta.id,
    admin: (await store.tenants.createApiKey(ta.id, { role: "admin", name: "a-admin" })).rawKey,
    operator: (await store.tenants.createApiKey(ta.id, { role: "operator", name: "a-operator" })).rawKey,
    viewer: (await store.tenants.createApiKey(ta.id, { role: "viewer", name: "a-viewer" })).rawKey,
  };
  const b = { tenantId: tb.id, admin: (await store.tenants.createApiKey(tb.id, { role: "admin", name: "b-admin" })).rawKey };

  const deps: GatewayDeps = {
    store,
    validateWorkflow: (d) => validator(d),
    commands: bus.commands,
    events: bus.events,
    readiness: () => readiness,
    workflowDefinitionJsonSchema,
    checkpoints,
    ...extra,
  };
  const app = await buildApp(deps, opts);
  const answers = recordAnswers(app);
  return {
    app,
    deps,
    store,
    bus,
    a,
    b,
    readiness,
    checkpoints,
    setValidator(v) {
      validator = v;
    },
    async close() {
      const undocumented = await answers.undocumented();
      await app.close();
      await t.dispose();
      await deleteKeysByPrefix(redis, redisPrefix);
      await redis.quit();
      // Every answer a test got from a documented route is one its OpenAPI entry lists.
      expect({ undocumentedAnswers: undocumented }).toEqual({ undocumentedAnswers: [] });
    },
  };
}

/** A definition the engine accepts: one setVariable node. */
export function validDefinition(value = 1): Record<string, unknown> {
  return { nodes: [{ id: "set", type: "setVariable", config: { values: { x: value } } }] };
}

export function bearer(key: string): { authorization: string } {
  return { authorization: `Bearer ${key}` };
}

/** A problem+json body as the gateway writes it (fields a route adds, such as `pendingReviews`, read as unknown). */
export interface ProblemBody {
  status: number;
  code: string;
  title: string;
  detail: string;
  type: string;
  errors?: { path: string; code: string; message: string }[];
  [field: string]: unknown;
}

/**
 * Checks that `res` is a problem+json answer with `status` and `code`, with the fields every
 * problem has and no stack trace in it, and returns its body.
 */
export function problemOf(res: { statusCode: number; headers: Record<string, unknown>; json: () => unknown }, status: number, code: string): ProblemBody {
  expect({ status: res.statusCode, type: String(res.headers["content-type"]).split(";")[0] }).toEqual({ status, type: "application/problem+json" });
  const body = res.json() as ProblemBody;
  expect(body).toMatchObject({ status, code, title: expect.any(String), detail: expect.any(String), type: expect.any(String) });
  expect(JSON.stringify(body)).not.toMatch(/\n\s+at /);
  return body;
}
