/**
 * Where a fork starts (time travel): a source execution's checkpoint version, without what
 * a checkpoint keeps beside the engine state, and the context edits. The gateway keeps it in
 * the fork's row (`checkpoint.forkStart`) when it creates the fork, so the run starts, and is
 * rebuilt from its journal, from the state the request saw, whatever Redis loses meanwhile.
 */
import type { JsonObject, JsonValue } from "./json.ts";
import { isJsonObject } from "./json.ts";
import type { Command, ExecutionState } from "./state.ts";

export type ForkStart = NonNullable<(Command & { kind: "start" })["fork"]>;

/** Keys a checkpoint keeps beside the engine state (the executor's outbox); no part of a fork. */
const BESIDE_STATE = new Set(["outbox", "carried"]);

/** A fork's start from a source checkpoint version's state (as the checkpoint store returns it). */
export function forkStartOf(source: ExecutionState, executionId: number, version: number, contextPatch?: JsonObject): ForkStart {
  const state = Object.fromEntries(Object.entries(source).filter(([k]) => !BESIDE_STATE.has(k))) as unknown as ExecutionState;
  return { state, executionId, version, ...(contextPatch && Object.keys(contextPatch).length > 0 ? { contextPatch } : {}) };
}

/** How a fork's start is kept in its row's `checkpoint` column: `{ forkStart: <this> }`. */
export function forkStartRecord(fork: ForkStart): JsonObject {
  return {
    executionId: fork.executionId, version: fork.version, state: fork.state as unknown as JsonObject,
    ...(fork.contextPatch ? { contextPatch: fork.contextPatch } : {}),
  };
}

/** The fork start kept in a row's `checkpoint` column, or undefined when it holds none. */
export function keptForkStart(column: JsonValue | null): ForkStart | undefined {
  const kept = isJsonObject(column) ? column.forkStart : undefined;
  if (!isJsonObject(kept) || !isJsonObject(kept.state) || typeof kept.executionId !== "number" || typeof kept.version !== "number") return undefined;
  return {
    state: kept.state as unknown as ExecutionState, executionId: kept.executionId, version: kept.version,
    ...(isJsonObject(kept.contextPatch) ? { contextPatch: kept.contextPatch } : {}),
  };
}
