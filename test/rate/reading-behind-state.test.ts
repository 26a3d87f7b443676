// Decisions that load shared state after their clock reading (a global cap's batch, a commit
// that lost a race and decides again at its own reading) see state written at later readings.
// Newer state must read as at least as much spent, never as a fresh key. A worker parks inside
// its first clock reading (after the key's snapshot) while this thread writes, then decides at
// that older reading.
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { ManualClock, perSecond, RateLimiter } from '../../src/index.js';

const parkWorker = new URL('../fixtures/park-frozen.mjs', import.meta.url);

/** Starts the worker, waits until it parked, runs `meanwhile`, releases it; resolves its count. */
async function parkedDecision(
  limiter: RateLimiter, key: string, frozenMs: number, mode: 'allow' | 'try', meanwhile: () => void,
): Promise<number> {
  const flags = new Int32Array(new SharedArrayBuffer(8));
  const worker = new Worker(parkWorker, { workerData: { handle: limiter.handle, key, cost: 1, flags: flags.buffer, frozenMs, mode, repeat: 1 } });
  try {
    const reply = new Promise<{ admitted: number }>((resolve, reject) => {
      worker.once('message', resolve);
      worker.once('error', reject);
    });
    while (Atomics.load(flags, 0) === 0) await new Promise((r) => setTimeout(r, 1));
    meanwhile();
    Atomics.store(flags, 1, 1);
    Atomics.notify(flags, 1);
    return (await reply).admitted;
  } finally {
    await worker.terminate();
  }
}

/** Exact decisions on distinct keys at the clock's reading until the first refusal. */
function fill(limiter: RateLimiter, prefix: string): number {
  let n = 0;
  while (n < 100_000 && limiter.tryAcquire(`${prefix}${n}`).allowed) n++;
  return n;
}

describe('a decision whose reading is older than the state it loads', () => {
  it('a batch of the global cap taken just before a second boundary, the cap used just after', async () => {
    // Batches of 16 (250,000 per second, burst 512).
    const clock = new ManualClock(999);
    const limiter = new RateLimiter({
      limit: perSecond(1_000_000, { burst: 100_000 }), globalLimit: perSecond(250_000, { burst: 512 }), maxKeys: 4096, clock,
    });
    limiter.tryAcquire('w', 0); // the worker's key exists: its lookup reads no clock
    let before = 0;
    const worker = await parkedDecision(limiter, 'w', 999.999, 'allow', () => {
      clock.set(1000);
      before = fill(limiter, 'a'); // the cap's burst, at 1000 ms: its lastSec is now second 1
    });
    const after = fill(limiter, 'b');
    // Within 1 us the cap admits its burst of 512, and no more.
    expect({ before, worker, after, total: before + worker + after }).toMatchObject({ before: 512, total: 512 });
  });

  it.each(['allow', 'try'] as const)('a global cap filled by reservations to its horizon (%s)', async (mode) => {
    // 100,000 per second, burst 50,000: reservations may run it 2^30 ticks (10.7 s) ahead.
    const clock = new ManualClock(1000);
    const limiter = new RateLimiter({
      limit: perSecond(1_000_000, { burst: 100_000 }), globalLimit: perSecond(100_000, { burst: 50_000 }), maxKeys: 65_536, clock,
    });
    limiter.tryAcquire('w', 1);
    let reservations = 0;
    const worker = await parkedDecision(limiter, 'w', 1000, mode, () => {
      clock.set(1001); // 1 ms after the worker's reading, reservations queue on the cap as far as they may
      for (let c = 50_000; c >= 1;) {
        try {
          limiter.reserve(`r${reservations}`, { cost: c, maxWaitMs: Infinity });
          reservations++;
        } catch {
          c = Math.floor(c / 2);
        }
      }
      expect(limiter.tryAcquire('probe').allowed).toBe(false);
    });
    expect(reservations).toBeGreaterThan(20);
    // The cap is more than 10 s in debt: nothing passes at 1000 ms or 1001 ms.
    expect({ worker, after: fill(limiter, 'b') }).toEqual({ worker: 0, after: 0 });
  });

  it('a 64-bit GCRA limit decided again across a staleness-unit boundary', async () => {
    // 3,000 per second, burst 30: an interval of 333.33 us, a 64-bit state in ticks of 0.1 ps,
    // whose staleness unit is 4,096,000 ms. Two limits: the lock-free engine.
    const boundary = 3 * 4_096_000;
    const clock = new ManualClock(boundary - 1);
    const limiter = new RateLimiter({ limit: [perSecond(3_000, { burst: 30 }), perSecond(1_000_000, { burst: 100_000 })], maxKeys: 16, clock });
    clock.set(boundary - 0.002);
    let main = 0;
    for (let i = 0; i < 29; i++) if (limiter.allow('k')) main++;
    const worker = await parkedDecision(limiter, 'k', boundary - 0.001, 'try', () => {
      clock.set(boundary);
      if (limiter.allow('k')) main++; // the 30th, in the next unit: the worker's commit fails
    });
    let after = 0;
    for (let i = 0; i < 100; i++) if (limiter.allow('k')) after++;
    // 30 within 2 us, and no more.
    expect({ main, total: main + worker + after }).toEqual({ main: 30, total: 30 });
  });
});
