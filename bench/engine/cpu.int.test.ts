/**
 * The benchmark's CPU meter against the real Postgres server. Rules checked:
 * - a Postgres backend that opens after a reading starts, works and closes before it stops is
 *   counted (its CPU reaches the postmaster when it exits), so a reading never misses a
 *   connection's work or goes below zero.
 * This process's share is `process.cpuUsage()` itself and is not compared with the servers': a
 * Jest worker also runs what earlier test files left behind (timers, consumers), so its CPU during
 * the reading is not this test's alone.
 * The meter reads /proc: Linux only, as are the machines the benchmark runs on.
 */
import { expect, it } from "@jest/globals";
import pg from "pg";
import { cpuMeter } from "./cpu.ts";

const databaseUrl = process.env.BATON_BENCH_DATABASE_URL ?? "postgresql://postgres@127.0.0.1:5432/test";

it("counts the CPU of a Postgres connection opened and closed during the reading", async () => {
  const reading = cpuMeter().start();
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  // Work for the backend alone: a few hundred ms of Postgres CPU, next to nothing for this process.
  await client.query("SELECT count(*) FROM generate_series(1, 4000000) AS g WHERE g % 7 = 3");
  await client.end();
  // The postmaster adds an exited backend's CPU to its own count once it has reaped it.
  await new Promise((r) => setTimeout(r, 200));
  const used = reading.stop();
  expect(used.postgres).toBeGreaterThan(50);
  for (const v of Object.values(used)) expect(v).toBeGreaterThanOrEqual(0);
});
