import { isMainThread } from 'node:worker_threads';
import { ManualClock, type Clock } from '../time/clock.js';
import { describe } from '../config/check.js';
import { checkNames } from '../config/option-names.js';
import { RateLimitTimeoutError } from '../errors.js';

/**
 * Waiting for a turn: the reservation object, and sleeping on the limiter's
 * clock (a ManualClock is followed, so tests never sleep for real).
 *
 * Thread-safety: a Reservation belongs to the thread that made it; the functions are safe on
 * any thread (acquireSync's sleep only off the main thread).
 */

/**
 * What `reserve` answers for a key with no slot under onFull 'allow': admitted at once, nothing
 * counted, so nothing to give back.
 */
export function unheldReservation(key: string, cost: number, nowMs: number): Reservation {
  return { key, cost, delayMs: 0, actAtMs: nowMs, cancel: () => false };
}

/** Options for `reserve`: what the request costs, and how long it may wait at most. */
/** A reservation on the lock-free paths: cancel() gives back what it counted if its time has not come. */
export class HeldReservation implements Reservation {
  #done = false;
  constructor(
    readonly key: string,
    readonly cost: number,
    readonly delayMs: number,
    readonly actAtMs: number,
    private readonly clock: Clock,
    /** Gives back what is still ahead of now of what the reservation counted. */
    private readonly giveBack: () => boolean,
  ) {}

  cancel(): boolean {
    if (this.#done) return false;
    this.#done = true;
    if (this.cost === 0 || this.clock.now() >= this.actAtMs) return false;
    return this.giveBack();
  }
}

export interface ReserveOptions {
  /** Cost of the request, an integer >= 0. Default 1. */
  cost?: number;
  /** Longest acceptable wait; a longer one is refused at once (`RateLimitTimeoutError`). Default Infinity. */
  maxWaitMs?: number;
}

/** Options for `acquireSync`: as for `reserve`. */
export type AcquireSyncOptions = ReserveOptions;

/** Options for `acquire`: as for `reserve`, and a signal. */
export interface AcquireOptions extends ReserveOptions {
  /** Aborts the wait; whatever was reserved is given back. */
  signal?: AbortSignal;
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
  reserve: ['cost', 'maxWaitMs'],
} as const;

/**
 * Checks the options of `acquire`, `acquireSync` or `reserve`: an object (or undefined) with
 * known names only, `maxWaitMs` >= 0 and `signal` an AbortSignal. Returns them, maxWaitMs
 * defaulted to Infinity and cost to 1 (the caller checks the cost with the key).
 */
export function checkWaitOptions(
  options: unknown, method: keyof typeof WAIT_OPTION_NAMES,
): { cost: number; maxWaitMs: number; signal: AbortSignal | undefined } {
  if (options === undefined) return { cost: 1, maxWaitMs: Infinity, signal: undefined };
  if (typeof options === 'number') {
    throw new TypeError(`${method}() takes the cost in its options, as acquire() does: ${method}(key, { cost: ${options} }), got ${describe(options)}`);
  }
  if (options === null || typeof options !== 'object') {
    throw new TypeError(`${method}() options must be an object like { cost, maxWaitMs }, got ${describe(options)}`);
  }
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
