// The lock-free engine's keys of one or two int32 limits (two 32-bit GCRA limits, one or two
// fixed windows, a GCRA limit under a cap served in batches): an admission in the second of this thread's own
// latest write to the key starts from that write (LockFreeEngine#allowOwn, #allowOwnTwo), as the
// one-limit path does. The interleavings are exact: the clock is shared by two instances of one limiter, and a
// one-shot hook runs B's calls inside A's clock read, which #allowOwn takes before anything else
// (no load precedes it), so B writes between A's decision and its commits. The explorer's
// own-write scenarios race the same path over every schedule, a commit of either limit overtaken
// included.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { perMinute, perSecond, type RateLimiterOptions } from '../../src/index.js';
import { hookedPair } from '../helpers/hooked-pair.js';
import { OWN_BACKOFF } from '../../src/rate/gcra-32.js';

function setup(options: Partial<RateLimiterOptions>) {
  return hookedPair({ limit: TIGHT, ...options });
}

// Three a minute binds; a thousand a second lets every request of these tests through, and so
// does a cap of a million a second (served in per-thread batches: rate/global-batch.ts).
const TIGHT = perMinute(3);
const LOOSE = perSecond(1000);
const CASES: [string, Partial<RateLimiterOptions>][] = [
  ['two GCRA limits, the first binds', { limit: [TIGHT, LOOSE] }],
  ['two GCRA limits, the second binds', { limit: [LOOSE, TIGHT] }],
  ['a fixed window', { limit: { permits: 3, periodMs: 60_000 }, algorithm: 'fixed-window' }],
  ['two fixed windows, the first binds', { limit: [{ permits: 3, periodMs: 60_000 }, { permits: 1000, periodMs: 1000 }], algorithm: 'fixed-window' }],
  ['two fixed windows, the second binds', { limit: [{ permits: 1000, periodMs: 1000 }, { permits: 3, periodMs: 60_000 }], algorithm: 'fixed-window' }],
  ['a GCRA limit under a cap served in batches', { limit: TIGHT, globalLimit: perSecond(1e6, { burst: 1e5 }) }],
];

afterEach(() => {
  vi.restoreAllMocks();
});

describe("the lock-free engine: an admission from the thread's own writes", () => {
  for (const [name, options] of CASES) {
    it(`${name}: loads no limit's word in the second of its own write`, () => {
      const s = setup(options);
      expect(s.a.allow('k')).toBe(true); // inserts, loads, writes the limits: the bound is second 5000
      const load = vi.spyOn(Atomics, 'load');
      expect(s.a.allow('k')).toBe(true);
      // One load: the reclaim guard after the commits (#settle).
      expect(load).toHaveBeenCalledTimes(1);
      expect(s.a.allow('k')).toBe(true);
      load.mockClear();
      expect(s.a.allow('k')).toBe(false);
      // A refusal from its own write: one load, of the refusing word, which still holds it.
      expect(load).toHaveBeenCalledTimes(1);
    });

    it(`${name}: after another instance wrote the key, decides from loads`, () => {
      const s = setup(options);
      expect(s.a.allow('k')).toBe(true);
      expect(s.b.allow('k')).toBe(true);
      const load = vi.spyOn(Atomics, 'load');
      expect(s.a.allow('k')).toBe(true); // its own write missed: the limits' words and lastSec loaded
      expect(load.mock.calls.length).toBeGreaterThan(2);
      expect(s.a.allow('k')).toBe(false); // three a minute: A, B, A
    });

    it(`${name}: counts what another instance spent between its reading and its commits`, () => {
      const s = setup(options);
      expect(s.a.allow('k')).toBe(true);
      s.arm(() => {
        expect(s.b.allow('k')).toBe(true);
      });
      // A's commit from its own write fails: one limit decides again from loads, two decide the
      // lost limit again at the same reading (LimitSet.commit).
      expect(s.a.allow('k')).toBe(true);
      expect(s.armed()).toBe(false);
      expect(s.a.allow('k'), 'three a minute: A, B, A').toBe(false);
      expect(s.b.allow('k')).toBe(false);
      expect(s.a.tryAcquire('k', 0).remaining).toBe(0);
    });

    it(`${name}: a refusal from its own write stands only while the word still holds it`, () => {
      const s = setup(options);
      for (let i = 0; i < 3; i++) expect(s.a.allow('k')).toBe(true);
      expect(s.a.allow('k')).toBe(false); // refused from A's own write
      s.arm(() => {
        expect(s.b.reward('k', 1)?.remaining).toBe(1);
      });
      expect(s.a.allow('k'), "B gave one back: A's own write no longer is the key's state").toBe(true);
      expect(s.a.allow('k')).toBe(false);
      expect(s.b.allow('k')).toBe(false);
    });

    it(`${name}: a new second decides from loads`, () => {
      const s = setup(options);
      expect(s.a.allow('k')).toBe(true);
      expect(s.a.allow('k')).toBe(true);
      s.advance(1000); // second 5001: A's bound is an older second
      s.arm(() => {
        expect(s.b.allow('k')).toBe(true);
      });
      // The reading in a new second: nothing from A's own writes; loads, then the clock again.
      expect(s.a.allow('k'), 'three a minute: A, A, B').toBe(false);
      expect(s.armed()).toBe(false);
    });
  }

  it('two limits: an admission that landed after a lost race loads for the next OWN_BACKOFF admissions of that key', () => {
    // Found: #allowOwnTwo decides a lost limit again and lands, and without the backoff the
    // next admission started from the stale own write again: two workers on shared keys lost
    // both races on almost every check (1.76 retries a check, bench/run.js workers, Node 26).
    const s = setup({ limit: [LOOSE, perMinute(100_000)] });
    const loadsOf = (f: () => void): number => {
      const load = vi.spyOn(Atomics, 'load');
      f();
      const n = load.mock.calls.length;
      load.mockRestore();
      return n;
    };
    expect(s.a.allow('k')).toBe(true);
    expect(loadsOf(() => expect(s.a.allow('k')).toBe(true))).toBe(1); // own writes: the guard alone
    expect(s.b.allow('k')).toBe(true); // A's writes are no longer the words
    const retries = s.a.stats().casRetries;
    // Both limits lost: each loaded, the slot's ctrl loaded (still the key's), decided again; the guard.
    expect(loadsOf(() => expect(s.a.allow('k')).toBe(true))).toBe(5);
    expect(s.a.stats().casRetries - retries).toBe(2);
    for (let i = 0; i < OWN_BACKOFF; i++) expect(loadsOf(() => expect(s.a.allow('k')).toBe(true))).toBeGreaterThan(1);
    expect(loadsOf(() => expect(s.a.allow('k')).toBe(true))).toBe(1); // from its own writes again
    expect(s.a.stats().casRetries - retries).toBe(2);
  });

  const SIX: [string, Partial<RateLimiterOptions>][] = [
    ['two GCRA limits', { limit: [{ permits: 6, periodMs: 60_000, burst: 6 }, { permits: 6, periodMs: 1_000, burst: 6 }] }],
    ['two fixed windows', { limit: [{ permits: 6, periodMs: 60_000 }, { permits: 6, periodMs: 1_000 }], algorithm: 'fixed-window' }],
  ];
  for (const [name, options] of SIX) {
    it(`${name}: found: a record older than a reclaim of its key spends nothing on the key's next incarnation`, () => {
      // A's record of k (its slot, ctrl and own writes) outlives a reset, a sweep that reclaims
      // k, and B's insert of k again into the same slot. A's commits from its own writes lose
      // their races there; the limit decided again must not be written into the new
      // incarnation before #settle sends A to it (found: one admission counted twice there,
      // on every limit).
      const s = setup(options);
      expect(s.a.allow('k')).toBe(true);
      expect(s.a.allow('k')).toBe(true);
      expect(s.b.reset('k')).toBe(true);
      expect(s.b.sweep()).toBe(1);
      expect(s.b.allow('k')).toBe(true);
      expect(s.a.allow('k')).toBe(true);
      // Two admissions since the reset: 4 of 6 left on each limit.
      expect(s.b.tryAcquire('k', 0).limits?.map((l) => l.remaining)).toEqual([4, 4]);
    });
  }
});
