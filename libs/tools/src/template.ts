/** `{{a.b}}` placeholders, as in the executor's built-in `text.template`. */

/** Reads a dotted path (`a.b.c`) from `values`; undefined when any step is missing. */
export function readPath(values: unknown, path: string): unknown {
  let cur: unknown = values;
  for (const part of path.split(".")) {
    cur = cur !== null && typeof cur === "object" && !Array.isArray(cur) ? (cur as Record<string, unknown>)[part] : undefined;
  }
  return cur;
}

/** Text of one value: strings as is, objects and arrays as JSON, missing / null as "". */
export function textOf(value: unknown): string {
  if (value === undefined || value === null) return "";
  if (typeof value === "string") return value;
  if (typeof value === "number" || typeof value === "boolean" || typeof value === "bigint") return String(value);
  return JSON.stringify(value) ?? "";
}

/** Fills `{{name}}` / `{{a.b}}` placeholders from `values`; a missing value becomes "". */
export function renderTemplate(template: string, values: unknown, encode: (s: string) => string = (s) => s): string {
  return template.replace(/\{\{\s*([A-Za-z0-9_.-]+)\s*\}\}/g, (_, name: string) => encode(textOf(readPath(values, name))));
}
