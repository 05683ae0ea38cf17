/**
 * Code generation run by `./baton` set-up on every start and test:
 *
 *   node scripts/generate.ts prisma     generate the Prisma client of @baton/store
 *   node scripts/generate.ts            every target (currently: prisma)
 *
 * Each target is skipped, silently, when its output is up to date: a stamp beside the
 * output holds the hash of everything the output is generated from.
 *
 * Prisma: `prisma generate` needs no database and no engine binary (the client uses the
 * query compiler), but the CLI still resolves a schema-engine binary at start-up, which
 * cannot be downloaded here. Pointing PRISMA_SCHEMA_ENGINE_BINARY at a stub executable
 * (which fails loudly if ever run) satisfies it.
 */
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const STORE = join(ROOT, "libs/store");
const PRISMA_OUTPUT = join(STORE, "src/generated");
const PRISMA_STAMP = join(PRISMA_OUTPUT, ".baton-stamp");
const CACHE = join(ROOT, "node_modules/.cache/baton");
const LOCK_STALE_MS = 5 * 60_000;
const LOCK_WAIT_MS = 3 * 60_000;

function packageVersion(name: string): string {
  const file = join(ROOT, "node_modules", name, "package.json");
  return existsSync(file) ? ((JSON.parse(readFileSync(file, "utf8")) as { version?: string }).version ?? "?") : "missing";
}

/** Hash of the generator's inputs: schema, config and the versions of the tools. */
function prismaInputsHash(): string {
  const h = createHash("sha256");
  for (const file of ["prisma/schema.prisma", "prisma.config.ts"]) {
    h.update(file).update("\0").update(readFileSync(join(STORE, file))).update("\0");
  }
  h.update(`prisma@${packageVersion("prisma")} @prisma/client@${packageVersion("@prisma/client")}`);
  return h.digest("hex");
}

function upToDate(stamp: string, hash: string, mustExist: string): boolean {
  return existsSync(mustExist) && existsSync(stamp) && readFileSync(stamp, "utf8").trim() === hash;
}

/** A cross-process lock (mkdir is atomic), so parallel set-ups do not generate over each other. */
async function withLock<T>(name: string, fn: () => T): Promise<T> {
  const lock = join(CACHE, `${name}.lock`);
  mkdirSync(CACHE, { recursive: true });
  const deadline = Date.now() + LOCK_WAIT_MS;
  for (;;) {
    try {
      mkdirSync(lock);
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
      try {
        if (Date.now() - statSync(lock).mtimeMs > LOCK_STALE_MS) rmSync(lock, { recursive: true, force: true });
      } catch {
        // Released between the two calls.
      }
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${relative(ROOT, lock)}; remove it if no other set-up is running`);
      await sleep(100);
    }
  }
  try {
    return fn();
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}

/** An executable that stands in for Prisma's schema engine and refuses to do anything. */
function schemaEngineStub(): string {
  const stub = join(CACHE, "schema-engine-unavailable");
  if (!existsSync(stub)) {
    mkdirSync(CACHE, { recursive: true });
    writeFileSync(
      stub,
      "#!/bin/sh\necho 'baton: the Prisma schema engine is not available; migrations are hand-written SQL applied by migrate() from @baton/store' >&2\nexit 1\n",
    );
    chmodSync(stub, 0o755);
  }
  return stub;
}

async function generatePrisma(): Promise<void> {
  const hash = prismaInputsHash();
  const client = join(PRISMA_OUTPUT, "client.ts");
  if (upToDate(PRISMA_STAMP, hash, client)) return;
  await withLock("prisma-generate", () => {
    if (upToDate(PRISMA_STAMP, hash, client)) return; // another set-up did it while we waited
    rmSync(PRISMA_STAMP, { force: true });
    const res = spawnSync(
      process.execPath,
      [join(ROOT, "node_modules/prisma/build/index.js"), "generate", "--config", relative(ROOT, join(STORE, "prisma.config.ts"))],
      {
        cwd: ROOT,
        encoding: "utf8",
        env: {
          ...process.env,
          PRISMA_SCHEMA_ENGINE_BINARY: schemaEngineStub(),
          PRISMA_ENGINES_CHECKSUM_IGNORE_MISSING: "1",
          PRISMA_HIDE_UPDATE_MESSAGE: "1",
          CHECKPOINT_DISABLE: "1",
        },
      },
    );
    if (res.status !== 0) {
      process.stderr.write(`${res.stdout ?? ""}${res.stderr ?? ""}`);
      throw new Error(`prisma generate failed (${res.error ? res.error.message : `exit ${res.status ?? res.signal}`})`);
    }
    writeFileSync(PRISMA_STAMP, `${hash}\n`);
    process.stderr.write(`baton: generated the Prisma client (${relative(ROOT, PRISMA_OUTPUT)})\n`);
  });
}

const TARGETS: Record<string, () => Promise<void>> = { prisma: generatePrisma };

const wanted = process.argv.slice(2);
const unknown = wanted.filter((t) => !(t in TARGETS));
if (unknown.length > 0) {
  process.stderr.write(`usage: node scripts/generate.ts [${Object.keys(TARGETS).join("|")}]...\nunknown target: ${unknown.join(", ")}\n`);
  process.exit(2);
}
try {
  for (const target of wanted.length > 0 ? wanted : Object.keys(TARGETS)) await TARGETS[target]!();
} catch (err) {
  process.stderr.write(`baton: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
}
