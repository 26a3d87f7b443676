import type { LimitAlgorithm, Moment, Verdict } from './algorithms/index.js';
import { isStale, raiseStamp, secondsAt } from './gcra.js';
import { GONE, lock, tryLock, unlock } from './table/slot-lock.js';
import { DEAD, S_CTRL, S_LAST_SEC, S_TAT } from './table/layout.js';
import { ALREADY_DEAD, NOT_IDLE, RETIRED, type SlotState } from './table/table.js';

/** A set of limits kept together in one lock's state area. */
export interface LimitGroup {
  algorithms: LimitAlgorithm[];
  /** Word offsets of each limit's state, relative to the group's state base. */
  offsets: number[];
  /** Total state words. */
  words: number;
  /** Some state holds a 64-bit word: the group's base must have the parity it was laid out for. */
  align8: boolean;
}

/** Lays out `algorithms` one after another. */
export function group(algorithms: LimitAlgorithm[], baseParity = 0): LimitGroup {
  const offsets: number[] = [];
  let words = 0;
  for (const a of algorithms) {
    // A state holding a 64-bit word starts on an even word of the buffer (8-byte aligned): the
    // group's base is `baseParity` modulo 2, so pad a word where the offset would make it odd.
    if (a.align8 === true && (baseParity + words) % 2 !== 0) words += 1;
    offsets.push(words);
    words += a.stateWords;
  }
  return { algorithms, offsets, words, align8: algorithms.some((a) => a.align8 === true) };
}

/** Where a locked state lives: its lock word, its lastSec word and its first state word. */
export interface StateArea {
  lock: number;
  lastSec: number;
  state: number;
}

/** The combined answer of a locked decision. */
export interface LockedResult {
  allowed: boolean;
  remaining: number;
  retryAfterMs: number;
  resetAfterMs: number;
  /** Which part refused: 'key' limits (with `never` set when cost exceeds a capacity) or 'global'. */
  refusedBy: 'key' | 'global' | null;
  never: boolean;
}

/** The decision finished. */
export const DONE = 0;
/** The slot no longer holds the key (reclaimed or reused): look it up again and retry. */
export const RELOCATE = 1;

/**
 * Decisions for keys whose state spans several words (several limits, window and log
 * algorithms, a global cap): take the key's lock, read its state once, let every algorithm
 * decide, spend from all of them or none, release. Different keys have different locks, so they
 * never wait on each other; the global cap, when set, is locked inside the key's lock (always in
 * that order, so no two threads can wait on each other in a cycle).
 *
 * Thread-safety: one instance per thread (it keeps scratch verdicts); any number of threads.
 */
export class LockedEngine {
  readonly #w: Int32Array;
  readonly #key: LimitGroup;
  readonly #global: LimitGroup | null;
  readonly #globalArea: StateArea | null;
  readonly #owner: number;
  readonly #stealAfterMs: number;
  readonly #verdict: Verdict = { allowed: false, remaining: 0, waitMs: 0, resetMs: 0 };
  readonly #area: StateArea = { lock: 0, lastSec: 0, state: 0 };
  // Clock readings taken after each lock is held (key, then global): reused objects.
  readonly #keyMoment: Moment = { ms: 0, sec: 0 };
  readonly #globalMoment: Moment = { ms: 0, sec: 0 };
  readonly #clock: () => number;
  readonly #keyPart: LockedResult = { allowed: false, remaining: 0, retryAfterMs: 0, resetAfterMs: 0, refusedBy: null, never: false };
  readonly result: LockedResult = { allowed: false, remaining: 0, retryAfterMs: 0, resetAfterMs: 0, refusedBy: null, never: false };
  /** Decisions retried because a lock was taken over or a word changed under us. */
  retries = 0;

  constructor(
    w: Int32Array, key: LimitGroup, global: { group: LimitGroup; area: StateArea } | null, owner: number,
    stealAfterMs: number, clock: () => number,
  ) {
    this.#w = w;
    this.#clock = clock;
    this.#key = key;
    this.#global = global?.group ?? null;
    this.#globalArea = global?.area ?? null;
    this.#owner = owner;
    this.#stealAfterMs = stealAfterMs;
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
    limits: LimitGroup = this.#key, prepare?: (w: Int32Array, m: Moment) => boolean,
  ): number {
    const w = this.#w;
    for (;;) {
      const token = lock(w, base + S_TAT, this.#owner, this.#stealAfterMs);
      if (token === GONE) return RELOCATE;
      // ctrl after taking the lock: a reclaim needs this lock, so while we hold it an unchanged
      // ctrl means the slot still holds our key.
      if (Atomics.load(w, base + S_CTRL) !== ctrl) {
        unlock(w, base + S_TAT, token);
        return RELOCATE;
      }
      const m = this.#read(this.#keyMoment);
      const area = this.#area; // reused: no allocation per decision
      area.lock = base + S_TAT;
      area.lastSec = base + S_LAST_SEC;
      area.state = stateBase;
      const outcome = (prepare === undefined || prepare(w, m)) && this.#decideLocked(limits, area, m, cost);
      const released = unlock(w, base + S_TAT, token);
      if (outcome && released) return DONE;
      this.retries++; // a word changed under us, or the lock was taken over: decide again
    }
  }

  /** With the key locked: decide every key limit, then the global cap, then spend from all. */
  #decideLocked(limits: LimitGroup, key: StateArea, m: Moment, cost: number): boolean {
    const r = this.result;
    this.#check(limits, key, m, cost);
    r.refusedBy = r.allowed ? null : 'key';
    if (r.allowed && this.#global !== null && this.#globalArea !== null) {
      const g = this.#globalArea;
      const token = lock(this.#w, g.lock, this.#owner, this.#stealAfterMs);
      const gm = this.#read(this.#globalMoment); // read under the global lock, like the key's
      const keyPart = Object.assign(this.#keyPart, r);
      this.#check(this.#global, g, gm, cost);
      let ok = true;
      if (r.allowed && cost > 0) ok = this.#apply(this.#global, g, gm, cost);
      if (!unlock(this.#w, g.lock, token)) ok = false;
      if (!ok) return false;
      if (!r.allowed) {
        // Refused by the cap: the key spends nothing, so report its unspent state.
        const globalRemaining = r.remaining;
        this.#keyProbe(limits, key, m);
        r.remaining = Math.min(r.remaining, globalRemaining);
        r.refusedBy = 'global';
        return true;
      }
      r.remaining = Math.min(r.remaining, keyPart.remaining);
      r.resetAfterMs = keyPart.resetAfterMs;
    }
    if (r.allowed && cost > 0) return this.#apply(limits, key, m, cost);
    return true;
  }

  /** Reads the clock into `m`. */
  #read(m: Moment): Moment {
    m.ms = this.#clock();
    m.sec = secondsAt(m.ms);
    return m;
  }

  /**
   * Runs every algorithm of `g` on `area` and combines: all must allow. When they do not, the
   * request spends nothing, so remaining and reset are re-read as a probe (cost 0) would see them.
   */
  #check(g: LimitGroup, area: StateArea, m: Moment, cost: number): void {
    const r = this.result;
    r.allowed = true;
    r.never = false;
    r.retryAfterMs = 0;
    this.#combine(g, area, m, cost);
    if (!r.allowed && cost > 0) this.#combine(g, area, m, 0);
  }

  /** One pass over the limits: allowed and waits from `cost`, remaining and reset as of `cost`. */
  #combine(g: LimitGroup, area: StateArea, m: Moment, cost: number): void {
    const w = this.#w;
    const r = this.result;
    const v = this.#verdict;
    const probe = cost === 0;
    const lastSec = Atomics.load(w, area.lastSec);
    r.remaining = Infinity;
    r.resetAfterMs = 0;
    for (let i = 0; i < g.algorithms.length; i++) {
      const a = g.algorithms[i] as LimitAlgorithm;
      a.check(w, area.state + (g.offsets[i] as number), m, isStale(m.sec, lastSec, a.staleSec), cost, v);
      r.remaining = Math.min(r.remaining, v.remaining);
      r.resetAfterMs = Math.max(r.resetAfterMs, v.resetMs);
      if (probe) continue; // a probe after a refusal: keep the refusal's verdict and waits
      if (!v.allowed) {
        r.allowed = false;
        if (v.waitMs === Infinity) r.never = true;
      }
      r.retryAfterMs = Math.max(r.retryAfterMs, v.waitMs);
    }
    if (!probe) r.retryAfterMs = r.allowed ? 0 : r.never ? Infinity : r.retryAfterMs;
  }

  /** The key's unspent remaining and reset, after the global cap refused. */
  #keyProbe(g: LimitGroup, area: StateArea, m: Moment): void {
    const r = this.result;
    const { allowed, never, retryAfterMs } = r;
    this.#combine(g, area, m, 0);
    r.allowed = allowed;
    r.never = never;
    r.retryAfterMs = retryAfterMs;
  }

  /** Spends `cost` from every algorithm of `g`, and raises lastSec. False if interfered with. */
  #apply(g: LimitGroup, area: StateArea, m: Moment, cost: number): boolean {
    const w = this.#w;
    const lastSec = Atomics.load(w, area.lastSec);
    for (let i = 0; i < g.algorithms.length; i++) {
      const a = g.algorithms[i] as LimitAlgorithm;
      if (!a.apply(w, area.state + (g.offsets[i] as number), m, isStale(m.sec, lastSec, a.staleSec), cost)) return false;
    }
    raiseStamp(w, area.lastSec, lastSec, m.sec); // only ever forward
    return true;
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
  static slotState(key: LimitGroup, stateOffset: number, owner: number, now: () => Moment): SlotState {
    return {
      initSlot(w, base) {
        LockedEngine.init(w, key, { lock: base + S_TAT, lastSec: base + S_LAST_SEC, state: base + stateOffset }, now());
      },
      isDead(w, base) {
        return Atomics.load(w, base + S_TAT) === DEAD; // the lock word holds the reclaim marker
      },
      retire(w, base) {
        if (Atomics.load(w, base + S_TAT) === DEAD) return ALREADY_DEAD;
        const token = tryLock(w, base + S_TAT, owner);
        if (token === 0) return NOT_IDLE;
        const m = now();
        const lastSec = Atomics.load(w, base + S_LAST_SEC);
        let idle = true;
        for (let i = 0; i < key.algorithms.length && idle; i++) {
          const a = key.algorithms[i] as LimitAlgorithm;
          idle = a.idle(w, base + stateOffset + (key.offsets[i] as number), m, isStale(m.sec, lastSec, a.staleSec));
        }
        // compareExchange from our own token to DEAD: reclaimed while locked, so no decision can
        // run between the idle check and the reclaim.
        if (idle && Atomics.compareExchange(w, base + S_TAT, token, DEAD) === token) return RETIRED;
        unlock(w, base + S_TAT, token);
        return NOT_IDLE;
      },
    };
  }
}
