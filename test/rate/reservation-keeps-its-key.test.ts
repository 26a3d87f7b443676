// A reservation gives back to its own key, whatever lookups come between it and its cancel().
//
// Found: with the key cache off (cacheSize 0, or judged not worth it), a lookup returns the
// index's one scratch reference, moved to each key found. A reservation over several limits, a
// window or a global cap kept that reference for its refund, so a lookup of another key before
// cancel() moved it there: the cancel gave the reservation's intervals to that key. Two GCRA
// limits of burst 2: a key b refused after its burst was admitted once more after a's cancel.
import { describe, expect, it } from 'vitest';
import { ManualClock, perMinute, perSecond, RateLimiter, type RateLimiterOptions } from '../../src/index.js';

const CONFIGS: [string, Omit<RateLimiterOptions, 'clock' | 'maxKeys'>][] = [
  ['one GCRA limit', { limit: perSecond(2) }],
  ['two GCRA limits', { limit: [perSecond(2), perMinute(100)] }],
  ['a GCRA limit under a global cap', { limit: perSecond(2), globalLimit: perSecond(1_000) }],
  ['a fixed window', { limit: perSecond(2), algorithm: 'fixed-window' }],
  ['a sliding window', { limit: perSecond(2), algorithm: 'sliding-window' }],
];

/** Admissions in a row of `key`, up to 10. */
function room(limiter: RateLimiter, key: string): number {
  let n = 0;
  while (n < 10 && limiter.allow(key)) n++;
  return n;
}

describe.each(CONFIGS)('cancel() of a reservation on %s', (_name, options) => {
  it.each([0, 1_024])('gives back to its own key only, with cacheSize %i', (cacheSize) => {
    // The same traffic twice: with a reservation of a's cancelled after a lookup of b, and with no
    // reservation at all. A cancel gives everything back, so both keys must end the same.
    const ends = [true, false].map((reserving) => {
      const clock = new ManualClock(1_000);
      const limiter = new RateLimiter({ ...options, clock, maxKeys: 64, cacheSize });
      expect(room(limiter, 'b')).toBe(2); // b: its burst spent, refused until time moves
      expect(room(limiter, 'a')).toBe(2);
      if (reserving) {
        const held = limiter.reserve('a', { maxWaitMs: 10_000 }); // a place beyond a's burst
        expect(held.delayMs).toBeGreaterThan(0);
        expect(limiter.allow('b')).toBe(false); // a lookup of another key before the cancel
        expect(held.cancel()).toBe(true);
      } else {
        expect(limiter.allow('b')).toBe(false);
      }
      const bNow = room(limiter, 'b');
      clock.advance(1_000); // a held place would still be counted: a would have one less
      return { bNow, a: room(limiter, 'a'), b: room(limiter, 'b') };
    });
    expect(ends[0]).toEqual(ends[1]);
    expect(ends[0]?.bNow).toBe(0);
  });
});
