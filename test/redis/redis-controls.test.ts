// penalty, reward, block and unblock on the Redis limiters, each one script call on a key's GCRA
// limits: a reward gives back, never below a fresh key's state; a penalty spends beyond the burst;
// a block refuses until it ends, with the right Retry-After, for 30 days, and never shortens a
// longer wait. A global cap is never charged or given back. This process's local tier forgets its
// refusals and leases at once. Real redis-server on its own socket, script time set.
import { describe, expect, it } from 'vitest';
import { LocalTier, ManualClock, perHour, perMinute, RedisPolicyLimiter, RedisRateLimiter } from '../../src/index.js';
import { setScriptTime } from '../../src/redis/redis-core.js';
import { privateRedis, redisAvailable, SCRIPT_TTL_PAD_MS, TEST_TIMEOUT_MS } from '../helpers/redis-server.js';

const available = redisAvailable();

describe.skipIf(!available)('per-key controls on the Redis limiters', () => {
  const redisServer = privateRedis();
  let n = 0;

  it('one limit: what is given back passes again, and never more than a fresh key has', async () => {
    const clock = new ManualClock(1_000_000);
    const r = new RedisRateLimiter({ timeoutMs: TEST_TIMEOUT_MS, redis: redisServer.io, prefix: `rw${n++}:`, limit: perMinute(3), localTier: false });
    setScriptTime(r, () => clock.now() * 1000, SCRIPT_TTL_PAD_MS);
    for (let i = 0; i < 3; i++) expect(await r.allow('k')).toBe(true);
    expect(await r.allow('k')).toBe(false);
    await r.reward('k', 2);
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

  it('penalty: spends beyond the burst, so the key waits longer; both key limits, never the cap', async () => {
    const clock = new ManualClock(1_000_000);
    const r = new RedisRateLimiter({ timeoutMs: TEST_TIMEOUT_MS, redis: redisServer.io, prefix: `rw${n++}:`, limit: perMinute(3), localTier: false });
    setScriptTime(r, () => clock.now() * 1000, SCRIPT_TTL_PAD_MS);
    await r.penalty('k', 2);
    expect([await r.allow('k'), await r.allow('k')]).toEqual([true, false]);
    // 5 intervals of 20 s on a fresh key: 100 s of debt; a request passes at 40 s, 60 s from now.
    await r.penalty('fresh', 5);
    expect(await r.tryAcquire('fresh')).toMatchObject({ allowed: false, retryAfterMs: 60_000 });
    clock.advance(60_000);
    expect(await r.allow('fresh')).toBe(true);
    await r.penalty('k', 0);
    expect(() => r.penalty('k', -1)).toThrow(RangeError);
    expect(() => r.penalty('k', 2 ** 53 - 1)).toThrow(/a penalty of 9007199254740991 is more than these limits' state can count exactly \(at most \d+\); nothing was spent/);
    const capped = new RedisRateLimiter({
      timeoutMs: TEST_TIMEOUT_MS,
      redis: redisServer.io, prefix: `rw${n++}:`, limit: [perMinute(3), perHour(4)], globalLimit: perHour(5), localTier: false,
    });
    setScriptTime(capped, () => clock.now() * 1000, SCRIPT_TTL_PAD_MS);
    await capped.penalty('k', 3);
    expect(await capped.tryAcquire('k')).toMatchObject({ allowed: false, reason: 'limited' });
    clock.advance(60_000); // the minute is back; the hour's 4 has 1 left
    expect([await capped.allow('k'), await capped.allow('k')]).toEqual([true, false]);
    // The cap counted the one admission only: 4 more of its 5 for other keys.
    for (let i = 0; i < 4; i++) expect(await capped.allow(`other${i}`)).toBe(true);
    expect(await capped.tryAcquire('last')).toMatchObject({ allowed: false, reason: 'global-limit' });
  });

  it('block: 30 days of refusals with the right Retry-After, one request at the end; a shorter block keeps the longer; unblock', async () => {
    const clock = new ManualClock(1_000_000);
    const r = new RedisRateLimiter({ timeoutMs: TEST_TIMEOUT_MS, redis: redisServer.io, prefix: `rw${n++}:`, limit: perMinute(3), localTier: false });
    setScriptTime(r, () => clock.now() * 1000, SCRIPT_TTL_PAD_MS);
    const month = 30 * 86_400_000;
    await r.block('k', month);
    expect(await r.tryAcquire('k')).toMatchObject({ allowed: false, retryAfterMs: month });
    await r.block('k', 60_000); // shorter: the month stays
    clock.advance(month - 1);
    expect(await r.tryAcquire('k')).toMatchObject({ allowed: false, retryAfterMs: 1 });
    clock.advance(1);
    expect([await r.allow('k'), await r.allow('k')]).toEqual([true, false]);
    await r.block('k', 10_000);
    expect(await r.unblock('k')).toBe(true);
    expect(await r.get('k')).toEqual({ remaining: 3, resetAfterMs: 0 });
    expect(() => r.block('k', -1)).toThrow(RangeError);
    expect(() => r.block('k', '5' as never)).toThrow(TypeError);
    expect(() => r.block('k', 1e15)).toThrow(/ms must be from 0 to .* for these limits/);
  });

  it("block clears this process's local tier: its leased permits are not spent during the block", async () => {
    const clock = new ManualClock(1_000_000);
    const tier = LocalTier.create({ maxKeys: 64, leaseMs: 60_000 });
    const r = new RedisRateLimiter({ timeoutMs: TEST_TIMEOUT_MS, redis: redisServer.io, prefix: `rw${n++}:`, limit: perMinute(20), localTier: tier, lease: 5 });
    setScriptTime(r, () => clock.now() * 1000, SCRIPT_TTL_PAD_MS);
    expect(await r.allow('k')).toBe(true); // a lease of 5: 4 left in the tier
    expect(await r.allow('k')).toBe(true); // spent from the lease, without Redis
    await r.block('k', 60_000);
    expect(await r.allow('k')).toBe(false);
  });

  it('a sliding log refuses block with a TypeError, before any call (windows: redis-window-controls.test.ts)', () => {
    const log = new RedisRateLimiter({ timeoutMs: TEST_TIMEOUT_MS, redis: redisServer.io, prefix: `rw${n++}:`, limit: perMinute(2), algorithm: 'sliding-log' });
    expect(() => log.block('k', 1_000)).toThrow(/block\(\) is built for GCRA and window limits .*; this limiter runs sliding-log/);
  });

  it('two limits each get back what the reward names, up to their own debt; a global cap keeps its spend', async () => {
    const clock = new ManualClock(1_000_000);
    const r = new RedisRateLimiter({
      timeoutMs: TEST_TIMEOUT_MS,
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
    const r = new RedisRateLimiter({ timeoutMs: TEST_TIMEOUT_MS, redis: redisServer.io, prefix: `rw${n++}:`, limit: perHour(2), localTier: tier });
    setScriptTime(r, () => clock.now() * 1000, SCRIPT_TTL_PAD_MS);
    expect([await r.allow('k'), await r.allow('k'), await r.allow('k')]).toEqual([true, true, false]);
    expect(tier.refusedFor('k')).toBeGreaterThan(0);
    await r.reward('k', 1);
    expect(tier.refusedFor('k')).toBe(0);
    const d = await r.tryAcquire('k');
    expect(d).toMatchObject({ allowed: true, remaining: 0 });
    expect(d.degraded).toBeUndefined();
  });

  it('RedisPolicyLimiter: reward, penalty, block and unblock of the pair under the rule it matches; a sliding-log rule refuses block', async () => {
    const clock = new ManualClock(1_000_000);
    const p = new RedisPolicyLimiter({
      timeoutMs: TEST_TIMEOUT_MS,
      redis: redisServer.io, prefix: `rw${n++}:`, localTier: false,
      rules: [{ limit: perMinute(2) }, { user: 'log', algorithm: 'sliding-log', limit: perMinute(2) }],
    });
    setScriptTime(p, () => clock.now() * 1000, SCRIPT_TTL_PAD_MS);
    const acme = { user: 'acme', api: 'x' };
    expect([await p.allow(acme), await p.allow(acme), await p.allow(acme)]).toEqual([true, true, false]);
    await p.reward(acme, 1);
    expect([await p.allow(acme), await p.allow(acme)]).toEqual([true, false]);
    expect(() => p.block({ user: 'log', api: 'x' }, 1_000)).toThrow(/block\(\) is built for GCRA and window limits .*; the rule for .* runs sliding-log/);
  });

  it('an unanswered reward rejects', async () => {
    const r = new RedisRateLimiter({ redis: redisServer.io, prefix: `rw${n++}:`, limit: perMinute(5), onError: 'allow', timeoutMs: 50 });
    await r.allow('k');
    redisServer.server.process.kill('SIGSTOP');
    try {
      await expect(r.reward('k', 1)).rejects.toThrow(/Redis did not answer the reward within 50 ms \(timeoutMs\): it may or may not have been written/);
    } finally {
      redisServer.server.process.kill('SIGCONT');
    }
  });
});
