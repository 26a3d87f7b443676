import { describe } from './errors.js';

/**
 * A source of time in milliseconds. `now()` must never go backwards, and every thread that shares
 * a limiter must read the same timeline.
 */
export interface Clock {
  /** Milliseconds on this clock's timeline; may be fractional. */
  now(): number;
}

/**
 * The default clock: `performance.now()`. Monotonic, sub-microsecond, and in Node 20+ every
 * worker shares the main thread's `performance.timeOrigin`, so all threads read one timeline.
 *
 * Thread-safety: stateless; safe on any thread.
 */
export const monotonicClock: Clock = Object.freeze({
  now: (): number => performance.now(),
});

const NS_PER_MS = 1_000_000;

/**
 * A clock that only moves when told to, for tests. Its time lives in a `SharedArrayBuffer`, so a
 * limiter attached in a worker reads the same manual time as the main thread.
 *
 * Time is held as whole nanoseconds in one 64-bit word. Time never goes backwards: `set` to an
 * earlier time and a negative `advance` throw `RangeError` and change nothing.
 *
 * Thread-safety: `now`, `set` and `advance` are atomic and may be called from any thread.
 * `advance` from several threads at once adds up exactly.
 */
export class ManualClock implements Clock {
  readonly #timeNs: BigInt64Array;

  /** Creates a clock at `startMs` (default 0), or attaches to an existing clock's buffer. */
  constructor(startMs: number | SharedArrayBuffer = 0) {
    if (startMs instanceof SharedArrayBuffer) {
      if (startMs.byteLength !== 8) throw new RangeError(`ManualClock buffer must be 8 bytes, got ${startMs.byteLength}`);
      this.#timeNs = new BigInt64Array(startMs);
      return;
    }
    checkMs('startMs', startMs);
    this.#timeNs = new BigInt64Array(new SharedArrayBuffer(8));
    // Not yet shared with any other thread: a plain initialisation is enough.
    this.#timeNs[0] = toNs(startMs);
  }

  /** The shared memory behind this clock; `new ManualClock(buffer)` attaches to it. */
  get buffer(): SharedArrayBuffer {
    return this.#timeNs.buffer as SharedArrayBuffer;
  }

  /** The current manual time in milliseconds. */
  now(): number {
    // Atomics.load: a 64-bit read that cannot tear against a concurrent set/advance.
    return Number(Atomics.load(this.#timeNs, 0)) / NS_PER_MS;
  }

  /** Moves the clock to `ms`, which must not be earlier than now. */
  set(ms: number): void {
    checkMs('ms', ms);
    const target = toNs(ms);
    for (;;) {
      // Atomics.load + compareExchange: the check "not earlier than now" and the write happen on
      // the same value, so a concurrent advance is never undone.
      const current = Atomics.load(this.#timeNs, 0);
      if (target < current) {
        throw new RangeError(`ms must not be earlier than the clock's time (${Number(current) / NS_PER_MS}), got ${ms}`);
      }
      if (Atomics.compareExchange(this.#timeNs, 0, current, target) === current) {
        // notify: wakes threads waiting for manual time to pass (waitUntil / waitUntilSync).
        Atomics.notify(this.#timeNs, 0);
        return;
      }
    }
  }

  /** Moves the clock forward by `ms` (>= 0). */
  advance(ms: number): void {
    checkMs('ms', ms);
    // Atomics.add: concurrent advances from several threads all take effect.
    Atomics.add(this.#timeNs, 0, toNs(ms));
    // notify: wakes threads waiting for manual time to pass (waitUntil / waitUntilSync).
    Atomics.notify(this.#timeNs, 0);
  }

  /**
   * Resolves once this clock reads `ms` or later (after `set`/`advance` from any thread), or
   * rejects with the signal's reason on abort.
   */
  async waitUntil(ms: number, signal?: AbortSignal): Promise<void> {
    for (;;) {
      signal?.throwIfAborted();
      const seen = Atomics.load(this.#timeNs, 0);
      if (Number(seen) / NS_PER_MS >= ms) return;
      // waitAsync on the time word: woken by set/advance's notify, or by the 50 ms timeout so
      // that an abort is noticed promptly.
      const wait = Atomics.waitAsync(this.#timeNs, 0, seen, 50);
      if (wait.async) await wait.value;
    }
  }

  /** Blocks this thread (not the main one) until this clock reads `ms` or later, or `timeoutMs` passes. */
  waitUntilSync(ms: number, timeoutMs = Infinity): boolean {
    const deadline = performance.now() + timeoutMs;
    for (;;) {
      const seen = Atomics.load(this.#timeNs, 0);
      if (Number(seen) / NS_PER_MS >= ms) return true;
      const left = deadline - performance.now();
      if (left <= 0) return false;
      // Atomics.wait: sleeps until set/advance notifies (no busy spinning).
      Atomics.wait(this.#timeNs, 0, seen, Math.min(left, 1000));
    }
  }
}

function checkMs(name: string, ms: unknown): void {
  if (typeof ms !== 'number') throw new TypeError(`${name} must be a number, got ${describe(ms)}`);
  if (!Number.isFinite(ms) || ms < 0) throw new RangeError(`${name} must be a finite number >= 0, got ${describe(ms)}`);
}

function toNs(ms: number): bigint {
  return BigInt(Math.round(ms * NS_PER_MS));
}

/** How a table header records its limiter's clock, so `attach` can rebuild it in another thread. */
const CLOCK_MONOTONIC = 0;
const CLOCK_MANUAL = 1;
const CLOCK_CUSTOM = 2;

/** The header code for `clock`. */
export function clockKind(clock: Clock): number {
  return clock === monotonicClock ? CLOCK_MONOTONIC : clock instanceof ManualClock ? CLOCK_MANUAL : CLOCK_CUSTOM;
}

/**
 * The clock an attached instance uses: the one passed to `attach` if any, else the one the
 * header names (a ManualClock over the handle's buffer). A custom clock cannot travel with a
 * handle: then `attach` must be given it, and this throws a `TypeError` saying so.
 */
export function resolveClock(kind: number | undefined, given: Clock | undefined, buffer: SharedArrayBuffer | null, className: string): Clock {
  if (given !== undefined) return given;
  if (kind === CLOCK_MONOTONIC) return monotonicClock;
  if (kind === CLOCK_MANUAL && buffer instanceof SharedArrayBuffer) return new ManualClock(buffer);
  throw new TypeError(`this limiter uses a custom clock: pass it as ${className}.attach(handle, { clock })`);
}
