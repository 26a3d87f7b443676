import { gcraParams, ticksAt, ticksToMs } from '../gcra.js';
import type { Limit } from '../limit.js';
import { swap, type LimitAlgorithm, type Verdict } from './types.js';
import { windowLimit } from './window-limit.js';

/** An unused log entry. A timestamp that would equal it is stored one tick later. */
const EMPTY = -0x80000000;

/**
 * Sliding log: exact. Keeps the times of the last `permits` admissions, one int32 word each (in
 * ticks modulo 2^32), so state grows with `permits` (4 bytes per permit per key, bounded by the
 * `maxLogSize` option). A request of cost c passes if fewer than `permits - c + 1` admissions
 * fall in the last `periodMs`. Promise: never more than `permits` in any period.
 */
export function slidingLogAlgorithm(limit: Limit, name: string, maxLogSize: number): LimitAlgorithm {
  const { permits, periodMs, staleSec } = windowLimit(limit, name, maxLogSize);
  // Ticks sized for the period (the finest with the period in 2^29 ticks), as GCRA sizes them for tau.
  const p = gcraParams({ permits: 1, periodMs, burst: 1 }, name);
  const periodTicks = p.intervalTicks;
  const ages = new Int32Array(permits); // scratch for computing waits (per instance, per thread)

  /** Age in ticks of an entry that still counts, or -1. Entries "from the future" count. */
  function age(ts: number, now32: number, stale: boolean): number {
    if (ts === EMPTY || stale) return -1;
    const d = (now32 - ts) | 0;
    return d < periodTicks ? Math.max(d, 0) : -1;
  }

  return {
    stateWords: permits,
    staleSec,
    init(w, at) {
      for (let i = 0; i < permits; i++) Atomics.store(w, at + i, EMPTY);
    },
    check(w, at, m, stale, cost, v: Verdict) {
      const now32 = ticksAt(m.ms, p) | 0;
      let active = 0;
      let newest = -1;
      for (let i = 0; i < permits; i++) {
        const a = age(Atomics.load(w, at + i), now32, stale);
        if (a < 0) continue;
        ages[active++] = a;
        if (newest < 0 || a < newest) newest = a;
      }
      v.allowed = active + cost <= permits;
      v.remaining = permits - active - (v.allowed ? cost : 0);
      if (v.allowed) {
        v.waitMs = 0;
        v.resetMs = cost > 0 ? ticksToMs(periodTicks, p) : newest < 0 ? 0 : ticksToMs(periodTicks - newest, p);
        return;
      }
      if (cost > permits) v.waitMs = Infinity;
      else {
        // The (active + cost - permits)-th oldest entry must expire first.
        const sorted = ages.subarray(0, active).sort();
        const k = active + cost - permits;
        v.waitMs = ticksToMs(periodTicks - (sorted[active - k] as number), p);
      }
      v.resetMs = newest < 0 ? 0 : ticksToMs(periodTicks - newest, p);
    },
    apply(w, at, m, stale, cost) {
      const now32 = ticksAt(m.ms, p) | 0;
      const stamp = now32 === EMPTY ? (now32 + 1) | 0 : now32;
      let left = cost;
      for (let i = 0; i < permits && left > 0; i++) {
        const ts = Atomics.load(w, at + i);
        if (age(ts, now32, stale) >= 0) continue;
        if (!swap(w, at + i, ts, stamp)) return false;
        left--;
      }
      return left === 0;
    },
    idle(w, at, m, stale) {
      const now32 = ticksAt(m.ms, p) | 0;
      for (let i = 0; i < permits; i++) if (age(Atomics.load(w, at + i), now32, stale) >= 0) return false;
      return true;
    },
  };
}
