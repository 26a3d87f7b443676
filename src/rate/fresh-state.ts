import type { LimitAlgorithm, Moment } from '../algorithms/index.js';
import { FRESH_ALL, FRESH_NONE, swap } from '../algorithms/types.js';
import { cas64 } from '../math/word64.js';
import type { LimitGroup } from './limit-set.js';

/** `FreshState.writeLimit`: every word of the limit landed; none did; its state did, a later word not. */
export const ALL = FRESH_ALL;
export const NONE = FRESH_NONE;
export const SOME = 2;

/**
 * Writes a key's state fresh, under the key's lock, for a `Prepare` step of the locked protocol
 * (locked-engine.ts): PolicyLimiter's reset and its reshape after a change of rules, and
 * RateLimiter's reset on its locked configurations; and limit by limit, under the key's give-back
 * guard, for the lock-free engine's reset (`prepare`, `writeLimit`). The caller reads first
 * (`read`, or its own loads into `before`), checks that the lock is still its own, then writes: every word by
 * compareExchange from the value read, so a holder whose lock was taken over (from a holder that
 * may be only slow: a reset holds a guarded lock, taken over past the table's reuse age,
 * table/slot-lock.ts) cannot overwrite a newer holder's state.
 *
 * Thread-safety: one instance per limiter instance (its scratch is per thread).
 */
export class FreshState {
  /** The words read before the write, indexed from the group's state base. */
  readonly before: Int32Array;
  /** Set by `write` when one of its compareExchanges landed (the caller clears it). */
  wrote = false;
  /**
   * The limits `write` wrote fresh in earlier tries of the same reset (`own`; the caller sets it
   * to 0 once, before the first). A try that fails on a later limit (its lock was taken over, and a
   * newer holder wrote) is run again by the locked protocol, and writing the limits before it
   * fresh again would reset them twice: once before the newer holder's admissions and once
   * after, clearing those (found by test/algorithms/sliding-log-reset-takeover.test.ts, two
   * logs). Each try writes only the limits after them.
   */
  landed = 0;
  // The state and number of limits `landed` counts for: a try on another slot (the key found again
  // elsewhere) or under a rule of other limits writes every limit; rules published again (new
  // objects, the same shape: `own` holds only for the pair's own shape) keep it, as
  // PolicyLimiter's forced controls do.
  #landedAt = -1;
  #landedLimits = -1;
  /** The fresh state, built in private scratch first (one word more: a state base of either parity). */
  readonly #fresh: Int32Array;

  constructor(maxWords: number) {
    this.before = new Int32Array(maxWords);
    this.#fresh = new Int32Array(maxWords + 1);
  }

  /** Loads every word of `g`'s state at `state` into `before`. */
  read(w: Int32Array, state: number, g: LimitGroup): void {
    // Atomics.load of each word under the key's lock: the writes below expect exactly these.
    for (let i = 0; i < g.words; i++) this.before[i] = Atomics.load(w, state + i);
  }

  /**
   * Writes a fresh state for `g` at `state` at reading `m`, every word by compareExchange from
   * its value in `before` (a 64-bit word in one), from limit `landed` on. False if a word changed
   * since it was read (the lock was taken over): the caller's decision starts again, from the
   * first limit whose state did not land. `wrote` says whether any word landed, in this try or
   * an earlier one since the caller cleared it. `own`: `before` holds `g`'s own state (a reset),
   * not a state of another shape (PolicyLimiter's move to another rule), so an algorithm that
   * writes its fresh state its own way (`writeFresh`) may read it.
   */
  write(w: Int32Array, state: number, g: LimitGroup, m: Moment, own = false): boolean {
    this.prepare(state, g, m);
    if (!own || this.#landedAt !== state || this.#landedLimits !== g.algorithms.length) {
      // Another shape's words (every limit is written, on every try), or another slot or rule.
      this.landed = 0;
      this.#landedAt = state;
      this.#landedLimits = g.algorithms.length;
    }
    for (let i = this.landed; i < g.algorithms.length; i++) {
      const r = this.writeLimit(w, state, g, i, own);
      if (r === NONE) return false;
      this.landed = i + 1; // its state landed (ALL, or SOME: a later word not): never written again
      if (r !== ALL) return false;
    }
    return true;
  }

  /** Builds the fresh state for `g` at reading `m` in private scratch, at the parity of `state` (its layout's). */
  prepare(state: number, g: LimitGroup, m: Moment): void {
    const p = state & 1;
    for (let i = 0; i < g.algorithms.length; i++) (g.algorithms[i] as LimitAlgorithm).init(this.#fresh, p + (g.offsets[i] as number), m);
  }

  /**
   * Writes limit `i` of `g` fresh (as `prepare` built it), every word by compareExchange from its
   * value in `before`, stopping at the first word that changed since it was read: ALL, NONE (its
   * first word, the state itself, changed), or SOME (the state landed, a later word such as a
   * 64-bit GCRA's staleness unit did not). Sets `wrote` when a word landed. `own`: as in
   * `write`.
   */
  writeLimit(w: Int32Array, state: number, g: LimitGroup, i: number, own = false): number {
    const before = this.before;
    const fresh = this.#fresh;
    const p = state & 1;
    const a = g.algorithms[i] as LimitAlgorithm;
    const off = g.offsets[i] as number;
    if (own && a.writeFresh !== undefined) {
      const r = a.writeFresh(w, state + off, before, off);
      if (r !== NONE) this.wrote = true;
      return r;
    }
    let j = 0;
    if (a.align8 === true) {
      // Its 64-bit word in one compareExchange: another thread never reads it half written.
      if (!cas64(w, state + off, before[off + 1] as number, before[off] as number, fresh[p + off + 1] as number, fresh[p + off] as number)) return NONE;
      this.wrote = true;
      j = 2;
    }
    for (; j < a.stateWords; j++) {
      // compareExchange from the value read: fails if another thread wrote since.
      if (!swap(w, state + off + j, before[off + j] as number, fresh[p + off + j] as number)) return j === 0 ? NONE : SOME;
      this.wrote = true;
    }
    return ALL;
  }
}
