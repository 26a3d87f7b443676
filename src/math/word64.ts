import type { Pair } from './int64.js';

/**
 * 64-bit words in an int32 table: the one compareExchange that writes them whole, and the view
 * it needs. Reads take the two int32 halves (no BigInt, no allocation); the write is one 64-bit
 * compareExchange on a `BigInt64Array` over the same memory, from the value the halves spelled,
 * so a decision made on a torn read can never land. Used by the 64-bit GCRA engine (rate/gcra-wide.ts),
 * the algorithms' 64-bit states, the PolicyLimiter and the Redis local tier.
 *
 * Thread-safety: the scratch buffers are per thread (module state); every function may run on
 * any number of threads at once over the same table.
 */

if (new Uint8Array(new Uint32Array([1]).buffer)[0] !== 1) {
  throw new Error('sluice needs a little-endian platform (the 64-bit TAT is read as two int32 halves)');
}

const bigViews = new WeakMap<ArrayBufferLike, BigInt64Array>();
// Scratch: a private 16-byte buffer seen as two int64 and four int32 (builds the CAS operands).
const casScratch32 = new Int32Array(4);
const casScratch64 = new BigInt64Array(casScratch32.buffer);

/**
 * One 64-bit compareExchange on `big[at / 2]` (the word whose int32 halves are `at`, `at + 1`)
 * from (hi, lo) to (nextHi, nextLo): it lands only if the word still holds exactly the value the
 * caller read, so a decision made on a torn read of the halves can never land, and a writer
 * whose lock was taken over can fail but never tear the word.
 */
export function casHalves(big: BigInt64Array, at: number, hi: number, lo: number, nextHi: number, nextLo: number): boolean {
  casScratch32[0] = lo;
  casScratch32[1] = hi;
  casScratch32[2] = nextLo;
  casScratch32[3] = nextHi;
  const expected = casScratch64[0] as bigint;
  // compareExchange on the whole word (seq-cst): see above.
  return Atomics.compareExchange(big, at >> 1, expected, casScratch64[1] as bigint) === expected;
}

/**
 * `casHalves` on the word whose low half is `w[at]` (`at` even: 8-byte aligned), for the locked
 * 64-bit states.
 */
export function cas64(w: Int32Array, at: number, hi: number, lo: number, nextHi: number, nextLo: number): boolean {
  if ((at & 1) !== 0) throw new Error(`a 64-bit state at word ${at} is not 8-byte aligned`);
  let big = bigViews.get(w.buffer);
  if (big === undefined) bigViews.set(w.buffer, (big = bigView(w.buffer)));
  return casHalves(big, at, hi, lo, nextHi, nextLo);
}

/** A 64-bit view of a table buffer, over its whole 8-byte words (a table may end on a 4-byte one). */
export function bigView(buffer: ArrayBufferLike): BigInt64Array {
  return new BigInt64Array(buffer, 0, Math.floor(buffer.byteLength / 8));
}

/** The halves of a 64-bit word read whole (with Atomics.load on a BigInt64Array), into `out`. */
export function halvesOf(value: bigint, out: Pair): Pair {
  casScratch64[0] = value;
  out.lo = (casScratch32[0] as number) >>> 0;
  out.hi = casScratch32[1] as number;
  return out;
}
