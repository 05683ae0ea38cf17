/**
 * Large values through the real services (in-process Baton, isolated prefix and schema; real
 * NATS with its default 1 MB max_payload, Postgres, Redis) — docs/tools.md, "Large results":
 * - a tool result larger than a message may be (2 MiB) reaches the run once: the worker puts
 *   it in the object bucket and sends a reference, the executor moves it into the blob store
 *   and deletes the object; the handler runs once and `$.path` reads through the reference;
 * - a result above the worker's maxResultBytes fails the call once with
 *   BATON_TOOL_RESULT_TOO_LARGE (not retryable), without running the handler again;
 * - a fan-out whose items are each under the threshold but together over it completes with
 *   every event published (execution.completed included) and a small node.completed;
 * - an output mapping keeps references for its large parts and its small fields inline; the
 *   final checkpoint and execution.completed stay small;
 * - a large value passed to another tool is journaled by reference;
 * - a forEach whose items each answer above the threshold reduces over the values, not the
 *   references (the reduce reads a field of every result);
 * - 2 MiB of arguments (above NATS's max_payload) reach a tool through the arguments object
 *   bucket; the handler runs once and the worker deletes the object once it has answered;
 * - an input (1.5 MiB) and a fork's context patch (1.2 MiB) over max_payload start: the start
 *   command names the row and the executor reads them from it, for a sub-workflow's child too;
 *   the fork keeps the large edit by reference;
 * - a write under a large value's reference (a setVariable's path, a fork's edit) changes the
 *   value, which is kept by reference again;
 * - a review's edited data over max_payload is stored as the execution's blob by the gateway
 *   and the resume carries its reference;
 * - the built-in worker started from the configuration follows BATON_LARGE_RESULT_BYTES and
 *   BATON_TOOL_MAX_RESULT_BYTES: a small result above the first goes by reference, one above
 *   the second fails with BATON_TOOL_RESULT_TOO_LARGE.
 */
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import type { Redis } from "ioredis";
import { createRedis } from "@baton/checkpoints";
import { loadConfig } from "@baton/config";
import { createLogger } from "@baton/telemetry";
import { connect } from "@nats-io/transport-node";
import { jetstreamManager } from "@nats-io/jetstream";
import type { JetStreamManager } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/nats-core";
import { connectBus } from "@baton/bus";
import type { Bus } from "@baton/bus";
import { createWorker, defineTool } from "@baton/sdk";
import type { ToolSpec, Worker } from "@baton/sdk";
import { z } from "zod";
import { startBaton } from "../bin/start.ts";
import type { BatonHandle } from "../bin/start.ts";
import pg from "pg";
import { api, DATABASE_URL, isolatedConfig, removeIsolated, waitFor } from "./helpers.ts";
import type { Api } from "./helpers.ts";
import { collectEvents, createDefinition, forkAtPause, journal, startExecution, testTools, waitForExecution } from "./workflows.ts";

const { config, env } = isolatedConfig();
let baton: BatonHandle;
let redis: Redis;
let a: Api;
let bus: Bus;
let extra: Worker;
let nc: NatsConnection;
let jsm: JetStreamManager;
const runs = { big: 0, huge: 0, measure: 0, capped: 0 };

const big: ToolSpec = defineTool({
  name: "big",
  description: "returns kb KiB of x",
  input: z.object({ kb: z.number().int(), tag: z.unknown().optional() }),
  handler: async ({ kb, tag }) => {
    runs.big++;
    return { tag: tag ?? null, data: "x".repeat(kb * 1024) };
  },
});

const huge: ToolSpec = defineTool({
  name: "huge",
  description: "returns more than its worker sends",
  input: z.object({}),
  handler: async () => {
    runs.huge++;
    return { data: "y".repeat(1_500_000) };
  },
});

const measure: ToolSpec = defineTool({
  name: "measure",
  description: "the length and the ends of a string",
  input: z.object({ data: z.string() }),
  handler: async ({ data }) => {
    runs.measure++;
    return { length: data.length, ends: `${data.slice(0, 2)}…${data.slice(-2)}` };
  },
});

/** Served only by a second, worker-only Baton whose limits come from its environment. */
const capped: ToolSpec = defineTool({
  name: "capped",
  description: "returns kb KiB of z",
  input: z.object({ kb: z.number().int() }),
  handler: async ({ kb }) => {
    runs.capped++;
    return { data: "z".repeat(kb * 1024) };
  },
});

const checkpointBytes = async (id: number): Promise<number> => (await redis.hget(`${config.prefix}:checkpoint:{${id}}`, "s"))?.length ?? -1;
const objectStream = `OBJ_${config.prefix}_tool_results_large`;
const objectsLeft = async (): Promise<number> => (await jsm.streams.info(objectStream)).state.messages;
const argsStream = `OBJ_${config.prefix}_tool_args_large`;

beforeAll(async () => {
  redis = createRedis(config.redisUrl);
  baton = await startBaton({ config, logger: createLogger("large-test", "warn"), tools: [...testTools(redis, config.prefix).tools, big, measure] });
  a = api(baton.gatewayPort!, config.apiKey!);
  nc = await connect({ servers: config.natsUrl });
  jsm = await jetstreamManager(nc);
  bus = await connectBus({ servers: config.natsUrl, prefix: config.prefix, name: "large-test", logger: createLogger("large-test", "silent") });
  extra = createWorker({ bus, tools: [huge], maxResultBytes: 1_000_000, maxDeliver: 3, logger: createLogger("large-test", "silent") });
  await extra.start();
}, 60_000);

afterAll(async () => {
  await extra?.drain();
  await bus?.drain();
  await baton?.stop();
  await redis?.quit();
  // removeIsolated deletes the prefix's streams and KV buckets; the object bucket here.
  await jsm?.streams.delete(objectStream).catch(() => false);
  await jsm?.streams.delete(argsStream).catch(() => false);
  await nc?.close();
  await removeIsolated(config);
});

describe("large values", () => {
  it("a 2 MiB tool result travels as an object reference, is stored once as a blob, and the handler runs once", async () => {
    runs.big = 0;
    const wf = await createDefinition(a, "two-mib", {
      nodes: [{ id: "b", type: "tool", config: { tool: "big" }, input: { kb: 2048 } }, { id: "len", type: "transform", config: { expression: "$length(b.data)" } }],
      edges: [{ from: "b", to: "len" }],
      output: { len: "$.len" },
    });
    const id = await startExecution(a, wf);
    const done = await waitForExecution(a, id, ["completed", "failed", "cancelled"], 30_000);
    expect({ status: done.status, error: done.error, output: done.output }).toEqual({ status: "completed", error: null, output: { len: 2 * 1024 * 1024 } });
    expect(runs.big).toBe(1);
    const nodes = await journal(a, id);
    expect(nodes.find((n) => n.nodeId === "b")!.output).toMatchObject({ $ref: expect.stringMatching(/^blob:[0-9a-f]{64}$/) as unknown as string });
    expect(await checkpointBytes(id)).toBeLessThan(4096);
    // The object was moved: its stream holds nothing any more.
    expect(await objectsLeft()).toBe(0);
  }, 60_000);

  it("a result above maxResultBytes fails the call once, not retryable, without running the handler again", async () => {
    runs.huge = 0;
    const wf = await createDefinition(a, "too-large", { nodes: [{ id: "h", type: "tool", config: { tool: "huge" }, retry: { maxAttempts: 3 } }] });
    const id = await startExecution(a, wf);
    const done = await waitForExecution(a, id, ["completed", "failed", "cancelled"], 30_000);
    expect(done.status).toBe("failed");
    expect(done.error).toContain("BATON_TOOL_RESULT_TOO_LARGE");
    expect(runs.huge).toBe(1);
  }, 60_000);

  it("a fan-out of items each under the threshold but over it together completes with every event, node.completed small", async () => {
    const wf = await createDefinition(a, "fan-60k", {
      nodes: [
        { id: "each", type: "forEach", config: { items: "$.input.xs", tool: "big", concurrency: 5, itemInput: { kb: 60, tag: "$.item" } } },
        { id: "n", type: "transform", config: { expression: "$count(each)" } },
        { id: "last", type: "transform", config: { expression: "each[19].tag" } },
      ],
      edges: [{ from: "each", to: "n" }, { from: "n", to: "last" }],
      output: { n: "$.n", last: "$.last" },
    });
    const id = await startExecution(a, wf, { xs: Array.from({ length: 20 }, (_, i) => i) });
    const done = await waitForExecution(a, id, ["completed", "failed", "cancelled"], 30_000);
    expect({ status: done.status, output: done.output }).toEqual({ status: "completed", output: { n: 20, last: 19 } });
    const events = await collectEvents(a, config.apiKey!, id, undefined, 10_000);
    expect(events.map((e) => e.event)).toContain("execution.completed");
    const completed = events.filter((e) => e.event === "node.completed");
    expect(completed.length).toBe(3);
    for (const e of completed) expect(JSON.stringify(e.data).length).toBeLessThanOrEqual(70_000);
    expect(await checkpointBytes(id)).toBeLessThanOrEqual(70_000);
  }, 60_000);

  it("an output mapping keeps its large part by reference, and a large value passed on is journaled by reference", async () => {
    const wf = await createDefinition(a, "output-ref", {
      nodes: [
        { id: "b", type: "tool", config: { tool: "big" }, input: { kb: 300, tag: "T" } },
        { id: "e", type: "tool", config: { tool: "echo" }, input: { d: "$.b.data" } },
        { id: "len", type: "transform", config: { expression: "$length(e.d)" } },
      ],
      edges: [{ from: "b", to: "e" }, { from: "e", to: "len" }],
      output: { len: "$.len", tag: "$.b.tag", whole: "$.b" },
    });
    const id = await startExecution(a, wf);
    const done = await waitForExecution(a, id, ["completed", "failed", "cancelled"], 30_000);
    expect(done.status).toBe("completed");
    const output = done.output as { len: number; tag: string; whole: { $ref: string; size: number } };
    expect(output.len).toBe(300 * 1024);
    expect(output.tag).toBe("T");
    expect(output.whole.$ref).toMatch(/^blob:[0-9a-f]{64}$/);
    expect(await checkpointBytes(id)).toBeLessThan(4096);
    const events = await collectEvents(a, config.apiKey!, id, undefined, 10_000);
    for (const e of events) expect(JSON.stringify(e.data).length).toBeLessThan(4096);
    const nodes = await journal(a, id);
    const e = nodes.find((n) => n.nodeId === "e")!;
    expect(JSON.stringify(e.input).length).toBeLessThan(1024);
    expect((e.input as { d: { $ref: string } }).d.$ref).toMatch(/^blob:/);
  }, 60_000);

  it("a forEach reduce reads a field of every result, each above the threshold, through its reference", async () => {
    const wf = await createDefinition(a, "fan-reduce-refs", {
      nodes: [
        { id: "each", type: "forEach", config: { items: "$.input.xs", tool: "big", concurrency: 3, itemInput: { kb: 100, tag: "$.item" }, reduce: "{ 'tags': results.tag, 'chars': $sum(results.($length(data))) }" } },
        { id: "plain", type: "forEach", config: { items: "$.input.xs", tool: "big", itemInput: { kb: 100, tag: "$.item" } } },
      ],
      edges: [{ from: "each", to: "plain" }],
      output: { reduced: "$.each" },
    });
    const id = await startExecution(a, wf, { xs: ["a", "b", "c"] });
    const done = await waitForExecution(a, id, ["completed", "failed", "cancelled"], 30_000);
    expect({ status: done.status, error: done.error }).toEqual({ status: "completed", error: null });
    expect((done.output as { reduced: unknown }).reduced).toEqual({ tags: ["a", "b", "c"], chars: 3 * 100 * 1024 });
    const nodes = await journal(a, id);
    expect(nodes.find((n) => n.nodeId === "each")!.output).toEqual({ tags: ["a", "b", "c"], chars: 3 * 100 * 1024 });
    // Without reduce the node's output is the list of references.
    const plain = nodes.find((n) => n.nodeId === "plain")!.output as { $ref: string }[];
    expect(plain).toHaveLength(3);
    for (const r of plain) expect(r.$ref).toMatch(/^blob:[0-9a-f]{64}$/);
    expect(await checkpointBytes(id)).toBeLessThan(4096);
  }, 60_000);

  it("2 MiB of arguments reach a tool through the arguments bucket; the handler runs once and the object is deleted", async () => {
    runs.measure = 0;
    const wf = await createDefinition(a, "two-mib-args", {
      nodes: [
        { id: "b", type: "tool", config: { tool: "big" }, input: { kb: 2048 } },
        { id: "m", type: "tool", config: { tool: "measure" }, input: { data: "$.b.data" } },
      ],
      edges: [{ from: "b", to: "m" }],
      output: { m: "$.m" },
    });
    const id = await startExecution(a, wf);
    const done = await waitForExecution(a, id, ["completed", "failed", "cancelled"], 30_000);
    expect({ status: done.status, error: done.error, output: done.output }).toEqual({ status: "completed", error: null, output: { m: { length: 2 * 1024 * 1024, ends: "xx…xx" } } });
    expect(runs.measure).toBe(1);
    const m = (await journal(a, id)).find((n) => n.nodeId === "m")!;
    expect((m.input as { data: { $ref: string } }).data.$ref).toMatch(/^blob:/);
    // The worker deleted the arguments object once it had answered.
    await waitFor("the arguments object deleted", async () => ((await jsm.streams.info(argsStream)).state.messages === 0 ? true : undefined), 10_000);
  }, 60_000);

  it("an input and a fork's context patch larger than a message may be start: the executor reads them from the row", async () => {
    // 1.5 MiB: over NATS's default max_payload (1 MB), under the gateway's 4 MiB body limit.
    const data = "i".repeat(1_500_000);
    const slug = "large-input-child";
    await createDefinition(a, slug, { nodes: [{ id: "c", type: "transform", config: { expression: "$length(input.data)" } }], output: { c: "$.c" } }, { slug });
    const wf = await createDefinition(a, "large-input", {
      nodes: [
        { id: "len", type: "transform", config: { expression: "$length(input.data)" } },
        { id: "sub", type: "subworkflow", config: { workflow: { slug } }, input: { data: "$.input.data" } },
        { id: "review", type: "humanReview", config: { reason: "go on?" } },
        { id: "extra", type: "transform", config: { expression: "$exists(patched) ? $length(patched) : 0" } },
      ],
      edges: [{ from: "len", to: "sub" }, { from: "sub", to: "review" }, { from: "review", to: "extra" }],
      output: { len: "$.len", sub: "$.sub", extra: "$.extra" },
    });
    const { src, id } = await forkAtPause(a, wf, { data }, { "$.patched": "p".repeat(1_200_000) });
    // The edit is kept by reference in the fork's checkpoint, as any large value is (the run's
    // input is kept whole, in both).
    expect((await checkpointBytes(id)) - (await checkpointBytes(src))).toBeLessThan(4096);
    for (const run of [src, id]) expect((await a.call("POST", `/api/agent-workflow-executions/${run}/resume`, { action: "approve" })).status).toBe(202);
    const source = await waitForExecution(a, src, ["completed", "failed", "cancelled"], 30_000);
    expect({ status: source.status, error: source.error, output: source.output }).toEqual({ status: "completed", error: null, output: { len: 1_500_000, sub: { c: 1_500_000 }, extra: 0 } });
    const fork = await waitForExecution(a, id, ["completed", "failed", "cancelled"], 30_000);
    expect({ status: fork.status, error: fork.error, output: fork.output }).toEqual({ status: "completed", error: null, output: { len: 1_500_000, sub: { c: 1_500_000 }, extra: 1_200_000 } });
  }, 60_000);

  it("a write under a large value's reference (setVariable, a fork's edit) changes the value, which stays by reference", async () => {
    const wf = await createDefinition(a, "large-write-under", {
      nodes: [
        { id: "b", type: "tool", config: { tool: "big" }, input: { kb: 100 } },
        { id: "set", type: "setVariable", config: { values: { "$.b.n": 9 } } },
        { id: "review", type: "humanReview", config: { reason: "go on?" } },
        { id: "t", type: "transform", config: { expression: "{ 'n': b.n, 'len': $length(b.data), 'extra': $exists(b.extra) ? b.extra : 0 }" } },
      ],
      edges: [{ from: "b", to: "set" }, { from: "set", to: "review" }, { from: "review", to: "t" }],
      output: { t: "$.t" },
    });
    const { src, id } = await forkAtPause(a, wf, {}, { "$.b.extra": 1 });
    for (const run of [src, id]) {
      expect(await checkpointBytes(run)).toBeLessThan(4096);
      expect((await a.call("POST", `/api/agent-workflow-executions/${run}/resume`, { action: "approve" })).status).toBe(202);
    }
    const source = await waitForExecution(a, src, ["completed", "failed", "cancelled"], 30_000);
    expect({ status: source.status, error: source.error, output: source.output }).toEqual({ status: "completed", error: null, output: { t: { n: 9, len: 102_400, extra: 0 } } });
    const fork = await waitForExecution(a, id, ["completed", "failed", "cancelled"], 30_000);
    expect({ status: fork.status, error: fork.error, output: fork.output }).toEqual({ status: "completed", error: null, output: { t: { n: 9, len: 102_400, extra: 1 } } });
    for (const run of [src, id]) expect(await checkpointBytes(run)).toBeLessThan(4096);
  }, 60_000);

  it("a review's edited data larger than a message may be is stored once and read through its reference", async () => {
    const wf = await createDefinition(a, "large-edit", {
      nodes: [
        { id: "review", type: "humanReview", config: { reason: "edit it" } },
        { id: "len", type: "transform", config: { expression: "$length(review.data.text)" } },
      ],
      edges: [{ from: "review", to: "len" }],
      output: { len: "$.len", decision: "$.review.decision" },
    });
    const id = await startExecution(a, wf);
    expect((await waitForExecution(a, id, ["paused", "completed", "failed", "cancelled"])).status).toBe("paused");
    const resumed = await a.call("POST", `/api/agent-workflow-executions/${id}/resume`, { action: "edit", data: { text: "e".repeat(1_300_000) } });
    expect(resumed.status).toBe(202);
    const done = await waitForExecution(a, id, ["completed", "failed", "cancelled"], 30_000);
    expect({ status: done.status, error: done.error, output: done.output }).toEqual({ status: "completed", error: null, output: { len: 1_300_000, decision: "edit" } });
    const review = (await journal(a, id)).find((n) => n.nodeId === "review")!;
    expect((review.output as { data: { $ref: string } }).data.$ref).toMatch(/^blob:[0-9a-f]{64}$/);
    expect(await checkpointBytes(id)).toBeLessThan(4096);
  }, 60_000);

  it("a large value written elsewhere in the context (a setVariable's $.path, an agent's conversation) is kept by reference too", async () => {
    const wf = await createDefinition(a, "large-context-writes", {
      nodes: [
        { id: "b", type: "tool", config: { tool: "big" }, input: { kb: 100 } },
        { id: "s", type: "setVariable", config: { values: { "$.copy": "$.b.data" } } },
        { id: "m", type: "transform", config: { expression: "[{ 'role': 'user', 'content': b.data }]" }, output: "$.messages" },
        { id: "p", type: "agent.prompt", config: { template: "and then?", role: "user" } },
        { id: "len", type: "transform", config: { expression: "{ 'copy': $length(copy), 'turns': $count(messages), 'first': $length(messages[0].content) }" } },
      ],
      edges: [{ from: "b", to: "s" }, { from: "s", to: "m" }, { from: "m", to: "p" }, { from: "p", to: "len" }],
      output: { len: "$.len" },
    });
    const id = await startExecution(a, wf);
    const done = await waitForExecution(a, id, ["completed", "failed", "cancelled"], 30_000);
    expect({ status: done.status, error: done.error, output: done.output }).toEqual({ status: "completed", error: null, output: { len: { copy: 102_400, turns: 2, first: 102_400 } } });
    // Every state of the run stayed small, and so did the execution row's context.
    expect(await checkpointBytes(id)).toBeLessThan(4096);
    const db = new pg.Client({ connectionString: DATABASE_URL });
    await db.connect();
    try {
      const r = await db.query<{ n: number }>(`SELECT length("context"::text) AS n FROM "${config.databaseSchema}"."agent_workflow_executions" WHERE "id" = $1`, [id]);
      expect(r.rows[0]!.n).toBeLessThan(4096);
    } finally {
      await db.end();
    }
  }, 60_000);

  it("a blob reference sent into a run must name one of the tenant's blobs; one a step makes that names none fails the run", async () => {
    const none = `blob:${"0".repeat(64)}`;
    // A reference to the tenant's blob (an earlier run's large result) is read through, and
    // recorded as the new run's use, so the pruner keeps the blob while the run reads it.
    const first = await createDefinition(a, "refs-source", { nodes: [{ id: "b", type: "tool", config: { tool: "big" }, input: { kb: 100 } }] });
    const source = await startExecution(a, first);
    expect((await waitForExecution(a, source, ["completed", "failed", "cancelled"], 30_000)).status).toBe("completed");
    const ref = (await journal(a, source)).find((n) => n.nodeId === "b")!.output as { $ref: string; size: number };
    expect(ref.$ref).toMatch(/^blob:[0-9a-f]{64}$/);
    const reader = await createDefinition(a, "refs-reader", {
      nodes: [
        { id: "len", type: "transform", config: { expression: "$length(input.x.data)" } },
        { id: "review", type: "humanReview", config: { reason: "go on?" } },
      ],
      edges: [{ from: "len", to: "review" }],
      output: { len: "$.len" },
    });
    const run = await startExecution(a, reader, { x: ref, note: { $ref: "#/$defs/not-a-blob" } });
    expect(await waitForExecution(a, run, ["paused", "completed", "failed", "cancelled"], 30_000)).toMatchObject({ status: "paused", error: null });
    const db = new pg.Client({ connectionString: DATABASE_URL });
    await db.connect();
    try {
      const uses = await db.query(`SELECT "executionId" FROM "${config.databaseSchema}"."blob_uses" WHERE "hash" = $1 ORDER BY "executionId"`, [ref.$ref.slice(5)]);
      // (Other tests' runs stored the same 100 KiB too: a blob is stored once per tenant.)
      expect(uses.rows.map((r: { executionId: number }) => r.executionId)).toEqual(expect.arrayContaining([source, run]));
    } finally {
      await db.end();
    }

    // One naming no blob of the tenant: 400 at its path, with the input's other problems; nothing stored.
    const before = (await a.call<{ items: unknown[] }>("GET", "/api/agent-workflow-executions?limit=100")).body.items.length;
    const refused = await a.call<{ code: string; errors: { path: string; code: string }[] }>("POST", `/api/agent-workflows/${reader}/execute`, {
      input: { x: { $ref: none, size: 3 }, list: [1, { $ref: none }], "odd key": { $ref: "blob:abc" } },
    });
    expect([refused.status, refused.body.code]).toEqual([400, "BATON_GATEWAY_INPUT_INVALID"]);
    expect(refused.body.errors.map((e) => [e.path, e.code])).toEqual([
      ["body.input.x", "unknown_blob"],
      ["body.input.list[1]", "unknown_blob"],
      ['body.input["odd key"]', "unknown_blob"],
    ]);
    expect((await a.call<{ items: unknown[] }>("GET", "/api/agent-workflow-executions?limit=100")).body.items.length).toBe(before);
    // So is one in a fork's context values, and in a review's edited data.
    const fork = await a.call<{ errors: { path: string; code: string }[] }>("POST", `/api/agent-workflow-executions/${run}/fork`, { version: 1, context: { "$.extra": { $ref: none } } });
    expect([fork.status, fork.body.errors.map((e) => [e.path, e.code])]).toEqual([400, [['body.context["$.extra"]', "unknown_blob"]]]);
    const edit = await a.call<{ errors: { path: string; code: string }[] }>("POST", `/api/agent-workflow-executions/${run}/resume`, { action: "edit", data: { y: { $ref: none } } });
    expect([edit.status, edit.body.errors.map((e) => [e.path, e.code])]).toEqual([400, [["body.data.y", "unknown_blob"]]]);
    expect((await a.call("POST", `/api/agent-workflow-executions/${run}/resume`, { action: "approve" })).status).toBe(202);
    expect(await waitForExecution(a, run, ["completed", "failed", "cancelled"], 30_000)).toMatchObject({ status: "completed", output: { len: 102_400 } });

    // A reference a step makes (here a transform's literal) that names no stored blob: the
    // next read fails the run with a coded error, where it used to leave it running for ever.
    const maker = await createDefinition(a, "refs-maker", {
      nodes: [
        { id: "fake", type: "transform", config: { expression: `{ "$ref": "${none}", "size": 3 }` } },
        { id: "read", type: "transform", config: { expression: "$string(fake)" } },
      ],
      edges: [{ from: "fake", to: "read" }],
    });
    const made = await startExecution(a, maker);
    const failed = await waitForExecution(a, made, ["completed", "failed", "cancelled"], 15_000);
    expect(failed.status).toBe("failed");
    expect(failed.error).toContain(`BATON_ENGINE_BLOBS_MISSING: the execution refers to blobs that are not stored: ${none}`);
  }, 90_000);

  it("the built-in worker started from the configuration follows BATON_LARGE_RESULT_BYTES and BATON_TOOL_MAX_RESULT_BYTES", async () => {
    runs.capped = 0;
    // Started last and stopped here: it serves the built-in tools too, with these small limits.
    const workerOnly = await startBaton({
      config: loadConfig({ ...env, BATON_TARGET: "worker", BATON_LARGE_RESULT_BYTES: "2048", BATON_TOOL_MAX_RESULT_BYTES: "100000" }),
      logger: createLogger("large-test-worker", "warn"),
      tools: [capped],
    });
    try {
      const wf = await createDefinition(a, "capped", {
        nodes: [
          { id: "small", type: "tool", config: { tool: "capped" }, input: { kb: 10 } },
          { id: "over", type: "tool", config: { tool: "capped" }, input: { kb: 200 }, retry: { maxAttempts: 3 } },
        ],
        edges: [{ from: "small", to: "over" }],
      });
      const id = await startExecution(a, wf);
      const done = await waitForExecution(a, id, ["completed", "failed", "cancelled"], 30_000);
      expect(done.status).toBe("failed");
      expect(done.error).toContain("BATON_TOOL_RESULT_TOO_LARGE");
      expect(runs.capped).toBe(2);
      // 10 KiB is under the executor's 64 KiB but above this worker's 2 KiB: it came as an object, now a blob.
      const small = (await journal(a, id)).find((n) => n.nodeId === "small")!;
      expect(small.output).toMatchObject({ $ref: expect.stringMatching(/^blob:[0-9a-f]{64}$/) as unknown as string });
    } finally {
      await workerOnly.stop();
    }
  }, 60_000);
});
