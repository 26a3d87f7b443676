import type { LimitAlgorithm, Moment } from '../algorithms/index.js';
import { isStale, unitsAhead } from '../time/stamps.js';
import type { LimitGroup } from './limit-set.js';
import { DEAD, S_CTRL, S_LAST_SEC, S_TAT } from '../table/layout.js';
import { ALREADY_DEAD, NOT_IDLE, RETIRED, type SlotState } from '../table/table.js';
import { ageMs, lockToken, type LockAges } from '../table/slot-lock.js';
import { holderAgeMs, isHolderToken } from './give-back-guard.js';
import { processNow } from '../time/clock.js';

// The reclaim side of the lock-free engine (lockfree-engine.ts): the guard word a decision
// settles against after its commits, and the table hooks that insert and reclaim its keys.

/**
 * The table hooks for lock-free multi-word slots: a fresh state on insert; a reclaim writes its
 * token into the guard word, checks that every limit is idle, then turns the token into DEAD
 * (the linearisation point). A token older than `ages.stealAfterMs` belongs to a reclaimer that
 * stopped: another reclaimer replaces it. A give-back's or an undo's holder token
 * (give-back-guard.ts) is live until `ages.reclaimAfterMs` old. `epochOffset`: where the key's
 * give-back epoch word is, from the state's start (-1: none).
 */
export function lockFreeSlotState(
  key: LimitGroup, stateOffset: number, owner: number, ages: LockAges, now: () => Moment, epochOffset: number, raiseTo: (ms: number) => void,
): SlotState {
  const stealAfterMs = ages.stealAfterMs;
  return {
    initSlot(w, base, generation) {
      const m = now();
      for (let i = 0; i < key.algorithms.length; i++) (key.algorithms[i] as LimitAlgorithm).init(w, base + stateOffset + (key.offsets[i] as number), m);
      if (epochOffset >= 0) Atomics.store(w, base + stateOffset + epochOffset, 0);
      // Stores while the slot is BUSY: the publishing compareExchange on ctrl orders them first.
      Atomics.store(w, base + S_LAST_SEC, m.sec);
      Atomics.store(w, base + S_TAT, freeGuard(generation << 2));
    },
    isDead(w, base) {
      return Atomics.load(w, base + S_TAT) === DEAD; // the guard word holds the reclaim marker
    },
    raiseTo,
    retire(w, base, floor) {
      const cur = Atomics.load(w, base + S_TAT);
      if (cur === DEAD) return ALREADY_DEAD;
      // The free value of the incarnation the table judged (its ctrl is LIVE).
      const free = freeGuard(Atomics.load(w, base + S_CTRL));
      // Ours to take: the free value, a stopped reclaimer's token, or a stray even value a late
      // inserter wrote (see #settle).
      const nowMs = processNow();
      // A give-back or an undo holds the guard (live until the reuse age): it is writing the state.
      if (isHolderToken(cur)) {
        if (holderAgeMs(cur, nowMs) <= ages.reclaimAfterMs) return NOT_IDLE;
      } else if ((cur & 1) === 1 && ageMs(cur, nowMs) <= stealAfterMs) return NOT_IDLE; // a live reclaimer's token
      const token = lockToken(owner, nowMs);
      // compareExchange from the exact word seen (free, or a stopped reclaimer's token): our
      // token goes in before we read any state, so a decision committing after our reads sees it.
      if (token === cur || Atomics.compareExchange(w, base + S_TAT, cur, token) !== cur) return NOT_IDLE;
      // A holder taken over (a give-back or an undo that died, or stalled past the reuse age) may
      // have written and not moved the key's epoch on: moved now, at once, while the guard is
      // ours (Atomics.add), so that a give-back bound to the epoch (a spend's mark) finds it moved
      // even after we give the guard back as free (found by an attack: a reset that died after
      // its fresh writes, then a sweep, and the spend's give-back took from the fresh state).
      if (epochOffset >= 0 && isHolderToken(cur)) Atomics.add(w, base + stateOffset + epochOffset, 1);
      // lastSec, then the clock: a stamp never later than the reading (else the idle time,
      // taken modulo 2^32, would read as stale). States raised since are cancelled by #settle.
      const lastSec = Atomics.load(w, base + S_LAST_SEC);
      const m = now();
      // A stamp ahead of the reading: the clock stepped back behind the key's latest admission,
      // which a decision would raise its reading to (see Clock): not idle.
      let idle = unitsAhead(m.sec, lastSec) === 0;
      for (let i = 0; i < key.algorithms.length && idle; i++) {
        const a = key.algorithms[i] as LimitAlgorithm;
        idle = a.idle(w, base + stateOffset + (key.offsets[i] as number), m, isStale(m.sec, lastSec, a.staleSec));
      }
      // compareExchange from our token: fails if a decision cancelled it (it committed after our
      // reads began) or another reclaimer replaced it.
      if (idle) {
        floor.raise(m.ms); // before the reclaim: its key comes back fresh at no earlier reading
        return Atomics.compareExchange(w, base + S_TAT, token, DEAD) === token ? RETIRED : NOT_IDLE;
      }
      Atomics.compareExchange(w, base + S_TAT, token, free); // give the guard back, unless cancelled
      return NOT_IDLE;
    },
  };
}

/**
 * The guard word of a slot whose key is not being reclaimed: twice the generation in its ctrl
 * word (even, 0 to 2^31 - 2: never a token, which is odd, nor DEAD, which is negative).
 */
export function freeGuard(ctrl: number): number {
  return (ctrl >>> 2) * 2;
}
