import { ticksAt, ticksCeilAt, ticksToMs } from '../gcra.js';
import type { Limit } from '../limit.js';
import { swap, type LimitAlgorithm, type Verdict } from './types.js';
import { windowLimit } from './window-limit.js';

/** An unused log entry. A timestamp that would equal it is stored one tick later. */
const EMPTY = -0x80000000;

/**
 * Sliding log: exact. Keeps the times of the last `permits` admissions in a ring of int32 words
 * (ticks modulo 2^32) after a head word, so state grows with `permits`: 4 bytes per permit per
 * key, bounded by the `maxLogSize` option. The ring runs from the oldest entry (at head) to the
 * newest, in time order (a stamp is never earlier than the newest before it), so a decision
 * binary-searches it: O(log permits) to check, O(cost) to spend. Promise: never more than
 * `permits` in any `periodMs`.
 */
export function slidingLogAlgorithm(limit: Limit, name: string, maxLogSize: number): LimitAlgorithm {
  const { permits, periodMs } = windowLimit(limit, name, maxLogSize);
  // Ticks sized for the period: the finest power of ten (10 ns and up) with the period in 2^29
  // ticks, rounded up (an entry then counts a little longer, never shorter).
  let tickPs = 1e4;
  while (Math.ceil((periodMs * 1e9) / tickPs) > 2 ** 29) tickPs *= 10;
  const p = { tickPs };
  const periodTicks = Math.ceil((periodMs * 1e9) / tickPs - 1e-9);
  // Stamps are ticks modulo 2^32, exact while under 2^31 ticks old (at least 4 periods). A key
  // whose last admission is older than the period and two ticks has an empty log; the rule must
  // fit the seconds word (modulo 2^32 s, 136 years), which bounds the period.
  const staleSec = Math.ceil(periodMs / 1000 + (2 * tickPs) / 1e12) + 2;
  if (staleSec >= 2 ** 32 - 8) {
    throw new RangeError(`${name}.periodMs of a sliding-log limit must be at most about 136 years, got ${periodMs}`);
  }

  /** Word index of the k-th oldest entry (k = 0: the oldest, at head). */
  const entry = (w: Int32Array, at: number, k: number): number => at + 1 + ((Atomics.load(w, at) + k) % permits);

  /** Age in ticks of a stamp that still counts, or -1. */
  function age(ts: number, now32: number): number {
    if (ts === EMPTY) return -1;
    const d = (now32 - ts) | 0;
    return d < periodTicks ? Math.max(d, 0) : -1;
  }

  /** How many of the oldest entries no longer count (they are the first ones, in time order). */
  function expired(w: Int32Array, at: number, now32: number, stale: boolean): number {
    if (stale) return permits;
    let lo = 0;
    let hi = permits;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (age(Atomics.load(w, entry(w, at, mid)), now32) < 0) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  return {
    stateWords: permits + 1,
    staleSec,
    init(w, at) {
      Atomics.store(w, at, 0);
      for (let i = 1; i <= permits; i++) Atomics.store(w, at + i, EMPTY);
    },
    check(w, at, m, stale, cost, v: Verdict) {
      const now32 = ticksAt(m.ms, p);
      const free = expired(w, at, now32, stale);
      const newest = free === permits ? -1 : age(Atomics.load(w, entry(w, at, permits - 1)), now32);
      v.allowed = cost <= free;
      v.remaining = v.allowed ? free - cost : free;
      if (v.allowed) {
        v.waitMs = 0;
        v.resetMs = cost > 0 ? ticksToMs(periodTicks, p) : newest < 0 ? 0 : ticksToMs(periodTicks - newest, p);
        return;
      }
      // The cost-th oldest entry must expire first.
      v.waitMs = cost > permits ? Infinity : ticksToMs(periodTicks - age(Atomics.load(w, entry(w, at, cost - 1)), now32), p);
      v.resetMs = newest < 0 ? 0 : ticksToMs(periodTicks - newest, p);
    },
    apply(w, at, m, stale, cost) {
      const now32 = ticksCeilAt(m.ms, p); // a new stamp rounds up: it expires no earlier than it should
      // A stale log (idle longer than its stamps can be told apart) is cleared first, so that
      // old stamps cannot alias as recent ones later.
      if (stale) this.init(w, at, m);
      const head = Atomics.load(w, at);
      const last = Atomics.load(w, at + 1 + ((head + permits - 1) % permits));
      // Never earlier than the newest entry: keeps the ring in time order (a later stamp only
      // makes that entry count a little longer).
      let stamp = !stale && last !== EMPTY && ((last - now32) | 0) > 0 ? last : now32;
      if (stamp === EMPTY) stamp = (stamp + 1) | 0;
      for (let k = 0; k < cost; k++) {
        const i = at + 1 + ((head + k) % permits);
        if (!swap(w, i, Atomics.load(w, i), stamp)) return false;
      }
      return swap(w, at, head, (head + cost) % permits);
    },
    idle(w, at, m, stale) {
      return expired(w, at, ticksAt(m.ms, p), stale) === permits;
    },
  };
}
