import { Worker } from 'node:worker_threads';
import { describe } from '../config/check.js';
import { processNow, timelineShiftMs, type Clock } from './clock.js';

/**
 * A clock read with one `Atomics.load`: the process timeline (`processNow()`, which
 * `monotonicClock` reads) rounded down to a resolution, kept in shared memory by one background
 * thread and travelling with a limiter's handle.
 *
 * Layout (an Int32Array over a 32-byte SharedArrayBuffer):
 *
 *   word 0      the reading: units of the resolution on the process timeline, modulo 2^32
 *               (bits 31-30: the epoch's low two bits; bits 29-0: units into the epoch)
 *   words 1-4   EPOCHS: the full epoch (units >> 30) whose low two bits are 0, 1, 2, 3
 *   word 5      WAKE: the updater sleeps on it (never written)
 *   words 6-7   the resolution in ms, a float64 (written once, before the buffer is shared)
 *
 * A reading is `(EPOCHS[word >>> 30] * 2^30 + (word & (2^30 - 1))) * resolution`. A writer
 * publishes the epoch's slot before the first word of that epoch; a slot is rewritten four epochs
 * later (3 * 2^30 units on: 37 days at 1 ms), so a reader that loaded a word reads its slot
 * unchanged unless it stalls that long between the two reads.
 *
 * Writers: the updater thread every half resolution, and every thread that reads the clock, on
 * one reading in READS_PER_CHECK, from its own reading of the timeline (so a busy process moves the
 * clock even when the updater is starved of CPU, or gone with the thread that started it). Every
 * write is a compareExchange that only moves the word forward, judged on full readings (a word
 * 2^31 units or more behind, after the process was stopped that long, still moves).
 *
 * Thread-safety: `now()` may be called from any thread; an instance per thread (it keeps a
 * countdown), all over the same buffer.
 */
export class CoarseClock implements Clock {
  readonly #w: Int32Array;
  readonly #resolutionMs: number;
  /** Readings left before this thread reads `performance.now()` to move the word itself. */
  #countdown = READS_PER_CHECK;

  /** @internal Use `coarseClock()`, or attach a limiter whose handle carries one. */
  constructor(buffer: SharedArrayBuffer) {
    if (!(buffer instanceof SharedArrayBuffer) || buffer.byteLength !== BYTES) {
      throw new TypeError(`a coarse clock's buffer must be a SharedArrayBuffer of ${BYTES} bytes, got ${describe(buffer)}`);
    }
    this.#w = new Int32Array(buffer);
    this.#resolutionMs = new Float64Array(buffer, RESOLUTION_BYTE, 1)[0] as number;
  }

  /** The shared memory behind this clock (what a limiter's handle carries). */
  get buffer(): SharedArrayBuffer {
    return this.#w.buffer as SharedArrayBuffer;
  }

  /** The step of the readings, in ms. */
  get resolutionMs(): number {
    return this.#resolutionMs;
  }

  /**
   * How far the shared reading is behind the process timeline at this moment, in ms (what a
   * reading taken now would miss), without moving it: for monitoring the lag under load.
   */
  get lagMs(): number {
    // Atomics.load, as in now().
    return processNow() - this.#decode(Atomics.load(this.#w, 0));
  }

  /** The shared reading, in ms: a multiple of the resolution, never ahead of the process timeline. */
  now(): number {
    const w = this.#w;
    if (--this.#countdown === 0) {
      this.#countdown = READS_PER_CHECK;
      publish(w, processNow(), this.#resolutionMs);
    }
    // Atomics.load of the reading: it synchronises with the write that published it, which wrote
    // the epoch's slot first, so the plain read of the slot below sees that write. A decision
    // that loads a state and then this word reads a time no earlier than the state's writer did
    // (the writer loaded the word before writing, and the word only moves forward).
    return this.#decode(Atomics.load(w, 0));
  }

  /** The time in ms that a word loaded by Atomics.load encodes (a plain read of its epoch's slot). */
  #decode(word: number): number {
    return ((this.#w[EPOCHS + (word >>> 30)] as number) * EPOCH_UNITS + (word & UNIT_MASK)) * this.#resolutionMs;
  }
}

/** Readings between two checks against `performance.now()` on one thread. */
const READS_PER_CHECK = 64;
/** The buffer's size; exported for tests (not from the package). */
export const BYTES = 32;
const EPOCHS = 1;
const WAKE = 5;
/** Where the resolution lives; exported for tests (not from the package). */
export const RESOLUTION_BYTE = 24;
const EPOCH_UNITS = 2 ** 30;
const UNIT_MASK = EPOCH_UNITS - 1;
const MIN_RESOLUTION_MS = 0.01;
const MAX_RESOLUTION_MS = 1000;

/**
 * Moves the reading in `w` forward to `nowMs` rounded down to `resolutionMs`, unless it is
 * already there or later. Exported for tests (not from the package).
 */
export function publish(w: Int32Array, nowMs: number, resolutionMs: number): void {
  const units = Math.floor(nowMs / resolutionMs);
  const epoch = Math.floor(units / EPOCH_UNITS);
  const next = units | 0; // modulo 2^32: the epoch's low two bits, then the units into it
  // Atomics.load of the word, then its epoch's slot (plain: written before the word, as below):
  // the word's full reading, compared in full, so that a word left far behind (the process
  // stopped for 2^31 units or more) is still seen as behind, not as ahead modulo 2^32.
  // #decode's formula in units, written out here: the updater thread runs this function from its
  // source, so it may call nothing outside itself.
  const fullUnits = (word: number): number => (w[EPOCHS + (word >>> 30)] as number) * EPOCH_UNITS + (word & UNIT_MASK);
  let seen = Atomics.load(w, 0);
  if (fullUnits(seen) >= units) return;
  // The slot before the word: a reader that sees this epoch in the word reads the slot after it.
  // Raised only, by compareExchange from the value loaded: a publish that stopped after its check
  // for four epochs or more finds a later epoch in its slot, and stops (it has nothing left to
  // publish). A plain store there put the old epoch back under a word that readers decode with
  // it, and every reading fell four epochs behind (found by the explorer, coarse-clock-stall).
  const at = EPOCHS + (epoch & 3);
  for (let slot = Atomics.load(w, at); slot !== epoch;) {
    if (slot > epoch) return;
    const prev = Atomics.compareExchange(w, at, slot, epoch);
    if (prev === slot) break;
    slot = prev;
  }
  for (;;) {
    // compareExchange from the word seen: fails if another writer moved it, then we look again
    // (and stop once it is at or past ours: the word never moves back).
    const prev = Atomics.compareExchange(w, 0, seen, next);
    if (prev === seen || fullUnits(prev) >= units) return;
    seen = prev;
  }
}

/** The clocks this thread made, by resolution: one updater thread each. */
const made = new Map<number, CoarseClock>();

/**
 * A clock for limiters that read the time often: the default clock's timeline (`monotonicClock`)
 * rounded down to `resolutionMs` (default 1), kept in shared memory by one background thread (unref'd: it never
 * keeps the process alive) and read with a single `Atomics.load`, about a third of a
 * `performance.now()` call. A limiter made with it carries it in its handle, so every attached
 * thread reads the same word.
 *
 * Its readings lag real time: by up to the resolution, plus however late the updater runs on a
 * busy machine. Every thread that reads the clock also moves it forward once every 64 readings,
 * which bounds the lag on busy threads even when the updater is starved of CPU. Limits are exact
 * on the clock's own timeline; against real time, a limiter can admit up to rate x lag more in a
 * window (bench/RESULTS.md, race lab, measures the lag under load).
 *
 * One clock per resolution per thread: calling it again returns the same clock. The updater
 * belongs to the thread that made the clock: make it on the main thread (a worker's threads stop
 * with it, after which only the readers move the clock).
 */
export function coarseClock(resolutionMs = 1): CoarseClock {
  if (typeof resolutionMs !== 'number') throw new TypeError(`resolutionMs must be a number, got ${describe(resolutionMs)}`);
  if (!(resolutionMs >= MIN_RESOLUTION_MS && resolutionMs <= MAX_RESOLUTION_MS)) {
    throw new RangeError(`resolutionMs must be from ${MIN_RESOLUTION_MS} to ${MAX_RESOLUTION_MS} ms, got ${describe(resolutionMs)}`);
  }
  const known = made.get(resolutionMs);
  if (known !== undefined) return known;
  const buffer = new SharedArrayBuffer(BYTES);
  new Float64Array(buffer, RESOLUTION_BYTE, 1)[0] = resolutionMs;
  // Not yet shared: the first reading is published before any other thread can read the buffer.
  publish(new Int32Array(buffer), processNow(), resolutionMs);
  const updater = new Worker(UPDATER, { eval: true, workerData: { buffer, publish: publish.toString(), shift: timelineShiftMs.toString() } });
  updater.unref();
  const clock = new CoarseClock(buffer);
  made.set(resolutionMs, clock);
  return clock;
}

/**
 * The updater thread: publishes its reading of the process timeline (its own `performance.now()`
 * plus its own `timelineShiftMs()`) every half resolution, sleeping on the WAKE
 * word (Atomics.wait with a timeout: no timers, no spinning). It runs the same `publish` and
 * `timelineShiftMs`, given as source (`publish` with the three constants it reads).
 */
const UPDATER = `
const { workerData } = require('node:worker_threads');
const publish = new Function('EPOCHS', 'EPOCH_UNITS', 'UNIT_MASK', 'return ' + workerData.publish)(${EPOCHS}, ${EPOCH_UNITS}, ${UNIT_MASK});
const shiftMs = new Function('return (' + workerData.shift + ')()')();
const w = new Int32Array(workerData.buffer);
const resolutionMs = new Float64Array(workerData.buffer, ${RESOLUTION_BYTE}, 1)[0];
for (;;) {
  publish(w, performance.now() + shiftMs, resolutionMs);
  Atomics.wait(w, ${WAKE}, 0, resolutionMs / 2);
}
`;
