import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ManualClock, RateLimiter } from '../../src/index.js';

/**
 * The sequential reference model: GCRA on exact integers of microseconds, one key at a time,
 * no table, no wrap-around, no cache. sluice must give the same answers.
 */
class ReferenceGcra {
  readonly #tat = new Map<string, number>();
  constructor(readonly intervalUs: number, readonly burst: number) {}

  decide(key: string, nowUs: number, cost: number) {
    const t = this.intervalUs;
    const tau = this.burst * t;
    const debt = Math.max(0, (this.#tat.get(key) ?? 0) - nowUs);
    const toMs = (us: number) => us / 1000;
    if (cost > this.burst) {
      return { allowed: false, remaining: Math.floor((tau - debt) / t), retryAfterMs: Infinity, resetAfterMs: toMs(debt) };
    }
    const next = debt + cost * t;
    if (next > tau) {
      return { allowed: false, remaining: Math.floor((tau - debt) / t), retryAfterMs: toMs(next - tau), resetAfterMs: toMs(debt) };
    }
    if (cost > 0) this.#tat.set(key, nowUs + next);
    return { allowed: true, remaining: Math.floor((tau - next) / t), retryAfterMs: 0, resetAfterMs: toMs(next) };
  }
}

const op = fc.record({
  advanceUs: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 3_000_000 }), fc.integer({ min: 0, max: 10 ** 10 })),
  key: fc.constantFrom('a', 'b', 'c', 'a-much-longer-key:42'),
  cost: fc.oneof(fc.constant(1), fc.constant(0), fc.integer({ min: 0, max: 25 })),
  sweep: fc.boolean(),
});

describe('against a sequential reference model (fast-check)', () => {
  it('gives the same decision as the reference for any sequence of requests, idle times and sweeps', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 20 }), // permits per period
        fc.integer({ min: 1, max: 2_000 }), // emission interval in ms
        fc.integer({ min: 1, max: 20 }), // burst
        fc.oneof(fc.integer({ min: 0, max: 10 ** 12 }), fc.constant(Date.UTC(2040, 0, 1) * 1000), fc.integer({ min: 0, max: 2 ** 40 }).map((ms) => ms * 1000)), // start time in us, past 2038 too
        fc.boolean(), // force every key into one collision chain
        fc.array(op, { minLength: 1, maxLength: 60 }),
        (permits, intervalMs, burst, startUs, collide, ops) => {
          const clock = new ManualClock(startUs / 1000);
          const limiter = new RateLimiter({
            limit: { permits, periodMs: permits * intervalMs, burst },
            maxKeys: 8,
            clock,
            ...(collide ? { forceHash: 99 } : {}),
          });
          const model = new ReferenceGcra(intervalMs * 1000, burst);
          let nowUs = startUs;
          for (const { advanceUs, key, cost, sweep } of ops) {
            // Past 10^12 us a double holds a ms reading only to a fraction of a us: whole ms there.
            nowUs += startUs > 10 ** 12 ? Math.round(advanceUs / 1000) * 1000 : advanceUs;
            clock.set(nowUs / 1000);
            if (sweep) limiter.sweep();
            const { reason, ...got } = limiter.tryAcquire(key, cost);
            expect(got).toEqual(model.decide(key, nowUs, cost));
            expect(reason === 'allowed').toBe(got.allowed);
          }
        },
      ),
      { numRuns: 300 },
    );
  });

  it('reports an exact wait: refused one microsecond before retryAfterMs, allowed at it', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 1_000 }),
        fc.integer({ min: 1, max: 10 }),
        fc.array(fc.integer({ min: 0, max: 5_000 }), { minLength: 1, maxLength: 20 }),
        fc.integer({ min: 1, max: 10 }),
        (intervalMs, burst, gapsUs, cost) => {
          fc.pre(cost <= burst);
          const clock = new ManualClock(1);
          const limiter = new RateLimiter({ limit: { permits: 1, periodMs: intervalMs, burst }, maxKeys: 2, clock });
          for (const gap of gapsUs) {
            clock.advance(gap / 1000);
            limiter.tryAcquire('k');
          }
          const d = limiter.tryAcquire('k', cost);
          if (d.allowed) return;
          const waitUs = Math.round(d.retryAfterMs * 1000);
          expect(waitUs).toBeGreaterThan(0);
          const probeAt = clock.now();
          clock.set(probeAt + (waitUs - 1) / 1000);
          expect(limiter.tryAcquire('k', cost).allowed).toBe(false);
          clock.set(probeAt + waitUs / 1000);
          expect(limiter.tryAcquire('k', cost).allowed).toBe(true);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('treats idle times near every 32-bit wrap of the TAT exactly like the reference', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 20 }),
        fc.integer({ min: 1, max: 10_000 }), // with burst <= 50, tau <= 500 s: ticks of 1 us or finer,
        fc.integer({ min: 1, max: 50 }), //      so integer-microsecond times are exact
        fc.constantFrom(10, 100, 1000, 10_000),
        fc.integer({ min: 1, max: 10 }),
        fc.integer({ min: -3, max: 3 }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        (permits, intervalMs, burst, tickNs, halfWraps, tauSteps, frac) => {
          const clock = new ManualClock(0);
          const limiter = new RateLimiter({ limit: { permits, periodMs: permits * intervalMs, burst }, maxKeys: 2, clock });
          const model = new ReferenceGcra(intervalMs * 1000, burst);
          for (let i = 0; i < burst; i++) expect(limiter.tryAcquire('k', 1)).toEqual({ ...model.decide('k', 0, 1), reason: 'allowed' });
          // Idle for a multiple of 2^31 ticks (where a 32-bit difference changes sign), give or
          // take a few tolerances.
          const idleUs = Math.max(0, Math.round((halfWraps * 2 ** 31 * tickNs) / 1000 + tauSteps * frac * burst * intervalMs * 1000));
          clock.set(idleUs / 1000);
          const { reason, ...got } = limiter.tryAcquire('k', 1);
          expect(got).toEqual(model.decide('k', idleUs, 1));
          void reason;
        },
      ),
      { numRuns: 500 },
    );
  });
});
