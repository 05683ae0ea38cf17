import type { Socket } from "node:net";
import type { NatsConnection } from "@nats-io/nats-core";

/**
 * nats.js writes its outbound buffer to the socket at the end of every microtask that added
 * to it, so a process that publishes, acks and requests from many async handlers makes one
 * `write` system call per frame — under load the largest single cost in Baton's processes
 * (docs/benchmarks.md). This corks the connection's socket at its first write in an
 * event-loop turn and uncorks it when the turn ends (`setImmediate`): the turn's frames go
 * out in one `writev`. Nothing waits longer than the rest of the current turn, so an idle
 * process sends as promptly as before.
 *
 * It wraps the send method of the connection's current transport (the `@nats-io/transport-node`
 * socket transport, 3.x). A reconnect creates a new transport; call this again then. When the
 * transport is not the expected shape, it leaves the connection as it is.
 */
export function coalesceWrites(nc: NatsConnection): boolean {
  const protocol = protocolOf(nc);
  const transport = protocol?.transport;
  if (!protocol || !transport || typeof transport._send !== "function" || transport[COALESCED]) return false;
  const send = transport._send;
  transport._send = function (this: Transport, frame: Uint8Array): Promise<void> {
    const sock = this.socket;
    if (sock && this[CORKED] === undefined && !sock.destroyed) {
      const cork: Cork = { sock, protocol, turn: setImmediate(() => uncork(this, cork)) };
      this[CORKED] = cork;
      sock.cork();
    }
    return send.call(this, frame);
  };
  transport[COALESCED] = true;
  return true;
}

/**
 * Writes what the connection holds to the socket now rather than at the end of the turn:
 * nats.js's pending frames (it would write them after the current microtask), then the
 * corked socket. For a frame whose latency matters more than one more `write` (a tool call
 * that a worker waits for while the caller still has a turn of work ahead). Later frames of
 * the turn are coalesced again. Returns false, doing nothing, when the connection is not the
 * expected shape.
 */
export function sendNow(nc: NatsConnection): boolean {
  const protocol = protocolOf(nc);
  if (!protocol || typeof protocol.flushPending !== "function") return false;
  protocol.flushPending();
  const transport = protocol.transport;
  const cork = transport?.[CORKED];
  if (transport && cork) {
    clearImmediate(cork.turn);
    uncork(transport, cork);
  }
  return true;
}

/** How long a frame given to {@link sendLater} waits for another write to go out with. */
export const LATER_MAX_MS = 20;

/**
 * Sends a frame that need not go out now — a plain ack, which nobody waits for — with the
 * connection's next write, or by itself after {@link LATER_MAX_MS} when nothing else is
 * written by then. `frame` writes it through nats.js (e.g. `() => msg.ack()`). A consumer that
 * handles a message and then acks it would otherwise make one more system call per message:
 * its ack comes in a turn of its own, after the work the message caused was sent. Returns false,
 * sending the frame at once, when the connection is not the expected shape.
 */
export function sendLater(nc: NatsConnection, frame: () => void): boolean {
  const protocol = protocolOf(nc);
  if (!protocol || typeof protocol.flushPending !== "function") {
    frame();
    return false;
  }
  const later = protocol[LATER] ?? (protocol[LATER] = { frames: [] });
  later.frames.push(frame);
  later.timer ??= setTimeout(() => takeLater(protocol), LATER_MAX_MS);
  return true;
}

/** Writes at once what {@link sendLater} holds (before a flush or drain, so nothing is left behind). */
export function sendLaterNow(nc: NatsConnection): void {
  const protocol = protocolOf(nc);
  if (protocol) takeLater(protocol);
}

/** Hands the frames held for later to nats.js and has it write them (into a corked socket, they wait for its uncork). */
function takeLater(protocol: Protocol): void {
  const later = protocol[LATER];
  if (!later || later.frames.length === 0) return;
  const frames = later.frames;
  later.frames = [];
  clearTimeout(later.timer);
  later.timer = undefined;
  for (const f of frames) {
    try {
      f();
    } catch {
      // The connection closed: JetStream redelivers what was not acknowledged.
    }
  }
  protocol.flushPending?.();
}

function uncork(transport: Transport, cork: Cork): void {
  if (transport[CORKED] !== cork) return;
  // Frames held for later ride on this write: into nats.js's buffer, and from there into the
  // still corked socket.
  takeLater(cork.protocol);
  transport[CORKED] = undefined;
  cork.sock.uncork();
}

function protocolOf(nc: NatsConnection): Protocol | undefined {
  return (nc as unknown as { protocol?: Protocol }).protocol;
}

const COALESCED = Symbol("baton.coalescedWrites");
const CORKED = Symbol("baton.corked");
const LATER = Symbol("baton.later");

interface Cork {
  sock: Socket;
  protocol: Protocol;
  turn: NodeJS.Immediate;
}

interface Protocol {
  transport?: Transport;
  flushPending?: () => void;
  [LATER]?: { frames: (() => void)[]; timer?: NodeJS.Timeout };
}

interface Transport {
  socket?: Socket;
  _send?: (frame: Uint8Array) => Promise<void>;
  [COALESCED]?: boolean;
  [CORKED]?: Cork;
}
