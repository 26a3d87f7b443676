// A sweep leaves the sweeping thread's key cache as it was: the working set, which a sweep does
// not reclaim, stays cached, and an entry of a key the sweep did reclaim is found stale by its
// ctrl word at its next use, even when another key has taken its slot since. Every key here has
// one hash (forceHash), so the key that comes next takes the reclaimed key's slot.
import { describe, expect, it } from 'vitest';
import { ManualClock, perSecond, RateLimiter, type Limit, type RateLimiterOptions } from '../../src/index.js';

const CASES: [string, Limit | Limit[], Partial<RateLimiterOptions>?][] = [
  ['one limit (Gcra32)', perSecond(10, { burst: 3 })],
  ['one limit at width 64 (maxBlockMs)', perSecond(10, { burst: 3 }), { maxBlockMs: 90 * 86_400_000 }],
  ['two limits (lock-free engine)', [perSecond(10, { burst: 3 }), perSecond(100, { burst: 50 })]],
  ['a fixed window', { permits: 3, periodMs: 1_000 }, { algorithm: 'fixed-window' }],
  ['a sliding log (locked engine)', { permits: 3, periodMs: 1_000 }, { algorithm: 'sliding-log' }],
];

describe('a sweep and the key cache', () => {
  for (const [name, limit, options] of CASES) {
    it(`${name}: a reclaimed key's cached slot, reused by another key, is not the key's`, () => {
      const clock = new ManualClock(10_000);
      const l = new RateLimiter({ ...options, limit, maxKeys: 4, forceHash: 77, clock });
      expect(l.allow('a')).toBe(true); // 'a' is cached, in the slot its hash picks
      clock.advance(5_000); // 'a' is idle
      expect(l.sweep()).toBe(1);
      let b = 0;
      while (l.allow('b')) b++; // 'b' takes the slot 'a' left and spends its whole burst
      expect(b).toBe(3);
      // 'a' is fresh: none of 'b's spending is charged to it, and none of its admissions to 'b'.
      let a = 0;
      while (l.allow('a')) a++;
      expect(a).toBe(3);
      expect(l.allow('b')).toBe(false);
      expect(l.stats().liveKeys).toBe(2);
    });

    it(`${name}: a key the sweep kept stays cached and keeps its state`, () => {
      const clock = new ManualClock(10_000);
      const l = new RateLimiter({ ...options, limit, maxKeys: 4, forceHash: 77, clock });
      expect(l.allow('idle')).toBe(true);
      clock.advance(5_000);
      for (let i = 0; i < 3; i++) expect(l.allow('busy')).toBe(true);
      expect(l.sweep()).toBe(1); // 'idle' goes, 'busy' owes its whole burst
      expect(l.allow('busy')).toBe(false);
      expect(l.allow('idle')).toBe(true);
    });
  }
});
