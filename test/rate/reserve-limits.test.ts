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
    // 2 per second (interval 500 ms, burst 2) and 5 per minute (interval 12 s, burst 5).
    const limiter = new RateLimiter({ limit: [perSecond(2), perMinute(5)], maxKeys: 4, clock });
    const delays = Array.from({ length: 7 }, () => limiter.reserve('k').delayMs);
    // per second: 0, 0, 500, 1000, 1500, then 2000, 2500; per minute: 0 x5, then 12 s, 24 s.
    expect(delays).toEqual([0, 0, 500, 1000, 1500, 12_000, 24_000]);
    expect(limiter.width).toBe(null);
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
    const limiter = new RateLimiter({ limit: [perSecond(2), perMinute(5)], maxKeys: 4, clock });
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

  it('cancel() gives nothing back to a limit on which a later reservation stacked on it still waits to act', () => {
    // Its place would go to a new request, which would act beside the later one, pinned to its
    // own time (found: 10 acted in 400 ms at one per 100 ms; cancel-stacked.test.ts). Each limit
    // judges for itself: on the per-minute limit, whose burst still holds every spend, nothing
    // waits for it, and its part comes back.
    const clock = new ManualClock();
    const limiter = new RateLimiter({ limit: [perSecond(2, { burst: 1 }), perMinute(5)], maxKeys: 4, clock });
    expect(limiter.allow('k')).toBe(true);
    const second = limiter.reserve('k');
    const third = limiter.reserve('k');
    expect([second.delayMs, third.delayMs]).toEqual([500, 1000]);
    expect(second.cancel()).toBe(true); // the per-minute part
    expect(limiter.reserve('k').delayMs).toBe(1500); // not the per-second place: the third waits behind it
    expect(limiter.reserve('k').delayMs).toBe(2000);
    expect(limiter.reserve('k').delayMs).toBe(2500); // 5 per minute: the cancelled one was not counted there
    expect(limiter.reserve('k').delayMs).toBe(12_000);
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
