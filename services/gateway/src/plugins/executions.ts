/**
 * `/api/agent-workflow-executions`: runs, their node history, human-in-the-loop
 * resume, cancel, and the live event stream (SSE).
 *
 * The gateway only checks that a command makes sense for the row's status (resume
 * needs `paused`, cancel needs a run that has not ended) and hands it to the
 * executor over the bus; the executor owns every status change.
 */
import type { FastifyPluginAsyncZod } from "fastify-type-provider-zod";
import { z } from "zod";
import type { GatewayDeps } from "../deps.ts";
import { CommandUnavailable, ExecutionFinished, ExecutionNotPaused } from "../errors.ts";
import { problemSchema } from "../problem.ts";
import {
  API_SECURITY,
  TAGS,
  TERMINAL_STATUSES,
  cancelBody,
  commandAcceptedSchema,
  executionDetailSchema,
  executionLinksFor,
  executionListQuery,
  executionSchema,
  idParams,
  nodeExecutionSchema,
  page,
  resumeBody,
  toExecution,
  toNodeExecution,
  toReview,
} from "../schemas.ts";
import type { SseRegistry } from "../sse.ts";
import { streamExecutionEvents } from "../sse.ts";
import { apiErrors, defined, orNotFound } from "./common.ts";

export interface ExecutionsPluginOptions {
  deps: GatewayDeps;
  sse: SseRegistry;
  /** @default 15000 */
  heartbeatMs?: number;
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
      description: "`pendingReview` is set while the run is paused for a person.",
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
        execution.status === "paused" ? store.reviews.list(tenantId, { executionId: id, status: "pending" }) : Promise.resolve([]),
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

  app.post("/agent-workflow-executions/:id/resume", {
    schema: {
      tags,
      summary: "Resume a paused execution (human-in-the-loop decision)",
      description: "approve continues as proposed, edit continues with `data`, reject takes the node's rejection path.",
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
      let nodeId = execution.currentState;
      if (!nodeId) {
        const pending = await store.reviews.list(tenantId, { executionId: id, status: "pending" });
        nodeId = pending[0]?.nodeId ?? null;
      }
      if (!nodeId) throw ExecutionNotPaused(id, "paused with no node awaiting a decision");
      const { action, data, comment, reviewer } = request.body;
      try {
        await deps.commands.resumeExecution({ tenantId, executionId: id, nodeId, action, ...defined({ data, comment, reviewer }) });
      } catch (err) {
        request.log.error({ err, executionId: id }, "resume command could not be sent");
        throw CommandUnavailable("resume", id, { cause: err });
      }
      const links = executionLinksFor(id);
      return reply.code(202).header("location", links.self).send({ id, status: execution.status, links });
    },
  });

  app.post("/agent-workflow-executions/:id/cancel", {
    schema: {
      tags,
      summary: "Cancel a queued, running or paused execution",
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
        "sends a `: heartbeat` comment every 15 s, and ends after `execution.completed`, `execution.failed` or `execution.cancelled`.",
      security: API_SECURITY,
      params: idParams,
      produces: ["text/event-stream"],
      response: { 200: z.string().describe("An event stream"), ...apiErrors },
    },
    handler: async (request, reply) => {
      const { tenantId } = request.auth;
      const { id } = request.params;
      await getExecution(tenantId, id);
      if (request.method === "HEAD") return reply.code(200).type("text/event-stream").send("");
      await streamExecutionEvents(request, reply, {
        tenantId,
        executionId: id,
        events: deps.events,
        heartbeatMs: heartbeatMs ?? 15_000,
        registry: sse,
      });
      return reply;
    },
  });
};
