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

/**
 * A reading from `nowMs` on up to which `secondsAt` gives `sec` (= secondsAt(nowMs)): a hair
 * before the next second, checked; `nowMs` itself where that fails (a negative second, or one
 * past 2^40). secondsAt is monotone (a division, a product and a floor, each rounding a larger
 * argument to no smaller a result), so every reading from `nowMs` to the one returned has `sec`:
 * a caller keeps the pair and compares instead of dividing.
 */
export function sameSecondUntil(nowMs: number, sec: number): number {
  const to = (sec + 1) * 1000 * (1 - 2 ** -40);
  return to >= nowMs && secondsAt(to) === sec ? to : nowMs;
}

/** The staleness unit (of `STALE_UNIT_MS`) at `nowMs`. */
export function staleUnitAt(nowMs: number): number {
  return Math.floor((nowMs / STALE_UNIT_MS) * ULP_GUARD);
}

/**
 * How far (in units) a stored stamp may be ahead of a reading and still count as ahead: 2^30
 * units (34 years of seconds). A stamp ahead of the reading belongs to a decision whose reading was
 * later than this one: a clock that stepped backwards (docs/design.md, section 5, "A clock that
 * steps back"), or a reading older than a state it reloaded. Further ahead, it is a stamp 2^32
 * units minus that old, left by a key idle for 102 years or more (only a clock that jumped that
 * far forward can leave one): then the key is judged by its idle time, as any other.
 */
export const AHEAD_UNITS = 2 ** 30;

/** Stamps this far below 2^32 units behind (2^32 - AHEAD_UNITS) count as ahead of the reading. */
const STAMP_AHEAD = 2 ** 32 - AHEAD_UNITS;

/**
 * Whether a key last admitted at `last` (a staleness unit modulo 2^32, as stored) is stale at
 * `now` (the current unit). The difference is taken modulo 2^32: a stored unit is never later
 * than a reading taken after it was loaded on a clock that does not step back, so the difference
 * is the true idle time for any idle time under 2^32 - AHEAD_UNITS units.
 */
export function isStale(now: number, last: number, staleUnits: number): boolean {
  const idle = (now - last) >>> 0;
  // A stamp up to AHEAD_UNITS units ahead of the reading (a reading older than the state, or a
  // clock that stepped back) is recent, not nearly 2^32 units old: never stale.
  return idle > staleUnits && idle < STAMP_AHEAD;
}

/**
 * How many units the stored stamp `last` is ahead of the reading's unit `now` (both modulo 2^32):
 * 0 when it is not ahead, or further ahead than AHEAD_UNITS (an old stamp, see above). A decision
 * that loaded `last` before reading its clock and finds it ahead was given a reading earlier than
 * one some decision on the key already used: the clock stepped back. Pure.
 */
export function unitsAhead(now: number, last: number): number {
  const ahead = (last - now) | 0;
  return ahead > 0 && ahead <= AHEAD_UNITS ? ahead : 0;
}

/**
 * Raises a decision's reading `m` (ms, and its whole second) to the start of the second `stamp`
 * (a key's seconds stamp, loaded before the reading) when the stamp is ahead of it: what every
 * decision does with a reading behind its key's latest admission (see `Clock`). Pure; true when
 * it raised the reading (the clock stepped back behind a decision on the key).
 */
export function raiseToStamp(m: { ms: number; sec: number }, stamp: number): boolean {
  const ahead = unitsAhead(m.sec, stamp);
  if (ahead === 0) return false;
  m.sec += ahead;
  m.ms = m.sec * 1000;
  return true;
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
  // A stamp ahead of the reading (a reading older than the state, or a clock that stepped back;
  // see isStale): leave it, never move it back.
  if (idle >= STAMP_AHEAD) return;
  let seen = loaded;
  while (seen !== now32 && (now32 - seen) >>> 0 <= idle) {
    // compareExchange from the value seen: fails if another thread moved the word, then we look again.
    const prev = Atomics.compareExchange(w, index, seen, now32);
    if (prev === seen) return;
    seen = prev;
  }
}
