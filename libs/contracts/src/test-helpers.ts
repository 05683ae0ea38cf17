/** Helpers for the contracts package's own tests. */

/** What `fn` throws; fails the test when it returns. */
export function caught(fn: () => unknown): unknown {
  try {
    fn();
  } catch (err) {
    return err;
  }
  throw new Error("expected a throw");
}
