// Exact interleavings inside an admission that starts from the thread's own write (Gcra32.decide,
// docs/design.md section 2, "A thread's own write"). Each compares with a single limiter given the
// same calls in their linearisation order, or checks the GCRA bound.
import { describe, expect, it } from 'vitest';
import { perSecond, RateLimiter, type Decision } from '../../src/index.js';
import { S_TAT } from '../../src/table/layout.js';
import { withAtomicsHooks } from '../helpers/atomics-spy.js';
import { slotBaseOf } from '../helpers/slots.js';

/** Runs `during` once, inside the first Atomics `kind` on `key`'s tat word made by `f`; counts tat loads. */
function inside(limiter: RateLimiter, key: string, kind: 'load' | 'cas', during: () => void, f: () => unknown): { result: unknown; ran: boolean; loads: number } {
  const at = slotBaseOf(limiter.handle.table, key) + S_TAT;
  let ran = false;
  let busy = false;
  let loads = 0;
  const hook = (arr: Int32Array, i: number, k: 'load' | 'cas'): void => {
    if (busy || arr.buffer !== limiter.handle.table || i !== at) return;
    if (k === 'load') loads++;
    if (ran || k !== kind) return;
    ran = true;
    busy = true;
    try {
      during();
    } finally {
      busy = false;
    }
  };
  const result = withAtomicsHooks({ load: (arr, i) => hook(arr, i, 'load'), cas: (arr, i) => hook(arr, i, 'cas') }, f);
  return { result, ran, loads };
}

/**
 * After `t0`, a wrap of 10 ns ticks later: k (admitted once at t0, in `base`) is idle and swept,
 * and j takes its slot with one admission, whose TAT is k's write plus 2^32 ticks: the same int32.
 */
function reuseByJ(b: RateLimiter, set: (ms: number) => void, t0: number, base: number): void {
  set(t0 + 2 ** 32 / 1e5);
  expect(b.sweep()).toBe(1);
  expect(b.allow('j')).toBe(true);
  expect(slotBaseOf(b.handle.table, 'j')).toBe(base);
}

function setup(limit = perSecond(1000, { burst: 3 }), startMs = 5_000_100.25) {
  let t = startMs;
  const clock = { now: (): number => t };
  const a = new RateLimiter({ limit, maxKeys: 4, forceHash: 4242, clock });
  const b = RateLimiter.attach(a.handle, { clock });
  const model = new RateLimiter({ limit, maxKeys: 4, forceHash: 4242, clock });
  return { a, b, model, set: (ms: number) => (t = ms), now: () => t };
}

describe('own-path interleavings', () => {
  it('a reservation and its cancel inside the own CAS (the word comes back to the snapshot): lands, as a sequential limiter', () => {
    const { a, b, model } = setup();
    expect(a.tryAcquire('k')).toEqual(model.tryAcquire('k'));
    const r = inside(a, 'k', 'cas', () => {
      // Beyond the burst (1 + 3 of 3), so the reservation waits and its cancel gives all of it back.
      const g = b.reserve('k', { cost: 3, maxWaitMs: 1_000 });
      const m = model.reserve('k', { cost: 3, maxWaitMs: 1_000 });
      expect(g.delayMs).toBeGreaterThan(0);
      expect(g.delayMs).toBe(m.delayMs);
      expect(g.cancel()).toBe(true);
      expect(m.cancel()).toBe(true);
    }, () => a.tryAcquire('k'));
    expect(r.ran).toBe(true);
    expect(r.loads).toBe(0); // the own path: no load of tat
    expect(r.result).toEqual(model.tryAcquire('k'));
    expect(a.tryAcquire('k')).toEqual(model.tryAcquire('k'));
    expect(b.tryAcquire('k')).toEqual(model.tryAcquire('k'));
  });

  it('a reservation inside the validation load of an own-path refusal: decided again on the word', () => {
    const { a, b, model } = setup();
    for (let i = 0; i < 3; i++) expect(a.tryAcquire('k')).toEqual(model.tryAcquire('k'));
    const r = inside(a, 'k', 'load', () => {
      expect(b.reserve('k', { maxWaitMs: 1_000 }).delayMs).toBe(model.reserve('k', { maxWaitMs: 1_000 }).delayMs);
    }, () => a.tryAcquire('k', 2));
    expect(r.ran).toBe(true);
    expect(r.result).toEqual(model.tryAcquire('k', 2));
    expect((r.result as Decision).retryAfterMs).toBeCloseTo(3, 6);
  });

  it('k swept and inserted again in the same slot inside the own CAS: the CAS fails, k is found again', () => {
    const { a, b, model, set, now } = setup(perSecond(1000, { burst: 2 }));
    expect(a.tryAcquire('k')).toEqual(model.tryAcquire('k'));
    const base = slotBaseOf(a.handle.table, 'k');
    set(now() + 5); // same second; k idle (its TAT is 1 ms ahead of the first reading)
    const r = inside(a, 'k', 'cas', () => {
      expect(b.sweep()).toBe(model.sweep());
      expect(b.tryAcquire('k')).toEqual(model.tryAcquire('k'));
      expect(slotBaseOf(a.handle.table, 'k')).toBe(base); // the same slot, a new generation
    }, () => a.tryAcquire('k'));
    expect(r.ran).toBe(true);
    expect(r.result).toEqual(model.tryAcquire('k'));
    expect(b.tryAcquire('k')).toEqual(model.tryAcquire('k'));
    expect(a.tryAcquire('k')).toEqual(model.tryAcquire('k'));
  });

  it('a stall of exactly 2^32 ticks inside the own CAS while another thread brings k\'s word back to the snapshot: burst still holds', () => {
    const WRAP_MS = 2 ** 32 / 1e5; // 10 ns ticks
    const { a, b, set, now } = setup(perSecond(1000, { burst: 2 }));
    expect(a.allow('k')).toBe(true);
    let inner = 0;
    const r = inside(a, 'k', 'cas', () => {
      set(now() + WRAP_MS);
      if (b.allow('k')) inner++; // stale by lastSec: fresh; its TAT, mod 2^32, equals a's write
    }, () => a.allow('k'));
    expect(r.ran).toBe(true);
    const after = [b.allow('k'), a.allow('k'), b.allow('k')].filter(Boolean).length;
    // At the new instant: b's admission, a's (landed, counted) and nothing more than the burst of 2.
    expect({ inner, outer: r.result, after }).toEqual({ inner: 1, outer: true, after: 0 });
  });

  it('a stall of 2^32 ticks + 0.5 ms inside the own CAS: burst still holds', () => {
    const WRAP_MS = 2 ** 32 / 1e5;
    const { a, b, set, now } = setup(perSecond(1000, { burst: 2 }));
    const t0 = now();
    expect(a.allow('k')).toBe(true); // TAT t0 + 1 ms
    let inner = 0;
    const r = inside(a, 'k', 'cas', () => {
      set(t0 + WRAP_MS - 0.5);
      if (b.allow('k')) inner++; // fresh: TAT = t0 + WRAP + 0.5 ms
      set(t0 + WRAP_MS + 0.5);
    }, () => a.allow('k'));
    expect(r.ran).toBe(true);
    let after = 0;
    for (let i = 0; i < 5; i++) if ((i % 2 ? a : b).allow('k')) after++;
    expect(inner + (r.result ? 1 : 0) + after).toBeLessThanOrEqual(3); // burst 2 + one refilled over 1 ms
  });

  it('k\'s slot reused by j inside the load that confirms an own-path refusal, j\'s word equal to k\'s write: k is decided on its own state', () => {
    const { a, b, set, now } = setup(perSecond(1000, { burst: 1 }));
    const t0 = now();
    expect(a.allow('k')).toBe(true); // a's write: t0 + 1 ms, the whole burst
    const base = slotBaseOf(a.handle.table, 'k');
    // After a's reading, j takes k's slot with a word equal to a's write.
    const r = inside(a, 'k', 'load', () => reuseByJ(b, set, t0, base), () => a.tryAcquire('k'));
    expect(r.ran).toBe(true);
    // The load found a's own value, but in j's slot: a finds k again (fresh) instead of refusing
    // k on j's state.
    expect((r.result as Decision).allowed).toBe(true);
    expect(b.allow('j')).toBe(false); // j: its one admission only
  });

  it('k\'s slot reused by j inside the own CAS, j\'s word equal to k\'s write: the CAS lands on j, k is found again and spent once', () => {
    const { a, b, set, now } = setup(perSecond(1000, { burst: 1 }));
    const t0 = now();
    expect(a.allow('k')).toBe(true); // a's write: t0 + 1 ms, the whole burst
    const base = slotBaseOf(a.handle.table, 'k');
    set(t0 + 1); // the same second, the burst refilled: a admits from its own write
    // Before a's CAS lands, j takes k's slot with a word equal to a's write: the CAS lands on j.
    const r = inside(a, 'k', 'cas', () => reuseByJ(b, set, t0, base), () => a.allow('k'));
    expect(r.ran).toBe(true);
    expect(r.result).toBe(true);
    expect(slotBaseOf(a.handle.table, 'k')).not.toBe(base); // k found again, in a slot of its own
    // k was counted where it lives now: with a burst of 1, nothing more passes at this instant.
    expect([a.allow('k'), b.allow('k'), b.allow('j')]).toEqual([false, false, false]);
  });

  it('own path over negative second boundaries matches a single limiter', () => {
    const { a, b, model, set } = setup(perSecond(1000, { burst: 3 }), -2_000.5);
    const steps = [-2_000.5, -2_000.25, -1_000.000001, -1_000, -999.9999999, -999.5, -0.0001, 0, 0.5, 999.9999999, 1000];
    for (const ms of steps) {
      set(ms);
      for (const l of [a, a, b, a]) expect(l.tryAcquire('k'), `${ms}`).toEqual(model.tryAcquire('k'));
    }
  });
});
