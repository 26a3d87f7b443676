// 4 real workers that each spend one key, block it for their own length halfway (1.5 s, 4 s,
// 0.9 s, 2.5 s) and spend on, on a frozen ManualClock (fixtures/worker.mjs, mode 'block-race'):
// the race the block tests of every limiter kind share (key-block.test.ts, window-block.test.ts).
import { expect } from 'vitest';
import { ManualClock, RateLimiter, type RateLimiterOptions } from '../../src/index.js';
import { raceUntilLost } from './workers.js';

const LENGTHS = [1_500, 4_000, 900, 2_500];

/**
 * Runs the race on limiters made from `options` (a ManualClock at 0 is added) until the workers
 * lost compare-and-swaps (raceUntilLost; `tries` 0: one forced at once), and checks every round:
 * no worker admitted after its own block returned, at most `atMost` admitted in all, and the
 * block left is the longest, 4,000 ms to the tick. Resolves with whether the race was forced.
 */
export async function raceBlocks(options: Omit<RateLimiterOptions, 'maxKeys' | 'clock'>, atMost: number, tries: number): Promise<boolean> {
  return raceUntilLost<{ before: number; after: number; casRetries: number }>(() => {
    const l = new RateLimiter({ ...options, maxKeys: 8, clock: new ManualClock(0) });
    return {
      workers: LENGTHS.map((ms, id) => ({ mode: 'block-race', handle: l.handle, id, key: 'k', attempts: 400, ms })),
      check(replies) {
        for (const r of replies) expect(r.after, 'admitted after its own block').toBe(0);
        expect(replies.reduce((a, r) => a + r.before, 0)).toBeLessThanOrEqual(atMost);
        const left = l.tryAcquire('k');
        expect(left.allowed).toBe(false);
        expect(left.retryAfterMs).toBeGreaterThanOrEqual(4_000);
        expect(left.retryAfterMs).toBeLessThan(4_000.001);
      },
    };
  }, tries);
}
