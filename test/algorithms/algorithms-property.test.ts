import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ManualClock, RateLimiter } from '../../src/index.js';

/** Naive references: plain arrays and counters, one key, no shared memory. */
function slidingLogReference(permits: number, periodMs: number) {
  const log: number[] = [];
  return (nowMs: number, cost: number): boolean => {
    const active = log.filter((t) => nowMs - t < periodMs);
    if (active.length + cost > permits) return false;
    for (let i = 0; i < cost; i++) log.push(nowMs);
    return true;
  };
}

function fixedWindowReference(permits: number, periodMs: number) {
  let window = -1;
  let count = 0;
  return (nowMs: number, cost: number): boolean => {
    const w = Math.floor(nowMs / periodMs);
    if (w !== window) { window = w; count = 0; }
    if (count + cost > permits) return false;
    count += cost;
    return true;
  };
}

function slidingWindowReference(permits: number, periodMs: number) {
  let windowStart = 0;
  let current = 0;
  let previous = 0;
  return (nowMs: number, cost: number): boolean => {
    const start = nowMs - (nowMs % periodMs);
    if (start !== windowStart) {
      previous = start - windowStart === periodMs ? current : 0;
      current = 0;
      windowStart = start;
    }
    const estimate = previous * (1 - (nowMs - windowStart) / periodMs) + current;
    if (estimate + cost > permits) return false;
    current += cost;
    return true;
  };
}

const YEAR_MS = 365 * 86_400_000;
const ops = fc.array(fc.record({
  advanceMs: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 3_000 }), fc.integer({ min: 0, max: 10 ** 7 }), fc.integer({ min: 0, max: 10 * YEAR_MS })),
  cost: fc.integer({ min: 0, max: 4 }),
  sweep: fc.boolean(),
}), { minLength: 1, maxLength: 80 });
/** Where the clock starts: 0, anywhere up to 2^40 ms, past 2038 (2^31 s), and near 2^53 ms. */
const start = fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 2 ** 40 }), fc.constant(Date.UTC(2040, 0, 1)), fc.constant(2 ** 53 - 2 ** 45));
/** Periods from 1 ms to 100 years. */
const period = fc.oneof(fc.integer({ min: 1, max: 5_000 }), fc.integer({ min: 1, max: 100 * YEAR_MS }));

describe('window and log algorithms against naive references (fast-check)', () => {
  it.each([
    ['sliding-log', slidingLogReference],
    ['fixed-window', fixedWindowReference],
    ['sliding-window', slidingWindowReference],
  ] as const)('%s: the same admissions for any sequence of requests, idle times (to years), clock readings (to 2^53 ms) and sweeps', (algorithm, reference) => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 12 }), period, start, ops, (permits, periodMs, startMs, steps) => {
        const clock = new ManualClock(startMs);
        const limiter = new RateLimiter({ limit: { permits, periodMs }, algorithm, maxKeys: 4, clock });
        const model = reference(permits, periodMs);
        let now = startMs;
        for (const { advanceMs, cost, sweep } of steps) {
          now += advanceMs;
          clock.set(now);
          if (sweep) limiter.sweep();
          const d = limiter.tryAcquire('k', cost);
          expect(d.allowed).toBe(cost > permits ? false : model(now, cost));
          if (!d.allowed && cost > permits) expect(d.retryAfterMs).toBe(Infinity);
        }
      }),
      { numRuns: 300 },
    );
  });

  it('fixed-window with up to millions of permits (one int32 word while it tells windows apart, else 64 bits): the same admissions', async () => {
    const { fixedWindowAlgorithm } = await import('../../src/algorithms/fixed-window.js');
    const { FixedWindow32 } = await import('../../src/algorithms/fixed-window-32.js');
    const widths = new Set<string>();
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 4_000_000 }), period, start, ops, (permits, periodMs, startMs, steps) => {
        widths.add(fixedWindowAlgorithm({ permits, periodMs }, 'limit') instanceof FixedWindow32 ? '32' : '64');
        const clock = new ManualClock(startMs);
        const limiter = new RateLimiter({ limit: { permits, periodMs }, algorithm: 'fixed-window', maxKeys: 4, clock });
        const model = fixedWindowReference(permits, periodMs);
        let now = startMs;
        for (const { advanceMs, cost, sweep } of steps) {
          now += advanceMs;
          clock.set(now);
          if (sweep) limiter.sweep();
          // Costs near the limit too: a quarter, a half, all of it.
          const c = [0, 1, Math.ceil(permits / 4), Math.ceil(permits / 2), permits][cost] as number;
          expect(limiter.tryAcquire('k', c).allowed).toBe(model(now, c));
        }
      }),
      { numRuns: 300 },
    );
    expect([...widths].sort()).toEqual(['32', '64']); // both widths were exercised
  });

  it('sliding-log: retryAfterMs is exact (refused 1 ms before, allowed at it)', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 8 }), fc.integer({ min: 10, max: 5_000 }), fc.array(fc.integer({ min: 0, max: 2_000 }), { maxLength: 30 }), fc.integer({ min: 1, max: 8 }), (permits, periodMs, gaps, cost) => {
        fc.pre(cost <= permits);
        const clock = new ManualClock();
        const limiter = new RateLimiter({ limit: { permits, periodMs }, algorithm: 'sliding-log', maxKeys: 4, clock });
        for (const gap of gaps) {
          clock.advance(gap);
          limiter.allow('k');
        }
        const d = limiter.tryAcquire('k', cost);
        if (d.allowed) return;
        const at = clock.now();
        const other = RateLimiter.attach(limiter.handle);
        clock.set(at + d.retryAfterMs - 1);
        expect(other.tryAcquire('k', 0).remaining).toBeLessThan(cost);
        clock.set(at + d.retryAfterMs);
        expect(other.tryAcquire('k', cost).allowed).toBe(true);
      }),
      { numRuns: 300 },
    );
  });
});
