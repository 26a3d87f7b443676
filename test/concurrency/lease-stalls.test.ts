// An acquire stopped with its key's lock held, by a clock that parks its thread at the reading it
// takes under the lock: another thread takes the lock over (after claimTimeoutMs) and fills the
// key, or a sweep takes it over and reclaims the key; then the stopped acquire finishes. Places
// held never exceed maxInFlight, and no lease is counted where it does not stand.
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { ConcurrencyLimiter } from '../../src/index.js';

const stallWorker = new URL('../fixtures/lease-stall-worker.mjs', import.meta.url);
const FROZEN_MS = 5_000;
const clock = { now: () => FROZEN_MS };

/** Spins for `ms` of real time: a lock's timeout must really pass (lock stamps are real time). */
function pastTimeout(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until);
}

/** Starts the worker on `key` and resolves once it is parked inside its acquire. */
async function parkedAcquire(limiter: ConcurrencyLimiter, key: string): Promise<{ flags: Int32Array; reply: Promise<{ allowed: boolean; reason: string; retries: number }>; worker: Worker }> {
  const flags = new Int32Array(new SharedArrayBuffer(8));
  const worker = new Worker(stallWorker, { workerData: { handle: limiter.handle, key, cost: 1, parkAt: 1, flags: flags.buffer, frozenMs: FROZEN_MS } });
  const reply = new Promise<{ allowed: boolean; reason: string; retries: number }>((resolve, reject) => {
    worker.once('message', resolve);
    worker.once('error', reject);
  });
  while (Atomics.load(flags, 0) === 0) await new Promise((r) => setTimeout(r, 1));
  return { flags, reply, worker };
}

function release(flags: Int32Array): void {
  Atomics.store(flags, 1, 1);
  Atomics.notify(flags, 1);
}

describe('an acquire stalled with its key lock held', () => {
  it('another thread takes the lock over and fills the key: the stalled acquire then finds no place', async () => {
    const limiter = new ConcurrencyLimiter({ maxInFlight: 3, leaseMs: 60_000, maxKeys: 8, claimTimeoutMs: 20, clock });
    expect(limiter.tryAcquire('k', 0).allowed).toBe(true); // the key exists before the stall
    const { flags, reply, worker } = await parkedAcquire(limiter, 'k');
    pastTimeout(25);
    let admitted = 0;
    for (let i = 0; i < 5; i++) if (limiter.tryAcquire('k').allowed) admitted++;
    release(flags);
    const late = await reply;
    await worker.terminate();
    expect(admitted).toBe(3);
    // It read every place free before the takeover; its compareExchanges from those values fail
    // on the places now held, so it gives back what it took and decides again: refused.
    expect(late).toMatchObject({ allowed: false, reason: 'limited' });
    expect(late.retries).toBeGreaterThan(0);
    expect(limiter.stats().placesHeld).toBe(3);
  });

  it('a sweep takes the lock over, reclaims the idle key, and the stalled acquire decides again in its new slot', async () => {
    const limiter = new ConcurrencyLimiter({ maxInFlight: 2, leaseMs: 60_000, maxKeys: 8, claimTimeoutMs: 1000, clock });
    expect(limiter.tryAcquire('k', 0).allowed).toBe(true);
    const { flags, reply, worker } = await parkedAcquire(limiter, 'k');
    // Within the timeout the lock is the worker's: a sweep leaves the key alone.
    expect(limiter.sweep()).toBe(0);
    pastTimeout(1010);
    // Past it, the sweep takes the lock over: no place is held yet, so the key is idle.
    expect(limiter.sweep()).toBe(1);
    expect(limiter.stats().liveKeys).toBe(0);
    const first = limiter.tryAcquire('k'); // the key again, in a new slot
    expect(first.allowed).toBe(true);
    release(flags);
    const late = await reply;
    await worker.terminate();
    // Its stamp landed in the reclaimed slot: that lease went with the reclaim, and the acquire
    // was made again where the key lives now. One place each, two held, nothing counted twice.
    expect(late.allowed).toBe(true);
    const stats = limiter.stats();
    expect(stats.placesHeld).toBe(2);
    expect(stats.liveKeys).toBe(1);
    expect(limiter.tryAcquire('k')).toMatchObject({ allowed: false, remaining: 0 });
  });

  it('a key whose lock holder died is reclaimed by sweep() once claimTimeoutMs has passed', async () => {
    const limiter = new ConcurrencyLimiter({ maxInFlight: 2, leaseMs: 60_000, maxKeys: 8, claimTimeoutMs: 20, clock });
    expect(limiter.tryAcquire('k', 0).allowed).toBe(true);
    const { worker } = await parkedAcquire(limiter, 'k');
    await worker.terminate(); // dies holding the key's lock
    pastTimeout(25);
    expect(limiter.sweep()).toBe(1);
    expect(limiter.tryAcquire('k', 2).allowed).toBe(true);
  });
});
