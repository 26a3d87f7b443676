// The per-thread lastSec bound (SlotRef.sec) across slot reuse: thread A holds a cached
// SlotRef with a bound for the current second and has loaded its key's tat; before its clock
// read returns, thread B sweeps the key (idle by then), and the slot is reused, by the same key
// (its burst then spent by B) or by another key with the same hash. A must notice (ctrl), find
// the key again and decide on its new state. The interleaving is exact: the clock is shared by
// both instances, and a one-shot hook runs B's calls inside A's clock read (after A's tat load,
// before its ctrl check).
import { describe, expect, it } from 'vitest';
import { perMinute, perSecond, type Limit, type RateLimiterOptions } from '../../src/index.js';
import { hookedPair } from '../helpers/hooked-pair.js';

function setup(limit: Limit | Limit[], options: Partial<RateLimiterOptions> = {}) {
  return hookedPair({ ...options, limit });
}

const CASES: [string, Limit | Limit[], Partial<RateLimiterOptions>?][] = [
  ['one limit (Gcra32)', perSecond(1000, { burst: 2 })],
  ['two limits (allowGcra)', [perSecond(1000, { burst: 2 }), perMinute(60_000, { burst: 3 })]],
  // The lock-free engine's other paths keep the same bound (#stampThenRead).
  ['a fixed window (decide)', { permits: 2, periodMs: 5 }, { algorithm: 'fixed-window' }],
  ['a limit and a global cap served in batches (#decideBatched)', perSecond(1000, { burst: 2 }), { globalLimit: perSecond(1e6, { burst: 1e5 }) }],
];

describe('the lastSec bound when the slot is reclaimed and reused under a decision', () => {
  for (const [name, limit, options] of CASES) {
    it(`${name}: reused by the same key, whose burst B spent`, () => {
      const s = setup(limit, options);
      expect(s.a.allow('k')).toBe(true);
      expect(s.a.allow('k')).toBe(true); // the bound is now second 5000
      expect(s.a.allow('k')).toBe(false);
      s.arm(() => {
        s.advance(10); // k idle (2 ms of debt), still second 5000
        expect(s.b.sweep()).toBe(1);
        expect(s.b.allow('k')).toBe(true);
        expect(s.b.allow('k')).toBe(true);
      });
      expect(s.a.allow('k'), 'A after B spent the new incarnation\'s burst').toBe(false);
      expect(s.b.allow('k')).toBe(false);
    });

    it(`${name}: reused by another key with the same hash`, () => {
      const s = setup(limit, options);
      expect(s.a.allow('k')).toBe(true);
      expect(s.a.allow('k')).toBe(true);
      s.arm(() => {
        s.advance(10);
        expect(s.b.sweep()).toBe(1);
        expect(s.b.allow('j')).toBe(true);
        expect(s.b.allow('j')).toBe(true);
      });
      expect(s.a.allow('k'), 'k is fresh: A admits').toBe(true);
      expect(s.a.allow('k')).toBe(true);
      expect(s.a.allow('k')).toBe(false);
      expect(s.b.allow('j'), 'j spent its burst; k\'s admissions must not have landed on it, nor refunded it').toBe(false);
      expect(s.a.allow('j')).toBe(false);
    });
  }
});
