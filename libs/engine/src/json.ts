/** JSON value types shared by the engine and everything that stores its state. */
export type JsonPrimitive = string | number | boolean | null;
export type JsonValue = JsonPrimitive | JsonValue[] | { [key: string]: JsonValue };
export type JsonObject = { [key: string]: JsonValue };

export function isJsonObject(v: unknown): v is JsonObject {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/**
 * A deep copy of plain data (objects, arrays, primitives), as `structuredClone` makes it
 * but several times faster for the engine's state, which is plain data; keys whose value
 * is `undefined` are kept. Anything else found inside (a Date, a Map, a class instance)
 * is copied with `structuredClone`.
 */
export function clonePlain<T>(value: T): T {
  if (typeof value !== "object" || value === null) return value;
  if (Array.isArray(value)) {
    const out: unknown[] = new Array<unknown>(value.length);
    for (let i = 0; i < value.length; i++) out[i] = clonePlain(value[i] as unknown);
    return out as T;
  }
  const proto = Object.getPrototypeOf(value) as unknown;
  if (proto !== Object.prototype && proto !== null) return structuredClone(value);
  const out: Record<string, unknown> = {};
  for (const key in value) {
    const v = clonePlain((value as Record<string, unknown>)[key]);
    // An own "__proto__" key (JSON.parse makes them) stays a key, not a prototype.
    if (key === "__proto__") Object.defineProperty(out, key, { value: v, enumerable: true, writable: true, configurable: true });
    else out[key] = v;
  }
  return out as T;
}

/**
 * How deeply a request's JSON may nest. The engine walks values recursively (copies,
 * references, diffs, the definition schema), and a value nested thousands deep would overflow
 * the stack there; no definition, input or edit needs more than a few dozen levels.
 */
export const MAX_JSON_DEPTH = 128;

/** The path (`$.a[0].b`) at which `value` nests deeper than `max` levels, or undefined. Iterative, so any depth is safe to check. */
export function tooDeepAt(value: unknown, max = MAX_JSON_DEPTH): string | undefined {
  interface At { v: unknown; depth: number; key?: string | number; up?: At }
  const stack: At[] = [{ v: value, depth: 0 }];
  while (stack.length > 0) {
    const at = stack.pop()!;
    const v = at.v;
    if (typeof v !== "object" || v === null) continue;
    if (at.depth >= max) {
      let path = "";
      for (let a: At | undefined = at; a?.key !== undefined; a = a.up) {
        const k = a.key;
        path = (typeof k === "number" ? `[${k}]` : /^[A-Za-z_][A-Za-z0-9_]*$/.test(k) ? `.${k}` : `[${JSON.stringify(k)}]`) + path;
      }
      return `$${path}`;
    }
    const push = (x: unknown, key: string | number): void => {
      if (typeof x === "object" && x !== null) stack.push({ v: x, depth: at.depth + 1, key, up: at });
    };
    if (Array.isArray(v)) for (let i = 0; i < v.length; i++) push(v[i], i);
    else for (const k in v) push((v as Record<string, unknown>)[k], k);
  }
  return undefined;
}
