/**
 * Blob retention through the real services (in-process Baton, isolated prefix and schema; real
 * NATS, Postgres, Redis) — docs/adr/008-blob-retention.md:
 * - a run records a use of every blob it stores (a tool result, a transform's output);
 * - a sub-workflow child records uses of its parent's blobs its input refers to, and the parent
 *   records uses of the child's blobs its output refers to;
 * - a fork records uses of the source's blobs its starting state refers to;
 * - after executions are deleted (a workflow deleted through the API, a run's row deleted), the
 *   prune API (cutoff in the future) deletes the blobs no execution uses any more, and keeps
 *   those another execution still uses, whose values still read through;
 * - the learner's sequences copy a tool's large input by reference: its blob stays after every
 *   run is deleted, readable, until the sequences go (ADR 008, "References outside executions").
 */
import { describe, expect, it } from "@jest/globals";
import { waitFor } from "./helpers.ts";
import { createDefinition, forkAtPause, getExecution, journal, startExecution, suiteInProcess, waitForExecution } from "./workflows.ts";

// Values above 1 KiB are stored as blobs; the pruner's timer is off: the test prunes itself.
const p = await suiteInProcess("blob-retention-test", { BATON_LARGE_RESULT_BYTES: "1024", BATON_BLOB_PRUNE_INTERVAL_SECONDS: "0" });

type Ref = { $ref: string; size: number };
const hashOf = (r: Ref): string => r.$ref.slice("blob:".length);
const usesOf = async (hash: string): Promise<number[]> =>
  (await p.store.prisma.blobUse.findMany({ where: { tenantId: p.tenantId, hash }, orderBy: { executionId: "asc" } })).map((u) => u.executionId);
const future = (): Date => new Date(Date.now() + 60_000);
const big = (c: string): string => c.repeat(4096);

describe("blob retention", () => {
  it("records uses across parent and child, and prunes only the blobs no execution uses after deletes", async () => {
    const childWf = await createDefinition(p.a, "retention-child", {
      nodes: [{ id: "more", type: "transform", config: { expression: "input.x.d & '!'" } }],
      output: { more: "$.more", back: "$.input.x" },
    }, { slug: "retention-child" });
    const parentWf = await createDefinition(p.a, "retention-parent", {
      nodes: [
        { id: "b", type: "tool", config: { tool: "echo" }, input: { d: "$.input.big" } },
        { id: "sub", type: "subworkflow", config: { workflow: { slug: "retention-child" } }, input: { x: "$.b" } },
        { id: "len", type: "transform", config: { expression: "$length(sub.more)" } },
      ],
      edges: [{ from: "b", to: "sub" }, { from: "sub", to: "len" }],
      output: { len: "$.len", b: "$.b" },
    });
    const parent = await startExecution(p.a, parentWf, { big: big("p") });
    const done = await waitForExecution(p.a, parent, ["completed", "failed", "cancelled"], 30_000);
    expect({ status: done.status, error: done.error }).toEqual({ status: "completed", error: null });
    expect((done.output as { len: number }).len).toBe(4097);

    const x = (await journal(p.a, parent)).find((n) => n.nodeId === "b")!.output as Ref;
    expect(x.$ref).toMatch(/^blob:[0-9a-f]{64}$/);
    const child = await p.store.prisma.agentWorkflowExecution.findFirstOrThrow({ where: { parentExecutionId: parent } });
    const y = (await getExecution(p.a, child.id)).output as { more: Ref; back: Ref };
    expect(y.more.$ref).toMatch(/^blob:[0-9a-f]{64}$/);
    expect(y.back).toEqual(x);
    // The parent stored x, the child's input refers to it; the child stored y, the parent's context holds it.
    expect(await usesOf(hashOf(x))).toEqual([parent, child.id].sort((m, n) => m - n));
    expect(await usesOf(hashOf(y.more))).toEqual([parent, child.id].sort((m, n) => m - n));

    // Another run stores the same value as x: it uses that blob too.
    const otherWf = await createDefinition(p.a, "retention-other", { nodes: [{ id: "b", type: "tool", config: { tool: "echo" }, input: { d: "$.input.big" } }] });
    const other = await startExecution(p.a, otherWf, { big: big("p") });
    expect((await waitForExecution(p.a, other, ["completed", "failed", "cancelled"], 30_000)).status).toBe("completed");
    expect((await journal(p.a, other)).find((n) => n.nodeId === "b")!.output).toEqual(x);
    expect(await usesOf(hashOf(x))).toEqual([parent, child.id, other].sort((m, n) => m - n));

    // The learner records both runs' tool sequences (before their runs are deleted below): the
    // tool's input is copied with its large part by reference.
    const learnedInput = async (id: number): Promise<Ref> => {
      const seq = await waitFor(`the learned sequence of ${id}`, async () => (await p.store.learning.list(p.tenantId)).find((l) => l.executionId === id));
      return (seq.tools as { params: { d: Ref } }[])[0]!.params.d;
    };
    const input = await learnedInput(other);
    expect(input.$ref).toMatch(/^blob:[0-9a-f]{64}$/);
    expect(await learnedInput(parent)).toEqual(input);

    // Nothing is unused yet.
    expect(await p.store.blobs.prune({ olderThan: future(), limit: 1000 })).toMatchObject({ ran: true, deleted: 0 });

    // The child's workflow goes (its execution with it): the parent still uses both blobs.
    expect((await p.a.call("DELETE", `/api/agent-workflows/${childWf}`)).status).toBeLessThan(300);
    expect(await p.store.blobs.prune({ olderThan: future(), limit: 1000 })).toMatchObject({ deleted: 0 });
    expect(await usesOf(hashOf(y.more))).toEqual([parent]);

    // The parent's workflow goes: y is no one's any more, x is still the other run's.
    expect((await p.a.call("DELETE", `/api/agent-workflows/${parentWf}`)).status).toBeLessThan(300);
    expect(await p.store.blobs.prune({ olderThan: future(), limit: 1000 })).toMatchObject({ deleted: 1 });
    expect(await p.store.blobs.get(p.tenantId, hashOf(y.more))).toBeNull();
    expect((await p.store.blobs.get(p.tenantId, hashOf(x)))?.data).toEqual({ d: big("p") });
    expect(await usesOf(hashOf(x))).toEqual([other]);

    // And once that run is deleted too, x goes, with the rest of what it stored (its output
    // holds its large input by reference): no execution is left, and the only blob left is
    // the large input the learned sequences refer to, which reads back.
    expect(await p.store.executions.delete(p.tenantId, other)).toBe(true);
    expect((await p.store.blobs.prune({ olderThan: future(), limit: 1000 })).deleted).toBeGreaterThanOrEqual(1);
    expect(await p.store.blobs.get(p.tenantId, hashOf(x))).toBeNull();
    expect(await p.store.prisma.agentWorkflowExecution.count({ where: { tenantId: p.tenantId } })).toBe(0);
    expect((await p.store.prisma.blob.findMany({ where: { tenantId: p.tenantId } })).map((b) => b.hash)).toEqual([hashOf(input)]);
    expect((await p.store.blobs.get(p.tenantId, hashOf(input)))?.data).toBe(big("p"));

    // The sequences go: so does their blob, and nothing is left.
    await p.store.prisma.learnedSequence.deleteMany({ where: { tenantId: p.tenantId } });
    expect(await p.store.blobs.prune({ olderThan: future(), limit: 1000 })).toMatchObject({ deleted: 1 });
    expect(await p.store.prisma.blob.count({ where: { tenantId: p.tenantId } })).toBe(0);
  }, 90_000);

  it("a fork uses the source's blobs its starting state refers to, and keeps them when the source is deleted", async () => {
    const wf = await createDefinition(p.a, "retention-fork", {
      nodes: [
        { id: "b", type: "tool", config: { tool: "echo" }, input: { d: "$.input.big" } },
        { id: "review", type: "humanReview", config: { reason: "ok?" } },
        { id: "len", type: "transform", config: { expression: "$length(b.d)" } },
      ],
      edges: [{ from: "b", to: "review" }, { from: "review", to: "len" }],
      output: { len: "$.len" },
    });
    const { src, id: fork } = await forkAtPause(p.a, wf, { big: big("f") }, { "$.note": "edited" });
    const x = (await journal(p.a, src)).find((n) => n.nodeId === "b")!.output as Ref;
    expect(x.$ref).toMatch(/^blob:[0-9a-f]{64}$/);
    expect(await usesOf(hashOf(x))).toEqual([src, fork]);

    // The source's other blobs (its journal's copy of the tool's large input) go; x stays.
    expect(await p.store.executions.delete(p.tenantId, src)).toBe(true);
    await p.store.blobs.prune({ olderThan: future(), limit: 1000 });
    expect(await usesOf(hashOf(x))).toEqual([fork]);
    expect((await p.store.blobs.get(p.tenantId, hashOf(x)))?.data).toEqual({ d: big("f") });
    // The fork still reads the value: approved, it finishes with the length of the blob's string.
    const resumed = await p.a.call("POST", `/api/agent-workflow-executions/${fork}/resume`, { action: "approve" });
    expect(resumed.status).toBeLessThan(300);
    const done = await waitForExecution(p.a, fork, ["completed", "failed", "cancelled"], 30_000);
    expect({ status: done.status, error: done.error, output: done.output }).toEqual({ status: "completed", error: null, output: { len: 4096 } });
  }, 90_000);
});
