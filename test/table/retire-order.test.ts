// A reclaim of a lock-free multi-word key reads its clock, then the key's lastSec. A decision at
// a later second that raises lastSec in between (and then takes its spend back, so it never
// settles against the reclaim) makes lastSec read as 2^32 - 1 s old: "stale", so every limit
// counts as idle and a key still holding an admission is reclaimed, its spend forgotten.
// Threads are emulated in one thread: the reclaimer's clock runs the other decision right after
// its reading, i.e. while the reclaim is stopped there.
import { describe, expect, it } from 'vitest';
import { ManualClock, RateLimiter, type AlgorithmName, type Clock } from '../../src/index.js';

const HOUR = 3_600_000;

describe('reclaim of a lock-free multi-word key', () => {
  it.each(['fixed-window', 'sliding-window'] as AlgorithmName[])('%s: a lastSec raised after the reclaim read its clock does not make the key stale', (algorithm) => {
    const clock = new ManualClock(10_000);
    const main = new RateLimiter({
      maxKeys: 16, clock, algorithm, limit: { permits: 2, periodMs: HOUR }, globalLimit: { permits: 2, periodMs: 60_000 },
    });
    let admitted = 0;
    if (main.tryAcquire('k').allowed) admitted++; // 1 of 2 this hour
    const other = RateLimiter.attach(main.handle);
    let xCalls = -1; // attach reads the clock once to check it: not a decision's reading
    // X decides on k at second 11: it raises k's lastSec, commits k, loses the cap's race to
    // `other`, takes k's spend back and is refused by the cap.
    const x = RateLimiter.attach(main.handle, { clock: { now: () => { if (++xCalls === 1) other.tryAcquire('other'); return clock.now(); } } });
    let armed = true;
    let attaching = true; // attach reads the clock once to check it: not sweep's reading
    const reclaimer: Clock = {
      now: () => {
        const t = clock.now(); // second 10
        if (attaching) {
          attaching = false;
          return t;
        }
        if (armed) {
          armed = false;
          clock.advance(1_000);
          expect(x.tryAcquire('k').allowed).toBe(false);
        }
        return t;
      },
    };
    RateLimiter.attach(main.handle, { clock: reclaimer }).sweep();
    clock.advance(120_000); // the cap's window moved on; k's hour did not
    for (let i = 0; i < 5; i++) if (main.tryAcquire('k').allowed) admitted++;
    expect(admitted).toBe(2); // 2 per hour
  });
});
