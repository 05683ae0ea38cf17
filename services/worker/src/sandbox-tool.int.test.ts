/**
 * `sandbox.run` served by a real tool worker over NATS. Rules checked:
 * - a call answers a ToolResult whose output is `this`, the returned value and the logs;
 * - an endless loop answers BATON_SANDBOX_TIMEOUT, not retryable, and the same worker
 *   answers the next call (the loop never blocked the worker's event loop);
 * - a missing handler answers BATON_SANDBOX_HANDLER_MISSING, not retryable.
 */
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { connectBus } from "@baton/bus";
import type { Bus } from "@baton/bus";
import { createSandbox } from "@baton/sandbox";
import { createWorker } from "@baton/sdk";
import type { Worker } from "@baton/sdk";
import { callTool, collectResults, deletePrefix, randomToolPrefix, TEST_NATS_URL } from "@baton/sdk/testing";
import type { ResultCollector } from "@baton/sdk/testing";
import { createLogger } from "@baton/telemetry";
import { sandboxTools } from "./sandbox-tool.ts";

const silent = createLogger("test", "silent");
const SCRIPT = `
export function plan() {
  this.common_data.steps = this.input.items.map((item, i) => ({ i, item }));
  this.context.getContext('planner').addMessage({ role: 'assistant', content: 'planned ' + this.input.items.length });
  return this.common_data.steps.length;
}
export function spin() { while (true) {} }
`;

describe("sandbox.run on a worker", () => {
  const prefix = randomToolPrefix();
  const sandbox = createSandbox();
  let bus: Bus;
  let results: ResultCollector;
  let worker: Worker;

  beforeAll(async () => {
    bus = await connectBus({ servers: TEST_NATS_URL, prefix, name: "sandbox-tool-test", logger: silent });
    results = await collectResults(bus);
    worker = createWorker({ bus, tools: sandboxTools({ sandbox }), concurrency: 2, workerId: "w-sandbox", logger: silent });
    await worker.start();
  });

  afterAll(async () => {
    await worker?.drain();
    await results?.stop();
    await bus?.drain();
    await sandbox.dispose();
    await deletePrefix(prefix);
  });

  it("answers this, returned and logs", async () => {
    const r = await results.waitFor(
      await callTool(bus, "sandbox.run", {
        script: SCRIPT,
        handler: "plan",
        this: { common_data: {}, input: { items: ["a", "b"] }, contexts: { planner: { messages: [] } } },
      }),
    );
    expect(r.error).toBeUndefined();
    expect(r.output).toEqual({
      this: {
        common_data: { steps: [{ i: 0, item: "a" }, { i: 1, item: "b" }] },
        input: { items: ["a", "b"] },
        contexts: { planner: { messages: [{ role: "assistant", content: "planned 2" }] } },
      },
      returned: 2,
      logs: [],
    });
  });

  it("answers an endless loop with BATON_SANDBOX_TIMEOUT and keeps serving", async () => {
    const spin = await results.waitFor(await callTool(bus, "sandbox.run", { script: SCRIPT, handler: "spin", this: {}, timeoutMs: 300 }));
    expect(spin).toMatchObject({ ok: false, error: { code: "BATON_SANDBOX_TIMEOUT", retryable: false } });
    const next = await results.waitFor(await callTool(bus, "sandbox.run", { script: SCRIPT, handler: "plan", this: { common_data: {}, input: { items: [] }, contexts: { planner: [] } } }));
    expect(next).toMatchObject({ ok: true, output: { returned: 0 } });
  });

  it("answers a missing handler with BATON_SANDBOX_HANDLER_MISSING", async () => {
    const r = await results.waitFor(await callTool(bus, "sandbox.run", { script: SCRIPT, handler: "absent", this: {} }));
    expect(r).toMatchObject({ ok: false, error: { code: "BATON_SANDBOX_HANDLER_MISSING", retryable: false } });
  });
});
