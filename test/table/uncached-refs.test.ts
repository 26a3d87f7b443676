// Without the key cache (cacheSize 0, or the cache turned itself off), a lookup returns one scratch
// reference moved to each key (slot-index.ts): no object per lookup. What keeps a reference past
// the next lookup (a reservation's refund, a lease) must keep its own, or it would act on
// whichever key was looked up last.
import { describe, expect, it } from 'vitest';
import { ConcurrencyLimiter } from '../../src/concurrency/concurrency-limiter.js';
import { ManualClock, perSecond, RateLimiter } from '../../src/index.js';
import { gcraParams } from '../../src/math/gcra.js';
import { gcraSlotState } from '../../src/rate/gcra-slot.js';
import { SlotIndex } from '../../src/table/slot-index.js';
import type { SlotRef } from '../../src/table/slot-ref.js';
import { SlotTable } from '../../src/table/table.js';

describe('lookups without the key cache', () => {
  it('return one reference, moved to each key with nothing of the last key kept', () => {
    const clock = new ManualClock(0);
    const limiter = new RateLimiter({ limit: perSecond(10), maxKeys: 64, clock });
    for (const k of ['a', 'b']) limiter.allow(k);
    const table = new SlotTable(limiter.handle.table, gcraSlotState(gcraParams(limiter.limit), clock), limiter.handle.keys);
    const index = new SlotIndex(table, 0);
    const a = index.locate('a') as SlotRef;
    const aBase = a.base;
    a.tat = 12_345;
    a.sec = 7;
    a.secKnown = true;
    a.ownSkip = 3;
    const b = index.locate('b') as SlotRef;
    expect(b).toBe(a);
    expect(b.base).not.toBe(aBase);
    expect([b.tat, b.secKnown, b.ownSkip]).toEqual([0, false, 0]);
    expect(index.lasting(b)).not.toBe(b);
    expect(index.lasting(b).base).toBe(b.base);
  });

  it('with the cache on, return the same view, moved to each key\'s own record, which keeps what the thread knew', () => {
    const clock = new ManualClock(0);
    const limiter = new RateLimiter({ limit: perSecond(10), maxKeys: 64, clock });
    for (const k of ['a', 'b']) limiter.allow(k);
    const table = new SlotTable(limiter.handle.table, gcraSlotState(gcraParams(limiter.limit), clock), limiter.handle.keys);
    const index = new SlotIndex(table, 16);
    const a = index.locate('a') as SlotRef;
    const aBase = a.base;
    const aCtrl = a.ctrl;
    a.tat = -12_345;
    a.sec = -7;
    a.secKnown = true;
    a.ownSkip = 3;
    const kept = index.lasting(a);
    expect(kept).not.toBe(a);
    expect([kept.base, kept.ctrl, kept.tat, kept.secKnown, kept.ownSkip]).toEqual([aBase, aCtrl, 0, false, 0]);
    const b = index.locate('b') as SlotRef;
    expect(b).toBe(a); // one view
    expect([b.tat, b.secKnown, b.ownSkip]).toEqual([0, false, 0]);
    b.tat = 99;
    expect(kept.base).toBe(aBase); // a lasting reference does not move with the view
    const again = index.cached('a') as SlotRef;
    expect([again.base, again.ctrl, again.tat, again.sec, again.secKnown, again.ownSkip]).toEqual([aBase, aCtrl, -12_345, -7, true, 3]);
    expect((index.cached('b') as SlotRef).tat).toBe(99);
    expect(index.lasting(kept)).toBe(kept); // already a reference of its own
  });

  it('a cache that took all its records starts again from empty; its records grow past the first thousand', () => {
    const clock = new ManualClock(0);
    const limiter = new RateLimiter({ limit: perSecond(10), maxKeys: 4_096, clock });
    const keys = Array.from({ length: 3_000 }, (_, i) => `k${i}`);
    for (const k of keys) limiter.allow(k);
    const table = new SlotTable(limiter.handle.table, gcraSlotState(gcraParams(limiter.limit), clock), limiter.handle.keys);
    const index = new SlotIndex(table, 2_500);
    for (const [i, k] of keys.entries()) {
      const ref = index.locate(k) as SlotRef;
      ref.tat = i + 1;
    }
    // Keys 2,500 and on came after the cache was emptied: the last 500 are cached, the first are not.
    expect(index.cached('k0')).toBeUndefined();
    expect(index.cached('k2499')).toBeUndefined();
    for (const [i, k] of keys.entries()) {
      if (i < 2_500) continue;
      const ref = index.cached(k) as SlotRef;
      expect(ref.tat).toBe(i + 1);
      expect(ref.base).toBe((index.lasting(ref)).base);
    }
    // Each of those keys is where the table says.
    for (const k of keys.slice(2_500)) {
      const cached = index.lasting(index.cached(k) as SlotRef);
      const found = new SlotIndex(table, 0).locate(k) as SlotRef;
      expect(cached.base).toBe(found.base);
    }
  });

  for (const cacheSize of [0, 1_024]) {
    it(`a cancelled reservation gives back to its own key after other keys were checked (cacheSize ${cacheSize})`, () => {
      const clock = new ManualClock(0);
      const limiter = new RateLimiter({ limit: perSecond(5), maxKeys: 64, clock, cacheSize });
      for (let i = 0; i < 5; i++) limiter.reserve('a');
      const late = limiter.reserve('a', { cost: 2 });
      expect(late.delayMs).toBe(400);
      for (let i = 0; i < 3; i++) limiter.allow('b');
      expect(late.cancel()).toBe(true);
      expect(limiter.reserve('a').delayMs).toBe(200); // as if the cancelled one never came
      expect(limiter.get('b')?.remaining).toBe(2); // b spent 3 of 5, and nothing came back to it
    });

    it(`a lease releases its own key's places after other keys were checked (cacheSize ${cacheSize})`, () => {
      const clock = new ManualClock(1_000);
      const limiter = new ConcurrencyLimiter({ maxInFlight: 2, leaseMs: 1_000, maxKeys: 8, clock, cacheSize });
      const a = limiter.tryAcquire('a', 2).lease;
      expect(limiter.tryAcquire('b').allowed).toBe(true);
      expect(a?.release()).toBe(true);
      expect(limiter.tryAcquire('a', 0).remaining).toBe(2);
      expect(limiter.tryAcquire('b', 0).remaining).toBe(1);
    });
  }
});
