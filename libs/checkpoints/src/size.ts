/**
 * JSON sizes of states a caller promised never to change (`immutableStates` of redis.ts),
 * remembered per object and array, so a state that shares most of its parts with the one
 * before is measured by what it does not share.
 */
const sizes = new WeakMap<object, number>();

/** `JSON.stringify(v).length` of plain JSON data, remembered per object and array. */
export function sizeOf(v: unknown): number {
  if (v === null || typeof v !== "object") return v === undefined ? 4 : (JSON.stringify(v)?.length ?? 4);
  const known = sizes.get(v);
  if (known !== undefined) return known;
  let n = 2;
  if (Array.isArray(v)) {
    for (const x of v as unknown[]) n += sizeOf(x) + 1;
    if (v.length > 0) n -= 1;
  } else {
    let first = true;
    for (const [k, x] of Object.entries(v)) {
      if (x === undefined) continue;
      n += JSON.stringify(k).length + 1 + sizeOf(x) + (first ? 0 : 1);
      first = false;
    }
  }
  sizes.set(v, n);
  return n;
}

/**
 * `sizeOf(v)`, made from what `v` shares with `prev` (an earlier state, already measured):
 * an array as long as the one before is measured as that one's size plus the change of the
 * items that are not the same objects, so a long list of which one item changed costs one
 * comparison per item and not one lookup per item. Objects are summed key by key.
 */
export function sizeAgainst(v: unknown, prev: unknown): number {
  if (v === prev || v === null || typeof v !== "object" || prev === null || typeof prev !== "object") return sizeOf(v);
  const known = sizes.get(v);
  if (known !== undefined) return known;
  let n: number;
  if (Array.isArray(v)) {
    const base = sizes.get(prev);
    if (!Array.isArray(prev) || base === undefined || prev.length !== v.length) return sizeOf(v);
    n = base;
    for (let i = 0; i < v.length; i++) {
      const x: unknown = v[i];
      const y: unknown = prev[i];
      if (x !== y) n += sizeAgainst(x, y) - sizeOf(y);
    }
  } else {
    const before = Array.isArray(prev) ? undefined : (prev as Record<string, unknown>);
    n = 2;
    let first = true;
    for (const [k, x] of Object.entries(v)) {
      if (x === undefined) continue;
      n += JSON.stringify(k).length + 1 + (before ? sizeAgainst(x, before[k]) : sizeOf(x)) + (first ? 0 : 1);
      first = false;
    }
  }
  sizes.set(v, n);
  return n;
}
