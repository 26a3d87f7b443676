import { describe, expect, it } from 'vitest';
import { ConcurrencyLimiter, ManualClock, monotonicClock, perSecond, PolicyLimiter, RateLimiter } from '../../src/index.js';
import { gcraParams } from '../../src/math/gcra.js';
import { gcraSlotState } from '../../src/rate/gcra-slot.js';
import { SlotTable } from '../../src/table/table.js';

// gauges(): live keys, tombstones and the mean probe of a hit, from counters the table keeps as
// it goes (an O(1) read per scrape), checked here against a count of the slots themselves
// (stats() and SlotTable.probeLengths(), O(capacity)) after every kind of transition a slot
// makes: insert, reclaim, compaction, reuse of a tombstone. The churn soak (test/table) checks the
// same after every round of three workers inserting, sweeping and compacting at once.

function slotsOf(limiter: RateLimiter) {
  return new SlotTable(limiter.handle.table, gcraSlotState(gcraParams(limiter.limit), monotonicClock), limiter.handle.keys);
}

function expectAgree(limiter: RateLimiter, what: string) {
  const g = limiter.gauges();
  const s = limiter.stats();
  expect({ live: g.liveKeys, tombstones: g.tombstones, maxKeys: g.maxKeys, capacity: g.capacity }, what)
    .toEqual({ live: s.liveKeys, tombstones: s.tombstones, maxKeys: s.maxKeys, capacity: s.capacity });
  expect(g.probeMean, what).toBeCloseTo(slotsOf(limiter).probeLengths().mean, 12);
}

describe('gauges(): counts the table keeps as it goes', () => {
  it('a fresh table: nothing live, no tombstones, probe mean 0', () => {
    const limiter = new RateLimiter({ limit: perSecond(1), maxKeys: 100 });
    expect(limiter.gauges()).toEqual({ liveKeys: 0, tombstones: 0, probeMean: 0, maxKeys: 100, capacity: limiter.stats().capacity });
  });

  it('inserts, reclaims and compaction, with every key on one home slot (each one probes one more)', () => {
    const clock = new ManualClock();
    const limiter = new RateLimiter({ limit: perSecond(1), maxKeys: 64, clock, forceHash: 7 });
    for (let i = 0; i < 10; i++) limiter.allow(`k${i}`);
    // Displacements 0..9 from the one home: a hit probes 1 + 4.5 on average.
    expect(limiter.gauges().probeMean).toBeCloseTo(5.5, 12);
    expect(limiter.gauges().liveKeys).toBe(10);
    expectAgree(limiter, 'after 10 inserts');
    // Keep k9 busy, let the others go idle, and sweep: nine reclaims; the tombstones before k9
    // stay (its chain crosses them), and k9 still probes 10 slots.
    clock.advance(1_000);
    expect(limiter.allow('k9')).toBe(true);
    clock.advance(200);
    expect(limiter.sweep()).toBe(9);
    expect(limiter.gauges()).toMatchObject({ liveKeys: 1, tombstones: 9, probeMean: 10 });
    expectAgree(limiter, 'after the sweep');
    // k9 goes idle too: its reclaim and the compaction clear every tombstone.
    clock.advance(2_000);
    expect(limiter.sweep()).toBe(1);
    expect(limiter.gauges()).toMatchObject({ liveKeys: 0, tombstones: 0, probeMean: 0 });
    expectAgree(limiter, 'after the second sweep');
    // New keys reuse EMPTY slots, and tombstones are reused by inserts (counted down at the claim).
    for (let i = 0; i < 5; i++) limiter.allow(`again${i}`);
    clock.advance(2_000);
    expect(limiter.allow('again4')).toBe(true);
    clock.advance(200);
    expect(limiter.sweep()).toBe(4);
    expectAgree(limiter, 'tombstones before a live key');
    limiter.allow('reuses-a-tombstone');
    expectAgree(limiter, 'an insert into a tombstone');
    expect(limiter.gauges().liveKeys).toBe(2);
  });

  it('PolicyLimiter and ConcurrencyLimiter keep the same gauges', () => {
    const policy = new PolicyLimiter({ rules: [{ limit: perSecond(5) }], maxKeys: 100 });
    for (let i = 0; i < 7; i++) policy.allow({ user: `u${i}`, api: 'a' });
    expect(policy.gauges()).toMatchObject({ liveKeys: 7, tombstones: 0, maxKeys: 100 });
    expect(policy.gauges().liveKeys).toBe(policy.stats().liveKeys);
    const leases = new ConcurrencyLimiter({ maxInFlight: 2, leaseMs: 1_000, maxKeys: 100 });
    for (let i = 0; i < 3; i++) leases.tryAcquire(`job${i}`);
    expect(leases.gauges()).toMatchObject({ liveKeys: 3, tombstones: 0, maxKeys: 100 });
  });
});
