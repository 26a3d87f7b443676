// The Redis limiters' input handling: keys two user keys share on Redis, a valid cost
// that throws with leases on, and a setRules that half-applies. Real redis-server on its own socket.
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { LocalTier, ManualClock, perHour, perMinute, RateLimiter, RedisPolicyLimiter, RedisRateLimiter, type PolicyRule } from '../../src/index.js';
import { setScriptTime } from '../../src/redis/redis-core.js';
import { privateRedis, redisAvailable, SCRIPT_TTL_PAD_MS, TEST_TIMEOUT_MS } from '../helpers/redis-server.js';

const available = redisAvailable();

describe.skipIf(!available)('input to the Redis limiters', () => {
  const redisServer = privateRedis();
  let n = 0;


  it('a key with a lone surrogate is refused (as RateLimiter does), never merged with another key', async () => {
    // The shared-memory limiter refuses it: UTF-8 would store it as U+FFFD.
    const memory = new RateLimiter({ limit: perHour(1), maxKeys: 4 });
    expect(() => memory.tryAcquire('user\ud800')).toThrow(TypeError);
    const r = new RedisRateLimiter({ timeoutMs: TEST_TIMEOUT_MS, redis: redisServer.io, prefix: `ai${n++}:`, localTier: false, limit: perHour(1) });
    let threw = false;
    try {
      await r.tryAcquire('user\ud800');
    } catch (e) {
      threw = e instanceof TypeError;
    }
    // Either refused as bad input, or (at the very least) kept apart from a different key.
    if (!threw) {
      // 'user\ud800' spent the hour's permit of... 'user\ufffd', a different, well-formed key.
      const other = await r.tryAcquire('user\ufffd');
      expect(other.allowed, "'user\\ufffd' was refused: 'user\\ud800' spent its permit on Redis").toBe(true);
    }
    expect(threw, 'RedisRateLimiter.tryAcquire accepted a key with a lone surrogate').toBe(true);
  });

  it('with leases on, a valid cost over the lease word\'s 20 bits answers, as without leases', async () => {
    const prefix = `ai${n++}:`;
    const plain = new RedisRateLimiter({ timeoutMs: TEST_TIMEOUT_MS, redis: redisServer.io, prefix, localTier: false, limit: perHour(10) });
    const leased = new RedisRateLimiter({ timeoutMs: TEST_TIMEOUT_MS, redis: redisServer.io, prefix, lease: 5, limit: perHour(10) });
    const cost = 2_000_000; // a safe integer: checkRequest accepts it
    expect(await plain.tryAcquire('k', cost)).toMatchObject({ allowed: false, reason: 'exceeds-burst' });
    let answer: unknown;
    try {
      answer = await leased.tryAcquire('k', cost);
    } catch (e) {
      answer = e;
    }
    expect(answer, `with lease: ${String(answer)}`).toMatchObject({ allowed: false, reason: 'exceeds-burst' });
  });

  it("setRules that the 'local' fallback refuses throws, and then nothing has changed", () => {
    // onError 'local' makes a PolicyLimiter of its own, sized for the first rules (16 state words).
    const dead = new Redis({ path: '/nonexistent/redis.sock', lazyConnect: true, maxRetriesPerRequest: 0, enableOfflineQueue: false });
    dead.on('error', () => {});
    try {
      const first: PolicyRule[] = [{ limit: perMinute(5) }];
      const p = new RedisPolicyLimiter({ timeoutMs: TEST_TIMEOUT_MS, redis: dead, rules: first, onError: 'local' });
      // Valid for Redis (a log of 100 stamps, maxLogSize 1000); the fallback needs more words.
      const next: PolicyRule[] = [{ limit: perMinute(5) }, { user: 'u', algorithm: 'sliding-log', limit: { permits: 100, periodMs: 60_000 } }];
      let error: unknown = null;
      try {
        p.setRules(next);
      } catch (e) {
        error = e;
      }
      if (error !== null) {
        // It threw: "then nothing changes" (redis-policy-limiter.ts) must hold.
        expect(p.rules, `setRules threw (${String(error)}) yet the Redis rules changed`).toEqual(first);
        // And the error must name an option this limiter has.
        expect(String(error)).not.toMatch(/option maxStateWords/);
      }
      expect(error).toBeNull();
    } finally {
      dead.disconnect();
    }
  });

  it('setRules: a sliding log starts afresh under another period, as docs/redis.md says', async () => {
    // docs/redis.md: "a window keeps its count under the same period and algorithm and starts afresh
    // under another". The sliding log's key has no period in it (sl:0): its stamps carry over.
    const clock = new ManualClock(5_000_000);
    const log = (periodMs: number): PolicyRule[] => [{ algorithm: 'sliding-log', limit: { permits: 2, periodMs } }];
    const p = new RedisPolicyLimiter({ timeoutMs: TEST_TIMEOUT_MS, redis: redisServer.io, prefix: `ai${n++}:`, localTier: LocalTier.create({ clock }), rules: log(3_600_000) });
    setScriptTime(p, () => clock.now() * 1000, SCRIPT_TTL_PAD_MS);
    const u = { user: 'u', api: 'a' };
    expect(await p.allow(u)).toBe(true);
    expect(await p.allow(u)).toBe(true);
    expect(await p.allow(u)).toBe(false);
    clock.advance(1);
    p.setRules(log(7_200_000)); // another period
    expect(await p.allow(u), 'the two-hour log counted the one-hour log\'s stamps').toBe(true);
  });
});

describe('a caller whose answer throws, in a batch with others', () => {
  it("only that caller's promise rejects: the rest of the batch is answered", async () => {
    // A client stand-in whose every call fails, so each decision asks onError's local limiter,
    // and a local limiter that throws for one key.
    const failing = { call: () => Promise.reject(new Error('connection lost')) };
    class Throwing extends RateLimiter {
      override tryAcquire(key: string, cost?: number) {
        if (key === 'bad') throw new Error('local limiter failed');
        return super.tryAcquire(key, cost);
      }
    }
    const local = new Throwing({ limit: perHour(5), maxKeys: 8 });
    const r = new RedisRateLimiter({ timeoutMs: TEST_TIMEOUT_MS, redis: failing, limit: perHour(5), onError: 'local', local, localTier: false });
    // Asked in one tick: one script call for the three.
    const answers = await Promise.allSettled([r.tryAcquire('a'), r.tryAcquire('bad'), r.tryAcquire('b')]);
    expect(answers.map((a) => a.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect((answers[1] as PromiseRejectedResult).reason).toEqual(new Error('local limiter failed'));
    for (const i of [0, 2]) expect((answers[i] as PromiseFulfilledResult<{ allowed: boolean; degraded?: boolean }>).value).toMatchObject({ allowed: true, degraded: true });
  });
});
