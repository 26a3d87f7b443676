// Four workers reserving one key at once (test/fixtures/worker.mjs, mode 'reserve-many'), in
// rounds until they raced (raceUntilLost): every delay each round's workers got, sorted.
import type { RateLimiter } from '../../src/index.js';
import { raceUntilLost } from './workers.js';

/**
 * Rounds of 4 workers reserving one key of a new limiter from `make` `attempts` times each (wait
 * bound `maxWaitMs`), until they lost a compare-and-swap race (forced if a busy machine ran them
 * one after another); `check` gets each round's delays, sorted.
 */
export async function reserveFromWorkers(make: () => RateLimiter, attempts: number, maxWaitMs: number, check: (delays: number[]) => void): Promise<void> {
  await raceUntilLost<{ delays: number[]; casRetries: number }>(() => {
    const limiter = make();
    return {
      workers: Array.from({ length: 4 }, (_, id) => ({ mode: 'reserve-many', handle: limiter.handle, id, key: 'k', attempts, maxWaitMs, parkAfter: 'reserve' })),
      check: (results) => check(results.flatMap((r) => r.delays).sort((a, b) => a - b)),
    };
  });
}
