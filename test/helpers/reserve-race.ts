// Four workers reserving one key at once (test/fixtures/worker.mjs, mode 'reserve-many'), all
// released by one gate: every delay they got, sorted, and the compare-and-swap races they lost.
import { Worker } from 'node:worker_threads';
import type { RateLimiter } from '../../src/index.js';

const settle = () => new Promise((r) => setTimeout(r, 5));

export async function reserveFromWorkers(limiter: RateLimiter, attempts: number, maxWaitMs: number): Promise<{ delays: number[]; casRetries: number }> {
  const gate = new SharedArrayBuffer(8);
  const workers = Array.from({ length: 4 }, (_, id) => new Worker(new URL('../fixtures/worker.mjs', import.meta.url), {
    workerData: { mode: 'reserve-many', handle: limiter.handle, id, key: 'k', attempts, maxWaitMs, gate },
  }));
  const replies = workers.map((w) => new Promise<{ delays: number[]; casRetries: number }>((resolve, reject) => { w.once('message', resolve); w.once('error', reject); }));
  const g = new Int32Array(gate);
  while (Atomics.load(g, 0) < 4) await settle();
  Atomics.store(g, 1, 1);
  Atomics.notify(g, 1);
  const results = await Promise.all(replies);
  await Promise.all(workers.map((w) => w.terminate()));
  return {
    delays: results.flatMap((r) => r.delays).sort((a, b) => a - b),
    casRetries: results.reduce((a, r) => a + r.casRetries, 0),
  };
}
