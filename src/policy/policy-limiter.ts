import type { Moment, Verdict } from '../algorithms/index.js';
import { isStale, secondsAt, unitsAhead } from '../time/stamps.js';
import { floorDiv } from '../time/ticks.js';
import type { Limit } from '../config/limit.js';
import { ForwardClock, type Clock } from '../time/clock.js';
import { describe, integerInRange } from '../config/check.js';
import { DEFAULT_MAX_LOG_SIZE } from '../rate/limiter-config.js';
import { LockedEngine, type Prepare } from '../rate/locked-engine.js';
import { FreshState } from '../rate/fresh-state.js';
import { FORCED, forceUnderLock, LOCK_LOST, PAST_HORIZON } from '../rate/forced-state.js';
import { checkBlockMs } from '../rate/key-controls.js';
import { once } from '../rate/once.js';
import { NO_MARK, resetDone, resetMark, resetSince, resetting } from '../table/reset-marks.js';
import { RELOCATE } from '../table/slot-index.js';
import { limitStates } from '../rate/limit-set.js';
import { blockable, checkPolicyRequest, compileRules, match, type CompiledRule, type CompiledRules, type PolicyRule } from './rules.js';
import { BlockUntil } from '../algorithms/block-until.js';
import { createRulesStore, halfStamp, readRules, storeCapacity, storeVersion, writeRules } from './rules-store.js';
import { newer, NO_SHAPE, shapePair, ticksMatch, writesState } from './pair-shape.js';
import type { AttachOptions, Decision, DecisionReason, KeyState, RateLimiterOptions, RateLimiterStats, TableGauges } from '../rate/rate-limiter.js';
import { decisionHookOf, tellDecision, type DecisionHook } from '../rate/decision-hook.js';
import { checkWaitOptions, retryAt, sleepUntil, type AcquireOptions } from '../rate/waiting.js';
import { TableFullError } from '../errors.js';
import { namesOf } from '../config/option-names.js';
import { DEAD, H_MAX_LOG_SIZE, H_BLOCK_SEC, H_STATE_WORDS, H_WINDOW_BLOCK, S_LAST_SEC, S_TAT } from '../table/layout.js';
import { lockAges, retireLocked } from '../table/slot-lock.js';
import type { SlotState } from '../table/table.js';
import type { ReclaimFloor } from '../table/reclaim-floor.js';
import { parseTableOptions } from '../table/table-options.js';
import { AttachRequest, attachRequest, checkOptionsObject, createTable, TableSite } from '../table/table-site.js';

export type { PolicyRule } from './rules.js';

/** Who is asking: each (user, api) pair has its own state. */
export interface PolicyRequest {
  user: string;
  api: string;
}

/**
 * Options for `new PolicyLimiter`. `maxKeys` counts (user, api) pairs; `clock`, `onFull`,
 * `slotsPerKey`, `maxLogSize`, `claimTimeoutMs` (also how long a dead lock holder blocks a pair),
 * `cacheSize` and `hashSeed` mean what they mean for RateLimiter, with the same defaults.
 */
export interface PolicyLimiterOptions
  extends Pick<RateLimiterOptions, 'maxKeys' | 'clock' | 'onFull' | 'slotsPerKey' | 'maxLogSize' | 'claimTimeoutMs' | 'cacheSize' | 'hashSeed'> {
  /** Called on this thread after each decision, with the request (see RateLimiterOptions.onDecision). */
  onDecision?: DecisionHook<PolicyRequest>;
  /** The rules; exactly one has neither `user` nor `api` (the default). */
  rules: readonly PolicyRule[];
  /** Longest user + api, in UTF-8 bytes plus a few for the length prefix. Default 4,096 (see RateLimiterOptions.maxKeyBytes). */
  maxKeyBytes?: number;
  /** State words reserved per key for any future rules. Default: what the rules need, at least 16. */
  maxStateWords?: number;
  /** Room for the rules as JSON. Default 65,536 bytes. */
  maxRulesBytes?: number;
  /**
   * Given (any value from 0 to 68 years, in ms): every pair under a fixed or sliding window rule
   * keeps a block word after its limits, 4 bytes more, and `block` works on those rules, up to 68
   * years. Without it, `block` on a window rule throws. GCRA rules hold a block in their own
   * state either way; a sliding log holds none.
   */
  maxBlockMs?: number;
}

/** `#decide` outcomes. */
const DECIDED = 0;
const FULL = 1;
const UNREADABLE = 2;
/** `get` only: the table holds no state for the pair. */
const ABSENT = 3;

const OPTION_NAMES = namesOf<PolicyLimiterOptions>()([
  'rules', 'maxKeys', 'clock', 'onFull', 'maxKeyBytes', 'maxStateWords', 'maxRulesBytes', 'maxLogSize', 'claimTimeoutMs', 'cacheSize',
  'hashSeed', 'slotsPerKey', 'onDecision', 'maxBlockMs',
]);

/** A structured-cloneable reference to a policy limiter's shared memory. */
export interface PolicyLimiterHandle {
  readonly kind: 'sluice.PolicyLimiter';
  readonly table: SharedArrayBuffer;
  /** The key heap that holds long keys past their slot's words, or null (maxKeyBytes <= 24). */
  readonly keys: SharedArrayBuffer | null;
  readonly rules: SharedArrayBuffer;
  readonly clock: SharedArrayBuffer | null;
}

/** A rule's set of limits (the engine's `LimitGroup`), and one of them. */
type Limits = CompiledRule['limits'];

/**
 * `#forced`: the pair's rule (read under its lock) cannot take the control (a block on a rule
 * that holds none: a sliding log, a window without maxBlockMs): nothing was forced.
 */
const NOT_GCRA = -1;
/** How long to wait after a refusal because the pair's rules could not be read (see #prepare). */
const UNREADABLE_RETRY_MS = 1;

/** Set by PolicyLimiter's static block: `policyGiveBack`, `markedPolicyTryAcquire` and `givingBackPolicyTryAcquire` read its privates. */
let policyGiveBackOf: (limiter: PolicyLimiter, request: PolicyRequest, cost: number) => () => void;
let markedTryAcquireOf: (limiter: PolicyLimiter, request: PolicyRequest, cost: number) => Decision;
let givingBackTryAcquireOf: (limiter: PolicyLimiter, request: PolicyRequest, cost: number) => [Decision, (() => void) | undefined];

/**
 * Rate limits chosen per request from rules: per user, per API, per (user, api), and a default.
 * The rules live in shared memory: `setRules` from any thread takes effect in every thread on its
 * next request. A key keeps its GCRA state across a change to another GCRA rule (the debt of
 * every limit both rules have is carried over; an added limit starts fresh), so a plan upgrade
 * takes effect at once; a change of algorithm, window or log starts the key fresh under the new
 * rule.
 *
 * A key's state records the rules version it was shaped under, after the `maxStateWords` words
 * reserved for the rules' states:
 *
 * ```
 * state words: | shape | the rule's limits' states ... (maxStateWords - 1 words) | rules version |
 * ```
 * A key only ever moves forward to newer rules: a thread that finds, under the key's lock, that the
 * key was shaped under rules newer than its own reads the rules again and matches the key anew
 * before deciding (see `#prepare`).
 *
 * Thread-safety: every method may run on any thread at the same time; one instance per thread.
 */
export class PolicyLimiter {
  static {
    policyGiveBackOf = (limiter, request, cost) => limiter.#spendGiveBack(request, cost);
    markedTryAcquireOf = (limiter, request, cost) => limiter.#markedTryAcquire(request, cost);
    givingBackTryAcquireOf = (limiter, request, cost) => limiter.#givingBackTryAcquire(request, cost);
  }

  #site!: TableSite;
  /** This instance's decision hook (options.onDecision), or null. */
  #onDecision: DecisionHook<PolicyRequest> | null = null;
  #rulesWords!: Int32Array;
  #clock!: Clock;
  /** The clock as decisions read it: never earlier than this instance's latest reading (see Clock). */
  #forward!: ForwardClock;
  #engine!: LockedEngine;
  #owner = 0;
  #maxLogSize = DEFAULT_MAX_LOG_SIZE;
  /** Made with `maxBlockMs`: window rules keep a block word (CompiledRule.blockWord). From the header (H_WINDOW_BLOCK). */
  #windowBlock = false;
  /** `maxBlockMs` in whole seconds (from the header, H_BLOCK_SEC): GCRA rules take ticks that hold it. */
  #maxBlockMs: number | undefined = undefined;
  #maxStateWords = 0;
  #stateOffset = 0;
  #compiled!: CompiledRules;
  #version = -1;
  /**
   * A version whose half was found torn (rules-store.ts), and its half's stamp then: not copied
   * again until the version or the stamp changes.
   */
  #tornVersion = -1;
  #tornStamp = 0;
  /** The JSON of the rules in force here (the last whole read). */
  #rulesJson = '[]';
  #moment: Moment = { ms: 0, sec: 0 };
  // The request, rule and slot of the decision in progress, for #prepare (no closure per call).
  #user = '';
  #api = '';
  #rule!: CompiledRule;
  #shapeAt = 0;
  /**
   * The limits handed to the engine: a copy of the current rule's, rewritten by #prepare when it
   * moves to newer rules under the key's lock (the engine reads them only after `prepare`).
   */
  readonly #limits = {} as Limits;
  /** The rule whose limits `#limits` holds now (null: none). */
  #limitsOf: CompiledRule | null = null;
  /** Set by #prepare when the key's rules cannot be read: the request is refused. */
  #unreadable = false;
  /** Set for `reset`'s decision: #prepare writes the key's state fresh whatever it held. */
  #resetting = false;
  /** #prepare or #decide set the engine's `guarded` to write a pair's state over (#decide clears it after the decision). */
  #guardedByPrepare = false;
  /** Writes a key's state fresh (reset, a change of rules); its `before` holds what #prepare read. */
  #freshState!: FreshState;
  /**
   * Set for `penalty`'s, `reward`'s and `block`'s decision: after #prepare shaped the pair, every
   * limit of its rule is forced (forced-state.ts): a penalty of #forceCost (a reward when
   * negative) while < 0, a block of this many ms while >= 0. Null otherwise. #forced says how it
   * went (FORCED, PAST_HORIZON; -1: not a GCRA rule).
   */
  #forcing: number | null = null;
  #forceCost = 0;
  /**
   * A spend's give-back (`policyGiveBack`): the reading of the spend, which bounds the reward, and
   * the rules version it was decided under; Infinity otherwise.
   */
  #forceSince = Infinity;
  #forceVersion = -1;
  /**
   * A spend's give-back: the reset mark of the pair's slot that its decision read, and where the
   * pair's state was then (#shapeAt): nothing is given back unless both still hold (#force).
   */
  #forceMark = NO_MARK;
  #forceAt = -1;
  /**
   * A window rule's spend give-back: whether a reading lies in the spend's window under every
   * limit of its rule (null for GCRA's, bounded by `#forceSince` instead).
   */
  #forceWithin: ((ms: number) => boolean) | null = null;
  /** Set for `markedPolicyTryAcquire`'s decision: #prepare loads the slot's reset mark (#spendMark, #spendAt). */
  #marking = false;
  #spendMark = NO_MARK;
  #spendAt = -1;
  /**
   * The latest `markedPolicyTryAcquire`'s rule, rules version and reading, kept when it returns:
   * its give-back is bound to them, whatever this instance reads of the rules before it is made
   * (found: the middleware's `ruleFor` between the decision and the give-back read another
   * thread's setRules, and the give-back then took its version for the spend's).
   */
  #spendRule: CompiledRule | null = null;
  #spendVersion = -1;
  #spendSince = Infinity;
  #forced = FORCED;
  /** The pair's limits that a penalty's, reward's or block's earlier tries committed (forceUnderLock). */
  readonly #forceProgress = { landed: 0, at: -1, limits: 0 };
  readonly #verdict: Verdict = { allowed: false, remaining: 0, waitMs: 0, resetMs: 0, latestMs: Infinity, detail: true };
  readonly #prepareFn: Prepare = (w, m, holds) => this.#prepare(w, m, holds) && (this.#forcing === null || this.#force(w, m, holds));

  constructor(options: PolicyLimiterOptions);
  /** @internal `attach`'s way in (see AttachRequest). */
  constructor(options: PolicyLimiterOptions | AttachRequest<PolicyLimiterHandle>);
  constructor(options: PolicyLimiterOptions | AttachRequest<PolicyLimiterHandle>) {
    if (options instanceof AttachRequest) {
      this.#setup(TableSite.attached(options, 'PolicyLimiter'), options.handle.rules, options.cacheSize);
      this.#onDecision = options.option('onDecision') as DecisionHook<PolicyRequest> | null ?? null;
      return;
    }
    checkOptionsObject(options, OPTION_NAMES, 'PolicyLimiter', '{ rules, maxKeys }');
    const onDecision = decisionHookOf<PolicyRequest>(options.onDecision);
    const maxLogSize = integerInRange('options.maxLogSize', options.maxLogSize ?? DEFAULT_MAX_LOG_SIZE, 1, 65_536);
    const maxBlockMs: unknown = options.maxBlockMs;
    if (maxBlockMs !== undefined && typeof maxBlockMs !== 'number') {
      throw new TypeError(`options.maxBlockMs must be a number of ms, got ${describe(maxBlockMs)}`);
    }
    if (maxBlockMs !== undefined && !(maxBlockMs >= 0 && maxBlockMs <= BlockUntil.MAX_BLOCK_MS)) {
      throw new RangeError(
        `options.maxBlockMs must be 0 to ${BlockUntil.MAX_BLOCK_MS} ms (what a window rule's block word holds), got ${describe(maxBlockMs)}`,
      );
    }
    const windowBlock = maxBlockMs !== undefined;
    // Whole seconds, as the header keeps it, so that every thread compiles the rules alike.
    const blockSec = maxBlockMs === undefined ? -1 : Math.ceil(maxBlockMs / 1000);
    const compiled = compileRules(options.rules, maxLogSize, undefined, windowBlock, blockSec < 0 ? undefined : blockSec * 1000);
    const maxStateWords = integerInRange('options.maxStateWords', options.maxStateWords ?? Math.max(16, compiled.stateWords), compiled.stateWords, 65_537);
    const t = parseTableOptions(options);
    const maxRulesBytes = integerInRange('options.maxRulesBytes', options.maxRulesBytes ?? 65_536, 64, 2 ** 24);
    const rules = createRulesStore(JSON.stringify(options.rules), maxRulesBytes);
    // align8: the rules' states are laid out for an odd base (after the shape word) in slots whose
    // state offset is even, so their 64-bit words land 8-byte aligned. One word more than reserved
    // for the rules: the rules version the key's state was shaped under.
    const table = createTable(t, { stateWords: maxStateWords + 1, globalWords: 0, align8: true, tableClass: 'PolicyLimiter' });
    new Int32Array(table)[H_MAX_LOG_SIZE] = maxLogSize;
    new Int32Array(table)[H_WINDOW_BLOCK] = windowBlock ? 1 : 0;
    new Int32Array(table)[H_BLOCK_SEC] = blockSec + 1;
    this.#setup(TableSite.created(table, 'PolicyLimiter', t.clock), rules, t.cacheSize);
    this.#onDecision = onDecision;
  }

  #setup(site: TableSite, rules: SharedArrayBuffer, cacheSize: number | undefined): void {
    if (!(rules instanceof SharedArrayBuffer)) throw new TypeError(`handle.rules must be a SharedArrayBuffer, got ${describe(rules)}`);
    const w = site.words;
    this.#site = site;
    this.#clock = site.clock;
    const forward = new ForwardClock(site.clock);
    this.#forward = forward;
    this.#maxLogSize = w[H_MAX_LOG_SIZE] as number;
    this.#windowBlock = w[H_WINDOW_BLOCK] === 1;
    this.#maxBlockMs = w[H_BLOCK_SEC] === 0 ? undefined : ((w[H_BLOCK_SEC] as number) - 1) * 1000;
    this.#maxStateWords = (w[H_STATE_WORDS] as number) - 1; // the last word holds the rules version
    this.#stateOffset = site.stateOffset;
    this.#freshState = new FreshState(this.#maxStateWords);
    this.#rulesWords = new Int32Array(rules);
    this.#refreshRules();
    this.#owner = site.newOwner();
    site.open(this.#slotState(), cacheSize);
    this.#engine = new LockedEngine(w, this.#compiled.fallback.limits, null, this.#owner, site.lockAges, () => forward.now());
  }

  /** @internal The clock this limiter decides by (the HTTP adapters' ban counter follows it). */
  get decisionClock(): Clock {
    return this.#clock;
  }

  /** Returns a limiter over the same memory for this thread. */
  static attach(handle: PolicyLimiterHandle, options?: AttachOptions<PolicyRequest>): PolicyLimiter {
    decisionHookOf(options?.onDecision);
    return new PolicyLimiter(attachRequest(handle, options, 'PolicyLimiter', 'table, rules, clock'));
  }

  /** The structured-cloneable handle. */
  get handle(): PolicyLimiterHandle {
    return { ...this.#site.handle('sluice.PolicyLimiter'), rules: this.#rulesWords.buffer as SharedArrayBuffer };
  }

  /** The rules in force now (a copy). */
  get rules(): PolicyRule[] {
    this.#refreshRules();
    return JSON.parse(this.#rulesJson) as PolicyRule[];
  }

  /**
   * Replaces the rules for every thread. Throws, naming the rule, for an unknown algorithm, an
   * invalid limit, a duplicate, a missing default, or a rule needing more state than reserved;
   * then nothing changes.
   */
  setRules(rules: readonly PolicyRule[]): void {
    compileRules(rules, this.#maxLogSize, this.#maxStateWords, this.#windowBlock, this.#maxBlockMs);
    const json = JSON.stringify(rules);
    const bytes = new TextEncoder().encode(json).length;
    if (bytes > storeCapacity(this.#rulesWords.buffer as SharedArrayBuffer)) {
      throw new RangeError(`rules take ${bytes} bytes as JSON, over options.maxRulesBytes (${storeCapacity(this.#rulesWords.buffer as SharedArrayBuffer)})`);
    }
    writeRules(this.#rulesWords, json, this.#owner, lockAges(this.#site.claimTimeoutMs * 10, this.#site.lockAges.reclaimAfterMs));
    this.#refreshRules();
  }

  /**
   * The rule that applies to (user, api) now: the most specific one. The same object is returned
   * until the rules change, so callers may cache per rule (the HTTP middleware does).
   */
  ruleFor(request: PolicyRequest): Readonly<PolicyRule> {
    checkPolicyRequest(request, 1);
    this.#refreshRules();
    return match(this.#compiled, request.user, request.api).rule;
  }

  /** Checks (user, api) against its most specific rule and, if it passes, counts it. */
  tryAcquire(request: PolicyRequest, cost = 1): Decision {
    const d = this.#decision(this.#decide(request, cost, false));
    if (this.#onDecision !== null) tellDecision(this.#onDecision, request, d.allowed, d.reason, cost);
    return d;
  }

  /** `markedPolicyTryAcquire` (below the class): `tryAcquire`, with the slot's reset mark loaded under the lock. */
  #markedTryAcquire(request: PolicyRequest, cost: number): Decision {
    const d = this.#markedDecision(request, cost);
    if (this.#onDecision !== null) tellDecision(this.#onDecision, request, d.allowed, d.reason, cost);
    return d;
  }

  /** `givingBackPolicyTryAcquire` (below the class). */
  #givingBackTryAcquire(request: PolicyRequest, cost: number): [Decision, (() => void) | undefined] {
    const d = this.#markedDecision(request, cost);
    const admitted = d.allowed && cost > 0 && d.reason === 'allowed';
    const back = admitted && this.#givesBack() ? this.#spendGiveBack(request, cost) : undefined;
    if (this.#onDecision !== null) tellDecision(this.#onDecision, request, d.allowed, d.reason, cost);
    return [d, back];
  }

  /** Whether the rule that decided the latest marked decision gives a spend back (GCRA or a window, not a sliding log). */
  #givesBack(): boolean {
    return this.#spendRule !== null && (this.#spendRule.rule.algorithm ?? 'gcra') !== 'sliding-log';
  }

  /** `markedPolicyTryAcquire`'s decision, without telling the hook. */
  #markedDecision(request: PolicyRequest, cost: number): Decision {
    this.#spendMark = NO_MARK;
    this.#spendRule = null;
    this.#marking = true;
    let d: Decision;
    try {
      d = this.#decision(this.#decide(request, cost, false));
      // What decided: its rule and version (#prepare may have moved to newer rules under the
      // lock) and its reading, before anything else reads the rules.
      this.#spendRule = this.#rule;
      this.#spendVersion = this.#version;
      this.#spendSince = this.#engine.nowMs;
    } finally {
      this.#marking = false;
    }
    return d;
  }

  /**
   * The pair's state now under the rule it matches, without spending and without inserting it:
   * what a probe (`cost` 0) reports, or null when the table holds no state for the pair (it would
   * start fresh). A pair shaped under older rules is moved to the rule in force, as a probe does.
   */
  get(request: PolicyRequest): KeyState | null {
    const outcome = this.#decide(request, 0, true);
    if (outcome === ABSENT) return null;
    const { remaining, resetAfterMs, limits } = this.#decision(outcome);
    return limits === undefined ? { remaining, resetAfterMs } : { remaining, resetAfterMs, limits };
  }

  /** The Decision for what #decide left in the engine. */
  #decision(outcome: number): Decision {
    if (outcome === FULL) return { allowed: this.#site.allowWhenFull, remaining: 0, retryAfterMs: 0, resetAfterMs: 0, reason: 'table-full' };
    if (outcome === UNREADABLE) return { allowed: false, remaining: 0, retryAfterMs: UNREADABLE_RETRY_MS, resetAfterMs: 0, reason: 'limited' };
    const r = this.#engine.result;
    const reason = this.#reasonOf(outcome);
    // The rule's own limits: a window rule's block word (made with maxBlockMs) is not one of them.
    const n = this.#limits.algorithms.length - (this.#rule.blockWord ? 1 : 0);
    // Waits from the clock's own reading: a decision at a later one (the clock stepped back)
    // adds what the clock needs to catch up.
    const behind = this.#engine.nowMs - this.#forward.rawMs;
    const lead = behind > 0 ? behind : 0;
    const retryAfterMs = r.allowed ? r.retryAfterMs : r.retryAfterMs + lead;
    const d: Decision = { allowed: r.allowed, remaining: r.remaining, retryAfterMs, resetAfterMs: r.resetAfterMs + lead, reason };
    if (n > 1) d.limits = limitStates(this.#engine.limitRemaining, this.#engine.limitResetMs, n);
    return d;
  }

  /**
   * The pair reads as fresh under the rule it matches now: under the pair's lock, its state is
   * written fresh, by the same steps that reshape a key after a change of rules (#prepare), and
   * a decision of cost 0 follows. True when the table held state for the pair; a pair it does
   * not hold is not inserted (false). Throws `Error` while the rules the pair was last shaped
   * under cannot be read (a rules writer stalled mid-write: try again later).
   */
  reset(request: PolicyRequest): boolean {
    this.#resetting = true;
    this.#freshState.landed = 0; // each limit written fresh once, whatever the tries (FreshState)
    // A reset writes the pair's state over what it read: under a guarded token (table/slot-lock.ts).
    this.#engine.guarded = true;
    let outcome: number;
    try {
      outcome = this.#decide(request, 0, true);
    } finally {
      this.#resetting = false;
      this.#engine.guarded = false;
    }
    if (outcome === UNREADABLE) throw new Error(`reset: the rules of ${describe(request)} are being rewritten and cannot be read yet; nothing was reset`);
    return outcome !== ABSENT;
  }

  /**
   * Spends `cost` on the pair now under every limit of its rule, even beyond the burst (a
   * penalty), inserting the pair if needed, and returns its state after. Under the pair's lock,
   * as its decisions are. Every algorithm: GCRA limits owe `cost` intervals more, a window's
   * count rises by `cost` (a fixed window's at most to its permits), a sliding log takes `cost`
   * entries at now. `RangeError` when the pair's state cannot hold that much debt (nothing is
   * spent); `TableFullError` when a new pair finds no slot.
   */
  penalty(request: PolicyRequest, cost: number): KeyState {
    return this.#control('penalty', request, cost, -1) as KeyState;
  }

  /**
   * Gives back `cost` intervals under every limit of the pair's rule, each never below a fresh
   * pair's state (a reward), and returns the pair's state after; null when the table holds no
   * state for the pair (it is not inserted). Under the pair's lock, as its decisions are. Every
   * algorithm: a window's count falls by `cost`, never below 0; a sliding log loses its `cost`
   * newest entries that still count.
   */
  reward(request: PolicyRequest, cost: number): KeyState | null {
    return this.#control('reward', request, cost, -1);
  }

  /** `policyGiveBack` (below the class). */
  #spendGiveBack(request: PolicyRequest, cost: number): () => void {
    // The decision markedPolicyTryAcquire kept, taken: a give-back after a decision that kept none
    // gives nothing (no mark).
    const sinceMs = this.#spendSince;
    const version = this.#spendVersion;
    const rule = this.#spendRule;
    const mark = rule === null ? NO_MARK : this.#spendMark;
    const at = this.#spendAt;
    this.#spendMark = NO_MARK;
    this.#spendRule = null;
    // The rule that decided: a window rule gives back only into the spend's windows (their
    // numbers at its reading, as the algorithms number them), a GCRA rule what of the spend is
    // still ahead (#forceSince). The sliding log keeps its spend (the middleware asks for none).
    const within = rule === null ? null : windowsOf(rule, sinceMs);
    return once(() => {
      // Once (the pair keeps no epoch to stop a second call). A reward no more than what of the
      // spend is still ahead, or into its windows, under the rules that decided it (#force); a
      // TypeError, nothing written, when the pair's rule is a sliding log.
      this.#forceSince = sinceMs;
      this.#forceVersion = version;
      this.#forceMark = mark;
      this.#forceAt = at;
      this.#forceWithin = within;
      try {
        this.#control('reward', request, cost, -1);
      } finally {
        this.#forceSince = Infinity;
        this.#forceVersion = -1;
        this.#forceMark = NO_MARK;
        this.#forceAt = -1;
        this.#forceWithin = null;
      }
    }, undefined);
  }

  /**
   * Refuses every request of the pair for `ms` from now (a ban) under every limit of its rule,
   * inserting the pair if needed, and returns its state after: refusals meanwhile report the time
   * left as `retryAfterMs`, and a request of cost 1 passes at its end. A pair already refused
   * longer keeps its state (one tick more). GCRA rules raise their limits' states; fixed and
   * sliding window rules of a limiter made with `maxBlockMs` raise the pair's block word (their
   * counts are left as they were; the block ends on the first whole second of the clock at or
   * after its end: at most 1 s late, 2 s on a second that is a multiple of 2^32, never early).
   * `TypeError` before anything is written for a window rule without `maxBlockMs` and for a
   * sliding-log rule. A change of the pair's rule that starts its state fresh (docs/policies.md)
   * starts it unblocked. Errors as `penalty`'s; a `ms` not from 0 to 2^53 (68 years on a window
   * rule) is a `TypeError` or `RangeError` naming it.
   */
  block(request: PolicyRequest, ms: number): KeyState {
    checkBlockMs(ms);
    return this.#control('block', request, 1, ms) as KeyState;
  }

  /** Ends a block of the pair (see `block`) by giving back everything it owes, as `reset` does. True if it owed anything. */
  unblock(request: PolicyRequest): boolean {
    return this.reset(request);
  }

  /**
   * A penalty, a reward or a block: a decision of cost 0 whose prepare step forces the pair's
   * limits. A reward (a negative cost to force) does not insert the pair: null when it is absent.
   */
  #control(method: 'penalty' | 'reward' | 'block', request: PolicyRequest, cost: number, blockMs: number): KeyState | null {
    checkPolicyRequest(request, cost);
    this.#refreshRules();
    const algorithm = match(this.#compiled, request.user, request.api).rule.algorithm ?? 'gcra';
    // A penalty and a reward work on every algorithm, under the pair's lock as its decisions: on a
    // window's count (a fixed window's penalty fills at most the window, a reward never goes
    // below 0), on a log's entries (SlidingLog.force). A block raises a GCRA rule's states, or
    // the block word a window rule keeps when the limiter was made with maxBlockMs.
    if (method === 'block' && algorithm !== 'gcra') {
      if (!blockable(algorithm)) {
        throw new TypeError(`block() holds no block on a sliding log (its state is its admissions' stamps); ` +
          `the rule of ${describe(request)} runs '${algorithm}'`);
      }
      if (!this.#windowBlock) {
        throw new TypeError(`block() on a '${algorithm}' rule needs a block word in each pair's state: make the PolicyLimiter with maxBlockMs; ` +
          `the rule of ${describe(request)} runs '${algorithm}'`);
      }
      if (blockMs > BlockUntil.MAX_BLOCK_MS) {
        throw new RangeError(
          `block(${describe(request)}, ${blockMs}) is longer than a window rule's block word holds (${BlockUntil.MAX_BLOCK_MS} ms); nothing was written`,
        );
      }
    }
    // A spend's give-back (#spendGiveBack: #forceSince is its decision's reading) keeps a log's
    // spend: its reward would give back the newest stamps, not the spend's.
    if (this.#forceSince !== Infinity && algorithm === 'sliding-log') {
      throw new TypeError(`a spend's give-back is for GCRA and window rules; the rule of ${describe(request)} runs 'sliding-log'`);
    }
    const reward = method === 'reward';
    this.#forcing = blockMs;
    this.#forceCost = reward ? -cost : cost;
    this.#forced = FORCED;
    this.#forceProgress.landed = 0;
    this.#forceProgress.at = -1;
    // A reward (a give-back too) writes over what it read: under a guarded token (table/slot-lock.ts).
    this.#engine.guarded = reward;
    let outcome: number;
    try {
      outcome = this.#decide(request, 0, reward);
    } finally {
      this.#forcing = null;
      this.#engine.guarded = false;
    }
    if (outcome === ABSENT) return null;
    if (outcome === FULL) throw new TableFullError(`${request.user} / ${request.api}`);
    if (outcome === UNREADABLE) throw new Error(`${method}: the rules of ${describe(request)} are being rewritten and cannot be read yet; nothing was written`);
    if (this.#forced === NOT_GCRA) {
      // The rules changed under the call: the pair's rule now runs another algorithm.
      const now = this.#rule.rule.algorithm ?? 'gcra';
      // A block on a rule that holds none, or a spend's give-back on a sliding log.
      throw new TypeError(method === 'block'
        ? `block() holds no block on the rule of ${describe(request)}, which now runs '${now}'` +
          `${blockable(now) ? ' (make the PolicyLimiter with maxBlockMs)' : ''}; nothing was written`
        : `a spend's give-back is for GCRA and window rules; the rule of ${describe(request)} now runs '${now}'; nothing was written`);
    }
    if (this.#forced === PAST_HORIZON) {
      throw new RangeError(`${method}(${describe(request)}, ${blockMs < 0 ? cost : blockMs}) is more than the pair's state can hold; nothing was written`);
    }
    const r = this.#engine.result;
    return { remaining: r.remaining, resetAfterMs: r.resetAfterMs };
  }

  /** The forcing part of the prepare step (after #prepare shaped the pair under the lock). */
  #force(w: Int32Array, m: Moment, holds: () => boolean): boolean {
    if (this.#unreadable) return true; // nothing is decided or written
    const within = this.#forceWithin;
    // Under the pair's lock, the rule it runs now: a block needs a GCRA rule or a window rule's
    // block word, and a spend's give-back (within) on a sliding log keeps the spend; a penalty
    // and a reward take any rule.
    const blocks = (this.#forcing as number) >= 0;
    if (this.#rule.tickPs === null && (within === null ? blocks && !this.#rule.blockWord : (this.#rule.rule.algorithm ?? 'gcra') === 'sliding-log')) {
      this.#forced = NOT_GCRA;
      return true;
    }
    // The rule matched under the lock may be newer than the one #control checked the block's
    // length against: a window rule's word holds up to BlockUntil.MAX_BLOCK_MS (found by an
    // attack: a GCRA rule changed to a window rule under a 136-year block, which wrapped to 5 s).
    if (blocks && this.#rule.blockWord && (this.#forcing as number) > BlockUntil.MAX_BLOCK_MS) {
      this.#forced = PAST_HORIZON;
      return true;
    }
    // A spend's give-back gives nothing once the rules changed since its decision (the pair's
    // state may have been rebuilt, or be read in another rule's intervals: found, a rule that
    // gained a limit let its give-back free the new limit's spend), nor on GCRA at a reading
    // raised to the pair's stamp (a clock that stepped back: see LockFreeEngine.giveBack; a
    // window's is bounded by its windows, judged at that reading), nor after a reset or block of
    // the pair since its decision, or while one is under way (the slot's reset mark, loaded under
    // the lock; found: a reset's fresh state counts only later admissions, and the reward took one
    // of theirs), nor on another slot than the spend's.
    if (this.#forceSince !== Infinity && (this.#version !== this.#forceVersion || (within === null && this.#engine.prepareRaised) ||
      this.#shapeAt !== this.#forceAt || resetSince(w, this.#shapeAt - this.#stateOffset, this.#forceMark) ||
      (within !== null && !within(m.ms)))) {
      // (A window rule's give-back gives nothing at a reading in a later window of any limit.)
      this.#forced = FORCED;
      return true;
    }
    const lastSecAt = this.#shapeAt - this.#stateOffset + S_LAST_SEC;
    // Another place or another number of limits than the tries before (the rules changed
    // meanwhile): what they committed was on the old shape, which the new one does not keep limit
    // by limit. Rules published again (new rule objects, the same shape) keep it: forcing again
    // would apply the control twice (found by an attack: a reward of 2 gave back 4).
    const progress = this.#forceProgress;
    const limits = this.#rule.limits.algorithms.length;
    if (progress.at !== this.#shapeAt || progress.limits !== limits) {
      progress.at = this.#shapeAt;
      progress.limits = limits;
      progress.landed = 0;
    }
    // A block is counted in the slot's reset mark around its writes, as a reset is (#prepare).
    const blocking = (this.#forcing as number) >= 0;
    const base = this.#shapeAt - this.#stateOffset;
    if (blocking) resetting(w, base);
    let outcome: number;
    try {
      outcome = forceUnderLock(
        w, this.#shapeAt + 1, lastSecAt, this.#rule.limits, m, holds, this.#forceCost, this.#forcing as number, this.#verdict, progress,
        this.#forceSince, within !== null,
      );
    } finally {
      if (blocking) resetDone(w, base);
    }
    if (outcome === LOCK_LOST) return false; // the engine decides again (and forces again)
    this.#forced = outcome;
    return true;
  }

  /** Like `tryAcquire`, but answers only whether the request passes (no Decision is made). */
  allow(request: PolicyRequest, cost = 1): boolean {
    const outcome = this.#decide(request, cost, false);
    const allowed = outcome === FULL ? this.#site.allowWhenFull : outcome === DECIDED && this.#engine.result.allowed;
    if (this.#onDecision !== null) tellDecision(this.#onDecision, request, allowed, this.#reasonOf(outcome), cost);
    return allowed;
  }

  /** Why #decide's `outcome` came out as it did (the engine's result for a DECIDED one). */
  #reasonOf(outcome: number): DecisionReason {
    if (outcome === FULL) return 'table-full';
    if (outcome !== DECIDED) return 'limited';
    const r = this.#engine.result;
    return r.allowed ? 'allowed' : r.never ? 'exceeds-burst' : 'limited';
  }

  /**
   * The decision for (user, api) under its most specific rule, in the engine's result: DECIDED,
   * FULL (no slot for the key) or UNREADABLE (nothing decided or spent); with `peek`, a pair the
   * table does not hold is not inserted (ABSENT).
   */
  #decide(request: PolicyRequest, cost: number, peek: boolean): number {
    const key = checkPolicyRequest(request, cost);
    const { user, api } = request;
    this.#refreshRules();
    this.#user = user;
    this.#api = api;
    this.#unreadable = false;
    this.#use(match(this.#compiled, user, api));
    const index = this.#site.index;
    let entry = peek ? index.peek(key) : index.cached(key);
    if (entry === undefined && !peek) {
      entry = index.locate(key);
      // A pair this lookup inserted is shaped by its first decision, which writes its state
      // (#prepare): take the guarded token at once rather than deciding again for it.
      if (entry !== undefined && index.insertedLast && !this.#engine.guarded) {
        this.#engine.guarded = true;
        this.#guardedByPrepare = true;
      }
    }
    for (;;) {
      if (entry === undefined) return peek ? ABSENT : FULL;
      this.#shapeAt = entry.base + this.#stateOffset;
      let outcome: number;
      try {
        outcome = this.#engine.decide(entry.base, entry.ctrl, this.#shapeAt + 1, cost, this.#limits, this.#prepareFn);
      } finally {
        if (this.#guardedByPrepare) {
          // A guarded token asked for to write the pair's state: only for that decision.
          this.#guardedByPrepare = false;
          this.#engine.guarded = false;
        }
      }
      if (outcome !== RELOCATE) break;
      entry = peek ? this.#site.peekAgain(key) : this.#site.findAgain(key);
    }
    if (this.#unreadable) {
      // The key was shaped under rules this thread cannot read yet (a torn copy, see
      // rules-store.ts): nothing was decided or spent.
      this.#unreadable = false;
      return UNREADABLE;
    }
    return DECIDED;
  }

  /**
   * Resolves once the request is admitted, waiting for the reported retry time between tries.
   * Rejects with `RateLimitTimeoutError` when the wait would exceed `maxWaitMs` or can never end,
   * and with the signal's reason on abort (nothing is held while waiting).
   */
  async acquire(request: PolicyRequest, options?: AcquireOptions): Promise<void> {
    const { cost, maxWaitMs, signal } = checkWaitOptions(options, 'acquire');
    signal?.throwIfAborted();
    const deadline = this.#clock.now() + maxWaitMs;
    const key = `${request?.user} / ${request?.api}`;
    for (let d = this.tryAcquire(request, cost); !d.allowed; d = this.tryAcquire(request, cost)) {
      if (d.reason === 'table-full') throw new TableFullError(key); // no wait frees a slot
      await sleepUntil(this.#clock, retryAt(key, d.retryAfterMs, this.#clock.now(), deadline, maxWaitMs), signal);
    }
  }

  /** Reclaims idle keys; returns how many. */
  sweep(): number {
    return this.#site.sweep();
  }

  /** The table's gauges, from counts it keeps as it goes (O(1)): see RateLimiter.gauges. */
  gauges(): TableGauges {
    return this.#site.gauges();
  }

  /** Counts live keys and capacity (O(capacity)). */
  stats(): RateLimiterStats {
    return this.#site.report(this.#engine.retries);
  }

  #now(): Moment {
    const m = this.#moment;
    m.ms = this.#forward.now();
    m.sec = secondsAt(m.ms);
    return m;
  }

  /** Recompiles the rules if another thread replaced them. One load when they have not changed. */
  #refreshRules(): void {
    const version = storeVersion(this.#rulesWords);
    if (version === this.#version) return;
    if (version === this.#tornVersion && halfStamp(this.#rulesWords, version) === this.#tornStamp) return;
    const stamp = halfStamp(this.#rulesWords, version);
    const { json, version: read } = readRules(this.#rulesWords);
    try {
      if (json === null) throw new Error(`the rules of version ${read} are being written by a writer whose lock was taken over (rules-store.ts)`);
      this.#compiled = compileRules(JSON.parse(json), this.#maxLogSize, undefined, this.#windowBlock, this.#maxBlockMs);
      this.#version = read;
      this.#rulesJson = json;
    } catch (e) {
      if (this.#compiled === undefined) throw e; // nothing to fall back on
      // A torn half (see rules-store.ts): keep the rules we had until it is whole, or a newer
      // version comes. The stamp was taken before the read: one that moved on since is read again.
      this.#tornVersion = read === version ? read : -1;
      this.#tornStamp = stamp;
    }
  }

  /** Decides with `rule` from now on (its limits into the engine's group). */
  #use(rule: CompiledRule): void {
    this.#rule = rule;
    if (this.#limitsOf === rule) return;
    Object.assign(this.#limits, rule.limits);
    this.#limitsOf = rule;
  }

  /**
   * Under the key's lock, before deciding. First the rules: if the key was shaped under rules
   * newer than this thread's, read them and match the key again, so that the decision and any
   * reshape happen under rules at least as new as the key's (a key never moves back to older
   * rules). Then the state (pair-shape.ts, `shapePair`): if it was written under a rule of another
   * shape, carry GCRA debt over (the limits both rules have) or start the key fresh, and record the
   * rules version; every read, then `holds()`, then every write by compareExchange, so a holder
   * whose lock was taken over writes nothing over a newer holder's state (false: the engine
   * decides again).
   */
  #prepare(w: Int32Array, m: Moment, holds: () => boolean): boolean {
    if (this.#unreadable) {
      // An earlier try of this decision found the rules unreadable: start again from the rule.
      this.#unreadable = false;
      this.#use(this.#rule);
    }
    const at = this.#shapeAt;
    const versionAt = at + this.#maxStateWords;
    // Atomics.load under the key's lock: both words are written only under it, by compareExchange.
    const stored = Atomics.load(w, at);
    const storedVersion = Atomics.load(w, versionAt);
    if (stored !== NO_SHAPE && newer(storedVersion, this.#version)) {
      this.#refreshRules();
      if (newer(storedVersion, this.#version)) {
        // The key's rules cannot be read now (a stalled writer tore them; it will publish again):
        // deciding under older rules could move the key back. Decide nothing, write nothing.
        this.#unreadable = true;
        Object.assign(this.#limits, this.#rule.limits, { algorithms: [], offsets: [], words: 0 });
        this.#limitsOf = null;
        return true;
      }
      this.#use(match(this.#compiled, this.#user, this.#api));
    }
    const base = at - this.#stateOffset;
    if (this.#marking) {
      // The slot's reset mark for the spend's give-back (policyGiveBack), loaded under the lock,
      // before the commit; again on every try.
      this.#spendMark = resetMark(w, base);
      this.#spendAt = at;
    }
    if (!this.#engine.guarded && writesState(w, at, stored, this.#rule, this.#resetting)) {
      // The pair's state is about to be written over (another shape, or none yet): under a
      // guarded token (pair-shape.ts, writesState). Decided again with one; #decide lets it go.
      this.#engine.guarded = true;
      this.#guardedByPrepare = true;
      this.#engine.restarts--; // not a race lost (stats' casRetries): underKeyLock counts the try again
      return false;
    }
    if (!this.#resetting) return shapePair(w, at, versionAt, stored, storedVersion, this.#rule, this.#version, false, this.#freshState, m, holds);
    // A reset is counted in the slot's reset mark around its writes (table/reset-marks.ts): a
    // spend's give-back after it gives nothing.
    resetting(w, base);
    try {
      return shapePair(w, at, versionAt, stored, storedVersion, this.#rule, this.#version, true, this.#freshState, m, holds);
    } finally {
      resetDone(w, base);
    }
  }

  /** Whether the pair at `base` is idle, judged under its lock (the reclaim hook's test). */
  readonly #idle = (w: Int32Array, base: number, floor: ReclaimFloor): boolean => {
    const at = base + this.#stateOffset;
    // Atomics.load under the key's lock: the shape word is written only under it.
    const shape = Atomics.load(w, at);
    if (shape === NO_SHAPE) return true; // never decided: fresh at every reading, no floor to raise
    // The current rule of that shape whose ticks the state records. A state of no current
    // rule is not judged: it is kept until its next request moves it over.
    const rule = this.#compiled.byShape.get(shape)?.find((r) => ticksMatch(w, at, r));
    if (rule === undefined) return false;
    const lastSec = Atomics.load(w, base + S_LAST_SEC); // before the clock: never later than the reading
    const m = this.#now();
    // A stamp ahead of the reading: the clock stepped back behind the pair's latest admission,
    // which a decision would raise its reading to (see Clock): not idle.
    if (unitsAhead(m.sec, lastSec) !== 0) return false;
    if (!rule.limits.algorithms.every((a, i) => a.idle(w, at + 1 + (rule.limits.offsets[i] as number), m, isStale(m.sec, lastSec, a.staleSec)))) return false;
    floor.raise(m.ms); // before the reclaim: its pair comes back fresh at no earlier reading
    return true;
  };

  #slotState(): SlotState {
    // Arrow functions: the hooks read this limiter's fields.
    return {
      initSlot: (w, base) => {
        // Atomics.store: the slot is claimed (BUSY) by this thread and not yet published.
        Atomics.store(w, base + this.#stateOffset + this.#maxStateWords, this.#version);
        Atomics.store(w, base + this.#stateOffset, NO_SHAPE);
        Atomics.store(w, base + S_LAST_SEC, this.#now().sec);
        Atomics.store(w, base + S_TAT, 0);
      },
      isDead: (w, base) => {
        return Atomics.load(w, base + S_TAT) === DEAD; // the lock word holds the reclaim marker
      },
      retire: (w, base, floor) => retireLocked(w, base, this.#owner, this.#site.lockAges, this.#idle, floor),
      raiseTo: (ms) => this.#forward.raiseTo(ms),
    };
  }
}

/**
 * For a window rule (fixed or sliding), whether a reading lies in the window of every limit that
 * the reading `ms` lies in, as the algorithms number them (floorDiv of the reading); null for the
 * other algorithms.
 */
function windowsOf(rule: CompiledRule, ms: number): ((at: number) => boolean) | null {
  const algorithm = rule.rule.algorithm ?? 'gcra';
  if (algorithm !== 'fixed-window' && algorithm !== 'sliding-window') return null;
  const periods = (Array.isArray(rule.rule.limit) ? rule.rule.limit : [rule.rule.limit]).map((l: Limit) => l.periodMs);
  const windows = periods.map((p) => floorDiv(ms, p));
  return (at) => periods.every((p, i) => floorDiv(at, p) <= (windows[i] as number));
}

/**
 * The HTTP give-back of a PolicyLimiter's latest admission of `request` (`cost`; made on the
 * limiter's thread right after it, decided by `markedPolicyTryAcquire`, before anything else
 * decides there: the middleware makes it through `givingBackPolicyTryAcquire`): under a GCRA rule a
 * reward of no more than what of that admission's spend is still ahead when it runs (math/gcra.ts
 * `unspentTicks`); under a fixed or sliding window rule a reward into the spend's windows only,
 * at a reading in them, and none into a window stored ahead of that reading. Nothing once the
 * rules changed or the pair was reset or blocked since the decision. It throws, writing nothing,
 * when the pair's rule is a sliding log (http/give-back.ts keeps the spend).
 * @internal
 */
export function policyGiveBack(limiter: PolicyLimiter, request: PolicyRequest, cost: number): () => void {
  return policyGiveBackOf(limiter, request, cost);
}

/**
 * `tryAcquire` for an admission that `policyGiveBack` may give back (skipSuccessfulRequests and
 * skipFailedRequests, through `givingBackPolicyTryAcquire`): its decision loads the reset mark of the pair's
 * slot under the pair's lock, before its commit, and the give-back gives nothing once a reset or
 * block of the pair moved it (as RateLimiter's markedTryAcquire).
 * @internal
 */
export function markedPolicyTryAcquire(limiter: PolicyLimiter, request: PolicyRequest, cost: number): Decision {
  return markedTryAcquireOf(limiter, request, cost);
}

/**
 * The middleware's check when it may give the spend back: `markedPolicyTryAcquire`'s decision and,
 * for an admission (allowed, `cost` > 0, reason 'allowed') under a rule that gives back (not a
 * sliding log), its `policyGiveBack`, made before the onDecision hook is told (as RateLimiter's
 * `givingBackTryAcquire`): a hook that decides on this limiter, or runs a marked check of its own,
 * must not become the decision the give-back is bound to (found: one bounded by the hook's later
 * reading gave back more than the spend left; one marked by the hook's pair gave nothing).
 * @internal
 */
export function givingBackPolicyTryAcquire(limiter: PolicyLimiter, request: PolicyRequest, cost: number): [Decision, (() => void) | undefined] {
  return givingBackTryAcquireOf(limiter, request, cost);
}
