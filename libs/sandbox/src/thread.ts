/**
 * The sandbox thread: loads the QuickJS WASM module once, then runs one call per
 * message, each in a fresh runtime (see `engine.ts`). Runs as a `worker_threads`
 * Worker so a handler that spins until its deadline never blocks the host's event loop,
 * and so the host can stop a thread outright when a call outlives its deadline.
 */
import { parentPort } from "node:worker_threads";
import { newQuickJSWASMModule } from "quickjs-emscripten";
import { execute } from "./engine.ts";
import type { ExecuteRequest } from "./types.ts";

export interface ThreadMessage {
  id: number;
  req: ExecuteRequest;
}

const port = parentPort;
if (port) {
  const qjs = await newQuickJSWASMModule();
  port.on("message", (msg: ThreadMessage) => {
    port.postMessage({ id: msg.id, res: execute(qjs, msg.req) });
  });
  port.postMessage({ ready: true });
}
