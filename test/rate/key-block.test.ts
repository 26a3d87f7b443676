// block and unblock on a one-limit GCRA RateLimiter, at both widths: a block raises the key's
// debt to what refuses every request until its end (never lowering a longer one), as one more
// mode of the engine's compare-and-swap loop. Exact on a ManualClock; refused by name elsewhere.
import { describe, expect, it } from 'vitest';
import { ManualClock, perMinute, perSecond, RateLimiter, TableFullError } from '../../src/index.js';
import { raceBlocks } from '../helpers/block-race.js';

const DAY = 86_400_000;

const WIDTHS = [
  ['width 32', perSecond(10)],
  ['width 64', { permits: 10, periodMs: 1000, burst: 2 ** 40 }],
] as const;

describe.each(WIDTHS)('block and unblock (%s)', (_name, limit) => {
  const make = () => {
    const clock = new ManualClock(1_000_000);
    const l = new RateLimiter({ limit, maxKeys: 8, clock });
    return { clock, l, burst: l.limit.burst };
  };

  it('refuses every request until the block ends, with the time left as retryAfterMs; one passes at its end', () => {
    const { clock, l } = make();
    expect(l.allow('k')).toBe(true);
    const state = l.block('k', 1_500);
    expect(state.remaining).toBe(0);
    const first = l.tryAcquire('k');
    expect(first.allowed).toBe(false);
    expect(first.retryAfterMs).toBeGreaterThanOrEqual(1_500);
    expect(first.retryAfterMs).toBeLessThan(1_500.01); // to the tick
    clock.advance(1_499.99);
    expect(l.tryAcquire('k')).toMatchObject({ allowed: false });
    clock.advance(0.011);
    expect(l.allow('k')).toBe(true);
    expect(l.allow('k')).toBe(false); // the block's end is one admission, not a fresh burst
  });

  it('a shorter block leaves a longer one alone; a longer one extends it', () => {
    const { clock, l } = make();
    l.block('k', 5_000);
    const long = l.tryAcquire('k').retryAfterMs;
    l.block('k', 1_000);
    // Kept, one tick longer (10 ns at width 32; this width-64 limit's tick is 1 us): a block
    // always writes, so that a decision pending on the state before it cannot land over it
    // (test/rate/pending-stamp.test.ts), nor a refund that read the word before it
    // (test/rate/reservation-reset.test.ts).
    const kept = l.tryAcquire('k').retryAfterMs;
    expect(kept).toBeGreaterThan(long);
    expect(kept - long).toBeLessThan(l.width === 64 ? 1.001e-3 : 1.001e-5);
    l.block('k', 9_000);
    expect(l.tryAcquire('k').retryAfterMs).toBeGreaterThanOrEqual(9_000);
    clock.advance(8_999);
    expect(l.allow('k')).toBe(false);
  });

  it('unblock: the key reads as fresh at once; false when it owed nothing', () => {
    const { l, burst } = make();
    expect(l.unblock('k')).toBe(false);
    l.block('k', 5_000);
    expect(l.unblock('k')).toBe(true);
    expect(l.get('k')).toEqual({ remaining: Math.min(burst, 2 ** 40), resetAfterMs: 0 });
    expect(l.allow('k')).toBe(true);
  });

  it('a block of a key never seen inserts it; after a block, requests pass at the limit\'s rate', () => {
    const { clock, l } = make();
    expect(l.get('new')).toBeNull();
    l.block('new', 2_000);
    expect(l.get('new')?.remaining).toBe(0);
    clock.advance(2_000.01);
    expect(l.allow('new')).toBe(true);
    expect(l.allow('new')).toBe(false);
    clock.advance(100); // one interval
    expect(l.allow('new')).toBe(true);
  });

  it('bad input is refused by name and changes nothing', () => {
    const { l, burst } = make();
    l.allow('k');
    expect(() => l.block('k', -1)).toThrow(/ms must be 0 to 2\^53, got -1/);
    expect(() => l.block('k', Number.NaN)).toThrow(RangeError);
    expect(() => l.block('k', '5' as unknown as number)).toThrow(/ms must be a number, got "5"/);
    expect(() => l.block('', 5)).toThrow(TypeError);
    expect(() => l.unblock(7 as unknown as string)).toThrow(TypeError);
    expect(l.get('k')).toMatchObject({ remaining: burst - 1 });
  });
});

describe('blocks of days: maxBlockMs', () => {
  it('found: a 30-day block at width 32 does not fit; RangeError naming maxBlockMs, nothing written', () => {
    const l = new RateLimiter({ limit: perSecond(10), maxKeys: 8, clock: new ManualClock(0) });
    expect(l.width).toBe(32);
    expect(() => l.block('k', 30 * DAY)).toThrow(/longer than this limiter's key state holds \([\d.]+ ms at its width; make the limiter with a larger maxBlockMs\); nothing was written/);
    expect(l.get('k')).toEqual({ remaining: 10, resetAfterMs: 0 }); // the key took a slot, and nothing more
  });

  it.each([
    ['perSecond(10)', perSecond(10)],
    ['perMinute(1)', perMinute(1)],
    ['1,000 a ms, burst 10', { permits: 1_000, periodMs: 1, burst: 10 }],
    ['7 per 3 s', { permits: 7, periodMs: 3_000 }],
    ['3 a ms (its own width-64 tick, 0.1 ps, holds 9 days: a coarser one is taken)', { permits: 3, periodMs: 1 }],
  ])('maxBlockMs 30 days widens %s where 32 bits cannot hold it, and a 30-day block holds, also through attach', (_name, limit) => {
    const clock = new ManualClock(0);
    const l = new RateLimiter({ limit, maxKeys: 8, clock, maxBlockMs: 30 * DAY });
    l.block('k', 30 * DAY);
    const d = l.tryAcquire('k');
    expect(d.allowed).toBe(false);
    expect(d.retryAfterMs).toBeGreaterThanOrEqual(30 * DAY);
    expect(d.retryAfterMs).toBeLessThan(30 * DAY + 0.01);
    const other = RateLimiter.attach(l.handle, { clock });
    expect(other.width).toBe(l.width);
    clock.advance(30 * DAY - 1);
    expect(other.allow('k')).toBe(false);
    clock.advance(1.01);
    expect(other.allow('k')).toBe(true);
  });

  it('stays at width 32 when 32 bits hold the block', () => {
    const l = new RateLimiter({ limit: perMinute(1), maxKeys: 8, maxBlockMs: 60_000 });
    expect(l.width).toBe(32);
  });

  it('bad maxBlockMs is refused by name', () => {
    expect(() => new RateLimiter({ limit: perSecond(1), maxKeys: 8, maxBlockMs: -5 })).toThrow(/options.maxBlockMs must be 0 to 2\^53 ms, got -5/);
    expect(() => new RateLimiter({ limit: perSecond(1), maxKeys: 8, maxBlockMs: '1' as unknown as number })).toThrow(/options.maxBlockMs must be a number/);
    expect(() => new RateLimiter({ limit: perMinute(1), algorithm: 'sliding-log', maxKeys: 8, maxBlockMs: 1_000 })).toThrow(TypeError);
  });

  it.each([
    ['several limits', { limit: [perSecond(10), perMinute(100)] }],
    ['a global cap', { limit: perSecond(10), globalLimit: perSecond(100) }],
  ])('%s: block and unblock work (limits-controls.test.ts, limits-give-back.test.ts)', (_name, options) => {
    const l = new RateLimiter({ ...options, maxKeys: 8, clock: new ManualClock(0) });
    expect(l.block('k', 5_000).remaining).toBe(0);
    expect(l.allow('k')).toBe(false);
    expect(l.unblock('k')).toBe(true);
    expect(l.allow('k')).toBe(true);
  });

  it('a window without maxBlockMs: block says what it needs; unblock gives everything back, as reset (window-reset.test.ts)', () => {
    const l = new RateLimiter({ limit: perMinute(10), algorithm: 'fixed-window', maxKeys: 8, clock: new ManualClock(0) });
    expect(() => l.block('k', 1)).toThrow(/block\(\) on a RateLimiter of 'fixed-window' needs a block word in each key's state \(a window holds one window's count, not a time to refuse until\): make the limiter with maxBlockMs/);
    expect(l.unblock('k')).toBe(false);
    l.allow('k', 10);
    expect(l.unblock('k')).toBe(true);
    expect(l.allow('k', 10)).toBe(true);
  });

  it('a full table: TableFullError for a new key', () => {
    const l = new RateLimiter({ limit: perMinute(1), maxKeys: 1, forceHash: 3, clock: new ManualClock(0) });
    for (let i = 0; l.allow(`k${i}`); i++);
    expect(() => l.block('new', 1)).toThrow(TableFullError);
  });
});

describe('block on 4 racing workers', () => {
  it.each([
    ['started together', 10],
    ['one parked at a compare-and-swap while the others run (a lost race forced)', 0],
  ])('no admission after a worker\'s own block returned, at most the burst in all, the longest block left: %s', async (_name, tries) => {
    // A frozen clock: nothing drains. Each worker spends, blocks the key for its own length
    // halfway, and spends on. Whatever the order: every request a worker makes after its block
    // returned is refused (the debt only rose since), the key admits at most its burst, and the
    // state left is the longest block's. Run again until the workers lost races (raceUntilLost).
    const forced = await raceBlocks({ limit: { permits: 10, periodMs: 1_000, burst: 40 } }, 40, tries);
    if (tries === 0) expect(forced).toBe(true);
  }, 60_000);
});
