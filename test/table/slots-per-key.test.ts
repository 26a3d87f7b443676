// Option slotsPerKey: a denser table (down to 1.25 slots per key, 80% full at maxKeys) with
// longer stripes, so that it still holds maxKeys keys with no stripe full; the default is unchanged.
import { describe, expect, it } from 'vitest';
import { ConcurrencyLimiter, ManualClock, perSecond, PolicyLimiter, RateLimiter } from '../../src/index.js';
import { LocalTier } from '../../src/redis/local-tier.js';
import { raceUntilLost } from '../helpers/workers.js';
import { HASHED_LAYOUT } from '../helpers/layout.js';

describe('slotsPerKey', () => {
  it.each([1, 2024])('1.25: holds maxKeys keys (hash seed %i) in under 64 bytes each at maxKeyBytes 24', (hashSeed) => {
    const maxKeys = 100_000;
    const limiter = new RateLimiter({ limit: perSecond(1), maxKeys, maxKeyBytes: 24, slotsPerKey: 1.25, hashSeed, clock: new ManualClock(), ...HASHED_LAYOUT });
    let full = 0;
    for (let i = 0; i < maxKeys; i++) if (limiter.tryAcquire(`tenant-${String(i).padStart(7, '0')}:api`).reason === 'table-full') full++;
    expect(full).toBe(0);
    const s = limiter.stats();
    expect(s.liveKeys).toBe(maxKeys);
    expect(s.capacity).toBeGreaterThanOrEqual(1.25 * maxKeys);
    expect(s.capacity).toBeLessThan(1.25 * maxKeys + 1024); // whole stripes of 1,024
    expect(s.tableBytes / maxKeys).toBeLessThanOrEqual(64);
    // Every key still finds its own state: each spent its burst of 1 above.
    for (let i = 0; i < maxKeys; i += 97) expect(limiter.allow(`tenant-${String(i).padStart(7, '0')}:api`)).toBe(false);
  });

  it('1.25 by default: 1.25 times maxKeys slots, in whole stripes of 1,024', () => {
    expect(new RateLimiter({ limit: perSecond(1), maxKeys: 4096, ...HASHED_LAYOUT }).stats().capacity).toBe(5120);
    expect(new RateLimiter({ limit: perSecond(1), maxKeys: 4096, slotsPerKey: 2, ...HASHED_LAYOUT }).stats().capacity).toBe(8192);
    expect(new RateLimiter({ limit: perSecond(1), maxKeys: 4096, slotsPerKey: 4, ...HASHED_LAYOUT }).stats().capacity).toBe(16384);
  });

  it('is taken by every class, and a bad value is refused by name', () => {
    // 1,250 slots wanted, in whole stripes of 1,024 (of 512 at 1.5): 2,048 (1,536).
    expect(new PolicyLimiter({ rules: [{ limit: perSecond(1) }], maxKeys: 1000, slotsPerKey: 1.25 }).stats().capacity).toBe(2048);
    expect(new ConcurrencyLimiter({ maxInFlight: 2, leaseMs: 1000, maxKeys: 1000, slotsPerKey: 1.5 }).stats().capacity).toBe(1536);
    expect(LocalTier.create({ maxKeys: 1000, slotsPerKey: 1.25 }).stats().capacity).toBe(2048);
    for (const bad of [1.2, 4.5, 0, -1, NaN, Infinity]) {
      expect(() => new RateLimiter({ limit: perSecond(1), maxKeys: 10, slotsPerKey: bad })).toThrow(RangeError);
      expect(() => new RateLimiter({ limit: perSecond(1), maxKeys: 10, slotsPerKey: bad })).toThrow(/^options\.slotsPerKey must be from 1\.25 to 4, got /);
    }
    expect(() => new RateLimiter({ limit: perSecond(1), maxKeys: 10, slotsPerKey: '2' as never })).toThrow(new TypeError('options.slotsPerKey must be a number, got "2"'));
  });

  it('4 workers inserting the same keys into a table 80% full give each key one copy', async () => {
    // Rounds on fresh tables until the workers were seen racing (a compare-and-swap lost; a busy
    // machine may run them one after the other, and then one is forced: raceUntilLost). Every
    // round is checked.
    await raceUntilLost<{ admitted: number[]; casRetries: number }>(() => {
      const keys = Array.from({ length: 8_000 }, (_, i) => `k${i}`);
      const limiter = new RateLimiter({ limit: perSecond(1, { burst: 1 }), maxKeys: keys.length, slotsPerKey: 1.25, clock: new ManualClock() });
      return {
        workers: Array.from({ length: 4 }, (_, id) => ({ mode: 'hammer', handle: limiter.handle, id, keys, attempts: keys.length, cost: 1 })),
        check(all) {
          // A frozen clock and a burst of 1: a key admitted twice had two copies.
          const admitted = keys.map((_, k) => all.reduce((sum, r) => sum + (r.admitted[k] as number), 0));
          expect(admitted.filter((n) => n !== 1)).toEqual([]);
          expect(limiter.stats().liveKeys).toBe(keys.length);
        },
      };
    });
  });
});
