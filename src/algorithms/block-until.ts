import { ceilNs } from '../time/ticks.js';
import type { LimitAlgorithm, Moment, Verdict } from './types.js';

/**
 * The end of a key's block, for a RateLimiter of fixed or sliding windows made with `maxBlockMs`
 * (a window's state holds one window's count, not a time to refuse until): one int32 word after
 * the key's limits, in the key's group as a limit of its own, last.
 *
 *   until: the first whole second (of the limiter's clock, modulo 2^32) at which the key is no
 *          longer blocked; the key is blocked while the reading's second is before it, read as
 *          the signed difference `(until - second) | 0 > 0`.
 *
 * A fresh key's word is its reading's second (not blocked). `block(key, ms)` raises it to the
 * first whole second at or after `ms` from now, never lowers it, by compareExchange from the
 * snapshot, so that of two blocks racing the longer stays (LockFreeEngine.force, with the key's
 * epoch and reset mark moved around it, as a GCRA block's). A decision loads it with the key's
 * other words and checks it like a limit (refused while blocked, `Retry-After` at the block's
 * end), and writes nothing to it. A decision that loaded the word before a block wrote it began
 * before that write, so it overlaps the block and is ordered before it, whenever its window
 * commits land; every decision that begins after the block returned loads the block (its load
 * is seq-cst, after the block's compareExchange). Unlike a GCRA block, which raises the same word
 * the decisions write and so must make their compareExchanges fail, nothing a decision writes can
 * undo this word. `reset` and `unblock` write it fresh. A blocked key is not idle, so no sweep
 * reclaims it.
 *
 * Seconds keep the word apart from a stale reading for 2^31 s (68 years) either way: the longest
 * block, and how long an old word stays harmless. The block's end is rounded up to a whole second:
 * it refuses at most 1 s longer than asked, never less.
 *
 * Thread-safety: one instance per thread (it holds the snapshot); the word is shared and written
 * only by compareExchange.
 */
export class BlockUntil implements LimitAlgorithm {
  readonly stateWords = 1;
  readonly lockFree = true;
  /** Absolute seconds: never stale. */
  readonly staleSec = Infinity;
  #until = 0;
  #next = 0;

  /** The longest block the word holds, in ms: 2^31 - 2 whole seconds (one for the round-up). */
  static readonly MAX_BLOCK_MS = (2 ** 31 - 2) * 1000;

  init(w: Int32Array, at: number, m: Moment): void {
    // Its reading's second: not blocked. A plain-order store into a state nobody else sees yet.
    Atomics.store(w, at, m.sec | 0);
  }

  load(w: Int32Array, at: number): void {
    // Atomics.load with the key's other words (LimitSet.loadStates), before the clock.
    this.#until = Atomics.load(w, at);
  }

  /** Whole seconds from the reading's second to the block's end (0 or less: not blocked). */
  #ahead(word: number, m: Moment): number {
    return (word - m.sec) | 0;
  }

  /** The verdict of a key whose word is `word` at `m`, once decided (`allowed` set by the caller). */
  #report(word: number, m: Moment, v: Verdict): number {
    const ahead = this.#ahead(word, m);
    const wait = ahead > 0 ? ceilNs((m.sec + ahead) * 1000 - m.ms) : 0;
    v.remaining = ahead > 0 ? 0 : Infinity;
    v.resetMs = wait;
    v.latestMs = Infinity;
    return wait;
  }

  check(m: Moment, _stale: boolean, cost: number, v: Verdict): void {
    this.#next = this.#until;
    const wait = this.#report(this.#until, m, v);
    // A probe (cost 0) passes, as it does on a blocked GCRA key: it asks and spends nothing.
    v.allowed = wait === 0 || cost <= 0;
    v.waitMs = v.allowed ? 0 : wait;
  }

  reserve(m: Moment, _stale: boolean, _cost: number, maxWaitMs: number, v: Verdict): void {
    // Acts at the block's end at the earliest; the other limits count it where it acts
    // (LimitSet.check decides them again from this wait).
    this.#next = this.#until;
    const wait = this.#report(this.#until, m, v);
    v.allowed = wait <= maxWaitMs;
    v.waitMs = wait;
  }

  force(m: Moment, _stale: boolean, _cost: number, blockMs: number, _clamp: boolean, v: Verdict): void {
    // A block raises the word to its end's second, never lowers it; a penalty or a reward leaves
    // it. Always allowed: MAX_BLOCK_MS bounds what the controls pass.
    this.#next = this.#until;
    if (blockMs >= 0) {
      const end = Math.ceil((m.ms + blockMs) / 1000) - m.sec; // whole seconds after the reading's
      if (end > this.#ahead(this.#until, m)) this.#next = (m.sec + end) | 0;
    }
    this.#report(this.#next, m, v);
    v.allowed = true;
    v.waitMs = 0;
  }

  commit(w: Int32Array, at: number): boolean {
    // A decision writes nothing (see the header). A block writes its end by compareExchange from
    // the snapshot: a longer block that landed since fails it, and it is decided again on that.
    if (this.#next === this.#until) return true;
    return Atomics.compareExchange(w, at, this.#until, this.#next) === this.#until;
  }

  undo(): boolean {
    return true; // a decision writes nothing here; a block is never taken back
  }

  slotStart(out: Int32Array): void {
    out[0] = 0;
    out[1] = 0;
  }

  decidedLater(): boolean {
    return false;
  }

  refund(): boolean {
    return false; // a reservation spent nothing here
  }

  idle(w: Int32Array, at: number, m: Moment): boolean {
    // Atomics.load, as in `load`: a blocked key is never idle (a sweep would forget the block).
    return this.#ahead(Atomics.load(w, at), m) <= 0;
  }
}
