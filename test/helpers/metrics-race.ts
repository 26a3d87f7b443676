// 4 workers deciding on the same keys at once, each counting through its own attached metrics
// (test/fixtures/metrics-worker.mjs), in rounds until they are seen to race (a lost
// compare-and-swap), within a bound: what they admitted and refused, and their lost races.
import { Worker } from 'node:worker_threads';
import type { RateLimiter } from '../../src/index.js';
import { openGate, result } from './workers.js';

export async function raceCountedDecisions(
  limiter: RateLimiter, metrics: unknown, adapter: 'prometheus' | 'opentelemetry', keys: string[],
): Promise<{ allowed: number; refused: number; casRetries: number }> {
  let allowed = 0;
  let refused = 0;
  let casRetries = 0;
  for (let round = 0; round < 20 && casRetries === 0; round++) {
    const gate = new SharedArrayBuffer(8);
    const workers = Array.from({ length: 4 }, (_, id) => new Worker(new URL('../fixtures/metrics-worker.mjs', import.meta.url), {
      workerData: { handle: limiter.handle, metrics, keys, attempts: 20_000, gate, id, adapter },
    }));
    try {
      const replies = workers.map((w) => result<{ allowed: number; refused: number; casRetries: number }>(w));
      await openGate(gate, 4);
      for (const r of await Promise.all(replies)) {
        allowed += r.allowed;
        refused += r.refused;
        casRetries += r.casRetries;
      }
    } finally {
      await Promise.all(workers.map((w) => w.terminate()));
    }
  }
  return { allowed, refused, casRetries };
}
