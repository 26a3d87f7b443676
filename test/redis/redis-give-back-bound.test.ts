// A spend's give-back on the Redis limiters' GCRA (skipFailedRequests, skipSuccessfulRequests)
// returns no more than what of the spend is still ahead on Redis's clock: the spend's slot ends at
// least its cost's intervals after the admission's Redis time, and what of it drained stays spent.
// Found: at 1 a second with a burst of 1, a spend at 100 s, another admission at 105 s, then the
// first one's give-back (a reward): a second admission at 105 s passed. RedisRateLimiter with one
// limit, two limits and under a cap (which keeps its spend), and a RedisPolicyLimiter's GCRA rule
// (into the keys of the rule that decided). Real redis-server on its own socket, script time set.
import { describe, expect, it } from 'vitest';
import { ManualClock, perMinute, perSecond, RedisPolicyLimiter, RedisRateLimiter, type Limit } from '../../src/index.js';
import { setScriptTime } from '../../src/redis/redis-core.js';
import { keepRedisSpends, redisSpendGiveBack } from '../../src/redis/redis-rate-limiter.js';
import { keepRedisPolicySpends, redisPolicyGiveBack } from '../../src/redis/redis-policy-limiter.js';
import { privateRedis, redisAvailable, SCRIPT_TTL_PAD_MS, TEST_TIMEOUT_MS } from '../helpers/redis-server.js';

const available = redisAvailable();

describe.skipIf(!available)('a spend\'s give-back on Redis GCRA', () => {
  const redisServer = privateRedis();
  let n = 0;
  const ONE = { permits: 1, periodMs: 1_000, burst: 1 };

  function onRedis(clock: ManualClock, limit: Limit | Limit[], extra: object = {}): RedisRateLimiter {
    const r = new RedisRateLimiter({ timeoutMs: TEST_TIMEOUT_MS, redis: redisServer.io, prefix: `gb${n++}:`, prefixCheck: 'off', limit, localTier: false, ...extra });
    setScriptTime(r, () => clock.now() * 1000, SCRIPT_TTL_PAD_MS);
    keepRedisSpends(r);
    return r;
  }

  /** The admission of `cost` on `key`, and its give-back. */
  async function admitted(r: RedisRateLimiter, key: string, cost = 1): Promise<() => Promise<void>> {
    const d = await r.tryAcquire(key, cost);
    expect(d.allowed).toBe(true);
    const back = redisSpendGiveBack(r, d, key, cost);
    expect(back).toBeDefined();
    return back as () => Promise<void>;
  }

  it.each([
    ['one limit', ONE, {}],
    ['two limits', [ONE, perMinute(1_000)], {}],
    ['a limit under a cap', ONE, { globalLimit: perSecond(1_000) }],
  ] as const)('found (%s): a spend that drained before its give-back stays spent', async (_name, limit, extra) => {
    const clock = new ManualClock(100_000);
    const r = onRedis(clock, limit as Limit | Limit[], extra);
    const back = await admitted(r, 'k');
    clock.advance(5_000);
    expect((await r.tryAcquire('k')).allowed).toBe(true);
    await back(); // the first spend drained at 101 s: nothing of it is ahead
    expect((await r.tryAcquire('k')).allowed).toBe(false);
  });

  it('right after the admission the whole spend comes back; part drained, only the part ahead', async () => {
    const clock = new ManualClock(100_000);
    const r = onRedis(clock, { permits: 1, periodMs: 1_000, burst: 4 });
    await (await admitted(r, 'a'))();
    expect((await r.tryAcquire('a', 4)).allowed).toBe(true);
    const back = await admitted(r, 'b', 3); // its slot: 100-103 s
    clock.advance(1_000);
    expect((await r.tryAcquire('b', 2)).allowed).toBe(true); // the debt 4 s
    await back(); // 2 s of the first spend are ahead: the debt 2 s, not 1 s
    expect((await r.tryAcquire('b', 3)).allowed).toBe(false);
    expect((await r.tryAcquire('b', 2)).allowed).toBe(true);
  });

  it('found: a give-back of cost 0 spent a permit (a cost of -0 packed as an admission); it sends nothing', async () => {
    const clock = new ManualClock(100_000);
    const r = onRedis(clock, { permits: 1, periodMs: 1_000, burst: 2 });
    const d = await r.tryAcquire('k', 0);
    await (redisSpendGiveBack(r, d, 'k', 0) as () => Promise<void>)();
    expect((await r.get('k')).remaining).toBe(2);
  });

  it('a cap keeps its spend', async () => {
    const clock = new ManualClock(100_000);
    const r = onRedis(clock, perSecond(10), { globalLimit: { permits: 1, periodMs: 1_000, burst: 1 } });
    await (await admitted(r, 'k'))();
    expect((await r.tryAcquire('other')).reason).toBe('global-limit');
  });

  it('RedisPolicyLimiter, GCRA rule: found, a spend that drained before its give-back stays spent', async () => {
    const clock = new ManualClock(100_000);
    const l = new RedisPolicyLimiter({ timeoutMs: TEST_TIMEOUT_MS, redis: redisServer.io, prefix: `gp${n++}:`, rules: [{ limit: ONE }], localTier: false });
    setScriptTime(l, () => clock.now() * 1000, SCRIPT_TTL_PAD_MS);
    keepRedisPolicySpends(l);
    const req = { user: 'u', api: 'a' };
    const d = await l.tryAcquire(req);
    expect(d.allowed).toBe(true);
    const back = redisPolicyGiveBack(l, d, req, 1) as () => Promise<void>;
    clock.advance(5_000);
    expect((await l.tryAcquire(req)).allowed).toBe(true);
    await back();
    expect((await l.tryAcquire(req)).allowed).toBe(false);
  });
});
