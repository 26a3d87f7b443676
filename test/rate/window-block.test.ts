// block and unblock on a RateLimiter of fixed or sliding windows made with maxBlockMs: every key
// keeps a block word after its limits (algorithms/block-until.ts), the first whole second at
// which it passes again. Exact on a ManualClock; 4 racing workers (helpers/block-race.ts); a block
// staged after a decision's load of the block word, and two blocks racing.
import { describe, expect, it } from 'vitest';
import { ManualClock, perMinute, RateLimiter, RateLimitTimeoutError, type Limit, type RateLimiterOptions } from '../../src/index.js';
import { H_STATE_OFFSET, H_STATE_WORDS } from '../../src/table/layout.js';
import { withAtomicsHooks } from '../helpers/atomics-spy.js';
import { slotBaseOf } from '../helpers/slots.js';
import { raceBlocks } from '../helpers/block-race.js';

const DAY = 86_400_000;
const MAX_BLOCK_MS = (2 ** 31 - 2) * 1000;

type Case = [name: string, options: Pick<RateLimiterOptions, 'algorithm' | 'limit' | 'globalLimit'>];
const CASES: Case[] = [
  ['a fixed window', { algorithm: 'fixed-window', limit: { permits: 3, periodMs: 1_000 } }],
  ['a sliding window', { algorithm: 'sliding-window', limit: { permits: 3, periodMs: 1_000 } }],
  ['two fixed windows', { algorithm: 'fixed-window', limit: [{ permits: 3, periodMs: 1_000 }, perMinute(100)] }],
  ['a fixed window of 64 bits', { algorithm: 'fixed-window', limit: { permits: 3, periodMs: 2 ** 31 } }],
  ['a fixed window under a cap', { algorithm: 'fixed-window', limit: { permits: 3, periodMs: 1_000 }, globalLimit: { permits: 1_000, periodMs: 1_000 } }],
  ['two sliding windows under a cap', {
    algorithm: 'sliding-window', limit: [{ permits: 3, periodMs: 1_000 }, perMinute(100)], globalLimit: { permits: 1_000, periodMs: 1_000 },
  }],
];

describe.each(CASES)('block and unblock on %s (maxBlockMs)', (_name, options) => {
  const make = (startMs = 10_000) => {
    const clock = new ManualClock(startMs);
    const l = new RateLimiter({ ...options, maxKeys: 8, clock, maxBlockMs: 30 * DAY });
    const n = Array.isArray(options.limit) ? options.limit.length : 1;
    const first = (Array.isArray(options.limit) ? options.limit[0] : options.limit) as Limit;
    return { clock, l, n, permits: first.permits, periodMs: first.periodMs };
  };

  it('refuses every request until the first whole second at or after its end, then passes as the windows allow', () => {
    const { clock, l, n } = make();
    expect(l.allow('k')).toBe(true);
    const state = l.block('k', 2_500); // at 10,000: refused until 13,000 (12,500 rounded up to a whole second)
    expect(state.remaining).toBe(0);
    expect(state.resetAfterMs).toBeGreaterThanOrEqual(3_000);
    const first = l.tryAcquire('k');
    expect(first.allowed).toBe(false);
    expect(first.reason).toBe('limited');
    expect(first.retryAfterMs).toBe(3_000);
    expect(first.remaining).toBe(0);
    if (n > 1) for (const s of first.limits ?? []) expect(s.remaining).toBe(0); // every limit's header item says so
    expect(l.get('k')?.remaining).toBe(0);
    clock.set(12_999.999);
    expect(l.allow('k')).toBe(false);
    expect(l.tryAcquire('k').retryAfterMs).toBeCloseTo(0.001, 6);
    clock.set(13_000);
    const after = l.tryAcquire('k');
    expect(after.allowed).toBe(true);
    expect(after.retryAfterMs).toBe(0);
  });

  it('a block never shortens a longer one; unblock and reset end it; penalty and reward leave it', () => {
    const { clock, l, permits } = make();
    l.block('k', 10_000);
    expect(l.block('k', 2_000).resetAfterMs).toBeGreaterThanOrEqual(10_000);
    l.penalty('k', 1);
    l.reward('k', 1);
    clock.set(15_000);
    expect(l.allow('k')).toBe(false);
    expect(l.tryAcquire('k').retryAfterMs).toBe(5_000);
    expect(l.unblock('k')).toBe(true);
    expect(l.allow('k', permits)).toBe(true); // fresh: the whole window
    l.block('k', 1_000);
    expect(l.reset('k')).toBe(true);
    expect(l.allow('k')).toBe(true);
    expect(l.unblock('k')).toBe(true); // the window still counts that admission
    expect(l.unblock('never')).toBe(false);
  });

  it('the counts a window held stay: the block adds nothing to them, and its end frees nothing', () => {
    const { clock, l, permits } = make(10_000);
    expect(l.allow('k', permits - 1)).toBe(true);
    l.block('k', 100); // to 11,000: the next window
    clock.set(10_900);
    expect(l.allow('k')).toBe(false);
    clock.set(11_000);
    // A fixed window starts afresh; a sliding one weighs the previous window's count.
    expect(l.tryAcquire('k').allowed).toBe(true);
  });

  it('holds 30 days and more; longer than the word holds is a RangeError that writes nothing', () => {
    const { clock, l } = make();
    l.block('k', 30 * DAY);
    clock.advance(30 * DAY - 1);
    expect(l.allow('k')).toBe(false);
    clock.advance(1);
    expect(l.allow('k')).toBe(true);
    const long = new RateLimiter({ ...options, maxKeys: 8, clock, maxBlockMs: MAX_BLOCK_MS });
    expect(() => long.block('k', MAX_BLOCK_MS + 1)).toThrow(/is longer than this limiter's key state holds \(2147483646000 ms\); nothing was written/);
    expect(long.get('k')).toBeNull();
    long.block('k', MAX_BLOCK_MS);
    clock.advance(MAX_BLOCK_MS - 1_000);
    expect(long.allow('k')).toBe(false);
    clock.advance(1_000);
    expect(long.allow('k')).toBe(true);
  });

  it('found: a key never blocked stays unblocked after a clock jump of 2^31 s; an ended block is cleared by the next admission', () => {
    // The word once held a fresh key's reading second, which read as a block of 68 years after
    // such a jump (found by an attack). It holds 0 until a block; the first admission after the
    // block ended writes 0 back, or the same jump would bring the ended block back.
    const { clock, l } = make(1_000);
    expect(l.allow('k')).toBe(true);
    clock.advance((2 ** 31 + 5) * 1000);
    expect(l.allow('k')).toBe(true);
    l.block('k', 1_000);
    clock.advance(1_000);
    expect(l.allow('k')).toBe(true);
    clock.advance((2 ** 31 + 10) * 1000);
    expect(l.allow('k')).toBe(true);
  });

  it('found: at a Date.now-sized reading, no request passes before the end (the end\'s second is counted as readings are)', () => {
    // Math.ceil((ms + blockMs) / 1000) ended a block made at 1.7e12 ms up to a microsecond early:
    // a reading's second is rounded up within an ulp below a whole second (secondsAt).
    let t = 1_700_000_000_000;
    const l = new RateLimiter({ ...options, maxKeys: 8, clock: { now: () => t }, maxBlockMs: DAY });
    l.block('k', 2_000);
    t = 1_700_000_001_999.999;
    expect(l.allow('k')).toBe(false);
    t = 1_700_000_002_000;
    expect(l.allow('k')).toBe(true);
  });

  it('a reservation acts at the block\'s end at the earliest, or is refused when that is past its wait', () => {
    const { l, periodMs } = make();
    l.block('k', 500); // to 11,000
    expect(() => l.reserve('k', { maxWaitMs: 500 })).toThrow(RateLimitTimeoutError);
    expect(l.reserve('k', { maxWaitMs: 5_000 }).actAtMs).toBe(11_000); // counted in the window it acts in
    // A window holds a reservation up to the reading's next window: a block past it refuses one.
    l.block('k', 2_500);
    if (periodMs === 1_000) expect(() => l.reserve('k', { maxWaitMs: 60_000 })).toThrow(RateLimitTimeoutError);
    else expect(l.reserve('k', { maxWaitMs: 60_000 }).actAtMs).toBe(13_000);
  });

  it('another thread\'s view sees it; a sweep keeps a blocked key', () => {
    const { clock, l } = make();
    l.block('k', 60_000);
    const other = RateLimiter.attach(l.handle, { clock });
    expect(other.allow('k')).toBe(false);
    clock.advance(10_000); // every window of the key has long ended: only the block keeps it
    expect(l.sweep()).toBe(0);
    expect(other.get('k')?.remaining).toBe(0);
    clock.advance(50_000);
    expect(l.sweep()).toBe(1); // idle once the block ended
  });

  it('a block that lands after a decision loaded the block word: the decision is ordered before it, and the block stays whole', () => {
    const { l } = make();
    const other = RateLimiter.attach(l.handle);
    expect(l.tryAcquire('k', 0).allowed).toBe(true); // the key exists
    const w = new Int32Array(l.handle.table);
    // The key's state words: its limits', then the block word, then the give-back epoch.
    const blockWord = slotBaseOf(l.handle.table, 'k') + (w[H_STATE_OFFSET] as number) + (w[H_STATE_WORDS] as number) - 2;
    let loads = 0;
    let fired = 0;
    const allowed = withAtomicsHooks({
      load: (array, index) => {
        // Right after the decision's load of the block word (at its next load): another thread blocks.
        if (array.buffer !== l.handle.table) return;
        if (index === blockWord) loads++;
        else if (loads === 1 && fired === 0) {
          fired = 1;
          other.block('k', 5_000);
        }
      },
    }, () => l.allow('k'));
    expect(fired).toBe(1);
    expect(allowed).toBe(true); // it began before the block's write
    expect(l.allow('k')).toBe(false); // and the block holds for every decision after it
    expect(l.tryAcquire('k').retryAfterMs).toBe(5_000);
    // Two blocks racing keep the longer: one loaded before a longer one landed is decided again on it.
    let raced = 0;
    withAtomicsHooks({
      cas: (array, index, expected, value) => {
        if (raced === 0 && array.buffer === l.handle.table && index === blockWord && expected !== value) {
          raced = 1;
          other.block('k', 60_000);
        }
      },
    }, () => l.block('k', 10_000));
    expect(raced).toBe(1);
    expect(l.tryAcquire('k').retryAfterMs).toBe(60_000);
  });
});

describe('block on windows: 4 racing workers', () => {
  it.each([
    ['a fixed window, started together', 'fixed-window', 10],
    ['a sliding window, started together', 'sliding-window', 10],
    ['a fixed window, one parked at a compare-and-swap while the others run (a lost race forced)', 'fixed-window', 0],
  ] as const)('no admission after a worker\'s own block returned, at most the window in all, the longest block left: %s', async (_name, algorithm, tries) => {
    // A frozen clock: one window. Each worker spends, blocks the key for its own length halfway,
    // and spends on. Whatever the order: every request a worker makes after its block returned is
    // refused, the window admits at most its permits, and the block left is the longest.
    const forced = await raceBlocks({ algorithm, limit: { permits: 40, periodMs: 1_000 }, maxBlockMs: DAY }, 40, tries);
    if (tries === 0) expect(forced).toBe(true);
  }, 60_000);
});
