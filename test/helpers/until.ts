import { expect } from 'vitest';

/**
 * Resolves once `f()` is (or resolves) true, looking after each turn of the event loop: 2,000
 * turns, and on until 10 s passed (found: 2,000 quick turns were too few for a loaded machine's
 * sockets). Fails the test if it never is.
 */
export async function until(f: () => boolean | Promise<boolean>): Promise<void> {
  const end = performance.now() + 10_000;
  let ok: boolean;
  for (let i = 0; !(ok = await f()) && (i < 2_000 || performance.now() < end); i++) await new Promise((r) => setImmediate(r));
  expect(ok).toBe(true);
}
