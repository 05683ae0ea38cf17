/** Command-line helpers shared by the engine benchmark's scripts (run.ts, ab.ts). */

/** `--name`'s value as a positive integer, or an error that names the option and the value. */
export function positiveOption(name: string, value: string): number {
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n < 1) throw new Error(`--${name} must be a positive integer, got "${value}"`);
  return n;
}
