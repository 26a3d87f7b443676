import type { Moment } from '../algorithms/index.js';
import { carryDebt } from '../algorithms/gcra-64.js';
import { swap } from '../algorithms/types.js';
import { ALL as ALL_WRITTEN, type FreshState } from '../rate/fresh-state.js';
import type { CompiledRule } from './rules.js';

/**
 * The shape of a PolicyLimiter pair's state: which rule wrote it, under which rules version, and
 * how a pair moves to the rule it matches now (the second half of PolicyLimiter's prepare step,
 * under the pair's lock). The state words of a pair:
 *
 * ```
 * | shape | the rule's limits' states ... (maxStateWords - 1 words) | rules version |
 * ```
 *
 * Thread-safety: pure functions over shared words, called by the pair's lock holder.
 */

/** A slot whose state no rule has written yet. */
export const NO_SHAPE = 0;

/** Whether rules version `a` is newer than `b` (versions count up modulo 2^32). */
export function newer(a: number, b: number): boolean {
  return ((a - b) | 0) > 0;
}

/**
 * Writes the pair's state at `at` (its shape word; the version word at `versionAt`) for `rule`
 * under rules `version`, from the shape and version the caller loaded (`stored`,
 * `storedVersion`). The same state under the same or newer rules only records the newer version;
 * a GCRA state moving to a GCRA rule carries its debt over: limit i keeps its debt, in the new
 * rule's ticks, for every i both rules have; a limit the old rule lacked starts fresh, and one
 * the new rule lacks is dropped (found: a rule that gained a limit started the pair fresh, and an
 * hour's block on it was gone at once, 4 admitted at one instant at 2 a second, burst 2). Any
 * other move starts the pair fresh (`fresh`); `resetting` starts it fresh always.
 *
 * Every read comes first, then `holds()` (the lock is still ours: what was read is this pair's,
 * not a reclaimed slot's next key's), then every write, each a compareExchange from the value
 * read, the shape word last: a holder whose lock was taken over (a guarded lock, past the table's
 * reuse age: see `writesState`) fails once another holder has changed the state, and returns
 * false (the engine decides again).
 */
export function shapePair(
  w: Int32Array, at: number, versionAt: number, stored: number, storedVersion: number,
  rule: CompiledRule, version: number, resetting: boolean, fresh: FreshState, m: Moment, holds: () => boolean,
): boolean {
  if (!writesState(w, at, stored, rule, resetting)) {
    // The same state under the same or newer rules: record the newer version, so that threads
    // still holding older rules catch up before they decide.
    return storedVersion === version || (holds() && swap(w, versionAt, storedVersion, version));
  }
  const g = rule.limits;
  const oldCount = gcraCount(stored);
  // GCRA to GCRA: the limits both rules have keep their debts (each a 64-bit state of four words
  // at the same offset in both: rules.ts shapeOf), in the new rule's ticks; the others start fresh.
  const tickPs = rule.tickPs;
  const carried = !resetting && oldCount !== null && tickPs !== null ? Math.min(oldCount, tickPs.length) : 0;
  const before = fresh.before;
  // Atomics.load of every word the writes below expect (the new rule's words), then of the lock
  // word: still ours, so these were this pair's words.
  for (let i = 0; i < g.words; i++) before[i] = Atomics.load(w, at + 1 + i);
  if (!holds()) return false;
  if (carried > 0) {
    for (let i = 0; i < carried; i++) {
      const off = g.offsets[i] as number;
      if (!carryDebt(w, at + 1 + off, before, off, m.ms, (tickPs as readonly number[])[i] as number)) return false;
    }
    if (carried < g.algorithms.length) {
      // The limits the old rule lacked: fresh, each from what was read (a failure: decide again,
      // and carry again from what is there then, which a carry already made leaves as it is).
      fresh.prepare(at + 1, g, m);
      for (let i = carried; i < g.algorithms.length; i++) if (fresh.writeLimit(w, at + 1, g, i) !== ALL_WRITTEN) return false;
    }
  } else if (!fresh.write(w, at + 1, g, m, resetting && stored === rule.shape)) {
    // A reset of the pair's own shape writes each limit once over its tries (PolicyLimiter.reset
    // sets `landed` to 0 before the first), and a log its own way (FreshState); a move to another
    // rule writes every limit on every try.
    return false;
  }
  // The version, then the shape word last, each from the value read above: a holder whose lock
  // was taken over fails here once another holder has moved the pair on.
  return swap(w, versionAt, storedVersion, version) && swap(w, at, stored, rule.shape);
}

/**
 * Whether `shapePair` writes the pair's state (a reset, another shape, or GCRA state in other
 * ticks), not only its version. Such writes are compareExchanges from the words read, and on a
 * clock that stands still a newer holder can write those very values again (a log's stamp over an
 * entry it cleared, a window's count back to the same): so they are made under a guarded token
 * (table/slot-lock.ts), which a decision takes over only past the table's reuse age.
 */
export function writesState(w: Int32Array, at: number, stored: number, rule: CompiledRule, resetting: boolean): boolean {
  return resetting || stored !== rule.shape || !ticksMatch(w, at, rule);
}

/**
 * Whether the pair's GCRA state at `at` (its shape word, then the limits) was written in the
 * rule's ticks: each 64-bit GCRA state records its tick index in its fourth word. True for
 * other algorithms (their shape says it all).
 */
export function ticksMatch(w: Int32Array, at: number, rule: CompiledRule): boolean {
  if (rule.tickPs === null) return true;
  for (let i = 0; i < rule.tickPs.length; i++) {
    // Atomics.load under the pair's lock (or its reclaim's try-lock): the word is written only there.
    if (Atomics.load(w, at + 1 + (rule.limits.offsets[i] as number) + 3) !== rule.tickIndex[i]) return false;
  }
  return true;
}

/** The number of limits of a GCRA shape (see rules.ts `shapeOf`), or null for other shapes. */
function gcraCount(shape: number): number | null {
  return (shape & (1 << 30)) === 0 ? null : (shape >>> 24) & 15;
}
