/**
 * Large values: what keeps checkpoints, journal rows and events small (docs/tools.md,
 * "Large results").
 *
 * - A tool's answer: a worker sends a result larger than its inline limit as an `object:`
 *   reference (@baton/sdk large.ts); it is moved into the blob store here and the object
 *   deleted. Any other answer larger than the threshold is stored as a blob. Either way the
 *   engine gets `{ "$ref": "blob:<sha256>", "size": n }` and reads through it.
 * - After each step: node outputs made by the engine (a fan-out's results put together, a
 *   transform), node inputs in the journal, the execution's output and event payloads
 *   larger than the threshold become blob references too — their largest parts first, so a
 *   small output mapping keeps its small fields readable. So do what a running node keeps in
 *   the checkpoint: its resolved input, a multi-call node's calls' arguments, and the
 *   arguments of the calls in the outbox. The values replaced in those calls are kept in
 *   memory and sent as they were ({@link LargeValues.callArgs}); calls carried out again from
 *   a checkpoint (after a crash, a rebuilt checkpoint) are resolved from the blob store.
 * - A reference to a value with a `usage` keeps its token counts (`usageOf` of @baton/engine),
 *   so a node that stores a large answer without reading it still counts them.
 *
 * Values at or under the threshold pass untouched: a tool result is measured once (the
 * measure is remembered for the step that completes its node), other values once per step;
 * a call's arguments are measured here instead of when they are sent (the measure goes with
 * them, {@link LargeValues.measured}).
 *
 * Every blob is stored for an execution (its {@link Owner}), which the store records as a use
 * of the blob; a value that brings references into another execution (a child's input, a
 * child's output, a fork's starting state) has them recorded for that execution with
 * {@link LargeValues.adopt}. Blobs no execution uses are pruned (blob-pruner.ts, ADR 008).
 */
import { createHash } from "node:crypto";
import { objectName, parseObjectRef } from "@baton/bus";
import type { Bus, ObjectRef } from "@baton/bus";
import type { Command, Effect, EngineEvent, JsonObject, JsonValue, NodeRun, StepResult, WorkflowDefinition } from "@baton/engine";
import { collectRefs, isBlobRef, isJsonObject, readPath, resolveRefs, usageOf, writePath } from "@baton/engine";
import { defineError, errorMessage } from "@baton/errors";
import type { Store } from "@baton/store";
import type { Logger } from "@baton/telemetry";

/** The object bucket tool workers put large results in (LARGE_RESULTS_BUCKET of @baton/sdk). */
export const LARGE_RESULTS_BUCKET = "tool_results_large";

/** A worker's `object:` reference does not name the object of its own call. Not retryable. */
export const ResultObjectInvalid = defineError(
  "BATON_EXECUTOR_RESULT_OBJECT_INVALID",
  (callId: string, ref: string) => `the result of call ${callId} refers to ${ref}, which is not its result object`,
  { status: 502 },
);

/** A worker's large result is gone from the object bucket (expired, deleted) and not in the blob store. Retryable: the node may run again. */
export const ResultObjectLost = defineError(
  "BATON_EXECUTOR_RESULT_OBJECT_LOST",
  (callId: string, why: string) => `the large result of call ${callId} cannot be read: ${why}`,
  { status: 502, retryable: true },
);

/** Error texts in events are cut to this many characters (the journal keeps them whole). */
const EVENT_TEXT_MAX = 16_384;
/** Parts smaller than this are not worth a reference of their own. */
const MIN_PART_BYTES = 256;
/** A reference to a blob the store can hold. */
export const BLOB_REF_RE = /^blob:[0-9a-f]{64}$/;
/** Hashes per `store.blobs.use` and `store.blobs.getMany` call (their limit). */
const USE_CHUNK = 1000;

/** An execution received references to blobs that are not stored (pruned, or never stored). Logged: a step that reads one fails the run (BATON_ENGINE_BLOBS_MISSING). */
export const BlobsMissing = defineError(
  "BATON_EXECUTOR_BLOBS_MISSING",
  (executionId: number, hashes: string) => `execution ${executionId} refers to blobs that are not stored: ${hashes}`,
  { status: 500 },
);

/** The execution a value belongs to: blobs stored for it are recorded as its uses. */
export interface Owner {
  tenantId: string;
  executionId: number;
}

export interface LargeValuesOptions {
  store: Store;
  bus: Bus;
  logger: Logger;
  /** Values whose JSON is larger than this many bytes are stored once as blobs and referenced. */
  thresholdBytes: number;
}

/** A tool's answer as the executor gets it (a `tool.result` command, or a recorded result). */
export interface ToolAnswer {
  nodeId: string;
  callId: string;
  ok: boolean;
  durationMs: number;
  output?: JsonValue;
  error?: { code: string; message: string; retryable: boolean };
}

export interface LargeValues {
  /** A value as the engine keeps it: one larger than the threshold becomes a blob reference. */
  canonical(owner: Owner, value: JsonValue): Promise<JsonValue>;
  /** The engine command for a tool's answer, its output canonical (an `object:` reference moved into the blob store). */
  toolResultCommand(owner: Owner, answer: ToolAnswer): Promise<Command>;
  /**
   * A step's result with large node outputs, journal inputs, the final output, event payloads,
   * running nodes' inputs, a multi-call node's calls' arguments and the arguments of the calls
   * it sends referenced. The values replaced in the calls are kept for {@link callArgs}. So is
   * every other part of the context the step changed (compared with `before`, the context it
   * stepped from): a setVariable's `$.path`, an agent's conversation, which the engine writes
   * from values it read through their references. The input is the row's, and left as it is.
   */
  shrinkStep(result: StepResult, definition: WorkflowDefinition, before?: JsonObject): Promise<StepResult>;
  /**
   * The same for a state rebuilt from the journal and the effects it carries out again
   * (`replayJournal`): the replay recomputed inline nodes' outputs and resolved the running
   * nodes' inputs, none of them referenced, so each completed node's output, the execution's
   * output, each running node's input and calls' arguments and each call's arguments is measured.
   */
  shrinkRebuilt(result: StepResult, definition: WorkflowDefinition): Promise<StepResult>;
  /**
   * The arguments to send each call with: those {@link shrinkStep} replaced by references
   * (kept in memory, so a step's calls go out without reading the blob store; returned
   * synchronously), else the effect's own. `fromCheckpoint`: the effects were read back from a
   * checkpoint (an outbox carried out again after a crash) and may hold references; they are
   * resolved from the blob store (one read per 1 000 blobs). A reference to a blob that is not
   * stored throws `BATON_EXECUTOR_BLOBS_MISSING`.
   */
  callArgs(owner: Owner, calls: readonly (Effect & { kind: "callTool" })[], fromCheckpoint: boolean): JsonObject[] | Promise<JsonObject[]>;
  /** The JSON size in bytes of a value measured at or under the threshold (a tool result, a call's arguments), if it was. */
  measured(value: JsonValue): number | undefined;
  /**
   * Records that `owner` uses the blobs `value` refers to: a value made by another execution
   * (a child's input, a child's output, a fork's starting state). Nothing to do, and no round
   * trip, when it has no reference. References to blobs that are not stored are logged
   * (`BATON_EXECUTOR_BLOBS_MISSING`): reading them fails the step that does.
   */
  adopt(owner: Owner, value: JsonValue | undefined): Promise<void>;
}

function jsonSize(v: JsonValue): number {
  return Buffer.byteLength(JSON.stringify(v));
}

type Ref = { $ref: string; size: number; usage?: JsonObject };

/** A reference to `value`, stored as `hash`: with the value's token counts when it reports some. */
function refTo(hash: string, size: number, value: JsonValue): Ref {
  const usage = usageOf(value);
  return { $ref: `blob:${hash}`, size, ...(usage ? { usage } : {}) };
}

type CallEffect = Effect & { kind: "callTool" };

export function createLargeValues(opts: LargeValuesOptions): LargeValues {
  const { store, bus, logger, thresholdBytes } = opts;
  // Objects measured at or under the threshold (tool results, a step's call arguments), with
  // their size: the step completing their node need not measure them again, nor their send.
  const small = new WeakMap<object, number>();
  // The arguments a call effect was made with, before shrinkStep referenced their large parts.
  const whole = new WeakMap<CallEffect, JsonObject>();

  async function put(owner: Owner, value: JsonValue): Promise<Ref> {
    const { hash, size } = await store.blobs.put(owner.tenantId, owner.executionId, value);
    return refTo(hash, size, value);
  }

  async function canonical(owner: Owner, value: JsonValue): Promise<JsonValue> {
    if (value === null || typeof value !== "object") return value;
    const size = jsonSize(value);
    if (size <= thresholdBytes) {
      small.set(value, size);
      return value;
    }
    return put(owner, value);
  }

  async function adopt(owner: Owner, value: JsonValue | undefined): Promise<void> {
    const refs = collectRefs(value);
    if (refs.size === 0) return;
    // A reference that names no possible blob (written by hand into an input) is left alone.
    const hashes = [...refs].filter((r) => BLOB_REF_RE.test(r));
    const missing: string[] = [];
    for (let i = 0; i < hashes.length; i += USE_CHUNK) missing.push(...(await store.blobs.use(owner.tenantId, owner.executionId, hashes.slice(i, i + USE_CHUNK))));
    if (missing.length > 0) {
      const err = BlobsMissing(owner.executionId, missing.join(", "));
      logger.warn("a value refers to blobs that are not stored", { executionId: owner.executionId, code: err.code, error: err.message });
    }
  }

  function failed(a: ToolAnswer, err: { code: string; message: string; retryable: boolean }): Command {
    return { kind: "toolResult", nodeId: a.nodeId, callId: a.callId, ok: false, durationMs: a.durationMs, error: { code: err.code, message: err.message, retryable: err.retryable } };
  }

  /** A worker's large result, from its object into the blob store; the object is deleted once the blob holds it. */
  async function fromObject(owner: Owner, a: ToolAnswer, ref: ObjectRef): Promise<Command> {
    const label = `object:${ref.bucket}/${ref.name}`;
    if (ref.bucket !== LARGE_RESULTS_BUCKET || ref.name !== objectName(a.callId)) return failed(a, ResultObjectInvalid(a.callId, label));
    const objects = bus.objects(ref.bucket);
    const data = await objects.get(ref.name, ref);
    let output: Ref;
    if (data === null) {
      // Moved already (this answer is delivered again, or the worker's record resent); the
      // move recorded the use, which is recorded again in case the blob was stored otherwise.
      const blob = await store.blobs.get(owner.tenantId, ref.sha256);
      if (!blob || (await store.blobs.use(owner.tenantId, owner.executionId, [blob.hash])).length > 0) {
        return failed(a, ResultObjectLost(a.callId, `${label} is gone and no blob holds it`));
      }
      output = refTo(blob.hash, blob.size, blob.data);
    } else {
      if (createHash("sha256").update(data).digest("hex") !== ref.sha256) return failed(a, ResultObjectLost(a.callId, `${label} does not match its sha256`));
      let value: JsonValue;
      try {
        value = JSON.parse(new TextDecoder().decode(data)) as JsonValue;
      } catch (err) {
        return failed(a, ResultObjectLost(a.callId, `${label} is not JSON (${errorMessage(err)})`));
      }
      output = await put(owner, value);
      if (output.$ref === `blob:${ref.sha256}`) {
        await objects.delete(ref.name).catch((err: unknown) => logger.warn("a result object was not deleted; its bucket's max age removes it", { callId: a.callId, error: errorMessage(err) }));
      } else {
        // Kept until it expires: an answer delivered again finds it there, not under the worker's hash.
        logger.warn("a result object's canonical JSON differs from the blob store's", { callId: a.callId, object: ref.sha256, blob: output.$ref });
      }
    }
    return { kind: "toolResult", nodeId: a.nodeId, callId: a.callId, ok: true, output, durationMs: a.durationMs };
  }

  async function toolResultCommand(owner: Owner, a: ToolAnswer): Promise<Command> {
    if (!a.ok) return failed(a, { code: a.error?.code || "BATON_TOOL_FAILED", message: a.error?.message || "tool failed", retryable: a.error?.retryable ?? false });
    const ref = parseObjectRef(a.output);
    if (ref) return fromObject(owner, a, ref);
    return { kind: "toolResult", nodeId: a.nodeId, callId: a.callId, ok: true, output: await canonical(owner, a.output ?? null), durationMs: a.durationMs };
  }

  // ---- after a step ---------------------------------------------------------------------

  /** `v` fitting the threshold: its largest parts referenced first, then all of it when that is not enough. */
  async function fit(owner: Owner, v: JsonValue, size: number): Promise<JsonValue> {
    if (v === null || typeof v !== "object") return put(owner, v);
    const entries: [string | number, JsonValue][] = Array.isArray(v) ? v.map((x, i) => [i, x]) : Object.entries(v);
    const parts = entries.map(([k, x]) => ({ k, x, size: jsonSize(x) })).sort((p, q) => q.size - p.size);
    const copy: Record<string | number, JsonValue> | JsonValue[] = Array.isArray(v) ? [...v] : { ...v };
    let total = size;
    for (const p of parts) {
      if (total <= thresholdBytes || p.size < MIN_PART_BYTES) break;
      if (isBlobRef(p.x)) continue;
      // A blob must not hold references (reads resolve one level): a part that has some is fitted in turn.
      const replaced = collectRefs(p.x).size > 0 ? await fit(owner, p.x, p.size) : await put(owner, p.x);
      total -= p.size - jsonSize(replaced);
      (copy as Record<string | number, JsonValue>)[p.k] = replaced;
    }
    if (total <= thresholdBytes) return copy;
    if (collectRefs(copy).size === 0) return put(owner, copy);
    logger.warn("a value with references stays larger than the threshold", { code: "BATON_EXECUTOR_VALUE_TOO_LARGE", bytes: total, threshold: thresholdBytes });
    return copy;
  }

  function shrinkStep(r: StepResult, definition: WorkflowDefinition, before?: JsonObject): Promise<StepResult> {
    return shrinkResult(r, definition, false, before);
  }

  function shrinkRebuilt(r: StepResult, definition: WorkflowDefinition): Promise<StepResult> {
    return shrinkResult(r, definition, true, {});
  }

  async function shrinkResult(r: StepResult, definition: WorkflowDefinition, rebuilt: boolean, before?: JsonObject): Promise<StepResult> {
    if (r.effects.length === 0 && !rebuilt) return r;
    const owner: Owner = { tenantId: r.state.tenantId, executionId: r.state.executionId };
    const done = new Map<JsonValue, JsonValue>();
    // Whether a value was referenced: only then can a running node's input or call be one of them.
    let referenced = false;
    const shrink = async (v: JsonValue | undefined): Promise<JsonValue | undefined> => {
      if (v === undefined || v === null || (typeof v === "object" && (small.has(v) || isBlobRef(v)))) return v;
      if (typeof v !== "object" && (typeof v !== "string" || v.length * 3 <= thresholdBytes)) return v;
      const known = done.get(v);
      if (known !== undefined) return known;
      const size = jsonSize(v);
      let out: JsonValue = v;
      if (size > thresholdBytes) {
        out = await fit(owner, v, size);
        referenced = true;
      } else if (typeof v === "object") {
        small.set(v, size);
      }
      done.set(v, out);
      return out;
    };
    const cut = (text: string): string => (text.length <= EVENT_TEXT_MAX ? text : `${text.slice(0, EVENT_TEXT_MAX)}… (${text.length - EVENT_TEXT_MAX} more characters in the journal)`);
    let changed = false;
    const effects: Effect[] = [];
    for (const e of r.effects) {
      let next: Effect = e;
      if (e.kind === "journal") {
        const input = await shrink(e.entry.input);
        const output = await shrink(e.entry.output);
        if (input !== e.entry.input || output !== e.entry.output) {
          next = { kind: "journal", entry: { ...e.entry, ...(input !== undefined ? { input } : {}), ...(output !== undefined ? { output } : {}) } };
        }
      } else if (e.kind === "emit") {
        const ev = e.event;
        let out: EngineEvent = ev;
        if (ev.kind === "node.completed" || ev.kind === "execution.completed") {
          const output = (await shrink(ev.output))!;
          if (output !== ev.output) out = { ...ev, output };
        } else if (ev.kind === "execution.emitted") {
          const data = (await shrink(ev.data))!;
          if (data !== ev.data) out = { ...ev, data };
        } else if (ev.kind === "node.failed" && ev.error.length > EVENT_TEXT_MAX) {
          out = { ...ev, error: cut(ev.error) };
        } else if (ev.kind === "execution.failed" && ev.error.message.length > EVENT_TEXT_MAX) {
          out = { ...ev, error: { ...ev.error, message: cut(ev.error.message) } };
        }
        if (out !== ev) next = { ...e, event: out };
      } else if (e.kind === "callTool") {
        // Usually the node's input, measured already as its journal row's; the measure goes with the call.
        const args = await shrink(e.args);
        if (args !== e.args) {
          const call: CallEffect = { ...e, args: asObject(args!) };
          whole.set(call, e.args);
          next = call;
        }
      }
      if (next !== e) changed = true;
      effects.push(next);
    }
    // Each part of the context this step replaced (the engine copies what it changes and
    // shares the rest, so an unchanged part is the same object): a node's output was measured
    // above (the same object, found in `done` or `small`); anything else is measured here.
    // A start step has no context before it: a fork's is its source's, whose values were measured
    // then (references and small values pass at once), with the caller's edits, measured here.
    let context = r.state.context;
    if (context !== before) {
      for (const key of Object.keys(context)) {
        if (key === "input") continue;
        const v = context[key];
        if (before !== undefined && v === before[key]) continue;
        const out = await shrink(v);
        if (out !== v && out !== undefined) context = { ...context, [key]: out };
      }
    }
    if (!changed && !rebuilt && context === r.state.context) return r;
    // The state holds what the events say: each completed node's output where the engine
    // wrote it, and the execution's output.
    let state = context === r.state.context ? r.state : { ...r.state, context };
    for (const e of r.effects) {
      if (e.kind !== "emit") continue;
      const ev = e.event;
      if (ev.kind === "node.completed") {
        const replaced = done.get(ev.output);
        if (replaced === undefined || replaced === ev.output) continue;
        const path = definition.nodes.find((n) => n.id === ev.nodeId)?.output ?? `$.${ev.nodeId}`;
        if (readPath(state.context, path) === ev.output) state = { ...state, context: writePath(state.context, path, replaced) };
      } else if (ev.kind === "execution.completed" && state.output === ev.output) {
        const replaced = done.get(ev.output);
        if (replaced !== undefined) state = { ...state, output: replaced };
      }
    }
    if (rebuilt) {
      for (const n of definition.nodes) {
        if (state.nodes[n.id]?.status !== "completed") continue;
        const path = n.output ?? `$.${n.id}`;
        const v = readPath(state.context, path);
        const out = await shrink(v);
        if (out !== v && out !== undefined) state = { ...state, context: writePath(state.context, path, out) };
      }
      const output = await shrink(state.output);
      if (output !== state.output && output !== undefined) state = { ...state, output };
    }
    // What running nodes keep: the input their journal row got, the calls their fan sends. In a
    // step, both are the values its journal rows and calls had (no measuring); rebuilt, they are measured.
    if (referenced || rebuilt) {
      const keep = rebuilt ? shrink : (v: JsonValue): Promise<JsonValue> => Promise.resolve(done.get(v) ?? v);
      let nodes: Record<string, NodeRun> | undefined;
      for (const [id, run] of Object.entries(state.nodes)) {
        if (run.input === undefined && !run.fan?.calls) continue;
        let next = run;
        if (run.input !== undefined) {
          const input = await keep(run.input);
          if (input !== run.input && input !== undefined) next = { ...next, input };
        }
        if (run.fan?.calls) {
          let changedCalls = false;
          const calls: { tool: string; args: JsonObject }[] = [];
          for (const c of run.fan.calls) {
            const args = await keep(c.args);
            if (args === c.args || args === undefined) calls.push(c);
            else {
              changedCalls = true;
              calls.push({ ...c, args: asObject(args) });
            }
          }
          if (changedCalls) next = { ...next, fan: { ...run.fan, calls } };
        }
        if (next !== run) (nodes ??= { ...state.nodes })[id] = next;
      }
      if (nodes) state = { ...state, nodes };
    }
    return { ...r, state, effects };
  }

  function callArgs(owner: Owner, calls: readonly CallEffect[], fromCheckpoint: boolean): JsonObject[] | Promise<JsonObject[]> {
    const args = calls.map((e) => whole.get(e) ?? e.args);
    if (!fromCheckpoint) return args;
    const refs = new Set<string>();
    calls.forEach((e, i) => {
      if (!whole.has(e)) collectRefs(args[i], refs);
    });
    if (refs.size === 0) return args;
    return (async () => {
      const blobs = new Map<string, JsonValue>();
      const hashes = [...refs].filter((r) => BLOB_REF_RE.test(r)).map((r) => r.slice("blob:".length));
      for (let i = 0; i < hashes.length; i += USE_CHUNK) {
        for (const b of (await store.blobs.getMany(owner.tenantId, hashes.slice(i, i + USE_CHUNK))).values()) blobs.set(`blob:${b.hash}`, b.data);
      }
      const missing = [...refs].filter((r) => !blobs.has(r));
      if (missing.length > 0) throw BlobsMissing(owner.executionId, missing.join(", "));
      return args.map((a, i) => (whole.has(calls[i]!) ? a : asObject(resolveRefs(a, blobs))));
    })();
  }

  function measured(value: JsonValue): number | undefined {
    return value !== null && typeof value === "object" ? small.get(value) : undefined;
  }

  return { canonical, toolResultCommand, shrinkStep, shrinkRebuilt, callArgs, measured, adopt };
}

/** A call's arguments are an object; a value that is not one is sent as `{ value }` (as the engine does). */
function asObject(v: JsonValue): JsonObject {
  return isJsonObject(v) ? v : { value: v };
}
