import type { Clock } from '../time/clock.js';
import { ceilPs, ceilTicks, ticksToMs } from '../time/ticks.js';
import { isStale, raiseStamp, STALE_UNIT_MS, unitsAhead } from '../time/stamps.js';
import { MAX_WIDE_AHEAD_TICKS, wideDebt, wideUnspentTicks, type GcraParams } from '../math/gcra.js';
import { add, compare, divmod, fromNumber, mul, pair, sub, toNumber, type Pair, type QuotRem } from '../math/int64.js';
import { DEAD, S_CTRL, S_LAST_SEC } from '../table/layout.js';
import { ALREADY_DEAD, NOT_IDLE, RETIRED, type SlotState } from '../table/table.js';
import { RELOCATE } from '../table/slot-index.js';
import type { SlotRef } from '../table/slot-ref.js';
import { type MarkGuard, RefundMark, resetDone, resetMark, resetting } from '../table/reset-marks.js';
import { Ticks64 } from '../time/ticks64.js';
import { staleUnitAt } from '../time/stamps.js';
import { bigView, casHalves, halvesOf } from '../math/word64.js';
import { backoff } from './backoff.js';

/**
 * GCRA at width 64: the lock-free path for limits whose tolerance does not fit 32 bits (a
 * million a day, a gigabyte a second counted in bytes, bursts up to 2^40).
 *
 * The TAT is one 64-bit word, 8-byte aligned in the slot's state area, in ticks modulo 2^64.
 * Reads take its two int32 halves (no BigInt, no allocation); the only write of an admission is
 * one 64-bit compareExchange on a `BigInt64Array` over the same memory, from the value the halves
 * spelled to the new one, so a decision made on a torn read can never land. The arithmetic is
 * exact on int32 pairs (`math/int64.ts`). The slot's `lastSec` word holds the last admission's unit of
 * `STALE_UNIT_MS` (about 68 minutes): 2^53 ms is under 2^32 units, so it never wraps, and a key
 * idle longer than `staleSec` units is certainly fresh, whatever its wrapped TAT says (ticks
 * finer than 1 us wrap 64 bits within the clock's range; coarser ones cannot, and skip the rule).
 * docs/design.md, section 2, has the argument.
 *
 * Thread-safety: one instance per thread (it holds scratch memory); every method may run on any
 * number of threads at once over the same table.
 */

/** The 64-bit reclaim marker: high half DEAD, low half 0. An admission never stores it. */
const DEAD64 = -(2n ** 63n);

/** The outcome of `decide`. */
export const ALLOWED = 0;
export const REFUSED = 1;
// RELOCATE (2, table/slot-index.ts): the slot no longer holds the key; look it up again.

/** `reserve` results beyond RELOCATE: the wait exceeds the horizon or maxWait. */
export const TOO_LONG = 3;

/** `#spend` modes, as Gcra32's: admission, reservation, refund (and reward), penalty, reset, block. */
const ADMIT = 0;
const RESERVE = 1;
const REFUND = 2;
const PENALTY = 3;
const RESET = 4;
const BLOCK = 5;

/** `#commit` outcomes. */
const LANDED = 0;
const LOST = 1;
const MOVED = 2;
/** #commit: a refund landed after its slot's reset mark moved, and was taken back (nothing given). */
const FORGOTTEN = 3;

export class WideGcra {
  readonly #w: Int32Array;
  readonly #big: BigInt64Array;
  readonly #p: GcraParams;
  readonly #clock: Clock;
  /** Word offset of the TAT's low half from a slot's base (even, so the word is 8-byte aligned). */
  readonly #tatOffset: number;
  readonly #staleOn: boolean;
  readonly #ticks: Ticks64;
  readonly #now: Pair = pair();
  /** A word read whole, split into its halves (retire). */
  readonly #halves: Pair = pair();
  readonly #fresh: Pair = pair();
  readonly #d: Pair = pair();
  readonly #n: Pair = pair();
  /** Scratch of #pastEnd. */
  readonly #diff: Pair = pair();
  /** A refund's ticks to give back when a give-back's bound is less than its cost's (#spend), else Infinity. */
  #give = Infinity;
  /** Whether the last snapshot's reading was raised to the key's staleness unit (a step back). */
  #raised = false;
  readonly #qr: QuotRem = { q: 0, r: 0 };
  /** A block's debt (`block`): the debt the key is raised to. */
  readonly #blockDebt: Pair = pair();
  /** A block's #spend found the key owing the block or more: #commit writes its TAT and one tick. */
  #blockOver = false;
  /** The key's debt after the last decision (after the admission, or unspent on a refusal). */
  readonly debt: Pair = pair();
  /** Ticks until the last refused request would pass (Infinity when cost > burst). */
  waitTicks = 0;
  /** The clock reading of the last decision, in ms. */
  nowMs = 0;
  /** The clock's own last reading (earlier than `nowMs` after a step back). */
  rawMs = 0;
  /** The latest clock reading this instance has decided at: no decision uses an earlier one (see Clock). */
  #latestMs = -Infinity;
  /** Compare-and-swap attempts lost to other threads. */
  retries = 0;

  /** The reset marks' guard, held by every give-back while it writes (as Gcra32's). */
  readonly #guard: MarkGuard;

  constructor(words: Int32Array, p: GcraParams, clock: Clock, tatOffset: number, guard: MarkGuard) {
    this.#w = words;
    this.#guard = guard;
    this.#big = bigView(words.buffer);
    this.#p = p;
    this.#clock = clock;
    this.#tatOffset = tatOffset;
    this.#staleOn = p.staleSec !== Infinity;
    this.#ticks = new Ticks64(p.tickPs);
  }

  /**
   * Reads the clock into `#now` (whole ticks, floored) and `#fresh` (where a fresh key's TAT
   * starts: the same, or the next tick for a reading between ticks coarser than 1 ms, so that a
   * fresh start never gains part of a tick). Exact modulo 2^64 for every reading up to 2^53 ms.
   */
  #readClock(): number {
    const rawMs = this.#clock.now();
    this.rawMs = rawMs;
    // Never earlier than this instance's latest reading (a clock that stepped back).
    const nowMs = rawMs >= this.#latestMs ? rawMs : this.#latestMs;
    this.#latestMs = nowMs;
    return this.#readAt(nowMs);
  }

  /** How far the last decision's reading was ahead of the clock's own (0 unless it stepped back). */
  get leadMs(): number {
    return this.nowMs > this.rawMs ? this.nowMs - this.rawMs : 0;
  }

  /** Sets `nowMs`, `#now` and `#fresh` for the reading `nowMs` (see #readClock); returns it. */
  #readAt(nowMs: number): number {
    this.nowMs = nowMs;
    const t = this.#ticks;
    t.read(nowMs);
    this.#now.hi = t.hi;
    this.#now.lo = t.lo;
    this.#fresh.hi = t.freshHi;
    this.#fresh.lo = t.freshLo;
    return nowMs;
  }

  /** Current staleness unit. */
  #unit(nowMs: number): number {
    return staleUnitAt(nowMs);
  }

  /**
   * Sets `#d` to the key's debt (TAT - now, or 0 for a fresh key) and returns whether the key is
   * fresh. `last` is the stored staleness unit (read after the TAT).
   */
  #debt(hi: number, lo: number, last: number, nowMs: number): boolean {
    // Not ahead, or stale: fresh. Ahead, however far, is debt (wideDebt).
    return wideDebt(hi, lo, this.#now, this.#staleOn, this.#staleOn && isStale(this.#unit(nowMs), last, this.#p.staleSec), this.#d);
  }

  /** 64-bit compareExchange of the TAT at `at` from (hi, lo) to `next` (see casHalves). */
  #cas(at: number, hi: number, lo: number, next: Pair): boolean {
    // Never store the reclaim marker: one tick later instead (conservative by a tick).
    return casHalves(this.#big, at, hi, lo, next.hi, next.hi === DEAD && next.lo === 0 ? 1 : next.lo);
  }

  /** Raises the staleness unit to now's: only ever forward (raiseStamp). */
  #raise(base: number, last: number, nowMs: number): void {
    raiseStamp(this.#w, base + S_LAST_SEC, last, this.#unit(nowMs));
  }


  // The snapshot a decision is made on, set by #snapshot.
  #lo = 0;
  #hi = 0;
  #last = 0;
  #isFresh = false;

  /**
   * Loads the key's state in order: the TAT's halves, then lastSec, then the clock, then ctrl.
   * The clock read after the TAT keeps a genuine debt within MAX_WIDE_AHEAD_TICKS of now; lastSec
   * read before the clock is never later than now; ctrl unchanged after the TAT means the TAT is
   * our key's. Sets the snapshot, `#d` (the debt) and `#qr` (the debt in whole intervals); false
   * when the slot no longer holds the key.
   */
  #snapshot(base: number, ctrl: number, at: number): boolean {
    const w = this.#w;
    const lo = Atomics.load(w, at) >>> 0;
    const hi = Atomics.load(w, at + 1);
    const last = this.#staleOn ? Atomics.load(w, base + S_LAST_SEC) : 0;
    let nowMs = this.#readClock();
    if (Atomics.load(w, base + S_CTRL) !== ctrl || (hi === DEAD && lo === 0)) return false;
    // A staleness unit ahead of the reading: the clock stepped back behind a decision on this
    // key. Decide at the start of that unit (arithmetic on the unit loaded above; no load).
    // Without the word (ticks of 1 us or more) the TAT itself is exact (wideDebt).
    const ahead = this.#staleOn ? unitsAhead(this.#unit(nowMs), last) : 0;
    if (ahead !== 0) nowMs = this.#readAt((this.#unit(nowMs) + ahead) * STALE_UNIT_MS);
    this.#raised = ahead !== 0;
    this.#lo = lo;
    this.#hi = hi;
    this.#last = last;
    this.#isFresh = this.#debt(hi, lo, last, nowMs);
    divmod(this.#d.hi, this.#d.lo, this.#p.intervalTicks, this.#qr);
    return true;
  }

  /**
   * Spends `cost` on the snapshot: the TAT (or, for a fresh key, its first tick) plus
   * `cost * t`, by one compare-and-swap from the snapshot. LANDED, LOST (another thread changed
   * the TAT: decide again) or MOVED (the compare-and-swap landed, but on a slot that meanwhile
   * went to another key: that key is overcharged, which is conservative, and ours must be found
   * again). Leaves the new TAT in `#n`.
   */
  #commit(base: number, ctrl: number, at: number, cost: number, mode: number): number {
    const givesBack = mode === REFUND || mode === RESET;
    const next = mode === RESET || mode === BLOCK
      ? this.#n
      : givesBack && this.#give !== Infinity ? fromNumber(this.#give, this.#n) : mul(cost, this.#p.intervalTicks, this.#n);
    if (mode === BLOCK) {
      // now + the block's debt (more than the key's: #spend checked), fresh or not; a key that
      // owes the block or more already: its TAT and one tick (see #spend).
      if (this.#blockOver) add(this.#hi, this.#lo, 0, 1, next);
      else add(this.#now.hi, this.#now.lo, this.#blockDebt.hi, this.#blockDebt.lo, next);
      if (this.#staleOn) this.#raise(base, this.#last, this.nowMs);
    } else if (givesBack) {
      // TAT - min(debt, cost * t, or a give-back's bound) (all the debt for a reset): back to now
      // at the furthest (the snapshot is not fresh).
      if (mode === RESET || compare(next.hi, next.lo, this.#d.hi, this.#d.lo) > 0) { next.hi = this.#d.hi; next.lo = this.#d.lo; }
      sub(this.#hi, this.#lo, next.hi, next.lo, next);
    } else {
      const from = this.#isFresh ? this.#fresh : null;
      add(from?.hi ?? this.#hi, from?.lo ?? this.#lo, next.hi, next.lo, next);
      if (this.#staleOn) this.#raise(base, this.#last, this.nowMs);
    }
    if (!this.#cas(at, this.#hi, this.#lo, next)) {
      this.retries++;
      return LOST;
    }
    // ctrl after the compare-and-swap: unchanged, the slot held our key when the TAT matched (a
    // key we just charged is not idle, so it cannot be reclaimed after it). Changed, the slot
    // was reclaimed and reused, and its new key's TAT came back to our snapshot (a refund can move
    // a TAT back): our key was not charged, and that key is overcharged (conservative). A refund
    // cannot get there (docs/design.md, "Reservations"), and would be taken back if it did.
    if (Atomics.load(this.#w, base + S_CTRL) === ctrl) {
      // A refund whose slot's reset mark moved since its check (it stalled past the table's
      // reuse age and was taken over: as Gcra32's): taken back from our own write, and nothing
      // given; if a write built on ours since, it stands.
      if (!this.#refundMark.forgotten(this.#w, base)) return LANDED;
      return this.#cas(at, next.hi, next.lo, this.#snapshotTat()) ? FORGOTTEN : LANDED;
    }
    if (givesBack) this.#cas(at, next.hi, next.lo, this.#snapshotTat()); // from our own write only
    return MOVED;
  }

  /** Whether the snapshot's TAT is past `end` (a signed difference: within 2^63 ticks of it). */
  #pastEnd(end: Pair): boolean {
    const d = sub(this.#hi, this.#lo, end.hi, end.lo, this.#diff);
    return d.hi > 0 || (d.hi === 0 && d.lo !== 0);
  }

  /** The snapshot's TAT as a pair (scratch: `#halves`). */
  #snapshotTat(): Pair {
    this.#halves.hi = this.#hi;
    this.#halves.lo = this.#lo;
    return this.#halves;
  }

  /**
   * Decides for the key at `ref` (its slot and ctrl word) and, if it passes, counts it in one
   * compare-and-swap. Returns ALLOWED, REFUSED or RELOCATE; `debt`, `waitTicks` and `nowMs`
   * describe the outcome.
   */
  decide(ref: SlotRef, cost: number): number {
    return this.#spend(ref.base, ref.ctrl, cost, ADMIT, 0);
  }

  /**
   * Counts `cost` now, even beyond the burst, and returns the wait in ticks before it may act
   * (in `waitTicks`): ALLOWED, RELOCATE, REFUSED (cost > burst) or TOO_LONG (the wait exceeds
   * `maxWaitTicks`, or would leave the TAT past the horizon; nothing is counted).
   */
  reserve(ref: SlotRef, cost: number, maxWaitTicks: number): number {
    // The slot's reset mark before the decision, for the cancel (as Gcra32's).
    this.reservedMark = resetMark(this.#w, ref.base);
    return this.#spend(ref.base, ref.ctrl, cost, RESERVE, maxWaitTicks);
  }

  /** As Gcra32's: the reset mark the latest `reserve` read, for its `refund`. */
  reservedMark = 0;
  /** The TAT the latest `reserve` wrote: where its slot ends, for its `refund` (`laterMayAct`). */
  readonly #reservedEnd: Pair = pair();
  /** While a refund runs: the reset mark its reservation read. */
  readonly #refundMark = new RefundMark();
  /** While a cancel or a spend's give-back runs (not a reward): it gives nothing when `laterMayAct`. */
  #ownSpend = false;
  /** While a cancel runs: where its reservation's slot ended; null for a spend's give-back. */
  #ownEnd: Pair | null = null;

  /** Where the latest `reserve`'s slot ends (the TAT it wrote), for its `refund`: a copy. */
  get reservedEnd(): Pair {
    return { hi: this.#reservedEnd.hi, lo: this.#reservedEnd.lo };
  }

  /**
   * Gives back `cost` intervals of a reservation made on the key at `ref`, never below now. True
   * if it did (false: nothing of it is still ahead, the key left the slot, or its slot's reset
   * mark moved from `mark`: as Gcra32's).
   */
  refund(ref: SlotRef, cost: number, mark: number, end: Pair): boolean {
    return this.#markedRefund(ref, cost, Infinity, mark, end) === ALLOWED;
  }

  /** As Gcra32's: `cost` counted even beyond the burst, with no wait limit; ALLOWED, RELOCATE or TOO_LONG. */
  penalize(ref: SlotRef, cost: number): number {
    return this.#spend(ref.base, ref.ctrl, cost, PENALTY, 0);
  }

  /** As Gcra32's: `cost` intervals given back, never below now; ALLOWED, REFUSED (nothing was ahead) or RELOCATE. */
  reward(ref: SlotRef, cost: number): number {
    const token = this.#guard.take(ref.base); // a give-back: under its mark's guard (table/reset-marks.ts)
    try {
      return this.#spend(ref.base, ref.ctrl, cost, REFUND, Infinity);
    } finally {
      this.#guard.release(ref.base, token);
    }
  }

  /** The reading the last decision was made at, in ms (`nowMs`; Gcra32's `readingMs`). */
  get readingMs(): number {
    return this.nowMs;
  }

  /**
   * As Gcra32's: a reward bounded by what of a spend decided at `sinceMs` is still ahead, and
   * nothing once the slot's reset mark moved from `mark`; ALLOWED, REFUSED or RELOCATE.
   */
  giveBack(ref: SlotRef, cost: number, sinceMs: number, mark: number): number {
    return this.#markedRefund(ref, cost, sinceMs, mark);
  }

  /** Gives back everything still ahead of now: ALLOWED, REFUSED (nothing was ahead) or RELOCATE. */
  reset(ref: SlotRef): number {
    // As Gcra32's: under the mark's guard, counted in the slot's reset mark around the write.
    const token = this.#guard.take(ref.base);
    resetting(this.#w, ref.base);
    try {
      return this.#spend(ref.base, ref.ctrl, 1, RESET, 0);
    } finally {
      resetDone(this.#w, ref.base);
      this.#guard.release(ref.base, token);
    }
  }

  /**
   * A refund bounded by `sinceMs` (Infinity: none) that gives nothing once the slot's reset mark
   * moved from `mark` (a reservation's cancel, a spend's give-back), under the mark's guard.
   */
  #markedRefund(ref: SlotRef, cost: number, sinceMs: number, mark: number, end: Pair | null = null): number {
    const token = this.#guard.take(ref.base);
    this.#refundMark.begin(mark);
    this.#ownSpend = true;
    this.#ownEnd = end;
    try {
      return this.#spend(ref.base, ref.ctrl, cost, REFUND, sinceMs);
    } finally {
      this.#ownSpend = false;
      this.#refundMark.end();
      this.#guard.release(ref.base, token);
    }
  }

  /**
   * As Gcra32's: refuses every request on the key until `ms` after now, its debt raised to the
   * block plus the tolerance less one interval (never lowered). ALLOWED, RELOCATE or TOO_LONG.
   */
  block(ref: SlotRef, ms: number): number {
    const p = this.#p;
    const d = this.#blockDebt;
    // The block in ticks, rounded up, and a tick more, as Gcra32's (blockDebtTicks); beyond 2^53
    // ticks, where a double is not every integer, an ulp more instead. At most the horizon (past
    // it, #spend answers TOO_LONG).
    const ticks = ceilTicks((ms * 1e9) / p.tickPs);
    fromNumber(Math.min(MAX_WIDE_AHEAD_TICKS, ticks + Math.max(1, ticks * 2 ** -52)), d);
    const rest = mul(p.burst - 1, p.intervalTicks, this.#n); // the tolerance less one interval
    add(d.hi, d.lo, rest.hi, rest.lo, d);
    resetting(this.#w, ref.base); // as Gcra32's: a refund after the block gives nothing
    try {
      return this.#spend(ref.base, ref.ctrl, 1, BLOCK, 0);
    } finally {
      resetDone(this.#w, ref.base);
    }
  }

  /**
   * The one loop of every mode (`mode`): snapshot, decide on it, commit by one compare-and-swap
   * from the snapshot (`#commit`); decide again on a lost race. `arg`: a reservation's longest
   * wait in ticks, a refund's spend reading in ms (Infinity: no bound; Gcra32.giveBack).
   */
  #spend(base: number, ctrl: number, cost: number, mode: number, arg: number): number {
    const p = this.#p;
    const at = base + this.#tatOffset;
    for (let losses = 0; ; ) {
      if (!this.#snapshot(base, ctrl, at)) return RELOCATE;
      const { q, r } = this.#qr;
      // The decision, pure, in whole intervals: debt = q * t + r (0 <= r < t).
      let outcome = ALLOWED;
      if (mode === REFUND || mode === RESET) {
        // What is still ahead of now, up to the reservation's own cost, and for a spend's
        // give-back what of its slot is still ahead at this reading (taken after the snapshot):
        // never below now.
        const all = cost * p.intervalTicks;
        // A reading raised to the key's unit (a step back) bounds nothing: a bounded give-back
        // then gives nothing (as Gcra32's).
        const bound = mode !== REFUND ? all
          : this.#raised && arg !== Infinity ? 0 : wideUnspentTicks(cost, arg, this.nowMs, p, this.#now, this.#ticks, this.#n);
        this.#give = bound >= all ? Infinity : bound;
        // A cancel or a spend's give-back behind which a later spend may still wait to act:
        // nothing (math/gcra.ts laterMayAct, in whole intervals here): the debt past the burst,
        // and the snapshot's TAT past the reservation's slot end (a spend's give-back: always).
        const laterMayAct = this.#ownSpend && (q > p.burst || (q === p.burst && r > 0)) && (this.#ownEnd === null || this.#pastEnd(this.#ownEnd));
        // A reservation's refund after a reset or block of the key: nothing (as Gcra32's).
        if (this.#isFresh || (this.#give === 0 && cost > 0) || laterMayAct || this.#refundMark.forgotten(this.#w, base)) outcome = REFUSED;
      } else if (mode === BLOCK) {
        // Raised to the block's debt, never lowered. A key refused longer already still gets a
        // write, one tick more (as Gcra32's): a refund that read the word before the block must
        // find it changed (found by an attack: a refund's compareExchange landed after a block
        // that wrote nothing, and a reservation then acted inside the block).
        const b = this.#blockDebt;
        const ahead = toNumber(b.hi, b.lo);
        this.waitTicks = Math.max(0, ahead + p.intervalTicks - p.toleranceTicks);
        if (ahead > MAX_WIDE_AHEAD_TICKS - 2 ** 40) outcome = TOO_LONG;
        this.#blockOver = !this.#isFresh && compare(b.hi, b.lo, this.#d.hi, this.#d.lo) <= 0;
      } else if (cost > p.burst && mode !== PENALTY) {
        this.waitTicks = Infinity;
        outcome = REFUSED;
      } else if (mode === ADMIT) {
        // debt + cost * t <= burst * t
        const fits = q + cost < p.burst || (q + cost === p.burst && r === 0);
        this.waitTicks = fits ? 0 : (q + cost - p.burst) * p.intervalTicks + r;
        if (!fits) outcome = REFUSED;
      } else {
        const wait = q + cost >= p.burst ? (q + cost - p.burst) * p.intervalTicks + r : 0;
        this.waitTicks = wait;
        // The horizon, with a margin for the rounding of this float estimate of (q + cost) * t + r.
        if ((mode === RESERVE && wait > arg) || (q + cost) * p.intervalTicks + r > MAX_WIDE_AHEAD_TICKS - 2 ** 40) outcome = TOO_LONG;
      }
      if (outcome !== ALLOWED || cost === 0) {
        // A refusal writes nothing (a block always writes: see above). Re-read the halves
        // (Atomics.load, seq-cst, after the snapshot's): unchanged, the TAT held the snapshot at
        // the second read (it only grows between reclaims), so the snapshot was not torn.
        const judged = outcome !== ALLOWED;
        if (judged && ((Atomics.load(this.#w, at) >>> 0) !== this.#lo || Atomics.load(this.#w, at + 1) !== this.#hi)) continue;
        this.debt.hi = this.#d.hi;
        this.debt.lo = this.#d.lo;
        return outcome;
      }
      const landed = this.#commit(base, ctrl, at, cost, mode);
      if (landed === MOVED) return RELOCATE;
      if (landed === FORGOTTEN) return REFUSED;
      if (landed === LANDED) {
        if (mode === RESERVE) {
          this.#reservedEnd.hi = this.#n.hi;
          this.#reservedEnd.lo = this.#n.lo;
        }
        sub(this.#n.hi, this.#n.lo, this.#now.hi, this.#now.lo, this.debt);
        return ALLOWED;
      }
      backoff(++losses); // lost the race: wait a little before the next snapshot (backoff.ts)
    }
  }

  /** Cost-1 requests that would pass right after the last decision. */
  remaining(): number {
    const { q, r } = divmod(this.debt.hi, this.debt.lo, this.#p.intervalTicks, this.#qr);
    return Math.max(0, this.#p.burst - q - (r > 0 ? 1 : 0));
  }

  /** The last refusal's wait, or a reservation's, in ms rounded up to picoseconds (Infinity: never). */
  waitMs(): number {
    return this.waitTicks === Infinity ? Infinity : ceilPs(ticksToMs(this.waitTicks, this.#p));
  }

  /** How long after the last decision the key's state equals a fresh key's, in ms. */
  resetMs(): number {
    return ticksToMs(toNumber(this.debt.hi, this.debt.lo), this.#p);
  }

  /** The table hooks for 64-bit GCRA slots. */
  slotState(): SlotState {
    const w = this.#w;
    const big = this.#big;
    const tatOffset = this.#tatOffset;
    return {
      initSlot: (_words, base) => {
        const nowMs = this.#readClock();
        // Stores while the slot is BUSY: no other thread reads its state until the publishing
        // compareExchange on ctrl, which orders these writes before it.
        // The TAT of a key with no debt: now, floored (a ceiling would be a tick of debt). It is
        // later than anything the slot's previous key held: a reclaim needs that strictly behind.
        const n = this.#now;
        Atomics.store(w, base + tatOffset, n.hi === DEAD && n.lo === 0 ? 1 : n.lo | 0);
        Atomics.store(w, base + tatOffset + 1, n.hi);
        Atomics.store(w, base + S_LAST_SEC, this.#unit(nowMs) | 0);
      },
      isDead: (_words, base) => Atomics.load(big, (base + tatOffset) >> 1) === DEAD64, // one 64-bit read
      retire: (_words, base, floor) => {
        // The whole word at once (a reclaim must not act on a torn value), then lastSec, then
        // the clock: the same order and argument as a decision.
        const value = Atomics.load(big, (base + tatOffset) >> 1);
        if (value === DEAD64) return ALREADY_DEAD;
        const last = Atomics.load(w, base + S_LAST_SEC);
        const { hi, lo } = halvesOf(value, this.#halves); // the word, read whole, as its halves
        const nowMs = this.#readClock();
        // A staleness unit ahead of the reading: the clock stepped back; the key is not idle.
        if (this.#staleOn && unitsAhead(this.#unit(nowMs), last) !== 0) return NOT_IDLE;
        // Strictly behind now (or stale): a new key's first TAT, read after its claim, is then
        // later than every value this slot held, so a stale compareExchange can never match it.
        // Behind as wideDebt compares: signed where the TAT wraps, unsigned where it cannot.
        const now = this.#now;
        const behind = this.#staleOn
          ? sub(hi, lo, now.hi, now.lo, this.#d).hi < 0
          : (hi >>> 0) < (now.hi >>> 0) || (hi === now.hi && lo < now.lo);
        const idle = behind || (this.#staleOn && isStale(this.#unit(nowMs), last, this.#p.staleSec));
        if (!idle) return NOT_IDLE;
        floor.raise(nowMs); // before the reclaim: its key comes back fresh at no earlier reading
        // compareExchange to the marker: the linearisation point of the reclaim.
        return Atomics.compareExchange(big, (base + tatOffset) >> 1, value, DEAD64) === value ? RETIRED : NOT_IDLE;
      },
      raiseTo: (ms) => {
        // No reading earlier than a reclaim's floor from now on, a fresh state's included.
        if (ms > this.#latestMs) this.#latestMs = ms;
      },
    };
  }
}
