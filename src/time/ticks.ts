/**
 * Clock readings and durations in whole ticks: the one home of every conversion between
 * milliseconds (a `Clock` reading, a wait, a lease) and the integer ticks the state words hold.
 * Every limiter, algorithm and lease rounds the same way through these functions.
 *
 * Two rules run through all of them:
 * - a decimal reading can sit a few ulps below the tick it names (1234.567 ms is
 *   1234.5669999999999 as a double): it counts as on that tick, and no reading moves by more
 *   than 1 ns (`readingSlackMs`);
 * - a duration that is a whole number of ticks up to float noise is that number; anything more
 *   rounds up (`ceilTicks`), so a limit is never loosened by rounding.
 */

/** Largest clock reading every limiter accepts: 2^53 ms, about 285,000 years. */
export const MAX_CLOCK_MS = 2 ** 53;

/** 1 + 2^-50: lifts a product that lost a few ulps back onto the integer it should be. */
export const ULP_GUARD = 1 + 2 ** -50;

/**
 * `exact` rounded up to an integer, except that a quotient within float error of an integer (the
 * roundings behind it stay under 4 ulps) is that integer: 200000.00000000003 stays 200000.
 */
export function ceilTicks(exact: number): number {
  const nearest = Math.round(exact);
  return Math.abs(exact - nearest) <= 2 ** -50 * Math.max(1, exact) ? nearest : Math.ceil(exact);
}

/** floor(x), except that an x within `tolerance` below an integer counts as that integer. */
export function snapFloor(x: number, tolerance: number): number {
  const up = Math.ceil(x);
  return up - x <= tolerance ? up : Math.floor(x);
}

/**
 * How far (in ms) a clock reading may sit below the tick it names and still count as on it: a
 * few ulps of the reading (a decimal reading, or a sum of them, stored as doubles), but never
 * more than a nanosecond, so that no reading moves further than that.
 */
export function readingSlackMs(nowMs: number): number {
  return Math.min(nowMs * 2 ** -50, 1e-6);
}

/**
 * Whole ticks of `tickPs` picoseconds elapsed at `nowMs`, modulo 2^32 and exact for every reading
 * up to 2^53 ms (the integer milliseconds are multiplied in 32-bit arithmetic, the fraction as a
 * float), snapped by `readingSlackMs`.
 */
export function ticksAt(nowMs: number, p: { tickPs: number }): number {
  if (p.tickPs > 1e9) return coarseTicks(nowMs, p.tickPs / 1e9, false) | 0;
  return fineTicksAt(nowMs, 1e9 / p.tickPs);
}

/**
 * `ticksAt` for ticks of at most 1 ms, given as `perMs`, ticks per ms (`1e9 / tickPs`, a whole
 * number): for a caller that converts a reading on every decision and keeps `perMs`, which spares
 * the division.
 */
export function fineTicksAt(nowMs: number, perMs: number): number {
  const whole = Math.floor(nowMs);
  const part = (nowMs - whole) * perMs;
  return (Math.imul(whole | 0, perMs) + snapFloor(part, readingSlackMs(nowMs) * perMs + part * 2 ** -51)) | 0;
}

/**
 * Whole ticks of `tickPs` elapsed at `nowMs`, not wrapped: for arithmetic on one thread (a
 * lease's expiry). Above 2^53 ticks the low bits are not exact; shared words take `ticksAt`.
 */
export function wholeTicksAt(nowMs: number, p: { tickPs: number }): number {
  // One rounding: a whole number of ticks per ms, or of ms per tick, for the ticks that use it.
  const ticks = p.tickPs >= 1e9 ? nowMs / (p.tickPs / 1e9) : nowMs * (1e9 / p.tickPs);
  return Math.floor(ticks * ULP_GUARD);
}

/**
 * Like `ticksAt`, but rounded up for a reading between two ticks: a stamp written with it never
 * counts as older than it is.
 */
export function ticksCeilAt(nowMs: number, p: { tickPs: number }): number {
  if (p.tickPs > 1e9) return coarseTicks(nowMs, p.tickPs / 1e9, true) | 0;
  const perMs = 1e9 / p.tickPs;
  const whole = Math.floor(nowMs);
  const part = (nowMs - whole) * perMs;
  // Like ticksAt, but a reading past a tick by more than its own slack counts as the next tick.
  const slack = readingSlackMs(nowMs) * perMs + part * 2 ** -51;
  const down = snapFloor(part, slack);
  return (Math.imul(whole | 0, perMs) + (part - down > slack ? down + 1 : down)) | 0;
}

/**
 * Whole ticks of `tickMs` (an integer number of ms) at `nowMs`, floored (or, with `up`, rounded up
 * for a reading between ticks), exact for every reading up to 2^53 ms: the whole milliseconds
 * divide exactly, and only `readingSlackMs` snaps it onto a tick.
 */
export function coarseTicks(nowMs: number, tickMs: number, up: boolean): number {
  const whole = Math.floor(nowMs);
  let q = Math.floor(whole / tickMs);
  let r = whole - q * tickMs; // exact: both are integers under 2^53
  if (r < 0) { q -= 1; r += tickMs; } else if (r >= tickMs) { q += 1; r -= tickMs; }
  const into = r + (nowMs - whole); // ms into the tick, exactly
  const slack = readingSlackMs(nowMs);
  if (tickMs - into <= slack) return q + 1; // just below the next tick: on it
  return up && into > slack ? q + 1 : q;
}

/**
 * Floor of `a / b` for a clock reading and a window of `b` ms, snapped like `ticksAt`: a quotient
 * within its own ulp below an integer is that integer; nothing moves further (a relative lift
 * would open windows early at large readings).
 */
export function floorDiv(a: number, b: number): number {
  // A whole number of ms per window divides exactly; any other window size divides as a float.
  if (Number.isInteger(b)) return coarseTicks(a, b, false);
  return snapFloor(a / b, readingSlackMs(a) / b + (a / b) * 2 ** -52);
}

/**
 * Converts ticks of `tickPs` to milliseconds: exact (below 2^53 ms) for ticks of a whole number
 * of ms, whose count times the tick would pass 2^53 ps within days.
 */
export function ticksToMs(ticks: number, p: { tickPs: number }): number {
  return p.tickPs >= 1e9 ? ticks * (p.tickPs / 1e9) : (ticks * p.tickPs) / 1e9;
}

/**
 * A longest wait of `maxWaitMs` in whole ticks, rounded down, but snapped within 4 ulps: a wait
 * of exactly `maxWaitMs` must not lose a tick to float noise.
 */
export function maxWaitTicks(maxWaitMs: number, p: { tickPs: number }): number {
  return maxWaitMs === Infinity ? Infinity : snapFloor((maxWaitMs * 1e9) / p.tickPs, (maxWaitMs * 1e9 * 2 ** -50) / p.tickPs);
}

/** Rounds a wait in ms up to whole picoseconds (the finest tick), dropping float noise. */
export function ceilPs(ms: number): number {
  return ms === Infinity ? ms : Math.max(0, Math.ceil(ms * 1e9 - 1e-3) / 1e9);
}

/** Rounds a wait in ms up to whole nanoseconds, dropping float noise (50.00000000000006 -> 50). */
export function ceilNs(ms: number): number {
  return Math.ceil(ms * 1e6 - 1e-3) / 1e6;
}
