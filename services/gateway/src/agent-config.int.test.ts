/**
 * Rules checked (gateway on a real Postgres store, recording bus, the engine's validator with a
 * model lookup where only the `openai` provider is configured), for a workflow's model refs:
 * - on create, a model ref with no configured provider is a 400 BATON_GATEWAY_WORKFLOW_INVALID,
 *   `model_not_configured` at its path, whether it is in the definition's agentConfig
 *   (`body.definition.agentConfig.model`) or the workflow's own (`body.agentConfig.model`,
 *   `body.agentConfig.levels.<level>`); the workflow's own is checked as the definition's is:
 *   always, also when the definition's agentConfig overrides it; every problem in one answer;
 *   the engine's other agentConfig checks come with it (a bad `{{$.path}}` in `system`);
 * - on update, a new agentConfig is checked the same way, with a new definition or alone; an
 *   update is checked as the workflow will be after it, as execute will check it: a new
 *   definition with the stored agentConfig it keeps (`agentConfig.model`), a new agentConfig
 *   with the stored definition (`definition.…`), each such message saying what to send to
 *   replace it; an update of other fields only is not checked; on restore, the version's agentConfig (`version.agentConfig.model`); on
 *   execute, the stored one (`agentConfig.model`: a provider may have gone since);
 * - nothing is written when refused: no workflow, no version, no execution, no event, no
 *   start command; configured refs pass;
 * - a SynthDev agent that neither the definition's agentConfig nor the workflow's own (merged as
 *   a run merges them) gives a model is `missing_model` at the agent
 *   (`body.definition.synthdev.workflow.agents[1]`), on create, on an update that leaves it
 *   without one (the kept definition's agent, `definition.…`) and on execute, with the other
 *   problems; the workflow's own agentConfig may be what gives it;
 * - checking the workflow's agentConfig does not validate the definition again: create, update,
 *   restore and execute look each tool of the definition up once, and no check is lost (the
 *   definition's agentConfig is checked where the workflow's overrides it, and a stored
 *   definition whose agentConfig is broken hides no problem of the workflow's).
 */
import { afterAll, beforeAll, describe, expect, test } from "@jest/globals";
import { importWorkflow, validateWorkflow, validateWorkflowWithTools } from "@baton/engine";
import type { TestGateway } from "./test-support.ts";
import { bearer, openTestGateway, problemOf } from "./test-support.ts";

let gw: TestGateway;

/** Only the `openai` provider is configured, as by OPENAI_API_KEY alone. */
const checkModel = (ref: string): string | undefined =>
  ref.startsWith("openai:") ? undefined : `model "${ref}": provider "${ref.split(":")[0]}" is not configured (set ANTHROPIC_API_KEY)`;

beforeAll(async () => {
  gw = await openTestGateway();
  gw.setValidator((d) => validateWorkflow(d, { checkModel }));
});
afterAll(async () => {
  await gw.close();
});

type Res = { statusCode: number; headers: Record<string, unknown>; json: () => unknown };


/** `[path, code]` of each problem of a refused write. */
function refused(res: Res): [string, string][] {
  return problemOf(res, 400, "BATON_GATEWAY_WORKFLOW_INVALID").errors!.map((e) => [e.path, e.code]);
}

const definition = (agentConfig?: Record<string, unknown>) => ({
  ...(agentConfig ? { agentConfig } : {}),
  nodes: [{ id: "ask", type: "agent.llm", config: { prompt: "hi" } }],
});

const send = (method: "POST" | "PUT", url: string, payload: Record<string, unknown>) =>
  gw.app.inject({ method, url, headers: bearer(gw.a.operator), payload });

/** What a refused request must leave as it was. */
async function written() {
  const workflows = await gw.store.workflows.list(gw.a.tenantId, { limit: 1000 });
  const versions = await Promise.all(workflows.map(async (w) => (await gw.store.workflows.listVersions(gw.a.tenantId, w.id, { limit: 1000 })).length));
  const executions = (await gw.store.executions.list(gw.a.tenantId, { limit: 1000 })).length;
  return { workflows: workflows.map((w) => [w.id, w.version]), versions, executions, events: gw.bus.published.length, started: gw.bus.started.length };
}

describe("create", () => {
  test("the definition's agentConfig.model with no configured provider is a 400 naming body.definition.agentConfig.model", async () => {
    const before = await written();
    const p = problemOf(await send("POST", "/api/agent-workflows", { name: "Def model", definition: definition({ model: "anthropic:claude-x" }) }), 400, "BATON_GATEWAY_WORKFLOW_INVALID");
    expect(p.errors).toEqual([{ path: "body.definition.agentConfig.model", code: "model_not_configured", message: expect.stringContaining("ANTHROPIC_API_KEY") as unknown }]);
    expect(await written()).toEqual(before);
  });

  test("the workflow's own agentConfig.model and levels are checked as the definition's: 400 naming body.agentConfig", async () => {
    const before = await written();
    const p = problemOf(await send("POST", "/api/agent-workflows", { name: "Own model", definition: definition(), agentConfig: { model: "anthropic:claude-x" } }), 400, "BATON_GATEWAY_WORKFLOW_INVALID");
    expect(p.errors).toEqual([{ path: "body.agentConfig.model", code: "model_not_configured", message: expect.stringContaining("ANTHROPIC_API_KEY") as unknown }]);
    expect(refused(await send("POST", "/api/agent-workflows", { name: "Own levels", definition: definition(), agentConfig: { model: "openai:gpt-4o-mini", levels: { base: "openai:gpt-4o-mini", smart: "anthropic:claude-y" } } }))).toEqual([
      ["body.agentConfig.levels.smart", "model_not_configured"],
    ]);
    expect(await written()).toEqual(before);
  });

  test("always: also when the definition's own agentConfig.model overrides it, and with every problem in one answer", async () => {
    const before = await written();
    expect(refused(await send("POST", "/api/agent-workflows", { name: "Overridden", definition: definition({ model: "openai:gpt-4o" }), agentConfig: { model: "anthropic:claude-x" } }))).toEqual([
      ["body.agentConfig.model", "model_not_configured"],
    ]);
    const both = await send("POST", "/api/agent-workflows", {
      name: "Both",
      definition: { ...definition({ model: "anthropic:claude-x" }), nodes: [{ id: "ask", type: "agent.llm", config: { prompt: "hi", model: "anthropic:claude-z" } }] },
      agentConfig: { model: "anthropic:claude-y", system: "Answer {{$.input.q}}" },
    });
    expect(refused(both).sort()).toEqual([
      ["body.agentConfig.model", "model_not_configured"],
      ["body.definition.agentConfig.model", "model_not_configured"],
      ["body.definition.nodes[0].config.model", "model_not_configured"],
    ]);
    expect(await written()).toEqual(before);
  });

  test("the rest of the engine's agentConfig checks come with it: a bad placeholder in body.agentConfig.system", async () => {
    expect(refused(await send("POST", "/api/agent-workflows", { name: "Bad system", definition: definition(), agentConfig: { model: "openai:gpt-4o", system: "Answer {{$.a..b}}" } }))).toEqual([
      ["body.agentConfig.system", "invalid_path"],
    ]);
  });

  test("an LLM node no agentConfig gives a model is refused at its config.model; the workflow's own agentConfig may give it", async () => {
    const before = await written();
    const p = problemOf(await send("POST", "/api/agent-workflows", { name: "No model", definition: definition() }), 400, "BATON_GATEWAY_WORKFLOW_INVALID");
    expect(p.errors).toEqual([
      { path: "body.definition.nodes[0].config.model", code: "missing_model", message: expect.stringContaining('node "ask" has no model and the installation no default one (BATON_LLM_DEFAULT_MODEL)') as unknown },
    ]);
    expect(await written()).toEqual(before);
    expect((await send("POST", "/api/agent-workflows", { name: "Own default", definition: definition(), agentConfig: { model: "openai:gpt-4o-mini" } })).statusCode).toBe(201);
  });

  test("an installation with a default model (BATON_LLM_DEFAULT_MODEL) takes an LLM node without one", async () => {
    gw.deps.hasDefaultModel = true;
    try {
      expect((await send("POST", "/api/agent-workflows", { name: "Installation default", definition: definition() })).statusCode).toBe(201);
    } finally {
      gw.deps.hasDefaultModel = false;
    }
  });

  test("configured refs pass", async () => {
    const res = await send("POST", "/api/agent-workflows", { name: "Configured", definition: definition({ model: "openai:gpt-4o" }), agentConfig: { model: "openai:gpt-4o-mini", levels: { smart: "openai:o3" } } });
    expect(res.statusCode).toBe(201);
  });
});

describe("update, restore and execute", () => {
  let id: number;
  beforeAll(async () => {
    const res = await send("POST", "/api/agent-workflows", { name: "Later", definition: definition(), agentConfig: { model: "openai:gpt-4o-mini" } });
    expect(res.statusCode).toBe(201);
    id = res.json<{ id: number }>().id;
  });

  test("a new agentConfig that leaves the stored definition's LLM node without a model is refused at the kept definition", async () => {
    const before = await written();
    const p = problemOf(await send("PUT", `/api/agent-workflows/${id}`, { agentConfig: { system: "Be brief" } }), 400, "BATON_GATEWAY_WORKFLOW_INVALID");
    expect(p.errors).toEqual([{ path: "definition.nodes[0].config.model", code: "missing_model", message: expect.stringContaining("send definition to replace it") as unknown }]);
    expect(await written()).toEqual(before);
  });

  test("a new agentConfig is checked alone, or with a new definition", async () => {
    const before = await written();
    expect(refused(await send("PUT", `/api/agent-workflows/${id}`, { agentConfig: { model: "anthropic:claude-x" } }))).toEqual([["body.agentConfig.model", "model_not_configured"]]);
    expect(refused(await send("PUT", `/api/agent-workflows/${id}`, { definition: definition({ model: "anthropic:claude-y" }), agentConfig: { levels: { smart: "anthropic:claude-x" } } })).sort()).toEqual([
      ["body.agentConfig.levels.smart", "model_not_configured"],
      ["body.definition.agentConfig.model", "model_not_configured"],
    ]);
    expect(await written()).toEqual(before);
    const ok = await send("PUT", `/api/agent-workflows/${id}`, { agentConfig: { model: "openai:gpt-4o" } });
    expect(ok.json()).toMatchObject({ version: 2, agentConfig: { model: "openai:gpt-4o" } });
  });

  test("an update is checked as the workflow will be: a new definition with the stored agentConfig it keeps, and the other way round", async () => {
    // Stored before the provider went (the store does not check models).
    const wf = await gw.store.workflows.create(gw.a.tenantId, { name: "Kept agentConfig", definition: definition() as never, agentConfig: { model: "anthropic:claude-x" } });
    const before = await written();
    const p = problemOf(await send("PUT", `/api/agent-workflows/${wf.id}`, { definition: definition() }), 400, "BATON_GATEWAY_WORKFLOW_INVALID");
    expect(p.errors).toEqual([{
      path: "agentConfig.model",
      code: "model_not_configured",
      message: expect.stringMatching(/ANTHROPIC_API_KEY.*\(in the workflow's current agentConfig, which this update keeps: send agentConfig to replace it\)$/) as unknown,
    }]);
    // With the new definition's own problems, in one answer.
    expect(refused(await send("PUT", `/api/agent-workflows/${wf.id}`, { definition: definition({ model: "anthropic:claude-y" }) })).sort()).toEqual([
      ["agentConfig.model", "model_not_configured"],
      ["body.definition.agentConfig.model", "model_not_configured"],
    ]);
    expect(await written()).toEqual(before);
    // Sent together with an agentConfig that replaces it, it is written.
    const ok = await send("PUT", `/api/agent-workflows/${wf.id}`, { definition: definition(), agentConfig: { model: "openai:gpt-4o" } });
    expect(ok.json()).toMatchObject({ version: 2, agentConfig: { model: "openai:gpt-4o" } });

    // A new agentConfig with a stored definition that names a provider gone since.
    const node = await gw.store.workflows.create(gw.a.tenantId, {
      name: "Kept definition",
      definition: { nodes: [{ id: "ask", type: "agent.llm", config: { prompt: "hi", model: "anthropic:claude-z" } }] },
    });
    const unchanged = await written();
    const q = problemOf(await send("PUT", `/api/agent-workflows/${node.id}`, { agentConfig: { model: "openai:gpt-4o" } }), 400, "BATON_GATEWAY_WORKFLOW_INVALID");
    expect(q.errors).toEqual([{
      path: "definition.nodes[0].config.model",
      code: "model_not_configured",
      message: expect.stringMatching(/\(in the workflow's current definition, which this update keeps: send definition to replace it\)$/) as unknown,
    }]);
    expect(refused(await send("PUT", `/api/agent-workflows/${node.id}`, { agentConfig: { model: "anthropic:claude-x" } })).sort()).toEqual([
      ["body.agentConfig.model", "model_not_configured"],
      ["definition.nodes[0].config.model", "model_not_configured"],
    ]);
    expect(await written()).toEqual(unchanged);
  });

  test("an update that came in between is checked with the one that keeps its part: two PUTs, each valid alone, are not both written", async () => {
    // The node's own model makes any agentConfig fine; a later definition leaves the model to the agentConfig.
    const wf = await gw.store.workflows.create(gw.a.tenantId, {
      name: "Raced",
      definition: { nodes: [{ id: "ask", type: "agent.llm", config: { prompt: "hi", model: "openai:gpt-4o" } }] },
      agentConfig: { model: "openai:gpt-4o-mini" },
    });
    // Between the PUT's read of the workflow and its write, another update replaces the
    // definition: valid with the agentConfig stored then, not with the one this PUT sends.
    const get = gw.store.workflows.get;
    let raced = 0;
    gw.store.workflows.get = async (tenantId, id) => {
      const read = await get(tenantId, id);
      if (id === wf.id && raced++ === 0) await gw.store.workflows.update(tenantId, id, { definition: definition() as never });
      return read;
    };
    try {
      const p = problemOf(await send("PUT", `/api/agent-workflows/${wf.id}`, { agentConfig: { system: "Be brief" } }), 400, "BATON_GATEWAY_WORKFLOW_INVALID");
      expect(p.errors).toEqual([{ path: "definition.nodes[0].config.model", code: "missing_model", message: expect.stringContaining("send definition to replace it") as unknown }]);
    } finally {
      gw.store.workflows.get = get;
    }
    // Read twice (checked again after the update in between), and only the update in between written.
    expect(raced).toBe(2);
    expect(await gw.store.workflows.get(gw.a.tenantId, wf.id)).toMatchObject({ version: 2, agentConfig: { model: "openai:gpt-4o-mini" }, definition: definition() });
    // Updates that keep coming in between: after three checks, a retryable 409 and nothing written.
    gw.store.workflows.get = async (tenantId, id) => {
      const read = await get(tenantId, id);
      if (id === wf.id) await gw.store.workflows.update(tenantId, id, { name: `Raced ${read?.version ?? 0}` });
      return read;
    };
    try {
      const q = problemOf(await send("PUT", `/api/agent-workflows/${wf.id}`, { agentConfig: { model: "openai:gpt-4o" } }), 409, "BATON_STORE_WORKFLOW_VERSION_MOVED");
      expect(q.detail).toContain("it was updated meanwhile");
    } finally {
      gw.store.workflows.get = get;
    }
    expect(await gw.store.workflows.get(gw.a.tenantId, wf.id)).toMatchObject({ version: 5, agentConfig: { model: "openai:gpt-4o-mini" } });
  });

  test("an update of other fields only is not checked: a workflow that cannot run may still be renamed or disabled", async () => {
    const wf = await gw.store.workflows.create(gw.a.tenantId, { name: "Still broken", definition: definition() as never, agentConfig: { model: "anthropic:claude-x" } });
    const res = await send("PUT", `/api/agent-workflows/${wf.id}`, { name: "Still broken, disabled", enabled: false });
    expect(res.json()).toMatchObject({ version: 2, enabled: false, agentConfig: { model: "anthropic:claude-x" } });
  });

  test("a version whose agentConfig names a provider not configured now is not restored (version.agentConfig.model)", async () => {
    // Stored before the provider went (the store does not check models).
    const wf = await gw.store.workflows.create(gw.a.tenantId, { name: "Old provider", definition: definition() as never, agentConfig: { model: "anthropic:claude-x" } });
    await gw.store.workflows.update(gw.a.tenantId, wf.id, { agentConfig: { model: "openai:gpt-4o" } });
    const [v1] = await gw.store.workflows.listVersions(gw.a.tenantId, wf.id, { limit: 1 });
    const before = await written();
    expect(refused(await send("POST", `/api/agent-workflows/${wf.id}/versions/${v1!.id}/restore`, {}))).toEqual([["version.agentConfig.model", "model_not_configured"]]);
    expect(await written()).toEqual(before);
  });

  test("a stored agentConfig naming a provider not configured now is not run (agentConfig.model)", async () => {
    const wf = await gw.store.workflows.create(gw.a.tenantId, { name: "Gone provider", definition: definition() as never, agentConfig: { model: "openai:gpt-4o-mini", levels: { smart: "anthropic:claude-x" } } });
    const before = await written();
    expect(refused(await send("POST", `/api/agent-workflows/${wf.id}/execute`, {}))).toEqual([["agentConfig.levels.smart", "model_not_configured"]]);
    expect(await written()).toEqual(before);
    // The one configured earlier in this file runs.
    expect((await send("POST", `/api/agent-workflows/${id}/execute`, {})).statusCode).toBe(202);
  });
});

describe("SynthDev agents", () => {
  /** A SynthDev definition whose coder's role has level "smart" and whose reviewer's role has none. */
  const synthdev = (agentConfig?: Record<string, unknown>): Record<string, unknown> => {
    const r = importWorkflow("synthdev", {
      workflow: {
        workflow_name: "pair",
        contexts: [{ name: "c" }],
        agents: [{ agent_role: "coder", context: "c" }, { agent_role: "reviewer", context: "c" }],
        states: [{ name: "start", agent: "coder", next_state: "review" }, { name: "review", agent: "reviewer", next_state: "stop" }, { name: "stop" }],
      },
      roles: { coder: { level: "smart" }, reviewer: {} },
      ...(agentConfig ? { agentConfig } : {}),
    });
    if (!r.ok) throw new Error(JSON.stringify(r.errors));
    return r.definition;
  };

  test("an agent no agentConfig gives a model is refused at the agent on create, with the other problems; the workflow's own may give it", async () => {
    const before = await written();
    const p = problemOf(await send("POST", "/api/agent-workflows", { name: "No model", definition: synthdev({ levels: { smart: "openai:gpt-4o" } }), agentConfig: { levels: { smart: "anthropic:claude-x" } } }), 400, "BATON_GATEWAY_WORKFLOW_INVALID");
    expect(p.errors).toEqual([
      {
        path: "body.definition.synthdev.workflow.agents[1]",
        code: "missing_model",
        message: 'agent "reviewer" has no model and the installation no default one (BATON_LLM_DEFAULT_MODEL): its role has no level and agentConfig has no model; set agentConfig.model (or give the role a level that agentConfig.levels maps)',
      },
      { path: "body.agentConfig.levels.smart", code: "model_not_configured", message: expect.stringContaining("ANTHROPIC_API_KEY") as unknown },
    ]);
    expect(refused(await send("POST", "/api/agent-workflows", { name: "No model at all", definition: synthdev() }))).toEqual([
      ["body.definition.synthdev.workflow.agents[0]", "missing_model"],
      ["body.definition.synthdev.workflow.agents[1]", "missing_model"],
    ]);
    expect(await written()).toEqual(before);
    // The workflow's own agentConfig gives the model the definition's does not.
    expect((await send("POST", "/api/agent-workflows", { name: "Own model", definition: synthdev({ levels: { smart: "openai:gpt-4o" } }), agentConfig: { model: "openai:gpt-4o-mini" } })).statusCode).toBe(201);
  });

  test("an update that leaves an agent without a model is refused, and a stored workflow whose agent has none is not run", async () => {
    const created = await send("POST", "/api/agent-workflows", { name: "Own model, replaced", definition: synthdev(), agentConfig: { model: "openai:gpt-4o-mini" } });
    expect(created.statusCode).toBe(201);
    const { id } = created.json<{ id: number }>();
    // Stored without any check (the store checks nothing), to be run below.
    const stored = await gw.store.workflows.create(gw.a.tenantId, { name: "Stored without a model", definition: synthdev({ levels: { smart: "openai:gpt-4o" } }) as never });
    const before = await written();
    const p = problemOf(await send("PUT", `/api/agent-workflows/${id}`, { agentConfig: { levels: { smart: "openai:gpt-4o" } } }), 400, "BATON_GATEWAY_WORKFLOW_INVALID");
    expect(p.errors).toEqual([{
      path: "definition.synthdev.workflow.agents[1]",
      code: "missing_model",
      message: expect.stringMatching(/^agent "reviewer" has no model and the installation no default one .*\(in the workflow's current definition, which this update keeps: send definition to replace it\)$/) as unknown,
    }]);
    // Execute refuses the stored one rather than start a run whose LLM call has no model.
    expect(refused(await send("POST", `/api/agent-workflows/${stored.id}/execute`, {}))).toEqual([["definition.synthdev.workflow.agents[1]", "missing_model"]]);
    expect(await written()).toEqual(before);
  });
});

describe("one validation of the definition per request", () => {
  const withTool = {
    nodes: [{ id: "ask", type: "agent.llm", config: { prompt: "hi" } }, { id: "t", type: "tool", config: { tool: "echo" } }],
    edges: [{ from: "ask", to: "t" }],
  };
  const tools = ["echo", "llm.chat"];

  test("create, update, restore and execute look each tool up once, the workflow's agentConfig checked too", async () => {
    let lookups: string[] = [];
    gw.setValidator((d) => validateWorkflowWithTools(d, (name) => {
      lookups.push(name);
      return Promise.resolve(true);
    }, { checkModel }));
    /** The tools the request looked up (an LLM node calls `llm.chat`), sorted. */
    const looked = async <T>(request: Promise<T>): Promise<[T, string[]]> => {
      lookups = [];
      const res = await request;
      return [res, lookups.sort()];
    };
    try {
      const [created, atCreate] = await looked(send("POST", "/api/agent-workflows", { name: "Once", definition: withTool, agentConfig: { model: "openai:gpt-4o-mini" } }));
      expect([created.statusCode, atCreate]).toEqual([201, tools]);
      const wf = created.json<{ id: number }>();
      const [updated, atUpdate] = await looked(send("PUT", `/api/agent-workflows/${wf.id}`, { definition: withTool, agentConfig: { model: "openai:gpt-4o" } }));
      expect([updated.statusCode, atUpdate]).toEqual([200, tools]);
      // Either one alone, checked with the stored other: still each tool once.
      for (const body of [{ definition: withTool }, { agentConfig: { model: "openai:gpt-4o-mini" } }]) {
        const [res, at] = await looked(send("PUT", `/api/agent-workflows/${wf.id}`, body));
        expect([res.statusCode, at]).toEqual([200, tools]);
      }
      const [v1] = await gw.store.workflows.listVersions(gw.a.tenantId, wf.id, { limit: 1 });
      const [restored, atRestore] = await looked(send("POST", `/api/agent-workflows/${wf.id}/versions/${v1!.id}/restore`, {}));
      expect([restored.statusCode, atRestore]).toEqual([200, tools]);
      const [executed, atExecute] = await looked(send("POST", `/api/agent-workflows/${wf.id}/execute`, {}));
      expect([executed.statusCode, atExecute]).toEqual([202, tools]);
      // Refused for the workflow's agentConfig alone: still one lookup, and the problem found.
      const gone = await gw.store.workflows.create(gw.a.tenantId, { name: "Once, gone provider", definition: withTool as never, agentConfig: { model: "anthropic:claude-x" } });
      const [refusedRun, atRefused] = await looked(send("POST", `/api/agent-workflows/${gone.id}/execute`, {}));
      expect([refused(refusedRun), atRefused]).toEqual([[["agentConfig.model", "model_not_configured"]], tools]);
    } finally {
      gw.setValidator((d) => validateWorkflow(d, { checkModel }));
    }
  });

  test("no check is lost: the definition's agentConfig where the workflow's overrides it, and the workflow's beside a broken one", async () => {
    const before = await written();
    expect(refused(await send("POST", "/api/agent-workflows", { name: "Def overridden", definition: definition({ model: "anthropic:claude-x" }), agentConfig: { model: "openai:gpt-4o" } }))).toEqual([
      ["body.definition.agentConfig.model", "model_not_configured"],
    ]);
    expect(await written()).toEqual(before);
    // Stored before this engine refused it: a definition's agentConfig of the wrong shape, and the workflow's naming a provider gone since.
    const wf = await gw.store.workflows.create(gw.a.tenantId, { name: "Broken beside", definition: definition({ temperature: 5 }) as never, agentConfig: { model: "anthropic:claude-x" } });
    expect(refused(await send("POST", `/api/agent-workflows/${wf.id}/execute`, {})).sort()).toEqual([
      ["agentConfig.model", "model_not_configured"],
      ["definition.agentConfig.temperature", "invalid_shape"],
    ]);
  });
});
