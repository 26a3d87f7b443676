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
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { ConcurrencyLimiter } from '../../src/index.js';

const parkWorker = new URL('../fixtures/park-request-worker.mjs', import.meta.url);
const FROZEN_MS = 5_000;
const clock = { now: () => FROZEN_MS };

function pastTimeout(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until);
}

type Reply = { allowed: boolean; reason: string };

async function parkedAcquire(limiter: ConcurrencyLimiter, key: string) {
  const flags = new Int32Array(new SharedArrayBuffer(16));
  const worker = new Worker(parkWorker, {
    workerData: { kind: 'lease', handle: limiter.handle, request: key, cost: 1, parkAt: 1, flags: flags.buffer, frozenMs: FROZEN_MS },
  });
  const messages: unknown[] = [];
  let wake: (() => void) | null = null;
  worker.on('message', (m) => { messages.push(m); wake?.(); });
  const next = async <T>(): Promise<T> => {
    while (messages.length === 0) await new Promise<void>((r) => { wake = r; });
    return messages.shift() as T;
  };
  while (Atomics.load(flags, 0) === 0) await new Promise((r) => setTimeout(r, 1));
  const go = (i: number) => { Atomics.store(flags, i, 1); Atomics.notify(flags, i); };
  return { worker, next, resume: () => go(1), release: () => go(2) };
}

describe('an acquire parked under its key lock while sweep() reclaims the key and the slot is reused', () => {
  it('slot reused by another key: the parked acquire must not be admitted on that key\'s places', async () => {
    // forceHash: every key has the same home slot, so 'other' takes the reclaimed slot.
    const limiter = new ConcurrencyLimiter({ maxInFlight: 1, leaseMs: 60_000, maxKeys: 8, claimTimeoutMs: 20, clock, forceHash: 7 });
    expect(limiter.tryAcquire('k', 0).allowed).toBe(true);
    const w = await parkedAcquire(limiter, 'k');
    pastTimeout(30);
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
    const limiter = new ConcurrencyLimiter({ maxInFlight: 2, leaseMs: 60_000, maxKeys: 8, claimTimeoutMs: 20, clock });
    expect(limiter.tryAcquire('k', 0).allowed).toBe(true);
    const w = await parkedAcquire(limiter, 'k');
    pastTimeout(30);
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
