// The local tier's absent-key memo (LocalTier#lookup, header word T_INSERTS): a thread
// that found a key absent skips the probe while no insert has been counted since. Several
// instances on one thread stand for threads (each has its own memo); every answer must match what
// the shared table holds, across inserts by others, sweeps that reclaim the key, re-inserts into
// the same slot (one forced hash), cache overflow, and clear().
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/time/clock.js';
import { LocalTier } from '../../src/redis/local-tier.js';

describe('the local tier remembers absent keys', () => {
  it('sees a key another instance inserted after it found it absent, through every reuse', () => {
    const clock = new ManualClock(1_000);
    const a = LocalTier.create({ clock, maxKeys: 8, forceHash: 7, leaseMs: 100 });
    const b = LocalTier.attach(a.handle);
    const c = LocalTier.attach(a.handle, { cacheSize: 1 }); // its cache overflows on every other key
    for (let round = 0; round < 20; round++) {
      const key = `k${round % 3}`;
      const other = `k${(round + 1) % 3}`;
      // a and c find the key absent (memo), then b inserts it with a refusal and a lease.
      expect(a.refusedFor(key)).toBe(0);
      expect(a.take(key)).toBe(false);
      expect(c.refusedFor(key)).toBe(0);
      expect(c.refusedFor(other)).toBe(0);
      const now = clock.now();
      expect(b.refuseUntil(key, now + 50)).toBe(true);
      expect(a.refusedFor(key), `round ${round}: a after b's refusal`).toBe(50);
      expect(c.refusedFor(key), `round ${round}: c after b's refusal`).toBe(50);
      expect(b.offer(key, 2, now)).toBe(true);
      expect(c.take(key), `round ${round}: c spends b's lease`).toBe(true);
      expect(a.take(key), `round ${round}: a spends b's lease`).toBe(true);
      expect(a.take(key)).toBe(false); // 2 permits: spent
      // Everything over: a sweep reclaims the key (its slot is reused by the next round's key).
      clock.advance(10_200); // past the refusal by more than ANSWER_WINDOW_MS (10 s)
      expect(a.refusedFor(key)).toBe(0);
      expect(b.sweep()).toBeGreaterThanOrEqual(1);
      if (round % 5 === 4) b.clear();
      clock.advance(1);
    }
  });
});
