import { describe, integerInRange } from '../config/check.js';
import type { Limit } from '../config/limit.js';
import { DEFAULT_MAX_LOG_SIZE } from '../rate/limiter-config.js';
import type { Decision, KeyState } from '../rate/types.js';
import { PolicyLimiter, type PolicyRequest } from '../policy/policy-limiter.js';
import { checkPolicyRequest, compileRules, label, match, type CompiledRule, type CompiledRules, type PolicyRule } from '../policy/rules.js';
import { monotonicClock } from '../time/clock.js';
import { checkWaitOptions, retryAt, sleepUntil, type AcquireOptions } from '../rate/waiting.js';
import { checkNames } from '../config/option-names.js';
import {
  blockUs, checkControl, checkPenalty, COMMON_OPTION_NAMES, controlBounds, keyStateOf, RedisCore, registerBatcher, type RedisCommonOptions,
} from './redis-core.js';
import { redisLimit, scriptPlan } from './redis-limits.js';
import { POLICY_PREFIX } from './redis-keys.js';
import type { ScriptPlan } from './script-batcher.js';
import { VERIFY_KEY, verifyServer, type RedisVerification, type VerifyOptions } from './verify.js';
import { checkLocalRulesAsStrict, checkLocalTracksEveryKey, ruleLooseness } from './local-strict.js';

/** Options for `new RedisPolicyLimiter`. */
export interface RedisPolicyLimiterOptions extends RedisCommonOptions<PolicyRequest> {
  /** The rules, as for PolicyLimiter; exactly one has neither `user` nor `api` (the default). */
  rules: readonly PolicyRule[];
  /** Largest sliding-log `permits`. Default 1,000. */
  maxLogSize?: number;
  /**
   * With onError 'local': the shared-memory PolicyLimiter to ask (its rules are replaced by
   * `setRules` too). Default: one of this instance's own (10,000 pairs). It must be at least as
   * strict as `rules` for every (user, api) pair (the rule it gives a pair runs the same
   * algorithm, and has for each limit of the rule `rules` give the pair one with no higher rate
   * and burst, or for windows the same period and no more permits), and track every pair
   * (onFull 'deny', the default), else `RangeError`. Should its rules become looser since (one
   * shared by several instances, another's `setRules`), a decision it would answer rejects with
   * a `RangeError` instead, until this instance's `setRules` gives it this instance's rules.
   */
  local?: PolicyLimiter;
}

const OPTION_NAMES = [...COMMON_OPTION_NAMES, 'rules', 'maxLogSize', 'local'];

/** How soon `acquire` asks again after Redis was unavailable and onError refused. */
const UNAVAILABLE_RETRY_MS = 50;

/** Whether `plan` counts in fixed or sliding windows only (a give-back can name the window of its spend). */
function windowPlan(plan: ScriptPlan): boolean {
  return plan.keyLimits.every((l) => l.kind === 1 || l.kind === 2);
}

/** Set by RedisPolicyLimiter's static block: the give-back helpers below read its privates. */
let keepSpendsOf: (limiter: RedisPolicyLimiter) => void;
let giveBackOf: (limiter: RedisPolicyLimiter, decision: Decision, request: PolicyRequest, cost: number) => (() => Promise<void>) | undefined;

/**
 * As `keepRedisSpends` (redis-rate-limiter.ts), for a RedisPolicyLimiter whose rules give back
 * (skipFailedRequests / skipSuccessfulRequests).
 * @internal
 */
export function keepRedisPolicySpends(limiter: RedisPolicyLimiter): void {
  keepSpendsOf(limiter);
}

/**
 * The give-back of `decision`, an admission of `cost` for `request`, by the rule that decided it
 * (the plan recorded with its spend, not the rule of the moment: setRules may run while Redis
 * decides or while the response runs), into the keys that counted it (a later rule of other
 * periods or algorithms counts in other keys, which it never touches), at the admission's Redis
 * time. Under a GCRA rule: a reward of no more than what of the spend is still ahead (its slot
 * ends at least `cost` intervals after that time). Under fixed or sliding windows: `cost`
 * returned into the windows that counted it, all or nothing. Under a sliding log, and for an
 * admission with no recorded spend (a lease of the local tier, a degraded answer): undefined,
 * nothing to give back.
 * @internal
 */
export function redisPolicyGiveBack(
  limiter: RedisPolicyLimiter, decision: Decision, request: PolicyRequest, cost: number,
): (() => Promise<void>) | undefined {
  return giveBackOf(limiter, decision, request, cost);
}

/**
 * `PolicyLimiter`'s rules on Redis: each (user, api) pair gets the limits of its most specific
 * rule, decided by the same script as `RedisRateLimiter` and shared by every process and host.
 * The rules are this instance's (give every process the same ones, or call `setRules` on each):
 * a pair keeps its state on Redis across a change of rules: a GCRA debt is carried into the new
 * rates; a window keeps its count while its period is unchanged and starts afresh under another
 * period or algorithm.
 *
 * Thread-safety: one instance per thread (it holds its queue); the state is Redis's.
 */
export class RedisPolicyLimiter {
  readonly #core: RedisCore<PolicyRequest>;
  readonly #maxLogSize: number;
  #local: PolicyLimiter | null;
  /** Whether `#local` is ours (made here), not the caller's. */
  readonly #ownLocal: boolean;
  #rules!: readonly PolicyRule[];
  #compiled!: CompiledRules;
  #plans!: Map<CompiledRule, ScriptPlan>;
  /**
   * For a caller's local limiter: per rule it gave a pair (its rules' objects, the same until its
   * rules change), per rule of ours, why it is looser (null: it is not).
   */
  readonly #looseness = new WeakMap<object, WeakMap<CompiledRule, string | null>>();

  static {
    keepSpendsOf = (limiter) => limiter.#core.keepSpends();
    giveBackOf = (limiter, decision, request, cost) => limiter.#giveBack(decision, request, cost);
  }

  constructor(options: RedisPolicyLimiterOptions) {
    if (options === null || typeof options !== 'object') {
      throw new TypeError(`options must be an object like { redis, rules }, got ${describe(options)}`);
    }
    checkNames(options, OPTION_NAMES, 'options', 'RedisPolicyLimiter option');
    this.#maxLogSize = integerInRange('options.maxLogSize', options.maxLogSize ?? DEFAULT_MAX_LOG_SIZE, 1, 65_536);
    if (options.local !== undefined && !(options.local instanceof PolicyLimiter)) {
      throw new TypeError(`options.local must be a PolicyLimiter, got ${describe(options.local)}`);
    }
    if (options.local !== undefined && options.onError !== 'local') {
      throw new TypeError(`options.local is used only with onError: 'local', got onError ${describe(options.onError)}`);
    }
    this.#core = new RedisCore<PolicyRequest>(options, POLICY_PREFIX);
    const { compiled, plans } = this.#compile(options.rules);
    if (options.local !== undefined) {
      checkLocalTracksEveryKey(options.local.handle.table);
      // Its rules passed its own checks; its maxLogSize may be larger than ours.
      checkLocalRulesAsStrict(compileRules(options.local.rules, 65_536), compiled);
    }
    this.#rules = JSON.parse(JSON.stringify(options.rules)) as PolicyRule[];
    this.#compiled = compiled;
    this.#plans = plans;
    registerBatcher(this, this.#core.batcher);
    this.#ownLocal = this.#core.onError === 'local' && options.local === undefined;
    this.#local = this.#core.onError !== 'local' ? null : options.local ?? this.#newLocal(options.rules);
    // Through the field: setRules may replace a fallback of our own.
    if (this.#local !== null) this.#core.setFallback((request, cost) => this.#localAnswer(request, cost));
    // Last, once every option passed: the tier serves these rules (or another's: thrown).
    this.#core.cache?.claim(this.#tierConfig(this.#rules));
  }

  /** This limiter's configuration under `rules`, as its local tier records it (LocalTier#claim). */
  #tierConfig(rules: readonly PolicyRule[]): string {
    return `RedisPolicyLimiter prefix ${JSON.stringify(this.#core.prefix)} maxLogSize ${this.#maxLogSize} rules ${JSON.stringify(rules)}`;
  }

  /** The rules in force for this instance (a copy). */
  get rules(): PolicyRule[] {
    return JSON.parse(JSON.stringify(this.#rules)) as PolicyRule[];
  }

  /**
   * Replaces this instance's rules (and the shared-memory fallback's). Throws, naming the rule,
   * for anything PolicyLimiter refuses or a limit Redis cannot count exactly; then nothing
   * changes. The refusal cache forgets what the old rules refused.
   */
  setRules(rules: readonly PolicyRule[]): void {
    const { compiled, plans } = this.#compile(rules);
    // The local tier serves the new rules from here on (LocalTierConfigError, nothing changed,
    // when it serves neither the old nor the new: another configuration's).
    const tier = this.#core.cache;
    const from = this.#tierConfig(this.#rules);
    const to = this.#tierConfig(JSON.parse(JSON.stringify(rules)) as PolicyRule[]);
    const moved = tier?.reclaim(from, to) ?? false;
    // The fallback first: if it refuses the rules, nothing has changed. One of our own that has no
    // room for them is replaced (its state is only the degraded path's).
    if (this.#local !== null) {
      try {
        this.#local.setRules(rules);
      } catch (e) {
        if (!this.#ownLocal) {
          if (moved) tier?.reclaim(to, from);
          throw e;
        }
        this.#local = this.#newLocal(rules);
      }
    }
    this.#rules = JSON.parse(JSON.stringify(rules)) as PolicyRule[];
    this.#compiled = compiled;
    this.#plans = plans;
    this.#core.cache?.clear();
  }

  /**
   * The local limiter's answer for onError 'local'. A caller's local limiter was as strict as our
   * rules at construction, and `setRules` gives it ours; but its rules live in shared memory, and
   * another instance sharing it (another thread's) may have given it looser ones since: then it
   * is not asked, and the decision rejects (RangeError), rather than admit more than our rules.
   */
  #localAnswer(request: PolicyRequest, cost: number): Decision {
    const local = this.#local as PolicyLimiter;
    if (!this.#ownLocal) {
      const mine = local.ruleFor(request);
      const theirs = match(this.#compiled, request.user, request.api);
      let known = this.#looseness.get(mine);
      if (known === undefined) this.#looseness.set(mine, (known = new WeakMap()));
      let why = known.get(theirs);
      if (why === undefined) known.set(theirs, (why = ruleLooseness(mine, theirs.rule)));
      if (why !== null) {
        throw new RangeError(`options.local's rules are looser than this limiter's for user ${JSON.stringify(request.user)}, ` +
          `api ${JSON.stringify(request.api)} ` +
          `(changed since: another instance's setRules?): ${why}; it is not asked while Redis is unavailable`);
      }
    }
    return local.tryAcquire(request, cost);
  }

  /** The rule that applies to (user, api) now. */
  ruleFor(request: PolicyRequest): Readonly<PolicyRule> {
    checkPolicyRequest(request, 1);
    return match(this.#compiled, request.user, request.api).rule;
  }

  /**
   * Checks (user, api) against its most specific rule and, if it passes, counts it, in one atomic
   * step on Redis. Resolves as `RedisRateLimiter.tryAcquire` does; throws `TypeError`/`RangeError`
   * at once for a bad request or cost.
   */
  tryAcquire(request: PolicyRequest, cost = 1): Promise<Decision> {
    const key = checkPolicyRequest(request, cost);
    const plan = this.#plans.get(match(this.#compiled, request.user, request.api)) as ScriptPlan;
    return this.#core.told(this.#core.decide(request, key, cost, plan, null), request, cost);
  }

  /** As `RedisRateLimiter.get`, for (user, api) under the rule it matches. */
  async get(request: PolicyRequest): Promise<KeyState> {
    const key = checkPolicyRequest(request, 0);
    const plan = this.#plans.get(match(this.#compiled, request.user, request.api)) as ScriptPlan;
    return keyStateOf(await this.#core.decide(request, key, 0, plan, null), key);
  }

  /**
   * As `RedisRateLimiter.reset`, for (user, api): its state under the rule it matches now is
   * deleted (a pair keeps its state across a change of rules; state kept under other limits'
   * keys by older rules expires on its own).
   */
  reset(request: PolicyRequest): Promise<boolean> {
    const key = checkPolicyRequest(request, 0);
    return this.#core.reset(key, this.#plans.get(match(this.#compiled, request.user, request.api)) as ScriptPlan);
  }

  /** As `RedisRateLimiter.reward`, for (user, api) under the rule it matches now. */
  reward(request: PolicyRequest, cost: number): Promise<void> {
    const { key, plan } = this.#controlPlan(request, cost, 'reward');
    return this.#core.control(key, 'reward', cost, plan);
  }

  /** As `RedisRateLimiter.penalty`, for (user, api) under the rule it matches now. */
  penalty(request: PolicyRequest, cost: number): Promise<void> {
    const { key, plan } = this.#controlPlan(request, cost, 'penalty');
    checkPenalty(cost, controlBounds(plan.keyLimits).penalty);
    return this.#core.control(key, 'penalty', cost, plan);
  }

  /** As `RedisRateLimiter.block`, for (user, api) under the rule it matches now (`TypeError` for a sliding-log rule). */
  block(request: PolicyRequest, ms: number): Promise<void> {
    const { key, plan } = this.#controlPlan(request, 0, 'block');
    return this.#core.control(key, 'block', blockUs(ms, controlBounds(plan.keyLimits).blockMs), plan);
  }

  /** Ends a block: the pair reads as fresh (as `reset`, which it is). */
  unblock(request: PolicyRequest): Promise<boolean> {
    return this.reset(request);
  }

  /** `redisPolicyGiveBack` (above). */
  #giveBack(decision: Decision, request: PolicyRequest, cost: number): (() => Promise<void>) | undefined {
    const spend = this.#core.spendOf(decision);
    if (spend === undefined) return undefined;
    const key = checkPolicyRequest(request, cost);
    const { atUs, plan } = spend;
    // The keys that counted the spend (a policy plan holds no cap).
    return plan.gcra || windowPlan(plan) ? this.#core.giveBackOnce(key, cost, atUs, plan) : undefined;
  }

  /** The pair's cache key and the plan of the rule it matches now; `TypeError` for a block under a sliding-log rule. */
  #controlPlan(request: PolicyRequest, cost: number, control: string): { key: string; plan: ScriptPlan } {
    const key = checkPolicyRequest(request, cost);
    const rule = match(this.#compiled, request.user, request.api);
    checkControl(control, rule.rule.algorithm ?? 'gcra', `the rule for ${JSON.stringify(key)}`);
    return { key, plan: this.#plans.get(rule) as ScriptPlan };
  }

  /** Like `tryAcquire`, answering only whether the request passes. */
  async allow(request: PolicyRequest, cost = 1): Promise<boolean> {
    return (await this.tryAcquire(request, cost)).allowed;
  }

  /** As `RedisRateLimiter.acquire`, for (user, api). */
  async acquire(request: PolicyRequest, options?: AcquireOptions): Promise<void> {
    const { cost, maxWaitMs, signal } = checkWaitOptions(options, 'acquire');
    const key = checkPolicyRequest(request, cost);
    signal?.throwIfAborted();
    const clock = monotonicClock;
    const deadline = clock.now() + maxWaitMs;
    for (let d = await this.tryAcquire(request, cost); !d.allowed; d = await this.tryAcquire(request, cost)) {
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
    return verifyServer(this.#core.commands, this.#core.prefix, () => this.#verifyProbe(), options);
  }

  /** verify()'s probe: a decision of cost 0, which the hook is not told of. */
  #verifyProbe(): Promise<Decision> {
    const request = { user: VERIFY_KEY, api: VERIFY_KEY };
    const key = checkPolicyRequest(request, 0);
    return this.#core.decide(request, key, 0, this.#plans.get(match(this.#compiled, VERIFY_KEY, VERIFY_KEY)) as ScriptPlan, null);
  }

  /**
   * Whether a breaker currently keeps calls from Redis (for monitoring): this instance's one, or
   * on a Cluster any primary's (each has its own, so only that primary's keys are answered by
   * `onError` meanwhile).
   */
  get breakerOpen(): boolean {
    return this.#core.batcher.groups.anyOpen(performance.now());
  }

  /** A shared-memory PolicyLimiter of our own for onError 'local', with room for `rules`. */
  #newLocal(rules: readonly PolicyRule[]): PolicyLimiter {
    const json = JSON.stringify(rules).length * 3; // UTF-8 bytes at most
    return new PolicyLimiter({
      rules,
      maxKeys: 10_000,
      maxLogSize: this.#maxLogSize,
      maxRulesBytes: Math.max(65_536, 2 * json),
      maxStateWords: Math.max(16, 2 * compileRules(rules, this.#maxLogSize).stateWords),
    });
  }

  /** Checks and compiles `rules` (for memory and for Redis); changes nothing. */
  #compile(rules: readonly PolicyRule[]): { compiled: CompiledRules; plans: Map<CompiledRule, ScriptPlan> } {
    const compiled = compileRules(rules, this.#maxLogSize);
    const plans = new Map<CompiledRule, ScriptPlan>();
    const all = [compiled.fallback, ...compiled.byUser.values(), ...compiled.byApi.values(), ...[...compiled.byPair.values()].flatMap((m) => [...m.values()])];
    for (const entry of all) {
      const i = rules.indexOf(rules.find((r) => r.user === entry.rule.user && r.api === entry.rule.api) as PolicyRule);
      const name = `${label(rules[i], i)}.limit`;
      const list = (Array.isArray(entry.rule.limit) ? entry.rule.limit : [entry.rule.limit]) as Limit[];
      const algorithm = entry.rule.algorithm ?? 'gcra';
      const limits = list.map((l, j) => redisLimit(
        algorithm, l, list.length === 1 && !Array.isArray(entry.rule.limit) ? name : `${name}[${j}]`, this.#maxLogSize,
      ));
      plans.set(entry, scriptPlan(limits, [], this.#core.prefix));
    }
    return { compiled, plans };
  }
}
