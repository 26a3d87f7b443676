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
 * Everything is counted in *ticks*, a per-limiter unit of a power of ten nanoseconds (at least
 * 10 ns) chosen so that `tau` fits in 2^29 ticks (see `docs/design.md` for why).
 *
 * Thread-safety: every function here is pure.
 */
export interface GcraParams {
  /** The tick in nanoseconds: 10, 100, 1000, ... */
  tickNs: number;
  /** Emission interval `t` in ticks, rounded up so the rate is never exceeded. */
  intervalTicks: number;
  /** Tolerance `tau = burst * t` in ticks; at most `MAX_TOLERANCE_TICKS`. */
  toleranceTicks: number;
  /** Bucket capacity in requests. */
  burst: number;
  /**
   * A key whose last admission is older than this many whole seconds is certainly fresh,
   * whatever its 32-bit TAT says (the TAT may have wrapped): an admission or reservation never
   * leaves the TAT more than MAX_AHEAD_TICKS ahead, and this covers that plus 2 s of rounding.
   */
  staleSec: number;
}

/** The largest tolerance, in ticks: 2^29 leaves room for wrap-around arithmetic on int32. */
export const MAX_TOLERANCE_TICKS = 2 ** 29;
/**
 * The furthest a TAT may run ahead of now, in ticks: the tolerance plus reservations made by
 * `reserve`/`acquire` (at least 2^29 ticks of them). Half the positive int32 range.
 */
export const MAX_AHEAD_TICKS = 2 ** 30;

/** Largest relative error accepted when the emission interval is rounded up to whole ticks. */
const MAX_ROUNDING_ERROR = 1e-3;
/**
 * The smallest tick. With ticks of at least 10 ns the 32-bit TAT wraps no sooner than every 43 s,
 * long enough for the last-admission second to tell an idle key before it could alias.
 */
const MIN_TICK_NS = 10;
const MAX_TICK_NS = 1e9;

function ceilTicks(ns: number, tickNs: number): number {
  const exact = ns / tickNs;
  const nearest = Math.round(exact);
  // Guard against 200000.00000000003 becoming 200001: accept a float that is an integer to 1e-9.
  return Math.abs(exact - nearest) <= 1e-9 * Math.max(1, exact) ? nearest : Math.ceil(exact);
}

/** Chooses the tick and converts a limit to integer GCRA parameters. Throws on a bad limit. */
export function gcraParams(limit: Limit, name = 'limit'): GcraParams {
  const { permits, periodMs, burst } = validateLimit(limit, name);
  const intervalNs = (periodMs * 1e6) / permits;
  // The finest tick whose tolerance fits: finer ticks only reduce the rounding of t.
  for (let tickNs = MIN_TICK_NS; tickNs <= MAX_TICK_NS; tickNs *= 10) {
    const intervalTicks = ceilTicks(intervalNs, tickNs);
    const toleranceTicks = intervalTicks * burst;
    if (toleranceTicks > MAX_TOLERANCE_TICKS) continue;
    const error = (intervalTicks * tickNs - intervalNs) / intervalNs;
    if (error > MAX_ROUNDING_ERROR) break;
    const staleSec = Math.ceil((MAX_AHEAD_TICKS * tickNs) / 1e9) + 2;
    return { tickNs, intervalTicks, toleranceTicks, burst, staleSec };
  }
  throw new RangeError(
    `${name}: burst ${burst} with one request every ${intervalNs} ns cannot be represented ` +
      `(the emission interval must be at least ${MIN_TICK_NS * 100} ns and burst * interval must ` +
      `fit in ${MAX_TOLERANCE_TICKS} ticks with under ${MAX_ROUNDING_ERROR * 100}% rounding)`,
  );
}

/**
 * The debt of a key in ticks, decoded from its 32-bit TAT. `tat32` and `now32` are ticks modulo
 * 2^32; `lastSec`/`nowSec` are the key's last-admission second and the current second. A TAT that
 * is not ahead of now, or that belongs to a key idle for longer than `staleSec`, means debt 0.
 */
export function debtOf(tat32: number, now32: number, lastSec: number, nowSec: number, p: GcraParams): number {
  const ahead = (tat32 - now32) | 0;
  if (ahead <= 0 || nowSec - lastSec > p.staleSec) return 0;
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
export function ticksToMs(ticks: number, p: GcraParams): number {
  return (ticks * p.tickNs) / 1e6;
}

/** 1 + 2^-50: lifts a product that lost a few ulps back onto the integer it should be. */
export const ULP_GUARD = 1 + 2 ** -50;

/**
 * Whole ticks elapsed at `nowMs`. A clock in milliseconds times 1000 can land a few ulps below
 * an integer (1234.567 ms * 1000 = 1234566.9999999998 us); the guard keeps such a reading on the
 * tick it names. It moves a reading up by at most 4 ulps (picoseconds at any real uptime).
 */
export function ticksAt(nowMs: number, p: GcraParams): number {
  return Math.floor(((nowMs * 1e6) / p.tickNs) * ULP_GUARD);
}

/** Whole seconds elapsed at `nowMs`, with the same guard. */
export function secondsAt(nowMs: number): number {
  return Math.floor((nowMs / 1000) * ULP_GUARD);
}
