// One decision's misconfiguration in a batch fails that decision alone. Found: another program's
// value under one key (WRONGTYPE), among 40 tryAcquire calls at once on one server, took 9
// healthy keys of its batch down with it (10 rejected with RedisConfigError), and the keys before
// it in the batch had been written: their spend counted while their callers were told the call
// failed (under-admission; a caller who retried counted twice). The batch script now catches each
// decision's error, answers it for that decision alone and goes on with the next (limits-script.ts,
// luaDecisionLoop): a decision reads all its keys before it writes any, so the failed one wrote
// nothing, and every other decision is answered as Redis applied it, once. A real redis-server on
// its own socket, both clients.
import { describe, expect, it } from 'vitest';
import { perHour, RedisConfigError, RedisPolicyLimiter, RedisRateLimiter, type AlgorithmName, type Decision } from '../../src/index.js';
import { batchOutcomes, DecisionError } from '../../src/redis/script-batcher.js';
import { redisLimit, scriptPlan } from '../../src/redis/redis-limits.js';
import { privateRedis, redisAvailable, TEST_TIMEOUT_MS, testClients } from '../helpers/redis-server.js';

const available = redisAvailable();

const ALGORITHMS: AlgorithmName[] = ['gcra', 'fixed-window', 'sliding-window', 'sliding-log'];
const CALLS = 40;
const BAD = 7; // the bad key's place among the calls: mid-batch, healthy keys before and after it

type Outcome = { ok: Decision } | { error: unknown };

async function settle(calls: Promise<Decision>[]): Promise<Outcome[]> {
  return Promise.all(calls.map((c) => c.then((ok) => ({ ok }), (error: unknown) => ({ error }))));
}

describe.skipIf(!available).each(testClients)('a misconfigured key in a batch, over $name', (client) => {
  const redisServer = privateRedis();
  let n = 0;

  /** Puts another program's value under every Redis key of `key` (a list, or a string where the limiter keeps a list). */
  async function spoil(limiter: RedisRateLimiter, prefix: string, key: string, algorithm: AlgorithmName): Promise<void> {
    expect(await limiter.allow(key)).toBe(true); // writes the key's Redis keys, to find them
    const keys = (await redisServer.io.call('KEYS', `${prefix}{${key}}:*`)) as string[];
    expect(keys.length).toBeGreaterThan(0);
    for (const k of keys) {
      await redisServer.io.del(k);
      if (algorithm === 'sliding-log') await redisServer.io.set(k, 'not a limiter state');
      else await redisServer.io.rpush(k, 'not a limiter state');
    }
  }

  it.each(ALGORITHMS.flatMap((algorithm) => [[algorithm, false], [algorithm, true]] as const))(
    '%s (global cap: %s): 40 calls at once, one on a WRONGTYPE key: that one rejects, every other is admitted and counted once',
    async (algorithm, capped) => {
      const io = await client.make(redisServer.server.socket);
      try {
        const prefix = `be${n++}:`;
        const limit = perHour(5);
        const limiter = new RedisRateLimiter({
          timeoutMs: TEST_TIMEOUT_MS,
          redis: io, algorithm, limit, prefix, prefixCheck: 'off', localTier: false, ...(capped ? { globalLimit: perHour(1_000) } : {}),
        });
        await spoil(limiter, prefix, 'bad', algorithm);
        const keys = Array.from({ length: CALLS }, (_, i) => (i === BAD ? 'bad' : `ok${i}`));
        const outcomes = await settle(keys.map((k) => limiter.tryAcquire(k)));
        const bad = outcomes[BAD] as Outcome;
        expect('error' in bad && bad.error).toBeInstanceOf(RedisConfigError);
        expect('error' in bad && (bad.error as RedisConfigError).redisMessage).toMatch(/^WRONGTYPE/);
        const healthy = outcomes.filter((_, i) => i !== BAD);
        const rejected = healthy.filter((o) => 'error' in o).map((o) => String((o as { error: unknown }).error));
        expect(rejected, 'healthy keys rejected').toEqual([]);
        expect(healthy.map((o) => 'ok' in o && o.ok.allowed && o.ok.remaining)).toEqual(Array(CALLS - 1).fill(4));
        // Each healthy key counted once on Redis: its next admission leaves 3.
        for (const [i, k] of keys.entries()) {
          if (i !== BAD) expect(await limiter.tryAcquire(k), k).toMatchObject({ allowed: true, remaining: 3 });
        }
        await expect(limiter.tryAcquire('bad')).rejects.toThrow(RedisConfigError);
      } finally {
        await client.close(io);
      }
    },
  );

  it('a batch of controls and give-backs: the bad key rejects, the others apply once', async () => {
    const io = await client.make(redisServer.server.socket);
    try {
      const prefix = `bc${n++}:`;
      const limiter = new RedisRateLimiter({ timeoutMs: TEST_TIMEOUT_MS, redis: io, limit: perHour(5), prefix, prefixCheck: 'off', localTier: false });
      await spoil(limiter, prefix, 'bad', 'gcra');
      const keys = Array.from({ length: 12 }, (_, i) => (i === 5 ? 'bad' : `k${i}`));
      for (const k of keys) if (k !== 'bad') await limiter.tryAcquire(k, 3); // 2 left each
      const rewards = await Promise.all(keys.map((k) => limiter.reward(k, 1).then(() => 'ok', (e: unknown) => e)));
      expect(rewards[5]).toBeInstanceOf(RedisConfigError);
      expect(rewards.filter((_, i) => i !== 5)).toEqual(Array(11).fill('ok'));
      for (const k of keys) if (k !== 'bad') expect((await limiter.get(k)).remaining, k).toBe(3);
    } finally {
      await client.close(io);
    }
  });

  it('RedisPolicyLimiter: the same, one rule', async () => {
    const io = await client.make(redisServer.server.socket);
    try {
      const prefix = `bp${n++}:`;
      const p = new RedisPolicyLimiter({ timeoutMs: TEST_TIMEOUT_MS, redis: io, prefix, localTier: false, rules: [{ algorithm: 'fixed-window', limit: perHour(5) }] });
      // A pair's keys: found as above, from one admission.
      expect(await p.allow({ user: 'bad', api: 'a' })).toBe(true);
      const found = (await redisServer.io.call('KEYS', `${prefix}*bad*`)) as string[];
      expect(found.length).toBeGreaterThan(0);
      for (const k of found) {
        await redisServer.io.del(k);
        await redisServer.io.rpush(k, 'x');
      }
      const users = Array.from({ length: 20 }, (_, i) => (i === 3 ? 'bad' : `u${i}`));
      const outcomes = await settle(users.map((user) => p.tryAcquire({ user, api: 'a' })));
      expect('error' in (outcomes[3] as Outcome) && (outcomes[3] as { error: unknown }).error).toBeInstanceOf(RedisConfigError);
      expect(outcomes.filter((_, i) => i !== 3).map((o) => 'ok' in o && o.ok.remaining)).toEqual(Array(19).fill(4));
    } finally {
      await client.close(io);
    }
  });
});

describe("a batch reply's errors, read", () => {
  const plan = scriptPlan([redisLimit('gcra', perHour(5), 'limit', 1)], [], 'r:');
  const now = 1_700_000_000_000_000;

  it('messages lead the reply, in the order of the decisions that failed; each ERROR status takes the next', () => {
    const out = batchOutcomes(['WRONGTYPE Operation against a key holding the wrong kind of value', 'OOM x', 5, 4, 100, 6, 6, now], plan, [1, 1, 1]);
    expect(out[0]).toMatchObject({ status: 0, remaining: 4, resetUs: 100 });
    expect(out[1]).toBeInstanceOf(DecisionError);
    expect((out[1] as DecisionError).message).toMatch(/^WRONGTYPE/);
    expect(out[2]).toBeInstanceOf(DecisionError);
    expect((out[2] as DecisionError).message).toBe('OOM x');
  });

  it('a reply whose messages and ERROR statuses do not match is malformed', () => {
    expect(() => batchOutcomes(['WRONGTYPE x', 5, 4, 100, now], plan, [1])).toThrow(/malformed/);
    expect(() => batchOutcomes([6, now], plan, [1])).toThrow(/malformed/);
    expect(() => batchOutcomes([5, 'WRONGTYPE x', 100, now], plan, [1])).toThrow(/malformed/);
  });
});
