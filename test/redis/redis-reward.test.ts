// reward on the Redis limiters: `cost` intervals given back under each of a key's GCRA limits in
// one script call, never below a fresh key's state; a global cap keeps its spend; this process's
// local tier forgets its refusals at once. Real redis-server on its own socket, script time set.
import { describe, expect, it } from 'vitest';
import { LocalTier, ManualClock, perHour, perMinute, RedisPolicyLimiter, RedisRateLimiter } from '../../src/index.js';
import { setScriptTime } from '../../src/redis/redis-core.js';
import { privateRedis, redisAvailable, SCRIPT_TTL_PAD_MS } from '../helpers/redis-server.js';

const available = redisAvailable();

describe.skipIf(!available)('reward on the Redis limiters', () => {
  const redisServer = privateRedis();
  let n = 0;

  it('one limit: what is given back passes again, and never more than a fresh key has', async () => {
    const clock = new ManualClock(1_000_000);
    const r = new RedisRateLimiter({ redis: redisServer.io, prefix: `rw${n++}:`, limit: perMinute(3), localTier: false });
    setScriptTime(r, () => clock.now() * 1000, SCRIPT_TTL_PAD_MS);
    for (let i = 0; i < 3; i++) expect(await r.allow('k')).toBe(true);
    expect(await r.allow('k')).toBe(false);
    await r.reward('k', 2);
    console.log(await r.get('k'));
    expect(await r.get('k')).toMatchObject({ remaining: 2 });
    expect([await r.allow('k'), await r.allow('k'), await r.allow('k')]).toEqual([true, true, false]);
    // More than was spent: the key is fresh, with its burst and no more.
    await r.reward('k', 100);
    expect(await r.get('k')).toEqual({ remaining: 3, resetAfterMs: 0 });
    await r.reward('never-seen', 5);
    expect(await r.get('never-seen')).toEqual({ remaining: 3, resetAfterMs: 0 });
    await r.reward('k', 0); // nothing to give back: no call
    expect(() => r.reward('', 1)).toThrow(TypeError);
    expect(() => r.reward('k', -1)).toThrow(RangeError);
    expect(() => r.reward('k', 1.5)).toThrow(RangeError);
  });

  it('two limits each get back what the reward names, up to their own debt; a global cap keeps its spend', async () => {
    const clock = new ManualClock(1_000_000);
    const r = new RedisRateLimiter({
      redis: redisServer.io, prefix: `rw${n++}:`, limit: [perMinute(3), perHour(5)], globalLimit: perHour(6), localTier: false,
    });
    setScriptTime(r, () => clock.now() * 1000, SCRIPT_TTL_PAD_MS);
    for (let i = 0; i < 3; i++) expect(await r.allow('k')).toBe(true);
    expect((await r.tryAcquire('k')).reason).toBe('limited');
    await r.reward('k', 1);
    expect(await r.get('k')).toMatchObject({ remaining: 1 }); // the minute's
    await r.reward('k', 3);
    expect(await r.get('k')).toMatchObject({ remaining: 3 });
    // Three more pass: the hour (5) got back what it spent too, or the third would be refused.
    for (let i = 0; i < 3; i++) expect(await r.allow('k')).toBe(true);
    // The cap counted all 6 admissions, none given back.
    expect(await r.tryAcquire('other')).toMatchObject({ allowed: false, reason: 'global-limit' });
  });

  it("found missing: a refusal in this process's local tier would have answered after the reward; now the next request goes to Redis", async () => {
    const clock = new ManualClock(1_000_000);
    const tier = LocalTier.create({ maxKeys: 64 });
    const r = new RedisRateLimiter({ redis: redisServer.io, prefix: `rw${n++}:`, limit: perHour(2), localTier: tier });
    setScriptTime(r, () => clock.now() * 1000, SCRIPT_TTL_PAD_MS);
    expect([await r.allow('k'), await r.allow('k'), await r.allow('k')]).toEqual([true, true, false]);
    expect(tier.refusedFor('k')).toBeGreaterThan(0);
    await r.reward('k', 1);
    expect(tier.refusedFor('k')).toBe(0);
    const d = await r.tryAcquire('k');
    expect(d).toMatchObject({ allowed: true, remaining: 0 });
    expect(d.degraded).toBeUndefined();
  });

  it('RedisPolicyLimiter: the pair under the rule it matches; a window rule refuses reward', async () => {
    const clock = new ManualClock(1_000_000);
    const p = new RedisPolicyLimiter({
      redis: redisServer.io, prefix: `rw${n++}:`, localTier: false,
      rules: [{ limit: perMinute(2) }, { user: 'win', algorithm: 'fixed-window', limit: perMinute(2) }],
    });
    setScriptTime(p, () => clock.now() * 1000, SCRIPT_TTL_PAD_MS);
    const acme = { user: 'acme', api: 'x' };
    expect([await p.allow(acme), await p.allow(acme), await p.allow(acme)]).toEqual([true, true, false]);
    await p.reward(acme, 1);
    expect([await p.allow(acme), await p.allow(acme)]).toEqual([true, false]);
    expect(() => p.reward({ user: 'win', api: 'x' }, 1)).toThrow(/reward\(\) gives back GCRA debt; the rule for .* runs fixed-window/);
  });

  it('other algorithms refuse reward with a TypeError; an unanswered reward rejects', async () => {
    const windows = new RedisRateLimiter({ redis: redisServer.io, prefix: `rw${n++}:`, limit: perMinute(2), algorithm: 'sliding-window' });
    expect(() => windows.reward('k', 1)).toThrow(/reward\(\) gives back GCRA debt; this limiter runs sliding-window/);
    const r = new RedisRateLimiter({ redis: redisServer.io, prefix: `rw${n++}:`, limit: perMinute(5), onError: 'allow', timeoutMs: 50 });
    await r.allow('k');
    redisServer.server.process.kill('SIGSTOP');
    try {
      await expect(r.reward('k', 1)).rejects.toThrow(/Redis did not answer the reward within 50 ms \(timeoutMs\): the spend may or may not be back/);
    } finally {
      redisServer.server.process.kill('SIGCONT');
    }
  });
});
