import { READING_LAG_MS } from '../math/gcra.js';
import { ceilNs, floorDiv } from '../time/ticks.js';
import { swap, type LimitAlgorithm, type Moment, type Verdict } from './types.js';

/**
 * The fixed window in one int32 word, for limits whose windows it can tell apart (see
 * `fitsFixedWindow32`): the word is `window * (permits + 1) + count`, modulo 2^32, so one int32
 * compareExchange from the snapshot commits the window and the count together. Read against the
 * reading's window `W` as the signed difference `d = word - W * (permits + 1)`: below 0, an older
 * window (count 0); 0 to `permits`, this window's count; above, a later window stored by a newer
 * admission (a reading older than the state): counted in that window, never moved back.
 * The difference is exact while the stored window is less than 2^31 / (permits + 1) windows from
 * the reading's: a key idle longer is stale (lastSec), and a reading lags a state by at most
 * READING_LAG_MS.
 */
export class FixedWindow32 implements LimitAlgorithm {
  readonly stateWords = 1;
  readonly lockFree = true;
  readonly staleSec: number;
  readonly #permits: number;
  readonly #periodMs: number;
  readonly #span: number; // permits + 1: the word's step per window
  // The snapshot and what the last check decided.
  #word = 0;
  #win = 0;
  #count = 0;
  #base = 0; // the decided window's first word value (count 0), modulo 2^32
  #ahead = false; // the decided window is later than the reading's
  #next = 0;
  #written = 0;

  constructor(permits: number, periodMs: number, staleSec: number) {
    this.#permits = permits;
    this.#periodMs = periodMs;
    this.#span = permits + 1;
    this.staleSec = staleSec;
  }

  #decode(ms: number, stale: boolean): void {
    const now = floorDiv(ms, this.#periodMs);
    const base = Math.imul(now | 0, this.#span) | 0; // exact modulo 2^32: now < 2^53
    const d = stale ? -1 : (this.#word - base) | 0;
    if (d < 0) {
      this.#win = now;
      this.#count = 0;
      this.#base = base;
      this.#ahead = false;
    } else {
      const ahead = Math.floor(d / this.#span); // 0: this window
      this.#win = now + ahead;
      this.#count = d - ahead * this.#span;
      this.#base = (base + ahead * this.#span) | 0;
      this.#ahead = ahead > 0;
    }
  }

  /**
   * How long a state with nothing counted stays unlike a fresh key's: until the decided window
   * starts when it is a later one (it refuses until then), else 0.
   */
  #untilAhead(ms: number): number {
    return this.#ahead ? ceilNs(this.#win * this.#periodMs - ms) : 0;
  }

  /** Moves the decided window to the next one (empty). */
  #nextWindow(): void {
    this.#win += 1;
    this.#count = 0;
    this.#base = (this.#base + this.#span) | 0;
  }

  init(w: Int32Array, at: number, m: Moment): void {
    Atomics.store(w, at, Math.imul(floorDiv(m.ms, this.#periodMs) | 0, this.#span) | 0);
  }

  load(w: Int32Array, at: number): void {
    this.#word = Atomics.load(w, at);
  }

  /**
   * Takes `word`, this thread's own latest write of the state (no load), as the snapshot: a
   * `commit` from it lands only if the state still holds it (LockFreeEngine#allowOwn).
   */
  own(word: number): void {
    this.#word = word;
  }

  /** The word the last `load` (or `own`) read. */
  get loaded(): number {
    return this.#word;
  }

  /** The largest cost a request can ever pass with: the window's permits. */
  get capacity(): number {
    return this.#permits;
  }

  /** `check` for a verdict without detail: whether `cost` passes on the snapshot. */
  admits(m: Moment, stale: boolean, cost: number): boolean {
    this.#decode(m.ms, stale);
    const count = this.#count;
    // A later window's count is for requests that act in it: none may act now on it.
    const allowed = count + cost <= this.#permits && !this.#ahead;
    this.#next = (this.#base + (allowed ? count + cost : count)) | 0;
    return allowed;
  }

  /** The word the last `commit` wrote. */
  get written(): number {
    return this.#written;
  }

  check(m: Moment, stale: boolean, cost: number, v: Verdict): void {
    this.#decode(m.ms, stale);
    const permits = this.#permits;
    const count = this.#count;
    // A later window's count is for requests that act in it: none may act now on it.
    v.allowed = count + cost <= permits && !this.#ahead;
    const after = v.allowed ? count + cost : count;
    this.#next = (this.#base + after) | 0;
    if (!v.detail) {
      v.waitMs = cost > permits ? Infinity : 0;
      return;
    }
    const untilEnd = ceilNs((this.#win + 1) * this.#periodMs - m.ms);
    v.remaining = this.#ahead ? 0 : permits - after;
    v.waitMs = v.allowed ? 0 : cost > permits ? Infinity : count + cost <= permits ? ceilNs(this.#win * this.#periodMs - m.ms) : untilEnd;
    v.resetMs = after > 0 ? untilEnd : this.#untilAhead(m.ms);
  }

  /**
   * A penalty (`cost` > 0) or a reward (`cost` < 0) on the decided window's count: a penalty
   * fills at most the window (the word holds no count past `permits`, and a window forgets its
   * count at its end anyway), a reward gives back never below 0. A block (`blockMs` >= 0) leaves
   * the count as it is: the key's block word holds it (block-until.ts, only on a limiter that keeps
   * one: the controls refuse a block elsewhere). Only under the key's give-back guard, with its epoch
   * moved on (LockFreeEngine.giveBack): a decision's undo, which subtracts its own spend, could
   * otherwise take it from a count this clamped.
   */
  force(m: Moment, stale: boolean, cost: number, blockMs: number, _clamp: boolean, v: Verdict): void {
    this.#decode(m.ms, stale);
    const permits = this.#permits;
    const after = blockMs >= 0 ? this.#count : Math.min(permits, Math.max(0, this.#count + cost));
    this.#next = (this.#base + after) | 0;
    const untilEnd = ceilNs((this.#win + 1) * this.#periodMs - m.ms);
    v.allowed = true;
    v.remaining = this.#ahead ? 0 : permits - after;
    v.waitMs = 0;
    v.resetMs = after > 0 ? untilEnd : this.#untilAhead(m.ms);
    v.latestMs = Infinity;
  }

  reserve(m: Moment, stale: boolean, cost: number, maxWaitMs: number, v: Verdict, notBeforeMs = 0): void {
    this.#decode(m.ms, stale);
    const permits = this.#permits;
    const periodMs = this.#periodMs;
    const reading = floorDiv(m.ms, periodMs);
    // The decided window, or the one the earliest act falls in if later; the next one if that
    // has no room; at most the reading's next window (an idle key's counts are kept for two
    // windows: see fitsFixedWindow32 and windowLimit).
    const first = notBeforeMs > 0 ? floorDiv(m.ms + notBeforeMs, periodMs) : 0;
    if (first > this.#win) {
      this.#win = first;
      this.#count = 0;
      this.#base = Math.imul(first | 0, this.#span) | 0;
    }
    if (this.#count + cost > permits) this.#nextWindow();
    const delay = Math.max(0, ceilNs(this.#win * periodMs - m.ms));
    v.allowed = cost <= permits && this.#win <= reading + 1 && delay <= maxWaitMs;
    const after = v.allowed ? this.#count + cost : this.#count;
    this.#next = (this.#base + after) | 0;
    v.waitMs = cost > permits ? Infinity : delay;
    v.latestMs = latestIn(this.#win, periodMs, m.ms);
    v.remaining = this.#win > reading ? 0 : permits - after;
    v.resetMs = ceilNs((this.#win + 1) * periodMs - m.ms);
  }

  commit(w: Int32Array, at: number): boolean {
    this.#written = this.#next;
    // compareExchange from the snapshot: window and count move together or not at all.
    return swap(w, at, this.#word, this.#written);
  }

  undo(w: Int32Array, at: number): boolean {
    return this.#takeBack(w, at, this.#base, ((this.#written - this.#base) | 0) - this.#count);
  }

  /**
   * Subtracts `cost` from the count of the window whose first word value is `base`, while the
   * word still holds that window (within a few windows of it, no other window reads as it: see
   * fitsFixedWindow32) and its count includes `cost`. Counts add up, so this is exact even after
   * other spends built on ours; a later window no longer counts it (false). `forgotten`: a
   * refund's test after each snapshot (LimitAlgorithm.refund).
   */
  #takeBack(w: Int32Array, at: number, base: number, cost: number, forgotten: (() => boolean) | null = null): boolean {
    for (;;) {
      const cur = Atomics.load(w, at);
      const d = (cur - base) | 0;
      if (d < cost || d > this.#permits || (forgotten !== null && forgotten())) return false;
      // compareExchange from the value just read: a spend since retries.
      if (swap(w, at, cur, (cur - cost) | 0)) return true;
    }
  }

  decidedLater(): boolean {
    return this.#ahead;
  }

  slotStart(out: Int32Array): void {
    out[0] = this.#base; // the reserved window's first word value
    out[1] = this.#win | 0;
  }

  refund(w: Int32Array, at: number, _m: Moment, base: number, _win: number, cost: number, _exact = false, forgotten: (() => boolean) | null = null): boolean {
    return this.#takeBack(w, at, base, cost, forgotten);
  }

  idle(w: Int32Array, at: number, m: Moment, stale: boolean): boolean {
    this.load(w, at);
    this.#decode(m.ms, stale);
    // A later window (a reservation's, even one cancelled since) closes the reading's: the state
    // is not a fresh key's until the clock reaches it, and a reclaim would open the window again.
    return this.#count === 0 && !this.#ahead;
  }
}

/**
 * How late (ms after `ms`) a request counted in window `win` may act: before the window ends,
 * by more than a reading's slack (a reading within it of a boundary counts as on it).
 */
export function latestIn(win: number, periodMs: number, ms: number): number {
  return (win + 1) * periodMs - ms - 2e-6;
}

/**
 * Whether a fixed window of `permits` per `periodMs` fits one int32 word: every difference a
 * decision can meet (a key idle up to its staleness rule plus 2 s, a reading lagging by
 * READING_LAG_MS) spans fewer than 2^31 / (permits + 1) windows.
 */
export function fitsFixedWindow32(permits: number, periodMs: number, staleSec: number): boolean {
  if (staleSec === Infinity || staleSec > 2 ** 30) return false;
  const spanMs = (staleSec + 2) * 1000 + READING_LAG_MS;
  const windows = Math.ceil(spanMs / periodMs) + 2;
  // The word holds the same bits again (another window, another count) after at least this
  // many windows: a decision stalled that long between its snapshot and its compareExchange
  // could land on them. Keep that at least an hour (a 32-bit GCRA TAT repeats after 2^32 ticks,
  // 43 s at its finest), else take the 64-bit word (2^32 windows).
  const repeatAfter = Math.floor((2 ** 32 - permits) / (permits + 1));
  return windows * (permits + 1) < 2 ** 31 && repeatAfter * periodMs >= MIN_REPEAT_MS;
}

/** The shortest time after which an int32 fixed-window word may repeat its bits. */
const MIN_REPEAT_MS = 3_600_000;
