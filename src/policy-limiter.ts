import type { Moment } from './algorithms/index.js';
import { isStale, secondsAt } from './gcra.js';
import { carryDebt } from './algorithms/gcra.js';
import { AttachRequest } from './attach-request.js';
import { clockKind, ManualClock, monotonicClock, resolveClock, type Clock } from './clock.js';
import { describe, integerInRange } from './errors.js';
import { DEFAULT_MAX_LOG_SIZE } from './limiter-config.js';
import { LockedEngine, RELOCATE } from './locked-engine.js';
import { compileRules, match, type CompiledRule, type CompiledRules, type PolicyRule } from './policy/rules.js';
import { createRulesStore, readRules, storeCapacity, storeVersion, writeRules } from './policy/rules-store.js';
import type { Decision, RateLimiterStats } from './rate-limiter.js';
import { checkMaxWait, retryAt, sleepUntil, type AcquireOptions } from './waiting.js';
import { DEAD, H_CLOCK_KIND, H_MAX_KEYS, H_MAX_LOG_SIZE, H_ON_FULL, H_OWNER_SEQ, H_STATE_WORDS, S_LAST_SEC, S_TAT } from './table/layout.js';
import { DEFAULT_CACHE_SIZE, SlotIndex } from './table/slot-index.js';
import { tryLock, unlock } from './table/slot-lock.js';
import { ALREADY_DEAD, allocateTable, checkTableBuffer, NOT_IDLE, RETIRED, SlotTable, stateOffsetOf, type SlotState } from './table/table.js';
import { parseTableOptions } from './table-options.js';

export type { PolicyRule } from './policy/rules.js';

/** Who is asking: each (user, api) pair has its own state. */
export interface PolicyRequest {
  user: string;
  api: string;
}

/** Options for `new PolicyLimiter`. */
export interface PolicyLimiterOptions {
  /** The rules; exactly one has neither `user` nor `api` (the default). */
  rules: readonly PolicyRule[];
  /** How many (user, api) pairs can be live at once. */
  maxKeys: number;
  /** As for RateLimiter; a ManualClock travels with the handle. */
  clock?: Clock;
  /** As for RateLimiter. Default `'deny'`. */
  onFull?: 'deny' | 'allow';
  /** Longest user + api, in UTF-8 bytes plus a few for the length prefix. Default 128. */
  maxKeyBytes?: number;
  /** State words reserved per key for any future rules. Default: what the rules need, at least 16. */
  maxStateWords?: number;
  /** Room for the rules as JSON. Default 65,536 bytes. */
  maxRulesBytes?: number;
  /** Largest sliding-log `permits`. Default 1,000. */
  maxLogSize?: number;
  /** As for RateLimiter (also how long a dead lock holder blocks a key). Default 1,000 ms. */
  claimTimeoutMs?: number;
  /** Per-thread key cache entries. Default 65,536. */
  cacheSize?: number;
  /** Seed for the key hash. */
  hashSeed?: number;
}

/** A structured-cloneable reference to a policy limiter's shared memory. */
export interface PolicyLimiterHandle {
  readonly kind: 'sluice.PolicyLimiter';
  readonly table: SharedArrayBuffer;
  readonly rules: SharedArrayBuffer;
  readonly clock: SharedArrayBuffer | null;
}

/** A slot whose state no rule has written yet. */
const NO_SHAPE = 0;

/**
 * Rate limits chosen per request from rules: per user, per API, per (user, api), and a default.
 * The rules live in shared memory: `setRules` from any thread takes effect in every thread on its
 * next request. A key keeps its GCRA state across a rule change with as many limits (its debt is
 * carried over), so a plan upgrade takes effect at once; a change of algorithm, window or log
 * starts the key fresh under the new rule.
 *
 * Thread-safety: every method may run on any thread at the same time; one instance per thread.
 */
export class PolicyLimiter {
  #table!: SlotTable;
  #words!: Int32Array;
  #rulesWords!: Int32Array;
  #clock!: Clock;
  #clockBuffer!: SharedArrayBuffer | null;
  #index!: SlotIndex;
  #engine!: LockedEngine;
  #owner = 0;
  #maxLogSize = DEFAULT_MAX_LOG_SIZE;
  #maxStateWords = 0;
  #stateOffset = 0;
  #allowWhenFull = false;
  #compiled!: CompiledRules;
  #version = -1;
  #moment: Moment = { ms: 0, sec: 0 };
  // The rule and slot of the decision in progress, for #reshape (no closure per call).
  #rule!: CompiledRule;
  #shapeAt = 0;
  readonly #reshapeFn = (w: Int32Array, m: Moment): boolean => this.#reshape(w, m);

  constructor(options: PolicyLimiterOptions) {
    if (options instanceof AttachRequest) {
      this.#setup(options.handle.table, options.handle.rules, options.clock, options.cacheSize, options.handle.clock);
      return;
    }
    if (options === null || typeof options !== 'object') throw new TypeError(`options must be an object like { rules, maxKeys }, got ${describe(options)}`);
    const maxLogSize = integerInRange('options.maxLogSize', options.maxLogSize ?? DEFAULT_MAX_LOG_SIZE, 1, 65_536);
    const compiled = compileRules(options.rules, maxLogSize);
    const maxStateWords = integerInRange('options.maxStateWords', options.maxStateWords ?? Math.max(16, compiled.stateWords), compiled.stateWords, 65_537);
    const { maxKeys, maxKeyBytes, claimTimeoutMs, onFull, hashSeed, clock, cacheSize } = parseTableOptions(options, 128);
    const maxRulesBytes = integerInRange('options.maxRulesBytes', options.maxRulesBytes ?? 65_536, 64, 2 ** 24);
    const rules = createRulesStore(JSON.stringify(options.rules), maxRulesBytes);
    // align8: the rules' states are laid out for an odd base (after the shape word) in slots whose
    // state offset is even, so their 64-bit words land 8-byte aligned.
    const table = allocateTable({ maxKeys, maxKeyBytes, hashSeed, forcedHash: undefined, claimTimeoutMs, stateWords: maxStateWords, globalWords: 0, align8: true });
    const w = new Int32Array(table);
    w[H_ON_FULL] = onFull === 'allow' ? 1 : 0;
    w[H_MAX_LOG_SIZE] = maxLogSize;
    w[H_CLOCK_KIND] = clockKind(clock);
    this.#setup(table, rules, clock, cacheSize, clock instanceof ManualClock ? clock.buffer : null);
  }

  #setup(table: SharedArrayBuffer, rules: SharedArrayBuffer, clock: Clock | undefined, cacheSize: number | undefined, clockBuffer: SharedArrayBuffer | null): void {
    const w = checkTableBuffer(table);
    if (!(rules instanceof SharedArrayBuffer)) throw new TypeError(`handle.rules must be a SharedArrayBuffer, got ${describe(rules)}`);
    this.#clock = resolveClock(w[H_CLOCK_KIND], clock, clockBuffer, 'PolicyLimiter');
    this.#clockBuffer = clockBuffer;
    this.#maxLogSize = w[H_MAX_LOG_SIZE] as number;
    this.#maxStateWords = w[H_STATE_WORDS] as number;
    this.#stateOffset = stateOffsetOf(w);
    this.#allowWhenFull = w[H_ON_FULL] === 1;
    this.#rulesWords = new Int32Array(rules);
    this.#refreshRules();
    // Atomics.add: each instance gets its own owner id for its lock tokens.
    this.#owner = Atomics.add(w, H_OWNER_SEQ, 1);
    this.#table = new SlotTable(table, this.#slotState());
    this.#words = this.#table.words;
    this.#index = new SlotIndex(this.#table, cacheSize ?? DEFAULT_CACHE_SIZE);
    this.#engine = new LockedEngine(w, this.#compiled.fallback.limits, null, this.#owner, this.#table.claimTimeoutMs, () => this.#clock.now());
  }

  /** Returns a limiter over the same memory for this thread. */
  static attach(handle: PolicyLimiterHandle, options: { clock?: Clock; cacheSize?: number } = {}): PolicyLimiter {
    if (handle === null || typeof handle !== 'object' || !(handle.table instanceof SharedArrayBuffer)) {
      throw new TypeError(`handle must be a PolicyLimiter handle ({ table, rules, clock }), got ${describe(handle)}`);
    }
    if (handle.kind !== 'sluice.PolicyLimiter') throw new TypeError(`handle is a ${describe(handle.kind)} handle, not a PolicyLimiter's: attach it with that class`);
    if (options.cacheSize !== undefined) integerInRange('options.cacheSize', options.cacheSize, 0, 2 ** 24);
    return new PolicyLimiter(new AttachRequest<PolicyLimiterHandle>(handle, options.clock, options.cacheSize) as unknown as PolicyLimiterOptions);
  }

  /** The structured-cloneable handle. */
  get handle(): PolicyLimiterHandle {
    return { kind: 'sluice.PolicyLimiter', table: this.#words.buffer as SharedArrayBuffer, rules: this.#rulesWords.buffer as SharedArrayBuffer, clock: this.#clockBuffer };
  }

  /** The rules in force now (a copy). */
  get rules(): PolicyRule[] {
    this.#refreshRules();
    return JSON.parse(readRules(this.#rulesWords).json) as PolicyRule[];
  }

  /**
   * Replaces the rules for every thread. Throws, naming the rule, for an unknown algorithm, an
   * invalid limit, a duplicate, a missing default, or a rule needing more state than reserved;
   * then nothing changes.
   */
  setRules(rules: readonly PolicyRule[]): void {
    compileRules(rules, this.#maxLogSize, this.#maxStateWords);
    const json = JSON.stringify(rules);
    const bytes = new TextEncoder().encode(json).length;
    if (bytes > storeCapacity(this.#rulesWords.buffer as SharedArrayBuffer)) {
      throw new RangeError(`rules take ${bytes} bytes as JSON, over options.maxRulesBytes (${storeCapacity(this.#rulesWords.buffer as SharedArrayBuffer)})`);
    }
    writeRules(this.#rulesWords, json, this.#owner, this.#table.claimTimeoutMs * 10);
    this.#refreshRules();
  }

  /**
   * The rule that applies to (user, api) now: the most specific one. The same object is returned
   * until the rules change, so callers may cache per rule (the HTTP middleware does).
   */
  ruleFor(request: PolicyRequest): Readonly<PolicyRule> {
    this.#refreshRules();
    return match(this.#compiled, request.user, request.api).rule;
  }

  /** Checks (user, api) against its most specific rule and, if it passes, counts it. */
  tryAcquire(request: PolicyRequest, cost = 1): Decision {
    if (request === null || typeof request !== 'object') throw new TypeError(`request must be an object like { user, api }, got ${describe(request)}`);
    const { user, api } = request;
    if (typeof user !== 'string' || user.length === 0) throw new TypeError(`request.user must be a non-empty string, got ${describe(user)}`);
    if (typeof api !== 'string' || api.length === 0) throw new TypeError(`request.api must be a non-empty string, got ${describe(api)}`);
    // Each part on its own: a user ending in a lone high surrogate and an api starting with a lone
    // low one would join into a well-formed key. `isWellFormed` is Node 20's; the ES2022 lib lacks it.
    if (!(user as string & { isWellFormed(): boolean }).isWellFormed()) {
      throw new TypeError(`request.user must be a well-formed string (no lone surrogates), got ${describe(user)}`);
    }
    if (!(api as string & { isWellFormed(): boolean }).isWellFormed()) {
      throw new TypeError(`request.api must be a well-formed string (no lone surrogates), got ${describe(api)}`);
    }
    if (cost !== 1 && !(Number.isSafeInteger(cost) && cost >= 0)) {
      if (typeof cost !== 'number') throw new TypeError(`cost must be an integer >= 0, got ${describe(cost)}`);
      throw new RangeError(`cost must be an integer >= 0, got ${describe(cost)}`);
    }
    this.#refreshRules();
    const rule = match(this.#compiled, user, api);
    const key = `${user.length}:${user}${api}`; // length prefix: ("ab", "c") and ("a", "bc") differ
    let entry = this.#index.cached(key) ?? this.#index.locate(key);
    for (;;) {
      if (entry === undefined) {
        return { allowed: this.#allowWhenFull, remaining: 0, retryAfterMs: 0, resetAfterMs: 0, reason: 'table-full' };
      }
      this.#rule = rule;
      this.#shapeAt = entry.base + this.#stateOffset;
      if (this.#engine.decide(entry.base, entry.ctrl, this.#shapeAt + 1, cost, rule.limits, this.#reshapeFn) !== RELOCATE) break;
      this.#index.forget(key);
      entry = this.#index.locate(key);
    }
    const r = this.#engine.result;
    const reason = r.allowed ? 'allowed' : r.never ? 'exceeds-burst' : 'limited';
    return { allowed: r.allowed, remaining: r.remaining, retryAfterMs: r.retryAfterMs, resetAfterMs: r.resetAfterMs, reason };
  }

  /**
   * Resolves once the request is admitted, waiting for the reported retry time between tries.
   * Rejects with `RateLimitTimeoutError` when the wait would exceed `maxWaitMs` or can never end,
   * and with the signal's reason on abort (nothing is held while waiting).
   */
  async acquire(request: PolicyRequest, options: AcquireOptions = {}): Promise<void> {
    const cost = options.cost ?? 1;
    const maxWaitMs = checkMaxWait(options.maxWaitMs);
    options.signal?.throwIfAborted();
    const deadline = this.#clock.now() + maxWaitMs;
    const key = `${request?.user} / ${request?.api}`;
    for (let d = this.tryAcquire(request, cost); !d.allowed; d = this.tryAcquire(request, cost)) {
      await sleepUntil(this.#clock, retryAt(key, d.retryAfterMs, this.#clock.now(), deadline, maxWaitMs), options.signal);
    }
  }

  /** Reclaims idle keys; returns how many. */
  sweep(): number {
    this.#index.clear();
    return this.#table.sweep();
  }

  /** Counts live keys and capacity (O(capacity)). */
  stats(): RateLimiterStats {
    return this.#table.report(this.#engine.retries);
  }

  #now(): Moment {
    const m = this.#moment;
    m.ms = this.#clock.now();
    m.sec = secondsAt(m.ms);
    return m;
  }

  /** Recompiles the rules if another thread replaced them. One load when they have not changed. */
  #refreshRules(): void {
    const version = storeVersion(this.#rulesWords);
    if (version === this.#version) return;
    const { json, version: read } = readRules(this.#rulesWords);
    try {
      this.#compiled = compileRules(JSON.parse(json), this.#maxLogSize);
      this.#version = read;
    } catch (e) {
      if (this.#compiled === undefined) throw e; // nothing to fall back on
      // A torn write by a stalled writer (see rules-store.ts): keep the rules we had.
    }
  }

  /**
   * Under the key's lock, before deciding: if the slot's state was written under a rule of
   * another shape, carry GCRA debt over (same number of limits) or start the key fresh.
   */
  #reshape(w: Int32Array, m: Moment): boolean {
    const at = this.#shapeAt;
    const rule = this.#rule;
    const stored = Atomics.load(w, at);
    if (stored === rule.shape && ticksMatch(w, at, rule)) return true;
    const g = rule.limits;
    const oldCount = gcraCount(stored);
    if (oldCount !== null && rule.tickPs !== null && oldCount === rule.tickPs.length) {
      // Same number of 64-bit GCRA limits: each keeps its debt, in the new rule's ticks.
      for (let i = 0; i < oldCount; i++) {
        if (!carryDebt(w, at + 1 + (g.offsets[i] as number), m.ms, rule.tickPs[i] as number)) return false;
      }
    } else {
      LockedEngine.initStates(w, g, at + 1, m);
    }
    return Atomics.compareExchange(w, at, stored, rule.shape) === stored;
  }

  #slotState(): SlotState {
    const self = this;
    return {
      initSlot(w, base) {
        Atomics.store(w, base + self.#stateOffset, NO_SHAPE);
        Atomics.store(w, base + S_LAST_SEC, self.#now().sec);
        Atomics.store(w, base + S_TAT, 0);
      },
      isDead(w, base) {
        return Atomics.load(w, base + S_TAT) === DEAD; // the lock word holds the reclaim marker
      },
      retire(w, base) {
        // Atomics.load: a DEAD lock word is a reclaim past its linearisation point; the table ends it.
        if (Atomics.load(w, base + S_TAT) === DEAD) return ALREADY_DEAD;
        const token = tryLock(w, base + S_TAT, self.#owner);
        if (token === 0) return NOT_IDLE;
        const at = base + self.#stateOffset;
        const shape = Atomics.load(w, at);
        let idle = shape === NO_SHAPE;
        // The current rule of that shape whose ticks the state records; a state of no current rule
        // is not judged (kept until its next request moves it over).
        const rule = self.#compiled.byShape.get(shape)?.find((r) => ticksMatch(w, at, r));
        if (rule !== undefined) {
          const m = self.#now();
          const lastSec = Atomics.load(w, base + S_LAST_SEC);
          idle = rule.limits.algorithms.every((a, i) => a.idle(w, at + 1 + (rule.limits.offsets[i] as number), m, isStale(m.sec, lastSec, a.staleSec)));
        }
        // A key under a rule that no longer exists is kept until its next request moves it over.
        // compareExchange from our own token to DEAD: no decision runs between check and reclaim.
        if (idle && Atomics.compareExchange(w, base + S_TAT, token, DEAD) === token) return RETIRED;
        unlock(w, base + S_TAT, token);
        return NOT_IDLE;
      },
    };
  }
}

/**
 * Whether the key's GCRA state at `at` (its shape word, then the limits) was written in the
 * rule's ticks: each 64-bit GCRA state records its tick index in its fourth word. True for
 * other algorithms (their shape says it all).
 */
function ticksMatch(w: Int32Array, at: number, rule: CompiledRule): boolean {
  if (rule.tickPs === null) return true;
  for (let i = 0; i < rule.tickPs.length; i++) {
    // Atomics.load under the key's lock (or its reclaim's try-lock): the word is written only there.
    if (Atomics.load(w, at + 1 + (rule.limits.offsets[i] as number) + 3) !== rule.tickIndex[i]) return false;
  }
  return true;
}

/** The number of limits of a GCRA shape (see rules.ts `shapeOf`), or null for other shapes. */
function gcraCount(shape: number): number | null {
  return (shape & (1 << 30)) === 0 ? null : (shape >>> 24) & 15;
}
