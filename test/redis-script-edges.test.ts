// The Redis script's edge cases, against a real redis-server (its own socket), the
// script's time set by setScriptTime: deterministic.
import { describe, expect, it } from 'vitest';
import { RateLimitTimeoutError, RedisPolicyLimiter, RedisRateLimiter, type PolicyRule } from '../src/index.js';
import { setScriptTime } from '../src/redis/redis-core.js';
import { privateRedis, redisAvailable } from './helpers/redis-server.js';

const available = redisAvailable();

describe.skipIf(!available)('the Redis script at its edges', () => {
  const redisServer = privateRedis();
  let n = 0;


  it('a fixed window whose permits a change of rules lowered below its count reports remaining 0, never less', async () => {
    // Same period and algorithm: the count is kept (README). 8 counted, then 5 permits.
    const fw = (permits: number): PolicyRule[] => [{ algorithm: 'fixed-window', limit: { permits, periodMs: 3_600_000 } }];
    const p = new RedisPolicyLimiter({ redis: redisServer.io, prefix: `al${n++}:`, localTier: false, rules: fw(10) });
    setScriptTime(p, () => 1_000 * 3_600_000 * 1000 + 60_000_000);
    const u = { user: 'u', api: 'a' };
    expect(await p.tryAcquire(u, 8)).toMatchObject({ allowed: true, remaining: 2 });
    p.setRules(fw(5));
    const refused = await p.tryAcquire(u);
    const probe = await p.tryAcquire(u, 0);
    expect({ refused: refused.remaining, probe: probe.remaining }).toEqual({ refused: 0, probe: 0 });
  });

  it.each([
    // [algorithm, the key's suffix, the moment its state equals a fresh key's, in ms from now]
    ['fixed-window', 'fw60000000:0', 60_000 - 25_000], // the window's end
    ['sliding-window', 'sw60000000:0', 2 * 60_000 - 25_000], // the end of the next window
    ['sliding-log', 'sl60000000:0', 60_000], // a period after the newest stamp
  ] as const)('%s: an admission writes its key with an expiry at the moment it holds nothing', async (algorithm, suffix, expectMs) => {
    const prefix = `exp${n++}:`;
    const r = new RedisRateLimiter({ redis: redisServer.io, prefix, algorithm, limit: { permits: 5, periodMs: 60_000 }, localTier: false });
    // 25 s into a minute's window, on the script's clock.
    setScriptTime(r, () => (1_000_000 * 60_000 + 25_000) * 1000);
    expect((await r.tryAcquire('k')).allowed).toBe(true);
    const pttl = await redisServer.io.pttl(`${prefix}{k}:${suffix}`);
    expect(pttl).toBeLessThanOrEqual(expectMs);
    expect(pttl).toBeGreaterThan(expectMs - 1_000); // what the call itself took, at most
    // A refusal and a probe write nothing: the expiry stays.
    await r.tryAcquire('k', 0);
    expect(await redisServer.io.pttl(`${prefix}{k}:${suffix}`)).toBeLessThanOrEqual(pttl);
  });

  it('RedisPolicyLimiter.acquire: refuses at once what cannot pass in time, and an aborted wait', async () => {
    const p = new RedisPolicyLimiter({ redis: redisServer.io, prefix: `acq${n++}:`, rules: [{ limit: { permits: 1, periodMs: 3_600_000 } }], localTier: false });
    const u = { user: 'u', api: 'a' };
    await p.acquire(u); // the one permit
    await expect(p.acquire(u, { maxWaitMs: 1_000 })).rejects.toThrow(RateLimitTimeoutError);
    await expect(p.acquire(u, { cost: 2 })).rejects.toThrow(RateLimitTimeoutError); // never fits the burst
    const controller = new AbortController();
    controller.abort(new Error('gave up'));
    await expect(p.acquire(u, { signal: controller.signal })).rejects.toThrow('gave up');
    await expect(p.acquire(u, { maxWaitMs: -1 })).rejects.toThrow(RangeError);
  });
});
