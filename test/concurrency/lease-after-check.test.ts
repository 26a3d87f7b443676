// A ConcurrencyLimiter acquire stalled in the one window no clock reading reaches: after
// #decideLocked's "lock still ours" check, before its stamps. A test-only hook parks it there
// (fixtures/park-after-check-worker.mjs wraps Atomics.load in the worker).
//   W: lock 'k', read places [FREE], check lock == token -> parked
//   main: past 30x claimTimeoutMs, sweep() takes W's lock over, 'k' holds nothing -> reclaimed; an
//         insert gives the slot to 'other' (forceHash: same home) or to 'k' again, with FREE
//         places and a FREE lock word
//   W resumes: compareExchange(place 0, FREE -> stamp) lands on the new occupant (equal to what
//         it read); settle() sees ctrl changed -> lost(), which leaves the slot alone, and 'k'
//         acquires again in its new slot.
// What such a stall costs (docs/design.md, section 7): at most one place of the new occupant
// held by a stamp no lease owns, until it expires; never a place more than maxInFlight.
import { describe, expect, it } from 'vitest';
import { ConcurrencyLimiter } from '../../src/index.js';
import { FROZEN_MS, pastReclaimGuard, stagedReuse } from '../helpers/park.js';
import { parkAfterCheck } from '../helpers/park-after-check.js';
import { lockIndexOf } from '../helpers/slots.js';

const clock = { now: () => FROZEN_MS };
type Reply = { allowed: boolean; parked: boolean };

describe('a lease acquire stalled between its lock check and its stamps', () => {
  it('slot reused by another key: the stale stamp holds at most one of its places, until it expires', async () => {
    const limiter = new ConcurrencyLimiter({ maxInFlight: 1, leaseMs: 60_000, maxKeys: 8, ...stagedReuse(20), clock, forceHash: 7 });
    expect(limiter.tryAcquire('k', 0).allowed).toBe(true);
    const w = await parkAfterCheck('lease', limiter.handle, 'k', 1, lockIndexOf(limiter.handle.table, 'k'));
    expect(w.parked).toBe(true);
    pastReclaimGuard(20);
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
    expect({ late: late.allowed, released }).toEqual({ late: true, released: true });
    // Every real lease is released: what is held is the stale stamp, if it landed (then 'other'
    // had no free place: it was refused, never admitted beyond maxInFlight).
    const ghost = limiter.stats().placesHeld;
    expect(ghost).toBeLessThanOrEqual(1);
    expect(other.allowed).toBe(ghost === 0);
  });

  it('slot reused by the same key: once every lease is released, at most the stale stamp is held', async () => {
    const limiter = new ConcurrencyLimiter({ maxInFlight: 2, leaseMs: 60_000, maxKeys: 8, ...stagedReuse(20), clock });
    expect(limiter.tryAcquire('k', 0).allowed).toBe(true);
    const w = await parkAfterCheck('lease', limiter.handle, 'k', 1, lockIndexOf(limiter.handle.table, 'k'));
    expect(w.parked).toBe(true);
    pastReclaimGuard(20);
    expect(limiter.sweep()).toBe(1);
    expect(limiter.tryAcquire('k', 0).allowed).toBe(true); // 'k' re-inserted into the same slot
    w.resume();
    const late = await w.next<Reply>();
    w.release();
    const { released } = await w.next<{ released: boolean | null }>();
    await w.worker.terminate();
    expect({ late: late.allowed, released }).toEqual({ late: true, released: true });
    const ghost = limiter.stats().placesHeld;
    expect(ghost).toBeLessThanOrEqual(1);
    expect(limiter.tryAcquire('k', 2 - ghost).allowed).toBe(true);
  });
});
