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
  const transport = (nc as unknown as { protocol?: { transport?: Transport } }).protocol?.transport;
  if (!transport || typeof transport._send !== "function" || transport[COALESCED]) return false;
  const send = transport._send;
  transport._send = function (this: Transport, frame: Uint8Array): Promise<void> {
    const sock = this.socket;
    if (sock && this[CORKED] === undefined && !sock.destroyed) {
      const cork: Cork = { sock, turn: setImmediate(() => uncork(this, cork)) };
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
  const protocol = (nc as unknown as { protocol?: { transport?: Transport; flushPending?: () => void } }).protocol;
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

function uncork(transport: Transport, cork: Cork): void {
  if (transport[CORKED] !== cork) return;
  transport[CORKED] = undefined;
  cork.sock.uncork();
}

const COALESCED = Symbol("baton.coalescedWrites");
const CORKED = Symbol("baton.corked");

interface Cork {
  sock: Socket;
  turn: NodeJS.Immediate;
}

interface Transport {
  socket?: Socket;
  _send?: (frame: Uint8Array) => Promise<void>;
  [COALESCED]?: boolean;
  [CORKED]?: Cork;
}
