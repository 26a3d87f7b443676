// reset on the Redis limiters: a key's state under each of its limits deleted in one script call
// (a global cap stays), and this process's local tier forgets its refusals at once. Real
// redis-server on its own socket, script time set.
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { LocalTier, ManualClock, perHour, perMinute, RedisConfigError, RedisPolicyLimiter, RedisRateLimiter } from '../../src/index.js';
import { setScriptTime } from '../../src/redis/redis-core.js';
import { privateRedis, redisAvailable, SCRIPT_TTL_PAD_MS, TEST_TIMEOUT_MS } from '../helpers/redis-server.js';

const available = redisAvailable();

describe.skipIf(!available)('reset on the Redis limiters', () => {
  const redisServer = privateRedis();
  let n = 0;

  it.each(['gcra', 'fixed-window', 'sliding-window', 'sliding-log'] as const)('%s, two limits: the key reads fresh on Redis; other keys and the cap keep theirs', async (algorithm) => {
    const clock = new ManualClock(1_000_000);
    const prefix = `rs${n++}:`;
    const r = new RedisRateLimiter({
      timeoutMs: TEST_TIMEOUT_MS,
      redis: redisServer.io, prefix, limit: [perMinute(3), perHour(10)], globalLimit: perHour(100), algorithm, localTier: false,
    });
    setScriptTime(r, () => clock.now() * 1000, SCRIPT_TTL_PAD_MS);
    for (let i = 0; i < 3; i++) expect(await r.allow('k')).toBe(true);
    expect(await r.allow('k')).toBe(false);
    await r.allow('other');
    const capBefore = (await redisServer.io.call('KEYS', `${prefix}global:*`)) as string[];
    expect(await r.reset('k')).toBe(true);
    expect(await r.get('k')).toMatchObject({ remaining: 3, resetAfterMs: 0 });
    // GCRA keeps the key's reset mark (when it was reset), which expires with the limits' longest
    // tolerance: a give-back of a spend from before the reset gives nothing (lua-gcra.ts).
    expect(await redisServer.io.call('KEYS', `${prefix}{k}:*`)).toEqual(algorithm === 'gcra' ? [`${prefix}{k}:reset`] : []);
    if (algorithm === 'gcra') {
      // Kept as long as the longest of the deleted states would have lived: 3 of 10 an hour owed
      // 18 minutes (and the tests' pad).
      expect(Number(await redisServer.io.get(`${prefix}{k}:reset`))).toBe(1_000_000_000);
      const ttl = await redisServer.io.pttl(`${prefix}{k}:reset`);
      expect(ttl).toBeGreaterThan(18 * 60_000 + SCRIPT_TTL_PAD_MS - 5_000);
      expect(ttl).toBeLessThanOrEqual(18 * 60_000 + SCRIPT_TTL_PAD_MS + 2);
    }
    for (let i = 0; i < 3; i++) expect(await r.allow('k')).toBe(true);
    expect(await r.allow('k')).toBe(false);
    expect(await r.get('other')).toMatchObject({ remaining: 2 });
    expect(capBefore.length).toBeGreaterThan(0);
    expect(await redisServer.io.call('KEYS', `${prefix}global:*`)).toEqual(capBefore);
    expect(await r.reset('never-seen')).toBe(false);
    expect(() => r.reset('')).toThrow(TypeError); // at once, as tryAcquire
  });

  // Found by an attack: the mark was kept for the tolerance of the limits of the plan the reset
  // ran under, and a RedisPolicyLimiter's reset under a rule of 10 a second (or another process's,
  // during a rollout of new rules) let it expire within 100 ms, while a spend under 1 an hour
  // could still be given back for an hour: 2 admitted after the reset. The mark now lives as long
  // as the states it covers (a reset: the deleted ones; a block: the key's after it).
  it.each(['reset', 'block'] as const)('found: a %s under a rule of a short tolerance keeps the mark as long as a spend under another rule may be given back', async (control) => {
    const clock = new ManualClock(1_000_000);
    const prefix = `rs${n++}:`;
    const hourly = [{ limit: { permits: 1, periodMs: 3_600_000, burst: 1 } }];
    const fast = [{ limit: { permits: 10, periodMs: 1_000, burst: 1 } }];
    const a = new RedisPolicyLimiter({ timeoutMs: TEST_TIMEOUT_MS, redis: redisServer.io, prefix, rules: hourly, localTier: false });
    const b = new RedisPolicyLimiter({ timeoutMs: TEST_TIMEOUT_MS, redis: redisServer.io, prefix, rules: fast, localTier: false });
    for (const l of [a, b]) setScriptTime(l, () => clock.now() * 1000, 0); // no pad: the TTLs are the states' own
    const pair = { user: 'u', api: 'x' };
    expect(await a.allow(pair)).toBe(true); // owes an hour under a's rule
    if (control === 'reset') expect(await b.reset(pair)).toBe(true);
    else await b.block(pair, 50);
    const marks = (await redisServer.io.call('KEYS', `${prefix}*reset`)) as string[];
    expect(marks).toHaveLength(1);
    expect(await redisServer.io.pttl(marks[0] as string)).toBeGreaterThan(3_590_000);
  });

  it("found: a refusal in this process's local tier answered after the reset; now the next request goes to Redis and passes", async () => {
    const clock = new ManualClock(1_000_000);
    const tier = LocalTier.create({ maxKeys: 64 });
    const r = new RedisRateLimiter({ timeoutMs: TEST_TIMEOUT_MS, redis: redisServer.io, prefix: `rs${n++}:`, limit: perHour(2), localTier: tier });
    setScriptTime(r, () => clock.now() * 1000, SCRIPT_TTL_PAD_MS);
    expect(await r.allow('k')).toBe(true);
    expect(await r.allow('k')).toBe(true);
    expect(await r.allow('k')).toBe(false);
    expect(tier.refusedFor('k')).toBeGreaterThan(0); // the tier now answers the key alone
    // Another process's limiter (its own tier) refused the key too.
    const otherTier = LocalTier.create({ maxKeys: 64 });
    const other = new RedisRateLimiter({ timeoutMs: TEST_TIMEOUT_MS, redis: redisServer.io, prefix: `rs${n - 1}:`, limit: perHour(2), localTier: otherTier });
    setScriptTime(other, () => clock.now() * 1000, SCRIPT_TTL_PAD_MS);
    expect(await other.allow('k')).toBe(false);
    expect(await r.reset('k')).toBe(true);
    expect(tier.refusedFor('k')).toBe(0);
    const d = await r.tryAcquire('k');
    expect(d).toMatchObject({ allowed: true, remaining: 1 });
    expect(d.degraded).toBeUndefined();
    // The other process's tier keeps its refusal until the retry time Redis gave it: under-admission only.
    expect(otherTier.refusedFor('k')).toBeGreaterThan(0);
    expect(await other.allow('k')).toBe(false);
  });

  it('RedisPolicyLimiter: the pair under the rule it matches now; other pairs keep theirs', async () => {
    const clock = new ManualClock(1_000_000);
    const p = new RedisPolicyLimiter({ timeoutMs: TEST_TIMEOUT_MS, redis: redisServer.io, prefix: `rs${n++}:`, rules: [{ limit: perMinute(2) }, { user: 'acme', limit: perMinute(5) }], localTier: false });
    setScriptTime(p, () => clock.now() * 1000, SCRIPT_TTL_PAD_MS);
    await p.tryAcquire({ user: 'acme', api: 'x' }, 5);
    await p.tryAcquire({ user: 'bob', api: 'x' }, 2);
    expect(await p.reset({ user: 'acme', api: 'x' })).toBe(true);
    expect(await p.get({ user: 'acme', api: 'x' })).toEqual({ remaining: 5, resetAfterMs: 0 });
    expect(await p.get({ user: 'bob', api: 'x' })).toMatchObject({ remaining: 0 });
    expect(() => p.reset({ user: '', api: 'x' })).toThrow(TypeError);
  });

  it('rejects when Redis does not answer within timeoutMs (onError does not answer for it)', async () => {
    const r = new RedisRateLimiter({ redis: redisServer.io, prefix: `rs${n++}:`, limit: perMinute(5), onError: 'allow', timeoutMs: 50 });
    await r.allow('k');
    redisServer.server.process.kill('SIGSTOP');
    try {
      await expect(r.reset('k')).rejects.toThrow(/Redis did not answer the reset within 50 ms \(timeoutMs\): the key may or may not be reset/);
    } finally {
      redisServer.server.process.kill('SIGCONT');
    }
  });

  it('an ACL without DEL rejects with RedisConfigError naming NOPERM, and deletes nothing', async () => {
    const user = `noreset${n++}`;
    const prefix = `rs${n++}:`;
    await redisServer.io.call('ACL', 'SETUSER', user, 'on', '>secret', `~${prefix}*`, '+evalsha', '+eval', '+time', '+get', '+set', '+pexpire',
      '+pttl', '+incrby', '+lrange', '+rpush', '+ltrim', '+lpop', '+llen', '+hget', '+hset', '+hmget', '+hincrby', '+exists', '+expire', '+mget');
    const io = new Redis({ path: redisServer.server.socket, username: user, password: 'secret', enableReadyCheck: false });
    try {
      const r = new RedisRateLimiter({ timeoutMs: TEST_TIMEOUT_MS, redis: io, prefix, limit: perMinute(3), localTier: false });
      expect(await r.allow('k')).toBe(true);
      const err = await r.reset('k').catch((e: unknown) => e);
      expect(err).toBeInstanceOf(RedisConfigError);
      expect((err as RedisConfigError).redisMessage).toMatch(/NOPERM|can't run this command/);
      expect(await r.get('k')).toMatchObject({ remaining: 2 });
    } finally {
      io.disconnect();
    }
  });
});
