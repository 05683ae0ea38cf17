/**
 * `POST /api/agent-workflows/import` through the real importer and the real validator (with
 * the tool registry of all services in one process on the real NATS, Redis and Postgres).
 * Rules checked:
 * - every seed example (000, 001, 004) and every docs/importers.md example imports: 201, the
 *   stored definition is exactly the importer's, the importer's warnings come back;
 * - `$NAME` text that is not a step (`"$HOME"`, `"$5"`) stays text: the import is accepted and
 *   the tool receives it verbatim when the workflow runs;
 * - the docs plan example runs to the result docs/importers.md implies;
 * - a source the importer refuses, and an imported definition the validator refuses (a tool no
 *   worker serves), are 400 BATON_GATEWAY_IMPORT_INVALID with paths into body.source (the
 *   latter at the step the node came from); nothing is stored either way.
 */
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { readFileSync } from "node:fs";
import { z } from "zod";
import { importWorkflow } from "@baton/engine";
import type { ImportFormat } from "@baton/engine";
import { defineTool } from "@baton/sdk";
import { createLogger } from "@baton/telemetry";
import { startBaton } from "../bin/start.ts";
import type { BatonHandle } from "../bin/start.ts";
import { codeReviewRecord, codeReviewSteps, example1, example2, mockPlan, reactAgent, reviewedReply } from "../libs/engine/src/importers/fixtures/seeds.ts";
import { api, isolatedConfig, removeIsolated, waitFor } from "./helpers.ts";
import type { Api } from "./helpers.ts";

const { config } = isolatedConfig();
let baton: BatonHandle;
let a: Api;

/** The seeds' own tools, served by a stand-in worker that answers with its arguments. */
const seedTools = ["Bash", "Grep", "assess_quality_batch", "rank_images", "select_top_images", "clip_tag_images", "detect_landmarks", "group_by_location", "select_best_from_group", "emails.send"]
  .map((name) => defineTool({ name, description: `seed tool ${name}`, input: z.looseObject({}), handler: async (args) => Promise.resolve(args) }));

const doc = readFileSync(new URL("../docs/importers.md", import.meta.url), "utf8");
const docExamples = [...doc.matchAll(/<<'EOF'[^\n]*\n([\s\S]*?)\nEOF\n/g)].map((m) => JSON.parse(m[1]!) as { format: ImportFormat; source: unknown; name: string });

const savedEnv = { aliases: process.env.BATON_LLM_ALIASES, key: process.env.BATON_OPENAI_API_KEY, model: process.env.BATON_LLM_DEFAULT_MODEL };

beforeAll(async () => {
  // Seed 004's agents name the model alias "default", and its human-in-the-loop draft names no
  // model (the installation's default model): an installation that runs them configures both.
  process.env.BATON_LLM_ALIASES = JSON.stringify({ default: "openai:gpt-4o-mini" });
  process.env.BATON_LLM_DEFAULT_MODEL = "default";
  process.env.BATON_OPENAI_API_KEY = "sk-test";
  baton = await startBaton({ config, logger: createLogger("import-int", "warn"), tools: seedTools });
  a = api(baton.gatewayPort!, config.apiKey!);
}, 60_000);

afterAll(async () => {
  await baton?.stop();
  await removeIsolated(config);
  for (const [name, value] of [["BATON_LLM_ALIASES", savedEnv.aliases], ["BATON_OPENAI_API_KEY", savedEnv.key], ["BATON_LLM_DEFAULT_MODEL", savedEnv.model]] as const) {
    if (value === undefined) delete process.env[name];
    else process.env[name] = value;
  }
});

interface Imported {
  id: number;
  definition: Record<string, unknown>;
  warnings: string[];
}
interface Problem {
  code: string;
  errors: { path: string; code: string; message: string }[];
}

async function finished(id: number): Promise<{ status: string; output: unknown; error: string | null }> {
  return waitFor(`execution ${id} to finish`, async () => {
    const r = await a.call<{ status: string; output: unknown; error: string | null }>("GET", `/api/agent-workflow-executions/${id}`);
    return ["completed", "failed", "cancelled"].includes(r.body.status) ? r.body : undefined;
  }, 20_000);
}

async function workflowNames(): Promise<string[]> {
  const r = await a.call<{ items: { name: string }[] }>("GET", "/api/agent-workflows?limit=200");
  return r.body.items.map((w) => w.name);
}

describe("import of the seed and docs examples", () => {
  const cases: [string, ImportFormat, unknown][] = [
    ["seed 001 example 1", "plan", example1],
    ["seed 001 example 2", "plan", example2],
    ["seed 001 mock LLM plan", "plan", mockPlan],
    ["seed 000 stored steps", "toolSequence", { name: "code review", steps: codeReviewSteps }],
    ["seed 000 bare array of steps", "toolSequence", codeReviewSteps],
    ["seed 000 procedural-memory record", "toolSequence", codeReviewRecord],
    ["seed 004 ReAct flow", "stateMachine", reactAgent],
    ["seed 004 human-in-the-loop flow", "stateMachine", reviewedReply],
    ...docExamples.map((b) => [`docs ${b.format} example`, b.format, b.source] as [string, ImportFormat, unknown]),
  ];

  it.each(cases)("%s imports as the importer converts it", async (name, format, source) => {
    const res = await a.call<Imported>("POST", "/api/agent-workflows/import", { format, name, source });
    expect([res.status, res.status === 201 ? "" : JSON.stringify(res.body)]).toEqual([201, ""]);
    const direct = importWorkflow(format, source);
    expect(direct.ok).toBe(true);
    if (!direct.ok) return;
    expect(res.body.definition).toEqual(direct.definition);
    expect(res.body.warnings).toEqual(direct.warnings);
    const stored = await a.call<{ definition: unknown }>("GET", `/api/agent-workflows/${res.body.id}`);
    expect(stored.body.definition).toEqual(direct.definition);
  });

  it("runs the docs plan example to the report docs/importers.md shows", async () => {
    const plan = docExamples[0]!;
    const wf = await a.call<Imported>("POST", "/api/agent-workflows/import", { format: plan.format, name: "docs plan run", source: plan.source });
    expect(wf.status).toBe(201);
    const ex = await a.call<{ id: number }>("POST", `/api/agent-workflows/${wf.body.id}/execute`, { input: { employee: "Ana", items: [{ amount: 40 }, { amount: 2.5 }] } });
    expect(ex.status).toBe(202);
    const done = await finished(ex.body.id);
    expect([done.status, done.error]).toEqual(["completed", null]);
    expect(done.output).toEqual({ report: { text: "Ana spent 42.5 over 2 items" } });
  });
});

describe("$NAME text that is not a step", () => {
  it("is accepted and reaches the tool verbatim", async () => {
    const source = { steps: [{ name: "s", tool_name: "echo", params: { dir: "$HOME", price: "$5", from: "$USER/notes" }, dependencies: [] }] };
    const res = await a.call<Imported>("POST", "/api/agent-workflows/import", { format: "plan", name: "home", source });
    expect([res.status, res.body.warnings]).toEqual([201, []]);
    const ex = await a.call<{ id: number }>("POST", `/api/agent-workflows/${res.body.id}/execute`, { input: {} });
    expect(ex.status).toBe(202);
    const done = await finished(ex.body.id);
    expect(done.status).toBe("completed");
    expect(JSON.stringify(done.output)).toContain('"dir":"$HOME"');
    expect(JSON.stringify(done.output)).toContain('"price":"$5"');
    expect(JSON.stringify(done.output)).toContain('"from":"$USER/notes"');
  });
});

describe("refused imports", () => {
  it("a source the importer cannot use is 400 with paths into body.source; nothing is stored", async () => {
    const res = await a.call<Problem>("POST", "/api/agent-workflows/import", {
      format: "plan",
      name: "refused source",
      source: { steps: [{ name: "a", tool_name: "echo", params: {}, dependencies: ["later"] }] },
    });
    expect(res.status).toBe(400);
    expect(res.headers.get("content-type")).toContain("application/problem+json");
    expect(res.body.code).toBe("BATON_GATEWAY_IMPORT_INVALID");
    expect(res.body.errors.length).toBeGreaterThan(0);
    for (const e of res.body.errors) expect(e.path.startsWith("body.source")).toBe(true);
    expect(await workflowNames()).not.toContain("refused source");
  });

  it("an imported definition naming a tool no worker serves is 400 at the step's tool_name; nothing is stored", async () => {
    const res = await a.call<Problem>("POST", "/api/agent-workflows/import", {
      format: "plan",
      name: "refused tool",
      source: { steps: [{ name: "a", tool_name: "no.such.tool", params: { dir: "$HOME" }, dependencies: [] }] },
    });
    expect(res.status).toBe(400);
    expect(res.body.code).toBe("BATON_GATEWAY_IMPORT_INVALID");
    expect(res.body.errors.map((e) => `${e.code}@${e.path}`)).toEqual(["unknown_tool@body.source.steps[0].tool_name"]);
    expect(await workflowNames()).not.toContain("refused tool");
  });
});
