/**
 * `/api/agent-workflows`: definitions, their versions, and starting executions.
 *
 * Every definition that enters (create, update, restore, import) is checked by the engine's
 * validator first and refused with every problem listed; nothing is written then. An imported
 * definition's problems are reported where they came from in the imported source. The
 * workflow's own agentConfig (its LLM nodes' defaults) is checked with it, as the definition's
 * own agentConfig is: every model ref in it must be configured. An update is checked as the
 * workflow will be after it: what it sends with the stored definition or agentConfig it keeps.
 * Execute checks the stored definition and agentConfig again, with the same tool and model lookups.
 * Execute pins the run to the workflow's current version and never leaves a queued
 * row behind when the start command cannot be handed over.
 */
import type { FastifyPluginAsyncZod } from "fastify-type-provider-zod";
import { z } from "zod";
import { errorMessage } from "@baton/errors";
import { partialImportIssues, agentsWithoutModel, validateInput } from "@baton/engine";
import type { FastifyBaseLogger } from "fastify";
import type { JsonObject } from "@baton/store";
import { WorkflowVersionMoved } from "@baton/store";
import type { ImportSourceMap } from "@baton/engine";
import type { DefinitionIssue, GatewayDeps, StartExecutionCommand } from "../deps.ts";
import { ExecutionInputInvalid, ExecutionStartFailed, ImportInvalid, WorkflowDefinitionInvalid, WorkflowDisabled } from "../errors.ts";
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
  pageListQuery,
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
import { apiErrors, blobRefIssues, defined, orNotFound, publishAfterWrite } from "./common.ts";

export interface WorkflowsPluginOptions {
  deps: GatewayDeps;
}

/** Engine issue paths (`nodes[2].type`) → request paths (`body.definition.nodes[2].type`). */
export function definitionIssues(issues: readonly DefinitionIssue[], at = "body.definition"): Issue[] {
  return issues.map((i) => {
    const p = i.path === "" || i.path === "(definition)" || i.path === "(source)" ? "" : i.path;
    const path = p === "" ? at : p.startsWith("[") ? `${at}${p}` : `${at}.${p}`;
    return { path, code: i.code, message: i.message };
  });
}


/** `base` + `rest` (`.x` / `[0]` / ""), where `base` "" is the whole source. */
function joinPath(base: string, rest: string): string {
  return base === "" ? rest.replace(/^\./, "") : `${base}${rest}`;
}

/** `rest` (`.config.tool[0]`) through the longest field of `fields` it lies in (`config.tool` → `steps[2].tool_name`), the remainder kept. */
function throughFields(rest: string, fields: Readonly<Record<string, string>> | undefined): string | undefined {
  let best: string | undefined;
  for (const key of Object.keys(fields ?? {})) {
    const k = `.${key}`;
    if ((rest === k || rest.startsWith(`${k}.`) || rest.startsWith(`${k}[`)) && (best === undefined || key.length > best.length)) best = key;
  }
  return best === undefined ? undefined : joinPath(fields![best]!, rest.slice(best.length + 1));
}

/**
 * Where a path into a generated definition (`nodes[3].config.tool`) is in the source it was
 * imported from: `exact` when the whole path maps (`steps[2].tool_name`), else the source entry
 * the node or edge came from; undefined when nothing maps.
 */
function sourcePathOf(path: string, definition: Record<string, unknown>, map: ImportSourceMap): { path: string; exact: boolean } | undefined {
  const m = /^(nodes|edges)\[(\d+)\](.*)$/.exec(path);
  if (!m) {
    const top = throughFields(path === "" ? "" : `.${path}`, map.fields);
    return top === undefined ? undefined : { path: top, exact: true };
  }
  const index = Number(m[2]);
  const rest = m[3]!;
  let origin: ImportSourceMap["edges"][number] | undefined;
  if (m[1] === "edges") origin = map.edges[index];
  else {
    const node = Array.isArray(definition.nodes) ? (definition.nodes as unknown[])[index] : undefined;
    const id = typeof node === "object" && node !== null ? (node as { id?: unknown }).id : undefined;
    origin = typeof id === "string" && Object.hasOwn(map.nodes, id) ? map.nodes[id] : undefined;
  }
  if (!origin) return undefined;
  if (rest === "") return { path: origin.path, exact: true };
  const field = throughFields(rest, origin.fields);
  return field === undefined ? { path: origin.path, exact: false } : { path: field, exact: true };
}

/**
 * Issues of an imported definition → issues of the import request: each path points into
 * `body.source`, at the element the node or edge came from (with the rest of the path when the
 * field came from the source too). What does not map exactly points at the nearest element that
 * does (else at `body.source`), and its message says where in the generated definition it is.
 */
function importedDefinitionIssues(issues: readonly DefinitionIssue[], definition: Record<string, unknown>, map: ImportSourceMap | undefined): Issue[] {
  return definitionIssues(
    issues.map((i) => {
      const p = i.path === "(definition)" ? "" : i.path;
      const found = map === undefined ? undefined : sourcePathOf(p, definition, map);
      if (found?.exact) return { ...i, path: found.path };
      return { path: found?.path ?? "", code: i.code, message: `${i.message} (in the generated definition at ${p === "" ? "its top level" : p})` };
    }),
    "body.source",
  );
}

/**
 * The problems validation finds in what a failed import did convert (the engine's
 * `PartialImport`), and its LLM nodes and SynthDev agents without a model where the
 * installation has no default one (`agentsWithoutModel`), at their paths in `body.source`:
 * those in its nodes' own fields and in the material it carries (`partialImportIssues`), not
 * those of its graph, which is not the source's.
 */
async function checkPartialImport(deps: GatewayDeps, partial: { definition: Record<string, unknown>; sourceMap: ImportSourceMap }): Promise<Issue[]> {
  const result = await deps.validateWorkflow(partial.definition);
  // An import gives the workflow no agentConfig of its own: the definition's is all its agents have.
  const found = [...(result.ok ? [] : result.errors), ...agentsWithoutModel(partial.definition, undefined, deps.hasDefaultModel ?? false)];
  const own = partialImportIssues({ definition: partial.definition as JsonObject, sourceMap: partial.sourceMap }, found);
  return importedDefinitionIssues(own, partial.definition, partial.sourceMap);
}

/** How a definition's problems are reported: their request paths, and the 400 that carries them. */
interface IssueReport {
  paths: (issues: readonly DefinitionIssue[]) => Issue[];
  refuse: (details: Issue[]) => Error;
}

/** Problems of a definition the request holds at `at`, refused as `BATON_GATEWAY_WORKFLOW_INVALID`. */
function definitionAt(at = "body.definition"): IssueReport {
  return { paths: (issues) => definitionIssues(issues, at), refuse: (details) => WorkflowDefinitionInvalid(details.length, { details }) };
}

/** What the message of a problem in the stored `field` adds, for an update that keeps it. */
/** How often an update that keeps a stored part is checked again when other updates keep coming in between. */
const UPDATE_TRIES = 3;
const keptByUpdate = (field: "definition" | "agentConfig") => `in the workflow's current ${field}, which this update keeps: send ${field} to replace it`;

/** Problems of the stored definition an update keeps: at `definition…`, each message saying so. */
function keptDefinition(): IssueReport {
  const report = definitionAt("definition");
  const kept = keptByUpdate("definition");
  return { ...report, paths: (issues) => report.paths(issues).map((i) => ({ ...i, message: `${i.message} (${kept})` })) };
}

/**
 * The workflow's own agentConfig (seed 004's column) that comes with a definition, where the
 * request holds it (`body.agentConfig`), and, for the stored one an update keeps, what its
 * problems' messages add (`kept`).
 */
interface OwnAgentConfig {
  agentConfig: JsonObject | undefined;
  at: string;
  kept?: string;
}

/**
 * The smallest definition that carries `agentConfig`: one node with nothing to find fault with
 * and no tool to look up, so checking an agentConfig costs no second validation of the
 * workflow's definition (nor its tool lookups).
 */
function carrying(agentConfig: JsonObject): JsonObject {
  return { agentConfig, nodes: [{ id: "check", type: "setVariable", config: { values: {} } }] };
}

/**
 * Problems of the workflow's own agentConfig, found by the engine's checks of a definition's
 * agentConfig (its shape, every model ref in `model` and `levels` configured, `system`
 * placeholders): each of its fields is checked, whether or not the definition's own agentConfig
 * overrides it or a node reads it, as the definition's own are. None of those checks reads the
 * nodes, so the agentConfig is validated alone, not with the definition again. Paths are under
 * `own.at`.
 */
async function agentConfigIssues(deps: GatewayDeps, own: OwnAgentConfig): Promise<Issue[]> {
  const { agentConfig, at, kept } = own;
  if (agentConfig === undefined || Object.keys(agentConfig).length === 0) return [];
  const result = await deps.validateWorkflow(carrying(agentConfig));
  if (result.ok) return [];
  const issues: Issue[] = [];
  for (const i of result.errors) {
    if (i.path !== "agentConfig" && !i.path.startsWith("agentConfig.")) continue;
    issues.push({ path: `${at}${i.path.slice("agentConfig".length)}`, code: i.code, message: kept ? `${i.message} (${kept})` : i.message });
  }
  return issues;
}

/**
 * Throws the definition's problems, and those of the workflow's own agentConfig that comes with
 * it, as one 400; returns the definition's warnings (fields with no effect) as `path: message`.
 * The definition is validated once, with its own agentConfig (the workflow's is checked apart);
 * an LLM node or SynthDev agent that neither its config nor either agentConfig gives a model, as a
 * run merges them, is a problem of the definition (`missing_model`) while the installation has
 * no default model: its run would fail.
 */
async function checkDefinition(deps: GatewayDeps, definition: unknown, report: IssueReport = definitionAt(), own?: OwnAgentConfig): Promise<string[]> {
  const [result, ownIssues] = await Promise.all([deps.validateWorkflow(definition), own ? agentConfigIssues(deps, own) : Promise.resolve([])]);
  const withoutModel = agentsWithoutModel(definition, own?.agentConfig, deps.hasDefaultModel ?? false);
  const issues = [...(result.ok ? [] : report.paths(result.errors)), ...report.paths(withoutModel), ...ownIssues];
  if (issues.length > 0) throw report.refuse(issues);
  return report.paths((result.ok && result.warnings) || []).map((w) => `${w.path}: ${w.message}`);
}

/**
 * Checks an execution's input against the workflow's inputSchema (`validateInput` issue paths,
 * `input.a[0]`, become request paths, `body.input.a[0]`) and its blob references (each must name
 * one of the tenant's blobs); every problem in one 400.
 */
async function checkInput(deps: GatewayDeps, tenantId: string, definition: JsonObject, input: JsonObject): Promise<void> {
  let issues: DefinitionIssue[];
  try {
    issues = validateInput(definition, input);
  } catch (err) {
    // Definitions are validated when saved; one saved before inputSchema was checked may still hold a bad schema.
    const details = [{ path: "definition.inputSchema", code: "invalid_schema", message: `the workflow's inputSchema cannot be used: ${errorMessage(err)}` }];
    throw WorkflowDefinitionInvalid(1, { details, cause: err });
  }
  // A schema the validation now refuses, saved before it did ($async): no input can be checked.
  const unusable = issues.find((i) => i.code === "invalid_input_schema");
  if (unusable) throw WorkflowDefinitionInvalid(1, { details: [{ path: "definition.inputSchema", code: "invalid_schema", message: `the workflow's inputSchema cannot be used: ${unusable.message}` }] });
  const details = [
    ...issues.map((i) => ({ ...i, path: i.path === "input" ? "body.input" : `body.${i.path}` })),
    ...(await blobRefIssues(deps, tenantId, input, "body.input")),
  ];
  if (details.length > 0) throw ExecutionInputInvalid(details.length, { details });
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

  const createWorkflow = async (tenantId: string, body: z.infer<typeof workflowCreateBody>, log: FastifyBaseLogger, report?: IssueReport) => {
    const warnings = await checkDefinition(deps, body.definition, report, { agentConfig: body.agentConfig, at: "body.agentConfig" });
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
      description:
        "Validates the definition (every problem is reported at once) and stores version 1. The workflow's `agentConfig` is checked with it " +
        "as the definition's own agentConfig is: each model ref in it (`model`, the values of `levels`) must name a configured provider, " +
        "else 400 `BATON_GATEWAY_WORKFLOW_INVALID` with `model_not_configured` at `body.agentConfig.model` (or `body.definition.agentConfig.model`). " +
        "An LLM call that names no model uses the installation's `BATON_LLM_DEFAULT_MODEL`. Where none is configured, an `agent.llm` or " +
        "`agent.toolLoop` node with no `config.model` and no `model` in either agentConfig is `missing_model` at `body.definition.nodes[0].config.model`, " +
        "and a SynthDev agent that neither agentConfig gives a model (its role's `level` in `levels`, else `model`) is `missing_model` at the agent " +
        "(`body.definition.synthdev.workflow.agents[1]`). Both agentConfigs count as a run merges them, the definition's over the workflow's, field by field.",
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
        summary: "Import a workflow from a plan, a tool sequence, a state machine or a SynthDev workflow",
        description:
          "Converts `source` to a workflow definition, then creates the workflow exactly like `POST /api/agent-workflows` (same validation). " +
          "An unusable source, or a converted definition the validation refuses, is a 400 `BATON_GATEWAY_IMPORT_INVALID` listing every problem " +
          "with a path into `body.source` (an unknown format: `body.format`); nothing is stored. A source with problems of its own also " +
          "gets, in the same answer, the validation's problems of what did convert (plan and tool-sequence steps whose tool and params convert, " +
          "state-machine states whose invoke does, SynthDev states and their agents' roles): those in the converted nodes' own fields " +
          "(`unknown_tool` for a tool no worker serves, `invalid_config`, `invalid_path`, `invalid_expression`, …) and the SynthDev material they read " +
          "(their agents' roles' tools, `source.agentConfig`'s model refs, `missing_model` for an agent it gives no model), not those of the graph, " +
          "which lacks the rest (unreachable nodes, joins, cycles, edges). " +
          "A problem of the converted definition points at " +
          "the source element its node or edge came from (`body.source.steps[2].tool_name`, `body.source.states.review.on.next`); " +
          "when only the element is known, not the field, the message ends with where it is in the generated definition " +
          "(`(in the generated definition at nodes[3].maxVisits)`). `warnings` says what was adapted, then fields with no effect, with paths the same way.",
        security: API_SECURITY,
        body: importBody,
        response: { 201: importResultSchema, ...apiErrors, 409: problemSchema },
      },
      handler: async (request, reply) => {
        const { format, source, name, slug, description } = request.body;
        const result = importWorkflow(format, source);
        if (!result.ok) {
          const details = definitionIssues(result.errors, "body.source").map((i) => (i.path === "body.source.format" ? { ...i, path: "body.format" } : i));
          // What did convert is checked too, so that its nodes' problems (a tool no worker serves, a
          // config that does not fit) are reported now, not after the source is fixed.
          if (result.partial) details.push(...(await checkPartialImport(deps, result.partial)));
          throw ImportInvalid(format, details.length, { details });
        }
        const { definition, sourceMap } = result;
        const report: IssueReport = {
          paths: (issues) => importedDefinitionIssues(issues, definition, sourceMap),
          refuse: (details) => ImportInvalid(format, details.length, { details }),
        };
        const { wf, warnings } = await createWorkflow(request.auth.tenantId, { name, definition: definition as JsonObject, ...defined({ slug, description }) }, request.log, report);
        return reply.code(201).header("location", `/api/agent-workflows/${wf.id}`).send({ ...wf, warnings: [...result.warnings, ...warnings] });
      },
    });
  }

  app.get("/agent-workflows", {
    schema: {
      tags,
      summary: "List agent workflows",
      security: API_SECURITY,
      querystring: pageListQuery,
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
      description:
        "Every update creates a new version (the previous one stays in the version history). An update that sends a `definition` or an `agentConfig` " +
        "is checked as the workflow will be after it, as on create and as execute will check it: what it sends (problems at `body.definition…`, " +
        "`body.agentConfig…`), and the stored definition or agentConfig that it keeps (problems at `definition…` or `agentConfig…`, e.g. a model " +
        "whose provider is no longer configured; each message says to send that field to replace it). All problems come in one 400 " +
        "`BATON_GATEWAY_WORKFLOW_INVALID`; nothing is written. An update of other fields only (`name`, `enabled`, …) is not checked. " +
        "An update checked with a stored part is written only if no other update came in between; if one did, it is checked again " +
        "with the workflow as it is now (three tries, then 409 `BATON_STORE_WORKFLOW_VERSION_MOVED`, retryable).",
      security: API_SECURITY,
      params: idParams,
      body: workflowUpdateBody,
      response: { 200: writtenWorkflowSchema, ...apiErrors, 409: problemSchema },
    },
    handler: async (request) => {
      const { tenantId } = request.auth;
      const { id } = request.params;
      const { definition, agentConfig } = request.body;
      const patch = defined(request.body) as typeof request.body;
      for (let tries = 1; ; tries++) {
        let warnings: string[] = [];
        let ifVersion: number | undefined;
        if (definition !== undefined || agentConfig !== undefined) {
          // Checked as the workflow will be after the update, as execute will check it: the
          // definition and the agentConfig sent, with the stored one of the two that is not.
          const stored = definition === undefined || agentConfig === undefined ? await getWorkflow(tenantId, id) : undefined;
          // What was checked with a stored part is written only while that part is still
          // stored: an update in between (another agentConfig, say) is read and checked again.
          ifVersion = stored?.version;
          const own: OwnAgentConfig = agentConfig !== undefined
            ? { agentConfig, at: "body.agentConfig" }
            : { agentConfig: stored?.agentConfig, at: "agentConfig", kept: keptByUpdate("agentConfig") };
          if (definition !== undefined) warnings = await checkDefinition(deps, definition, definitionAt(), own);
          // The stored definition's warnings were answered when it was saved.
          else await checkDefinition(deps, stored?.definition, keptDefinition(), own);
        }
        try {
          const record = await orNotFound("workflow", id, () => store.workflows.update(tenantId, id, patch, { ifVersion }));
          return withWarnings(await updated(tenantId, record, request.log), warnings);
        } catch (err) {
          if (!WorkflowVersionMoved.is(err) || tries >= UPDATE_TRIES) throw err;
        }
      }
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
      description:
        "One page of the versions, oldest first (version 1 first), paged like the other lists with `limit` and `offset`. " +
        "Versions are numbered 1 to the workflow's current `version` without gaps, so the newest `limit` versions start at `offset` = max(0, `version` − `limit`); " +
        "a page shorter than `limit` is the last one.",
      security: API_SECURITY,
      params: idParams,
      querystring: pageListQuery,
      response: { 200: page(workflowVersionSchema), ...apiErrors },
    },
    handler: async (request) => {
      const { tenantId } = request.auth;
      const { id } = request.params;
      const { limit, offset } = request.query;
      await getWorkflow(tenantId, id);
      const rows = await store.workflows.listVersions(tenantId, id, { limit, offset });
      return { items: rows.map(toWorkflowVersion), limit, offset };
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
        "Makes the definition of that version current again, as a new version. `versionId` is the version row's `id` from the versions list; " +
        "a row that is not a version of this workflow (another workflow's, another tenant's, or none) is 404 and nothing is written. " +
        "The old definition and the version's `agentConfig` are validated again first, as on create (problems at `version.definition…` and `version.agentConfig…`).",
      security: API_SECURITY,
      params: versionParams,
      response: { 200: workflowSchema, ...apiErrors },
    },
    handler: async (request) => {
      const { tenantId } = request.auth;
      const { id, versionId } = request.params;
      await getWorkflow(tenantId, id);
      const old = await orNotFound("workflow version", versionId, () => store.workflows.getVersionByRowId(tenantId, id, versionId));
      // A definition valid when it was saved may not be valid for this engine any more.
      await checkDefinition(deps, old.definition, definitionAt("version.definition"), { agentConfig: old.agentConfig, at: "version.agentConfig" });
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
        "The stored definition and the workflow's `agentConfig` are validated again first, as on create (400 `BATON_GATEWAY_WORKFLOW_INVALID` lists every problem " +
        "under `definition` and `agentConfig`, e.g. a model whose provider is no longer configured; nothing is stored). " +
        "When the definition has an `inputSchema`, `input` must match it (400 `BATON_GATEWAY_INPUT_INVALID` lists every problem; nothing is stored). " +
        "A blob reference in `input` (`{\"$ref\": \"blob:<sha256>\", …}`, an earlier run's large value) must name one of the tenant's blobs " +
        "(else `unknown_blob` at its path in the same 400); the run reads through it. " +
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
      const record = await getWorkflow(tenantId, id);
      const wf = toWorkflow(record);
      if (!wf.enabled) throw WorkflowDisabled(id);
      // Valid when saved is not valid now: a tool or a model's provider may have gone, or this engine checks more.
      await checkDefinition(deps, wf.definition, definitionAt("definition"), { agentConfig: record.agentConfig, at: "agentConfig" });
      const input = body.input ?? {};
      await checkInput(deps, tenantId, wf.definition, input);
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
