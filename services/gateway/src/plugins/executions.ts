/**
 * `/api/agent-workflow-executions`: runs, their node history, human-in-the-loop
 * resume, cancel, and the live event stream (SSE).
 *
 * The gateway only checks that a command makes sense for the row's status (resume
 * needs `paused`, cancel needs a run that has not ended) and hands it to the
 * executor over the bus; the executor owns every status change.
 *
 * Time travel: `/checkpoints` lists the kept checkpoint versions of a run (read from
 * the checkpoint store), and `/fork` starts a new run of the same workflow version
 * from one of them, optionally with changed context values (docs/time-travel.md).
 */
import type { FastifyPluginAsyncZod } from "fastify-type-provider-zod";
import { z } from "zod";
import { MAX_JSON_DEPTH, forkStartOf, forkStartRecord, parsePath, tooDeepAt } from "@baton/engine";
import type { ExecutionState } from "@baton/engine";
import type { JsonObject } from "@baton/store";
import type { GatewayDeps } from "../deps.ts";
import { CheckpointsUnavailable, CommandUnavailable, ExecutionFinished, ExecutionNotPaused, NotFound, RequestInvalid, ReviewAlreadyDecided, ReviewInSubRun, WorkflowDisabled } from "../errors.ts";
import type { Issue } from "../problem.ts";
import { problemSchema } from "../problem.ts";
import {
  API_SECURITY,
  TAGS,
  TERMINAL_STATUSES,
  cancelBody,
  checkpointListQuery,
  checkpointParams,
  checkpointSchema,
  checkpointSummarySchema,
  commandAcceptedSchema,
  executionAcceptedSchema,
  executionDetailSchema,
  executionLinksFor,
  executionListQuery,
  executionSchema,
  forkBody,
  idParams,
  nodeExecutionSchema,
  page,
  resumeBody,
  toCheckpointSummary,
  toExecution,
  toNodeExecution,
  toReview,
} from "../schemas.ts";
import type { SseRegistry } from "../sse.ts";
import { RECENT_END_MS, streamExecutionEvents } from "../sse.ts";
import { apiErrors, blobRefIssues, defined, orNotFound } from "./common.ts";
import { startOrFail } from "./workflows.ts";

export interface ExecutionsPluginOptions {
  deps: GatewayDeps;
  sse: SseRegistry;
  /** @default 15000 */
  heartbeatMs?: number;
}

/**
 * The largest array index a fork's edit may write: a write past an array's end fills the gap
 * with nulls, so a path of a few bytes could make a state of megabytes. A longer array is
 * edited by replacing it whole.
 */
const FORK_EDIT_MAX_INDEX = 10_000;

/**
 * Checks fork context keys: each a valid `$.path`, none the whole context or under `$.input`, no
 * index past {@link FORK_EDIT_MAX_INDEX}, and none that with its value nests the context more than
 * MAX_JSON_DEPTH levels deep (a write makes an object per segment: the body's own depth check
 * does not see a path's, and the engine walks the state recursively).
 */
function contextPatchIssues(context: Record<string, unknown>): Issue[] {
  const issues: Issue[] = [];
  for (const [key, value] of Object.entries(context)) {
    const path = `body.context[${JSON.stringify(key)}]`;
    const parsed = parsePath(key);
    if ("error" in parsed) issues.push({ path, code: "invalid_path", message: parsed.error });
    else if (parsed.segments.length === 0) issues.push({ path, code: "invalid_path", message: "the whole context ($) cannot be replaced; name a path below it" });
    else if (parsed.segments[0] === "input") issues.push({ path, code: "read_only_path", message: `"${key}" is under $.input, the run's input, which a fork keeps unchanged` });
    else if (parsed.segments.some((seg) => typeof seg === "number" && seg > FORK_EDIT_MAX_INDEX)) {
      issues.push({ path, code: "invalid_path", message: `"${key}": an index above ${FORK_EDIT_MAX_INDEX} cannot be edited; replace the array whole instead` });
    } else if (parsed.segments.length > MAX_JSON_DEPTH || tooDeepAt(value, MAX_JSON_DEPTH - parsed.segments.length) !== undefined) {
      issues.push({ path, code: "too_deep", message: `"${key}" (${parsed.segments.length} levels) with its value would nest the context more than ${MAX_JSON_DEPTH} levels deep` });
    }
  }
  return issues;
}

export const executionsPlugin: FastifyPluginAsyncZod<ExecutionsPluginOptions> = async (app, { deps, sse, heartbeatMs }) => {
  const { store } = deps;
  const tags = [TAGS.executions];
  const getExecution = (tenantId: string, id: number) => orNotFound("execution", id, () => store.executions.get(tenantId, id));

  app.get("/agent-workflow-executions", {
    schema: {
      tags,
      summary: "List executions",
      security: API_SECURITY,
      querystring: executionListQuery,
      response: { 200: page(executionSchema), ...apiErrors },
    },
    handler: async (request) => {
      const { workflowId, status, limit, offset } = request.query;
      const rows = await store.executions.list(request.auth.tenantId, { ...defined({ workflowId, status }), limit, offset });
      return { items: rows.map(toExecution), limit, offset };
    },
  });

  app.get("/agent-workflow-executions/:id", {
    schema: {
      tags,
      summary: "Get an execution with its node history",
      description:
        "`pendingReview` is set while the run is paused for a person: the newest pending review it waits on, its own or one in a " +
        "sub-run (a subworkflow or forEach child, at any depth), whose `executionId` then names the sub-run: decide it there.",
      security: API_SECURITY,
      params: idParams,
      response: { 200: executionDetailSchema, ...apiErrors },
    },
    handler: async (request) => {
      const { tenantId } = request.auth;
      const { id } = request.params;
      const execution = toExecution(await getExecution(tenantId, id));
      const [nodes, reviews] = await Promise.all([
        store.nodeExecutions.list(tenantId, id),
        execution.status === "paused" ? store.reviews.pendingInRun(tenantId, id, { limit: 1 }) : Promise.resolve([]),
      ]);
      const pending = reviews[0]; // newest first: the pause the run waits on now
      return { ...execution, nodes: nodes.map(toNodeExecution), pendingReview: pending ? toReview(pending) : null };
    },
  });

  app.get("/agent-workflow-executions/:id/nodes", {
    schema: {
      tags,
      summary: "List the node executions of an execution",
      security: API_SECURITY,
      params: idParams,
      response: { 200: z.object({ items: z.array(nodeExecutionSchema) }), ...apiErrors },
    },
    handler: async (request) => {
      const { tenantId } = request.auth;
      const { id } = request.params;
      await getExecution(tenantId, id);
      const nodes = await store.nodeExecutions.list(tenantId, id);
      return { items: nodes.map(toNodeExecution) };
    },
  });

  app.get("/agent-workflow-executions/:id/children", {
    schema: {
      tags,
      summary: "List the child executions of an execution",
      description: "Runs started by this one's sub-workflow and forEach nodes, oldest first (`parentNodeId` and `childKey` say which node and item).",
      security: API_SECURITY,
      params: idParams,
      response: { 200: z.object({ items: z.array(executionSchema) }), ...apiErrors },
    },
    handler: async (request) => {
      const { tenantId } = request.auth;
      const { id } = request.params;
      await getExecution(tenantId, id);
      const rows = await store.executions.listChildren(tenantId, id);
      return { items: rows.map(toExecution) };
    },
  });

  const checkpoints = () => {
    if (!deps.checkpoints) throw CheckpointsUnavailable();
    return deps.checkpoints;
  };

  app.get("/agent-workflow-executions/:id/checkpoints", {
    schema: {
      tags,
      summary: "List the checkpoint versions of an execution (time travel)",
      description:
        "Newest first: every version the checkpoint store still keeps (the latest `BATON_CHECKPOINT_HISTORY` versions; " +
        "a finished run's history expires after `BATON_CHECKPOINT_FINISHED_TTL_SECONDS`). Empty when none is kept.",
      security: API_SECURITY,
      params: idParams,
      querystring: checkpointListQuery,
      response: { 200: z.object({ items: z.array(checkpointSummarySchema) }), ...apiErrors, 503: problemSchema },
    },
    handler: async (request) => {
      const { tenantId } = request.auth;
      const { id } = request.params;
      const store = checkpoints();
      await getExecution(tenantId, id);
      // Only read for their summaries: not copied (a copy per version of a large state cost seconds).
      const history = await store.history(id, { ...defined({ limit: request.query.limit }), readOnly: true });
      return { items: history.map((c) => toCheckpointSummary(c.version, c.updatedAt, c.state)) };
    },
  });

  app.get("/agent-workflow-executions/:id/checkpoints/:version", {
    schema: {
      tags,
      summary: "Get the full state of one checkpoint version",
      security: API_SECURITY,
      params: checkpointParams,
      response: { 200: checkpointSchema, ...apiErrors, 503: problemSchema },
    },
    handler: async (request) => {
      const { tenantId } = request.auth;
      const { id, version } = request.params;
      const store = checkpoints();
      await getExecution(tenantId, id);
      const cp = await store.getVersion(id, version);
      if (!cp) throw NotFound(`checkpoint version ${version} of execution`, id);
      return { version: cp.version, updatedAt: cp.updatedAt, state: cp.state };
    },
  });

  app.post("/agent-workflow-executions/:id/fork", {
    schema: {
      tags,
      summary: "Fork an execution from one of its checkpoints",
      description:
        "Creates a new `queued` execution of the same workflow and the same workflow version as the source, with the source's input, " +
        "that starts from the source's checkpoint `version` instead of from the beginning. `context` writes values (keyed by `$.path`, " +
        "not under `$.input`) into the state before the run continues. The source is not changed.",
      security: API_SECURITY,
      params: idParams,
      body: forkBody,
      response: { 202: executionAcceptedSchema, ...apiErrors, 409: problemSchema, 503: problemSchema },
    },
    handler: async (request, reply) => {
      const { tenantId } = request.auth;
      const { id } = request.params;
      const { version, context } = request.body;
      const issues = context === undefined ? [] : [...contextPatchIssues(context), ...(await blobRefIssues(deps, tenantId, context, "body.context"))];
      if (issues.length > 0) throw RequestInvalid("body", issues.length, { details: issues });
      const cps = checkpoints();
      const source = await getExecution(tenantId, id);
      const at = await cps.getVersion(id, version);
      if (!at) throw NotFound(`checkpoint version ${version} of execution`, id);
      const wf = await orNotFound("workflow", source.agentWorkflowId, () => store.workflows.get(tenantId, source.agentWorkflowId));
      if (!wf.enabled) throw WorkflowDisabled(wf.id);
      const fork = await store.executions.create(tenantId, {
        workflowId: source.agentWorkflowId,
        workflowVersion: source.workflowVersion,
        input: source.input,
        agentId: source.agentId,
        sessionId: source.sessionId,
        triggerEvent: "fork",
        // A forEach body's run: the fork runs the same body, not the whole workflow.
        definitionRef: source.definitionRef,
        forkedFromExecutionId: id,
        forkedFromVersion: version,
        // The state the fork starts from, as read now: Redis may prune or lose the source's
        // history before an executor takes the start.
        checkpoint: { forkStart: forkStartRecord(forkStartOf(at.state as ExecutionState, id, version, context as JsonObject | undefined)) },
      });
      await startOrFail(deps, request.log, {
        tenantId,
        executionId: fork.id,
        workflowId: fork.agentWorkflowId,
        workflowVersion: fork.workflowVersion,
        forkOfExecutionId: id,
        forkOfVersion: version,
      });
      const links = executionLinksFor(fork.id);
      return reply.code(202).header("location", links.self).send({ id: fork.id, status: "queued" as const, links });
    },
  });

  /** A value small enough for a command as it is; a larger one stored as the execution's blob and referenced. */
  async function inlineOrBlob(tenantId: string, executionId: number, value: JsonObject): Promise<JsonObject> {
    const size = Buffer.byteLength(JSON.stringify(value), "utf8");
    if (size <= (deps.largeValueBytes ?? 65_536)) return value;
    const blob = await store.blobs.put(tenantId, executionId, value);
    return { $ref: blob.ref, size: blob.size };
  }

  app.post("/agent-workflow-executions/:id/resume", {
    schema: {
      tags,
      summary: "Resume a paused execution (human-in-the-loop decision)",
      description:
        "approve continues as proposed, edit continues with `data`, reject takes the node's rejection path. `nodeId` chooses the review when several wait; " +
        "a node with no pending review is 409. A pause takes one decision: a second decision for the same pause, even sent at the same moment, is 409 " +
        "`BATON_GATEWAY_REVIEW_ALREADY_DECIDED`. A run decides only its own reviews: while it waits only on a review in a sub-run (a subworkflow or " +
        "forEach child, at any depth), its resume is 409 `BATON_GATEWAY_REVIEW_IN_SUBRUN`, whose `pendingReviews` name each such review's execution, " +
        "node and resume URL; nothing is sent. Without `nodeId`, a run paused in a sub-run that also has a review of its own decides that one.",
      security: API_SECURITY,
      params: idParams,
      body: resumeBody,
      response: { 202: commandAcceptedSchema, ...apiErrors, 409: problemSchema, 503: problemSchema },
    },
    handler: async (request, reply) => {
      const { tenantId } = request.auth;
      const { id } = request.params;
      const execution = toExecution(await getExecution(tenantId, id));
      if (execution.status !== "paused") throw ExecutionNotPaused(id, execution.status);
      const named = request.body.nodeId;
      let nodeId = named ?? execution.currentState;
      // The node's latest journal row must be paused (it is written with the execution's status,
      // so no later than the client could see the run paused); its attempt names the pause.
      let pause = nodeId ? await store.nodeExecutions.latest(id, nodeId) : null;
      if (pause?.status !== "paused" && named === undefined) {
        // The pause point is no review of the run's own (none recorded, or a pause in a
        // sub-run): a review of its own that still waits is the one to decide.
        const own = await store.reviews.list(tenantId, { executionId: id, status: "pending", limit: 1 });
        if (own[0]) {
          nodeId = own[0].nodeId;
          pause = await store.nodeExecutions.latest(id, nodeId);
        }
      }
      if (pause?.status !== "paused") {
        const inSubRuns = (await store.reviews.pendingInRun(tenantId, id)).filter((r) => r.executionId !== id);
        const first = inSubRuns[0];
        if (first) {
          const pendingReviews = inSubRuns.map((r) => ({ reviewId: r.id, executionId: r.executionId, nodeId: r.nodeId, resume: `${executionLinksFor(r.executionId).self}/resume` }));
          throw ReviewInSubRun(id, first.executionId, first.nodeId, { details: { pendingReviews } });
        }
        throw ExecutionNotPaused(id, nodeId ? `paused, but not waiting for a decision at "${nodeId}"` : "paused with no node awaiting a decision");
      }
      const { action, comment, reviewer } = request.body;
      const refIssues = await blobRefIssues(deps, tenantId, request.body.data, "body.data");
      if (refIssues.length > 0) throw RequestInvalid("body", refIssues.length, { details: refIssues });
      const data = request.body.data === undefined ? undefined : await inlineOrBlob(tenantId, id, request.body.data);
      let sent: { duplicate: boolean };
      try {
        sent = await deps.commands.resumeExecution({ tenantId, executionId: id, nodeId: pause.nodeId, attempt: pause.attempt, action, ...defined({ data, comment, reviewer }) });
      } catch (err) {
        request.log.error({ err, executionId: id }, "resume command could not be sent");
        throw CommandUnavailable("resume", id, { cause: err });
      }
      if (sent.duplicate) throw ReviewAlreadyDecided(id, pause.nodeId);
      const links = executionLinksFor(id);
      return reply.code(202).header("location", links.self).send({ id, status: execution.status, links });
    },
  });

  app.post("/agent-workflow-executions/:id/cancel", {
    schema: {
      tags,
      summary: "Cancel a queued, running or paused execution",
      description:
        "Answers 202 with the run's status when the cancel is handed to the executor, which cancels the run (its tools, children and timers too) and " +
        "makes it `cancelled`. Cancel is idempotent: a second cancel while the first is still being carried out (the run not `cancelled` yet) is " +
        "202 too and changes nothing; the run is cancelled once, with one `execution.cancelled` carrying the first cancel's reason. Once the run " +
        "has ended, cancel is 409 `BATON_GATEWAY_EXECUTION_FINISHED`.",
      security: API_SECURITY,
      params: idParams,
      body: cancelBody,
      response: { 202: commandAcceptedSchema, ...apiErrors, 409: problemSchema, 503: problemSchema },
    },
    handler: async (request, reply) => {
      const { tenantId } = request.auth;
      const { id } = request.params;
      const execution = toExecution(await getExecution(tenantId, id));
      if (TERMINAL_STATUSES.has(execution.status)) throw ExecutionFinished(id, execution.status);
      try {
        await deps.commands.cancelExecution({ tenantId, executionId: id, ...defined({ reason: request.body?.reason }) });
      } catch (err) {
        request.log.error({ err, executionId: id }, "cancel command could not be sent");
        throw CommandUnavailable("cancel", id, { cause: err });
      }
      const links = executionLinksFor(id);
      return reply.code(202).header("location", links.self).send({ id, status: execution.status, links });
    },
  });

  app.get("/agent-workflow-executions/:id/events", {
    schema: {
      tags,
      summary: "Stream the events of an execution (Server-Sent Events)",
      description:
        "`text/event-stream`. Every event is `id: <seq>`, `event: <type>` (e.g. `node.started`), `data: {type, seq, time, data}`. " +
        "The stream replays the run from its first event (or after `Last-Event-ID`), then follows it live, " +
        "sends a `: heartbeat` comment every 15 s, and ends after `execution.completed`, `execution.failed` or `execution.cancelled`; " +
        "for a run that had ended when the stream opened, also after 2 s without an event (a `Last-Event-ID` past its last event), or, " +
        "when it ended less than a minute before and the stream starts from its first event, after 40 s (its last events may still be on their way after a crash).",
      security: API_SECURITY,
      params: idParams,
      produces: ["text/event-stream"],
      response: { 200: z.string().describe("An event stream"), ...apiErrors },
    },
    handler: async (request, reply) => {
      const { tenantId } = request.auth;
      const { id } = request.params;
      const execution = await getExecution(tenantId, id);
      if (request.method === "HEAD") return reply.code(200).type("text/event-stream").send("");
      await streamExecutionEvents(request, reply, {
        tenantId,
        executionId: id,
        finished: TERMINAL_STATUSES.has(execution.status),
        endedRecently: TERMINAL_STATUSES.has(execution.status) && execution.completedAt !== null && Date.now() - execution.completedAt.getTime() < RECENT_END_MS,
        events: deps.events,
        heartbeatMs: heartbeatMs ?? 15_000,
        registry: sse,
      });
      return reply;
    },
  });
};
