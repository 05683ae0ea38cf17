/**
 * Rules checked: the docs/importers.md examples, imported and validated, really run on the
 * engine's step function to the results the document implies — the plan's two roots are
 * called together, the tool sequence's computed template reaches `text.template`, and the
 * state machine's guarded self-loop runs three times before leaving for the final state.
 * Imported state machines run with the source's limits: maxToolIterations rounds, a whileLoop's
 * iterations whatever the retries inside its body (whose bound counts per pass), a cycle around
 * a loop as often as its own bound allows; and with the source's agentConfig.
 * Tools answer in-process with the builtin tools' behaviour.
 */
import { describe, expect, it } from "@jest/globals";
import { readFileSync } from "node:fs";
import type { JsonObject, JsonValue } from "../json.ts";
import type { Command, ExecutionState } from "../state.ts";
import { step } from "../step.ts";
import { validateWorkflow } from "../validate.ts";
import type { ImportFormat } from "./index.ts";
import { importWorkflow } from "./index.ts";

function render(template: string, values: JsonObject): string {
  return template.replace(/\{\{\s*([A-Za-z0-9_.-]+)\s*\}\}/g, (_, name: string) => {
    let cur: JsonValue | undefined = values;
    for (const part of name.split(".")) cur = cur && typeof cur === "object" && !Array.isArray(cur) ? cur[part] : undefined;
    return cur === undefined || cur === null ? "" : typeof cur === "object" ? JSON.stringify(cur) : String(cur);
  });
}

const tools: Record<string, (args: JsonObject) => JsonValue> = {
  "math.sum": (a) => {
    const values = a.values as JsonValue[];
    const field = a.field as string | undefined;
    const sum = values.reduce<number>((acc, v) => acc + (field !== undefined ? ((v as JsonObject)[field] as number) : (v as number)), 0);
    return { sum, count: values.length };
  },
  echo: (a) => a,
  "text.template": (a) => ({ text: render(a.template as string, (a.values ?? {}) as JsonObject) }),
};

/** Runs to the end; returns the final state and the tool calls, grouped by the step that asked for them. */
async function run(format: ImportFormat, source: unknown, input: JsonObject, more: Record<string, (args: JsonObject) => JsonValue> = {}): Promise<{ state: ExecutionState; batches: string[][] }> {
  const r = importWorkflow(format, source);
  if (!r.ok) throw new Error(JSON.stringify(r.errors));
  const v = validateWorkflow(r.definition);
  if (!v.ok) throw new Error(JSON.stringify(v.errors));
  const queue: Command[] = [{ kind: "start", input }];
  const batches: string[][] = [];
  let state: ExecutionState | null = null;
  let now = Date.UTC(2026, 0, 1);
  for (let guard = 0; queue.length > 0 && guard < 5000; guard++) {
    const res = await step({ definition: v.workflow, state, command: queue.shift()!, now: new Date(now++).toISOString(), identity: { executionId: 1, tenantId: "t_1", workflowId: 1, workflowVersion: 1 } });
    state = res.state;
    if (res.more) queue.push({ kind: "continue" });
    const batch: string[] = [];
    for (const e of res.effects) {
      if (e.kind !== "callTool") continue;
      batch.push(e.nodeId);
      queue.push({ kind: "toolResult", nodeId: e.nodeId, callId: e.callId, ok: true, output: (more[e.tool] ?? tools[e.tool]!)(e.args), durationMs: 1 });
    }
    if (batch.length > 0) batches.push(batch);
  }
  return { state: state!, batches };
}

const doc = readFileSync(new URL("../../../../docs/importers.md", import.meta.url), "utf8");
const [plan, sequence, machine] = [...doc.matchAll(/<<'EOF'[^\n]*\n([\s\S]*?)\nEOF\n/g)].map((m) => JSON.parse(m[1]!) as { format: ImportFormat; source: unknown });

describe("imported docs examples run on the engine", () => {
  it("plan: independent roots are called together, the report waits for both", async () => {
    const { state, batches } = await run(plan!.format, plan!.source, { employee: "Ana", items: [{ amount: 40 }, { amount: 2.5 }] });
    expect(state.status).toBe("completed");
    expect(batches).toEqual([["total", "who"], ["report"]]);
    expect(state.output).toEqual({ report: { text: "Ana spent 42.5 over 2 items" } });
  });

  it("toolSequence: the computed template reaches the tool, escaped placeholders filled by it", async () => {
    const { state, batches } = await run(sequence!.format, sequence!.source, { amounts: [3, 4], employee: "Ana" });
    expect(state.status).toBe("completed");
    expect(batches).toEqual([["step1"], ["step2"]]);
    expect(state.output).toEqual({ text: "Ana: 2 items, total 7" });
  });

  it("stateMachine: the guarded self-loop repeats until the guard fails, then the final state runs", async () => {
    const { state, batches } = await run(machine!.format, machine!.source, { step: 1 });
    expect(state.status).toBe("completed");
    expect(batches).toEqual([["add"], ["add"], ["add"], ["done"]]);
    expect(state.output).toEqual({ text: "counted to 3" });
  });

  it("stateMachine: a guarded transition and a fallback to the same state reach it whichever is taken", async () => {
    // Two edges a → b: the guarded one first. Each is decided on its own (they used to share one state key).
    for (const [x, guardTaken] of [[2, false], [1, true]] as const) {
      const { state } = await run("stateMachine", {
        initial: "a",
        states: {
          a: { invoke: { type: "setVariable", config: { values: { x } } }, on: { NEXT: [{ target: "b", guard: { left: "$.a.x", op: "eq", right: 1 } }, { target: "b" }] } },
          b: { type: "final", invoke: { type: "transform", config: { expression: "'reached b'" } } },
        },
      }, {});
      expect([guardTaken, state.status, state.nodes.b?.status, state.output]).toEqual([guardTaken, "completed", "completed", "reached b"]);
    }
  });
});

describe("imported state machines run with the source's limits and settings", () => {
  it("maxToolIterations: 3 allows 3 tool rounds of an LLM ⇄ tools cycle, then the answer", async () => {
    let n = 0;
    const { state, batches } = await run("stateMachine", {
      initial: "llm",
      maxToolIterations: 3,
      states: {
        llm: { invoke: { type: "fake.llm" }, transitions: [{ target: "tools", guard: "$count($output.toolCalls) > 0" }, { target: "done" }] },
        tools: { invoke: { type: "fake.exec" }, always: "llm" },
        done: { type: "final" },
      },
    }, {}, { "fake.llm": () => (++n <= 3 ? { toolCalls: [1] } : { toolCalls: [] }), "fake.exec": () => ({}) });
    expect([state.status, state.error?.code, batches.flat().filter((b) => b === "tools").length]).toEqual(["completed", undefined, 3]);
  });

  it("a whileLoop runs all its iterations although a body state has a retry transition (a cycle of its own)", async () => {
    let n = 0;
    const { state, batches } = await run("stateMachine", {
      initial: "init",
      states: {
        init: { invoke: { type: "setVariable", config: { values: { "$.c": { n: 0 } } } }, always: "loop" },
        loop: { invoke: { type: "whileLoop", config: { condition: "c.n < 30", maxIterations: 100 } }, on: { BODY: "work", EXIT: "done" } },
        work: { invoke: { type: "inc", output: "$.c" }, transitions: [{ target: "work", guard: "false" }, { target: "loop" }] },
        done: { type: "final" },
      },
    }, {}, { inc: () => ({ n: ++n }) });
    expect([state.status, state.error?.code, batches.flat().length]).toEqual(["completed", undefined, 30]);
  });

  it("retries taken in every pass of a whileLoop count per pass: the loop runs all its iterations, and a pass that retries too often fails", async () => {
    // Each pass: work runs, retries `tries` times, then goes back to the loop; 30 passes, 60 retries in all (the bound is 25).
    const source = {
      initial: "init",
      states: {
        init: { invoke: { type: "setVariable", config: { values: { "$.c": { n: 0, t: 0 } } } }, always: "loop" },
        loop: { invoke: { type: "whileLoop", config: { condition: "c.n < 30", maxIterations: 100 } }, on: { BODY: "work", EXIT: "done" } },
        work: { invoke: { type: "work", input: { n: "$.c.n", t: "$.c.t" }, output: "$.c" }, transitions: [{ target: "work", guard: { left: "$.c.t", op: "gt", right: 0 } }, { target: "loop" }] },
        done: { type: "final" },
      },
    };
    // A pass's first visit sets its retries to go; each retry counts one down; the last one moves on to the next pass.
    const work = (tries: (pass: number) => number) => (a: JsonObject): JsonValue => {
      const n = a.n as number;
      const t = a.t as number;
      return t > 1 ? { n, t: t - 1 } : t === 1 ? { n: n + 1, t: 0 } : tries(n) > 0 ? { n, t: tries(n) } : { n: n + 1, t: 0 };
    };
    const two = await run("stateMachine", source, {}, { work: work(() => 2) });
    expect([two.state.status, two.state.error?.code, two.batches.flat().length]).toEqual(["completed", undefined, 90]);
    // 25 visits a pass at most: a pass that would retry 25 times (26 visits) fails.
    const many = await run("stateMachine", source, {}, { work: work((n) => (n === 3 ? 25 : 1)) });
    expect([many.state.status, many.state.error?.code, many.state.error?.nodeId]).toEqual(["failed", "BATON_LOOP_LIMIT", "work"]);
  });

  it("a cycle around a whileLoop goes round as often as its own bound allows, whatever the loop's iterations", async () => {
    let rounds = 0;
    const { state } = await run("stateMachine", {
      initial: "round",
      maxVisits: 4,
      states: {
        round: { invoke: { type: "nextRound", output: "$.r" }, always: "reset" },
        reset: { invoke: { type: "setVariable", config: { values: { "$.c": { n: 0 } } } }, always: "loop" },
        loop: { invoke: { type: "whileLoop", config: { condition: "c.n < 10", maxIterations: 100 } }, on: { BODY: "work", EXIT: "next" } },
        work: { invoke: { type: "inc", input: { n: "$.c.n" }, output: "$.c" }, always: "loop" },
        next: { transitions: [{ target: "round", guard: "r.k < 4" }, { target: "done" }] },
        done: { type: "final" },
      },
    }, {}, { inc: (a) => ({ n: (a.n as number) + 1 }), nextRound: () => ({ k: ++rounds }) });
    expect([state.status, state.error?.code, rounds]).toEqual(["completed", undefined, 4]);
  });

  it("an LLM state without a model of its own uses the source's agentConfig", async () => {
    const { state } = await run("stateMachine", {
      definition: {
        initial: "ask",
        states: { ask: { invoke: { type: "agent.llm", config: { prompt: "hi" } }, always: "done" }, done: { type: "final" } },
      },
      agentConfig: { model: "openai:gpt-4o-mini" },
    }, {}, { "llm.chat": (a) => ({ text: `model ${a.model as string}` }) });
    expect([state.status, state.error?.code, (state.context.ask as JsonObject | undefined)?.text]).toEqual(["completed", undefined, "model openai:gpt-4o-mini"]);
  });
});
