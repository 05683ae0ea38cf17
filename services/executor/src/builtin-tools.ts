/** Tools every Baton installation has. */
import type { JsonObject, JsonValue } from "@baton/engine";
import { ToolInvalidInput } from "./errors.ts";
import type { ToolDefinition } from "./worker.ts";

function render(template: string, values: JsonObject): string {
  return template.replace(/\{\{\s*([A-Za-z0-9_.-]+)\s*\}\}/g, (_, name: string) => {
    let cur: JsonValue | undefined = values;
    for (const part of name.split(".")) cur = cur && typeof cur === "object" && !Array.isArray(cur) ? cur[part] : undefined;
    return cur === undefined || cur === null ? "" : typeof cur === "object" ? JSON.stringify(cur) : String(cur);
  });
}

export const builtinTools: Record<string, ToolDefinition> = {
  "text.template": {
    description: "Fills {{name}} placeholders of `template` from `values`.",
    handler: async (args) => {
      if (typeof args.template !== "string") throw ToolInvalidInput("text.template", "`template` must be a string");
      const values = args.values && typeof args.values === "object" && !Array.isArray(args.values) ? args.values : {};
      return { text: render(args.template, values) };
    },
  },
  "math.sum": {
    description: "Sums `values` (numbers, or objects whose `field` is a number).",
    handler: async (args) => {
      if (!Array.isArray(args.values)) throw ToolInvalidInput("math.sum", "`values` must be an array");
      const field = typeof args.field === "string" ? args.field : undefined;
      let sum = 0;
      args.values.forEach((v, i) => {
        const n = field && v && typeof v === "object" && !Array.isArray(v) ? v[field] : v;
        if (typeof n !== "number") throw ToolInvalidInput("math.sum", `values[${i}]${field ? "." + field : ""} is not a number`);
        sum += n;
      });
      return { sum, count: args.values.length };
    },
  },
  echo: {
    description: "Returns its input.",
    handler: async (args) => args,
  },
  sleep: {
    description: "Waits `ms` milliseconds (cancellable), then returns.",
    timeoutMs: 10 * 60_000,
    handler: async (args, ctx) => {
      const ms = typeof args.ms === "number" && args.ms >= 0 ? args.ms : 0;
      await new Promise<void>((resolve, reject) => {
        const t = setTimeout(resolve, ms);
        ctx.signal.addEventListener("abort", () => (clearTimeout(t), reject(ctx.signal.reason as Error)), { once: true });
      });
      return { slept: ms };
    },
  },
};
