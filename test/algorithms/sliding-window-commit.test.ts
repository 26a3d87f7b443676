// The sliding window commits its low half (current count and the previous count's low 10 bits)
// with an int32 compareExchange while the stored window is the one decided in. A decision
// parked between its snapshot and that commit can land after the window moved on, on a low
// half that reads the same although the previous count (high bits in the other half) differs.
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { ManualClock, RateLimiter } from '../../src/index.js';
import { busiestSpan, type Admission } from '../helpers/model.js';

const parkWorker = new URL('../fixtures/park-frozen.mjs', import.meta.url);

describe('sliding window: a commit from a snapshot of an earlier window', () => {
  it('never admits twice permits within one period', async () => {
    const P = 2048;
    const clock = new ManualClock(0);
    const limiter = new RateLimiter({ algorithm: 'sliding-window', limit: { permits: P, periodMs: 1000 }, maxKeys: 16, clock });
    const admissions: Admission[] = [];
    const spend = (ms: number, cost: number): void => {
      clock.set(ms);
      if (limiter.allow('k', cost)) admissions.push({ t: ms, first: ms, cost, key: 0 });
    };
    spend(1, 1); // window 0: count 1
    const flags = new Int32Array(new SharedArrayBuffer(8));
    // The worker snapshots window 0 (count 1, previous 0) and parks at its reading, 500 ms.
    const worker = new Worker(parkWorker, { workerData: { handle: limiter.handle, key: 'k', cost: P - 1, flags: flags.buffer, frozenMs: 500, mode: 'allow', repeat: 1 } });
    try {
      const reply = new Promise<{ admitted: number }>((resolve, reject) => {
        worker.once('message', resolve);
        worker.once('error', reject);
      });
      while (Atomics.load(flags, 0) === 0) await new Promise((r) => setTimeout(r, 1));
      spend(600, P - 1); // window 0 full: 2048
      spend(1000.5, 1); // window 1: count 1, previous 2048 (low 10 bits 0: the low half reads as before)
      Atomics.store(flags, 1, 1);
      Atomics.notify(flags, 1);
      if ((await reply).admitted === 1) admissions.push({ t: 500, first: 500, cost: P - 1, key: 0 });
    } finally {
      await worker.terminate();
    }
    // The documented promise: fewer than twice permits in any period.
    const { most, from } = busiestSpan(admissions, 1000);
    expect({ most, from }.most, `from ${from} ms`).toBeLessThan(2 * P);
  });
});
