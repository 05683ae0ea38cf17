/**
 * Helpers for the bus integration tests (real NATS at BATON_NATS_URL, default
 * nats://127.0.0.1:4222): a random prefix per suite, a logger that captures lines, a raw
 * connection for server-side checks, and clean-up of every stream a prefix created.
 */
import { randomBytes } from "node:crypto";
import { afterAll } from "@jest/globals";
import { connect } from "@nats-io/transport-node";
import { jetstreamManager } from "@nats-io/jetstream";
import type { JetStreamManager } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/nats-core";
import { createLogger } from "@baton/telemetry";
import type { Logger } from "@baton/telemetry";
import { connectBus, streamNames } from "@baton/bus";
import type { Bus, BusOptions } from "@baton/bus";

export const NATS_URL = process.env.BATON_NATS_URL ?? "nats://127.0.0.1:4222";

export function randomPrefix(): string {
  return `bt_${randomBytes(5).toString("hex")}`;
}

export interface CapturedLogger {
  logger: Logger;
  lines: Record<string, unknown>[];
}

export function captureLogger(): CapturedLogger {
  const lines: Record<string, unknown>[] = [];
  return { logger: createLogger("bus-test", "debug", { write: (l) => lines.push(JSON.parse(l) as Record<string, unknown>) }), lines };
}

export function openBus(prefix: string, extra: Partial<BusOptions> = {}): Promise<Bus> {
  return connectBus({ servers: NATS_URL, prefix, name: `bus-test-${prefix}`, logger: createLogger("bus-test", "silent"), ...extra });
}

export interface Admin {
  nc: NatsConnection;
  jsm: JetStreamManager;
  /** Deletes the prefix's streams and every KV and object bucket of the prefix (streams `KV_<prefix>_*`, `OBJ_<prefix>_*`), then closes. */
  cleanup(prefix: string): Promise<void>;
}

export async function openAdmin(): Promise<Admin> {
  const nc = await connect({ servers: NATS_URL, name: "bus-test-admin" });
  const jsm = await jetstreamManager(nc);
  return {
    nc,
    jsm,
    async cleanup(prefix) {
      // Every bucket the suite opened, listed rather than named, so a new one is not left behind.
      const names: string[] = Object.values(streamNames(prefix));
      for await (const s of jsm.streams.list()) if (s.config.name.startsWith(`KV_${prefix}_`) || s.config.name.startsWith(`OBJ_${prefix}_`)) names.push(s.config.name);
      for (const name of names) await jsm.streams.delete(name).catch(() => false);
      await nc.close();
    },
  };
}

/** Polls `cond` until it holds; the test's own timeout bounds the wait. */
export async function waitFor(cond: () => boolean | Promise<boolean>, intervalMs = 20): Promise<void> {
  while (!(await cond())) await new Promise((r) => setTimeout(r, intervalMs));
}

export interface Deferred<T = void> {
  promise: Promise<T>;
  resolve(v: T): void;
}

export function deferred<T = void>(): Deferred<T> {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

export const enc = (s: string): Uint8Array => new TextEncoder().encode(s);
export const dec = (b: Uint8Array): string => new TextDecoder().decode(b);

/**
 * Resolves with the stream sequences JetStream reports as terminated for a consumer
 * (the server's MSG_TERMINATED advisories), so tests need no timing to see a term.
 */
export function watchTerminations(nc: NatsConnection, stream: string, durable: string): { seqs: number[] } {
  const seqs: number[] = [];
  nc.subscribe(`$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED.${stream}.${durable}`, {
    callback: (err, m) => {
      if (err === null) seqs.push(m.json<{ stream_seq: number }>().stream_seq);
    },
  });
  return { seqs };
}

/** Two buses on one prefix (two processes sharing work) and the admin connection that cleans up. */
export interface BusPair {
  admin: Admin;
  a: Bus;
  b: Bus;
}

export async function openPair(prefix: string): Promise<BusPair> {
  const admin = await openAdmin();
  const [a, b] = await Promise.all([openBus(prefix), openBus(prefix)]);
  return { admin, a, b };
}

/**
 * A suite's pair under a new random prefix, opened now (call it with top-level `await`) and
 * closed after the suite's tests (`afterAll`).
 */
export async function suitePair(): Promise<BusPair & { prefix: string }> {
  const prefix = randomPrefix();
  const pair = await openPair(prefix);
  afterAll(() => closePair(pair, prefix));
  return { ...pair, prefix };
}

/** Drains both buses, then deletes the prefix's streams and KV buckets. */
export async function closePair(pair: BusPair | undefined, prefix: string): Promise<void> {
  if (!pair) return;
  await Promise.all([pair.a.drain(), pair.b.drain()]);
  await pair.admin.cleanup(prefix);
}
