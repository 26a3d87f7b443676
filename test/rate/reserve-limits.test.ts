// Reservations over several GCRA limits and a global cap (the lock-free engine): each limit counts
// the request in its own slot, the request acts when the last of them allows, and a cancelled
// reservation gives back what is still ahead of now on every limit.
import { describe, expect, it } from 'vitest';
import { reserveFromWorkers } from '../helpers/reserve-race.js';
import { ManualClock, perMinute, perSecond, RateLimiter, RateLimitTimeoutError } from '../../src/index.js';

const settle = () => new Promise((r) => setTimeout(r, 5));

describe('reserve() with several limits', () => {
  it('waits for the tightest limit at each step, in arrival order', () => {
    const clock = new ManualClock();
    // 2 per second (interval 500 ms, burst 2) and 5 per minute (interval 12 s, burst 5). The 64-bit
    // states (maxBlockMs) hold a place 24 s ahead on both limits.
    const limiter = new RateLimiter({ limit: [perSecond(2), perMinute(5)], maxKeys: 4, clock, maxBlockMs: 86_400_000 });
    const delays = Array.from({ length: 7 }, () => limiter.reserve('k').delayMs);
    // per second: 0, 0, 500, 1000, 1500; per minute: 0 x5, then 12 s, 24 s.
    expect(delays).toEqual([0, 0, 500, 1000, 1500, 12_000, 24_000]);
    expect(limiter.width).toBe(null);
  });

  it('every limit counts a reservation where it acts: a place further ahead than a limit holds is refused', () => {
    // Counted by the per-second limit at 12 s, the sixth place is past what its 32-bit state
    // holds (2^30 ticks of 10 ns): refused, nothing counted (found: each limit counted a
    // reservation at its own wait, and a request could then act beside one another limit held
    // back: reserve-cap-act.test.ts).
    const clock = new ManualClock();
    const limiter = new RateLimiter({ limit: [perSecond(2), perMinute(5)], maxKeys: 4, clock });
    expect(Array.from({ length: 5 }, () => limiter.reserve('k').delayMs)).toEqual([0, 0, 500, 1000, 1500]);
    expect(() => limiter.reserve('k')).toThrow(/further ahead than its limits can hold/);
    clock.advance(4_000);
    expect(limiter.reserve('k').delayMs).toBe(8_000); // 12 s from the start: now within reach
  });

  it('counts nothing when the wait is over maxWaitMs or a cost over a burst', () => {
    const clock = new ManualClock();
    const limiter = new RateLimiter({ limit: [perSecond(2), perMinute(5)], maxKeys: 4, clock });
    limiter.reserve('k', { cost: 2 });
    expect(() => limiter.reserve('k', { cost: 1, maxWaitMs: 499 })).toThrow(RateLimitTimeoutError);
    try {
      limiter.reserve('k', { cost: 1, maxWaitMs: 499 });
    } catch (e) {
      expect(e).toMatchObject({ name: 'RateLimitTimeoutError', retryAfterMs: 500, key: 'k' });
    }
    expect(() => limiter.reserve('k', { cost: 3 })).toThrow(/can never pass/);
    expect(limiter.reserve('k', { cost: 1, maxWaitMs: 500 }).delayMs).toBe(500); // nothing was counted before
  });

  it('cancel() gives back, on every limit, the part of its slots still ahead', () => {
    const clock = new ManualClock();
    const limiter = new RateLimiter({ limit: [perSecond(2), perMinute(5)], maxKeys: 4, clock, maxBlockMs: 86_400_000 });
    limiter.reserve('k', { cost: 2 });
    const third = limiter.reserve('k');
    const fourth = limiter.reserve('k');
    expect([third.delayMs, fourth.delayMs]).toEqual([500, 1000]);
    expect(fourth.cancel()).toBe(true);
    expect(fourth.cancel()).toBe(false);
    // As if the fourth never came: the next acts in its place, the per-minute slot is back too.
    expect(limiter.reserve('k').delayMs).toBe(1000);
    expect(limiter.reserve('k').delayMs).toBe(1500);
    expect(limiter.reserve('k').delayMs).toBe(12_000); // 5 per minute: the cancelled one was not counted
    clock.advance(500);
    expect(third.cancel()).toBe(false); // its time has come
  });

  it('cancel() gives nothing back to a limit that counted a later request after it', () => {
    // A later reservation stays pinned to its act time, so the place could only go to a new
    // request acting beside it (found: 10 acted in 400 ms at one per 100 ms; cancel-stacked.test.ts);
    // and on a limit that did not set its wait, it was counted where it acts, past the TAT
    // (reserve-cap-act.test.ts). So once any request was counted after it on a limit, a cancel
    // gives that limit nothing: here both.
    const clock = new ManualClock();
    const limiter = new RateLimiter({ limit: [perSecond(2, { burst: 1 }), perMinute(5)], maxKeys: 4, clock, maxBlockMs: 86_400_000 });
    expect(limiter.allow('k')).toBe(true);
    const second = limiter.reserve('k');
    const third = limiter.reserve('k');
    expect([second.delayMs, third.delayMs]).toEqual([500, 1000]);
    expect(second.cancel()).toBe(false);
    expect(limiter.reserve('k').delayMs).toBe(1500);
    expect(limiter.reserve('k').delayMs).toBe(2000);
    expect(limiter.reserve('k').delayMs).toBe(12_000); // 5 per minute: the second still counts
    expect(third.cancel()).toBe(false);
  });
});

describe('reserve() with a global cap', () => {
  it('keys share the cap: the cap orders them, each key its own limit', () => {
    const clock = new ManualClock();
    const limiter = new RateLimiter({ limit: perSecond(10), globalLimit: perSecond(2), maxKeys: 8, clock });
    const delays = ['a', 'b', 'c', 'a', 'd'].map((k) => limiter.reserve(k).delayMs);
    expect(delays).toEqual([0, 0, 500, 1000, 1500]);
    const r = limiter.reserve('e');
    expect(r.delayMs).toBe(2000);
    expect(r.cancel()).toBe(true);
    expect(limiter.reserve('f').delayMs).toBe(2000);
  });
});

describe('acquire() with several limits and a cap', () => {
  it('serves waiters in arrival order, each at its reserved time', async () => {
    const clock = new ManualClock();
    const limiter = new RateLimiter({ limit: [perSecond(2), perMinute(100)], globalLimit: perSecond(50), maxKeys: 4, clock });
    await limiter.acquire('k', { cost: 2 });
    const order: number[] = [];
    const waits = [1, 2, 3].map((n) => limiter.acquire('k').then(() => order.push(n)));
    await settle();
    expect(order).toEqual([]);
    clock.advance(500);
    await settle();
    expect(order).toEqual([1]);
    clock.advance(1000);
    await Promise.all(waits);
    expect(order).toEqual([1, 2, 3]);
  });

  it('gives back its reservation when aborted', async () => {
    const clock = new ManualClock();
    const limiter = new RateLimiter({ limit: [perSecond(2), perMinute(100)], maxKeys: 4, clock });
    limiter.allow('k', 2);
    const controller = new AbortController();
    const waiting = limiter.acquire('k', { signal: controller.signal });
    await settle();
    controller.abort(new Error('gone'));
    await expect(waiting).rejects.toThrow('gone');
    expect(limiter.reserve('k').delayMs).toBe(500);
  });
});

describe('reserve() from racing workers', () => {
  it('4 workers reserving one key on two limits get every place exactly once', async () => {
    // Rounds on fresh limiters until the workers were seen racing (forced if a busy machine ran
    // them one after the other); every round is checked.
    const make = () => new RateLimiter({ limit: [perSecond(100), perMinute(6_000)], globalLimit: perSecond(1_000), maxKeys: 4, clock: new ManualClock() });
    // Burst 100 at once, then one every 10 ms up to the 1 s horizon: 100 + 100 places, each once.
    const expected = [...Array.from({ length: 100 }, () => 0), ...Array.from({ length: 100 }, (_, i) => (i + 1) * 10)];
    await reserveFromWorkers(make, 200, 1_000, (delays) => expect(delays).toEqual(expected));
  });
});
