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
