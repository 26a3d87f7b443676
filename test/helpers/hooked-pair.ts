// Two instances of one RateLimiter on a shared clock whose next reading first runs a one-shot
// hook: `arm(f)` makes B's calls in `f` run inside A's next clock read, an exact interleaving
// with no sleep. The clock starts in second 5000; every key hashes alike (forceHash), maxKeys 4.
import { RateLimiter, type RateLimiterOptions } from '../../src/index.js';

export function hookedPair(options: Partial<RateLimiterOptions>) {
  let t = 5_000_100; // ms: second 5000
  let hook: (() => void) | null = null;
  const clock = {
    now: (): number => {
      const h = hook;
      hook = null;
      h?.();
      return t;
    },
  };
  const a = new RateLimiter({ ...options, maxKeys: 4, forceHash: 12345, clock } as RateLimiterOptions);
  const b = RateLimiter.attach(a.handle, { clock });
  return { a, b, advance: (ms: number) => { t += ms; }, arm: (f: () => void) => { hook = f; }, armed: () => hook !== null };
}
