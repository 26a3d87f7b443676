// A key reclaimed at one reading and inserted again by a thread whose clock reads earlier (a
// custom clock that stepped back between the two threads' readings: Date.now() under NTP) must
// not start fresh at that earlier reading. Found by the explorer (fixed-window, deep run of
// 2026-12-06, schedule 0:1 32:1 40:2 66:4): a window's permit spent at 4,999.75 ms, the key
// reclaimed by a sweep at 5,000 ms, inserted again fresh by a thread reading 4,999.99999 ms, and a
// second admission in the first one's window. The table now keeps a reclaim floor
// (table/reclaim-floor.ts): an insert, and a thread that meets the key's new incarnation, decide
// at no earlier reading than the reclaim's.
//
// Deterministic: each instance (a thread) has its own clock, a plain variable. The times, with
// one permit a second and a burst of 1:
//   A admits k at 4,999.75 ms; B sweeps at 6,000.25 (k is idle: reclaimed);
//   C, whose clock reads 5,999.75 (behind B's), admits k: inserted again;
//   B checks k at 6,999.9. Decided at C's raw reading, C's admission would have run out by then
//   (GCRA, a log, a lease) or sit in the window before (windows), and B would be admitted: two
//   admissions where the exact order at the readings made allows one (C at its own reading is
//   refused; at the sweep's, B is).
import { describe, expect, it } from 'vitest';
import {
  ConcurrencyLimiter, perSecond, PolicyLimiter, RateLimiter, type Clock, type PolicyRule, type RateLimiterOptions,
} from '../../src/index.js';

interface Instances {
  /** Asks once for `k` on instance i (0: A, 1: B, 2: C, 3: D); true if admitted. */
  check(i: number, cost?: number): boolean;
  sweep(i: number): number;
}

interface Config {
  name: string;
  /** Makes four instances over one table, instance i reading clocks[i]. */
  make(clocks: Clock[]): Instances;
}

function rate(name: string, options: Omit<RateLimiterOptions, 'maxKeys' | 'clock'>, width?: 32 | 64 | null): Config {
  return {
    name,
    make(clocks) {
      const first = new RateLimiter({ maxKeys: 16, clock: clocks[0], ...options });
      if (width !== undefined) expect(first.width).toBe(width);
      const all = [first, ...clocks.slice(1).map((clock) => RateLimiter.attach(first.handle, { clock }))];
      return { check: (i, cost = 1) => all[i]!.allow('k', cost), sweep: (i) => all[i]!.sweep() };
    },
  };
}

function policy(name: string, rules: PolicyRule[]): Config {
  return {
    name,
    make(clocks) {
      const first = new PolicyLimiter({ rules, maxKeys: 16, clock: clocks[0] });
      const all = [first, ...clocks.slice(1).map((clock) => PolicyLimiter.attach(first.handle, { clock }))];
      return { check: (i) => all[i]!.allow({ user: 'k', api: 'api' }), sweep: (i) => all[i]!.sweep() };
    },
  };
}

function leases(): Config {
  return {
    name: 'ConcurrencyLimiter (1 place, leases of 1 s, never released)',
    make(clocks) {
      const first = new ConcurrencyLimiter({ maxInFlight: 1, leaseMs: 1_000, maxKeys: 16, clock: clocks[0] });
      const all = [first, ...clocks.slice(1).map((clock) => ConcurrencyLimiter.attach(first.handle, { clock }))];
      return { check: (i) => all[i]!.tryAcquire('k').allowed, sweep: (i) => all[i]!.sweep() };
    },
  };
}

const CONFIGS: Config[] = [
  rate('GCRA, one limit, width 32', { limit: perSecond(1) }, 32),
  rate('GCRA, one limit, width 64', { limit: perSecond(1), maxBlockMs: 2 ** 40 }, 64),
  rate('GCRA, two limits (lock-free engine)', { limit: [perSecond(1), perSecond(2)] }, null),
  rate('GCRA with a global cap', { limit: perSecond(1), globalLimit: perSecond(100) }, null),
  rate('fixed window', { limit: perSecond(1), algorithm: 'fixed-window' }, null),
  rate('sliding window', { limit: perSecond(1), algorithm: 'sliding-window' }, null),
  rate('sliding log (locked engine)', { limit: perSecond(1), algorithm: 'sliding-log' }, null),
  policy('PolicyLimiter, GCRA', [{ limit: perSecond(1) }]),
  policy('PolicyLimiter, fixed window', [{ limit: perSecond(1), algorithm: 'fixed-window' }]),
  policy('PolicyLimiter, sliding log', [{ limit: perSecond(1), algorithm: 'sliding-log' }]),
  leases(),
];

/** Four clocks, one per instance, each read from its own variable. */
function clocks(): { at: number[]; clocks: Clock[] } {
  const at = [0, 0, 0, 0];
  return { at, clocks: at.map((_, i) => ({ now: () => at[i]! })) };
}

describe('a key reclaimed, then inserted again by a thread whose clock reads earlier', () => {
  it.each(CONFIGS.map((c) => [c.name, c] as const))('%s: the insert decides at no earlier reading than the reclaim', (_name, c) => {
    const { at, clocks: cs } = clocks();
    const l = c.make(cs);
    at[0] = 4_999.75;
    expect(l.check(0)).toBe(true);
    at[1] = 6_000.25;
    expect(l.sweep(1)).toBeGreaterThanOrEqual(1); // k was idle at B's reading: reclaimed
    at[2] = 5_999.75; // C's clock: half a ms behind B's
    expect(l.check(2)).toBe(true); // a fresh key, decided at the reclaim's reading
    // C's admission counts from 6,000.25: still spent. (A sliding window weighs the window
    // before in: C's admission there refuses B until 7,000; at 7,000.5 it still weighs 0.9995.)
    at[1] = c.name === 'sliding window' ? 7_000.5 : 6_999.9;
    expect(l.check(1)).toBe(false);
    at[1] = 8_000.5;
    expect(l.check(1)).toBe(true); // and no longer: nothing is refused for good
  });

  // Two places. A spends both at 5,000.5; B sweeps at 6,000.75 and admits k once (the new
  // incarnation's entry, or lease, at 6,000.75). D, reading 6,000.25 (in the second of the new
  // incarnation's stamp, so that stamp raises nothing), finds k (not its insert) and is admitted:
  // at its own reading A's two are still held (the exact order refuses), at the sweep's they are
  // not. Its own must count from 6,000.75: at 7,000.5 both still hold, and B is refused.
  it.each([
    ['sliding log', rate('log', { limit: perSecond(2), algorithm: 'sliding-log' })],
    ['PolicyLimiter, sliding log', policy('policy log', [{ limit: perSecond(2), algorithm: 'sliding-log' }])],
    ['ConcurrencyLimiter', {
      name: 'leases',
      make(cs: Clock[]): Instances {
        const first = new ConcurrencyLimiter({ maxInFlight: 2, leaseMs: 1_000, maxKeys: 16, clock: cs[0] });
        const all = [first, ...cs.slice(1).map((clock) => ConcurrencyLimiter.attach(first.handle, { clock }))];
        return { check: (i) => all[i]!.tryAcquire('k').allowed, sweep: (i) => all[i]!.sweep() };
      },
    } satisfies Config],
  ] as const)('%s: an instance that meets the new incarnation without inserting it decides at no earlier reading either', (_name, c) => {
    const { at, clocks: cs } = clocks();
    const l = c.make(cs);
    at[0] = 5_000.5;
    expect([l.check(0), l.check(0)]).toEqual([true, true]);
    at[1] = 6_000.75;
    expect(l.sweep(1)).toBe(1);
    expect(l.check(1)).toBe(true);
    at[3] = 6_000.25;
    expect(l.check(3)).toBe(true);
    at[1] = 7_000.5;
    expect(l.check(1)).toBe(false);
    at[1] = 7_001;
    expect(l.check(1)).toBe(true);
  });

  it('on the default clock and clocks that never step back, the floor raises nothing', () => {
    // A reclaim at one reading, then checks at later readings on every instance: each is decided
    // at its own reading (a fresh key's burst in full, the next refill on time).
    const { at, clocks: cs } = clocks();
    const l = rate('gcra', { limit: perSecond(1) }).make(cs);
    at[0] = 1_000;
    expect(l.check(0)).toBe(true);
    at[1] = 2_000.5;
    expect(l.sweep(1)).toBe(1);
    at[2] = 2_000.75;
    expect(l.check(2)).toBe(true);
    at[3] = 3_000.75; // exactly one interval after C's admission: admitted
    expect(l.check(3)).toBe(true);
  });
});
