/**
 * `/api/agent-workflows`: definitions, their versions, and starting executions.
 *
 * Every definition that enters (create, update, restore) is checked by the engine's
 * validator first and refused with every problem listed; nothing is written then.
 * Execute checks the stored definition again, with the same tool and model lookups.
 * Execute pins the run to the workflow's current version and never leaves a queued
 * row behind when the start command cannot be handed over.
 */
import type { FastifyPluginAsyncZod } from "fastify-type-provider-zod";
import { z } from "zod";
import { errorMessage } from "@baton/errors";
import { validateInput } from "@baton/engine";
import type { FastifyBaseLogger } from "fastify";
import type { JsonObject } from "@baton/store";
import type { DefinitionIssue, GatewayDeps, StartExecutionCommand } from "../deps.ts";
import { ExecutionInputInvalid, ExecutionStartFailed, ImportInvalid, NotFound, WorkflowDefinitionInvalid, WorkflowDisabled } from "../errors.ts";
import type { Issue } from "../problem.ts";
import { problemSchema } from "../problem.ts";
import {
  API_SECURITY,
  TAGS,
  executeBody,
  executionAcceptedSchema,
  executionLinksFor,
  idParams,
  importBody,
  importResultSchema,
  page,
  pageQuery,
  toWorkflow,
  toWorkflowVersion,
  versionNumberParams,
  versionParams,
  workflowCreateBody,
  workflowSchema,
  workflowUpdateBody,
  workflowVersionSchema,
  writtenWorkflowSchema,
} from "../schemas.ts";
import { apiErrors, defined, orNotFound, publishAfterWrite } from "./common.ts";

export interface WorkflowsPluginOptions {
  deps: GatewayDeps;
}

/** Engine issue paths (`nodes[2].type`) → request paths (`body.definition.nodes[2].type`). */
export function definitionIssues(issues: readonly DefinitionIssue[], at = "body.definition"): Issue[] {
  return issues.map((i) => {
    const p = i.path === "" || i.path === "(definition)" ? "" : i.path;
    const path = p === "" ? at : p.startsWith("[") ? `${at}${p}` : `${at}.${p}`;
    return { path, code: i.code, message: i.message };
  });
}

/** Throws the definition's problems as a 400; returns its warnings (fields with no effect) as `path: message`. */
async function checkDefinition(deps: GatewayDeps, definition: unknown, at?: string): Promise<string[]> {
  const result = await deps.validateWorkflow(definition);
  if (!result.ok) {
    const errors = definitionIssues(result.errors, at);
    throw WorkflowDefinitionInvalid(errors.length, { details: errors });
  }
  return definitionIssues(result.warnings ?? [], at).map((w) => `${w.path}: ${w.message}`);
}

/** `validateInput` issue paths (`input.a[0]`) → request paths (`body.input.a[0]`). */
function checkInput(definition: JsonObject, input: JsonObject): void {
  let issues: DefinitionIssue[];
  try {
    issues = validateInput(definition, input);
  } catch (err) {
    // Definitions are validated when saved; one saved before inputSchema was checked may still hold a bad schema.
    const details = [{ path: "definition.inputSchema", code: "invalid_schema", message: `the workflow's inputSchema cannot be used: ${errorMessage(err)}` }];
    throw WorkflowDefinitionInvalid(1, { details, cause: err });
  }
  if (issues.length > 0) {
    const details = issues.map((i) => ({ ...i, path: i.path === "input" ? "body.input" : `body.${i.path}` }));
    throw ExecutionInputInvalid(details.length, { details });
  }
}

/**
 * Hands a start command to the bus. When that fails the execution row is marked
 * failed (or, failing that, deleted) so no queued row waits for a command that never comes.
 */
export async function startOrFail(deps: GatewayDeps, log: FastifyBaseLogger, command: StartExecutionCommand): Promise<void> {
  const { executionId, tenantId } = command;
  try {
    await deps.commands.startExecution(command);
  } catch (err) {
    log.error({ err, executionId }, "start command could not be sent");
    try {
      await deps.store.executions.update(executionId, {
        status: "failed",
        error: `could not be started: ${errorMessage(err)}`,
        completedAt: new Date(),
      });
    } catch (markErr) {
      log.error({ err: markErr, executionId }, "could not mark the unstarted execution failed; deleting it");
      await deps.store.executions.delete(tenantId, executionId).catch((delErr: unknown) => {
        log.error({ err: delErr, executionId }, "could not delete the unstarted execution");
      });
    }
    throw ExecutionStartFailed(executionId, { cause: err });
  }
}

export const workflowsPlugin: FastifyPluginAsyncZod<WorkflowsPluginOptions> = async (app, { deps }) => {
  const { store } = deps;
  const tags = [TAGS.workflows];
  const getWorkflow = (tenantId: string, id: number) => orNotFound("workflow", id, () => store.workflows.get(tenantId, id));

  const createWorkflow = async (tenantId: string, body: z.infer<typeof workflowCreateBody>, log: FastifyBaseLogger) => {
    const warnings = await checkDefinition(deps, body.definition);
    const record = await store.workflows.create(tenantId, defined(body) as typeof body);
    const wf = toWorkflow(record);
    await publishAfterWrite(deps, log, "workflow.created", tenantId, wf.id, { id: wf.id, name: wf.name, slug: wf.slug });
    return { wf, warnings };
  };
  /** A workflow as answered to a write: with `warnings` when its definition holds fields that have no effect. */
  const withWarnings = <T extends object>(wf: T, warnings: readonly string[]): T & { warnings?: string[] } => (warnings.length > 0 ? { ...wf, warnings: [...warnings] } : wf);

  /** The API shape of an updated (or restored) workflow, announced as `workflow.updated`. */
  const updated = async (tenantId: string, record: Parameters<typeof toWorkflow>[0], log: FastifyBaseLogger) => {
    const wf = toWorkflow(record);
    await publishAfterWrite(deps, log, "workflow.updated", tenantId, wf.id, { id: wf.id, name: wf.name, slug: wf.slug, version: wf.version });
    return wf;
  };

  app.post("/agent-workflows", {
    schema: {
      tags,
      summary: "Create an agent workflow",
      description: "Validates the definition (every problem is reported at once) and stores version 1.",
      security: API_SECURITY,
      body: workflowCreateBody,
      response: { 201: writtenWorkflowSchema, ...apiErrors, 409: problemSchema },
    },
    handler: async (request, reply) => {
      const { wf, warnings } = await createWorkflow(request.auth.tenantId, request.body, request.log);
      return reply.code(201).header("location", `/api/agent-workflows/${wf.id}`).send(withWarnings(wf, warnings));
    },
  });

  if (deps.importWorkflow) {
    const importWorkflow = deps.importWorkflow;
    app.post("/agent-workflows/import", {
      schema: {
        tags,
        summary: "Import a workflow from a plan, a tool sequence or a state machine",
        description:
          "Converts `source` to a workflow definition, then creates the workflow exactly like `POST /api/agent-workflows` (same validation). " +
          "An unusable source is a 400 `BATON_GATEWAY_IMPORT_INVALID` listing every problem with a path into `body.source`; `warnings` says what was adapted.",
        security: API_SECURITY,
        body: importBody,
        response: { 201: importResultSchema, ...apiErrors, 409: problemSchema },
      },
      handler: async (request, reply) => {
        const { format, source, name, slug, description } = request.body;
        const result = importWorkflow(format, source);
        if (!result.ok) {
          const details = definitionIssues(result.errors, "body.source").map((i) => (i.path === "body.source.format" ? { ...i, path: "body.format" } : i));
          throw ImportInvalid(format, details.length, { details });
        }
        const { wf, warnings } = await createWorkflow(request.auth.tenantId, { name, definition: result.definition as JsonObject, ...defined({ slug, description }) }, request.log);
        return reply.code(201).header("location", `/api/agent-workflows/${wf.id}`).send({ ...wf, warnings: [...result.warnings, ...warnings] });
      },
    });
  }

  app.get("/agent-workflows", {
    schema: {
      tags,
      summary: "List agent workflows",
      security: API_SECURITY,
      querystring: z.object(pageQuery),
      response: { 200: page(workflowSchema), ...apiErrors },
    },
    handler: async (request) => {
      const { limit, offset } = request.query;
      const rows = await store.workflows.list(request.auth.tenantId, { limit, offset });
      return { items: rows.map(toWorkflow), limit, offset };
    },
  });

  app.get("/agent-workflows/:id", {
    schema: {
      tags,
      summary: "Get an agent workflow",
      security: API_SECURITY,
      params: idParams,
      response: { 200: workflowSchema, ...apiErrors },
    },
    handler: async (request) => toWorkflow(await getWorkflow(request.auth.tenantId, request.params.id)),
  });

  app.put("/agent-workflows/:id", {
    schema: {
      tags,
      summary: "Update an agent workflow",
      description: "Every update creates a new version (the previous one stays in the version history).",
      security: API_SECURITY,
      params: idParams,
      body: workflowUpdateBody,
      response: { 200: writtenWorkflowSchema, ...apiErrors, 409: problemSchema },
    },
    handler: async (request) => {
      const { tenantId } = request.auth;
      const { id } = request.params;
      const warnings = request.body.definition !== undefined ? await checkDefinition(deps, request.body.definition) : [];
      const record = await orNotFound("workflow", id, () =>
        store.workflows.update(tenantId, id, defined(request.body) as typeof request.body),
      );
      return withWarnings(await updated(tenantId, record, request.log), warnings);
    },
  });

  app.delete("/agent-workflows/:id", {
    schema: {
      tags,
      summary: "Delete an agent workflow",
      description:
        "Deletes the workflow with its versions and executions. While any of its executions is queued, running or paused " +
        "the answer is 409 `BATON_STORE_WORKFLOW_ACTIVE` and nothing is deleted: cancel them, or let them end, first.",
      security: API_SECURITY,
      params: idParams,
      response: { 204: z.null().describe("Deleted"), ...apiErrors, 409: problemSchema },
    },
    handler: async (request, reply) => {
      const { tenantId } = request.auth;
      const { id } = request.params;
      const wf = toWorkflow(await getWorkflow(tenantId, id));
      await orNotFound("workflow", id, async () => {
        const r: unknown = await store.workflows.delete(tenantId, id);
        return r === false ? null : true;
      });
      await publishAfterWrite(deps, request.log, "workflow.deleted", tenantId, id, { id, slug: wf.slug });
      return reply.code(204).send(null);
    },
  });

  app.get("/agent-workflows/:id/versions", {
    schema: {
      tags,
      summary: "List the version history of an agent workflow",
      security: API_SECURITY,
      params: idParams,
      response: { 200: z.object({ items: z.array(workflowVersionSchema) }), ...apiErrors },
    },
    handler: async (request) => {
      const { tenantId } = request.auth;
      const { id } = request.params;
      await getWorkflow(tenantId, id);
      const rows = await store.workflows.listVersions(tenantId, id);
      return { items: rows.map(toWorkflowVersion) };
    },
  });

  app.get("/agent-workflows/:id/versions/:version", {
    schema: {
      tags,
      summary: "Get one version of an agent workflow",
      description: "By version number (the `version` field of the versions list); executions record the version they run as `workflowVersion`.",
      security: API_SECURITY,
      params: versionNumberParams,
      response: { 200: workflowVersionSchema, ...apiErrors },
    },
    handler: async (request) => {
      const { tenantId } = request.auth;
      const { id, version } = request.params;
      await getWorkflow(tenantId, id);
      const row = await orNotFound(`version ${version} of workflow`, id, () => store.workflows.getVersion(tenantId, id, version));
      return toWorkflowVersion(row);
    },
  });

  app.post("/agent-workflows/:id/versions/:versionId/restore", {
    schema: {
      tags,
      summary: "Restore a previous version",
      description:
        "Makes the definition of that version current again, as a new version. `versionId` is the version row's `id` from the versions list. " +
        "The old definition is validated again first.",
      security: API_SECURITY,
      params: versionParams,
      response: { 200: workflowSchema, ...apiErrors },
    },
    handler: async (request) => {
      const { tenantId } = request.auth;
      const { id, versionId } = request.params;
      await getWorkflow(tenantId, id);
      const old = (await store.workflows.listVersions(tenantId, id)).find((v) => v.id === versionId);
      if (!old) throw NotFound("workflow version", versionId);
      // A definition valid when it was saved may not be valid for this engine any more.
      await checkDefinition(deps, old.definition, "version.definition");
      const record = await orNotFound("workflow version", versionId, () => store.workflows.restoreVersion(tenantId, id, versionId));
      return updated(tenantId, record, request.log);
    },
  });

  app.post("/agent-workflows/:id/execute", {
    schema: {
      tags,
      summary: "Execute an agent workflow",
      description:
        "Queues a run of the workflow's current version and answers at once; follow it at `links.events` (SSE) or `links.self`. " +
        "The stored definition is validated again first, as on create (400 `BATON_GATEWAY_WORKFLOW_INVALID` lists every problem under `definition`; nothing is stored). " +
        "When the definition has an `inputSchema`, `input` must match it (400 `BATON_GATEWAY_INPUT_INVALID` lists every problem; nothing is stored). " +
        "`deadlineMs` bounds the whole run.",
      security: API_SECURITY,
      params: idParams,
      body: executeBody,
      response: { 202: executionAcceptedSchema, ...apiErrors, 409: problemSchema, 503: problemSchema },
    },
    handler: async (request, reply) => {
      const { tenantId } = request.auth;
      const { id } = request.params;
      const body = request.body ?? {};
      const wf = toWorkflow(await getWorkflow(tenantId, id));
      if (!wf.enabled) throw WorkflowDisabled(id);
      // Valid when saved is not valid now: a tool may have gone, or this engine checks more.
      await checkDefinition(deps, wf.definition, "definition");
      const input = body.input ?? {};
      checkInput(wf.definition, input);
      const deadlineAt = body.deadlineMs === undefined ? undefined : new Date(Date.now() + body.deadlineMs);
      const execution = await store.executions.create(tenantId, {
        workflowId: wf.id,
        workflowVersion: wf.version,
        input,
        ...defined({ agentId: body.agentId, sessionId: body.sessionId, deadlineAt }),
        triggerEvent: "api",
      });
      const executionId = execution.id;
      await startOrFail(deps, request.log, {
        tenantId,
        executionId,
        workflowId: wf.id,
        workflowVersion: wf.version,
        ...defined({ deadline: deadlineAt?.toISOString() }),
      });
      const links = executionLinksFor(executionId);
      return reply.code(202).header("location", links.self).send({ id: executionId, status: "queued" as const, links });
    },
  });
};
