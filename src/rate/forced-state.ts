import type { LimitAlgorithm, Moment, Verdict } from '../algorithms/index.js';
import { isStale, raiseStamp } from '../time/stamps.js';
import type { LimitGroup } from './limit-set.js';

/** `forceUnderLock`: every limit forced and committed. */
export const FORCED = 0;
/** `forceUnderLock`: a limit's state cannot hold the penalty or block; nothing was written. */
export const PAST_HORIZON = 1;
/** `forceUnderLock`: the lock was lost (taken over) before or during the writes. */
export const LOCK_LOST = 2;

/**
 * A penalty (`blockMs` < 0: `cost` spent on every limit even past its burst; a negative `cost` is
 * a reward, given back on every limit never below a fresh key's state) or a block
 * (`blockMs` >= 0: every limit raised to refuse until that long after `m`) on the state of `g` at
 * `state`, under the key's lock, for a `Prepare` step of the locked protocol (PolicyLimiter's
 * penalty and block). Every limit is loaded and forced first (LimitAlgorithm.force: nothing is
 * written while one of them cannot hold it), then, while the lock is still ours, the key's
 * seconds stamp is raised (as every commit raises it) and each limit committed by compareExchange
 * from what was loaded: a holder whose lock was taken over cannot write over a newer holder's
 * state. Decisions under the same lock never take a commit back, so none can land over this.
 * Every algorithm has `force` for penalties and rewards; only GCRA's holds a block.
 *
 * `progress.landed` counts the limits whose commit landed, across the tries of one control (the
 * caller sets it to 0 once, before the first): a try that finds the lock lost is run again by the
 * locked protocol, also after its writes landed (a decision of cost 0 spends nothing, so the
 * protocol cannot tell), and forcing those limits again would apply the control twice: a reward
 * given back twice (found by the explorer, locked-controls: three admitted on a log of two).
 * Each try forces and commits only the limits after them. `sinceMs`: a spend's give-back's bound
 * (LimitAlgorithm.force), Infinity for none. `inWindow`: a window's spend give-back, which gives
 * nothing (FORCED, nothing written) when a limit decides a window stored ahead of the reading
 * (another decision's later window, which a reading behind it still finds).
 */
export function forceUnderLock(
  w: Int32Array, state: number, lastSecAt: number, g: LimitGroup, m: Moment, holds: () => boolean, cost: number, blockMs: number, v: Verdict,
  progress: { landed: number }, sinceMs = Infinity, inWindow = false,
): number {
  const n = g.algorithms.length;
  if (progress.landed >= n) return FORCED; // every limit took it in an earlier try
  // Atomics.load of the stamp under the lock: only a holder's commit raises it.
  const lastSec = Atomics.load(w, lastSecAt);
  for (let i = progress.landed; i < n; i++) {
    const a = g.algorithms[i] as LimitAlgorithm;
    a.load(w, state + (g.offsets[i] as number));
    (a.force as NonNullable<LimitAlgorithm['force']>)(m, isStale(m.sec, lastSec, a.staleSec), cost, blockMs, false, v, sinceMs);
    if (!v.allowed) return PAST_HORIZON;
    if (inWindow && a.decidedLater?.() === true) return FORCED; // nothing written: not our window
  }
  if (!holds()) return LOCK_LOST;
  raiseStamp(w, lastSecAt, lastSec, m.sec);
  for (let i = progress.landed; i < n; i++) {
    if (!(g.algorithms[i] as LimitAlgorithm).commit(w, state + (g.offsets[i] as number), m)) return LOCK_LOST;
    progress.landed = i + 1;
  }
  return FORCED;
}
