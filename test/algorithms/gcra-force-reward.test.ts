// LimitAlgorithm.force with a negative cost (a reward, as PolicyLimiter.reward forces under the
// key's lock): it gives back that many intervals, never below a fresh key's state, at both widths
// of the GCRA state (PolicyLimiter's rules run the 64-bit one; the 32-bit one keeps the same
// contract). Driven directly on a word array: init, spend, force, commit, check.
import { describe, expect, it } from 'vitest';
import { compileLimit } from '../../src/algorithms/index.js';
import type { Moment, Verdict } from '../../src/algorithms/types.js';
import { perSecond } from '../../src/index.js';

const verdict = (): Verdict => ({ allowed: false, remaining: 0, waitMs: 0, resetMs: 0, latestMs: Infinity, detail: true });
const at = (ms: number): Moment => ({ ms, sec: Math.floor(ms / 1000) });

describe('GCRA force with a negative cost (a reward)', () => {
  for (const wide of [false, true]) {
    it(`width ${wide ? 64 : 32}: gives back, never below fresh`, () => {
      const a = compileLimit('gcra', perSecond(10), 'limit', 1, wide);
      const w = new Int32Array(8);
      const m = at(50_000);
      a.init(w, 2, m);
      const spend = (cost: number): boolean => {
        const v = verdict();
        a.load(w, 2);
        a.check(m, false, cost, v);
        if (v.allowed) expect(a.commit(w, 2, m)).toBe(true);
        return v.allowed;
      };
      const force = (cost: number): Verdict => {
        const v = verdict();
        a.load(w, 2);
        a.force?.(m, false, cost, -1, false, v);
        expect(v.allowed).toBe(true);
        expect(a.commit(w, 2, m)).toBe(true);
        return v;
      };
      expect(spend(10)).toBe(true);
      expect(spend(1)).toBe(false);
      expect(force(-3).remaining).toBe(3);
      expect(spend(3)).toBe(true);
      expect(spend(1)).toBe(false);
      expect(force(-1_000).remaining).toBe(10); // never below fresh
      expect(spend(10)).toBe(true);
      expect(spend(1)).toBe(false);
      expect(force(2).remaining).toBe(0); // a penalty still adds
    });
  }
});
