/**
 * Rules checked: what the importers produce is a definition the engine accepts.
 * - every imported seed example (seeds 000, 001 and 004) and every docs/importers.md example
 *   passes validateWorkflow — including the state machines' bounded cycles (`maxVisits`),
 *   `branching`, `join`, guard `condition`s and `_start` context;
 * - a state machine looping through a whileLoop passes without any maxVisits.
 */
import { describe, expect, it } from "@jest/globals";
import { readFileSync } from "node:fs";
import { validateWorkflow } from "../validate.ts";
import { codeReviewRecord, codeReviewSteps, example1, example2, mockPlan, reactAgent, reviewedReply } from "./fixtures/seeds.ts";
import type { ImportFormat } from "./index.ts";
import { importWorkflow } from "./index.ts";

function imported(format: ImportFormat, source: unknown): Record<string, unknown> {
  const r = importWorkflow(format, source);
  if (!r.ok) throw new Error(`import failed: ${JSON.stringify(r.errors)}`);
  return r.definition;
}

const doc = readFileSync(new URL("../../../../docs/importers.md", import.meta.url), "utf8");
const docExamples = [...doc.matchAll(/<<'EOF'[^\n]*\n([\s\S]*?)\nEOF\n/g)].map((m) => JSON.parse(m[1]!) as { format: ImportFormat; source: unknown });

describe("imported definitions pass validateWorkflow", () => {
  it.each([
    ["seed 001 example 1", "plan", example1],
    ["seed 001 example 2", "plan", example2],
    ["seed 001 mock LLM plan", "plan", mockPlan],
    ["seed 000 stored steps", "toolSequence", codeReviewSteps],
    ["seed 000 procedural-memory record", "toolSequence", codeReviewRecord],
    ["seed 004 ReAct flow", "stateMachine", reactAgent],
    ["seed 004 human-in-the-loop flow", "stateMachine", reviewedReply],
    ...docExamples.map((b) => [`docs ${b.format} example`, b.format, b.source] as const),
  ] as Array<readonly [string, ImportFormat, unknown]>)("%s", (_name, format, source) => {
    const v = validateWorkflow(imported(format, source));
    expect(v.ok ? [] : v.errors).toEqual([]);
  });

  it("accepts a loop through a whileLoop with no maxVisits", () => {
    const def = imported("stateMachine", {
      initial: "loop",
      states: {
        loop: { invoke: { type: "whileLoop", config: { condition: "$.count.n < 3", maxIterations: 5 } }, on: { BODY: "work", EXIT: "done" } },
        work: { invoke: { type: "math.sum", input: { values: [1, 2] } }, always: "loop" },
        done: { type: "final" },
      },
    });
    const v = validateWorkflow(def);
    expect(v.ok ? [] : v.errors).toEqual([]);
  });
});
