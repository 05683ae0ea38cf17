/**
 * SynthDev multi-agent state machines (seed 002), run as they are written.
 *
 * A SynthDev workflow (`workflow_name`, `input`/`output`, `variables`, `contexts`,
 * `agents`, `states`), its `script.js` and a roles file import into one canonical
 * definition: one `synthdev.state` node per state, edges for every transition the
 * state can take (guarded by the state's decision, first match wins, bounded by
 * `maxVisits`), and the SynthDev material under `definition.synthdev`. A state node
 * runs the seed's 4-step pattern as calls to worker tools — pre handler
 * (`sandbox.run`), agent message (`llm.chat`), post handler, transition handler — with
 * the runtime data (`common_data`, contexts, `last_response`) in the execution context
 * at `$.synthdev`, so every step is checkpointed.
 */
import { z } from "zod";
import type { JsonObject, JsonValue } from "./json.ts";
import { isJsonObject } from "./json.ts";
import type { ImportIssue, ImportResult, SourceOrigin } from "./importers/common.ts";
import { RESERVED_IDS, at, failWithNodes, renderPath, within } from "./importers/common.ts";
import type { Condition } from "./model.ts";
import { looksLikePath } from "./path.ts";

export const synthdevMessageSchema = z.object({ role: z.string(), content: z.string() }).passthrough();

export const synthdevContextSchema = z.object({
  name: z.string().min(1),
  starting_messages: z.array(synthdevMessageSchema).default([]),
  /** Messages kept (oldest dropped first, starting messages kept). */
  max_length: z.number().int().min(1).optional(),
});

export const synthdevAgentSchema = z.object({
  agent_role: z.string().min(1),
  context: z.string().min(1),
  /** How this agent sees the context: "assistant" (its own messages are assistant ones) or "user". */
  role: z.enum(["assistant", "user"]).default("assistant"),
});

export const synthdevStateSchema = z.object({
  name: z.string().min(1),
  agent: z.string().optional(),
  pre_handler: z.string().optional(),
  message: z.string().optional(),
  post_handler: z.string().optional(),
  transition_handler: z.string().optional(),
  next_state: z.string().optional(),
  error_handler: z.string().optional(),
  max_retries: z.number().int().min(0).max(100).optional(),
});

export const synthdevWorkflowSchema = z.object({
  workflow_name: z.string().min(1),
  description: z.string().optional(),
  input: z.object({ name: z.string(), type: z.string().optional(), description: z.string().optional(), required: z.boolean().optional(), default: z.unknown().optional() }).passthrough().optional(),
  output: z.object({ name: z.string(), type: z.string().optional(), description: z.string().optional() }).passthrough().optional(),
  variables: z.record(z.string(), z.unknown()).default({}),
  contexts: z.array(synthdevContextSchema).default([]),
  agents: z.array(synthdevAgentSchema).default([]),
  states: z.array(synthdevStateSchema).min(1),
});

/** A role of the roles file: what an agent with that `agent_role` is. */
export const synthdevRoleSchema = z.object({
  systemMessage: z.string().default(""),
  /** Model level, mapped by `agentConfig.levels` (e.g. "base", "smart", "fast"). */
  level: z.string().optional(),
  /** Worker tools the agent may call. */
  includedTools: z.array(z.string()).default([]),
  /** Tools that only shape the answer: their arguments are the agent's structured decision; nothing runs. */
  parsingTools: z.array(z.object({ name: z.string(), description: z.string().default(""), parameters: z.record(z.string(), z.unknown()).default({ type: "object" }) })).default([]),
}).passthrough();

export type SynthdevWorkflow = z.infer<typeof synthdevWorkflowSchema>;
export type SynthdevRole = z.infer<typeof synthdevRoleSchema>;

/** What `definition.synthdev` holds. */
export const synthdevMaterialSchema = z.object({
  workflow: synthdevWorkflowSchema,
  script: z.string().default(""),
  roles: z.record(z.string(), synthdevRoleSchema).default({}),
});
export type SynthdevMaterial = z.infer<typeof synthdevMaterialSchema>;

/** Config of a `synthdev.state` node: the state's name in `definition.synthdev.workflow.states`. */
export const synthdevStateConfigSchema = z.object({ state: z.string().min(1) });

/**
 * The model an agent's LLM calls use: its role's `level` through `agentConfig.levels`, else
 * `agentConfig.model` (`agentConfig` as the run has it: the workflow's own under the
 * definition's). Neither an agent nor its role names a model of its own: undefined means the
 * agent's calls name no model, and `llm.chat` takes the installation's `BATON_LLM_DEFAULT_MODEL`
 * (failing `BATON_LLM_MODEL_NOT_CONFIGURED` where none is set).
 */
export function synthdevAgentModel(role: { level?: string | undefined } | undefined, agentConfig: { model?: unknown; levels?: unknown } | undefined): string | undefined {
  const levels = agentConfig?.levels;
  const byLevel = role?.level !== undefined && isJsonObject(levels) ? levels[role.level] : undefined;
  if (typeof byLevel === "string" && byLevel !== "") return byLevel;
  return typeof agentConfig?.model === "string" && agentConfig.model !== "" ? agentConfig.model : undefined;
}

/** Fills `{input.x}`, `{common_data.x}` and `{variables.x}` placeholders (SynthDev's template syntax). */
export function fillSynthdev(template: string, data: JsonObject): string {
  return template.replace(/\{([A-Za-z_][\w]*(?:\.[\w]+)*)\}/g, (whole, path: string) => {
    let cur: JsonValue | undefined = data;
    for (const part of path.split(".")) cur = isJsonObject(cur) ? cur[part] : undefined;
    if (cur === undefined) return whole;
    return typeof cur === "string" ? cur : JSON.stringify(cur);
  });
}

/** The runtime data of a SynthDev run at `$.synthdev`. */
export interface SynthdevRuntime {
  common_data: JsonObject;
  contexts: Record<string, { messages: JsonObject[]; max_length?: number; starting: number }>;
  last_response: JsonValue;
  /** Per state: failed attempts so far. */
  retries: Record<string, number>;
}

export function initialRuntime(m: SynthdevMaterial): SynthdevRuntime {
  const contexts: SynthdevRuntime["contexts"] = {};
  for (const c of m.workflow.contexts) {
    contexts[c.name] = { messages: c.starting_messages.map((x) => ({ ...x }) as JsonObject), starting: c.starting_messages.length, ...(c.max_length ? { max_length: c.max_length } : {}) };
  }
  return { common_data: { ...(m.workflow.variables as JsonObject) }, contexts, last_response: null, retries: {} };
}

/** Appends to a context, dropping the oldest non-starting messages beyond `max_length`. */
export function addToContext(ctx: SynthdevRuntime["contexts"][string], msg: JsonObject): void {
  ctx.messages.push(msg);
  if (ctx.max_length !== undefined) {
    while (ctx.messages.length > ctx.max_length && ctx.messages.length > ctx.starting) ctx.messages.splice(ctx.starting, 1);
  }
}

/**
 * The messages an agent sends: its context seen from its side. Messages carry the name of
 * the agent that wrote them; an agent's own messages are `assistant`, the other side's are
 * `user` — so two agents sharing a context talk to each other, and an agent with role
 * `user` sees the other side's assistant messages as `user` messages.
 */
export function perspective(messages: JsonObject[], agentRole: string): JsonObject[] {
  const out: JsonObject[] = [];
  for (const m of messages) {
    if (m.role === "system" || typeof m.agent !== "string") {
      out.push({ role: m.role ?? "user", content: m.content ?? "" });
      continue;
    }
    const own = m.agent === agentRole;
    // An agent's tool traffic is its own: other agents see only its answers.
    if (m.role === "tool") {
      if (own) out.push({ role: "tool", toolCallId: m.toolCallId ?? "", name: m.name ?? "", content: m.content ?? null });
      continue;
    }
    if (own) out.push({ role: "assistant", content: m.content ?? "", ...(Array.isArray(m.toolCalls) ? { toolCalls: m.toolCalls } : {}) });
    else if (!(Array.isArray(m.toolCalls) && m.content === "")) out.push({ role: "user", content: m.content ?? "" });
  }
  return out;
}

/** The `this` a handler sees (JSON; the sandbox adds `addMessage` / `getContext`). */
export function handlerThis(rt: SynthdevRuntime, input: JsonValue, extra: JsonObject = {}): JsonObject {
  const contexts: JsonObject = {};
  for (const [name, c] of Object.entries(rt.contexts)) contexts[name] = { name, messages: c.messages, ...(c.max_length ? { max_length: c.max_length } : {}) };
  return { common_data: rt.common_data, input, contexts, last_response: rt.last_response, ...extra };
}

/** Folds what a handler changed back into the runtime. */
export function absorbHandler(rt: SynthdevRuntime, after: JsonValue): void {
  if (!isJsonObject(after)) return;
  if (isJsonObject(after.common_data)) rt.common_data = after.common_data;
  if (isJsonObject(after.contexts)) {
    for (const [name, c] of Object.entries(after.contexts)) {
      const mine = rt.contexts[name];
      if (mine && isJsonObject(c) && Array.isArray(c.messages)) mine.messages = c.messages.filter(isJsonObject);
    }
  }
}

// ---- import -----------------------------------------------------------------

/** What `importSynthDev` takes: the workflow JSON, its `script.js` and the roles file. */
export interface SynthdevSource {
  workflow: unknown;
  script?: string;
  roles?: unknown;
  /** LLM defaults (`model`, `levels`, …) for the agents. */
  agentConfig?: JsonObject;
}

/** Issues and results use the importers' shapes (`ImportIssue`, `ImportResult`). */
export type SynthdevIssue = ImportIssue;
export type SynthdevImportResult = ImportResult;

/** Names of the functions a script declares (`function f`, `export function f`, `const f = (…) =>` / `function`). */
export function scriptFunctions(script: string): Set<string> {
  const out = new Set<string>();
  for (const m of script.matchAll(/(?:^|[\s;])(?:export\s+)?(?:async\s+)?function\s*\*?\s*([A-Za-z_$][\w$]*)\s*\(/g)) out.add(m[1]!);
  for (const m of script.matchAll(/(?:^|[\s;])(?:export\s+)?(?:const|let|var)\s+([A-Za-z_$][\w$]*)\s*=\s*(?:async\s+)?(?:function\b|\([^)]*\)\s*=>|[A-Za-z_$][\w$]*\s*=>)/g)) out.add(m[1]!);
  return out;
}

const MAX_VISITS = 50;

function nodeId(name: string, used: Set<string>): string {
  let id = name.replace(/[^A-Za-z0-9_-]/g, "_").slice(0, 60);
  if (!/^[A-Za-z_]/.test(id)) id = `s_${id}`;
  let candidate = id;
  for (let i = 2; used.has(candidate); i++) candidate = `${id}_${i}`;
  used.add(candidate);
  return candidate;
}

/**
 * The guard of the edge from node `from` to state `target`: the state decided to go there. A
 * comparison of the decision its node wrote (`$.<from>.next`, the output of a `synthdev.state`
 * node) with the target's name, `{ left: "$.review.next", op: "eq", right: "stop" }`; a name that
 * a comparison would read as a path (`$.x`, `$[0]`, `$`) is compared in JSONata instead.
 */
function decidedFor(from: string, target: string): Condition {
  if (looksLikePath(target)) return `$output.next = ${JSON.stringify(target)}`;
  return { left: renderPath([from, "next"]), op: "eq", right: target };
}

/** Zod issues as import issues of code `invalid_shape`, at their paths under `base`. */
function shapeIssues(base: string, issues: readonly z.core.$ZodIssue[], errors: SynthdevIssue[]): void {
  for (const i of issues) errors.push({ path: i.path.reduce<string>((p, k) => at(p, typeof k === "number" ? k : String(k)), base), code: "invalid_shape", message: i.message });
}

/** The elements of `raw` that fit `schema`, with their indexes; the others' problems are recorded at `base[i]`. */
function parseEach<T extends z.ZodType>(raw: unknown, schema: T, base: string, errors: SynthdevIssue[]): { index: number; value: z.infer<T> }[] {
  if (!Array.isArray(raw)) return [];
  const out: { index: number; value: z.infer<T> }[] = [];
  raw.forEach((x: unknown, index) => {
    const r = schema.safeParse(x);
    if (r.success) out.push({ index, value: r.data });
    else shapeIssues(at(base, index), r.error.issues, errors);
  });
  return out;
}

/** The workflow without its lists, which are parsed element by element. */
const workflowShellSchema = synthdevWorkflowSchema.extend({ states: z.array(z.unknown()).min(1), agents: z.array(z.unknown()).default([]), contexts: z.array(z.unknown()).default([]) });

/** A string field of each object in a list, also of elements that did not parse: what they were meant to name. */
function namesIn(raw: unknown, key: string): Set<string> {
  const out = new Set<string>();
  if (!Array.isArray(raw)) return out;
  for (const x of raw as unknown[]) {
    const name = isJsonObject(x) ? x[key] : undefined;
    if (typeof name === "string") out.add(name);
  }
  return out;
}

/**
 * Imports a SynthDev workflow (seed 002) with its script and roles into a canonical
 * definition. Refuses, listing every problem at once, a workflow, script or roles file of the
 * wrong shape (each state, agent, context and role checked on its own) and a workflow that
 * references a missing handler, state, context, agent or role; the failure carries the nodes of
 * the states that parsed with a name of their own, with the agents and roles that parsed and the
 * agentConfig (`partial`), so that the tools they call and their agents' models are checked in
 * the same answer.
 */
export function importSynthDev(source: SynthdevSource): SynthdevImportResult {
  const errors: SynthdevIssue[] = [];
  const raw: unknown = source.workflow;
  const rawWorkflow = isJsonObject(raw) ? raw : undefined;
  const shell = workflowShellSchema.safeParse(raw);
  if (!shell.success) shapeIssues("workflow", shell.error.issues, errors);
  const parsedStates = parseEach(rawWorkflow?.states, synthdevStateSchema, "workflow.states", errors);
  const parsedAgents = parseEach(rawWorkflow?.agents, synthdevAgentSchema, "workflow.agents", errors);
  const parsedContexts = parseEach(rawWorkflow?.contexts, synthdevContextSchema, "workflow.contexts", errors);

  const rawScript: unknown = source.script;
  const scriptOk = rawScript === undefined || typeof rawScript === "string";
  if (!scriptOk) errors.push({ path: "script", code: "invalid_shape", message: "script must be a string (the source of the script's functions)" });
  const script = typeof rawScript === "string" ? rawScript : "";

  // Each role on its own; a role that does not parse still exists (no missing_role for it).
  const rawRoles: unknown = source.roles ?? {};
  const roles: Record<string, SynthdevRole> = {};
  const roleNames = new Set<string>();
  const rolesObject = isJsonObject(rawRoles) ? rawRoles : undefined;
  if (rolesObject === undefined) {
    shapeIssues("roles", z.record(z.string(), z.unknown()).safeParse(rawRoles).error?.issues ?? [], errors);
  } else {
    for (const [name, role] of Object.entries(rolesObject)) {
      roleNames.add(name);
      const r = synthdevRoleSchema.safeParse(role);
      if (r.success) roles[name] = r.data;
      else shapeIssues(at("roles", name), r.error.issues, errors);
    }
  }
  const rolesKnown = source.roles !== undefined && rolesObject !== undefined;
  if (source.agentConfig !== undefined && !isJsonObject(source.agentConfig)) {
    errors.push({ path: "agentConfig", code: "invalid_shape", message: "agentConfig is an object of LLM defaults (model, levels, ...)" });
  }

  const functions = scriptFunctions(script);
  const stateNames = new Set<string>();
  for (const { index, value: s } of parsedStates) {
    if (stateNames.has(s.name)) errors.push({ path: `workflow.states[${index}].name`, code: "duplicate_state", message: `state "${s.name}" is defined twice` });
    stateNames.add(s.name);
  }
  // Names of elements that did not parse count as there: their own problem is reported, not one in each reference to them.
  const knownStates = new Set([...stateNames, ...namesIn(rawWorkflow?.states, "name")]);
  const contexts = new Set([...parsedContexts.map((c) => c.value.name), ...namesIn(rawWorkflow?.contexts, "name")]);
  const agents = new Set([...parsedAgents.map((a) => a.value.agent_role), ...namesIn(rawWorkflow?.agents, "agent_role")]);
  for (const { index: i, value: a } of parsedAgents) {
    if (!contexts.has(a.context)) errors.push({ path: `workflow.agents[${i}].context`, code: "missing_context", message: `agent "${a.agent_role}" uses context "${a.context}", which is not in contexts` });
    if (rolesKnown && !roleNames.has(a.agent_role)) errors.push({ path: `workflow.agents[${i}].agent_role`, code: "missing_role", message: `agent role "${a.agent_role}" is not in the roles file` });
  }
  for (const { index: i, value: s } of parsedStates) {
    if (s.agent !== undefined && !agents.has(s.agent)) errors.push({ path: `workflow.states[${i}].agent`, code: "missing_agent", message: `state "${s.name}" names agent "${s.agent}", which is not in agents` });
    for (const key of ["pre_handler", "post_handler", "transition_handler", "error_handler"] as const) {
      const h = s[key];
      if (h !== undefined && scriptOk && !functions.has(h)) errors.push({ path: `workflow.states[${i}].${key}`, code: "missing_handler", message: `handler "${h}" of state "${s.name}" is not defined in script.js` });
    }
    if (s.next_state !== undefined && !knownStates.has(s.next_state) && s.next_state !== "stop") {
      errors.push({ path: `workflow.states[${i}].next_state`, code: "missing_state", message: `state "${s.name}" goes to "${s.next_state}", which is not a state` });
    }
  }

  // A state named "input" or "synthdev" would write its output over the run's input or its SynthDev runtime.
  const used = new Set<string>(RESERVED_IDS);
  const ids = new Map<string, string>();
  for (const { value: s } of parsedStates) if (!ids.has(s.name)) ids.set(s.name, nodeId(s.name, used));
  const stateNode = (s: z.infer<typeof synthdevStateSchema>): JsonObject => ({ id: ids.get(s.name)!, type: "synthdev.state", name: s.name, config: { state: s.name } });
  const stateOrigin = (index: number): SourceOrigin => ({ path: `workflow.states[${index}]`, fields: { name: `workflow.states[${index}].name`, "config.state": `workflow.states[${index}].name` } });

  const parsed = synthdevWorkflowSchema.safeParse(raw);
  // The parts parsed on their own make the whole; should they not, its problems are the answer.
  if (!parsed.success && errors.length === 0) shapeIssues("workflow", parsed.error.issues, errors);
  if (errors.length > 0 || !parsed.success) {
    // A state's node is its name alone: problems elsewhere in the state (a missing handler) leave it as it is.
    const converted = parsedStates.map(({ index, value: s }) => {
      const namePath = `workflow.states[${index}].name`;
      return { node: stateNode(s), origin: stateOrigin(index), blockedBy: (e: SynthdevIssue) => within(e.path, namePath) };
    });
    const name = rawWorkflow !== undefined && typeof rawWorkflow.workflow_name === "string" && rawWorkflow.workflow_name !== "" ? rawWorkflow.workflow_name : "(partial)";
    // The material the nodes' checks read (their agents, their roles and the LLM defaults that
    // give the agents their models), as far as it parsed; each agent is mapped to where it is.
    const material = {
      workflow: { workflow_name: name, states: parsedStates.map((s) => s.value), agents: parsedAgents.map((a) => a.value), contexts: parsedContexts.map((c) => c.value) },
      script,
      roles,
    };
    const fields: JsonObject = { synthdev: material as unknown as JsonValue };
    const sourceMap: Record<string, string> = { "synthdev.roles": "roles" };
    parsedAgents.forEach(({ index }, k) => (sourceMap[`synthdev.workflow.agents[${k}]`] = `workflow.agents[${index}]`));
    if (isJsonObject(source.agentConfig)) {
      fields.agentConfig = source.agentConfig;
      sourceMap.agentConfig = "agentConfig";
    }
    return failWithNodes(errors, converted, { fields, sourceMap });
  }
  const wf = parsed.data;

  const warnings: string[] = [];
  const startState = wf.states.find((s) => s.name === "start") ?? wf.states[0]!;
  const edges: JsonObject[] = [];
  const edgeOrigins: SourceOrigin[] = [];
  wf.states.forEach((s, i) => {
    const dynamic = s.transition_handler !== undefined || s.error_handler !== undefined;
    const targets = dynamic ? wf.states.map((x) => x.name) : s.next_state !== undefined && stateNames.has(s.next_state) ? [s.next_state] : [];
    const origin = `workflow.states[${i}].${s.transition_handler !== undefined ? "transition_handler" : s.error_handler !== undefined ? "error_handler" : "next_state"}`;
    for (const t of targets) {
      edges.push({ from: ids.get(s.name)!, to: ids.get(t)!, condition: decidedFor(ids.get(s.name)!, t) });
      edgeOrigins.push({ path: origin });
    }
  });
  // Drop states no transition reaches (the validator refuses unreachable nodes).
  const reach = new Set([ids.get(startState.name)!]);
  for (let grew = true; grew;) {
    grew = false;
    for (const e of edges) {
      if (reach.has(e.from as string) && !reach.has(e.to as string)) {
        reach.add(e.to as string);
        grew = true;
      }
    }
  }
  const stateIndex = new Map(wf.states.map((s, i) => [s.name, i]));
  const states = wf.states.filter((s) => {
    const keep = reach.has(ids.get(s.name)!);
    if (!keep) warnings.push(`state "${s.name}" is never reached from "${startState.name}"; left out`);
    return keep;
  });
  const inputSchema: JsonObject | undefined = wf.input
    ? { type: "object", properties: { [wf.input.name]: wf.input.type && ["string", "number", "boolean", "object", "array"].includes(wf.input.type) ? { type: wf.input.type } : {} }, ...(wf.input.required ? { required: [wf.input.name] } : {}) }
    : undefined;
  const definition: JsonObject = {
    start: ids.get(startState.name)!,
    ...(inputSchema ? { inputSchema } : {}),
    ...(source.agentConfig ? { agentConfig: source.agentConfig } : {}),
    nodes: states.map((s) => ({ id: ids.get(s.name)!, type: "synthdev.state", name: s.name, config: { state: s.name }, branching: "first", maxVisits: MAX_VISITS })),
    edges: edges.filter((e) => reach.has(e.from as string) && reach.has(e.to as string)),
    synthdev: { workflow: source.workflow as JsonValue, script, roles: (source.roles ?? {}) as JsonValue },
  };
  const nodes: Record<string, SourceOrigin> = {};
  for (const s of states) {
    const path = `workflow.states[${stateIndex.get(s.name)!}]`;
    nodes[ids.get(s.name)!] = { path, fields: { name: `${path}.name`, "config.state": `${path}.name` } };
  }
  const sourceMap = {
    fields: {
      "synthdev.workflow": "workflow",
      "synthdev.script": "script",
      "synthdev.roles": "roles",
      ...(inputSchema ? { inputSchema: "workflow.input" } : {}),
      ...(source.agentConfig ? { agentConfig: "agentConfig" } : {}),
    },
    nodes,
    edges: edgeOrigins.filter((_, k) => reach.has(edges[k]!.from as string) && reach.has(edges[k]!.to as string)),
  };
  return { ok: true, definition, warnings, sourceMap };
}
