import { DEAD } from './layout.js';

/**
 * A per-key lock in one int32 word (the slot's `tat` word, for keys whose state spans several
 * words). 0 is free, DEAD means the key was reclaimed, anything else is a holder's token:
 *
 *   token = stamp (20 bits, ms modulo 2^20) << 11 | owner (10 bits) << 1 | 1
 *
 * A holder that died (`worker.terminate()`) cannot release; after `stealAfterMs` others take the
 * lock over. Taking over is safe even from a holder that is only slow: every write made under the
 * lock is a compareExchange from the value read under it, and a release is a compareExchange from
 * the holder's own token, so a holder whose lock was taken learns it and discards its result.
 *
 * Thread-safety: all functions are safe on any thread.
 */

/** The lock is free. */
export const FREE = 0;
/** `lock` gave up because the key was reclaimed (the word is DEAD): look the key up again. */
export const GONE = -1;

const STAMP_MASK = 0xfffff;

/** A token for `owner` (any integer; 10 bits are kept) taken at `nowMs` (real time). */
export function lockToken(owner: number, nowMs: number): number {
  return ((Math.floor(nowMs) & STAMP_MASK) << 11) | ((owner & 0x3ff) << 1) | 1;
}

/** How long ago (ms, modulo 2^20) `token` was taken, at `nowMs`. */
export function ageMs(token: number, nowMs: number): number {
  return ((Math.floor(nowMs) & STAMP_MASK) - (token >>> 11)) & STAMP_MASK;
}

/**
 * Takes the lock at `index`; returns the token now held, or GONE. Spins briefly, then sleeps in
 * short `Atomics.wait`s (which return at once when the word changes).
 */
export function lock(w: Int32Array, index: number, owner: number, stealAfterMs: number): number {
  for (let spins = 0; ; spins++) {
    const cur = Atomics.load(w, index);
    if (cur === DEAD) return GONE;
    const now = performance.now();
    if (cur === FREE || ageMs(cur, now) > stealAfterMs) {
      const token = lockToken(owner, now);
      // compareExchange from the exact word seen: one winner among threads that saw it free or stale.
      if (token !== cur && Atomics.compareExchange(w, index, cur, token) === cur) return token;
      continue;
    }
    if (spins > 64) Atomics.wait(w, index, cur, 0.05);
  }
}

/**
 * Takes the lock only if it is free right now, or held by a token older than `stealAfterMs` (a
 * holder that died, or stalled that long: see `lock`); returns the token or FREE (not taken).
 * Never waits.
 */
export function tryLock(w: Int32Array, index: number, owner: number, stealAfterMs = Infinity): number {
  const now = performance.now();
  const cur = Atomics.load(w, index);
  if (cur === DEAD || (cur !== FREE && !(ageMs(cur, now) > stealAfterMs))) return FREE;
  const token = lockToken(owner, now);
  // compareExchange from the exact word seen: one winner among threads that saw it free or stale.
  return token !== cur && Atomics.compareExchange(w, index, cur, token) === cur ? token : FREE;
}

/**
 * Releases; false if the lock was taken over meanwhile (the caller's result is void). No notify:
 * waiters sleep at most 50 us at a time, and a notify on every release would cost every decision.
 */
export function unlock(w: Int32Array, index: number, token: number): boolean {
  // compareExchange from our token: never frees a lock that someone else now holds.
  return Atomics.compareExchange(w, index, token, FREE) === token;
}
