import type { LimitAlgorithm, Moment, Verdict } from '../algorithms/index.js';
import type { LimitState } from './types.js';
import { isStale, raiseStamp } from '../time/stamps.js';
import { NarrowGcra } from '../algorithms/gcra.js';
import { FixedWindow32 } from '../algorithms/fixed-window-32.js';
import { BlockUntil } from '../algorithms/block-until.js';
import { MAX_LIMITS } from '../table/layout.js';

/**
 * A commit that lost a race decides that limit again at the decision's own reading if that is at
 * most this old; else the decision starts over. Well under what a 32-bit state decodes ahead of a
 * reading (2^30 ticks of at least 10 ns, 10.7 s) and a sliding window's 2^19 windows.
 */
const RECHECK_MS = 1000;

/** A set of limits kept together in one state area (a key's, or the global cap's). */
export interface LimitGroup {
  algorithms: LimitAlgorithm[];
  /** Word offsets of each limit's state, relative to the group's state base. */
  offsets: number[];
  /** Total state words. */
  words: number;
  /** Some state holds a 64-bit word: the group's base must have the parity it was laid out for. */
  align8: boolean;
  /** Every limit commits in one compareExchange (no sliding log): the group needs no lock. */
  lockFree: boolean;
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
  return {
    algorithms, offsets, words,
    align8: algorithms.some((a) => a.align8 === true),
    lockFree: algorithms.every((a) => a.lockFree),
  };
}

/** Where a state lives: its guard (or lock) word, its lastSec word and its first state word. */
export interface StateArea {
  lock: number;
  lastSec: number;
  state: number;
}

/** The combined answer of a decision over several limits. */
export interface LockedResult {
  allowed: boolean;
  remaining: number;
  retryAfterMs: number;
  resetAfterMs: number;
  /** Which part refused: 'key' limits (with `never` set when cost exceeds a capacity) or 'global'. */
  refusedBy: 'key' | 'global' | null;
  never: boolean;
  /** A reservation: how late it may act and still be counted where every limit counted it. */
  latestMs: number;
}

/**
 * The one decision core over a group of limits, shared by the lock-free and the locked engine:
 * snapshot every limit, decide on the snapshot, commit each limit by compareExchange from it, and
 * take back what was committed when a later one cannot. The engines differ only in what they
 * hold around it (nothing, or a lock).
 *
 * Thread-safety: one instance per thread (it holds a verdict, the result and, through its
 * algorithms, their snapshots); the words are shared and written only by compareExchange.
 */
export class LimitSet {
  readonly #w: Int32Array;
  readonly #verdict: Verdict = { allowed: false, remaining: 0, waitMs: 0, resetMs: 0, latestMs: Infinity, detail: true };
  /** Whether the caller wants remaining, retryAfterMs and resetAfterMs (false for `allow()`). */
  detail = true;
  readonly result: LockedResult = { allowed: false, remaining: 0, retryAfterMs: 0, resetAfterMs: 0, refusedBy: null, never: false, latestMs: Infinity };
  readonly #keyPart: LockedResult = { allowed: false, remaining: 0, retryAfterMs: 0, resetAfterMs: 0, refusedBy: null, never: false, latestMs: Infinity };
  /** Commits that lost a race and were decided again. */
  retries = 0;
  /**
   * Set while deciding a reservation: the longest wait it accepts. Every limit then decides with
   * `reserve` instead of `check`, and `result.retryAfterMs` of an allowed decision is its wait.
   */
  reserving: number | null = null;
  /** A reservation's earliest act for the pass being decided (ms after the reading). */
  #notBefore = 0;
  /**
   * Set while deciding a penalty or a block (LockFreeEngine.force): every limit then decides with
   * `force` (a penalty while < 0, a block of this many ms while >= 0) instead of `check`; null
   * otherwise.
   */
  forcing: number | null = null;
  /**
   * Set while deciding a spend's give-back (LockFreeEngine.giveBack with a mark): the reading of
   * the spend it gives back, which bounds a GCRA limit's reward (LimitAlgorithm.force); Infinity
   * otherwise.
   */
  rewardSinceMs = Infinity;
  /**
   * Each key limit's own remaining and reset (ms) after the last decision with detail, in the
   * group's order: what a RateLimit header reports per limit. The cap's pass is not recorded.
   */
  readonly limitRemaining = new Float64Array(MAX_LIMITS);
  readonly limitResetMs = new Float64Array(MAX_LIMITS);
  /** The group whose limits were recorded last (commit keeps them up to date after a lost race). */
  #recorded: LimitGroup | null = null;
  /** False while the global cap is decided: its numbers are not the key's. */
  #recording = true;

  readonly #clock: () => number;

  constructor(w: Int32Array, clock: () => number) {
    this.#w = w;
    this.#clock = clock;
  }

  /**
   * The global cap's group, if the limiter has one: a GCRA cap counts a reservation at its own
   * wait, never at the key's act (checkCap), also when it decides again after a lost race.
   */
  cap: LimitGroup | null = null;

  /**
   * Takes the snapshot of every limit of `g`, then its lastSec word; returns lastSec. The caller
   * reads the clock only after this: no state it judges is later than its reading.
   */
  load(g: LimitGroup, area: StateArea): number {
    this.loadStates(g, area);
    // Atomics.load of lastSec after the states (the order of the one-limit path): every commit
    // raises lastSec before its compareExchange, so if a state we loaded was written by a recent
    // admission, the lastSec we load now records it, and a stale verdict can only come from
    // states that really are that old.
    return Atomics.load(this.#w, area.lastSec);
  }

  /** `load` without lastSec: the caller loads it (or knows a bound on it) before reading the clock. */
  loadStates(g: LimitGroup, area: StateArea): void {
    const w = this.#w;
    for (let i = 0; i < g.algorithms.length; i++) {
      const a = g.algorithms[i] as LimitAlgorithm;
      const at = area.state + (g.offsets[i] as number);
      // The common algorithms get call sites of their own (see `dispatch` below).
      if (a instanceof NarrowGcra) a.load(w, at);
      else if (a instanceof FixedWindow32) a.load(w, at);
      else a.load(w, at);
    }
  }

  /**
   * Runs every algorithm of `g` on its snapshot and combines into `result`: all must allow. When
   * they do not, the request spends nothing, so remaining and reset are re-read as a probe (cost 0)
   * would see them.
   */
  check(g: LimitGroup, m: Moment, lastSec: number, cost: number, notBeforeMs = 0): void {
    const r = this.result;
    if (!this.detail && this.reserving === null) {
      this.#allows(g, m, lastSec, cost);
      return;
    }
    this.#verdict.detail = this.detail || this.reserving !== null;
    this.#notBefore = notBeforeMs;
    this.#begin();
    this.#combine(g, m, lastSec, cost);
    // A reservation acts after its longest wait. A window that counted it in an earlier window
    // decides again from that wait, so that each counts it where it acts: windows reach only the
    // reading's next one, so this settles within a few passes; else the reservation is refused.
    for (let pass = 0; this.reserving !== null && r.allowed && r.retryAfterMs > r.latestMs; pass++) {
      if (pass === 3) {
        r.allowed = false;
        break;
      }
      this.#notBefore = r.retryAfterMs;
      this.#begin();
      this.#combine(g, m, lastSec, cost);
      r.retryAfterMs = Math.max(r.retryAfterMs, this.#notBefore);
    }
    if (!r.allowed && cost > 0 && this.#verdict.detail) this.#combine(g, m, lastSec, 0);
  }

  /**
   * `check` for `allow()`, which wants only the verdict: every limit in turn, stopping at the
   * first that refuses (`never` set when the cost exceeds its capacity). 2-3% more checks/s
   * on two workers with two GCRA limits than the full pass.
   */
  #allows(g: LimitGroup, m: Moment, lastSec: number, cost: number): void {
    const r = this.result;
    const v = this.#verdict;
    v.detail = false;
    r.never = false;
    r.retryAfterMs = 0;
    const algorithms = g.algorithms;
    for (let i = 0; i < algorithms.length; i++) {
      const a = algorithms[i] as LimitAlgorithm;
      if (a instanceof NarrowGcra) {
        if (a.admits(m, isStale(m.sec, lastSec, a.staleSec), cost)) continue;
        r.allowed = false;
        if (cost > a.params.burst) {
          r.never = true;
          r.retryAfterMs = Infinity;
        }
        return;
      }
      if (a instanceof FixedWindow32) a.check(m, isStale(m.sec, lastSec, a.staleSec), cost, v);
      else a.check(m, isStale(m.sec, lastSec, a.staleSec), cost, v);
      if (!v.allowed) {
        r.allowed = false;
        if (v.waitMs === Infinity) {
          r.never = true;
          r.retryAfterMs = Infinity;
        }
        return;
      }
    }
    r.allowed = true;
  }

  /** Starts a verdict: allowed until a limit refuses. */
  #begin(): void {
    const r = this.result;
    r.allowed = true;
    r.never = false;
    r.retryAfterMs = 0;
    r.latestMs = Infinity;
  }

  /** One pass over the limits: allowed and waits from `cost`, remaining and reset as of `cost`. */
  #combine(g: LimitGroup, m: Moment, lastSec: number, cost: number): void {
    const r = this.result;
    const v = this.#verdict;
    const probe = cost === 0;
    r.remaining = Infinity;
    r.resetAfterMs = 0;
    const reserving = this.reserving;
    for (let i = 0; i < g.algorithms.length; i++) {
      const a = g.algorithms[i] as LimitAlgorithm;
      if (this.forcing !== null && !probe) {
        // A penalty or a block: refused only past the horizon, nothing written then.
        (a.force as NonNullable<LimitAlgorithm['force']>)(m, isStale(m.sec, lastSec, a.staleSec), cost, this.forcing, false, v, this.rewardSinceMs);
      } else if (reserving === null || probe) {
        // The common algorithms get call sites of their own: one site shared by every algorithm
        // a process runs would be megamorphic, and every call through it a slow lookup.
        if (a instanceof NarrowGcra) a.check(m, isStale(m.sec, lastSec, a.staleSec), cost, v);
        else if (a instanceof FixedWindow32) a.check(m, isStale(m.sec, lastSec, a.staleSec), cost, v);
        else a.check(m, isStale(m.sec, lastSec, a.staleSec), cost, v);
      } else {
        (a.reserve as NonNullable<LimitAlgorithm['reserve']>)(m, isStale(m.sec, lastSec, a.staleSec), cost, reserving, v, this.#notBefore);
      }
      if (v.detail) {
        r.remaining = Math.min(r.remaining, v.remaining);
        r.resetAfterMs = Math.max(r.resetAfterMs, v.resetMs);
        if (this.#recording) {
          this.limitRemaining[i] = v.remaining;
          this.limitResetMs[i] = v.resetMs;
          this.#recorded = g;
          // A blocked key (its block word, after its limits): each limit has nothing left until the block's end.
          if (v.resetMs > 0 && a instanceof BlockUntil) this.#blocked(i, v.resetMs);
        }
      }
      if (probe) continue; // a probe after a refusal: keep the refusal's verdict and waits
      if (!v.allowed) {
        r.allowed = false;
        if (v.waitMs === Infinity) r.never = true;
      }
      r.retryAfterMs = Math.max(r.retryAfterMs, v.waitMs);
      if (reserving !== null) r.latestMs = Math.min(r.latestMs, v.latestMs);
    }
    if (!probe) r.retryAfterMs = r.allowed ? (reserving === null ? 0 : r.retryAfterMs) : r.never ? Infinity : r.retryAfterMs;
  }

  /** The first `n` limits as a block that ends `endMs` from now reports them: nothing left until then. */
  #blocked(n: number, endMs: number): void {
    for (let j = 0; j < n; j++) {
      this.limitRemaining[j] = 0;
      this.limitResetMs[j] = Math.max(this.limitResetMs[j] as number, endMs);
    }
  }

  /**
   * After the key's limits allowed (`result` holds their verdict): decides the global cap `cap`
   * at its reading `cm`, and combines. Refused by the cap, the key spends nothing: `result` then
   * reports the key's unspent state and `refusedBy: 'global'`, and this returns false.
   */
  checkCap(key: LimitGroup, m: Moment, lastSec: number, cap: LimitGroup, cm: Moment, capLastSec: number, cost: number): boolean {
    const r = this.result;
    let keyPart = Object.assign(this.#keyPart, r);
    // A window cap counts a reservation in the window of the key's wait. A GCRA cap counts it at
    // its own wait: placed at the key's (NarrowGcra.reserve), its slot would move the cap's one TAT
    // past every request of every key until then, and refuse them all meanwhile. So a request
    // the key holds back acts after the cap counted it (docs/testing.md, "Found, not yet fixed").
    // (A cap is one limit, of either width.)
    const atKeyWait = this.reserving !== null && cap.algorithms[0]?.gcra !== true;
    for (let pass = 0; ; pass++) {
      this.#recording = false;
      this.check(cap, cm, capLastSec, cost, atKeyWait ? keyPart.retryAfterMs : 0);
      this.#recording = true;
      if (!r.allowed) {
        const capRemaining = r.remaining;
        this.probe(key, m, lastSec);
        r.remaining = Math.min(r.remaining, capRemaining);
        r.refusedBy = 'global';
        return false;
      }
      if (this.reserving === null || r.retryAfterMs <= keyPart.latestMs) break;
      // The cap makes the reservation act after a window of the key ends: decide the key again
      // from the cap's wait (its snapshot has not changed), then the cap from the key's.
      if (pass === 3) {
        r.allowed = false;
        r.refusedBy = 'global';
        return false;
      }
      this.check(key, m, lastSec, cost, r.retryAfterMs);
      if (!r.allowed) {
        r.refusedBy = 'key';
        return false;
      }
      keyPart = Object.assign(this.#keyPart, r);
    }
    r.remaining = Math.min(r.remaining, keyPart.remaining);
    r.resetAfterMs = keyPart.resetAfterMs;
    r.retryAfterMs = Math.max(r.retryAfterMs, keyPart.retryAfterMs); // a reservation's wait: the longer
    // A GCRA cap's count holds whenever the key acts (at its own wait by choice): only the key's
    // limits bound the act (else a lost race of any commit would take back and start over).
    r.latestMs = atKeyWait ? Math.min(r.latestMs, keyPart.latestMs) : keyPart.latestMs;
    return true;
  }

  /** The key's unspent remaining and reset, after the global cap refused. */
  probe(g: LimitGroup, m: Moment, lastSec: number): void {
    const r = this.result;
    const { allowed, never, retryAfterMs } = r;
    this.#combine(g, m, lastSec, 0);
    r.allowed = allowed;
    r.never = never;
    r.retryAfterMs = retryAfterMs;
  }

  /**
   * Raises lastSec, then commits every limit of `g` in order (the last `check` allowed `cost` > 0).
   * A limit whose state changed since its snapshot (another thread spent) is decided again on a
   * new snapshot of it alone, at the same reading `m` (the spends before it stay made); when it
   * now refuses, the commits before it are taken back and this returns false. `takeBack`, for
   * a key's group on the lock-free engine, takes back the first n commits itself, only while the
   * key still owns its slot and no give-back may have taken them (LockFreeEngine.#undoKey);
   * without it, `undo` runs at once (a group under a lock). `holds`, for a group under a lock
   * (the locked engine), says whether that lock is still ours, and for a key's group on the
   * lock-free engine whether the slot still holds the key: a limit decided again is written only
   * if it still does once the new snapshot has been read (else false, the commits before it
   * kept).
   */
  commit(
    g: LimitGroup, area: StateArea, m: Moment, lastSec: number, cost: number,
    takeBack: ((n: number) => void) | null = null, holds: (() => boolean) | null = null,
  ): boolean {
    const w = this.#w;
    // Raised before any commit (only ever forward): see `load`. A decision that then fails leaves
    // it raised, which only makes the key's states decode as recent (conservative).
    raiseStamp(w, area.lastSec, lastSec, m.sec);
    for (let i = 0; i < g.algorithms.length; i++) {
      const a = g.algorithms[i] as LimitAlgorithm;
      const at = area.state + (g.offsets[i] as number);
      // The common algorithms get call sites of their own (see #combine). The path taken after
      // a lost race lives apart (#decideAgain), which keeps this loop small enough to inline.
      if (a instanceof NarrowGcra ? a.commit(w, at) : a instanceof FixedWindow32 ? a.commit(w, at) : a.commit(w, at, m)) continue;
      if (!this.#decideAgain(g, area, i, m, cost, takeBack, holds)) return false;
    }
    return true;
  }

  /**
   * After limit `i` of `g` lost its commit: decides it again on a new snapshot at the same
   * reading and commits it, until it lands (true) or refuses (false, after taking back the
   * commits before it while they are still ours: see `commit`).
   */
  #decideAgain(
    g: LimitGroup, area: StateArea, i: number, m: Moment, cost: number,
    takeBack: ((n: number) => void) | null, holds: (() => boolean) | null,
  ): boolean {
    const w = this.#w;
    const v = this.#verdict;
    const a = g.algorithms[i] as LimitAlgorithm;
    const at = area.state + (g.offsets[i] as number);
    // A GCRA cap counts a reservation at its own wait, not at the key's act (checkCap).
    const gcraCap = g === this.cap && a.gcra === true;
    // The limit decided again reports its numbers only when the decision wants them.
    v.detail = this.detail || this.reserving !== null;
    do {
      this.retries++;
      a.load(w, at);
      // The new state was written by a recent spend, so it is not stale; it may be newer than
      // `m`, which every algorithm reads as at least as much spent as it is. That decodes
      // while it is less than RECHECK_MS newer: past that, start the decision over.
      const late = this.#clock() - m.ms > RECHECK_MS;
      // A reservation's limit counts it no sooner than the decision's act.
      const from = gcraCap ? 0 : this.result.retryAfterMs;
      if (!late && this.reserving !== null) (a.reserve as NonNullable<LimitAlgorithm['reserve']>)(m, false, cost, this.reserving, v, from);
      // A penalty or a block decided again holds as much as the state can (clamp): never refused,
      // so the commits before it are never taken back (a give-back could land over another's spend).
      else if (!late && this.forcing !== null) (a.force as NonNullable<LimitAlgorithm['force']>)(m, false, cost, this.forcing, true, v, this.rewardSinceMs);
      else if (!late) a.check(m, false, cost, v);
      // Under a lock that was taken over meanwhile (we lost the race to the new holder), the new
      // snapshot may hold the new holder's writes before its commit point (a sliding log's
      // entries, written before its head word), and writing from it would replace them: that
      // holder's entry, once its head lands, would carry our older stamp and expire early (seen:
      // 201 admitted within 49.9 ms for 200; test/algorithms/sliding-log-takeover.test.ts). So write
      // nothing more (Atomics.load of the lock after every read of the new snapshot): the
      // spends before this limit stay (conservative), and the caller decides again under the lock.
      if (holds !== null && !holds()) return false;
      if (late || !v.allowed) {
        // Take back only while the spends are still on our key (the slot may have been
        // reclaimed and reused since: its next key's words are not ours to subtract from; see
        // `takeBack`), and not after a stall: a state word may by then hold the same bits with
        // another meaning (a window's word repeats after some thousand windows). Kept: conservative.
        if (!late) this.#takeBack(g, area, i, takeBack);
        return false;
      }
      // Report from the state actually spent from: this limit has more spent than first seen.
      const r = this.result;
      if (v.detail) {
        r.remaining = Math.min(r.remaining, v.remaining);
        r.resetAfterMs = Math.max(r.resetAfterMs, v.resetMs);
        if (g === this.#recorded) {
          this.limitRemaining[i] = Math.min(this.limitRemaining[i] as number, v.remaining);
          this.limitResetMs[i] = Math.max(this.limitResetMs[i] as number, v.resetMs);
        }
      }
      if (this.reserving !== null) {
        r.retryAfterMs = Math.max(r.retryAfterMs, v.waitMs);
        // A GCRA cap's count holds whenever the key acts (it is at the cap's own wait by choice),
        // so only the others bound the act.
        if (!gcraCap) r.latestMs = Math.min(r.latestMs, v.latestMs);
        // It would now act later than another limit still counts it: take back the commits
        // before this one (this one is not made) and decide again.
        if (r.retryAfterMs > r.latestMs) {
          this.#takeBack(g, area, i, takeBack);
          return false;
        }
      }
    } while (!a.commit(w, at, m));
    return true;
  }

  /** Takes back the first `n` commits of `g` through `takeBack` when given (see `commit`), else at once. */
  #takeBack(g: LimitGroup, area: StateArea, n: number, takeBack: ((n: number) => void) | null): void {
    if (takeBack === null) this.undo(g, area, n);
    else takeBack(n);
  }

  /**
   * Takes back the first `n` commits of `g`. One that another writer already built on stays: the
   * key is charged for a request it did not admit (conservative), never the reverse.
   */
  undo(g: LimitGroup, area: StateArea, n: number): void {
    for (let i = 0; i < n; i++) (g.algorithms[i] as LimitAlgorithm).undo(this.#w, area.state + (g.offsets[i] as number));
  }
}

/** The first `n` limits' own numbers after a decision (for `Decision.limits`). */
export function limitStates(remaining: Float64Array, resetMs: Float64Array, n: number): LimitState[] {
  const out: LimitState[] = [];
  for (let i = 0; i < n; i++) out.push({ remaining: remaining[i] as number, resetAfterMs: resetMs[i] as number });
  return out;
}
