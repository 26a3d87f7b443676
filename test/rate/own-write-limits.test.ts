// The lock-free engine's keys of one int32 limit (a fixed window, a GCRA limit under a cap served
// in batches; two limits take the load path, see below): an admission in the second of this thread's own
// latest write to the key starts from that write (LockFreeEngine#allowOwn), as the one-limit path
// does. The interleavings are exact: the clock is shared by two instances of one limiter, and a
// one-shot hook runs B's calls inside A's clock read, which #allowOwn takes before anything else
// (no load precedes it), so B writes between A's decision and its commits. The explorer's
// own-write scenarios race the same path over every schedule, a commit of either limit overtaken
// included.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { perMinute, perSecond, type RateLimiterOptions } from '../../src/index.js';
import { hookedPair } from '../helpers/hooked-pair.js';

function setup(options: Partial<RateLimiterOptions>) {
  return hookedPair({ limit: TIGHT, ...options });
}

// Three a minute binds; a thousand a second lets every request of these tests through, and so
// does a cap of a million a second (served in per-thread batches: rate/global-batch.ts).
const TIGHT = perMinute(3);
const LOOSE = perSecond(1000);
const CASES: [string, Partial<RateLimiterOptions>][] = [
  ['a fixed window', { limit: { permits: 3, periodMs: 60_000 }, algorithm: 'fixed-window' }],
  ['a GCRA limit under a cap served in batches', { limit: TIGHT, globalLimit: perSecond(1e6, { burst: 1e5 }) }],
];

afterEach(() => {
  vi.restoreAllMocks();
});

describe("the lock-free engine: an admission from the thread's own writes", () => {
  it('two GCRA limits decide from loads: the own path is for one limit', () => {
    // Found: with two, a lost CAS on the second took the first back, and a take-back that found
    // the first word moved on kept the spend, counted again when the decision ran again (a
    // penalty race on two limits, test/rate/limits-controls.test.ts, one interval over).
    for (const limit of [[TIGHT, LOOSE], [LOOSE, TIGHT]]) {
      const s = setup({ limit });
      expect(s.a.allow('k')).toBe(true);
      const load = vi.spyOn(Atomics, 'load');
      expect(s.a.allow('k')).toBe(true);
      expect(load.mock.calls.length).toBeGreaterThan(2); // both limits' words, then the guard
      load.mockRestore();
    }
  });

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
      expect(s.a.allow('k'), "A's commit from its own write fails: it decides again from loads").toBe(true);
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
});
