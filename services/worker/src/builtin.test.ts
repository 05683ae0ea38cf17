/**
 * The built-in tool set of the worker service. Rules checked:
 * - it serves math.sum, echo, text.template, sleep and @baton/tools' http.request and
 *   json.transform, each name once; an extra tool with a built-in's name replaces it;
 * - math.sum sums numbers or a field of objects and names the offending item;
 * - text.template fills dotted placeholders; echo returns its input.
 */
import { describe, expect, it } from "@jest/globals";
import { z } from "zod";
import { compileChecks, defineTool } from "@baton/sdk";
import type { ToolContext, ToolSpec } from "@baton/sdk";
import { builtinToolSpecs, echo, mathSum, textTemplate } from "./index.ts";
import { toolContext } from "@baton/sdk/testing";

const ctx: ToolContext = toolContext();

async function call(spec: ToolSpec, args: unknown): Promise<unknown> {
  const input = compileChecks(spec).input(args);
  if (!input.ok) throw new Error(input.problems);
  return spec.handler(input.value, ctx);
}

describe("built-in tools", () => {
  it("lists each tool once, extras replacing built-ins", () => {
    const names = builtinToolSpecs().map((t) => t.name).sort();
    expect(names).toEqual(["echo", "http.request", "json.transform", "math.sum", "sandbox.run", "sleep", "text.template"]);
    const mine = defineTool({ name: "echo", description: "mine", input: z.object({}), handler: async () => ({}) });
    const withExtra = builtinToolSpecs([mine]);
    expect(withExtra.filter((t) => t.name === "echo")).toEqual([mine]);
  });

  it("math.sum sums numbers or a field, naming a bad item", async () => {
    expect(await call(mathSum as ToolSpec, { values: [1, 2.5] })).toEqual({ sum: 3.5, count: 2 });
    expect(await call(mathSum as ToolSpec, { values: [{ a: 2 }, { a: 3 }], field: "a" })).toEqual({ sum: 5, count: 2 });
    await expect(call(mathSum as ToolSpec, { values: [{ a: 2 }, { b: 3 }], field: "a" })).rejects.toMatchObject({ code: "BATON_TOOL_INVALID_INPUT", message: expect.stringContaining("values[1].a") });
    expect(() => compileChecks(mathSum as ToolSpec).input({ values: "x" })).not.toThrow();
    expect(compileChecks(mathSum as ToolSpec).input({ values: "x" })).toMatchObject({ ok: false, problems: expect.stringContaining("values") });
  });

  it("text.template and echo", async () => {
    expect(await call(textTemplate as ToolSpec, { template: "{{ a.b }}-{{c}}-{{missing}}", values: { a: { b: 1 }, c: [1] } })).toEqual({ text: "1-[1]-" });
    expect(await call(echo as ToolSpec, { x: [1, { y: null }] })).toEqual({ x: [1, { y: null }] });
  });
});
