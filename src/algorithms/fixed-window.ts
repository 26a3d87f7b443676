import { cas64 } from '../math/word64.js';
import type { Limit } from '../config/limit.js';
import { ceilNs, floorDiv } from '../time/ticks.js';
import { type LimitAlgorithm, type Moment, type Verdict } from './types.js';
import { windowLimit } from './window-limit.js';
import { FixedWindow32, fitsFixedWindow32, latestIn } from './fixed-window-32.js';

/**
 * Fixed window: a count per window, windows aligned to multiples of `periodMs` on the limiter's
 * clock (time 0 of a ManualClock is a boundary). State: one int32 word when that can tell the
 * windows apart (fixed-window-32.ts), else one 64-bit word, [count, window index mod 2^32] (low
 * half, high half); either way a spend is one compareExchange of the whole state.
 * Promise: at most `permits` per aligned window, so up to twice that across a boundary.
 */
export function fixedWindowAlgorithm(limit: Limit, name: string): LimitAlgorithm {
  const { permits, periodMs, staleSec, expiredSec } = windowLimit(limit, name);
  // One int32 word when its windows can be told apart (nearly every limit); else 64 bits.
  if (fitsFixedWindow32(permits, periodMs, expiredSec)) return new FixedWindow32(permits, periodMs, expiredSec);
  // The snapshot, and what the last check decided: the window and the count after the spend.
  let lo = 0;
  let hi = 0;
  let win = 0;
  let count = 0;
  let nextCount = 0;
  let later = false; // the decided window is later than the reading's

  /**
   * The window a decision counts in (the clock's, or the stored one if that is later: a
   * reservation's, or a newer admission's for a reading older than the state; never moved back)
   * and the count in it.
   */
  function decode(ms: number, stale: boolean): void {
    const now = floorDiv(ms, periodMs);
    const ahead = stale ? 0 : (hi - (now | 0)) | 0;
    win = ahead > 0 ? now + ahead : now;
    later = ahead > 0;
    count = !stale && hi === (win | 0) ? lo : 0;
  }

  /**
   * Subtracts `cost` from window `window`'s count (modulo 2^32) while the state still holds that
   * window and its count includes `cost`. Counts add up, so this is exact even after other
   * spends built on ours; a later window no longer counts it (false). `forgotten`: a refund's
   * test after each snapshot (LimitAlgorithm.refund).
   */
  function takeBack(w: Int32Array, at: number, window: number, cost: number, forgotten: (() => boolean) | null = null): boolean {
    for (;;) {
      const c = Atomics.load(w, at);
      const h = Atomics.load(w, at + 1);
      if (h !== window || c < cost || (forgotten !== null && forgotten())) return false;
      // 64-bit compareExchange from the halves just read: a torn read or a spend since retries.
      if (cas64(w, at, h, c, h, c - cost)) return true;
    }
  }

  /**
   * How long after `ms` the state holding `after` in the decided window equals a fresh key's: the
   * window's end, or, with nothing counted in a later window, that window's start (it refuses until then).
   */
  function resetAfter(after: number, ms: number): number {
    return after > 0 ? ceilNs((win + 1) * periodMs - ms) : later ? ceilNs(win * periodMs - ms) : 0;
  }

  /** Where a request of `cost` can still be counted: a window's start, or its end if it is full. */
  function waitFor(cost: number, m: Moment): number {
    return cost > permits ? Infinity : ceilNs((count + cost <= permits ? win : win + 1) * periodMs - m.ms);
  }

  return {
    stateWords: 2,
    align8: true,
    staleSec,
    lockFree: true,
    init(w, at, m) {
      Atomics.store(w, at, 0);
      Atomics.store(w, at + 1, floorDiv(m.ms, periodMs) | 0);
    },
    load(w, at) {
      lo = Atomics.load(w, at);
      hi = Atomics.load(w, at + 1);
    },
    check(m, stale, cost, v: Verdict) {
      decode(m.ms, stale);
      // A later window's count is for requests that act in it: none may act now on it.
      v.allowed = count + cost <= permits && !later;
      nextCount = v.allowed ? count + cost : count;
      if (!v.detail) {
        v.waitMs = cost > permits ? Infinity : 0;
        return;
      }
      v.remaining = later ? 0 : permits - nextCount;
      v.waitMs = v.allowed ? 0 : waitFor(cost, m);
      v.resetMs = resetAfter(nextCount, m.ms);
    },
    force(m, stale, cost, blockMs, _clamp, v: Verdict) {
      // As FixedWindow32.force: a penalty fills at most the window, a reward never below 0, a
      // block leaves the count (the key's block word holds it).
      decode(m.ms, stale);
      nextCount = blockMs >= 0 ? count : Math.min(permits, Math.max(0, count + cost));
      v.allowed = true;
      v.remaining = later ? 0 : permits - nextCount;
      v.waitMs = 0;
      v.resetMs = resetAfter(nextCount, m.ms);
      v.latestMs = Infinity;
    },
    reserve(m, stale, cost, maxWaitMs, v: Verdict, notBeforeMs = 0) {
      decode(m.ms, stale);
      const reading = floorDiv(m.ms, periodMs);
      // The decided window, or the one the earliest act falls in if later; the next one if that
      // has no room; at most the reading's next window (an idle key's counts are kept for two
      // windows: see windowLimit).
      const first = notBeforeMs > 0 ? floorDiv(m.ms + notBeforeMs, periodMs) : 0;
      if (first > win) { win = first; count = 0; }
      if (count + cost > permits) { win += 1; count = 0; }
      const delay = Math.max(0, ceilNs(win * periodMs - m.ms));
      v.allowed = cost <= permits && win <= reading + 1 && delay <= maxWaitMs;
      nextCount = v.allowed ? count + cost : count;
      v.waitMs = cost > permits ? Infinity : delay;
      v.latestMs = latestIn(win, periodMs, m.ms);
      v.remaining = win > reading ? 0 : permits - nextCount;
      v.resetMs = ceilNs((win + 1) * periodMs - m.ms);
    },
    commit(w, at) {
      // One 64-bit compareExchange from the snapshot: a torn read of the halves, or any spend since
      // the load, fails it. (The count half alone is not enough: a window that moved on with the
      // same count would take an admission decided in the window before, by its reading.)
      return cas64(w, at, hi, lo, win | 0, nextCount);
    },
    undo(w, at) {
      return takeBack(w, at, win | 0, nextCount - count);
    },
    decidedLater() {
      return later;
    },
    slotStart(out) {
      out[0] = 0;
      out[1] = win | 0;
    },
    refund(w, at, _m, _lo, reserved, cost, _exact, forgotten = null) {
      return takeBack(w, at, reserved, cost, forgotten);
    },
    idle(w, at, m, stale) {
      this.load(w, at);
      decode(m.ms, stale);
      // A later window closes the reading's until the clock reaches it (see FixedWindow32.idle).
      return count === 0 && !later;
    },
  };
}
