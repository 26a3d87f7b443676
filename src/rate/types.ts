import type { AlgorithmName } from '../algorithms/index.js';
import type { Clock } from '../time/clock.js';
import type { Limit } from '../config/limit.js';
import type { DecisionHook } from './decision-hook.js';
import type { TableAttachOptions } from '../table/table-options.js';

/**
 * The shapes a RateLimiter takes and gives: options, decisions, handles, stats. Shared by the
 * other limiter classes, which answer with the same `Decision`.
 */

/** Why a decision came out the way it did. */
export type DecisionReason =
  | 'allowed' //         passed and was counted
  | 'limited' //         refused: the key is over its rate; retry after `retryAfterMs`
  | 'exceeds-burst' //   refused: cost > burst, it can never pass (`retryAfterMs` is Infinity)
  | 'table-full' //      no slot was free or reclaimable: refused, or allowed untracked (onFull)
  | 'global-limit' //    refused by the global cap; the key's own quota was not spent
  | 'unavailable'; //    RedisRateLimiter: Redis did not answer in time (or failed); `allowed` is onError's

/** The answer to one `tryAcquire`. A plain object, safe to send between threads. */
export interface Decision {
  /** Whether this request passes (and was counted). */
  allowed: boolean;
  /** How many more cost-1 requests would pass right now, after this decision. */
  remaining: number;
  /** 0 when allowed; otherwise how long until this same request would pass (Infinity: never). */
  retryAfterMs: number;
  /** How long until the key's state is the same as a fresh key's. */
  resetAfterMs: number;
  /** Why. */
  reason: DecisionReason;
  /**
   * RedisRateLimiter only: true when Redis did not decide (it failed, was late, or its breaker
   * was open) and `onError` answered instead; absent otherwise.
   */
  degraded?: true;
  /**
   * With several limits (RateLimiter and PolicyLimiter): each limit's own `remaining` and
   * `resetAfterMs`, in the order of the limits. `remaining` above is the smallest of them.
   * Absent with one limit, and on a full table.
   */
  limits?: readonly LimitState[];
}

/** One limit's part of a Decision (see `Decision.limits`). */
export interface LimitState {
  remaining: number;
  resetAfterMs: number;
}

/**
 * A key's state as `get(key)` reports it, without spending: what a probe (`cost` 0) answers.
 * `remaining`: cost-1 requests that would pass now; `resetAfterMs`: until the key's state is a
 * fresh key's; `limits`: each limit's own, with several.
 */
export interface KeyState {
  remaining: number;
  resetAfterMs: number;
  limits?: readonly LimitState[];
}

/** Options for `new RateLimiter`. */
export interface RateLimiterOptions {
  /**
   * The rate every key gets; several limits (e.g. `[perSecond(5), perMinute(20)]`) must all
   * allow a request, which is then spent from all of them in one step. At most 8.
   */
  limit: Limit | readonly Limit[];
  /** How each limit counts; default `'gcra'`. See docs/algorithms.md for what each one promises. */
  algorithm?: AlgorithmName;
  /** One limit shared by all keys, checked after the key's own; refusals spend nothing. */
  globalLimit?: Limit;
  /** Largest `permits` a `'sliding-log'` limit may have (4 bytes per permit per key). Default 1,000. */
  maxLogSize?: number;
  /**
   * The longest `block(key, ms)` the limiter must hold, in ms. GCRA limits: without it a block
   * may be as long as the key's state holds at the width the limit takes (at width 32 at least
   * the burst's window: docs/rate-limiter.md, on `block`); with it, the state is 64 bits wide
   * when 32 cannot hold such a block. Fixed and sliding windows: with it (up to 68 years), every
   * key keeps a block word, 4 bytes more, and `block` works; without it, `block` throws. Not for
   * a sliding log.
   */
  maxBlockMs?: number;
  /** How many keys can be live at once. Memory for them is allocated up front. 1 to 4,194,304. */
  maxKeys: number;
  /** Where time comes from; default: `performance.now()`. A `ManualClock` or `coarseClock()` travels with the handle. */
  clock?: Clock;
  /** What to do when a new key finds no free or reclaimable slot. Default `'deny'`. */
  onFull?: 'deny' | 'allow';
  /**
   * Longest key in UTF-8 bytes; longer keys throw `RangeError`. Default 4,096, at most 65,536. A
   * slot holds 24 bytes of key; a longer key keeps the rest in a key heap beside the table, which
   * grows with the long keys stored (each slot keeps the record it was given). At 24 or less
   * there is no heap and each slot is 4 bytes smaller.
   */
  maxKeyBytes?: number;
  /**
   * Slots allocated per key of `maxKeys`, 1.25 to 4; default 1.25. Fewer slots hold the same keys
   * in less memory (1.25: the table is 80% full at maxKeys, with longer stripes so that none
   * overflows), at the price of longer probes for keys not in the per-thread cache.
   */
  slotsPerKey?: number;
  /**
   * Per-thread cache of key -> slot, so hot keys skip hashing. Entries; default 65,536; 0 disables.
   * It turns itself off while more than a quarter of lookups miss it (more keys in play than it holds) and tries again later.
   */
  cacheSize?: number;
  /**
   * After this long, an unfinished insert (its thread presumably terminated) no longer blocks
   * other inserts of the same key; its slot is reused once it is 30 times this old, and never
   * before 30 s. Also how long a key's lock held by a terminated thread blocks that key (inside
   * a reset or reward under the lock: that reuse age, at most 2^19 ms);
   * `sweep()` reclaims such a key only once the lock is as old (at most 2^19 ms). A thread that
   * stalls longer than that inside an insert or a decision, and then goes on, may write into the
   * slot's next key: that is the table's one timing assumption. Default 1,000 ms; 1 to 60,000.
   */
  claimTimeoutMs?: number;
  /** Seed for the key hash. Default: random per table. */
  hashSeed?: number;
  /** Testing only: every key hashes to this value, so all keys collide. */
  forceHash?: number;
  /**
   * Called on this thread after each decision: (key, allowed, reason, cost). Not shared: each
   * thread passes its own to `attach`. See docs/observability.md.
   */
  onDecision?: DecisionHook;
}

/** A structured-cloneable reference to a limiter's shared memory. */
export interface RateLimiterHandle {
  readonly kind: 'sluice.RateLimiter';
  readonly table: SharedArrayBuffer;
  /** The key heap that holds long keys past their slot's words, or null (maxKeyBytes <= 24). */
  readonly keys: SharedArrayBuffer | null;
  /** The clock's buffer when the limiter runs on a ManualClock or a coarseClock(), else null. */
  readonly clock: SharedArrayBuffer | null;
}

/**
 * What `gauges()` reports: counts the table keeps as it goes (O(1) to read, for every scrape).
 * A thread terminated in the middle of an insert or a reclaim may leave one count off by one;
 * `stats()` counts the slots themselves.
 */
export interface TableGauges {
  /** Keys holding a slot (idle keys count until they are reclaimed). */
  liveKeys: number;
  /** Slots freed by reclaims and not yet reused or compacted. */
  tombstones: number;
  /** Slots a lookup of a live key probes, on average: 1 at its home slot, more for each slot it was moved on. */
  probeMean: number;
  /** The `maxKeys` the table was sized for. */
  maxKeys: number;
  /** Slots in the table. */
  capacity: number;
}

/** Options for every class's `attach`. */
export interface AttachOptions<Key = string> extends TableAttachOptions {
  /** This thread's decision hook, as `onDecision` in the class's options (a hook does not travel in the handle). */
  onDecision?: DecisionHook<Key>;
}

/** What `stats()` reports. */
export interface RateLimiterStats {
  /** Keys holding a slot now (idle keys count until they are reclaimed). */
  liveKeys: number;
  /** The `maxKeys` the table was sized for. */
  maxKeys: number;
  /** Slots in the table (`slotsPerKey` times `maxKeys`, in whole stripes: docs/design.md, "Stripes"). */
  capacity: number;
  /** Slots freed by reclaims and not yet reused. */
  tombstones: number;
  /** Slots claimed by an insert in progress (or by a thread that died mid-insert). */
  claimed: number;
  /** Size of the shared table in bytes. */
  tableBytes: number;
  /** Size of the key heap in bytes: long keys past their slot's 24 bytes (0 without a heap). */
  keyHeapBytes: number;
  /** Compare-and-swap attempts that lost a race, on this thread's instance since it was made. */
  casRetries: number;
  /**
   * Width of the one-limit GCRA state: 32 or 64 bits (`null` with several limits, a global cap
   * or another algorithm). See docs/rate-limiter.md, Limits, for which limits take 64 bits.
   */
  width?: 32 | 64 | null;
}
