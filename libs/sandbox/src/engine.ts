/**
 * Runs one handler call in a fresh QuickJS runtime and context (inside the sandbox
 * thread; see `thread.ts`). Synchronous: the calling thread is busy until the handler
 * ends, is interrupted at its deadline, or runs out of memory.
 */
import type { QuickJSContext, QuickJSHandle, QuickJSRuntime, QuickJSWASMModule } from "quickjs-emscripten";
import { PRELUDE } from "./prelude.ts";
import type { ExecuteRequest, ExecuteResponse, JsonObject, JsonValue, SandboxErrorCode, SandboxFailure } from "./types.ts";

/** The file name the script runs under; its stack lines read `at fn (script.js:line:col)`. */
export const SCRIPT_FILE = "script.js";

const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

/**
 * Makes a SynthDev `script.js` (an ES module in form) runnable as a classic script
 * without changing its line numbers: `export function|const|let|var|class|async function`
 * lose `export`; `export default function name` becomes a declaration; any other
 * `export default X` becomes `module.exports.default = X`; `export { a, b as c }`
 * becomes assignments to `module.exports`. `import` and `export ... from` stay and fail
 * as syntax errors: a handler script has nothing to import.
 */
export function rewriteExports(source: string): string {
  return source
    .replace(/^([ \t]*)export[ \t]+default[ \t]+(?=(?:async[ \t]+)?function[ \t]*\*?[ \t]*[A-Za-z_$]|class[ \t]+[A-Za-z_$])/gm, "$1")
    .replace(/^([ \t]*)export[ \t]+default[ \t]+/gm, "$1module.exports.default = ")
    .replace(/^([ \t]*)export[ \t]+(?=(?:async[ \t]+)?function\b|const\b|let\b|var\b|class\b)/gm, "$1")
    .replace(/^([ \t]*)export[ \t]*\{([^}]*)\}[ \t]*;?(?![ \t]*from\b)/gm, (_m, indent: string, list: string) => {
      const assignments = list
        .split(",")
        .map((part) => part.trim())
        .filter((part) => part !== "")
        .map((part) => {
          const [local, exported] = part.split(/\s+as\s+/);
          return `module.exports[${JSON.stringify((exported ?? local)!.trim())}] = ${local!.trim()};`;
        });
      return indent + assignments.join(" ") + "\n".repeat((list.match(/\n/g) ?? []).length);
    });
}

function failure(code: SandboxErrorCode, message: string, extra: Partial<SandboxFailure> = {}): SandboxFailure {
  const { logs, ...rest } = extra;
  return { ok: false, code, message, ...rest, ...(logs && logs.length > 0 ? { logs } : {}) };
}

interface ErrorInfo {
  name: string;
  message: string;
  stack: string;
}

const MAX_STACK_LINES = 20;
const MEMORY_MESSAGES = new Set(["out of memory", "string too long"]);

/** Only the script's own frames: the prelude's are an implementation detail. */
function scriptStack(stack: string): string {
  return stack
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l.includes(SCRIPT_FILE))
    .slice(0, MAX_STACK_LINES)
    .join("\n");
}

function errorFailure(info: ErrorInfo, req: ExecuteRequest, where: string, logs?: string[]): SandboxFailure {
  const extra = logs === undefined || logs.length === 0 ? {} : { logs };
  if (info.name === "InternalError" && info.message === "interrupted") {
    return failure("BATON_SANDBOX_TIMEOUT", `sandboxed handler interrupted after ${req.timeoutMs} ms time limit`, extra);
  }
  if (info.name === "InternalError" && MEMORY_MESSAGES.has(info.message)) {
    return failure("BATON_SANDBOX_MEMORY", `sandboxed handler exceeded its memory limit of ${req.memoryLimitBytes} bytes (${info.message})`, extra);
  }
  const stack = scriptStack(info.stack);
  const first = stack.split("\n")[0];
  const text = `${where}${info.name === "thrown value" ? "threw " : `${info.name}: `}${info.message}${first ? ` (${first})` : ""}`;
  return failure("BATON_SANDBOX_ERROR", `sandboxed handler failed: ${text}`, { ...extra, ...(stack ? { stack } : {}) });
}

function dumpError(ctx: QuickJSContext, handle: QuickJSHandle): ErrorInfo {
  try {
    const d: unknown = ctx.dump(handle);
    if (d !== null && typeof d === "object") {
      const o = d as { name?: unknown; message?: unknown; stack?: unknown };
      const text = (v: unknown, fallback: string): string => (typeof v === "string" ? v : v === undefined ? fallback : JSON.stringify(v) ?? fallback);
      return { name: text(o.name, "Error"), message: text(o.message, ""), stack: typeof o.stack === "string" ? o.stack : "" };
    }
    return { name: "thrown value", message: typeof d === "string" ? d : JSON.stringify(d) ?? String(d), stack: "" };
  } catch {
    return { name: "Error", message: "the sandbox could not describe the error", stack: "" };
  } finally {
    handle.dispose();
  }
}

interface Outcome {
  s: "ok" | "threw" | "missing" | "notjson" | "pending";
  this?: JsonObject;
  returned?: JsonValue;
  name?: string;
  message?: string;
  stack?: string;
  path?: string;
  problem?: string;
  logs?: string[];
  logsDropped?: number;
}

function logsOf(o: Outcome): string[] {
  const logs = Array.isArray(o.logs) ? o.logs.filter((l): l is string => typeof l === "string") : [];
  return o.logsDropped ? [...logs, `(${o.logsDropped} more console lines dropped)`] : logs;
}

function fromOutcome(json: string, req: ExecuteRequest): ExecuteResponse {
  let o: Outcome;
  try {
    o = JSON.parse(json) as Outcome;
  } catch {
    return failure("BATON_SANDBOX_RESULT_NOT_JSON", "sandboxed handler result is not JSON: the sandbox answered unparseable text");
  }
  const logs = logsOf(o);
  switch (o.s) {
    case "ok": {
      const self = o.this;
      if (self === null || typeof self !== "object" || Array.isArray(self)) {
        return failure("BATON_SANDBOX_RESULT_NOT_JSON", "sandboxed handler result is not JSON: this is not an object", { logs });
      }
      return { ok: true, this: self, returned: o.returned ?? null, logs };
    }
    case "notjson":
      return failure("BATON_SANDBOX_RESULT_NOT_JSON", `sandboxed handler result is not JSON: ${o.path} ${o.problem}`, { logs });
    case "missing":
      return failure(
        "BATON_SANDBOX_HANDLER_MISSING",
        `sandboxed script has no handler "${req.handler}": no function of that name is declared, exported or assigned to module.exports`,
        { logs },
      );
    case "pending":
      return failure(
        "BATON_SANDBOX_ERROR",
        "sandboxed handler failed: its promise never settled (the sandbox has no timers or I/O to wait for)",
        { logs },
      );
    case "threw":
      return errorFailure({ name: o.name ?? "Error", message: o.message ?? "", stack: o.stack ?? "" }, req, "", logs);
    default:
      return failure("BATON_SANDBOX_RESULT_NOT_JSON", "sandboxed handler result is not JSON: the sandbox answered an unknown outcome", { logs });
  }
}

function runInContext(rt: QuickJSRuntime, ctx: QuickJSContext, req: ExecuteRequest, timedOut: () => boolean): ExecuteResponse {
  const fail = (handle: QuickJSHandle, where: string): ExecuteResponse => {
    const info = dumpError(ctx, handle);
    if (timedOut()) return errorFailure({ name: "InternalError", message: "interrupted", stack: "" }, req, where);
    return errorFailure(info, req, where);
  };

  const prelude = ctx.evalCode(PRELUDE, "baton:prelude.js");
  if (prelude.error) return fail(prelude.error, "prelude: ");
  const api = prelude.value;
  const run = ctx.getProp(api, "run");
  const collect = ctx.getProp(api, "collect");
  api.dispose();
  try {
    const script = ctx.evalCode(rewriteExports(req.source), SCRIPT_FILE, { type: "global" });
    if (script.error) return fail(script.error, "script: ");
    script.value.dispose();

    const args = [ctx.newString(req.handler), ctx.newString(req.thisJson), ctx.newString(req.argsJson)];
    const called = ctx.callFunction(run, ctx.undefined, ...args);
    for (const a of args) a.dispose();
    if (called.error) return fail(called.error, "");
    let out = called.value;
    if (ctx.typeof(out) !== "string") {
      out.dispose();
      const jobs = rt.executePendingJobs();
      if (jobs.error) return fail(jobs.error, "");
      const collected = ctx.callFunction(collect, ctx.undefined);
      if (collected.error) return fail(collected.error, "");
      out = collected.value;
    }
    const json = ctx.getString(out);
    out.dispose();
    return fromOutcome(json, req);
  } finally {
    run.dispose();
    collect.dispose();
  }
}

/**
 * Runs `req` in a fresh runtime of `qjs` with its own memory limit, stack limit and
 * deadline, and disposes the runtime. Never throws: a failure of the WASM instance itself
 * (a trap, a host stack overflow, a dispose that finds leaked objects) is answered as
 * BATON_SANDBOX_ERROR with `poisoned: true`, and the caller must drop the instance.
 */
export function execute(qjs: QuickJSWASMModule, req: ExecuteRequest): ExecuteResponse {
  if (!IDENTIFIER.test(req.handler)) {
    return failure("BATON_SANDBOX_HANDLER_MISSING", `sandboxed script has no handler "${req.handler}": not a JavaScript identifier`);
  }
  let rt: QuickJSRuntime | undefined;
  let ctx: QuickJSContext | undefined;
  let result: ExecuteResponse;
  let interrupted = false;
  try {
    rt = qjs.newRuntime();
    rt.setMemoryLimit(req.memoryLimitBytes);
    rt.setMaxStackSize(req.maxStackBytes);
    const deadline = Date.now() + req.timeoutMs;
    rt.setInterruptHandler(() => {
      if (!interrupted && Date.now() > deadline) interrupted = true;
      return interrupted;
    });
    ctx = rt.newContext();
    result = runInContext(rt, ctx, req, () => interrupted);
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    if (interrupted) result = { ...errorFailure({ name: "InternalError", message: "interrupted", stack: "" }, req, ""), poisoned: true };
    else result = { ...failure("BATON_SANDBOX_ERROR", `sandboxed handler failed: the sandbox itself failed (${message})`), poisoned: true };
  }
  try {
    ctx?.dispose();
    rt?.dispose();
  } catch {
    result = { ...result, poisoned: true };
  }
  return result;
}
