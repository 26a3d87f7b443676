import type { LimitAlgorithm, Moment } from '../algorithms/index.js';
import { isStale, raiseToStamp, secondsAt, unitsAhead } from '../time/stamps.js';
import { LimitSet, type LimitGroup, type LockedResult, type StateArea } from './limit-set.js';
import { lock, retireLocked, underKeyLock, unlock, type LockAges, type LockedDecision } from '../table/slot-lock.js';
import { DEAD, S_LAST_SEC, S_TAT } from '../table/layout.js';
import type { SlotState } from '../table/table.js';
import type { ReclaimFloor } from '../table/reclaim-floor.js';

export { group, type LimitGroup, type LockedResult, type StateArea } from './limit-set.js';

export { DONE } from '../table/slot-lock.js';

/**
 * Runs under the key's lock before a decision and may rewrite the key's state (PolicyLimiter's
 * rule change). Like every locked writer it reads first, then checks `holds()` (the lock is
 * still ours) before its first write, and writes by compareExchange from what it read; false if
 * a word changed or the lock was lost (the decision starts again).
 */
export type Prepare = (w: Int32Array, m: Moment, holds: () => boolean) => boolean;

/**
 * Decisions for keys whose state spans several words (several limits, window and log
 * algorithms, a global cap): take the key's lock, read its state once, let every algorithm
 * decide, spend from all of them or none, release. Different keys have different locks, so they
 * never wait on each other; the global cap, when set, is locked inside the key's lock (always in
 * that order, so no two threads can wait on each other in a cycle).
 *
 * Thread-safety: one instance per thread (it keeps scratch verdicts); any number of threads.
 */
export class LockedEngine implements LockedDecision {
  readonly #w: Int32Array;
  readonly #key: LimitGroup;
  readonly #global: LimitGroup | null;
  readonly #globalArea: StateArea | null;
  readonly #owner: number;
  readonly #ages: LockAges;
  readonly #set: LimitSet;
  readonly #area: StateArea = { lock: 0, lastSec: 0, state: 0 };
  // Clock readings taken after each lock is held (key, then global): reused objects.
  readonly #keyMoment: Moment = { ms: 0, sec: 0 };
  readonly #globalMoment: Moment = { ms: 0, sec: 0 };
  readonly #clock: () => number;
  readonly result: LockedResult;
  /** Each key limit's own remaining and reset after the last decision with detail (LimitSet). */
  readonly limitRemaining: Float64Array;
  readonly limitResetMs: Float64Array;
  /** Whether the current decision committed a spend (LockedDecision). */
  spent = false;
  /** Decisions started again under the locked protocol (LockedDecision). */
  restarts = 0;
  /**
   * Whether the next decisions take the key's lock as a guarded token (LockedDecision; a reset,
   * a reward, a PolicyLimiter pair's reshape: set around the decision by its caller, or by
   * PolicyLimiter's prepare step, which then decides again; table/slot-lock.ts).
   */
  guarded = false;
  /** Whether the latest `prepare` reading was raised to the key's stamp (the clock stepped back behind a decision on the key). */
  prepareRaised = false;
  // The inputs of the decision in progress, for #run (no closure per call).
  #cost = 0;
  #limits!: LimitGroup;
  #prepare: Prepare | undefined;
  /** The tokens of the locks the current decision took (the key's, the global cap's). */
  #keyToken = 0;
  #globalToken = 0;
  /**
   * Whether the key's (the cap's) lock is still ours, for LimitSet.commit: a limit decided again
   * after losing a race is written only while it is. Made once: no allocation per decision.
   */
  readonly #holdsKey = (): boolean => this.#holds(this.#area, this.#keyToken);
  readonly #holdsGlobal = (): boolean => this.#holds(this.#globalArea as StateArea, this.#globalToken);

  constructor(
    w: Int32Array, key: LimitGroup, global: { group: LimitGroup; area: StateArea } | null, owner: number,
    ages: LockAges, clock: () => number,
  ) {
    this.#w = w;
    this.#set = new LimitSet(w, clock);
    this.result = this.#set.result;
    this.limitRemaining = this.#set.limitRemaining;
    this.limitResetMs = this.#set.limitResetMs;
    this.#clock = clock;
    this.#key = key;
    this.#global = global?.group ?? null;
    this.#globalArea = global?.area ?? null;
    this.#owner = owner;
    this.#ages = ages;
  }

  /** Whether the next decisions fill remaining, retryAfterMs and resetAfterMs (false: `allow()`). */
  set detail(wanted: boolean) {
    this.#set.detail = wanted;
  }

  /** The reading the key's limits were last decided at (after any raise to the key's stamp). */
  get nowMs(): number {
    return this.#keyMoment.ms;
  }

  /** Decisions retried because a lock was taken over or a word changed under us. */
  get retries(): number {
    return this.restarts + this.#set.retries;
  }

  /**
   * Decides for the key whose slot starts at `base` with ctrl word `ctrl` and state at
   * `stateBase`. Fills `result`; returns DONE or RELOCATE. `limits` replaces the engine's own
   * key limits for this call (rules chosen per request); `prepare` runs first under the lock
   * (it may rewrite the state, returning false if a word changed under it).
   *
   * The clock is read only once the lock is held: lock holders then see non-decreasing times, so
   * no decision can move a window back over one that a later reading already opened.
   */
  decide(
    base: number, ctrl: number, stateBase: number, cost: number,
    limits: LimitGroup = this.#key, prepare?: Prepare,
  ): number {
    const area = this.#area; // reused: no allocation per decision
    area.lock = base + S_TAT;
    area.lastSec = base + S_LAST_SEC;
    area.state = stateBase;
    this.#cost = cost;
    this.#limits = limits;
    this.#prepare = prepare;
    // This engine is its own side of the locked protocol (table/slot-lock.ts): `run`, `spent`,
    // `lost`, plain members, so the protocol's calls stay direct.
    return underKeyLock(this.#w, base, ctrl, this.#owner, this.#ages, this);
  }

  /** One try of a decision, with the key's lock held as `token`; false: decide again. */
  run(token: number): boolean {
    const area = this.#area;
    const limits = this.#limits;
    this.#keyToken = token;
    this.spent = false;
    let ok = this.#prepare === undefined || this.#prepare(this.#w, this.#readPrepare(area), this.#holdsKey);
    if (ok) {
      // The snapshot of every limit first, then the clock: a holder that stalls between the two
      // judges newer state at an older reading, which only overstates the spending.
      const lastSec = this.#set.load(limits, area);
      const m = this.#read(this.#keyMoment);
      raiseToStamp(m, lastSec); // a reading behind the key's stamp: the clock stepped back (see Clock)
      ok = this.#decideLocked(limits, area, m, lastSec, this.#cost, token);
    }
    return ok;
  }

  /**
   * The reading `prepare` rewrites the key's state at (a rule change carries GCRA debt over from
   * it): like a decision's, never behind the key's stamp.
   */
  #readPrepare(area: StateArea): Moment {
    // Atomics.load of lastSec before the clock, as a decision loads it: under the key's lock only
    // a holder's commit raises it, and a stamp loaded before the reading that is ahead of it can
    // only mean a clock that stepped back.
    const lastSec = Atomics.load(this.#w, area.lastSec);
    const m = this.#read(this.#keyMoment);
    this.prepareRaised = raiseToStamp(m, lastSec);
    return m;
  }

  /** With the key locked: decide every key limit, then the global cap, then spend from all. */
  #decideLocked(limits: LimitGroup, key: StateArea, m: Moment, lastSec: number, cost: number, token: number): boolean {
    const set = this.#set;
    const r = this.result;
    set.check(limits, m, lastSec, cost);
    r.refusedBy = r.allowed ? null : 'key';
    // A refusal stands only if the lock was ours throughout (the log's entries are read lazily,
    // and a view torn by a takeover must not refuse either): underKeyLock checks that.
    if (!r.allowed) return true;
    if (this.#global !== null && this.#globalArea !== null) {
      const g = this.#globalArea;
      const globalToken = lock(this.#w, g.lock, this.#owner, this.#ages);
      this.#globalToken = globalToken;
      const globalLastSec = set.load(this.#global, g);
      const gm = this.#read(this.#globalMoment); // read under the global lock, after its snapshot
      raiseToStamp(gm, globalLastSec); // behind the cap's stamp: the clock stepped back
      const allowed = set.checkCap(limits, m, lastSec, this.#global, gm, globalLastSec, cost);
      const committed = allowed && (cost === 0 ||
        (this.#holds(key, token) && this.#holds(g, globalToken) && set.commit(this.#global, g, gm, globalLastSec, cost, null, this.#holdsGlobal)));
      unlock(this.#w, g.lock, globalToken);
      if (!allowed) return true; // refused by the cap: reported by checkCap
      if (!committed) return false;
      if (cost === 0) return true;
      if (!set.commit(limits, key, m, lastSec, cost, null, this.#holdsKey)) {
        set.undo(this.#global, g, this.#global.algorithms.length);
        return false;
      }
      this.spent = true;
      return true;
    }
    if (cost === 0 || !this.#holds(key, token)) return cost === 0;
    this.spent = set.commit(limits, key, m, lastSec, cost, null, this.#holdsKey);
    return this.spent;
  }

  /**
   * Whether we still hold the lock of `area`, checked after deciding and before committing: the
   * algorithms may read state lazily while deciding (the sliding log's entries), and a holder whose
   * lock was taken over meanwhile may have read a newer holder's uncommitted writes, which its
   * commit must never build on. Still held now means everything it read was older than any takeover.
   */
  #holds(area: StateArea, token: number): boolean {
    // Atomics.load (seq-cst) after every read of the decision.
    return Atomics.load(this.#w, area.lock) === token;
  }

  /**
   * A reclaim took the lock over and judged the key idle before our commits: they went with it.
   * Give the cap back its share; the key is decided again in its new slot.
   */
  lost(): void {
    if (this.#global !== null && this.#globalArea !== null) this.#set.undo(this.#global, this.#globalArea, this.#global.algorithms.length);
  }

  /** Reads the clock into `m`. */
  #read(m: Moment): Moment {
    m.ms = this.#clock();
    m.sec = secondsAt(m.ms);
    return m;
  }

  /** Writes fresh state for every limit of `g` (the slot or area is not yet visible to others). */
  static init(w: Int32Array, g: LimitGroup, area: StateArea, m: Moment): void {
    LockedEngine.initStates(w, g, area.state, m);
    Atomics.store(w, area.lastSec, m.sec);
    Atomics.store(w, area.lock, 0);
  }

  /** Writes fresh state for every limit of `g` at `state` (with the key locked, or unshared). */
  static initStates(w: Int32Array, g: LimitGroup, state: number, m: Moment): void {
    for (let i = 0; i < g.algorithms.length; i++) (g.algorithms[i] as LimitAlgorithm).init(w, state + (g.offsets[i] as number), m);
  }

  /**
   * The table hooks for locked slots: a fresh state on insert; for a reclaim, the lock is taken
   * (only if free right now) and its token returned as the word to turn into DEAD, so no decision
   * can run between the idle check and the reclaim.
   */
  static slotState(key: LimitGroup, stateOffset: number, owner: number, ages: LockAges, now: () => Moment, raiseTo: (ms: number) => void): SlotState {
    // Idle, judged under the key's lock: every limit's state equals a fresh key's. Made once.
    const idle = (w: Int32Array, base: number, floor: ReclaimFloor): boolean => {
      const lastSec = Atomics.load(w, base + S_LAST_SEC); // before the clock (see LockFreeEngine.retire)
      const m = now();
      // A stamp ahead of the reading: the clock stepped back behind the key's latest admission,
      // which a decision would raise its reading to (see Clock): not idle.
      if (unitsAhead(m.sec, lastSec) !== 0) return false;
      for (let i = 0; i < key.algorithms.length; i++) {
        const a = key.algorithms[i] as LimitAlgorithm;
        if (!a.idle(w, base + stateOffset + (key.offsets[i] as number), m, isStale(m.sec, lastSec, a.staleSec))) return false;
      }
      floor.raise(m.ms); // before the reclaim: its key comes back fresh at no earlier reading
      return true;
    };
    return {
      initSlot(w, base) {
        LockedEngine.init(w, key, { lock: base + S_TAT, lastSec: base + S_LAST_SEC, state: base + stateOffset }, now());
      },
      isDead(w, base) {
        return Atomics.load(w, base + S_TAT) === DEAD; // the lock word holds the reclaim marker
      },
      retire(w, base, floor) {
        return retireLocked(w, base, owner, ages, idle, floor);
      },
      raiseTo,
    };
  }
}
