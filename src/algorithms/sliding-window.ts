import type { Limit } from '../config/limit.js';
import { cas64 } from '../math/word64.js';
import { MAX_CLOCK_MS } from '../time/ticks.js';
import { ceilNs, floorDiv } from '../time/ticks.js';
import { type LimitAlgorithm, type Verdict } from './types.js';
import { latestIn } from './fixed-window-32.js';
import { windowLimit } from './window-limit.js';

/** Bits of the packed state: 22 per count, 20 for the window index. */
const COUNT_MASK = 0x3fffff;
/** Largest `permits` a sliding window holds (a count fills 22 bits). */
export const MAX_SLIDING_PERMITS = COUNT_MASK;
/** A window index aliases after 2^19 windows either way (signed 20-bit difference). */
const WINDOW_RANGE = 2 ** 19;

/**
 * Sliding window (the two-window counter): estimates the last period as this window's count plus
 * the previous window's count weighted by how much of it still overlaps the last period. State:
 * one 64-bit word packing [current count: 22 bits, previous count: 22 bits, window index mod
 * 2^20], so a spend is one compareExchange of the whole state. Promise: an estimate, never
 * twice `permits` in any period. With `a` admitted in the previous window after a point `f` of
 * the way through it, this window admits at most `permits - a * (1 - f)` by the same point, so
 * a period holds at most `permits + a * f` < 2 * `permits`; clients that burst near the end of a
 * window come close (149 for 100 per minute with the client of docs/algorithms.md, 180 of 100 with bursts at
 * 80% of a window).
 */
export function slidingWindowAlgorithm(limit: Limit, name: string): LimitAlgorithm {
  const { permits, periodMs, expiredSec } = windowLimit(limit, name, MAX_SLIDING_PERMITS);
  // The window index is stored modulo 2^20: a key idle for 2^19 windows could alias, so a key
  // idle for two windows is stale (its counts have all expired) whenever that can happen, and
  // the staleness rule (seconds) must be shorter than 2^19 windows.
  const aliases = periodMs * WINDOW_RANGE <= MAX_CLOCK_MS;
  const staleSec = aliases ? expiredSec : Infinity;
  if (aliases && (staleSec + 2) * 1000 >= WINDOW_RANGE * periodMs) {
    throw new RangeError(`${name}.periodMs of a sliding-window limit must be at least 0.01 ms, got ${periodMs}`);
  }

  // The snapshot, and the state as of the window being decided (set by `decode`).
  let lo = 0;
  let hi = 0;
  let win = 0;
  let curr = 0;
  let prev = 0;
  let nextCurr = 0;
  let later = false; // the decided window is later than the reading's

  function decode(ms: number, stale: boolean): void {
    const now = floorDiv(ms, periodMs);
    const stored = hi >>> 12;
    const c = lo & COUNT_MASK;
    const p = (lo >>> 22) | ((hi & 0xfff) << 10);
    // Signed 20-bit difference of the stored window from the clock's (exact modulo 2^20).
    const diff = stale ? -2 : ((stored - now) << 12) >> 12;
    // A later stored window (a reservation's, or a newer admission's for a reading older than
    // the state): keep it, never move it back.
    win = diff > 0 ? now + diff : now;
    later = diff > 0;
    if (diff >= 0) { curr = c; prev = p; }
    else if (diff === -1) { curr = 0; prev = c; }
    else { curr = 0; prev = 0; }
  }

  return {
    stateWords: 2,
    align8: true,
    staleSec,
    lockFree: true,
    init(w, at, m) {
      Atomics.store(w, at, 0);
      Atomics.store(w, at + 1, (floorDiv(m.ms, periodMs) & 0xfffff) << 12);
    },
    load(w, at) {
      lo = Atomics.load(w, at);
      hi = Atomics.load(w, at + 1);
    },
    check(m, stale, cost, v: Verdict) {
      decode(m.ms, stale);
      const into = Math.max(0, m.ms - win * periodMs); // ms into the decided window (0 if later)
      const estimate = prev * (1 - into / periodMs) + curr;
      // A later window's count is for requests that act in it: none may act now on it.
      v.allowed = cost <= permits && estimate + cost <= permits && !later;
      v.remaining = later ? 0 : Math.max(0, Math.floor(permits - estimate - (v.allowed ? cost : 0)));
      v.waitMs = v.allowed ? 0 : ceilNs((later ? win * periodMs - m.ms : 0) + wait(curr, prev, into, cost));
      const after = v.allowed ? curr + cost : curr;
      v.resetMs = resetAfter(after, m.ms);
      nextCurr = after;
    },
    force(m, stale, cost, blockMs, _clamp, v: Verdict) {
      // A penalty adds to this window's count, past `permits` up to what the count's 22 bits hold
      // (it then weighs on the next window as the previous count); a reward gives back from this
      // window's count, then from the previous one's, never below 0. A block leaves the counts:
      // the key's block word holds it (see FixedWindow32.force). Under the key's give-back guard
      // only (see FixedWindow32.force).
      decode(m.ms, stale);
      if (blockMs >= 0) nextCurr = curr;
      else if (cost >= 0) nextCurr = Math.min(COUNT_MASK, curr + cost);
      else {
        const fromCurr = Math.min(curr, -cost);
        nextCurr = curr - fromCurr;
        prev = Math.max(0, prev - (-cost - fromCurr)); // commit writes the previous count as decoded
      }
      const into = Math.max(0, m.ms - win * periodMs);
      const estimate = prev * (1 - into / periodMs) + nextCurr;
      v.allowed = true;
      v.remaining = later ? 0 : Math.max(0, Math.floor(permits - estimate));
      v.waitMs = 0;
      v.resetMs = resetAfter(nextCurr, m.ms);
      v.latestMs = Infinity;
    },
    reserve(m, stale, cost, maxWaitMs, v: Verdict, notBeforeMs = 0) {
      decode(m.ms, stale);
      const reading = floorDiv(m.ms, periodMs);
      // From the earliest act: the decided window, or the one that act falls in if later.
      const first = notBeforeMs > 0 ? floorDiv(m.ms + notBeforeMs, periodMs) : 0;
      if (first > win) {
        prev = first === win + 1 ? curr : 0;
        curr = 0;
        win = first;
      }
      const start = win * periodMs; // the window's start
      const into = Math.max(0, m.ms + notBeforeMs - start);
      // The first moment the estimate has room: in this window, or in the next one, where this
      // window's count becomes the previous one; counted in the window it falls in, at most the
      // reading's next window (an idle key's counts are kept for two windows: windowLimit).
      const fits = prev * (1 - into / periodMs) + curr + cost <= permits;
      const delay = cost > permits ? Infinity : ceilNs(start - m.ms + into + (fits ? 0 : wait(curr, prev, into, cost)));
      if (delay > latestIn(win, periodMs, m.ms)) {
        win += 1;
        prev = curr;
        curr = 0;
      }
      v.latestMs = latestIn(win, periodMs, m.ms);
      v.allowed = delay <= maxWaitMs && delay <= v.latestMs && win <= reading + 1;
      nextCurr = v.allowed ? curr + cost : curr;
      v.waitMs = delay;
      v.remaining = v.allowed && delay === 0 ? Math.max(0, Math.floor(permits - prev * (1 - into / periodMs) - nextCurr)) : 0;
      v.resetMs = ceilNs((win + 2) * periodMs - m.ms);
    },
    commit(w, at) {
      // One 64-bit compareExchange from the snapshot: a torn read or any spend since fails it.
      // (The low half alone is not enough: it holds only the previous count's low 10 bits.)
      return cas64(w, at, hi, lo, packHi(win, prev), packLo(nextCurr, prev));
    },
    undo(w, at) {
      return takeBack(w, at, win, nextCurr - curr);
    },
    decidedLater() {
      return later;
    },
    slotStart(out) {
      out[0] = 0;
      out[1] = win & 0xfffff;
    },
    refund(w, at, _m, _lo, reserved, cost, _exact, forgotten = null) {
      return takeBack(w, at, reserved, cost, forgotten);
    },
    idle(w, at, m, stale) {
      this.load(w, at);
      decode(m.ms, stale);
      // A later window refuses every check until the clock reaches it (a fresh key would not, and
      // the estimate may still need the count it replaced): not idle before then.
      return curr === 0 && prev === 0 && !later;
    },
  };

  /**
   * Takes `cost` back from window `window` (modulo 2^20): from the current count while the state
   * holds it, from the previous one once a later window began. Counts add up, so this is exact
   * even after other spends built on ours; false when neither count holds it. `forgotten`: a
   * refund's test after each snapshot (LimitAlgorithm.refund).
   */
  function takeBack(w: Int32Array, at: number, window: number, cost: number, forgotten: (() => boolean) | null = null): boolean {
    for (;;) {
      const l = Atomics.load(w, at);
      const h = Atomics.load(w, at + 1);
      const c = l & COUNT_MASK;
      const p = (l >>> 22) | ((h & 0xfff) << 10);
      const diff = (((h >>> 12) - window) << 12) >> 12;
      let next: number;
      if (diff === 0 && c >= cost) next = packLo(c - cost, p);
      else if (diff === 1 && p >= cost) next = packLo(c, p - cost);
      else return false;
      if (forgotten !== null && forgotten()) return false;
      const nextHi = diff === 0 ? h : packHi(window + 1, p - cost);
      // 64-bit compareExchange from the halves just read: a torn read or a spend since retries.
      if (cas64(w, at, h, l, nextHi, next)) return true;
    }
  }

  /**
   * How long after `ms` the state with `curr` in the decided window (and the decoded previous
   * count) equals a fresh key's: until this window's count no longer weighs, else the previous
   * one's, else, with nothing counted in a later window, until that window starts.
   */
  function resetAfter(curr: number, ms: number): number {
    return ceilNs(curr > 0 ? (win + 2) * periodMs - ms : prev > 0 ? (win + 1) * periodMs - ms : later ? win * periodMs - ms : 0);
  }

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

/** The low half of a packed state: the current count and the previous count's low 10 bits. */
function packLo(curr: number, prev: number): number {
  return (curr | ((prev & 0x3ff) << 22)) | 0;
}

/** The high half: the previous count's high 12 bits and the window index modulo 2^20. */
function packHi(win: number, prev: number): number {
  return ((prev >>> 10) & 0xfff) | ((win & 0xfffff) << 12);
}
