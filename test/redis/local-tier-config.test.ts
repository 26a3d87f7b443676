// A LocalTier serves one limiter configuration (docs/redis.md): its refusals and leases are
// Redis's answers under that configuration's limits. Found: nothing checked it, and a 2-per-hour
// limiter admitted 40 of 40 after a 1,000-per-hour limiter on another prefix leased 50 permits for
// the same key in the same tier. The first limiter to use a tier records its configuration's
// fingerprint in the tier's shared memory (one compare-and-exchange); a limiter of another
// configuration on that tier is refused at construction with LocalTierConfigError.
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { LocalTier, perHour, RedisPolicyLimiter, RedisRateLimiter } from '../../src/index.js';
import { LocalTierConfigError } from '../../src/redis/local-tier.js';
import { privateRedis, redisAvailable, TEST_TIMEOUT_MS } from '../helpers/redis-server.js';

const available = redisAvailable();

/**
 * A worker (the build's LocalTier, dist/) that attaches the tier of `handle`, waits at the gate
 * [ready count, open], then claims it for `config`: posts whether the claim held.
 */
const CLAIMER = `
import { parentPort, workerData } from 'node:worker_threads';
const { LocalTier } = await import(workerData.module);
const tier = LocalTier.attach(workerData.handle);
const g = new Int32Array(workerData.gate);
Atomics.add(g, 0, 1);
while (Atomics.load(g, 1) === 0) Atomics.wait(g, 1, 0, 5);
let ok = true;
try { tier.claim(workerData.config); } catch (e) { ok = e.name === 'LocalTierConfigError' ? false : String(e); }
parentPort.postMessage(ok);
`;
const TIER_MODULE = new URL('../../dist/redis/local-tier.js', import.meta.url).href;

/** Workers claiming one fresh tier at once, each for its config: whether each claim held. */
async function claimTogether(configs: string[]): Promise<unknown[]> {
  const tier = LocalTier.create({ maxKeys: 8 });
  const gate = new SharedArrayBuffer(8);
  const g = new Int32Array(gate);
  const workers = configs.map((config) => new Worker(new URL(`data:text/javascript,${encodeURIComponent(CLAIMER)}`), {
    workerData: { module: TIER_MODULE, handle: tier.handle, gate, config },
  }));
  const replies = workers.map((w) => new Promise((resolve, reject) => {
    w.once('message', resolve);
    w.once('error', reject);
  }));
  while (Atomics.load(g, 0) < configs.length) await new Promise((r) => setTimeout(r, 1));
  Atomics.store(g, 1, 1);
  Atomics.notify(g, 1);
  try {
    return await Promise.all(replies);
  } finally {
    await Promise.all(workers.map((w) => w.terminate()));
  }
}

describe('the claim of a tier across threads (the build, dist/)', () => {
  it('of threads claiming a fresh tier at once for other configurations, exactly one holds it; for one configuration, all do', async () => {
    for (let round = 0; round < 3; round++) {
      const others = await claimTogether(Array.from({ length: 4 }, (_, i) => `config ${round}/${i}`));
      expect(others.filter((r) => r === true), JSON.stringify(others)).toHaveLength(1);
      expect(others.filter((r) => r === false)).toHaveLength(3);
      expect(await claimTogether(Array.from({ length: 4 }, () => `config ${round}`))).toEqual([true, true, true, true]);
    }
  }, 60_000);
});

describe.skipIf(!available)('a LocalTier serves one limiter configuration', () => {
  const redisServer = privateRedis();

  it("a strict limiter never spends a looser limiter's lease: it is refused on the looser one's tier", async () => {
    const tier = LocalTier.create({ maxKeys: 64 });
    const loose = new RedisRateLimiter({ timeoutMs: TEST_TIMEOUT_MS, prefixCheck: 'off', redis: redisServer.io, prefix: 'loose:', limit: perHour(1_000), lease: 50, localTier: tier });
    expect((await loose.tryAcquire('k')).allowed).toBe(true); // a lease of 50 for 'k' in the tier
    let admitted = 0;
    let refused: unknown = null;
    try {
      const strict = new RedisRateLimiter({ timeoutMs: TEST_TIMEOUT_MS, prefixCheck: 'off', redis: redisServer.io, prefix: 'strict:', limit: perHour(2), lease: 2, localTier: tier });
      for (let i = 0; i < 40; i++) if ((await strict.tryAcquire('k')).allowed) admitted++;
    } catch (e) {
      refused = e;
    }
    expect(admitted).toBeLessThanOrEqual(2);
    expect(refused).toBeInstanceOf(LocalTierConfigError);
    expect((refused as Error).message).toMatch(/strict:/);
  });

  it('limiters of one configuration share a tier, on this thread and through its handle; the others are refused, naming the mismatch', () => {
    const redis = redisServer.io;
    const tier = LocalTier.create({ maxKeys: 64 });
    const options = { prefixCheck: 'off' as const, redis, prefix: 'same:', limit: perHour(5) };
    const first = new RedisRateLimiter({ timeoutMs: TEST_TIMEOUT_MS, ...options, localTier: tier });
    expect(first).toBeDefined();
    expect(() => new RedisRateLimiter({ timeoutMs: TEST_TIMEOUT_MS, ...options, localTier: tier })).not.toThrow();
    const attached = LocalTier.attach(tier.handle);
    expect(() => new RedisRateLimiter({ timeoutMs: TEST_TIMEOUT_MS, ...options, localTier: attached })).not.toThrow();
    // Another prefix, other limits, another algorithm, a cap: each another configuration.
    for (const other of [
      { ...options, prefix: 'other:' },
      { ...options, limit: perHour(6) },
      { ...options, algorithm: 'fixed-window' as const },
      { ...options, globalLimit: perHour(100) },
    ]) {
      expect(() => new RedisRateLimiter({ ...other, localTier: attached })).toThrow(LocalTierConfigError);
    }
    expect(() => new RedisRateLimiter({ ...options, prefix: 'other:', localTier: attached })).toThrow(/serves another limiter configuration/);
    expect(() => new RedisPolicyLimiter({ redis, prefix: 'same:', rules: [{ limit: perHour(5) }], localTier: attached })).toThrow(LocalTierConfigError);
  });

  it('a RedisPolicyLimiter claims its tier for its rules, and setRules moves the claim to the new rules', () => {
    const redis = redisServer.io;
    const tier = LocalTier.create({ maxKeys: 64 });
    const rulesA = [{ limit: perHour(5) }];
    const rulesB = [{ limit: perHour(7) }];
    const a = new RedisPolicyLimiter({ timeoutMs: TEST_TIMEOUT_MS, redis, prefix: 'pol:', rules: rulesA, localTier: tier });
    const b = new RedisPolicyLimiter({ timeoutMs: TEST_TIMEOUT_MS, redis, prefix: 'pol:', rules: rulesA, localTier: LocalTier.attach(tier.handle) });
    expect(() => new RedisPolicyLimiter({ redis, prefix: 'pol:', rules: rulesB, localTier: tier })).toThrow(LocalTierConfigError);
    a.setRules(rulesB);
    // b follows (the tier already serves rulesB: nothing to move).
    expect(() => b.setRules(rulesB)).not.toThrow();
    expect(() => new RedisPolicyLimiter({ timeoutMs: TEST_TIMEOUT_MS, redis, prefix: 'pol:', rules: rulesB, localTier: tier })).not.toThrow();
    expect(() => new RedisPolicyLimiter({ redis, prefix: 'pol:', rules: rulesA, localTier: tier })).toThrow(LocalTierConfigError);
    // A setRules from rules the tier no longer serves is refused, and changes nothing.
    const c = new RedisPolicyLimiter({ timeoutMs: TEST_TIMEOUT_MS, redis, prefix: 'pol:', rules: rulesB, localTier: tier });
    a.setRules([{ limit: perHour(9) }]);
    expect(() => c.setRules([{ limit: perHour(11) }])).toThrow(LocalTierConfigError);
    expect(c.rules).toEqual(rulesB.map((r) => JSON.parse(JSON.stringify(r)) as unknown));
  });
});
