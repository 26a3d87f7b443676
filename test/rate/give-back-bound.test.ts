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
import { markedTryAcquire, spendGiveBack, windowGiveBack } from '../../src/rate/rate-limiter.js';
import { markedPolicyTryAcquire, policyGiveBack } from '../../src/policy/policy-limiter.js';

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
    expect(markedTryAcquire(l, 'k', 1).allowed).toBe(true);
    const back = spendGiveBack(l, 'k', 1);
    clock.advance(5_000);
    expect(l.tryAcquire('k').allowed).toBe(true);
    back(); // the first spend drained at 101 s: nothing of it is ahead
    expect(l.tryAcquire('k').allowed).toBe(false);
  });

  it('right after the admission, the whole spend comes back', () => {
    const clock = new ManualClock(100_000);
    const l = make(clock, { permits: 1, periodMs: 1_000, burst: 1 });
    expect(markedTryAcquire(l, 'k', 1).allowed).toBe(true);
    spendGiveBack(l, 'k', 1)();
    expect(l.tryAcquire('k').allowed).toBe(true);
    expect(l.tryAcquire('k').allowed).toBe(false);
  });

  it('part drained: what is still ahead of the spend comes back, not the whole interval', () => {
    const clock = new ManualClock(100_000);
    const l = make(clock, { permits: 1, periodMs: 1_000, burst: 3 });
    expect(markedTryAcquire(l, 'k', 1).allowed).toBe(true);
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
    expect(markedTryAcquire(l, 'k', 3).allowed).toBe(true); // 100-103 s
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
    expect(markedPolicyTryAcquire(l, r, 1).allowed).toBe(true);
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
          if (markedTryAcquire(l, 'k', o.cost).allowed) spends.push({ at: clock.now(), cost: o.cost, back: spendGiveBack(l, 'k', o.cost), given: false });
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

describe('found: a clock that steps back between a later admission and the give-back', () => {
  // A (cost 3) at 100 s; B at 102.5 s on another instance (the key owes 4 s, 3.5 s without A);
  // the clock steps back to 101 s and A's give-back reads it raised to the stamp's second, 102 s:
  // it gave back 1 s, as if B had come before it, and a cost of 3 passed at 103 s, where the
  // history without A owes 0.5 s. A give-back at a reading raised to the key's stamp now gives
  // nothing (the same steps on a clock that stood still through the step are refused too).
  const L: Limit = { permits: 1, periodMs: 1_000, burst: 3 };
  // Not the one-limit path at width 64: its stamp is a staleness unit of 4,096 s, within which a
  // step back is not seen (docs/testing.md, "Found, not yet fixed").
  const STEPPED: [string, (clock: { now(): number }) => { a: RateLimiter; b: RateLimiter }][] = CONFIGS
    .filter(([name]) => name !== 'one limit, width 64')
    .map(([name, make]) => [name, (clock) => {
      const a = make(clock as ManualClock, L);
      return { a, b: RateLimiter.attach(a.handle, { clock }) };
    }]);

  it.each(STEPPED)('%s', (_name, make) => {
    let t = 100_000;
    const { a, b } = make({ now: () => t });
    expect(markedTryAcquire(a, 'k', 3).allowed).toBe(true); // A: 100-103 s
    const back = spendGiveBack(a, 'k', 3);
    t = 102_500;
    expect(b.tryAcquire('k', 1).allowed).toBe(true); // B
    t = 101_000; // the clock steps back
    back();
    t = 103_000;
    expect(b.tryAcquire('k', 3).allowed).toBe(false);
  });

  it('a PolicyLimiter rule', () => {
    let t = 100_000;
    const clock = { now: () => t };
    const a = new PolicyLimiter({ rules: [{ limit: L }], maxKeys: 8, clock });
    const b = PolicyLimiter.attach(a.handle, { clock });
    const r = { user: 'u', api: 'a' };
    expect(markedPolicyTryAcquire(a, r, 3).allowed).toBe(true);
    const back = policyGiveBack(a, r, 3);
    t = 102_500;
    expect(b.tryAcquire(r, 1).allowed).toBe(true);
    t = 101_000;
    back();
    t = 103_000;
    expect(b.tryAcquire(r, 3).allowed).toBe(false);
  });
});

describe('found: a 64-bit give-back more than 2^63 ticks after its spend gave back the whole cost', () => {
  // 600 a second takes 0.1 ps ticks at width 64: 2^63 of them are 10.7 days. A response that
  // ended 11 days after its admission gave the spend back whole (the tick difference read as
  // negative): two admissions at one instant at a burst of 1.
  const L: Limit = { permits: 600, periodMs: 1_000, burst: 1 };
  it.each([
    ['one limit', (clock: ManualClock) => new RateLimiter({ limit: L, maxKeys: 8, clock })],
    ['two limits', (clock: ManualClock) => new RateLimiter({ limit: [L, perMinute(100_000)], maxKeys: 8, clock })],
  ] as const)('%s', (_name, make) => {
    const clock = new ManualClock(100_000);
    const l = make(clock);
    expect(markedTryAcquire(l, 'k', 1).allowed).toBe(true);
    const back = spendGiveBack(l, 'k', 1);
    clock.advance(11 * 86_400_000);
    expect(l.tryAcquire('k').allowed).toBe(true);
    back();
    expect(l.tryAcquire('k').allowed).toBe(false);
  });

  it('a PolicyLimiter rule', () => {
    const clock = new ManualClock(100_000);
    const l = new PolicyLimiter({ rules: [{ limit: L }], maxKeys: 8, clock });
    const r = { user: 'u', api: 'a' };
    expect(markedPolicyTryAcquire(l, r, 1).allowed).toBe(true);
    const back = policyGiveBack(l, r, 1);
    clock.advance(11 * 86_400_000);
    expect(l.tryAcquire(r).allowed).toBe(true);
    back();
    expect(l.tryAcquire(r).allowed).toBe(false);
  });
});

describe('found: a PolicyLimiter give-back after the rules changed', () => {
  const r = { user: 'u', api: 'a' };

  it('a limit added: the new limit never counted the spend, and gave it back', () => {
    const clock = new ManualClock(100_000);
    const l = new PolicyLimiter({ rules: [{ limit: { permits: 1, periodMs: 1_000, burst: 5 } }], maxKeys: 8, clock });
    expect(markedPolicyTryAcquire(l, r, 1).allowed).toBe(true); // A, under the first limit only
    const back = policyGiveBack(l, r, 1);
    l.setRules([{ limit: [{ permits: 1, periodMs: 1_000, burst: 5 }, { permits: 1, periodMs: 10_000, burst: 2 }] }]);
    expect(l.tryAcquire(r).allowed).toBe(true); // C: the new limit owes 10 s
    back();
    expect(l.tryAcquire(r).allowed).toBe(true); // 20 s <= 20 s
    expect(l.tryAcquire(r).allowed).toBe(false);
  });

  it('a slower rate: the give-back was bounded by the new rule\'s intervals, more than the spend took', () => {
    const clock = new ManualClock(100_000);
    const l = new PolicyLimiter({ rules: [{ limit: { permits: 1, periodMs: 1_000, burst: 2 } }], maxKeys: 8, clock });
    expect(markedPolicyTryAcquire(l, r, 1).allowed).toBe(true); // A: 100-101 s
    const back = policyGiveBack(l, r, 1);
    expect(l.tryAcquire(r).allowed).toBe(true); // B: 101-102 s (100-101 s without A)
    l.setRules([{ limit: { permits: 1, periodMs: 10_000, burst: 2 } }]);
    back();
    expect(l.tryAcquire(r).allowed).toBe(true); // without A the pair owes 1 s: one more passes, not two
    expect(l.tryAcquire(r).allowed).toBe(false);
  });
});

describe('found: b49f81d\'s step-back rule reached a window\'s give-back, and a closure gave back twice', () => {
  it('a window give-back at a reading raised to the stamp still gives back in its own window', () => {
    // A's clock runs 1.5 s behind B's: A's admission and its give-back read 100.5 s, raised to
    // B's stamp, 101 s, all in the window [60, 120) s. The window's give-back is bounded by its
    // window, not by time: it must still give back (b49f81d kept the spend).
    let ta = 100_000;
    let tb = 101_500;
    const a = new RateLimiter({ limit: { permits: 2, periodMs: 60_000 }, algorithm: 'fixed-window', maxKeys: 8, clock: { now: () => ta } });
    const b = RateLimiter.attach(a.handle, { clock: { now: () => tb } });
    expect(b.tryAcquire('k').allowed).toBe(true); // stamp 101
    ta = 100_500;
    expect(a.tryAcquire('k').allowed).toBe(true);
    windowGiveBack(a, 'k', 1)();
    tb = 102_000;
    expect(b.tryAcquire('k').allowed).toBe(true); // 2 of 2 without A's spend
    expect(b.tryAcquire('k').allowed).toBe(false);
  });

  it.each([
    ['one limit', (c: ManualClock) => new RateLimiter({ limit: { permits: 1, periodMs: 1_000, burst: 2 }, maxKeys: 8, clock: c })],
    ['two limits', (c: ManualClock) => new RateLimiter({ limit: [{ permits: 1, periodMs: 1_000, burst: 2 }, perMinute(1_000)], maxKeys: 8, clock: c })],
  ] as const)('a give-back closure called twice gives back once (%s)', (_name, make) => {
    const clock = new ManualClock(100_000);
    const l = make(clock);
    expect(markedTryAcquire(l, 'k', 1).allowed).toBe(true);
    const back = spendGiveBack(l, 'k', 1);
    expect(l.tryAcquire('k').allowed).toBe(true);
    back();
    back();
    expect(l.tryAcquire('k').allowed).toBe(true);
    expect(l.tryAcquire('k').allowed).toBe(false); // without A: 2 of 2
  });

  it('a PolicyLimiter give-back closure called twice gives back once', () => {
    const clock = new ManualClock(100_000);
    const l = new PolicyLimiter({ rules: [{ limit: { permits: 1, periodMs: 1_000, burst: 2 } }], maxKeys: 8, clock });
    const r = { user: 'u', api: 'a' };
    expect(markedPolicyTryAcquire(l, r, 1).allowed).toBe(true);
    const back = policyGiveBack(l, r, 1);
    expect(l.tryAcquire(r).allowed).toBe(true);
    back();
    back();
    expect(l.tryAcquire(r).allowed).toBe(true);
    expect(l.tryAcquire(r).allowed).toBe(false);
  });
});
