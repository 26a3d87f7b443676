import { H_RESET_MARKS, MARK_WORDS, RESET_MARKS } from './layout.js';
import { ageMs, lockToken } from './slot-lock.js';
import { processNow } from '../time/clock.js';

/**
 * The reset marks (layout.ts): what tells a reservation's cancel that its key was reset or
 * blocked since the reservation was counted.
 *
 * A reset makes a key fresh: what it owed before, a reservation included, is forgotten, and the
 * admissions after it count from the fresh state. A cancel that then gave its reservation's count
 * back would take it from those admissions (found: on a fixed window of 1 a second, allow,
 * reserve, reset, allow, reserve, cancel the first: a third reservation of that window admitted,
 * 2 of 1). A block refuses until its end, which a cancel after it must not bring closer. Neither
 * leaves a trace in the state words that a cancel could tell from later admissions, so each is
 * counted in its slot's mark, two words, and a third for the one-limit path (below):
 *
 * ```
 *   done:  resets and blocks of the mark's slots that finished (only grows, modulo 2^32)
 *   busy:  those under way (1 added before the first write, taken back after the last)
 *   guard: FREE, or the token of a one-limit give-back writing to one of the mark's slots
 * ```
 *
 * - A reset or block adds 1 to busy before its first write, and after its last adds 1 to done,
 *   then takes 1 from busy (`resetting`, `resetDone`).
 * - A reservation loads busy, then done, before its decision (`resetMark`): busy 0, it keeps
 *   done; else it keeps nothing, and its cancel gives nothing (a reset under way may write after
 *   its commit).
 * - A refund loads busy, then done, after each snapshot of a word it gives back to and before its
 *   compareExchange (`resetSince`): it gives back only with busy 0 and done as its reservation kept.
 *
 * Why that is enough, whatever the threads' order (every access seq-cst):
 * - a reset whose write lands after the reservation's commit: if the reservation loaded busy
 *   before the reset's add to it, the reset's add to done comes after its write, after the
 *   commit, after the reservation's load of done: the cancel finds done moved. If it loaded busy
 *   after that add and before the reset took it back, busy was not 0. If after it took it back,
 *   the reset's write came before, and so before the commit: not this case;
 * - a reset whose write a refund's snapshot holds: its add to busy came first, so the refund
 *   loads busy at 1 or more, or, once taken back, done moved (added before that);
 * - a reset whose write lands between a refund's snapshot and its compareExchange makes that
 *   compareExchange fail, and the next snapshot is the case above;
 * - a reset or block that stops for ever between its adds leaves busy above 0: the cancels of the
 *   mark's slots give nothing from then on (conservative).
 * On the one-limit path, where the key's word is its state alone, a reset and admissions could
 * bring the word back to the exact value a refund read, between the refund's check of the mark and
 * its compareExchange, which would then land on the fresh state (found: three admitted at 2 an
 * hour, when a request's give-back raced a reset and admissions that read the clock at the spend's
 * tick). So there every give-back (a reset, a reward, a refund) holds its mark's guard
 * (`MarkGuard`) from its first load of the word to its last write: no reset runs between a
 * refund's check and its compareExchange, and while a give-back holds the guard the key's word
 * only rises (admissions, penalties and blocks add; a reclaim writes DEAD, which no
 * compareExchange from a TAT matches), so a compareExchange that lands found the word unchanged
 * since its snapshot. A block needs no guard: it raises the word, and moves the mark.
 *
 * A holder that died, or stalled past the table's reuse age, is taken over once its token is
 * that old (the table's one timing assumption, as for locks: slot-lock.ts). The refund then also
 * loads the mark after its compareExchange and takes its own write back if it moved.
 *
 * A mark serves about one slot in RESET_MARKS, picked by a hash of the slot's first word: resets
 * of the others also stop a cancel (nothing given: conservative). done wraps after 2^32 resets
 * of its slots between a reservation and its cancel.
 *
 * Thread-safety: any thread; each word is read and written by Atomics only.
 */

/** A mark's index is the top bits of a hash of the slot's first word: 32 less log2(RESET_MARKS). */
const MARK_SHIFT = 32 - Math.log2(RESET_MARKS);

/** A reservation's mark that no refund accepts (a reset was under way when it was read). */
export const NO_MARK = -1;

/** The word index of the mark (its done word; busy and guard follow) of the slot whose first word is `base`. */
function markAt(w: Int32Array, base: number): number {
  // A plain read of a header word written once, before the buffer was shared.
  return (w[H_RESET_MARKS] as number) + MARK_WORDS * (Math.imul(base, 0x9e3779b1) >>> MARK_SHIFT);
}

/**
 * The mark of the slot at `base` for a reservation about to be decided there: its done count,
 * or NO_MARK while a reset of the mark's slots is under way. A count, in [0, 2^32).
 */
export function resetMark(w: Int32Array, base: number): number {
  const at = markAt(w, base);
  // Atomics.load of busy, then of done, before the decision (see above for why this order).
  if (Atomics.load(w, at + 1) !== 0) return NO_MARK;
  return Atomics.load(w, at) >>> 0;
}

/** A reset or a block of the key at `base` is about to write. */
export function resetting(w: Int32Array, base: number): void {
  // Atomics.add, before the first write: a refund whose snapshot holds that write sees it.
  Atomics.add(w, markAt(w, base) + 1, 1);
}

/** The reset or block that called `resetting` for the slot at `base` wrote its last. */
export function resetDone(w: Int32Array, base: number): void {
  const at = markAt(w, base);
  // Atomics.add of done after the last write, then busy taken back: a reservation that loads busy
  // at 0 after this loads done moved; one that loaded it before saw busy above 0.
  Atomics.add(w, at, 1);
  Atomics.sub(w, at + 1, 1);
}

/** Whether a refund of a reservation that kept `mark` must give nothing at the slot at `base`. */
export function resetSince(w: Int32Array, base: number, mark: number): boolean {
  const at = markAt(w, base);
  // Atomics.load of busy, then done, after the refund's snapshot and before its compareExchange.
  return mark === NO_MARK || Atomics.load(w, at + 1) !== 0 || Atomics.load(w, at) >>> 0 !== mark;
}

/**
 * A one-limit engine's refund of a reservation (Gcra32, WideGcra): the mark its reservation kept,
 * while the refund runs, for the checks in their loops (`forgotten`).
 *
 * Thread-safety: one per engine instance (per thread), plain fields.
 */
export class RefundMark {
  #mark = 0;
  #on = false;

  /** A refund with `mark` as its reservation's begins (`end` after it, in a finally). */
  begin(mark: number): void {
    this.#mark = mark;
    this.#on = true;
  }

  /** The refund ended. */
  end(): void {
    this.#on = false;
  }

  /** Whether the running refund (none: false) must give nothing at the slot at `base` (`resetSince`). */
  forgotten(w: Int32Array, base: number): boolean {
    return this.#on && resetSince(w, base, this.#mark);
  }
}

/** A free mark guard. */
const FREE = 0;
/** A token's bit (lockToken's "took over" bit, unused here): a thread waits for the holder to let it go. */
const WAITING = 2;
/** Spins on a held guard before each wait for it to change. */
const SPINS = 64;
/** The longest wait for a held guard to change before looking again (ms). */
const WAIT_MS = 0.05;

/**
 * The guard of a reset mark (its third word), held by the one-limit path's give-backs while they
 * write (see the header): FREE, or a holder's token (slot-lock.ts `lockToken`: odd, never FREE),
 * with WAITING set once another thread waits for it.
 *
 *   const token = guard.take(base);
 *   try { ...the give-back's loads and compareExchanges... } finally { guard.release(base, token); }
 *
 * Thread-safety: one per engine instance (per thread); the guard words are read and written by
 * Atomics only.
 */
export class MarkGuard {
  readonly #w: Int32Array;
  readonly #owner: number;
  readonly #takeOverMs: number;

  /** `owner`: this instance's id (site.newOwner()); `takeOverMs`: the table's reuse age (LockAges.reclaimAfterMs). */
  constructor(w: Int32Array, owner: number, takeOverMs: number) {
    this.#w = w;
    this.#owner = owner;
    this.#takeOverMs = takeOverMs;
  }

  /**
   * Takes the guard of the mark of the slot at `base` and returns its token, for `release`.
   * Waits while another holder has it (short spins, then waits that return when the word
   * changes), and takes it over once its token is the table's reuse age old.
   */
  take(base: number): number {
    const w = this.#w;
    const at = markAt(w, base) + 2;
    // The token this call waits on, first seen at `since` by its own readings: the same token
    // waited on for the take-over age is taken over whatever its stamp says (slot-lock.ts, ageMs).
    let waitedOn = 0;
    let since = 0;
    for (let spins = 0; ; spins++) {
      // Atomics.load of the guard, then a compareExchange from the exact word seen: one holder at
      // a time, and a holder taken over learns it at its release (below).
      const seen = Atomics.load(w, at);
      const now = processNow();
      if ((seen & 1) === 1 && (seen & ~WAITING) !== waitedOn) {
        waitedOn = seen & ~WAITING;
        since = now;
      }
      if ((seen & 1) === 1 && ageMs(seen, now) <= this.#takeOverMs && !(now - since > this.#takeOverMs)) {
        if (spins > SPINS) {
          // compareExchange of the WAITING bit into the holder's word, so that its release wakes
          // us; Atomics.wait returns once the word is no longer that (or after WAIT_MS).
          const marked = seen | WAITING;
          if (marked === seen || Atomics.compareExchange(w, at, seen, marked) === seen) Atomics.wait(w, at, marked, WAIT_MS);
        }
        continue;
      }
      const mine = lockToken(this.#owner, now);
      if (mine !== seen && Atomics.compareExchange(w, at, seen, mine) === seen) return mine;
    }
  }

  /** Lets the guard of the mark of the slot at `base` go, unless another holder took it over. */
  release(base: number, token: number): void {
    const w = this.#w;
    const at = markAt(w, base) + 2;
    // compareExchange from our token (a holder that was taken over leaves the new one's word
    // alone); everything the give-back did comes before this seq-cst write. Only a word a waiter
    // marked needs a notify (Atomics.notify costs about as much as the rest of a release).
    const seen = Atomics.compareExchange(w, at, token, FREE);
    if (seen === (token | WAITING) && Atomics.compareExchange(w, at, seen, FREE) === seen) Atomics.notify(w, at);
  }
}
