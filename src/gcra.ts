import { validateLimit, type Limit } from './limit.js';

/**
 * The Generic Cell Rate Algorithm on integers, with no storage and no clock.
 *
 * Vocabulary (as in the ATM literature and in Rust's `governor`):
 * - `t`, the emission interval: one request may pass every `t`;
 * - `tau`, the tolerance: `burst * t`, how far ahead of now the theoretical arrival time (TAT)
 *   may run after an admission;
 * - the *debt* of a key: `max(0, tat - now)`. A fresh key has debt 0.
 *
 * A request of cost `c` passes when `debt + c * t <= tau`; it then leaves debt `debt + c * t`.
 * Everything is counted in *ticks*, a per-limit power of ten picoseconds. A limit runs at one of
 * two widths (docs/design.md, section 2):
 * - 32: the TAT is one int32 word (modulo 2^32): ticks of 10 ns to 1 ms, `tau` at most 2^29 ticks;
 * - 64: the TAT is a 64-bit word: ticks of 1 ps and up, `tau` up to 2^61 ticks.
 * The constructor takes the 32-bit width whenever it holds the limit with the promised rounding.
 *
 * Thread-safety: every function here is pure.
 */
export interface GcraParams {
  /** 32: one int32 TAT word; 64: a 64-bit TAT (`src/gcra-wide.ts`). */
  width: 32 | 64;
  /** The tick in picoseconds: a power of ten. */
  tickPs: number;
  /** The tick in nanoseconds (`tickPs / 1000`), for display and conversions. */
  tickNs: number;
  /** Emission interval `t` in ticks, rounded up so the rate is never exceeded. */
  intervalTicks: number;
  /** Tolerance `tau = burst * t` in ticks (exact below 2^53; the 64-bit path never needs it above). */
  toleranceTicks: number;
  /** Bucket capacity in requests. */
  burst: number;
  /**
   * A key whose last admission is older than this many staleness units (seconds at width 32,
   * `STALE_UNIT_MS` at width 64) is certainly fresh, whatever its wrapped TAT says; Infinity when
   * the TAT cannot wrap within the clock's range (2^53 ms).
   */
  staleSec: number;
}

/** The largest tolerance at width 32, in ticks: 2^29 leaves room for wrap-around arithmetic. */
export const MAX_TOLERANCE_TICKS = 2 ** 29;
/**
 * The furthest a 32-bit TAT may run ahead of now, in ticks: the tolerance plus reservations made
 * by `reserve`/`acquire` (at least 2^29 ticks of them). Half the positive int32 range.
 */
export const MAX_AHEAD_TICKS = 2 ** 30;
/** The largest tolerance at width 64, in ticks: 3/4 of the signed 64-bit range. */
export const MAX_WIDE_TOLERANCE_TICKS = 3 * 2 ** 61;
/**
 * The furthest a 64-bit TAT may run ahead of now, in ticks (tolerance plus reservations): 7/8 of
 * the signed range, so a TAT idle for up to 2^60 ticks more still decodes before the sign flips.
 */
export const MAX_WIDE_AHEAD_TICKS = 7 * 2 ** 60;
/** Largest emission interval in ticks at width 64 (keeps long division exact, see int64.ts). */
export const MAX_WIDE_INTERVAL_TICKS = 2 ** 37;
/** The staleness unit of the 64-bit path: 2^53 ms is under 2^32 of them, so it never wraps. */
export const STALE_UNIT_MS = 4_096_000;
/** Largest clock reading every limiter accepts: 2^53 ms, about 285,000 years. */
export const MAX_CLOCK_MS = 2 ** 53;

/** The ticks of the 64-bit path, finest first: 0.1, 0.2, 0.5, 1, 2, 5, ... ps up to 5 * 10^18 ps. */
export const WIDE_TICKS_PS: readonly number[] = Array.from({ length: 60 }, (_, i) => ([1, 2, 5][i % 3] as number) * 10 ** (Math.floor(i / 3) - 1));

/** Rounding of the emission interval allowed at 1 us and above (1 part in a million), and below. */
const ROUNDING_LONG = 1e-6;
const ROUNDING_SHORT = 1e-3;

/** 1 + 2^-50: lifts a product that lost a few ulps back onto the integer it should be. */
export const ULP_GUARD = 1 + 2 ** -50;

function ceilTicks(exact: number): number {
  const nearest = Math.round(exact);
  // Guard against 200000.00000000003 becoming 200001: a quotient within float error (the three
  // roundings behind it stay under 4 ulps) of an integer is that integer; anything further rounds up.
  return Math.abs(exact - nearest) <= 2 ** -50 * Math.max(1, exact) ? nearest : Math.ceil(exact);
}

/** The interval, in ticks of `tickPs`, rounded up; and whether that rounding is within bounds. */
function intervalAt(intervalPs: number, tickPs: number): { ticks: number; ok: boolean } {
  const ticks = ceilTicks(intervalPs / tickPs);
  const error = (ticks * tickPs - intervalPs) / intervalPs;
  const bound = intervalPs >= 1e6 ? ROUNDING_LONG : ROUNDING_SHORT;
  return { ticks, ok: ticks >= 1 && error <= bound };
}

function params(width: 32 | 64, tickPs: number, intervalTicks: number, burst: number): GcraParams {
  const toleranceTicks = intervalTicks * burst;
  let staleSec: number;
  if (width === 32) {
    staleSec = Math.ceil((MAX_AHEAD_TICKS * tickPs) / 1e12) + 2;
  } else {
    staleSec = wideStaleUnits(tickPs);
  }
  return { width, tickPs, tickNs: tickPs / 1000, intervalTicks, toleranceTicks, burst, staleSec };
}

/**
 * The staleness rule of a 64-bit TAT in ticks of `tickPs`, in units of `STALE_UNIT_MS`: a TAT in
 * ticks of 1 us or more cannot wrap within 2^53 ms, so it needs none (Infinity).
 */
export function wideStaleUnits(tickPs: number): number {
  return tickPs < 1e6 ? Math.ceil((MAX_WIDE_AHEAD_TICKS * tickPs) / 1e9 / STALE_UNIT_MS) + 2 : Infinity;
}

/**
 * Chooses the width and tick for a limit and converts it to integer GCRA parameters: width 32 with
 * the finest tick that fits, else width 64 with the coarsest tick of 1 us or less that holds the
 * interval exactly, else the finest that fits. Throws `RangeError` naming `name` and saying what
 * would work.
 */
export function gcraParams(limit: Limit, name = 'limit', minWidth: 32 | 64 = 32): GcraParams {
  const { permits, periodMs, burst } = validateLimit(limit, name);
  const intervalPs = (periodMs * 1e9) / permits;
  // Width 32: ticks of 10 ns to 1 ms, so that a millisecond holds a whole number of ticks.
  for (let tickPs = 1e4; tickPs <= 1e9 && minWidth === 32; tickPs *= 10) {
    const t = intervalAt(intervalPs, tickPs);
    if (t.ok && t.ticks * burst <= MAX_TOLERANCE_TICKS) return params(32, tickPs, t.ticks, burst);
  }
  // Width 64: ticks of 1, 2 and 5 times a power of ten ps, from 0.1 ps up to 5 * 10^6 s. Steps of at
  // most 2.5x always leave a tick whose interval is 1 to 6 million ticks (rounding under 1 ppm)
  // with burst * interval under MAX_WIDE_TOLERANCE_TICKS, for any burst up to 2^40.
  // An interval that is a whole number of some tick of 1 us or less takes the coarsest such tick:
  // no rounding at all, and smaller numbers (a debt under 2^53 ticks divides in one step; a tick
  // of 1 us needs no staleness word), while a reading still loses under 1 us to the floor.
  // Otherwise the finest tick that fits.
  let exact: GcraParams | null = null;
  for (const tickPs of WIDE_TICKS_PS) {
    if (tickPs > 1e6) break;
    const t = intervalAt(intervalPs, tickPs);
    if (t.ok && t.ticks * tickPs === intervalPs && t.ticks <= MAX_WIDE_INTERVAL_TICKS && t.ticks * burst <= MAX_WIDE_TOLERANCE_TICKS) {
      exact = params(64, tickPs, t.ticks, burst);
    }
  }
  if (exact !== null) return exact;
  for (const tickPs of WIDE_TICKS_PS) {
    const t = intervalAt(intervalPs, tickPs);
    if (t.ok && t.ticks <= MAX_WIDE_INTERVAL_TICKS && t.ticks * burst <= MAX_WIDE_TOLERANCE_TICKS) return params(64, tickPs, t.ticks, burst);
  }
  throw new RangeError(unrepresentable(name, permits, periodMs, burst, intervalPs));
}

/** The error text for a limit no width can hold, with the nearest limit that would work. */
function unrepresentable(name: string, permits: number, periodMs: number, burst: number, intervalPs: number): string {
  const what = `${name}: ${permits} per ${periodMs} ms with burst ${burst}`;
  if (intervalPs < 0.1) {
    return `${what} is one request every ${intervalPs} ps; the finest interval is 0.1 ps (at most ${(periodMs * 1e10).toExponential()} per ${periodMs} ms)`;
  }
  let best = 0;
  for (const tickPs of WIDE_TICKS_PS) {
    const t = intervalAt(intervalPs, tickPs);
    if (t.ok && t.ticks <= MAX_WIDE_INTERVAL_TICKS) best = Math.max(best, Math.floor(MAX_WIDE_TOLERANCE_TICKS / t.ticks));
  }
  const longestMs = (MAX_WIDE_INTERVAL_TICKS * (WIDE_TICKS_PS.at(-1) as number)) / 1e9;
  if (best === 0) return `${what} is one request every ${intervalPs / 1e9} ms; the longest interval is ${longestMs.toExponential(3)} ms`;
  return `${what} cannot be enforced with the interval (${intervalPs / 1e3} ns) rounded by at most ` +
    `${intervalPs >= 1e6 ? '1 part in a million' : '0.1%'}: use a burst of at most ${best}`;
}

/**
 * Whole ticks elapsed at `nowMs`, modulo 2^32 and exact for every reading up to 2^53 ms (the
 * integer milliseconds are multiplied in 32-bit arithmetic, the fraction as a float). A decimal
 * reading can sit a few ulps below the tick it names (1234.567 ms is 1234.5669999999999 as a
 * double): it counts as on that tick, and no reading moves by more than 1 ns (`readingSlackMs`).
 */
export function ticksAt(nowMs: number, p: { tickPs: number }): number {
  if (p.tickPs > 1e9) return coarseTicks(nowMs, p.tickPs / 1e9, false) | 0;
  const perMs = 1e9 / p.tickPs;
  const whole = Math.floor(nowMs);
  const part = (nowMs - whole) * perMs;
  return (Math.imul(whole | 0, perMs) + snapFloor(part, readingSlackMs(nowMs) * perMs + part * 2 ** -51)) | 0;
}

/**
 * floor(x), except that an x within `tolerance` below an integer counts as that integer.
 */
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

/** Whole seconds elapsed at `nowMs`, with the same guard. */
export function secondsAt(nowMs: number): number {
  return Math.floor((nowMs / 1000) * ULP_GUARD);
}

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

/** Stamps this far below 2^32 units behind (2^32 - 2^20) count as ahead of the reading. */
const STAMP_AHEAD = 2 ** 32 - 2 ** 20;

/**
 * How much older than the state it decides on a reading may be (a decision that reloads one
 * limit after losing a race, or takes a batch of a global cap, at its first reading): it starts
 * over past RECHECK_MS (1 s); reservations stay this far inside the furthest a TAT may run ahead,
 * so such a reading still decodes them.
 */
export const READING_LAG_MS = 2000;

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

/**
 * The debt of a key in ticks at width 32, decoded from its 32-bit TAT. `tat32` and `now32` are
 * ticks modulo 2^32; `lastSec`/`nowSec` are the key's last-admission second and the current
 * second. A TAT that is not ahead of now, further ahead than any admission can leave it (a wrap
 * artefact), or that belongs to a stale key, means debt 0.
 */
export function debtOf(tat32: number, now32: number, lastSec: number, nowSec: number, p: GcraParams): number {
  const ahead = (tat32 - now32) | 0;
  if (ahead <= 0 || ahead > MAX_AHEAD_TICKS || isStale(nowSec, lastSec, p.staleSec)) return 0;
  return ahead;
}

/** The debt after admitting `cost`, or -1 when the request does not fit. */
export function admit(debt: number, cost: number, p: GcraParams): number {
  const next = debt + cost * p.intervalTicks;
  return next <= p.toleranceTicks ? next : -1;
}

/** How many cost-1 requests would pass right now at this debt. */
export function remainingAt(debt: number, p: GcraParams): number {
  const room = p.toleranceTicks - debt;
  return room < 0 ? 0 : Math.floor(room / p.intervalTicks);
}

/** Ticks until a request of `cost` would pass at this debt: 0 if now, Infinity if never. */
export function waitTicks(debt: number, cost: number, p: GcraParams): number {
  if (cost > p.burst) return Infinity;
  const over = debt + cost * p.intervalTicks - p.toleranceTicks;
  return over > 0 ? over : 0;
}

/** Converts ticks to milliseconds for a `Decision`. */
export function ticksToMs(ticks: number, p: { tickPs: number }): number {
  return (ticks * p.tickPs) / 1e9;
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
