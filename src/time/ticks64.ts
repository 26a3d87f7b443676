import { coarseTicks, readingSlackMs, snapFloor } from './ticks.js';

/**
 * Clock readings as 64-bit ticks of one size: `read(nowMs)` sets `hi`/`lo` (whole ticks, floored)
 * and `freshHi`/`freshLo` (where a fresh key's TAT starts: the same, or the next tick for a
 * reading between ticks coarser than 1 ms, so that a fresh start never gains part of a tick).
 * Exact modulo 2^64 for every reading up to 2^53 ms: the integer milliseconds are multiplied in
 * partial products that stay under 2^53 (ticks per ms are at most 10^10).
 *
 * Thread-safety: one instance per thread (it holds its last reading).
 */
export class Ticks64 {
  hi = 0;
  lo = 0;
  freshHi = 0;
  freshLo = 0;
  readonly #perMs: number;
  readonly #perMsLow: number;
  readonly #tickMs: number;
  readonly #coarse: boolean;

  constructor(tickPs: number) {
    this.#coarse = tickPs > 1e9;
    this.#tickMs = tickPs / 1e9;
    this.#perMs = this.#coarse ? 0 : Math.round(1e9 / tickPs); // an integer: such a tick divides 1 ms
    this.#perMsLow = this.#perMs % TWO32 | 0;
  }

  read(nowMs: number): void {
    if (this.#coarse) {
      const floor = coarseTicks(nowMs, this.#tickMs, false);
      const fresh = coarseTicks(nowMs, this.#tickMs, true);
      this.hi = Math.floor(floor / TWO32) | 0;
      this.lo = floor - Math.floor(floor / TWO32) * TWO32;
      this.freshHi = Math.floor(fresh / TWO32) | 0;
      this.freshLo = fresh - Math.floor(fresh / TWO32) * TWO32;
      return;
    }
    const perMs = this.#perMs;
    // whole = wh * 2^32 + a1 * 2^16 + a0; whole * perMs = wh*perMs*2^32 + a1*perMs*2^16 + a0*perMs,
    // where only the low 32 bits of wh * perMs matter (Math.imul) and the rest stay under 2^50.
    const whole = Math.floor(nowMs);
    const wh = Math.floor(whole / TWO32);
    const wl = whole - wh * TWO32;
    const a1 = Math.floor(wl / 65536);
    const x = (wl - a1 * 65536) * perMs;
    const y = a1 * perMs;
    const yHi = Math.floor(y / 65536);
    const xHi = Math.floor(x / TWO32);
    // The fraction, snapped onto the tick it names if it is within an ulp below (see ticksAt).
    const fraction = (nowMs - whole) * perMs;
    const part = snapFloor(fraction, readingSlackMs(nowMs) * perMs + fraction * 2 ** -51);
    const partHi = Math.floor(part / TWO32);
    let lo = (x - xHi * TWO32) + (y - yHi * 65536) * 65536 + (part - partHi * TWO32); // < 3 * 2^32
    const carry = lo >= TWO32 ? (lo >= 2 * TWO32 ? 2 : 1) : 0;
    lo -= carry * TWO32;
    const hi = (xHi + yHi + partHi + carry + Math.imul(wh, this.#perMsLow)) | 0;
    this.lo = lo;
    this.hi = hi;
    this.freshLo = lo;
    this.freshHi = hi;
  }
}

const TWO32 = 2 ** 32;

/** `Ticks64.read` into pairs, for one-off conversions (tests, rule changes). */
export function ticks64(nowMs: number, p: { tickPs: number }, now: { hi: number; lo: number }, fresh: { hi: number; lo: number }): void {
  const t = new Ticks64(p.tickPs);
  t.read(nowMs);
  now.hi = t.hi;
  now.lo = t.lo;
  fresh.hi = t.freshHi;
  fresh.lo = t.freshLo;
}

