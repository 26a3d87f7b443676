// A key whose window state was moved to the next window by a reservation, which was then
// cancelled, must not be reclaimed by sweep() while the clock is still in the earlier window:
// that state is not a fresh key's (it closed the clock's window, or dropped the previous window's
// count that the estimate still needs), and a fresh key would admit the window again.
import { describe, expect, it } from 'vitest';
import { ManualClock, perSecond, RateLimiter } from '../../src/index.js';

describe('sweep() after a cancelled reservation for the next window', () => {
  it.each([
    ['fixed window (int32 state)', { limit: perSecond(3), algorithm: 'fixed-window' as const }, 1500],
    ['fixed window (64-bit state)', { limit: { permits: 3, periodMs: 10_000_000 }, algorithm: 'fixed-window' as const }, 15_000_000],
  ])('%s: the window admits its permits once, not twice', (_, options, start) => {
    const clock = new ManualClock(start);
    const limiter = new RateLimiter({ ...options, maxKeys: 4, clock });
    expect([1, 2, 3, 4].map(() => limiter.allow('k'))).toEqual([true, true, true, false]);
    const r = limiter.reserve('k'); // the window is full: counted in the next one
    expect(r.delayMs).toBeGreaterThan(0);
    expect(r.cancel()).toBe(true);
    limiter.sweep();
    expect(limiter.allow('k')).toBe(false); // a reclaimed key would admit 3 more
  });

  it('sliding window: the previous window still weighs on the estimate', () => {
    const clock = new ManualClock(900);
    const limiter = new RateLimiter({ limit: perSecond(3), algorithm: 'sliding-window', maxKeys: 4, clock });
    expect([1, 2, 3].map(() => limiter.allow('k'))).toEqual([true, true, true]);
    clock.set(1500); // window 0's 3 weigh 1.5: one more fits now
    const r = limiter.reserve('k', { cost: 3 }); // waits for window 2; window 1 never held a count
    expect(r.delayMs).toBe(500);
    expect(r.cancel()).toBe(true);
    limiter.sweep();
    // At most one more (1.5 + 1 <= 3). A reclaimed key would admit 3 (six within
    // 600 ms: twice permits in one period, which the sliding window promises never to reach).
    expect([1, 2, 3].filter(() => limiter.allow('k')).length).toBeLessThanOrEqual(1);
  });
});
