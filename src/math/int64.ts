/**
 * Exact 64-bit integer arithmetic on pairs of int32 halves, with plain numbers only: the wide
 * GCRA path keeps its TAT in 64 bits and must neither allocate BigInts per check nor lose
 * precision above 2^53. A value is `hi * 2^32 + lo` with `hi` a signed int32 and `lo` an
 * unsigned 32-bit number (0 to 2^32 - 1), i.e. two's complement modulo 2^64.
 *
 * Every function writes into a caller-owned `Pair` (no allocation) and may alias its output
 * with an input.
 */

/** A 64-bit two's complement integer: `hi` signed int32, `lo` unsigned 32-bit. */
export interface Pair {
  hi: number;
  lo: number;
}

const TWO32 = 2 ** 32;
const TWO21 = 2 ** 21;
const TWO16 = 2 ** 16;

/** A new pair holding 0. */
export function pair(): Pair {
  return { hi: 0, lo: 0 };
}

/** Sets `out` to the integer `v`, which must satisfy |v| <= 2^53. */
export function fromNumber(v: number, out: Pair): Pair {
  const hi = Math.floor(v / TWO32);
  out.lo = v - hi * TWO32;
  out.hi = hi | 0;
  return out;
}

/** The pair's value as a number: exact while |value| <= 2^53, correctly rounded beyond. */
export function toNumber(hi: number, lo: number): number {
  return hi * TWO32 + lo;
}

/** out = a + b (mod 2^64). */
export function add(aHi: number, aLo: number, bHi: number, bLo: number, out: Pair): Pair {
  const lo = aLo + bLo;
  const carry = lo >= TWO32 ? 1 : 0;
  out.lo = lo - carry * TWO32;
  out.hi = (aHi + bHi + carry) | 0;
  return out;
}

/** out = a - b (mod 2^64). */
export function sub(aHi: number, aLo: number, bHi: number, bLo: number, out: Pair): Pair {
  const lo = aLo - bLo;
  const borrow = lo < 0 ? 1 : 0;
  out.lo = lo + borrow * TWO32;
  out.hi = (aHi - bHi - borrow) | 0;
  return out;
}

/**
 * out = c * t for integers 0 <= c <= 2^42 and 0 <= t <= 2^37, exact modulo 2^64 (the callers
 * keep the product under 2^63).
 */
export function mul(c: number, t: number, out: Pair): Pair {
  const product = c * t;
  if (product <= 2 ** 53) return fromNumber(product, out);
  // c = c2 * 2^28 + c1 * 2^14 + c0: each partial product stays under 2^51, so it is exact.
  const c2 = Math.floor(c / 2 ** 28);
  const c1 = Math.floor((c - c2 * 2 ** 28) / 2 ** 14);
  const c0 = c - c2 * 2 ** 28 - c1 * 2 ** 14;
  fromNumber(c0 * t, out);
  shiftedAdd(c1 * t, 14, out);
  return shiftedAdd(c2 * t, 28, out);
}

/** out += v * 2^shift, for an integer 0 <= v < 2^53 and 0 < shift < 32 (modulo 2^64). */
function shiftedAdd(v: number, shift: number, out: Pair): Pair {
  const hi = Math.floor(v / 2 ** (32 - shift)); // the bits that land in the high half
  const lo = (v - hi * 2 ** (32 - shift)) * 2 ** shift;
  return add(out.hi, out.lo, hi | 0, lo, out);
}

/** Quotient and remainder of a division, as set by `divmod`. */
export interface QuotRem {
  /** floor(a / t): exact while it is at most 2^53 (larger quotients are rounded). */
  q: number;
  /** a - q * t, exactly: 0 <= r < t. */
  r: number;
}

/**
 * Divides the non-negative pair `a` (hi >= 0) by the integer 1 <= t <= 2^37 into `out`.
 * Short values divide as one number; longer ones by long division in 16-bit digits, each step
 * exact in doubles.
 */
export function divmod(aHi: number, aLo: number, t: number, out: QuotRem): QuotRem {
  if (aHi < TWO21) {
    const a = aHi * TWO32 + aLo; // < 2^53: exact
    let q = Math.floor(a / t);
    let r = a - q * t;
    // The float quotient can round up onto the next integer: correct by one step.
    if (r < 0) { q -= 1; r += t; } else if (r >= t) { q += 1; r -= t; }
    out.q = q;
    out.r = r;
    return out;
  }
  // Long division in digits of 32, 16 and 16 bits: each partial dividend r * 2^16 + digit
  // stays under 2^53 (r < t <= 2^37), so every step is exact. Locals only: no boxed doubles.
  let q2 = Math.floor(aHi / t);
  let r = aHi - q2 * t;
  if (r < 0) { q2 -= 1; r += t; } else if (r >= t) { q2 += 1; r -= t; }
  let x = r * TWO16 + (aLo >>> 16);
  let q1 = Math.floor(x / t);
  r = x - q1 * t;
  if (r < 0) { q1 -= 1; r += t; } else if (r >= t) { q1 += 1; r -= t; }
  x = r * TWO16 + (aLo & 0xffff);
  let q0 = Math.floor(x / t);
  r = x - q0 * t;
  if (r < 0) { q0 -= 1; r += t; } else if (r >= t) { q0 += 1; r -= t; }
  const q = q2 * TWO32 + q1 * TWO16 + q0;
  out.q = q;
  out.r = r;
  return out;
}

/** Compares two pairs as signed 64-bit integers: negative, 0 or positive. */
export function compare(aHi: number, aLo: number, bHi: number, bLo: number): number {
  return aHi !== bHi ? aHi - bHi : aLo - bLo;
}
