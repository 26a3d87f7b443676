// A key of two 32-bit GCRA limits: an admission in the second of this thread's own latest write
// to the key starts from that write (LockFreeEngine#allowOwn), as the one-limit path does. The
// interleavings are exact: the clock is shared by two instances of one limiter, and a one-shot
// hook runs B's calls inside A's clock read, which #allowOwn takes before anything else (no load
// precedes it), so B writes between A's decision and its commits. The explorer's multi-limit-own
// scenarios race the same path over every schedule, a commit of either limit overtaken included.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { perMinute, perSecond, RateLimiter, type Limit } from '../../src/index.js';

function setup(limit: Limit[]) {
  let t = 5_000_100; // ms: second 5000
  let hook: (() => void) | null = null;
  const clock = {
    now: (): number => {
      const h = hook;
      hook = null;
      h?.();
      return t;
    },
  };
  const a = new RateLimiter({ limit, maxKeys: 4, forceHash: 12345, clock });
  const b = RateLimiter.attach(a.handle, { clock });
  return { a, b, advance: (ms: number) => { t += ms; }, arm: (f: () => void) => { hook = f; }, armed: () => hook !== null };
}

// Three a minute binds; a thousand a second lets every request of these tests through.
const TIGHT = perMinute(3);
const LOOSE = perSecond(1000);
const ORDERS: [string, Limit[]][] = [
  ['the first limit binds', [TIGHT, LOOSE]],
  ['the second limit binds', [LOOSE, TIGHT]],
];

afterEach(() => {
  vi.restoreAllMocks();
});

describe("two GCRA limits: an admission from the thread's own writes", () => {
  for (const [name, limit] of ORDERS) {
    it(`${name}: loads neither limit's word in the second of its own write`, () => {
      const s = setup(limit);
      expect(s.a.allow('k')).toBe(true); // inserts, loads, writes both limits: the bound is second 5000
      const load = vi.spyOn(Atomics, 'load');
      expect(s.a.allow('k')).toBe(true);
      // One load: the reclaim guard after the commits (#settle). From loads it would be three.
      expect(load).toHaveBeenCalledTimes(1);
    });

    it(`${name}: counts what another instance spent between its reading and its commits`, () => {
      const s = setup(limit);
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
      const s = setup(limit);
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
      const s = setup(limit);
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
