// get(key): a key's state without spending and without inserting it, on every configuration of
// RateLimiter (one GCRA limit at both widths, several, a cap, windows, the log) and on
// PolicyLimiter. Exact against what a probe (cost 0) of the same key reports.
import { describe, expect, it } from 'vitest';
import { ConcurrencyLimiter, ManualClock, perHour, perMinute, perSecond, PolicyLimiter, RateLimiter, type RateLimiterOptions } from '../../src/index.js';
import { raceUntilLost } from '../helpers/workers.js';

const CONFIGS: [string, Omit<RateLimiterOptions, 'maxKeys' | 'clock'>][] = [
  ['gcra, width 32', { limit: perSecond(10) }],
  ['gcra, width 64', { limit: { permits: 1e9, periodMs: 1, burst: 2 ** 40 } }],
  ['two gcra limits', { limit: [perSecond(10), perMinute(100)] }],
  ['gcra and a global cap', { limit: perSecond(10), globalLimit: perSecond(1000) }],
  ['fixed window', { limit: perMinute(10), algorithm: 'fixed-window' }],
  ['sliding window', { limit: perMinute(10), algorithm: 'sliding-window' }],
  ['sliding log', { limit: perMinute(10), algorithm: 'sliding-log' }],
];

describe('RateLimiter.get', () => {
  it.each(CONFIGS)('%s: null for a key never seen, and the table stays as it was', (_name, options) => {
    const clock = new ManualClock(1_000_000);
    const l = new RateLimiter({ ...options, maxKeys: 100, clock });
    expect(l.get('nobody')).toBeNull();
    expect(l.stats().liveKeys).toBe(0);
    expect(() => l.get('')).toThrow(TypeError);
    expect(() => l.get(5 as unknown as string)).toThrow(TypeError);
    expect(() => l.get('x'.repeat(5000))).toThrow(RangeError);
  });

  it.each(CONFIGS)('%s: after spending, what a probe reports; nothing spent by get', (_name, options) => {
    const clock = new ManualClock(1_000_000);
    const l = new RateLimiter({ ...options, maxKeys: 100, clock });
    for (let i = 0; i < 3; i++) expect(l.allow('k')).toBe(true);
    clock.advance(7);
    const probe = l.tryAcquire('k', 0);
    const state = l.get('k');
    expect(state).not.toBeNull();
    expect(state?.remaining).toBe(probe.remaining);
    expect(state?.resetAfterMs).toBe(probe.resetAfterMs);
    expect(state?.limits).toEqual(probe.limits);
    for (let i = 0; i < 5; i++) l.get('k');
    expect(l.tryAcquire('k', 0)).toEqual(probe);
    // Idle and swept: gone from the table, null again.
    clock.advance(3_600_000);
    expect(l.get('k')).toMatchObject({ resetAfterMs: 0 });
    expect(l.sweep()).toBe(1);
    expect(l.get('k')).toBeNull();
  });

  it('from another instance (another thread\'s view): the state the first one spent, found without its cache', () => {
    const clock = new ManualClock(0);
    const a = new RateLimiter({ limit: perHour(5), maxKeys: 10, clock });
    const b = RateLimiter.attach(a.handle, { clock, cacheSize: 0 });
    expect(b.get('k')).toBeNull();
    a.tryAcquire('k', 4);
    expect(b.get('k')).toEqual({ remaining: 1, resetAfterMs: 2_880_000 });
    expect(a.stats().liveKeys).toBe(1);
  });
});

describe('PolicyLimiter.get', () => {
  it('the pair\'s state under the rule it matches, null for a pair never seen', () => {
    const clock = new ManualClock(0);
    const p = new PolicyLimiter({ rules: [{ limit: perMinute(10) }, { user: 'acme', limit: [perSecond(5), perMinute(50)] }], maxKeys: 10, clock });
    expect(p.get({ user: 'bob', api: 'x' })).toBeNull();
    expect(p.stats().liveKeys).toBe(0);
    p.tryAcquire({ user: 'bob', api: 'x' }, 3);
    p.tryAcquire({ user: 'acme', api: 'x' }, 2);
    expect(p.get({ user: 'bob', api: 'x' })).toEqual({ remaining: 7, resetAfterMs: 18_000 });
    expect(p.get({ user: 'acme', api: 'x' })).toEqual({
      remaining: 3, resetAfterMs: 2_400, limits: [{ remaining: 3, resetAfterMs: 400 }, { remaining: 48, resetAfterMs: 2_400 }],
    });
    expect(p.get({ user: 'bob', api: 'y' })).toBeNull();
    expect(() => p.get({ user: 'bob' } as never)).toThrow(TypeError);
  });
});

describe('ConcurrencyLimiter.get', () => {
  it('free places and the last expiry, without taking a place or inserting the key', () => {
    const clock = new ManualClock(0);
    const c = new ConcurrencyLimiter({ maxInFlight: 3, leaseMs: 1_000, maxKeys: 10, clock });
    expect(c.get('k')).toBeNull();
    expect(c.stats().liveKeys).toBe(0);
    const lease = c.tryAcquire('k', 2).lease;
    clock.advance(100);
    expect(c.get('k')).toEqual({ remaining: 1, resetAfterMs: 900 });
    const probe = c.tryAcquire('k', 0);
    expect(c.get('k')).toEqual({ remaining: probe.remaining, resetAfterMs: probe.resetAfterMs });
    lease?.release();
    expect(c.get('k')).toEqual({ remaining: 3, resetAfterMs: 0 });
  });
});

describe('get on 4 racing workers', () => {
  it('spends nothing and inserts nothing: exactly the burst is admitted, every get in between', async () => {
    // A frozen clock: the key never refills, so admissions across all workers are exactly the
    // burst, however the gets interleave; a get that inserted or spent would show. Tried again
    // until the workers lost races on the key (raceUntilLost): contention happened.
    await raceUntilLost<{ admitted: number; seen: number[]; casRetries: number }>(() => {
      const burst = 200;
      const l = new RateLimiter({ limit: { permits: 1, periodMs: 3_600_000, burst }, maxKeys: 2_000, clock: new ManualClock(0) });
      return {
        workers: Array.from({ length: 4 }, (_, id) => ({ mode: 'get-race', handle: l.handle, id, key: 'k', attempts: 100 })),
        check(replies) {
          expect(replies.reduce((a, r) => a + r.admitted, 0)).toBe(burst);
          for (const r of replies) {
            expect(r.seen.includes(-2)).toBe(false); // a key only read was never found
            const states = r.seen.filter((x) => x >= 0);
            // Each worker's gets see the count fall, never rise (nothing refills, get gives nothing back).
            for (let i = 1; i < states.length; i++) expect(states[i]).toBeLessThanOrEqual(states[i - 1] as number);
          }
          expect(l.stats().liveKeys).toBe(1); // only 'k': the 400 keys only read are not in the table
          expect(l.get('k')).toEqual({ remaining: 0, resetAfterMs: burst * 3_600_000 });
        },
      };
    });
  }, 60_000);
});
