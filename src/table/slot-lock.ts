import { DEAD, S_CTRL, S_TAT } from './layout.js';
import { RELOCATE } from './slot-index.js';
import { ALREADY_DEAD, NOT_IDLE, RETIRED } from './table.js';
import { processNow } from '../time/clock.js';
import type { ReclaimFloor } from './reclaim-floor.js';

/**
 * A per-key lock in one int32 word (the slot's `tat` word, for keys whose state spans several
 * words), and the one protocol every locked decision and reclaim follows (`underKeyLock`,
 * `retireLocked`). The word is one of:
 *
 *   FREE (0)     nobody holds it
 *   DEAD         the key was reclaimed
 *   token        held:  stamp (20 bits, ms modulo 2^20) << 11 | owner (8 bits) << 3 | guarded << 2 | took over << 1 | 1
 *   released     free, after a takeover:  stamp << 11 | 2
 *
 * (Owners wrap at 256: two tokens are equal only if they were also taken in the same ms modulo
 * 2^20, and a takeover comes at least stealAfterMs after the token it replaces.)
 *
 * A holder that died (`worker.terminate()`) cannot release; after `stealAfterMs` (a guarded
 * token: `reclaimAfterMs`, below) others take the lock over. Taking over is safe even from a holder that is only slow, as long as the slot still
 * holds the key: every write made under the lock is a compareExchange from the value read under
 * it, and a release is a compareExchange from the holder's own token, so a holder whose lock was
 * taken learns it and discards its result.
 *
 * It is not safe against the slot's next key. A stalled holder's compareExchanges land on any
 * words equal to those it read, and a new key's words can equal an old key's (both fresh, at
 * the same instant; or a PolicyLimiter pair of another rule). So a reclaim waits longer than a
 * decision: it takes a lock over only once the token is `reclaimAfterMs` old (the table's
 * reuseAfterMs: its one timing assumption, REUSE_AFTER_TIMEOUTS in table/insert.ts). And a holder
 * that took a lock over (a stalled holder may still be out there) releases it as a `released`
 * word stamped with the release time, which a decision takes like FREE (its token marked "took
 * over" while the mark is young) and a reclaim treats like a token: reclaimed only once it is
 * that old.
 *
 * A guarded token is a writer that writes a key's state over from what it read (`lock`'s
 * `guarded`): a reset or reward under the lock (RateLimiter's locked configurations,
 * PolicyLimiter's pairs, where give-backs are rewards), and a PolicyLimiter decision that shapes its
 * pair (its first decision, a change of rules). Its writes are compareExchanges from the words it
 * read, and on a clock that does not move with real time (a ManualClock, a custom coarse one) a
 * newer holder may write those very values again (a log's stamp over an entry that counts or
 * that a reward cleared; a fresh pair's 0 words at a reading of 0): a write that goes on after a
 * takeover would land on it, an admission cleared (found by attacks: a reset parked mid-clear,
 * its lock taken over after claimTimeoutMs, a penalty: 3 admitted on a log of 2; the same by a
 * pair's reshape). So a decision takes a guarded token over only once it is `reclaimAfterMs` old,
 * as a reclaim does (the table's one timing assumption): a holder that died leaves the key
 * refused that long; one that stalls that long is outside the assumption. A held token that
 * settles an admission (`settle`) leaves a guarded token alone.
 *
 * Ages are ms modulo 2^20 (1,048,576 ms, about 17.5 minutes), read as signed: a difference from
 * 2^20 - AHEAD_MS up is a stamp up to AHEAD_MS (65,536 ms) ahead of the reading, and reads as 0
 * ms old. Stamps come from `processNow()`, one timeline for every thread, but a thread may judge a
 * word with a reading taken before another thread stamped it, and on Bun and Deno each thread's
 * timeline is anchored to the wall clock at its start, so two threads can disagree by a clock
 * step (see `timelineShiftMs`). Read unsigned, a stamp 1 ms ahead was 2^20 - 1 ms old, and a live
 * holder's lock was taken over at once (found by the explorer: a give-back guard 1 s ahead of a
 * penalty's reading, whose take-back then subtracted from the count the penalty filled). Every
 * `stealAfterMs` the package passes is at most 600,000 (10x MAX_CLAIM_TIMEOUT_MS, a rules
 * writer's), and `reclaimAfterMs` is at most 2^19 (or stealAfterMs, if longer), both below
 * 2^20 - AHEAD_MS, so a dead holder's lock is always taken over once it is that old. A word that
 * nobody tries for 2^20 - AHEAD_MS ms reads young again; a decision waiting on it takes it over
 * once it has waited stealAfterMs (guarded: reclaimAfterMs) itself (`lock`), as it would a right
 * stamp, while a reclaim, which never waits, leaves it to a later sweep (at most AHEAD_MS plus its
 * age later than it could have); a stale `released` word marks a takeover that needs no mark.
 *
 * Thread-safety: all functions are safe on any thread.
 */

/** The lock is free. */
export const FREE = 0;
/** `lock` gave up because the key was reclaimed (the word is DEAD): look the key up again. */
export const GONE = -1;

const LOCK_STAMP_MASK = 0xfffff;
const HELD = 1;
/** A token's "took over" bit: its holder took the lock from another holder, or from a young `released` word. */
const TOOK_OVER = 2;
/** A token's "guarded" bit: a decision takes it over only once it is `reclaimAfterMs` old (see above). */
const GUARDED = 4;

/** A token for `owner` (any integer; 8 bits are kept) taken at `nowMs` (real time); `guarded`: see above. */
export function lockToken(owner: number, nowMs: number, tookOver = false, guarded = false): number {
  return ((Math.floor(nowMs) & LOCK_STAMP_MASK) << 11) | ((owner & 0xff) << 3) | (guarded ? GUARDED : 0) | (tookOver ? TOOK_OVER : 0) | HELD;
}

/** How old the held token `cur` must be before a decision takes it over. */
function stealAge(cur: number, ages: LockAges): number {
  return (cur & GUARDED) === 0 ? ages.stealAfterMs : ages.reclaimAfterMs;
}

/** The `released` word: free, but a holder that was taken over may still write until it is old. */
function releasedWord(nowMs: number): number {
  return ((Math.floor(nowMs) & LOCK_STAMP_MASK) << 11) | 2;
}

/** How far ahead of a reading a stamp may be and still read as young (0 ms old): see above. */
export const AHEAD_MS = 2 ** 16;
/** Ages (modulo 2^20) from this up are stamps ahead of the reading. */
const AGE_LIMIT = 2 ** 20 - AHEAD_MS;

/**
 * How long ago (ms, modulo 2^20) `word` (a token or a released word) was stamped, at `nowMs`;
 * 0 for a stamp up to AHEAD_MS ahead of `nowMs`.
 */
export function ageMs(word: number, nowMs: number): number {
  const age = ((Math.floor(nowMs) & LOCK_STAMP_MASK) - (word >>> 11)) & LOCK_STAMP_MASK;
  return age >= AGE_LIMIT ? 0 : age;
}

/** How old a lock word must be before a decision, or a reclaim, takes it over (`lockAges`). */
export interface LockAges {
  /** A held token older than this is taken over by a decision (claimTimeoutMs, or a rules writer's 10x). */
  readonly stealAfterMs: number;
  /** A token or released word older than this is taken over by a reclaim; younger, a released word's mark goes on. */
  readonly reclaimAfterMs: number;
}

/**
 * The ages of locks taken over after `stealAfterMs`, in a table whose reuseAfterMs is
 * `reuseAfterMs`: a reclaim waits that long, capped at 2^19 ms (the stamps hold 2^20), and never
 * less than a decision does.
 */
export function lockAges(stealAfterMs: number, reuseAfterMs: number): LockAges {
  return { stealAfterMs, reclaimAfterMs: Math.max(stealAfterMs, Math.min(reuseAfterMs, 2 ** 19)) };
}

/**
 * The token that would replace `cur` at `now`, or FREE when `cur` cannot be taken. A decision
 * (`forReclaim` false) takes FREE and released words, and held tokens older than `stealAfterMs`
 * (guarded ones: `reclaimAfterMs`); a reclaim takes FREE, and tokens and released words older
 * than `reclaimAfterMs`. The new token is `guarded` when asked.
 */
function successor(cur: number, owner: number, now: number, ages: LockAges, forReclaim: boolean, guarded: boolean): number {
  if (cur === FREE) return lockToken(owner, now, false, guarded);
  if (cur === DEAD) return FREE;
  const age = ageMs(cur, now);
  const guard = ages.reclaimAfterMs;
  if (forReclaim) return age > guard ? lockToken(owner, now) : FREE;
  // A released word is free; its mark goes on with the new token while it is young.
  if ((cur & HELD) === 0) return lockToken(owner, now, !(age > guard), guarded);
  return age > stealAge(cur, ages) ? lockToken(owner, now, true, guarded) : FREE;
}

/**
 * Takes the lock at `index`; returns the token now held, or GONE. Spins briefly, then sleeps in
 * short `Atomics.wait`s (which return at once when the word changes). A held token is taken over
 * once it is `stealAfterMs` old (a guarded one: `reclaimAfterMs`), or once this call has waited
 * that long on the same word by its own readings: a token whose stamp reads ahead of them
 * (young, see `ageMs`) then costs a waiter no more than one whose stamp is right. `guarded`: the
 * token taken is guarded (a writer of the key's state over what it read, see above).
 */
export function lock(w: Int32Array, index: number, owner: number, ages: LockAges, guarded = false): number {
  let waitedOn = FREE; // the held token this call waits on, first seen at `since`
  let since = 0;
  for (let spins = 0; ; spins++) {
    const cur = Atomics.load(w, index);
    if (cur === DEAD) return GONE;
    const now = processNow();
    let token = successor(cur, owner, now, ages, false, guarded);
    if (token === FREE) {
      if (cur !== waitedOn) {
        waitedOn = cur;
        since = now;
      } else if (now - since > stealAge(cur, ages)) token = lockToken(owner, now, true, guarded);
    }
    if (token !== FREE) {
      // compareExchange from the exact word seen: one winner among threads that saw it free or stale.
      if (token !== cur && Atomics.compareExchange(w, index, cur, token) === cur) return token;
      continue;
    }
    if (spins > 64) Atomics.wait(w, index, cur, 0.05);
  }
}

/**
 * Takes the lock for a reclaim, only if it is free right now, or its word is older than
 * `ages.reclaimAfterMs` (see above); returns the token or FREE (not taken). Never waits.
 */
export function tryLock(w: Int32Array, index: number, owner: number, ages: LockAges): number {
  const cur = Atomics.load(w, index);
  // The clock after the load, as in `lock`: a reading taken before it could be older than the
  // token loaded, whose age would then wrap to 2^20 - 1 ms and a fresh lock be taken over.
  const token = successor(cur, owner, processNow(), ages, true, false);
  // compareExchange from the exact word seen: one winner among threads that saw it free or stale.
  return token !== FREE && token !== cur && Atomics.compareExchange(w, index, cur, token) === cur ? token : FREE;
}

/**
 * Releases; false if the lock was taken over meanwhile (the caller's result is void). A token
 * that took over leaves a released word. No notify: waiters sleep at most 50 us at a time, and a
 * notify on every release would cost every decision.
 */
export function unlock(w: Int32Array, index: number, token: number): boolean {
  const next = (token & TOOK_OVER) === 0 ? FREE : releasedWord(processNow());
  // compareExchange from our token: never frees a lock that someone else now holds.
  return Atomics.compareExchange(w, index, token, next) === token;
}

/** `underKeyLock`: the decision finished. */
export const DONE = 0;

/**
 * A decision made under a key's lock, for `underKeyLock`. Allocation-free: the caller keeps one
 * and sets its inputs before each call.
 */
export interface LockedDecision {
  /** Decisions started again (a word changed under one, or its lock was taken over). */
  restarts: number;
  /** Whether the next decision takes the key's lock as a guarded token (a reset, a reward, a reshape: see above). */
  guarded: boolean;
  /**
   * Decides and commits with the key's lock held as `token`. Its reads come first; then, before
   * its first write, it checks that the lock word still holds `token` (a takeover before that
   * point may have been a reclaim, and the slot may hold another key by now); every write is a
   * compareExchange from a value read before that check, so it lands only on the words of our
   * key (or on a new key's words that equal them, which at worst overcharges that key).
   * False when a word changed under it or the lock was lost: nothing of it stands, and it is
   * decided again.
   */
  run(token: number): boolean;
  /** Whether the last `run` wrote to the key's state (an admission, not a refusal or probe). */
  spent: boolean;
  /**
   * The spend of the last `run` went with a reclaim that took the lock over: the slot is
   * DEAD, or already holds another key. Give back what it wrote outside the slot (a global cap);
   * never touch the slot's words (another key's may equal ours). The key is decided again in its
   * new slot.
   */
  lost(): void;
}

/**
 * The one protocol of every decision on a locked key (a sliding log, several limits with a
 * lock, rules, leases): take the key's lock in the slot's tat word, check that the slot still
 * holds the key, decide, and settle. `ctrl` is the slot's ctrl word when the key was found.
 * Returns DONE, or RELOCATE when the slot no longer holds the key.
 *
 * - A refusal (or a probe) stands only if the lock was ours throughout: a decision whose lock
 *   was taken over may have read a newer holder's half-made state.
 * - An admission stands once its writes landed (each a compareExchange from its snapshot), even
 *   if the lock was taken over meanwhile: deciding again would count it twice. Only a reclaim
 *   that took the lock over voids it (see `settle`).
 *
 * Safe at every step if this thread stops there for ever: before the lock nothing is held; with
 * the lock held, others take it over after `stealAfterMs` (a guarded token: `reclaimAfterMs`);
 * every write is a compareExchange from what was read under the lock.
 */
export function underKeyLock(w: Int32Array, base: number, ctrl: number, owner: number, ages: LockAges, d: LockedDecision): number {
  const lockAt = base + S_TAT;
  for (;;) {
    const token = lock(w, lockAt, owner, ages, d.guarded);
    if (token === GONE) return RELOCATE;
    // Atomics.load of ctrl after taking the lock: a reclaim needs this lock, so while we hold it
    // an unchanged ctrl means the slot still holds our key.
    if (Atomics.load(w, base + S_CTRL) !== ctrl) {
      unlock(w, lockAt, token);
      return RELOCATE;
    }
    let ok = d.run(token);
    if (ok && d.spent) {
      if (!settle(w, base, ctrl, token)) {
        d.lost();
        return RELOCATE;
      }
    } else if (ok && Atomics.load(w, lockAt) !== token) {
      // Atomics.load (seq-cst) after every read of the decision: a refusal made while the lock
      // was taken over is decided again.
      ok = false;
    }
    unlock(w, lockAt, token);
    if (ok) return DONE;
    d.restarts++;
  }
}

/**
 * After an admission's writes: true if they stand. Our lock may have been taken over meanwhile
 * (we stalled): by a decision, whose writes then fail or build on ours; or by a reclaim, which
 * may have judged the key idle before our writes, and whose slot an insert may since have given
 * to another key (storing FREE into this word). While ctrl shows the slot still holds our key, a
 * token that is not ours is cancelled (compareExchange to a released word: we were taken over,
 * and the mark keeps a reclaim off for its guard time), so such a reclaim fails; a free or
 * released word means the newer holder finished, and a guarded one is a reset, reward or reshape,
 * never a reclaim, which is left to finish. DEAD, or a changed ctrl, means a reclaim
 * already succeeded.
 */
function settle(w: Int32Array, base: number, ctrl: number, token: number): boolean {
  const lockAt = base + S_TAT;
  for (;;) {
    // Atomics.load after our writes (seq-cst): a reclaim that locks after this sees them.
    const cur = Atomics.load(w, lockAt);
    if (cur === token) return true;
    if (cur === DEAD) return false;
    // Atomics.load of ctrl after seeing the lock lost: changed, the key left the slot (a
    // reclaim finished; the slot may hold another key, the word being that key's).
    if (Atomics.load(w, base + S_CTRL) !== ctrl) return false;
    if ((cur & HELD) === 0) return true; // free or released: the newer holder finished
    // Guarded: a reset, reward or reshape took over (a reclaim never holds a guarded token), and its
    // writes, from what it read, fail where ours landed since; releasing it would let a decision
    // run beside its clearing (see above).
    if ((cur & GUARDED) !== 0) return true;
    // compareExchange from the exact word seen: a newer holder's lock is released (its own
    // writes are still checked against their snapshots), a reclaim's final step fails.
    const released = releasedWord(processNow());
    if (Atomics.compareExchange(w, lockAt, cur, released) !== cur) continue;
    // Atomics.load of ctrl again, now that the word is ours: a token repeats (an owner and a time
    // modulo 2^20 ms). Stopped between the ctrl load above and the compareExchange while that
    // reclaim completed, the key came back into the slot and the same reclaimer locked the next
    // incarnation at the same millisecond, we released its lock and our writes went with the
    // reclaimed key (found by a review, as in LockFreeEngine#settle). Give the word back; decide
    // again on the key's new slot. The next incarnation's lock word is written after its claim of
    // ctrl, so a compareExchange that read it makes the new ctrl visible to this load.
    if (Atomics.load(w, base + S_CTRL) === ctrl) return true;
    Atomics.compareExchange(w, lockAt, released, cur);
    return false;
  }
}

/**
 * The reclaim hook of a locked slot (`SlotState.retire`): try the key's lock (only if free, or
 * its word older than `ages.reclaimAfterMs`: a holder that died, or a takeover long
 * past), judge the key idle under it, and turn our own token into DEAD, so no decision can run
 * between the check and the reclaim. RETIRED, ALREADY_DEAD or NOT_IDLE. `idle` raises `floor` to
 * the reading it judged the key idle at (reclaim-floor.ts), if it took one.
 */
export function retireLocked(
  w: Int32Array, base: number, owner: number, ages: LockAges, idle: (w: Int32Array, base: number, floor: ReclaimFloor) => boolean, floor: ReclaimFloor,
): number {
  const lockAt = base + S_TAT;
  // Atomics.load: a DEAD lock word is a reclaim past its linearisation point; the table ends it.
  if (Atomics.load(w, lockAt) === DEAD) return ALREADY_DEAD;
  const token = tryLock(w, lockAt, owner, ages);
  // Atomics.load after a failed try: a reclaim that wrote DEAD since the check above (and may
  // have stopped there) is finished by the table now rather than left for a later sweep.
  if (token === FREE) return Atomics.load(w, lockAt) === DEAD ? ALREADY_DEAD : NOT_IDLE;
  // compareExchange from our own token to DEAD: the linearisation point of the reclaim.
  if (idle(w, base, floor) && Atomics.compareExchange(w, lockAt, token, DEAD) === token) return RETIRED;
  unlock(w, lockAt, token);
  return NOT_IDLE;
}
