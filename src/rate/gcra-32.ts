import type { Clock } from '../time/clock.js';
import { admit, blockDebtTicks, keyDebtOf, laterMayAct, MAX_AHEAD_TICKS, remainingAt, unspentTicks, waitTicks, type GcraParams } from '../math/gcra.js';
import type { Pair } from '../math/int64.js';
import { raiseStamp, unitsAhead } from '../time/stamps.js';
import { fineTicksAt, ticksAt, ticksToMs, ULP_GUARD } from '../time/ticks.js';
import { RELOCATE } from '../table/slot-index.js';
import { ALLOWED, REFUSED, TOO_LONG } from './gcra-wide.js';
import { gcraSlotState } from './gcra-slot.js';
import { backoff } from './backoff.js';
import { DEAD, S_CTRL, S_LAST_SEC, S_TAT } from '../table/layout.js';
import type { SlotState } from '../table/table.js';
import { secHi, secLo, type SlotRef } from '../table/slot-ref.js';
import { type MarkGuard, RefundMark, resetDone, resetMark, resetting } from '../table/reset-marks.js';

/**
 * `#spend` modes: an admission, a reservation (beyond the burst, up to a wait), a refund (also a
 * reward), a penalty (a spend beyond the burst, with no wait limit: only the horizon), a reset
 * (every interval still ahead given back), a block (the debt raised to a given one, never lowered).
 */
const ADMIT = 0;
const RESERVE = 1;
const REFUND = 2;
const PENALTY = 3;
const RESET = 4;
const BLOCK = 5;
/**
 * Admissions of a key that start from a load after another thread was found to have written it
 * since this thread's own write. A key several threads share misses its own write often, and a
 * miss costs a failed compareExchange (or a confirming load), then a load and a second clock
 * reading, where starting from a load costs the load alone; a key one thread keeps to itself
 * never misses.
 */
export const OWN_BACKOFF = 64;

/** A decision that writes: not an outcome of `#spend`. */
const COMMIT = -1;

/** Milliseconds to seconds, lifted by the same ulp guard as `ticksAt` (see time/ticks.ts). */
const SECONDS_PER_MS = 0.001 * ULP_GUARD;

/**
 * One GCRA limit at width 32, without a lock: the key's state is its slot's `tat` word, which is
 * also its reclaim guard (a reclaim turns an idle TAT into DEAD). A decision, a reservation and
 * a refund are one loop (`#spend`, governor's `measure_and_replace`): load the state, decide on
 * it with the pure math of math/gcra.ts, write the result by one compareExchange from the
 * snapshot, and decide again when another thread changed it first. An admission in the second
 * of the thread's own last write to the key first tries that write as the snapshot (`decide`).
 * The 64-bit twin is `WideGcra` (gcra-wide.ts), with the same methods and outcomes.
 *
 * Thread-safety: one instance per thread (it holds the snapshot and the last outcome); any number
 * of threads on the same words.
 */
export class Gcra32 {
  readonly #w: Int32Array;
  readonly #p: GcraParams;
  readonly #clock: Clock;
  /** The key's debt in ticks after the last decision (after the admission, or unspent on a refusal). */
  debt = 0;
  /** Ticks until the last refused request would pass (Infinity when cost > burst); a reservation's wait. */
  waitTicks = 0;
  /** Compare-and-swap attempts lost to other threads. */
  retries = 0;
  /**
   * The second of this thread's latest reading: a guess only (see #spend: when to skip the lastSec
   * load); set by #setSec, with its parts as SlotRef stores a second (SlotRef.knowsSec).
   */
  #sec = 0;
  #secHi = 0;
  #secLo = 0;
  // The latest reading converted (#convert): a clock that repeats its reading (coarseClock(), a
  // ManualClock) converts it once. Per thread, plain: a cache of a pure function of the reading.
  // NarrowGcra#debt keeps the same cache of ticks, inline in both (a shared helper object costs a
  // field load per check).
  #readMs = NaN;
  #readSec = 0;
  #readTicks = 0;
  /** Ticks per ms for ticks of at most 1 ms (fineTicksAt), else 0 (ticksAt). */
  readonly #perMs: number;
  /** The clock's own last reading (earlier than #readMs after a step back). */
  #rawMs = 0;
  /** The latest clock reading this instance has decided at: no decision uses an earlier one (see Clock). */
  #latestMs = -Infinity;
  /**
   * The cost of the admission a lookup that may insert the key is looking for (0: none). Set by
   * the limiter around its lookup only; a fresh slot's state then counts it (#initSlot).
   */
  pendingCost = 0;
  /** Whether the latest fresh state written (#initSlot) counted `pendingCost`; its TAT, second and debt. */
  #freshAdmitted = false;
  #freshTat = 0;
  #freshSec = 0;
  #freshDebt = 0;
  /** The shared 32-bit GCRA slot hooks (gcra-slot.ts): the fresh state that counts nothing, the idle test. */
  readonly #plainSlot: SlotState;


  /** The reset marks' guard, held by every give-back while it writes (table/reset-marks.ts). */
  readonly #guard: MarkGuard;

  constructor(words: Int32Array, p: GcraParams, clock: Clock, guard: MarkGuard) {
    this.#w = words;
    this.#p = p;
    this.#perMs = p.tickPs <= 1e9 ? 1e9 / p.tickPs : 0;
    this.#clock = clock;
    this.#guard = guard;
    this.#plainSlot = gcraSlotState(p, clock);
  }

  /**
   * Decides for the key at `ref` (its slot and ctrl word) and, if it passes, counts it in one
   * compare-and-swap. Returns ALLOWED, REFUSED or RELOCATE; `debt` and `waitTicks` describe it.
   */
  decide(ref: SlotRef, cost: number): number {
    // An admission in the second of this thread's own latest write to the key starts from that
    // write (`ref.tat`) instead of a load ("A thread's own write", docs/design.md, section 2).
    // Written out here, apart from #spend's loop, to keep the common admission short.
    if (cost > 0 && ref.knowsSec(this.#secHi, this.#secLo)) {
      if (ref.ownSkip !== 0) {
        ref.ownSkip--; // another thread wrote this key since our own write lately: load, for a while
        return this.#spend(ref, cost, ADMIT, 0);
      }
      this.#convert(this.#clock.now());
      const sec = this.#readSec;
      if (sec !== this.#sec) {
        // A new second (ref.sec is #sec): our write no longer stands for it; #spend loads tat and
        // lastSec, then reads the clock again.
        this.#setSec(sec);
      } else {
        const p = this.#p;
        const w = this.#w;
        const base = ref.base;
        const tat = ref.tat;
        const now32 = this.#readTicks;
        // lastSec reached this second (ref.sec): the key is fresh and needs no raise.
        const debt = keyDebtOf(tat, now32, sec, sec, p);
        this.debt = debt;
        const next = admit(debt, cost, p);
        if (next < 0) {
          // Nothing to write: the refusal stands if the word still holds our write. The load is
          // seq-cst, and the plain ctrl read after it sees any reuse of the slot that wrote the
          // value it read ("Plain reads of ctrl"), as on #spend's path.
          if (Atomics.load(w, base + S_TAT) === tat) {
            this.waitTicks = waitTicks(debt, cost, p);
            return w[base + S_CTRL] === ref.ctrl ? REFUSED : RELOCATE;
          }
        } else {
          let newTat = (now32 + next) | 0;
          if (newTat === DEAD) newTat = (newTat + 1) | 0; // never store the reclaim marker
          // Lands only if the word still holds our write: the decision is then the one a load
          // would have made, at this reading. Seq-cst, like every write of tat.
          if (Atomics.compareExchange(w, base + S_TAT, tat, newTat) === tat) {
            // ctrl after the compareExchange (a plain read, as in #spend): changed, the slot was
            // reused by a key whose tat came back to our write: an overcharge of that key; find
            // ours again.
            if (w[base + S_CTRL] !== ref.ctrl) return RELOCATE;
            ref.tat = newTat;
            this.debt = next;
            this.waitTicks = 0;
            return ALLOWED;
          }
        }
        // Another thread wrote the key since our write (not counted as a lost race): decide on
        // a load, and keep loading for the key's next OWN_BACKOFF admissions.
        ref.ownSkip = OWN_BACKOFF;
      }
    }
    return this.#spend(ref, cost, ADMIT, 0);
  }

  /**
   * Counts `cost` now, even beyond the burst, and sets `waitTicks` to the wait before it may act:
   * ALLOWED, RELOCATE, REFUSED (cost > burst) or TOO_LONG (the wait exceeds `maxWaitTicks`, or
   * the TAT would run past the horizon; nothing is counted).
   */
  reserve(ref: SlotRef, cost: number, maxWaitTicks: number): number {
    // The slot's reset mark before the decision, for the cancel (`refund`; table/reset-marks.ts).
    this.reservedMark = resetMark(this.#w, ref.base);
    return this.#spend(ref, cost, RESERVE, maxWaitTicks);
  }

  /** The reset mark of the key's slot that the latest `reserve` read before its decision, for its `refund`. */
  reservedMark = 0;
  /** The TAT the latest `reserve` wrote: where its slot ends, for its `refund` (`laterMayAct`). */
  #reservedEnd = 0;

  /** Where the latest `reserve`'s slot ends (the TAT it wrote, in `lo`), for its `refund`. */
  get reservedEnd(): Pair {
    return { hi: 0, lo: this.#reservedEnd };
  }
  /** While a refund runs: the reset mark its reservation read. */
  readonly #refundMark = new RefundMark();
  /** While a cancel or a spend's give-back runs (not a reward): it gives nothing when `laterMayAct`. */
  #ownSpend = false;
  /** While a cancel runs: where its reservation's slot ended (`reservedEnd`); NaN for a spend's give-back. */
  #ownEnd = NaN;

  /**
   * Gives back `cost` intervals of a reservation made on the key at `ref`, never below now. True
   * if it did (false: nothing of it is still ahead, the key left the slot, its slot's reset mark
   * moved from `mark`, what the reservation read: the key was reset or blocked since, or a later
   * spend stacked on its slot may still be waiting to act: `laterMayAct`). `end`: the
   * reservation's `reservedEnd`.
   */
  refund(ref: SlotRef, cost: number, mark: number, end: Pair): boolean {
    return this.#markedRefund(ref, cost, Infinity, mark, end.lo) === ALLOWED;
  }

  /**
   * Counts `cost` now, even beyond the burst and with no wait limit (a penalty): ALLOWED,
   * RELOCATE, or TOO_LONG when the TAT would run past the horizon (nothing is counted).
   */
  penalize(ref: SlotRef, cost: number): number {
    return this.#spend(ref, cost, PENALTY, 0);
  }

  /**
   * Gives back `cost` intervals of what the key spent, never below now (a reward): ALLOWED,
   * REFUSED (nothing was ahead: nothing written) or RELOCATE.
   */
  reward(ref: SlotRef, cost: number): number {
    const token = this.#guard.take(ref.base); // a give-back: under its mark's guard (table/reset-marks.ts)
    try {
      return this.#spend(ref, cost, REFUND, Infinity);
    } finally {
      this.#guard.release(ref.base, token);
    }
  }

  /**
   * A spend's give-back: `reward`, bounded by what of a spend decided at the reading `sinceMs`
   * (`readingMs` after its decision) is still ahead (`unspentTicks`), and nothing once the slot's
   * reset mark moved from `mark`, what was read before the spend's decision (a reset or block of
   * the key since: table/reset-marks.ts). ALLOWED, REFUSED (nothing to give: nothing written) or
   * RELOCATE.
   */
  giveBack(ref: SlotRef, cost: number, sinceMs: number, mark: number): number {
    return this.#markedRefund(ref, cost, sinceMs, mark);
  }

  /** The reading the last decision was made at, in ms (a spend's give-back is bounded from it: `giveBack`). */
  get readingMs(): number {
    return this.#readMs;
  }

  /** Gives back everything still ahead of now (the key reads as fresh): ALLOWED, REFUSED (nothing was ahead) or RELOCATE. */
  reset(ref: SlotRef): number {
    // Counted in the slot's reset mark around its write: a reservation's refund after it gives
    // nothing; under the mark's guard: never between a refund's check and its write
    // (table/reset-marks.ts).
    const token = this.#guard.take(ref.base);
    resetting(this.#w, ref.base);
    try {
      return this.#spend(ref, 1, RESET, 0);
    } finally {
      resetDone(this.#w, ref.base);
      this.#guard.release(ref.base, token);
    }
  }

  /**
   * A refund bounded by `sinceMs` (Infinity: none) that gives nothing once the slot's reset mark
   * moved from `mark` (a reservation's cancel, a spend's give-back), under the mark's guard.
   */
  #markedRefund(ref: SlotRef, cost: number, sinceMs: number, mark: number, end = NaN): number {
    const token = this.#guard.take(ref.base);
    this.#refundMark.begin(mark);
    this.#ownSpend = true;
    this.#ownEnd = end;
    try {
      return this.#spend(ref, cost, REFUND, sinceMs);
    } finally {
      this.#ownSpend = false;
      this.#refundMark.end();
      this.#guard.release(ref.base, token);
    }
  }

  /**
   * Refuses every request on the key until `ms` after now (a block): its debt rises to the
   * block plus the tolerance less one interval, so that a request of cost 1 passes at the block's
   * end and none before; a key already refused longer keeps its debt. ALLOWED, RELOCATE, or
   * TOO_LONG when that debt is past the horizon (nothing written).
   */
  block(ref: SlotRef, ms: number): number {
    const p = this.#p;
    resetting(this.#w, ref.base); // as reset's: a refund after the block gives nothing
    try {
      return this.#spend(ref, 1, BLOCK, blockDebtTicks(ms, p));
    } finally {
      resetDone(this.#w, ref.base);
    }
  }

  /**
   * The one loop of every mode (`mode`): snapshot, decide on it with the pure math of
   * math/gcra.ts, commit by one compareExchange from the snapshot, check the key still owns the
   * slot; decide again on a lost race. `arg`: a reservation's longest wait in ticks, a block's
   * debt in ticks, a refund's spend reading in ms (Infinity: no bound; see `giveBack`).
   */
  #spend(ref: SlotRef, cost: number, mode: number, arg: number): number {
    const w = this.#w;
    const p = this.#p;
    const base = ref.base;
    const ctrl = ref.ctrl;
    // The snapshot of tat comes first, then lastSec, then the clock, then ctrl:
    // - the clock read after tat keeps tat <= now + tau, so the 32-bit difference decodes;
    // - lastSec read after tat: if it is older than staleSec, every admission that could have
    //   written this tat was made before then, so the key is certainly fresh; read before the
    //   clock, it is never later than now, so the difference is the true idle time;
    // - ctrl unchanged after the tat read means that tat belongs to our key's incarnation.
    // The lastSec load is skipped when this thread saw the word reach the reading's own second
    // (it only moves forward: the key is fresh and the stamp needs no raise), a hot key's
    // common case; see docs/design.md, section 2.
    let tat = Atomics.load(w, base + S_TAT);
    for (let losses = 0; ; ) {
      // Likely still that second: try without the load. Only on this thread's own write: a state
      // another thread wrote may come from a later reading than ours if the clock stepped back,
      // and then only the loaded stamp tells (see Clock, and "A clock that steps back" in
      // docs/design.md, section 5).
      const guess = tat === ref.tat && ref.knowsSec(this.#secHi, this.#secLo);
      let lastSec = guess ? this.#sec : Atomics.load(w, base + S_LAST_SEC);
      this.#convert(this.#clock.now());
      let nowSec = this.#readSec;
      if (guess && nowSec !== lastSec) {
        // A new second: load lastSec, then read the clock again, in the order above.
        lastSec = Atomics.load(w, base + S_LAST_SEC);
        this.#convert(this.#clock.now());
        nowSec = this.#readSec;
      }
      // A stamp ahead of the reading: the clock stepped back behind a decision on this key. Decide
      // at the start of the stamp's second instead (pure arithmetic on what was loaded; no load).
      const ahead = unitsAhead(nowSec, lastSec);
      if (ahead !== 0) {
        this.#convertAt(nowSec + ahead);
        nowSec = this.#readSec;
      }
      this.#setSec(nowSec);
      // ctrl by a plain read: the tat load (seq-cst) makes any reuse of the slot that wrote the
      // value it saw visible to this read (docs/design.md, "Plain reads of ctrl").
      if (w[base + S_CTRL] !== ctrl || tat === DEAD) return RELOCATE;
      const now32 = this.#readTicks;
      const debt = keyDebtOf(tat, now32, lastSec, nowSec, p);
      this.debt = debt;
      // The decision, pure: the debt after it, or an outcome that writes nothing.
      let next = 0;
      let outcome = COMMIT;
      if (mode === REFUND || mode === RESET) {
        // What is still ahead of now, up to the reservation's own cost (all of it for a reset),
        // and for a spend's give-back what of its slot is still ahead (at this reading, taken
        // after the snapshot: every admission the snapshot holds read the clock before it):
        // never below now.
        // A reading raised to the key's stamp (the clock stepped back behind another decision on
        // the key, whose reading may be later than this one within the stamp's second) cannot
        // bound a give-back: it gives nothing (design.md, section 6).
        const give = mode === RESET ? debt : ahead !== 0 && arg !== Infinity ? 0 : Math.max(0, unspentTicks(cost, arg, this.#readMs, p));
        // A cancel or a spend's give-back behind which a later spend may still wait to act: nothing
        // (laterMayAct). Stacked: the TAT is past the reservation's slot end (within 2^31 ticks of
        // it: both are within the horizon of now); a spend's give-back follows an admission.
        const stacked = Number.isNaN(this.#ownEnd) || ((tat - this.#ownEnd) | 0) > 0;
        // A reservation's refund after a reset or block of the key: nothing (its mark loaded after
        // the snapshot; table/reset-marks.ts).
        if (debt === 0 || (give === 0 && cost > 0) || (this.#ownSpend && laterMayAct(debt, stacked, p)) || this.#refundMark.forgotten(w, base)) {
          outcome = REFUSED;
        } else next = debt - Math.min(debt, give);
      } else if (mode === BLOCK) {
        // arg carries the block's debt: raised to, never lowered. A key that owes that
        // much already still gets a write, one tick more: a decision that raised the stamp and
        // has not yet made its compareExchange (or stopped there) must find tat changed, or it
        // would land over the block (what it read may be an old TAT that only looks like debt).
        next = Math.max(debt + 1, arg);
        // Past the horizon: an error, unless the key is refused that long already (a clock that
        // stepped back): then one tick less, still as long as the block, so that the word changes.
        if (next > MAX_AHEAD_TICKS) {
          if (debt < arg) outcome = TOO_LONG;
          else if (debt > arg) next = debt - 1;
          else outcome = ALLOWED; // exactly the block's debt: nothing to write
        }
        this.waitTicks = Math.max(0, next + p.intervalTicks - p.toleranceTicks);
      } else if (cost > p.burst && mode !== PENALTY) {
        this.waitTicks = Infinity;
        outcome = REFUSED;
      } else if (mode === ADMIT) {
        next = admit(debt, cost, p);
        if (next < 0) {
          this.waitTicks = waitTicks(debt, cost, p);
          outcome = REFUSED;
        } else {
          this.waitTicks = 0;
        }
      } else {
        next = debt + cost * p.intervalTicks;
        this.waitTicks = Math.max(0, next - p.toleranceTicks);
        if ((mode === RESERVE && this.waitTicks > arg) || next > MAX_AHEAD_TICKS) outcome = TOO_LONG;
      }
      if (outcome === COMMIT && cost === 0) outcome = ALLOWED; // a probe writes nothing
      if (outcome !== COMMIT) return outcome;
      let newTat = (now32 + next) | 0;
      if (newTat === DEAD) newTat = (newTat + 1) | 0; // never store the reclaim marker
      const givesBack = mode === REFUND || mode === RESET;
      if (!givesBack) raiseStamp(w, base + S_LAST_SEC, lastSec, nowSec); // only ever forward
      // compareExchange on the key's own tat word: the only write. If another thread changed
      // tat since our snapshot, nothing was written and we decide again.
      const seen = Atomics.compareExchange(w, base + S_TAT, tat, newTat);
      if (seen === tat) {
        // ctrl after the compare-and-swap: unchanged, it landed on our key (a key just charged
        // is not idle, so it is not reclaimed after). Changed, the slot was reused by a key whose
        // tat came back to our snapshot: a charge overcharges that key (conservative); find ours
        // again. A refund cannot get there (docs/design.md, "Reservations": every tat of a
        // slot's next key is later than any this key held), and would be taken back if it did.
        // A plain read, as before the decision: a tat value written after a reuse, which the
        // compareExchange just read, makes that reuse's ctrl visible here.
        if (w[base + S_CTRL] !== ctrl) {
          if (givesBack) Atomics.compareExchange(w, base + S_TAT, newTat, tat); // from our own write only
          return RELOCATE;
        }
        // A refund whose slot's reset mark moved since its check: a reset (and admissions after
        // it) may have brought tat back to our snapshot, and our write landed on the fresh state.
        // The mark's guard keeps resets out while we hold it; this is for a refund that stalled
        // past the table's reuse age and was taken over (table/reset-marks.ts). Taken back from
        // our own write (Atomics.load of the mark after the compareExchange); if a write built on
        // ours since, the refund stands, and is reported.
        if (this.#refundMark.forgotten(w, base) && Atomics.compareExchange(w, base + S_TAT, newTat, tat) === newTat) {
          return REFUSED;
        }
        ref.tat = newTat;
        if (mode === RESERVE) this.#reservedEnd = newTat;
        if (!givesBack) {
          ref.sec = nowSec; // raiseStamp left the word at nowSec or later
          ref.secKnown = true;
        }
        this.debt = next;
        return ALLOWED;
      }
      // Another thread changed tat since our snapshot. What the compareExchange read is a
      // seq-cst read of the word, as a load is: the next snapshot, followed by lastSec and the
      // clock as above.
      this.retries++;
      // Wait a little before deciding again (backoff.ts); the word is then loaded anew, since
      // what the compareExchange read is older by the wait.
      backoff(++losses);
      tat = Atomics.load(w, base + S_TAT);
    }
  }

  /** The clock reading of the last decision, in ms (the reading last converted). */
  get nowMs(): number {
    return this.#readMs;
  }

  /** How far the last decision's reading was ahead of the clock's own (0 unless it stepped back). */
  get leadMs(): number {
    return this.#readMs > this.#rawMs ? this.#readMs - this.#rawMs : 0;
  }

  /**
   * Keeps the clock's reading `rawMs`, or this instance's latest if that is later (a clock that
   * stepped back), as `nowMs` (above), with its second and its ticks in #readSec and #readTicks.
   */
  #convert(rawMs: number): void {
    this.#rawMs = rawMs;
    // The same reading as the last one converted, and no raise since (#raiseTo): nothing to do.
    if (rawMs === this.#readMs && rawMs >= this.#latestMs) return;
    const nowMs = rawMs >= this.#latestMs ? rawMs : this.#latestMs;
    this.#latestMs = nowMs;
    if (nowMs !== this.#readMs) {
      this.#readMs = nowMs;
      this.#readSec = Math.floor(nowMs * SECONDS_PER_MS);
      const perMs = this.#perMs;
      this.#readTicks = perMs === 0 ? ticksAt(nowMs, this.#p) : fineTicksAt(nowMs, perMs);
    }
  }

  /** Sets #sec, and its parts for SlotRef.knowsSec (once per second of readings, not per decision). */
  #setSec(sec: number): void {
    if (sec === this.#sec) return;
    this.#sec = sec;
    this.#secHi = secHi(sec);
    this.#secLo = secLo(sec);
  }

  /**
   * No decision from now on at a reading earlier than `ms` (a reclaim's floor: see
   * table/reclaim-floor.ts). The last decision's reading (`readingMs`) stays what it was: a
   * give-back bounds itself by it.
   */
  #raiseTo(ms: number): void {
    if (ms > this.#latestMs) this.#latestMs = ms;
  }

  /**
   * Decides at the start of second `sec` (a key's stamp ahead of the reading): `nowMs` and its
   * ticks. Leaves the instance's latest reading alone: the raise holds for this key only.
   */
  #convertAt(sec: number): void {
    const nowMs = sec * 1000;
    this.#readMs = nowMs;
    this.#readSec = sec;
    this.#readTicks = ticksAt(nowMs, this.#p);
  }

  /** Cost-1 requests that would pass right after the last decision. */
  remaining(): number {
    return remainingAt(this.debt, this.#p);
  }

  /** The last refusal's wait, or a reservation's, in ms (Infinity: never). */
  waitMs(): number {
    return this.waitTicks === Infinity ? Infinity : ticksToMs(this.waitTicks, this.#p);
  }

  /** How long after the last decision the key's state equals a fresh key's, in ms. */
  resetMs(): number {
    return ticksToMs(this.debt, this.#p);
  }

  /**
   * After a lookup that inserted the key at `ref` (the caller checked: the table published this
   * thread's insert), whether its fresh state already counted the pending admission; then `ref`
   * holds it as this thread's own write, and `debt` and `waitTicks` describe it as `decide` would.
   */
  tookFresh(ref: SlotRef): boolean {
    if (!this.#freshAdmitted) return false;
    this.#freshAdmitted = false;
    ref.tat = this.#freshTat;
    ref.sec = this.#freshSec;
    ref.secKnown = true;
    this.debt = this.#freshDebt;
    this.waitTicks = 0;
    return true;
  }

  /**
   * A fresh key's first state, written while its slot is claimed (BUSY) by this thread: TAT and
   * second of a reading taken after the claim, with `pendingCost` already counted when it fits
   * the burst. The admission is then the insert's: the publishing compareExchange makes state
   * and key visible at once, and no thread decides on a key before it is published. A publish
   * that fails leaves nothing counted: the lookup goes on to the copy that won, or inserts again
   * (and this runs again).
   */
  #initSlot(w: Int32Array, base: number, generation: number): void {
    const cost = this.pendingCost;
    const p = this.#p;
    const next = cost > 0 && cost <= p.burst ? admit(0, cost, p) : -1;
    if (next <= 0) {
      // Nothing to count (a probe, a cost beyond the burst, another path's insert): the plain
      // fresh state, at the clock's own reading. Not at this instance's latest reading: after the
      // clock stepped back, a stamp ahead of the clock would keep an unspent key from going idle,
      // and make other threads decide on it at that later second.
      this.#freshAdmitted = false;
      this.#plainSlot.initSlot(w, base, generation);
      return;
    }
    // The admission's reading, as `decide` takes it (never before this instance's latest): a
    // decision right after a fresh state at the raw reading would raise it to that, too.
    this.#convert(this.#clock.now());
    let tat = (this.#readTicks + next) | 0;
    if (tat === DEAD) tat = (tat + 1) | 0; // never store the reclaim marker: one tick later
    const sec = this.#readSec;
    this.#setSec(sec);
    // Stores while the slot is BUSY: no other thread decides on its key until the publishing
    // compareExchange on ctrl, which orders these writes before it.
    Atomics.store(w, base + S_TAT, tat);
    Atomics.store(w, base + S_LAST_SEC, sec);
    this.#freshAdmitted = true;
    this.#freshTat = tat;
    this.#freshSec = sec;
    this.#freshDebt = next;
  }

  /** The table hooks for 32-bit GCRA slots: a fresh state that may count the pending admission (#initSlot). */
  slotState(): SlotState {
    const plain = this.#plainSlot;
    return {
      initSlot: (w: Int32Array, base: number, generation: number): void => this.#initSlot(w, base, generation),
      isDead: plain.isDead,
      retire: plain.retire,
      raiseTo: (ms: number): void => {
        plain.raiseTo(ms);
        this.#raiseTo(ms);
      },
    };
  }
}
