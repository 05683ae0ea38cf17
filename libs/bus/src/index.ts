/**
 * Baton's message bus on NATS JetStream: the three streams (events, commands, tools),
 * publish with trace and idempotency headers, durable consumers whose ack / nak / term is
 * decided by {@link settle} alone, replay of the events history, request/reply, and KV.
 * Payloads are opaque bytes: encoding is the contracts library's business.
 */
export { connectBus } from "./bus.ts";
export type { Bus, KvBucketOptions, KvValue, Reply, ReplayOptions, RequestOptions, ServeOptions } from "./bus.ts";
export type { ConsumerSpec, MessageHandler, Subscription } from "./consumer.ts";
export { DEFAULT_ACK_WAIT_MS, DEFAULT_CONCURRENCY, DEFAULT_MAX_ACK_PENDING, DEFAULT_MAX_DELIVER } from "./consumer.ts";
export { HEADERS } from "./message.ts";
export { objectName, objectRefJson, parseObjectRef } from "./objects.ts";
export type { ObjectInfo, ObjectPutOptions, ObjectRef, ObjectStore } from "./objects.ts";
export type { BusMessage, MessageMeta } from "./message.ts";
export {
  compileBusOptions,
  DEFAULT_DUPLICATE_WINDOW_MS,
  DEFAULT_EVENTS_MAX_AGE_MS,
  DEFAULT_PREFIX,
  DEFAULT_SERVERS,
  EVENT_ENTITIES,
  streamNames,
  streamSubjects,
  subjectMatches,
} from "./options.ts";
export type { BusOptions, CompiledBusOptions, StreamKey } from "./options.ts";
export { DEFAULT_BASE_DELAY_MS, DEFAULT_MAX_DELAY_MS, settle } from "./settle.ts";
export type { SettleDecision, SettleOptions } from "./settle.ts";
export * from "./errors.ts";
export type { KV } from "@nats-io/kv";
