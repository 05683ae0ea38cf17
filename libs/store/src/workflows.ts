import type { Pool } from "pg";
import type { AgentWorkflow, Prisma, PrismaClient } from "./generated/client.ts";
import { guard, type ErrorContext } from "./db-errors.ts";
import { SlugTaken, StoreInvalidInput, StoreNotFound, WorkflowHasActiveRuns, WorkflowVersionMoved } from "./errors.ts";
import { toWorkflow, toWorkflowVersion } from "./records.ts";
import { requireSlug, slugify } from "./slug.ts";
import type { WorkflowInput, WorkflowPatch, WorkflowRecord, WorkflowsRepo } from "./types.ts";
import { inTransaction, isDbId, jsonIn, namedStatement, page, quoteIdent, requireJsonObject, requireTenantId, requireText } from "./values.ts";

type Tx = Prisma.TransactionClient;

const NAME_MAX = 200;
const DESCRIPTION_MAX = 10_000;

function boolOrUndefined(name: string, v: unknown): boolean | undefined {
  if (v === undefined) return undefined;
  if (typeof v !== "boolean") throw StoreInvalidInput(`${name} must be a boolean`);
  return v;
}

function slugCtx(slug: string, id?: number): ErrorContext {
  return {
    entity: "workflow",
    ...(id === undefined ? {} : { id }),
    onUnique: (constraint) => (constraint.includes("slug") ? SlugTaken(slug) : undefined),
  };
}

/** Checks the fields present in `patch` and returns them as column values. */
function columns(patch: Partial<WorkflowInput>): Prisma.AgentWorkflowUncheckedUpdateInput & { slug?: string; definition?: Prisma.InputJsonValue } {
  const out: Prisma.AgentWorkflowUncheckedUpdateInput & { slug?: string; definition?: Prisma.InputJsonValue } = {};
  if (patch.name !== undefined) out.name = requireText("name", patch.name, { max: NAME_MAX });
  if (patch.slug !== undefined) out.slug = requireSlug(patch.slug);
  if (patch.description !== undefined) out.description = requireText("description", patch.description, { max: DESCRIPTION_MAX, allowEmpty: true });
  if (patch.definition !== undefined) out.definition = jsonIn(requireJsonObject("definition", patch.definition)) as Prisma.InputJsonValue;
  if (patch.agentConfig !== undefined) out.agentConfig = jsonIn(requireJsonObject("agentConfig", patch.agentConfig));
  if (patch.memoryConfig !== undefined) out.memoryConfig = jsonIn(requireJsonObject("memoryConfig", patch.memoryConfig));
  const mcpExport = boolOrUndefined("mcpExport", patch.mcpExport);
  if (mcpExport !== undefined) out.mcpExport = mcpExport;
  const enabled = boolOrUndefined("enabled", patch.enabled);
  if (enabled !== undefined) out.enabled = enabled;
  return out;
}

/** What a version keeps of the workflow row: its definition and its agentConfig and memoryConfig. */
function snapshot(row: { definition: Prisma.JsonValue; agentConfig: Prisma.JsonValue; memoryConfig: Prisma.JsonValue }): { definition: Prisma.InputJsonValue; agentConfig: Prisma.InputJsonValue; memoryConfig: Prisma.InputJsonValue } {
  return { definition: row.definition as Prisma.InputJsonValue, agentConfig: row.agentConfig as Prisma.InputJsonValue, memoryConfig: row.memoryConfig as Prisma.InputJsonValue };
}

/** Bumps the version (row lock serialises concurrent updates) and records the new version's snapshot. */
async function bumpVersion(
  tx: Tx,
  tenantId: string,
  id: number,
  data: Prisma.AgentWorkflowUncheckedUpdateInput,
  changeDescription: string | null,
  ifVersion?: number,
): Promise<WorkflowRecord> {
  // With ifVersion, the UPDATE's own condition: Postgres checks it again on the locked row, so
  // an update committed in between makes it match nothing.
  const where = ifVersion === undefined ? { id, tenantId } : { id, tenantId, version: ifVersion };
  const [row] = await tx.agentWorkflow.updateManyAndReturn({ where, data: { ...data, version: { increment: 1 } } });
  if (!row) {
    const now = await tx.agentWorkflow.findFirst({ where: { id, tenantId }, select: { version: true } });
    throw now && ifVersion !== undefined ? WorkflowVersionMoved(id, ifVersion, now.version) : StoreNotFound("workflow", id);
  }
  await tx.agentWorkflowVersion.create({
    data: { tenantId, agentWorkflowId: id, version: row.version, ...snapshot(row), description: changeDescription },
  });
  return toWorkflow(row);
}

export function workflowsRepo(prisma: PrismaClient, schema: string, pool: Pool): WorkflowsRepo {
  // Read on every execute call: a plain named statement, as the executions' admission rows are.
  const BY_TENANT_ID = namedStatement("workflow_by_tenant_id", `SELECT * FROM ${quoteIdent(schema)}."agent_workflows" WHERE "id" = $1 AND "tenantId" = $2`);
  const q = quoteIdent(schema);
  // Deleting a workflow deletes its executions and their blob uses (cascades). The blobs those
  // executions used are marked used now in the same statement (locked in hash order, as puts and
  // uses lock them), so a blob's grace period counts from the deletion (ADR 008, "Events in the
  // stream"): references outside the rows — events still in the stream — stay readable for it.
  // A workflow is deleted only without runs queued, running or paused. Its row is locked first:
  // a run being created holds a key-share lock on it until it commits, and one created later
  // waits for the deletion (and then fails its foreign key), so the count, taken in the next
  // statement's snapshot, misses none.
  const LOCK = namedStatement("workflow_lock", `SELECT 1 FROM ${q}."agent_workflows" w WHERE w."id" = $1 AND w."tenantId" = $2 FOR UPDATE`);
  const ACTIVE = namedStatement("workflow_active_runs", `SELECT count(*)::int AS "active" FROM ${q}."agent_workflow_executions" e
      WHERE e."agentWorkflowId" = $1 AND e."tenantId" = $2 AND e."status" IN ('queued', 'running', 'paused')`);
  const DELETE = namedStatement("workflow_delete", `WITH held AS (
      SELECT b."id" FROM ${q}."blobs" b
       WHERE b."tenantId" = $2 AND b."hash" IN (
         SELECT u."hash" FROM ${q}."agent_workflow_executions" e JOIN ${q}."blob_uses" u ON u."executionId" = e."id" AND u."tenantId" = e."tenantId"
          WHERE e."agentWorkflowId" = $1 AND e."tenantId" = $2)
       ORDER BY b."hash" FOR UPDATE OF b
    ),
    touched AS (UPDATE ${q}."blobs" b SET "usedAt" = CURRENT_TIMESTAMP FROM held WHERE b."id" = held."id"),
    gone AS (DELETE FROM ${q}."agent_workflows" w WHERE w."id" = $1 AND w."tenantId" = $2 RETURNING w."id")
    SELECT count(*)::int AS "deleted" FROM gone`);
  // A run's tree shares one moment for the versions of the workflows it starts by reference
  // (docs/workflows.md, "Sub-workflows"): the creation of the first run up its parents and fork
  // sources. The walk is bounded (runs nest 32 deep; forks of forks are rare and short).
  const runs = `${q}."agent_workflow_executions"`;
  const VERSION_AT = namedStatement("workflow_version_at", `WITH RECURSIVE up AS (
      SELECT e."createdAt", COALESCE(e."parentExecutionId", e."forkedFromExecutionId") AS "next", 0 AS "depth"
        FROM ${runs} e WHERE e."id" = $3 AND e."tenantId" = $2
      UNION ALL
      SELECT p."createdAt", COALESCE(p."parentExecutionId", p."forkedFromExecutionId"), up."depth" + 1
        FROM up JOIN ${runs} p ON p."id" = up."next" AND p."tenantId" = $2 WHERE up."depth" < 256
    )
    SELECT max(v."version")::int AS "version" FROM ${q}."agent_workflow_versions" v
     WHERE v."agentWorkflowId" = $1 AND v."tenantId" = $2 AND v."createdAt" <= (SELECT min(up."createdAt") FROM up)`);
  return {
    async create(tenantId, input) {
      requireTenantId(tenantId);
      if (typeof input !== "object" || input === null) throw StoreInvalidInput("workflow input must be an object");
      if (input.name === undefined) throw StoreInvalidInput("name is required");
      if (input.definition === undefined) throw StoreInvalidInput("definition is required");
      const data = columns(input);
      const name = data.name as string;
      const slug = data.slug ?? slugify(name);
      const definition = data.definition as Prisma.InputJsonValue;
      return guard(slugCtx(slug), () =>
        prisma.$transaction(async (tx) => {
          const row = await tx.agentWorkflow.create({
            data: { ...(data as Prisma.AgentWorkflowUncheckedCreateInput), tenantId, name, slug, definition, version: 1 },
          });
          await tx.agentWorkflowVersion.create({
            data: { tenantId, agentWorkflowId: row.id, version: 1, ...snapshot(row), description: null },
          });
          return toWorkflow(row);
        }),
      );
    },

    async list(tenantId, opts) {
      requireTenantId(tenantId);
      const { take, skip } = page(opts);
      const rows = await guard({ entity: "workflow" }, () =>
        prisma.agentWorkflow.findMany({ where: { tenantId }, orderBy: { id: "desc" }, take, skip }),
      );
      return rows.map(toWorkflow);
    },

    async get(tenantId, id) {
      requireTenantId(tenantId);
      if (!isDbId(id)) return null;
      const res = await guard({ entity: "workflow", id }, () => pool.query<AgentWorkflow>({ ...BY_TENANT_ID, values: [id, tenantId] }));
      return res.rows[0] ? toWorkflow(res.rows[0]) : null;
    },

    async update(tenantId, id, patch, opts) {
      requireTenantId(tenantId);
      if (!isDbId(id)) throw StoreNotFound("workflow", String(id));
      if (typeof patch !== "object" || patch === null) throw StoreInvalidInput("patch must be an object");
      const { changeDescription, ...fields } = patch satisfies WorkflowPatch;
      const note = changeDescription === undefined ? null : requireText("changeDescription", changeDescription, { max: DESCRIPTION_MAX, allowEmpty: true });
      const data = columns(fields);
      return guard(slugCtx(data.slug ?? "", id), () => prisma.$transaction((tx) => bumpVersion(tx, tenantId, id, data, note, opts?.ifVersion)));
    },

    async delete(tenantId, id) {
      requireTenantId(tenantId);
      if (!isDbId(id)) return false;
      return guard({ entity: "workflow", id }, () => inTransaction(pool, async (client) => {
        if ((await client.query({ ...LOCK, values: [id, tenantId] })).rowCount === 0) return false;
        const { active } = (await client.query<{ active: number }>({ ...ACTIVE, values: [id, tenantId] })).rows[0]!;
        if (active > 0) throw WorkflowHasActiveRuns(id, active);
        const res = await client.query<{ deleted: number }>({ ...DELETE, values: [id, tenantId] });
        return res.rows[0]!.deleted > 0;
      }));
    },

    async getBySlug(tenantId, slug) {
      requireTenantId(tenantId);
      if (typeof slug !== "string" || slug.length === 0 || slug.length > 100) return null;
      const row = await guard({ entity: "workflow", id: slug }, () => prisma.agentWorkflow.findFirst({ where: { tenantId, slug } }));
      return row ? toWorkflow(row) : null;
    },

    async versionAt(tenantId, id, executionId) {
      requireTenantId(tenantId);
      if (!isDbId(id) || !isDbId(executionId)) return null;
      const res = await guard({ entity: "workflow", id }, () => pool.query<{ version: number | null }>({ ...VERSION_AT, values: [id, tenantId, executionId] }));
      return res.rows[0]?.version ?? null;
    },

    async listVersions(tenantId, id, opts) {
      requireTenantId(tenantId);
      const { take, skip } = page(opts);
      if (!isDbId(id)) return [];
      // The (agentWorkflowId, version) index gives the page in order: nothing outside it is read.
      const rows = await guard({ entity: "workflow", id }, () =>
        prisma.agentWorkflowVersion.findMany({ where: { agentWorkflowId: id, tenantId }, orderBy: { version: "asc" }, take, skip }),
      );
      return rows.map(toWorkflowVersion);
    },

    async getVersion(tenantId, id, version) {
      requireTenantId(tenantId);
      if (!isDbId(id) || !isDbId(version)) return null;
      const row = await guard({ entity: "workflow version", id: version }, () =>
        prisma.agentWorkflowVersion.findFirst({ where: { agentWorkflowId: id, tenantId, version } }),
      );
      return row ? toWorkflowVersion(row) : null;
    },

    async getVersionByRowId(tenantId, id, versionId) {
      requireTenantId(tenantId);
      if (!isDbId(id) || !isDbId(versionId)) return null;
      const row = await guard({ entity: "workflow version", id: versionId }, () =>
        prisma.agentWorkflowVersion.findFirst({ where: { id: versionId, agentWorkflowId: id, tenantId } }),
      );
      return row ? toWorkflowVersion(row) : null;
    },

    async restoreVersion(tenantId, id, versionId) {
      requireTenantId(tenantId);
      if (!isDbId(id)) throw StoreNotFound("workflow", String(id));
      if (!isDbId(versionId)) throw StoreNotFound("workflow version", String(versionId));
      return guard({ entity: "workflow", id }, () =>
        prisma.$transaction(async (tx) => {
          const old = await tx.agentWorkflowVersion.findFirst({ where: { id: versionId, agentWorkflowId: id, tenantId } });
          if (!old) throw StoreNotFound("workflow version", versionId);
          const { definition, agentConfig, memoryConfig } = snapshot(old);
          return bumpVersion(tx, tenantId, id, { definition, agentConfig, memoryConfig }, `restored from version ${old.version}`);
        }),
      );
    },
  };
}
