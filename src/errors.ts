import { describe } from './config/check.js';

/**
 * The errors sluice throws besides `TypeError` and `RangeError` (which name the argument at
 * fault). Each keeps what it reports across threads: see `Carried`.
 */

/**
 * What a sluice error carries in its `cause`, so that it can be recognised where it arrives as a
 * plain `Error`: a worker thread's error crosses to the caller (piscina's `pool.run`,
 * `postMessage`) by structured clone, which keeps `message` and `cause` but not the class, its
 * `name` or its own fields.
 */
interface Carried {
  sluice: 'RateLimitTimeoutError' | 'TableFullError';
  key: string;
  retryAfterMs?: number;
  maxWaitMs?: number;
}

function carried(error: unknown, kind: Carried['sluice']): Carried | undefined {
  if (!(error instanceof Error)) return undefined;
  const c = error.cause as Partial<Carried> | null | undefined;
  return c !== null && typeof c === 'object' && c.sluice === kind && typeof c.key === 'string' ? (c as Carried) : undefined;
}

/**
 * A new key found no free or reclaimable slot and the limiter's `onFull` is 'deny': what
 * `reserve`, `acquire` and `acquireSync` throw (`tryAcquire` and `allow` answer it as a refusal
 * with reason 'table-full'). Raise `maxKeys`, or `sweep()` more often.
 */
export class TableFullError extends Error {
  override readonly name = 'TableFullError';
  /** The key that found no slot (for a PolicyLimiter, "user / api"). */
  readonly key: string;

  constructor(key: string) {
    super(
      `table full: no slot for ${describe(key)} (every one of maxKeys is live; onFull is 'deny')`,
      { cause: { sluice: 'TableFullError', key } satisfies Carried },
    );
    this.key = key;
  }

  /** `error` as a TableFullError: itself, or rebuilt from one that crossed a thread (see RateLimitTimeoutError.from); undefined for any other error. */
  static from(error: unknown): TableFullError | undefined {
    if (error instanceof TableFullError) return error;
    const c = carried(error, 'TableFullError');
    return c === undefined ? undefined : new TableFullError(c.key);
  }
}

/**
 * Thrown (or rejected) when a request would have to wait longer than allowed (`maxWaitMs`), or
 * could never pass (`cost` > burst: `retryAfterMs` is Infinity).
 */
export class RateLimitTimeoutError extends Error {
  override readonly name = 'RateLimitTimeoutError';
  /** The key that was asked for (for a PolicyLimiter, "user / api"). */
  readonly key: string;
  /** How long until the same request would pass; Infinity when it never can. */
  readonly retryAfterMs: number;
  /** The longest wait the caller accepted. */
  readonly maxWaitMs: number;

  constructor(key: string, retryAfterMs: number, maxWaitMs: number) {
    super(retryAfterMs === Infinity
      ? `rate limit: a request for ${describe(key)} can never pass (its cost exceeds the burst)`
      : retryAfterMs > maxWaitMs
        ? `rate limit: a request for ${describe(key)} would wait ${retryAfterMs} ms, more than maxWaitMs (${maxWaitMs})`
        // Within maxWaitMs, but beyond what the limits can count ahead (a window reaches the
        // next window; a GCRA state its horizon): the caller may try again later.
        : `rate limit: a request for ${describe(key)} would wait ${retryAfterMs} ms, further ahead than its limits can hold a reservation; try again later`);
    this.key = key;
    this.retryAfterMs = retryAfterMs;
    this.maxWaitMs = maxWaitMs;
    // Read back by `from` where the error arrives without its class (see Carried).
    this.cause = { sluice: 'RateLimitTimeoutError', key, retryAfterMs, maxWaitMs } satisfies Carried;
  }

  /**
   * `error` as a RateLimitTimeoutError: itself, or one rebuilt (key, retryAfterMs, message) from
   * the plain `Error` that a refusal becomes after crossing a thread, e.g. from a piscina task
   * wrapped by `limitTasks`; undefined for any other error. A server can then answer 429 with
   * Retry-After:
   *
   *   const refused = RateLimitTimeoutError.from(e); if (refused) res.setHeader('Retry-After', ...)
   */
  static from(error: unknown): RateLimitTimeoutError | undefined {
    if (error instanceof RateLimitTimeoutError) return error;
    const c = carried(error, 'RateLimitTimeoutError');
    return c === undefined ? undefined : new RateLimitTimeoutError(c.key, Number(c.retryAfterMs), Number(c.maxWaitMs));
  }
}
