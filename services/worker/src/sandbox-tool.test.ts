/**
 * The `sandbox.run` tool. Rules checked:
 * - input is checked first: a handler name that is not an identifier, or limits above the
 *   tool's maximum, are invalid input naming the field;
 * - a call answers `this` after the handler, the returned value and the console lines;
 * - a sandbox failure is thrown as a Baton error with the sandbox's code, not retryable;
 * - an aborted call rejects with the signal's reason (the SDK's own timeout/cancel error).
 */
import { afterAll, describe, expect, it } from "@jest/globals";
import { createSandbox } from "@baton/sandbox";
import { compileChecks } from "@baton/sdk";
import type { ToolContext, ToolSpec } from "@baton/sdk";
import { sandboxTools } from "./sandbox-tool.ts";
import { toolContext } from "@baton/sdk/testing";

const sandbox = createSandbox({ maxThreads: 2 });
afterAll(async () => {
  await sandbox.dispose();
});
const [tool] = sandboxTools({ sandbox, maxTimeoutMs: 5_000 }) as [ToolSpec];

function ctx(signal: AbortSignal = new AbortController().signal): ToolContext {
  return toolContext({ signal });
}

async function call(args: unknown, c: ToolContext = ctx()): Promise<unknown> {
  const checks = compileChecks(tool);
  const input = checks.input(args);
  if (!input.ok) throw new Error(input.problems);
  const out = await tool.handler(input.value, c);
  const checked = checks.output(out);
  if (!checked.ok) throw new Error(checked.problems);
  return out;
}

const SCRIPT = `
export function decide() {
  const text = this.last_response.choices[0].message.content;
  this.common_data.turns = (this.common_data.turns || 0) + 1;
  this.context.getContext('main').addMessage('assistant', text);
  console.log('turn', this.common_data.turns);
  return text.includes('done') ? 'stop' : 'iterate';
}
export function spin() { for (;;) {} }
`;

describe("sandbox.run", () => {
  it("is one tool with a long enough time limit and a single attempt", () => {
    expect(tool.name).toBe("sandbox.run");
    expect(tool.timeoutMs).toBeGreaterThan(5_000);
    expect(tool.retry).toEqual({ maxAttempts: 1 });
  });

  it("checks input before running anything", async () => {
    await expect(call({ script: SCRIPT, handler: "no-such name", this: {} })).rejects.toThrow(/handler.*must be a JavaScript identifier/);
    await expect(call({ script: SCRIPT, handler: "decide", this: {}, timeoutMs: 60_000 })).rejects.toThrow(/timeoutMs/);
    await expect(call({ script: SCRIPT, handler: "decide", this: [] })).rejects.toThrow(/this/);
    expect(() => sandboxTools({ maxTimeoutMs: 0, maxThreads: 100 })).toThrow(/maxTimeoutMs: .*maxThreads: /);
  });

  it("answers this, returned and logs", async () => {
    const out = await call({
      script: SCRIPT,
      handler: "decide",
      this: { common_data: {}, contexts: { main: { messages: [] } }, last_response: { choices: [{ message: { content: "all done" } }] } },
    });
    expect(out).toEqual({
      this: { common_data: { turns: 1 }, contexts: { main: { messages: [{ role: "assistant", content: "all done" }] } }, last_response: { choices: [{ message: { content: "all done" } }] } },
      returned: "stop",
      logs: ["turn 1"],
    });
  });

  it("throws sandbox failures with their code, not retryable", async () => {
    await expect(call({ script: SCRIPT, handler: "spin", this: {}, timeoutMs: 200 })).rejects.toMatchObject({ code: "BATON_SANDBOX_TIMEOUT", retryable: false });
    await expect(call({ script: SCRIPT, handler: "absent", this: {} })).rejects.toMatchObject({ code: "BATON_SANDBOX_HANDLER_MISSING", retryable: false });
    await expect(call({ script: "function big() { return new Array(1e9).fill(1) }", handler: "big", this: {} })).rejects.toMatchObject({
      code: "BATON_SANDBOX_MEMORY",
      retryable: false,
    });
    await expect(call({ script: "function f() { throw new Error('nope') }", handler: "f", this: {} })).rejects.toMatchObject({
      code: "BATON_SANDBOX_ERROR",
      message: expect.stringContaining("Error: nope (at f (script.js:1:"),
    });
    await expect(call({ script: "function f() { return () => 1 }", handler: "f", this: {} })).rejects.toMatchObject({ code: "BATON_SANDBOX_RESULT_NOT_JSON" });
  });

  it("rejects with the signal's reason when the SDK aborts the call", async () => {
    const ac = new AbortController();
    const pending = call({ script: SCRIPT, handler: "spin", this: {}, timeoutMs: 5_000 }, ctx(ac.signal));
    const reason = Object.assign(new Error("tool sandbox.run was cancelled"), { code: "BATON_TOOL_CANCELLED" });
    setTimeout(() => ac.abort(reason), 50);
    await expect(pending).rejects.toBe(reason);
  });
});
