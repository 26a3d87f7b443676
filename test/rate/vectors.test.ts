import { describe, expect, it } from 'vitest';
import { ManualClock, perHour, perMinute, perSecond, RateLimiter, type Limit } from '../../src/index.js';

/** One row: advance the clock to `atMs`, send `cost`, expect this decision. */
interface Row {
  atMs: number;
  cost?: number;
  key?: string;
  allowed: boolean;
  remaining?: number;
  retryAfterMs?: number;
  resetAfterMs?: number;
}

function play(limit: Limit, rows: Row[], startMs = 0): void {
  const clock = new ManualClock(startMs);
  const limiter = new RateLimiter({ limit, maxKeys: 16, clock });
  rows.forEach((row, i) => {
    clock.set(row.atMs);
    const d = limiter.tryAcquire(row.key ?? 'k', row.cost ?? 1);
    const expected: Partial<typeof d> = { allowed: row.allowed };
    if (row.remaining !== undefined) expected.remaining = row.remaining;
    if (row.retryAfterMs !== undefined) expected.retryAfterMs = row.retryAfterMs;
    if (row.resetAfterMs !== undefined) expected.resetAfterMs = row.resetAfterMs;
    expect({ row: i, ...d }).toMatchObject({ row: i, ...expected });
  });
}

describe('tryAcquire() vectors on a ManualClock', () => {
  it('passes five of seven requests at one instant against 5 per second, then one more 200 ms later', () => {
    play(perSecond(5), [
      { atMs: 0, allowed: true, remaining: 4, retryAfterMs: 0, resetAfterMs: 200 },
      { atMs: 0, allowed: true, remaining: 3, resetAfterMs: 400 },
      { atMs: 0, allowed: true, remaining: 2, resetAfterMs: 600 },
      { atMs: 0, allowed: true, remaining: 1, resetAfterMs: 800 },
      { atMs: 0, allowed: true, remaining: 0, resetAfterMs: 1000 },
      { atMs: 0, allowed: false, remaining: 0, retryAfterMs: 200, resetAfterMs: 1000 },
      { atMs: 0, allowed: false, remaining: 0, retryAfterMs: 200, resetAfterMs: 1000 },
      { atMs: 200, allowed: true, remaining: 0, retryAfterMs: 0, resetAfterMs: 1000 },
    ]);
  });

  it('passes 5 of 5 + 5 requests sent at 900 ms and 1,000 ms (a fixed window would pass 10)', () => {
    const rows: Row[] = [];
    for (let i = 0; i < 5; i++) rows.push({ atMs: 900, allowed: true, remaining: 4 - i });
    rows.push({ atMs: 1000, allowed: false, retryAfterMs: 100, resetAfterMs: 900 });
    for (let i = 0; i < 4; i++) rows.push({ atMs: 1000, allowed: false });
    play(perSecond(5), rows);
  });

  it('charges cost in emission intervals and refuses what does not fit, spending nothing', () => {
    play(perSecond(10), [
      { atMs: 0, cost: 4, allowed: true, remaining: 6, resetAfterMs: 400 },
      { atMs: 0, cost: 7, allowed: false, remaining: 6, retryAfterMs: 100, resetAfterMs: 400 },
      { atMs: 0, cost: 6, allowed: true, remaining: 0, resetAfterMs: 1000 },
      { atMs: 250, cost: 2, allowed: true, remaining: 0, resetAfterMs: 950 },
      { atMs: 250, cost: 3, allowed: false, retryAfterMs: 250 },
    ]);
  });

  it('answers a cost-0 probe without consuming anything', () => {
    play(perSecond(5), [
      { atMs: 0, cost: 0, allowed: true, remaining: 5, resetAfterMs: 0 },
      { atMs: 0, cost: 0, allowed: true, remaining: 5 },
      { atMs: 0, cost: 5, allowed: true, remaining: 0 },
      { atMs: 0, cost: 0, allowed: true, remaining: 0, resetAfterMs: 1000 },
      { atMs: 600, cost: 0, allowed: true, remaining: 3, resetAfterMs: 400 },
    ]);
  });

  it('refuses cost > burst with retryAfterMs Infinity and spends nothing', () => {
    play(perMinute(100, { burst: 10 }), [
      { atMs: 0, cost: 11, allowed: false, remaining: 10, retryAfterMs: Infinity, resetAfterMs: 0 },
      { atMs: 0, cost: 10, allowed: true, remaining: 0, resetAfterMs: 6000 },
      { atMs: 0, cost: 11, allowed: false, retryAfterMs: Infinity },
    ]);
  });

  it('uses burst as the capacity and permits/period as the rate', () => {
    play(perSecond(2, { burst: 1 }), [
      { atMs: 0, allowed: true, remaining: 0, resetAfterMs: 500 },
      { atMs: 499, allowed: false, retryAfterMs: 1 },
      { atMs: 500, allowed: true, remaining: 0 },
    ]);
  });

  it('treats a key idle for a month, a year, or any 2^32-tick multiple as a fresh key', () => {
    const tickWrapMs = 2 ** 32 / 1e5; // 5 per second uses 10 ns ticks: the TAT wraps every 2^32 * 10 ns
    const idleTimes = [30 * 86_400_000, 365 * 86_400_000, tickWrapMs, tickWrapMs - 500, 3 * tickWrapMs - 1, 7 * tickWrapMs + 999];
    for (const idleMs of idleTimes) {
      const rows: Row[] = [];
      for (let i = 0; i < 5; i++) rows.push({ atMs: 10, allowed: true });
      rows.push({ atMs: 10, allowed: false });
      for (let i = 0; i < 5; i++) rows.push({ atMs: 10 + idleMs, allowed: true, remaining: 4 - i });
      rows.push({ atMs: 10 + idleMs, allowed: false, retryAfterMs: 200 });
      play(perSecond(5), rows);
    }
  });

  it('enforces a daily limit, including across the 24 h boundary', () => {
    const day = 86_400_000;
    const rows: Row[] = [];
    for (let i = 0; i < 1000; i++) rows.push({ atMs: 1000, allowed: true });
    rows.push({ atMs: 1000, allowed: false, retryAfterMs: 86_400, resetAfterMs: day });
    rows.push({ atMs: 1000 + 86_399, allowed: false, retryAfterMs: 1 });
    rows.push({ atMs: 1000 + 86_400, allowed: true, remaining: 0 });
    rows.push({ atMs: 1000 + day, allowed: true, remaining: 998 });
    play({ permits: 1000, periodMs: day }, rows);
  });

  it('handles periods from 1 ms to 24 h and rates of 100,000 per second', () => {
    play({ permits: 1, periodMs: 1 }, [
      { atMs: 5, allowed: true, resetAfterMs: 1 },
      { atMs: 5, allowed: false, retryAfterMs: 1 },
      { atMs: 6, allowed: true },
    ]);
    const rows: Row[] = [];
    for (let i = 0; i < 100_000; i++) rows.push({ atMs: 0, allowed: true });
    rows.push({ atMs: 0, allowed: false, retryAfterMs: 0.01 });
    rows.push({ atMs: 0.01, allowed: true, remaining: 0 });
    rows.push({ atMs: 1000.01, allowed: true, remaining: 99_999 });
    play(perSecond(100_000), rows);
    play({ permits: 3, periodMs: 86_400_000, burst: 3 }, [
      { atMs: 0, cost: 3, allowed: true, resetAfterMs: 86_400_000 },
      { atMs: 28_799_999, allowed: false, retryAfterMs: 1 },
      { atMs: 28_800_000, allowed: true },
    ]);
  });

  it('keeps one state per key: different keys never share quota', () => {
    play(perHour(2), [
      { atMs: 0, key: 'a', allowed: true },
      { atMs: 0, key: 'a', allowed: true },
      { atMs: 0, key: 'a', allowed: false },
      { atMs: 0, key: 'b', allowed: true, remaining: 1 },
      { atMs: 0, key: 'ключ-🔑', allowed: true, remaining: 1 },
    ]);
  });

  it('rounds a non-integral emission interval up, so the rate is never exceeded', () => {
    const clock = new ManualClock();
    const limiter = new RateLimiter({ limit: perSecond(3, { burst: 1 }), maxKeys: 4, clock });
    let allowed = 0;
    for (let ms = 0; ms <= 60_000; ms += 1) {
      clock.set(ms);
      if (limiter.allow('k')) allowed++;
    }
    expect(allowed).toBe(180); // one at 0 ms, then every 333.334 ms: 180 in 60 s, never 181
  });
});
