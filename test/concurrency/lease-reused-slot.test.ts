// Regression (both failed before underKeyLock's settle checked ctrl and acquires checked their
// lock before writing): an acquire parked under its key lock, after underKeyLock's ctrl check
// (at the clock reading #decideLocked takes first), while sweep() takes the lock over (past
// claimTimeoutMs), reclaims the idle key (DEAD -> TOMB), and an insert reuses the slot
// (initSlot stores FREE into the lock word). The parked acquire resumed, read the places of the
// slot's new occupant, stamped one, and settle() took the FREE lock word for "stands": nothing
// checked ctrl after the lock was lost, so:
//   1. slot reused by another key: 'k' is admitted twice with maxInFlight 1 (the stale lease
//      charges 'other'), and 'other' is left full with nobody holding a lease on it;
//   2. slot reused by the same key: the lease counts, but its release() sees a changed ctrl,
//      frees nothing, and the key stays full until the lease expires (a lost lease).
import { describe, expect, it } from 'vitest';
import { ConcurrencyLimiter } from '../../src/index.js';
import { FROZEN_MS, park, pastReclaimGuard, stagedReuse } from '../helpers/park.js';

const clock = { now: () => FROZEN_MS };

type Reply = { allowed: boolean; reason: string };

/** An acquire of `key` on a worker, parked at its first clock reading (taken with the key's lock held). */
const parkedAcquire = (limiter: ConcurrencyLimiter, key: string) => park('lease', limiter.handle, key, 1, 1);

describe('an acquire parked under its key lock while sweep() reclaims the key and the slot is reused', () => {
  it('slot reused by another key: the parked acquire must not be admitted on that key\'s places', async () => {
    // forceHash: every key has the same home slot, so 'other' takes the reclaimed slot.
    const limiter = new ConcurrencyLimiter({ maxInFlight: 1, leaseMs: 60_000, maxKeys: 8, ...stagedReuse(20), clock, forceHash: 7 });
    expect(limiter.tryAcquire('k', 0).allowed).toBe(true);
    const w = await parkedAcquire(limiter, 'k');
    pastReclaimGuard(20);
    expect(limiter.sweep()).toBe(1); // takes the parked worker's lock over; 'k' is idle
    expect(limiter.tryAcquire('other', 0).allowed).toBe(true); // reuses the reclaimed slot
    const mine = limiter.tryAcquire('k'); // 'k' again, in the next slot
    expect(mine.allowed).toBe(true);
    w.resume();
    const late = await w.next<Reply>();
    // maxInFlight is 1 and `mine` holds 'k': a second lease on 'k' is over-admission.
    const other = limiter.tryAcquire('other');
    w.release();
    const { released } = await w.next<{ released: boolean | null }>();
    await w.worker.terminate();
    expect({ lateAllowed: late.allowed, otherAllowed: other.allowed, released }).toEqual({ lateAllowed: false, otherAllowed: true, released: null });
  });

  it('slot reused by the same key: a lease that was counted must free its place on release', async () => {
    const limiter = new ConcurrencyLimiter({ maxInFlight: 2, leaseMs: 60_000, maxKeys: 8, ...stagedReuse(20), clock });
    expect(limiter.tryAcquire('k', 0).allowed).toBe(true);
    const w = await parkedAcquire(limiter, 'k');
    pastReclaimGuard(20);
    expect(limiter.sweep()).toBe(1);
    const first = limiter.tryAcquire('k'); // 'k' re-inserted: into the reclaimed slot (first TOMB)
    expect(first.allowed).toBe(true);
    w.resume();
    const late = await w.next<Reply>();
    expect(late.allowed).toBe(true); // 2 places for 2: fine so far
    w.release();
    const { released } = await w.next<{ released: boolean | null }>();
    await w.worker.terminate();
    first.lease?.release();
    // Both leases released: every place of 'k' must be free again.
    expect({ released, placesHeld: limiter.stats().placesHeld, again: limiter.tryAcquire('k', 2).allowed })
      .toEqual({ released: true, placesHeld: 0, again: true });
  });
});
