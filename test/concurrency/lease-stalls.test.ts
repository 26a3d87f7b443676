// An acquire stopped with its key's lock held, by a clock that parks its thread at the reading it
// takes under the lock: another thread takes the lock over (after claimTimeoutMs) and fills the
// key, or a sweep takes it over and reclaims the key; then the stopped acquire finishes. Places
// held never exceed maxInFlight, and no lease is counted where it does not stand.
import { describe, expect, it } from 'vitest';
import { ConcurrencyLimiter } from '../../src/index.js';
import { FROZEN_MS, park, pastReclaimGuard, pastTimeout, stagedReuse } from '../helpers/park.js';

const clock = { now: () => FROZEN_MS };

type Reply = { allowed: boolean; reason: string; retries: number };

/** An acquire of `key` on a worker, parked at its first clock reading (taken with the key's lock held). */
const parkedAcquire = (limiter: ConcurrencyLimiter, key: string) => park('lease', limiter.handle, key, 1, 1);

describe('an acquire stalled with its key lock held', () => {
  it('another thread takes the lock over and fills the key: the stalled acquire then finds no place', async () => {
    const limiter = new ConcurrencyLimiter({ maxInFlight: 3, leaseMs: 60_000, maxKeys: 8, ...stagedReuse(20), clock });
    expect(limiter.tryAcquire('k', 0).allowed).toBe(true); // the key exists before the stall
    const w = await parkedAcquire(limiter, 'k');
    pastTimeout(25);
    let admitted = 0;
    for (let i = 0; i < 5; i++) if (limiter.tryAcquire('k').allowed) admitted++;
    w.resume();
    const late = await w.next<Reply>();
    await w.worker.terminate();
    expect(admitted).toBe(3);
    // It read every place free before the takeover; its compareExchanges from those values fail
    // on the places now held, so it gives back what it took and decides again: refused.
    expect(late).toMatchObject({ allowed: false, reason: 'limited' });
    expect(late.retries).toBeGreaterThan(0);
    expect(limiter.stats().placesHeld).toBe(3);
  });

  it('a sweep takes the lock over, reclaims the idle key, and the stalled acquire decides again in its new slot', async () => {
    const limiter = new ConcurrencyLimiter({ maxInFlight: 2, leaseMs: 60_000, maxKeys: 8, ...stagedReuse(20), clock });
    expect(limiter.tryAcquire('k', 0).allowed).toBe(true);
    const w = await parkedAcquire(limiter, 'k');
    // Within the timeout the lock is the worker's: a sweep leaves the key alone.
    expect(limiter.sweep()).toBe(0);
    pastReclaimGuard(20);
    // Past 30x it, the sweep takes the lock over: no place is held yet, so the key is idle.
    expect(limiter.sweep()).toBe(1);
    expect(limiter.stats().liveKeys).toBe(0);
    const first = limiter.tryAcquire('k'); // the key again, in a new slot
    expect(first.allowed).toBe(true);
    w.resume();
    const late = await w.next<Reply>();
    await w.worker.terminate();
    // Its stamp landed in the reclaimed slot: that lease went with the reclaim, and the acquire
    // was made again where the key lives now. One place each, two held, nothing counted twice.
    expect(late.allowed).toBe(true);
    const stats = limiter.stats();
    expect(stats.placesHeld).toBe(2);
    expect(stats.liveKeys).toBe(1);
    expect(limiter.tryAcquire('k')).toMatchObject({ allowed: false, remaining: 0 });
  });

  it('a key whose lock holder died is reclaimed by sweep() once 30x claimTimeoutMs has passed', async () => {
    const limiter = new ConcurrencyLimiter({ maxInFlight: 2, leaseMs: 60_000, maxKeys: 8, ...stagedReuse(20), clock });
    expect(limiter.tryAcquire('k', 0).allowed).toBe(true);
    const w = await parkedAcquire(limiter, 'k');
    await w.worker.terminate(); // dies holding the key's lock
    pastTimeout(25);
    expect(limiter.sweep()).toBe(0); // a decision could take the lock over now; a reclaim waits 30x
    pastReclaimGuard(20);
    expect(limiter.sweep()).toBe(1);
    expect(limiter.tryAcquire('k', 2).allowed).toBe(true);
  });
});
