import type { Limit } from '../limit.js';
import { ceilNs, floorDiv, swap, type LimitAlgorithm, type Verdict } from './types.js';
import { windowAt, windowLimit } from './window-limit.js';

/**
 * Fixed window: a count per window, windows aligned to multiples of `periodMs` on the limiter's
 * clock (time 0 of a ManualClock is a boundary). State: [window index mod 2^32, count].
 * Promise: at most `permits` per aligned window, so up to twice that across a boundary.
 */
export function fixedWindowAlgorithm(limit: Limit, name: string): LimitAlgorithm {
  const { permits, periodMs, staleSec } = windowLimit(limit, name);
  /** The count in the current window, reading a stale or older window as 0. */
  const countNow = (w: Int32Array, at: number, win32: number, stale: boolean): number =>
    !stale && Atomics.load(w, at) === win32 ? Atomics.load(w, at + 1) : 0;
  const windowOf = (w: Int32Array, at: number, ms: number, stale: boolean): number => windowAt(w, at, ms, periodMs, stale);
  return {
    stateWords: 2,
    staleSec,
    init(w, at, m) {
      Atomics.store(w, at, floorDiv(m.ms, periodMs) | 0);
      Atomics.store(w, at + 1, 0);
    },
    check(w, at, m, stale, cost, v: Verdict) {
      const win = windowOf(w, at, m.ms, stale);
      const count = countNow(w, at, win | 0, stale);
      const untilEnd = ceilNs((win + 1) * periodMs - m.ms);
      v.allowed = count + cost <= permits;
      const after = v.allowed ? count + cost : count;
      v.remaining = permits - after;
      v.waitMs = v.allowed ? 0 : cost > permits ? Infinity : untilEnd;
      v.resetMs = after > 0 ? untilEnd : 0;
    },
    apply(w, at, m, stale, cost) {
      const win32 = windowOf(w, at, m.ms, stale) | 0;
      const prevWin = Atomics.load(w, at);
      const prevCount = Atomics.load(w, at + 1);
      const count = countNow(w, at, win32, stale);
      return swap(w, at + 1, prevCount, count + cost) && swap(w, at, prevWin, win32);
    },
    idle(w, at, m, stale) {
      return countNow(w, at, windowOf(w, at, m.ms, stale) | 0, stale) === 0;
    },
  };
}
