/**
 * Rules checked for importWorkflow: each format name dispatches to its importer (same result
 * as calling it directly), SynthDev included (a source that is no object is `invalid_source`),
 * and an unknown format is an `unknown_format` error at `format`.
 */
import { describe, expect, it } from "@jest/globals";
import { IMPORT_FORMATS, importStateMachine, importToolSequence, importWorkflow, importWorkflowPlan } from "./index.ts";
import { importSynthDev } from "../synthdev.ts";

describe("importWorkflow", () => {
  it("dispatches on the format", () => {
    const plan = { steps: [{ name: "a", tool_name: "tool.a", params: {}, dependencies: [] }] };
    const seq = [{ order: 1, toolName: "Bash", parameters: { command: "ls" } }];
    const machine = { initial: "a", states: { a: { invoke: "tool.a", on: { DONE: "b" } }, b: { type: "final" } } };
    expect(importWorkflow("plan", plan)).toEqual(importWorkflowPlan(plan));
    expect(importWorkflow("toolSequence", seq)).toEqual(importToolSequence(seq));
    expect(importWorkflow("stateMachine", machine)).toEqual(importStateMachine(machine));
    const synthdev = {
      workflow: { workflow_name: "w", agents: [{ agent_role: "coder", context: "c" }], contexts: [{ name: "c" }], states: [{ name: "start", agent: "coder", next_state: "stop" }, { name: "stop" }] },
      roles: { coder: { level: "smart" } },
      agentConfig: { levels: { smart: "openai:gpt-4o" } },
    };
    expect(importWorkflow("synthdev", synthdev)).toEqual(importSynthDev(synthdev));
    expect(importWorkflow("synthdev", synthdev)).toMatchObject({ ok: true, definition: { synthdev: { roles: synthdev.roles }, agentConfig: synthdev.agentConfig } });
    // The same source read as another format is judged by that format's rules.
    expect(importWorkflow("plan", seq)).toMatchObject({ ok: false, errors: [{ code: "invalid_source" }] });
    expect(IMPORT_FORMATS).toEqual(["plan", "toolSequence", "stateMachine", "synthdev"]);
  });

  it("refuses a SynthDev source that is not an object of workflow, script, roles and agentConfig", () => {
    for (const source of [[], "workflow", null]) {
      expect(importWorkflow("synthdev", source)).toEqual({
        ok: false, errors: [{ path: "(source)", code: "invalid_source", message: "a SynthDev source is an object { workflow, script?, roles?, agentConfig? }" }],
      });
    }
  });

  it("rejects an unknown format", () => {
    expect(importWorkflow("bpmn" as never, {})).toEqual({
      ok: false,
      errors: [{ path: "format", code: "unknown_format", message: 'unknown import format "bpmn"; one of: plan, toolSequence, stateMachine, synthdev' }],
    });
  });
});
