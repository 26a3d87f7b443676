import { ceilNs } from '../time/ticks.js';
import type { LimitAlgorithm, Moment, Verdict } from './types.js';

/**
 * The end of a key's block, for a RateLimiter of fixed or sliding windows made with `maxBlockMs`
 * (a window's state holds one window's count, not a time to refuse until): one int32 word after
 * the key's limits, in the key's group as a limit of its own, last.
 *
 *   until: 0 (never blocked), or the first whole second (of the limiter's clock, modulo 2^32;
 *          a block that would end on second 0 ends on second 1) at which the key is no longer
 *          blocked; the key is blocked while the reading's second is before it, read as the
 *          signed difference `(until - second) | 0 > 0`.
 *
 * A fresh key's word is 0, whatever the clock does later (found: a word that held the reading's
 * second read as a block of 68 years after a clock jump of 2^31 s). The first admission after a
 * block ended writes 0 back (a compareExchange from the ended block's word, which a new block
 * fails), so an old word does not come back either. `block(key, ms)` raises it to the
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
 * Seconds keep a block apart from a stale reading for 2^31 s (68 years): the longest block, and
 * how long the word of an ended block that no admission cleared stays harmless. The block's end is
 * rounded up to a whole second, and a reading is judged against that second's start in ms (its
 * own second, `secondsAt`, is rounded up within an ulp below a whole second: found, a block made
 * at a reading of 1.7e12 ms, judged by seconds alone, passed a request 0.001 ms before its end):
 * it refuses at most 1 s longer than asked, never less; 2 s when the end's second is a multiple
 * of 2^32 (the word's 0, which means none, so the end moves on a second: February 2106 on a
 * clock of epoch ms; found by an attack, left as it is).
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

  init(w: Int32Array, at: number): void {
    // Not blocked. A store into a state nobody else sees yet (or under the key's guard: reset).
    Atomics.store(w, at, 0);
  }

  load(w: Int32Array, at: number): void {
    // Atomics.load with the key's other words (LimitSet.loadStates), before the clock.
    this.#until = Atomics.load(w, at);
  }

  /**
   * How long (ms) the key at `word` is still blocked at `m`: 0 when it is not. The word names the
   * end's second modulo 2^32, taken as the one nearest the reading's; blocked while the reading is
   * before that second's start (a reading's second, `secondsAt`, is rounded up within an ulp below
   * a whole second, so its ms decide at the boundary).
   */
  #wait(word: number, m: Moment): number {
    if (word === 0) return 0;
    const ahead = (word - m.sec) | 0;
    if (ahead < 0) return 0;
    const endMs = (m.sec + ahead) * 1000;
    // Rounded up to the ns, and at least 1 ns: a reading an ulp before the end is refused, and
    // says it must wait.
    return endMs > m.ms ? Math.max(1e-6, ceilNs(endMs - m.ms)) : 0;
  }

  /** What a decision writes back: 0 for a block that has ended (cleared), else the word as read. */
  #kept(m: Moment): number {
    return this.#until !== 0 && this.#wait(this.#until, m) === 0 ? 0 : this.#until;
  }

  /** The verdict of a key whose word is `word` at `m`, once decided (`allowed` set by the caller); returns the wait. */
  #report(word: number, m: Moment, v: Verdict): number {
    const wait = this.#wait(word, m);
    v.remaining = wait > 0 ? 0 : Infinity;
    v.resetMs = wait;
    v.latestMs = Infinity;
    return wait;
  }

  check(m: Moment, _stale: boolean, cost: number, v: Verdict): void {
    this.#next = this.#kept(m);
    const wait = this.#report(this.#until, m, v);
    // A probe (cost 0) passes, as it does on a blocked GCRA key: it asks and spends nothing.
    v.allowed = wait === 0 || cost <= 0;
    v.waitMs = v.allowed ? 0 : wait;
  }

  reserve(m: Moment, _stale: boolean, _cost: number, maxWaitMs: number, v: Verdict): void {
    // Acts at the block's end at the earliest; the other limits count it where it acts
    // (LimitSet.check decides them again from this wait).
    this.#next = this.#kept(m);
    const wait = this.#report(this.#until, m, v);
    v.allowed = wait <= maxWaitMs;
    v.waitMs = wait;
  }

  force(m: Moment, _stale: boolean, _cost: number, blockMs: number, _clamp: boolean, v: Verdict): void {
    // A block raises the word to its end's second, never lowers it; a penalty or a reward leaves
    // it. Always allowed: MAX_BLOCK_MS bounds what the controls pass.
    this.#next = this.#until;
    if (blockMs >= 0) {
      // The first whole second at or after the end (a quotient rounded below it is raised).
      const endMs = m.ms + blockMs;
      let sec = Math.ceil(endMs / 1000);
      if (sec * 1000 < endMs) sec += 1;
      if (sec * 1000 - m.ms > this.#wait(this.#until, m)) this.#next = (sec | 0) || 1;
    }
    this.#report(this.#next, m, v);
    v.allowed = true;
    v.waitMs = 0;
  }

  commit(w: Int32Array, at: number): boolean {
    // A decision writes nothing (see the header) but 0 over a block that ended. That and a
    // block's end are compareExchanges from the snapshot: a block that landed since fails them,
    // and the limit is decided again on it (a decision then refuses, a block keeps the longer).
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
    return this.#wait(Atomics.load(w, at), m) === 0;
  }
}

