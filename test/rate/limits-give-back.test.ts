// reward, reset and unblock on a RateLimiter of several GCRA limits, or one under a global cap
// (LockFreeEngine.giveBack under the key's give-back guard, rate/give-back-guard.ts): every key
// limit gives back, never below fresh; a cap keeps its spend. The guard keeps a decision that
// takes back its first commits (a later limit, or the cap, refused) from taking back a spend a
// give-back already gave back. Exact on a ManualClock; the undo's schedule staged; raced on 4
// workers.
import { describe, expect, it } from 'vitest';
import { ManualClock, perMinute, perSecond, RateLimiter } from '../../src/index.js';
import { GLOBAL_HEADER_WORDS, H_GLOBAL_BASE, H_STATE_OFFSET } from '../../src/table/layout.js';
import { raceUntilLost } from '../helpers/workers.js';
import { slotBaseOf } from '../helpers/slots.js';
import { interleaved } from '../helpers/atomics-spy.js';

const DAY = 86_400_000;
const LIMITS = [perSecond(10), perMinute(100)];

describe.each([
  ['width 32', {}],
  ['width 64 (maxBlockMs 30 days)', { maxBlockMs: 30 * DAY }],
])('reward, reset and unblock on two GCRA limits (%s)', (_name, options) => {
  const make = () => {
    const clock = new ManualClock(1_000_000);
    return { clock, l: new RateLimiter({ limit: LIMITS, maxKeys: 8, clock, ...options }) };
  };

  it('a reward gives back on every limit, each never below fresh', () => {
    const { clock, l } = make();
    for (let i = 0; i < 10; i++) expect(l.allow('k')).toBe(true);
    expect(l.allow('k')).toBe(false);
    clock.advance(500); // the per-second limit drains 5 intervals; the per-minute one owes 10 still
    const after = l.reward('k', 7);
    // per second: 5 intervals owed, 7 given back: fresh (10 left); per minute: 10 intervals of
    // 600 ms owed, less 500 ms drained, less 7 given back: 1,300 ms (97 left).
    expect(after?.remaining).toBe(10);
    const d = l.tryAcquire('k', 0);
    expect(d.limits?.[0]).toEqual({ remaining: 10, resetAfterMs: 0 });
    expect(d.limits?.[1]?.remaining).toBe(97);
    expect(d.limits?.[1]?.resetAfterMs).toBeCloseTo(1_300, 3);
    for (let i = 0; i < 10; i++) expect(l.allow('k')).toBe(true);
    expect(l.allow('k')).toBe(false);
  });

  it('reset and unblock give back everything; true only when the key owed anything', () => {
    const { l } = make();
    l.allow('k', 4);
    expect(l.reset('k')).toBe(true);
    expect(l.reset('k')).toBe(false);
    expect(l.get('k')).toMatchObject({ remaining: 10, resetAfterMs: 0 });
    l.block('k', 5_000);
    expect(l.allow('k')).toBe(false);
    expect(l.unblock('k')).toBe(true);
    expect(l.allow('k', 10)).toBe(true);
  });

  it('a key the table does not hold: null and false, and nothing is inserted', () => {
    const { l } = make();
    expect(l.reward('nobody', 1)).toBeNull();
    expect(l.reset('nobody')).toBe(false);
    expect(l.unblock('nobody')).toBe(false);
    expect(l.stats().liveKeys).toBe(0);
  });

  it('bad input is refused by name and changes nothing', () => {
    const { l } = make();
    l.allow('k', 3);
    expect(() => l.reward('k', -1)).toThrow(/cost must be/);
    expect(() => l.reward('k', Number.NaN)).toThrow(/cost must be/);
    expect(() => l.reward(7 as unknown as string, 1)).toThrow(TypeError);
    expect(() => l.reset('' as string)).toThrow(TypeError);
    expect(l.get('k')?.remaining).toBe(7);
  });
});

describe('a give-back and a global cap', () => {
  it('the key limit gives back; the cap keeps what it spent', () => {
    const clock = new ManualClock(0);
    const l = new RateLimiter({ limit: perMinute(2), globalLimit: perMinute(3), maxKeys: 8, clock });
    expect(l.allow('k')).toBe(true);
    expect(l.allow('k')).toBe(true);
    expect(l.allow('k')).toBe(false);
    expect(l.reward('k', 1)?.remaining).toBe(1);
    expect(l.allow('k')).toBe(true); // the cap's third
    expect(l.reset('k')).toBe(true);
    expect(l.allow('k')).toBe(false); // the key is fresh, the cap is full
    expect(l.tryAcquire('k').reason).toBe('global-limit');
  });
});

describe('found: a decision that took back its first commit after a reward gave it back', () => {
  // Thread A admits 'k' on its first part and commits it (k's first limit: fresh, to one interval
  // ahead). Before A commits its next part, B rewards k (giving A's tentative spend back: the key
  // reads fresh) and B's own check of k is admitted, writing the very word A wrote; then the next
  // part refuses A. A's undo, a compareExchange from the word it wrote, would land on B's spend:
  // B admitted on a key that reads fresh. The give-back guard keeps A's spend instead.
  it('two limits: the second refuses A after B spent its last', () => {
    const clock = new ManualClock(1_000_000);
    const a = new RateLimiter({ limit: [perMinute(10), perMinute(1)], maxKeys: 4, clock });
    const b = RateLimiter.attach(a.handle, { clock });
    a.penalty('k', 1); // k is in the table, and fresh again
    a.reset('k');
    const state = slotBaseOf(a.handle.table, 'k') + (new Int32Array(a.handle.table)[H_STATE_OFFSET] as number);
    const admitted = interleaved(a.handle.table, state + 1, () => {
      expect(b.reward('k', 1)).not.toBeNull();
      expect(b.allow('k')).toBe(true);
    }, () => a.allow('k'));
    expect(admitted).toBe(false);
    // B's admission stays on the first limit (A's spend, kept, is the same interval): 9 left.
    expect(b.tryAcquire('k', 0).limits?.[0]?.remaining).toBe(9);
  });

  it('a global cap: the cap refuses A after B and other keys spent its last', () => {
    const clock = new ManualClock(1_000_000);
    const a = new RateLimiter({ limit: perMinute(2), globalLimit: perSecond(3), maxKeys: 8, clock });
    const b = RateLimiter.attach(a.handle, { clock });
    const w = new Int32Array(a.handle.table);
    const cap = (w[H_GLOBAL_BASE] as number) + GLOBAL_HEADER_WORDS;
    a.penalty('k', 1); // k is in the table, and fresh again
    a.reset('k');
    const admitted = interleaved(a.handle.table, cap, () => {
      expect(b.reward('k', 1)).not.toBeNull();
      expect(b.allow('k')).toBe(true);
      expect(b.allow('x')).toBe(true);
      expect(b.allow('y')).toBe(true);
    }, () => a.allow('k'));
    expect(admitted).toBe(false);
    clock.advance(1_000); // the cap drains; k's limit (an interval of 30 s) owes B's admission
    expect(b.get('k')?.remaining).toBe(1);
  });
});

describe('found: a decision between a reward\'s writes of two limits', () => {
  // B rewards k by 2 on both limits: its one snapshot has each limit owing one interval (the
  // set-up's admission), so each is written fresh (clamped). Between its write of the first
  // limit and of the second, A's check of k is admitted: the first limit has room again, the
  // second still holds the set-up's spend and has room for one more. B's write of the second
  // limit loses its race. Decided again on what A wrote, the reward gave A's spend back too
  // (never below fresh): the second limit read fresh, though A, which saw the reward on the
  // first limit, came after it; two more requests a second apart were admitted where the exact
  // order (reward, then A) admits one. Each limit is now written once from the reward's
  // snapshot: the second keeps what A wrote, and the reward gives nothing back there.
  it('the second limit keeps its spend', () => {
    const clock = new ManualClock(1_000_000);
    const a = new RateLimiter({ limit: [perSecond(1), perMinute(2)], maxKeys: 4, clock });
    const b = RateLimiter.attach(a.handle, { clock });
    expect(a.allow('k')).toBe(true);
    const state = slotBaseOf(a.handle.table, 'k') + (new Int32Array(a.handle.table)[H_STATE_OFFSET] as number);
    expect(interleaved(a.handle.table, state + 1, () => expect(a.allow('k')).toBe(true), () => b.reward('k', 2))).not.toBeNull();
    let admitted = 0;
    for (let i = 0; i < 2; i++) {
      clock.advance(1_000); // the first limit (one a second) has room again
      if (b.allow('k')) admitted++;
    }
    expect(admitted).toBeLessThanOrEqual(1);
  });
});

describe('give-backs racing decisions, 4 workers', () => {
  it.each([
    ['two limits, the second binding', { limit: [{ permits: 1, periodMs: 1_000, burst: 40 }, { permits: 1, periodMs: 1_000, burst: 30 }] }],
    ['a global cap', { limit: { permits: 1, periodMs: 1_000, burst: 30 }, globalLimit: { permits: 1, periodMs: 1_000, burst: 10_000 } }],
  ])('%s: no spend lost beyond what rewards gave back, no admission past the bound', async (_name, options) => {
    // A frozen clock: nothing drains. Every worker spends k, penalizes it every third try and
    // rewards it every second (fixtures/worker.mjs 'controls-race'). On each key limit the debt
    // left is at least admissions + penalties - rewards (a spend an undo took back wrongly would
    // make it less), and admissions never pass the burst plus the rewards.
    type Reply = { admitted: number; penalties: number; rewards: number; casRetries: number };
    await raceUntilLost<Reply>(() => {
      const l = new RateLimiter({ ...options, maxKeys: 8, clock: new ManualClock(0) });
      const bursts = l.limits.map((x) => x.burst);
      return {
        workers: Array.from({ length: 4 }, (_, id) => ({ mode: 'controls-race', handle: l.handle, id, key: 'k', attempts: 300 })),
        check(replies) {
          const sum = (f: (r: Reply) => number) => replies.reduce((n, r) => n + f(r), 0);
          const [admitted, penalties, rewards] = [sum((r) => r.admitted), sum((r) => r.penalties), sum((r) => r.rewards)];
          const left = l.tryAcquire('k', 0);
          const owed = l.limits.length === 1 ? [left.resetAfterMs] : (left.limits ?? []).map((s) => s.resetAfterMs);
          for (const ms of owed) expect(ms / 1_000).toBeGreaterThanOrEqual(admitted + penalties - rewards);
          expect(admitted).toBeLessThanOrEqual(Math.min(...bursts) + rewards);
          expect(admitted).toBeGreaterThan(Math.min(...bursts)); // the rewards let more through
        },
      };
    });
  }, 60_000);
});
