/**
 * Generates and checks the TypeScript of Baton's wire contract (proto/ → libs/contracts/src/gen).
 *
 *   node scripts/proto.ts generate              lint proto/, regenerate libs/contracts/src/gen
 *   node scripts/proto.ts check [--gen-dir D]   lint, check formatting, regenerate into a temp dir and
 *                                               exit 1 naming every stale, missing or extra file of D
 *                                               (default libs/contracts/src/gen)
 *
 * Works offline and from a plain `npm ci` (install scripts blocked): buf runs from its
 * platform package (@bufbuild/buf-<os>-<arch>), not through the postinstall step; the plugin
 * is the local protoc-gen-es from node_modules; the well-known types ship inside buf.
 * buf.gen.yaml is the one source of generation settings.
 */
import { spawnSync } from "node:child_process";
import { accessSync, chmodSync, constants, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { delimiter, dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
/** Must match `out` in buf.gen.yaml. */
const GEN_DIR = "libs/contracts/src/gen";

const PLATFORM_PACKAGES: Record<string, string> = {
  "darwin arm64": "@bufbuild/buf-darwin-arm64",
  "darwin x64": "@bufbuild/buf-darwin-x64",
  "linux arm64": "@bufbuild/buf-linux-aarch64",
  "linux arm": "@bufbuild/buf-linux-armv7",
  "linux x64": "@bufbuild/buf-linux-x64",
  "win32 arm64": "@bufbuild/buf-win32-arm64",
  "win32 x64": "@bufbuild/buf-win32-x64",
};

/** The command that runs buf: the native binary of the platform package, else the npm shim under this Node. */
function bufCommand(): string[] {
  const require = createRequire(join(ROOT, "package.json"));
  const pkg = PLATFORM_PACKAGES[`${process.platform} ${process.arch}`];
  if (pkg !== undefined) {
    try {
      const bin = require.resolve(`${pkg}/bin/buf${process.platform === "win32" ? ".exe" : ""}`);
      if (process.platform !== "win32") {
        try {
          accessSync(bin, constants.X_OK);
        } catch {
          chmodSync(bin, 0o755);
        }
      }
      return [bin];
    } catch {
      // fall through to the shim
    }
  }
  const shim = join(dirname(require.resolve("@bufbuild/buf/package.json")), "bin", "buf");
  // The postinstall step may have replaced the JS shim with the native binary.
  const isScript = readFileSync(shim).subarray(0, 2).toString() === "#!";
  return isScript ? [process.execPath, shim] : [shim];
}

function runBuf(args: string[]): { status: number; stdout: string; stderr: string } {
  const [cmd, ...pre] = bufCommand() as [string, ...string[]];
  const res = spawnSync(cmd, [...pre, ...args], {
    cwd: ROOT,
    encoding: "utf8",
    env: {
      ...process.env,
      // protoc-gen-es is a `#!/usr/bin/env node` script: make it find this Node (>= 22) first.
      PATH: [dirname(process.execPath), join(ROOT, "node_modules", ".bin"), process.env.PATH ?? ""].join(delimiter),
    },
  });
  if (res.error) throw res.error;
  return { status: res.status ?? 1, stdout: res.stdout, stderr: res.stderr };
}

function mustBuf(args: string[]): string {
  const res = runBuf(args);
  if (res.status !== 0) {
    process.stderr.write(res.stdout + res.stderr);
    throw new Error(`buf ${args.join(" ")} failed with exit code ${res.status}`);
  }
  return res.stdout;
}

function listFiles(dir: string): string[] {
  if (!existsSync(dir)) return [];
  const out: string[] = [];
  const walk = (d: string): void => {
    for (const entry of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, entry.name);
      if (entry.isDirectory()) walk(p);
      else if (entry.isFile()) out.push(relative(dir, p).split("\\").join("/"));
    }
  };
  walk(dir);
  return out.sort();
}

/** Differences between freshly generated files and the committed ones. */
export function compareTrees(expectedDir: string, actualDir: string): { stale: string[]; missing: string[]; extra: string[] } {
  const expected = listFiles(expectedDir);
  const actual = new Set(listFiles(actualDir));
  const stale: string[] = [];
  const missing: string[] = [];
  for (const f of expected) {
    if (!actual.has(f)) missing.push(f);
    else if (!readFileSync(join(expectedDir, f)).equals(readFileSync(join(actualDir, f)))) stale.push(f);
    actual.delete(f);
  }
  return { stale, missing, extra: [...actual].sort() };
}

/** Lints proto/ and regenerates libs/contracts/src/gen (buf.gen.yaml has `clean: true`). */
export function generateProto(): void {
  mustBuf(["lint"]);
  mustBuf(["generate"]);
  console.log(`proto: generated ${listFiles(join(ROOT, GEN_DIR)).length} files into ${GEN_DIR}`);
}

/**
 * Lints and format-checks proto/, regenerates into a temp dir and compares with `genDir`;
 * prints every stale, missing or extra file. Returns the exit code: 0 when current, 1 otherwise.
 */
export function checkProto(genDir: string = join(ROOT, GEN_DIR)): number {
  let failed = false;
  const lint = runBuf(["lint"]);
  if (lint.status !== 0) {
    failed = true;
    console.error(`proto: buf lint failed:\n${lint.stdout}${lint.stderr}`);
  }
  const format = runBuf(["format", "--diff", "--exit-code"]);
  if (format.status !== 0) {
    failed = true;
    console.error(`proto: proto files are not formatted (run: node node_modules/.bin/buf format -w):\n${format.stdout}${format.stderr}`);
  }
  const tmp = mkdtempSync(join(tmpdir(), "baton-proto-"));
  try {
    mustBuf(["generate", "--output", tmp]);
    const { stale, missing, extra } = compareTrees(join(tmp, GEN_DIR), genDir);
    const rel = (f: string): string => relative(ROOT, join(genDir, f)).split("\\").join("/");
    for (const f of stale) console.error(`proto: stale ${rel(f)}`);
    for (const f of missing) console.error(`proto: missing ${rel(f)}`);
    for (const f of extra) console.error(`proto: extra ${rel(f)} (no longer generated)`);
    if (stale.length + missing.length + extra.length > 0) {
      failed = true;
      console.error("proto: generated code is out of date; run: ./baton node scripts/proto.ts generate");
    }
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
  if (!failed) console.log(`proto: ${relative(ROOT, genDir) || "."} is up to date`);
  return failed ? 1 : 0;
}

function main(argv: string[]): number {
  const [cmd, ...rest] = argv;
  if (cmd === "generate" && rest.length === 0) {
    generateProto();
    return 0;
  }
  if (cmd === "check") {
    let genDir = join(ROOT, GEN_DIR);
    if (rest[0] === "--gen-dir" && rest[1] !== undefined && rest.length === 2) genDir = resolve(rest[1]);
    else if (rest.length > 0) return usage();
    if (existsSync(genDir) && !statSync(genDir).isDirectory()) throw new Error(`${genDir} is not a directory`);
    return checkProto(genDir);
  }
  return usage();
}

function usage(): number {
  console.error("usage: node scripts/proto.ts generate | check [--gen-dir DIR]");
  return 2;
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  try {
    process.exitCode = main(process.argv.slice(2));
  } catch (err) {
    console.error(`proto: ${err instanceof Error ? err.message : String(err)}`);
    process.exitCode = 1;
  }
}
