// A spend's give-back (skipFailedRequests, skipSuccessfulRequests on GCRA) returns no more than
// what of the spend is still ahead when it runs: a spend counts from its admission's reading, and
// what drained since stays spent. Found: at 1 a second with a burst of 1, a spend at 100 s,
// another admission at 105 s (the first long drained), then the first one's give-back: a second
// admission at 105 s passed, two at one instant. Every GCRA path of the shared-memory limiters:
// the one-limit path at both widths, two limits and a limit under a cap (the engine), and a
// PolicyLimiter's GCRA rule.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ManualClock, perMinute, perSecond, PolicyLimiter, RateLimiter, type Limit } from '../../src/index.js';
import { spendGiveBack } from '../../src/rate/rate-limiter.js';
import { policyGiveBack } from '../../src/policy/policy-limiter.js';

const DAY = 86_400_000;

const CONFIGS: [string, (clock: ManualClock, limit: Limit) => RateLimiter][] = [
  ['one limit, width 32', (clock, limit) => new RateLimiter({ limit, maxKeys: 8, clock })],
  ['one limit, width 64', (clock, limit) => new RateLimiter({ limit, maxKeys: 8, clock, maxBlockMs: 30 * DAY })],
  ['two limits (the engine)', (clock, limit) => new RateLimiter({ limit: [limit, perMinute(1_000)], maxKeys: 8, clock })],
  ['two limits, width 64', (clock, limit) => new RateLimiter({ limit: [limit, perMinute(1_000)], maxKeys: 8, clock, maxBlockMs: 30 * DAY })],
  ['a limit under a cap', (clock, limit) => new RateLimiter({ limit, globalLimit: perSecond(1_000), maxKeys: 8, clock })],
];

describe.each(CONFIGS)('a spend\'s give-back on GCRA (%s)', (_name, make) => {
  it('found: a spend that drained before its give-back stays spent (two admissions at one instant at a burst of 1)', () => {
    const clock = new ManualClock(100_000);
    const l = make(clock, { permits: 1, periodMs: 1_000, burst: 1 });
    expect(l.tryAcquire('k').allowed).toBe(true);
    const back = spendGiveBack(l, 'k', 1);
    clock.advance(5_000);
    expect(l.tryAcquire('k').allowed).toBe(true);
    back(); // the first spend drained at 101 s: nothing of it is ahead
    expect(l.tryAcquire('k').allowed).toBe(false);
  });

  it('right after the admission, the whole spend comes back', () => {
    const clock = new ManualClock(100_000);
    const l = make(clock, { permits: 1, periodMs: 1_000, burst: 1 });
    expect(l.tryAcquire('k').allowed).toBe(true);
    spendGiveBack(l, 'k', 1)();
    expect(l.tryAcquire('k').allowed).toBe(true);
    expect(l.tryAcquire('k').allowed).toBe(false);
  });

  it('part drained: what is still ahead of the spend comes back, not the whole interval', () => {
    const clock = new ManualClock(100_000);
    const l = make(clock, { permits: 1, periodMs: 1_000, burst: 3 });
    expect(l.tryAcquire('k').allowed).toBe(true);
    const back = spendGiveBack(l, 'k', 1); // its slot: 100-101 s
    expect(l.tryAcquire('k').allowed).toBe(true); // 101-102 s
    clock.advance(300);
    back(); // 700 ms of the first slot are ahead: the debt goes from 1,700 ms to about 1,000
    const d = l.tryAcquire('k', 0);
    expect(d.limits?.[0]?.resetAfterMs ?? d.resetAfterMs).toBeGreaterThanOrEqual(1_000);
    expect(d.limits?.[0]?.resetAfterMs ?? d.resetAfterMs).toBeLessThan(1_000.01);
  });

  it('a cost of 3: what of it drained stays spent, the rest comes back', () => {
    const clock = new ManualClock(100_000);
    const l = make(clock, { permits: 1, periodMs: 1_000, burst: 4 });
    expect(l.tryAcquire('k', 3).allowed).toBe(true); // 100-103 s
    const back = spendGiveBack(l, 'k', 3);
    clock.advance(1_000);
    expect(l.tryAcquire('k', 2).allowed).toBe(true); // the debt 4 s
    back(); // 2 s of the first spend are ahead: the debt 2 s, not 1 s
    expect(l.tryAcquire('k', 3).allowed).toBe(false);
    expect(l.tryAcquire('k', 2).allowed).toBe(true);
  });
});

describe('a spend\'s give-back on a PolicyLimiter\'s GCRA rule', () => {
  it('found: a spend that drained before its give-back stays spent', () => {
    const clock = new ManualClock(100_000);
    const l = new PolicyLimiter({ rules: [{ limit: { permits: 1, periodMs: 1_000, burst: 1 } }], maxKeys: 8, clock });
    const r = { user: 'u', api: 'a' };
    expect(l.tryAcquire(r).allowed).toBe(true);
    const back = policyGiveBack(l, r, 1);
    clock.advance(5_000);
    expect(l.tryAcquire(r).allowed).toBe(true);
    back();
    expect(l.tryAcquire(r).allowed).toBe(false);
  });
});

describe('a spend\'s give-backs never leave a key owing less than if those spends had never been made', () => {
  // The exact model: GCRA over the admissions whose spends were given back removed, at the times
  // they were admitted (TAT = max(TAT, at) + cost * T). A give-back may leave the key owing more
  // (what of a slot drained is never given back, and a slot that began after its admission's
  // reading is given back from that reading), never less: then nothing passes that would not
  // have passed without the spends given back.
  const op = fc.oneof(
    fc.record({ kind: fc.constant('check' as const), cost: fc.integer({ min: 1, max: 3 }) }),
    fc.record({ kind: fc.constant('back' as const), pick: fc.nat() }),
  );
  const step = fc.record({ advanceMs: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 700 }), fc.integer({ min: 700, max: 5_000 })), op });

  it.each(CONFIGS)('%s', (_name, make) => {
    let given = 0;
    fc.assert(fc.property(fc.integer({ min: 1_000, max: 10_000_000 }), fc.array(step, { minLength: 5, maxLength: 60 }), (startMs, steps) => {
      const clock = new ManualClock(startMs);
      const T = 400; // perSecond(2.5): 400 ms an interval, a burst of 4
      const l = make(clock, { permits: 5, periodMs: 2_000, burst: 4 });
      const spends: { at: number; cost: number; back: () => void; given: boolean }[] = [];
      for (const { advanceMs, op: o } of steps) {
        clock.advance(advanceMs);
        if (o.kind === 'check') {
          if (l.tryAcquire('k', o.cost).allowed) spends.push({ at: clock.now(), cost: o.cost, back: spendGiveBack(l, 'k', o.cost), given: false });
        } else {
          const open = spends.filter((s) => !s.given);
          const s = open[o.pick % Math.max(1, open.length)];
          if (s === undefined) continue;
          s.back();
          s.given = true;
          given++;
        }
        let tat = -Infinity;
        for (const s of spends) if (!s.given) tat = Math.max(tat, s.at) + s.cost * T;
        const owed = Math.max(0, tat - clock.now());
        const d = l.tryAcquire('k', 0);
        const has = d.limits?.[0]?.resetAfterMs ?? d.resetAfterMs;
        expect(has, `at ${clock.now()}: ${JSON.stringify(spends)}`).toBeGreaterThanOrEqual(owed - 1e-6);
      }
    }), { numRuns: 200 });
    expect(given).toBeGreaterThan(100);
  });
});
