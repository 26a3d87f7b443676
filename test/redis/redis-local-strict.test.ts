// onError 'local' promises (docs/redis.md) that the shared-memory limiter answering during an
// outage is no looser than the Redis limits. Found: RedisPolicyLimiter took a 1,000-per-hour local
// PolicyLimiter in front of a 1-per-hour rule (20 of 20 admitted during an outage), and neither
// Redis limiter looked at the local limiter's onFull: under 'allow' a full table lets new keys
// through untracked (20 of 20 at 1 per hour). Both are refused at construction now, and a
// RedisPolicyLimiter whose shared local limiter was given looser rules since (by another
// instance's setRules) refuses to answer from it.
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { perHour, perMinute, PolicyLimiter, RateLimiter, RedisPolicyLimiter, RedisRateLimiter, type PolicyRule } from '../../src/index.js';
import { TEST_TIMEOUT_MS } from '../helpers/redis-server.js';

/** A client with no server behind it: every call fails at once. */
function dead(): Redis {
  const r = new Redis({ path: '/nonexistent/redis.sock', lazyConnect: true, maxRetriesPerRequest: 0, enableOfflineQueue: false });
  r.on('error', () => {}); // no server there, on purpose
  return r;
}

const policyLocal = (rules: PolicyRule[], more: object = {}) => new PolicyLimiter({ rules, maxKeys: 64, ...more });

describe("RedisPolicyLimiter, onError 'local': the local PolicyLimiter must be as strict as the rules", () => {
  it.each([
    ['a higher rate for every pair', [{ limit: perHour(1_000) }], [{ limit: perHour(1) }], /options\.local.*default rule/s],
    ['a user rule looser than the default the Redis rules give that user', [{ limit: perHour(1) }, { user: 'vip', limit: perHour(1_000) }], [{ limit: perHour(1) }],
      /options\.local.*user "vip"/s],
    ['an api rule that wins over the Redis user rule', [{ limit: perHour(1) }, { api: 'search', limit: perHour(1_000) }], [{ limit: perHour(1_000) }, { user: 'u', limit: perHour(1) }],
      /options\.local.*user "u".*api "search"/s],
    ['another algorithm', [{ algorithm: 'fixed-window', limit: perHour(1) }], [{ limit: perHour(1) }], /options\.local.*'fixed-window'.*'gcra'/s],
    ['a limit missing', [{ limit: perMinute(1) }], [{ limit: [perMinute(1), perHour(1)] }], /options\.local.*no limit as strict/s],
  ] as [string, PolicyRule[], PolicyRule[], RegExp][])('a local limiter with %s is refused at construction', (_, localRules, rules, message) => {
    const redis = dead();
    try {
      const local = policyLocal(localRules);
      const make = () => new RedisPolicyLimiter({ timeoutMs: TEST_TIMEOUT_MS, redis, rules, onError: 'local', local, localTier: false });
      expect(make).toThrow(RangeError);
      expect(make).toThrow(message);
    } finally {
      redis.disconnect();
    }
  });

  it.each([
    ['the same rules', [{ limit: perHour(1) }, { user: 'vip', limit: perHour(5) }], [{ limit: perHour(1) }, { user: 'vip', limit: perHour(5) }]],
    ['stricter rules, and a rule of its own for a pair', [{ limit: perHour(1) }, { user: 'vip', api: 'x', limit: perHour(1) }], [{ limit: perHour(2) }, { user: 'vip', limit: perHour(5) }]],
  ] as [string, PolicyRule[], PolicyRule[]][])('a local limiter with %s is accepted', (_, localRules, rules) => {
    const redis = dead();
    try {
      const local = policyLocal(localRules);
      expect(() => new RedisPolicyLimiter({ timeoutMs: TEST_TIMEOUT_MS, redis, rules, onError: 'local', local, localTier: false })).not.toThrow();
    } finally {
      redis.disconnect();
    }
  });

  it('during an outage, a 1,000-per-hour local limiter never stands in for a 1-per-hour rule', async () => {
    const redis = dead();
    try {
      const local = policyLocal([{ limit: perHour(1_000) }]);
      let admitted = 0;
      try {
        const r = new RedisPolicyLimiter({ redis, rules: [{ limit: perHour(1) }], onError: 'local', local, localTier: false, timeoutMs: 50 });
        for (let i = 0; i < 20; i++) if ((await r.tryAcquire({ user: 'u', api: 'a' })).allowed) admitted++;
      } catch (e) {
        expect(e).toBeInstanceOf(RangeError);
      }
      expect(admitted).toBeLessThanOrEqual(1);
    } finally {
      redis.disconnect();
    }
  });

  it("a shared local limiter given looser rules by another instance's setRules is not asked: the decision rejects, naming options.local", async () => {
    const redis = dead();
    try {
      const local = policyLocal([{ limit: perHour(1) }]);
      const strict = new RedisPolicyLimiter({ redis, rules: [{ limit: perHour(1) }], onError: 'local', local, localTier: false, timeoutMs: 50 });
      const other = new RedisPolicyLimiter({ redis, rules: [{ limit: perHour(1) }], onError: 'local', local, localTier: false, timeoutMs: 50 });
      // The other instance's new rules go to the shared local limiter too.
      other.setRules([{ limit: perHour(1_000) }]);
      expect((await other.tryAcquire({ user: 'u', api: 'a' })).allowed).toBe(true);
      let admitted = 0;
      for (let i = 0; i < 20; i++) {
        const d = await strict.tryAcquire({ user: 'u', api: 'a' }).catch((e: unknown) => e);
        if (d instanceof Error) {
          expect(d).toBeInstanceOf(RangeError);
          expect(d.message).toMatch(/options\.local/);
        } else if ((d as { allowed: boolean }).allowed) admitted++;
      }
      expect(admitted).toBe(0);
      // Its own setRules puts its rules in the local limiter again: answered from it once more.
      strict.setRules([{ limit: perHour(2) }]);
      const answers = [];
      for (let i = 0; i < 3; i++) answers.push(await strict.tryAcquire({ user: 'v', api: 'a' }));
      expect(answers.map((d) => d.allowed)).toEqual([true, true, false]);
      expect(answers.every((d) => d.degraded === true)).toBe(true);
    } finally {
      redis.disconnect();
    }
  });
});

describe("onError 'local': a local limiter whose full table admits (onFull 'allow') is refused", () => {
  it('RedisRateLimiter', () => {
    const redis = dead();
    try {
      const local = new RateLimiter({ limit: perHour(1), maxKeys: 8, onFull: 'allow' });
      const make = () => new RedisRateLimiter({ timeoutMs: TEST_TIMEOUT_MS, prefixCheck: 'off', redis, limit: perHour(1), onError: 'local', local, localTier: false });
      expect(make).toThrow(RangeError);
      expect(make).toThrow(/options\.local.*onFull 'allow'/s);
      // Attached on another thread's handle: the table's header says so too.
      expect(() => new RedisRateLimiter({ timeoutMs: TEST_TIMEOUT_MS, prefixCheck: 'off', redis, limit: perHour(1), onError: 'local', local: RateLimiter.attach(local.handle), localTier: false }))
        .toThrow(/onFull 'allow'/);
      // onFull 'deny' (the default) is accepted.
      expect(() => new RedisRateLimiter({
        timeoutMs: TEST_TIMEOUT_MS,
        prefixCheck: 'off', redis, limit: perHour(1), onError: 'local', local: new RateLimiter({ limit: perHour(1), maxKeys: 8 }), localTier: false,
      })).not.toThrow();
    } finally {
      redis.disconnect();
    }
  });

  it('RedisPolicyLimiter', () => {
    const redis = dead();
    try {
      const rules = [{ limit: perHour(1) }];
      const make = () => new RedisPolicyLimiter({ timeoutMs: TEST_TIMEOUT_MS, redis, rules, onError: 'local', local: policyLocal(rules, { onFull: 'allow' }), localTier: false });
      expect(make).toThrow(RangeError);
      expect(make).toThrow(/options\.local.*onFull 'allow'/s);
      expect(() => new RedisPolicyLimiter({ timeoutMs: TEST_TIMEOUT_MS, redis, rules, onError: 'local', local: policyLocal(rules), localTier: false })).not.toThrow();
    } finally {
      redis.disconnect();
    }
  });

  it("during an outage, a full table under onFull 'allow' would have admitted keys again and again: it is never asked", async () => {
    const redis = dead();
    try {
      const local = new RateLimiter({ limit: perHour(1), maxKeys: 8, onFull: 'allow' });
      const keys = Array.from({ length: 200 }, (_, i) => `k${i}`);
      let again = 0;
      try {
        const r = new RedisRateLimiter({ prefixCheck: 'off', redis, limit: perHour(1), onError: 'local', local, localTier: false, timeoutMs: 50 });
        for (const k of keys) await r.tryAcquire(k);
        // Each key's second request in the hour: a limiter that tracks them refuses every one.
        for (const k of keys) if ((await r.tryAcquire(k)).allowed) again++;
      } catch (e) {
        expect(e).toBeInstanceOf(RangeError);
      }
      expect(again).toBe(0);
    } finally {
      redis.disconnect();
    }
  });
});
