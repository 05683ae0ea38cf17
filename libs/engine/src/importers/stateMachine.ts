/**
 * Importer for module-workflows / agent-workflow definitions (seed 004 §2: "XState-inspired JSON
 * with states, transitions, guards, invokes"). The seed names the concepts but not the exact
 * fields, so the XState-like shape below is what is accepted:
 * ```json
 * { "initial": "prompt",
 *   "context": { "attempts": 0 },           // optional: initial context values, written at $.<key>
 *   "maxToolIterations": 10,                // optional: rounds of an unbounded cycle (seed 004 §2), kept
 *   "agentConfig": { "model": "..." },      // optional: LLM defaults of the agent nodes, kept
 *   "maxVisits": 25,                        // optional: same, takes precedence
 *   "output": { "answer": "$.llm.text" },   // optional: copied as is
 *   "states": {
 *     "prompt": { "invoke": { "type": "agent.prompt", "config": { ... }, "input": { ... } }, "on": { "DONE": "llm" } },
 *     "llm":    { "invoke": { "src": "agent.llm" },
 *                 "transitions": [ { "target": "tools", "guard": "$count($output.toolCalls) > 0" },
 *                                  { "target": "done" } ] },
 *     "tools":  { "invoke": { "type": "agent.toolExecutor" }, "always": "llm", "maxVisits": 10 },
 *     "done":   { "type": "final" } } }
 * ```
 * A `{ "definition": {...} }` record (the seed's `agent_workflows` row) is unwrapped; its own
 * `maxToolIterations` applies when the definition has none, its `agentConfig` is merged under the
 * definition's.
 *
 * - **invoke**: `type` | `src` (or a string) names the node type; `config`, `input`, `output`,
 *   `retry` and `timeoutMs` carry over. A `core.` prefix is dropped. Core types (`condition`,
 *   `transform`, `delay`, `emit`, `setVariable`, `forEach`, `whileLoop`), `subworkflow`, `tool`,
 *   `humanReview` and every `agent.*` type are kept; any other type is a module API node and
 *   becomes a `tool` node calling the tool of that name, with `{ ...config, ...input }` as its
 *   arguments. A state without invoke becomes an empty `setVariable` (a pass-through).
 * - **transitions**, taken in this order: `transitions` (array), `on` (`{ EVENT: target |
 *   transition | [transition...] }` or an array), `always`, `onDone` / `invoke.onDone`. A
 *   transition is a target name or `{ target, guard | cond, when? }`; event names are not kept
 *   (a state moves on when its node finishes), except that for `condition`, `whileLoop` and
 *   `humanReview` states an event named like a branch (`true`/`false`, `body`/`exit`,
 *   `approved`/`rejected`, any case) becomes the edge's `when`. Error transitions
 *   (`onError`) cannot be expressed and are dropped with a warning.
 * - **guards** become the edge `condition`: a string is JSONata and kept as is (the source
 *   node's output is `$output`); `{ "expression": "..." }` likewise; a comparison
 *   `{ "left", "op", "right" }` (the condition node's ops, operands literal or `$.path`) is kept
 *   as a comparison, which the engine evaluates as a condition node's config, so it means
 *   exactly what the op means. Named XState guards (`{ "type": "isValid" }`) are rejected.
 * - A state with several transitions gets `"branching": "first"` (the first matching
 *   transition wins; one after a transition without a guard on its branch is never taken, a
 *   warning); a state entered from several places gets `"join": "any"`; a final state
 *   (`"type": "final"`) is a sink and has no transitions. A state's own `maxVisits` is kept; a
 *   cycle bounded neither by it nor by a `whileLoop`'s body gets `maxVisits` from the
 *   definition's `maxVisits`, else `maxToolIterations` (N rounds), else 25, placed and scaled so
 *   that no bounded loop around it is capped (visitBounds).
 * - `agentConfig` (of the definition, merged over the row's) and `maxToolIterations` are carried
 *   over; `memoryConfig`, `mcpExport` and `streamingEnabled` cannot be, with a warning.
 * - When the initial state is re-entered by a transition, or `context` has values, a `_start`
 *   `setVariable` node (writing the `context` values) comes first.
 * - A machine with problems is refused with all of them, carrying the nodes of the states whose
 *   invoke has none (`partial`; not a state named after a key the engine writes), so that their
 *   nodes' own problems (the tools they call, their configs) are checked in the same answer.
 */
import type { JsonObject, JsonValue } from "../json.ts";
import { isJsonObject } from "../json.ts";
import type { ImportIssue, ImportResult, SourceOrigin } from "./common.ts";
import { ID_RULE, IdAllocator, RESERVED_IDS, TOOL_NAME, at, asJson, fail, failWithNodes, jsonataSyntaxError, pick, within } from "./common.ts";
import { contextKeysWritten } from "../validate.ts";
import { unboundedCycles } from "../graph.ts";
import { CONDITION_OPS } from "../model.ts";
import type { Comparison, Condition } from "../model.ts";
import { collectPaths, parsePath } from "../path.ts";

/** Visit bound given to states on a cycle when the source sets none. */
export const DEFAULT_MAX_VISITS = 25;

const KEPT_TYPES = new Set(["condition", "transform", "delay", "emit", "setVariable", "forEach", "whileLoop", "subworkflow", "tool", "humanReview"]);
const BRANCHES: Readonly<Record<string, Readonly<Record<string, string>>>> = {
  condition: { true: "true", false: "false" },
  whileLoop: { body: "body", exit: "exit" },
  humanReview: { approved: "approved", approve: "approved", rejected: "rejected", reject: "rejected" },
  "agent.humanReview": { approved: "approved", approve: "approved", rejected: "rejected", reject: "rejected" },
};
interface Transition {
  target: string;
  /** Where the transition is in the source. */
  path: string;
  targetPath: string;
  event?: string;
  guard?: JsonValue;
  guardPath?: string;
  when?: string;
  /** Where the branch label came from: the transition's `when`, or the event name it is under. */
  whenPath?: string;
}

/**
 * A transition's guard as an edge condition, or why it cannot be one: JSONata text (or
 * `{ expression }`) is kept as text, after a syntax check; a comparison `{ left, op, right }` is
 * kept as a comparison, which the engine evaluates as a condition node's config (condition.ts),
 * so it means exactly what the op of that name means. Its `$.path` operands must parse; other
 * fields of the comparison are dropped.
 */
export function guardToCondition(guard: JsonValue): { condition: Condition } | { code: string; message: string } {
  if (typeof guard === "string") {
    const err = jsonataSyntaxError(guard);
    return err === undefined ? { condition: guard } : { code: "invalid_guard", message: `guard is not valid JSONata: ${err}` };
  }
  if (!isJsonObject(guard)) return { code: "invalid_guard", message: "a guard is a JSONata string, { expression } or { left, op, right }" };
  if (typeof guard.expression === "string") return guardToCondition(guard.expression);
  if (typeof guard.op === "string") {
    const op = guard.op;
    if (!(CONDITION_OPS as readonly string[]).includes(op)) return { code: "invalid_guard", message: `unknown guard op "${op}"; known: ${CONDITION_OPS.join(", ")}` };
    // As for a condition node, left is required and a missing right is nothing (not null).
    if (guard.left === undefined) return { code: "invalid_guard", message: "a comparison { left, op, right } needs left" };
    const refs = collectPaths(guard.left, "left");
    if (guard.right !== undefined) collectPaths(guard.right, "right", refs);
    for (const ref of refs) {
      const p = parsePath(ref.path);
      if ("error" in p) return { code: "invalid_guard", message: `${ref.at}: ${p.error}` };
    }
    return { condition: { left: guard.left, op: op as Comparison["op"], ...(guard.right !== undefined ? { right: guard.right } : {}) } };
  }
  if (typeof guard.type === "string") {
    return { code: "unsupported_guard", message: `named guard "${guard.type}" has no definition here; write it as JSONata or { left, op, right }` };
  }
  return { code: "invalid_guard", message: "a guard is a JSONata string, { expression } or { left, op, right }" };
}

function readTransitions(spec: JsonValue, path: string, event: string | undefined, out: Transition[], errors: ImportIssue[]): void {
  if (typeof spec === "string") {
    out.push({ target: spec, path, targetPath: path, ...(event !== undefined ? { event } : {}) });
    return;
  }
  if (Array.isArray(spec)) {
    spec.forEach((s, i) => readTransitions(s, at(path, i), event, out, errors));
    return;
  }
  if (!isJsonObject(spec)) {
    errors.push({ path, code: "invalid_transition", message: "a transition is a target state name or { target, guard }" });
    return;
  }
  const target = spec.target;
  if (typeof target !== "string" || target === "") {
    errors.push({ path: at(path, "target"), code: Array.isArray(target) ? "invalid_transition" : "missing_target", message: Array.isArray(target) ? "a transition has one target state" : "the transition has no target state" });
    return;
  }
  const t: Transition = { target, path, targetPath: at(path, "target") };
  if (event !== undefined) t.event = event;
  const g = pick(spec, ["guard", "cond"]);
  if (g !== undefined) {
    t.guard = g.value;
    t.guardPath = at(path, g.key);
  }
  if (typeof spec.when === "string") {
    t.when = spec.when;
    t.whenPath = at(path, "when");
  }
  out.push(t);
}

/**
 * The node of one state's invoke; undefined (with errors recorded) when the invoke is unusable.
 * `fields` gets where in the source each field of the node came from.
 */
function nodeForInvoke(
  id: string, invoke: JsonValue | undefined, ip: string, errors: ImportIssue[], warnings: string[], fields: Record<string, string>,
): JsonObject | undefined {
  if (invoke === undefined || invoke === null) return { id, type: "setVariable", config: { values: {} } };
  const inv: JsonObject = typeof invoke === "string" ? { type: invoke } : isJsonObject(invoke) ? invoke : {};
  const typeField = pick(inv, ["type", "src"]);
  if (!isJsonObject(invoke) && typeof invoke !== "string") {
    errors.push({ path: ip, code: "invalid_invoke", message: "invoke is a node type name or { type, config, input }" });
    return undefined;
  }
  if (typeof typeField?.value !== "string" || typeField.value === "") {
    errors.push({ path: at(ip, typeField?.key ?? "type"), code: "missing_invoke_type", message: "the invoke names no node type (type or src)" });
    return undefined;
  }
  const type = typeField.value.startsWith("core.") ? typeField.value.slice(5) : typeField.value;
  const typePath = typeof invoke === "string" ? ip : at(ip, typeField.key);
  let config: JsonObject = {};
  if (inv.config !== undefined && inv.config !== null) {
    if (isJsonObject(inv.config)) config = inv.config;
    else errors.push({ path: at(ip, "config"), code: "invalid_config", message: "config must be an object" });
  }
  let input: JsonObject | undefined;
  if (inv.input !== undefined && inv.input !== null) {
    if (isJsonObject(inv.input)) input = inv.input;
    else errors.push({ path: at(ip, "input"), code: "invalid_input", message: "input must be an object template" });
  }
  let node: JsonObject;
  fields.type = typePath;
  if (KEPT_TYPES.has(type) || type.startsWith("agent.")) {
    node = { id, type, config };
    if (isJsonObject(inv.config)) fields.config = at(ip, "config");
    if (input !== undefined) {
      node.input = input;
      fields.input = at(ip, "input");
    }
  } else {
    if (!TOOL_NAME.test(type)) {
      errors.push({ path: typePath, code: "invalid_tool_name", message: `"${type}" is neither a known node type nor a tool name (dot-separated words)` });
      return undefined;
    }
    const args = { ...config, ...(input ?? {}) };
    node = { id, type: "tool", config: { tool: type } };
    fields["config.tool"] = typePath;
    if (Object.keys(args).length > 0) node.input = args;
    // The tool's arguments merge config and input (input wins): each argument points where it came from.
    if (input === undefined && isJsonObject(inv.config)) fields.input = at(ip, "config");
    else if (input !== undefined && Object.keys(config).length === 0) fields.input = at(ip, "input");
    for (const k of Object.keys(args)) fields[`input.${k}`] = at(at(ip, input !== undefined && k in input ? "input" : "config"), k);
  }
  if (typeof inv.output === "string") {
    node.output = inv.output;
    fields.output = at(ip, "output");
  }
  if (isJsonObject(inv.retry)) {
    node.retry = inv.retry;
    fields.retry = at(ip, "retry");
  }
  if (typeof inv.timeoutMs === "number") {
    node.timeoutMs = inv.timeoutMs;
    fields.timeoutMs = at(ip, "timeoutMs");
  }
  if (inv.onError !== undefined) warnings.push(`${at(ip, "onError")}: error transitions are not imported; a failing node fails the execution (use retry)`);
  return node;
}

/**
 * Seed 004's workflow-level settings, on the definition or on its `agent_workflows` row: the
 * `agentConfig` to carry over (the row's and the definition's merged field by field, the
 * definition's winning, with a warning for each field they both set differently, and where
 * each field came from), and a warning for each setting the definition cannot hold.
 */
function workflowSettings(
  row: JsonObject | undefined, source: JsonObject, base: string, errors: ImportIssue[], warnings: string[],
): { value: JsonObject; fields: Record<string, string> } | undefined {
  let value: JsonObject | undefined;
  const fields: Record<string, string> = {};
  const from: Record<string, string> = {};
  for (const [holder, path] of [[row, "agentConfig"], [source, at(base, "agentConfig")]] as const) {
    const ac = holder?.agentConfig;
    if (ac === undefined || ac === null) continue;
    if (!isJsonObject(ac)) {
      errors.push({ path, code: "invalid_agent_config", message: "agentConfig is an object of LLM defaults (model, system, temperature, ...)" });
      continue;
    }
    if (value === undefined) fields.agentConfig = path;
    else delete fields.agentConfig;
    value = { ...(value ?? {}) };
    for (const [k, v] of Object.entries(ac)) {
      if (k in value && JSON.stringify(value[k]) !== JSON.stringify(v)) {
        warnings.push(`${at(path, k)}: overrides ${from[k]!} (the definition's agentConfig wins over the row's, field by field)`);
      }
      value[k] = v;
      from[k] = at(path, k);
    }
  }
  // Two sources: each field maps to where it came from.
  if (value !== undefined && fields.agentConfig === undefined) for (const [k, p] of Object.entries(from)) fields[`agentConfig.${k}`] = p;
  for (const [holder, prefix] of [[row, ""], [source, base]] as const) {
    if (holder === undefined) continue;
    for (const key of ["memoryConfig", "mcpExport"]) {
      if (holder[key] !== undefined) warnings.push(`${at(prefix, key)}: a setting of the stored workflow, not of its definition, so the import does not set it; set it with PUT /api/agent-workflows/:id`);
    }
    if (holder.streamingEnabled !== undefined) warnings.push(`${at(prefix, "streamingEnabled")}: has no effect and is not imported (a definition has no such setting; a run's progress is followed through its events)`);
  }
  return value === undefined ? undefined : { value, fields };
}

/**
 * Warns about each transition of a `branching: "first"` state that can never be taken: one
 * after a transition without a guard on the same branch (or on none), which is always taken
 * first. Events do not choose among transitions (a state moves on when its node finishes),
 * so `on: { SPAM: "drop", HAM: "deliver" }` always goes to "drop".
 */
function unreachableTransitions(node: JsonObject, out: readonly JsonObject[], from: readonly Transition[], warnings: string[]): void {
  // An edge out of a review without `when` is its approved branch.
  const review = node.type === "humanReview" || node.type === "agent.humanReview";
  const label = (e: JsonObject): string | undefined => (typeof e.when === "string" ? e.when : review ? "approved" : undefined);
  out.forEach((e, j) => {
    const k = out.slice(0, j).findIndex((p) => p.condition === undefined && (label(p) === undefined || label(p) === label(e)));
    if (k < 0) return;
    const t = from[j]!;
    const before = from[k]!;
    const events = t.event !== undefined && before.event !== undefined
      ? ` Events do not choose a transition here (the state moves on when its node finishes): give each transition a guard on the node's output ($output).`
      : "";
    warnings.push(`${t.path}: the transition to "${t.target}" is never taken: ${before.path} has no guard and is taken first.${events}`);
  });
}

/** The most maxVisits a node may have (the canonical schema's limit). */
const MAX_VISITS_LIMIT = 100_000;

/**
 * The `maxVisits` the importer adds (state name → bound), so that every cycle is bounded
 * without capping a loop that is already bounded. The engine counts a node's visits in one
 * pass of the whileLoops whose body holds it (docs/workflows.md, "Loops"), so:
 * - only cycles that no whileLoop counts (that do not go round a loop by its body) and that
 *   pass through no state with its own `maxVisits` get a bound;
 * - on such a cycle the bound goes on the states outside every whileLoop's body that are not
 *   loops themselves (each pass of the cycle visits them once); only a cycle with no such
 *   state (a retry inside a loop body, loops that re-enter each other by `exit`) is bounded
 *   on its loop-body states or loops;
 * - a bound is `limit`, per pass of the loops around the state; a loop whose exit also leads to
 *   the state does not restart its count, and multiplies it by the iterations it can make
 *   (`maxIterations`, times `limit` again when that loop is itself on a cycle that re-runs it);
 *   a loop carrying a bound counts its own `maxIterations + 1` visits per pass;
 * - when `limit` counts rounds (maxToolIterations: N rounds of an LLM → tools cycle), a state
 *   where the cycle is entered is visited once more than the others: N + 1.
 */
function visitBounds(
  names: readonly string[], edges: ReadonlyArray<{ from: string; to: string; when?: string }>, nodes: ReadonlyMap<string, JsonObject>,
  ownLimit: ReadonlyMap<string, number>, limit: number, countsRounds: boolean, initial: string, warnings: string[],
): Map<string, number> {
  const isLoop = (n: string): boolean => nodes.get(n)!.type === "whileLoop";
  const counted = (e: { from: string; when?: string }): boolean => isLoop(e.from) && e.when !== "exit";
  const graph = { nodes: names, edges };
  const succ = new Map<string, string[]>(names.map((n) => [n, []]));
  const pred = new Map<string, string[]>(names.map((n) => [n, []]));
  for (const e of edges) {
    succ.get(e.from)?.push(e.to);
    pred.get(e.to)?.push(e.from);
  }
  const reach = (from: readonly string[], next: ReadonlyMap<string, string[]>, avoid: string): Set<string> => {
    const seen = new Set(from.filter((n) => n !== avoid));
    const todo = [...seen];
    while (todo.length > 0) {
      for (const m of next.get(todo.pop()!) ?? []) {
        if (m !== avoid && !seen.has(m)) {
          seen.add(m);
          todo.push(m);
        }
      }
    }
    return seen;
  };
  // A loop's body: the states on a way from one of its body edges back to it. Its passes
  // restart their visit counts, except those of states its exit also leads to (graph.ts, passNodes).
  const loopsAround = new Map<string, string[]>(names.map((n) => [n, []]));
  const countsAcross = new Map<string, string[]>(names.map((n) => [n, []]));
  for (const w of names.filter(isLoop)) {
    const back = reach(pred.get(w)!, pred, w);
    const afterExit = reach(edges.filter((e) => e.from === w && e.when === "exit").map((e) => e.to), succ, w);
    for (const n of reach(edges.filter((e) => e.from === w && counted(e)).map((e) => e.to), succ, w)) {
      if (!back.has(n)) continue;
      loopsAround.get(n)!.push(w);
      if (afterExit.has(n)) countsAcross.get(n)!.push(w);
    }
  }
  const maxIterations = (w: string): number => {
    const m = (nodes.get(w)!.config as JsonObject | undefined)?.maxIterations;
    return typeof m === "number" && Number.isInteger(m) && m >= 1 ? m : 1;
  };
  // How often a cycle around a loop may re-run it: the largest bound on the loop's component.
  const componentOf = new Map<string, string[]>();
  for (const comp of unboundedCycles(graph, () => false, counted)) for (const n of comp) componentOf.set(n, comp);
  const reruns = (w: string): number => Math.max(1, ...(componentOf.get(w) ?? []).map((n) => ownLimit.get(n) ?? limit));

  const open = unboundedCycles(graph, (n) => ownLimit.has(n), counted);
  const chosen = new Set(open.flat().filter((n) => !isLoop(n) && loopsAround.get(n)!.length === 0));
  const rest = unboundedCycles(graph, (n) => ownLimit.has(n) || chosen.has(n), counted).flat();
  const openOf = new Map<string, Set<string>>();
  for (const comp of open) for (const n of comp) openOf.set(n, new Set(comp));

  const bounds = new Map<string, number>();
  for (const n of [...chosen, ...rest]) {
    const comp = openOf.get(n)!;
    const entered = n === initial || pred.get(n)!.some((m) => !comp.has(m));
    let bound = countsRounds && entered ? limit + 1 : limit;
    if (isLoop(n)) bound *= maxIterations(n) + 1;
    for (const w of countsAcross.get(n)!) bound *= maxIterations(w) * reruns(w);
    if (bound > MAX_VISITS_LIMIT) {
      warnings.push(`state "${n}" gets maxVisits ${MAX_VISITS_LIMIT}, the most a node may have; the loops around it could legitimately visit it ${bound} times`);
      bound = MAX_VISITS_LIMIT;
    }
    bounds.set(n, bound);
  }
  return bounds;
}

/** Converts an XState-like module-workflows definition into a canonical definition (see the module comment). */
export function importStateMachine(def: unknown): ImportResult {
  let source = asJson(def);
  const errors: ImportIssue[] = [];
  const warnings: string[] = [];
  if (!isJsonObject(source)) return fail([{ path: "(source)", code: "invalid_source", message: "a state machine is a JSON object with initial and states" }]);
  let base = "";
  let row: JsonObject | undefined;
  if (source.states === undefined && isJsonObject(source.definition)) {
    row = source;
    source = source.definition;
    base = "definition";
  }
  const outerLimit = row?.maxToolIterations;
  const states = source.states;
  if (!isJsonObject(states) || Object.keys(states).length === 0) {
    return fail([{ path: at(base, "states"), code: "missing_states", message: "the definition needs a states object with at least one state" }]);
  }
  const names = Object.keys(states);

  const limitOf = (v: JsonValue | undefined, path: string): number | undefined => {
    if (v === undefined || v === null) return undefined;
    if (typeof v === "number" && Number.isInteger(v) && v >= 1) return v;
    errors.push({ path, code: "invalid_limit", message: "a visit limit is a whole number of at least 1" });
    return undefined;
  };
  let defaultLimit = DEFAULT_MAX_VISITS;
  let defaultLimitPath: string | undefined;
  // maxToolIterations counts rounds of a loop (N tool calls), maxVisits and the default count visits.
  let limitCountsRounds = false;
  for (const [v, path] of [[source.maxVisits, at(base, "maxVisits")], [source.maxToolIterations, at(base, "maxToolIterations")], [outerLimit, "maxToolIterations"]] as const) {
    const limit = limitOf(v, path);
    if (limit !== undefined) {
      defaultLimit = limit;
      defaultLimitPath = path;
      limitCountsRounds = path.endsWith("maxToolIterations");
      break;
    }
  }
  // maxToolIterations is also the definition's own: the default of agent.toolLoop nodes.
  const toolIterations = [[source.maxToolIterations, at(base, "maxToolIterations")], [outerLimit, "maxToolIterations"]] as const;
  const toolIterationsAt = toolIterations.find(([v]) => typeof v === "number" && Number.isInteger(v) && v >= 1);

  const agentConfig = workflowSettings(row, source, base, errors, warnings);

  let initial = source.initial;
  if (initial === undefined) {
    initial = names[0]!;
    warnings.push(`no initial state given; starting at the first state, "${initial}"`);
  } else if (typeof initial !== "string" || !Object.prototype.hasOwnProperty.call(states, initial)) {
    errors.push({ path: at(base, "initial"), code: "unknown_initial", message: `initial state ${JSON.stringify(initial)} is not one of the states` });
  }

  const ids = new IdAllocator();
  const idOf = new Map<string, string>();
  for (const name of names) {
    if (!ids.claim(name)) {
      const id = ids.fresh(name);
      idOf.set(name, id);
      warnings.push(`state "${name}" became node "${id}" (${ID_RULE})`);
    } else {
      idOf.set(name, name);
    }
  }

  const nodes = new Map<string, JsonObject>();
  const nodeFields = new Map<string, Record<string, string>>();
  const transitions = new Map<string, Transition[]>();
  const ownLimit = new Map<string, number>();
  const finals = new Set<string>();

  for (const name of names) {
    const sp = at(at(base, "states"), name);
    const state = states[name];
    if (!isJsonObject(state)) {
      errors.push({ path: sp, code: "invalid_state", message: "a state is an object (invoke, on/transitions, type)" });
      continue;
    }
    const id = idOf.get(name)!;
    // A state whose invoke is unusable still gets a stand-in node, so its transitions are checked too.
    const invoke = state.invoke;
    const fields: Record<string, string> = {};
    const node: JsonObject = nodeForInvoke(id, invoke, at(sp, "invoke"), errors, warnings, fields) ?? { id, type: "setVariable", config: { values: {} } };
    if (typeof state.description === "string") {
      node.description = state.description;
      fields.description = at(sp, "description");
    }
    const limit = limitOf(state.maxVisits, at(sp, "maxVisits"));
    if (limit !== undefined) {
      ownLimit.set(name, limit);
      fields.maxVisits = at(sp, "maxVisits");
    } else if (defaultLimitPath !== undefined) {
      fields.maxVisits = defaultLimitPath;
    }
    if (state.onError !== undefined) warnings.push(`${at(sp, "onError")}: error transitions are not imported; a failing node fails the execution (use retry)`);

    const ts: Transition[] = [];
    if (state.transitions !== undefined) readTransitions(state.transitions, at(sp, "transitions"), undefined, ts, errors);
    if (Array.isArray(state.on)) readTransitions(state.on, at(sp, "on"), undefined, ts, errors);
    else if (isJsonObject(state.on)) for (const [ev, spec] of Object.entries(state.on)) readTransitions(spec, at(at(sp, "on"), ev), ev, ts, errors);
    else if (state.on !== undefined) errors.push({ path: at(sp, "on"), code: "invalid_transition", message: "on maps event names to transitions" });
    if (state.always !== undefined) readTransitions(state.always, at(sp, "always"), undefined, ts, errors);
    if (state.onDone !== undefined) readTransitions(state.onDone, at(sp, "onDone"), undefined, ts, errors);
    if (isJsonObject(invoke) && invoke.onDone !== undefined) readTransitions(invoke.onDone, at(at(sp, "invoke"), "onDone"), undefined, ts, errors);

    if (state.type === "final") {
      finals.add(name);
      if (ts.length > 0) errors.push({ path: ts[0]!.path, code: "final_state_transitions", message: `final state "${name}" cannot have transitions` });
    } else if (ts.length === 0) {
      warnings.push(`state "${name}" has no transitions and is not final; the execution ends there`);
    }

    const nodeType = node.type as string;
    const branches = BRANCHES[nodeType];
    for (const t of ts) {
      if (!Object.prototype.hasOwnProperty.call(states, t.target)) {
        errors.push({ path: t.targetPath, code: "unknown_target", message: `transition to unknown state "${t.target}"` });
      }
      if (branches) {
        const label = t.when ?? (t.event !== undefined ? branches[t.event.toLowerCase()] : undefined);
        if (label !== undefined && !Object.values(branches).includes(label)) {
          errors.push({ path: at(t.path, "when"), code: "invalid_branch", message: `transitions out of "${name}" (${nodeType}) are labelled ${[...new Set(Object.values(branches))].join(" or ")}` });
        } else if (label !== undefined) {
          if (t.when === undefined) t.whenPath = at(at(sp, "on"), t.event!);
          t.when = label;
        } else if (nodeType === "condition" || nodeType === "whileLoop") {
          errors.push({ path: t.path, code: "missing_branch", message: `transitions out of the ${nodeType} state "${name}" need a branch: an event named ${[...new Set(Object.values(branches))].join(" / ")} or "when"` });
        }
      } else if (t.when !== undefined) {
        errors.push({ path: at(t.path, "when"), code: "invalid_branch", message: `transitions out of "${name}" (${nodeType}) take no "when"` });
      }
      if (t.guard !== undefined) {
        const g = guardToCondition(t.guard);
        if ("code" in g) errors.push({ path: t.guardPath!, code: g.code, message: g.message });
      }
    }
    nodes.set(name, node);
    nodeFields.set(name, fields);
    transitions.set(name, ts);
  }

  // A state may not be named after a context key the engine writes for a state (an agent state's
  // conversation at $.messages): its output would go there. It is not renamed, since the
  // machine's $.messages references could mean either (docs/importers.md, "Names the engine writes").
  const invokeOk = (n: string): boolean => !errors.some((e) => within(e.path, at(at(at(base, "states"), n), "invoke")));
  const writers = contextKeysWritten(names.filter((n) => nodes.has(n) && invokeOk(n)).map((n) => nodes.get(n)!));
  const stateOfId = new Map([...idOf].map(([name, id]) => [id, name]));
  for (const name of names) {
    const id = idOf.get(name)!;
    const w = writers.get(id);
    if (w === undefined || !nodes.has(name) || nodes.get(name)!.output !== undefined) continue;
    const who = w.id === id ? `this ${w.type} state itself` : `the ${w.type} state "${stateOfId.get(w.id) ?? w.id}"`;
    errors.push({
      path: at(at(base, "states"), name),
      code: "reserved_state_name",
      message: `state "${name}" would write its output to $.${id}, where ${who} ${w.what}: rename the state (and the paths that read its output), or give its invoke an output path`,
    });
  }

  // Reachability from the initial state.
  if (typeof initial === "string" && Object.prototype.hasOwnProperty.call(states, initial)) {
    const reach = new Set([initial]);
    const queue = [initial];
    while (queue.length > 0) {
      for (const t of transitions.get(queue.shift()!) ?? []) {
        if (!reach.has(t.target) && Object.prototype.hasOwnProperty.call(states, t.target)) {
          reach.add(t.target);
          queue.push(t.target);
        }
      }
    }
    for (const name of names) {
      if (!reach.has(name)) errors.push({ path: at(at(base, "states"), name), code: "unreachable_state", message: `state "${name}" cannot be reached from the initial state "${initial}"` });
    }
  }

  let contextValues: JsonObject | undefined;
  if (source.context !== undefined && source.context !== null) {
    if (!isJsonObject(source.context)) {
      errors.push({ path: at(base, "context"), code: "invalid_context", message: "context is an object of initial values" });
    } else {
      contextValues = {};
      for (const [k, v] of Object.entries(source.context)) {
        if (!/^[A-Za-z_][A-Za-z0-9_-]*$/.test(k) || RESERVED_IDS.includes(k) || idOf.has(k)) {
          errors.push({ path: at(at(base, "context"), k), code: "invalid_context_key", message: `context key "${k}" must be a name that is not ${RESERVED_IDS.map((r) => `"${r}"`).join(", ")} or a state name` });
        } else {
          contextValues[`$.${k}`] = v;
        }
      }
    }
  }
  if (source.output !== undefined && !isJsonObject(source.output)) {
    errors.push({ path: at(base, "output"), code: "invalid_output", message: "output maps keys to $.paths" });
  }
  if (errors.length > 0) {
    // The states' nodes go along, each unless its invoke has a problem, or its name (the node's
    // id) is one the engine writes (its transitions are not in it).
    const converted = names.filter((n) => nodes.has(n)).map((name) => {
      const path = at(at(base, "states"), name);
      const { maxVisits: _bound, ...fields } = nodeFields.get(name)!;
      const invokePath = at(path, "invoke");
      const blockedBy = (e: ImportIssue): boolean => within(e.path, invokePath) || (e.path === path && e.code === "reserved_state_name");
      return { node: nodes.get(name)!, origin: { path, ...(Object.keys(fields).length > 0 ? { fields } : {}) }, blockedBy };
    });
    // With the agentConfig the definition would have (when it is an object): it gives the
    // LLM states their model, and its model refs are checked with the rest.
    return failWithNodes(errors, converted, agentConfig ? { fields: { agentConfig: agentConfig.value }, sourceMap: agentConfig.fields } : undefined);
  }

  const stepEdges = names.flatMap((n) => (transitions.get(n) ?? []).map((t) => ({ from: n, to: t.target, ...(t.when !== undefined ? { when: t.when } : {}) })));
  const bounds = visitBounds(names, stepEdges, nodes, ownLimit, defaultLimit, limitCountsRounds, initial as string, warnings);
  const incoming = new Map<string, Set<string>>();
  for (const name of names) for (const t of transitions.get(name)!) incoming.set(t.target, (incoming.get(t.target) ?? new Set()).add(name));

  const outNodes: JsonObject[] = [];
  const edges: JsonObject[] = [];
  const nodeOrigins: Record<string, SourceOrigin> = {};
  const edgeOrigins: SourceOrigin[] = [];
  const topFields: Record<string, string> = {};
  const init = initial as string;
  const initialPath = source.initial !== undefined ? at(base, "initial") : at(at(base, "states"), init);
  let start = idOf.get(init)!;
  const needsStart = incoming.has(init) || (contextValues !== undefined && Object.keys(contextValues).length > 0);
  if (needsStart) {
    start = ids.fresh("_start");
    outNodes.push({ id: start, type: "setVariable", config: { values: contextValues ?? {} } });
    nodeOrigins[start] = { path: contextValues !== undefined && Object.keys(contextValues).length > 0 ? at(base, "context") : initialPath };
    edges.push({ from: start, to: idOf.get(init)! });
    edgeOrigins.push({ path: initialPath });
  } else if (source.initial !== undefined) {
    topFields.start = initialPath;
  }
  for (const name of names) {
    const node = nodes.get(name)!;
    const out: JsonObject[] = [];
    const outFrom: Transition[] = [];
    const seen = new Set<string>();
    for (const t of transitions.get(name)!) {
      const edge: JsonObject = { from: idOf.get(name)!, to: idOf.get(t.target)! };
      const fields: Record<string, string> = { to: t.targetPath };
      if (t.when !== undefined) {
        edge.when = t.when;
        if (t.whenPath !== undefined) fields.when = t.whenPath;
      }
      if (t.guard !== undefined) {
        edge.condition = (guardToCondition(t.guard) as { condition: Condition }).condition;
        fields.condition = t.guardPath!;
      }
      const key = JSON.stringify(edge);
      if (seen.has(key)) continue;
      seen.add(key);
      out.push(edge);
      outFrom.push(t);
      edgeOrigins.push({ path: t.path, fields });
    }
    if (out.length > 1) {
      node.branching = "first";
      unreachableTransitions(node, out, outFrom, warnings);
    }
    if ((incoming.get(name)?.size ?? 0) + (needsStart && name === init ? 1 : 0) > 1) node.join = "any";
    const limit = ownLimit.get(name) ?? bounds.get(name);
    const fields = nodeFields.get(name)!;
    if (limit !== undefined) node.maxVisits = limit;
    else delete fields.maxVisits;
    outNodes.push(node);
    nodeOrigins[node.id as string] = { path: at(at(base, "states"), name), ...(Object.keys(fields).length > 0 ? { fields } : {}) };
    edges.push(...out);
  }

  const definition: JsonObject = { schemaVersion: 1, start, nodes: outNodes, edges };
  if (agentConfig !== undefined) {
    definition.agentConfig = agentConfig.value;
    Object.assign(topFields, agentConfig.fields);
  }
  if (toolIterationsAt !== undefined) {
    definition.maxToolIterations = toolIterationsAt[0] as number;
    topFields.maxToolIterations = toolIterationsAt[1];
  }
  if (isJsonObject(source.inputSchema)) {
    definition.inputSchema = source.inputSchema;
    topFields.inputSchema = at(base, "inputSchema");
  }
  if (isJsonObject(source.output)) {
    definition.output = source.output;
    topFields.output = at(base, "output");
  }
  return { ok: true, definition, warnings, sourceMap: { fields: topFields, nodes: nodeOrigins, edges: edgeOrigins } };
}
