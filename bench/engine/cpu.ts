/**
 * CPU used by every process a benchmarked step involves: this process, the NATS and Redis
 * servers and every Postgres process, read from `/proc` (Linux; elsewhere the servers read as
 * 0). A per-node time on a 2-CPU machine shared with the servers is often set by CPU, not by
 * waiting, so the benchmark reports where the CPU went next to the times.
 *
 * The servers are shared: anything else using them while a phase runs (another test run, a
 * second benchmark) is counted too. Run benchmarks on an otherwise quiet machine.
 */
import { readdirSync, readFileSync } from "node:fs";

/** CPU in milliseconds, by process group. */
export interface CpuMs {
  process: number;
  nats: number;
  redis: number;
  postgres: number;
}

/** Clock ticks per second of /proc's CPU times (USER_HZ; 100 on Linux). */
const TICKS_PER_SECOND = 100;

function processesNamed(names: readonly string[]): string[] {
  let entries: string[];
  try {
    entries = readdirSync("/proc");
  } catch {
    return [];
  }
  return entries.filter((d) => {
    if (!/^\d+$/.test(d)) return false;
    try {
      return names.includes(readFileSync(`/proc/${d}/comm`, "utf8").trim());
    } catch {
      return false;
    }
  });
}

interface ProcStat {
  ppid: string;
  /** User + system CPU of the process itself, in ticks. */
  own: number;
  /** User + system CPU of its children that exited and were waited for, in ticks. */
  reaped: number;
}

function statOf(pid: string): ProcStat | undefined {
  try {
    const f = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
    return { ppid: f[1]!, own: Number(f[11]) + Number(f[12]), reaped: Number(f[13]) + Number(f[14]) };
  } catch {
    return undefined;
  }
}

/**
 * CPU used so far, in ms, by the processes named `names` and by those of their children that
 * have exited: every live process's own CPU, plus what the group's roots (processes whose
 * parent is not in the group, such as the postmaster) reaped from children that ended. A
 * Postgres backend that closes during a reading is thereby still counted, and one that opens
 * during it is found at the end; the sum only grows while the roots live.
 */
function groupCpu(names: readonly string[]): number {
  const pids = processesNamed(names);
  const stats = new Map<string, ProcStat>();
  for (const pid of pids) {
    const st = statOf(pid);
    if (st) stats.set(pid, st);
  }
  let ticks = 0;
  for (const st of stats.values()) ticks += st.own + (stats.has(st.ppid) ? 0 : st.reaped);
  return (ticks * 1000) / TICKS_PER_SECOND;
}

/** Starts a reading; `stop()` gives the CPU used since, by group. */
export function cpuMeter(): { start(): { stop(): CpuMs } } {
  const servers = (): Omit<CpuMs, "process"> => ({ nats: groupCpu(["nats-server"]), redis: groupCpu(["redis-server"]), postgres: groupCpu(["postgres"]) });
  return {
    start() {
      // The servers first: reading /proc costs this process CPU that is not the phase's.
      const atStart = servers();
      const before = { ...atStart, process: process.cpuUsage() };
      return {
        stop() {
          const used = process.cpuUsage(before.process);
          const after = servers();
          return {
            process: (used.user + used.system) / 1000,
            nats: after.nats - before.nats,
            redis: after.redis - before.redis,
            postgres: after.postgres - before.postgres,
          };
        },
      };
    },
  };
}

export const cpuTotal = (c: CpuMs): number => c.process + c.nats + c.redis + c.postgres;

export function addCpu(a: CpuMs, b: CpuMs): CpuMs {
  return { process: a.process + b.process, nats: a.nats + b.nats, redis: a.redis + b.redis, postgres: a.postgres + b.postgres };
}

export function scaleCpu(c: CpuMs, by: number): CpuMs {
  return { process: c.process * by, nats: c.nats * by, redis: c.redis * by, postgres: c.postgres * by };
}
