/**
 * The conformance suite of the {@link CheckpointStore} contract. Every backend runs
 * it against its real server:
 *
 * ```ts
 * checkpointStoreConformance("redis", async () => {
 *   const redis = createRedis(url);
 *   const prefix = `test:${randomUUID()}`;
 *   return { store: redisCheckpointStore(redis, { prefix }), cleanup: async () => { ...; await redis.quit(); } };
 * });
 * ```
 *
 * Rules checked: the first write needs expectedVersion 0; versions go up by one; a
 * stale writer gets `BATON_CHECKPOINT_CONFLICT` with `{ expected, actual }` and
 * changes nothing; of concurrent writers with the same expected version exactly one
 * wins; `get` returns what was put (deep-equal); history is newest first and
 * bounded; every kept version — read with `getVersion` or `history` — is deep-equal
 * to what was put then, also when states change in nested objects and arrays across
 * many versions (so across a delta store's snapshot boundaries); versions never
 * written or pruned read as null; delete removes checkpoint and history; executions
 * are independent; a state that is not JSON is refused.
 */
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import type { CheckpointStore } from "./types.ts";

/** What a backend's factory hands the suite. */
export interface ConformanceSubject {
  store: CheckpointStore;
  /** Removes everything the store wrote and closes its connections. */
  cleanup(): Promise<void>;
}

/** Options of {@link checkpointStoreConformance}. */
export interface ConformanceOptions {
  /**
   * The history limit the factory's store was built with.
   * @default 100
   */
  historyLimit?: number;
  /**
   * How many versions the time-travel test writes; make it several times the store's
   * snapshot interval, if it has one.
   * @default 45
   */
  timeTravelVersions?: number;
  /**
   * How many writers race for the same version.
   * @default 20
   */
  concurrentWriters?: number;
}

const CONFLICT = "BATON_CHECKPOINT_CONFLICT";

async function caught(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (err) {
    return err;
  }
  throw new Error("expected the promise to reject");
}

/** Registers the contract's tests (jest `describe`/`it`) for one backend. */
export function checkpointStoreConformance(
  name: string,
  factory: () => Promise<ConformanceSubject>,
  options: ConformanceOptions = {},
): void {
  const historyLimit = options.historyLimit ?? 100;
  const travelVersions = options.timeTravelVersions ?? 45;
  const writers = options.concurrentWriters ?? 20;

  describe(`CheckpointStore conformance: ${name}`, () => {
    let subject: ConformanceSubject | undefined;
    // A random base keeps this run's executions apart from any other user of the backend.
    let nextId = 1_000_000 + Math.floor(Math.random() * 1_000_000_000);
    const newExecution = (): number => nextId++;
    const store = (): CheckpointStore => {
      if (!subject) throw new Error("factory did not run");
      return subject.store;
    };

    beforeAll(async () => {
      subject = await factory();
    });
    afterAll(async () => {
      await subject?.cleanup();
    });

    it("has no checkpoint and no history for an unknown execution", async () => {
      const id = newExecution();
      expect(await store().get(id)).toBeNull();
      expect(await store().history(id)).toEqual([]);
    });

    it("needs expectedVersion 0 for the first write, and refuses 0 after it", async () => {
      const id = newExecution();
      const early = await caught(store().put(id, { step: 1 }, 1));
      expect(early).toMatchObject({ code: CONFLICT, status: 409, retryable: true, details: { expected: 1, actual: 0 } });
      expect(await store().get(id)).toBeNull();

      const first = await store().put(id, { step: 1 }, 0);
      expect(first).toMatchObject({ executionId: id, version: 1, state: { step: 1 } });

      const again = await caught(store().put(id, { step: 2 }, 0));
      expect(again).toMatchObject({ code: CONFLICT, details: { expected: 0, actual: 1 } });
    });

    it("raises the version by exactly one per write, with an ISO timestamp", async () => {
      const id = newExecution();
      let previous = 0;
      for (let i = 0; i < 5; i++) {
        const cp = await store().put(id, { i }, previous);
        expect(cp.version).toBe(previous + 1);
        expect(new Date(cp.updatedAt).toISOString()).toBe(cp.updatedAt);
        previous = cp.version;
      }
      const latest = await store().get(id);
      expect(latest).toMatchObject({ executionId: id, version: 5, state: { i: 4 } });
    });

    it("refuses a stale writer and leaves the stored state unchanged", async () => {
      const id = newExecution();
      await store().put(id, { owner: "nobody" }, 0);
      const seenByBoth = 1;
      await store().put(id, { owner: "a" }, seenByBoth);
      const err = await caught(store().put(id, { owner: "b" }, seenByBoth));
      expect(err).toMatchObject({ code: CONFLICT, status: 409, retryable: true, details: { expected: 1, actual: 2 } });
      expect(await store().get(id)).toMatchObject({ version: 2, state: { owner: "a" } });
      expect((await store().history(id)).map((c) => c.version)).toEqual([2, 1]);
    });

    it(`lets exactly one of ${writers} concurrent writers with the same expected version win`, async () => {
      const id = newExecution();
      await store().put(id, { writer: -1 }, 0);
      const results = await Promise.allSettled(
        Array.from({ length: writers }, (_, writer) => store().put(id, { writer }, 1)),
      );
      const won = results.filter((r) => r.status === "fulfilled");
      const lost = results.filter((r) => r.status === "rejected");
      expect(won).toHaveLength(1);
      expect(lost).toHaveLength(writers - 1);
      for (const r of lost) expect(r.reason).toMatchObject({ code: CONFLICT, details: { expected: 1, actual: 2 } });
      const winner = won[0]!.value;
      expect(winner.version).toBe(2);
      expect(await store().get(id)).toMatchObject({ version: 2, state: winner.state });
      expect(await store().history(id)).toHaveLength(2);
    });

    it("returns from get exactly the state that was put", async () => {
      const id = newExecution();
      const state = {
        text: 'quotes " and \\ backslashes, newline\nand unicode ✓ 😀',
        numbers: [0, -1, 1.5, 1e21, Number.MAX_SAFE_INTEGER],
        nested: { deep: { deeper: [{ a: null }, true, false, ""] } },
        empty: {},
      };
      const put = await store().put(id, state, 0);
      expect(put.state).toEqual(state);
      const got = await store().get(id);
      expect(got?.state).toEqual(state);
      expect(got?.updatedAt).toBe(put.updatedAt);
      expect((await store().history(id))[0]?.state).toEqual(state);

      const scalar = newExecution();
      await store().put(scalar, "just a string", 0);
      expect((await store().get(scalar))?.state).toBe("just a string");
    });

    it(`keeps history newest first and bounded to ${historyLimit} versions`, async () => {
      const id = newExecution();
      const writes = historyLimit + 5;
      for (let v = 0; v < writes; v++) await store().put(id, { v: v + 1 }, v);

      const all = await store().history(id);
      expect(all).toHaveLength(historyLimit);
      expect(all.map((c) => c.version)).toEqual(Array.from({ length: historyLimit }, (_, i) => writes - i));
      for (const cp of all) expect(cp).toMatchObject({ executionId: id, state: { v: cp.version } });
      expect(all[0]).toEqual(await store().get(id));

      const three = await store().history(id, { limit: 3 });
      expect(three.map((c) => c.version)).toEqual([writes, writes - 1, writes - 2]);
    });

    it(`rebuilds every kept version of ${travelVersions} nested changes with getVersion and history`, async () => {
      const id = newExecution();
      const written: unknown[] = [];
      let state: Record<string, unknown> = { input: { q: "same every time", big: "x".repeat(2_000) }, steps: [], vars: {} };
      for (let v = 1; v <= travelVersions; v++) {
        const steps = (state.steps as unknown[]).slice(v % 7 === 0 ? 1 : 0); // sometimes shrink
        steps.push({ node: `n${v}`, out: v % 3 === 0 ? [v, { deep: v }] : null });
        const vars: Record<string, unknown> = { ...(state.vars as Record<string, unknown>), [`k${v % 5}`]: v };
        if (v % 4 === 0) delete vars[`k${(v + 1) % 5}`];
        state = { ...state, steps, vars, cursor: v % 2 === 0 ? { at: v } : [v], ...(v % 6 === 0 ? { flag: true } : {}) };
        if (v % 6 !== 0) delete state.flag;
        await store().put(id, state, v - 1);
        written.push(JSON.parse(JSON.stringify(state)));
      }
      const kept = Math.min(travelVersions, historyLimit);
      const history = await store().history(id);
      expect(history.map((c) => c.version)).toEqual(Array.from({ length: kept }, (_, i) => travelVersions - i));
      for (const cp of history) expect(cp.state).toEqual(written[cp.version - 1]);
      for (let v = travelVersions; v > travelVersions - kept; v--) {
        const cp = await store().getVersion(id, v);
        expect(cp).toMatchObject({ executionId: id, version: v });
        expect(cp?.state).toEqual(written[v - 1]);
        expect(cp?.updatedAt).toBe(history[travelVersions - v]?.updatedAt);
      }
      expect(await store().getVersion(id, travelVersions + 1)).toBeNull();
      if (kept < travelVersions) expect(await store().getVersion(id, travelVersions - kept)).toBeNull();
      expect(await store().getVersion(newExecution(), 1)).toBeNull();
      // What a reader gets is its own: changing it changes nothing stored.
      const mine = (await store().getVersion(id, travelVersions))!.state as Record<string, unknown>;
      mine.vars = "changed";
      expect((await store().get(id))?.state).toEqual(written[travelVersions - 1]);
    });

    it("deletes checkpoint and history, after which the execution starts again at version 1", async () => {
      const id = newExecution();
      await store().put(id, { a: 1 }, 0);
      await store().put(id, { a: 2 }, 1);
      await store().delete(id);
      expect(await store().get(id)).toBeNull();
      expect(await store().history(id)).toEqual([]);
      expect(await store().getVersion(id, 1)).toBeNull();
      expect((await store().put(id, { a: 3 }, 0)).version).toBe(1);
      expect((await store().put(id, { a: 4 }, 1)).version).toBe(2);
      expect((await store().getVersion(id, 1))?.state).toEqual({ a: 3 });
      await store().delete(newExecution());
    });

    it("keeps executions independent", async () => {
      const a = newExecution();
      const b = newExecution();
      await store().put(a, { who: "a" }, 0);
      await store().put(a, { who: "a2" }, 1);
      expect(await store().get(b)).toBeNull();
      const first = await store().put(b, { who: "b" }, 0);
      expect(first.version).toBe(1);
      await caught(store().put(b, { who: "stale" }, 0));
      expect(await store().get(a)).toMatchObject({ version: 2, state: { who: "a2" } });
      await store().delete(a);
      expect(await store().get(b)).toMatchObject({ version: 1, state: { who: "b" } });
      expect(await store().history(b)).toHaveLength(1);
    });

    it("refuses a state that is not JSON and stores nothing", async () => {
      const id = newExecution();
      const cyclic: Record<string, unknown> = {};
      cyclic.self = cyclic;
      for (const bad of [undefined, () => 1, 10n, cyclic]) {
        expect(await caught(store().put(id, bad, 0))).toMatchObject({ code: "BATON_CHECKPOINT_INVALID_STATE", status: 400 });
      }
      expect(await store().get(id)).toBeNull();
    });
  });
}
