// What a decision reports when it had to decide again: after a lost compare-and-swap the lock-free
// engine re-checks the limit at the same reading and commits, but `remaining` and `resetAfterMs`
// still come from the first snapshot, from before the spend that beat it. And a sliding-log
// holder whose lock was taken over refuses from a mix of its old head and the new holder's
// entries, without noticing it lost the lock. Another thread is emulated by the decision's own
// clock, which spends at the reading the decision is stopped at.
import { describe, expect, it } from 'vitest';
import { ManualClock, perHour, RateLimiter, type RateLimiterOptions } from '../../src/index.js';

describe('a decision that lost a race', () => {
  it.each([
    ['fixed-window', { algorithm: 'fixed-window', limit: perHour(5) }],
    ['sliding-window', { algorithm: 'sliding-window', limit: perHour(5) }],
    ['two GCRA limits', { limit: [perHour(5), perHour(50)] }],
    ['GCRA and a global cap', { limit: perHour(5), globalLimit: perHour(50) }],
  ] as [string, Partial<RateLimiterOptions>][])('%s: reports remaining and reset after the spend it re-checked against', (_name, options) => {
    const clock = new ManualClock(1_000);
    const main = new RateLimiter({ maxKeys: 8, clock, ...options } as RateLimiterOptions);
    main.tryAcquire('k', 0);
    let calls = -1; // attach reads the clock once to check it: not a decision's reading
    // Another thread spends 3 between this decision's snapshot and its commit.
    const a = RateLimiter.attach(main.handle, { clock: { now: () => { if (++calls === 1) main.tryAcquire('k', 3); return clock.now(); } } });
    const d = a.tryAcquire('k', 1);
    expect(d.allowed).toBe(true);
    const after = main.tryAcquire('k', 0);
    expect(d.remaining).toBe(after.remaining);
    expect(d.resetAfterMs).toBe(after.resetAfterMs);
  });

  it('sliding log: a holder whose lock was taken over does not refuse from a torn view', () => {
    const clock = new ManualClock(1_000);
    const main = new RateLimiter({ maxKeys: 8, clock, algorithm: 'sliding-log', limit: perHour(5), claimTimeoutMs: 5 });
    main.tryAcquire('k', 0);
    let calls = -1; // attach reads the clock once to check it: not a decision's reading
    // Stopped holding k's lock, after its snapshot: main takes the lock over (after 5 ms) and spends 3.
    const a = RateLimiter.attach(main.handle, { clock: { now: () => { if (++calls === 1) main.tryAcquire('k', 3); return clock.now(); } } });
    const d = a.tryAcquire('k', 1);
    // 3 of 5 spent at a frozen instant: a request for 1 passes.
    expect(d).toMatchObject({ allowed: true });
  });
});
