import { RequestOne } from "@nats-io/nats-core/internal";

/**
 * nats.js 3.4 builds an `Error`, stack trace included, after every answered request:
 * `RequestOne.resolver` settles the request's promise and then calls `cancel()`, which rejects
 * that already-settled promise with a new `RequestError("cancelled")` — a no-op, but the
 * error costs its stack capture. Every JetStream publish is a request, so in the engine
 * benchmark this was about 3% of the process's CPU (ADR 007). This makes the cancel that
 * follows a settled request release it without building the error; a cancel of a request
 * still waiting (a timeout, a closed connection) is unchanged.
 *
 * It patches `RequestOne.prototype` of `@nats-io/nats-core` 3.x once per process; when the
 * class is not the expected shape, it changes nothing and returns `false`.
 */
export function skipSettledRequestErrors(): boolean {
  const proto = (RequestOne as unknown as { prototype?: PatchedRequest } | undefined)?.prototype;
  if (!proto || typeof proto.resolver !== "function" || typeof proto.cancel !== "function") return false;
  if (proto[PATCHED]) return true;
  const { resolver, cancel } = proto;
  proto.resolver = function (this: PatchedRequest, err: Error | null, msg: unknown): void {
    this[SETTLED] = true;
    resolver.call(this, err, msg);
  };
  proto.cancel = function (this: PatchedRequest, err?: Error): void {
    if (err === undefined && this[SETTLED] && this.mux && typeof this.mux.cancel === "function") {
      this.timer?.cancel();
      this.mux.cancel(this);
      return;
    }
    cancel.call(this, err);
  };
  proto[PATCHED] = true;
  return true;
}

const SETTLED = Symbol("baton.requestSettled");
const PATCHED = Symbol("baton.settledRequestErrors");

interface PatchedRequest {
  resolver: (this: PatchedRequest, err: Error | null, msg: unknown) => void;
  cancel: (this: PatchedRequest, err?: Error) => void;
  timer?: { cancel(): void };
  mux?: { cancel(request: unknown): void };
  [SETTLED]?: boolean;
  [PATCHED]?: boolean;
}
