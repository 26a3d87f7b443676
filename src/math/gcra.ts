import { validateLimit, type Limit } from '../config/limit.js';
import { ceilTicks, ticksAt } from '../time/ticks.js';
import type { Ticks64 } from '../time/ticks64.js';
import { isStale, STALE_UNIT_MS } from '../time/stamps.js';
import { sub, toNumber, type Pair } from './int64.js';

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
 */
export interface GcraParams {
  /** 32: one int32 TAT word; 64: a 64-bit TAT (`src/rate/gcra-wide.ts`). */
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
/** The ticks of the 64-bit path, finest first: 0.1, 0.2, 0.5, 1, 2, 5, ... ps up to 5 * 10^18 ps. */
export const WIDE_TICKS_PS: readonly number[] = Array.from({ length: 60 }, (_, i) => ([1, 2, 5][i % 3] as number) * 10 ** (Math.floor(i / 3) - 1));

/** Rounding of the emission interval allowed at 1 us and above (1 part in a million), and below. */
const ROUNDING_LONG = 1e-6;
const ROUNDING_SHORT = 1e-3;

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
export function gcraParams(limit: Limit, name = 'limit', minWidth: 32 | 64 = 32, wideTickPs = 0): GcraParams {
  const { permits, periodMs, burst } = validateLimit(limit, name);
  const intervalPs = (periodMs * 1e9) / permits;
  // A tick chosen before (blockTickPs), kept in the table's header: width 64 at that tick.
  if (wideTickPs > 0) return params(64, wideTickPs, intervalAt(intervalPs, wideTickPs).ticks, burst);
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

/**
 * The longest block (`RateLimiter.block`) a key's state holds under `p`, in ms: its horizon less
 * the tolerance plus one interval (a blocked key's debt is the block plus the tolerance less one
 * interval). At width 64 the horizon keeps the margin a float estimate of the debt needs.
 */
export function maxBlockMsOf(p: GcraParams): number {
  const horizon = p.width === 32 ? MAX_AHEAD_TICKS : MAX_WIDE_AHEAD_TICKS - 2 ** 40;
  return Math.max(0, ((horizon - p.toleranceTicks + p.intervalTicks) * p.tickPs) / 1e9);
}

/**
 * The finest tick of width 64 whose state holds a block of `maxBlockMs` under `limit` (and
 * rounds its interval within bounds), or 0 when none does. For a limit whose own width-64 tick
 * (`gcraParams`) is too fine for such a block: a coarser tick, the interval rounded up by at most
 * 1 part in a million (0.1% below 1 us), as `gcraParams` allows.
 */
export function blockTickPs(limit: Limit, maxBlockMs: number): number {
  const { permits, periodMs, burst } = validateLimit(limit);
  const intervalPs = (periodMs * 1e9) / permits;
  for (const tickPs of WIDE_TICKS_PS) {
    const t = intervalAt(intervalPs, tickPs);
    if (!t.ok || t.ticks > MAX_WIDE_INTERVAL_TICKS || t.ticks * burst > MAX_WIDE_TOLERANCE_TICKS) continue;
    if (maxBlockMsOf(params(64, tickPs, t.ticks, burst)) >= maxBlockMs) return tickPs;
  }
  return 0;
}

/**
 * The width-64 tick (ps) of `limit` (named `name` in errors) whose state holds a block of
 * `maxBlockMs`: the limit's own tick when it does (gcraParams at width 64), else the finest that
 * does (blockTickPs). `RangeError` naming the limit when none does. For PolicyLimiter's GCRA
 * rules, whose states are 64-bit and record their tick.
 */
export function wideTickHolding(limit: Limit, name: string, maxBlockMs: number): number {
  const own = gcraParams(limit, name, 64);
  if (maxBlockMsOf(own) >= maxBlockMs) return own.tickPs;
  const tickPs = blockTickPs(limit, maxBlockMs);
  if (tickPs === 0) throw new RangeError(`${name}: its state cannot hold a block of ${maxBlockMs} ms (options.maxBlockMs) at any tick`);
  return tickPs;
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
 * How much older than the state it decides on a reading may be (a decision that reloads one
 * limit after losing a race, or takes a batch of a global cap, at its first reading): it starts
 * over past RECHECK_MS (1 s); reservations stay this far inside the furthest a TAT may run ahead,
 * so such a reading still decodes them.
 */
export const READING_LAG_MS = 2000;

/** READING_LAG_MS in ticks, rounded up: how far inside its horizon a reservation, a penalty or a block stays. */
export function lagTicks(p: { tickPs: number }): number {
  return Math.ceil((READING_LAG_MS * 1e9) / p.tickPs);
}

/**
 * The debt of a key in ticks at width 32, decoded from its 32-bit TAT. `tat32` and `now32` are
 * ticks modulo 2^32; `lastSec`/`nowSec` are the key's last-admission second and the current
 * second, which the caller has made no earlier than `lastSec` (a reading behind the key's stamp
 * is raised to it: see `Clock`). A TAT that is not ahead of now, or that belongs to a stale key,
 * means debt 0. Any other difference is debt, even beyond `MAX_AHEAD_TICKS`: with the reading in
 * the stamp's second or later, a TAT is at most that far ahead of the reading that wrote it plus
 * one second (under 2^31 ticks), which includes a reading a clock step put up to a second behind
 * the writer's (more debt than at the admission: refused until the clock catches up).
 */
export function debtOf(tat32: number, now32: number, lastSec: number, nowSec: number, p: GcraParams): number {
  const ahead = (tat32 - now32) | 0;
  if (ahead <= 0 || isStale(nowSec, lastSec, p.staleSec)) return 0;
  return ahead;
}

/**
 * `debtOf` for a reading that is never older than the TAT it decodes, nor behind the second of
 * the key's stamp (Gcra32: tat, then lastSec, then the clock; a reading behind the stamp raised
 * to it). Every TAT such a decision wrote is then at most `MAX_AHEAD_TICKS` ahead of its own
 * reading, so less than that plus one second ahead of this one. A difference beyond it is a TAT
 * from before a wrap, older than 2^31 ticks: the key owes nothing. Only a decision that raised
 * lastSec and has not yet written tat (or stopped there for good) leaves an old TAT under a
 * recent stamp; without this bound a key idle for 2^31 ticks or more would read as owing up to
 * 2^31 ticks while that decision was pending.
 */
export function keyDebtOf(tat32: number, now32: number, lastSec: number, nowSec: number, p: GcraParams): number {
  const ahead = (tat32 - now32) | 0;
  if (ahead <= 0 || isStale(nowSec, lastSec, p.staleSec)) return 0;
  // Past the horizon: rare, so the bound's division is paid only here.
  if (ahead > MAX_AHEAD_TICKS && ahead > MAX_AHEAD_TICKS + Math.ceil(1e12 / p.tickPs) + 1) return 0;
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


/**
 * The debt of a key at width 64 into `out` (TAT minus now, or 0), decoded from its TAT (`hi`,
 * `lo`: a pair, `lo` unsigned) at `now` (ticks, a pair); returns whether the key reads as fresh
 * (debt 0). `wraps`: ticks finer than 1 us, whose TAT wraps within the clock's range; the caller
 * has judged the key's staleness unit (`stale`) and raised a reading behind that unit to it, so a
 * genuine debt is the signed difference. Ticks of 1 us or more never wrap (2^53 ms plus the
 * horizon is under 2^64 of them): the TAT is ahead exactly when it is greater as an unsigned
 * number, however far a clock stepped back. A debt of 2^63 ticks or more (a step back of more
 * than 2^60 ticks) is held at `MAX_WIDE_AHEAD_TICKS`: it refuses every request all the same.
 */
export function wideDebt(hi: number, lo: number, now: Pair, wraps: boolean, stale: boolean, out: Pair): boolean {
  sub(hi, lo, now.hi, now.lo, out);
  const ahead = wraps
    ? out.hi > 0 || (out.hi === 0 && out.lo > 0)
    : (hi >>> 0) > (now.hi >>> 0) || (hi === now.hi && lo > now.lo);
  if (!ahead || stale) {
    out.hi = 0;
    out.lo = 0;
    return true;
  }
  if (out.hi < 0) {
    out.hi = MAX_WIDE_AHEAD_TICKS / 2 ** 32; // 7 * 2^28: the horizon, exactly
    out.lo = 0;
  }
  return false;
}

/**
 * The debt of a key blocked for `ms` from now: the block in ticks, rounded up, and one tick more
 * (the reading it starts from is rounded down to its tick), plus the tolerance less one interval
 * (a request of cost 1 passes once the debt is down to that). Not capped: the caller's horizon
 * check refuses what the state cannot hold.
 */
export function blockDebtTicks(ms: number, p: GcraParams): number {
  return ceilTicks((ms * 1e9) / p.tickPs) + 1 + p.toleranceTicks - p.intervalTicks;
}

/**
 * What a give-back of `cost` may return, in ticks at width 32, when the spend it gives back was
 * decided at the reading `sinceMs` and the give-back decides at `nowMs` (both as the decisions
 * read them: `ticksAt`): the part of the spend's own slot still ahead of now, at least. The slot
 * started no earlier than its decision's reading (where the key's debt then ended, or at that
 * reading), so it ends at least `cost` intervals after `sinceMs`; what of those has passed since
 * was spent whatever happened after (a spend long drained that came back whole lowered the debt
 * that later admissions built, and let one more pass at the same instant: docs/design.md,
 * section 6, "A spend's give-back"). 0 or less: nothing. A reading earlier than `sinceMs` (or
 * `sinceMs` Infinity: a plain reward) bounds nothing: the whole cost.
 */
export function unspentTicks(cost: number, sinceMs: number, nowMs: number, p: { intervalTicks: number; tickPs: number }): number {
  const all = cost * p.intervalTicks;
  if (!(nowMs > sinceMs)) return all;
  // Every interval drained (the estimate is within a tick of the exact difference): nothing, and
  // a difference of 2^31 ticks or more would not decode below.
  if (((nowMs - sinceMs) * 1e9) / p.tickPs >= all + 1) return 0;
  // The ticks between the two readings exactly as the decisions took them (modulo 2^32; less
  // than MAX_AHEAD_TICKS + 1 here, so the difference decodes).
  return all - ((ticksAt(nowMs, p) - ticksAt(sinceMs, p)) | 0);
}

/**
 * Whether a give-back of one spend (a reservation's cancel, a spend's give-back; not a reward)
 * must give nothing: a spend made after it stacked on its slot (`stacked`: the TAT is past the
 * slot's end), and the key owes more than its burst (`debt`, in ticks, over the tolerance), so
 * that spend may be a reservation still to act. A reservation acts at its TAT less the burst: its
 * act time was placed behind our slot, and it does not move when our slot comes off the TAT, so a
 * new request could then act beside it (found: 5 of 10 reservations cancelled let 10 act in 400 ms
 * at one per 100 ms with a burst of 1; docs/design.md, "Reservations"). A debt within the burst
 * means every spend after ours has acted, and the give-back is safe as it was. A spend's
 * give-back follows an admission, which acted at once: a debt past the burst means a later spend
 * stacked on it, so its caller passes `stacked` true.
 */
export function laterMayAct(debt: number, stacked: boolean, p: { toleranceTicks: number }): boolean {
  return stacked && debt > p.toleranceTicks;
}

/**
 * `unspentTicks` at width 64: `cost` intervals less the ticks from `sinceMs` to
 * `now` (the give-back's reading `nowMs`, already in `ticks`' 64-bit ticks), `ticks` and
 * `scratch` used as scratch: the whole cost's ticks (`cost` intervals, a float), or fewer whole
 * ticks, exact below 2^53 ticks and a margin less past that. The difference is taken only under
 * `all + 1` ticks (the estimate first), so it never wraps.
 */
export function wideUnspentTicks(
  cost: number, sinceMs: number, nowMs: number, p: { intervalTicks: number; tickPs: number }, now: Pair, ticks: Ticks64, scratch: Pair,
): number {
  const all = cost * p.intervalTicks;
  if (!(nowMs > sinceMs)) return all;
  // Every interval drained, as `unspentTicks` judges it: nothing (found: past 2^63 ticks, 10.7
  // days of 0.1 ps ticks, the difference below read as negative and gave back the whole cost).
  if (((nowMs - sinceMs) * 1e9) / p.tickPs >= all + 1) return 0;
  ticks.read(sinceMs);
  sub(now.hi, now.lo, ticks.hi, ticks.lo, scratch);
  const bound = all - toNumber(scratch.hi, scratch.lo);
  // Below the whole cost: whole ticks, at least 0, and past 2^53 ticks less a margin of 2^-50 of
  // them for the float arithmetic.
  return bound >= all ? all : Math.max(0, Math.floor(all > 2 ** 53 ? bound - all * 2 ** -50 : bound));
}
