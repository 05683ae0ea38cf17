import { describe, expect, it } from "@jest/globals";
import type { ExecutionState } from "./state.ts";
import { forkStartOf, forkStartRecord, keptForkStart } from "./fork.ts";

const source = { v: 1, status: "paused", context: { input: { q: 1 }, a: 2 }, nodes: {}, outbox: [{ kind: "journal" }], carried: [] } as unknown as ExecutionState;

describe("fork starts", () => {
  it("leave out what a checkpoint keeps beside the state, and an empty patch", () => {
    const f = forkStartOf(source, 9, 4, {});
    expect(f).toEqual({ executionId: 9, version: 4, state: { v: 1, status: "paused", context: { input: { q: 1 }, a: 2 }, nodes: {} } });
    expect(forkStartOf(source, 9, 4, { "$.a": 3 }).contextPatch).toEqual({ "$.a": 3 });
  });

  it("round-trip through a row's checkpoint column; a column without one gives undefined", () => {
    const f = forkStartOf(source, 9, 4, { "$.a": 3 });
    expect(keptForkStart({ forkStart: forkStartRecord(f) })).toEqual(f);
    expect(keptForkStart(null)).toBeUndefined();
    expect(keptForkStart({ forkStart: { executionId: 9, version: "4", state: {} } })).toBeUndefined();
    expect(keptForkStart({ other: 1 })).toBeUndefined();
  });
});
