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
  let corked: Socket | undefined;
  transport._send = function (this: Transport, frame: Uint8Array): Promise<void> {
    const sock = this.socket;
    if (sock && corked === undefined && !sock.destroyed) {
      corked = sock;
      sock.cork();
      setImmediate(() => {
        corked = undefined;
        sock.uncork();
      });
    }
    return send.call(this, frame);
  };
  transport[COALESCED] = true;
  return true;
}

const COALESCED = Symbol("baton.coalescedWrites");

interface Transport {
  socket?: Socket;
  _send?: (frame: Uint8Array) => Promise<void>;
  [COALESCED]?: boolean;
}
