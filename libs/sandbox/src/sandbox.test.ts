/**
 * The QuickJS sandbox for SynthDev handlers. Rules checked:
 * - a handler of a SynthDev `script.js` (`export function`, plain declarations,
 *   `module.exports`, `export default {...}`, `export { a as b }`) runs with `this` built
 *   from JSON and its mutated `this` and return value come back as JSON; the script's own
 *   functions are methods of `this`; contexts have `addMessage(role, content)` and
 *   `addMessage({ role, content })`; `this.context.getContext(name)` finds them;
 * - every call runs in a fresh context: globals, prototypes and module state never leak;
 * - an endless loop ends with BATON_SANDBOX_TIMEOUT and a 1 GB allocation or string
 *   doubling with BATON_SANDBOX_MEMORY, while the host's event loop keeps running during
 *   the call and the next call succeeds;
 * - `require`, `process`, `fetch`, timers do not exist; `constructor.constructor` yields
 *   the sandbox's own Function; prototype pollution never reaches the host;
 * - a throw is BATON_SANDBOX_ERROR naming the error and its `script.js` line; a missing
 *   handler is BATON_SANDBOX_HANDLER_MISSING; a non-JSON result is
 *   BATON_SANDBOX_RESULT_NOT_JSON naming the path;
 * - cancellation, disposal and bad options answer their own codes.
 */
import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { createSandbox, rewriteExports, sandboxFailureError } from "./index.ts";
import type { JsonObject, Sandbox, SandboxResult, SandboxSuccess } from "./index.ts";

const SEED_SCRIPT = readFileSync(new URL("./__fixtures__/synthdev-script.js.txt", import.meta.url), "utf8");

let sb: Sandbox;
beforeAll(() => {
  sb = createSandbox({ timeoutMs: 1000 });
});
afterAll(async () => {
  await sb.dispose();
});

function ok(r: SandboxResult): SandboxSuccess {
  if (!r.ok) throw new Error(`expected success, got ${r.code}: ${r.message}`);
  return r;
}

/** Counts host timer ticks while `work` runs: a handler that blocked the host's thread would leave it at 0. */
async function whileCounting<T>(work: () => Promise<T>): Promise<{ value: T; ticks: number }> {
  let ticks = 0;
  const interval = setInterval(() => ticks++, 5);
  try {
    const value = await work();
    return { value, ticks };
  } finally {
    clearInterval(interval);
  }
}

async function hostStillResponsive(): Promise<void> {
  await new Promise<void>((resolve) => setTimeout(resolve, 1));
  const r = ok(await sb.runHandler("function f(a, b) { return a + b }", "f", {}, [2, 3]));
  expect(r.returned).toBe(5);
}

describe("SynthDev handlers", () => {
  it("runs the ADR's script: helpers on this, getContext().addMessage, last_response, error handler", async () => {
    const state = {
      common_data: {},
      input: { task_description: "Build a parser" },
      contexts: { analysis_context: { messages: [{ role: "system", content: "You analyse." }] } },
    };
    const init = ok(await sb.runHandler(SEED_SCRIPT, "initializeWorkflow", state));
    expect(init.this.common_data).toEqual({ iteration_count: 0, start_time: expect.any(Number) });
    expect(init.logs).toEqual(["Starting workflow: Build a parser"]);
    expect(init.returned).toBeNull();

    const pre = ok(await sb.runHandler(SEED_SCRIPT, "prepareAnalysis", init.this));
    expect(pre.this.contexts).toEqual({
      analysis_context: {
        messages: [
          { role: "system", content: "You analyse." },
          { role: "system", content: "Analysis phase: requirements" },
        ],
      },
    });

    const post = ok(
      await sb.runHandler(SEED_SCRIPT, "processAnalysis", { ...pre.this, last_response: "This is complex.\nWe need a lexer\nand a requirement for speed" }),
    );
    expect(post.this.common_data).toMatchObject({
      analysis_result: { complexity: "high", requirements: ["We need a lexer", "and a requirement for speed"] },
    });
    expect(post.logs[0]).toMatch(/^Analysis completed: \{"complexity":"high"/);
    expect(ok(await sb.runHandler(SEED_SCRIPT, "decideNextStep", post.this)).returned).toBe("detailed_planning");
    const final = ok(await sb.runHandler(SEED_SCRIPT, "generateFinalOutput", post.this));
    expect(final.returned).toMatchObject({ success: true, iterations: 0, analysis: { complexity: "high" } });

    let errState: JsonObject = { ...post.this, last_error: { message: "model timed out" } };
    const answers: unknown[] = [];
    for (let i = 0; i < 4; i++) {
      const r = ok(await sb.runHandler(SEED_SCRIPT, "handleWorkflowError", errState));
      answers.push(r.returned);
      errState = { ...r.this, last_error: { message: "model timed out" } };
    }
    expect(answers).toEqual(["retry", "retry", "retry", "stop"]);
    expect(errState.common_data).toMatchObject({ error_count: 4, last_error_message: "model timed out" });
  });

  it("reads this.last_response.choices[0].message.content", async () => {
    const script = `
      export function postProcess() {
        const text = this.last_response.choices[0].message.content;
        this.common_data.verdict = text.trim().toUpperCase();
        return text.length;
      }`;
    const r = ok(
      await sb.runHandler(script, "postProcess", { common_data: {}, last_response: { choices: [{ message: { role: "assistant", content: " approve " } }] } }),
    );
    expect(r.this.common_data).toEqual({ verdict: "APPROVE" });
    expect(r.returned).toBe(9);
  });

  it("adds messages to contexts in both call forms and names unknown contexts", async () => {
    const script = `
      function add() {
        this.contexts.main.addMessage('user', 'hello');
        this.context.getContext('main').addMessage({ role: 'assistant', content: 'hi', name: 'coder' });
        this.contexts.fresh.addMessage('system', { structured: true });
        return this.contexts.main.getMessages().length;
      }
      function unknown() { this.context.getContext('nope'); }
      function badRole() { this.contexts.main.addMessage('', 'x'); }
      function listForm() { this.context.getContext('a').addMessage('user', 'in a list'); }`;
    const r = ok(await sb.runHandler(script, "add", { contexts: { main: { messages: [], max_length: 1000 }, fresh: {} } }));
    expect(r.this).toEqual({
      contexts: {
        main: { messages: [{ role: "user", content: "hello" }, { role: "assistant", content: "hi", name: "coder" }], max_length: 1000 },
        fresh: { messages: [{ role: "system", content: { structured: true } }] },
      },
    });
    expect(r.returned).toBe(2);

    const missing = await sb.runHandler(script, "unknown", { contexts: { main: { messages: [] } } });
    expect(missing).toMatchObject({ ok: false, code: "BATON_SANDBOX_ERROR" });
    expect(!missing.ok && missing.message).toContain('no context "nope" in this.contexts (known: main)');
    const bad = await sb.runHandler(script, "badRole", { contexts: { main: { messages: [] } } });
    expect(!bad.ok && bad.message).toContain("addMessage: role must be a non-empty string");

    const list = ok(await sb.runHandler(script, "listForm", { contexts: [{ name: "a", messages: [] }] }));
    expect(list.this).toEqual({ contexts: [{ name: "a", messages: [{ role: "user", content: "in a list" }] }] });
  });

  it("finds handlers declared, exported, in module.exports, export default and export lists; passes args", async () => {
    const cases: [string, string][] = [
      ["function h(x) { return x * 2 }", "h"],
      ["export async function h(x) { await null; return x * 2 }", "h"],
      ["module.exports = { h(x) { return x * 2 } }", "h"],
      ["exports.h = function (x) { return x * 2 }", "h"],
      ["export default { h(x) { return x * 2 } }", "h"],
      ["const twice = (x) => x * 2\nexport { twice as h }", "h"],
      ["export const h = (x) => x * 2", "h"],
    ];
    for (const [script, name] of cases) {
      const r = await sb.runHandler(script, name, {}, [21]);
      expect({ script, r }).toEqual({ script, r: expect.objectContaining({ ok: true, returned: 42 }) });
    }
  });

  it("keeps line numbers when rewriting exports", () => {
    const src = "export function a() {}\nexport {\n  a as b,\n  a\n}\nexport default 1\nthrow 1";
    const out = rewriteExports(src);
    expect(out.split("\n")).toHaveLength(src.split("\n").length);
    expect(out).toContain('module.exports["b"] = a; module.exports["a"] = a;');
    expect(out).toContain("module.exports.default = 1");
  });
});

describe("isolation", () => {
  it("starts every call from a fresh context", async () => {
    const script = `
      let n = 0;
      function bump() {
        n++;
        globalThis.leaked = (globalThis.leaked || 0) + 1;
        Object.prototype.inherited = 'x';
        Array.prototype.extra = function () {};
        return [n, globalThis.leaked, ({}).inherited === 'x'];
      }
      function look() { return [typeof leaked, ({}).inherited === undefined, typeof [].extra]; }`;
    expect(ok(await sb.runHandler(script, "bump", {})).returned).toEqual([1, 1, true]);
    expect(ok(await sb.runHandler(script, "bump", {})).returned).toEqual([1, 1, true]);
    expect(ok(await sb.runHandler(script, "look", {})).returned).toEqual(["undefined", true, "undefined"]);
  });

  it("offers no require, process, fetch, timers or host objects", async () => {
    const script = `
      function probe() {
        return {
          types: [typeof require, typeof process, typeof fetch, typeof setTimeout, typeof setInterval, typeof queueMicrotask,
                  typeof Buffer, typeof global, typeof WebAssembly, typeof XMLHttpRequest, typeof importScripts, typeof Deno],
          globals: Object.getOwnPropertyNames(globalThis).filter((n) => !/^[A-Z]/.test(n)).sort(),
          fnProcess: (function () { try { return this.constructor.constructor('return typeof process')(); } catch (e) { return 'threw' } })(),
        };
      }
      function callRequire() { return require('fs').readFileSync('/etc/passwd', 'utf8'); }
      function escape() { return this.constructor.constructor('return process')().env; }
      function viaFunction() { return Function('return this')().process; }`;
    const r = ok(await sb.runHandler(script, "probe", {}));
    expect(r.returned).toEqual({
      types: Array(12).fill("undefined"),
      globals: [
        "callRequire", "console", "decodeURI", "decodeURIComponent", "encodeURI", "encodeURIComponent", "escape", "eval",
        "exports", "globalThis", "isFinite", "isNaN", "module", "parseFloat", "parseInt", "probe", "undefined", "unescape", "viaFunction",
      ].sort(),
      fnProcess: "undefined",
    });
    for (const handler of ["callRequire", "escape"]) {
      const failed = await sb.runHandler(script, handler, {});
      expect(failed).toMatchObject({ ok: false, code: "BATON_SANDBOX_ERROR" });
      expect(!failed.ok && failed.message).toMatch(/ReferenceError: '(require|process)' is not defined \(at \w+ \(script\.js:\d+:\d+\)\)/);
    }
    expect(ok(await sb.runHandler(script, "viaFunction", {})).returned).toBeNull();
  });

  it("never lets prototype pollution reach the host", async () => {
    const script = `
      function pollute() {
        Object.prototype.polluted = 1;
        ({}).__proto__.x = 1;
        this.constructor.prototype.viaThis = 1;
        this.constructor.constructor('Object.prototype.viaFunction = 1')();
        this.common_data.__proto__.deep = 1;
        return JSON.parse('{"__proto__": {"polluted": 1}, "ok": true}');
      }`;
    const r = ok(await sb.runHandler(script, "pollute", { common_data: {} }));
    const probe = {} as Record<string, unknown>;
    for (const key of ["polluted", "x", "viaThis", "viaFunction", "deep"]) expect(probe[key]).toBeUndefined();
    // The result is cloned from the sandbox thread into the host's main realm (not jest's test realm): check that realm too.
    const hostProto = Object.getPrototypeOf(r.returned) as Record<string, unknown>;
    expect(Object.getPrototypeOf(hostProto)).toBeNull();
    for (const key of ["polluted", "x", "viaThis", "viaFunction", "deep"]) expect(hostProto[key]).toBeUndefined();
    expect((r.returned as Record<string, unknown>).polluted).toBeUndefined();
    expect(Object.prototype.hasOwnProperty.call(r.returned, "__proto__")).toBe(true);
    expect(r.this).toEqual({ common_data: {} });
  });
});

describe("limits", () => {
  it("interrupts an endless loop with BATON_SANDBOX_TIMEOUT while the host keeps running", async () => {
    const { value, ticks } = await whileCounting(() => sb.runHandler("export function spin() { while (true) {} }", "spin", {}, [], { timeoutMs: 300 }));
    expect(value).toEqual({ ok: false, code: "BATON_SANDBOX_TIMEOUT", message: "sandboxed handler interrupted after 300 ms time limit" });
    expect(ticks).toBeGreaterThan(0);
    await hostStillResponsive();
  });

  it("interrupts a loop hidden in try/finally, at top level, in an async handler, in a backtracking regex and in a thrown getter", async () => {
    for (const [script, handler] of [
      ["function h() { try { while (true) {} } catch (e) { return 'caught' } finally { while (true) {} } }", "h"],
      ["while (true) {}\nfunction h() {}", "h"],
      ["async function h() { await null; for (;;) {} }", "h"],
      ["function h() { return /(a+)+$/.test('a'.repeat(40) + 'b') }", "h"],
      ["function h() { throw { get name() { for (;;) {} } } }", "h"],
    ] as const) {
      expect(await sb.runHandler(script, handler, {}, [], { timeoutMs: 200 })).toMatchObject({ ok: false, code: "BATON_SANDBOX_TIMEOUT" });
    }
    await hostStillResponsive();
  });

  it("ends a 1 GB allocation with BATON_SANDBOX_MEMORY while the host keeps running", async () => {
    const { value, ticks } = await whileCounting(() => sb.runHandler("function big() { return new Array(1e9).fill(1) }", "big", {}));
    expect(value).toEqual({ ok: false, code: "BATON_SANDBOX_MEMORY", message: "sandboxed handler exceeded its memory limit of 33554432 bytes (out of memory)" });
    expect(ticks).toBeGreaterThan(0);
    await hostStillResponsive();
  });

  it("ends string doubling, a 512 MiB string and an object flood with BATON_SANDBOX_MEMORY", async () => {
    const script = `
      function doubling() { let s = 'x'; for (;;) s += s; }
      function repeat() { return 'x'.repeat(2 ** 29).length; }
      function flood() { const a = []; for (;;) a.push({ i: a.length, s: 'item ' + a.length }); }`;
    for (const handler of ["doubling", "repeat", "flood"]) {
      const r = await sb.runHandler(script, handler, {}, [], { timeoutMs: 10_000 });
      expect({ handler, code: r.ok ? "ok" : r.code }).toEqual({ handler, code: "BATON_SANDBOX_MEMORY" });
    }
    await hostStillResponsive();
  });

  it("honours a per-call memory limit, input included", async () => {
    const script = "function h() { return 'y'.repeat(4 * 1024 * 1024).length }";
    expect(ok(await sb.runHandler(script, "h", {})).returned).toBe(4 * 1024 * 1024);
    expect(await sb.runHandler(script, "h", {}, [], { memoryLimitBytes: 2 * 1024 * 1024 })).toMatchObject({ ok: false, code: "BATON_SANDBOX_MEMORY" });
    const bigInput = { data: "x".repeat(5 * 1024 * 1024) };
    expect(await sb.runHandler("function h() { return this.data.length }", "h", bigInput, [], { memoryLimitBytes: 2 * 1024 * 1024 })).toMatchObject({
      ok: false,
      code: "BATON_SANDBOX_MEMORY",
    });
  });

  it("turns deep recursion into a catchable stack overflow, not a crash", async () => {
    const script = "function f(n) { return f(n + 1) + 1 }\nfunction h() { try { f(0) } catch (e) { return e.message } }";
    expect(ok(await sb.runHandler(script, "h", {})).returned).toBe("stack overflow");
    const r = await sb.runHandler(script, "f", {}, [0]);
    expect(r).toMatchObject({ ok: false, code: "BATON_SANDBOX_ERROR" });
    expect(!r.ok && r.message).toEqual(expect.stringMatching(/^sandboxed handler failed: InternalError: stack overflow \(at f \(script\.js:1:\d+\)\)$/));
    await hostStillResponsive();
  });
});

describe("failures", () => {
  it("reports a throw with the error and its script line", async () => {
    const script = "function ok() {}\nfunction fail() {\n  throw new TypeError('bad input: ' + this.input.x);\n}\nfunction raw() { throw { code: 7 } }";
    const r = await sb.runHandler(script, "fail", { input: { x: 1 } });
    expect(r).toEqual({
      ok: false,
      code: "BATON_SANDBOX_ERROR",
      message: expect.stringMatching(/^sandboxed handler failed: TypeError: bad input: 1 \(at fail \(script\.js:3:\d+\)\)$/),
      stack: expect.stringMatching(/^at fail \(script\.js:3:\d+\)$/),
    });
    const raw = await sb.runHandler(script, "raw", {});
    expect(raw).toMatchObject({ ok: false, code: "BATON_SANDBOX_ERROR" });
    const syntax = await sb.runHandler("function (", "h", {});
    expect(syntax).toMatchObject({ ok: false, code: "BATON_SANDBOX_ERROR" });
    expect(!syntax.ok && syntax.message).toMatch(/^sandboxed handler failed: script: SyntaxError: /);
    const imports = await sb.runHandler("import fs from 'fs'\nfunction h() {}", "h", {});
    expect(imports).toMatchObject({ ok: false, code: "BATON_SANDBOX_ERROR" });
  });

  it("keeps console lines logged before a throw", async () => {
    const r = await sb.runHandler("function h() { console.log('step', 1, { a: 2 }); console.warn('careful'); throw new Error('x') }", "h", {});
    expect(r).toMatchObject({ ok: false, code: "BATON_SANDBOX_ERROR", logs: ["step 1 {\"a\":2}", "warn: careful"] });
  });

  it("answers BATON_SANDBOX_HANDLER_MISSING for absent, non-function, built-in and invalid names", async () => {
    const script = "export const data = 1\nfunction real() {}";
    for (const name of ["absent", "data", "eval", "Array", "console", "a-b", "", "typeof"]) {
      const r = await sb.runHandler(script, name, {});
      expect({ name, code: r.ok ? "ok" : r.code }).toEqual({ name, code: "BATON_SANDBOX_HANDLER_MISSING" });
    }
  });

  it("answers BATON_SANDBOX_RESULT_NOT_JSON naming the path", async () => {
    const script = `
      function fn() { return () => 1 }
      function inThis() { this.common_data.cb = function () {} }
      function cycle() { const a = {}; a.self = a; return { a } }
      function nan() { return [1, NaN] }
      function map() { this.common_data.m = new Map() }
      function big() { return 10n }
      function date() { return new Date(0) }`;
    const expected: Record<string, string> = {
      fn: "returned is a function",
      inThis: "this.common_data.cb is a function",
      cycle: "returned.a.self is a circular reference",
      nan: "returned[1] is NaN",
      map: "this.common_data.m is a Map, not a plain object",
      big: "returned is a BigInt",
    };
    for (const [handler, text] of Object.entries(expected)) {
      const r = await sb.runHandler(script, handler, { common_data: {} });
      expect(r).toEqual({ ok: false, code: "BATON_SANDBOX_RESULT_NOT_JSON", message: `sandboxed handler result is not JSON: ${text}` });
    }
    expect(ok(await sb.runHandler(script, "date", {})).returned).toBe("1970-01-01T00:00:00.000Z");
  });

  it("reports a promise that never settles", async () => {
    const r = await sb.runHandler("function h() { return new Promise(() => {}) }", "h", {});
    expect(r).toMatchObject({ ok: false, code: "BATON_SANDBOX_ERROR" });
    expect(!r.ok && r.message).toContain("never settled");
  });

  it("turns a failure into a Baton error with the same code", () => {
    const e = sandboxFailureError({ ok: false, code: "BATON_SANDBOX_TIMEOUT", message: "m" });
    expect(e).toMatchObject({ code: "BATON_SANDBOX_TIMEOUT", message: "m", retryable: false, status: 422 });
  });
});

describe("lifecycle", () => {
  it("rejects bad options, naming each", () => {
    let err: unknown;
    try {
      createSandbox({ timeoutMs: 0, memoryLimitBytes: 10, maxThreads: 1.5 });
    } catch (e) {
      err = e;
    }
    expect(err).toMatchObject({ code: "BATON_SANDBOX_INVALID_OPTIONS" });
    const message = (err as Error).message;
    expect(message).toContain("memoryLimitBytes: must be an integer from 1048576 to 1073741824, got 10");
    expect(message).toContain("timeoutMs: must be an integer from 1 to 600000, got 0");
    expect(message).toContain("maxThreads: must be an integer from 1 to 64, got 1.5");
  });

  it("answers bad call input with BATON_SANDBOX_INVALID_OPTIONS", async () => {
    const r = await sb.runHandler("function h() {}", "h", [] as never, [], { timeoutMs: -1 });
    expect(r).toMatchObject({ ok: false, code: "BATON_SANDBOX_INVALID_OPTIONS" });
    expect(!r.ok && r.message).toMatch(/timeoutMs: .*thisValue: must be a JSON object/);
  });

  it("runs calls side by side on several threads and cancels a running call", async () => {
    const pool = createSandbox({ maxThreads: 2, timeoutMs: 30_000 });
    try {
      const ac = new AbortController();
      let spinDone = false;
      const spin = pool.runHandler("function spin() { for (;;) {} }", "spin", {}, [], { signal: ac.signal }).then((r) => {
        spinDone = true;
        return r;
      });
      const quick = ok(await pool.runHandler("function q() { return 'quick' }", "q", {}));
      expect(quick.returned).toBe("quick");
      expect(spinDone).toBe(false);
      ac.abort(new Error("user stopped it"));
      expect(await spin).toEqual({ ok: false, code: "BATON_SANDBOX_CANCELLED", message: "sandboxed handler cancelled: user stopped it" });
      expect(ok(await pool.runHandler("function q() { return 1 }", "q", {})).returned).toBe(1);
    } finally {
      await pool.dispose();
    }
  });

  it("answers BATON_SANDBOX_DISPOSED to running, waiting and later calls", async () => {
    const pool = createSandbox({ timeoutMs: 30_000 });
    const running = pool.runHandler("function spin() { for (;;) {} }", "spin", {});
    const waiting = pool.runHandler("function q() {}", "q", {});
    await pool.dispose();
    expect(await running).toMatchObject({ ok: false, code: "BATON_SANDBOX_DISPOSED" });
    expect(await waiting).toMatchObject({ ok: false, code: "BATON_SANDBOX_DISPOSED" });
    expect(await pool.runHandler("function q() {}", "q", {})).toMatchObject({ ok: false, code: "BATON_SANDBOX_DISPOSED" });
  });
});
