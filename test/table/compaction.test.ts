// Compaction (src/table/compaction.ts, run by sweep() and by full stripes): tombstones that no
// live key's probe chain crosses become EMPTY again. Found: a reclaimed slot stayed a tombstone
// for ever, so under churn (new keys arriving, idle ones swept) EMPTY slots ran out and a miss
// read the whole stripe.
import { describe, expect, it } from 'vitest';
import { ManualClock, monotonicClock, perSecond, RateLimiter } from '../../src/index.js';
import { gcraParams } from '../../src/math/gcra.js';
import { gcraSlotState } from '../../src/rate/gcra-slot.js';
import { BUSY, CLAIM_STAMP_MASK, ctrlWord, H_SLOT_WORDS, S_CTRL } from '../../src/table/layout.js';
import { SlotTable } from '../../src/table/table.js';
import { slotBaseOf } from '../helpers/slots.js';
import { HASHED_LAYOUT } from '../helpers/layout.js';

function probes(limiter: RateLimiter) {
  return new SlotTable(limiter.handle.table, gcraSlotState(gcraParams(limiter.limit), monotonicClock), limiter.handle.keys).probeLengths();
}

describe('compaction', () => {
  it('clears a tombstone only once no live key is found past it', () => {
    const clock = new ManualClock(1_000_000);
    // Every key hashes alike: each new key takes the next slot of one chain.
    const limiter = new RateLimiter({ limit: perSecond(10), maxKeys: 8, forceHash: 5, clock });
    expect(limiter.allow('a')).toBe(true);
    expect(limiter.allow('b')).toBe(true);
    clock.advance(200);
    expect(limiter.allow('c')).toBe(true); // 'c' is busy; 'a' and 'b' before it are idle
    expect(limiter.sweep()).toBe(2);
    // A lookup of 'c' passes both reclaimed slots: they stay tombstones.
    expect(limiter.stats()).toMatchObject({ liveKeys: 1, tombstones: 2 });
    expect(limiter.tryAcquire('c', 0).remaining).toBe(9);
    clock.advance(200);
    expect(limiter.sweep()).toBe(1);
    expect(limiter.stats()).toMatchObject({ liveKeys: 0, tombstones: 0 });
    expect(probes(limiter).missMean).toBe(1); // every slot is EMPTY
  });

  // Found: one claim anywhere in a stripe stopped its compaction, so a dead inserter's claim
  // froze it until the claim was 30 claim timeouts old.
  it('passes a dead inserter\'s claim by once it is older than claimTimeoutMs', () => {
    const clock = new ManualClock(1_000_000);
    // HASHED: a SLAB index keeps the chain of a cancelled claim's entry (slab-sweep.ts).
    const limiter = new RateLimiter({ limit: perSecond(10), maxKeys: 8, forceHash: 5, claimTimeoutMs: 20, clock, ...HASHED_LAYOUT });
    expect(limiter.allow('a')).toBe(true);
    expect(limiter.allow('b')).toBe(true);
    // 'b''s slot, right after 'a''s, becomes the claim of an inserter that died 100 ms ago.
    const w = new Int32Array(limiter.handle.table);
    const b = slotBaseOf(limiter.handle.table, 'b');
    expect(b - slotBaseOf(limiter.handle.table, 'a')).toBe(w[H_SLOT_WORDS]);
    w[b + S_CTRL] = ctrlWord(BUSY, (Math.floor(performance.now()) - 100) & CLAIM_STAMP_MASK);
    clock.advance(200);
    expect(limiter.sweep()).toBe(1); // 'a'
    // No live key is found past 'a''s slot, and the claim can no longer be published: EMPTY.
    expect(limiter.stats()).toMatchObject({ liveKeys: 0, tombstones: 0, claimed: 1 });
  });

  it('a key inserted after compaction is found, once, at its chain', () => {
    const clock = new ManualClock(1_000_000);
    const limiter = new RateLimiter({ limit: perSecond(1, { burst: 1 }), maxKeys: 8, forceHash: 5, clock });
    for (const k of ['a', 'b', 'c']) expect(limiter.allow(k)).toBe(true);
    clock.advance(2_000);
    expect(limiter.allow('c')).toBe(true);
    expect(limiter.sweep()).toBe(2); // 'a' and 'b': tombstones before 'c'
    expect(limiter.allow('d')).toBe(true); // takes the first tombstone
    expect(limiter.allow('d')).toBe(false);
    expect(limiter.allow('c')).toBe(false);
    const other = RateLimiter.attach(limiter.handle, { clock });
    expect(other.allow('d')).toBe(false); // another thread's lookup finds the same copy
    expect(limiter.stats().liveKeys).toBe(2);
  });

  it.each([2, 1.25])('under churn at slotsPerKey %d, misses probe no longer than on a fresh table', (slotsPerKey) => {
    const clock = new ManualClock(1_000_000);
    const maxKeys = 4_000;
    const limiter = new RateLimiter({ limit: perSecond(10), maxKeys, maxKeyBytes: 24, slotsPerKey, clock });
    const working = Array.from({ length: maxKeys / 4 }, (_, i) => `live:${i}`);
    for (const k of working) limiter.allow(k);
    const fresh = probes(limiter);
    let next = 0;
    const curve: number[] = [];
    // 50x maxKeys never-repeating keys, each checked twice; every maxKeys/4 of them, time passes
    // the idle point and sweep() runs.
    for (let round = 0; round < 200; round++) {
      for (let i = 0; i < maxKeys / 4; i++) {
        const k = `new:${next++}`;
        limiter.allow(k);
        limiter.allow(k);
      }
      clock.advance(250); // two checks of a new key hold it for 200 ms
      for (const k of working) limiter.allow(k);
      // Measured before the sweep: the table at its fullest (working set and a round of new keys).
      if (round % 20 === 19) curve.push(probes(limiter).missMean);
      limiter.sweep();
    }
    const stats = limiter.stats();
    expect(stats.liveKeys).toBe(maxKeys / 4);
    // After a sweep only the working set is live, as on the fresh table.
    expect(probes(limiter).missMean).toBeLessThanOrEqual(fresh.missMean * 1.2);
    // Before each sweep: the same table with a round of new keys, the same at every point of the
    // curve (no growth from round to round).
    const first = curve[0] as number;
    for (const m of curve) expect(m).toBeLessThanOrEqual(first * 1.2);
  });
});
