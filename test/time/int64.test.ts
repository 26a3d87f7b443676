import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ticksAt } from '../../src/time/ticks.js';
import { WIDE_TICKS_PS } from '../../src/math/gcra.js';
import { ticks64 } from '../../src/time/ticks64.js';
import { add, compare, divmod, fromNumber, mul, pair, sub, toNumber } from '../../src/math/int64.js';

// The 64-bit pair arithmetic and the clock conversions, checked against BigInt.

const M64 = 2n ** 64n;
const big = (hi: number, lo: number): bigint => BigInt.asIntN(64, (BigInt(hi) << 32n) | BigInt(lo >>> 0));
const split = (v: bigint): { hi: number; lo: number } => {
  const u = BigInt.asUintN(64, v);
  return { hi: Number(BigInt.asIntN(32, u >> 32n)), lo: Number(u & 0xffffffffn) };
};
const int64 = fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n });

/** The exact value of a double, as a fraction num / 2^k. */
function exactMs(ms: number): { num: bigint; den: bigint } {
  let den = 1n;
  let x = ms;
  while (!Number.isInteger(x)) { x *= 2; den *= 2n; }
  return { num: BigInt(x), den };
}

/**
 * The ticks a reading may map to: floor(exact), or the next tick when the reading lies within a
 * few ulps (at most 1 ns) below it (a decimal reading rounded down by its double).
 */
function snapped(ms: number, tickPs: number, modulus: bigint): bigint[] {
  const { num, den } = exactMs(ms);
  const scaled = num * 1_000_000_000_000n; // ticks * den * tick in femtoseconds
  const unit = den * BigInt(Math.round(tickPs * 1000));
  const floor = scaled / unit;
  const out = [floor % modulus];
  // distance to the next tick, in the reading's units: ((floor + 1) * unit - scaled) / (den * 1e9) ms
  const gapMs = Number((floor + 1n) * unit - scaled) / Number(den) / 1e12;
  // The snap: a few ulps of the reading, at most 1 ns, plus the rounding of the fraction's product.
  if (gapMs <= Math.min(ms * 2 ** -50, 1e-6) + 2 ** -50) out.push((floor + 1n) % modulus);
  return out;
}

describe('int64 pairs', () => {
  it('add and sub wrap exactly modulo 2^64', () => {
    fc.assert(fc.property(int64, int64, (a, b) => {
      const A = split(a);
      const B = split(b);
      const s = add(A.hi, A.lo, B.hi, B.lo, pair());
      const d = sub(A.hi, A.lo, B.hi, B.lo, pair());
      expect(big(s.hi, s.lo)).toBe(BigInt.asIntN(64, a + b));
      expect(big(d.hi, d.lo)).toBe(BigInt.asIntN(64, a - b));
      expect(Math.sign(compare(A.hi, A.lo, B.hi, B.lo))).toBe(a < b ? -1 : a > b ? 1 : 0);
    }), { numRuns: 2000 });
  });

  it('mul is exact for c <= 2^42 and t <= 2^37', () => {
    fc.assert(fc.property(fc.bigInt({ min: 0n, max: 2n ** 42n }), fc.bigInt({ min: 0n, max: 2n ** 37n }), (c, t) => {
      const p = mul(Number(c), Number(t), pair());
      expect(big(p.hi, p.lo)).toBe(BigInt.asIntN(64, (c * t) % M64));
    }), { numRuns: 2000 });
  });

  it('divmod is exact for every non-negative pair and divisor up to 2^37', () => {
    fc.assert(fc.property(fc.bigInt({ min: 0n, max: 2n ** 63n - 1n }), fc.bigInt({ min: 1n, max: 2n ** 37n }), (a, t) => {
      const A = split(a);
      const qr = divmod(A.hi, A.lo, Number(t), { q: 0, r: 0 });
      expect(BigInt(qr.r)).toBe(a % t);
      if (a / t <= 2n ** 53n) expect(BigInt(qr.q)).toBe(a / t);
      else expect(Math.abs(qr.q / Number(a / t) - 1)).toBeLessThan(2 ** -50);
    }), { numRuns: 3000 });
  });

  it('fromNumber and toNumber round-trip integers up to 2^62', () => {
    fc.assert(fc.property(fc.bigInt({ min: -(2n ** 53n), max: 2n ** 53n }), (v) => {
      const p = fromNumber(Number(v), pair());
      expect(big(p.hi, p.lo)).toBe(v);
      expect(toNumber(p.hi, p.lo)).toBe(Number(v));
    }));
    const p = fromNumber(2 ** 62 + 2 ** 40, pair());
    expect(big(p.hi, p.lo)).toBe(2n ** 62n + 2n ** 40n);
  });
});

describe('clock readings to ticks', () => {
  const reading = fc.oneof(
    fc.double({ min: 0, max: 2 ** 53, noNaN: true }),
    fc.integer({ min: 0, max: 2 ** 40 }).map((n) => n / 1000), // microsecond readings
    fc.constantFrom(0, 1234.567, 2 ** 31 / 1e5, 2 ** 32, 2 ** 53, 2 ** 53 - 1, Date.UTC(2038, 0, 19, 3, 14, 8)),
  );

  it('ticks64 is floor(reading in ticks) modulo 2^64 for every reading up to 2^53 ms and every tick', () => {
    fc.assert(fc.property(reading, fc.constantFrom(...WIDE_TICKS_PS), (ms, tickPs) => {
      const now = pair();
      const fresh = pair();
      ticks64(ms, { tickPs }, now, fresh);
      const got = BigInt.asUintN(64, big(now.hi, now.lo));
      expect(snapped(ms, tickPs, M64)).toContain(got);
      const f = BigInt.asUintN(64, big(fresh.hi, fresh.lo));
      if (tickPs <= 1e9) expect(f).toBe(got);
      else expect(f === got || f === (got + 1n) % M64).toBe(true);
    }), { numRuns: 5000 });
  });

  it('ticksAt (32-bit) is floor(reading in ticks) modulo 2^32 for every reading up to 2^53 ms', () => {
    fc.assert(fc.property(reading, fc.constantFrom(1e4, 1e5, 1e6, 1e7, 1e8, 1e9), (ms, tickPs) => {
      const got = BigInt(ticksAt(ms, { tickPs }) >>> 0);
      expect(snapped(ms, tickPs, 2n ** 32n)).toContain(got);
    }), { numRuns: 5000 });
  });

  it('keeps a millisecond reading on the tick it names', () => {
    expect(ticksAt(1234.567, { tickPs: 1e4 })).toBe(123456700);
    const now = pair();
    ticks64(1234.567, { tickPs: 1 }, now, pair());
    expect(big(now.hi, now.lo)).toBe(1234567000000n);
  });
});
