// The lock-free engine takes back a key's committed spends when a later limit or the global cap
// refuses on its re-check. If the key's slot was reclaimed and reused in between (the reclaim read
// the key before the commit landed), the take-back lands on the slot's next incarnation and
// subtracts a spend that incarnation never held. Threads are emulated in one thread: each
// limiter's clock runs the other "threads" at a chosen reading, i.e. while that decision is
// stopped there.
import { describe, expect, it } from 'vitest';
import { ManualClock, RateLimiter, type Clock } from '../../src/index.js';

const HOUR = 3_600_000;

/** A clock that runs `hooks[n]` at its n-th reading, then reads `clock`. */
function hooked(clock: ManualClock, hooks: Record<number, () => void>): Clock {
  let calls = -1; // attach reads the clock once to check it: not a decision's reading
  return { now: () => { hooks[++calls]?.(); return clock.now(); } };
}

describe('undo after a lost race on the global cap, across a reclaim', () => {
  it('never subtracts from the next incarnation of the slot', () => {
    const clock = new ManualClock(1_000);
    const main = new RateLimiter({
      maxKeys: 16, clock, algorithm: 'fixed-window',
      limit: { permits: 5, periodMs: HOUR }, globalLimit: { permits: 6, periodMs: 60_000 },
    });
    const attach = (c?: Clock): RateLimiter => RateLimiter.attach(main.handle, c === undefined ? {} : { clock: c });
    main.tryAcquire('k', 0); // k's window is hour 0
    clock.set(HOUR + 1_000); // hour 1
    const other = attach();
    const reclaimer = attach();
    const reinserter = attach();
    let admitted = 0;
    // B spends k's window (moving it to hour 1), loses the cap's race to `other` and takes its
    // spend back: k is idle again, but its words changed under A's snapshot.
    const b = attach(hooked(clock, { 1: () => other.tryAcquire('other', 2) }));
    const a = attach(hooked(clock, {
      1: () => { expect(b.tryAcquire('k', 5).allowed).toBe(false); },
      // A lost its first compare-and-swap on k; before it retries, k is reclaimed (idle).
      2: () => { expect(reclaimer.sweep()).toBe(1); },
      // A's retried spend landed on the reclaimed slot; before its cap commit, k comes back in
      // the same slot and spends 4, filling the cap: A's cap re-check refuses and A takes back.
      3: () => { if (reinserter.tryAcquire('k', 4).allowed) admitted += 4; },
    }));
    expect(a.tryAcquire('k', 1).allowed).toBe(false);
    clock.advance(60_000); // the cap's next minute, k's same hour
    for (let i = 0; i < 5; i++) if (main.tryAcquire('k').allowed) admitted++;
    expect(admitted).toBe(5); // 5 per hour
  });
});
