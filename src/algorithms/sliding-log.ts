import { ticksAt, ticksCeilAt, ticksToMs } from '../time/ticks.js';
import type { Limit } from '../config/limit.js';
import { FRESH_ALL, FRESH_NONE, swap, type LimitAlgorithm, type Verdict } from './types.js';
import { windowLimit } from './window-limit.js';

/** An unused log entry. A timestamp that would equal it is stored one tick later. */
const NO_ENTRY = -0x80000000;

/**
 * Sliding log: exact. Keeps the times of the last `permits` admissions in a ring of int32 words
 * (ticks modulo 2^32) after a head word, so state grows with `permits`: 4 bytes per permit per
 * key, bounded by the `maxLogSize` option. The ring runs from the oldest entry (at head) to the
 * newest, in time order (a stamp is never earlier than the newest before it), so a decision
 * binary-searches it: O(log permits) to check, O(cost) to spend. Promise: never more than
 * `permits` in any `periodMs`.
 */
export function slidingLogAlgorithm(limit: Limit, name: string, maxLogSize: number): LimitAlgorithm {
  const { permits, periodMs } = windowLimit(limit, name, maxLogSize, 'the maxLogSize option: a log holds one entry per permit');
  // Ticks sized for the period: the finest power of ten (10 ns and up) with the period in 2^29
  // ticks, rounded up (an entry then counts a little longer, never shorter).
  let tickPs = 1e4;
  while (Math.ceil((periodMs * 1e9) / tickPs) > 2 ** 29) tickPs *= 10;
  const p = { tickPs };
  const periodTicks = Math.ceil((periodMs * 1e9) / tickPs - 1e-9);
  // Stamps are ticks modulo 2^32, exact while under 2^31 ticks old (at least 4 periods). A key
  // whose last admission is older than the period and two ticks has an empty log; the rule must
  // fit the seconds word (modulo 2^32 s, 136 years), which bounds the period.
  const staleSec = Math.ceil(periodMs / 1000 + (2 * tickPs) / 1e12) + 2;
  if (staleSec >= 2 ** 32 - 8) {
    throw new RangeError(`${name}.periodMs of a sliding-log limit must be at most about 136 years, got ${periodMs}`);
  }

  // The snapshot: the words, the head word (commit count << 16 | index of the oldest entry), and
  // the entries a commit overwrites, as the check read them (all of them for a stale log).
  let words: Int32Array = new Int32Array(0);
  let base = 0;
  let head = 0;
  let stale = false;
  let spend = 0;
  let stamp = 0;
  // A reward's: how many of the newest entries its commit clears (0: a spend's commit).
  let clear = 0;
  const seen = new Int32Array(permits);

  /** Word index of the k-th oldest entry of the snapshot (k = 0: the oldest, at head). */
  const entry = (k: number): number => base + 1 + (((head & 0xffff) + k) % permits);

  /** Age in ticks of a stamp that still counts, or -1. */
  function age(ts: number, now32: number): number {
    if (ts === NO_ENTRY) return -1;
    const d = (now32 - ts) | 0;
    return d < periodTicks ? Math.max(d, 0) : -1;
  }

  /**
   * How many of the oldest entries no longer count (they are the first ones, in time order). A
   * writer's entries that never committed (or were taken back) can sit at the front, newer than
   * the rest: the search may then count some of them as free or not, which is safe for those
   * entries alone, as none of them holds an admission.
   */
  function expired(now32: number): number {
    if (stale) return permits;
    let lo = 0;
    let hi = permits;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (age(Atomics.load(words, entry(mid)), now32) < 0) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  return {
    stateWords: permits + 1,
    staleSec,
    lockFree: false,
    init(w, at) {
      Atomics.store(w, at, 0);
      for (let i = 1; i <= permits; i++) Atomics.store(w, at + i, NO_ENTRY);
    },
    /**
     * A reset under the key's lock (fresh-state.ts): the head word first, its commit count moved
     * on and its index kept, then every entry cleared in time order, oldest first, each from the
     * value read. Found (kill storm, test/algorithms/sliding-log-reset-takeover.test.ts): a head
     * written back to the ring's first word, entries cleared in the order of the words, left the
     * ring out of time order; a decision that took the lock over counted stamped entries as free,
     * and the reset, failing on the word it had changed, ran again and cleared its admissions:
     * reset twice. A reset holds a guarded lock (table/slot-lock.ts), so within the table's
     * timing assumption no decision runs beside these writes: a newer holder could write a stamp
     * equal to one read here (a penalty over an entry that counts), and the clearing would land
     * on it. One that takes the lock over past the reuse age (its holder died here) finds a log in
     * time order whose oldest entries expired, as a clock's move would leave it. Never fails once
     * the head landed: an entry that changed since it was read is a newer holder's, and stays.
     * Each entry is cleared only while the head is still ours, as a reward's (`commit`): a newer
     * holder that committed since wrote its stamps over entries we read, maybe equal to them; the
     * entries not yet cleared then stay stamped (counted: conservative). A clearing whose thread
     * stalls between that check and its compareExchange can still land on one, out of the ring's
     * time order: only past the reuse age, outside the timing assumption (docs/design.md).
     */
    writeFresh(w, at, before, from) {
      const read = before[from] as number;
      const index = (read & 0xffff) % permits; // as entry() reads it
      const fresh = (((read >>> 16) + 1) & 0xffff) << 16 | index;
      if (!swap(w, at, read, fresh)) return FRESH_NONE;
      // Atomics.load (seq-cst) before each clearing: every commit moves the head's commit count.
      for (let k = 0; k < permits && Atomics.load(w, at) === fresh; k++) {
        const i = (index + k) % permits;
        const v = before[from + 1 + i] as number;
        if (v !== NO_ENTRY) swap(w, at + 1 + i, v, NO_ENTRY);
      }
      return FRESH_ALL;
    },
    load(w, at) {
      words = w;
      base = at;
      head = Atomics.load(w, at);
    },
    check(m, isStale, cost, v: Verdict) {
      stale = isStale;
      spend = 0;
      clear = 0;
      const now32 = ticksAt(m.ms, p);
      const free = expired(now32);
      const newest = free === permits ? -1 : age(Atomics.load(words, entry(permits - 1)), now32);
      v.allowed = cost <= free;
      v.remaining = v.allowed ? free - cost : free;
      if (v.allowed) {
        v.waitMs = 0;
        v.resetMs = cost > 0 ? ticksToMs(periodTicks, p) : newest < 0 ? 0 : ticksToMs(periodTicks - newest, p);
        if (cost === 0) return;
        prepareSpend(cost, m.ms);
        return;
      }
      // The cost-th oldest entry must expire first.
      v.waitMs = cost > permits ? Infinity : ticksToMs(periodTicks - age(Atomics.load(words, entry(cost - 1)), now32), p);
      v.resetMs = newest < 0 ? 0 : ticksToMs(periodTicks - newest, p);
    },
    /**
     * Under the key's lock (LockedControls): a penalty (`cost` > 0) spends min(cost, permits)
     * entries now whether or not they are free (a log holds at most `permits`, so a penalty
     * refuses for at most a period from now); a reward (`cost` < 0) clears the newest entries
     * (never below an empty log). No block (`blockMs` >= 0: `v.allowed` false, nothing to commit).
     */
    force(m, isStale, cost, blockMs, _clamp, v: Verdict) {
      stale = isStale;
      spend = 0;
      clear = 0;
      const now32 = ticksAt(m.ms, p);
      const free = expired(now32);
      v.waitMs = 0;
      v.latestMs = Infinity;
      v.allowed = blockMs < 0;
      if (!v.allowed || cost === 0) {
        v.remaining = free;
        v.resetMs = free === permits ? 0 : ticksToMs(periodTicks - age(Atomics.load(words, entry(permits - 1)), now32), p);
        return;
      }
      if (cost > 0) {
        // As an admission of that many (check, above), past the free entries too.
        prepareSpend(Math.min(cost, permits), m.ms);
        v.remaining = Math.max(0, free - spend);
        v.resetMs = ticksToMs(periodTicks, p);
        return;
      }
      // A reward: the newest entries that still count, at most -cost of them, go; the head moves
      // back over them, so the ring stays in time order (cleared entries first, as expired ones).
      clear = Math.min(-cost, permits - free);
      for (let k = 0; k < clear; k++) seen[k] = Atomics.load(words, entry(permits - clear + k));
      v.remaining = free + clear;
      const newest = free + clear === permits ? -1 : age(Atomics.load(words, entry(permits - clear - 1)), now32);
      v.resetMs = newest < 0 ? 0 : ticksToMs(periodTicks - newest, p);
    },
    commit(w, at) {
      if (clear > 0) {
        // A reward (force): the head word first, back over the newest `clear` entries (its commit
        // count moves on, as on every commit), then those entries cleared, each from the value
        // read. A writer stopped between the two leaves them at the front with their stamps,
        // newer than the entries after them, as an undo does: counted or not by the search, never
        // hiding an entry after them (conservative). Cleared first, they would sit expired behind
        // entries that count, and the search, which takes the expired ones to come first, could
        // skip counted entries. The head landed: the reward took place (true), whatever the
        // clearing finds. Each entry is cleared only while the head is still ours (Atomics.load,
        // seq-cst: every commit moves the head's commit count): a holder that took our lock over
        // after a stall and committed has written over these entries, with a stamp that may
        // equal the one we read (a clock that did not move); they are its admissions then. A
        // stall between that load and the compareExchange could still clear one, so a reward
        // holds a guarded lock (table/slot-lock.ts), which a decision takes over only past the
        // table's reuse age (30 s at least): outside the one timing assumption (docs/guarantees.md;
        // found by attacks, staged with a frozen clock: test/algorithms/sliding-log-reset-takeover.test.ts).
        const moved = (((head >>> 16) + 1) & 0xffff) << 16 | (((head & 0xffff) + permits - clear) % permits);
        if (!swap(w, at, head, moved)) return false;
        for (let k = 0; k < clear && Atomics.load(w, at) === moved; k++) swap(w, entry(permits - clear + k), seen[k] as number, NO_ENTRY);
        return true;
      }
      // Every entry from the value the check read, then the head word last: the commit point. Its
      // commit count changes on every commit, so a writer whose snapshot is older fails there even
      // when the index came back round. An entry written by a writer that then fails is newer than
      // what it replaced (stamps never go back), so it can only make the log more conservative.
      if (stale) {
        for (let k = 0; k < permits; k++) if (!swap(w, entry(k), seen[k] as number, NO_ENTRY)) return false;
        for (let k = 0; k < spend; k++) seen[k] = NO_ENTRY;
      }
      for (let k = 0; k < spend; k++) if (!swap(w, entry(k), seen[k] as number, stamp)) return false;
      return swap(w, at, head, nextHead());
    },
    undo(w, at) {
      // The head goes back; the entries keep our stamps. Restoring them after the head moved
      // back could erase an equal stamp another committer wrote meanwhile. Left there, they sit
      // at the front, newer than the entries after them: the search may count them (refusing
      // a little more) or a later spend overwrites them, both safe.
      return swap(w, at, nextHead(), head);
    },
    idle(w, at, m, isStale) {
      this.load(w, at);
      stale = isStale;
      return expired(ticksAt(m.ms, p)) === permits;
    },
  };

  /**
   * What a commit of `n` entries at reading `ms` writes (`spend`, `stamp`) and overwrites, as read
   * now (`seen`): every entry of a stale log (it is cleared: old stamps must not alias as recent
   * ones later), else the `n` oldest.
   */
  function prepareSpend(n: number, ms: number): void {
    spend = n;
    const read = stale ? permits : n;
    for (let k = 0; k < read; k++) seen[k] = Atomics.load(words, entry(k));
    const last = Atomics.load(words, entry(permits - 1));
    const now = ticksCeilAt(ms, p); // a new stamp rounds up: it expires no earlier than it should
    // Never earlier than the newest entry: keeps the ring in time order (a later stamp only
    // makes that entry count a little longer).
    stamp = !stale && last !== NO_ENTRY && ((last - now) | 0) > 0 ? last : now;
    if (stamp === NO_ENTRY) stamp = (stamp + 1) | 0;
  }

  /** The head word after committing `spend` entries. */
  function nextHead(): number {
    return (((head >>> 16) + 1) & 0xffff) << 16 | (((head & 0xffff) + spend) % permits);
  }
}
