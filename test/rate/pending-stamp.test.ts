// A key's stamp (lastSec) is raised before its TAT is written, so that no reader ever pairs a new
// TAT with an old stamp. Between the two (or for good, if the thread stops there), a key idle for
// 2^31 ticks or more has an old TAT under a recent stamp, and its 32-bit difference wraps to what
// looks like up to 2^31 ticks of debt. No decision ever leaves a TAT that far ahead of a reading
// in its stamp's second (the horizon plus one second): such a difference is an old TAT, and the
// key owes nothing. Found by the explorer's deep run of key-controls (schedule 18:4 21:1 33:3):
// block('k', 700) threw RangeError ("longer than this limiter's key state holds"), and a check
// refused for 21 s. The interleaving here is exact: one hook runs B inside A's compareExchange,
// after A raised the stamp.
import { afterEach, describe, expect, it } from 'vitest';
import { perSecond, RateLimiter } from '../../src/index.js';
import { S_TAT } from '../../src/table/layout.js';
import { slotBaseOf } from '../helpers/slots.js';

const T0_MS = 5_000_100;
// perSecond(1000) runs on ticks of 10 ns: 2^31 of them are 21,474.8 ms.
const PAST_WRAP_MS = 21_500;
const realCas = Atomics.compareExchange;

afterEach(() => {
  Atomics.compareExchange = realCas;
});

function setup() {
  let t = T0_MS;
  const clock = { now: (): number => t };
  const a = new RateLimiter({ limit: perSecond(1000, { burst: 2 }), maxKeys: 4, clock });
  const b = RateLimiter.attach(a.handle, { clock });
  expect(a.width).toBe(32);
  return { a, b, set: (ms: number) => { t = ms; } };
}

/** Runs `during` once, inside A's compareExchange of k's TAT (A has raised k's stamp by then). */
function insideCommit(table: SharedArrayBuffer, during: () => void): () => number {
  const tatIndex = slotBaseOf(table, 'k') + S_TAT;
  let hooked = 0;
  Atomics.compareExchange = ((arr: Int32Array, index: number, expected: number, value: number): number => {
    if (hooked === 0 && arr.buffer === table && index === tatIndex) {
      hooked = 1;
      during();
    }
    return realCas(arr, index, expected, value);
  }) as typeof Atomics.compareExchange;
  return () => hooked;
}

describe('an old TAT under a stamp a pending decision raised (width 32)', () => {
  it('reads as owing nothing: a check passes and get reports the whole burst', () => {
    const s = setup();
    expect(s.a.allow('k')).toBe(true);
    expect(s.a.allow('k')).toBe(true); // k owes its burst at T0
    s.set(T0_MS + PAST_WRAP_MS); // idle for 2^31 ticks and more: fresh
    const hooked = insideCommit(s.a.handle.table, () => {
      expect(s.b.get('k')?.remaining, 'B sees the stamp A raised and the old TAT').toBe(2);
      expect(s.b.allow('k')).toBe(true);
    });
    expect(s.a.allow('k')).toBe(true); // A lost its compareExchange to B and decided again
    expect(hooked()).toBe(1);
    expect(s.b.allow('k')).toBe(false); // the burst of 2 is spent, by A and B
  });

  it('a block of 700 ms is written, not refused as past the horizon', () => {
    const s = setup();
    expect(s.a.allow('k')).toBe(true);
    s.set(T0_MS + PAST_WRAP_MS);
    insideCommit(s.a.handle.table, () => {
      expect(s.b.block('k', 700).remaining).toBe(0);
    });
    expect(s.a.allow('k')).toBe(false); // A decided again, on the block
    const left = s.b.tryAcquire('k');
    expect(left.allowed).toBe(false);
    expect(left.retryAfterMs).toBeGreaterThan(699);
    expect(left.retryAfterMs).toBeLessThanOrEqual(700.01);
  });
});

describe('a block on a key that owes more than the horizon after a clock step back (width 32)', () => {
  it('does not throw: the key is refused longer already, and stays so (one tick less, so that its word changes)', () => {
    const s = setup();
    s.set(5_000_999); // the end of second 5000
    s.a.block('k', 10_000); // near the horizon (10,737 ms at ticks of 10 ns)
    s.set(5_000_000.5); // the clock steps back 998.5 ms, within the stamp's second
    // B's reading is its first: the key owes 10,999.5 ms past it, beyond the horizon.
    const left = s.b.block('k', 700);
    expect(left.remaining).toBe(0);
    const r = s.b.tryAcquire('k');
    expect(r.allowed).toBe(false);
    expect(r.retryAfterMs).toBeGreaterThan(10_998);
  });
});
