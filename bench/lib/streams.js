// Key streams for the throughput lab: a shared Int32Array of key indices that every worker walks
// from its own offset. Generated once in the main thread with a seeded PRNG (reproducible).

/** mulberry32: a small seeded PRNG, enough to draw benchmark keys. */
export function prng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
}

/**
 * A stream of `length` indices into `keyCount` keys: 'uniform', or 'zipf' with exponent `s`
 * (rank r drawn with probability proportional to 1 / r^s; rank 0 the hottest).
 */
export function keyStream(kind, keyCount, length, { s = 0.99, seed = 42 } = {}) {
  const out = new Int32Array(new SharedArrayBuffer(length * 4));
  const rand = prng(seed);
  if (kind === 'uniform') {
    for (let i = 0; i < length; i++) out[i] = Math.floor(rand() * keyCount);
    return out;
  }
  if (kind !== 'zipf') throw new RangeError(`kind must be 'uniform' or 'zipf', got ${kind}`);
  const cdf = new Float64Array(keyCount);
  let sum = 0;
  for (let r = 0; r < keyCount; r++) { sum += 1 / (r + 1) ** s; cdf[r] = sum; }
  for (let i = 0; i < length; i++) {
    const x = rand() * sum;
    let lo = 0;
    let hi = keyCount - 1;
    while (lo < hi) { const mid = (lo + hi) >>> 1; if ((cdf[mid] ?? 0) < x) lo = mid + 1; else hi = mid; }
    out[i] = lo;
  }
  return out;
}

/** Share of the stream that goes to the hottest `top` keys (for the table caption). */
export function topShare(stream, top) {
  let n = 0;
  for (let i = 0; i < stream.length; i++) if ((stream[i] ?? 0) < top) n++;
  return n / stream.length;
}
