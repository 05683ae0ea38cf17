/**
 * Whether the database can be reached now, for readiness (/readyz): the store's pool connects
 * on demand and holds no connection to watch, so a process whose Postgres went away learned it
 * only from the next query that failed. The watch keeps one connection of its own, outside the
 * pool (a probe queued behind a busy pool would read load as an outage), and round-trips a
 * `SELECT 1` on it every `intervalMs`. A probe that cannot connect or does not answer within
 * `timeoutMs` makes the database unreachable until one answers again. A connection ended from
 * the server's side is not an outage by itself (a restart of Postgres, `pg_terminate_backend`):
 * the watch connects again at once, and that probe decides.
 */
import pg from "pg";
import { errorMessage } from "@baton/errors";
import { toStoreError } from "./db-errors.ts";

export interface DatabaseWatchOptions {
  databaseUrl: string;
  /** Time between probes. @default 2000 */
  intervalMs?: number;
  /** How long a probe may take to connect, and then to answer. @default 5000 */
  timeoutMs?: number;
  /** Told when the database becomes unreachable (with why) and reachable again. */
  onChange?: (reachable: boolean, why?: string) => void;
}

export interface DatabaseWatch {
  /** The last probe's verdict; true until a probe fails (the store pinged at start). */
  reachable(): boolean;
  /** Why the last probe failed, while the database is unreachable. */
  why(): string | undefined;
  /** Resolves after the next probe that starts from now has finished (tests, start-up). */
  probed(): Promise<void>;
  /** Stops probing and closes the watch's connection. */
  stop(): Promise<void>;
}

export function watchDatabase(opts: DatabaseWatchOptions): DatabaseWatch {
  const intervalMs = opts.intervalMs ?? 2000;
  const timeoutMs = opts.timeoutMs ?? 5000;
  let client: pg.Client | undefined;
  let reachable = true;
  let why: string | undefined;
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let waiting: (() => void)[] = [];

  const verdict = (ok: boolean, reason?: string): void => {
    const changed = ok !== reachable;
    reachable = ok;
    why = ok ? undefined : reason;
    if (changed) opts.onChange?.(ok, reason);
  };

  const drop = (c: pg.Client): void => {
    if (client === c) client = undefined;
    c.end().catch(() => {});
  };

  /** One round trip; false when it failed on a connection made earlier (it may have just been ended). */
  const probe = async (): Promise<boolean> => {
    const fresh = !client;
    let c = client;
    try {
      if (!c) {
        const made = new pg.Client({ connectionString: opts.databaseUrl, connectionTimeoutMillis: timeoutMs, query_timeout: timeoutMs });
        // Ended from the server's side: probe again at once on a new connection.
        made.on("error", () => {
          drop(made);
          schedule(0);
        });
        client = c = made;
        await made.connect();
      }
      await c.query("SELECT 1");
      verdict(true);
    } catch (err) {
      if (c) drop(c);
      if (!fresh) return false;
      verdict(false, toStoreError(err).message || errorMessage(err));
    }
    return true;
  };

  let running = false;
  const run = async (): Promise<void> => {
    timer = undefined;
    if (stopped || running) return;
    running = true;
    const told = waiting;
    waiting = [];
    try {
      // A connection that failed may have been ended under the probe: try once more on a new one.
      if (!(await probe())) await probe();
    } finally {
      running = false;
      for (const resolve of told) resolve();
      schedule(waiting.length > 0 ? 0 : intervalMs);
    }
  };

  function schedule(ms: number): void {
    if (stopped || running) return;
    if (timer) {
      if (ms > 0) return;
      clearTimeout(timer);
    }
    timer = setTimeout(() => void run(), ms);
    timer.unref();
  }

  schedule(intervalMs);
  return {
    reachable: () => reachable,
    why: () => why,
    probed: () => new Promise<void>((resolve) => {
      if (stopped) return resolve();
      waiting.push(resolve);
      if (!running) schedule(0);
    }),
    async stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      timer = undefined;
      for (const resolve of waiting.splice(0)) resolve();
      const c = client;
      client = undefined;
      await c?.end().catch(() => {});
    },
  };
}
