import { DEAD, S_CTRL, S_TAT } from '../table/layout.js';
import { ageMs, lockToken } from '../table/slot-lock.js';
import { processNow } from '../time/clock.js';

// Give-backs (reward, reset, unblock, a reservation's refund) on a key of the lock-free engine
// (several limits, one under a global cap, the windows), and the undo they must not meet.
//
// A decision commits its key limits one at a time and takes the first ones back when a later one
// now refuses (LimitSet.undo: a compareExchange from the word it wrote, or a subtraction). Spends
// only ever add, so nothing can bring a limit back to the word a decision wrote but that decision.
// A give-back breaks this: a reward between decision D's commit of a limit and D's undo can give
// D's spend back (never below fresh: all of it on a fresh key), a decision E can then write the
// very word D wrote, and D's undo takes E's spend away: E admitted on a state that reads fresh.
//
// So a give-back and an undo never run at once, and an undo runs only if no give-back ended since
// its decision began committing:
// - Both hold the key's guard word (the slot's `tat` word) while they write: a holder token, a
//   lock token negated (odd and negative: never a free value, a reclaimer's token or DEAD).
//   Decisions do not cancel it (LockFreeEngine.#settle); a reclaim treats it as a live token.
// - Each give-back (a reset too) adds 1 to the key's epoch word (after the key limits' words)
//   before it lets the guard go. So does whoever takes the guard over from a holder that died or
//   stalled (a give-back's `hold`, a reclaim's `retire`), at once: that holder may have written
//   and not moved the epoch on.
// - A decision reads the epoch before its first commit; its undo takes the guard and loads the
//   epoch again: changed, a give-back may have taken the spends, and the undo keeps them (the key
//   is charged for a request it did not admit: conservative).
// - An undo never waits: a guard another holder has means a give-back may be running, and the
//   undo keeps its spends. A give-back waits for an undo (it holds the guard for a few
//   compareExchanges), and takes a holder's guard over once it is the table's reuse age old (a
//   holder that died, or stalled past the table's one timing assumption).

/** `hold` could not take the guard: the slot no longer holds the key (DEAD, or another ctrl). */
export const GONE = 0;
/** `hold` (for an undo) found another holder's token: it does not wait. */
export const BUSY = 1;

/** Whether a guard word is a holder's token (negative and odd: DEAD is even). */
export function isHolderToken(word: number): boolean {
  return word < 0 && (word & 1) === 1;
}

/** How long ago (ms, modulo 2^20) a holder's token was taken, at `nowMs`. */
export function holderAgeMs(word: number, nowMs: number): number {
  return ageMs(-word, nowMs);
}

/**
 * Takes the guard of the key at `base` (whose LIVE ctrl word is `ctrl`) for a give-back (`wait`)
 * or an undo: returns the holder token now in it, or GONE, or for an undo BUSY while another
 * holder has it. A reclaimer's token, the free value and a stray even value are taken at once (a
 * reclaim whose token is replaced cannot finish); only the free value names the incarnation, so
 * ctrl is loaded again once the guard is ours. A give-back waits for another holder's token
 * (short spins, then `Atomics.wait`s that return when the word changes) until it is `takeOverMs`
 * old, then takes it over and adds 1 to the epoch word at `epochAt` (the holder it replaced may
 * have written and not moved it on); an undo never does.
 */
export function hold(w: Int32Array, base: number, ctrl: number, owner: number, takeOverMs: number, wait: boolean, epochAt = -1): number {
  // The holder token this call waits on, first seen at `since` by its own readings: the same token
  // waited on for takeOverMs is taken over whatever its stamp says (one ahead of our readings
  // reads as young: slot-lock.ts, ageMs).
  let waitedOn = 0;
  let since = 0;
  for (let spins = 0; ; spins++) {
    // Atomics.load of the guard, then of ctrl: a guard written by a later incarnation (its
    // insert's stores follow its claim of ctrl) makes that claim visible to the ctrl load.
    const guard = Atomics.load(w, base + S_TAT);
    if (guard === DEAD || Atomics.load(w, base + S_CTRL) !== ctrl) return GONE;
    const now = processNow();
    if (isHolderToken(guard)) {
      if (!wait) return BUSY;
      if (guard !== waitedOn) {
        waitedOn = guard;
        since = now;
      }
      if (holderAgeMs(guard, now) <= takeOverMs && !(now - since > takeOverMs)) {
        if (spins > 64) Atomics.wait(w, base + S_TAT, guard, 0.05);
        continue;
      }
    }
    const token = -lockToken(owner, now);
    // compareExchange from the exact word seen: one holder at a time; a reclaimer's own final
    // compareExchange from its token then fails.
    if (token === guard || Atomics.compareExchange(w, base + S_TAT, guard, token) !== guard) continue;
    // Atomics.load of ctrl again, now that the guard holds our token. A reclaimer's token or a
    // stray even value repeats (a token is an owner and a time modulo 2^20 ms): a thread stopped
    // between its loads and its compareExchange while the key was reclaimed and its slot reused
    // took the next key's guard (found by an attack: an undo took the new key's spend away). Give
    // that word back and look the key up again.
    if (Atomics.load(w, base + S_CTRL) === ctrl) {
      // Atomics.add of the epoch while the guard is ours, for a holder taken over: a give-back
      // bound to the epoch (a spend's mark) and an undo, which read it before, find it moved.
      if (epochAt >= 0 && isHolderToken(guard)) Atomics.add(w, epochAt, 1);
      return token;
    }
    Atomics.compareExchange(w, base + S_TAT, token, guard);
    return GONE;
  }
}

/**
 * Lets the guard go: `free`, the free value of the key's incarnation (freeGuard), unless another
 * holder took it over. Wakes give-backs waiting in `hold`.
 */
export function release(w: Int32Array, base: number, free: number, token: number): void {
  // compareExchange from our token: a holder that was taken over leaves the new one's word alone.
  if (Atomics.compareExchange(w, base + S_TAT, token, free) === token) Atomics.notify(w, base + S_TAT);
}

/**
 * Runs `write` (a give-back on the key at `base`, whose LIVE ctrl word is `ctrl`) holding the
 * key's guard, waiting for another holder as `hold` does, then adds 1 to the epoch word at
 * `epochAt` and lets the guard go (`free`: the incarnation's free value). Returns what `write`
 * returned, or `gone` when the slot no longer holds the key.
 */
export function givingBack<T>(
  w: Int32Array, base: number, ctrl: number, free: number, epochAt: number, owner: number, takeOverMs: number, gone: T, write: () => T,
): T {
  const token = hold(w, base, ctrl, owner, takeOverMs, true, epochAt);
  if (token === GONE) return gone;
  try {
    return write();
  } finally {
    // Atomics.add of the epoch while we hold the guard, before letting it go: an undo takes the
    // guard after us (its compareExchange reads our release, or a later word) and then loads it.
    Atomics.add(w, epochAt, 1);
    release(w, base, free, token);
  }
}
