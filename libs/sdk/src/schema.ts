/**
 * From a ToolSpec to what travels (its descriptor, JSON Schema) and to the checks the
 * worker runs around the handler. JSON Schema inputs are checked by converting them to
 * zod (`z.fromJSONSchema`), so both kinds report issues the same way.
 */
import { z } from "zod";
import type { JsonSchema, ToolDescriptor, ToolSpec } from "./tool.ts";

/** @default 30_000 — also ToolSpec.timeoutMs's default. */
export const DEFAULT_TOOL_TIMEOUT_MS = 30_000;

const ANY_OBJECT: JsonSchema = { type: "object" };

function jsonSchemaOf(schema: z.ZodType, io: "input" | "output"): JsonSchema {
  return z.toJSONSchema(schema, { io, unrepresentable: "any" }) as JsonSchema;
}

/** The registry entry of a tool: JSON Schemas instead of zod, defaults applied. */
export function toDescriptor(spec: ToolSpec, kind: ToolDescriptor["kind"] = "worker"): ToolDescriptor {
  const outputSchema = spec.output ? jsonSchemaOf(spec.output, "output") : spec.outputJsonSchema;
  return {
    name: spec.name,
    description: spec.description,
    inputSchema: spec.input ? jsonSchemaOf(spec.input, "input") : (spec.inputJsonSchema ?? ANY_OBJECT),
    ...(outputSchema ? { outputSchema } : {}),
    timeoutMs: spec.timeoutMs ?? DEFAULT_TOOL_TIMEOUT_MS,
    ...(spec.retry ? { retry: spec.retry } : {}),
    ...(spec.tenants ? { tenants: [...spec.tenants] } : {}),
    kind,
  };
}

/** `values[2].price: expected number, received string` */
export function formatIssues(issues: readonly z.core.$ZodIssue[]): string {
  return issues
    .map((i) => {
      const path = i.path.reduce<string>((acc, p) => (typeof p === "number" ? `${acc}[${p}]` : acc === "" ? String(p) : `${acc}.${String(p)}`), "");
      return `${path === "" ? "(root)" : path}: ${i.message}`;
    })
    .join("; ");
}

export type Check = (value: unknown) => { ok: true; value: unknown } | { ok: false; problems: string };

function checker(schema: z.ZodType | undefined): Check {
  if (!schema) return (value) => ({ ok: true, value });
  return (value) => {
    const r = schema.safeParse(value);
    return r.success ? { ok: true, value: r.data } : { ok: false, problems: formatIssues(r.error.issues) };
  };
}

/** The input and output checks of a tool (zod first, else its JSON Schema, else none). */
export function compileChecks(spec: ToolSpec): { input: Check; output: Check } {
  const input = spec.input ?? (spec.inputJsonSchema ? z.fromJSONSchema(spec.inputJsonSchema) : undefined);
  const output = spec.output ?? (spec.outputJsonSchema ? z.fromJSONSchema(spec.outputJsonSchema) : undefined);
  return { input: checker(input), output: checker(output) };
}
