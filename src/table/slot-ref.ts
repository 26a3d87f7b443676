/**
 * One thread's reference to where a key lives, and what that thread knows of it. A record of
 * RECORD_WORDS int32 words in a per-thread `Int32Array`:
 *
 * ```
 *  word  0      1      2     3        4        5       6        7
 *       +------+------+-----+--------+--------+-------+--------+--------+
 *       | base | ctrl | tat | sec hi | sec lo | known | ownSkip| tat2   |
 *       +------+------+-----+--------+--------+-------+--------+--------+
 * ```
 *
 * A key cache (slot-index.ts) keeps its records side by side in one array and maps a key to a
 * record's number, a small integer: a hit is a `Map.get` that yields no object, then one read of
 * a 32-byte record. A reference object per key was one more cold line per check, scattered
 * over the heap, and garbage for the collector (measured: slot-index.ts, SlotIndex).
 *
 * So a `SlotRef` is a view: the index moves its one view to the record of each key it returns
 * (`point`), and a reference is valid until that index's next lookup. Whoever keeps one longer
 * (a reservation, a lease) keeps `SlotIndex.lasting(ref)`, a reference with a record of its own.
 * Every reference is of this one class, so the engines that read them see one shape.
 *
 * Thread-safety: per thread, plain; nothing here is shared memory.
 */

/** Words in one record (a power of two: a record's words share a cache line). */
export const RECORD_WORDS = 8;

/** The slot's first word in the table. */
const R_BASE = 0;
/** The slot's ctrl word when the key was found there. */
const R_CTRL = 1;
/** The state word this thread last wrote for the key (see `tat`). */
const R_TAT = 2;
/** The second of `sec`: the part above its low 32 bits, and those bits. */
const R_SEC_HI = 3;
const R_SEC_LO = 4;
/** 1 while `sec` holds a second this thread knows the slot's lastSec word has reached. */
const R_KNOWN = 5;
/** Admissions left that load tat instead of starting from `tat` (Gcra32's backoff). */
const R_SKIP = 6;
/** The second limit's word this thread last wrote (LockFreeEngine; see `tat2`). */
const R_TAT2 = 7;

const TWO_32 = 4_294_967_296;

/**
 * Writes a record for a location just found: `base` and `ctrl`, and nothing of any key that the
 * record held before (no own write, no known second, no backoff).
 */
export function fillRecord(w: Int32Array, at: number, base: number, ctrl: number): void {
  w[at + R_BASE] = base;
  w[at + R_CTRL] = ctrl;
  w[at + R_TAT] = 0;
  w[at + R_SEC_HI] = 0;
  w[at + R_SEC_LO] = 0;
  w[at + R_KNOWN] = 0;
  w[at + R_SKIP] = 0;
  w[at + R_TAT2] = 0;
}

/** The part of second `second` above its low 32 bits, as `sec` stores it (for `knowsSec`). */
export function secHi(second: number): number {
  return Math.floor(second / TWO_32);
}

/** The low 32 bits of second `second`, as `sec` stores them (int32; for `knowsSec`). */
export function secLo(second: number): number {
  return second | 0;
}

export class SlotRef {
  /** The records this reference reads: its own, or its index's (moved by `point` and `over`). */
  #w: Int32Array;
  /** The first word of its record in #w. */
  #at = 0;

  /** A reference with a record of its own, at `base` with `ctrl`. */
  constructor(base: number, ctrl: number) {
    this.#w = new Int32Array(RECORD_WORDS);
    fillRecord(this.#w, 0, base, ctrl);
  }

  /** Makes this reference a view of `records` (an index's own view only; see `point`). */
  over(records: Int32Array): void {
    this.#w = records;
  }

  /** Moves this view to record number `record` of its records. Only for the index that owns the view. */
  point(record: number): SlotRef {
    this.#at = record * RECORD_WORDS;
    return this;
  }

  /** The slot's first word. */
  get base(): number {
    return this.#w[this.#at + R_BASE] as number;
  }

  /** The slot's ctrl word when the key was found there (int32). A LIVE ctrl word carries the slot's generation. */
  get ctrl(): number {
    return this.#w[this.#at + R_CTRL] as number;
  }

  /**
   * The state word this thread last wrote for the key (int32): the tat word (Gcra32, 32-bit
   * GCRA), or the first limit's word (LockFreeEngine). Set on every write of this thread's, and
   * `sec` with it on every admission (a refund's reading is no earlier than the admission's), so
   * while `secKnown` and `sec` is the second of this thread's reading, a loaded word equal to it
   * is a write of this thread's from that same second: the decision may skip the lastSec load
   * (see Gcra32.decide).
   */
  get tat(): number {
    return this.#w[this.#at + R_TAT] as number;
  }

  set tat(word: number) {
    this.#w[this.#at + R_TAT] = word;
  }

  /**
   * The lock-free engine's second key limit's word as this thread last wrote it, beside `tat`
   * (the first's), when that limit is one int32 word: set with `tat` on every admission, so that
   * an admission of a key of two such limits may start from both (LockFreeEngine#allowOwnTwo).
   */
  get tat2(): number {
    return this.#w[this.#at + R_TAT2] as number;
  }

  set tat2(word: number) {
    this.#w[this.#at + R_TAT2] = word;
  }

  /**
   * The second that `secKnown` speaks of: an integer of either sign, a clock's reading (at most
   * 2^53 ms, time/ticks.ts) over 1000, kept as its low 32 bits and the rest.
   */
  get sec(): number {
    const w = this.#w;
    const at = this.#at;
    return (w[at + R_SEC_HI] as number) * TWO_32 + ((w[at + R_SEC_LO] as number) >>> 0);
  }

  set sec(second: number) {
    const hi = secHi(second);
    this.#w[this.#at + R_SEC_HI] = hi;
    this.#w[this.#at + R_SEC_LO] = second - hi * TWO_32; // stored modulo 2^32, read back unsigned
  }

  /**
   * Whether `secKnown` holds and `sec` is the second whose `secHi` and `secLo` are `hi` and `lo`: three
   * int32 reads and compares, where reading `sec` builds a double (the one-limit path asks this
   * on every admission).
   */
  knowsSec(hi: number, lo: number): boolean {
    const w = this.#w;
    const at = this.#at;
    return w[at + R_SEC_LO] === lo && w[at + R_SEC_HI] === hi && w[at + R_KNOWN] !== 0;
  }

  /**
   * Sets `sec` to the second whose `secHi` and `secLo` are `hi` and `lo`, and `secKnown`: what
   * `sec = ...; secKnown = true` do, from parts a caller already keeps (no division per write).
   */
  knowSec(hi: number, lo: number): void {
    const w = this.#w;
    const at = this.#at;
    w[at + R_SEC_HI] = hi;
    w[at + R_SEC_LO] = lo;
    w[at + R_KNOWN] = 1;
  }

  /**
   * Whether `sec` holds a second this thread knows the slot's lastSec word has reached (it only
   * moves forward): a decision in that same second need not load the word (see Gcra32). A flag,
   * not a sentinel value: a clock may read negative times, so any integer can be a real second.
   */
  get secKnown(): boolean {
    return this.#w[this.#at + R_KNOWN] !== 0;
  }

  set secKnown(known: boolean) {
    this.#w[this.#at + R_KNOWN] = known ? 1 : 0;
  }

  /** Admissions left that load tat instead of starting from `tat` (Gcra32's and LockFreeEngine's backoff). */
  get ownSkip(): number {
    return this.#w[this.#at + R_SKIP] as number;
  }

  set ownSkip(left: number) {
    this.#w[this.#at + R_SKIP] = left;
  }
}
