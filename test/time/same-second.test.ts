import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { sameSecondUntil, secondsAt } from '../../src/time/stamps.js';

// The lock-free engine keeps a reading's second with the readings it holds for, and compares
// instead of dividing (sameSecondUntil): every reading in that span must have the same second as
// secondsAt computes it, at both ends, at the boundaries and in between.
describe('sameSecondUntil', () => {
  const holds = (ms: number): void => {
    const sec = secondsAt(ms);
    const to = sameSecondUntil(ms, sec);
    expect(to).toBeGreaterThanOrEqual(ms);
    expect(secondsAt(to)).toBe(sec);
    for (let i = 1; i < 8; i++) expect(secondsAt(ms + ((to - ms) * i) / 8)).toBe(sec);
  };

  it('holds for readings of performance.now() and Date.now() sizes, and spans nearly the whole second', () => {
    fc.assert(fc.property(fc.double({ min: 0, max: 2 ** 41, noNaN: true }), (ms) => {
      holds(ms);
      // Not a trivial span: from a reading in the first half of its second, past its 999th ms.
      const sec = secondsAt(ms);
      if (ms - sec * 1000 < 500 && sec < 2 ** 30) expect(sameSecondUntil(ms, sec) - sec * 1000).toBeGreaterThan(999);
    }), { numRuns: 5_000 });
  });

  it('holds at and around every kind of second boundary', () => {
    for (const sec of [0, 1, 999, 86_400, 1_764_000_000, 2 ** 31, 2 ** 40 - 1]) {
      const edge = sec * 1000;
      for (const ms of [edge, edge + 1e-9, edge - 1e-9, edge + 999.999, edge + 999.9999999, Math.max(0, edge - 1)]) holds(ms);
      // The next second's first reading is outside the span of any reading of this one.
      expect(sameSecondUntil(edge, sec)).toBeLessThan((sec + 1) * 1000);
    }
  });

  it('spans nothing past the reading where it cannot be sure: negative seconds, seconds past 2^40, NaN', () => {
    expect(sameSecondUntil(-5, secondsAt(-5))).toBe(-5);
    const huge = 2 ** 52;
    expect(sameSecondUntil(huge, secondsAt(huge))).toBe(huge);
    expect(Number.isNaN(sameSecondUntil(Number.NaN, secondsAt(Number.NaN)))).toBe(true);
  });
});
