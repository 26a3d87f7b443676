import type { Limit } from '../limit.js';
import { ceilNs, floorDiv, swap, type LimitAlgorithm, type Verdict } from './types.js';
import { windowAt, windowLimit } from './window-limit.js';

/**
 * Sliding window (the two-window counter): estimates the last period as this window's count plus
 * the previous window's count weighted by how much of it still overlaps the last period. State:
 * [window index mod 2^32, current count, previous count]. Promise: an estimate; a client that
 * bursts at the end of one window and keeps trying can get up to about 1.5 times `permits` in
 * some period (149 for 100 per minute in the published comparison).
 */
export function slidingWindowAlgorithm(limit: Limit, name: string): LimitAlgorithm {
  const { permits, periodMs, staleSec } = windowLimit(limit, name);

  const windowOf = (w: Int32Array, at: number, ms: number, stale: boolean): number => windowAt(w, at, ms, periodMs, stale);

  // The counts as of the window being decided, set by `counts` (no array per call).
  let curr = 0;
  let prev = 0;
  /** Sets `curr` and `prev` as of window `win`. */
  function counts(w: Int32Array, at: number, win: number, stale: boolean): void {
    const stored = stale ? NaN : Atomics.load(w, at);
    if (stored === (win | 0)) { curr = Atomics.load(w, at + 1); prev = Atomics.load(w, at + 2); }
    else if (stored === ((win - 1) | 0)) { curr = 0; prev = Atomics.load(w, at + 1); }
    else { curr = 0; prev = 0; }
  }

  return {
    stateWords: 3,
    staleSec,
    init(w, at, m) {
      Atomics.store(w, at, floorDiv(m.ms, periodMs) | 0);
      Atomics.store(w, at + 1, 0);
      Atomics.store(w, at + 2, 0);
    },
    check(w, at, m, stale, cost, v: Verdict) {
      const win = windowOf(w, at, m.ms, stale);
      counts(w, at, win, stale);
      const into = Math.max(0, m.ms - win * periodMs); // ms into the current window
      const estimate = prev * (1 - into / periodMs) + curr;
      v.allowed = cost <= permits && estimate + cost <= permits;
      v.remaining = Math.max(0, Math.floor(permits - estimate - (v.allowed ? cost : 0)));
      v.waitMs = v.allowed ? 0 : ceilNs(wait(curr, prev, into, cost));
      const after = v.allowed ? curr + cost : curr;
      v.resetMs = ceilNs(after > 0 ? 2 * periodMs - into : prev > 0 ? periodMs - into : 0);
    },
    apply(w, at, m, stale, cost) {
      const win = windowOf(w, at, m.ms, stale);
      const w0 = Atomics.load(w, at);
      const w1 = Atomics.load(w, at + 1);
      const w2 = Atomics.load(w, at + 2);
      counts(w, at, win, stale);
      return swap(w, at + 2, w2, prev) && swap(w, at + 1, w1, curr + cost) && swap(w, at, w0, win | 0);
    },
    idle(w, at, m, stale) {
      counts(w, at, windowOf(w, at, m.ms, stale), stale);
      return curr === 0 && prev === 0;
    },
  };

  /** The least wait after which prev * weight + curr + cost <= permits. */
  function wait(curr: number, prev: number, into: number, cost: number): number {
    if (cost > permits) return Infinity;
    const room = permits - curr - cost;
    if (room >= 0 && prev > 0) {
      // Still in this window: prev * (1 - (into + t) / period) <= room.
      const t = periodMs * (1 - room / prev) - into;
      if (t < periodMs - into) return Math.max(0, t);
    }
    // In the next window, this window's count becomes the previous one: curr * (1 - s / period) + cost <= permits.
    const s = curr > 0 ? periodMs * (1 - (permits - cost) / curr) : 0;
    return periodMs - into + Math.max(0, s);
  }
}
