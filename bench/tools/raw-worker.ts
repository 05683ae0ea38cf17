/**
 * The floor: a work item on plain JetStream, no Baton code. Takes items from the work
 * queue through a shared durable pull consumer, publishes a reply to the reply stream
 * (JetStream publish, waiting for its ack, as Baton's result command does) and acks.
 * Env: BATON_NATS_URL, RAW_ID, CONCURRENCY (default 64). Prints "ready" once consuming.
 */
import { jetstream } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";

const id = process.env.RAW_ID ?? "x";
const concurrency = Number(process.env.CONCURRENCY ?? 64);
const nc = await connect({ servers: process.env.BATON_NATS_URL ?? "nats://127.0.0.1:4222", noAsyncTraces: true });
const js = jetstream(nc);
const consumer = await js.consumers.get(`RAWBENCH_${id}_WORK`, "workers");
const messages = await consumer.consume({ max_messages: concurrency });
process.stdout.write("ready\n");
const stop = (): void => void messages.close();
process.on("SIGTERM", stop);
let inflight = 0;
let slot: (() => void) | undefined;
const done = (): void => {
  inflight--;
  const s = slot;
  slot = undefined;
  s?.();
};
for await (const m of messages) {
  while (inflight >= concurrency) await new Promise<void>((r) => (slot = r));
  inflight++;
  void js.publish(`rb_${id}.reply`, m.data).then(
    () => (m.ack(), done()),
    () => (m.nak(), done()),
  );
}
while (inflight > 0) await new Promise((r) => setTimeout(r, 10));
await nc.drain();
