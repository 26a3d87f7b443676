// penalty, reward and reset on a one-limit GCRA RateLimiter, at both widths: each a mode of the
// engine's own compare-and-swap loop. Exact on a ManualClock; refused by name elsewhere.
import { describe, expect, it } from 'vitest';
import { ManualClock, perMinute, perSecond, RateLimiter, TableFullError } from '../../src/index.js';
import { raceUntilLost } from '../helpers/workers.js';

const WIDTHS = [
  ['width 32', perSecond(10)],
  ['width 64', { permits: 10, periodMs: 1000, burst: 2 ** 40 }],
] as const;

describe.each(WIDTHS)('penalty, reward, reset (%s)', (_name, limit) => {
  const make = () => {
    const clock = new ManualClock(1_000_000);
    const l = new RateLimiter({ limit, maxKeys: 8, clock });
    return { clock, l, burst: l.limit.burst };
  };

  it('penalty spends beyond the burst: the key waits until it has paid', () => {
    const { clock, l, burst } = make();
    expect(l.penalty('k', burst + 5)).toEqual({ remaining: 0, resetAfterMs: (burst + 5) * 100 });
    expect(l.tryAcquire('k')).toMatchObject({ allowed: false, retryAfterMs: 600 }); // 5 intervals past the burst, then one
    clock.advance(600);
    expect(l.allow('k')).toBe(true);
    expect(l.allow('k')).toBe(false);
  });

  it('reward gives back, never below fresh; null for a key the table does not hold', () => {
    const { l, burst } = make();
    expect(l.reward('nobody', 3)).toBeNull();
    expect(l.stats().liveKeys).toBe(0);
    for (let i = 0; i < 4; i++) expect(l.allow('k')).toBe(true);
    expect(l.reward('k', 1)).toEqual({ remaining: burst - 3, resetAfterMs: 300 });
    expect(l.reward('k', 100)).toEqual({ remaining: burst, resetAfterMs: 0 });
    expect(l.reward('k', 1)).toEqual({ remaining: burst, resetAfterMs: 0 }); // nothing left: still fresh
    expect(l.tryAcquire('k', 0)).toMatchObject({ remaining: burst, resetAfterMs: 0 });
  });

  it('reset: the key reads as fresh; false when it owed nothing or is not held', () => {
    const { l, burst } = make();
    expect(l.reset('nobody')).toBe(false);
    l.penalty('k', burst * 3);
    expect(l.reset('k')).toBe(true);
    expect(l.get('k')).toEqual({ remaining: burst, resetAfterMs: 0 });
    expect(l.reset('k')).toBe(false);
  });

  it('bad input is refused by name and changes nothing', () => {
    const { l, burst } = make();
    l.allow('k');
    expect(() => l.penalty('k', -1)).toThrow(RangeError);
    expect(() => l.penalty('k', 1.5)).toThrow(RangeError);
    expect(() => l.reward('', 1)).toThrow(TypeError);
    expect(() => l.reset(7 as unknown as string)).toThrow(TypeError);
    expect(l.get('k')).toMatchObject({ remaining: burst - 1 });
  });
});

describe('penalty at the edges', () => {
  it('past the horizon its state holds: RangeError, nothing spent', () => {
    const clock = new ManualClock(0);
    const l = new RateLimiter({ limit: perSecond(10), maxKeys: 8, clock });
    expect(l.width).toBe(32);
    expect(() => l.penalty('k', 1e9)).toThrow(/further ahead than its state can hold[\s\S]*nothing was spent/);
    expect(l.get('k')).toEqual({ remaining: 10, resetAfterMs: 0 });
  });

  it('a full table: TableFullError for a new key', () => {
    const l = new RateLimiter({ limit: perMinute(1), maxKeys: 1, forceHash: 3, clock: new ManualClock(0) });
    for (let i = 0; l.allow(`k${i}`); i++);
    expect(() => l.penalty('new', 1)).toThrow(TableFullError);
  });

  it.each([
    ['several limits', { limit: [perSecond(10), perMinute(100)] }],
    ['a global cap', { limit: perSecond(10), globalLimit: perSecond(100) }],
  ])('%s: penalty, reward and reset work (limits-controls.test.ts, limits-give-back.test.ts)', (_name, options) => {
    const l = new RateLimiter({ ...options, maxKeys: 8, clock: new ManualClock(0) });
    expect(l.penalty('k', 1).remaining).toBe(9);
    expect(l.reward('k', 1)?.remaining).toBe(10);
    expect(l.penalty('k', 3).remaining).toBe(7);
    expect(l.reset('k')).toBe(true);
    expect(l.reset('k')).toBe(false);
  });
});

describe('penalty and reward on 4 racing workers', () => {
  it('every interval is accounted for: admissions + penalties - what rewards gave back = the debt left', async () => {
    // A frozen clock: nothing drains. Starting fresh, the key's debt at the end, in intervals, is
    // what was spent (admissions and penalties) less what the rewards gave back (each at most 1,
    // none below fresh), exactly, whatever the order; and admissions never exceed the burst plus
    // what was given back. Run again until the workers lost races on the key (raceUntilLost).
    type Reply = { admitted: number; penalties: number; rewards: number; casRetries: number };
    await raceUntilLost<Reply>(() => {
      const burst = 40;
      const l = new RateLimiter({ limit: { permits: 1, periodMs: 1_000, burst }, maxKeys: 8, clock: new ManualClock(0) });
      return {
        workers: Array.from({ length: 4 }, (_, id) => ({ mode: 'controls-race', handle: l.handle, id, key: 'k', attempts: 300 })),
        check(replies) {
          const sum = (f: (r: Reply) => number) => replies.reduce((a, r) => a + f(r), 0);
          const [admitted, penalties, rewards] = [sum((r) => r.admitted), sum((r) => r.penalties), sum((r) => r.rewards)];
          const left = l.get('k');
          expect(left).not.toBeNull();
          const debt = (left?.resetAfterMs ?? 0) / 1_000; // intervals still owed
          expect(Number.isInteger(debt)).toBe(true);
          const givenBack = admitted + penalties - debt;
          expect(givenBack).toBeGreaterThanOrEqual(0);
          expect(givenBack).toBeLessThanOrEqual(rewards);
          expect(admitted).toBeLessThanOrEqual(burst + givenBack);
          expect(admitted).toBeGreaterThan(burst); // the rewards let more through than the burst alone
        },
      };
    });
  }, 60_000);
});
