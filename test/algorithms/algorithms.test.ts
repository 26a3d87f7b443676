import { describe, expect, it } from 'vitest';
import { ManualClock, perMinute, perSecond, RateLimiter, type Limit } from '../../src/index.js';
import type { AlgorithmName } from '../../src/algorithms/index.js';
import { fixedWindowAlgorithm } from '../../src/algorithms/fixed-window.js';
import { slidingWindowAlgorithm } from '../../src/algorithms/sliding-window.js';

/** 100 per minute; a client tries every 10 ms for 5 minutes, starting halfway through a minute. */
function attack(algorithm: AlgorithmName): [number, number] {
  const clock = new ManualClock(30_000);
  const limiter = new RateLimiter({ limit: perMinute(100), algorithm, maxKeys: 4, clock });
  const times: number[] = [];
  for (let t = 30_000; t < 330_000; t += 10) {
    clock.set(t);
    if (limiter.allow('client')) times.push(t);
  }
  let most = 0;
  for (let i = 0, j = 0; i < times.length; i++) {
    while ((times[i] as number) - (times[j] as number) >= 60_000) j++;
    most = Math.max(most, i - j + 1);
  }
  return [times.length, most];
}

describe('the four algorithms against the same client', () => {
  it.each([
    ['fixed-window', 600, 200],
    ['sliding-log', 500, 100],
    ['sliding-window', 546, 149],
    ['gcra', 599, 199],
  ] as const)('%s allows %i in 5 minutes and at most %i in any 60 s', (algorithm, total, most) => {
    expect(attack(algorithm)).toEqual([total, most]);
  });
});

describe('several limits at once', () => {
  it('allows 59 as one combined limit where two chained limiters allow 53', () => {
    const clock = new ManualClock();
    const combined = new RateLimiter({ limit: [perSecond(5), perMinute(20)], maxKeys: 4, clock });
    const perMin = new RateLimiter({ limit: perMinute(20), maxKeys: 4, clock });
    const perSec = new RateLimiter({ limit: perSecond(5), maxKeys: 4, clock });
    const both = [0, 0, 0, 0, 0, 0];
    const chained = [0, 0, 0, 0, 0, 0];
    let bothTotal = 0;
    let chainedTotal = 0;
    for (let t = 0; t < 120_000; t += 100) { // 10 requests a second for 2 minutes
      clock.set(t);
      const second = Math.floor(t / 1000);
      if (combined.allow('k')) { bothTotal++; if (second < 6) both[second] = (both[second] ?? 0) + 1; }
      // Chained: the per-minute limiter spends before the per-second one refuses.
      if (perMin.allow('k') && perSec.allow('k')) { chainedTotal++; if (second < 6) chained[second] = (chained[second] ?? 0) + 1; }
    }
    expect(bothTotal).toBe(59);
    expect(both).toEqual([9, 5, 5, 2, 0, 0]);
    expect(chainedTotal).toBe(53);
    expect(chained).toEqual([9, 5, 0, 1, 0, 0]); // ran dry in the third second
  });

  it('spends nothing from any limit when one of them refuses, and reports the longest wait', () => {
    const clock = new ManualClock();
    const limiter = new RateLimiter({ limit: [perSecond(5), perMinute(6)], maxKeys: 4, clock });
    expect(limiter.tryAcquire('k', 5)).toMatchObject({ allowed: true, remaining: 0 });
    const d = limiter.tryAcquire('k', 1);
    // Per second is the binding one; remaining and reset are the unspent state (not 6 s later).
    expect(d).toMatchObject({ allowed: false, reason: 'limited', retryAfterMs: 200, remaining: 0, resetAfterMs: 50_000 });
    clock.advance(1000);
    expect(limiter.tryAcquire('k', 0).remaining).toBe(1); // per minute: 6 - 5 = 1 left
    expect(limiter.tryAcquire('k', 2)).toMatchObject({ allowed: false, retryAfterMs: 10_000 - 1000 });
    expect(limiter.tryAcquire('k', 1)).toMatchObject({ allowed: true, remaining: 0 }); // the refusal spent nothing
    expect(limiter.tryAcquire('k', 7)).toMatchObject({ allowed: false, reason: 'exceeds-burst', retryAfterMs: Infinity });
  });
});

describe('a global cap', () => {
  it('is checked after the key limit, and a refusal by it spends nothing from the key', () => {
    const clock = new ManualClock();
    const limiter = new RateLimiter({ limit: perSecond(3), globalLimit: perSecond(4), maxKeys: 8, clock });
    expect(limiter.tryAcquire('a', 3)).toMatchObject({ allowed: true, remaining: 0 });
    expect(limiter.tryAcquire('b', 2)).toMatchObject({ allowed: false, reason: 'global-limit', retryAfterMs: 250, remaining: 1, resetAfterMs: 0 });
    expect(limiter.tryAcquire('b', 0).remaining).toBe(1); // b: 3 of its own, but 1 left globally
    expect(limiter.tryAcquire('b', 1)).toMatchObject({ allowed: true, remaining: 0 });
    clock.advance(1000);
    expect(limiter.tryAcquire('b', 3)).toMatchObject({ allowed: true }); // b's own 3 were all still there
    expect(limiter.tryAcquire('a', 1)).toMatchObject({ allowed: true, reason: 'allowed', remaining: 0 });
    expect(limiter.tryAcquire('c', 1)).toMatchObject({ allowed: false, reason: 'global-limit' });
  });
});

interface Row { atMs: number; cost?: number; allowed: boolean; remaining?: number; retryAfterMs?: number; resetAfterMs?: number }

function play(algorithm: AlgorithmName, limit: Limit, rows: Row[]): void {
  const clock = new ManualClock();
  const limiter = new RateLimiter({ limit, algorithm, maxKeys: 4, clock });
  rows.forEach((row, i) => {
    clock.set(row.atMs);
    const { reason, ...d } = limiter.tryAcquire('k', row.cost ?? 1);
    void reason;
    const { atMs, cost, ...expected } = row;
    void atMs; void cost;
    expect({ row: i, ...d }).toMatchObject({ row: i, ...expected });
  });
}

describe('fixed window', () => {
  it('counts per window aligned to multiples of periodMs from time 0', () => {
    play('fixed-window', perSecond(3), [
      { atMs: 0, allowed: true, remaining: 2, resetAfterMs: 1000 },
      { atMs: 400, cost: 2, allowed: true, remaining: 0, resetAfterMs: 600 },
      { atMs: 999, allowed: false, remaining: 0, retryAfterMs: 1, resetAfterMs: 1 },
      { atMs: 1000, cost: 3, allowed: true, remaining: 0 },
      { atMs: 1500, cost: 0, allowed: true, remaining: 0 },
      { atMs: 1500, cost: 4, allowed: false, retryAfterMs: Infinity },
      { atMs: 5000, cost: 0, allowed: true, remaining: 3, resetAfterMs: 0 },
    ]);
  });
  it('rejects fractional permits, naming the limit', () => {
    expect(() => new RateLimiter({ limit: { permits: 2.5, periodMs: 1000 }, algorithm: 'fixed-window', maxKeys: 1 })).toThrow(/options\.limit\.permits must be an integer/);
  });
});

describe('sliding window', () => {
  it('weights the previous window by how much of it still overlaps', () => {
    play('sliding-window', perSecond(10), [
      { atMs: 500, cost: 10, allowed: true, remaining: 0 },
      // 1,250 ms: previous 10 weighted by 0.75 = 7.5 -> 2 left
      { atMs: 1250, cost: 2, allowed: true, remaining: 0 },
      { atMs: 1250, allowed: false, retryAfterMs: 50 }, // at 1,300: 10 * 0.7 + 2 = 9
      { atMs: 1300, allowed: true },
      { atMs: 2900, cost: 0, allowed: true, remaining: 9 }, // previous 3 weighted by 0.1
      { atMs: 9000, cost: 0, allowed: true, remaining: 10, resetAfterMs: 0 },
    ]);
  });
});

describe('sliding log', () => {
  it('is exact: never more than permits in any period, and the wait is exact', () => {
    play('sliding-log', perSecond(3), [
      { atMs: 0, allowed: true, remaining: 2, resetAfterMs: 1000 },
      { atMs: 300, allowed: true, remaining: 1 },
      { atMs: 600, allowed: true, remaining: 0 },
      { atMs: 999, allowed: false, retryAfterMs: 1, resetAfterMs: 601 },
      { atMs: 999, cost: 2, allowed: false, retryAfterMs: 301 },
      { atMs: 1000, allowed: true, remaining: 0 },
      { atMs: 1300, cost: 2, allowed: false, retryAfterMs: 300 },
      { atMs: 1600, cost: 2, allowed: true, remaining: 0 },
      { atMs: 1600, cost: 4, allowed: false, retryAfterMs: Infinity },
    ]);
  });
  it('bounds its state: permits above maxLogSize are refused, naming both', () => {
    expect(() => new RateLimiter({ limit: perMinute(2000), algorithm: 'sliding-log', maxKeys: 1 })).toThrow(/options\.limit\.permits must be at most 1000 \(the maxLogSize option/);
    const big = new RateLimiter({ limit: perMinute(2000), algorithm: 'sliding-log', maxKeys: 1, maxLogSize: 2000 });
    expect(big.stats().tableBytes).toBeGreaterThan(2 * 2000 * 4);
  });
});

describe('locked keys and reclaim', () => {
  it.each(['fixed-window', 'sliding-window', 'sliding-log', 'gcra'] as const)('%s: sweep() reclaims idle keys only, losing no quota', (algorithm) => {
    const clock = new ManualClock();
    const limiter = new RateLimiter({ limit: [perSecond(2), perMinute(100)], algorithm, maxKeys: 8, clock });
    limiter.allow('a');
    clock.advance(500);
    expect(limiter.sweep()).toBe(0); // 'a' still holds quota in both limits
    clock.advance(120_000);
    expect(limiter.sweep()).toBe(1);
    expect(limiter.tryAcquire('a', 2)).toMatchObject({ allowed: true, remaining: 0 });
    expect(limiter.stats()).toMatchObject({ liveKeys: 1 });
  });
});

describe('configuration errors', () => {
  it('names the option and the value', () => {
    const base = { maxKeys: 4 };
    expect(() => new RateLimiter({ ...base, limit: perSecond(1), algorithm: 'leaky' as never })).toThrow(/options\.algorithm must be one of 'gcra', 'fixed-window', 'sliding-window', 'sliding-log', got "leaky"/);
    expect(() => new RateLimiter({ ...base, limit: [] })).toThrow(/options\.limit must hold 1 to 8 limits, got 0/);
    expect(() => new RateLimiter({ ...base, limit: [perSecond(1), { permits: 0, periodMs: 1 }] })).toThrow(/options\.limit\[1\]\.permits must be a positive finite number, got 0/);
    expect(() => new RateLimiter({ ...base, limit: perSecond(1), globalLimit: { permits: 1, periodMs: -1 } })).toThrow(/options\.globalLimit\.periodMs/);
  });
  it('carries algorithm, limits and global cap to attached instances', () => {
    const limiter = new RateLimiter({ limit: [perSecond(5), perMinute(20)], algorithm: 'sliding-log', globalLimit: perSecond(50), maxKeys: 4 });
    const other = RateLimiter.attach(limiter.handle);
    expect(other.algorithm).toBe('sliding-log');
    expect(other.limits).toEqual(limiter.limits);
    expect(other.globalLimit).toEqual({ permits: 50, periodMs: 1000, burst: 50 });
  });
});

describe('a clock reading older than the stored window', () => {
  it.each([
    ['fixed-window', fixedWindowAlgorithm],
    ['sliding-window', slidingWindowAlgorithm],
  ] as const)('%s counts it in the stored window instead of moving the window back', (_name, make) => {
    const a = make(perSecond(3), 'limit');
    const w = new Int32Array(new SharedArrayBuffer(64));
    const v = { allowed: false, remaining: 0, waitMs: 0, resetMs: 0, latestMs: Infinity, detail: true };
    a.init(w, 0, { ms: 1000, sec: 1 });
    a.load(w, 0);
    a.check({ ms: 1000, sec: 1 }, false, 3, v);
    expect(v.allowed).toBe(true);
    expect(a.commit(w, 0, { ms: 1000, sec: 1 })).toBe(true); // window 1 is full
    // A thread that read the clock at 999 ms (window 0) decides after it:
    a.load(w, 0);
    a.check({ ms: 999, sec: 0 }, false, 1, v);
    expect(v.allowed).toBe(false);
    a.check({ ms: 1999, sec: 1 }, false, 1, v);
    expect(v.allowed).toBe(false);
    a.check({ ms: 2000, sec: 2 }, false, 1, v);
    expect(v.allowed).toBe(_name === 'fixed-window'); // the sliding window still weighs window 1
  });
});
