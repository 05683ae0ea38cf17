/**
 * The local "embedded default": before Baton starts on a laptop, make sure NATS,
 * Redis and Postgres answer. A server that answers is used as it is. One that does
 * not, whose URL points at this machine and whose binary is installed, is started
 * as a child process with its data under `<dataDir>/data/<service>` and its log in
 * `<dataDir>/logs/<service>.log`. Anything else is an error that says how to start
 * the servers with docker compose.
 *
 * Containers never use this (BATON_EMBEDDED=false there): their servers are
 * separate services.
 */
import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { closeSync, existsSync, openSync, readdirSync, readFileSync, statSync } from "node:fs";
import { chown, mkdir } from "node:fs/promises";
import { connect } from "node:net";
import { delimiter, dirname, join, resolve } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { Client, escapeIdentifier } from "pg";
import { errorMessage } from "@baton/errors";
import { InfraDatabaseFailed, InfraInvalidUrl, InfraStartFailed, InfraUnavailable } from "./errors.ts";

/** A server {@link ensureLocalInfra} looks after. */
export type InfraService = "nats" | "redis" | "postgres";

/** Options of {@link ensureLocalInfra}. */
export interface LocalInfraOptions {
  /** NATS URL; with several (comma-separated), the first is used. */
  natsUrl: string;
  redisUrl: string;
  /** Postgres URL; its database is created when missing. */
  databaseUrl: string;
  /** Where started servers keep data and logs, e.g. `".baton"`. */
  dataDir: string;
  log: (msg: string) => void;
  /**
   * Directories searched for server binaries, in order.
   * @default PATH, then /usr/local/bin, /usr/bin, /usr/sbin, /usr/local/sbin, Homebrew's
   *   and MacPorts' bin, /usr/lib/postgresql/<newest first>/bin, /usr/pgsql-<n>/bin
   */
  searchDirs?: string[];
  /**
   * How long one reachability probe (a TCP connect) may take, in milliseconds.
   * @default 500
   */
  probeTimeoutMs?: number;
  /**
   * How long a started server may take to accept connections, in milliseconds.
   * @default 60000
   */
  startTimeoutMs?: number;
}

/** What {@link ensureLocalInfra} started, and how to stop it. */
export interface LocalInfra {
  /** The servers this call started (empty when all were already reachable). */
  started: InfraService[];
  /** Stops the servers this call started (nothing else). Safe to call twice. */
  stop(): Promise<void>;
}

interface Endpoint {
  service: InfraService;
  label: string;
  url: URL;
  host: string;
  port: number;
  /** The URL without its password, for messages. */
  shown: string;
}

interface Running {
  service: InfraService;
  child: ChildProcess;
  exited: Promise<void>;
  stopSignal: NodeJS.Signals;
  logPath: string;
}

interface SystemUser {
  name: string;
  uid: number;
  gid: number;
}

const LABEL: Record<InfraService, string> = { nats: "NATS", redis: "Redis", postgres: "Postgres" };
const DEFAULT_PORT: Record<InfraService, number> = { nats: 4222, redis: 6379, postgres: 5432 };
const BINARIES: Record<InfraService, string[]> = {
  nats: ["nats-server"],
  redis: ["redis-server"],
  postgres: ["initdb", "postgres"],
};
const STOP_GRACE_MS = 15_000;

/**
 * Makes sure NATS, Redis and Postgres answer, starting local ones from installed
 * binaries where needed, and creates the database named in `databaseUrl` when it is
 * missing.
 * @throws BATON_INFRA_UNAVAILABLE when a server is unreachable and cannot be started
 *   here; nothing is started in that case
 * @throws BATON_INFRA_START_FAILED when a started server does not come up (whatever was
 *   started is stopped again)
 * @throws BATON_INFRA_DATABASE_FAILED when the database is missing and cannot be created
 * @throws BATON_INFRA_INVALID_URL when a URL does not parse
 */
export async function ensureLocalInfra(opts: LocalInfraOptions): Promise<LocalInfra> {
  const probeTimeoutMs = opts.probeTimeoutMs ?? 500;
  const startTimeoutMs = opts.startTimeoutMs ?? 60_000;
  const dataDir = resolve(opts.dataDir);
  const endpoints = [
    endpoint("nats", opts.natsUrl.split(",")[0]!.trim()),
    endpoint("redis", opts.redisUrl),
    endpoint("postgres", opts.databaseUrl),
  ];
  const postgres = endpoints[2]!;

  const reachable = await Promise.all(endpoints.map((ep) => probe(ep.host, ep.port, probeTimeoutMs)));
  const missing: string[] = [];
  const toStart: { ep: Endpoint; bins: Map<string, string> }[] = [];
  const searchDirs = opts.searchDirs ?? defaultSearchDirs();
  endpoints.forEach((ep, i) => {
    if (reachable[i]) {
      opts.log(`using ${ep.label} at ${ep.shown}`);
      return;
    }
    if (!isLocalHost(ep.host)) {
      missing.push(`${ep.label} at ${ep.shown} (not reachable, and not on this machine)`);
      return;
    }
    const bins = findBinaries(BINARIES[ep.service], searchDirs);
    if (!bins) {
      missing.push(`${ep.label} at ${ep.shown} (not running, and ${BINARIES[ep.service].join("/")} is not installed)`);
      return;
    }
    toStart.push({ ep, bins });
  });
  if (missing.length > 0) throw InfraUnavailable(missing);

  const running: Running[] = [];
  const killOnExit = (): void => {
    for (const r of running) if (r.child.exitCode === null && r.child.signalCode === null) r.child.kill("SIGKILL");
  };
  let stopped = false;
  const stop = async (): Promise<void> => {
    if (stopped) return;
    stopped = true;
    await Promise.all(running.map((r) => stopServer(r)));
    process.removeListener("exit", killOnExit);
  };
  if (toStart.length > 0) process.on("exit", killOnExit);

  try {
    const results = await Promise.allSettled(
      toStart.map(async ({ ep, bins }) => {
        const r = await startServer(ep, bins, dataDir, opts.log);
        running.push(r);
        await waitReachable(ep, r, probeTimeoutMs, startTimeoutMs);
        opts.log(`${ep.label} is up at ${ep.shown} (data in ${join(dataDir, "data", ep.service)}, log ${r.logPath})`);
      }),
    );
    const failed = results.find((r) => r.status === "rejected");
    if (failed) throw failed.reason;
    await ensureDatabase(postgres, opts.log, startTimeoutMs);
  } catch (err) {
    await stop();
    throw err;
  }
  const order = endpoints.map((ep) => ep.service);
  return { started: running.map((r) => r.service).sort((a, b) => order.indexOf(a) - order.indexOf(b)), stop };
}

function endpoint(service: InfraService, raw: string): Endpoint {
  let url: URL;
  try {
    url = new URL(raw.includes("://") ? raw : `${service}://${raw}`);
  } catch (err) {
    throw InfraInvalidUrl(LABEL[service], { cause: err });
  }
  const host = url.hostname.replace(/^\[(.*)\]$/, "$1") || "127.0.0.1";
  const port = url.port === "" ? DEFAULT_PORT[service] : Number(url.port);
  const shownUrl = new URL(url.href);
  if (shownUrl.password !== "") shownUrl.password = "***";
  return { service, label: LABEL[service], url, host, port, shown: shownUrl.href };
}

/** True when a TCP connection to host:port opens within `timeoutMs`. */
export async function probe(host: string, port: number, timeoutMs: number): Promise<boolean> {
  return await new Promise<boolean>((done) => {
    const socket = connect({ host, port });
    const finish = (ok: boolean): void => {
      socket.removeAllListeners();
      socket.on("error", () => undefined);
      socket.destroy();
      done(ok);
    };
    socket.setTimeout(timeoutMs, () => finish(false));
    socket.once("connect", () => finish(true));
    socket.once("error", () => finish(false));
  });
}

function isLocalHost(host: string): boolean {
  return host === "localhost" || host === "::1" || host === "0.0.0.0" || host === "::" || /^127\./.test(host);
}

/** The address a started server listens on. */
function listenHost(host: string): string {
  return host === "::1" || host === "0.0.0.0" || host === "::" ? host : "127.0.0.1";
}

function defaultSearchDirs(): string[] {
  const fromPath = (process.env.PATH ?? "").split(delimiter).filter(Boolean);
  const usual = ["/usr/local/bin", "/usr/bin", "/usr/sbin", "/usr/local/sbin", "/opt/homebrew/bin", "/opt/local/bin"];
  const versioned = (parent: string, match: RegExp, bin: (name: string) => string): string[] => {
    try {
      return readdirSync(parent)
        .filter((name) => match.test(name))
        .sort((a, b) => Number(b.replace(/\D+/g, "")) - Number(a.replace(/\D+/g, "")))
        .map((name) => join(parent, bin(name)));
    } catch {
      return [];
    }
  };
  const postgres = [
    ...versioned("/usr/lib/postgresql", /^\d+$/, (v) => join(v, "bin")),
    ...versioned("/usr", /^pgsql-\d+$/, (v) => join(v, "bin")),
    ...versioned("/opt/homebrew/opt", /^postgresql@\d+$/, (v) => join(v, "bin")),
  ];
  return [...new Set([...fromPath, ...usual, ...postgres])];
}

function isExecutable(path: string): boolean {
  try {
    return statSync(path).isFile() && (statSync(path).mode & 0o111) !== 0;
  } catch {
    return false;
  }
}

/**
 * Where the binaries of `service` are installed (the directory), or `undefined`.
 * @param searchDirs @default PATH, then the usual places (see {@link LocalInfraOptions.searchDirs})
 */
export function locateServer(service: InfraService, searchDirs: string[] = defaultSearchDirs()): string | undefined {
  const found = findBinaries(BINARIES[service], searchDirs);
  return found ? dirname(found.values().next().value ?? "") : undefined;
}

/** The first directory holding every one of `names` (so initdb and postgres match). */
function findBinaries(names: string[], dirs: string[]): Map<string, string> | undefined {
  for (const dir of dirs) {
    if (names.every((n) => isExecutable(join(dir, n)))) return new Map(names.map((n) => [n, join(dir, n)]));
  }
  return undefined;
}

function systemUser(name: string): SystemUser | undefined {
  try {
    for (const line of readFileSync("/etc/passwd", "utf8").split("\n")) {
      const [user, , uid, gid] = line.split(":");
      if (user === name && uid !== undefined && gid !== undefined) return { name, uid: Number(uid), gid: Number(gid) };
    }
  } catch {
    // no /etc/passwd (not Unix-like): fall through
  }
  return undefined;
}

/** Every directory above `dir` must let `user` pass, or Postgres cannot reach its data. */
function checkTraversable(dir: string, user: SystemUser): void {
  for (let d = dirname(dir); ; d = dirname(d)) {
    const st = statSync(d);
    const ok = (st.mode & 0o001) !== 0 || (st.uid === user.uid && (st.mode & 0o100) !== 0) || (st.gid === user.gid && (st.mode & 0o010) !== 0);
    if (!ok) {
      throw InfraStartFailed(
        "Postgres",
        `it runs as the system user "${user.name}", who cannot enter ${d}; allow it (chmod o+x ${d}) or set BATON_DATA_DIR to a directory it can reach`,
      );
    }
    if (d === dirname(d)) return;
  }
}

function logTail(path: string): string {
  try {
    const text = readFileSync(path, "utf8");
    return text.slice(-1500).trim();
  } catch {
    return "";
  }
}

function exitPromise(child: ChildProcess): Promise<void> {
  return new Promise((done) => {
    if (child.exitCode !== null || child.signalCode !== null) return done();
    child.once("exit", () => done());
    child.once("error", () => done());
  });
}

interface SpawnOptions {
  logPath: string;
  cwd: string;
  user?: SystemUser;
}

function spawnLogged(command: string, args: string[], o: SpawnOptions): ChildProcess {
  const fd = openSync(o.logPath, "a");
  try {
    return spawn(command, args, {
      cwd: o.cwd,
      // Its own process group: Ctrl-C reaches Baton only, which drains and then stops the servers.
      detached: true,
      stdio: ["ignore", fd, fd],
      ...(o.user ? { uid: o.user.uid, gid: o.user.gid, env: { ...process.env, HOME: o.cwd, USER: o.user.name, LOGNAME: o.user.name } } : {}),
    });
  } finally {
    closeSync(fd);
  }
}

async function runToEnd(command: string, args: string[], o: SpawnOptions): Promise<void> {
  const child = spawnLogged(command, args, o);
  const code = await new Promise<number | string>((done) => {
    child.once("error", (err) => done(errorMessage(err)));
    child.once("exit", (c, signal) => done(c ?? signal ?? "unknown"));
  });
  if (code !== 0) throw new Error(`${command} ended with ${code}:\n${logTail(o.logPath)}`);
}

async function startServer(ep: Endpoint, bins: Map<string, string>, dataDir: string, log: (msg: string) => void): Promise<Running> {
  const dir = join(dataDir, "data", ep.service);
  const logDir = join(dataDir, "logs");
  const logPath = join(logDir, `${ep.service}.log`);
  await mkdir(logDir, { recursive: true });
  const host = listenHost(ep.host);
  const port = String(ep.port);

  log(`${ep.label} is not reachable at ${ep.shown}; starting it from ${dirname(bins.values().next().value ?? "")}`);
  const launch = (command: string, args: string[], stopSignal: NodeJS.Signals, user?: SystemUser): Running => {
    const child = spawnLogged(command, args, { logPath, cwd: dir, ...(user ? { user } : {}) });
    child.on("error", () => undefined);
    return { service: ep.service, child, exited: exitPromise(child), stopSignal, logPath };
  };

  switch (ep.service) {
    case "nats": {
      await mkdir(dir, { recursive: true });
      const args = ["-a", host, "-p", port, "-js", "-sd", dir];
      const user = decodeURIComponent(ep.url.username);
      const password = decodeURIComponent(ep.url.password);
      if (user !== "" && password !== "") args.push("--user", user, "--pass", password);
      else if (user !== "") args.push("--auth", user);
      return launch(bins.get("nats-server")!, args, "SIGTERM");
    }
    case "redis": {
      await mkdir(dir, { recursive: true });
      const args = ["--port", port, "--bind", host, "--save", "", "--appendonly", "no", "--dir", dir, "--daemonize", "no"];
      const password = decodeURIComponent(ep.url.password);
      if (password !== "") args.push("--requirepass", password);
      return launch(bins.get("redis-server")!, args, "SIGTERM");
    }
    case "postgres": {
      // Postgres refuses to run as root: when Baton is root, it runs as the postgres system user.
      let user: SystemUser | undefined;
      if (process.getuid?.() === 0) {
        user = systemUser("postgres");
        if (!user) {
          throw InfraStartFailed(
            "Postgres",
            'Postgres refuses to run as root and there is no "postgres" system user to run it as; create one (useradd --system postgres) or start it with: docker compose up -d postgres',
          );
        }
      }
      // Only the cluster's own directory is private; a recursive 0700 would lock the user out of its parents.
      await mkdir(dirname(dir), { recursive: true });
      await mkdir(dir, { recursive: true, mode: 0o700 });
      if (user) {
        await chown(dir, user.uid, user.gid);
        checkTraversable(dir, user);
      }
      if (!existsSync(join(dir, "PG_VERSION"))) {
        const superuser = decodeURIComponent(ep.url.username) || "postgres";
        log(`initialising a Postgres cluster in ${dir} (superuser ${superuser}, trust auth)`);
        try {
          await runToEnd(bins.get("initdb")!, ["-D", dir, "-U", superuser, "-A", "trust", "-E", "UTF8", "--no-locale"], {
            logPath,
            cwd: dir,
            ...(user ? { user } : {}),
          });
        } catch (err) {
          throw InfraStartFailed("Postgres", `initdb failed: ${errorMessage(err)}`, { cause: err });
        }
      }
      // A Unix socket path is limited to ~100 bytes; a long data dir gets TCP only.
      const socketDir = dir.length + 20 <= 100 ? dir : "";
      return launch(bins.get("postgres")!, ["-D", dir, "-k", socketDir, "-p", port, "-h", host], "SIGINT", user);
    }
  }
}

async function waitReachable(ep: Endpoint, r: Running, probeTimeoutMs: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (r.child.exitCode !== null || r.child.signalCode !== null) {
      throw InfraStartFailed(ep.label, `it exited (${r.child.exitCode ?? r.child.signalCode}); its log ${r.logPath} ends with:\n${logTail(r.logPath)}`);
    }
    if (await probe(listenHost(ep.host), ep.port, probeTimeoutMs)) return;
    if (Date.now() > deadline) {
      throw InfraStartFailed(ep.label, `it did not accept connections on port ${ep.port} within ${timeoutMs} ms; see ${r.logPath}`);
    }
    await sleep(100);
  }
}

async function stopServer(r: Running): Promise<void> {
  if (r.child.exitCode !== null || r.child.signalCode !== null) return;
  r.child.kill(r.stopSignal);
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<boolean>((done) => {
    timer = setTimeout(() => done(true), STOP_GRACE_MS);
  });
  const late = await Promise.race([r.exited.then(() => false), timedOut]);
  clearTimeout(timer);
  if (late) {
    r.child.kill("SIGKILL");
    await r.exited;
  }
}

/** Connection errors that mean "Postgres is still starting": try again. */
function isStarting(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === "57P03" || code === "ECONNREFUSED" || code === "ECONNRESET";
}

/** Creates the URL's database when it is missing; concurrent creators are fine. */
async function ensureDatabase(ep: Endpoint, log: (msg: string) => void, timeoutMs: number): Promise<void> {
  const database = decodeURIComponent(ep.url.pathname.replace(/^\//, "")) || decodeURIComponent(ep.url.username) || "postgres";
  const deadline = Date.now() + timeoutMs;
  const adminUrl = (db: string): string => {
    const u = new URL(ep.url.href);
    u.pathname = `/${db}`;
    u.searchParams.delete("schema");
    return u.href;
  };

  let client: Client | undefined;
  for (const adminDb of ["postgres", "template1"]) {
    for (;;) {
      const c = new Client({ connectionString: adminUrl(adminDb) });
      c.on("error", () => undefined);
      try {
        await c.connect();
        client = c;
        break;
      } catch (err) {
        await c.end().catch(() => undefined);
        if (isStarting(err) && Date.now() < deadline) {
          await sleep(200);
          continue;
        }
        if ((err as { code?: unknown }).code === "3D000") break; // no such admin database: try the next
        throw InfraDatabaseFailed(database, `cannot connect to Postgres at ${ep.shown}: ${errorMessage(err)}`, { cause: err });
      }
    }
    if (client) break;
  }
  if (!client) throw InfraDatabaseFailed(database, `Postgres at ${ep.shown} has neither a "postgres" nor a "template1" database to connect to`);

  try {
    const found = await client.query("SELECT 1 FROM pg_database WHERE datname = $1", [database]);
    if (found.rowCount !== 0) return;
    try {
      await client.query(`CREATE DATABASE ${escapeIdentifier(database)}`);
      log(`created database ${database}`);
    } catch (err) {
      // 42P04 duplicate_database / 23505 unique_violation: another process created it first.
      const code = (err as { code?: unknown }).code;
      if (code !== "42P04" && code !== "23505") throw InfraDatabaseFailed(database, errorMessage(err), { cause: err });
    }
  } finally {
    await client.end().catch(() => undefined);
  }
}
