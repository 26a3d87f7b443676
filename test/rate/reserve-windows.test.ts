// Reservations on fixed and sliding windows: a window counts a reservation in the window it acts
// in (the reading's, or the next), nothing acts now on a later window's count, several windows
// and a global cap agree on one act time, and cancel() gives the count back.
import fc from 'fast-check';
import { reserveFromWorkers } from '../helpers/reserve-race.js';
import { describe, expect, it } from 'vitest';
import { ManualClock, perMinute, perSecond, RateLimiter, RateLimitTimeoutError, type Limit, type Reservation } from '../../src/index.js';

const settle = () => new Promise((r) => setTimeout(r, 5));

/** The delays of `n` reservations of cost 1 in a row, or the error name where one was refused. */
function delays(limiter: RateLimiter, n: number, key = 'k'): (number | string)[] {
  return Array.from({ length: n }, () => {
    try {
      return limiter.reserve(key).delayMs;
    } catch (e) {
      return (e as Error).name;
    }
  });
}

describe('reserve() on a fixed window', () => {
  it('counts in the reading window while it has room, then in the next; no further', () => {
    const clock = new ManualClock(1500); // window 1 is [1000, 2000)
    const limiter = new RateLimiter({ limit: perSecond(3), algorithm: 'fixed-window', maxKeys: 4, clock });
    expect(delays(limiter, 8)).toEqual([0, 0, 0, 500, 500, 500, 'RateLimitTimeoutError', 'RateLimitTimeoutError']);
    // Window 2 is full of reservations: nothing passes now, nor in window 2.
    expect(limiter.tryAcquire('k')).toMatchObject({ allowed: false, retryAfterMs: 1500, remaining: 0 });
    clock.set(2000);
    expect(limiter.tryAcquire('k')).toMatchObject({ allowed: false, retryAfterMs: 1000 });
    clock.set(3000);
    expect(limiter.tryAcquire('k').allowed).toBe(true);
  });

  it('lets nothing act now on the next window\'s count, even with room in it', () => {
    const clock = new ManualClock(1500);
    const limiter = new RateLimiter({ limit: perSecond(3), algorithm: 'fixed-window', maxKeys: 4, clock });
    limiter.reserve('k', { cost: 3 });
    expect(limiter.reserve('k').delayMs).toBe(500); // window 2 holds 1 of 3
    expect(limiter.tryAcquire('k')).toMatchObject({ allowed: false, retryAfterMs: 500, remaining: 0 });
    clock.set(2000);
    expect([limiter.allow('k'), limiter.allow('k'), limiter.allow('k')]).toEqual([true, true, false]);
  });

  it('counts nothing when refused: too long a wait, past the next window, or a cost over permits', () => {
    const clock = new ManualClock(1500);
    const limiter = new RateLimiter({ limit: perSecond(3), algorithm: 'fixed-window', maxKeys: 4, clock });
    limiter.reserve('k', { cost: 3 });
    expect(() => limiter.reserve('k', { cost: 1, maxWaitMs: 499 })).toThrow(RateLimitTimeoutError);
    expect(() => limiter.reserve('k', { cost: 4 })).toThrow(/can never pass/);
    limiter.reserve('k', { cost: 3, maxWaitMs: 500 }); // window 2 was untouched
    expect(() => limiter.reserve('k')).toThrow(/would wait 1500 ms, further ahead than/);
    clock.set(2000);
    expect(limiter.tryAcquire('k', 0).remaining).toBe(0);
  });

  it('cancel() gives the count back while the state holds the reserved window', () => {
    const clock = new ManualClock(1500);
    const limiter = new RateLimiter({ limit: perSecond(3), algorithm: 'fixed-window', maxKeys: 4, clock });
    limiter.reserve('k', { cost: 3 });
    const r = limiter.reserve('k');
    expect(r.delayMs).toBe(500);
    expect(r.cancel()).toBe(true);
    expect(r.cancel()).toBe(false);
    expect(delays(limiter, 4)).toEqual([500, 500, 500, 'RateLimitTimeoutError']); // all 3 places are back
  });
});

describe('reserve() on a sliding window', () => {
  it('acts when the weighted estimate has room, counted in the window it acts in', () => {
    const clock = new ManualClock(1000);
    const limiter = new RateLimiter({ limit: perSecond(3), algorithm: 'sliding-window', maxKeys: 4, clock });
    const got = delays(limiter, 6);
    // Window 1 takes 3 now. In window 2 the 3 weigh 3 * (1 - f): a 4th fits at f = 1/3, a 5th
    // (window 2 holding 1) at f = 2/3; a 6th only at window 2's end: past the next window.
    expect(got.slice(0, 3)).toEqual([0, 0, 0]);
    expect(got[3]).toBeCloseTo(1333.333334, 6);
    expect(got[4]).toBeCloseTo(1666.666667, 6);
    expect(got[5]).toBe('RateLimitTimeoutError');
    expect(limiter.tryAcquire('k')).toMatchObject({ allowed: false, remaining: 0 });
  });

  it('cancel() gives the count back, from the previous window once a later reservation moved on', () => {
    const clock = new ManualClock(1000);
    const limiter = new RateLimiter({ limit: perSecond(3), algorithm: 'sliding-window', maxKeys: 4, clock });
    limiter.reserve('k', { cost: 2 });
    const third = limiter.reserve('k');
    expect(third.delayMs).toBe(0);
    const fourth = limiter.reserve('k'); // moves the state to window 2
    expect(fourth.delayMs).toBeCloseTo(1333.333334, 6);
    clock.set(1200);
    expect(third.cancel()).toBe(false); // it acted at once
    expect(fourth.cancel()).toBe(true);
    // As if the fourth never came: the next one gets its place.
    expect(limiter.reserve('k').delayMs).toBeCloseTo(1133.333334, 6);
  });
});

describe('reserve() over several windows and a global cap', () => {
  it('two windows agree on the act time: the minute window counts it in the minute it acts in', () => {
    const clock = new ManualClock(59_500);
    const limiter = new RateLimiter({ limit: [perSecond(3), perMinute(5)], algorithm: 'fixed-window', maxKeys: 4, clock });
    // Second 59 takes 3; the 4th waits for second 60, which is in minute 1: counted there.
    expect(delays(limiter, 4)).toEqual([0, 0, 0, 500]);
    clock.set(60_000);
    expect([1, 2, 3].map(() => limiter.allow('k'))).toEqual([true, true, false]); // second 60: 3
    clock.set(61_000);
    // Minute 1 holds 3 of 5 (with the reservation): 2 more, never 3.
    expect([1, 2, 3].map(() => limiter.allow('k'))).toEqual([true, true, false]);
  });

  it('two sliding windows: the act time falls in the window each limit counted it in', () => {
    const clock = new ManualClock(59_500);
    const limiter = new RateLimiter({ limit: [perSecond(3), perMinute(5)], algorithm: 'sliding-window', maxKeys: 4, clock });
    const got = delays(limiter, 4);
    expect(got.slice(0, 3)).toEqual([0, 0, 0]);
    expect(got[3]).toBeCloseTo(833.333334, 6); // second 60 at 1/3: 3 * (2/3) + 1 = 3
    // The minute limit counted it in minute 1 (60,333 ms): minute 0's 3 weigh 3 * (1 - f) there.
    clock.set(59_500 + (got[3] as number));
    expect(limiter.tryAcquire('k', 0).remaining).toBe(0); // second 60 is at its estimate of 3
    clock.set(61_000);
    // Second 61: second 60's one weighs 1; minute 1: 3 * (1 - 1/60) + 1 = 3.95 of 5: one more.
    expect([1, 2].map(() => limiter.allow('k'))).toEqual([true, false]);
  });

  it('a fixed-window global cap orders every key\'s reservations', () => {
    const clock = new ManualClock(1500);
    const limiter = new RateLimiter({ limit: perSecond(10), globalLimit: perSecond(3), algorithm: 'fixed-window', maxKeys: 8, clock });
    const got = ['a', 'b', 'c', 'd', 'a', 'e', 'f'].map((k) => delays(limiter, 1, k)[0]);
    expect(got).toEqual([0, 0, 0, 500, 500, 500, 'RateLimitTimeoutError']);
  });

  it('a window cap and a window key agree on the act time (the cap counts it in the minute it acts in)', () => {
    const clock = new ManualClock(59_500);
    const limiter = new RateLimiter({ limit: perSecond(3), globalLimit: perMinute(5), algorithm: 'fixed-window', maxKeys: 8, clock });
    // a: 3 now, the 4th in second 60, so in minute 1 of the cap. The cap's state now holds
    // minute 1 (one window at a time), so b's reservations also wait for it, each counted by b's
    // key in second 60.
    const got = ['a', 'a', 'a', 'a', 'b', 'b', 'b', 'b'].map((k) => delays(limiter, 1, k)[0]);
    expect(got).toEqual([0, 0, 0, 500, 500, 500, 500, 'RateLimitTimeoutError']);
    clock.set(60_000);
    expect(limiter.tryAcquire('b', 0).remaining).toBe(0); // b's second 60 holds three
    expect(limiter.tryAcquire('c', 0).remaining).toBe(1); // the cap's minute 1 holds four of five
  });
});

describe('acquire() on windows', () => {
  it('serves waiters in arrival order at their reserved times, and an abort gives the place back', async () => {
    const clock = new ManualClock(1500);
    const limiter = new RateLimiter({ limit: perSecond(2), algorithm: 'fixed-window', maxKeys: 4, clock });
    const order: number[] = [];
    const ac = new AbortController();
    const waits = [0, 1, 2].map((i) => limiter.acquire('k').then(() => order.push(i)));
    const aborted = limiter.acquire('k', { signal: ac.signal }).catch((e: Error) => e.name);
    await settle();
    expect(order).toEqual([0, 1]);
    ac.abort();
    expect(await aborted).toBe('AbortError');
    // Window 2 holds the waiter 2 and, given back, the aborted one's place: the next gets it.
    waits.push(limiter.acquire('k').then(() => order.push(3)));
    await expect(limiter.acquire('k')).rejects.toThrow(RateLimitTimeoutError);
    clock.set(2000);
    await Promise.all(waits);
    expect(order).toEqual([0, 1, 2, 3]);
  });
});

/** Acts per key and over all keys, checked against what each window promises. */
function checkActs(acts: { key: string; at: number; cost: number }[], algorithm: 'fixed-window' | 'sliding-window', limits: Limit[], cap: Limit | null): void {
  const check = (list: { at: number; cost: number }[], l: Limit, what: string) => {
    const sorted = [...list].sort((a, b) => a.at - b.at);
    const inWindow = new Map<number, number>();
    for (const a of sorted) {
      const w = Math.floor(a.at / l.periodMs);
      inWindow.set(w, (inWindow.get(w) ?? 0) + a.cost);
      if (algorithm === 'fixed-window') {
        expect(inWindow.get(w), `${what}: window ${w}`).toBeLessThanOrEqual(l.permits);
      } else {
        // Acts at the same instant all count: the estimate at `at`, every act up to it included.
        const upTo = sorted.filter((b) => b.at <= a.at && Math.floor(b.at / l.periodMs) === w).reduce((s, b) => s + b.cost, 0);
        const prev = sorted.filter((b) => Math.floor(b.at / l.periodMs) === w - 1).reduce((s, b) => s + b.cost, 0);
        const estimate = prev * (1 - (a.at - w * l.periodMs) / l.periodMs) + upTo;
        expect(estimate, `${what}: at ${a.at}`).toBeLessThanOrEqual(l.permits + 1e-9);
      }
    }
  };
  for (const key of new Set(acts.map((a) => a.key))) {
    for (const l of limits) check(acts.filter((a) => a.key === key), l, `key ${key}, ${l.permits} per ${l.periodMs} ms`);
  }
  if (cap !== null) check(acts, cap, 'global cap');
}

describe('reservations, admissions and cancels against what each window promises (fast-check)', () => {
  const op = fc.oneof(
    fc.record({ kind: fc.constant('advance' as const), ms: fc.integer({ min: 0, max: 400 }) }),
    // To just before a boundary of the longest period, where one limit's next window is in
    // another's next window too.
    fc.record({ kind: fc.constant('edge' as const), before: fc.integer({ min: 1, max: 150 }) }),
    fc.record({ kind: fc.constant('try' as const), key: fc.constantFrom('a', 'b'), cost: fc.integer({ min: 0, max: 3 }) }),
    fc.record({ kind: fc.constant('reserve' as const), key: fc.constantFrom('a', 'b'), cost: fc.integer({ min: 0, max: 3 }), maxWaitMs: fc.constantFrom(0, 100, 700, Infinity) }),
    fc.record({ kind: fc.constant('cancel' as const), pick: fc.nat() }),
  );
  const limit = fc.record({ permits: fc.integer({ min: 1, max: 6 }), periodMs: fc.constantFrom(100, 250, 300, 1000) });

  it.each(['fixed-window', 'sliding-window'] as const)('%s: no act beyond the promise, for any sequence', (algorithm) => {
    fc.assert(
      fc.property(fc.array(limit, { minLength: 1, maxLength: 2 }), fc.option(limit, { nil: null }), fc.integer({ min: 0, max: 10_000 }), fc.array(op, { minLength: 40, maxLength: 150 }), (raw, rawCap, start, ops) => {
        const limits = raw.map((l) => ({ permits: l.permits, periodMs: l.periodMs, burst: l.permits }));
        const cap = rawCap === null ? null : { permits: rawCap.permits, periodMs: rawCap.periodMs, burst: rawCap.permits };
        const clock = new ManualClock(start);
        const limiter = new RateLimiter({ limit: limits, ...(cap ? { globalLimit: cap } : {}), algorithm, maxKeys: 8, clock });
        const acts: { key: string; at: number; cost: number }[] = [];
        const pending: { r: Reservation; key: string }[] = [];
        for (const o of ops) {
          if (o.kind === 'advance') clock.advance(o.ms);
          else if (o.kind === 'edge') {
            const longest = Math.max(...limits.map((l) => l.periodMs), cap?.periodMs ?? 0);
            const to = (Math.floor(clock.now() / longest) + 1) * longest - o.before;
            if (to > clock.now()) clock.set(to);
          }
          else if (o.kind === 'try') {
            if (limiter.allow(o.key, o.cost) && o.cost > 0) acts.push({ key: o.key, at: clock.now(), cost: o.cost });
          } else if (o.kind === 'reserve') {
            try {
              const r = limiter.reserve(o.key, { cost: o.cost, maxWaitMs: o.maxWaitMs });
              expect(r.delayMs).toBeLessThanOrEqual(o.maxWaitMs);
              if (o.cost > 0) pending.push({ r, key: o.key });
            } catch (e) {
              if (!(e instanceof RateLimitTimeoutError)) throw e;
            }
          } else if (pending.length > 0) {
            const [p] = pending.splice(o.pick % pending.length, 1);
            if (p !== undefined && !p.r.cancel()) pending.push(p); // not given back: it acts
          }
        }
        for (const p of pending) acts.push({ key: p.key, at: p.r.actAtMs, cost: p.r.cost });
        checkActs(acts, algorithm, limits, cap);
      }),
      { numRuns: 1000 },
    );
  });
});

describe('reserve() on windows from racing workers', () => {
  it.each([['fixed-window'], ['sliding-window']] as const)('%s: 4 workers get the places one thread would, each once', async (algorithm) => {
    const limit = perSecond(200);
    // What one thread gets on the same frozen clock: the reference.
    const alone = new RateLimiter({ limit, algorithm, maxKeys: 4, clock: new ManualClock(1000) });
    const expected = delays(alone, 1000).filter((d): d is number => typeof d === 'number');
    expect(expected.length).toBeGreaterThan(200); // the next window took reservations too
    // Rounds on fresh limiters until the workers were seen racing (forced if a busy machine ran
    // them one after the other); every round is checked.
    const make = () => new RateLimiter({ limit, algorithm, maxKeys: 4, clock: new ManualClock(1000) });
    await reserveFromWorkers(make, 250, Infinity, (got) => expect(got).toEqual([...expected].sort((a, b) => a - b)));
  });
});
