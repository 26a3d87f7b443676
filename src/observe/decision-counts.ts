import { describe, integerInRange } from '../config/check.js';
import type { DecisionReason } from '../rate/types.js';
import type { DecisionHook } from '../rate/decision-hook.js';

/**
 * Decisions counted by limiter name, outcome and reason, by every thread, in one
 * SharedArrayBuffer, so that the thread that serves a metrics scrape sees all of them:
 *
 * ```
 * Uint32Array
 * +--- header: one cache line --------------+
 * | instances | (pad to 16 words)           |
 * +--- row 0 -------------------------------+   a row is limiters x 12 words, padded to whole
 * | limiter 0: [refused x 6 reasons,        |   cache lines; instance n (in the order they were
 * |             allowed x 6 reasons] | ...  |   made, on any thread) counts in row n mod rows
 * +--- row 1 -------------------------------+
 * | ...                                     |
 * +-----------------------------------------+
 * ```
 *
 * Each count is one `Atomics.add`, so a row may be shared: up to `rows` threads each have a line
 * of their own, and more (a pool that replaces its workers makes a new instance in each) share
 * rows, exactly, at the price of contended lines. A reader sums the rows with `Atomics.load`.
 * Each word wraps at 2^32: a reader takes differences modulo 2^32, so it must read more often than
 * 2^32 decisions of one kind on one limiter are counted in one row (7 minutes at 10 million a
 * second).
 */

/** The reasons, in column order. */
export const REASONS: readonly DecisionReason[] = ['allowed', 'limited', 'exceeds-burst', 'table-full', 'global-limit', 'unavailable'];
const COLUMNS_PER_LIMITER = 2 * REASONS.length;
const LINE_WORDS = 16;
/** Rows unless configured otherwise. */
export const DEFAULT_MAX_THREADS = 64;

/** What travels to a worker: the buffer and the limiter names, in column order. */
export interface DecisionCountsHandle {
  readonly kind: 'sluice.DecisionCounts';
  readonly counts: SharedArrayBuffer;
  readonly limiters: readonly string[];
}

/** One thread's view: its own row to count in, and every row to read. */
export class DecisionCounts {
  readonly limiters: readonly string[];
  readonly #words: Uint32Array;
  readonly #rowWords: number;
  readonly #rows: number;
  /** This instance's row: the word index of its first column. */
  readonly #own: number;

  private constructor(buffer: SharedArrayBuffer, limiters: readonly string[]) {
    this.limiters = limiters;
    this.#words = new Uint32Array(buffer);
    this.#rowWords = Math.ceil((limiters.length * COLUMNS_PER_LIMITER) / LINE_WORDS) * LINE_WORDS;
    this.#rows = (this.#words.length - LINE_WORDS) / this.#rowWords;
    // Atomics.add: each instance gets the next number, whichever thread makes it.
    const row = Atomics.add(this.#words, 0, 1) % this.#rows;
    this.#own = LINE_WORDS + row * this.#rowWords;
  }

  /** New counts for `limiters` (distinct names), in `maxThreads` rows. */
  static create(limiters: unknown, maxThreads: unknown = DEFAULT_MAX_THREADS): DecisionCounts {
    if (!Array.isArray(limiters) || limiters.length === 0 || limiters.some((n) => typeof n !== 'string' || n === '')) {
      throw new TypeError(`options.limiters must be a non-empty array of limiter names (strings), got ${describe(limiters)}`);
    }
    const names = limiters as string[];
    const twice = names.find((n, i) => names.indexOf(n) !== i);
    if (twice !== undefined) throw new TypeError(`options.limiters names ${describe(twice)} twice`);
    const rows = integerInRange('options.maxThreads', maxThreads, 1, 65_536);
    const rowWords = Math.ceil((names.length * COLUMNS_PER_LIMITER) / LINE_WORDS) * LINE_WORDS;
    return new DecisionCounts(new SharedArrayBuffer((LINE_WORDS + rows * rowWords) * 4), Object.freeze([...names]));
  }

  /** This thread's counts over the same buffer (the next row, shared once every row is taken). */
  static attach(handle: DecisionCountsHandle): DecisionCounts {
    if (handle === null || typeof handle !== 'object' || !(handle.counts instanceof SharedArrayBuffer) || !Array.isArray(handle.limiters)) {
      throw new TypeError(`handle must be a metrics handle ({ kind, counts, limiters }), got ${describe(handle)}`);
    }
    return new DecisionCounts(handle.counts, Object.freeze([...handle.limiters]));
  }

  get handle(): DecisionCountsHandle {
    return { kind: 'sluice.DecisionCounts', counts: this.#words.buffer as SharedArrayBuffer, limiters: this.limiters };
  }

  /** A decision hook that counts in this instance's row, under `limiter` (one of the names). */
  hook(limiter: string): DecisionHook<unknown> {
    const at = this.limiters.indexOf(limiter);
    if (at < 0) throw new TypeError(`limiter ${describe(limiter)} is not one of the metrics' limiters (${this.limiters.join(', ')})`);
    const words = this.#words;
    const first = this.#own + at * COLUMNS_PER_LIMITER;
    return (_key, allowed, reason) => {
      const i = first + (allowed ? REASONS.length : 0) + reasonColumn(reason);
      // Atomics.add: the row may be shared with other threads (see the layout above); the sum is
      // all a reader needs, in no order with anything else.
      Atomics.add(words, i, 1);
    };
  }

  /**
   * Each row's words of limiter `at`, summed modulo 2^32 into `into` (COLUMNS_PER_LIMITER words):
   * refused then allowed, by REASONS.
   */
  read(at: number, into: Uint32Array): void {
    into.fill(0);
    const w = this.#words;
    // Atomics.load of the instances made: rows past it were never written.
    const rows = Math.min(Atomics.load(w, 0), this.#rows);
    for (let row = 0; row < rows; row++) {
      const first = LINE_WORDS + row * this.#rowWords + at * COLUMNS_PER_LIMITER;
      // Atomics.load: each word whole, perhaps a little behind the other threads' counts.
      for (let c = 0; c < COLUMNS_PER_LIMITER; c++) into[c] = ((into[c] as number) + Atomics.load(w, first + c)) >>> 0;
    }
  }
}

/** Columns per limiter: refused and allowed, by reason. */
export const COLUMNS = COLUMNS_PER_LIMITER;

function reasonColumn(reason: DecisionReason): number {
  switch (reason) {
    case 'allowed': return 0;
    case 'limited': return 1;
    case 'exceeds-burst': return 2;
    case 'table-full': return 3;
    case 'global-limit': return 4;
    default: return 5;
  }
}
