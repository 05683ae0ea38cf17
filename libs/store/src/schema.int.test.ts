/**
 * Rules: the hand-written SQL migrations and prisma/schema.prisma describe the same
 * database. After migrating a fresh schema:
 * - every model's table has exactly the model's scalar columns, with the type,
 *   nullability and default the model declares;
 * - unique constraints, indexes and foreign keys (with their referential actions) are
 *   exactly the model's, under Prisma's constraint names;
 * - every model can be created and read back through the Prisma client with all of its
 *   fields set, and with only its required fields (defaults and NULLs come back as declared).
 */
import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import type pg from "pg";
import { Prisma } from "./generated/client.ts";
import { openTestStore, type TestStore } from "./testing.ts";

// ---- a small parser for the subset of the Prisma schema language Baton uses ----

interface ScalarField {
  name: string;
  type: string;
  optional: boolean;
  id: boolean;
  unique: boolean;
  default?: string;
  nativeType?: string;
}
interface RelationField {
  name: string;
  target: string;
  fields: string[];
  references: string[];
  onDelete?: string;
}
interface Model {
  name: string;
  table: string;
  scalars: ScalarField[];
  relations: RelationField[];
  uniques: string[][];
  indexes: string[][];
  /** A composite primary key (`@@id`). */
  primaryKey?: string[];
}

const list = (s: string): string[] => s.split(",").map((x) => x.trim()).filter(Boolean);

function parseSchema(text: string): Model[] {
  const blocks = [...text.matchAll(/^model (\w+) \{\n([\s\S]*?)^\}/gm)];
  const modelNames = new Set(blocks.map((b) => b[1]!));
  return blocks.map(([, name, body]) => {
    const model: Model = { name: name!, table: name!, scalars: [], relations: [], uniques: [], indexes: [] };
    for (const raw of body!.split("\n")) {
      const line = raw.replace(/\/\/.*$/, "").trim();
      if (!line) continue;
      let m: RegExpMatchArray | null;
      if ((m = line.match(/^@@map\("([^"]+)"\)/))) model.table = m[1]!;
      else if ((m = line.match(/^@@id\(\[([^\]]+)\]\)/))) model.primaryKey = list(m[1]!);
      else if ((m = line.match(/^@@unique\(\[([^\]]+)\]\)/))) model.uniques.push(list(m[1]!));
      else if ((m = line.match(/^@@index\(\[([^\]]+)\]\)/))) model.indexes.push(list(m[1]!));
      else if (line.startsWith("@@")) throw new Error(`unsupported block attribute: ${line}`);
      else {
        const [fname, ftype, ...rest] = line.split(/\s+/);
        const attrs = rest.join(" ");
        const base = ftype!.replace(/[?[\]]/g, "");
        if (modelNames.has(base)) {
          const rel = attrs.match(/fields: \[([^\]]+)\], references: \[([^\]]+)\](?:, onDelete: (\w+))?/);
          if (rel) model.relations.push({ name: fname!, target: base, fields: list(rel[1]!), references: list(rel[2]!), ...(rel[3] ? { onDelete: rel[3] } : {}) });
          continue;
        }
        const def = attrs.match(/@default\(((?:[^()]|\([^()]*\))*)\)/);
        const nat = attrs.match(/@db\.(\w+(?:\([^)]*\))?)/);
        model.scalars.push({
          name: fname!,
          type: base,
          optional: ftype!.endsWith("?"),
          id: /@id\b/.test(attrs),
          unique: /@unique\b/.test(attrs),
          ...(def ? { default: def[1]! } : {}),
          ...(nat ? { nativeType: nat[1]! } : {}),
        });
      }
    }
    return model;
  });
}

function expectedSqlType(f: ScalarField): string {
  if (f.nativeType === "VarChar") return "character varying";
  if (f.nativeType === "Timestamptz(3)") return "timestamp with time zone(3)";
  if (f.nativeType !== undefined) throw new Error(`add native type ${f.nativeType} to the test`);
  const t: Record<string, string> = { String: "text", Int: "integer", Boolean: "boolean", Json: "jsonb", DateTime: "timestamp without time zone(3)" };
  const sql = t[f.type];
  if (!sql) throw new Error(`add type ${f.type} to the test`);
  return sql;
}

/** How Postgres prints the column default the model declares (prefix match). */
function expectedDefault(f: ScalarField): string | null {
  if (f.default === undefined) return null;
  if (f.default === "autoincrement()") return "nextval(";
  if (f.default === "now()") return "CURRENT_TIMESTAMP";
  const generated = f.default.match(/^dbgenerated\("(.*)"\)$/);
  if (generated) return generated[1]!;
  if (f.default.startsWith('"')) return `'${f.default.slice(1, -1)}'`;
  return f.default;
}

const ACTIONS: Record<string, string> = { Cascade: "c", SetNull: "n", Restrict: "r", NoAction: "a", SetDefault: "d" };

const models = parseSchema(readFileSync(new URL("../prisma/schema.prisma", import.meta.url), "utf8"));

let t: TestStore;
let db: pg.Client;

beforeAll(async () => {
  t = await openTestStore({ prefix: "schema" });
  db = await t.connect();
});
afterAll(() => t?.dispose());

describe("schema.prisma and the SQL migrations", () => {
  it("parses every model of the schema", () => {
    expect(models.map((m) => m.name).sort()).toEqual(Object.keys(Prisma.ModelName).sort());
  });

  it("has exactly the tables of the models (plus the migrations table)", async () => {
    const { rows } = await db.query<{ table_name: string }>(
      "SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY 1",
      [t.options.schema],
    );
    expect(rows.map((r) => r.table_name).sort()).toEqual([...models.map((m) => m.table), "_baton_migrations"].sort());
  });

  it.each(models.map((m) => [m.name, m] as const))("%s: columns match in name, type, nullability and default", async (_, model) => {
    const { rows } = await db.query<{ column_name: string; data_type: string; datetime_precision: number | null; is_nullable: string; column_default: string | null }>(
      `SELECT column_name, data_type, datetime_precision, is_nullable, column_default
         FROM information_schema.columns WHERE table_schema = $1 AND table_name = $2`,
      [t.options.schema, model.table],
    );
    const actual = Object.fromEntries(
      rows.map((r) => [
        r.column_name,
        {
          type: r.data_type.startsWith("timestamp") ? `${r.data_type}(${r.datetime_precision})` : r.data_type,
          nullable: r.is_nullable === "YES",
          default: r.column_default,
        },
      ]),
    );
    expect(Object.keys(actual).sort()).toEqual(model.scalars.map((f) => f.name).sort());
    for (const f of model.scalars) {
      const col = actual[f.name]!;
      expect({ column: f.name, type: col.type, nullable: col.nullable }).toEqual({ column: f.name, type: expectedSqlType(f), nullable: f.optional });
      const def = expectedDefault(f);
      if (def === null) expect({ column: f.name, default: col.default }).toEqual({ column: f.name, default: null });
      else expect({ column: f.name, default: col.default?.startsWith(def) ? def : col.default }).toEqual({ column: f.name, default: def });
    }
  });

  it.each(models.map((m) => [m.name, m] as const))("%s: primary key, unique constraints and indexes match", async (_, model) => {
    const { rows } = await db.query<{ name: string; unique: boolean; columns: string[] }>(
      `SELECT ic.relname AS name, ix.indisunique AS unique,
              array(SELECT a.attname FROM unnest(ix.indkey) WITH ORDINALITY k(attnum, n)
                    JOIN pg_attribute a ON a.attrelid = ix.indrelid AND a.attnum = k.attnum ORDER BY k.n)::text[] AS columns
         FROM pg_index ix
         JOIN pg_class ic ON ic.oid = ix.indexrelid
         JOIN pg_class tc ON tc.oid = ix.indrelid
         JOIN pg_namespace ns ON ns.oid = tc.relnamespace
        WHERE ns.nspname = $1 AND tc.relname = $2`,
      [t.options.schema, model.table],
    );
    const expected = [
      ...model.scalars.filter((f) => f.id).map((f) => ({ name: `${model.table}_pkey`, unique: true, columns: [f.name] })),
      ...(model.primaryKey ? [{ name: `${model.table}_pkey`, unique: true, columns: model.primaryKey }] : []),
      ...model.scalars.filter((f) => f.unique).map((f) => ({ name: `${model.table}_${f.name}_key`, unique: true, columns: [f.name] })),
      // Postgres cuts identifiers to 63 bytes (NAMEDATALEN - 1); the migration spells the cut name.
      ...model.uniques.map((cols) => ({ name: `${model.table}_${cols.join("_")}_key`.slice(0, 63), unique: true, columns: cols })),
      ...model.indexes.map((cols) => ({ name: `${model.table}_${cols.join("_")}_idx`, unique: false, columns: cols })),
    ];
    const byName = (a: { name: string }, b: { name: string }) => a.name.localeCompare(b.name);
    expect(rows.map((r) => ({ name: r.name, unique: r.unique, columns: r.columns })).sort(byName)).toEqual(expected.sort(byName));
  });

  it.each(models.map((m) => [m.name, m] as const))("%s: foreign keys and their actions match", async (_, model) => {
    const { rows } = await db.query<{ name: string; columns: string[]; target: string; refs: string[]; on_delete: string; on_update: string }>(
      `SELECT c.conname AS name, rt.relname AS target, c.confdeltype AS on_delete, c.confupdtype AS on_update,
              array(SELECT a.attname FROM unnest(c.conkey) WITH ORDINALITY k(attnum, n)
                    JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.attnum ORDER BY k.n)::text[] AS columns,
              array(SELECT a.attname FROM unnest(c.confkey) WITH ORDINALITY k(attnum, n)
                    JOIN pg_attribute a ON a.attrelid = c.confrelid AND a.attnum = k.attnum ORDER BY k.n)::text[] AS refs
         FROM pg_constraint c
         JOIN pg_class tc ON tc.oid = c.conrelid
         JOIN pg_class rt ON rt.oid = c.confrelid
         JOIN pg_namespace ns ON ns.oid = tc.relnamespace
        WHERE c.contype = 'f' AND ns.nspname = $1 AND tc.relname = $2`,
      [t.options.schema, model.table],
    );
    const tableOf = (name: string) => models.find((m) => m.name === name)!.table;
    const expected = model.relations.map((r) => ({
      name: `${model.table}_${r.fields.join("_")}_fkey`,
      columns: r.fields,
      target: tableOf(r.target),
      refs: r.references,
      on_delete: ACTIONS[r.onDelete ?? (model.scalars.find((f) => f.name === r.fields[0])?.optional ? "SetNull" : "Restrict")],
      on_update: "c",
    }));
    const byName = (a: { name: string }, b: { name: string }) => a.name.localeCompare(b.name);
    expect([...rows].sort(byName)).toEqual(expected.sort(byName));
  });
});

describe("every model through the Prisma client", () => {
  const at = new Date("2025-01-02T03:04:05.678Z");
  const later = new Date("2025-01-02T04:05:06.789Z");

  /** Asserts the sample sets every scalar field of the model. */
  function covers(fieldEnum: Record<string, string>, sample: Record<string, unknown>): void {
    expect(Object.keys(sample).sort()).toEqual(Object.keys(fieldEnum).sort());
  }

  it("creates and reads every model with all of its fields", async () => {
    const p = t.store.prisma;
    const tenant = { id: "t_full", name: "Full", createdAt: at };
    covers(Prisma.TenantScalarFieldEnum, tenant);
    expect(await p.tenant.create({ data: tenant })).toEqual(tenant);

    const apiKey = { id: 101, tenantId: "t_full", name: "ci", role: "operator", keyHash: "ab".repeat(32), prefix: "bk_abcde", createdAt: at, lastUsedAt: later, revokedAt: later };
    covers(Prisma.ApiKeyScalarFieldEnum, apiKey);
    await p.apiKey.create({ data: apiKey });
    expect(await p.apiKey.findUnique({ where: { id: 101 } })).toEqual(apiKey);

    const workflow = {
      id: 201, tenantId: "t_full", name: "Triage", slug: "triage", description: "sorts tickets",
      definition: { nodes: [{ id: "a", type: "agent.llm" }], edges: [] }, agentConfig: { model: "x" }, memoryConfig: { enabled: true },
      mcpExport: true, enabled: false, version: 3, createdAt: at, updatedAt: later,
    };
    covers(Prisma.AgentWorkflowScalarFieldEnum, workflow);
    await p.agentWorkflow.create({ data: workflow });
    expect(await p.agentWorkflow.findUnique({ where: { id: 201 } })).toEqual(workflow);

    const version = { id: 301, tenantId: "t_full", agentWorkflowId: 201, version: 3, definition: { nodes: [] }, agentConfig: { model: "openai:gpt-x" }, memoryConfig: { enabled: true }, description: "third", createdAt: at };
    covers(Prisma.AgentWorkflowVersionScalarFieldEnum, version);
    await p.agentWorkflowVersion.create({ data: version });
    expect(await p.agentWorkflowVersion.findUnique({ where: { id: 301 } })).toEqual(version);

    const parent = { id: 400, tenantId: "t_full", agentWorkflowId: 201, workflowVersion: 3 };
    await p.agentWorkflowExecution.create({ data: parent });
    const execution = {
      id: 401, tenantId: "t_full", agentWorkflowId: 201, workflowVersion: 3, agentId: 7, sessionId: 8, status: "paused",
      currentState: "review", input: { q: "hi" }, output: { a: 1 }, context: { messages: [] }, checkpoint: { v: 2 },
      triggerEvent: "manual", tokenUsage: { total: 12 }, subRunPauses: { each: 402 }, patchedStep: 7, journalFloor: 1007, parentExecutionId: 400, parentNodeId: "each", childKey: "3.1", definitionRef: "each",
      forkedFromExecutionId: 400, forkedFromVersion: 5, deadlineAt: later, error: "boom", startedAt: at, completedAt: later,
      createdAt: at, updatedAt: later,
    };
    covers(Prisma.AgentWorkflowExecutionScalarFieldEnum, execution);
    await p.agentWorkflowExecution.create({ data: execution });
    expect(await p.agentWorkflowExecution.findUnique({ where: { id: 401 } })).toEqual(execution);

    const node = {
      id: 501, tenantId: "t_full", executionId: 401, nodeId: "review", nodeType: "agent.humanReview", attempt: 2, status: "paused",
      input: { x: 1 }, output: [1, 2], tokenUsage: { input: 1 }, toolCalls: [{ tool: "search" }], error: "e", errorCode: "BATON_X", retryable: true,
      stepVersion: 9, beganStep: 8, durationMs: 42, startedAt: at, completedAt: later,
    };
    covers(Prisma.AgentWorkflowNodeExecutionScalarFieldEnum, node);
    await p.agentWorkflowNodeExecution.create({ data: node });
    expect(await p.agentWorkflowNodeExecution.findUnique({ where: { id: 501 } })).toEqual(node);

    const memory = { id: 601, tenantId: "t_full", agentId: 7, userId: 9, key: "tz", content: "prefers UTC", metadata: { source: "s1" }, createdAt: at, updatedAt: later };
    covers(Prisma.AgentMemoryScalarFieldEnum, memory);
    await p.agentMemory.create({ data: memory });
    expect(await p.agentMemory.findUnique({ where: { id: 601 } })).toEqual(memory);

    const mcp = {
      id: 701, tenantId: "t_full", agentWorkflowId: 201, name: "triage-mcp", slug: "triage-mcp", toolDefinitions: [{ name: "run" }],
      status: "disabled", lastGeneratedAt: later, createdAt: at, updatedAt: later,
    };
    covers(Prisma.McpServerDefinitionScalarFieldEnum, mcp);
    await p.mcpServerDefinition.create({ data: mcp });
    expect(await p.mcpServerDefinition.findUnique({ where: { id: 701 } })).toEqual(mcp);

    const review = {
      id: 801, tenantId: "t_full", executionId: 401, nodeId: "review", pauseSeq: 1, status: "edited", reason: "check",
      payload: { draft: "x" }, decision: { draft: "y" }, reviewer: "ana", createdAt: at, resolvedAt: later,
    };
    covers(Prisma.ReviewScalarFieldEnum, review);
    await p.review.create({ data: review });
    expect(await p.review.findUnique({ where: { id: 801 } })).toEqual(review);

    const learned = { id: 901, tenantId: "t_full", executionId: 401, agentId: 7, sessionId: 8, tools: [{ tool: "search", params: { q: "x" } }], successful: true, createdAt: at };
    covers(Prisma.LearnedSequenceScalarFieldEnum, learned);
    await p.learnedSequence.create({ data: learned });
    expect(await p.learnedSequence.findUnique({ where: { id: 901 } })).toEqual(learned);

    const blob = { id: 1001, tenantId: "t_full", hash: "ab".repeat(32), size: 3, data: [1, 2, 3], createdAt: at, usedAt: later };
    covers(Prisma.BlobScalarFieldEnum, blob);
    await p.blob.create({ data: blob });
    expect(await p.blob.findUnique({ where: { id: 1001 } })).toEqual(blob);

    const use = { tenantId: "t_full", hash: "ab".repeat(32), executionId: 401 };
    covers(Prisma.BlobUseScalarFieldEnum, use);
    await p.blobUse.create({ data: use });
    expect(await p.blobUse.findUnique({ where: { tenantId_hash_executionId: use } })).toEqual(use);

    const learnedUse = { tenantId: "t_full", hash: "ab".repeat(32), sequenceId: 901 };
    covers(Prisma.LearnedBlobUseScalarFieldEnum, learnedUse);
    await p.learnedBlobUse.create({ data: learnedUse });
    expect(await p.learnedBlobUse.findUnique({ where: { tenantId_hash_sequenceId: learnedUse } })).toEqual(learnedUse);
  });

  it("creates every model from its required fields only; defaults and NULLs read back as declared", async () => {
    const p = t.store.prisma;
    const tenant = await p.tenant.create({ data: { id: "t_min", name: "Min" } });
    expect(tenant.createdAt).toBeInstanceOf(Date);

    expect(await p.apiKey.create({ data: { tenantId: "t_min", name: "k", role: "viewer", keyHash: "cd".repeat(32), prefix: "bk_12345" } })).toMatchObject({
      lastUsedAt: null, revokedAt: null,
    });
    const wf = await p.agentWorkflow.create({ data: { tenantId: "t_min", name: "W", slug: "w", definition: {} } });
    expect(wf).toMatchObject({ description: "", agentConfig: {}, memoryConfig: {}, mcpExport: false, enabled: true, version: 1 });
    expect(await p.agentWorkflowVersion.create({ data: { tenantId: "t_min", agentWorkflowId: wf.id, version: 1, definition: {} } })).toMatchObject({ description: null });
    const ex = await p.agentWorkflowExecution.create({ data: { tenantId: "t_min", agentWorkflowId: wf.id, workflowVersion: 1 } });
    expect(ex).toMatchObject({
      status: "queued", agentId: null, sessionId: null, currentState: null, input: {}, output: null, context: {}, checkpoint: null,
      triggerEvent: null, tokenUsage: {}, subRunPauses: {}, patchedStep: null, journalFloor: null, parentExecutionId: null, error: null, startedAt: null, completedAt: null,
    });
    const node = await p.agentWorkflowNodeExecution.create({ data: { tenantId: "t_min", executionId: ex.id, nodeId: "a", nodeType: "agent.llm", status: "running" } });
    expect(node).toMatchObject({ attempt: 1, input: null, output: null, tokenUsage: null, toolCalls: null, error: null, durationMs: null, completedAt: null });
    expect(node.startedAt).toBeInstanceOf(Date);
    expect(await p.agentMemory.create({ data: { tenantId: "t_min", agentId: 1, key: "k", content: "c" } })).toMatchObject({ userId: null, metadata: {} });
    expect(await p.mcpServerDefinition.create({ data: { tenantId: "t_min", agentWorkflowId: wf.id, name: "m", slug: "m" } })).toMatchObject({
      toolDefinitions: [], status: "active",
    });
    expect(await p.review.create({ data: { tenantId: "t_min", executionId: ex.id, nodeId: "a", pauseSeq: 0 } })).toMatchObject({
      status: "pending", reason: "", payload: {}, decision: null, reviewer: null, resolvedAt: null,
    });
    expect(await p.learnedSequence.create({ data: { tenantId: "t_min", executionId: ex.id, tools: [], successful: false } })).toMatchObject({
      agentId: null, sessionId: null,
    });
    const blob = await p.blob.create({ data: { tenantId: "t_min", hash: "cd".repeat(32), size: 1, data: 1 } });
    expect(blob.usedAt).toBeInstanceOf(Date);
    expect(blob.usedAt.getTime()).toBe(blob.createdAt.getTime());
  });

  it("rejects statuses and roles outside their sets (CHECK constraints)", async () => {
    const p = t.store.prisma;
    await expect(p.apiKey.create({ data: { tenantId: "t_min", name: "k", role: "root", keyHash: "ef".repeat(32), prefix: "x" } })).rejects.toThrow();
    const wf = await p.agentWorkflow.create({ data: { tenantId: "t_min", name: "W2", slug: "w2", definition: {} } });
    await expect(p.agentWorkflowExecution.create({ data: { tenantId: "t_min", agentWorkflowId: wf.id, workflowVersion: 1, status: "done" } })).rejects.toThrow();
  });

  it("refuses a child row that points at another tenant's parent (composite foreign keys)", async () => {
    const p = t.store.prisma;
    const wf = await p.agentWorkflow.findFirstOrThrow({ where: { tenantId: "t_full" } });
    await expect(p.agentWorkflowExecution.create({ data: { tenantId: "t_min", agentWorkflowId: wf.id, workflowVersion: 1 } })).rejects.toMatchObject({ code: "P2003" });
    await expect(p.agentWorkflowVersion.create({ data: { tenantId: "t_min", agentWorkflowId: wf.id, version: 99, definition: {} } })).rejects.toMatchObject({ code: "P2003" });
    // A use names the blob and the execution of its own tenant.
    const theirs = await p.agentWorkflowExecution.findFirstOrThrow({ where: { tenantId: "t_full" } });
    await expect(p.blobUse.create({ data: { tenantId: "t_min", hash: "cd".repeat(32), executionId: theirs.id } })).rejects.toMatchObject({ code: "P2003" });
    const mine = await p.agentWorkflowExecution.findFirstOrThrow({ where: { tenantId: "t_min" } });
    await expect(p.blobUse.create({ data: { tenantId: "t_min", hash: "ab".repeat(32), executionId: mine.id } })).rejects.toMatchObject({ code: "P2003" });
  });
});
