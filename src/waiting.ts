import { isMainThread } from 'node:worker_threads';
import { ManualClock, type Clock } from './clock.js';
import { describe } from './errors.js';
import { checkNames } from './option-names.js';

/**
 * Waiting for a turn: the typed error, the reservation object, and sleeping on the limiter's
 * clock (a ManualClock is followed, so tests never sleep for real).
 *
 * Thread-safety: a Reservation belongs to the thread that made it; the functions are safe on
 * any thread (acquireSync's sleep only off the main thread).
 */

/**
 * Thrown (or rejected) when a request would have to wait longer than allowed (`maxWaitMs`), or
 * could never pass (`cost` > burst: `retryAfterMs` is Infinity).
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
    super(`table full: no slot for ${describe(key)} (every one of maxKeys is live; onFull is 'deny')`, { cause: { sluice: 'TableFullError', key } satisfies Carried });
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
 * What `reserve` answers for a key with no slot under onFull 'allow': admitted at once, nothing
 * counted, so nothing to give back.
 */
export function unheldReservation(key: string, cost: number, nowMs: number): Reservation {
  return { key, cost, delayMs: 0, actAtMs: nowMs, cancel: () => false };
}

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

/** Options for `acquire`. */
export interface AcquireOptions {
  /** Cost of the request, an integer >= 0. Default 1. */
  cost?: number;
  /** Longest acceptable wait; a longer one rejects at once. Default Infinity. */
  maxWaitMs?: number;
  /** Aborts the wait; whatever was reserved is given back. */
  signal?: AbortSignal;
}

/** Options for `acquireSync`. */
export interface AcquireSyncOptions {
  cost?: number;
  maxWaitMs?: number;
}

/**
 * A place in line, in the spirit of Go's `rate.Reservation`: the request is counted now and may
 * act after `delayMs`. `cancel()` before then gives the reserved time back.
 */
export interface Reservation {
  readonly key: string;
  readonly cost: number;
  /** How long from when it was made until the request may act (0: at once). */
  readonly delayMs: number;
  /** The limiter-clock time at which the request may act. */
  readonly actAtMs: number;
  /** Gives the reservation back if its time has not come; true if it did. Idempotent. */
  cancel(): boolean;
}

/** The option names of each waiting method. */
const WAIT_OPTION_NAMES = {
  acquire: ['cost', 'maxWaitMs', 'signal'],
  acquireSync: ['cost', 'maxWaitMs'],
  reserve: ['maxWaitMs'],
} as const;

/**
 * Checks the options of `acquire`, `acquireSync` or `reserve`: an object (or undefined) with
 * known names only, `maxWaitMs` >= 0 and `signal` an AbortSignal. Returns them, maxWaitMs
 * defaulted to Infinity and cost to 1 (the caller checks the cost with the key).
 */
export function checkWaitOptions(options: unknown, method: keyof typeof WAIT_OPTION_NAMES): { cost: number; maxWaitMs: number; signal: AbortSignal | undefined } {
  if (options === undefined) return { cost: 1, maxWaitMs: Infinity, signal: undefined };
  if (options === null || typeof options !== 'object') throw new TypeError(`${method}() options must be an object like { maxWaitMs }, got ${describe(options)}`);
  checkNames(options, WAIT_OPTION_NAMES[method], 'options', `${method}() option`);
  const { cost = 1, maxWaitMs, signal } = options as AcquireOptions;
  if (signal !== undefined && !(signal instanceof AbortSignal)) throw new TypeError(`options.signal must be an AbortSignal, got ${describe(signal)}`);
  return { cost, maxWaitMs: checkMaxWait(maxWaitMs), signal };
}

/** Checks `maxWaitMs`; returns it. */
export function checkMaxWait(value: unknown, name = 'options.maxWaitMs'): number {
  if (value === undefined) return Infinity;
  if (typeof value !== 'number') throw new TypeError(`${name} must be a number, got ${describe(value)}`);
  if (Number.isNaN(value) || value < 0) throw new RangeError(`${name} must be a number >= 0, got ${describe(value)}`);
  return value;
}

/**
 * For waits that poll (configurations without reservations): when to try again after a refusal
 * reporting `retryAfterMs`, or throws `RateLimitTimeoutError` if that is past `deadlineMs`.
 */
export function retryAt(key: string, retryAfterMs: number, nowMs: number, deadlineMs: number, maxWaitMs: number): number {
  const at = nowMs + retryAfterMs;
  if (retryAfterMs === Infinity || at > deadlineMs) throw new RateLimitTimeoutError(key, retryAfterMs, maxWaitMs);
  return at;
}

/**
 * The longest single sleep: Node's setTimeout fires after 1 ms (with a TimeoutOverflowWarning)
 * when given more than 2**31 - 1 ms, so longer waits are chained in chunks of at most this.
 */
const MAX_SLEEP_CHUNK_MS = 2 ** 31 - 1;

/**
 * Resolves when `clock` reads `untilMs`; rejects with the signal's reason on abort. A long wait
 * is a chain of timers of at most `MAX_SLEEP_CHUNK_MS`, and the clock is read again after each,
 * so it never resolves before the clock reads `untilMs`.
 */
export function sleepUntil(clock: Clock, untilMs: number, signal?: AbortSignal): Promise<void> {
  if (clock instanceof ManualClock) return clock.waitUntil(untilMs, signal);
  return new Promise((resolve, reject) => {
    if (signal?.aborted) { reject(signal.reason); return; }
    let timer: ReturnType<typeof setTimeout> | undefined;
    const onAbort = (): void => { clearTimeout(timer); reject(signal?.reason); };
    const step = (): void => {
      const left = untilMs - clock.now();
      if (!(left > 0)) { signal?.removeEventListener('abort', onAbort); resolve(); return; }
      timer = setTimeout(step, Math.min(left, MAX_SLEEP_CHUNK_MS));
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    timer = setTimeout(step, Math.min(Math.max(0, untilMs - clock.now()), MAX_SLEEP_CHUNK_MS));
  });
}

const sleeper = new Int32Array(new SharedArrayBuffer(4));

/**
 * Blocks this worker thread until `clock` reads `untilMs`. Refuses the main thread. Sleeps in
 * chunks of at most `MAX_SLEEP_CHUNK_MS`, reading the clock again after each.
 */
export function sleepUntilSync(clock: Clock, untilMs: number): void {
  if (clock instanceof ManualClock) {
    clock.waitUntilSync(untilMs);
    return;
  }
  for (let left = untilMs - clock.now(); left > 0; left = untilMs - clock.now()) {
    // Atomics.wait on a private word nobody notifies: a plain, non-spinning sleep.
    Atomics.wait(sleeper, 0, 0, Math.min(left, MAX_SLEEP_CHUNK_MS));
  }
}

/** Throws unless running on a worker thread. */
export function assertWorkerThread(method: string): void {
  if (isMainThread) {
    throw new Error(`${method} blocks its thread while it waits, which would freeze the main thread's event loop: call it in a worker, or use acquire() here`);
  }
}
