// A decision stopped between its steps, by a clock that parks its thread: another thread spends
// meanwhile (taking the key's lock over where there is one), then the stopped one finishes. On a
// frozen clock the bound is exact: never more than the burst in total.
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { perDay, perHour, RateLimiter, type RateLimiterOptions } from '../src/index.js';

const stallWorker = new URL('./fixtures/stall-worker.mjs', import.meta.url);
const FROZEN_MS = 5_000;

/** Resolves true once the worker parked, false if it finished without reaching that clock call. */
async function parked(flags: Int32Array, done: { finished: boolean }): Promise<boolean> {
  while (Atomics.load(flags, 0) === 0) {
    if (done.finished) return false;
    await new Promise((r) => setTimeout(r, 1));
  }
  return true;
}

/** Spins for `ms` of real time: a lock or claim timeout must really pass. */
function pastTimeout(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until);
}

const configs: [string, Partial<RateLimiterOptions>][] = [
  ['two GCRA limits', { limit: [perHour(10), perDay(1_000)] }],
  ['a GCRA limit and a global cap', { limit: perHour(10), globalLimit: perHour(1_000) }],
  ['a fixed window', { limit: perHour(10), algorithm: 'fixed-window' }],
  ['two fixed windows', { limit: [perHour(10), perDay(1_000)], algorithm: 'fixed-window' }],
  ['a sliding window', { limit: perHour(10), algorithm: 'sliding-window' }],
  ['a sliding log', { limit: perHour(10), algorithm: 'sliding-log' }],
  ['a sliding log and a global cap', { limit: perHour(10), algorithm: 'sliding-log', globalLimit: perHour(1_000) }],
];

describe('a decision stalled past claimTimeoutMs', () => {
  it.each(configs)('%s: the stalled thread cannot spend what another already spent', async (_name, options) => {
    let stalls = 0;
    // Parked at its first clock reading (after its snapshot, before it decides) or its second
    // (where a decision reads the clock again: under a global cap's lock on a locked path).
    for (const parkAt of [1, 2]) {
      for (const claimTimeoutMs of [20, 200]) {
        const limiter = new RateLimiter({ maxKeys: 16, claimTimeoutMs, clock: { now: () => FROZEN_MS }, ...options } as RateLimiterOptions);
        expect(limiter.tryAcquire('k', 0).allowed).toBe(true); // the key exists before the stall
        const flags = new Int32Array(new SharedArrayBuffer(12));
        const worker = new Worker(stallWorker, {
          workerData: { handle: limiter.handle, key: 'k', cost: 1, parkAt, flags: flags.buffer, frozenMs: FROZEN_MS },
        });
        const done = { finished: false };
        const reply = new Promise<{ allowed: boolean; retries: number }>((resolve, reject) => {
          worker.once('message', (m) => { done.finished = true; resolve(m); });
          worker.once('error', reject);
        });
        const stalled = await parked(flags, done);
        let admitted = 0;
        if (stalled) {
          stalls++;
          // The worker is stopped inside its decision (holding a lock, where there is one): let
          // the lock's timeout pass, then spend the whole burst from this thread.
          pastTimeout(claimTimeoutMs + 5);
          for (let i = 0; i < 15; i++) if (limiter.allow('k')) admitted++;
          Atomics.store(flags, 1, 1);
          Atomics.notify(flags, 1);
        }
        const late = await reply;
        await worker.terminate();
        if (!stalled) for (let i = 0; i < 15; i++) if (limiter.allow('k')) admitted++;
        expect(admitted + (late.allowed ? 1 : 0)).toBe(10);
        expect(limiter.tryAcquire('k', 0).remaining).toBe(0);
      }
    }
    expect(stalls).toBeGreaterThan(0);
  });
});

describe('a key lock held while another thread holds the global cap', () => {
  // Thread C stops while holding the global cap's lock (on a locked path); thread A holds key k's
  // lock, has checked k, and waits for the cap; this thread takes both locks over after the
  // timeout and spends k's whole burst; then C and A go on. A must not spend k again.
  it.each([20, 200])('claimTimeoutMs %i: the waiting holder cannot spend after its lock was taken over', async (claimTimeoutMs) => {
    const limiter = new RateLimiter({ limit: perHour(10), globalLimit: perHour(1_000), maxKeys: 16, claimTimeoutMs, clock: { now: () => FROZEN_MS } });
    expect(limiter.tryAcquire('k', 0).allowed).toBe(true);
    expect(limiter.tryAcquire('other', 0).allowed).toBe(true);
    const start = (key: string, parkAt: number): { worker: Worker; flags: Int32Array; done: { finished: boolean }; reply: Promise<{ allowed: boolean }> } => {
      const flags = new Int32Array(new SharedArrayBuffer(12));
      const worker = new Worker(stallWorker, { workerData: { handle: limiter.handle, key, cost: 1, parkAt, flags: flags.buffer, frozenMs: FROZEN_MS } });
      const done = { finished: false };
      const reply = new Promise<{ allowed: boolean }>((resolve, reject) => {
        worker.once('message', (m) => { done.finished = true; resolve(m); });
        worker.once('error', reject);
      });
      return { worker, flags, done, reply };
    };
    const c = start('other', 2); // parks at its second reading: under the cap's lock, if any
    const cParked = await parked(c.flags, c.done);
    const a = start('k', 0);
    while (Atomics.load(a.flags, 2) === 0) await new Promise((r) => setTimeout(r, 1));
    await new Promise((r) => setTimeout(r, 20)); // A is inside its decision (waiting for the cap, if locked)
    pastTimeout(claimTimeoutMs + 5);
    let admitted = 0;
    for (let i = 0; i < 15; i++) if (limiter.allow('k')) admitted++;
    Atomics.store(c.flags, 1, 1);
    Atomics.notify(c.flags, 1);
    const [lateA] = await Promise.all([a.reply, c.reply]);
    await Promise.all([a.worker.terminate(), c.worker.terminate()]);
    expect(admitted + (lateA.allowed ? 1 : 0)).toBe(10);
    expect(limiter.tryAcquire('k', 0).remaining).toBe(0);
    expect(typeof cParked).toBe('boolean'); // parked on the locked path; lock-free decisions read the clock once
  });
});
