import { ForwardClock, type Clock } from '../time/clock.js';
import type { AlgorithmName, Moment } from '../algorithms/index.js';
import { ceilPs, floorDiv, maxWaitTicks, ticksToMs } from '../time/ticks.js';
import { secondsAt } from '../time/stamps.js';
import { type GcraParams } from '../math/gcra.js';
import { ALLOWED, WideGcra } from './gcra-wide.js';
import { Gcra32 } from './gcra-32.js';
import { LimitsControls, LockedControls, OneLimitControls } from './key-controls.js';
import { once } from './once.js';
import {
  assertWorkerThread, checkWaitOptions, HeldReservation, retryAt, sleepUntil, sleepUntilSync, unheldReservation, type AcquireOptions,
  type AcquireSyncOptions, type Reservation, type ReserveOptions,
} from './waiting.js';
import { RateLimitTimeoutError, TableFullError } from '../errors.js';
import { type Limit } from '../config/limit.js';
import { compileConfig, epochOffsetOf, limitsMaxBlockMs, parseConfig, readConfig, writeConfig, type LimiterConfig } from './limiter-config.js';
import { limitStates } from './limit-set.js';
import { LockedEngine } from './locked-engine.js';
import { LockFreeEngine } from './lockfree-engine.js';
import { lockFreeSlotState } from './lockfree-reclaim.js';
import { engineChoice } from './engine-choice.js';
import { GLOBAL_HEADER_WORDS, H_FORCE_LOCKED, H_GLOBAL_BASE } from '../table/layout.js';
import { MarkGuard, NO_MARK, resetMark } from '../table/reset-marks.js';
import { RELOCATE, type SlotIndex } from '../table/slot-index.js';
import type { SlotRef } from '../table/slot-ref.js';
import { AttachRequest, attachRequest, checkOptionsObject, checkRequest, createTable, TableSite } from '../table/table-site.js';
import { parseTableOptions } from '../table/table-options.js';
import { namesOf } from '../config/option-names.js';

export type {
  AttachOptions, Decision, DecisionReason, KeyState, LimitState, RateLimiterHandle, RateLimiterOptions, RateLimiterStats, TableGauges,
} from './types.js';
import type { AttachOptions, Decision, DecisionReason, KeyState, RateLimiterHandle, RateLimiterOptions, RateLimiterStats, TableGauges } from './types.js';
import { decisionHookOf, tellDecision, type DecisionHook } from './decision-hook.js';

const OPTION_NAMES = namesOf<RateLimiterOptions>()([
  'limit', 'algorithm', 'globalLimit', 'maxLogSize', 'maxBlockMs', 'maxKeys', 'clock', 'onFull', 'maxKeyBytes', 'cacheSize', 'claimTimeoutMs', 'hashSeed',
  'forceHash', 'slotsPerKey', 'onDecision',
]);

/** Set by RateLimiter's static block: the give-back helpers below, for a limiter (they read its privates). */
let windowGiveBackOf: (limiter: RateLimiter, key: string, cost: number) => () => void;
let spendGiveBackOf: (limiter: RateLimiter, key: string, cost: number) => () => void;
let markedTryAcquireOf: (limiter: RateLimiter, key: string, cost: number) => Decision;
let givingBackTryAcquireOf: (limiter: RateLimiter, key: string, cost: number) => [Decision, (() => void) | undefined];
let windowsOf: (limiter: RateLimiter) => boolean;

/**
 * Whether `limiter` can give an admission back in its own windows (`windowGiveBack`): fixed or
 * sliding windows on the lock-free paths.
 * @internal
 */
export function givesBackInWindows(limiter: RateLimiter): boolean {
  return windowsOf(limiter);
}

/**
 * For the HTTP give-backs (skipSuccessfulRequests, skipFailedRequests; http/give-back.ts) on a
 * RateLimiter of fixed or sliding windows on its lock-free paths. Made on the limiter's thread
 * right after the admission it is for, while that is the limiter's latest decision (the middleware
 * makes it through `givingBackTryAcquire`, before the hook runs): a give-back of `cost` that
 * lands only in the windows that admission was counted in. It gives nothing at a reading in a
 * later window of any limit, nor into a window stored ahead of its reading (LockFreeEngine.giveBack's
 * `within`, judged at the reading its commit is made at), so a spend never comes back as room in
 * a window it was not taken from.
 * @internal
 */
export function windowGiveBack(limiter: RateLimiter, key: string, cost: number): () => void {
  return windowGiveBackOf(limiter, key, cost);
}

/**
 * The HTTP give-back of a GCRA RateLimiter's latest admission (`cost` on `key`, decided by
 * `markedTryAcquire`; made on the limiter's thread right after it, before anything else decides
 * there: the middleware makes it through `givingBackTryAcquire`): a reward of no more than
 * what of that admission's spend is still ahead when it runs (math/gcra.ts `unspentTicks`, from
 * the admission's reading): what has drained stays spent. A reset or block of the key since gives
 * nothing (its fresh state counts only later admissions): on the engine's paths (several limits, a
 * cap) the give-back carries the admission's SpendMark; on the one-limit path, whose word is the
 * state alone, the reset mark of the key's slot that `markedTryAcquire` read before the decision
 * (table/reset-marks.ts). After a one-limit decision that read no mark, it gives nothing.
 * @internal
 */
export function spendGiveBack(limiter: RateLimiter, key: string, cost: number): () => void {
  return spendGiveBackOf(limiter, key, cost);
}

/**
 * `tryAcquire` for an admission that `spendGiveBack` may give back (skipSuccessfulRequests and
 * skipFailedRequests on GCRA, through `givingBackTryAcquire`). On the one-limit path it loads the reset
 * mark of the key's slot before the decision, for the give-back to tell whether a reset or block
 * of the key came after the spend. A mark loaded after the decision could miss one: a reset that
 * wrote after the spend's commit and finished before that load would read as one before it.
 * Elsewhere `tryAcquire` itself: the engines' give-back epoch marks their spends (spendMark).
 * @internal
 */
export function markedTryAcquire(limiter: RateLimiter, key: string, cost: number): Decision {
  return markedTryAcquireOf(limiter, key, cost);
}

/**
 * The middleware's check when it may give the spend back (skipSuccessfulRequests,
 * skipFailedRequests): `markedTryAcquire` on GCRA, `tryAcquire` on windows, and for an admission
 * (allowed, `cost` > 0, reason 'allowed') its give-back, `spendGiveBack` or `windowGiveBack`, made
 * before the limiter's onDecision hook is told. Made after it, as two calls would, a hook that
 * decides on the same limiter would be the latest decision the give-back reads: bounded by the
 * hook's later reading, or in its later window, it gave back more than the spend left (found).
 * @internal
 */
export function givingBackTryAcquire(limiter: RateLimiter, key: string, cost: number): [Decision, (() => void) | undefined] {
  return givingBackTryAcquireOf(limiter, key, cost);
}

/**
 * A GCRA rate limiter whose per-key state lives in shared memory. Create it once, pass `handle`
 * to workers, and `RateLimiter.attach(handle)` there: every instance sees and changes one state.
 *
 * Thread-safety: `tryAcquire`, `allow`, `sweep` and `stats` may run at the same time on any
 * number of threads over the same handle; no call takes a lock or waits for another thread. One
 * *instance* belongs to the thread that made it (it keeps a small per-thread cache).
 */
export class RateLimiter {
  static {
    windowGiveBackOf = (limiter, key, cost) => limiter.#windowGiveBack(key, cost);
    spendGiveBackOf = (limiter, key, cost) => limiter.#spendGiveBack(key, cost);
    markedTryAcquireOf = (limiter, key, cost) => limiter.#markedTryAcquire(key, cost);
    givingBackTryAcquireOf = (limiter, key, cost) => limiter.#givingBackTryAcquire(key, cost);
    windowsOf = (limiter) => limiter.#limitsControls !== null && (limiter.algorithm === 'fixed-window' || limiter.algorithm === 'sliding-window');
  }

  /** The first (often the only) limit. */
  limit!: Readonly<Required<Limit>>;
  /** Every per-key limit, in order. */
  limits!: readonly Readonly<Required<Limit>>[];
  /** The global cap, if any. */
  globalLimit!: Readonly<Required<Limit>> | null;
  /** The algorithm every limit runs. */
  algorithm!: AlgorithmName;
  #site!: TableSite;
  #clock!: Clock;
  /** The clock as the engines read it: never earlier than this instance's latest reading (see Clock). */
  #forward!: ForwardClock;
  #p!: GcraParams;
  #engine: LockedEngine | LockFreeEngine | null = null;
  /** The one-limit GCRA path (one limit, no cap), at width 32 or 64. */
  #one: Gcra32 | WideGcra | null = null;
  /** `#one` when it is a Gcra32: its first checks are admitted by their insert (#decideFirst). */
  #fresh: Gcra32 | null = null;
  /** penalty, reward, reset, block and unblock on the one-limit path (null on the others). */
  #controls: OneLimitControls | null = null;
  /** reset on the locked configurations (a sliding log); null on the others. */
  #lockedControls: LockedControls | null = null;
  /** penalty and block on several lock-free GCRA limits, or one under a cap (null elsewhere). */
  #limitsControls: LimitsControls | null = null;
  #moment: Moment = { ms: 0, sec: 0 };
  #index!: SlotIndex;
  // The reason of the last #decide call, read by tryAcquire (avoids allocating on `allow`).
  #reason: DecisionReason = 'allowed';
  /** The decision hook (options.onDecision), for the decisions not made through #tell's wrappers; null without one. */
  #hook: DecisionHook | null = null;
  /**
   * The reset mark and the slot of the latest `markedTryAcquire` on the one-limit path, loaded
   * before its decision, for the give-back of its spend (`spendGiveBack`, which takes them).
   */
  #spendMark = NO_MARK;
  #spendBase = -1;

  constructor(options: RateLimiterOptions);
  /** @internal `attach`'s way in (see AttachRequest). */
  constructor(options: RateLimiterOptions | AttachRequest<RateLimiterHandle>);
  constructor(options: RateLimiterOptions | AttachRequest<RateLimiterHandle>) {
    if (options instanceof AttachRequest) {
      this.#setup(TableSite.attached(options, 'RateLimiter'), options.cacheSize, null);
      this.#tell(options.option('onDecision') as DecisionHook | undefined);
      return;
    }
    checkOptionsObject(options, OPTION_NAMES, 'RateLimiter', '{ limit, maxKeys }');
    const onDecision = decisionHookOf<string>(options.onDecision);
    const config = parseConfig(options);
    const t = parseTableOptions(options);
    // Every check above passed: only now is memory allocated. The buffer is not shared yet, so
    // plain writes fill its header; attach() reads everything back from there.
    const compiled = compileConfig(config);
    const wide = compiled.fast?.width === 64;
    // Width 32 keeps its TAT in the slot's tat word; width 64 in two aligned state words. The
    // lock-free engine's keys keep a give-back epoch after theirs (epochOffsetOf).
    const stateWords = compiled.fast ? (wide ? 2 : 0) : compiled.key.words + (epochOffsetOf(compiled) >= 0 ? 1 : 0);
    const globalWords = compiled.global?.words ?? 0;
    const align8 = wide || compiled.key.align8 || compiled.global?.align8 === true;
    const buffer = createTable(t, { stateWords, globalWords, align8, tableClass: 'RateLimiter' });
    const w = new Int32Array(buffer);
    writeConfig(w, config, compiled);
    w[H_FORCE_LOCKED] = engineChoice.forceLocked ? 1 : 0;
    this.#setup(TableSite.created(buffer, 'RateLimiter', t.clock), t.cacheSize, config);
    this.#tell(onDecision);
  }

  /**
   * Gives this instance its decision hook: `allow` and `tryAcquire` of its own that decide, then
   * tell the hook. An instance without one runs the class's methods, which never look for a hook:
   * with a test of a field in them, allow measured 1-11% slower in same-run A/Bs whose A/A floor
   * was 2-5% (bench/RESULTS.md, observability), so not clearly free.
   */
  #tell(hook: DecisionHook | null | undefined): void {
    if (hook === null || hook === undefined) return;
    this.#hook = hook;
    const { allow, tryAcquire } = RateLimiter.prototype;
    this.allow = (key: string, cost = 1): boolean => {
      const allowed = allow.call(this, key, cost);
      tellDecision(hook, key, allowed, this.#reason, cost);
      return allowed;
    };
    this.tryAcquire = (key: string, cost = 1): Decision => {
      const d = tryAcquire.call(this, key, cost);
      tellDecision(hook, key, d.allowed, d.reason, cost);
      return d;
    };
  }

  #setup(site: TableSite, cacheSize: number | undefined, fresh: LimiterConfig | null): void {
    this.#site = site;
    const w = site.words;
    this.#clock = site.clock;
    this.#forward = new ForwardClock(site.clock);
    const config = fresh ?? readConfig(w);
    const compiled = compileConfig(config);
    this.algorithm = config.algorithm;
    this.limits = Object.freeze(config.limits.map((l) => Object.freeze({ ...l })));
    this.limit = this.limits[0] as Readonly<Required<Limit>>;
    this.globalLimit = config.globalLimit === null ? null : Object.freeze({ ...config.globalLimit });
    if (compiled.fast) {
      this.#p = compiled.fast;
      // Its give-backs hold their slot's reset mark guard while they write (table/reset-marks.ts).
      const guard = new MarkGuard(w, site.newOwner(), site.lockAges.reclaimAfterMs);
      const one = compiled.fast.width === 64
        ? new WideGcra(w, compiled.fast, this.#clock, site.stateOffset, guard)
        : new Gcra32(w, compiled.fast, this.#clock, guard);
      this.#one = one;
      if (one instanceof Gcra32) this.#fresh = one;
      site.open(one.slotState(), cacheSize);
    } else {
      const owner = site.newOwner();
      const now = (): Moment => this.#now();
      const raiseTo = (ms: number): void => this.#forward.raiseTo(ms);
      // Every limit commits in one compareExchange: no lock. A sliding log keeps one.
      const lockFree = compiled.key.lockFree && compiled.global?.lockFree !== false && w[H_FORCE_LOCKED] !== 1;
      const epochOffset = epochOffsetOf(compiled);
      site.open(lockFree
        ? lockFreeSlotState(compiled.key, site.stateOffset, owner, site.lockAges, now, epochOffset, raiseTo)
        : LockedEngine.slotState(compiled.key, site.stateOffset, owner, site.lockAges, now, raiseTo), cacheSize);
      const globalBase = w[H_GLOBAL_BASE] as number;
      const area = { lock: globalBase, lastSec: globalBase + 1, state: globalBase + GLOBAL_HEADER_WORDS };
      const global = compiled.global === null ? null : { group: compiled.global, area };
      if (global !== null && fresh !== null) LockedEngine.init(w, global.group, area, this.#now());
      const forward = this.#forward;
      const clock = (): number => forward.now();
      this.#engine = lockFree
        ? new LockFreeEngine(w, compiled.key, global, clock, { owner, ages: site.lockAges, epochOffset })
        : new LockedEngine(w, compiled.key, global, owner, site.lockAges, clock);
    }
    this.#index = site.index;
    if (this.#one !== null) this.#controls = new OneLimitControls(this.#one, this.#p, site);
    else if (this.#engine instanceof LockedEngine) this.#lockedControls = new LockedControls(this.#engine, compiled.key, site);
    else if (this.#engine instanceof LockFreeEngine) this.#limitsControls = new LimitsControls(this.#engine, site, limitsMaxBlockMs(config), config.algorithm);
  }

  /** One clock reading for a locked decision (reuses one object: no allocation per call). */
  #now(): Moment {
    const m = this.#moment;
    m.ms = this.#forward.now();
    m.sec = secondsAt(m.ms);
    return m;
  }

  /**
   * Returns a limiter over the same shared memory as the one that made `handle`, for use on this
   * thread. Throws `TypeError` for anything that is not a sluice handle.
   * Thread-safety: call it on the thread that will use the result.
   */
  static attach(handle: RateLimiterHandle, options?: AttachOptions): RateLimiter {
    decisionHookOf(options?.onDecision);
    return new RateLimiter(attachRequest(handle, options, 'RateLimiter'));
  }

  /** The structured-cloneable handle: pass it in `workerData`, `postMessage` or a piscina task. */
  get handle(): RateLimiterHandle {
    return this.#site.handle('sluice.RateLimiter');
  }

  /**
   * Checks `key` and, if the request passes, counts it, in one atomic step. `cost` is an integer
   * >= 0; 0 is a probe that answers without consuming anything. A refused request changes nothing.
   */
  tryAcquire(key: string, cost = 1): Decision {
    if (this.#engine) this.#engine.detail = true;
    const allowed = this.#decide(key, cost);
    const reason = this.#reason;
    if (reason === 'table-full') return this.#fullDecision(allowed);
    if (this.#engine) {
      const r = this.#engine.result;
      const e = this.#engine;
      const n = this.limits.length;
      // Waits from the clock's own reading: a decision at a later one (the clock stepped back)
      // adds what the clock needs to catch up.
      const lead = this.#engineLead();
      const retryAfterMs = allowed ? 0 : r.retryAfterMs + lead;
      const resetAfterMs = r.resetAfterMs + lead;
      if (n === 1) return { allowed, remaining: r.remaining, retryAfterMs, resetAfterMs, reason };
      return { allowed, remaining: r.remaining, retryAfterMs, resetAfterMs, reason, limits: limitStates(e.limitRemaining, e.limitResetMs, n) };
    }
    return this.#oneDecision(allowed, reason);
  }

  /** The Decision of a check the full table answered (`allowed` by onFull). */
  #fullDecision(allowed: boolean): Decision {
    const hintMs = this.#engine ? 0 : ticksToMs(this.#p.intervalTicks, this.#p);
    return { allowed, remaining: 0, retryAfterMs: allowed ? 0 : hintMs, resetAfterMs: 0, reason: 'table-full' };
  }

  /** The Decision of the one-limit path's latest decision. */
  #oneDecision(allowed: boolean, reason: DecisionReason): Decision {
    const one = this.#one as Gcra32 | WideGcra;
    const lead = one.leadMs;
    return { allowed, remaining: one.remaining(), retryAfterMs: allowed ? 0 : one.waitMs() + lead, resetAfterMs: one.resetMs() + lead, reason };
  }

  /** `markedTryAcquire` (above the class). */
  #markedTryAcquire(key: string, cost: number): Decision {
    const d = this.#markedDecision(key, cost);
    if (this.#hook !== null) tellDecision(this.#hook, key, d.allowed, d.reason, cost);
    return d;
  }

  /** `givingBackTryAcquire` (above the class). */
  #givingBackTryAcquire(key: string, cost: number): [Decision, (() => void) | undefined] {
    const gcra = this.algorithm === 'gcra';
    const d = gcra ? this.#markedDecision(key, cost) : RateLimiter.prototype.tryAcquire.call(this, key, cost);
    const admitted = d.allowed && cost > 0 && d.reason === 'allowed';
    const back = !admitted ? undefined : gcra ? this.#spendGiveBack(key, cost) : this.#windowGiveBack(key, cost);
    if (this.#hook !== null) tellDecision(this.#hook, key, d.allowed, d.reason, cost);
    return [d, back];
  }

  /** `markedTryAcquire`'s decision, without telling the hook. */
  #markedDecision(key: string, cost: number): Decision {
    const one = this.#one;
    // The class's own tryAcquire: an instance with a hook has one of its own that tells it.
    if (this.#controls === null || one === null) return RateLimiter.prototype.tryAcquire.call(this, key, cost);
    checkRequest(key, cost);
    const w = this.#site.words;
    // Not #decideFirst's way: a key new to the table is inserted fresh, then decided as a cached
    // key is, so that its mark is loaded before the decision that counts the spend.
    let entry = this.#index.cached(key) ?? this.#index.locate(key);
    let allowed: boolean;
    for (;;) {
      if (entry === undefined) {
        this.#spendMark = NO_MARK; // not an earlier slot's, after a relocation found the table full
        allowed = this.#full();
        break;
      }
      // The slot's reset mark (Atomics loads inside), before every compareExchange of the
      // decision: a reset whose write lands after the commit moves it after this load.
      this.#spendMark = resetMark(w, entry.base);
      this.#spendBase = entry.base;
      const outcome = one.decide(entry, cost);
      if (outcome !== RELOCATE) {
        allowed = outcome === ALLOWED;
        this.#reason = allowed ? 'allowed' : one.waitTicks === Infinity ? 'exceeds-burst' : 'limited';
        break;
      }
      entry = this.#relocate(key);
    }
    const reason = this.#reason;
    return reason === 'table-full' ? this.#fullDecision(allowed) : this.#oneDecision(allowed, reason);
  }

  /**
   * How far the engine's last decision was ahead of the clock's own reading (0 unless the clock
   * stepped back: see Clock).
   */
  #engineLead(): number {
    const lead = (this.#engine as LockedEngine | LockFreeEngine).nowMs - this.#forward.rawMs;
    return lead > 0 ? lead : 0;
  }

  /**
   * The state of `key` now, without spending and without inserting it: what a probe (`cost` 0)
   * reports, or null when the table holds no state for the key (it would start fresh, with its
   * whole burst). Any thread, at any time; a key idle but not yet swept reads as fresh.
   */
  get(key: string): KeyState | null {
    checkRequest(key, 0);
    // A null state: the key left its slot meanwhile; look again.
    for (let entry = this.#site.peek(key); entry !== undefined; entry = this.#site.peekAgain(key)) {
      const state = this.#engine ? this.#peekLimits(entry) : this.#peekOne(entry);
      if (state !== null) return state;
    }
    return null;
  }

  /**
   * Spends `cost` on `key` now, even beyond the burst (a penalty: the key waits longer), and
   * returns its state after. `cost` is an integer >= 0. Throws `RangeError` when the key's state
   * cannot hold that much debt (as `reserve` does past its horizon: nothing is spent),
   * and `TableFullError` when a new key finds no slot. On several limits every one spends it; a
   * global cap is never charged. On a window it adds to the window's count (a fixed window's at
   * most to its permits), on a sliding log entries at now, under the key's lock (at most its
   * permits): docs/rate-limiter.md.
   */
  penalty(key: string, cost: number): KeyState {
    checkRequest(key, cost);
    if (this.#lockedControls !== null) return this.#lockedControls.penalty(key, cost);
    if (this.#limitsControls !== null) return this.#limitsControls.penalty(key, cost);
    return this.#controlsFor('penalty').penalty(key, cost);
  }

  /**
   * Gives back `cost` intervals of what `key` has spent, never below a fresh key's state (a
   * reward), and returns its state after; null when the table holds no state for the key. Any
   * thread; under a short guard that decisions never take (docs/rate-limiter.md, Thread-safety;
   * a sliding log: under the key's lock). On several limits every one gives
   * back; a global cap keeps its spend. On a window it takes from the window's count, never below
   * 0; on a sliding log it removes the newest entries that still count.
   */
  reward(key: string, cost: number): KeyState | null {
    checkRequest(key, cost);
    if (this.#lockedControls !== null) return this.#lockedControls.reward(key, cost);
    if (this.#limitsControls !== null) return this.#limitsControls.reward(key, cost);
    return this.#controlsFor('reward').reward(key, cost);
  }

  /**
   * Gives back everything `key` has spent: it reads as a fresh key (a global cap keeps what it
   * spent). True if it owed anything; a key the table does not hold is not inserted. Any thread:
   * under a short guard on GCRA limits and windows, which decisions never take, under the key's
   * lock with a sliding log.
   */
  reset(key: string): boolean {
    checkRequest(key, 0);
    if (this.#lockedControls !== null) return this.#lockedControls.reset(key);
    if (this.#limitsControls !== null) return this.#limitsControls.reset(key);
    return this.#controlsFor('reset').reset(key);
  }

  /**
   * Refuses every request on `key` for `ms` from now (a ban), inserting the key if needed, and
   * returns its state after: refusals meanwhile report the time left as `retryAfterMs`, and a
   * request of cost 1 passes once the block is over. A key already refused longer keeps its
   * state. Any thread, lock-free. Throws `RangeError` for a block longer than the key's state
   * holds (nothing is written: make the limiter with `maxBlockMs`), `TableFullError` when a new
   * key finds no slot, and `TypeError` on the sliding log, and on windows made without
   * `maxBlockMs` (a window holds one window's count, not a time to refuse until: `maxBlockMs`
   * gives each key a block word, and the block then ends on the first whole second at or after
   * its end).
   */
  block(key: string, ms: number): KeyState {
    checkRequest(key, 0);
    if (this.#limitsControls !== null) return this.#limitsControls.block(key, ms);
    return this.#controlsFor('block').block(key, ms);
  }

  /** Ends a block of `key` (see `block`) by giving back everything it owes, as `reset` does. True if it owed anything. */
  unblock(key: string): boolean {
    checkRequest(key, 0);
    if (this.#limitsControls !== null) return this.#limitsControls.reset(key);
    return this.#controlsFor('unblock').reset(key);
  }

  #controlsFor(method: string): OneLimitControls {
    if (this.#controls !== null) return this.#controls;
    const what = this.algorithm !== 'gcra' ? `runs '${this.algorithm}'` : 'takes the key\'s lock on every decision';
    throw new TypeError(`${method}() is built for a RateLimiter of GCRA limits on its lock-free paths; this one ${what}`);
  }

  /** `get` on the one-limit GCRA path: a probe at the key's slot, or null when it moved. */
  #peekOne(entry: SlotRef): KeyState | null {
    const one = this.#one as Gcra32 | WideGcra;
    if (one.decide(entry, 0) === RELOCATE) return null;
    return { remaining: one.remaining(), resetAfterMs: one.resetMs() + one.leadMs };
  }

  /** `get` on the engines: a probe at the key's slot, or null when it moved. */
  #peekLimits(entry: SlotRef): KeyState | null {
    const engine = this.#engine as LockedEngine | LockFreeEngine;
    engine.detail = true;
    const stateBase = entry.base + this.#site.stateOffset;
    const outcome = engine instanceof LockFreeEngine ? engine.decide(entry, stateBase, 0) : engine.decide(entry.base, entry.ctrl, stateBase, 0);
    if (outcome === RELOCATE) return null;
    const n = this.limits.length;
    const state = { remaining: engine.result.remaining, resetAfterMs: engine.result.resetAfterMs + this.#engineLead() };
    return n === 1 ? state : { ...state, limits: limitStates(engine.limitRemaining, engine.limitResetMs, n) };
  }

  /** Like `tryAcquire`, but answers only `allowed` and allocates nothing. */
  allow(key: string, cost = 1): boolean {
    if (this.#engine) this.#engine.detail = false;
    return this.#decide(key, cost);
  }

  /**
   * Counts `cost` for `key` now and returns when it may act, even beyond the burst, in the
   * spirit of Go's `Reserve`: callers served this way are in arrival order. Throws
   * `RateLimitTimeoutError` when the wait would exceed `maxWaitMs` (nothing is counted) or
   * `cost` > burst (or a window's permits). GCRA limits hold a place any time ahead; a fixed or
   * sliding window counts the request in the reading's window or the next, so its waits end
   * within the next window. The sliding log cannot hold a place and throws `TypeError` (use
   * `acquire`).
   */
  reserve(key: string, options?: ReserveOptions): Reservation {
    const { cost, maxWaitMs } = checkWaitOptions(options, 'reserve');
    checkRequest(key, cost);
    return this.#reserve(key, cost, maxWaitMs);
  }

  /**
   * `acquire`'s place, held by `#reserve`: its one decision, which the hook is told of (admitted,
   * or refused as too long a wait, a cost over the burst, or a full table).
   */
  #held(key: string, cost: number, maxWaitMs: number): Reservation {
    const hook = this.#hook;
    if (hook === null) return this.#reserve(key, cost, maxWaitMs);
    let r: Reservation;
    this.#reason = 'allowed';
    try {
      r = this.#reserve(key, cost, maxWaitMs);
    } catch (e) {
      if (e instanceof RateLimitTimeoutError) tellDecision(hook, key, false, e.retryAfterMs === Infinity ? 'exceeds-burst' : 'limited', cost);
      else if (e instanceof TableFullError) tellDecision(hook, key, false, 'table-full', cost);
      throw e;
    }
    tellDecision(hook, key, true, (this.#reason as DecisionReason) === 'table-full' ? 'table-full' : 'allowed', cost);
    return r;
  }

  /** `reserve` with its arguments checked. */
  #reserve(key: string, cost: number, maxWaitMs: number): Reservation {
    if (this.#engine) {
      if (!this.#canReserve) {
        throw new TypeError(`reserve() cannot hold a place in a sliding log (its entries are the admissions themselves); ` +
          `this limiter runs ${this.algorithm}: use acquire(), which retries at the reported time`);
      }
      return this.#reserveLimits(key, cost, maxWaitMs);
    }
    const p = this.#p;
    const maxTicks = maxWaitTicks(maxWaitMs, p);
    const one = this.#one as Gcra32 | WideGcra;
    for (;;) {
      const entry = this.#index.cached(key) ?? this.#index.locate(key);
      if (entry === undefined) return this.#noSlot(key, cost);
      const outcome = one.reserve(entry, cost, maxTicks);
      if (outcome === RELOCATE) {
        this.#index.forget(key);
        continue;
      }
      // TOO_LONG, or REFUSED when cost > burst: nothing was counted.
      if (outcome !== ALLOWED) throw new RateLimitTimeoutError(key, one.waitMs() + one.leadMs, maxWaitMs);
      // It acts at the decision's reading plus its wait; from the clock's own reading that is
      // later by the lead (the clock stepped back: see Clock).
      const waitMs = one.waitMs();
      const held = this.#index.lasting(entry); // the refund may come after other lookups
      // The slot's reset mark read before the decision: a reset or block of the key since, and
      // the cancel gives nothing back (table/reset-marks.ts).
      const mark = one.reservedMark;
      // Where its slot ends: a cancel gives nothing while a later spend stacked on it may still
      // be waiting to act (math/gcra.ts laterMayAct).
      const end = one.reservedEnd;
      const refund = (): boolean => {
        const done = one.refund(held, cost, mark, end);
        // The refund's write is this thread's own: the key's cached record learns it, as a
        // decision's (else the next admissions would take it for another thread's, and load).
        if (done) this.#index.wrote(key, held);
        return done;
      };
      return new HeldReservation(key, cost, waitMs + one.leadMs, one.nowMs + waitMs, this.#clock, refund);
    }
  }

  /** A reservation for a key the full table has no slot for: onFull says (TableFullError). */
  #noSlot(key: string, cost: number): Reservation {
    this.#reason = 'table-full';
    if (!this.#site.allowWhenFull) throw new TableFullError(key);
    return unheldReservation(key, cost, this.#clock.now());
  }

  /** Whether `reserve` (and FIFO waiting) is available: every lock-free configuration. */
  get #canReserve(): boolean {
    return this.#engine === null || (this.#engine instanceof LockFreeEngine && this.#engine.canReserve);
  }

  /** The reservation over several limits, windows, or a global cap: the same contract as `reserve`. */
  #reserveLimits(key: string, cost: number, maxWaitMs: number): Reservation {
    const engine = this.#engine as LockFreeEngine;
    const stateOffset = this.#site.stateOffset;
    const slots = new Int32Array(2 * (this.limits.length + (this.globalLimit ? 1 : 0)));
    let entry = this.#index.cached(key) ?? this.#index.locate(key);
    for (;;) {
      if (entry === undefined) return this.#noSlot(key, cost);
      if (engine.reserve(entry, entry.base + stateOffset, cost, maxWaitMs, slots) !== RELOCATE) break;
      entry = this.#relocate(key);
    }
    const r = engine.result;
    const lead = this.#engineLead(); // the clock stepped back: see Clock
    if (!r.allowed) throw new RateLimitTimeoutError(key, r.retryAfterMs === Infinity ? Infinity : ceilPs(r.retryAfterMs + lead), maxWaitMs);
    const waitMs = ceilPs(r.retryAfterMs);
    // lasting: the refund may come after other lookups, which move the index's one view (SlotRef)
    // to their own keys' records.
    const found = this.#index.lasting(entry as SlotRef);
    // The slot's reset mark read before the decision: a reset or block of the key since, and the
    // cancel gives its key limits nothing back (LockFreeEngine.refund).
    const mark = engine.reservedMark;
    const refund = (): boolean => engine.refund(found.base, found.ctrl, found.base + stateOffset, cost, slots, mark);
    return new HeldReservation(key, cost, lead === 0 ? waitMs : ceilPs(waitMs + lead), engine.nowMs + waitMs, this.#clock, refund);
  }

  /**
   * Resolves once the request is admitted, waiting its turn. Rejects at once with
   * `RateLimitTimeoutError` when the wait would exceed `maxWaitMs` or `cost` > burst, and with
   * the signal's reason on abort; an aborted wait gives back what it had reserved. Waiters are
   * served in arrival order (each reserves its place), except on a sliding log, where they wait
   * for the reported retry time and try again.
   */
  async acquire(key: string, options?: AcquireOptions): Promise<void> {
    const { cost, maxWaitMs, signal } = checkWaitOptions(options, 'acquire');
    signal?.throwIfAborted();
    if (this.#canReserve) {
      checkRequest(key, cost);
      const r = this.#held(key, cost, maxWaitMs);
      if (r.delayMs === 0) return;
      try {
        await sleepUntil(this.#clock, r.actAtMs, signal);
      } catch (e) {
        r.cancel();
        throw e;
      }
      return;
    }
    const deadline = this.#clock.now() + maxWaitMs;
    for (let d = this.tryAcquire(key, cost); !d.allowed; d = this.tryAcquire(key, cost)) {
      if (d.reason === 'table-full') throw new TableFullError(key); // no wait frees a slot
      await sleepUntil(this.#clock, retryAt(key, d.retryAfterMs, this.#clock.now(), deadline, maxWaitMs), signal);
    }
  }

  /**
   * Like `acquire`, but blocks this worker thread with `Atomics.wait` until admitted (no
   * spinning). Throws `RateLimitTimeoutError` as `acquire` rejects; refuses the main thread.
   */
  acquireSync(key: string, options?: AcquireSyncOptions): void {
    assertWorkerThread('acquireSync()');
    const { cost, maxWaitMs } = checkWaitOptions(options, 'acquireSync');
    if (this.#canReserve) {
      checkRequest(key, cost);
      const r = this.#held(key, cost, maxWaitMs);
      if (r.delayMs > 0) sleepUntilSync(this.#clock, r.actAtMs);
      return;
    }
    const deadline = this.#clock.now() + maxWaitMs;
    for (let d = this.tryAcquire(key, cost); !d.allowed; d = this.tryAcquire(key, cost)) {
      if (d.reason === 'table-full') throw new TableFullError(key);
      sleepUntilSync(this.#clock, retryAt(key, d.retryAfterMs, this.#clock.now(), deadline, maxWaitMs));
    }
  }

  /** @internal The clock this limiter decides by (the HTTP adapters' ban counter follows it). */
  get decisionClock(): Clock {
    return this.#clock;
  }

  /** Reclaims the slots of idle keys (state equal to a fresh key's); returns how many. */
  sweep(): number {
    return this.#site.sweep();
  }

  /**
   * The table's gauges, from counts it keeps as it goes: O(1), for a metrics scrape (what
   * `stats()` counts by reading every slot). Shared by every thread's instance.
   */
  gauges(): TableGauges {
    return this.#site.gauges();
  }

  /** Counts live keys and capacity. O(capacity): for monitoring, not for every request. */
  stats(): RateLimiterStats {
    const retries = (this.#engine?.retries ?? 0) + (this.#one?.retries ?? 0);
    return { ...this.#site.report(retries), width: this.width };
  }

  /**
   * The width of the one-limit GCRA state: 32 (one int32 word per key) or 64 (a 64-bit word, for
   * limits that do not fit 32 bits: see docs/rate-limiter.md, Limits). `null` for several limits, a global
   * cap, and the window and log algorithms, whose GCRA limits each take the width they need.
   */
  get width(): 32 | 64 | null {
    return this.#one === null ? null : this.#p.width;
  }

  #decide(key: string, cost: number): boolean {
    checkRequest(key, cost);
    const index = this.#index;
    const cached = index.cached(key);
    if (cached === undefined && this.#fresh !== null) return this.#decideFirst(key, cost, this.#fresh);
    const entry = cached ?? index.locate(key);
    if (entry === undefined) return this.#full();
    if (this.#engine) return this.#decideLimits(key, cost, entry);
    return this.#decideOne(key, cost, entry);
  }

  /**
   * A check whose key is not cached, on the 32-bit one-limit path: the lookup that may insert the
   * key carries the request's cost, so that a key new to the table is admitted by its insert (its
   * fresh state counts the cost; Gcra32.pendingCost) instead of by a decision after it.
   */
  #decideFirst(key: string, cost: number, one: Gcra32): boolean {
    const index = this.#index;
    one.pendingCost = cost;
    let entry: SlotRef | undefined;
    try {
      entry = index.locate(key);
    } finally {
      one.pendingCost = 0;
    }
    if (entry === undefined) return this.#full();
    if (index.insertedLast && one.tookFresh(entry)) {
      this.#reason = 'allowed';
      return true;
    }
    return this.#decideOne(key, cost, entry);
  }

  /** Drops `key`'s cached slot and finds it again (undefined: the table is full). */
  #relocate(key: string): SlotRef | undefined {
    return this.#site.findAgain(key);
  }

  /** The one-limit GCRA path, at either width (gcra-32.ts, gcra-wide.ts). */
  #decideOne(key: string, cost: number, found: SlotRef): boolean {
    const one = this.#one as Gcra32 | WideGcra;
    let entry = found;
    for (;;) {
      const outcome = one.decide(entry, cost);
      if (outcome !== RELOCATE) {
        this.#reason = outcome === ALLOWED ? 'allowed' : one.waitTicks === Infinity ? 'exceeds-burst' : 'limited';
        return outcome === ALLOWED;
      }
      const again = this.#relocate(key);
      if (again === undefined) return this.#full();
      entry = again;
    }
  }

  /** Several limits, the window and log algorithms, or a global cap (lockfree-engine.ts, locked-engine.ts). */
  #decideLimits(key: string, cost: number, found: SlotRef): boolean {
    const engine = this.#engine as LockedEngine | LockFreeEngine;
    const stateOffset = this.#site.stateOffset;
    for (let entry = found; ;) {
      // The lock-free engine takes the cached slot reference itself (it keeps a per-thread bound in it).
      const stateBase = entry.base + stateOffset;
      const outcome = engine instanceof LockFreeEngine ? engine.decide(entry, stateBase, cost) : engine.decide(entry.base, entry.ctrl, stateBase, cost);
      if (outcome !== RELOCATE) break;
      const again = this.#relocate(key);
      if (again === undefined) return this.#full();
      entry = again;
    }
    const r = engine.result;
    this.#reason = r.allowed ? 'allowed' : r.refusedBy === 'global' ? 'global-limit' : r.never ? 'exceeds-burst' : 'limited';
    return r.allowed;
  }

  /** `spendGiveBack` (above). */
  #spendGiveBack(key: string, cost: number): () => void {
    const controls = this.#limitsControls;
    if (controls === null) {
      // The one-limit path: a reward bounded by the admission's reading, as every GCRA give-back.
      const one = this.#controlsFor('reward');
      const sinceMs = (this.#one as Gcra32 | WideGcra).readingMs;
      // The mark markedTryAcquire loaded before the admission, taken: a later give-back made
      // after a decision that loaded none gives nothing.
      const mark = this.#spendMark;
      const base = this.#spendBase;
      this.#spendMark = NO_MARK;
      // Once: the one-limit word has no epoch to stop a second call (found: a closure called
      // twice gave its spend back twice; the middleware calls it once).
      return once(() => {
        one.giveBack(key, cost, sinceMs, mark, base);
      }, undefined);
    }
    const mark = (this.#engine as LockFreeEngine).spendMark();
    return () => controls.rewardWithin(key, cost, null, mark);
  }

  /** `windowGiveBack` (above): the windows of the latest decision's reading, one per limit. */
  #windowGiveBack(key: string, cost: number): () => void {
    const controls = this.#limitsControls;
    if (controls === null || !windowsOf(this)) {
      throw new TypeError(`a window give-back is for a RateLimiter of fixed or sliding windows on its lock-free paths; this one runs '${this.algorithm}'`);
    }
    const engine = this.#engine as LockFreeEngine;
    const at = engine.nowMs;
    // Where the admission counted, and the key's give-back epoch before it: a reset since (it
    // wrote the state fresh, which then counts later admissions) leaves nothing to give back.
    const mark = engine.spendMark();
    const periods = this.limits.map((l) => l.periodMs);
    const windows = periods.map((p) => floorDiv(at, p));
    // Every limit's window as the algorithms number them (floorDiv of the reading): a give-back
    // at a reading in no later window of any limit, whose limits find no window stored ahead of
    // that reading (LockFreeEngine.giveBack), lands in the admission's windows. A window stored
    // ahead is another decision's later one, which a reading behind it (a clock stepped back)
    // still finds: nothing goes there (nor, then, into an admission's own window stored ahead).
    const within = (ms: number): boolean => {
      for (let i = 0; i < periods.length; i++) if (floorDiv(ms, periods[i] as number) > (windows[i] as number)) return false;
      return true;
    };
    return () => controls.rewardWithin(key, cost, within, mark);
  }

  #full(): boolean {
    this.#reason = 'table-full';
    return this.#site.allowWhenFull;
  }

}
