// Counting Atomics.load calls: which words a code path reads atomically (tests that a path skips a
// load, or keeps one). Restores Atomics.load however `f` ends.

/** Atomics.load calls made by `f` on words for which `match(array, index)` holds (every call without it). */
export function loadsDuring(f: () => void, match: (array: Int32Array, index: number) => boolean = () => true): number {
  const realLoad = Atomics.load;
  let n = 0;
  Atomics.load = ((array: Int32Array, index: number) => {
    if (match(array, index)) n++;
    return realLoad(array, index);
  }) as typeof Atomics.load;
  try {
    f();
  } finally {
    Atomics.load = realLoad;
  }
  return n;
}
