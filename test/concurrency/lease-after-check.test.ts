// A ConcurrencyLimiter acquire stalled in the one window no clock reading reaches: after
// #decideLocked's "lock still ours" check, before its stamps. A test-only hook parks it there
// (fixtures/park-after-check-worker.mjs wraps Atomics.load in the worker).
//   W: lock 'k', read places [FREE], check lock == token -> parked
//   main: past claimTimeoutMs, sweep() takes W's lock over, 'k' holds nothing -> reclaimed; an
//         insert gives the slot to 'other' (forceHash: same home) or to 'k' again, with FREE
//         places and a FREE lock word
//   W resumes: its compareExchange(place 0, free -> stamp) expects the free value of the old
//         incarnation; the new key's places hold its own (freePlace: per ctrl generation), so it
//         fails, and 'k' acquires again in its new slot.
// Regression: while every incarnation's places were free at 0, the stamp landed on the new key
// and held one of its places, with no lease behind it, until it expired ('other' was refused
// with maxInFlight 1; the same key kept a place after its only lease was released).
import { describe, expect, it } from 'vitest';
import { ConcurrencyLimiter } from '../../src/index.js';
import { FROZEN_MS, lockIndexOf, parkAfterCheck, pastTimeout } from '../helpers/park-after-check.js';

const clock = { now: () => FROZEN_MS };
type Reply = { allowed: boolean; parked: boolean };

describe('a lease acquire stalled between its lock check and its stamps', () => {
  it('slot reused by another key: the stale stamp does not land on its places', async () => {
    const limiter = new ConcurrencyLimiter({ maxInFlight: 1, leaseMs: 60_000, maxKeys: 8, claimTimeoutMs: 20, clock, forceHash: 7 });
    expect(limiter.tryAcquire('k', 0).allowed).toBe(true);
    const w = await parkAfterCheck('lease', limiter.handle, 'k', 1, lockIndexOf(limiter.handle.table, 'k'));
    expect(w.parked).toBe(true);
    pastTimeout(30);
    expect(limiter.sweep()).toBe(1);
    expect(limiter.tryAcquire('other', 0).allowed).toBe(true); // takes the reclaimed slot
    w.resume();
    const late = await w.next<Reply>();
    const other = limiter.tryAcquire('other');
    w.release();
    const { released } = await w.next<{ released: boolean | null }>();
    await w.worker.terminate();
    other.lease?.release();
    // The late lease ('k', decided again in its new slot) and 'other''s were both released.
    expect({ late: late.allowed, released, otherAllowed: other.allowed, placesHeld: limiter.stats().placesHeld })
      .toEqual({ late: true, released: true, otherAllowed: true, placesHeld: 0 });
  });

  it('slot reused by the same key: once every lease is released, every place is free', async () => {
    const limiter = new ConcurrencyLimiter({ maxInFlight: 2, leaseMs: 60_000, maxKeys: 8, claimTimeoutMs: 20, clock });
    expect(limiter.tryAcquire('k', 0).allowed).toBe(true);
    const w = await parkAfterCheck('lease', limiter.handle, 'k', 1, lockIndexOf(limiter.handle.table, 'k'));
    expect(w.parked).toBe(true);
    pastTimeout(30);
    expect(limiter.sweep()).toBe(1);
    expect(limiter.tryAcquire('k', 0).allowed).toBe(true); // 'k' re-inserted into the same slot
    w.resume();
    const late = await w.next<Reply>();
    w.release();
    const { released } = await w.next<{ released: boolean | null }>();
    await w.worker.terminate();
    expect({ late: late.allowed, released, placesHeld: limiter.stats().placesHeld, again: limiter.tryAcquire('k', 2).allowed })
      .toEqual({ late: true, released: true, placesHeld: 0, again: true });
  });
});
