/**
 * Rules: json.transform evaluates JSONata (never eval) and reports a bad expression as the
 * non-retryable BATON_TOOL_INVALID_INPUT with the error position; text.template fills
 * {{a.b}} placeholders like the executor's built-in; sleep waits and stops on abort with the
 * signal's reason; every built-in has zod input and output schemas and a time limit.
 */
import { describe, expect, it } from "@jest/globals";
import type { ToolContext, ToolSpec } from "@baton/sdk";
import { builtinTools, policyFromEnv } from "./index.ts";
import { toolContext } from "@baton/sdk/testing";

function context(signal: AbortSignal = new AbortController().signal): ToolContext {
  return toolContext({ signal });
}

const tools = builtinTools(policyFromEnv({}));
function get(name: string): ToolSpec {
  const t = tools.find((s) => s.name === name);
  if (!t) throw new Error(`no ${name}`);
  return t;
}
async function run(name: string, input: unknown, signal?: AbortSignal): Promise<unknown> {
  const t = get(name);
  const out = await t.handler(t.input!.parse(input), context(signal));
  return t.output!.parse(out);
}

describe("builtinTools", () => {
  it("lists the four built-ins with schemas and time limits", () => {
    expect(tools.map((t) => t.name)).toEqual(["http.request", "json.transform", "text.template", "sleep"]);
    for (const t of tools) {
      expect(t.input).toBeDefined();
      expect(t.output).toBeDefined();
      expect(t.timeoutMs).toBeGreaterThan(0);
    }
  });
});

describe("json.transform", () => {
  it("evaluates JSONata over data", async () => {
    const data = { orders: [{ price: 2, qty: 3 }, { price: 5, qty: 1 }] };
    expect(await run("json.transform", { data, expression: "$sum(orders.(price * qty))" })).toEqual({ result: 11 });
    expect(await run("json.transform", { data, expression: "orders[price > 3]" })).toEqual({ result: { price: 5, qty: 1 } });
    expect(await run("json.transform", { data, expression: "missing" })).toEqual({ result: null });
  });

  it("reports a syntax error with its position, not retryable", async () => {
    const err = (await run("json.transform", { data: {}, expression: "orders[price > ]" }).catch((e: unknown) => e)) as {
      code: string;
      retryable: boolean;
      message: string;
      details: { position: number };
    };
    expect(err.code).toBe("BATON_TOOL_INVALID_INPUT");
    expect(err.retryable).toBe(false);
    expect(err.message).toMatch(/at position \d+/);
    expect(typeof err.details.position).toBe("number");
  });

  it("reports an evaluation error the same way", async () => {
    const err = (await run("json.transform", { data: { a: "x" }, expression: "a + 1" }).catch((e: unknown) => e)) as { code: string; message: string };
    expect(err.code).toBe("BATON_TOOL_INVALID_INPUT");
    expect(err.message).toContain("T2001");
  });

  it("has no access to JavaScript", async () => {
    // $eval evaluates JSONata, not JavaScript; "process" is just a missing field.
    expect(await run("json.transform", { data: {}, expression: "$eval('1 + 1')" })).toEqual({ result: 2 });
    expect(await run("json.transform", { data: {}, expression: "process.env" })).toEqual({ result: null });
  });
});

describe("text.template", () => {
  it("fills placeholders like the executor's built-in", async () => {
    const out = await run("text.template", { template: "Hi {{ user.name }}, {{count}} new: {{items}}{{nothing}}", values: { user: { name: "Ada" }, count: 2, items: [1, 2] } });
    expect(out).toEqual({ text: "Hi Ada, 2 new: [1,2]" });
  });
});

describe("sleep", () => {
  it("waits and returns what it slept", async () => {
    expect(await run("sleep", { ms: 5 })).toEqual({ slept: 5 });
  });
  it("stops on abort with the signal's reason", async () => {
    const ac = new AbortController();
    const p = run("sleep", { ms: 60_000 }, ac.signal);
    const reason = Object.assign(new Error("timed out"), { code: "BATON_TOOL_TIMEOUT", status: 504, retryable: true });
    ac.abort(reason);
    await expect(p).rejects.toBe(reason);
  });
  it("rejects negative or too long waits in its input schema", () => {
    expect(get("sleep").input!.safeParse({ ms: -1 }).success).toBe(false);
    expect(get("sleep").input!.safeParse({ ms: 11 * 60_000 }).success).toBe(false);
  });
});
