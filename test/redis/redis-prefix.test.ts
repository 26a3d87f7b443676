// Who shares state on Redis: limiters with the same prefix do; left to its default, the prefix is
// a fingerprint of the limits, so limiters of different limits never share a key's state, and the
// cap's keys take the cap's own fingerprint. Real redis-server on its own socket, script time set.
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { describe, expect, it } from 'vitest';
import { ManualClock, perHour, perMinute, RedisConfigError, RedisPolicyLimiter, RedisRateLimiter, type Decision } from '../../src/index.js';
import { setScriptTime } from '../../src/redis/redis-core.js';
import { firstAnswer, privateRedis, redisAvailable, SCRIPT_TTL_PAD_MS, TEST_TIMEOUT_MS } from '../helpers/redis-server.js';

const available = redisAvailable();

describe.skipIf(!available)('prefixes on the Redis limiters', () => {
  const redisServer = privateRedis();
  const clock = new ManualClock(1_000_000);
  const make = (options: Omit<ConstructorParameters<typeof RedisRateLimiter>[0], 'redis'>) => {
    const r = new RedisRateLimiter({ timeoutMs: TEST_TIMEOUT_MS, redis: redisServer.io, localTier: false, ...options });
    setScriptTime(r, () => clock.now() * 1000, SCRIPT_TTL_PAD_MS);
    return r;
  };
  const admitted = async (r: RedisRateLimiter, key: string, n: number) => {
    let count = 0;
    for (let i = 0; i < n; i++) if (await r.allow(key)) count++;
    return count;
  };

  it.each(['gcra', 'fixed-window'] as const)(
    'found (%s): two services of other limits on the default prefix shared each key; now the second admits its whole limit',
    async (algorithm) => {
      // Before: B admitted 5 of 20 on GCRA (A's debt carried into B's rate) and 0 of 20 on fixed
      // windows (one count for both).
      const a = make({ limit: perMinute(100), algorithm });
      const b = make({ limit: perMinute(10), algorithm });
      expect(await admitted(a, 'found-' + algorithm, 50)).toBe(50);
      expect(await admitted(b, 'found-' + algorithm, 20)).toBe(10);
    },
  );

  it('the same limits on the default prefix share each key (one service on many processes)', async () => {
    const one = make({ limit: perMinute(10) });
    const two = make({ limit: perMinute(10) });
    expect(await admitted(one, 'same', 6)).toBe(6);
    expect(await admitted(two, 'same', 10)).toBe(4);
  });

  it("the default prefix of the cap is the cap's own: limiters of other key limits share one cap", async () => {
    const a = make({ limit: perMinute(100), globalLimit: perHour(5) });
    const b = make({ limit: perMinute(50), globalLimit: perHour(5) });
    const c = make({ limit: perMinute(50), globalLimit: perHour(7) });
    expect(await admitted(a, 'cap-a', 3)).toBe(3);
    expect(await b.tryAcquire('cap-b')).toMatchObject({ allowed: true });
    expect(await b.tryAcquire('cap-b')).toMatchObject({ allowed: true });
    expect(await b.tryAcquire('cap-b')).toMatchObject({ allowed: false, reason: 'global-limit' }); // 5 of 5 in the hour
    expect(await admitted(c, 'cap-c', 7)).toBe(7); // another cap: its own state
  });

  it('a prefix given is a namespace: limiters that share it share state; keys are where the prefix says', async () => {
    const a = make({ limit: perMinute(100), prefix: 'svc:' });
    const b = make({ limit: perMinute(100), prefix: 'svc:' });
    expect(await admitted(a, 'ns', 60)).toBe(60);
    expect(await admitted(b, 'ns', 60)).toBe(40);
    expect(await redisServer.io.call('KEYS', 'svc:{ns}:*')).toHaveLength(1);
    const defaults = (await redisServer.io.call('KEYS', 'sluice:*')) as string[];
    expect(defaults.length).toBeGreaterThan(0);
    expect(defaults.every((k) => /^sluice:[0-9a-f]{8}:/.test(k))).toBe(true);
  });

  it('found: two limiters of other limits on one given prefix shared each key; now the second is refused by name, spending nothing', async () => {
    // Before: B (10 a minute) admitted 5 of 20 after A (100 a minute) spent 50, silently.
    const a = make({ limit: perMinute(100), prefix: 'shared:' });
    const b = make({ limit: perMinute(10), prefix: 'shared:' });
    expect(await admitted(a, 'mix', 50)).toBe(50);
    const refused = b.tryAcquire('mix');
    await expect(refused).rejects.toThrow(RedisConfigError);
    await expect(refused).rejects.toThrow(/another limiter of other limits uses this prefix[\s\S]*shared:\{__sluice_config__\} holds .*"permits":100.*this limiter is .*"permits":10\b/);
    await expect(b.allow('other')).rejects.toThrow(RedisConfigError); // every call, not just the first
    await expect(b.get('mix')).rejects.toThrow(RedisConfigError);
    expect((await a.get('mix')).remaining).toBe(50); // b spent nothing
  });

  it("prefixCheck 'adopt' records its limits over another's; 'off' records and checks nothing; the default prefix needs no record", async () => {
    const a = make({ limit: perMinute(100), prefix: 'adopt:' });
    expect(await a.allow('k')).toBe(true);
    const b = make({ limit: perMinute(10), prefix: 'adopt:', prefixCheck: 'adopt' });
    expect(await b.allow('k')).toBe(true);
    const again = make({ limit: perMinute(100), prefix: 'adopt:' });
    await expect(again.allow('k')).rejects.toThrow(/holds .*"permits":10\b/);
    const off = make({ limit: perMinute(7), prefix: 'off:', prefixCheck: 'off' });
    expect(await off.allow('k')).toBe(true);
    expect(await redisServer.io.call('EXISTS', 'off:{__sluice_config__}')).toBe(0);
    const byDefault = make({ limit: perMinute(7) });
    expect(await byDefault.allow('k')).toBe(true);
    expect(((await redisServer.io.call('KEYS', 'sluice:*__sluice_config__*')) as string[])).toEqual([]);
    expect(() => make({ limit: perMinute(7), prefix: 'x:', prefixCheck: 'maybe' as never })).toThrow(/options.prefixCheck must be 'check', 'adopt' or 'off', got "maybe"/);
  });

  it("RedisPolicyLimiter's default prefix is its own, whatever the rules", async () => {
    const rules = [{ limit: perMinute(10) }];
    const p = new RedisPolicyLimiter({ timeoutMs: TEST_TIMEOUT_MS, redis: redisServer.io, localTier: false, rules });
    setScriptTime(p, () => clock.now() * 1000, SCRIPT_TTL_PAD_MS);
    expect(await p.allow({ user: 'u', api: 'x' })).toBe(true);
    const keys = (await redisServer.io.call('KEYS', 'sluice:policy:*')) as string[];
    expect(keys.length).toBeGreaterThan(0);
  });
});

describe.skipIf(!available)("the prefix check's answers: paced like the tier's, and within the call's deadline", () => {
  const redisServer = privateRedis();

  // Found: a prefix found to be another configuration's rejected each call straight from
  // Promise.reject: `await b.tryAcquire('k').catch(() => {})` in a loop ran 300,000 calls in
  // 201 ms and a 1 ms timer never fired. They now yield as the local tier's answers do: at least
  // every 0.5 ms, looked at every 64 answers.
  it('a loop on a limiter refused by the prefix check lets timers and setImmediate callbacks run', async () => {
    const a = new RedisRateLimiter({ timeoutMs: TEST_TIMEOUT_MS, redis: redisServer.io, limit: perMinute(100), prefix: 'pace:', localTier: false });
    const b = new RedisRateLimiter({ timeoutMs: TEST_TIMEOUT_MS, redis: redisServer.io, limit: perMinute(10), prefix: 'pace:', localTier: false });
    expect(await a.allow('k')).toBe(true);
    await expect(b.tryAcquire('k')).rejects.toThrow(RedisConfigError); // the check, from Redis
    const N = 20_000;
    let calls = 0;
    let timerAt = -1;
    let immediateAt = -1;
    setTimeout(() => {
      timerAt = calls;
    }, 1);
    setImmediate(() => {
      immediateAt = calls;
    });
    let rejected = 0;
    const t0 = performance.now();
    while (calls < N) {
      await b.tryAcquire('k').catch((e: unknown) => {
        if (e instanceof RedisConfigError) rejected++;
      });
      calls++;
    }
    const loopMs = performance.now() - t0;
    expect(rejected).toBe(N);
    expect(immediateAt, `calls before a setImmediate callback ran (loop of ${N}: ${loopMs.toFixed(1)} ms)`).toBeGreaterThan(0);
    expect(immediateAt).toBeLessThan(N);
    expect(timerAt, `calls before a 1 ms timer ran (loop of ${N}: ${loopMs.toFixed(1)} ms)`).toBeGreaterThan(0);
    expect(timerAt).toBeLessThan(N);
  });

  // Found: with the server frozen (SIGSTOP) and timeoutMs 200, a limiter's first call answered
  // after 402 ms: up to timeoutMs waiting for the prefix check, then a full deadline of its own.
  // The call's deadline is now set once, before the check: the check and the decision share it.
  it('a first call on a frozen server answers by its one deadline, the prefix check included', async () => {
    const TIMEOUT = 400;
    const limiter = new RedisRateLimiter({ redis: redisServer.io, limit: perMinute(10), prefix: 'frozen:', timeoutMs: TIMEOUT, localTier: false });
    await redisServer.io.ping();
    const lag = monitorEventLoopDelay({ resolution: 10 });
    lag.enable();
    redisServer.server.process.kill('SIGSTOP');
    let d: Decision;
    let tookMs: number;
    try {
      const t0 = performance.now();
      d = await limiter.tryAcquire('k');
      tookMs = performance.now() - t0;
    } finally {
      redisServer.server.process.kill('SIGCONT');
      lag.disable();
    }
    expect(d).toMatchObject({ allowed: false, reason: 'unavailable', degraded: true });
    // The timers fire late by the event loop's lag on a busy machine: allowed, as measured. A
    // call that waited for the check and then for a deadline of its own took 2 x TIMEOUT.
    const lateness = Math.max(150, (2 * lag.max) / 1e6 + 50);
    expect(tookMs, `first call (event loop lag up to ${(lag.max / 1e6).toFixed(0)} ms), ms`).toBeLessThan(TIMEOUT + lateness);
    expect(tookMs).toBeGreaterThanOrEqual(TIMEOUT - 1);
    // The call that reached the thawed server after its deadline spent nothing.
    const after = await firstAnswer(() => limiter.get('k'), () => true);
    expect(after.remaining).toBe(10);
  });
});
