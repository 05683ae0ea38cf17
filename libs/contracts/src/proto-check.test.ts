// Rules checked here — `scripts/proto.ts check`, the CI guard that generated code is current:
// - on the committed tree it passes (exit 0): proto/ lints, is formatted, and
//   libs/contracts/src/gen equals a fresh `buf generate`;
// - against a copy with an edited, a deleted and an extra file it fails (exit 1) and names
//   each of them;
// - it runs offline from node_modules only (buf's platform binary, local protoc-gen-es).
import { afterEach, describe, expect, it } from "@jest/globals";
import { spawnSync } from "node:child_process";
import { appendFileSync, cpSync, mkdtempSync, rmSync, unlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../../..");
const SCRIPT = join(ROOT, "scripts", "proto.ts");
const GEN = join(ROOT, "libs", "contracts", "src", "gen");

function runCheck(...args: string[]) {
  return spawnSync(process.execPath, [SCRIPT, "check", ...args], { cwd: ROOT, encoding: "utf8", timeout: 60_000 });
}

describe("scripts/proto.ts check", () => {
  let tmp: string | undefined;
  afterEach(() => {
    if (tmp !== undefined) rmSync(tmp, { recursive: true, force: true });
    tmp = undefined;
  });

  it("passes on the committed tree", () => {
    const res = runCheck();
    expect({ status: res.status, stderr: res.stderr }).toEqual({ status: 0, stderr: expect.any(String) });
    expect(res.stdout).toContain("up to date");
  });

  it("names stale, missing and extra files", () => {
    tmp = mkdtempSync(join(tmpdir(), "baton-gen-"));
    cpSync(GEN, tmp, { recursive: true });
    appendFileSync(join(tmp, "baton/v1/events_pb.ts"), "\n// edited by hand\n");
    unlinkSync(join(tmp, "baton/v1/rpc_pb.ts"));
    writeFileSync(join(tmp, "baton/v1/old_pb.ts"), "export {};\n");
    const res = runCheck("--gen-dir", tmp);
    expect(res.status).toBe(1);
    expect(res.stderr).toMatch(/stale \S*baton\/v1\/events_pb\.ts/);
    expect(res.stderr).toMatch(/missing \S*baton\/v1\/rpc_pb\.ts/);
    expect(res.stderr).toMatch(/extra \S*baton\/v1\/old_pb\.ts/);
    expect(res.stderr).not.toMatch(/commands_pb\.ts|common_pb\.ts/);
  });
});
