/**
 * The shell walkthroughs of the docs, run as they are written (bash, curl and node, from the
 * repository root) against the real services in this process. Rules checked:
 * - README.md's quickstart block, then docs/time-travel.md's "Try it" block after it (it goes
 *   on from the quickstart's run): the quickstart run completes with its receipt, and the fork
 *   pauses at the review again, is approved and completes with the edited amount; then the
 *   quickstart's error example prints the problem its comment shows (the workflow's id aside);
 * - examples/workflows/README.md's block: the example it runs prints `completed` and its output.
 * The only changes made to a block: its `BATON_API_KEY` line (which reads the key that
 * `./baton start` saves) and its `B=` line (the gateway's address) are set to this test's
 * gateway. A block that no longer works as a user would paste it fails here.
 */
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { describe, expect, it } from "@jest/globals";
import { suiteInProcess } from "./workflows.ts";

const root = join(import.meta.dirname, "..");
const { a, config } = await suiteInProcess("docs-snippets");

/** The `bash` code blocks of `file` under the heading `heading` (up to the next heading of its level or above). */
function bashBlocks(file: string, heading: string): string[] {
  const lines = readFileSync(join(root, file), "utf8").split("\n");
  const level = heading.split(" ")[0]!.length;
  const start = lines.indexOf(heading);
  if (start < 0) throw new Error(`${file}: no heading "${heading}"`);
  const blocks: string[] = [];
  let block: string[] | undefined;
  let fenced = false;
  for (const line of lines.slice(start + 1)) {
    if (line.startsWith("```")) {
      if (!fenced && line === "```bash") block = [];
      else if (fenced && block) {
        blocks.push(block.join("\n"));
        block = undefined;
      }
      fenced = !fenced;
      continue;
    }
    if (fenced) {
      block?.push(line);
      continue;
    }
    const m = /^(#+) /.exec(line);
    if (m && m[1]!.length <= level) break;
  }
  return blocks;
}

/** A block with the key and the gateway's address set to this test's. */
function forThisGateway(block: string): string {
  const lines = block.split("\n").map((line) => {
    if (/^export BATON_API_KEY=/.test(line)) return `export BATON_API_KEY='${config.apiKey!}'`;
    if (/^B=http:\/\/127\.0\.0\.1:3000$/.test(line)) return `B=${a.base}`;
    return line;
  });
  expect(lines.filter((l) => l.startsWith("export BATON_API_KEY=") || l.startsWith("B="))).toEqual([`export BATON_API_KEY='${config.apiKey!}'`, `B=${a.base}`]);
  return lines.join("\n");
}

/** Runs `script` with bash from the repository root; resolves with its standard output (throws on a non-zero exit). */
function bash(script: string): Promise<string> {
  return new Promise((resolve, reject) => {
    // `node` in the blocks is this Node.
    const child = spawn("bash", ["-c", `${script}\nwait`], { cwd: root, env: { ...process.env, PATH: `${dirname(process.execPath)}:${process.env.PATH ?? ""}` }, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    let err = "";
    child.stdout.on("data", (d: Buffer) => (out += d.toString("utf8")));
    child.stderr.on("data", (d: Buffer) => (err += d.toString("utf8")));
    const timer = setTimeout(() => child.kill("SIGKILL"), 60_000);
    child.on("close", (code) => {
      clearTimeout(timer);
      if (code === 0) resolve(out);
      else reject(new Error(`bash exited with ${code}\n--- stdout\n${out}\n--- stderr\n${err}`));
    });
  });
}

/**
 * The JSON objects in the output, in order: curl prints an answer without a newline, so the
 * next one may follow on the same line (the events' `data:` lines give objects too).
 */
function jsonObjects(out: string): Record<string, unknown>[] {
  const found: Record<string, unknown>[] = [];
  let depth = 0;
  let start = -1;
  let inString = false;
  for (let i = 0; i < out.length; i++) {
    const c = out[i];
    if (inString) {
      if (c === "\\") i++;
      else if (c === '"') inString = false;
    } else if (c === '"' && depth > 0) {
      inString = true;
    } else if (c === "{") {
      if (depth++ === 0) start = i;
    } else if (c === "}" && depth > 0 && --depth === 0) {
      try {
        found.push(JSON.parse(out.slice(start, i + 1)) as Record<string, unknown>);
      } catch {
        // not JSON after all (text with braces)
      }
    }
  }
  return found;
}

describe("the docs' shell walkthroughs", () => {
  it("README's quickstart, then time-travel.md's fork of its run, work as written", async () => {
    const quickstart = bashBlocks("README.md", "## Quickstart");
    expect(quickstart).toHaveLength(3); // ./baton start, the requests, an error
    const fork = bashBlocks("docs/time-travel.md", "## Try it: fork the quickstart run with another amount");
    expect(fork).toHaveLength(1);
    const out = await bash(`${forThisGateway(quickstart[1]!)}\n${fork[0]!}\n${quickstart[2]!}`);
    const printed = jsonObjects(out);
    // The quickstart's run, last read after its approval; then the fork, last read after its own.
    const runs = printed.filter((o) => typeof o.id === "number" && "forkedFromExecutionId" in o);
    const source = runs.filter((o) => o.forkedFromExecutionId === null).at(-1);
    const forked = runs.filter((o) => o.forkedFromExecutionId !== null).at(-1);
    expect(source).toMatchObject({ status: "completed", output: { amount: 455, receipt: "Filed: Ada, 455 (approve)", decision: "approve" } });
    expect(forked).toMatchObject({
      status: "completed", forkedFromExecutionId: source!.id, triggerEvent: "fork",
      output: { amount: 300, receipt: "Filed: Ada, 300 (approve)", decision: "approve" },
    });
    // The fork paused at its review with the edited amount before it was approved.
    const pending = printed.find((o) => Array.isArray(o.items) && (o.items as { executionId?: unknown }[]).some((r) => r.executionId === forked!.id));
    expect(pending).toMatchObject({ items: [{ executionId: forked!.id, status: "pending", payload: { subject: { amount: 300, employee: "Ada" } } }] });
    // And the quickstart's event stream, printed as it ran, ended with the run's end.
    expect(out).toContain("event: execution.completed");
    // The error example printed the problem its comment shows, but for the workflow's id (1 in a fresh install).
    const shown = JSON.parse(quickstart[2]!.split("\n").find((l) => l.startsWith("# {"))!.slice(2)) as Record<string, unknown>;
    const problem = printed.find((o) => o.status === 405);
    expect({ ...problem, detail: String(problem?.detail).replace(/agent-workflows\/\d+\//, "agent-workflows/1/") }).toEqual(shown);
  });

  it("examples/workflows/README.md's block works as written", async () => {
    const blocks = bashBlocks("examples/workflows/README.md", "## Running one");
    expect(blocks).toHaveLength(1);
    const out = await bash(forThisGateway(blocks[0]!));
    const last = out.trim().split("\n").at(-1)!;
    expect(last.startsWith("completed ")).toBe(true);
    expect(JSON.parse(last.slice("completed ".length))).toEqual({ perInvoice: [200, 15, 235], total: 450 });
  });
});
