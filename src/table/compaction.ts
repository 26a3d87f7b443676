import { BUSY, C_TOMBS, ctrlWord, EMPTY, LIVE, S_CTRL, S_HASH, TOMB } from './layout.js';
import { processNow } from '../time/clock.js';

/**
 * Sweeps and compaction: reclaiming idle keys and turning tombstones back into EMPTY slots, so
 * that a table that sees new keys for ever keeps its probe chains short (docs/design.md,
 * "Compaction"). One instance per SlotTable instance, so per thread (it holds scratch memory).
 *
 * Thread-safety: every method may run at the same time as any table method on any thread; none
 * takes a lock, and one that stops anywhere leaves only tombstones and EMPTY slots that are right.
 */

/**
 * Returned by `SweepHost.reclaimLive` when it retired the key but another thread turned the slot
 * into a tombstone: 1, which no tombstone word is (their low bits are TOMB).
 */
export const RECLAIMED_ELSEWHERE = 1;

/** What sweeps and compaction need of their table (SlotTable). */
export interface SweepHost {
  readonly words: Int32Array;
  readonly stripes: number;
  readonly slotsPerStripe: number;
  /** How old an expired claim must be before a sweep takes its slot over (insert.ts, REUSE_AFTER_TIMEOUTS). */
  readonly reuseAfterMs: number;
  /** The slot's first word index. */
  base(slot: number): number;
  /** The position in its stripe (0 to slotsPerStripe - 1) of the home slot of a key of hash `hash`. */
  homeInStripe(hash: number): number;
  /**
   * Reclaims the slot at `base`, loaded as the LIVE word `ctrl`, if its key is idle: the
   * tombstone word when this call made it, RECLAIMED_ELSEWHERE, or 0 (nothing reclaimed).
   */
  reclaimLive(base: number, ctrl: number): number;
  /** Age in ms of the claim in BUSY word `ctrl` at the reading `nowMs`. */
  claimAge(ctrl: number, nowMs: number): number;
  /** Whether the claim in BUSY word `c` at `base` can never be published (cancelling it if it expired). */
  cancelExpired(base: number, c: number): boolean;
  /** Counts a transition of `slot` in the table's gauges. */
  count(slot: number, word: number, delta: number): void;
}

/**
 * A table's sweeps and compactions on this thread. A sweep takes a claim over once it is the
 * table's `reuseAfterMs` old (insert.ts, REUSE_AFTER_TIMEOUTS).
 */
export class StripeSweeper {
  readonly #t: SweepHost;
  /** Per-thread scratch: the ctrl words of a compaction's step 1, the slots chains cross. */
  readonly #seen: Int32Array;
  readonly #crossed: Uint8Array;

  constructor(t: SweepHost) {
    this.#t = t;
    this.#seen = new Int32Array(t.slotsPerStripe);
    this.#crossed = new Uint8Array(t.slotsPerStripe);
  }

  /**
   * Reclaims every idle key in the table and every long-abandoned claim, and compacts every
   * stripe. Returns the count of slots freed (reclaimed keys and claims).
   */
  sweep(): number {
    const t = this.#t;
    const nowMs = Math.floor(processNow());
    let count = 0;
    for (let stripe = 0; stripe < t.stripes; stripe++) count += this.sweepStripe(stripe, nowMs, t.reuseAfterMs);
    return count;
  }

  /**
   * Reclaims every idle key of `stripe` and, when `nowMs` is a reading (not -1), every claim
   * older than `reuseAfterMs` at it; then compacts the stripe. Returns the count of slots freed.
   * The one load of each ctrl word here is also the compaction's step 1 (compactStripe): each
   * word in `#seen` is one the slot held before step 2 begins, the word loaded or the tombstone
   * this call's compareExchange made.
   */
  sweepStripe(stripe: number, nowMs: number, reuseAfterMs: number): number {
    const t = this.#t;
    const w = t.words;
    const S = t.slotsPerStripe;
    const start = stripe * S;
    const seen = this.#seen;
    let count = 0;
    let tombs = 0;
    for (let i = 0; i < S; i++) {
      const slot = start + i;
      const base = t.base(slot);
      // Atomics.load (seq-cst): the word the reclaim below starts from, and step 1's load.
      let c = Atomics.load(w, base + S_CTRL);
      const state = c & 3;
      if (state === LIVE) {
        const tomb = t.reclaimLive(base, c);
        if (tomb !== 0) count++;
        if (tomb !== RECLAIMED_ELSEWHERE && tomb !== 0) c = tomb;
      } else if (state === BUSY && nowMs !== -1 && t.claimAge(c, nowMs) > reuseAfterMs) {
        // A dead inserter's claim, or a cancelled one, past 30x the timeout: compareExchange from
        // the exact word we judged (a changed word was published, abandoned or reused meanwhile).
        const tomb = ctrlWord(TOMB, c >>> 2);
        if (Atomics.compareExchange(w, base + S_CTRL, c, tomb) === c) {
          t.count(slot, C_TOMBS, 1);
          count++;
          c = tomb;
        }
      }
      seen[i] = c;
      if ((c & 3) === TOMB) tombs++;
    }
    if (tombs !== 0) this.#compactSeen(start);
    return count;
  }

  /**
   * Turns the tombstones of `stripe` that no key's probe chain crosses back into EMPTY slots, so
   * that lookups stop there again; returns how many. A chain crosses a slot when the slot lies
   * between the key's home and the key's own slot: a lookup of that key must probe past it, so
   * it must not read EMPTY. Tombstones whose chains are all gone (their keys reclaimed) are what
   * this gives back; without it every reclaimed slot stays a tombstone and misses probe longer
   * and longer (docs/design.md, "Compaction").
   *
   * 1. Load every ctrl word of the stripe. A tombstone is cleared only by a compareExchange from
   *    the word loaded here: it succeeds only if the slot stayed that very tombstone all along
   *    (tombstone words do not come back: each incarnation of a slot has a new generation, and an
   *    abandoned claim leaves a tombstone of its own generation, see SlotInserter's #abandon, insert.ts).
   * 2. Load every ctrl word again, and every live key's hash, after step 1. A claim (BUSY) that
   *    may still be published: give up (its key and chain are not known yet). A cancelled claim
   *    never will be, and one older than claimTimeoutMs is cancelled here first, as an insert of
   *    its hash would (so a stalled or dead inserter holds up its stripe's compaction for that
   *    long at most). A key's hash is read between two loads of its ctrl that agree, so it
   *    belongs to that key; mark the slots its chain crosses.
   * 3. Clear each tombstone of step 1 that no chain of step 2 crosses: compareExchange to EMPTY,
   *    keeping the generation, so that the slot's next claim carries a new one.
   *
   * An inserter whose chain crosses a cleared slot and which claimed its own slot after we loaded
   * that slot in step 2 re-scans its chain after its claim, so after step 1: it sees the slot
   * free (the tombstone, or EMPTY) and gives its claim up (see SlotInserter.insert, step 3). One that claimed
   * before that load is seen in step 2. A compaction that stops anywhere leaves only tombstones
   * and EMPTY slots that are right: nothing waits for it, and no key's state is touched.
   */
  compactStripe(stripe: number): number {
    const t = this.#t;
    const w = t.words;
    const S = t.slotsPerStripe;
    const start = stripe * S;
    const seen = this.#seen;
    let tombs = 0;
    for (let i = 0; i < S; i++) {
      // Atomics.load (seq-cst): step 1, before every load of step 2.
      const c = Atomics.load(w, t.base(start + i) + S_CTRL);
      seen[i] = c;
      if ((c & 3) === TOMB) tombs++;
    }
    return tombs === 0 ? 0 : this.#compactSeen(start);
  }

  /** compactStripe's steps 2 and 3 for the stripe that starts at slot `start`, its step 1 in `#seen`. */
  #compactSeen(start: number): number {
    const t = this.#t;
    const w = t.words;
    const S = t.slotsPerStripe;
    const seen = this.#seen;
    const crossed = this.#crossed;
    crossed.fill(0);
    for (let i = 0; i < S; i++) {
      const base = t.base(start + i);
      // Atomics.load (seq-cst): step 2, after step 1 (see above for why the order matters).
      const c = Atomics.load(w, base + S_CTRL);
      const state = c & 3;
      if (state === BUSY && !t.cancelExpired(base, c)) return 0;
      if (state !== LIVE) continue;
      // Atomics.load of the hash, then of ctrl again: unchanged, the hash is this key's (it is
      // written before the publishing compareExchange and never while the slot is LIVE).
      const hash = Atomics.load(w, base + S_HASH);
      if (Atomics.load(w, base + S_CTRL) !== c) return 0;
      for (let j = t.homeInStripe(hash); j !== i; j = (j + 1) & (S - 1)) crossed[j] = 1;
    }
    let cleared = 0;
    for (let i = 0; i < S; i++) {
      const c = seen[i] as number;
      if ((c & 3) !== TOMB || crossed[i] === 1) continue;
      // compareExchange from the tombstone loaded in step 1: fails if the slot was claimed since.
      if (Atomics.compareExchange(w, t.base(start + i) + S_CTRL, c, ctrlWord(EMPTY, c >>> 2)) === c) cleared++;
    }
    if (cleared !== 0) t.count(start, C_TOMBS, -cleared);
    return cleared;
  }
}
