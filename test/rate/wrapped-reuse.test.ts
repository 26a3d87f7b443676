// The ctrl check after a 32-bit GCRA admission lands. Thread A has decided to admit k on a
// snapshot of its tat; just before A's compareExchange, B spends k's last place at the same
// reading, the clock moves on by exactly 2^32 ticks, B sweeps k (idle by then) and spends once
// on j, which takes k's slot and whose tat, modulo 2^32, comes back to A's snapshot. A's
// compareExchange then lands, on j. Only the ctrl read after it tells A that its admission was
// not counted on k: A must look k up again and decide at a new reading. Without that read, A's
// admission stands at the old reading, where B had already filled k's burst: three admissions
// in a burst of two. The interleaving is exact: one hook runs B inside A's compareExchange.
import { afterEach, describe, expect, it } from 'vitest';
import { perSecond, RateLimiter } from '../../src/index.js';
import { S_TAT } from '../../src/table/layout.js';
import { slotBaseOf } from '../helpers/slots.js';

const T0_MS = 5_000_100;
// perSecond(1000) runs on ticks of 10 ns (1e5 per ms): 2^32 of them later, ticksAt wraps to T0's.
const WRAP_MS = 2 ** 32 / 1e5;
const realCas = Atomics.compareExchange;

afterEach(() => {
  Atomics.compareExchange = realCas;
});

describe('an admission whose compareExchange lands on a reused slot (the tat wrapped to its snapshot)', () => {
  it('is not counted for the old key: it looks the key up again and decides at a new reading', () => {
    let t = T0_MS;
    const clock = { now: (): number => t };
    const limit = perSecond(1000, { burst: 2 });
    // One stripe for every key (forceHash): j takes the first free slot, which is k's once swept.
    const a = new RateLimiter({ limit, maxKeys: 4, forceHash: 12345, clock });
    const b = RateLimiter.attach(a.handle, { clock });
    expect(a.width).toBe(32);
    expect(a.allow('k')).toBe(true); // one of two places spent at T0
    const tatIndex = slotBaseOf(a.handle.table, 'k') + S_TAT;
    const snapshot = new Int32Array(a.handle.table)[tatIndex];

    let hooked = 0;
    Atomics.compareExchange = ((arr: Int32Array, index: number, expected: number, value: number): number => {
      if (hooked === 0 && arr.buffer === a.handle.table && index === tatIndex && expected === snapshot) {
        hooked = 1; // A's compareExchange, on its snapshot: B runs first
        expect(b.allow('k'), 'B takes the last place at T0').toBe(true);
        t = T0_MS + WRAP_MS;
        expect(b.sweep(), 'k is idle 43 s later').toBe(1);
        expect(b.allow('j'), 'j is fresh').toBe(true);
        expect(new Int32Array(a.handle.table)[tatIndex], 'j holds k\'s slot, its tat equal to A\'s snapshot').toBe(snapshot);
      }
      return realCas(arr, index, expected, value);
    }) as typeof Atomics.compareExchange;

    expect(a.allow('k')).toBe(true);
    Atomics.compareExchange = realCas;
    expect(hooked, 'the hook ran inside A\'s compareExchange').toBe(1);
    // A's compareExchange landed on j: j is charged for it (conservative) and now full.
    expect(b.allow('j'), 'j was charged by the stray compareExchange').toBe(false);
    // A's admission counts at the new reading, on k's new slot: one place of two left.
    expect(b.allow('k')).toBe(true);
    expect(b.allow('k'), 'k holds A\'s admission').toBe(false);
  });
});
