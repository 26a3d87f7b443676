// RedisRateLimiter and RedisPolicyLimiter on a real three-node Redis Cluster, over both cluster
// clients: decisions batched per slot, keys on every node, the global cap on its own node (spent
// first, given back when the key refuses), and the same exact counts as on one server.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalTier, ManualClock, perDay, perHour, perMinute, RedisPolicyLimiter, RedisRateLimiter, type RedisRateLimiterOptions } from '../../src/index.js';
import { setScriptTime } from '../../src/redis/redis-core.js';
import { keepRedisSpends, redisSpendGiveBack } from '../../src/redis/redis-rate-limiter.js';
import { keySlot } from '../../src/redis/key-slot.js';
import { redisAvailable, startCluster, type TestCluster } from '../helpers/redis-cluster.js';
import { SCRIPT_TTL_PAD_MS } from '../helpers/redis-server.js';

const available = redisAvailable();

describe.skipIf(!available)('Redis limiters on a Cluster', () => {
  let cluster: TestCluster;
  const clients: { name: string; client: unknown; close(): Promise<void> }[] = [];
  let n = 0;

  beforeAll(async () => {
    cluster = await startCluster();
    const io = await cluster.ioredis();
    const node = await cluster.nodeRedis();
    clients.push(
      { name: 'ioredis', client: io, close: async () => { io.disconnect(); } },
      { name: 'node-redis', client: node, close: async () => { await node.close(); } },
    );
  }, 30_000);
  afterAll(async () => {
    for (const c of clients) await c.close().catch(() => {});
    await cluster?.stop();
  });

  const each = (name: string, fn: (client: unknown) => Promise<void>) => {
    it.each(['ioredis', 'node-redis'])(`${name} (%s)`, async (which) => fn((clients.find((c) => c.name === which) as { client: unknown }).client));
  };
  // A deadline no busy machine misses: a fresh limiter's first calls also read each node's clock
  // and load the script there (found at the default 500 ms: node-redis's 300 calls in flight on a
  // fresh cluster answered by onError, 0 of 3 admitted for a key). These tests count decisions,
  // not deadlines.
  const make = (redis: unknown, options: Omit<RedisRateLimiterOptions, 'redis'>) => new RedisRateLimiter({ prefixCheck: 'off', redis, prefix: `c${n++}:`, timeoutMs: 5_000, ...options });

  each('keys on every node: each exact, decisions in flight batched per slot', async (redis) => {
    const r = make(redis, { limit: perDay(3) });
    const keys = Array.from({ length: 60 }, (_, i) => `user:${i}`);
    // Every node serves some of them.
    const nodes = new Set(keys.map((k) => cluster.nodeOfSlot(keySlot(`c${n - 1}:{${k}}:0/1`)).port));
    expect(nodes.size).toBe(3);
    const answers = await Promise.all(keys.flatMap((k) => Array.from({ length: 5 }, () => r.tryAcquire(k))));
    for (let i = 0; i < keys.length; i++) {
      const mine = answers.slice(i * 5, i * 5 + 5);
      expect(mine.filter((d) => d.allowed)).toHaveLength(3);
      expect(mine.some((d) => d.degraded)).toBe(false);
    }
  });

  each('reset: every limit\'s key of a key deleted in one call, on whichever node serves it', async (redis) => {
    for (const algorithm of ['gcra', 'sliding-log'] as const) {
      const r = make(redis, { algorithm, limit: [perHour(4), perMinute(2)], localTier: false });
      const keys = Array.from({ length: 12 }, (_, i) => `rk:${i}`); // on every node
      for (const k of keys) {
        await r.allow(k);
        await r.allow(k);
      }
      for (const k of keys) expect(await r.allow(k), algorithm).toBe(false);
      for (const k of keys) expect(await r.reset(k), algorithm).toBe(true);
      for (const k of keys) expect(await r.get(k), algorithm).toMatchObject({ remaining: 2, resetAfterMs: 0 });
      expect(await r.reset('rk:0'), algorithm).toBe(false);
    }
  });

  // The key's reset mark (lua-gcra.ts) is not one of the script's KEYS: it shares the key's hash
  // tag, so the node that serves the key holds it. A give-back after a reset or a block of its
  // key gives nothing, on every node.
  each('GCRA: a give-back after a reset or a block of its key gives nothing, on whichever node serves it', async (redis) => {
    const r = make(redis, { limit: perHour(2), localTier: false });
    const clock = new ManualClock(1_000_000); // stands still: a spend is whole when given back
    setScriptTime(r, () => clock.now() * 1000, SCRIPT_TTL_PAD_MS);
    keepRedisSpends(r);
    const keys = Array.from({ length: 12 }, (_, i) => `gb:${i}`); // on every node
    for (const [i, k] of keys.entries()) {
      const d = await r.tryAcquire(k);
      expect(d.allowed).toBe(true);
      const back = redisSpendGiveBack(r, d, k, 1) as () => Promise<void>;
      if (i % 2 === 0) {
        expect(await r.reset(k)).toBe(true);
        expect(await r.allow(k)).toBe(true);
        expect(await r.allow(k)).toBe(true);
        await back();
        expect(await r.allow(k), k).toBe(false);
      } else {
        await r.block(k, 60_000);
        await back();
        expect(await r.get(k), k).toMatchObject({ remaining: 0 });
      }
    }
    // Without a reset, a give-back gives its spend back there too.
    const d = await r.tryAcquire('gb:whole');
    await (redisSpendGiveBack(r, d, 'gb:whole', 1) as () => Promise<void>)();
    expect(await r.get('gb:whole')).toMatchObject({ remaining: 2 });
  });

  each('every algorithm and several limits on a Cluster', async (redis) => {
    for (const algorithm of ['gcra', 'fixed-window', 'sliding-window', 'sliding-log'] as const) {
      const r = make(redis, { algorithm, limit: [perHour(4), perMinute(3)] });
      // The windows start on the minute (Redis's clock, this machine's): five calls that straddle
      // one may take a fourth in the next minute's window (found beside two busy loops). Such a
      // run goes again on a new key, up to three times.
      let got: boolean[] = [];
      for (let attempt = 0; attempt < 3; attempt++) {
        const start = Date.now();
        got = [];
        for (let i = 0; i < 5; i++) got.push((await r.tryAcquire(`k-${algorithm}-${attempt}`)).allowed);
        if (Math.floor(start / 60_000) === Math.floor(Date.now() / 60_000)) break;
      }
      expect(got, algorithm).toEqual([true, true, true, false, false]);
    }
  });

  each('a global cap lives on its own node: spent first, given back when the key refuses', async (redis) => {
    const r = make(redis, { limit: perDay(2), globalLimit: perDay(5) });
    // user:a takes 2; its third is refused by its own limit and the cap gets it back.
    const a = [];
    for (let i = 0; i < 4; i++) a.push(await r.tryAcquire('user:a'));
    expect(a.map((d) => d.allowed)).toEqual([true, true, false, false]);
    expect(a[2]?.reason).toBe('limited');
    // So 3 of the cap's 5 are left: user:b gets 2, user:c 1, then the cap refuses.
    const rest = [];
    for (const k of ['user:b', 'user:b', 'user:c', 'user:d']) rest.push(await r.tryAcquire(k));
    expect(rest.map((d) => d.allowed)).toEqual([true, true, true, false]);
    expect(rest[3]?.reason).toBe('global-limit');
  });

  each('many keys at once with a cap: the cap admits exactly its limit', async (redis) => {
    const r = make(redis, { limit: perDay(1_000), globalLimit: perDay(50) });
    const answers = await Promise.all(Array.from({ length: 200 }, (_, i) => r.tryAcquire(`k${i % 40}`)));
    expect(answers.filter((d) => d.allowed)).toHaveLength(50);
    expect(answers.filter((d) => d.degraded)).toHaveLength(0);
  });

  each('leases with the cap on its own node: the cap gets back what the key did not grant', async (redis) => {
    const clock = new ManualClock(1_000_000);
    const prefix = `cl${n++}:`;
    const options = { limit: perDay(5), globalLimit: perDay(100) };
    const r = new RedisRateLimiter({ prefixCheck: 'off', redis, prefix, localTier: LocalTier.create({ clock }), lease: 10, timeoutMs: 5_000, ...options });
    // Its probes read the cap: its key's own limit is larger than anything left on the cap.
    const plain = new RedisRateLimiter({ prefixCheck: 'off', redis, prefix, localTier: false, limit: perDay(1_000), globalLimit: options.globalLimit, timeoutMs: 5_000 });
    setScriptTime(r, () => clock.now() * 1000, SCRIPT_TTL_PAD_MS);
    setScriptTime(plain, () => clock.now() * 1000, SCRIPT_TTL_PAD_MS);
    const got = [];
    for (let i = 0; i < 8; i++) got.push((await r.tryAcquire('k')).allowed);
    // The first call leased 10 from the cap and 5 from the key (all it holds): 5 admitted, the
    // cap got 5 back.
    expect(got).toEqual([true, true, true, true, true, false, false, false]);
    expect((await plain.tryAcquire('other', 0)).remaining).toBe(95);
    // Another key leases its own 5 the same way.
    for (let i = 0; i < 5; i++) expect((await r.tryAcquire('k2')).allowed).toBe(true);
    expect((await plain.tryAcquire('other', 0)).remaining).toBe(90);
  });

  each('RedisPolicyLimiter on a Cluster', async (redis) => {
    const p = new RedisPolicyLimiter({ redis, prefix: `cp${n++}:`, rules: [{ limit: perDay(1) }, { user: 'vip', limit: perDay(3) }], timeoutMs: 5_000 });
    const vip = [];
    for (let i = 0; i < 4; i++) vip.push((await p.tryAcquire({ user: 'vip', api: 'x' })).allowed);
    expect(vip).toEqual([true, true, true, false]);
    expect((await p.tryAcquire({ user: 'joe', api: 'x' })).allowed).toBe(true);
    expect((await p.tryAcquire({ user: 'joe', api: 'x' })).allowed).toBe(false);
  });
});
