/**
 * The `./baton` entry script: how it finds Node 24 must not depend on NODE_OPTIONS, which
 * the user sets for the command that follows, not for the version probe.
 */
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { describe, expect, it } from "@jest/globals";

const root = join(import.meta.dirname, "..");

function baton(nodeOptions: string, ...args: string[]): { status: number | null; stdout: string; stderr: string } {
  const res = spawnSync(join(root, "baton"), args, { cwd: root, env: { ...process.env, NODE_OPTIONS: nodeOptions }, encoding: "utf8", timeout: 60_000 });
  return { status: res.status, stdout: res.stdout, stderr: res.stderr };
}

describe("./baton node", () => {
  it("passes NODE_OPTIONS on to the command", () => {
    const res = baton("--max-old-space-size=300", "node", "-p", "[process.versions.node.split('.')[0], process.env.NODE_OPTIONS].join(' ')");
    expect(res.stderr).not.toContain("installing Node");
    expect(res.status).toBe(0);
    const [major, options] = res.stdout.trim().split(" ");
    expect(Number(major)).toBeGreaterThanOrEqual(24);
    expect(options).toBe("--max-old-space-size=300");
  });

  it("leaves a flag Node refuses in NODE_OPTIONS to Node's own error, without reinstalling Node", () => {
    const res = baton("--trace-gc", "node", "-e", "0");
    expect(res.stderr).not.toContain("installing Node");
    expect(res.stderr).toContain("--trace-gc is not allowed in NODE_OPTIONS");
    expect(res.status).not.toBe(0);
  });
});
