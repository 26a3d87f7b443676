import { CoarseClock } from './coarse-clock.js';
import { describe } from '../config/check.js';

/**
 * A source of time in milliseconds. Every thread that shares a limiter must read the same
 * timeline, and `now()` should not go backwards; `performance.now()` (the default),
 * `coarseClock()` and `ManualClock` never do.
 *
 * A clock that does step back (`Date.now()` under an NTP step, a machine restored from a
 * snapshot) never makes a limiter admit more than it would on a clock that stood still through
 * the step and moved on once it had caught up. Three rules keep it so, for every algorithm, at both
 * widths, for global caps, reservations and leases:
 * - each limiter instance (each thread's) never decides at a reading earlier than the latest it
 *   has already used: behind it, the instance decides at that latest reading, whatever the step;
 * - a decision on a state this instance did not write itself loads the key's stamp (the second of
 *   its latest admission; 68-minute units at width 64) before it reads the clock. A stamp ahead of
 *   the reading means a decision on the key used a later time: the reading is raised to the start
 *   of the stamp's second (or unit). Within that second the state decodes relative to the reading
 *   as more spent than at its last admission: a GCRA debt, a later window, a log entry or a lease
 *   that has not expired. (A 64-bit TAT in ticks of 1 us or more never wraps: it is exact alone.)
 * - a key reclaimed at one reading and inserted again (or met in its new incarnation) by an
 *   instance whose clock reads earlier is decided at the reclaim's reading: the table keeps the
 *   latest one (table/reclaim-floor.ts), and the instance decides at no earlier reading from then
 *   on. (An instance whose clock runs behind the others' for good, which the first sentence above
 *   rules out, so decides at the readings of other threads' reclaims until its clock passes them:
 *   between two reclaims, time stands still for it. Never more admissions; fewer.)
 * So no key reads as fresh after a step, nor is reclaimed by a sweep; while the clock is behind,
 * time stands still for the key (nothing refills, no lease expires), and the gap is not credited
 * again once the clock is back. Waits (`retryAfterMs`, a reservation's `delayMs`) count from the
 * clock's own reading, so they include the time it needs to catch up.
 * What only the instance that read the later time can tell from a long idle: a step back of 2^30
 * seconds (34 years) or more, seen by another instance, on a key whose stamp counts seconds.
 */
export interface Clock {
  /**
   * Milliseconds on this clock's timeline; may be fractional. A reading only: a limiter reads it
   * in the middle of a decision, holding this thread's reference to the key being decided, so
   * `now()` must not call a limiter of the same thread (a check, `get` or any other method there
   * may move that reference to another key, and the decision would then write to that key).
   */
  now(): number;
}

/**
 * One limiter instance's readings of its clock, never earlier than the latest it has returned
 * (see `Clock`: the first rule). `rawMs` keeps what the clock itself said at the last reading, so
 * that waits can be reported from it. Plain fields, no shared memory.
 *
 * Thread-safety: one per limiter instance, on the thread that owns the instance.
 */
export class ForwardClock {
  /** The clock's own reading at the last `now()`: earlier than what `now()` returned after a step back. */
  rawMs = 0;
  #latestMs = -Infinity;
  readonly #clock: Clock;

  constructor(clock: Clock) {
    this.#clock = clock;
  }

  /**
   * From now on, no reading earlier than `ms`: another thread's reading that a reclaim judged a
   * key idle at (table/reclaim-floor.ts). Like a reading of this clock that went no further.
   */
  raiseTo(ms: number): void {
    if (ms > this.#latestMs) this.#latestMs = ms;
  }

  /** The clock's reading, or the latest one returned before if that is later. */
  now(): number {
    const t = this.#clock.now();
    this.rawMs = t;
    if (t >= this.#latestMs) {
      this.#latestMs = t;
      return t; // the clock's own number: returning the field instead would box a new one per call
    }
    return this.#latestMs;
  }
}

/**
 * `performance`, read once per thread. The global is an accessor in Node 20 (a getter call with a
 * hasOwnProperty check on every read: 39-41 ns a `performance.now()` against 30-34 ns through
 * this reference, measured here); it returns this same object each time.
 */
const perf = performance;

/**
 * What `monotonicClock` adds to `performance.now()` on this thread, so that every thread reads
 * one timeline. Node gives every worker the main thread's `performance.timeOrigin`: 0 there.
 * Bun and Deno start each worker's `performance.now()` at that worker's own start (measured: a
 * worker 312 ms behind its main thread on Bun 1.4.5, 338 ms on Deno 2.9.6, and the two admitted
 * 15 and 16 for a burst of 10): there the reading is anchored to the wall clock at the thread's
 * start (`timeOrigin`, a high-resolution time), taken from 2026-01-01 so that it stays a few
 * times 10^10 ms, far inside the 2^53 ms every reading may reach. Self-contained (it reads only
 * globals): the coarse clock's updater thread runs its source.
 */
export function timelineShiftMs(): number {
  return (globalThis as { Bun?: unknown }).Bun === undefined && (globalThis as { Deno?: unknown }).Deno === undefined
    ? 0
    : performance.timeOrigin - Date.UTC(2026, 0, 1);
}

/** This thread's `timelineShiftMs()`. */
const SHIFT_MS = timelineShiftMs();

/**
 * The process's one timeline in ms: `performance.now()`, plus `SHIFT_MS` on Bun and Deno (above).
 * Every stamp that another thread judges (an insert's claim, a lock's token, a reclaim's token)
 * is taken from it, as `monotonicClock` reads it: a stamp from a thread's own `performance.now()`
 * would read, on Bun and Deno, as older than it is by the time between the two threads' starts.
 */
export const processNow: () => number = SHIFT_MS === 0 ? (): number => perf.now() : (): number => perf.now() + SHIFT_MS;

/**
 * The default clock: `performance.now()` (plus `SHIFT_MS` on Bun and Deno, above). Monotonic,
 * sub-microsecond, and one timeline for all the threads of a process.
 */
export const monotonicClock: Clock = Object.freeze({ now: processNow });

/** The largest reading a ManualClock holds, in ms: every integer up to it is exact in a double. */
const MAX_MS = 2 ** 53;

/**
 * A clock that only moves when told to, for tests. Its time lives in a `SharedArrayBuffer`, so a
 * limiter attached in a worker reads the same manual time as the main thread.
 *
 * Layout: one 64-bit word holding the IEEE-754 bit pattern of the reading in ms, so `now()`
 * returns exactly the number that was set (fractions included) for any reading from 0 to 2**53.
 *
 *   buffer (8 bytes): [ float64 bits of the time in ms, read and written as one BigInt64 ]
 *
 * Time never goes backwards: `set` to an earlier time and a negative `advance` throw
 * `RangeError` and change nothing; so does anything that would leave 0..2**53 ms.
 *
 * Thread-safety: `now`, `set` and `advance` are atomic and may be called from any thread.
 * `advance` from several threads at once all take effect.
 */
export class ManualClock implements Clock {
  /** The shared time word: the float64 bits of the reading in ms. */
  readonly #timeBits: BigInt64Array;
  /** This instance's private scratch, viewed both ways to convert bits to and from a double. */
  readonly #scratchMs = new Float64Array(1);
  readonly #scratchBits = new BigInt64Array(this.#scratchMs.buffer);

  /** Creates a clock at `startMs` (default 0), or attaches to an existing clock's buffer. */
  constructor(startMs: number | SharedArrayBuffer = 0) {
    if (startMs instanceof SharedArrayBuffer) {
      if (startMs.byteLength !== 8) throw new RangeError(`ManualClock buffer must be 8 bytes, got ${startMs.byteLength}`);
      this.#timeBits = new BigInt64Array(startMs);
      return;
    }
    const ms = checkMs('startMs', startMs);
    if (ms > MAX_MS) throw tooLate('startMs', startMs);
    this.#timeBits = new BigInt64Array(new SharedArrayBuffer(8));
    // Not yet shared with any other thread: a plain initialisation is enough.
    this.#timeBits[0] = this.#toBits(ms);
  }

  /** The shared memory behind this clock; `new ManualClock(buffer)` attaches to it. */
  get buffer(): SharedArrayBuffer {
    return this.#timeBits.buffer as SharedArrayBuffer;
  }

  /** The current manual time in milliseconds. */
  now(): number {
    return this.#toMs(this.#loadBits());
  }

  /** Moves the clock to `ms`, which must not be earlier than now nor above 2**53. */
  set(ms: number): void {
    const target = checkMs('ms', ms);
    if (target > MAX_MS) throw tooLate('ms', ms);
    const targetBits = this.#toBits(target);
    for (;;) {
      // The check "not earlier than now" and the write happen on the same loaded value (the
      // compareExchange below fails if it changed), so a concurrent advance is never undone.
      const currentBits = this.#loadBits();
      const current = this.#toMs(currentBits);
      if (target < current) {
        throw new RangeError(`ms must not be earlier than the clock's time (${current}), got ${describe(ms)}`);
      }
      // Atomics.compareExchange: writes only if the word still holds the bits just checked.
      if (Atomics.compareExchange(this.#timeBits, 0, currentBits, targetBits) === currentBits) {
        // Atomics.notify: wakes threads waiting for manual time to pass (waitUntil / waitUntilSync).
        Atomics.notify(this.#timeBits, 0);
        return;
      }
    }
  }

  /** Moves the clock forward by `ms` (>= 0); throws if that would pass 2**53. */
  advance(ms: number): void {
    const step = checkMs('ms', ms);
    for (;;) {
      const currentBits = this.#loadBits();
      const current = this.#toMs(currentBits);
      const next = current + step;
      if (passesMax(current, step, next)) {
        const room = MAX_MS - current;
        throw new RangeError(`ms must be at most ${room} (the clock must stay within 2**53 ms), got ${describe(ms)}`);
      }
      // Atomics.compareExchange: the sum is written only over the reading it was computed from,
      // so concurrent advances from several threads all take effect (a loser retries).
      if (Atomics.compareExchange(this.#timeBits, 0, currentBits, this.#toBits(next)) === currentBits) {
        // Atomics.notify: wakes threads waiting for manual time to pass (waitUntil / waitUntilSync).
        Atomics.notify(this.#timeBits, 0);
        return;
      }
    }
  }

  /**
   * Resolves once this clock reads `ms` or later (after `set`/`advance` from any thread), or
   * rejects with the signal's reason on abort.
   */
  async waitUntil(ms: number, signal?: AbortSignal): Promise<void> {
    for (;;) {
      signal?.throwIfAborted();
      const seenBits = this.#loadBits();
      if (this.#toMs(seenBits) >= ms) return;
      // Atomics.waitAsync on the time word: returns at once if the word no longer holds the bits
      // just read (no lost wake-up), else is woken by set/advance's notify, or by the 50 ms
      // timeout so that an abort is noticed promptly.
      const wait = Atomics.waitAsync(this.#timeBits, 0, seenBits, 50);
      if (wait.async) await wait.value;
    }
  }

  /** Blocks this thread (not the main one) until this clock reads `ms` or later, or `timeoutMs` passes. */
  waitUntilSync(ms: number, timeoutMs = Infinity): boolean {
    const deadline = performance.now() + timeoutMs;
    for (;;) {
      const seenBits = this.#loadBits();
      if (this.#toMs(seenBits) >= ms) return true;
      const left = deadline - performance.now();
      if (left <= 0) return false;
      // Atomics.wait: returns at once if the word changed since it was read (no lost wake-up),
      // else sleeps until set/advance notifies (no busy spinning), at most a second at a time.
      Atomics.wait(this.#timeBits, 0, seenBits, Math.min(left, 1000));
    }
  }

  /** The shared word's bits. */
  #loadBits(): bigint {
    // Atomics.load: a 64-bit read that cannot tear against a concurrent set/advance.
    return Atomics.load(this.#timeBits, 0);
  }

  /** The reading in ms that `bits` encode (through this instance's private scratch). */
  #toMs(bits: bigint): number {
    this.#scratchBits[0] = bits;
    return this.#scratchMs[0] as number;
  }

  /** The bits that encode the reading `ms` (through this instance's private scratch). */
  #toBits(ms: number): bigint {
    this.#scratchMs[0] = ms;
    return this.#scratchBits[0] as bigint;
  }
}

/** Checks that `ms` is a finite number >= 0 and returns it, with -0 made +0. */
function checkMs(name: string, ms: unknown): number {
  if (typeof ms !== 'number') throw new TypeError(`${name} must be a number, got ${describe(ms)}`);
  if (!Number.isFinite(ms) || ms < 0) throw new RangeError(`${name} must be a finite number >= 0, got ${describe(ms)}`);
  return ms + 0;
}

/**
 * Whether `a + b` (both >= 0), whose rounded sum is `sum`, is above 2**53 in exact arithmetic.
 * The rounding error comes from Knuth's TwoSum, so a sum that rounds down onto 2**53 (such as
 * (2**53 - 4) + 5) still counts as passing it.
 */
function passesMax(a: number, b: number, sum: number): boolean {
  if (sum !== MAX_MS) return sum > MAX_MS;
  const bPart = sum - a;
  const error = (a - (sum - bPart)) + (b - bPart);
  return error > 0;
}

/** The error for a reading past what a ManualClock holds. */
function tooLate(name: string, ms: number): RangeError {
  return new RangeError(`${name} must be a finite number from 0 to 2**53, got ${describe(ms)}`);
}

/** How a table header records its limiter's clock, so `attach` can rebuild it in another thread. */
const CLOCK_MONOTONIC = 0;
const CLOCK_MANUAL = 1;
const CLOCK_CUSTOM = 2;
const CLOCK_COARSE = 3;

/** The header code for `clock`. */
export function clockKind(clock: Clock): number {
  if (clock === monotonicClock) return CLOCK_MONOTONIC;
  if (clock instanceof ManualClock) return CLOCK_MANUAL;
  return clock instanceof CoarseClock ? CLOCK_COARSE : CLOCK_CUSTOM;
}

/** The shared memory a clock keeps its time in (what a handle carries), or null. */
export function clockBuffer(clock: Clock): SharedArrayBuffer | null {
  return clock instanceof ManualClock || clock instanceof CoarseClock ? clock.buffer : null;
}

/**
 * The clock an attached instance uses: the one passed to `attach` if any, else the one the
 * header names (a ManualClock or CoarseClock over the handle's buffer). A custom clock cannot
 * travel with a handle: then `attach` must be given it, and this throws a `TypeError` saying so.
 */
export function resolveClock(kind: number | undefined, given: Clock | undefined, buffer: SharedArrayBuffer | null, className: string): Clock {
  if (given !== undefined) {
    // Every thread must read one timeline. A clock of its own that wraps the table's (to record or
    // to pause its readings) cannot be told from one that does not; the clocks sluice knows can.
    const known = given === monotonicClock || given instanceof ManualClock || given instanceof CoarseClock;
    if ((kind === CLOCK_MANUAL || kind === CLOCK_COARSE) && known && clockBuffer(given) !== buffer) {
      const name = kind === CLOCK_MANUAL ? 'a ManualClock' : 'a coarseClock()';
      throw new TypeError(`this ${className} runs on ${name}, which travels with its handle: attach it without options.clock (got ${clockName(given, true)})`);
    }
    if (kind === CLOCK_MONOTONIC && known && given !== monotonicClock) {
      throw new TypeError(`this ${className} runs on performance.now(): attach it without options.clock (got ${clockName(given, false)})`);
    }
    return given;
  }
  if (kind === CLOCK_MONOTONIC) return monotonicClock;
  if (kind === CLOCK_MANUAL && buffer instanceof SharedArrayBuffer) return new ManualClock(buffer);
  if (kind === CLOCK_COARSE && buffer instanceof SharedArrayBuffer) return new CoarseClock(buffer);
  throw new TypeError(`this limiter uses a custom clock: pass it as ${className}.attach(handle, { clock })`);
}

/** How an error names one of the clocks sluice knows (`another`: not the table's own). */
function clockName(clock: Clock, another: boolean): string {
  if (clock === monotonicClock) return 'monotonicClock';
  return `${another ? 'another' : 'a'} ${clock instanceof ManualClock ? 'ManualClock' : 'coarseClock()'}`;
}
