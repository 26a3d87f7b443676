import { lagTicks, MAX_WIDE_AHEAD_TICKS, wideDebt, wideUnspentTicks, WIDE_TICKS_PS, wideStaleUnits, type GcraParams } from '../math/gcra.js';
import { isStale, raiseStamp, STALE_UNIT_MS, staleUnitAt, unitsAhead } from '../time/stamps.js';
import { ceilTicks, maxWaitTicks, ticksToMs } from '../time/ticks.js';
import { ticks64, Ticks64 } from '../time/ticks64.js';
import { cas64 } from '../math/word64.js';
import { add, compare, divmod, fromNumber, mul, pair, sub, toNumber, type QuotRem } from '../math/int64.js';
import { swap, type LimitAlgorithm, type Moment, type Verdict } from './types.js';

/**
 * The 64-bit GCRA limit of the engines (keys with several limits or a global cap, and
 * PolicyLimiter's rules): the TAT's two halves, its own staleness unit (`STALE_UNIT_MS`; the
 * engine's shared lastSec word counts seconds) and its tick; and `carryDebt`, which re-expresses
 * such a state in another tick when a rule changes. The 32-bit limit is `NarrowGcra` (gcra.ts).
 */

export function wideGcra(p: GcraParams): LimitAlgorithm {
  const ticks = new Ticks64(p.tickPs);
  const now = pair();
  const fresh = pair();
  const d = pair();
  const next = pair();
  const spend = pair();
  const after = pair();
  const over = pair();
  const qr: QuotRem = { q: 0, r: 0 };
  const staleOn = p.staleSec !== Infinity;
  const t = p.intervalTicks;
  // The snapshot ([lo, hi, unit]), whether it read as fresh, and the cost the last check allowed.
  let lo = 0;
  let hi = 0;
  let unit = 0;
  let wasFresh = false;
  let spent = 0;
  // A penalty's or a block's new TAT (force), which the next commit writes instead of a spend.
  let forced = false;
  const target = pair();
  const blockDebt = pair();
  /**
   * How far the reading was behind the start of the state's staleness unit (0: not behind). The
   * engine raises a reading behind the key's seconds stamp; only a step back of 2^30 s or more,
   * which that stamp cannot tell from a long idle, leaves one behind this unit. Such a state is
   * decoded at the start of its unit and refuses everything until the clock gets there.
   */
  let behindMs = 0;

  /** Decodes the snapshot at `m` into `d` (the debt) and `qr`; sets `wasFresh` and `behindMs`. */
  function decode(m: Moment): void {
    let ms = m.ms;
    behindMs = 0;
    if (staleOn) {
      const u = staleUnitAt(ms);
      const ahead = unitsAhead(u, unit);
      if (ahead !== 0) {
        ms = (u + ahead) * STALE_UNIT_MS;
        behindMs = ms - m.ms;
      }
    }
    ticks.read(ms);
    now.hi = ticks.hi;
    now.lo = ticks.lo;
    fresh.hi = ticks.freshHi;
    fresh.lo = ticks.freshLo;
    // Not ahead of now, or stale: fresh. Ahead, however far, is debt (wideDebt).
    wasFresh = wideDebt(hi, lo >>> 0, now, staleOn, staleOn && isStale(staleUnitAt(ms), unit, p.staleSec), d);
    divmod(d.hi, d.lo, t, qr);
  }

  /** A refusal while the reading is behind the state's unit: waits until the clock gets there. */
  function behind(cost: number, v: Verdict): void {
    const { q, r } = qr;
    v.allowed = false;
    v.remaining = 0;
    v.waitMs = cost > p.burst ? Infinity : behindMs + ticksToMs(Math.max(0, (q + cost - p.burst) * t + r), p);
    v.resetMs = behindMs + ticksToMs(q * t + r, p);
    v.latestMs = Infinity;
    spent = 0;
  }

  const tickIndex = WIDE_TICKS_PS.indexOf(p.tickPs);
  return {
    stateWords: 4, // [TAT low, TAT high, staleness unit, tick index]: the index lets a rule change carry debt
    align8: true, // the TAT is written as one 64-bit word
    staleSec: Infinity, // its own unit word decides staleness
    lockFree: true,
    gcra: true,
    init(w, at, m) {
      ticks.read(m.ms);
      Atomics.store(w, at, ticks.lo | 0); // no debt: now, floored
      Atomics.store(w, at + 1, ticks.hi);
      Atomics.store(w, at + 2, staleUnitAt(m.ms) | 0);
      Atomics.store(w, at + 3, tickIndex);
    },
    load(w, at) {
      lo = Atomics.load(w, at);
      hi = Atomics.load(w, at + 1);
      unit = Atomics.load(w, at + 2);
    },
    check(m, _stale, cost, v: Verdict) {
      forced = false;
      decode(m);
      if (behindMs > 0) {
        behind(cost, v);
        return;
      }
      const { q, r } = qr;
      v.allowed = cost <= p.burst && (q + cost < p.burst || (q + cost === p.burst && r === 0));
      const used = v.allowed ? q + cost : q;
      v.remaining = Math.max(0, p.burst - used - (r > 0 ? 1 : 0));
      v.waitMs = v.allowed ? 0 : cost > p.burst ? Infinity : ticksToMs((q + cost - p.burst) * t + r, p);
      v.resetMs = ticksToMs(used * t + r, p);
      spent = cost;
    },
    reserve(m, _stale, cost, maxWaitMs, v: Verdict, notBeforeMs = 0) {
      forced = false;
      decode(m);
      if (behindMs > 0) {
        behind(cost, v);
        return;
      }
      // The debt after the spend, and the wait: how far it runs past the tolerance.
      mul(cost, t, spend);
      add(d.hi, d.lo, spend.hi, spend.lo, after);
      mul(p.burst, t, spend);
      sub(after.hi, after.lo, spend.hi, spend.lo, over);
      // Not before `notBeforeMs` (another limit or the cap waits longer), as the narrow reserve:
      // the slot then starts where the request acts, past the TAT, from now plus that wait.
      const from = notBeforeMs > 0 ? ceilTicks((notBeforeMs * 1e9) / p.tickPs) : 0;
      const delay = Math.max(over.hi < 0 ? 0 : toNumber(over.hi, over.lo), from);
      if (from > toNumber(d.hi, d.lo)) {
        fromNumber(from, after);
        mul(cost, t, spend);
        add(after.hi, after.lo, spend.hi, spend.lo, after);
        add(now.hi, now.lo, after.hi, after.lo, target); // the new TAT: now + from + cost * t
        forced = true;
      }
      const ahead = toNumber(after.hi, after.lo);
      v.allowed = cost <= p.burst && delay <= maxWaitTicks(maxWaitMs, p) && ahead <= MAX_WIDE_AHEAD_TICKS - lagTicks(p);
      if (!v.allowed) forced = false;
      v.waitMs = cost > p.burst ? Infinity : ticksToMs(delay, p);
      v.remaining = v.allowed ? Math.max(0, p.burst - Math.ceil(ahead / t)) : Math.max(0, p.burst - qr.q - (qr.r > 0 ? 1 : 0));
      v.resetMs = ticksToMs(v.allowed ? ahead : qr.q * t + qr.r, p);
      // What it counted holds for an act within the tick its slot starts in (as the narrow reserve).
      v.latestMs = ticksToMs(delay + 1, p);
      spent = cost;
    },
    force(m, _stale, cost, blockMs, clamp, v: Verdict, sinceMs = Infinity) {
      decode(m); // a reading behind the state's unit is judged at that unit's start: a later block
      const horizon = MAX_WIDE_AHEAD_TICKS - lagTicks(p);
      // after = the debt the key is left with (a penalty adds its cost; a block raises to its
      // debt, or one tick past a debt already as long), as in the narrow force.
      if (blockMs < 0 && cost < 0) {
        // A reward (a negative cost, under the key's lock or give-back guard): the debt less it,
        // never below fresh; a spend's give-back no more than what of that spend is still ahead.
        mul(-cost, t, spend);
        const all = -cost * t;
        // At the reading decoded; a reading raised to the state's unit (a step back) bounds
        // nothing, and a bounded give-back then gives nothing (as Gcra32's).
        // And nothing while a later spend stacked on it may still wait to act (math/gcra.ts
        // laterMayAct: a spend's give-back follows an admission, stacked on whenever the debt is
        // past the burst).
        const laterMayAct = sinceMs !== Infinity && toNumber(d.hi, d.lo) > p.toleranceTicks;
        const bound = (behindMs > 0 && sinceMs !== Infinity) || laterMayAct ? 0 : wideUnspentTicks(-cost, sinceMs, m.ms + behindMs, p, now, ticks, over);
        if (bound < all) fromNumber(bound, spend);
        if (compare(d.hi, d.lo, spend.hi, spend.lo) <= 0) { after.hi = 0; after.lo = 0; }
        else sub(d.hi, d.lo, spend.hi, spend.lo, after);
      } else if (blockMs < 0) {
        mul(cost, t, spend);
        add(d.hi, d.lo, spend.hi, spend.lo, after);
      } else {
        // The block in ticks, rounded up, and a tick more (beyond 2^53 ticks an ulp more), plus
        // the tolerance less one interval: WideGcra.block's debt.
        const ticks = Math.ceil((blockMs * 1e9) / p.tickPs);
        fromNumber(Math.min(MAX_WIDE_AHEAD_TICKS, ticks + Math.max(1, ticks * 2 ** -52)), blockDebt);
        mul(p.burst - 1, t, spend);
        add(blockDebt.hi, blockDebt.lo, spend.hi, spend.lo, blockDebt);
        add(d.hi, d.lo, 0, 1, after);
        if (compare(blockDebt.hi, blockDebt.lo, after.hi, after.lo) > 0) { after.hi = blockDebt.hi; after.lo = blockDebt.lo; }
      }
      let ok = true;
      if (toNumber(after.hi, after.lo) > horizon) {
        // Refused that long already: one tick less (still the block's length), so that the word changes.
        const longer = blockMs >= 0 ? compare(d.hi, d.lo, blockDebt.hi, blockDebt.lo) : -1;
        if (longer > 0) sub(d.hi, d.lo, 0, 1, after);
        else if (longer === 0) { after.hi = d.hi; after.lo = d.lo; }
        else if (clamp) fromNumber(Math.max(toNumber(d.hi, d.lo), horizon), after);
        else ok = false;
      }
      v.allowed = ok;
      v.waitMs = ok ? 0 : Infinity;
      v.latestMs = Infinity;
      const left = ok ? after : d;
      const ahead = toNumber(left.hi, left.lo);
      v.remaining = Math.max(0, p.burst - Math.ceil(ahead / t));
      v.resetMs = ticksToMs(ahead, p);
      // The new TAT: from the fresh start (no debt), or the TAT plus what the debt grew by.
      if (wasFresh) add(fresh.hi, fresh.lo, after.hi, after.lo, target);
      else {
        sub(after.hi, after.lo, d.hi, d.lo, over);
        add(hi, lo >>> 0, over.hi, over.lo, target);
      }
      forced = ok;
      spent = 0;
    },
    commit(w, at, m) {
      mul(spent, t, next);
      if (forced) { next.hi = target.hi; next.lo = target.lo; }
      else if (wasFresh) add(fresh.hi, fresh.lo, next.hi, next.lo, next);
      else add(hi, lo >>> 0, next.hi, next.lo, next);
      // The staleness unit first, only ever forward, then one 64-bit compareExchange from the
      // snapshot: the commit. Raised after, a reader could load the new TAT with the old unit,
      // judge the key stale and spend over it (the order of the one-limit path, design.md 2).
      // A raise whose commit then fails only says the key was used recently (conservative).
      raiseStamp(w, at + 2, unit, staleUnitAt(m.ms));
      return cas64(w, at, hi, lo, next.hi, next.lo);
    },
    undo(w, at) {
      return cas64(w, at, next.hi, next.lo, hi, lo);
    },
    slotStart(out) {
      mul(spent, t, spend);
      sub(next.hi, next.lo, spend.hi, spend.lo, over);
      out[0] = over.lo | 0;
      out[1] = over.hi;
    },
    refund(w, at, m, startLo, startHi, cost, _exact, forgotten = null) {
      ticks.read(m.ms);
      mul(cost, t, spend); // ct
      add(startHi, startLo >>> 0, spend.hi, spend.lo, after); // the slot's end
      sub(after.hi, after.lo, ticks.hi, ticks.lo, after); // of it, still ahead of now
      for (;;) {
        const l = Atomics.load(w, at);
        const h = Atomics.load(w, at + 1);
        sub(h, l >>> 0, ticks.hi, ticks.lo, over); // the TAT's lead on now
        // Nothing once a later spend was counted after our slot (the TAT's lead past the slot
        // end's): as the narrow refund.
        if (compare(over.hi, over.lo, after.hi, after.lo) > 0) return false;
        // The least of the three (see the narrow refund): all are under 2^63, compared signed.
        let bHi = spend.hi;
        let bLo = spend.lo;
        if (compare(after.hi, after.lo, bHi, bLo) < 0) { bHi = after.hi; bLo = after.lo; }
        if (compare(over.hi, over.lo, bHi, bLo) < 0) { bHi = over.hi; bLo = over.lo; }
        if (bHi < 0 || (bHi === 0 && bLo === 0) || (forgotten !== null && forgotten())) return false;
        sub(h, l >>> 0, bHi, bLo, d);
        // 64-bit compareExchange from the halves just read: a torn read or a spend since retries.
        if (cas64(w, at, h, l, d.hi, d.lo)) return true;
      }
    },
    idle(w, at, m) {
      this.load(w, at);
      decode(m);
      return behindMs === 0 && qr.q === 0 && qr.r === 0;
    },
  };
}

/**
 * Re-expresses a 64-bit GCRA state ([lo, hi, unit, tick index] at `at`) in ticks of `newTickPs`,
 * keeping its debt exactly or rounding it up: the new TAT is the first tick at or after the old
 * one in real time (in exact integers: tenths of a picosecond, BigInt; a rule change is rare),
 * capped at the furthest a TAT may run ahead. For a rule change under the key's lock: `read`
 * holds the four words as the caller loaded them (at `o`), before it checked the lock was still
 * its own; each is written by compareExchange from that value, false if one changed since.
 */
export function carryDebt(w: Int32Array, at: number, read: Int32Array, o: number, ms: number, newTickPs: number): boolean {
  const lo = read[o] as number;
  const hi = read[o + 1] as number;
  const unit = read[o + 2] as number;
  const index = read[o + 3] as number;
  const oldTickPs = WIDE_TICKS_PS[index] as number;
  // A staleness unit ahead of the reading (a clock that stepped back further than the key's
  // seconds stamp can tell): carry at the start of that unit, so the TAT keeps its place in time.
  const u = staleUnitAt(ms);
  const ahead = unitsAhead(u, unit);
  if (ahead !== 0) ms = (u + ahead) * STALE_UNIT_MS;
  const oldNow = pair();
  ticks64(ms, { tickPs: oldTickPs }, oldNow, pair());
  const oldStale = wideStaleUnits(oldTickPs);
  const d = pair();
  const idle = wideDebt(hi, lo >>> 0, oldNow, oldStale !== Infinity, isStale(staleUnitAt(ms), unit, oldStale), d);
  // The debt in old ticks, then in new ones, rounded up: ceil(debt * old / new), in tenths of ps.
  const debtOld = idle ? 0n : (BigInt(d.hi) << 32n) + BigInt(d.lo);
  const from = BigInt(Math.round(oldTickPs * 10));
  const to = BigInt(Math.round(newTickPs * 10));
  let debtNew = (debtOld * from + to - 1n) / to;
  const cap = BigInt(MAX_WIDE_AHEAD_TICKS - 2 ** 40);
  if (debtNew > cap) debtNew = cap;
  // The old TAT in real time is at most now + debtOld * old; the new one starts a tick after now
  // (ceil(now / new) at most), plus the debt rounded up: never earlier. A debt of 0 is a fresh
  // key's: the fresh start.
  const newNow = pair();
  const newFresh = pair();
  ticks64(ms, { tickPs: newTickPs }, newNow, newFresh);
  const base = debtOld === 0n ? (BigInt(newFresh.hi) << 32n) + BigInt(newFresh.lo) : (BigInt(newNow.hi) << 32n) + BigInt(newNow.lo) + 1n;
  const tat = BigInt.asUintN(64, base + debtNew);
  const nextLo = Number(tat & 0xffffffffn) | 0;
  const nextHi = Number(BigInt.asIntN(32, tat >> 32n));
  const nowUnit = staleUnitAt(ms) | 0;
  const newIndex = WIDE_TICKS_PS.indexOf(newTickPs);
  // compareExchange each word from the value read under the lock: a writer whose lock was
  // taken over cannot have its update lost silently.
  return cas64(w, at, hi, lo, nextHi, nextLo) && swap(w, at + 2, unit, nowUnit) && swap(w, at + 3, index, newIndex);
}
