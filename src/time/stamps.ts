import { ULP_GUARD } from './ticks.js';

/**
 * Staleness stamps: the coarse "last admitted" word of a key (`lastSec`, in seconds at width 32;
 * in units of `STALE_UNIT_MS` at width 64), stored modulo 2^32, which tells a wrapped state from
 * a live one (docs/design.md, section 2).
 *
 * Thread-safety: pure functions, except `raiseStamp`, which moves a shared word forward by
 * compareExchange and is safe on any thread.
 */

/** The staleness unit of the 64-bit path: 2^53 ms is under 2^32 of them, so it never wraps. */
export const STALE_UNIT_MS = 4_096_000;

/** Whole seconds elapsed at `nowMs`, lifted by the ulp guard as `ticksAt` is. */
export function secondsAt(nowMs: number): number {
  return Math.floor((nowMs / 1000) * ULP_GUARD);
}

/** The staleness unit (of `STALE_UNIT_MS`) at `nowMs`. */
export function staleUnitAt(nowMs: number): number {
  return Math.floor((nowMs / STALE_UNIT_MS) * ULP_GUARD);
}

/** Stamps this far below 2^32 units behind (2^32 - 2^20) count as ahead of the reading. */
const STAMP_AHEAD = 2 ** 32 - 2 ** 20;

/**
 * Whether a key last admitted at `last` (a staleness unit modulo 2^32, as stored) is stale at
 * `now` (the current unit). The difference is taken modulo 2^32: a stored unit is never later
 * than a reading taken after it was loaded, so the difference is the true idle time for any idle
 * time under 2^32 units.
 */
export function isStale(now: number, last: number, staleUnits: number): boolean {
  const idle = (now - last) >>> 0;
  // A stamp up to 2^20 units ahead of the reading (a decision whose reading is older than a
  // state it reloaded, written by a thread with a later one) is recent, not 2^32 units old.
  return idle > staleUnits && idle < STAMP_AHEAD;
}

/**
 * Raises the staleness word at `index` to `now` (a unit, stored modulo 2^32). `loaded` is the
 * value this thread loaded before reading its clock, so it is not later than `now`, and the
 * difference modulo 2^32 is the true idle time (under 2^32 units). Another thread may raise the
 * word meanwhile, possibly past `now`: a value seen later counts as between `loaded` and `now`
 * only if its distance back from `now` is at most the idle time; anything else is ahead of us,
 * and the word is left alone. So the word only ever moves forward.
 */
export function raiseStamp(w: Int32Array, index: number, loaded: number, now: number): void {
  const now32 = now | 0;
  const idle = (now32 - loaded) >>> 0;
  // A stamp loaded after the reading may already be ahead of it (see isStale): leave it, never
  // move it back.
  if (idle >= STAMP_AHEAD) return;
  let seen = loaded;
  while (seen !== now32 && (now32 - seen) >>> 0 <= idle) {
    // compareExchange from the value seen: fails if another thread moved the word, then we look again.
    const prev = Atomics.compareExchange(w, index, seen, now32);
    if (prev === seen) return;
    seen = prev;
  }
}
