/**
 * An outside subscriber: follows a Baton deployment's events on NATS JetStream and prints each
 * execution's timeline as it happens, from the events alone (docs/events.md). It uses no Baton
 * package, only NATS and the events' JSON payloads.
 *
 *   ./baton node examples/subscriber/timeline.ts            # BATON_NATS_URL, BATON_BUS_PREFIX as for Baton
 *   ./baton node examples/subscriber/timeline.ts --all      # replay the events the stream still keeps first
 *
 * One line per execution or node event, e.g.
 *   execution 42 started (workflow 7 v1)
 *   execution 42 node total#1 started (tool)
 *   execution 42 node total#1 completed in 12 ms
 *   execution 42 paused at review: Expense report needs a manager's approval
 *   execution 42 completed
 * Stop it with Ctrl-C.
 */
import { connect } from "@nats-io/transport-node";
import { DeliverPolicy, jetstream, jetstreamManager } from "@nats-io/jetstream";

type Payload = Record<string, unknown>;

/** A payload field as text (ids are numbers, names strings). */
function text(v: unknown): string {
  return typeof v === "string" || typeof v === "number" || typeof v === "boolean" ? String(v) : JSON.stringify(v ?? null);
}

/** The line for one event, or undefined for a kind this timeline leaves out (workflow.*, memory.*, …). */
function timelineLine(type: string, e: Payload): string | undefined {
  const exec = `execution ${text(e.id ?? e.execution_id)}`;
  const node = `${exec} node ${text(e.node_id)}#${text(e.attempt)}`;
  const error = (x: unknown): string => {
    const err = (x ?? {}) as { code?: string; message?: string };
    return `${err.code ?? "?"}: ${err.message ?? ""}`;
  };
  switch (type) {
    case "execution.started":
      return `${exec} started (workflow ${text(e.agent_workflow_id)} v${text(e.workflow_version)})${e.parent_execution_id ? `, child of ${text(e.parent_execution_id)}` : ""}${e.forked_from_execution_id ? `, fork of ${text(e.forked_from_execution_id)} at ${text(e.forked_from_version)}` : ""}`;
    case "execution.paused":
      return `${exec} paused at ${text(e.node_id)}: ${text(e.reason)}`;
    case "execution.resumed":
      return `${exec} resumed at ${text(e.node_id)} (${text(e.decision)})`;
    case "execution.completed":
      return `${exec} completed`;
    case "execution.failed":
      return `${exec} failed at ${text(e.node_id)}: ${error(e.error)}`;
    case "execution.cancelled":
      return `${exec} cancelled: ${text(e.reason)}`;
    case "execution.emitted":
      return `${exec} emitted ${text(e.name)} ${JSON.stringify(e.data ?? null)}`;
    case "node.started":
      return `${node} started (${text(e.node_type)})`;
    case "node.completed":
      return `${node} completed in ${text(e.duration_ms)} ms`;
    case "node.failed":
      return `${node} failed${e.retrying ? " (retrying)" : ""}: ${error(e.error)}`;
    default:
      return undefined;
  }
}

const prefix = process.env.BATON_BUS_PREFIX ?? "baton";
const nc = await connect({ servers: process.env.BATON_NATS_URL ?? "nats://127.0.0.1:4222" });
// The events stream is the one that holds the prefix's event subjects.
const stream = await (await jetstreamManager(nc)).streams.find(`${prefix}.evt.execution.started.any.0`);
const consumer = await jetstream(nc).consumers.get(stream, {
  // Every event (one filter subject: servers before 2.10 take no more); the timeline keeps
  // execution.* and node.*.
  filter_subjects: `${prefix}.evt.>`,
  deliver_policy: process.argv.includes("--all") ? DeliverPolicy.All : DeliverPolicy.New,
});
const messages = await consumer.consume();
process.stdout.write(`following ${stream} (Ctrl-C to stop)\n`);
const stop = (): void => {
  void messages.close().then(() => nc.close());
};
process.once("SIGINT", stop);
process.once("SIGTERM", stop);
for await (const m of messages) {
  // `{prefix}.evt.{entity}.{action}.{tenant}.{scope}`: the type is entity.action.
  const [entity, action] = m.subject.slice(prefix.length + 5).split(".");
  const line = timelineLine(`${entity}.${action}`, m.json<Payload>());
  if (line !== undefined) process.stdout.write(`${line}\n`);
}
