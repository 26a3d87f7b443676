import { describe, expect, it } from 'vitest';
import { ManualClock, perHour, perSecond, RateLimiter, type RateLimiterHandle } from '../../src/index.js';

import { duplicateKeys, openClaims } from '../helpers/table-scan.js';
import { soakOr } from '../helpers/soak.js';
import { openGate, raceUntilLost, result, spawn } from '../helpers/workers.js';

interface HammerResult {
  admitted: number[];
  casRetries: number;
}




async function hammer(handle: RateLimiterHandle, workers: number, keys: string[], attempts: number, cost = 1) {
  const gate = new SharedArrayBuffer(8);
  const pool = Array.from({ length: workers }, (_, id) => spawn({ mode: 'hammer', handle, id, keys, attempts, cost, gate }));
  const results = pool.map((w) => result<HammerResult>(w));
  await openGate(gate, workers);
  const all = await Promise.all(results);
  await Promise.all(pool.map((w) => w.terminate()));
  const perKey = keys.map((_, k) => all.reduce((sum, r) => sum + (r.admitted[k] ?? 0), 0));
  return { perKey, casRetries: all.reduce((sum, r) => sum + r.casRetries, 0) };
}

describe('real worker_threads sharing one limiter', () => {
  it('reads the shared ManualClock and shares state with a worker', async () => {
    const clock = new ManualClock(1234.5);
    const limiter = new RateLimiter({ limit: perSecond(5), maxKeys: 8, clock });
    limiter.tryAcquire('k', 3);
    const worker = spawn({ mode: 'clock', handle: limiter.handle, id: 0, key: 'k', cost: 2 });
    const { d, now } = await result<{ d: { remaining: number; allowed: boolean }; now: number }>(worker);
    await worker.terminate();
    expect(now).toBe(1234.5);
    expect(d).toMatchObject({ allowed: true, remaining: 0 });
    expect(limiter.tryAcquire('k')).toMatchObject({ allowed: false, retryAfterMs: 200 });
  });

  it('shares one monotonic timeline with workers under the default clock', async () => {
    // One an hour: the key's first admission has not drained when the worker decides, however
    // long the worker takes to start (found: at perSecond(1) a busy machine started it more than
    // a second later, and its admission left 1).
    const limiter = new RateLimiter({ limit: perHour(1, { burst: 2 }), maxKeys: 8 });
    limiter.allow('k');
    const before = performance.now();
    const worker = spawn({ mode: 'epoch', handle: limiter.handle, id: 0, key: 'k' });
    const { now, d } = await result<{ now: number; d: { allowed: boolean; remaining: number } }>(worker);
    const after = performance.now();
    await worker.terminate();
    expect(now).toBeGreaterThanOrEqual(before); // same time origin: the worker's now is not reset
    expect(now).toBeLessThanOrEqual(after);
    expect(d).toMatchObject({ allowed: true, remaining: 0 }); // and it spent from the same state
  });

  it('admits exactly burst in total when 4 workers hammer one key on a frozen clock, and CAS retries happen', async () => {
    const burst = 100_000;
    // Exact in every round; rounds go on until one shows the workers racing on the slot (a lost
    // compare-and-swap): on a busy machine a worker may finish before another starts (found: 8
    // rounds of 60,000 calls each without one, on 2 cores beside another test run), and then
    // raceUntilLost forces one (a worker parked before its first compare-and-swap).
    await raceUntilLost<{ admitted: number[]; casRetries: number }>(() => {
      const limiter = new RateLimiter({ limit: perSecond(burst), maxKeys: 8, clock: new ManualClock() });
      return {
        workers: Array.from({ length: 4 }, (_, id) => ({ mode: 'hammer', handle: limiter.handle, id, keys: ['hot'], attempts: 60_000, cost: 1 })),
        check(all) {
          expect(all.reduce((n, r) => n + (r.admitted[0] as number), 0)).toBe(burst);
          expect(limiter.tryAcquire('hot', 0).remaining).toBe(0);
        },
      };
    }, 8);
  });

  it('spends cost atomically: mixed costs never overshoot burst', async () => {
    const burst = 30_000;
    const limiter = new RateLimiter({ limit: perSecond(burst), maxKeys: 8, clock: new ManualClock() });
    const { perKey } = await hammer(limiter.handle, 3, ['hot'], 20_000, 3);
    expect(perKey[0]).toBe(burst / 3);
  });

  it('gives each of 3,000 new keys exactly its own quota when 4 workers insert them at once', async () => {
    const limiter = new RateLimiter({ limit: perSecond(7), maxKeys: 4000, clock: new ManualClock() });
    const keys = Array.from({ length: 3000 }, (_, i) => `tenant:${i}:api`);
    const { perKey } = await hammer(limiter.handle, 4, keys, keys.length * 3);
    expect(perKey.every((n) => n === 7)).toBe(true);
    expect(limiter.stats().liveKeys).toBe(3000);
  });

  it('keeps colliding keys apart when 4 workers insert them into one chain at once', async () => {
    const limiter = new RateLimiter({ limit: perSecond(5), maxKeys: 32, clock: new ManualClock(), forceHash: 77 });
    const keys = Array.from({ length: 48 }, (_, i) => `c${i}`);
    const { perKey } = await hammer(limiter.handle, 4, keys, keys.length * 4);
    expect(perKey).toEqual(keys.map(() => 5));
    expect(limiter.stats().liveKeys).toBe(48);
  });

  it('stays exact and usable when workers are terminated in the middle of hammering', async () => {
    const burst = 200_000;
    const limiter = new RateLimiter({ limit: perSecond(burst), maxKeys: 8, clock: new ManualClock() });
    const gate = new SharedArrayBuffer(8);
    const counters = new SharedArrayBuffer(4 * 4);
    const count = new Int32Array(counters);
    const pool = Array.from({ length: 4 }, (_, id) => spawn({ mode: 'hammer-forever', handle: limiter.handle, id, key: 'hot', gate, counters }));
    await openGate(gate, 4);
    const total = () => count.reduce((a, b) => a + b, 0);
    while (total() < 20_000) await new Promise((r) => setTimeout(r, 1));
    await Promise.all(pool.map((w) => w.terminate()));
    // A worker can die between its CAS and its counter increment: at most one uncounted each.
    const spent = burst - limiter.tryAcquire('hot', 0).remaining;
    expect(spent).toBeGreaterThanOrEqual(total());
    expect(spent).toBeLessThanOrEqual(total() + 4);
    let more = 0;
    while (limiter.allow('hot')) more++;
    expect(spent + more).toBe(burst); // the slot is intact: exactly burst in all
    expect(limiter.stats().claimed).toBe(0);
  });

  it.each([
    { keys: 'short keys', suffix: '', maxKeys: undefined },
    // Long keys: a worker may also die while it takes a heap record or grows the heap.
    // (A table large enough to have a key heap: see INLINE_ALL_BYTES.)
    { keys: 'keys of about 100 bytes', suffix: `/${'t'.repeat(90)}`, maxKeys: 300 },
  ])('stays usable when workers die inside inserts, reclaims and sweeps ($keys)', async ({ suffix, maxKeys }) => {
    const clock = new ManualClock();
    const limiter = new RateLimiter({ limit: perSecond(3), maxKeys: maxKeys ?? 24, clock, forceHash: 5, claimTimeoutMs: 20 });
    if (suffix !== '') expect(limiter.handle.keys).not.toBeNull();
    // One round of kills under `npm test`, three under `npm run test:soak`.
    for (let round = 0; round < soakOr(1, 3); round++) {
      const gate = new SharedArrayBuffer(8);
      const counters = new SharedArrayBuffer(4 * 4);
      const count = new Int32Array(counters);
      const pool = Array.from({ length: 4 }, (_, id) => spawn({ mode: 'churn-forever', handle: limiter.handle, id, gate, counters, suffix }));
      await openGate(gate, 4);
      while (count.reduce((a, b) => a + b, 0) < 2_000 * (round + 1)) await new Promise((r) => setTimeout(r, 1));
      await Promise.all(pool.map((w) => w.terminate()));
    }
    // At most one unfinished insert per terminated worker can be left open. A claim that another
    // inserter cancelled because its own inserter stalled past claimTimeoutMs (20 ms: a busy
    // machine does that) stays BUSY too, until reused, and is not one of them (found on a busy
    // machine: 20 claimed, of which at most 12 open).
    expect(openClaims(limiter.handle.table)).toBeLessThanOrEqual(12);
    clock.advance(10_000);
    // New keys in the same (fully colliding) chain still get exactly their own quota.
    for (let i = 0; i < 10; i++) {
      expect(limiter.tryAcquire(`after-${i}${suffix}`, 3)).toMatchObject({ allowed: true, remaining: 0 });
      expect(limiter.allow(`after-${i}${suffix}`)).toBe(false);
    }
    expect(duplicateKeys(limiter.handle.table, limiter.handle.keys)).toEqual([]);
  });
});
