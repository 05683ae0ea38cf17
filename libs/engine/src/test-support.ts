/** Helpers of the engine's tests (not part of the package's API). */
import { validateWorkflow } from "./validate.ts";
import type { WorkflowDefinition } from "./model.ts";

/** A definition that validation accepts, as the engine takes it; throws with the problems otherwise. */
export function def(d: unknown): WorkflowDefinition {
  const v = validateWorkflow(d);
  if (!v.ok) throw new Error(JSON.stringify(v.errors));
  return v.workflow;
}

/**
 * Freezes a value deeply. The tests freeze every state before stepping from it: a step must
 * not change the state it is given (it shares the context and a fan's items with its result,
 * see workingCopy in step.ts), and in a module (strict mode) a change of a frozen object throws.
 */
export function deepFreeze<T>(v: T): T {
  if (typeof v === "object" && v !== null && !Object.isFrozen(v)) {
    Object.freeze(v);
    for (const x of Object.values(v)) deepFreeze(x);
  }
  return v;
}
