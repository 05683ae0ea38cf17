/**
 * The walking skeleton, all services in one process, through the real NATS,
 * Redis and Postgres. Rules checked:
 * - a definition is created (version 1), listed and read back; bad definitions get
 *   400 problem+json naming every error, and nothing is stored;
 * - executing answers 202; the executor runs tool → condition → branch → review
 *   through the tool worker, with node rows, node events and a Redis checkpoint
 *   per node; the review node pauses the execution and the review service records
 *   a pending review;
 * - approve / edit / reject resume from the checkpoint; edit data reaches the next
 *   node; reject fails the execution;
 * - a late SSE client gets every event from the beginning and the stream ends;
 * - the learner records the tool sequence; memory and planner answer on the bus;
 * - 401 without a key, 404 for a missing workflow or another tenant's rows, 409
 *   resuming an execution that is not paused.
 */
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { createRedis, redisCheckpointStore } from "@baton/checkpoints";
import { createStore } from "@baton/store";
import type { Store } from "@baton/store";
import { createLogger } from "@baton/telemetry";
import type { BusService } from "../bin/modules.ts";
import { startBaton } from "../bin/start.ts";
import type { BatonHandle } from "../bin/start.ts";
import { api, isolatedConfig, readSse, removeIsolated, waitFor } from "./helpers.ts";
import type { Api } from "./helpers.ts";
import { createWorkflow, execute, waitForStatus } from "./quickstart.ts";

const { config } = isolatedConfig();
let baton: BatonHandle;
let a: Api;
let store: Store;
let workflowId: number;

beforeAll(async () => {
  baton = await startBaton({ config, logger: createLogger("e2e", "warn") });
  a = api(baton.gatewayPort!, config.apiKey!);
  store = createStore({ databaseUrl: config.databaseUrl, schema: config.databaseSchema });
  workflowId = await createWorkflow(a);
}, 60_000);

afterAll(async () => {
  await baton?.stop();
  await store?.close();
  await removeIsolated(config);
});

describe("walking skeleton (all-in-one)", () => {
  it("stores the definition as version 1 and reads it back", async () => {
    const one = await a.call<{ id: number; version: number; slug: string }>("GET", `/api/agent-workflows/${workflowId}`);
    expect(one.status).toBe(200);
    expect(one.body).toMatchObject({ id: workflowId, version: 1, slug: "expense-approval" });
    const list = await a.call<{ items?: { id: number }[] } | { id: number }[]>("GET", "/api/agent-workflows");
    const items = Array.isArray(list.body) ? list.body : (list.body.items ?? []);
    expect(items.map((w) => w.id)).toContain(workflowId);
  });

  it("runs to the review, pauses, and completes after approval", async () => {
    const id = await execute(a, workflowId);
    const paused = await waitForStatus(a, id, ["paused", "failed"]);
    expect(paused.status).toBe("paused");
    expect(paused.currentState).toBe("review");
    expect(paused.nodes.map((n) => `${n.nodeId}:${n.status}`)).toEqual(["total:completed", "large:completed", "flag:completed", "review:paused"]);

    const review = await waitFor("pending review", async () => {
      const r = await a.call<{ items?: unknown[] } | unknown[]>("GET", `/api/reviews?executionId=${id}&status=pending`);
      const items = (Array.isArray(r.body) ? r.body : (r.body.items ?? [])) as { nodeId: string; payload: unknown }[];
      return items[0];
    });
    expect(review.nodeId).toBe("review");
    expect(review.payload).toMatchObject({ subject: { employee: "Ada", amount: 455 } });

    // The checkpoint in Redis was written once per node step, compare-and-set.
    const redis = createRedis(config.redisUrl);
    try {
      const cp = await redisCheckpointStore(redis, { prefix: config.prefix }).get(id);
      expect(cp?.version).toBeGreaterThanOrEqual(4);
      expect((cp?.state as { status: string }).status).toBe("paused");
    } finally {
      await redis.quit();
    }

    const resume = await a.call("POST", `/api/agent-workflow-executions/${id}/resume`, { action: "approve", reviewer: "grace" });
    expect(resume.status).toBe(202);
    const done = await waitForStatus(a, id, ["completed", "failed"]);
    expect(done.status).toBe("completed");
    expect(done.output).toMatchObject({ decision: "approve", amount: 455, receipt: "Filed: Ada, 455 (approve)" });
    const nodes = await a.call<unknown[] | { items: unknown[] }>("GET", `/api/agent-workflow-executions/${id}/nodes`);
    const rows = (Array.isArray(nodes.body) ? nodes.body : nodes.body.items) as { nodeId: string; status: string }[];
    expect(rows.filter((n) => n.status === "completed").map((n) => n.nodeId)).toEqual(["total", "large", "flag", "review", "file"]);

    // A late SSE client still sees the whole story, and the stream ends.
    const events = await readSse(`${a.base}/api/agent-workflow-executions/${id}/events`, config.apiKey!);
    const names = events.map((e) => {
      const nodeId = (e.data as { data?: { node_id?: string } }).data?.node_id;
      return `${e.event}${nodeId ? ":" + nodeId : ""}`;
    });
    if (names[0] !== "execution.started") console.log(JSON.stringify(events.slice(0, 2)));
    expect(names[0]).toBe("execution.started");
    expect(names).toEqual(expect.arrayContaining(["node.started:total", "node.completed:total", "execution.paused:review", "execution.resumed:review", "node.completed:file"]));
    expect(names.at(-1)).toBe("execution.completed");

    const learned = await waitFor("learned sequence", async () => (await store.learning.list((await store.executions.getById(id))!.tenantId)).find((l) => l.executionId === id));
    expect(learned.successful).toBe(true);
    expect((learned.tools as { tool: string }[]).map((t) => t.tool)).toEqual(["math.sum", "text.template", "text.template"]);
    const resolved = await waitFor("resolved review", async () => {
      const r = await a.call<{ items?: unknown[] } | unknown[]>("GET", `/api/reviews?executionId=${id}`);
      const items = (Array.isArray(r.body) ? r.body : (r.body.items ?? [])) as { status: string }[];
      return items[0]?.status === "approved" ? items[0] : undefined;
    });
    expect(resolved.status).toBe("approved");
  });

  it("edit passes the reviewer's data to the next node; reject fails the execution", async () => {
    const edited = await execute(a, workflowId);
    await waitForStatus(a, edited, ["paused"]);
    expect((await a.call("POST", `/api/agent-workflow-executions/${edited}/resume`, { action: "edit", data: { employee: "Ada", amount: 400 } })).status).toBe(202);
    const e = await waitForStatus(a, edited, ["completed", "failed"]);
    expect(e.output).toMatchObject({ decision: "edit", amount: 400, receipt: "Filed: Ada, 400 (edit)" });

    const rejected = await execute(a, workflowId, { input: { employee: "Bo", items: [{ amount: 3 }] } });
    const p = await waitForStatus(a, rejected, ["paused"]);
    expect(p.nodes.map((n) => n.nodeId)).toContain("routine");
    expect((await a.call("POST", `/api/agent-workflow-executions/${rejected}/resume`, { action: "reject", comment: "no receipt" })).status).toBe(202);
    const r = await waitForStatus(a, rejected, ["completed", "failed"]);
    expect(r.status).toBe("failed");
    expect(r.error).toContain("BATON_REVIEW_REJECTED");
  });

  it("refuses bad input with clear 4xx answers and writes nothing", async () => {
    const bad = await a.call<{ errors: { code: string; path: string }[]; status: number }>("POST", "/api/agent-workflows", {
      name: "broken",
      definition: { start: "nope", nodes: [{ id: "a", type: "teleport" }, { id: "a", type: "tool", config: { tool: "echo" } }], edges: [{ from: "a", to: "ghost" }] },
    });
    expect(bad.status).toBe(400);
    expect(bad.headers.get("content-type")).toContain("application/problem+json");
    expect(bad.body.errors.map((e) => e.code)).toEqual(expect.arrayContaining(["unknown_node_type", "duplicate_node_id", "dangling_edge", "missing_start"]));
    const list = await a.call<{ items?: { name: string }[] } | { name: string }[]>("GET", "/api/agent-workflows");
    expect((Array.isArray(list.body) ? list.body : (list.body.items ?? [])).map((w) => w.name)).not.toContain("broken");

    expect((await a.call("POST", "/api/agent-workflows/999999/execute", { input: {} })).status).toBe(404);
    expect((await a.call("GET", "/api/agent-workflows", undefined, null)).status).toBe(401);
    expect((await a.call("GET", "/api/agent-workflows", undefined, "bk_wrong_key_1234567890")).status).toBe(401);

    const id = await execute(a, workflowId);
    const early = await a.call("POST", `/api/agent-workflow-executions/${id}/resume`, { action: "approve" });
    // Either still running (409) or already paused (202) — wait for the pause, approve, then a second resume is 409.
    if (early.status !== 202) expect(early.status).toBe(409);
    if (early.status === 409) {
      await waitForStatus(a, id, ["paused"]);
      expect((await a.call("POST", `/api/agent-workflow-executions/${id}/resume`, { action: "approve" })).status).toBe(202);
    }
    await waitForStatus(a, id, ["completed"]);
    expect((await a.call("POST", `/api/agent-workflow-executions/${id}/resume`, { action: "approve" })).status).toBe(409);
  });

  it("keeps tenants apart", async () => {
    const other = await store.tenants.create("other");
    const key = await store.tenants.createApiKey(other.id, { role: "admin" });
    expect((await a.call("GET", `/api/agent-workflows/${workflowId}`, undefined, key.rawKey)).status).toBe(404);
    expect((await a.call("POST", `/api/agent-workflows/${workflowId}/execute`, { input: {} }, key.rawKey)).status).toBe(404);
    const mine = await a.call<{ items?: { id: number }[] } | { id: number }[]>("GET", "/api/agent-workflow-executions");
    const first = (Array.isArray(mine.body) ? mine.body : (mine.body.items ?? []))[0]!;
    expect((await a.call("GET", `/api/agent-workflow-executions/${first.id}`, undefined, key.rawKey)).status).toBe(404);
    const theirs = await a.call<{ items?: unknown[] } | unknown[]>("GET", "/api/agent-workflows", undefined, key.rawKey);
    expect(Array.isArray(theirs.body) ? theirs.body : (theirs.body.items ?? [])).toEqual([]);
  });

  it("memory and planner answer requests on the bus", async () => {
    const { messaging } = baton.manager.get<BusService>("bus");
    const created = await a.call<{ id: number }>("POST", "/api/agent-memory", { agentId: 1, key: "preference", content: "Ada prefers trains over planes" });
    expect(created.status).toBe(201);
    const tenantId = (await store.tenants.resolveApiKey(config.apiKey!))!.tenantId;
    const reply = await messaging.request("memory.query", { tenantId, agentId: 1, query: "trains", limit: 5 });
    expect(reply.entries.map((e) => e.content)).toContain("Ada prefers trains over planes");
    const plan = await messaging.request("planner.plan", { tenantId, goal: "book a trip" });
    expect(plan.ok).toBe(false);
    expect(plan.error?.code).toBe("BATON_PLANNER_NO_MODEL");
  });

  it("serves the OpenAPI document and readiness", async () => {
    const doc = await a.call<{ paths: Record<string, unknown> }>("GET", "/openapi.json", undefined, null);
    expect(Object.keys(doc.body.paths)).toEqual(expect.arrayContaining(["/api/agent-workflows", "/api/agent-workflows/{id}/execute", "/api/agent-workflow-executions/{id}/resume"]));
    const ready = await a.call<{ ready: boolean }>("GET", "/readyz", undefined, null);
    expect(ready.status).toBe(200);
    expect(ready.body.ready).toBe(true);
  });
});
