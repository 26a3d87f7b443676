// A ConcurrencyLimiter sweep parked inside retireLocked's idle check
// (the clock reading countHeld is given, with the key's lock held by the sweep's token) while
// acquires take that lock over (past claimTimeoutMs) and take, or take and give back, places.
// When the sweep resumes, its CAS token -> DEAD must fail (the word is another holder's, or free),
// so a key holding a lease is never reclaimed, and nothing is counted twice.
import { describe, expect, it } from 'vitest';
import { ConcurrencyLimiter } from '../../src/index.js';
import { FROZEN_MS, park } from '../helpers/park.js';

const clock = { now: () => FROZEN_MS };

describe('a sweep parked in its idle check, the lock taken over by acquires', () => {
  it('an acquire takes the lock over and holds a place: the resumed sweep reclaims nothing', async () => {
    const limiter = new ConcurrencyLimiter({ maxInFlight: 1, leaseMs: 60_000, maxKeys: 8, claimTimeoutMs: 20, clock, forceHash: 3 });
    expect(limiter.tryAcquire('k', 0).allowed).toBe(true);
    const s = await park('lease-sweep', limiter.handle, null, 0, 1);
    expect(s.parked).toBe(true);
    const held = limiter.tryAcquire('k'); // waits in lock() until the sweep's token is stale, then takes it over
    expect(held.allowed).toBe(true);
    s.resume();
    expect(await s.next<{ swept: number }>()).toEqual({ swept: 0 });
    await s.worker.terminate();
    expect(limiter.stats()).toMatchObject({ liveKeys: 1, placesHeld: 1 });
    expect(limiter.tryAcquire('k').allowed).toBe(false);
    expect(limiter.tryAcquire('other', 0).allowed).toBe(true); // would take the slot if 'k' had been reclaimed
    expect(limiter.tryAcquire('k').allowed).toBe(false);
    expect(held.lease?.release()).toBe(true);
    expect(limiter.tryAcquire('k').allowed).toBe(true);
  });

  it('an acquire takes the lock over and its lease is released before the sweep resumes: the key is not lost', async () => {
    const limiter = new ConcurrencyLimiter({ maxInFlight: 2, leaseMs: 60_000, maxKeys: 8, claimTimeoutMs: 20, clock, forceHash: 3 });
    expect(limiter.tryAcquire('k', 0).allowed).toBe(true);
    const s = await park('lease-sweep', limiter.handle, null, 0, 1);
    expect(s.parked).toBe(true);
    const a = limiter.tryAcquire('k');
    expect(a.allowed).toBe(true);
    expect(a.lease?.release()).toBe(true);
    const b = limiter.tryAcquire('k'); // the lock is free now: taken at once
    expect(b.allowed).toBe(true);
    s.resume();
    expect(await s.next<{ swept: number }>()).toEqual({ swept: 0 });
    await s.worker.terminate();
    expect(limiter.stats()).toMatchObject({ liveKeys: 1, placesHeld: 1 });
    expect(limiter.tryAcquire('k').allowed).toBe(true);
    expect(limiter.tryAcquire('k').allowed).toBe(false);
    expect(b.lease?.release()).toBe(true);
  });

  it('two keys: the sweep parked on the second key\'s idle check after reclaiming the first', async () => {
    const limiter = new ConcurrencyLimiter({ maxInFlight: 1, leaseMs: 60_000, maxKeys: 8, claimTimeoutMs: 20, clock, forceHash: 3 });
    expect(limiter.tryAcquire('a', 0).allowed).toBe(true);
    expect(limiter.tryAcquire('b', 0).allowed).toBe(true);
    const s = await park('lease-sweep', limiter.handle, null, 0, 2);
    expect(s.parked).toBe(true);
    // Whichever key it is parked on, an acquire of each takes over or waits out its lock.
    const la = limiter.tryAcquire('a');
    const lb = limiter.tryAcquire('b');
    expect([la.allowed, lb.allowed]).toEqual([true, true]);
    s.resume();
    const { swept } = await s.next<{ swept: number }>();
    await s.worker.terminate();
    expect(swept).toBeLessThanOrEqual(1);
    // The key reclaimed before the park (if any) was re-inserted by its acquire: both hold 1 of 1.
    expect(limiter.tryAcquire('a').allowed).toBe(false);
    expect(limiter.tryAcquire('b').allowed).toBe(false);
    expect(limiter.stats().placesHeld).toBe(2);
    expect(la.lease?.release()).toBe(true);
    expect(lb.lease?.release()).toBe(true);
    expect(limiter.stats().placesHeld).toBe(0);
  });
});
