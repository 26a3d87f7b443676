// The Redis script against the shared-memory engine: for every algorithm, several limits and a
// global cap, the same sequence of requests at the same clock readings gets the same decisions
// (allowed, reason, remaining; waits and resets to the microsecond Redis counts in). The script's
// time comes from a test-only override (setScriptTime), the shared-memory limiter's from a
// ManualClock: both read the same milliseconds.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ManualClock, RateLimiter, RedisRateLimiter, type Decision, type Limit } from '../../src/index.js';
import type { AlgorithmName } from '../../src/algorithms/index.js';
import { setScriptTime } from '../../src/redis/redis-core.js';
import { heldKeys, privateRedis, redisAvailable, SCRIPT_TTL_PAD_MS, TEST_TIMEOUT_MS } from '../helpers/redis-server.js';

const available = redisAvailable();

interface Config {
  name: string;
  algorithm: AlgorithmName;
  limit: Limit[];
  globalLimit?: Limit;
}

const configs: Config[] = [];
for (const algorithm of ['gcra', 'fixed-window', 'sliding-window', 'sliding-log'] as const) {
  configs.push(
    { name: `${algorithm}: one limit`, algorithm, limit: [{ permits: 5, periodMs: 1_000 }] },
    { name: `${algorithm}: two limits`, algorithm, limit: [{ permits: 4, periodMs: 200 }, { permits: 8, periodMs: 3_000 }] },
    { name: `${algorithm}: a global cap`, algorithm, limit: [{ permits: 4, periodMs: 500 }], globalLimit: { permits: 6, periodMs: 1_200 } },
  );
}
configs.push(
  { name: 'gcra: a burst under the rate', algorithm: 'gcra', limit: [{ permits: 8, periodMs: 1_000, burst: 2 }] },
  { name: 'gcra: a large burst, two limits and a cap', algorithm: 'gcra', limit: [{ permits: 100, periodMs: 60_000, burst: 20 }, { permits: 4, periodMs: 100 }], globalLimit: { permits: 10, periodMs: 1_000, burst: 4 } },
);

// Intervals that the shared-memory engine's ticks (10 ns and up) hold exactly: it rounds an
// interval up to whole ticks, so at the exact end of a debt it may refuse what Redis, exact in
// units of 1/k µs, admits (a fractional interval is tested on Redis alone, below). The cap of
// 'a global cap' was 6 per 1,000 ms (166.67 ms): a run that reached the exact end of its debt
// found remaining 3 in memory and 4 on Redis. It is 6 per 1,200 ms (200 ms).
const KEYS = ['a', 'b', 'c'];
const step = fc.record({
  advanceMs: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 50 }), fc.integer({ min: 50, max: 4_000 })),
  key: fc.integer({ min: 0, max: KEYS.length - 1 }),
  cost: fc.oneof(fc.constant(1), fc.integer({ min: 0, max: 9 })),
});

/**
 * Waits and resets agree within a microsecond: Redis counts whole µs (GCRA exactly, in units of
 * 1/k µs), the shared-memory engine ticks of at least 10 ns with the interval rounded up.
 */
function expectSame(redis: Decision, memory: Decision, at: string): void {
  expect({ allowed: redis.allowed, reason: redis.reason, remaining: redis.remaining }, at).toEqual({ allowed: memory.allowed, reason: memory.reason, remaining: memory.remaining });
  for (const field of ['retryAfterMs', 'resetAfterMs'] as const) {
    const r = redis[field];
    const m = memory[field];
    if (m === Infinity) expect(r, `${at}: ${field}`).toBe(Infinity);
    else expect(Math.abs(r - m), `${at}: ${field} ${r} vs ${m}`).toBeLessThanOrEqual(0.001 + 1e-9);
  }
}

describe.skipIf(!available)('the Redis script decides as the shared-memory engine does', () => {
  const redisServer = privateRedis();
  let n = 0;


  it.each(configs)('$name', async (config) => {
    let checked = 0;
    let refused = 0;
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 1_000, max: 10_000_000 }), fc.array(step, { minLength: 5, maxLength: 40 }), async (startMs, steps) => {
        const clock = new ManualClock(startMs);
        const options = { algorithm: config.algorithm, limit: config.limit, ...(config.globalLimit ? { globalLimit: config.globalLimit } : {}) };
        const memory = new RateLimiter({ ...options, maxKeys: 16, clock });
        const onRedis = new RedisRateLimiter({ timeoutMs: TEST_TIMEOUT_MS, ...options, redis: heldKeys(redisServer.io), prefix: `v${n++}:`, localTier: false });
        let now = startMs;
        setScriptTime(onRedis, () => now * 1000, SCRIPT_TTL_PAD_MS);
        for (const [i, { advanceMs, key, cost }] of steps.entries()) {
          now += advanceMs;
          clock.set(now);
          const k = KEYS[key] as string;
          const m = memory.tryAcquire(k, cost);
          const r = await onRedis.tryAcquire(k, cost);
          expectSame(r, m, `step ${i} at ${now} ms, key ${k}, cost ${cost}`);
          checked++;
          if (!m.allowed) refused++;
        }
      }),
      { numRuns: 25 },
    );
    // The sequences reached refusals, not only admissions.
    expect(refused).toBeGreaterThan(checked / 10);
  });

  // Found in CI: 'fixed-window: two limits' started at 4,999 ms, 1 ms before a 200 ms window's
  // end; the key's TTL (1 ms, on Redis's own clock) ran out before the second request at the same
  // test time, which found a fresh window (remaining 3, not 2). The vectors hold their keys.
  it('a second request 1 test-ms before the window ends, after the Redis clock moved 3 ms', async () => {
    const limit = [{ permits: 4, periodMs: 200 }, { permits: 8, periodMs: 3_000 }];
    const r = new RedisRateLimiter({ timeoutMs: TEST_TIMEOUT_MS, algorithm: 'fixed-window', limit, redis: heldKeys(redisServer.io), prefix: `w${n++}:`, localTier: false });
    setScriptTime(r, () => 4_999_000, SCRIPT_TTL_PAD_MS);
    expect(await r.tryAcquire('a')).toMatchObject({ allowed: true, remaining: 3 });
    // Waits on Redis's clock, the one its TTLs follow, until it is 3 ms on.
    const time = async (): Promise<number> => {
      const [s, us] = (await redisServer.io.call('TIME')) as [string, string];
      return Number(s) * 1e6 + Number(us);
    };
    const t0 = await time();
    while ((await time()) < t0 + 3_000);
    expect(await r.tryAcquire('a')).toMatchObject({ allowed: true, remaining: 2 });
  });

  it('a fractional interval (3 per 200 ms) is exact on Redis to the microsecond', async () => {
    const r = new RedisRateLimiter({ timeoutMs: TEST_TIMEOUT_MS, redis: redisServer.io, limit: { permits: 3, periodMs: 200 }, prefix: `f${n++}:`, localTier: false });
    const t0 = 5_000_000_000; // µs
    let now = t0;
    setScriptTime(r, () => now, SCRIPT_TTL_PAD_MS);
    for (let i = 0; i < 3; i++) expect((await r.tryAcquire('k')).allowed).toBe(true);
    // The next passes once 200/3 ms = 66,666.67 µs of debt are paid: at 66,667 µs, not before.
    now = t0 + 66_666;
    expect(await r.tryAcquire('k')).toMatchObject({ allowed: false, retryAfterMs: 0.001 });
    now = t0 + 66_667;
    expect(await r.tryAcquire('k')).toMatchObject({ allowed: true, remaining: 0 });
    // Two more intervals: 200 ms after t0 (whole), the debt is again 2 of them.
    now = t0 + 200_000;
    expect(await r.tryAcquire('k')).toMatchObject({ allowed: true, remaining: 1 });
  });

  it('numbers past 14 digits come back whole: a wait of years, in µs', async () => {
    const periodMs = 10 * 365 * 86_400_000; // ten years: a wait of up to 3.2e14 µs
    const r = new RedisRateLimiter({ timeoutMs: TEST_TIMEOUT_MS, redis: redisServer.io, algorithm: 'fixed-window', limit: { permits: 1, periodMs }, prefix: `y${n++}:`, localTier: false });
    const nowUs = 1_764_000_000_123_457; // December 2025, to the µs
    setScriptTime(r, () => nowUs, SCRIPT_TTL_PAD_MS);
    expect((await r.tryAcquire('k')).allowed).toBe(true);
    const periodUs = periodMs * 1000;
    const waitUs = (Math.floor(nowUs / periodUs) + 1) * periodUs - nowUs;
    expect(waitUs).toBeGreaterThan(1e14);
    expect(await r.tryAcquire('k')).toMatchObject({ allowed: false, retryAfterMs: waitUs / 1000, resetAfterMs: waitUs / 1000 });
  });
});
