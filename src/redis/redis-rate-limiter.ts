import { describe, positiveFinite } from '../errors.js';
import { MAX_LIMITS } from '../table/layout.js';
import type { Limit } from '../limit.js';
import type { Decision } from '../limiter-types.js';
import { checkRequest, RateLimiter } from '../rate-limiter.js';
import { monotonicClock } from '../clock.js';
import { checkMaxWait, retryAt, sleepUntil, type AcquireOptions } from '../waiting.js';
import { Breaker } from './breaker.js';
import { redisCommands, type RedisCommands } from './client.js';
import { ALLOWED, EXCEEDS_BURST, GCRA_SCRIPT, GCRA_SHA, GLOBAL_LIMIT, LATE, LIMITED } from './gcra-script.js';
import { globalKey, limitKey } from './redis-keys.js';
import { redisGcraLimit, type RedisGcraLimit } from './redis-limits.js';

/** Options for `new RedisRateLimiter`. */
export interface RedisRateLimiterOptions {
  /** The client: an ioredis `Redis` or a connected node-redis client (standalone). */
  redis: unknown;
  /** The rate every key gets; several limits must all allow, and are spent together. At most 8. */
  limit: Limit | readonly Limit[];
  /** One limit shared by every key, checked after the key's own; refusals spend nothing. */
  globalLimit?: Limit;
  /** Only 'gcra' for now. */
  algorithm?: 'gcra';
  /** Prepended to every Redis key. Default 'sluice:'. */
  prefix?: string;
  /**
   * The longest a decision waits for Redis, in ms (default 500). Past it the decision answers as
   * `onError` says, and Redis, should the call still arrive, spends nothing for it.
   */
  timeoutMs?: number;
  /**
   * The answer while Redis fails, is late or its breaker is open (every such decision has
   * `degraded: true`): 'deny' (default) and 'allow' answer so with reason 'unavailable';
   * 'local' asks a shared-memory `RateLimiter` with the same limits (`local`, or one of its own).
   */
  onError?: 'deny' | 'allow' | 'local';
  /**
   * With onError 'local': the shared-memory limiter to ask, e.g. `RateLimiter.attach(handle)` of
   * one shared by every worker thread of the process. Default: one of this instance's own
   * (10,000 keys).
   */
  local?: RateLimiter;
  /**
   * Decisions waiting together share one script call, up to this many (default 32: smaller
   * batches let Redis run one while the client reads another).
   */
  maxBatch?: number;
}

const OPTION_NAMES = new Set(['redis', 'limit', 'globalLimit', 'algorithm', 'prefix', 'timeoutMs', 'onError', 'local', 'maxBatch']);

/** How soon `acquire` asks again after Redis was unavailable and onError refused. */
const UNAVAILABLE_RETRY_MS = 50;

/** Script calls in flight at once; decisions that arrive meanwhile wait and go out together. */
const MAX_IN_FLIGHT = 4;

interface Pending {
  key: string;
  cost: number;
  /** performance.now() past which the caller gets onError's answer. */
  deadline: number;
  resolve: (d: Decision) => void;
  settled: boolean;
  /** Handed to Redis: a timeout then counts against it (the breaker). */
  sent: boolean;
}

/**
 * The same GCRA limits as `RateLimiter`, kept in Redis so that every process and host shares
 * them. Each decision is one atomic step of a Lua script on Redis's own clock (src/redis/
 * gcra-script.ts); decisions waiting together share a script call.
 *
 * Never hangs, never counts late: every decision has its own deadline (`timeoutMs`), and the
 * script is told the same deadline on Redis's clock, never later than the moment the limiter
 * answers (the client's reading of Redis's clock is a lower bound from its last reply), so a call
 * delayed in a client's offline queue, or by a frozen server, spends nothing when it arrives.
 *
 * Thread-safety: one instance per thread (it holds its queue); the state is Redis's.
 */
export class RedisRateLimiter {
  readonly limits: readonly Readonly<Required<Limit>>[];
  readonly globalLimit: Readonly<Required<Limit>> | null;
  readonly #redis: RedisCommands;
  readonly #prefix: string;
  readonly #timeoutMs: number;
  readonly #onError: 'deny' | 'allow' | 'local';
  readonly #local: RateLimiter | null;
  readonly #breaker = new Breaker();
  readonly #maxBatch: number;
  /** The script's limit arguments, computed once. */
  readonly #limitArgs: number[];
  readonly #keyLimits: number;
  readonly #globalKeys: string[];
  readonly #queue: Pending[] = [];
  /**
   * Every unanswered decision in arrival order, which is deadline order (each gets timeoutMs):
   * one timer, for the first of them, gives up on each in turn. No timer per decision.
   */
  readonly #waiting: Pending[] = [];
  #waitingHead = 0;
  #timer: ReturnType<typeof setTimeout> | null = null;
  #inFlight = 0;
  #flushScheduled = false;
  /**
   * Redis's clock minus performance.now(), in ms, as a lower bound: from the last reply, whose
   * TIME Redis read before the reply arrived. null until the first reply.
   */
  #offset: number | null = null;
  #offsetPending: Promise<void> | null = null;

  constructor(options: RedisRateLimiterOptions) {
    if (options === null || typeof options !== 'object') {
      throw new TypeError(`options must be an object like { redis, limit }, got ${describe(options)}`);
    }
    for (const name of Object.keys(options)) {
      if (!OPTION_NAMES.has(name)) throw new TypeError(`options.${name} is not a RedisRateLimiter option (known: ${[...OPTION_NAMES].join(', ')})`);
    }
    if (options.algorithm !== undefined && options.algorithm !== 'gcra') {
      throw new RangeError(`options.algorithm must be 'gcra' for a RedisRateLimiter, got ${describe(options.algorithm)}`);
    }
    const list = Array.isArray(options.limit) ? options.limit : [options.limit];
    if (list.length === 0 || list.length > MAX_LIMITS) throw new RangeError(`options.limit must hold 1 to ${MAX_LIMITS} limits, got ${list.length}`);
    const names = list.length === 1 && !Array.isArray(options.limit) ? ['options.limit'] : list.map((_, i) => `options.limit[${i}]`);
    const compiled: RedisGcraLimit[] = list.map((l, i) => redisGcraLimit(l as Limit, names[i] as string));
    const global = options.globalLimit === undefined ? null : redisGcraLimit(options.globalLimit, 'options.globalLimit');
    const prefix = options.prefix ?? 'sluice:';
    if (typeof prefix !== 'string') throw new TypeError(`options.prefix must be a string, got ${describe(prefix)}`);
    const timeoutMs = options.timeoutMs ?? 500;
    positiveFinite('options.timeoutMs', timeoutMs);
    const onError = options.onError ?? 'deny';
    if (onError !== 'deny' && onError !== 'allow' && onError !== 'local') throw new RangeError(`options.onError must be 'deny', 'allow' or 'local', got ${describe(onError)}`);
    if (options.local !== undefined && !(options.local instanceof RateLimiter)) throw new TypeError(`options.local must be a RateLimiter, got ${describe(options.local)}`);
    if (options.local !== undefined && onError !== 'local') throw new TypeError(`options.local is used only with onError: 'local', got onError ${describe(onError)}`);
    const maxBatch = options.maxBatch ?? 32;
    if (!Number.isInteger(maxBatch) || maxBatch < 1 || maxBatch > 1000) throw new RangeError(`options.maxBatch must be an integer from 1 to 1000, got ${describe(maxBatch)}`);
    // The client last: every other option was valid.
    this.#redis = redisCommands(options.redis);
    this.limits = Object.freeze(list.map((l, i) => Object.freeze({ ...(l as Limit), burst: (compiled[i] as RedisGcraLimit).burst } as Required<Limit>)));
    this.globalLimit = global === null ? null : Object.freeze({ ...(options.globalLimit as Limit), burst: global.burst } as Required<Limit>);
    this.#prefix = prefix;
    this.#timeoutMs = timeoutMs;
    this.#onError = onError;
    this.#local = onError !== 'local' ? null : options.local ?? new RateLimiter({
      limit: this.limits as Limit[], ...(this.globalLimit === null ? {} : { globalLimit: this.globalLimit }), maxKeys: 10_000,
    });
    this.#maxBatch = maxBatch;
    const all = global === null ? compiled : [...compiled, global];
    this.#keyLimits = compiled.length;
    this.#limitArgs = [compiled.length, global === null ? 0 : 1, ...all.flatMap((l) => [l.k, l.T, l.tau, l.burst])];
    this.#globalKeys = global === null ? [] : [globalKey(prefix, 0)];
  }

  /**
   * Checks `key` and, if the request passes, counts it, in one atomic step on Redis. `cost` is an
   * integer >= 0; 0 is a probe that counts nothing. Resolves with the same `Decision` as the
   * shared-memory limiter, or, when Redis fails or is later than `timeoutMs`, with `onError`'s
   * answer and reason 'unavailable'. Never rejects for Redis's failures; throws `TypeError`/
   * `RangeError` at once for a bad key or cost.
   */
  tryAcquire(key: string, cost = 1): Promise<Decision> {
    checkRequest(key, cost);
    // An open breaker: Redis failed repeatedly; answer at once until its cooldown ends.
    if (!this.#breaker.admits(performance.now())) return Promise.resolve(this.#fallback(key, cost));
    return new Promise<Decision>((resolve) => {
      const p: Pending = { key, cost, deadline: performance.now() + this.#timeoutMs, resolve, settled: false, sent: false };
      this.#watch(p);
      this.#queue.push(p);
      this.#schedule();
    });
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
  async acquire(key: string, options: AcquireOptions = {}): Promise<void> {
    const cost = options.cost ?? 1;
    const maxWaitMs = checkMaxWait(options.maxWaitMs);
    const signal = options.signal;
    checkRequest(key, cost);
    signal?.throwIfAborted();
    const clock = monotonicClock;
    const deadline = clock.now() + maxWaitMs;
    for (let d = await this.tryAcquire(key, cost); !d.allowed; d = await this.tryAcquire(key, cost)) {
      const wait = d.reason === 'unavailable' ? UNAVAILABLE_RETRY_MS : d.retryAfterMs;
      await sleepUntil(clock, retryAt(key, wait, clock.now(), deadline, maxWaitMs), signal);
    }
  }

  /** Sends what waits once the current tick is over, so that decisions made together share a call. */
  #schedule(): void {
    if (this.#flushScheduled) return;
    this.#flushScheduled = true;
    queueMicrotask(() => {
      this.#flushScheduled = false;
      this.#flush();
    });
  }

  #flush(): void {
    while (this.#inFlight < MAX_IN_FLIGHT && this.#queue.length > 0) {
      const batch = this.#queue.splice(0, this.#maxBatch).filter((p) => !p.settled);
      if (batch.length === 0) continue;
      this.#inFlight++;
      void this.#send(batch).finally(() => {
        this.#inFlight--;
        this.#flush();
      });
    }
  }

  async #send(batch: Pending[]): Promise<void> {
    try {
      if (this.#offset === null) await this.#learnOffset();
      const keys: string[] = [];
      const args: (string | number)[] = [...this.#limitArgs, batch.length];
      const offset = this.#offset as number;
      for (const p of batch) {
        for (let i = 0; i < this.#keyLimits; i++) keys.push(limitKey(this.#prefix, p.key, i));
        // The deadline on Redis's clock: our deadline plus a lower bound of the clocks' offset,
        // in whole µs rounded down, so never later than the moment we give up.
        args.push(p.cost, Math.floor((p.deadline + offset) * 1000));
      }
      keys.push(...this.#globalKeys);
      for (const p of batch) p.sent = true;
      const reply = (await this.#redis.evalScript(GCRA_SHA, GCRA_SCRIPT, keys, args)) as (number | string)[];
      const received = performance.now();
      this.#offset = Number(reply[reply.length - 1]) / 1000 - received;
      this.#breaker.succeeded();
      batch.forEach((p, j) => this.#answer(p, reply, j * 4));
    } catch {
      this.#breaker.failed(performance.now());
      for (const p of batch) this.#settle(p, this.#fallback(p.key, p.cost));
    }
  }

  /** Reads Redis's clock once, before the first decision, so that its deadline can be sent. */
  #learnOffset(): Promise<void> {
    this.#offsetPending ??= this.#redis.time().then((us) => {
      this.#offset = us / 1000 - performance.now();
    }).finally(() => {
      this.#offsetPending = null;
    });
    return this.#offsetPending;
  }

  #answer(p: Pending, reply: (number | string)[], at: number): void {
    const status = Number(reply[at]);
    if (status === LATE) {
      this.#settle(p, this.#fallback(p.key, p.cost));
      return;
    }
    const remaining = Number(reply[at + 1]);
    const waitUs = Number(reply[at + 2]);
    const resetUs = Number(reply[at + 3]);
    const retryAfterMs = status === ALLOWED ? 0 : waitUs < 0 ? Infinity : waitUs / 1000;
    const reason = status === ALLOWED ? 'allowed' : status === LIMITED ? 'limited' : status === EXCEEDS_BURST ? 'exceeds-burst' : status === GLOBAL_LIMIT ? 'global-limit' : 'limited';
    this.#settle(p, { allowed: status === ALLOWED, remaining, retryAfterMs, resetAfterMs: resetUs / 1000, reason });
  }

  /** Gives `p` its deadline. */
  #watch(p: Pending): void {
    this.#waiting.push(p);
    if (this.#timer === null) this.#arm(this.#timeoutMs);
  }

  #arm(ms: number): void {
    this.#timer = setTimeout(() => this.#expire(), Math.max(0, ms));
    this.#timer.unref(); // answered decisions need not keep the process alive
  }

  /** Gives up on every decision past its deadline; arms the timer for the next one. */
  #expire(): void {
    this.#timer = null;
    const w = this.#waiting;
    const now = performance.now();
    let i = this.#waitingHead;
    for (; i < w.length; i++) {
      const p = w[i] as Pending;
      if (p.settled) continue;
      if (p.deadline > now) break;
      this.#giveUp(p);
    }
    // Drop what is done; compact now and then so the array does not grow for ever.
    if (i === w.length) {
      w.length = 0;
      this.#waitingHead = 0;
      return;
    }
    this.#waitingHead = i;
    if (i > 1024 && i * 2 > w.length) {
      w.splice(0, i);
      this.#waitingHead = 0;
    }
    this.#arm((w[this.#waitingHead] as Pending).deadline - now);
  }

  #giveUp(p: Pending): void {
    if (p.settled) return;
    // A call Redis had and did not answer in time counts against it.
    if (p.sent) this.#breaker.failed(performance.now());
    this.#settle(p, this.#fallback(p.key, p.cost));
  }

  #settle(p: Pending, d: Decision): void {
    if (p.settled) return;
    p.settled = true;
    p.resolve(d);
  }

  /** onError's answer, for a decision Redis did not make. */
  #fallback(key: string, cost: number): Decision {
    if (this.#local !== null) return { ...this.#local.tryAcquire(key, cost), degraded: true };
    return { allowed: this.#onError === 'allow', remaining: 0, retryAfterMs: 0, resetAfterMs: 0, reason: 'unavailable', degraded: true };
  }

  /** Whether the breaker currently keeps calls from Redis (for monitoring). */
  get breakerOpen(): boolean {
    return !this.#breaker.admits(performance.now());
  }
}
