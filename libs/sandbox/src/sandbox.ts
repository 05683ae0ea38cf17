/**
 * The host side: a small pool of sandbox threads and a FIFO queue of calls.
 *
 * Each call runs in a fresh QuickJS runtime inside a `worker_threads` thread, so the
 * host's event loop keeps running while a handler spins; QuickJS's interrupt handler
 * ends the handler at its deadline, and should that ever fail (a long native operation,
 * a hung instance) the host stops the thread itself `BACKSTOP_GRACE_MS` later. A thread
 * whose WASM instance failed, timed out from the host side or was cancelled is thrown
 * away; the next call starts a new one.
 */
import { Worker } from "node:worker_threads";
import { SandboxCancelled, SandboxDisposed, SandboxInvalidOptions } from "./errors.ts";
import type { ExecuteRequest, ExecuteResponse, JsonObject, JsonValue, SandboxErrorCode, SandboxFailure, SandboxResult } from "./types.ts";
import type { ThreadMessage } from "./thread.ts";

const MiB = 1024 * 1024;
/** @default 32 MiB */
export const DEFAULT_MEMORY_LIMIT_BYTES = 32 * MiB;
/** @default 1000 */
export const DEFAULT_TIMEOUT_MS = 1000;
/** @default 512 KiB */
export const DEFAULT_MAX_STACK_BYTES = 512 * 1024;
/** Bounds every limit must respect. */
export const LIMITS = {
  memoryLimitBytes: { min: 1 * MiB, max: 1024 * MiB },
  timeoutMs: { min: 1, max: 10 * 60_000 },
  maxStackBytes: { min: 64 * 1024, max: 4 * MiB },
  maxThreads: { min: 1, max: 64 },
} as const;
/** How long after a call's deadline the host stops its thread if QuickJS has not answered. */
export const BACKSTOP_GRACE_MS = 2000;
/** How long a new thread may take to load the WASM module before its calls fail. */
const THREAD_START_TIMEOUT_MS = 30_000;
/** V8 stack of a sandbox thread: QuickJS's own stack limit must run out well before it. */
const THREAD_STACK_MB = 32;

export interface SandboxOptions {
  /** QuickJS heap limit of each call. @default 33554432 (32 MiB) */
  memoryLimitBytes?: number;
  /** Time limit of each call (script top level, handler, reading `this` back). @default 1000 */
  timeoutMs?: number;
  /** QuickJS stack limit of each call; deeper recursion throws `InternalError: stack overflow`. @default 524288 (512 KiB) */
  maxStackBytes?: number;
  /** Threads running calls at the same time; further calls wait their turn. @default 1 */
  maxThreads?: number;
}

/** Per-call overrides. */
export interface RunOptions {
  /** @default the sandbox's `timeoutMs` */
  timeoutMs?: number;
  /** @default the sandbox's `memoryLimitBytes` */
  memoryLimitBytes?: number;
  /** Aborting stops the call (its thread is stopped) and answers BATON_SANDBOX_CANCELLED. */
  signal?: AbortSignal;
}

export interface Sandbox {
  /**
   * Runs `handlerName` of the SynthDev script `source` with `this` built from `thisValue`
   * and `args` as arguments, in a fresh QuickJS context. Never rejects: failures are
   * answered as `{ ok: false, code, message }`.
   */
  runHandler(source: string, handlerName: string, thisValue: JsonObject, args?: JsonValue[], options?: RunOptions): Promise<SandboxResult>;
  /** Stops every thread; calls still waiting or running answer BATON_SANDBOX_DISPOSED. */
  dispose(): Promise<void>;
}

interface Job {
  id: number;
  req: ExecuteRequest;
  resolve(r: SandboxResult): void;
  signal: AbortSignal | undefined;
  onAbort: (() => void) | undefined;
  timer: ReturnType<typeof setTimeout> | undefined;
  thread: Thread | undefined;
  done: boolean;
}

interface Thread {
  worker: Worker;
  ready: boolean;
  dead: boolean;
  job: Job | undefined;
  startTimer: ReturnType<typeof setTimeout> | undefined;
}

function fail(code: SandboxErrorCode, message: string): SandboxFailure {
  return { ok: false, code, message };
}

function checkLimit(problems: string[], name: keyof typeof LIMITS, value: unknown): void {
  if (value === undefined) return;
  const { min, max } = LIMITS[name];
  if (typeof value !== "number" || !Number.isInteger(value) || value < min || value > max) {
    problems.push(`${name}: must be an integer from ${min} to ${max}, got ${typeof value === "number" ? value : typeof value}`);
  }
}

function abortReason(signal: AbortSignal): string {
  const r: unknown = signal.reason;
  return r instanceof Error ? r.message : typeof r === "string" ? r : "";
}

/**
 * A sandbox for SynthDev handler scripts. Threads start on the first call and stay
 * (unreferenced while idle, so they never keep the process alive) until `dispose()`.
 * @throws BATON_SANDBOX_INVALID_OPTIONS naming every bad option.
 */
export function createSandbox(opts: SandboxOptions = {}): Sandbox {
  const problems: string[] = [];
  for (const name of ["memoryLimitBytes", "timeoutMs", "maxStackBytes", "maxThreads"] as const) checkLimit(problems, name, opts[name]);
  if (problems.length > 0) throw SandboxInvalidOptions(problems);
  const memoryLimitBytes = opts.memoryLimitBytes ?? DEFAULT_MEMORY_LIMIT_BYTES;
  const timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const maxStackBytes = opts.maxStackBytes ?? DEFAULT_MAX_STACK_BYTES;
  const maxThreads = opts.maxThreads ?? 1;

  const threads: Thread[] = [];
  const queue: Job[] = [];
  let nextId = 1;
  let disposed = false;

  function finish(job: Job, res: SandboxResult): void {
    if (job.done) return;
    job.done = true;
    if (job.timer) clearTimeout(job.timer);
    if (job.onAbort) job.signal?.removeEventListener("abort", job.onAbort);
    const t = job.thread;
    if (t && t.job === job) {
      t.job = undefined;
      if (!t.dead) t.worker.unref();
    }
    const qi = queue.indexOf(job);
    if (qi >= 0) queue.splice(qi, 1);
    const { poisoned: _poisoned, ...result } = res as ExecuteResponse;
    job.resolve(result);
  }

  function kill(t: Thread): void {
    if (t.dead) return;
    t.dead = true;
    if (t.startTimer) clearTimeout(t.startTimer);
    const i = threads.indexOf(t);
    if (i >= 0) threads.splice(i, 1);
    void t.worker.terminate().catch(() => undefined);
  }

  function threadFailed(t: Thread, failure: SandboxFailure): void {
    const wasReady = t.ready;
    if (t.job) finish(t.job, failure);
    kill(t);
    if (!wasReady) {
      // A thread that cannot start would fail every waiting call the same way; do not respawn in a loop.
      for (const job of [...queue]) finish(job, { ...failure, message: `sandbox thread failed to start: ${failure.message}` });
    }
    pump();
  }

  function spawn(): void {
    const worker = new Worker(new URL("./thread.ts", import.meta.url), { resourceLimits: { stackSizeMb: THREAD_STACK_MB } });
    const t: Thread = { worker, ready: false, dead: false, job: undefined, startTimer: undefined };
    threads.push(t);
    t.startTimer = setTimeout(
      () => threadFailed(t, fail("BATON_SANDBOX_ERROR", `sandbox thread did not start within ${THREAD_START_TIMEOUT_MS} ms`)),
      THREAD_START_TIMEOUT_MS,
    );
    t.startTimer.unref();
    worker.on("message", (msg: { ready?: true; id?: number; res?: ExecuteResponse }) => {
      if (t.dead) return;
      if (msg.ready) {
        t.ready = true;
        if (t.startTimer) clearTimeout(t.startTimer);
        pump();
        if (!t.job) worker.unref();
        return;
      }
      const job = t.job;
      if (!job || job.id !== msg.id || !msg.res) return;
      finish(job, msg.res);
      if (msg.res.poisoned) kill(t);
      pump();
    });
    worker.on("error", (err: Error & { code?: string }) => {
      if (t.dead) return;
      threadFailed(
        t,
        err.code === "ERR_WORKER_OUT_OF_MEMORY"
          ? fail("BATON_SANDBOX_MEMORY", `sandboxed handler exceeded its memory limit (sandbox thread ran out of memory: ${err.message})`)
          : fail("BATON_SANDBOX_ERROR", `sandboxed handler failed: the sandbox thread failed (${err.message})`),
      );
    });
    worker.on("exit", (code) => {
      if (t.dead) return;
      threadFailed(t, fail("BATON_SANDBOX_ERROR", `sandboxed handler failed: the sandbox thread exited with code ${code}`));
    });
  }

  function dispatch(t: Thread, job: Job): void {
    queue.splice(queue.indexOf(job), 1);
    t.job = job;
    job.thread = t;
    job.timer = setTimeout(() => {
      finish(job, fail("BATON_SANDBOX_TIMEOUT", `sandboxed handler interrupted after ${job.req.timeoutMs} ms time limit (its thread was stopped)`));
      kill(t);
      pump();
    }, job.req.timeoutMs + BACKSTOP_GRACE_MS);
    t.worker.ref();
    const msg: ThreadMessage = { id: job.id, req: job.req };
    t.worker.postMessage(msg);
  }

  function pump(): void {
    if (disposed) return;
    let starting = threads.filter((t) => !t.ready).length;
    for (const job of [...queue]) {
      const idle = threads.find((t) => t.ready && !t.dead && !t.job);
      if (idle) dispatch(idle, job);
      else if (threads.length < maxThreads && starting < queue.length) {
        spawn();
        starting++;
      } else break;
    }
  }

  return {
    runHandler(source, handlerName, thisValue, args = [], options = {}) {
      if (disposed) return Promise.resolve(fail("BATON_SANDBOX_DISPOSED", SandboxDisposed().message));
      const problems: string[] = [];
      checkLimit(problems, "timeoutMs", options.timeoutMs);
      checkLimit(problems, "memoryLimitBytes", options.memoryLimitBytes);
      if (typeof source !== "string") problems.push("source: must be a string");
      if (typeof handlerName !== "string") problems.push("handlerName: must be a string");
      if (thisValue === null || typeof thisValue !== "object" || Array.isArray(thisValue)) problems.push("thisValue: must be a JSON object");
      if (!Array.isArray(args)) problems.push("args: must be an array");
      let thisJson = "";
      let argsJson = "";
      if (problems.length === 0) {
        try {
          thisJson = JSON.stringify(thisValue);
          argsJson = JSON.stringify(args);
        } catch (err) {
          problems.push(`thisValue / args: not JSON (${err instanceof Error ? err.message : String(err)})`);
        }
      }
      if (problems.length > 0) return Promise.resolve(fail("BATON_SANDBOX_INVALID_OPTIONS", SandboxInvalidOptions(problems).message));
      const signal = options.signal;
      if (signal?.aborted) return Promise.resolve(fail("BATON_SANDBOX_CANCELLED", SandboxCancelled(abortReason(signal)).message));

      return new Promise<SandboxResult>((resolve) => {
        const job: Job = {
          id: nextId++,
          req: {
            source,
            handler: handlerName,
            thisJson,
            argsJson,
            timeoutMs: options.timeoutMs ?? timeoutMs,
            memoryLimitBytes: options.memoryLimitBytes ?? memoryLimitBytes,
            maxStackBytes,
          },
          resolve,
          signal,
          onAbort: undefined,
          timer: undefined,
          thread: undefined,
          done: false,
        };
        if (signal) {
          job.onAbort = () => {
            const t = job.thread;
            finish(job, fail("BATON_SANDBOX_CANCELLED", SandboxCancelled(abortReason(signal)).message));
            if (t) {
              kill(t);
              pump();
            }
          };
          signal.addEventListener("abort", job.onAbort, { once: true });
        }
        queue.push(job);
        pump();
      });
    },

    async dispose() {
      if (disposed) return;
      disposed = true;
      const all = [...threads];
      for (const job of [...queue]) finish(job, fail("BATON_SANDBOX_DISPOSED", SandboxDisposed().message));
      for (const t of all) {
        if (t.job) finish(t.job, fail("BATON_SANDBOX_DISPOSED", SandboxDisposed().message));
        t.dead = true;
        if (t.startTimer) clearTimeout(t.startTimer);
      }
      threads.length = 0;
      await Promise.all(all.map((t) => t.worker.terminate().catch(() => undefined)));
    },
  };
}
