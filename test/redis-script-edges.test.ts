// The Redis script's edge cases, against a real redis-server (its own socket), the
// script's time set by setScriptTime: deterministic.
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisPolicyLimiter, type PolicyRule } from '../src/index.js';
import { setScriptTime } from '../src/redis/redis-core.js';
import { redisAvailable, startRedis, type TestRedis } from './helpers/redis-server.js';

const available = redisAvailable();

describe.skipIf(!available)('the Redis script at its edges', () => {
  let server: TestRedis;
  let io: Redis;
  let n = 0;

  beforeAll(async () => {
    server = await startRedis();
    io = new Redis({ path: server.socket });
    await io.ping();
  });
  afterAll(async () => {
    io.disconnect();
    await server.stop();
  });

  it('a fixed window whose permits a change of rules lowered below its count reports remaining 0, never less', async () => {
    // Same period and algorithm: the count is kept (README). 8 counted, then 5 permits.
    const fw = (permits: number): PolicyRule[] => [{ algorithm: 'fixed-window', limit: { permits, periodMs: 3_600_000 } }];
    const p = new RedisPolicyLimiter({ redis: io, prefix: `al${n++}:`, localTier: false, rules: fw(10) });
    setScriptTime(p, () => 1_000 * 3_600_000 * 1000 + 60_000_000);
    const u = { user: 'u', api: 'a' };
    expect(await p.tryAcquire(u, 8)).toMatchObject({ allowed: true, remaining: 2 });
    p.setRules(fw(5));
    const refused = await p.tryAcquire(u);
    const probe = await p.tryAcquire(u, 0);
    expect({ refused: refused.remaining, probe: probe.remaining }).toEqual({ refused: 0, probe: 0 });
  });
});
