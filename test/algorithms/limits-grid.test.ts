import { describe, expect, it } from 'vitest';
import { gcraParams } from '../../src/math/gcra.js';
import { ManualClock, RateLimiter, type Limit } from '../../src/index.js';

// Every round limit people write is accepted and enforced: 1, 2, 3, 5 and 7 times 10^0..10^9 per
// second, minute, hour and day (200 limits), with the default burst (= permits).

const PERIODS: [string, number][] = [['second', 1_000], ['minute', 60_000], ['hour', 3_600_000], ['day', 86_400_000]];
const GRID: [string, Limit][] = [];
for (const [unit, periodMs] of PERIODS) {
  for (let e = 0; e <= 9; e++) for (const m of [1, 2, 3, 5, 7]) GRID.push([`${m}e${e} per ${unit}`, { permits: m * 10 ** e, periodMs }]);
}

describe('the grid of 200 round limits', () => {
  it('has 200 limits', () => expect(GRID).toHaveLength(200));

  it.each(GRID)('%s: a burst at once, a refusal with the right retryAfterMs, an admission exactly then', (_, limit) => {
    const burst = limit.permits;
    const p = gcraParams(limit);
    const intervalMs = (limit.periodMs / limit.permits);
    const roundedMs = (p.intervalTicks * p.tickPs) / 1e9;
    // The interval is rounded up only, by at most 1 ppm (0.1% under 1 us).
    expect(roundedMs).toBeGreaterThanOrEqual(intervalMs * (1 - 1e-12));
    expect(roundedMs / intervalMs - 1).toBeLessThanOrEqual(intervalMs >= 1e-3 ? 1e-6 : 1e-3);

    const clock = new ManualClock(1_000);
    const limiter = new RateLimiter({ limit, maxKeys: 4, clock });
    expect(limiter.stats().width).toBe(p.width);
    expect(limiter.tryAcquire('k', burst)).toMatchObject({ allowed: true, remaining: 0 });
    const refused = limiter.tryAcquire('k');
    expect(refused.allowed).toBe(false);
    expect(refused.reason).toBe('limited');
    // retryAfterMs is the rounded interval, rounded up to whole nanoseconds.
    expect(refused.retryAfterMs).toBeGreaterThanOrEqual(roundedMs - 1e-12);
    expect(refused.retryAfterMs).toBeLessThanOrEqual(roundedMs + 1e-9);
    expect(Number.isNaN(refused.remaining) || Number.isNaN(refused.resetAfterMs)).toBe(false);
    if (refused.retryAfterMs >= 1e-6) {
      // A tick before it: still refused (when the clock at 1 s can hold a reading that close).
      clock.set(1_000 + refused.retryAfterMs - Math.max(p.tickPs / 1e9, 1e-9));
      expect(limiter.allow('k')).toBe(false);
    }
    clock.set(1_000 + refused.retryAfterMs);
    expect(limiter.tryAcquire('k')).toMatchObject({ allowed: true });
  });

  it.each(GRID)('%s: over a long horizon, admitted never above the exact limit and at most one below (plus rounding)', (_, limit) => {
    const burst = limit.permits;
    const p = gcraParams(limit);
    const start = 5_000;
    const clock = new ManualClock(start);
    const limiter = new RateLimiter({ limit, maxKeys: 4, clock });
    // Exact references for a greedy client: GCRA with the exact interval (time in units of
    // 1/permits ms, so the interval is periodMs units) and with the rounded one (time in fs).
    const exact = greedyGcra(BigInt(limit.periodMs), BigInt(burst), BigInt(limit.permits));
    const rounded = greedyGcra(BigInt(p.intervalTicks) * BigInt(Math.round(p.tickPs * 1000)), BigInt(burst), 1_000_000_000_000n);
    const intervalMs = limit.periodMs / limit.permits;
    const steps = [1, 3, 7, Math.ceil(intervalMs / 3), Math.ceil(intervalMs), Math.ceil(2.5 * intervalMs), 86_400_000];
    const roundedMs = (p.intervalTicks * p.tickPs) / 1e9;
    let admitted = 0;
    let elapsed = 0;
    let idles = 0;
    for (let i = 0; i < 40 && elapsed <= 40 * 86_400_000; i++) {
      const remaining = limiter.tryAcquire('k', 0).remaining;
      if (remaining > 0) {
        expect(limiter.tryAcquire('k', remaining).allowed).toBe(true);
        admitted += remaining;
      }
      expect(limiter.allow('k')).toBe(false); // the greedy client took everything there was
      const ceiling = exact(elapsed);
      const same = rounded(elapsed);
      expect(BigInt(admitted)).toBe(same); // exactly GCRA with the rounded interval
      expect(BigInt(admitted) <= ceiling).toBe(true); // never above the exact limit
      // At most one below it per busy period, plus what the rounding of the interval (at most
      // 1 ppm) costs over the intervals that passed (a burst B refills B ppm of an interval late).
      const drift = BigInt(Math.ceil((burst * (idles + 1) + elapsed / intervalMs) * (roundedMs / intervalMs - 1)));
      expect(ceiling - BigInt(admitted) <= 1n + BigInt(idles) + drift).toBe(true);
      const step = steps[(i * 5 + 3) % steps.length] as number;
      if (step === 86_400_000) idles++;
      elapsed += step;
      clock.advance(step);
    }
  });
});

/**
 * A greedy client against exact GCRA: interval `t` and burst `b` in a time unit of 1/`perMs` ms.
 * Returns a function of elapsed whole ms giving the total admitted so far, taking all it can.
 */
function greedyGcra(t: bigint, b: bigint, perMs: bigint): (elapsedMs: number) => bigint {
  let tat = 0n;
  let total = 0n;
  return (elapsedMs) => {
    const now = BigInt(elapsedMs) * perMs;
    const debt = tat > now ? tat - now : 0n;
    const room = (b * t - debt) / t;
    if (room > 0n) {
      tat = (tat > now ? tat : now) + room * t;
      total += room;
    }
    return total;
  };
}

describe('limits that used to be refused or unlimited', () => {
  it.each([
    ['1,000,000 per day', { permits: 1e6, periodMs: 86_400_000 }],
    ['10,000,000 per day', { permits: 1e7, periodMs: 86_400_000 }],
    ['1,000,000 per 30 days', { permits: 1e6, periodMs: 30 * 86_400_000 }],
    ['300,000 per second', { permits: 300_000, periodMs: 1_000 }],
    ['300,000 per second, burst 1', { permits: 300_000, periodMs: 1_000, burst: 1 }],
    ['300,000 per second, burst 2^40', { permits: 300_000, periodMs: 1_000, burst: 2 ** 40 }],
    ['700,000 per minute', { permits: 700_000, periodMs: 60_000 }],
    ['a daily budget of 1e9 tokens', { permits: 1e9, periodMs: 86_400_000 }],
    ['1 GB/s in bytes', { permits: 1e9, periodMs: 1_000 }],
    ['2 GB/s in bytes', { permits: 2e9, periodMs: 1_000 }],
    ['2^31 per second', { permits: 2 ** 31, periodMs: 1_000 }],
    ['7 per 100 years, burst 2^40', { permits: 7, periodMs: 100 * 365 * 86_400_000, burst: 2 ** 40 }],
  ] as [string, Limit][])('%s: accepted, the burst passes, the next request waits one interval', (_, limit) => {
    const clock = new ManualClock(10_000);
    const limiter = new RateLimiter({ limit, maxKeys: 4, clock });
    const burst = limit.burst ?? Math.floor(limit.permits);
    const first = limiter.tryAcquire('k', burst);
    expect(first).toMatchObject({ allowed: true, remaining: 0 });
    const next = limiter.tryAcquire('k');
    expect(next.allowed).toBe(false);
    expect(next.remaining).toBe(0);
    const intervalMs = limit.periodMs / limit.permits;
    expect(next.retryAfterMs / intervalMs).toBeGreaterThanOrEqual(1 - 1e-12);
    expect(next.retryAfterMs / intervalMs).toBeLessThanOrEqual(1.001);
    expect(next.resetAfterMs).toBeGreaterThan(0);
  });

  it('refuses a limit outside the range with a message that says what works', () => {
    expect(() => new RateLimiter({ limit: { permits: 1e13, periodMs: 1_000 }, maxKeys: 1 })).toThrow(/options\.limit\.permits must be at most 1099511627776 \(2\^40\) when burst is not given/);
    expect(() => new RateLimiter({ limit: { permits: 1e14, periodMs: 1_000, burst: 1 }, maxKeys: 1 })).toThrow(/the finest interval is 0\.1 ps/);
    expect(() => new RateLimiter({ limit: { permits: 1, periodMs: 1e25 }, maxKeys: 1 })).toThrow(/the longest interval is/);
  });

  it('reports which width each limit runs at', () => {
    expect(new RateLimiter({ limit: { permits: 10, periodMs: 1_000 }, maxKeys: 1 }).width).toBe(32);
    expect(new RateLimiter({ limit: { permits: 1e6, periodMs: 86_400_000 }, maxKeys: 1 }).width).toBe(64);
    expect(new RateLimiter({ limit: [{ permits: 1e6, periodMs: 86_400_000 }, { permits: 1, periodMs: 1 }], maxKeys: 1 }).width).toBe(null);
  });
});
