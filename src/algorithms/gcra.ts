import {
  admit, debtOf, gcraParams, isStale, MAX_WIDE_AHEAD_TICKS, remainingAt, ticksAt, ticksToMs, waitTicks,
  wideStaleUnits, type GcraParams,
} from '../gcra.js';
import { staleUnitAt, ticks64, Ticks64 } from '../gcra-wide.js';
import { add, divmod, fromNumber, mul, pair, sub, toNumber, type QuotRem } from '../int64.js';
import type { Limit } from '../limit.js';
import { swap, type LimitAlgorithm, type Moment, type Verdict } from './types.js';

/**
 * GCRA as a locked algorithm, for keys with several limits or a global cap: the same integer math
 * as the lock-free paths (`../gcra.ts`, `../gcra-wide.ts`), at the width the limit needs. A
 * 32-bit limit keeps one TAT word; a 64-bit one keeps the TAT's two halves and its own staleness
 * unit (`STALE_UNIT_MS`), since the engine's shared lastSec word counts seconds.
 */
export function gcraAlgorithm(limit: Limit, name: string, minWidth: 32 | 64 = 32): LimitAlgorithm {
  const p: GcraParams = gcraParams(limit, name, minWidth);
  return p.width === 32 ? narrowGcra(p) : wideGcra(p);
}

function narrowGcra(p: GcraParams): LimitAlgorithm {
  const debt = (w: Int32Array, at: number, m: Moment, stale: boolean): number =>
    stale ? 0 : debtOf(Atomics.load(w, at), ticksAt(m.ms, p), 0, 0, p);
  return {
    stateWords: 1,
    staleSec: p.staleSec,
    init(w, at, m) {
      Atomics.store(w, at, ticksAt(m.ms, p));
    },
    check(w, at, m, stale, cost, v: Verdict) {
      const d = debt(w, at, m, stale);
      const next = cost > p.burst ? -1 : admit(d, cost, p);
      v.allowed = next >= 0;
      v.remaining = remainingAt(v.allowed ? next : d, p);
      v.waitMs = v.allowed ? 0 : ticksToMs(waitTicks(d, cost, p), p);
      v.resetMs = ticksToMs(v.allowed ? next : d, p);
    },
    apply(w, at, m, stale, cost) {
      const prev = Atomics.load(w, at);
      const now32 = ticksAt(m.ms, p);
      const next = admit(stale ? 0 : debtOf(prev, now32, 0, 0, p), cost, p);
      return swap(w, at, prev, (now32 + next) | 0);
    },
    idle(w, at, m, stale) {
      return debt(w, at, m, stale) === 0;
    },
  };
}

function wideGcra(p: GcraParams): LimitAlgorithm {
  const ticks = new Ticks64(p.tickPs);
  const now = pair();
  const fresh = pair();
  /** Reads the clock into `now` and `fresh`. */
  const readClock = (ms: number): void => {
    ticks.read(ms);
    now.hi = ticks.hi;
    now.lo = ticks.lo;
    fresh.hi = ticks.freshHi;
    fresh.lo = ticks.freshLo;
  };
  const d = pair();
  const next = pair();
  const qr: QuotRem = { q: 0, r: 0 };
  const staleOn = p.staleSec !== Infinity;
  const t = p.intervalTicks;

  /** Reads the state at `at` ([lo, hi, unit]) into `d` (the debt) and `qr`; true if fresh. */
  function read(w: Int32Array, at: number, m: Moment): boolean {
    const lo = Atomics.load(w, at) >>> 0;
    const hi = Atomics.load(w, at + 1);
    readClock(m.ms);
    sub(hi, lo, now.hi, now.lo, d);
    const isFresh = d.hi < 0 || (d.hi === 0 && d.lo === 0) || toNumber(d.hi, d.lo) > MAX_WIDE_AHEAD_TICKS ||
      (staleOn && isStale(staleUnitAt(m.ms), Atomics.load(w, at + 2), p.staleSec));
    if (isFresh) { d.hi = 0; d.lo = 0; }
    divmod(d.hi, d.lo, t, qr);
    return isFresh;
  }

  return {
    stateWords: 3,
    staleSec: Infinity, // its own unit word decides staleness
    init(w, at, m) {
      readClock(m.ms);
      Atomics.store(w, at, now.lo | 0); // no debt: now, floored
      Atomics.store(w, at + 1, now.hi);
      Atomics.store(w, at + 2, staleUnitAt(m.ms) | 0);
    },
    check(w, at, m, _stale, cost, v: Verdict) {
      read(w, at, m);
      const { q, r } = qr;
      v.allowed = cost <= p.burst && (q + cost < p.burst || (q + cost === p.burst && r === 0));
      const spent = v.allowed ? q + cost : q;
      v.remaining = Math.max(0, p.burst - spent - (r > 0 ? 1 : 0));
      v.waitMs = v.allowed ? 0 : cost > p.burst ? Infinity : ticksToMs((q + cost - p.burst) * t + r, p);
      v.resetMs = ticksToMs(spent * t + r, p);
    },
    apply(w, at, m, _stale, cost) {
      const lo = Atomics.load(w, at);
      const hi = Atomics.load(w, at + 1);
      const unit = Atomics.load(w, at + 2);
      const isFresh = read(w, at, m);
      mul(cost, t, next);
      if (isFresh) add(fresh.hi, fresh.lo, next.hi, next.lo, next);
      else add(hi, lo >>> 0, next.hi, next.lo, next);
      const nowUnit = staleUnitAt(m.ms);
      // compareExchange each word from the value read under the lock (see LimitAlgorithm.apply).
      return swap(w, at, lo, next.lo | 0) && swap(w, at + 1, hi, next.hi) &&
        ((nowUnit | 0) === unit || swap(w, at + 2, unit, nowUnit | 0));
    },
    idle(w, at, m) {
      read(w, at, m);
      return qr.q === 0 && qr.r === 0;
    },
  };
}

/**
 * `ticks` of `fromPs` in ticks of `toPs` (picoseconds, integers), rounded up: exact below 2^53; above,
 * a float estimate lifted by a relative guard so that it is never below the exact value.
 */
export function rescaleUp(ticks: number, fromPs: number, toPs: number): number {
  const product = ticks * fromPs;
  if (ticks > 2 ** 53 || product > 2 ** 53) return Math.ceil((product / toPs) * (1 + 2 ** -50));
  let q = Math.ceil(product / toPs);
  // The float quotient can land one off: correct it so that q is the least with q * toPs >= product.
  if (q * toPs < product) q += 1;
  else if (q > 0 && (q - 1) * toPs >= product) q -= 1;
  return q;
}

const carryNow = pair();
const carryFresh = pair();
const carryD = pair();

/**
 * Re-expresses a 64-bit GCRA state ([lo, hi, unit] at `at`) written in ticks of `oldTickPs` in
 * ticks of `newTickPs`, keeping its debt: the debt is rounded up (never shrinks), and capped at
 * the furthest a TAT may run ahead. For a rule change under the key's lock; writes with
 * compareExchange from the values read, false if a word changed under it.
 */
export function carryDebt(w: Int32Array, at: number, ms: number, oldTickPs: number, newTickPs: number): boolean {
  const lo = Atomics.load(w, at);
  const hi = Atomics.load(w, at + 1);
  const unit = Atomics.load(w, at + 2);
  ticks64(ms, { tickPs: oldTickPs }, carryNow, carryFresh);
  const d = sub(hi, lo >>> 0, carryNow.hi, carryNow.lo, carryD);
  const idle = d.hi < 0 || toNumber(d.hi, d.lo) > MAX_WIDE_AHEAD_TICKS || isStale(staleUnitAt(ms), unit, wideStaleUnits(oldTickPs));
  const debtOld = idle ? 0 : toNumber(d.hi, d.lo);
  const debtNew = Math.min(rescaleUp(debtOld, oldTickPs, newTickPs), MAX_WIDE_AHEAD_TICKS - 2 ** 40);
  ticks64(ms, { tickPs: newTickPs }, carryNow, carryFresh);
  const base = debtNew === 0 ? carryFresh : carryNow;
  const next = add(base.hi, base.lo, 0, 0, carryD);
  fromNumber(debtNew, carryFresh);
  add(next.hi, next.lo, carryFresh.hi, carryFresh.lo, next);
  const nowUnit = staleUnitAt(ms) | 0;
  // compareExchange each word from the value read under the lock: a writer whose lock was
  // taken over cannot have its update lost silently.
  return swap(w, at, lo, next.lo | 0) && swap(w, at + 1, hi, next.hi) && swap(w, at + 2, unit, nowUnit);
}
