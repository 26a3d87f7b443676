// get(key) on the Redis limiters: the key's state on Redis without spending, one script call (a
// probe of cost 0, which writes nothing). Real redis-server on its own socket, script time set.
import { describe, expect, it } from 'vitest';
import { ManualClock, perHour, perMinute, perSecond, RedisPolicyLimiter, RedisRateLimiter } from '../../src/index.js';
import { setScriptTime } from '../../src/redis/redis-core.js';
import { firstAnswer, privateRedis, redisAvailable, SCRIPT_TTL_PAD_MS, TEST_TIMEOUT_MS } from '../helpers/redis-server.js';

const available = redisAvailable();

describe.skipIf(!available)('get on the Redis limiters', () => {
  const redisServer = privateRedis();
  let n = 0;

  it.each(['gcra', 'fixed-window', 'sliding-window', 'sliding-log'] as const)('%s: a fresh key reads fresh; after spending, what a probe reports; get spends nothing', async (algorithm) => {
    const clock = new ManualClock(1_000_000);
    const prefix = `gt${n++}:`;
    const r = new RedisRateLimiter({ timeoutMs: TEST_TIMEOUT_MS, prefixCheck: 'off', redis: redisServer.io, prefix, limit: [perMinute(10), perHour(50)], algorithm });
    setScriptTime(r, () => clock.now() * 1000, SCRIPT_TTL_PAD_MS);
    expect(await r.get('k')).toMatchObject({ remaining: 10, resetAfterMs: 0 });
    expect(await redisServer.io.call('KEYS', `${prefix}*`)).toEqual([]); // nothing written
    await r.tryAcquire('k', 4);
    clock.advance(10);
    const probe = await r.tryAcquire('k', 0);
    const state = await r.get('k');
    expect(state).toEqual({ remaining: probe.remaining, resetAfterMs: probe.resetAfterMs, limits: probe.limits });
    for (let i = 0; i < 5; i++) await r.get('k');
    expect(await r.tryAcquire('k', 0)).toEqual(probe);
    await expect(r.get('')).rejects.toThrow(TypeError);
  });

  it('rejects when Redis does not answer: the state is unknown (onError does not answer for it)', async () => {
    const r = new RedisRateLimiter({ prefixCheck: 'off', redis: redisServer.io, prefix: `gt${n++}:`, limit: perSecond(5), onError: 'allow', timeoutMs: 50 });
    expect(await firstAnswer(() => r.get('k'), () => true)).toMatchObject({ remaining: 5 });
    redisServer.server.process.kill('SIGSTOP');
    try {
      await expect(r.get('k')).rejects.toThrow(/Redis did not answer in time \(or failed\), so the key's state is unknown/);
      expect((await r.tryAcquire('k')).degraded).toBe(true); // a decision still answers by onError
    } finally {
      redisServer.server.process.kill('SIGCONT');
    }
  });

  it('RedisPolicyLimiter: the pair under the rule it matches', async () => {
    const clock = new ManualClock(1_000_000);
    const p = new RedisPolicyLimiter({ timeoutMs: TEST_TIMEOUT_MS, redis: redisServer.io, prefix: `gt${n++}:`, rules: [{ limit: perMinute(10) }, { user: 'acme', limit: perMinute(100) }] });
    setScriptTime(p, () => clock.now() * 1000, SCRIPT_TTL_PAD_MS);
    await p.tryAcquire({ user: 'acme', api: 'x' }, 30);
    expect(await p.get({ user: 'acme', api: 'x' })).toEqual({ remaining: 70, resetAfterMs: 18_000 });
    expect(await p.get({ user: 'bob', api: 'x' })).toEqual({ remaining: 10, resetAfterMs: 0 });
  });
});
