// ConcurrencyLimiter.reset: under the key's lock, the key's floor word is raised to the latest
// stamp held, so every lease taken before it reads as expired at once, and every lease taken after
// it stamps above the floor: a place's stamps only ever grow, and the release of a lease taken
// before a reset (a compareExchange from its own stamp) never frees the place of one taken after
// it, even in the same tick of the clock. Exact on a ManualClock; raced on workers; the explorer
// runs lease-reset.
import { describe, expect, it } from 'vitest';
import { ConcurrencyLimiter } from '../../src/concurrency/concurrency-limiter.js';
import { ManualClock } from '../../src/index.js';
import { openGate, result, spawn } from '../helpers/workers.js';

function fresh(maxInFlight = 2, leaseMs = 1_000) {
  const clock = new ManualClock(1_000);
  return { clock, cl: new ConcurrencyLimiter({ maxInFlight, leaseMs, maxKeys: 8, clock }) };
}

describe('ConcurrencyLimiter.reset', () => {
  it('frees every place at once: true if any was held; new leases pass; the key reads as fresh', () => {
    const { cl } = fresh();
    expect(cl.tryAcquire('k').allowed).toBe(true);
    expect(cl.tryAcquire('k').allowed).toBe(true);
    expect(cl.tryAcquire('k').allowed).toBe(false);
    expect(cl.reset('k')).toBe(true);
    expect(cl.get('k')).toEqual({ remaining: 2, resetAfterMs: 0 });
    expect(cl.stats().placesHeld).toBe(0);
    expect(cl.tryAcquire('k').allowed).toBe(true);
    expect(cl.tryAcquire('k').allowed).toBe(true);
    expect(cl.tryAcquire('k').allowed).toBe(false);
  });

  it('false for a key holding nothing, and a key the table does not hold is not inserted', () => {
    const { clock, cl } = fresh();
    expect(cl.reset('nobody')).toBe(false);
    expect(cl.stats().liveKeys).toBe(0);
    cl.tryAcquire('k');
    clock.advance(1_000); // the lease expired
    expect(cl.reset('k')).toBe(false);
    expect(() => cl.reset('')).toThrow(TypeError);
  });

  it('the release of a lease taken before a reset does not free a lease taken after it, in the same tick', () => {
    // Without the floor, the lease taken after the reset got the same stamp (the same tick, the
    // same lease length) and the old lease's release freed it: a second lease then passed.
    const { cl } = fresh(1);
    const before = cl.tryAcquire('k').lease;
    expect(cl.reset('k')).toBe(true);
    const after = cl.tryAcquire('k').lease;
    expect(after).not.toBeNull();
    before?.release();
    expect(cl.tryAcquire('k').allowed, 'a second lease while the one taken after the reset holds').toBe(false);
    // Twice in one tick: each lease stamps above the latest floor.
    expect(cl.reset('k')).toBe(true);
    const third = cl.tryAcquire('k').lease;
    expect(third).not.toBeNull();
    after?.release();
    expect(cl.tryAcquire('k').allowed).toBe(false);
    expect(third?.release()).toBe(true);
    expect(cl.tryAcquire('k').allowed).toBe(true);
  });

  it('a lease taken after a reset lasts its lease (one tick more at most), and once the floor has passed, stamps are as before', () => {
    const { clock, cl } = fresh(1, 500);
    cl.tryAcquire('k');
    cl.reset('k');
    const d = cl.tryAcquire('k');
    expect(d.lease?.expiresAtMs).toBeGreaterThanOrEqual(clock.now() + 500);
    expect(d.lease?.expiresAtMs).toBeLessThanOrEqual(clock.now() + 500.001);
    clock.advance(500.001);
    const next = cl.tryAcquire('k');
    expect(next.lease?.expiresAtMs).toBe(clock.now() + 500);
  });

  it('a key reset is reclaimed by sweep only once the leases taken before the reset have expired', () => {
    const { clock, cl } = fresh(1, 1_000);
    cl.tryAcquire('k');
    cl.reset('k');
    expect(cl.sweep()).toBe(0); // its old stamp is still ahead: a late release must not meet the slot's next key
    clock.advance(1_000);
    expect(cl.sweep()).toBe(1);
  });

  it('a floor left long ago does not free a lease once the stamps wrap around', () => {
    const { clock, cl } = fresh(1, 1_000);
    cl.tryAcquire('k');
    cl.reset('k');
    clock.advance(2 ** 32 / 1_000 - 500); // the floor would read as ahead again
    expect(cl.tryAcquire('k').allowed).toBe(true);
    expect(cl.tryAcquire('k').allowed).toBe(false);
  });

  it('3 workers acquire and release while a fourth resets: resets land among held leases, and at the end every place is free', async () => {
    let found = 0;
    for (let round = 0; round < 10 && found === 0; round++) {
      const cl = new ConcurrencyLimiter({ maxInFlight: 2, leaseMs: 60_000, maxKeys: 8 });
      const gate = new SharedArrayBuffer(8);
      const spec = (resets: number, id: number) => ({ mode: 'lease-reset-race', handle: cl.handle, id, key: 'k', attempts: 3_000, resets, gap: 3_000, hold: 2_000, gate });
      const workers = [0, 0, 0, 300].map((resets, id) => spawn(spec(resets, id)));
      try {
        const replies = workers.map((w) => result<{ admitted: number; found: number }>(w));
        await openGate(gate, workers.length);
        const r = await Promise.all(replies);
        found += (r[3] as { found: number }).found;
        expect(r.slice(0, 3).reduce((n, x) => n + x.admitted, 0)).toBeGreaterThan(0);
        expect(cl.get('k')?.remaining ?? 2, 'a place left held after every lease was released').toBe(2);
        expect(cl.stats().placesHeld).toBe(0);
      } finally {
        await Promise.all(workers.map((w) => w.terminate()));
      }
    }
    expect(found, 'no reset ever found a place held').toBeGreaterThan(0);
  }, 60_000);
});
