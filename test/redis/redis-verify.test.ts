// verify(): the scripts load and run, and the server will not evict the limiter's keys, checked
// against a real redis-server (its own socket) and a real 3-primary cluster, through ioredis and
// node-redis.
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { perHour, PolicyLimiter, RedisConfigError, RedisPolicyLimiter, RedisRateLimiter } from '../../src/index.js';
import { startCluster, type TestCluster } from '../helpers/redis-cluster.js';
import { privateRedis, redisAvailable, TEST_TIMEOUT_MS, testClients } from '../helpers/redis-server.js';

const available = redisAvailable();

describe.skipIf(!available)('verify() on one server', () => {
  const redisServer = privateRedis();
  let n = 0;

  /** Runs `f` with the server's maxmemory-policy set to `policy`, then sets it back. */
  async function underPolicy(policy: string, f: () => Promise<void>): Promise<void> {
    await redisServer.io.call('CONFIG', 'SET', 'maxmemory-policy', policy);
    try {
      await f();
    } finally {
      await redisServer.io.call('CONFIG', 'SET', 'maxmemory-policy', 'noeviction');
    }
  }

  it.each(testClients.map((c) => [c.name, c] as const))('%s: noeviction resolves, and the probe wrote nothing but the prefix\'s record of its limits', async (_, client) => {
    const redis = await client.make(redisServer.server.socket);
    try {
      const prefix = `v${n++}:`;
      const limiter = new RedisRateLimiter({ timeoutMs: TEST_TIMEOUT_MS, redis, limit: perHour(3), prefix, localTier: false });
      expect(await limiter.verify()).toEqual({ maxmemoryPolicy: ['noeviction'], evicts: false });
      expect(await redisServer.io.keys(`${prefix}*`)).toEqual([`${prefix}{__sluice_config__}`]); // verify checks the prefix is its own
      const policy = new RedisPolicyLimiter({ timeoutMs: TEST_TIMEOUT_MS, redis, rules: [{ limit: perHour(3) }], prefix: `vp${n++}:`, localTier: false });
      expect(await policy.verify()).toEqual({ maxmemoryPolicy: ['noeviction'], evicts: false });
    } finally {
      await client.close(redis);
    }
  });

  it.each(['allkeys-lru', 'volatile-lru', 'volatile-ttl', 'allkeys-random'])('%s may evict the keys: rejects with RedisConfigError unless allowEviction', async (policy) => {
    const limiter = new RedisRateLimiter({ timeoutMs: TEST_TIMEOUT_MS, redis: redisServer.io, limit: perHour(3), prefix: `v${n++}:`, localTier: false });
    await underPolicy(policy, async () => {
      const error = await limiter.verify().then(() => null, (e: unknown) => e);
      expect(error).toBeInstanceOf(RedisConfigError);
      expect((error as RedisConfigError).redisMessage).toBe(`maxmemory-policy ${policy}`);
      expect((error as Error).message).toMatch(/^Redis may evict the limiter's keys .* set maxmemory-policy to noeviction, or pass verify\(\{ allowEviction: true \}\)/);
      expect(await limiter.verify({ allowEviction: true })).toEqual({ maxmemoryPolicy: [policy], evicts: true });
      // Decisions go on: verify() only reports.
      expect((await limiter.tryAcquire('k')).allowed).toBe(true);
    });
  });

  it('an ACL without the scripts\' commands rejects with RedisConfigError', async () => {
    const user = `vu${n++}`;
    await redisServer.io.call('ACL', 'SETUSER', user, 'on', '>secret', '~*', '+evalsha', '+eval', '+time');
    const io = new Redis({ path: redisServer.server.socket, username: user, password: 'secret', enableReadyCheck: false });
    try {
      const limiter = new RedisRateLimiter({ timeoutMs: TEST_TIMEOUT_MS, redis: io, limit: perHour(3), prefix: `v${n++}:`, localTier: false, onError: 'allow' });
      await expect(limiter.verify()).rejects.toBeInstanceOf(RedisConfigError);
    } finally {
      io.disconnect();
    }
  });

  it("the ACL of docs/redis.md, without +info: the scripts run, the policy is unknown (null), not an error", async () => {
    const user = `vk${n++}`;
    const prefix = `vk${n++}:`;
    await redisServer.io.call('ACL', 'SETUSER', user, 'on', '>secret', `~${prefix}*`,
      ...'+evalsha +eval +time +get +set +del +pexpire +pttl +rpush +lrem +ltrim +llen +lindex'.split(' '));
    const io = new Redis({ path: redisServer.server.socket, username: user, password: 'secret', enableReadyCheck: false });
    try {
      const limiter = new RedisRateLimiter({ timeoutMs: TEST_TIMEOUT_MS, redis: io, limit: perHour(3), prefix, localTier: false });
      expect(await limiter.verify()).toEqual({ maxmemoryPolicy: null, evicts: null });
      // With +info, the policy is read.
      await redisServer.io.call('ACL', 'SETUSER', user, '+info');
      expect(await limiter.verify()).toEqual({ maxmemoryPolicy: ['noeviction'], evicts: false });
    } finally {
      io.disconnect();
    }
  });

  it('Redis not answering: rejects (onError allow and local alike), naming the outage', async () => {
    const away = { async call() { throw new Error('Connection is closed.'); } };
    for (const onError of ['allow', 'deny'] as const) {
      const limiter = new RedisRateLimiter({ timeoutMs: TEST_TIMEOUT_MS, redis: away, limit: perHour(3), localTier: false, onError });
      await expect(limiter.verify()).rejects.toThrow(/^Redis did not answer the verification probe/);
    }
    const local = new RedisPolicyLimiter({ timeoutMs: TEST_TIMEOUT_MS, redis: away, rules: [{ limit: perHour(3) }], localTier: false, onError: 'local', local: new PolicyLimiter({ rules: [{ limit: perHour(3) }], maxKeys: 16 }) });
    await expect(local.verify()).rejects.toThrow(/^Redis did not answer/);
  });

  it.each<[unknown, ErrorConstructor, RegExp]>([
    [null, TypeError, /^options must be an object like \{ allowEviction \}, got null$/],
    [{ allowEviction: 'yes' }, TypeError, /^options\.allowEviction must be a boolean, got "yes"$/],
    [{ allowEvictions: true }, TypeError, /allowEvictions/],
  ])('bad options reject by name: %j', async (options, type, message) => {
    const limiter = new RedisRateLimiter({ timeoutMs: TEST_TIMEOUT_MS, redis: redisServer.io, limit: perHour(3), prefix: `v${n++}:`, localTier: false });
    const error = await limiter.verify(options as never).then(() => null, (e: unknown) => e);
    expect(error).toBeInstanceOf(type);
    expect((error as Error).message).toMatch(message);
  });
});

describe.skipIf(!available)('verify() on a cluster', () => {
  let cluster: TestCluster;
  beforeAll(async () => {
    cluster = await startCluster();
  }, 30_000);
  afterAll(async () => {
    await cluster?.stop();
  });

  it('reads every primary\'s policy: one evicting node is enough to reject', async () => {
    const io = await cluster.ioredis();
    const node = await cluster.nodeRedis();
    try {
      for (const redis of [io, node]) {
        const limiter = new RedisRateLimiter({ timeoutMs: TEST_TIMEOUT_MS, redis, limit: perHour(3), prefix: 'vc:', localTier: false });
        expect(await limiter.verify()).toEqual({ maxmemoryPolicy: ['noeviction'], evicts: false });
      }
      // The last primary (the last third of the slots) evicts.
      const last = cluster.nodes[2] as { host: string; port: number };
      const admin = new Redis({ host: last.host, port: last.port });
      try {
        await admin.call('CONFIG', 'SET', 'maxmemory-policy', 'allkeys-lfu');
        for (const redis of [io, node]) {
          const limiter = new RedisRateLimiter({ timeoutMs: TEST_TIMEOUT_MS, redis, limit: perHour(3), prefix: 'vc:', localTier: false });
          await expect(limiter.verify()).rejects.toThrow(/maxmemory-policy allkeys-lfu$/);
          expect(await limiter.verify({ allowEviction: true })).toEqual({ maxmemoryPolicy: ['allkeys-lfu', 'noeviction'], evicts: true });
        }
      } finally {
        await admin.call('CONFIG', 'SET', 'maxmemory-policy', 'noeviction');
        admin.disconnect();
      }
    } finally {
      io.disconnect();
      await node.close();
    }
  });
});
