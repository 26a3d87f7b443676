import { describe, positiveFinite } from '../config/check.js';
import type { Decision, DecisionReason, KeyState } from '../rate/types.js';
import { redisCommands, type RedisCommands } from './client.js';
import { ALLOWED, EXCEEDS_BURST, GLOBAL_LIMIT, LIMITED } from './limits-script.js';
import { LocalTier } from './local-tier.js';
import { deleteKeys } from './key-reset.js';
import { RESET_MARK } from './lua-gcra.js';
import { keyBase } from './redis-keys.js';
import type { RedisLimit } from './redis-limits.js';
import { outcome, ScriptBatcher, type Outcome, type Reply, type ScriptPlan } from './script-batcher.js';
import { decisionHookOf, tellDecision, type DecisionHook } from '../rate/decision-hook.js';
import { once } from '../rate/once.js';

/** The options every Redis limiter has. */
export interface RedisCommonOptions<Key = string> {
  /**
   * Called after each decision, once it resolves (see RateLimiterOptions.onDecision): a
   * degraded one has reason 'unavailable', or the local limiter's with onError 'local'.
   */
  onDecision?: DecisionHook<Key>;
  /** The client: an ioredis `Redis` or `Cluster`, or a connected node-redis client or cluster. */
  redis: unknown;
  /**
   * Prepended to every Redis key. Limiters with the same prefix share the state of each key (as
   * the same service on many processes must). Default: `sluice:` and a fingerprint of the
   * limiter's limits (RedisRateLimiter: one for the key's limits, one for the global cap's), so
   * that limiters of different limits never share state by accident; RedisPolicyLimiter
   * `sluice:policy:`.
   */
  prefix?: string;
  /**
   * The longest a decision waits for Redis, in ms (default 500). Past it the decision answers as
   * `onError` says, and Redis, should the call still arrive, spends nothing for it.
   */
  timeoutMs?: number;
  /**
   * The answer while Redis fails, is late or its breaker is open (every such decision has
   * `degraded: true`): 'deny' (default) and 'allow' answer so with reason 'unavailable';
   * 'local' asks a shared-memory limiter with the same limits (`local`, or one of its own).
   */
  onError?: 'deny' | 'allow' | 'local';
  /**
   * Decisions waiting together share script calls of up to this many (default 32), spread over
   * up to four calls in flight: smaller calls let Redis run one while the client reads another.
   */
  maxBatch?: number;
  /**
   * The process's shared memory in front of Redis (src/redis/local-tier.ts): a refusal Redis gave
   * is answered there, by every thread, until the moment Redis said; and leases live there. Pass
   * `LocalTier.attach(handle)` of one tier created for this limiter's limits and shared by the
   * process's threads. Default: a tier of this instance's own; `false`: none.
   */
  localTier?: LocalTier | false;
  /**
   * Opt-in leases: a thread asks Redis for up to this many permits at once (Redis grants what the
   * limits still hold, so leases shrink near the limit) and every thread of the process spends
   * them from the local tier, for the tier's `leaseMs` from when they were asked. Each permit was
   * counted by Redis at most leaseMs before its admission; in any window the admissions exceed
   * the limit by at most (processes x lease). Default: none.
   */
  lease?: number;
}

const MAX_TIMEOUT_MS = 2 ** 31 - 1;

/**
 * A reward's slot end on Redis's clock, in µs: 2^52 (the year 2112), past any debt a key can
 * hold, so that the refund gives back all it was asked for, down to a fresh key's state.
 */
const FAR_AHEAD_US = 2 ** 52;

export const COMMON_OPTION_NAMES = ['redis', 'prefix', 'timeoutMs', 'onError', 'maxBatch', 'localTier', 'lease', 'onDecision'];


const REASONS: Record<number, DecisionReason> = {
  [ALLOWED]: 'allowed', [LIMITED]: 'limited', [EXCEEDS_BURST]: 'exceeds-burst', [GLOBAL_LIMIT]: 'global-limit',
};

/** The decision Redis's reply says. */
export function decisionOf(r: Reply): Decision {
  const allowed = r.status === ALLOWED;
  return {
    allowed,
    remaining: r.remaining,
    retryAfterMs: allowed ? 0 : r.waitUs < 0 ? Infinity : r.waitUs / 1000,
    resetAfterMs: r.resetUs / 1000,
    reason: REASONS[r.status] ?? 'limited',
  };
}

/**
 * The longest block on window limits: ten years. A block's end is a µs stamp on Redis's clock,
 * exact far past that (now, about 1.7e15 µs, plus 3.2e14, below 2^53).
 */
const MAX_WINDOW_BLOCK_MS = 10 * 365 * 86_400_000;
/** The largest penalty on window and log limits: a count stays an exact integer in Lua's doubles. */
const MAX_WINDOW_PENALTY = 2 ** 52;

/**
 * How far a control may take key limits `limits`. A GCRA debt in each limit's units (1/k us)
 * must stay an exact integer in Lua's doubles, below 2^53: 30 days of block at every limit whose
 * k is at most about 3,400. Windows and logs: MAX_WINDOW_BLOCK_MS, MAX_WINDOW_PENALTY.
 * `blockMs`: the longest block; `penalty`: the largest penalty's cost.
 */
export function controlBounds(limits: readonly RedisLimit[]): { blockMs: number; penalty: number } {
  const gcra = limits.filter((l) => l.kind === 0);
  const room = (l: RedisLimit): number => 2 ** 53 - (l.args[2] as number); // 2^53 less tau
  return {
    blockMs: Math.min(MAX_WINDOW_BLOCK_MS, ...gcra.map((l) => Math.floor(room(l) / (l.args[0] as number)) / 1000)),
    penalty: Math.min(MAX_WINDOW_PENALTY, ...gcra.map((l) => Math.floor(room(l) / (l.args[1] as number)))),
  };
}

/**
 * `TypeError` for a control a limit of `algorithm` cannot hold: a block on a sliding log (its
 * list holds admissions' stamps; a block end has no place there). `who` names the limiter or rule.
 */
export function checkControl(control: string, algorithm: string, who: string): void {
  if (control === 'block' && algorithm === 'sliding-log') {
    throw new TypeError(`block() is built for GCRA and window limits (a sliding log holds admissions' stamps, not a block's end); ${who} runs sliding-log`);
  }
}

/** Checks a block's `ms` against `maxMs` (controlBounds); returns it in whole µs. */
export function blockUs(ms: unknown, maxMs: number): number {
  if (typeof ms !== 'number') throw new TypeError(`ms must be a number, got ${describe(ms)}`);
  if (!(ms >= 0 && ms <= maxMs)) {
    throw new RangeError(`ms must be from 0 to ${maxMs} for these limits (a block's end must stay exact in their units), got ${describe(ms)}`);
  }
  return Math.ceil(ms * 1000);
}

/** Checks a penalty's `cost` against `max` (controlBounds): `RangeError` past it. */
export function checkPenalty(cost: number, max: number): void {
  if (cost > max) throw new RangeError(`a penalty of ${cost} is more than these limits' state can count exactly (at most ${max}); nothing was spent`);
}

/** An admission's spend on Redis (RedisCore.keepSpends): Redis's time, in µs, and the plan that counted it. */
export interface Spend {
  readonly atUs: number;
  readonly plan: ScriptPlan;
}

/**
 * What both Redis limiters share: the options above, the batcher, the refusal cache and the
 * answers when Redis does not decide. `fallback` asks the shared-memory limiter (onError 'local').
 *
 * Thread-safety: one instance per limiter instance (per thread).
 */
export class RedisCore<R> {
  /** The client, wrapped: the batcher's, and verify()'s. */
  readonly commands: RedisCommands;
  readonly batcher: ScriptBatcher;
  readonly prefix: string;
  readonly onError: 'deny' | 'allow' | 'local';
  readonly cache: LocalTier | null;
  /** Permits a lease asks for; 0: no leases. */
  readonly lease: number;
  #fallback: ((request: R, cost: number) => Decision) | null = null;
  /** Decisions answered without Redis since the clock was last looked at for a yield. */
  #unyielded = 0;
  /** performance.now() when an answer without Redis last yielded to the event loop. */
  #yieldedAt = 0;
  /** Each admission's spend (Redis's time and the plan that counted it), by decision, once keepSpends asked (null before). */
  #spends: WeakMap<Decision, Spend> | null = null;

  readonly #onDecision: DecisionHook<R> | null;

  /** `defaultPrefix`: the prefix of the limiter's own keys when the options give none. */
  constructor(options: RedisCommonOptions<R>, defaultPrefix: string) {
    this.#onDecision = decisionHookOf<R>(options.onDecision);
    const prefix = options.prefix ?? defaultPrefix;
    if (typeof prefix !== 'string') throw new TypeError(`options.prefix must be a string, got ${describe(prefix)}`);
    const timeoutMs = options.timeoutMs ?? 500;
    positiveFinite('options.timeoutMs', timeoutMs);
    // A timer holds at most 2^31 - 1 ms (about 24.8 days).
    if (timeoutMs > MAX_TIMEOUT_MS) {
      throw new RangeError(`options.timeoutMs must be at most ${MAX_TIMEOUT_MS} (a timer's longest), got ${timeoutMs}`);
    }
    const onError = options.onError ?? 'deny';
    if (onError !== 'deny' && onError !== 'allow' && onError !== 'local') {
      throw new RangeError(`options.onError must be 'deny', 'allow' or 'local', got ${describe(onError)}`);
    }
    const maxBatch = options.maxBatch ?? 32;
    if (!Number.isInteger(maxBatch) || maxBatch < 1 || maxBatch > 1000) {
      throw new RangeError(`options.maxBatch must be an integer from 1 to 1000, got ${describe(maxBatch)}`);
    }
    const tier = options.localTier;
    if (tier !== undefined && tier !== false && !(tier instanceof LocalTier)) {
      throw new TypeError(`options.localTier must be a LocalTier or false, got ${describe(tier)}`);
    }
    const lease = options.lease ?? 0;
    if (lease !== 0 && !(Number.isSafeInteger(lease) && lease >= 2 && lease <= 1_000_000)) {
      throw new RangeError(`options.lease must be an integer from 2 to 1,000,000 (permits per lease), got ${describe(lease)}`);
    }
    if (lease !== 0 && tier === false) throw new TypeError('options.lease needs a local tier: the leases live there (got localTier: false)');
    this.prefix = prefix;
    this.onError = onError;
    this.lease = lease;
    this.cache = tier === false ? null : tier ?? LocalTier.create({ maxKeys: 10_000 });
    // The client last: every other option was valid.
    this.commands = redisCommands(options.redis);
    this.batcher = new ScriptBatcher(this.commands, timeoutMs, maxBatch);
  }

  /**
   * Deletes the state of `cacheKey` under `plan` on Redis (every limit's key; not a global cap's)
   * in one script call, then clears this process's local tier: a refusal or a lease it held for
   * the key no longer answers (the tier forgets every key's at once, so each asks Redis again).
   * Other processes' tiers keep their refusals until the retry time Redis gave them: under-
   * admission only. Resolves true when Redis held any state for the key; rejects as deleteKeys.
   * `by`: the call's deadline when set before this step (see `decide`).
   */
  async reset(cacheKey: string, plan: ScriptPlan, by?: number): Promise<boolean> {
    const base = keyBase(this.prefix, cacheKey);
    // A GCRA key's reset also moves its reset mark: a give-back of a spend from before it gives
    // nothing (its fresh state holds only later admissions; lua-gcra.ts, RESET_MARK).
    const fixed = this.batcher.fixedNowUs;
    const mark = plan.gcra && plan.suffixes.length > 0 ? { key: base + RESET_MARK, fixedNowUs: fixed === null ? null : fixed() } : null;
    const timeoutMs = this.batcher.timeoutMs;
    const waitMs = by === undefined ? timeoutMs : Math.max(0, by - performance.now());
    const deleted = await deleteKeys(this.commands, plan.suffixes.map((s) => base + s), timeoutMs, mark, waitMs);
    this.cache?.clear();
    return deleted > 0;
  }

  /**
   * A per-key control on `cacheKey`'s limits (on GCRA, `plan` holds the key's limits only; the
   * window script's controls skip a cap: a cap is never charged or given back), in one script call:
   * - 'reward': `amount` given back under each limit, never below a fresh key's state. GCRA: the
   *   script's refund of `amount` intervals, with a slot end (FAR_AHEAD_US) that only the debt
   *   bounds; windows and logs: want 0 (limits-script.ts);
   * - 'penalty': `amount` spent under each limit now, beyond the burst (a fixed window: up to its
   *   permits; lua-algorithms.ts);
   * - 'block': every request refused for `amount` µs from Redis's now, a longer wait kept.
   * Then clears this process's local tier: its refusals, and its leases, whose permits Redis
   * counted before a block and would otherwise be spent during it (another process's may still
   * be, within the lease bound). Rejects when Redis does not answer within timeoutMs (it may or
   * may not have run), when it ran too late (nothing was written), and with `RedisConfigError`.
   * `by`: the call's deadline when set before this step (see `decide`).
   */
  async control(cacheKey: string, kind: 'reward' | 'penalty' | 'block', amount: number, plan: ScriptPlan, by?: number): Promise<void> {
    // Nothing to give back or spend: no call (a block of 0 us still raises the debt to one request's room).
    if (amount === 0 && kind !== 'block') return;
    const base = keyBase(this.prefix, cacheKey);
    const deadline = by ?? performance.now() + this.batcher.timeoutMs;
    let answered: Outcome;
    try {
      // A negative cost is the script's refund; a negative want (with a positive cost) a control.
      answered = kind === 'reward'
        ? await (plan.gcra
          ? this.batcher.decide(plan, base, -amount, -amount, FAR_AHEAD_US, deadline, outcome)
          : this.batcher.decide(plan, base, -amount, 0, 0, deadline, outcome))
        : await this.batcher.decide(plan, base, amount, kind === 'penalty' ? -1 : -2, 0, deadline, outcome);
    } finally {
      this.cache?.clear();
    }
    if (answered === 'failed') {
      throw new Error(`Redis did not answer the ${kind} within ${this.batcher.timeoutMs} ms (timeoutMs): it may or may not have been written`);
    }
    if (answered === 'late') throw new Error(`Redis ran the ${kind} after its deadline (timeoutMs ${this.batcher.timeoutMs} ms): nothing was written`);
  }

  /** `decision`, telling the hook (if any) what it resolves with. */
  told(decision: Promise<Decision>, request: R, cost: number): Promise<Decision> {
    const hook = this.#onDecision;
    if (hook === null) return decision;
    return decision.then((d) => {
      tellDecision(hook, request, d.allowed, d.reason, cost);
      return d;
    });
  }

  /** Sets the shared-memory limiter's answer, for onError 'local'. */
  setFallback(f: (request: R, cost: number) => Decision): void {
    this.#fallback = f;
  }

  /**
   * Decides `cost` for `request` under `plan`. `cacheKey` names the key in the local tier and
   * gives its Redis keys (made only when Redis is asked). `cap` is the global cap's plan when it
   * lives on another Cluster node (spent first, refunded when the key refuses or spent nothing).
   * `by`: the call's deadline (performance.now() basis) when it was set before this step (a first
   * call's, before the prefix check it waited for: the check and the decision share one
   * timeoutMs); else now + timeoutMs.
   */
  decide(request: R, cacheKey: string, cost: number, plan: ScriptPlan, cap: ScriptPlan | null, by?: number): Promise<Decision> {
    const cache = this.cache;
    let refill = false;
    // The tier's reading before Redis is asked: what Redis answers holds from no earlier.
    let asked = 0;
    if (cache !== null) {
      asked = cache.now();
      if (cost > 0) {
        // Permits Redis already counted for this process (a lease): spent here, by compare-and-
        // swap, even when Redis has since said the key is spent (the lease took the rest).
        if (this.lease > 0 && cost <= this.lease && cache.take(cacheKey, cost)) return this.#now(leased());
        // A refusal Redis gave in the last moments: every thread of the process answers it alone.
        const capLeft = plan.globalKeys.length > 0 || cap !== null ? cache.allRefusedFor(asked) : 0;
        if (capLeft > 0) return this.#now(cachedRefusal(capLeft, 'global-limit'));
        const left = cache.refusedFor(cacheKey, asked);
        if (left > 0) return this.#now(cachedRefusal(left, 'limited'));
        // No lease to spend: one thread asks Redis for one; the others ask for their own request.
        refill = this.lease > 0 && cost < this.lease && cache.beginRefill(cacheKey, asked);
      }
    }
    // An open breaker: the server of the first call failed repeatedly; answer at once until its
    // cooldown ends. On a Cluster each primary has its own (NodeGroups): with the cap on another
    // node, the cap's comes first, and the key's is asked before the key's call (#capFirst).
    const now = performance.now();
    const base = keyBase(this.prefix, cacheKey);
    if (!this.batcher.breakerFor(cap ?? plan, cap === null ? base : '').pass(now)) {
      if (refill) cache?.endRefill(cacheKey);
      return this.#fallbackNow(request, cost);
    }
    const deadline = by ?? now + this.batcher.timeoutMs;
    if (cap !== null) return this.#capFirst(request, cacheKey, base, cost, plan, cap, asked, refill, deadline);
    if (refill) {
      const refilled = (o: Outcome): Decision => this.#refilled(o, request, cacheKey, cost, asked, plan);
      return this.batcher.decide(plan, base, cost, this.lease, 0, deadline, refilled).catch((e: unknown) => {
        // A misconfiguration (RedisConfigError) rejects without an outcome: the refill ends here.
        (this.cache as LocalTier).endRefill(cacheKey);
        throw e;
      });
    }
    return this.batcher.decide(plan, base, cost, cost, 0, deadline, (o) => this.#answer(o, request, cacheKey, cost, asked, plan));
  }

  /**
   * A decision answered without Redis: a resolved promise, except that every YIELD_EVERY-th
   * looks at the clock and, when YIELD_AFTER_MS have passed since the last yield, resolves from
   * the event loop's check phase (setImmediate). A caller that loops on answers the tier gives at
   * once (`while (...) await tryAcquire(k)` on a refused key) would otherwise run on microtasks
   * alone and hold back every timer and socket of the process (found: other calls' Redis replies
   * delayed to 2,415 ms against a 2,000 ms deadline). A turn of the event loop costs several µs
   * (measured: yielding every 64 answers made such a loop 29% slower), so it is paid once per
   * YIELD_AFTER_MS at most.
   */
  #now(d: Decision): Promise<Decision> {
    if (!this.#yieldDue()) return Promise.resolve(d);
    return new Promise((resolve) => setImmediate(resolve, d));
  }

  /**
   * A rejection with `e` given without Redis (the prefix check's verdict, once found: another
   * configuration's record), paced as `#now` paces answers and counted with them: a loop that
   * awaits such rejections lets the event loop turn at least every YIELD_AFTER_MS (found:
   * `await b.tryAcquire(k).catch(...)` in a loop ran 300,000 calls in 201 ms while a 1 ms timer
   * never fired).
   */
  readonly rejectNow = (e: Error): Promise<never> => {
    if (!this.#yieldDue()) return Promise.reject(e);
    return new Promise((_, reject) => setImmediate(reject, e));
  };

  /** Counts an answer without Redis; true when it is to come from the event loop's check phase (see #now). */
  #yieldDue(): boolean {
    if (++this.#unyielded < YIELD_EVERY) return false;
    this.#unyielded = 0;
    const t = performance.now();
    if (t - this.#yieldedAt < YIELD_AFTER_MS) return false;
    this.#yieldedAt = t;
    return true;
  }

  #answer(o: Outcome, request: R, cacheKey: string, cost: number, asked: number, plan: ScriptPlan, leased = false): Decision {
    if (typeof o === 'string') return this.fallback(request, cost);
    this.#remember(o, cacheKey, asked, leased);
    return this.#spent(decisionOf(o), o, plan);
  }

  /**
   * From now on, every admission Redis decides in a call of its own records its spend (`spendOf`):
   * Redis's time and the plan whose keys counted it. A window give-back (`giveBackAt`) returns a
   * spend only into the windows and keys that counted it, and needs both. Off until a give-back
   * asks for it: it costs a WeakMap entry per admission. An admission the local tier answers from
   * a lease has no spend here (its permits were counted at the lease's), nor has a degraded
   * answer: they give nothing back.
   */
  keepSpends(): void {
    this.#spends ??= new WeakMap();
  }

  /** The spend that admitted `d` (see keepSpends), if recorded. */
  spendOf(d: Decision): Spend | undefined {
    return this.#spends?.get(d);
  }

  /** `d`, its spend recorded when `r` admitted it under `plan` and keepSpends asked for it. */
  #spent(d: Decision, r: Reply, plan: ScriptPlan): Decision {
    if (this.#spends !== null && r.status === ALLOWED) this.#spends.set(d, { atUs: r.nowUs, plan });
    return d;
  }

  /** `giveBackAt` as a closure that gives back once: a second call resolves at once, giving nothing. */
  giveBackOnce(cacheKey: string, cost: number, atUs: number, plan: ScriptPlan): () => Promise<void> {
    return once(() => this.giveBackAt(cacheKey, cost, atUs, plan), Promise.resolve());
  }

  /**
   * Gives back `cost` of an admission on `cacheKey` that Redis counted at `atUs` on its clock,
   * under `plan`'s limits (the key's alone: a cap keeps its spend), in one script call: the
   * script's refund, which on windows returns it only into the windows of `atUs` (a fixed
   * window's count while the key still holds that window; a sliding window's, or its previous
   * count once the key moved one window on, and the state was made before `atUs`: not after a
   * reset), and all of it or nothing; on GCRA no more than what of the spend's slot is still
   * ahead (it ends at least `cost` intervals after `atUs`). This process's local tier is not cleared:
   * a refusal it holds stands until its time (under-admission only). Rejects when Redis did not
   * answer within timeoutMs (the spend may or may not be back).
   */
  async giveBackAt(cacheKey: string, cost: number, atUs: number, plan: ScriptPlan): Promise<void> {
    // Nothing spent, nothing to give: no call (a cost of -0 would pack as an admission, not a refund).
    if (cost === 0) return;
    const base = keyBase(this.prefix, cacheKey);
    // want 1 tells the GCRA script that `atUs` is the spend's time, not its slot's end.
    const answered = await this.batcher.decide(plan, base, -cost, plan.gcra ? 1 : -cost, atUs, performance.now() + this.batcher.timeoutMs, outcome);
    if (answered === 'failed') {
      throw new Error(`Redis did not answer the give-back within ${this.batcher.timeoutMs} ms (timeoutMs): it may or may not have been written`);
    }
  }

  /** A lease's answer: this request takes its cost; the rest of the grant goes to the tier. */
  #refilled(o: Outcome, request: R, cacheKey: string, cost: number, asked: number, plan: ScriptPlan): Decision {
    const cache = this.cache as LocalTier;
    if (typeof o !== 'string' && o.status === ALLOWED && o.granted > cost) cache.offer(cacheKey, o.granted - cost, asked);
    cache.endRefill(cacheKey);
    return this.#answer(o, request, cacheKey, cost, asked, plan, true);
  }

  /**
   * Keeps what Redis said about the key's and the cap's next requests in the refusal cache, from
   * `asked`, the tier's reading before the call: the cache never refuses a request after the
   * moment Redis would admit it, and an answer under limits the tier has since forgotten
   * (`clear`) is ignored. A key's refusal is kept only when Redis refused the key, not when an
   * admission spent its last: a key asked once (a new client address, a one-off token) would
   * take a slot of the tier for as long as its limit refuses it. Found: keys admitted once each
   * under a fixed window of 1 an hour filled the default tier (10,000 keys) in seconds, and
   * every decision after paid a scan of a full stripe (5.2-5.8k decisions/s against 60k without
   * the tier). A key asked again after its last admission costs one Redis call, which caches it.
   * A lease's key (`leased`) is a busy one, asked for more than one permit at once: an admission
   * that spent its last is kept too.
   */
  #remember(r: Reply, cacheKey: string | null, asked: number, leased = false): void {
    const cache = this.cache;
    if (cache === null) return;
    if (cacheKey !== null && r.blockedUs > 0 && (leased || r.status !== ALLOWED)) cache.refuseUntil(cacheKey, asked + r.blockedUs / 1000, asked);
    if (r.capBlockedUs > 0) cache.refuseAllUntil(asked + r.capBlockedUs / 1000, asked);
  }

  /**
   * The global cap on another Cluster node: spent first; then the key. The key refused, or late
   * (it spent nothing), the cap gets its spend back; the key's call failed (Redis may have spent),
   * the cap keeps it: the cap may count a request that was not admitted, never the reverse. A
   * lease (`refill`) asks the cap for up to `lease`, the key for what the cap granted, and gives
   * the cap back what the key did not grant.
   */
  async #capFirst(
    request: R, cacheKey: string, base: string, cost: number, plan: ScriptPlan, cap: ScriptPlan, asked: number, refill: boolean,
    deadline: number,
  ): Promise<Decision> {
    try {
      // One deadline for both steps.
      const c = await this.batcher.decide(cap, '', cost, refill ? this.lease : cost, 0, deadline, outcome);
      if (typeof c === 'string') return this.fallback(request, cost);
      // The cap's reply is not cached: it counts spends of the batch that may yet be given back.
      if (c.status !== ALLOWED) return decisionOf(c);
      // The key's server may be another, whose breaker is open: then the key is not asked, and
      // the cap gets its spend back, as when the key's call comes back late. Let through as the
      // half-open breaker's probe, the key's call is queued at once and takes the probe's token
      // (Breaker.token): its failure is the probe's, though its deadline was set before the cap's
      // call (found: told apart by time, such a probe's failure was ignored, and the breaker
      // stayed half open for ever).
      const keyPasses = this.batcher.breakerFor(plan, base).pass(performance.now());
      const k = keyPasses ? await this.batcher.decide(plan, base, cost, c.granted, 0, deadline, outcome) : 'late';
      if (k === 'failed') return this.fallback(request, cost);
      const kept = k === 'late' || k.status !== ALLOWED ? 0 : k.granted;
      if (c.granted > kept) {
        // A GCRA cap gets back what of the spend's slot is still ahead: the refund names where
        // the slot ended, now + the reply's reset. The reset is the cap's debt in whole µs,
        // rounded up: exact when the cap counts whole µs (k = 1: every interval of a whole µs);
        // else 1 µs less, never later than the true end, so the refund never gives back too much.
        // A window cap counted the spend in the window of its time. Nobody waits for the refund:
        // refused as a misconfiguration, the cap keeps the spend (conservative), as when the call
        // fails.
        const at = cap.gcra ? c.nowUs + c.resetUs - (cap.wholeUs ? 0 : 1) : c.nowUs;
        this.batcher.decide(cap, '', -(c.granted - kept), -(c.granted - kept), at, performance.now() + this.batcher.timeoutMs, outcome).catch(() => {});
      }
      if (k === 'late') return this.fallback(request, cost);
      this.#remember(k, cacheKey, asked, refill);
      if (refill && kept > cost) (this.cache as LocalTier).offer(cacheKey, kept - cost, asked);
      const d = this.#spent(decisionOf(k), k, plan);
      d.remaining = Math.min(d.remaining, c.remaining);
      return d;
    } finally {
      if (refill) this.cache?.endRefill(cacheKey);
    }
  }

  /**
   * onError's answer, without Redis, as a promise: one that rejects when the local limiter throws
   * (as the answer to a call Redis failed does), never a synchronous throw from a decision.
   */
  #fallbackNow(request: R, cost: number): Promise<Decision> {
    let d: Decision;
    try {
      d = this.fallback(request, cost);
    } catch (e) {
      return Promise.reject(e as Error);
    }
    return this.#now(d);
  }

  /** onError's answer, for a decision Redis did not make. */
  fallback(request: R, cost: number): Decision {
    if (this.#fallback !== null) return { ...this.#fallback(request, cost), degraded: true };
    return { allowed: this.onError === 'allow', remaining: 0, retryAfterMs: 0, resetAfterMs: 0, reason: 'unavailable', degraded: true };
  }
}

/** Each limiter's batcher, for the test-only time override below. */
const batchers = new WeakMap<object, ScriptBatcher>();

/** Registers `batcher` as `limiter`'s. */
export function registerBatcher(limiter: object, batcher: ScriptBatcher): void {
  batchers.set(limiter, batcher);
}

/**
 * Tests only (not exported from the package): every script call of `limiter` decides at the time
 * `nowUs()` returns, in µs, instead of Redis's TIME, without deadlines. null restores TIME.
 * `ttlPadMs` lengthens every expiry written: a test whose clock advances by steps (or stands
 * still) while Redis's runs on sets it longer than the test runs, so that no key expires on
 * Redis's clock before the test's clock reaches the key's end (a slow machine would else see
 * counts vanish). Left at 0, expiries are as Redis's own time would set them.
 */
export function setScriptTime(limiter: object, nowUs: (() => number) | null, ttlPadMs = 0): void {
  const batcher = batchers.get(limiter);
  if (batcher === undefined) throw new TypeError('setScriptTime needs a Redis limiter');
  batcher.fixedNowUs = nowUs;
  batcher.fixedTtlPadMs = ttlPadMs;
}

/** Decisions answered without Redis between two looks at the clock for a yield (see RedisCore#now). */
const YIELD_EVERY = 64;
/** The longest a loop of answers without Redis holds the event loop (checked every YIELD_EVERY answers). */
const YIELD_AFTER_MS = 0.5;

/** An admission from a lease: what the key holds beyond it is not known here. */
function leased(): Decision {
  return { allowed: true, remaining: 0, retryAfterMs: 0, resetAfterMs: 0, reason: 'allowed' };
}

/** A refusal answered from the refusal cache: the reset is not known; the retry time is its floor. */
function cachedRefusal(leftMs: number, reason: DecisionReason): Decision {
  return { allowed: false, remaining: 0, retryAfterMs: leftMs, resetAfterMs: leftMs, reason };
}

/**
 * `get`'s answer from a probe's decision: the key's state, or an Error when Redis did not decide
 * (onError's answer says nothing about the key).
 */
export function keyStateOf(d: Decision, key: string): KeyState {
  if (d.degraded === true) throw new Error(`get(${JSON.stringify(key)}): Redis did not answer in time (or failed), so the key's state is unknown`);
  const state: KeyState = { remaining: d.remaining, resetAfterMs: d.resetAfterMs };
  if (d.limits !== undefined) state.limits = d.limits;
  return state;
}
