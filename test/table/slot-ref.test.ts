// A SlotRef keeps its 32-bit words and its second in int32 words (see slot-ref.ts): every
// value of their ranges comes back exactly.
import { describe, expect, it } from 'vitest';
import { secHi, secLo, SlotRef } from '../../src/table/slot-ref.js';

describe('SlotRef', () => {
  const words = [0, 1, -1, 2, 0x7fff_ffff, -0x8000_0000, 0x4000_0000, -0x4000_0001, 0x1234_5678 | 0, 0xdead_beef | 0, 65_535, 65_536, -65_536];

  it('gives back every int32 ctrl word and tat word as given', () => {
    for (const w of words) {
      const ref = new SlotRef(12, w);
      expect(ref.ctrl).toBe(w);
      expect(ref.base).toBe(12);
      ref.tat = w;
      expect(ref.tat).toBe(w);
      expect(Object.is(ref.tat, -0)).toBe(false);
    }
  });

  it('gives back every second a clock can read, of either sign', () => {
    const ref = new SlotRef(0, 2);
    const max = Math.floor(2 ** 53 / 1000);
    for (const s of [0, 1, -1, 65_535, 65_536, -65_536, -65_537, 1_764_000_000, -1_764_000_000, max, -max, 2 ** 31, -(2 ** 31) - 1]) {
      ref.sec = s;
      expect(ref.sec).toBe(s);
    }
  });

  it('knowsSec(secHi(s), secLo(s)) is secKnown && sec === s, for seconds of either sign and past 2^32', () => {
    const ref = new SlotRef(0, 2);
    const max = Math.floor(2 ** 53 / 1000);
    // Pairs that share their low or high 32 bits: only the whole second may match.
    const seconds = [0, 1, -1, 2 ** 31, -(2 ** 31), 2 ** 32, -(2 ** 32), 2 ** 32 + 1, 2 ** 33 + 1, 1 - 2 ** 32, 1_764_000_000, max, -max, max - 2 ** 32];
    for (const stored of seconds) {
      ref.sec = stored;
      for (const known of [false, true]) {
        ref.secKnown = known;
        for (const asked of seconds) {
          expect(ref.knowsSec(secHi(asked), secLo(asked)), `stored ${stored}, asked ${asked}, known ${known}`).toBe(known && stored === asked);
        }
      }
    }
  });
});
