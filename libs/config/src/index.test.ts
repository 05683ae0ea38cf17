/**
 * Rules: defaults apply when the environment is empty; every invalid variable is
 * reported at once by name; targets parse to known module names only.
 */
import { describe, expect, it } from "@jest/globals";
import { DEFAULT_EVENTS_MAX_AGE_MS } from "@baton/bus";
import { ALL_MODULES, EVENTS_MAX_AGE_SECONDS, loadConfig, parseTarget } from "./index.ts";

describe("loadConfig", () => {
  it("applies defaults", () => {
    const c = loadConfig({});
    expect(c.port).toBe(3000);
    expect(c.prefix).toBe("baton");
    expect(c.target).toEqual(ALL_MODULES);
    expect(c.natsUrl).toBe("nats://127.0.0.1:4222");
    expect(c.embedded).toBe(true);
    expect(Object.isFrozen(c)).toBe(true);
  });
  it("reports every invalid variable at once", () => {
    let err: unknown;
    try {
      loadConfig({ BATON_PORT: "seventy", BATON_BUS_PREFIX: "a.b", BATON_EMBEDDED: "maybe" });
    } catch (e) {
      err = e;
    }
    expect((err as { code: string }).code).toBe("BATON_CONFIG_INVALID");
    const msg = (err as Error).message;
    expect(msg).toContain("BATON_PORT");
    expect(msg).toContain("BATON_BUS_PREFIX");
    expect(msg).toContain("BATON_EMBEDDED");
  });
  it("reads the checkpoint pruning knobs", () => {
    expect(loadConfig({})).toMatchObject({ checkpointHistory: 100, checkpointFinishedTtlSeconds: 604_800 });
    expect(loadConfig({ BATON_CHECKPOINT_HISTORY: "20", BATON_CHECKPOINT_FINISHED_TTL_SECONDS: "3600" })).toMatchObject({
      checkpointHistory: 20,
      checkpointFinishedTtlSeconds: 3600,
    });
    expect(() => loadConfig({ BATON_CHECKPOINT_HISTORY: "0" })).toThrow(/BATON_CHECKPOINT_HISTORY/);
  });
  it("reads the large-result and blob-pruning knobs, and refuses ones that contradict each other", () => {
    expect(loadConfig({})).toMatchObject({ largeResultBytes: 65_536, toolMaxResultBytes: 16 * 1024 * 1024, blobPruneIntervalSeconds: 3600, blobGraceSeconds: 604_800 + 86_400 });
    expect(loadConfig({ BATON_CHECKPOINT_FINISHED_TTL_SECONDS: "1000000" })).toMatchObject({ blobGraceSeconds: 1_000_000 + 86_400 });
    expect(loadConfig({ BATON_BLOB_GRACE_SECONDS: "700000", BATON_BLOB_PRUNE_INTERVAL_SECONDS: "0" })).toMatchObject({ blobGraceSeconds: 700_000, blobPruneIntervalSeconds: 0 });
    expect(() => loadConfig({ BATON_BLOB_GRACE_SECONDS: "650000", BATON_CHECKPOINT_FINISHED_TTL_SECONDS: "700000" })).toThrow(/BATON_BLOB_GRACE_SECONDS: must be at least BATON_CHECKPOINT_FINISHED_TTL_SECONDS/);
    expect(() => loadConfig({ BATON_LARGE_RESULT_BYTES: "100000", BATON_TOOL_MAX_RESULT_BYTES: "2000" })).toThrow(/BATON_TOOL_MAX_RESULT_BYTES: must be at least BATON_LARGE_RESULT_BYTES/);
  });
  it("keeps blobs at least as long as the events stream keeps events that refer to them", () => {
    // The events stream's max age is the bus's; every process sets it on the stream.
    expect(EVENTS_MAX_AGE_SECONDS * 1000).toBe(DEFAULT_EVENTS_MAX_AGE_MS);
    // A short checkpoint TTL no longer shortens the default grace below the events' age.
    expect(loadConfig({ BATON_CHECKPOINT_FINISHED_TTL_SECONDS: "3600" })).toMatchObject({ blobGraceSeconds: EVENTS_MAX_AGE_SECONDS + 86_400 });
    expect(loadConfig({ BATON_CHECKPOINT_FINISHED_TTL_SECONDS: "3600", BATON_BLOB_GRACE_SECONDS: String(EVENTS_MAX_AGE_SECONDS) })).toMatchObject({ blobGraceSeconds: EVENTS_MAX_AGE_SECONDS });
    expect(() => loadConfig({ BATON_CHECKPOINT_FINISHED_TTL_SECONDS: "3600", BATON_BLOB_GRACE_SECONDS: "86400" })).toThrow(
      /BATON_BLOB_GRACE_SECONDS: must be at least 604800 \(7 days\), how long the events stream keeps an event/,
    );
    // Both rules at once.
    expect(() => loadConfig({ BATON_BLOB_GRACE_SECONDS: "60" })).toThrow(/CHECKPOINT_FINISHED_TTL_SECONDS[\s\S]*events stream/);
  });
  it("reads the recovery sweep interval, 0 meaning only on start", () => {
    expect(loadConfig({})).toMatchObject({ recoverySweepSeconds: 60 });
    expect(loadConfig({ BATON_RECOVERY_SWEEP_SECONDS: "0" })).toMatchObject({ recoverySweepSeconds: 0 });
    expect(loadConfig({ BATON_RECOVERY_SWEEP_SECONDS: "5" })).toMatchObject({ recoverySweepSeconds: 5 });
    expect(() => loadConfig({ BATON_RECOVERY_SWEEP_SECONDS: "-1" })).toThrow(/BATON_RECOVERY_SWEEP_SECONDS/);
  });
  it("reads the learned-sequence retention, off by default", () => {
    expect(loadConfig({})).toMatchObject({ learnedRetentionDays: 0 });
    expect(loadConfig({ BATON_LEARNED_RETENTION_DAYS: "90" })).toMatchObject({ learnedRetentionDays: 90 });
    expect(() => loadConfig({ BATON_LEARNED_RETENTION_DAYS: "-1" })).toThrow(/BATON_LEARNED_RETENTION_DAYS/);
  });
  it("reads the execution retention, off by default", () => {
    expect(loadConfig({})).toMatchObject({ executionRetentionDays: 0 });
    expect(loadConfig({ BATON_EXECUTION_RETENTION_DAYS: "30" })).toMatchObject({ executionRetentionDays: 30 });
    expect(() => loadConfig({ BATON_EXECUTION_RETENTION_DAYS: "-1" })).toThrow(/BATON_EXECUTION_RETENTION_DAYS/);
    expect(() => loadConfig({ BATON_EXECUTION_RETENTION_DAYS: "1.5" })).toThrow(/BATON_EXECUTION_RETENTION_DAYS/);
  });
  it("parses targets", () => {
    expect(parseTarget("gateway, executor")).toEqual(["gateway", "executor"]);
    expect(parseTarget("all")).toEqual([...ALL_MODULES]);
    expect(() => parseTarget("gateway,bogus")).toThrow(/bogus/);
  });
});
