import type { AlgorithmName } from '../algorithms/index.js';
import { checkAlgorithm } from '../algorithms/index.js';
import { checkWellFormed, describe, integerInRange } from '../config/check.js';
import type { Limit } from '../config/limit.js';
import { DEFAULT_MAX_LOG_SIZE } from '../rate/limiter-config.js';
import type { Decision, KeyState } from '../rate/types.js';
import { MAX_LIMITS } from '../table/layout.js';
import { RateLimiter } from '../rate/rate-limiter.js';
import { checkRequest } from '../table/table-site.js';
import { monotonicClock } from '../time/clock.js';
import { checkWaitOptions, retryAt, sleepUntil, type AcquireOptions } from '../rate/waiting.js';
import { checkNames } from '../config/option-names.js';
import {
  blockUs, checkControl, checkPenalty, COMMON_OPTION_NAMES, controlBounds, keyStateOf, RedisCore, registerBatcher, type RedisCommonOptions,
} from './redis-core.js';
import { limitPart, redisLimit, scriptPlan } from './redis-limits.js';
import { defaultPrefix } from './redis-keys.js';
import { PrefixOwner, type PrefixCheck } from './prefix-owner.js';
import { checkLocalAsStrict, checkLocalTracksEveryKey } from './local-strict.js';
import type { ScriptPlan } from './script-batcher.js';
import { VERIFY_KEY, verifyServer, type RedisVerification, type VerifyOptions } from './verify.js';

/** Options for `new RedisRateLimiter`. */
export interface RedisRateLimiterOptions extends RedisCommonOptions {
  /** The rate every key gets; several limits must all allow, and are spent together. At most 8. */
  limit: Limit | readonly Limit[];
  /** How the limits count, as for RateLimiter. Default 'gcra'. */
  algorithm?: AlgorithmName;
  /**
   * One limit shared by every key, checked after the key's own; refusals spend nothing. On a
   * Cluster it lives on its own node: spent first, and given back when the key refuses.
   */
  globalLimit?: Limit;
  /** Largest sliding-log `permits` (a list of that many stamps per key on Redis). Default 1,000. */
  maxLogSize?: number;
  /**
   * With onError 'local': the shared-memory limiter to ask, e.g. `RateLimiter.attach(handle)` of
   * one shared by every worker thread of the process. Default: one of this instance's own
   * (10,000 keys). It must be at least as strict as the Redis limits (same algorithm; for each
   * limit one with no higher rate and burst, or for windows the same period and no more
   * permits; a global limit if they have one), and track every key (onFull 'deny', the default:
   * under 'allow' a full table admits keys untracked), else `RangeError`. During an outage each
   * process answers from its own: P processes may admit up to P times the limit.
   */
  local?: RateLimiter;
  /**
   * With a `prefix` given: 'check' (default) records this limiter's limits under the prefix at its
   * first call, or finds the limits recorded there, and rejects every call with `RedisConfigError`
   * when they are another limiter's (the two would share every key's state); 'adopt' records
   * these limits over another's (a deliberate change of limits under one prefix); 'off' records
   * and checks nothing. The default prefix names the limits itself: nothing to check.
   */
  prefixCheck?: PrefixCheck;
}

const OPTION_NAMES = [...COMMON_OPTION_NAMES, 'limit', 'algorithm', 'globalLimit', 'maxLogSize', 'local', 'prefixCheck'];

/** How soon `acquire` asks again after Redis was unavailable and onError refused. */
const UNAVAILABLE_RETRY_MS = 50;

/**
 * Checks a key and cost as RateLimiter does: a key with a lone surrogate would reach Redis as
 * U+FFFD (UTF-8), sharing state with another key, so it is refused with a `TypeError`.
 */
function checkKey(key: string, cost: number): void {
  checkRequest(key, cost);
  checkWellFormed('key', key);
}

/** Set by RedisRateLimiter's static block: `keepRedisSpends` and `redisSpendGiveBack` read its privates. */
let keepSpendsOf: (limiter: RedisRateLimiter) => void;
let spendGiveBackOf: (limiter: RedisRateLimiter, decision: Decision, key: string, cost: number) => (() => Promise<void>) | undefined;

/**
 * Whether `limiter` can give an admission back into the windows it was counted in
 * (`redisSpendGiveBack`): fixed or sliding windows.
 * @internal
 */
export function givesBackInRedisWindows(limiter: RedisRateLimiter): boolean {
  return limiter.algorithm === 'fixed-window' || limiter.algorithm === 'sliding-window';
}

/**
 * For skipFailedRequests / skipSuccessfulRequests (http/give-back.ts): from now on, `limiter`
 * records the Redis time of each admission it decides, which `redisSpendGiveBack` needs. Called
 * once, when a middleware that gives back is made.
 * @internal
 */
export function keepRedisSpends(limiter: RedisRateLimiter): void {
  keepSpendsOf(limiter);
}

/**
 * The give-back of `decision` (an admission of `cost` on `key` by `limiter`, a limiter that keeps
 * its spends), on the key's limits only (a cap keeps its spend), by the admission's Redis time:
 * - fixed or sliding windows: `cost` returned into the windows Redis counted it in, and only
 *   there (a response that ends after its window did gives nothing to a later one); all of it or
 *   nothing;
 * - GCRA: a reward of no more than what of the spend is still ahead on Redis's clock (its slot
 *   ends at least `cost` intervals after the admission's time): what drained stays spent.
 * Undefined when the admission has no Redis time (a lease the local tier held, a degraded
 * answer): nothing to give back. `TypeError` on a sliding log.
 * @internal
 */
export function redisSpendGiveBack(limiter: RedisRateLimiter, decision: Decision, key: string, cost: number): (() => Promise<void>) | undefined {
  return spendGiveBackOf(limiter, decision, key, cost);
}

/**
 * The same limits as `RateLimiter`, kept in Redis so that every process and host shares them.
 * Each decision is one atomic step of a Lua script on Redis's own clock (src/redis/
 * limits-script.ts); decisions waiting together share a script call (script-batcher.ts).
 *
 * Never hangs, never counts late: every decision has its own deadline (`timeoutMs`), and the
 * script is told the same deadline on Redis's clock, never later than the moment the limiter
 * answers, so a call delayed in a client's offline queue, or by a frozen server, spends nothing
 * when it arrives.
 *
 * Thread-safety: one instance per thread (it holds its queue); the state is Redis's.
 */
export class RedisRateLimiter {
  readonly limits: readonly Readonly<Required<Limit>>[];
  readonly globalLimit: Readonly<Required<Limit>> | null;
  readonly algorithm: AlgorithmName;
  readonly #core: RedisCore<string>;
  readonly #plan: ScriptPlan;
  /** The cap's own plan on a Cluster (its key lives in another slot); null otherwise. */
  readonly #capPlan: ScriptPlan | null;
  /** The key's limits without the cap, for the per-key controls and window give-backs. */
  readonly #keyPlan: ScriptPlan;
  /** The longest `block` (ms) and the largest `penalty` (controlBounds). */
  readonly #bounds: { blockMs: number; penalty: number };
  /** Whose limits a given prefix holds (prefix-owner.ts). */
  readonly #owner: PrefixOwner;

  static {
    keepSpendsOf = (limiter) => limiter.#core.keepSpends();
    spendGiveBackOf = (limiter, decision, key, cost) => limiter.#spendGiveBack(decision, key, cost);
  }

  constructor(options: RedisRateLimiterOptions) {
    if (options === null || typeof options !== 'object') {
      throw new TypeError(`options must be an object like { redis, limit }, got ${describe(options)}`);
    }
    checkNames(options, OPTION_NAMES, 'options', 'RedisRateLimiter option');
    const algorithm = checkAlgorithm(options.algorithm ?? 'gcra', 'options.algorithm');
    const maxLogSize = integerInRange('options.maxLogSize', options.maxLogSize ?? DEFAULT_MAX_LOG_SIZE, 1, 65_536);
    const list = Array.isArray(options.limit) ? options.limit : [options.limit];
    if (list.length === 0 || list.length > MAX_LIMITS) throw new RangeError(`options.limit must hold 1 to ${MAX_LIMITS} limits, got ${list.length}`);
    const names = list.length === 1 && !Array.isArray(options.limit) ? ['options.limit'] : list.map((_, i) => `options.limit[${i}]`);
    const compiled = list.map((l, i) => redisLimit(algorithm, l as Limit, names[i] as string, maxLogSize));
    const global = options.globalLimit === undefined ? null : redisLimit(algorithm, options.globalLimit, 'options.globalLimit', maxLogSize);
    if (options.local !== undefined && !(options.local instanceof RateLimiter)) {
      throw new TypeError(`options.local must be a RateLimiter, got ${describe(options.local)}`);
    }
    if (options.local !== undefined && options.onError !== 'local') {
      throw new TypeError(`options.local is used only with onError: 'local', got onError ${describe(options.onError)}`);
    }
    const core = new RedisCore<string>(options, defaultPrefix(compiled.map(limitPart)));
    this.#core = core;
    registerBatcher(this, core.batcher);
    this.algorithm = algorithm;
    this.limits = Object.freeze(compiled.map((c) => c.limit));
    this.globalLimit = global === null ? null : global.limit;
    if (options.local !== undefined) {
      checkLocalAsStrict(options.local, algorithm, this.limits, this.globalLimit);
      checkLocalTracksEveryKey(options.local.handle.table);
    }
    if (core.onError === 'local') {
      const local = options.local ?? new RateLimiter({
        algorithm, maxLogSize, limit: this.limits as Limit[], ...(this.globalLimit === null ? {} : { globalLimit: this.globalLimit }), maxKeys: 10_000,
      });
      core.setFallback((key, cost) => local.tryAcquire(key, cost));
    }
    const caps = global === null ? [] : [global];
    // The cap's keys: under the given prefix, or by default under the cap's own fingerprint, so
    // that limiters of other key limits but the same cap share it, as a cap is meant to be.
    const capPrefix = options.prefix ?? defaultPrefix(caps.map(limitPart));
    // On a Cluster the cap's key is in another slot than the user's keys: a script of its own.
    const split = core.batcher.cluster && global !== null;
    this.#plan = scriptPlan(compiled, split ? [] : caps, capPrefix);
    this.#capPlan = split ? scriptPlan([], caps, capPrefix) : null;
    // Without a cap in the decisions' plan (none, or a Cluster's own), it is the key's own.
    this.#keyPlan = caps.length === 0 || split ? this.#plan : scriptPlan(compiled, [], capPrefix);
    this.#bounds = controlBounds(compiled);
    const prefixCheck = options.prefixCheck ?? 'check';
    if (prefixCheck !== 'check' && prefixCheck !== 'adopt' && prefixCheck !== 'off') {
      throw new RangeError(`options.prefixCheck must be 'check', 'adopt' or 'off', got ${describe(prefixCheck)}`);
    }
    const config = JSON.stringify({ algorithm, limits: this.limits, globalLimit: this.globalLimit, ...(algorithm === 'sliding-log' ? { maxLogSize } : {}) });
    const mode = options.prefix === undefined ? 'off' : prefixCheck;
    this.#owner = new PrefixOwner(core.commands, core.prefix, config, mode, core.batcher.timeoutMs, core.rejectNow);
    // Last, once every option passed: the tier serves this configuration (or another's: thrown).
    core.cache?.claim(`RedisRateLimiter prefix ${JSON.stringify(core.prefix)} ${config}`);
  }

  /**
   * `call(by)`, once the prefix is known to hold this limiter's limits (at once, after the first
   * check). A call that waits for the check gets its deadline `by` now, before it: the check and
   * the call share one timeoutMs (found: on a frozen server a first call took up to timeoutMs for
   * the check, then a whole deadline of its own: 402 ms at timeoutMs 200). undefined: none yet.
   */
  #owned<T>(call: (by: number | undefined) => Promise<T>): Promise<T> {
    const ready = this.#owner.ready();
    if (ready === null) return call(undefined);
    const by = performance.now() + this.#core.batcher.timeoutMs;
    return ready.then(() => call(by));
  }

  /**
   * Checks `key` and, if the request passes, counts it, in one atomic step on Redis. `cost` is an
   * integer >= 0; 0 is a probe that counts nothing. Resolves with the same `Decision` as the
   * shared-memory limiter, or, when Redis fails or is later than `timeoutMs`, with `onError`'s
   * answer and reason 'unavailable'. Rejects with `RedisConfigError` when Redis refuses the call
   * for a reason waiting does not fix (an ACL without the scripts' commands, WRONGTYPE, OOM:
   * redis-errors.ts), whatever `onError` says; throws `TypeError`/`RangeError` at once for a bad
   * key or cost.
   */
  tryAcquire(key: string, cost = 1): Promise<Decision> {
    checkKey(key, cost);
    // The hot path allocates nothing more: once the prefix is checked, ready() is null.
    const ready = this.#owner.ready();
    if (ready === null) return this.#tryNow(key, cost);
    // One deadline for the check and the decision (see #owned).
    const by = performance.now() + this.#core.batcher.timeoutMs;
    return ready.then(() => this.#tryNow(key, cost, by));
  }

  /** verify()'s probe: a decision of cost 0 on a key of its own, by the deadline `by` if set. */
  #probe(by?: number): Promise<Decision> {
    return this.#core.decide(VERIFY_KEY, VERIFY_KEY, 0, this.#plan, this.#capPlan, by);
  }

  /** `tryAcquire`, its arguments checked and the prefix's owner known; `by`: its deadline, when set before the check. */
  #tryNow(key: string, cost: number, by?: number): Promise<Decision> {
    return this.#core.told(this.#core.decide(key, key, cost, this.#plan, this.#capPlan, by), key, cost);
  }

  /**
   * The key's state on Redis now, without spending: what a probe (`cost` 0) reports; a key Redis
   * holds nothing for reads as fresh. Rejects when Redis did not answer (its state is then
   * unknown; onError does not answer for it), and as `tryAcquire` for a misconfiguration.
   */
  async get(key: string): Promise<KeyState> {
    checkKey(key, 0);
    return keyStateOf(await this.#owned((by) => this.#core.decide(key, key, 0, this.#plan, this.#capPlan, by)), key);
  }

  /**
   * Deletes `key`'s state on Redis (every limit's; a global cap stays) in one script call: it
   * reads as fresh on every process. This process's local tier forgets its refusals at once;
   * another process's may refuse the key until the retry time Redis gave it (under-admission
   * only). Resolves true when Redis held state for the key. Rejects when Redis does not answer
   * within `timeoutMs` (onError does not answer for it), and with `RedisConfigError` for an ACL
   * without `DEL`.
   */
  reset(key: string): Promise<boolean> {
    checkKey(key, 0);
    return this.#owned((by) => this.#core.reset(key, this.#plan, by));
  }

  /**
   * Gives back `cost` of what `key` has spent under each of its limits, never below a fresh key's
   * state (a reward; a global cap keeps its spend), in one script call on Redis: GCRA, `cost`
   * intervals of debt; a fixed window, from this window's count; a sliding window, from this
   * window's count, then the previous one's; a sliding log, its newest stamps that still count.
   * This process's local tier forgets its refusals at once; another process's may refuse the key
   * until the retry time Redis gave it (under-admission only). Rejects when Redis does not answer
   * within `timeoutMs` (the spend may or may not be back), and with `RedisConfigError` for a
   * misconfiguration.
   */
  reward(key: string, cost: number): Promise<void> {
    checkKey(key, cost);
    const plan = this.#controlPlan('reward');
    return this.#owned((by) => this.#core.control(key, 'reward', cost, plan, by));
  }

  /**
   * Spends `cost` on `key` under each of its limits now, even beyond the burst (a penalty: the key
   * waits longer), in one script call on Redis; a global cap is not charged. A fixed window is
   * filled at most (its count ends with it); a sliding window counts past its permits and weighs
   * on the next window; a sliding log keeps its newest `permits` stamps. Rejects as `reward`, and
   * when Redis ran it too late (nothing was written).
   */
  penalty(key: string, cost: number): Promise<void> {
    checkKey(key, cost);
    const plan = this.#controlPlan('penalty');
    checkPenalty(cost, this.#bounds.penalty);
    return this.#owned((by) => this.#core.control(key, 'penalty', cost, plan, by));
  }

  /**
   * Refuses every request on `key` for `ms` from Redis's now (a ban), under each of its limits,
   * and a longer wait is kept. GCRA: the debt rises so that a request of cost 1 passes when the
   * block ends and none before. Windows: the state keeps the block's end, and a request passes
   * from then on as the window's count allows. One script call; this process's local tier forgets
   * its refusals and leases at once (see docs/redis.md for another process's leases). `TypeError`
   * on a sliding log. Rejects as `penalty`.
   */
  block(key: string, ms: number): Promise<void> {
    checkKey(key, 0);
    const plan = this.#controlPlan('block');
    const us = blockUs(ms, this.#bounds.blockMs);
    return this.#owned((by) => this.#core.control(key, 'block', us, plan, by));
  }

  /** Ends a block: the key reads as fresh (as `reset`, which it is). */
  unblock(key: string): Promise<boolean> {
    return this.reset(key);
  }

  /** `redisSpendGiveBack` (above): a refund at the admission's Redis time, on the key's limits. */
  #spendGiveBack(decision: Decision, key: string, cost: number): (() => Promise<void>) | undefined {
    if (this.algorithm !== 'gcra' && !givesBackInRedisWindows(this)) {
      throw new TypeError(`a spend's give-back is for a RedisRateLimiter of GCRA limits or of fixed or sliding windows; this one runs '${this.algorithm}'`);
    }
    const spend = this.#core.spendOf(decision);
    if (spend === undefined) return undefined;
    const plan = this.#keyPlan; // the spend's plan less a cap (a cap keeps its spend)
    return this.#core.giveBackOnce(key, cost, spend.atUs, plan);
  }

  /** The key's limits without the cap, for a control; `TypeError` for a block on a sliding log. */
  #controlPlan(control: string): ScriptPlan {
    checkControl(control, this.algorithm, 'this limiter');
    return this.#keyPlan;
  }

  /** Like `tryAcquire`, answering only whether the request passes. */
  async allow(key: string, cost = 1): Promise<boolean> {
    return (await this.tryAcquire(key, cost)).allowed;
  }

  /**
   * Resolves once the request is admitted, trying again at each reported retry time. Rejects at
   * once with `RateLimitTimeoutError` when the wait would exceed `maxWaitMs` or the cost can
   * never pass, and with the signal's reason on abort. While Redis is unavailable and onError
   * refuses, it tries again every 50 ms within `maxWaitMs`.
   */
  async acquire(key: string, options?: AcquireOptions): Promise<void> {
    const { cost, maxWaitMs, signal } = checkWaitOptions(options, 'acquire');
    checkKey(key, cost);
    signal?.throwIfAborted();
    const clock = monotonicClock;
    const deadline = clock.now() + maxWaitMs;
    for (let d = await this.tryAcquire(key, cost); !d.allowed; d = await this.tryAcquire(key, cost)) {
      const wait = d.reason === 'unavailable' ? UNAVAILABLE_RETRY_MS : d.retryAfterMs;
      await sleepUntil(clock, retryAt(key, wait, clock.now(), deadline, maxWaitMs), signal);
    }
  }

  /**
   * Checks once, at startup, that the limiter's scripts load and run on the server (a probe of
   * cost 0, which writes nothing) and that the server will not evict its keys: resolves with the
   * `maxmemory-policy` seen. Rejects with `RedisConfigError` when the scripts cannot run (an ACL,
   * WRONGTYPE) or the policy may evict the keys (anything but noeviction) unless
   * `allowEviction`, and with an `Error` when Redis does not answer. See verify.ts.
   */
  verify(options?: VerifyOptions): Promise<RedisVerification> {
    return verifyServer(this.#core.commands, this.#core.prefix, () => this.#owned((by) => this.#probe(by)), options);
  }

  /**
   * Whether a breaker currently keeps calls from Redis (for monitoring): this instance's one, or
   * on a Cluster any primary's (each has its own, so only that primary's keys are answered by
   * `onError` meanwhile).
   */
  get breakerOpen(): boolean {
    return this.#core.batcher.groups.anyOpen(performance.now());
  }
}
