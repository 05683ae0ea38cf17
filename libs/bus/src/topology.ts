import { AckPolicy, DeliverPolicy, DiscardPolicy, JetStreamApiError, RetentionPolicy, StorageType } from "@nats-io/jetstream";
import type { ConsumerConfig, ConsumerInfo, JetStreamManager, StreamConfig, StreamInfo } from "@nats-io/jetstream";
import { nanos } from "@nats-io/nats-core";
import { errorMessage } from "@baton/errors";
import { BusConsumerFailed, BusTopologyFailed } from "./errors.ts";
import { streamSubjects } from "./options.ts";
import type { CompiledBusOptions, StreamKey } from "./options.ts";

export type StreamSpec = Pick<StreamConfig, "name" | "subjects" | "retention" | "storage" | "discard" | "max_age" | "duplicate_window" | "num_replicas">;

/** The three streams Baton needs (docs/dev/contracts.md). */
export function streamSpecs(o: CompiledBusOptions): Record<StreamKey, StreamSpec> {
  const subjects = streamSubjects(o.prefix);
  const common = { storage: StorageType.File, discard: DiscardPolicy.Old, duplicate_window: nanos(o.duplicateWindowMs), num_replicas: o.replicas };
  return {
    events: { ...common, name: o.streams.events, subjects: subjects.events, retention: RetentionPolicy.Limits, max_age: nanos(o.eventsMaxAgeMs) },
    commands: { ...common, name: o.streams.commands, subjects: subjects.commands, retention: RetentionPolicy.Workqueue, max_age: 0 },
    tools: { ...common, name: o.streams.tools, subjects: subjects.tools, retention: RetentionPolicy.Workqueue, max_age: 0 },
  };
}

function apiCode(err: unknown): number | undefined {
  return err instanceof JetStreamApiError ? err.code : undefined;
}

const STREAM_NOT_FOUND = 10059;
const CONSUMER_NOT_FOUND = 10014;

function sameSet(a: readonly string[] | undefined, b: readonly string[] | undefined): boolean {
  const x = new Set(a ?? []);
  const y = new Set(b ?? []);
  return x.size === y.size && [...x].every((v) => y.has(v));
}

/** The fields of `spec` that differ in `current`. */
export function streamDrift(current: StreamConfig, spec: StreamSpec): string[] {
  const drift: string[] = [];
  if (!sameSet(current.subjects, spec.subjects)) drift.push("subjects");
  if (current.max_age !== spec.max_age) drift.push("max_age");
  if (current.duplicate_window !== spec.duplicate_window) drift.push("duplicate_window");
  if (current.num_replicas !== spec.num_replicas) drift.push("num_replicas");
  if (current.discard !== spec.discard) drift.push("discard");
  return drift;
}

export type EnsureResult = "created" | "updated" | "unchanged";

/**
 * Creates the stream, or updates the fields Baton owns. Safe under concurrency: a lost
 * creation race re-reads and compares; identical concurrent updates are harmless.
 */
export async function ensureStream(jsm: JetStreamManager, spec: StreamSpec): Promise<EnsureResult> {
  let lastError: unknown;
  for (let attempt = 0; attempt < 5; attempt++) {
    let info: StreamInfo | undefined;
    try {
      info = await jsm.streams.info(spec.name);
    } catch (err) {
      if (apiCode(err) !== STREAM_NOT_FOUND) throw BusTopologyFailed(spec.name, errorMessage(err), { cause: err, retryable: true });
    }
    if (info === undefined) {
      try {
        await jsm.streams.add(spec);
        return "created";
      } catch (err) {
        // Another process may have created it meanwhile: read it again.
        lastError = err;
        continue;
      }
    }
    const cfg = info.config;
    if (cfg.retention !== spec.retention) {
      throw BusTopologyFailed(spec.name, `it exists with retention "${cfg.retention}", Baton needs "${spec.retention}"; delete the stream or use another prefix`);
    }
    if (cfg.storage !== spec.storage) {
      throw BusTopologyFailed(spec.name, `it exists with storage "${cfg.storage}", Baton needs "${spec.storage}"`);
    }
    const drift = streamDrift(cfg, spec);
    if (drift.length === 0) return "unchanged";
    try {
      const { name: _name, retention: _r, storage: _s, ...update } = spec;
      await jsm.streams.update(spec.name, { ...cfg, ...update });
      return "updated";
    } catch (err) {
      throw BusTopologyFailed(spec.name, `update of ${drift.join(", ")} failed: ${errorMessage(err)}`, { cause: err });
    }
  }
  throw BusTopologyFailed(spec.name, errorMessage(lastError), { cause: lastError, retryable: true });
}

export type ConsumerDesired = Pick<ConsumerConfig, "durable_name" | "ack_policy" | "deliver_policy" | "ack_wait" | "max_deliver" | "max_ack_pending"> & {
  filter_subject?: string;
  filter_subjects?: string[];
};

export function consumerDrift(current: ConsumerConfig, want: ConsumerDesired): string[] {
  const drift: string[] = [];
  if (current.ack_wait !== want.ack_wait) drift.push("ack_wait");
  if (current.max_deliver !== want.max_deliver) drift.push("max_deliver");
  if (current.max_ack_pending !== want.max_ack_pending) drift.push("max_ack_pending");
  const cur = current.filter_subjects ?? (current.filter_subject ? [current.filter_subject] : []);
  const wanted = want.filter_subjects ?? (want.filter_subject ? [want.filter_subject] : []);
  if (!sameSet(cur, wanted)) drift.push("filter");
  return drift;
}

/**
 * Creates the durable consumer, or updates the fields Baton owns; safe under concurrency.
 * `keepUnfiltered`: leave an existing durable without a filter as it is rather than give it
 * one. NATS before 2.10 accepts that update but then delivers nothing (seen on 2.9.10), so
 * the caller filters such a durable's messages itself.
 */
export async function ensureConsumer(jsm: JetStreamManager, stream: string, want: ConsumerDesired, opts: { keepUnfiltered?: boolean } = {}): Promise<ConsumerInfo> {
  const durable = want.durable_name!;
  let lastError: unknown;
  for (let attempt = 0; attempt < 5; attempt++) {
    let info: ConsumerInfo | undefined;
    try {
      info = await jsm.consumers.info(stream, durable);
    } catch (err) {
      if (apiCode(err) !== CONSUMER_NOT_FOUND) throw BusConsumerFailed(stream, durable, errorMessage(err), { cause: err, retryable: true });
    }
    if (info === undefined) {
      try {
        return await jsm.consumers.add(stream, want);
      } catch (err) {
        lastError = err;
        continue;
      }
    }
    let drift = consumerDrift(info.config, want);
    if (opts.keepUnfiltered && !info.config.filter_subject && !info.config.filter_subjects?.length) drift = drift.filter((d) => d !== "filter");
    if (drift.length === 0) return info;
    const update: Record<string, unknown> = {
      ack_wait: want.ack_wait,
      max_deliver: want.max_deliver,
      max_ack_pending: want.max_ack_pending,
    };
    if (drift.includes("filter")) {
      // Both keys: the client merges the update into the current config, which may hold the other one.
      update.filter_subject = want.filter_subject;
      update.filter_subjects = want.filter_subjects;
    }
    try {
      return await jsm.consumers.update(stream, durable, update);
    } catch (err) {
      throw BusConsumerFailed(stream, durable, `update of ${drift.join(", ")} failed (delete the consumer to change it): ${errorMessage(err)}`, { cause: err });
    }
  }
  throw BusConsumerFailed(stream, durable, errorMessage(lastError), { cause: lastError, retryable: true });
}

export { AckPolicy, DeliverPolicy };
