import { H_RECLAIM_FLOOR, H_RECLAIM_SEQ } from './layout.js';

/**
 * The table's reclaim floor: the latest clock reading at which a reclaim judged a key idle.
 *
 * A reclaim is right at its own reading: the key's state equals a fresh key's from then on. A
 * key inserted again afterwards starts fresh, and that is right only at a reading no earlier. A
 * clock that steps back (`Date.now()` under NTP; on Bun and Deno, threads whose timelines were
 * anchored to the wall clock at different steps) can give the inserting thread an earlier
 * reading: found by the explorer (fixed-window, `0:1 32:1 40:2 66:4`), a window's permit spent
 * at 4,999.75 ms, the key reclaimed by a sweep at 5,000 ms, inserted again fresh by a thread
 * reading 4,999.99999 ms, and a second admission in the first one's window. A reclaimed key keeps
 * no stamp to raise that reading, so the table keeps one for every key it reclaimed:
 *
 * - A reclaim raises the floor to its reading (`raise`) before its linearisation point (the
 *   compareExchange to the reclaim marker), then adds 1 to the sequence word.
 * - A thread that inserts a key (after its claim, before the fresh state) or finds a key in the
 *   table without its cache (a new incarnation, maybe) loads the sequence; when it moved since
 *   this thread last looked, it loads the floor, and the slot hooks raise the instance's readings
 *   to it (`SlotState.raiseTo`): it never decides at an earlier one from then on.
 *
 * Why that is enough: a thread that sees a key gone (its reclaim marker, or its slot reused) saw
 * a write that came after the reclaim's raise and its sequence add, so its load of the sequence
 * sees that add or a later one, and its load of the floor a value no lower than the raise. A
 * raise that finds the floor already as high returns only after adding 1 itself, so no reclaim
 * passes its linearisation point on a raise whose sequence add is still to come. A raise stopped
 * before its add holds no key back: its own reclaim has not happened yet. The floor only rises;
 * the sequence wraps after 2^32 raises (a thread that looks only that rarely would miss them).
 *
 * The floor is a reading some thread made before the insert, so raising to it is the clamp the
 * `Clock` rules allow (a decision at a later reading than its clock's). With the default clock
 * on Node every reading made after another is no earlier, and the floor never raises anything.
 *
 * Layout (layout.ts): H_RECLAIM_FLOOR is a 64-bit word holding the float64's bits (-Infinity in a
 * new table); for non-negative readings the bits order as the numbers do, but the code compares
 * the numbers. H_RECLAIM_SEQ is an int32 beside it, on a cache line of their own.
 *
 * Thread-safety: one instance per thread's view of the table (its scratch is per-thread).
 */
export class ReclaimFloor {
  readonly #w: Int32Array;
  readonly #big: BigInt64Array;
  /** Scratch for converting between a float64 and its bits. */
  readonly #f64 = new Float64Array(1);
  readonly #bits = new BigInt64Array(this.#f64.buffer);
  /** The highest floor this thread's own `raise` calls left in place (each followed by its add). */
  #raised = -Infinity;
  #raisedBits = NEG_INFINITY_BITS;
  /** The sequence when this thread last loaded the floor. */
  #seenSeq = 0;

  constructor(words: Int32Array) {
    this.#w = words;
    this.#big = new BigInt64Array(words.buffer, H_RECLAIM_FLOOR * 4, 1);
  }

  /**
   * Raises the floor to `ms`, the reading a reclaim judged its key idle at; call it before the
   * reclaim's linearisation point. Returns once the floor is at least `ms` and the sequence has
   * moved since it got there.
   */
  raise(ms: number): void {
    // Raised by an earlier call of ours, whose add followed: nothing to do (NaN never raises).
    if (!(ms > this.#raised)) return;
    const big = this.#big;
    this.#f64[0] = ms;
    const want = this.#bits[0] as bigint;
    let expected = this.#raisedBits;
    for (;;) {
      // compareExchange from the value last seen: the floor only rises, one writer at a time.
      const prev = Atomics.compareExchange(big, 0, expected, want);
      if (prev === expected) {
        this.#raised = ms;
        this.#raisedBits = want;
        break;
      }
      const prevMs = this.#toMs(prev);
      if (prevMs >= ms) {
        this.#raised = prevMs;
        this.#raisedBits = prev;
        break;
      }
      expected = prev;
    }
    // Atomics.add after the floor holds ms or more, and before our caller's reclaim: a thread
    // that sees the reclaim sees this add, and loads the floor.
    Atomics.add(this.#w, H_RECLAIM_SEQ, 1);
  }

  /**
   * The floor, if the sequence moved since this thread last loaded it; NaN otherwise (nothing
   * new: every floor a reclaim this thread could have seen was no higher than the last one
   * returned). Call it after the loads that found the key, or found it missing.
   */
  moved(): number {
    // Atomics.load after the lookup's loads: it sees the add of every reclaim they saw.
    const seq = Atomics.load(this.#w, H_RECLAIM_SEQ);
    if (seq === this.#seenSeq) return NaN;
    this.#seenSeq = seq;
    // Atomics.load after the sequence: at least the floor of every raise that added before it.
    return this.#toMs(Atomics.load(this.#big, 0));
  }

  #toMs(bits: bigint): number {
    this.#bits[0] = bits;
    return this.#f64[0] as number;
  }
}

/** The bits of -Infinity as a signed 64-bit integer (0xfff0000000000000): the floor of a new table. */
const NEG_INFINITY_BITS = -(2n ** 52n);

/** Writes a new table's floor (-Infinity), before the buffer is shared. */
export function initReclaimFloor(buffer: SharedArrayBuffer): void {
  new BigInt64Array(buffer, H_RECLAIM_FLOOR * 4, 1)[0] = NEG_INFINITY_BITS;
}
