import { admit, debtOf, gcraParams, remainingAt, ticksAt, ticksToMs, waitTicks, type GcraParams } from '../gcra.js';
import { DEAD } from '../table/layout.js';
import type { Limit } from '../limit.js';
import { swap, type LimitAlgorithm, type Moment, type Verdict } from './types.js';

/**
 * GCRA as a locked algorithm, for keys with several limits or a global cap: one TAT word per
 * limit, the same integer math as the lock-free path (`../gcra.ts`).
 */
export function gcraAlgorithm(limit: Limit, name: string): LimitAlgorithm {
  const p: GcraParams = gcraParams(limit, name);
  const debt = (w: Int32Array, at: number, m: Moment, stale: boolean): number =>
    stale ? 0 : debtOf(Atomics.load(w, at), ticksAt(m.ms, p) | 0, 0, 0, p);
  return {
    stateWords: 1,
    staleSec: p.staleSec,
    init(w, at, m) {
      Atomics.store(w, at, ticksAt(m.ms, p) | 0);
    },
    check(w, at, m, stale, cost, v: Verdict) {
      const d = debt(w, at, m, stale);
      const next = cost > p.burst ? -1 : admit(d, cost, p);
      v.allowed = next >= 0;
      v.remaining = remainingAt(v.allowed ? next : d, p);
      v.waitMs = v.allowed ? 0 : ticksToMs(waitTicks(d, cost, p), p);
      v.resetMs = ticksToMs(v.allowed ? next : d, p);
    },
    apply(w, at, m, stale, cost) {
      const prev = Atomics.load(w, at);
      const now32 = ticksAt(m.ms, p) | 0;
      const next = admit(stale ? 0 : debtOf(prev, now32, 0, 0, p), cost, p);
      let tat = (now32 + next) | 0;
      if (tat === DEAD) tat = (tat + 1) | 0;
      return swap(w, at, prev, tat);
    },
    idle(w, at, m, stale) {
      return debt(w, at, m, stale) === 0;
    },
  };
}
