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

/** User + system CPU of the processes, in ms (a process that has exited counts as 0). */
function cpuOf(pids: readonly string[]): number {
  return pids.reduce((sum, pid) => {
    try {
      const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
      return sum + ((Number(fields[11]) + Number(fields[12])) * 1000) / TICKS_PER_SECOND;
    } catch {
      return sum;
    }
  }, 0);
}

/**
 * Starts a reading; `stop()` gives the CPU used since. The NATS and Redis servers are found
 * once (they live as long as the run); Postgres processes are listed at each start, since a
 * backend comes and goes with its connection.
 */
export function cpuMeter(): { start(): { stop(): CpuMs } } {
  const nats = processesNamed(["nats-server"]);
  const redis = processesNamed(["redis-server"]);
  return {
    start() {
      const postgres = processesNamed(["postgres"]);
      const before = { process: process.cpuUsage(), nats: cpuOf(nats), redis: cpuOf(redis), postgres: cpuOf(postgres) };
      return {
        stop() {
          const used = process.cpuUsage(before.process);
          return {
            process: (used.user + used.system) / 1000,
            nats: cpuOf(nats) - before.nats,
            redis: cpuOf(redis) - before.redis,
            postgres: cpuOf(postgres) - before.postgres,
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
