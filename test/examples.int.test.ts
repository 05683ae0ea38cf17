/**
 * The example workflows of examples/workflows/ through the real services (all in one process),
 * as its README runs them. Rules checked:
 * - every `*.workflow.json` is created as it is (POST /api/agent-workflows, 201, no warnings);
 * - each one with an `*.input.json` is executed with that body and ends as its `*.expected.json`
 *   says: the status, the output and the error, each whole;
 * - every example file belongs to a workflow, and every workflow is run or named by a run's
 *   workflow (a child), so nothing in the folder goes untested;
 * - examples/worker (docs/tools.md): worker.ts, started as its own process as the docs say
 *   (BATON_NATS_URL, BATON_BUS_PREFIX), registers its two tools (GET /api/tools, one worker
 *   each); its workflow.json with input.json completes with the invoice's total and a notice;
 *   SIGTERM drains it and it exits 0;
 * - examples/subscriber (docs/events.md): timeline.ts, started as its own process, prints a run's
 *   timeline from its events alone, in order, and stops on SIGTERM.
 */
import { spawn } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "@jest/globals";
import { waitFor } from "./helpers.ts";
import { createDefinition, getExecution, startExecution, suiteInProcess, waitForExecution } from "./workflows.ts";

const dir = new URL("../examples/workflows/", import.meta.url);
const files = readdirSync(dir).filter((f) => f.endsWith(".json")).sort();
const read = <T>(file: string): T => JSON.parse(readFileSync(new URL(file, dir), "utf8")) as T;
const names = [...new Set(files.map((f) => f.replace(/\.(workflow|input|expected)\.json$/, "")))];

interface Expected {
  status: string;
  output?: unknown;
  /** The execution row's error: `CODE: message`. */
  error?: string;
}

const { a, config } = await suiteInProcess("examples-int");

const root = join(import.meta.dirname, "..");

/** Starts an example script as its own process on this suite's NATS and prefix, as the docs say to run it. */
function startExample(script: string): { output: () => string; exited: Promise<number | null>; stop: () => void } {
  const child = spawn(process.execPath, [join(root, script)], {
    cwd: root,
    env: { ...process.env, BATON_NATS_URL: config.natsUrl, BATON_BUS_PREFIX: config.prefix },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout.on("data", (d: Buffer) => (output += d.toString("utf8")));
  child.stderr.on("data", (d: Buffer) => (output += d.toString("utf8")));
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
  return { output: () => output, exited, stop: () => child.kill("SIGTERM") };
}

describe("examples/workflows", () => {
  it("holds a workflow for every example file, and an expected end for every input", () => {
    expect(files.filter((f) => !/\.(workflow|input|expected)\.json$/.test(f))).toEqual([]);
    for (const name of names) {
      expect({ name, workflow: files.includes(`${name}.workflow.json`) }).toEqual({ name, workflow: true });
      expect({ name, expected: files.includes(`${name}.expected.json`) }).toEqual({ name, expected: files.includes(`${name}.input.json`) });
    }
    // A workflow without an input is a child of one that has one.
    const run = names.filter((n) => files.includes(`${n}.input.json`)).map((n) => JSON.stringify(read(`${n}.workflow.json`)));
    for (const child of names.filter((n) => !files.includes(`${n}.input.json`))) {
      const slug = read<{ slug: string }>(`${child}.workflow.json`).slug;
      expect({ child, calledBy: run.some((w) => w.includes(`"slug":"${slug}"`)) }).toEqual({ child, calledBy: true });
    }
  });

  const ids = new Map<string, number>();
  it("creates every workflow as it is, without warnings", async () => {
    for (const name of names) {
      const res = await a.call<{ id: number; warnings?: unknown }>("POST", "/api/agent-workflows", read(`${name}.workflow.json`));
      expect({ name, status: res.status, warnings: res.body.warnings }).toEqual({ name, status: 201, warnings: undefined });
      ids.set(name, res.body.id);
    }
  });

  it.each(names.filter((n) => files.includes(`${n}.input.json`)))("%s runs to the end its expected file says", async (name) => {
    const { input } = read<{ input: Record<string, unknown> }>(`${name}.input.json`);
    const expected = read<Expected>(`${name}.expected.json`);
    const id = await startExecution(a, ids.get(name)!, input);
    await waitForExecution(a, id, ["completed", "failed", "cancelled"], 30_000);
    const row = await getExecution(a, id);
    expect(row.status).toBe(expected.status);
    if ("output" in expected) expect(row.output).toEqual(expected.output);
    expect(row.error).toEqual(expected.error ?? null);
  });
});

describe("examples/worker", () => {
  it("runs as its own process, serves its tools to a workflow, and drains on SIGTERM", async () => {
    const worker = startExample("examples/worker/worker.ts");
    try {
      const tools = await waitFor("the example worker's tools in the registry", async () => {
        const res = await a.call<{ items: { name: string; workers: number }[] }>("GET", "/api/tools");
        const mine = res.body.items.filter((t) => t.name.startsWith("billing."));
        return mine.length === 2 ? mine : undefined;
      }, 30_000);
      expect(tools.map((t) => [t.name, t.workers])).toEqual([["billing.invoiceTotal", 1], ["billing.sendNotice", 1]]);
      const created = await a.call<{ id: number }>("POST", "/api/agent-workflows", JSON.parse(readFileSync(join(root, "examples/worker/workflow.json"), "utf8")));
      expect(created.status).toBe(201);
      const { input } = JSON.parse(readFileSync(join(root, "examples/worker/input.json"), "utf8")) as { input: Record<string, unknown> };
      const id = await startExecution(a, created.body.id, input);
      const row = await waitForExecution(a, id, ["completed", "failed", "cancelled"], 30_000);
      // 2 × 10 + 5.5 = 25.5 net, 20% tax.
      expect({ status: row.status, output: row.output, error: row.error }).toEqual({ status: "completed", output: { gross: 30.6, notice: `notice-${id}-acme-30.6` }, error: null });
    } finally {
      worker.stop();
    }
    expect({ code: await worker.exited, output: worker.output() }).toEqual({ code: 0, output: expect.stringContaining("serving billing.invoiceTotal, billing.sendNotice") as unknown });
  });
});

describe("examples/subscriber", () => {
  it("prints a run's timeline from its events alone", async () => {
    const sub = startExample("examples/subscriber/timeline.ts");
    let id = 0;
    let wf = 0;
    try {
      await waitFor("the subscriber to follow the stream", async () => (sub.output().includes("following ") ? true : undefined), 15_000).catch((err: unknown) => {
        throw new Error(`${String(err)}; it printed:\n${sub.output()}`);
      });
      wf = await createDefinition(a, "timeline", {
        start: "check",
        nodes: [
          { id: "check", type: "condition", config: { left: "$.input.n", op: "gt", right: 1 } },
          { id: "big", type: "tool", config: { tool: "math.sum" }, input: { values: ["$.input.n", 1] } },
          { id: "small", type: "setVariable", config: { values: { note: "small" } } },
        ],
        edges: [{ from: "check", to: "big", when: "true" }, { from: "check", to: "small", when: "false" }],
      });
      id = await startExecution(a, wf, { n: 5 });
      await waitFor("the run's end in the timeline", async () => (sub.output().includes(`execution ${id} completed`) ? true : undefined), 30_000);
    } finally {
      sub.stop();
    }
    expect(await sub.exited).toBe(0);
    const mine = sub.output().split("\n").filter((l) => l.startsWith(`execution ${id} `)).map((l) => l.replace(/in \d+ ms$/, "in … ms"));
    expect(mine).toEqual([
      `execution ${id} started (workflow ${wf} v1)`,
      `execution ${id} node check#1 started (condition)`,
      `execution ${id} node check#1 completed in … ms`,
      `execution ${id} node big#1 started (tool)`,
      `execution ${id} node big#1 completed in … ms`,
      `execution ${id} completed`,
    ]);
  });
});
