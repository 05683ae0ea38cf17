/**
 * The whole test suite, as `./baton test` runs it (and CI through .ci/run):
 * type-check, lint, generated-code freshness, manifest checks, then every jest
 * test against the real NATS, Redis and Postgres. Ends with one line
 * `N passed, N failed` counting jest tests plus the static checks.
 *
 *   node scripts/test.ts [jest args…]   e.g. `./baton test libs/engine`
 */
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";

const root = join(import.meta.dirname, "..");
const jestArgs = process.argv.slice(2);
const focused = jestArgs.some((a) => !a.startsWith("-"));

const checks: [string, string, string[]][] = [
  ["typecheck", process.execPath, [join(root, "node_modules/typescript/bin/tsc"), "-p", "tsconfig.json"]],
  ["lint", process.execPath, [join(root, "node_modules/eslint/bin/eslint.js"), "--max-warnings=0", "."]],
  ["generated protobuf code is current", process.execPath, ["scripts/proto.ts", "check"]],
  ["deployment manifests", process.execPath, ["infra/check-manifests.ts"]],
];

let passed = 0;
let failed = 0;
if (!focused) {
  for (const [name, cmd, args] of checks) {
    if (!existsSync(join(root, args[0]!)) && !args[0]!.startsWith("/")) {
      console.log(`✕ ${name}: ${args[0]} is missing`);
      failed++;
      continue;
    }
    const r = spawnSync(cmd, args, { cwd: root, stdio: "inherit" });
    if (r.status === 0) {
      console.log(`✓ ${name}`);
      passed++;
    } else {
      console.log(`✕ ${name}`);
      failed++;
    }
  }
}

const out = join(root, ".ci-results.json");
rmSync(out, { force: true });
spawnSync(process.execPath, ["--experimental-vm-modules", "--no-warnings=ExperimentalWarning", join(root, "node_modules/jest/bin/jest.js"), "--json", `--outputFile=${out}`, ...jestArgs], {
  cwd: root,
  stdio: "inherit",
});
if (existsSync(out)) {
  const r = JSON.parse(readFileSync(out, "utf8")) as { numPassedTests: number; numFailedTests: number; numRuntimeErrorTestSuites: number };
  passed += r.numPassedTests;
  failed += r.numFailedTests + r.numRuntimeErrorTestSuites;
} else {
  console.log("✕ jest produced no results");
  failed++;
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed > 0 ? 1 : 0);
