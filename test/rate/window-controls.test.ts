// penalty and reward on the windows (fixed at both widths, sliding; one limit, several, under a
// global cap). A fixed window's count rises by a penalty at most to its permits (the window
// forgets its count at its end) and falls by a reward, never below 0; a sliding window's penalty
// may pass its permits and weighs on the next window as the previous count. A window penalty
// holds the key's give-back guard and moves its epoch on (LockFreeEngine.forceGuarded), so that a
// decision taking back its first commit never subtracts from a count the penalty clamped. block
// stays GCRA's. Exact on a ManualClock; the take-back's schedule staged; raced on 4 workers.
import { describe, expect, it } from 'vitest';
import { ManualClock, perMinute, RateLimiter, type Limit, type RateLimiterOptions } from '../../src/index.js';
import { H_STATE_OFFSET } from '../../src/table/layout.js';
import { interleaved } from '../helpers/atomics-spy.js';
import { slotBaseOf } from '../helpers/slots.js';
import { raceUntilLost } from '../helpers/workers.js';

/** A fixed window in one int32 word, and one too fine for it (the 64-bit word: fitsFixedWindow32). */
const FIXED: [string, Limit][] = [
  ['width 32', perMinute(5)],
  ['width 64', { permits: 1_048_576, periodMs: 500 }],
];

describe.each(FIXED)('penalty and reward on a fixed window (%s)', (_name, limit) => {
  const P = limit.permits;
  const period = limit.periodMs;
  const make = () => {
    const clock = new ManualClock(10 * period); // the start of a window
    return { clock, l: new RateLimiter({ limit, algorithm: 'fixed-window', maxKeys: 8, clock }) };
  };

  it('a penalty spends on the window, a reward gives back; each returns the state after', () => {
    const { l } = make();
    expect(l.allow('k')).toBe(true);
    expect(l.penalty('k', 2)).toEqual({ remaining: P - 3, resetAfterMs: period });
    expect(l.reward('k', 1)).toEqual({ remaining: P - 2, resetAfterMs: period });
    expect(l.get('k')?.remaining).toBe(P - 2);
    expect(l.penalty('k', 0)?.remaining).toBe(P - 2); // cost 0: a probe
  });

  it('a penalty fills at most the window, and the next window is whole', () => {
    const { clock, l } = make();
    expect(l.penalty('k', 10 * P)).toEqual({ remaining: 0, resetAfterMs: period });
    expect(l.allow('k')).toBe(false);
    expect(l.tryAcquire('k').retryAfterMs).toBe(period);
    clock.advance(period - 1);
    expect(l.allow('k')).toBe(false);
    clock.advance(1);
    expect(l.allow('k', P)).toBe(true); // the penalty went with its window
  });

  it('a reward never gives back below 0; on a key the table does not hold it is null and inserts nothing', () => {
    const { l } = make();
    expect(l.reward('nobody', 1)).toBeNull();
    expect(l.stats().liveKeys).toBe(0);
    expect(l.allow('k', 2)).toBe(true);
    expect(l.reward('k', 10 * P)).toEqual({ remaining: P, resetAfterMs: 0 });
    expect(l.allow('k', P)).toBe(true);
    expect(l.allow('k')).toBe(false);
  });

  it('a penalty on a new key inserts it; bad input is refused by name and changes nothing', () => {
    const { l } = make();
    expect(l.penalty('new', 2)?.remaining).toBe(P - 2);
    expect(() => l.penalty('new', -1)).toThrow(RangeError);
    expect(() => l.reward('new', 1.5)).toThrow(RangeError);
    expect(() => l.penalty(7 as unknown as string, 1)).toThrow(TypeError);
    expect(() => l.block('new', 1_000)).toThrow(/block\(\) on a RateLimiter of '.*' needs a block word in each key's state/);
    expect(l.get('new')?.remaining).toBe(P - 2);
  });
});

describe('penalty and reward on a sliding window', () => {
  it('a penalty past the permits weighs on the next window; a reward gives back from this window, then the last', () => {
    const clock = new ManualClock(60_000); // the start of a window
    const l = new RateLimiter({ limit: perMinute(10), algorithm: 'sliding-window', maxKeys: 8, clock });
    expect(l.penalty('k', 20)?.remaining).toBe(0);
    clock.advance(60_000); // the next window: the 20 now weigh fully as the previous count
    expect(l.allow('k')).toBe(false);
    clock.advance(54_000); // 90% in: the previous count weighs 2
    expect(l.get('k')?.remaining).toBe(8);
    expect(l.allow('k', 8)).toBe(true);
    expect(l.allow('k')).toBe(false);
    // 8 in this window, 20 in the last (weighing 2): a reward of 9 takes 8 from this one, 1 from the last.
    expect(l.reward('k', 9)?.remaining).toBe(8); // 19 * 0.1 = 1.9 weighing: floor(10 - 1.9)
    expect(l.reward('k', 100)?.remaining).toBe(10);
  });
});

describe.each([
  ['two fixed windows', { limit: [perMinute(5), { permits: 100, periodMs: 3_600_000 }], algorithm: 'fixed-window' }],
  ['a fixed window under a global cap', { limit: perMinute(5), globalLimit: perMinute(3), algorithm: 'fixed-window' }],
  ['a sliding window under a global cap', { limit: perMinute(5), globalLimit: perMinute(3), algorithm: 'sliding-window' }],
] as [string, Partial<RateLimiterOptions>][])('penalty and reward on %s', (_name, options) => {
  it('every key limit spends and gives back; a cap is neither charged nor given back', () => {
    const clock = new ManualClock(60_000);
    const l = new RateLimiter({ ...options, maxKeys: 8, clock } as RateLimiterOptions);
    expect(l.allow('k')).toBe(true);
    expect(l.penalty('k', 4)?.remaining).toBe(0);
    expect(l.allow('k')).toBe(false);
    const state = l.tryAcquire('k', 0);
    for (const s of state.limits ?? []) expect(s.remaining).toBeLessThan(100); // each limit spent it
    expect(l.reward('k', 2)?.remaining).toBe(2);
    expect(l.allow('k')).toBe(true);
    if (l.globalLimit !== null) {
      // The cap holds the two admissions alone: one more key's request passes, the next does not.
      expect(l.allow('x')).toBe(true);
      expect(l.allow('y')).toBe(false);
    }
  });
});

describe('a penalty between a decision\'s commit of its first window and its take-back', () => {
  // Thread A's check admits k on both windows (3 and 2 a minute, each holding the set-up's one)
  // and commits the first. Just before its second commit, B is admitted on both (both full now),
  // and B penalizes k by 1: each window is full already, so the penalty adds nothing (clamped).
  // A's second commit loses its race and now refuses, and A takes back its first. Subtracting its
  // spend from the count the penalty left full would give the first window a place that the
  // exact order (the penalty fills it) does not have. The penalty held the key's guard and moved
  // its epoch on, so A keeps its spend instead (conservative).
  it('the first window stays full', () => {
    const clock = new ManualClock(60_000);
    const a = new RateLimiter({ limit: [perMinute(3), perMinute(2)], algorithm: 'fixed-window', maxKeys: 4, clock });
    const b = RateLimiter.attach(a.handle, { clock });
    expect(a.allow('k')).toBe(true);
    const state = slotBaseOf(a.handle.table, 'k') + (new Int32Array(a.handle.table)[H_STATE_OFFSET] as number);
    const admitted = interleaved(a.handle.table, state + 1, () => {
      expect(b.allow('k')).toBe(true);
      expect(b.penalty('k', 1).remaining).toBe(0);
    }, () => a.allow('k'));
    expect(admitted).toBe(false);
    expect(b.tryAcquire('k', 0).limits?.[0]?.remaining).toBe(0);
  });
});

describe('penalties and rewards racing decisions on windows, 4 workers', () => {
  it.each([
    ['two fixed windows, the second binding', { limit: [{ permits: 40, periodMs: 3_600_000 }, { permits: 30, periodMs: 3_600_000 }], algorithm: 'fixed-window' }],
    ['a sliding window under a global cap', { limit: { permits: 30, periodMs: 3_600_000 }, globalLimit: { permits: 10_000, periodMs: 3_600_000 }, algorithm: 'sliding-window' }],
  ] as [string, Partial<RateLimiterOptions>][])('%s: no admission past the window and the rewards', async (_name, options) => {
    // A frozen clock: every count stays in its window. Every worker spends k, penalizes it every
    // third try and rewards it every second (fixtures/worker.mjs 'controls-race'). Penalties only
    // take room and each reward gives back at most one place, so the admissions never pass the
    // binding window's permits plus the rewards (an undo that subtracted from a count a penalty
    // clamped, or a reward given twice, would let more through).
    type Reply = { admitted: number; penalties: number; rewards: number; casRetries: number };
    await raceUntilLost<Reply>(() => {
      const l = new RateLimiter({ ...options, maxKeys: 8, clock: new ManualClock(0) } as RateLimiterOptions);
      const permits = Math.min(...l.limits.map((x) => x.permits));
      return {
        workers: Array.from({ length: 4 }, (_, id) => ({ mode: 'controls-race', handle: l.handle, id, key: 'k', attempts: 300 })),
        check(replies) {
          const sum = (f: (r: Reply) => number) => replies.reduce((n, r) => n + f(r), 0);
          const [admitted, rewards] = [sum((r) => r.admitted), sum((r) => r.rewards)];
          expect(admitted).toBeLessThanOrEqual(permits + rewards);
          expect(admitted).toBeGreaterThan(permits); // the rewards let more through
        },
      };
    });
  });
});

describe('found by an attack on the window controls', () => {
  // A penalty of cost 0 is a probe: it writes nothing, so it must not take the key's guard or
  // move its epoch either, or a decision caught between its first commit and its take-back
  // keeps its first window's spend for a request it refused (the exact order leaves 1 place).
  it('penalty(key, 0) between a decision\'s first commit and its take-back leaves the take-back alone', () => {
    const clock = new ManualClock(60_000);
    const a = new RateLimiter({ limit: [perMinute(3), perMinute(2)], algorithm: 'fixed-window', maxKeys: 4, clock });
    const b = RateLimiter.attach(a.handle, { clock });
    expect(a.allow('k')).toBe(true); // 1 of 3, 1 of 2
    const state = slotBaseOf(a.handle.table, 'k') + (new Int32Array(a.handle.table)[H_STATE_OFFSET] as number);
    const admitted = interleaved(a.handle.table, state + 1, () => {
      expect(b.allow('k')).toBe(true); // 2 of 3, 2 of 2: a's second commit now refuses
      expect(b.penalty('k', 0).remaining).toBe(0); // a probe: nothing written
    }, () => a.allow('k'));
    expect(admitted).toBe(false);
    expect(b.tryAcquire('k', 0).limits?.[0]?.remaining).toBe(1);
  });

  // A reservation counted in the next window leaves the key refusing until that window starts;
  // a reward that empties it must say so (resetAfterMs). The fixed window reported 0; the sliding
  // window's previous count already kept its report above 0 here (its formula had the same gap,
  // for a later window with no previous count).
  it.each([
    ['a fixed window', 'fixed-window'],
    ['a sliding window', 'sliding-window'],
  ] as const)('%s: a reward that empties a reservation\'s later window reports when the key is fresh again', (_name, algorithm) => {
    // The fixed window's next place is a second away, in the next window; the sliding window's
    // 90 s away (the 2 weigh on the next window until half of it has passed), in the one after.
    const clock = new ManualClock(algorithm === 'fixed-window' ? 59_000 : 60_000);
    const l = new RateLimiter({ limit: perMinute(2), algorithm, maxKeys: 4, clock });
    expect(l.allow('k', 2)).toBe(true);
    const wait = l.reserve('k', { cost: 1, maxWaitMs: 120_000 }).delayMs;
    expect(wait).toBe(algorithm === 'fixed-window' ? 1_000 : 90_000);
    const s = l.reward('k', 1);
    expect(l.tryAcquire('k').retryAfterMs).toBeGreaterThan(0); // still refused until the later window starts
    expect(s?.resetAfterMs).toBeGreaterThan(0);
  });
});
