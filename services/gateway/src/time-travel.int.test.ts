/**
 * Rules checked (gateway on a real Postgres store, real Redis checkpoints, recording bus):
 * - checkpoints: the list is newest first with each version's status, last node and node
 *   statuses; one version returns the full state; a version not kept is 404 problem+json;
 *   another tenant's execution is 404; a gateway without a checkpoint store answers 503;
 * - fork: 202 with a new queued execution of the SAME workflow version as the source (not
 *   the workflow's current one), the source's input, forkedFrom* set; the start command
 *   carries fork_of_execution_id / fork_of_version / context_patch, and the row keeps the
 *   starting state it read (checkpoint.forkStart); a version not in the
 *   history is 404 naming it; context keys must be `$.path`s below `$` and not under
 *   `$.input` (400 listing every bad key); nothing is written on a 4xx;
 * - detail shows parent, fork and deadline fields; /children lists child executions;
 * - execute: deadlineMs sets deadlineAt and the command's RFC 3339 deadline, out of range
 *   is 400; an input violating the definition's inputSchema is 400 listing every problem
 *   under body.input and writes nothing;
 * - versions: an update adds a version, GET .../versions/:version returns it (404 past the
 *   last), restore adds another with the old definition, an execution keeps its version;
 * - import (with an injected importer): creates the workflow like POST /agent-workflows
 *   and returns the importer's warnings; importer errors are 400 with paths into body.source;
 *   an imported definition the validator refuses is 400 BATON_GATEWAY_IMPORT_INVALID too (this
 *   importer gives no source map: paths are body.source, the message says where in the definition).
 */
import { afterAll, beforeAll, describe, expect, test } from "@jest/globals";
import { buildApp } from "./app.ts";
import type { ImportWorkflow } from "./deps.ts";
import type { TestGateway } from "./test-support.ts";
import { MAX_JSON_DEPTH } from "@baton/engine";
import { bearer, openTestGateway, validDefinition, problemOf } from "./test-support.ts";

/** A stand-in for the engine's importWorkflow: a toolSequence of `{ steps: [{ tool }] }`. */
const importer: ImportWorkflow = (format, source) => {
  const steps = (source as { steps?: unknown }).steps;
  if (format !== "toolSequence") return { ok: false, errors: [{ path: "format", code: "unsupported", message: "only toolSequence here" }] };
  if (!Array.isArray(steps) || steps.length === 0) return { ok: false, errors: [{ path: "steps", code: "required", message: "steps is required" }] };
  if (steps.some((s) => typeof (s as { tool?: unknown }).tool !== "string")) {
    return { ok: true, definition: { nodes: [{ id: "bad", type: "noSuchType" }] }, warnings: [] };
  }
  return { ok: true, definition: validDefinition(steps.length), warnings: ["timeouts dropped"] };
};

let gw: TestGateway;
let workflowId: number;

beforeAll(async () => {
  gw = await openTestGateway({}, { importWorkflow: importer });
  const wf = await gw.store.workflows.create(gw.a.tenantId, { name: "Traveller", definition: validDefinition(1) as never });
  workflowId = wf.id;
});
afterAll(async () => {
  await gw.close();
});


const get = (url: string, key = gw.a.viewer) => gw.app.inject({ method: "GET", url, headers: bearer(key) });
const post = (url: string, payload: unknown, key = gw.a.operator) =>
  gw.app.inject({ method: "POST", url, headers: bearer(key), payload: payload as Record<string, unknown> });

function state(v: number, extra: Record<string, unknown> = {}) {
  return {
    v: 1,
    status: v < 3 ? "running" : "completed",
    lastNode: `step${v}`,
    nodes: Object.fromEntries(Array.from({ length: v }, (_, i) => [`step${i + 1}`, { status: "completed", attempt: 1 }])),
    context: { input: { q: "hi" }, [`step${v}`]: { out: v } },
    ...extra,
  };
}

/** An execution (pinned to version `version`) with `versions` checkpoints. */
async function executionWithCheckpoints(versions: number, version = 1) {
  const ex = await gw.store.executions.create(gw.a.tenantId, { workflowId, workflowVersion: version, input: { q: "hi" }, agentId: 4 });
  for (let v = 1; v <= versions; v++) await gw.checkpoints.put(ex.id, state(v), v - 1);
  return ex;
}

describe("checkpoints", () => {
  test("lists kept versions newest first with a summary of each", async () => {
    const ex = await executionWithCheckpoints(3);
    const res = await get(`/api/agent-workflow-executions/${ex.id}/checkpoints`);
    expect(res.statusCode).toBe(200);
    const items = res.json<{ items: Record<string, unknown>[] }>().items;
    expect(items.map((i) => i.version)).toEqual([3, 2, 1]);
    expect(items[0]).toEqual({
      version: 3,
      updatedAt: expect.any(String),
      status: "completed",
      lastNode: "step3",
      nodes: { step1: "completed", step2: "completed", step3: "completed" },
    });
    expect(items[2]).toMatchObject({ status: "running", lastNode: "step1", nodes: { step1: "completed" } });
    const limited = await get(`/api/agent-workflow-executions/${ex.id}/checkpoints?limit=1`);
    expect(limited.json<{ items: unknown[] }>().items).toHaveLength(1);
  });

  test("returns one version's full state, 404 for a version not kept", async () => {
    const ex = await executionWithCheckpoints(7);
    const res = await get(`/api/agent-workflow-executions/${ex.id}/checkpoints/2`);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ version: 2, updatedAt: expect.any(String), state: state(2) });
    const missing = problemOf(await get(`/api/agent-workflow-executions/${ex.id}/checkpoints/8`), 404, "BATON_GATEWAY_NOT_FOUND");
    expect(missing.detail).toContain("checkpoint version 8");
    expect((await get(`/api/agent-workflow-executions/${ex.id}/checkpoints`)).json<{ items: unknown[] }>().items).toHaveLength(7);
    const none = await gw.store.executions.create(gw.a.tenantId, { workflowId, workflowVersion: 1, input: {} });
    expect((await get(`/api/agent-workflow-executions/${none.id}/checkpoints`)).json()).toEqual({ items: [] });
  });

  test("another tenant's execution is 404", async () => {
    const ex = await executionWithCheckpoints(1);
    problemOf(await get(`/api/agent-workflow-executions/${ex.id}/checkpoints`, gw.b.admin), 404, "BATON_GATEWAY_NOT_FOUND");
    problemOf(await get(`/api/agent-workflow-executions/${ex.id}/checkpoints/1`, gw.b.admin), 404, "BATON_GATEWAY_NOT_FOUND");
    problemOf(await post(`/api/agent-workflow-executions/${ex.id}/fork`, { version: 1 }, gw.b.admin), 404, "BATON_GATEWAY_NOT_FOUND");
  });

  test("a gateway without a checkpoint store answers 503", async () => {
    const { checkpoints: _omitted, ...deps } = gw.deps;
    const app = await buildApp(deps);
    try {
      const ex = await executionWithCheckpoints(1);
      const res = await app.inject({ method: "GET", url: `/api/agent-workflow-executions/${ex.id}/checkpoints`, headers: bearer(gw.a.viewer) });
      problemOf(res, 503, "BATON_GATEWAY_CHECKPOINTS_UNAVAILABLE");
    } finally {
      await app.close();
    }
  });
});

describe("fork", () => {
  test("starts a new run of the source's workflow version from a checkpoint, with a context patch", async () => {
    const source = await executionWithCheckpoints(3, 1);
    // The workflow moved on since the source started: the fork still runs version 1.
    await gw.store.workflows.update(gw.a.tenantId, workflowId, { definition: validDefinition(9) as never });
    const context = { "$.step2.out": 20, "$.extra[0]": { note: "edited" } };
    const res = await post(`/api/agent-workflow-executions/${source.id}/fork`, { version: 2, context });
    expect(res.statusCode).toBe(202);
    const { id } = res.json<{ id: number; status: string }>();
    expect(res.json()).toMatchObject({ id, status: "queued", links: { self: `/api/agent-workflow-executions/${id}` } });
    expect(await gw.store.executions.get(gw.a.tenantId, id)).toMatchObject({
      status: "queued", agentWorkflowId: workflowId, workflowVersion: 1, input: { q: "hi" }, agentId: 4,
      forkedFromExecutionId: source.id, forkedFromVersion: 2, triggerEvent: "fork",
    });
    expect(gw.bus.started).toContainEqual({
      tenantId: gw.a.tenantId, executionId: id, workflowId, workflowVersion: 1,
      forkOfExecutionId: source.id, forkOfVersion: 2,
    });
    // The row keeps the state the fork starts from, as the gateway read it, for the executor.
    expect((await gw.store.executions.get(gw.a.tenantId, id))?.checkpoint).toEqual({
      forkStart: { executionId: source.id, version: 2, state: state(2), contextPatch: context },
    });
    const detail = (await get(`/api/agent-workflow-executions/${id}`)).json<unknown>();
    expect(detail).toMatchObject({ forkedFromExecutionId: source.id, forkedFromVersion: 2, parentExecutionId: null, deadlineAt: null });
    // The source is untouched.
    expect((await gw.checkpoints.get(source.id))?.version).toBe(3);
  });

  test("a version not in the history is 404 naming it, and nothing is written", async () => {
    const source = await executionWithCheckpoints(2);
    const before = (await gw.store.executions.list(gw.a.tenantId, { limit: 200 })).length;
    const res = problemOf(await post(`/api/agent-workflow-executions/${source.id}/fork`, { version: 5 }), 404, "BATON_GATEWAY_NOT_FOUND");
    expect(res.detail).toContain("checkpoint version 5");
    problemOf(await post(`/api/agent-workflow-executions/${source.id}/fork`, { version: 0 }), 400, "BATON_GATEWAY_REQUEST_INVALID");
    expect((await gw.store.executions.list(gw.a.tenantId, { limit: 200 })).length).toBe(before);
  });

  test("refuses context keys that are not $.paths (__proto__ is none), the root, under $.input or past index 10000 — every one listed", async () => {
    const source = await executionWithCheckpoints(1);
    const started = gw.bus.started.length;
    const res = await post(`/api/agent-workflow-executions/${source.id}/fork`, {
      version: 1,
      context: { "step1.out": 1, $: {}, "$.input.q": "changed", "$.input": {}, "$.ok": 1, "$.a[x]": 2, "$.__proto__": { polluted: 1 }, "$.arr[10000]": 1, "$.arr[1000000]": 1 },
    });
    const body = problemOf(res, 400, "BATON_GATEWAY_REQUEST_INVALID");
    expect(body.errors!.map((e) => [e.path, e.code])).toEqual([
      ['body.context["step1.out"]', "invalid_path"],
      ['body.context["$"]', "invalid_path"],
      ['body.context["$.input.q"]', "read_only_path"],
      ['body.context["$.input"]', "read_only_path"],
      ['body.context["$.a[x]"]', "invalid_path"],
      ['body.context["$.__proto__"]', "invalid_path"],
      ['body.context["$.arr[1000000]"]', "invalid_path"],
    ]);
    expect(gw.bus.started.length).toBe(started);
  });

  test("refuses a context key that, with its value, would nest the context deeper than MAX_JSON_DEPTH; nothing is created", async () => {
    const source = await executionWithCheckpoints(1);
    const started = gw.bus.started.length;
    const before = (await gw.store.executions.list(gw.a.tenantId, { limit: 200 })).length;
    // A few bytes of path make an object per segment when the fork starts: 10000 overflowed the engine's stack.
    const longPath = `$${".a".repeat(10_000)}`;
    const nested = (n: number): unknown => (n === 0 ? 1 : { a: nested(n - 1) });
    const res = await post(`/api/agent-workflow-executions/${source.id}/fork`, {
      version: 1,
      context: { [longPath]: 1, [`$${".b".repeat(100)}`]: nested(40), [`$${".c".repeat(MAX_JSON_DEPTH - 1)}`]: 1, "$.d": nested(100) },
    });
    const body = problemOf(res, 400, "BATON_GATEWAY_REQUEST_INVALID");
    expect(body.errors!.map((e) => [e.path.slice(0, 20), e.code])).toEqual([
      ['body.context["$.a.a.', "too_deep"],
      ['body.context["$.b.b.', "too_deep"],
    ]);
    expect(body.errors![0]!.message).toContain(`more than ${MAX_JSON_DEPTH} levels`);
    expect(gw.bus.started.length).toBe(started);
    expect((await gw.store.executions.list(gw.a.tenantId, { limit: 200 })).length).toBe(before);
    // As deep as allowed is fine.
    const ok = await post(`/api/agent-workflow-executions/${source.id}/fork`, { version: 1, context: { [`$${".c".repeat(MAX_JSON_DEPTH - 1)}`]: 1, "$.d": nested(100) } });
    expect(ok.statusCode).toBe(202);
  });

  test("a viewer may not fork", async () => {
    const source = await executionWithCheckpoints(1);
    problemOf(await post(`/api/agent-workflow-executions/${source.id}/fork`, { version: 1 }, gw.a.viewer), 403, "BATON_GATEWAY_FORBIDDEN");
  });
});

describe("children and execution detail", () => {
  test("lists child executions with their parent node and key", async () => {
    const parent = await gw.store.executions.create(gw.a.tenantId, { workflowId, workflowVersion: 1, input: {} });
    const base = { tenantId: gw.a.tenantId, parentExecutionId: parent.id, parentNodeId: "each", agentWorkflowId: workflowId, workflowVersion: 1, input: {} };
    const c1 = (await gw.store.executions.createChild({ ...base, childKey: "0.1" })).row;
    const c2 = (await gw.store.executions.createChild({ ...base, childKey: "1.1" })).row;
    const res = await get(`/api/agent-workflow-executions/${parent.id}/children`);
    expect(res.statusCode).toBe(200);
    expect(res.json<{ items: { id: number; parentExecutionId: number; parentNodeId: string; childKey: string }[] }>().items).toEqual([
      expect.objectContaining({ id: c1.id, parentExecutionId: parent.id, parentNodeId: "each", childKey: "0.1" }),
      expect.objectContaining({ id: c2.id, childKey: "1.1" }),
    ]);
    expect((await get(`/api/agent-workflow-executions/${c1.id}`)).json()).toMatchObject({ parentExecutionId: parent.id, parentNodeId: "each" });
    problemOf(await get(`/api/agent-workflow-executions/${parent.id}/children`, gw.b.admin), 404, "BATON_GATEWAY_NOT_FOUND");
  });
});

describe("execute: deadline and input schema", () => {
  test("deadlineMs sets the row's deadlineAt and the command's RFC 3339 deadline", async () => {
    const before = Date.now();
    const res = await post(`/api/agent-workflows/${workflowId}/execute`, { input: {}, deadlineMs: 60_000 });
    expect(res.statusCode).toBe(202);
    const { id } = res.json<{ id: number }>();
    const row = await gw.store.executions.get(gw.a.tenantId, id);
    const deadline = row!.deadlineAt!.getTime();
    expect(deadline).toBeGreaterThanOrEqual(before + 60_000);
    expect(deadline).toBeLessThanOrEqual(Date.now() + 60_000);
    expect(gw.bus.started.find((c) => c.executionId === id)?.deadline).toBe(row!.deadlineAt!.toISOString());
    expect((await get(`/api/agent-workflow-executions/${id}`)).json()).toMatchObject({ deadlineAt: row!.deadlineAt!.toISOString() });
  });

  test("deadlineMs outside 1 ms .. 30 days is 400", async () => {
    for (const deadlineMs of [0, 30 * 24 * 3600 * 1000 + 1, 1.5]) {
      const body = problemOf(await post(`/api/agent-workflows/${workflowId}/execute`, { deadlineMs }), 400, "BATON_GATEWAY_REQUEST_INVALID");
      expect(body.errors!.map((e) => e.path)).toEqual(["body.deadlineMs"]);
    }
  });

  test("an input violating the definition's inputSchema is 400 listing every problem, and nothing is written", async () => {
    const definition = {
      ...validDefinition(1),
      inputSchema: { type: "object", required: ["topic", "depth"], properties: { topic: { type: "string" }, depth: { type: "integer", minimum: 1 }, tags: { type: "array", items: { type: "string" } } } },
    };
    const wf = await gw.store.workflows.create(gw.a.tenantId, { name: "Typed input", definition });
    const started = gw.bus.started.length;
    const res = await post(`/api/agent-workflows/${wf.id}/execute`, { input: { depth: 0, tags: ["a", 2] } });
    const body = problemOf(res, 400, "BATON_GATEWAY_INPUT_INVALID");
    expect(body.errors!.map((e) => e.path).sort()).toEqual(["body.input", "body.input.depth", "body.input.tags[1]"]);
    expect(body.errors!.find((e) => e.path === "body.input")?.message).toContain("topic");
    expect(await gw.store.executions.list(gw.a.tenantId, { workflowId: wf.id })).toEqual([]);
    expect(gw.bus.started.length).toBe(started);

    const ok = await post(`/api/agent-workflows/${wf.id}/execute`, { input: { topic: "x", depth: 2 } });
    expect(ok.statusCode).toBe(202);
  });
});

describe("versions", () => {
  test("update adds a version, one version can be read, restore adds another; executions keep theirs", async () => {
    const created = await post("/api/agent-workflows", { name: "Versioned", definition: validDefinition(1) });
    const wf = created.json<{ id: number; version: number }>();
    expect(wf.version).toBe(1);
    const first = (await post(`/api/agent-workflows/${wf.id}/execute`, {})).json<{ id: number }>();

    const updated = await gw.app.inject({ method: "PUT", url: `/api/agent-workflows/${wf.id}`, headers: bearer(gw.a.operator), payload: { definition: validDefinition(2), changeDescription: "x=2" } });
    expect(updated.json()).toMatchObject({ version: 2 });
    const v2 = await get(`/api/agent-workflows/${wf.id}/versions/2`);
    expect(v2.json()).toMatchObject({ workflowId: wf.id, version: 2, definition: validDefinition(2), description: "x=2" });
    problemOf(await get(`/api/agent-workflows/${wf.id}/versions/3`), 404, "BATON_GATEWAY_NOT_FOUND");
    problemOf(await get(`/api/agent-workflows/${wf.id}/versions/1`, gw.b.admin), 404, "BATON_GATEWAY_NOT_FOUND");

    const versions = (await get(`/api/agent-workflows/${wf.id}/versions`)).json<{ items: { id: number; version: number }[] }>().items;
    const v1row = versions.find((v) => v.version === 1)!;
    const restored = await post(`/api/agent-workflows/${wf.id}/versions/${v1row.id}/restore`, {});
    expect(restored.json()).toMatchObject({ version: 3, definition: validDefinition(1) });
    expect((await get(`/api/agent-workflows/${wf.id}/versions/3`)).json()).toMatchObject({ version: 3, definition: validDefinition(1) });

    const second = (await post(`/api/agent-workflows/${wf.id}/execute`, {})).json<{ id: number }>();
    expect((await get(`/api/agent-workflow-executions/${first.id}`)).json()).toMatchObject({ workflowVersion: 1 });
    expect((await get(`/api/agent-workflow-executions/${second.id}`)).json()).toMatchObject({ workflowVersion: 3 });
  });
});

describe("import", () => {
  test("creates the workflow from the imported definition and returns the warnings", async () => {
    const res = await post("/api/agent-workflows/import", { format: "toolSequence", source: { steps: [{ tool: "a" }, { tool: "b" }] }, name: "Imported", description: "from a sequence" });
    expect(res.statusCode).toBe(201);
    const body = res.json<{ id: number; warnings: string[]; definition: unknown; slug: string }>();
    expect(body).toMatchObject({ warnings: ["timeouts dropped"], definition: validDefinition(2), slug: "imported", description: "from a sequence", version: 1 });
    expect(res.headers.location).toBe(`/api/agent-workflows/${body.id}`);
    expect(await gw.store.workflows.get(gw.a.tenantId, body.id)).toMatchObject({ name: "Imported", definition: validDefinition(2) });
    expect(gw.bus.published).toContainEqual(expect.objectContaining({ type: "workflow.created", scopeId: body.id }));
  });

  test("importer errors are 400 with paths into body.source (format into body.format); nothing is written", async () => {
    const count = (await gw.store.workflows.list(gw.a.tenantId, { limit: 1000 })).length;
    const empty = problemOf(await post("/api/agent-workflows/import", { format: "toolSequence", source: {}, name: "Nope" }), 400, "BATON_GATEWAY_IMPORT_INVALID");
    expect(empty.errors).toEqual([{ path: "body.source.steps", code: "required", message: "steps is required" }]);
    const format = problemOf(await post("/api/agent-workflows/import", { format: "plan", source: {}, name: "Nope" }), 400, "BATON_GATEWAY_IMPORT_INVALID");
    expect(format.errors!.map((e) => e.path)).toEqual(["body.format"]);
    problemOf(await post("/api/agent-workflows/import", { format: "yaml", source: {}, name: "Nope" }), 400, "BATON_GATEWAY_REQUEST_INVALID");
    const invalid = problemOf(await post("/api/agent-workflows/import", { format: "toolSequence", source: { steps: [{}] }, name: "Nope" }), 400, "BATON_GATEWAY_IMPORT_INVALID");
    expect(invalid.errors![0]!).toMatchObject({ path: "body.source", message: expect.stringMatching(/\(in the generated definition at nodes\[0\]\.type\)$/) });
    expect((await gw.store.workflows.list(gw.a.tenantId, { limit: 1000 })).length).toBe(count);
  });
});
