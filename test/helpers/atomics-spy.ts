// Hooks on Atomics.load and Atomics.compareExchange: which words a code path reads atomically
// (tests that a path skips a load, or keeps one), and work run by "another thread" at a chosen
// step of a protocol. Restores both however `f` ends.
import { expect } from 'vitest';

/** Called before the real operation runs, with its arguments. */
export interface AtomicsHooks {
  load?: (array: Int32Array, index: number) => void;
  cas?: (array: Int32Array, index: number, expected: number, value: number) => void;
}

/** Runs `f` with `hooks` called before every Atomics.load / compareExchange (nested calls included). */
export function withAtomicsHooks<T>(hooks: AtomicsHooks, f: () => T): T {
  const realLoad = Atomics.load;
  const realCas = Atomics.compareExchange;
  const { load, cas } = hooks;
  if (load !== undefined) {
    Atomics.load = ((array: Int32Array, index: number) => {
      load(array, index);
      return realLoad(array, index);
    }) as typeof Atomics.load;
  }
  if (cas !== undefined) {
    Atomics.compareExchange = ((array: Int32Array, index: number, expected: number, value: number) => {
      cas(array, index, expected, value);
      return realCas(array, index, expected, value);
    }) as typeof Atomics.compareExchange;
  }
  try {
    return f();
  } finally {
    Atomics.load = realLoad;
    Atomics.compareExchange = realCas;
  }
}

/** Atomics.load calls made by `f` on words for which `match(array, index)` holds (every call without it). */
export function loadsDuring(f: () => void, match: (array: Int32Array, index: number) => boolean = () => true): number {
  let n = 0;
  withAtomicsHooks({ load: (array, index) => { if (match(array, index)) n++; } }, f);
  return n;
}

/**
 * Runs `run`, and `act` once in it, just before the first compareExchange on word `index` of
 * `table` (the point between a decision's commit of its first part and its commit of the next,
 * or a give-back's); returns what `run` returned, after checking that `act` ran.
 */
export function interleaved<T>(table: SharedArrayBuffer, index: number, act: () => void, run: () => T): T {
  let fired = false;
  const result = withAtomicsHooks({
    cas: (arr, i) => {
      if (fired || arr.buffer !== table || i !== index) return;
      fired = true;
      act();
    },
  }, run);
  expect(fired).toBe(true);
  return result;
}
