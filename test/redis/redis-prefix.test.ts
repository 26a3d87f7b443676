// Who shares state on Redis: limiters with the same prefix do; left to its default, the prefix is
// a fingerprint of the limits, so limiters of different limits never share a key's state, and the
// cap's keys take the cap's own fingerprint. Real redis-server on its own socket, script time set.
import { describe, expect, it } from 'vitest';
import { ManualClock, perHour, perMinute, RedisPolicyLimiter, RedisRateLimiter } from '../../src/index.js';
import { setScriptTime } from '../../src/redis/redis-core.js';
import { privateRedis, redisAvailable, SCRIPT_TTL_PAD_MS } from '../helpers/redis-server.js';

const available = redisAvailable();

describe.skipIf(!available)('prefixes on the Redis limiters', () => {
  const redisServer = privateRedis();
  const clock = new ManualClock(1_000_000);
  const make = (options: Omit<ConstructorParameters<typeof RedisRateLimiter>[0], 'redis'>) => {
    const r = new RedisRateLimiter({ redis: redisServer.io, localTier: false, ...options });
    setScriptTime(r, () => clock.now() * 1000, SCRIPT_TTL_PAD_MS);
    return r;
  };
  const admitted = async (r: RedisRateLimiter, key: string, n: number) => {
    let count = 0;
    for (let i = 0; i < n; i++) if (await r.allow(key)) count++;
    return count;
  };

  it.each(['gcra', 'fixed-window'] as const)(
    'found (%s): two services of other limits on the default prefix shared each key; now the second admits its whole limit',
    async (algorithm) => {
      // Before: B admitted 5 of 20 on GCRA (A's debt carried into B's rate) and 0 of 20 on fixed
      // windows (one count for both).
      const a = make({ limit: perMinute(100), algorithm });
      const b = make({ limit: perMinute(10), algorithm });
      expect(await admitted(a, 'found-' + algorithm, 50)).toBe(50);
      expect(await admitted(b, 'found-' + algorithm, 20)).toBe(10);
    },
  );

  it('the same limits on the default prefix share each key (one service on many processes)', async () => {
    const one = make({ limit: perMinute(10) });
    const two = make({ limit: perMinute(10) });
    expect(await admitted(one, 'same', 6)).toBe(6);
    expect(await admitted(two, 'same', 10)).toBe(4);
  });

  it("the default prefix of the cap is the cap's own: limiters of other key limits share one cap", async () => {
    const a = make({ limit: perMinute(100), globalLimit: perHour(5) });
    const b = make({ limit: perMinute(50), globalLimit: perHour(5) });
    const c = make({ limit: perMinute(50), globalLimit: perHour(7) });
    expect(await admitted(a, 'cap-a', 3)).toBe(3);
    expect(await b.tryAcquire('cap-b')).toMatchObject({ allowed: true });
    expect(await b.tryAcquire('cap-b')).toMatchObject({ allowed: true });
    expect(await b.tryAcquire('cap-b')).toMatchObject({ allowed: false, reason: 'global-limit' }); // 5 of 5 in the hour
    expect(await admitted(c, 'cap-c', 7)).toBe(7); // another cap: its own state
  });

  it('a prefix given is a namespace: limiters that share it share state; keys are where the prefix says', async () => {
    const a = make({ limit: perMinute(100), prefix: 'svc:' });
    const b = make({ limit: perMinute(100), prefix: 'svc:' });
    expect(await admitted(a, 'ns', 60)).toBe(60);
    expect(await admitted(b, 'ns', 60)).toBe(40);
    expect(await redisServer.io.call('KEYS', 'svc:{ns}:*')).toHaveLength(1);
    const defaults = (await redisServer.io.call('KEYS', 'sluice:*')) as string[];
    expect(defaults.length).toBeGreaterThan(0);
    expect(defaults.every((k) => /^sluice:[0-9a-f]{8}:/.test(k))).toBe(true);
  });

  it("RedisPolicyLimiter's default prefix is its own, whatever the rules", async () => {
    const rules = [{ limit: perMinute(10) }];
    const p = new RedisPolicyLimiter({ redis: redisServer.io, localTier: false, rules });
    setScriptTime(p, () => clock.now() * 1000, SCRIPT_TTL_PAD_MS);
    expect(await p.allow({ user: 'u', api: 'x' })).toBe(true);
    const keys = (await redisServer.io.call('KEYS', 'sluice:policy:*')) as string[];
    expect(keys.length).toBeGreaterThan(0);
  });
});
