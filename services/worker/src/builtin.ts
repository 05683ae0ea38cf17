/** The tools every Baton installation has, as ToolSpecs of the SDK. */
import { z } from "zod";
import { defineTool, ToolInvalidInput } from "@baton/sdk";
import type { JsonObject, JsonValue, ToolSpec } from "@baton/sdk";

const jsonObject = z.record(z.string(), z.json());

function render(template: string, values: JsonObject): string {
  return template.replace(/\{\{\s*([A-Za-z0-9_.-]+)\s*\}\}/g, (_, name: string) => {
    let cur: JsonValue | undefined = values;
    for (const part of name.split(".")) cur = cur && typeof cur === "object" && !Array.isArray(cur) ? cur[part] : undefined;
    return cur === undefined || cur === null ? "" : typeof cur === "object" ? JSON.stringify(cur) : String(cur);
  });
}

export const textTemplate = defineTool({
  name: "text.template",
  description: "Fills {{name}} placeholders (dotted paths allowed) of `template` from `values`.",
  input: z.object({ template: z.string(), values: jsonObject.default({}) }),
  output: z.object({ text: z.string() }),
  handler: async ({ template, values }) => ({ text: render(template, values as JsonObject) }),
});

export const mathSum = defineTool({
  name: "math.sum",
  description: "Sums `values`: numbers, or objects whose `field` is a number.",
  input: z.object({ values: z.array(z.json()), field: z.string().optional() }),
  output: z.object({ sum: z.number(), count: z.number().int() }),
  handler: async ({ values, field }) => {
    let sum = 0;
    values.forEach((v, i) => {
      const n = field !== undefined && v && typeof v === "object" && !Array.isArray(v) ? v[field] : v;
      if (typeof n !== "number") throw ToolInvalidInput("math.sum", `values[${i}]${field !== undefined ? "." + field : ""}: is not a number`);
      sum += n;
    });
    return { sum, count: values.length };
  },
});

export const echo = defineTool({
  name: "echo",
  description: "Returns its input.",
  input: jsonObject,
  handler: async (args) => args as JsonObject,
});

export const sleep = defineTool({
  name: "sleep",
  description: "Waits `ms` milliseconds (cancellable), then returns.",
  input: z.object({ ms: z.number().int().min(0).max(10 * 60_000).default(0) }),
  output: z.object({ slept: z.number() }),
  timeoutMs: 10 * 60_000 + 5_000,
  handler: async ({ ms }, ctx) => {
    await new Promise<void>((resolve, reject) => {
      const t = setTimeout(resolve, ms);
      ctx.signal.addEventListener("abort", () => (clearTimeout(t), reject(ctx.signal.reason as Error)), { once: true });
    });
    return { slept: ms };
  },
});

/** text.template, math.sum, echo, sleep. */
export function coreTools(): ToolSpec[] {
  return [textTemplate, mathSum, echo, sleep] as ToolSpec[];
}
