// PolicyLimiter.penalty, reward, block and unblock: under the pair's lock, as its decisions are,
// every limit of the pair's GCRA rule spends the penalty, gives the reward back (never below
// fresh), or is raised to refuse until the block's end (after the pair is shaped under its
// current rule); unblock gives everything back, as reset does. Exact on a ManualClock; raced on
// 4 workers.
import { describe, expect, it } from 'vitest';
import { ManualClock, perMinute, perSecond, PolicyLimiter, TableFullError } from '../../src/index.js';
import { H_STATE_OFFSET, S_TAT } from '../../src/table/layout.js';
import { FREE } from '../../src/table/slot-lock.js';
import { withAtomicsHooks } from '../helpers/atomics-spy.js';
import { slotBaseOf } from '../helpers/slots.js';
import { raceUntilLost } from '../helpers/workers.js';

const DAY = 86_400_000;
const pair = { user: 'u', api: 'x' };

function make(rules = [{ limit: [perSecond(10), perMinute(100)] }]) {
  const clock = new ManualClock(1_000_000);
  return { clock, policy: new PolicyLimiter({ rules, maxKeys: 8, clock }) };
}

const fixture = new URL('../fixtures/policy-reset-worker.mjs', import.meta.url);

/**
 * Races of 4 workers (policy-reset-worker.mjs, each with its own `extra` data) on one pair of a
 * rule of two limits (the first with `burst`), on a frozen ManualClock, until `raced` says they
 * overlapped (raceUntilLost: forced if a busy machine ran them one after another); `check` sees
 * each round's limiter and replies.
 */
async function race<R>(
  burst: number, extra: object[], check: (policy: PolicyLimiter, r: R[]) => void, raced: (r: R[]) => boolean, algorithm?: 'fixed-window' | 'sliding-window',
  maxBlockMs?: number,
): Promise<void> {
  // A window rule: `burst` permits a second (a window admits its permits at once).
  const first = algorithm === undefined ? { permits: 10, periodMs: 1_000, burst } : { permits: burst, periodMs: 1_000 };
  await raceUntilLost<R>(() => {
    const policy = new PolicyLimiter({
      rules: [{ limit: [first, perMinute(6_000)], ...(algorithm ? { algorithm } : {}) }], maxKeys: 8, clock: new ManualClock(0),
      ...(maxBlockMs === undefined ? {} : { maxBlockMs }),
    });
    return {
      fixture,
      workers: extra.map((more) => ({ handle: policy.handle, user: 'u', api: 'x', attempts: 400, ...more })),
      check: (r) => check(policy, r),
      raced,
    };
  });
}

describe('PolicyLimiter penalty, reward, block and unblock', () => {
  it('a penalty spends on every limit of the rule, even past the burst', () => {
    const { clock, policy } = make();
    expect(policy.allow(pair)).toBe(true);
    expect(policy.penalty(pair, 12).remaining).toBe(0); // 13 spent: past perSecond(10)'s burst
    const d = policy.tryAcquire(pair);
    expect(d.allowed).toBe(false);
    expect(d.limits?.[0]?.resetAfterMs).toBeCloseTo(1_300, 3);
    expect(d.limits?.[1]?.resetAfterMs).toBeCloseTo(7_800, 3);
    clock.advance(399.9);
    expect(policy.allow(pair)).toBe(false);
    clock.advance(0.2);
    expect(policy.allow(pair)).toBe(true);
  });

  it('a block refuses until its end, then one request passes; a shorter block keeps a longer one; 30 days hold', () => {
    const { clock, policy } = make();
    expect(policy.block(pair, 5_000).remaining).toBe(0);
    const d = policy.tryAcquire(pair);
    expect(d.allowed).toBe(false);
    expect(d.retryAfterMs).toBeGreaterThanOrEqual(5_000);
    expect(d.retryAfterMs).toBeLessThan(5_000.01);
    policy.block(pair, 1_000);
    expect(policy.tryAcquire(pair).retryAfterMs - d.retryAfterMs).toBeLessThan(0.01);
    clock.advance(4_999.99);
    expect(policy.allow(pair)).toBe(false);
    clock.advance(0.02); // the block and the second one's tick, at ticks of 1 us
    expect(policy.allow(pair)).toBe(true);
    expect(policy.allow(pair)).toBe(false); // the block's end is one admission, not a fresh burst
    policy.block({ user: 'v', api: 'x' }, 30 * DAY); // the rules' 64-bit states hold it
    const other = PolicyLimiter.attach(policy.handle, { clock });
    expect(other.tryAcquire({ user: 'v', api: 'x' }).retryAfterMs).toBeGreaterThanOrEqual(30 * DAY);
  });

  it('unblock gives everything back: the pair reads as fresh; false for a pair that owed nothing', () => {
    const { policy } = make();
    expect(policy.unblock(pair)).toBe(false);
    policy.block(pair, 60_000);
    expect(policy.unblock(pair)).toBe(true);
    expect(policy.get(pair)?.remaining).toBe(10);
    expect(policy.allow(pair)).toBe(true);
  });

  it('a reward gives back on every limit, never below fresh, and does not insert an unknown pair', () => {
    const { clock, policy } = make();
    expect(policy.reward(pair, 3)).toBeNull();
    expect(policy.stats().liveKeys).toBe(0);
    for (let i = 0; i < 10; i++) expect(policy.allow(pair)).toBe(true);
    expect(policy.allow(pair)).toBe(false);
    const after = policy.reward(pair, 3);
    expect(after?.remaining).toBe(3);
    const d = policy.tryAcquire(pair);
    expect(d.limits?.map((l) => l.remaining)).toEqual([2, 92]); // 10 spent, 3 given back, 1 spent: 8 owed on each
    expect(policy.allow(pair)).toBe(true);
    expect(policy.allow(pair)).toBe(true);
    expect(policy.allow(pair)).toBe(false);
    // Never below fresh: a reward past the debt leaves the pair as a fresh one, not with more.
    expect(policy.reward(pair, 1_000)?.remaining).toBe(10);
    let n = 0;
    while (policy.allow(pair)) n++;
    expect(n).toBe(10);
    clock.advance(60_000);
    expect(policy.reward(pair, 5)?.remaining).toBe(10); // owed nothing by now: nothing to give
  });

  it('a reward at width 64 (a rule whose state needs 64 bits) gives back the same', () => {
    const { policy } = make([{ limit: [perSecond(10), { permits: 1, periodMs: 40 * DAY }] }]);
    expect(policy.allow(pair)).toBe(true);
    expect(policy.allow(pair)).toBe(false); // the 40-day limit: one a period
    expect(policy.reward(pair, 1)?.remaining).toBe(1);
    expect(policy.allow(pair)).toBe(true);
    expect(policy.allow(pair)).toBe(false);
  });

  it('another algorithm, bad input, a state that cannot hold it, a full table: errors by name, nothing written', () => {
    const { policy } = make([{ limit: [perSecond(10)] }, { api: 'win', algorithm: 'fixed-window', limit: perMinute(5) } as never]);
    expect(() => policy.block({ user: 'u', api: 'win' }, 1_000)).toThrow(/block\(\) on a 'fixed-window' rule needs a block word .* make the PolicyLimiter with maxBlockMs/);
    expect(policy.stats().liveKeys).toBe(0); // penalty and reward work on windows (below)
    expect(() => policy.block(pair, -1)).toThrow(/ms must be 0 to 2\^53, got -1/);
    expect(() => policy.block(pair, 'soon' as never)).toThrow(/ms must be a number/);
    expect(() => policy.penalty(pair, -1)).toThrow(RangeError);
    expect(() => policy.reward(pair, -1)).toThrow(RangeError);
    expect(() => policy.reward(pair, 1.5)).toThrow(RangeError);
    expect(() => policy.block(pair, 2 ** 53)).toThrow(/block\(.*\) is more than the pair's state can hold; nothing was written/);
    expect(policy.get(pair)?.remaining ?? 10).toBe(10);
    const full = new PolicyLimiter({ rules: [{ limit: perMinute(1) }], maxKeys: 1, clock: new ManualClock(0) });
    for (let i = 0; i < 1_000 && full.allow({ user: `u${i}`, api: 'x' }); i++);
    expect(() => full.block({ user: 'new', api: 'x' }, 1)).toThrow(TableFullError);
  });

  it.each([
    ['GCRA', undefined],
    ['two fixed windows, maxBlockMs', 'fixed-window'],
    ['two sliding windows, maxBlockMs', 'sliding-window'],
  ] as const)('4 workers spend and block one pair at once (%s): no admission after a worker\'s own block returned, at most the burst, the longest block left', async (_name, algorithm) => {
    const burst = 40;
    await race<{ admitted: number; after: number }>(burst, [1_500, 4_000, 900, 2_500].map((blockMs) => ({ blockMs })), (policy, r) => {
      for (const x of r) expect(x.after, 'admitted after its own block').toBe(0);
      expect(r.reduce((n, x) => n + x.admitted, 0)).toBeLessThanOrEqual(burst);
      const left = policy.tryAcquire(pair);
      expect(left.allowed).toBe(false);
      // GCRA's block ends a tick after 4 s; a window rule's on the whole second (the clock stands at 0).
      expect(left.retryAfterMs).toBeGreaterThanOrEqual(4_000);
      expect(left.retryAfterMs).toBeLessThan(4_000.01);
    },
    // Run one after another, the first worker would take the whole burst before its block and the
    // others nothing: admissions in two workers mean their spends and blocks overlapped.
    (r) => r.filter((x) => x.admitted > 0).length >= 2, algorithm, algorithm === undefined ? undefined : 30 * DAY);
  }, 60_000);

  it.each([
    ['GCRA', undefined],
    ['two fixed windows', 'fixed-window'],
    ['two sliding windows', 'sliding-window'],
  ] as const)('4 workers spend and reward one pair at once (%s): on a frozen clock, what each limit owes is exactly admissions less rewards', async (_name, algorithm) => {
    const burst = 40;
    // A forced round parks worker 0 after its first reward (raceUntilLost): its reward and the
    // others' spends and rewards are then in two workers.
    await race<{ admitted: number; rewards: number }>(burst, [2, 3, 2, 5].map((rewardEvery) => ({ rewardEvery, parkAfter: 'reward' })), (policy, r) => {
      const admitted = r.reduce((n, x) => n + x.admitted, 0);
      const rewards = r.reduce((n, x) => n + x.rewards, 0);
      // Every reward found debt (it follows an admission no other reward matched), so each
      // gave exactly one interval back on each limit: a reward lost or given twice shows here.
      const owed = admitted - rewards;
      expect(owed).toBeLessThanOrEqual(burst);
      const left = policy.get(pair);
      expect(left?.limits?.map((l) => l.remaining)).toEqual([burst - owed, 6_000 - owed]);
    },
    // Admissions in two workers past the burst mean their spends and rewards overlapped.
    (r) => r.reduce((n, x) => n + x.admitted, 0) > burst && r.filter((x) => x.rewards > 0).length >= 2, algorithm);
  }, 60_000);
});

describe('PolicyLimiter penalty and reward on window and log rules', () => {
  const other = { user: 'v', api: 'x' };
  it.each(['fixed-window', 'sliding-window', 'sliding-log'] as const)('%s: a penalty spends now, a reward gives back never below fresh; no block without maxBlockMs', (algorithm) => {
    const clock = new ManualClock(1_000_000);
    const policy = new PolicyLimiter({ rules: [{ limit: { permits: 5, periodMs: 1_000 }, algorithm }], maxKeys: 8, clock });
    expect(policy.allow(pair)).toBe(true);
    expect(policy.penalty(pair, 2).remaining).toBe(2);
    expect(policy.reward(pair, 1)?.remaining).toBe(3);
    expect(policy.allow(pair, 3)).toBe(true);
    expect(policy.allow(pair)).toBe(false);
    expect(policy.reward(pair, 10)?.remaining).toBe(5); // never below fresh
    expect(policy.allow(pair, 5)).toBe(true);
    expect(policy.reward(other, 1)).toBeNull(); // an unknown pair is not inserted
    expect(() => policy.block(pair, 1_000)).toThrow(algorithm === 'sliding-log'
      ? /block\(\) holds no block on a sliding log .* runs 'sliding-log'/
      : new RegExp(`block\\(\\) on a '${algorithm}' rule needs a block word .*maxBlockMs`));
    expect(policy.get(pair)?.remaining).toBe(0); // the block wrote nothing
    clock.advance(2_000);
    expect(policy.penalty(other, 100).remaining).toBe(0); // a new pair is inserted; past the window's permits
    expect(policy.allow(other)).toBe(false);
  });
});

describe('found by an attack: a control whose lock was taken over after its writes landed, the rules published again meanwhile', () => {
  // A holder whose lock was taken over after a stall finds it lost at the end and runs its try
  // again; the limits whose commit landed are not forced again (forceUnderLock counts them). The
  // same rules published again between the tries (new rule objects, the same shape) reset that
  // count, and the control was applied twice: a penalty of 2 spent 4, a reward of 2 gave back 4.
  // Staged: once the control's writes landed, the lock word is left free, B publishes the rules
  // again and probes the pair (recording the newer version on it).
  it.each(['penalty', 'reward'] as const)('%s is applied once', (method) => {
    const rules = [{ limit: [perSecond(10), perMinute(100)] }];
    const clock = new ManualClock(1_000_000);
    const a = new PolicyLimiter({ rules, maxKeys: 8, clock });
    const b = PolicyLimiter.attach(a.handle, { clock });
    const pair = { user: 'u', api: 'x' };
    expect(a.allow(pair, 6)).toBe(true); // [4, 94] left
    const table = a.handle.table;
    const base = slotBaseOf(table, '1:ux');
    const stateStart = base + (new Int32Array(table)[H_STATE_OFFSET] as number) + 1;
    let landed = false;
    let fired = false;
    withAtomicsHooks({
      // The pair's GCRA states are written through a BigInt64Array view: its indexes count 8 bytes.
      cas: (arr, i) => { if (!fired && arr.buffer === table && i * (arr.BYTES_PER_ELEMENT / 4) >= stateStart) landed = true; },
      load: (arr, i) => {
        if (fired || !landed || arr.buffer !== table || i !== base + S_TAT) return;
        fired = true;
        Atomics.store(new Int32Array(table), base + S_TAT, FREE);
        b.setRules(rules);
        b.tryAcquire(pair, 0);
      },
    }, () => (method === 'penalty' ? a.penalty(pair, 2) : a.reward(pair, 2)));
    expect(fired).toBe(true);
    expect(a.tryAcquire(pair, 0).limits?.map((s) => Math.round(s.remaining))).toEqual(method === 'penalty' ? [2, 92] : [6, 96]);
  });
});
