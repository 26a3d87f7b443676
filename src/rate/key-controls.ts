import type { Moment, Verdict } from '../algorithms/index.js';
import { TableFullError } from '../errors.js';
import { describe } from '../config/check.js';
import { maxBlockMsOf, type GcraParams } from '../math/gcra.js';
import { MAX_CLOCK_MS } from '../time/ticks.js';
import { RELOCATE } from '../table/slot-index.js';
import type { SlotRef } from '../table/slot-ref.js';
import type { TableSite } from '../table/table-site.js';
import { S_LAST_SEC } from '../table/layout.js';
import { isStale } from '../time/stamps.js';
import { FreshState } from './fresh-state.js';
import { forceUnderLock, LOCK_LOST } from './forced-state.js';
import type { LimitGroup } from './limit-set.js';
import type { LockedEngine, Prepare } from './locked-engine.js';
import { OWED, type LockFreeEngine, type SpendMark } from './lockfree-engine.js';
import type { AlgorithmName } from '../algorithms/index.js';
import { ALLOWED, TOO_LONG, type WideGcra } from './gcra-wide.js';
import type { Gcra32 } from './gcra-32.js';
import type { KeyState } from './types.js';

/**
 * What operators do to one key of a one-limit GCRA RateLimiter: a penalty (spend now, even
 * beyond the burst), a reward (give back, never below fresh), a reset (give back everything), a
 * block (refuse until a time: the debt raised to what refuses until then, never lowered).
 * Each is one mode of the engine's own compare-and-swap loop (Gcra32/WideGcra `#spend`), so it is
 * exact, and races every decision on the key the way another decision would: the key's state is
 * its TAT alone, and a write lands only on the value it was decided from. A penalty and a block
 * are lock-free; a reward and a reset hold the key's reset mark guard while they write
 * (table/reset-marks.ts), which decisions never take.
 *
 * A reward gives back what a reservation of the key counted too: a reservation cancelled after
 * it gives back its own part again, never below fresh (the key may then admit its burst sooner
 * than without the reward; the operator asked for it). A reset or a block moves the slot's reset
 * mark, and a reservation cancelled after it gives nothing back (table/reset-marks.ts).
 *
 * Thread-safety: one instance per limiter instance (per thread), as the engine it drives.
 */
export class OneLimitControls {
  constructor(
    private readonly one: Gcra32 | WideGcra,
    private readonly p: GcraParams,
    private readonly site: TableSite,
  ) {}

  /**
   * Spends `cost` on `key` now, even beyond the burst, inserting the key if needed. Throws
   * `RangeError` when the key's state cannot hold that much debt (the horizon, as for `reserve`:
   * nothing is spent) and `TableFullError` when the table has no slot for a new key.
   */
  penalty(key: string, cost: number): KeyState {
    let entry = this.site.find(key);
    for (;;) {
      if (entry === undefined) throw new TableFullError(key);
      const outcome = this.one.penalize(entry, cost);
      if (outcome === TOO_LONG) {
        throw new RangeError(`penalty(${JSON.stringify(key)}, ${cost}) would put the key further ahead than its state can hold ` +
          `(${this.one.waitMs() === Infinity ? 'past the horizon' : `a wait of ${this.one.waitMs()} ms`}); nothing was spent`);
      }
      if (outcome !== RELOCATE) return this.#state();
      entry = this.site.findAgain(key);
    }
  }

  /**
   * Gives back `cost` intervals of `key`'s debt, never below fresh. The key's state after, or
   * null when the table holds none for it (nothing to give back).
   */
  reward(key: string, cost: number): KeyState | null {
    for (let entry = this.site.peek(key); entry !== undefined; entry = this.site.peekAgain(key)) {
      // Given back, or nothing was ahead: the state the decision saw.
      if (this.one.reward(entry, cost) !== RELOCATE) return this.#state();
    }
    return null;
  }

  /**
   * A spend's give-back: `reward`, no more than what of a spend decided at the reading `sinceMs`
   * is still ahead, and nothing after a reset or block of the key since its decision: `mark` is
   * the reset mark of the slot at `base`, read before that decision (Gcra32.giveBack). Nothing
   * when the table holds no slot for the key, or holds it in another slot (the key left the
   * spend's slot: it was idle, and reclaimed, since).
   */
  giveBack(key: string, cost: number, sinceMs: number, mark: number, base: number): void {
    for (let entry = this.site.peek(key); entry !== undefined; entry = this.site.peekAgain(key)) {
      if (entry.base !== base || this.one.giveBack(entry, cost, sinceMs, mark) !== RELOCATE) return;
    }
  }

  /**
   * Refuses every request on `key` for `ms` from now (RateLimiter.block), inserting the key if
   * needed. Throws `TypeError`/`RangeError` for a bad `ms`, `RangeError` when the key's state
   * cannot hold the block (nothing written), `TableFullError` when the table has no slot for it.
   */
  block(key: string, ms: number): KeyState {
    checkBlockMs(ms);
    let entry = this.site.find(key);
    for (;;) {
      if (entry === undefined) throw new TableFullError(key);
      const outcome = this.one.block(entry, ms);
      if (outcome === TOO_LONG) {
        throw new RangeError(`block(${JSON.stringify(key)}, ${ms}) is longer than this limiter's key state holds ` +
          `(${this.maxBlockMs} ms at its width; make the limiter with a larger maxBlockMs); nothing was written`);
      }
      if (outcome !== RELOCATE) return this.#state();
      entry = this.site.findAgain(key);
    }
  }

  /** The longest block a key's state holds (maxBlockMsOf its parameters). */
  get maxBlockMs(): number {
    return maxBlockMsOf(this.p);
  }

  /** Gives back everything `key` owes: it reads as fresh. True if it owed anything. */
  reset(key: string): boolean {
    for (let entry = this.site.peek(key); entry !== undefined; entry = this.site.peekAgain(key)) {
      const outcome = this.one.reset(entry);
      if (outcome !== RELOCATE) return outcome === ALLOWED; // REFUSED: nothing was ahead, already fresh
    }
    return false;
  }

  #state(): KeyState {
    return { remaining: this.one.remaining(), resetAfterMs: this.one.resetMs() + this.one.leadMs };
  }
}

/**
 * The per-key controls on a RateLimiter of the lock-free engine: several limits, or one under a
 * global cap, or a window. penalty and block (GCRA): one `LockFreeEngine.force` over every key
 * limit, which only ever adds to them, so it races every decision on the key as another decision
 * would and is never taken back. reward (GCRA): `LockFreeEngine.giveBack`, the same pass giving
 * back; reset and unblock (every algorithm): `LockFreeEngine.reset`, every limit written fresh.
 * Both give back under the key's give-back guard, which keeps a decision's undo from taking back
 * what a give-back already gave back (give-back-guard.ts). A cap is neither charged, checked nor
 * given back.
 *
 * Thread-safety: one instance per limiter instance (per thread), as the engine it drives.
 */
export class LimitsControls {
  constructor(
    private readonly engine: LockFreeEngine,
    private readonly site: TableSite,
    /** The longest block every key limit holds, in ms (for the error message). */
    readonly maxBlockMs: number,
    /** The key limits' algorithm: every control on GCRA; on the windows, block only with a block word (maxBlockMs > 0). */
    readonly algorithm: AlgorithmName,
  ) {}

  /**
   * As OneLimitControls.penalty, on every key limit. On windows, under the key's give-back guard
   * (LockFreeEngine.forceGuarded): each window's count rises by `cost`, a fixed window's at most
   * to its permits.
   */
  penalty(key: string, cost: number): KeyState {
    // A penalty of cost 0 is a probe (force writes nothing): no guard, no epoch moved, so that no
    // decision's undo keeps a spend for it (found by an attack: a refused request stayed charged).
    if (this.algorithm !== 'gcra' && cost > 0) {
      this.#forceGuarded(key, cost);
      return this.#state();
    }
    if (!this.#force(key, cost, -1)) {
      throw new RangeError(`penalty(${JSON.stringify(key)}, ${cost}) would put the key further ahead than its state can hold; nothing was spent`);
    }
    return this.#state();
  }

  /**
   * As OneLimitControls.block, on every key limit: each refuses until the block's end; on windows,
   * the key's block word (made with maxBlockMs: block-until.ts) does, to the whole second. Lock-free:
   * it moves the key's epoch on before its commits (LockFreeEngine.force), so that a spend's
   * give-back (skipFailedRequests), which looks at the epoch on each try, gives nothing after it
   * and the block ends no earlier than asked (found by an attack: the give-back's reward lowered
   * it by an interval).
   */
  block(key: string, ms: number): KeyState {
    if (this.algorithm !== 'gcra' && this.maxBlockMs === 0) {
      throw new TypeError(`block() on a RateLimiter of '${this.algorithm}' needs a block word in each key's state (a window holds one window's ` +
        `count, not a time to refuse until): make the limiter with maxBlockMs`);
    }
    checkBlockMs(ms);
    // Windows: the key's block word (block-until.ts) holds any block up to maxBlockMs's bound.
    if (this.algorithm !== 'gcra' && ms > this.maxBlockMs) {
      throw new RangeError(`block(${JSON.stringify(key)}, ${ms}) is longer than this limiter's key state holds (${this.maxBlockMs} ms); nothing was written`);
    }
    if (!this.#force(key, 1, ms)) {
      throw new RangeError(`block(${JSON.stringify(key)}, ${ms}) is longer than this limiter's key state holds ` +
        `(${this.maxBlockMs} ms; make the limiter with a larger maxBlockMs); nothing was written`);
    }
    return this.#state();
  }

  /**
   * Gives back `cost` intervals on every key limit, never below fresh. The key's state after, or
   * null when the table holds none for it.
   */
  reward(key: string, cost: number): KeyState | null {
    return this.#giveBack(key, cost) ? this.#state() : null;
  }

  /**
   * Gives back everything `key` owes on every key limit, every algorithm: it reads as fresh. True
   * if it owed anything; a key the table does not hold is not inserted.
   */
  reset(key: string): boolean {
    const site = this.site;
    for (let entry = site.peek(key); entry !== undefined; entry = site.peekAgain(key)) {
      const outcome = this.engine.reset(entry, entry.base + site.stateOffset);
      if (outcome !== RELOCATE) return outcome === OWED;
    }
    return false;
  }

  /**
   * A reward that gives back only at a reading for which `within` holds, if given
   * (LockFreeEngine.giveBack: a spend that must not be given back in a later window than its
   * own), and only on the slot and state that counted it (`mark`: no reset since).
   */
  rewardWithin(key: string, cost: number, within: ((ms: number) => boolean) | null, mark: SpendMark): void {
    this.#giveBack(key, cost, within, mark);
  }

  /**
   * A reward on the key's slot, found again while it moves; false when the table holds no slot
   * for it. With `mark` (a spend's give-back), only on the slot and key state that counted it.
   */
  #giveBack(key: string, cost: number, within: ((ms: number) => boolean) | null = null, mark: SpendMark | null = null): boolean {
    const site = this.site;
    for (let entry = site.peek(key); entry !== undefined; entry = site.peekAgain(key)) {
      if (this.engine.giveBack(entry, entry.base + site.stateOffset, cost, within, mark) !== RELOCATE) return true;
    }
    return false;
  }

  /** A window penalty on the key's slot (inserting it), found again while it moves. */
  #forceGuarded(key: string, cost: number): void {
    const site = this.site;
    let entry = site.find(key);
    for (;;) {
      if (entry === undefined) throw new TableFullError(key);
      if (this.engine.forceGuarded(entry, entry.base + site.stateOffset, cost) !== RELOCATE) return;
      entry = site.findAgain(key);
    }
  }

  /** Forces the penalty or block on the key's slot (inserting it), found again while it moves; false past the horizon. */
  #force(key: string, cost: number, blockMs: number): boolean {
    const site = this.site;
    let entry = site.find(key);
    for (;;) {
      if (entry === undefined) throw new TableFullError(key);
      if (this.engine.force(entry, entry.base + site.stateOffset, cost, blockMs) !== RELOCATE) return this.engine.result.allowed;
      entry = site.findAgain(key);
    }
  }

  #state(): KeyState {
    const r = this.engine.result;
    return { remaining: r.remaining, resetAfterMs: r.resetAfterMs };
  }
}

/** `block`'s `ms`: a number of ms from 0 to 2^53; TypeError or RangeError naming it. */
export function checkBlockMs(ms: number): void {
  if (typeof ms !== 'number') throw new TypeError(`ms must be a number, got ${describe(ms)}`);
  if (!(ms >= 0 && ms <= MAX_CLOCK_MS)) throw new RangeError(`ms must be 0 to 2^53, got ${describe(ms)}`);
}

/**
 * `reset`, `penalty` and `reward` on a RateLimiter whose decisions take the key's lock (a sliding
 * log, with or without other limits and a cap). A penalty or reward forces every limit in the
 * prepare step (forced-state.ts forceUnderLock, SlidingLog.force). A reset: under the key's lock,
 * every limit of the key is written fresh (the locked protocol's `Prepare` step, FreshState: read,
 * check the lock is still held, write by compareExchange from what was read; a log its own way,
 * `SlidingLog.writeFresh`; each limit once over the tries), then a decision of cost 0 follows
 * and writes nothing. Every decision on the key takes the same lock, so the reset falls between
 * two of them: exact. A global cap keeps what the key spent (the admissions happened).
 * PolicyLimiter's reset is the same steps. A reset and a reward hold a guarded lock
 * (table/slot-lock.ts).
 *
 * Thread-safety: one instance per limiter instance (per thread), as the engine it drives.
 */
export class LockedControls {
  readonly #engine: LockedEngine;
  readonly #key: LimitGroup;
  readonly #site: TableSite;
  readonly #fresh: FreshState;
  // The slot being reset, for #prepare (a bound method: no closure per call).
  #state = 0;
  #lastSec = 0;
  readonly #prepare: Prepare = (w, m, holds) => this.#resetPrepare(w, m, holds);
  // A penalty's or reward's cost (negative: a reward), the limits its tries committed, and its prepare step.
  #forceCost = 0;
  readonly #progress = { landed: 0 };
  readonly #force: Prepare = (w, m, holds) => this.#forceAll(w, m, holds);
  readonly #verdict: Verdict = { allowed: true, remaining: 0, waitMs: 0, resetMs: 0, latestMs: Infinity, detail: true };

  constructor(engine: LockedEngine, key: LimitGroup, site: TableSite) {
    this.#engine = engine;
    this.#key = key;
    this.#site = site;
    this.#fresh = new FreshState(key.words);
  }

  /**
   * A penalty on every limit of `key` (inserting it), under the key's lock: a decision of cost 0
   * whose prepare step forces each limit (forced-state.ts `forceUnderLock`; a sliding log spends
   * at most its permits: SlidingLog.force). The key's state after.
   */
  penalty(key: string, cost: number): KeyState {
    const site = this.#site;
    for (let entry = site.find(key); ; entry = site.findAgain(key)) {
      if (entry === undefined) throw new TableFullError(key);
      if (this.#forced(entry, cost)) return this.#after();
    }
  }

  /** A reward (`cost` given back on every limit, never below fresh) under the key's lock; null when the table holds no state for the key. */
  reward(key: string, cost: number): KeyState | null {
    const site = this.#site;
    for (let entry = site.peek(key); entry !== undefined; entry = site.peekAgain(key)) {
      if (this.#forced(entry, -cost)) return this.#after();
    }
    return null;
  }

  /** Forces `cost` (a reward when negative) on the key at `entry`; false when its slot moved. */
  #forced(entry: SlotRef, cost: number): boolean {
    this.#state = entry.base + this.#site.stateOffset;
    this.#lastSec = entry.base + S_LAST_SEC;
    this.#forceCost = cost;
    this.#progress.landed = 0; // this slot's tries (forceUnderLock): a slot found moved starts over
    this.#engine.detail = true;
    // A reward writes the state over what it read (a log's entries cleared): under a guarded token
    // (table/slot-lock.ts); a penalty only adds.
    this.#engine.guarded = cost < 0;
    try {
      return this.#engine.decide(entry.base, entry.ctrl, this.#state, 0, this.#key, this.#force) !== RELOCATE;
    } finally {
      this.#forceCost = 0;
      this.#engine.guarded = false;
    }
  }

  /** The key's state after the last forced decision: its probe of cost 0, after the prepare step forced it. */
  #after(): KeyState {
    const r = this.#engine.result;
    return { remaining: r.remaining, resetAfterMs: r.resetAfterMs };
  }

  /** Gives back everything `key` owes: it reads as fresh. True if it owed anything; a key the table does not hold is not inserted. */
  reset(key: string): boolean {
    const site = this.#site;
    for (let entry = site.peek(key); entry !== undefined; entry = site.peekAgain(key)) {
      this.#state = entry.base + site.stateOffset;
      this.#lastSec = entry.base + S_LAST_SEC;
      this.#fresh.wrote = false;
      this.#fresh.landed = 0; // each limit written fresh once, whatever the tries (FreshState)
      // Whether it owed anything: whether some try wrote. A try whose lock was taken over may
      // have written before it found out (its compareExchanges land when nobody wrote since it
      // read: the reset then took effect there) and the next try then finds the key fresh.
      // Found by the explorer (locked-reset, deep bounds): such a reset answered false.
      // Under a guarded token: a reset writes the state over what it read (table/slot-lock.ts).
      this.#engine.guarded = true;
      try {
        if (this.#engine.decide(entry.base, entry.ctrl, this.#state, 0, this.#key, this.#prepare) !== RELOCATE) return this.#fresh.wrote;
      } finally {
        this.#engine.guarded = false;
      }
    }
    return false;
  }

  /**
   * The prepare step of a penalty or reward (under the key's lock, at reading `m`): every limit
   * forced and committed (forceUnderLock). False when the lock was lost (the engine decides
   * again, and forces again).
   */
  #forceAll(w: Int32Array, m: Moment, holds: () => boolean): boolean {
    return forceUnderLock(w, this.#state, this.#lastSec, this.#key, m, holds, this.#forceCost, -1, this.#verdict, this.#progress) !== LOCK_LOST;
  }

  /**
   * The Prepare step (under the key's lock, at reading `m`): reads every word, judges whether the
   * key owes anything (a limit not idle), then, while the lock is still ours, writes it fresh.
   */
  #resetPrepare(w: Int32Array, m: Moment, holds: () => boolean): boolean {
    const g = this.#key;
    const state = this.#state;
    this.#fresh.read(w, state, g);
    // Atomics.load of lastSec under the key's lock: only a holder's commit raises it.
    const lastSec = Atomics.load(w, this.#lastSec);
    const owes = g.algorithms.some((a, i) => !a.idle(w, state + (g.offsets[i] as number), m, isStale(m.sec, lastSec, a.staleSec)));
    if (!owes) return true; // already fresh: nothing to write
    return holds() && this.#fresh.write(w, state, g, m, true);
  }
}
