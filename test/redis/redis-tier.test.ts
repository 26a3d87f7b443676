// The local tier in front of Redis, through the limiters: a refusal Redis gave is answered by the
// tier (no script call) until exactly the moment Redis would admit, on every thread of the process;
// leases spend permits Redis already counted, and shrink near the limit. Time is a ManualClock for
// the tier and the same milliseconds for the script (setScriptTime).
import { Worker } from 'node:worker_threads';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { LocalTier, ManualClock, perHour, perSecond, RedisPolicyLimiter, RedisRateLimiter, type Decision, type RedisRateLimiterOptions } from '../../src/index.js';
import type { AlgorithmName } from '../../src/algorithms/index.js';
import { setScriptTime } from '../../src/redis/redis-core.js';
import { privateRedis, redisAvailable, SCRIPT_TTL_PAD_MS, TEST_TIMEOUT_MS } from '../helpers/redis-server.js';

const available = redisAvailable();

describe.skipIf(!available)('the local tier in front of Redis', () => {
  const redisServer = privateRedis();
  let n = 0;
  /** The client, counting script calls (EVALSHA: an EVAL only follows one that found no script). */
  let calls = 0;
  const counted = { call: (command: string, ...args: (string | number)[]) => { if (command === 'EVALSHA') calls++; return redisServer.io.call(command, ...args); } };


  /** A limiter on a ManualClock tier, its script at the clock's time. */
  function onClock(options: Omit<RedisRateLimiterOptions, 'redis' | 'localTier'>, tierOptions: { leaseMs?: number } = {}) {
    const clock = new ManualClock(1_000_000);
    const tier = LocalTier.create({ clock, ...tierOptions });
    const r = new RedisRateLimiter({ timeoutMs: TEST_TIMEOUT_MS, prefixCheck: 'off', redis: counted, prefix: `lt${n++}:`, localTier: tier, ...options });
    setScriptTime(r, () => clock.now() * 1000, SCRIPT_TTL_PAD_MS);
    return { clock, tier, r };
  }

  it('a refused key is answered by the tier until exactly the moment Redis admits it', async () => {
    const { clock, r } = onClock({ limit: perSecond(10, { burst: 2 }) });
    expect((await r.tryAcquire('k')).allowed).toBe(true);
    expect((await r.tryAcquire('k')).allowed).toBe(true);
    const refused = await r.tryAcquire('k');
    expect(refused).toMatchObject({ allowed: false, retryAfterMs: 100 });
    const before = calls;
    for (const t of [0, 1, 50, 99.5]) {
      clock.set(1_000_000 + t);
      expect(await r.tryAcquire('k')).toMatchObject({ allowed: false, reason: 'limited', retryAfterMs: 100 - t });
    }
    expect(calls).toBe(before); // none reached Redis
    expect(await r.tryAcquire('k', 0)).toMatchObject({ allowed: true, remaining: 0 }); // a probe asks Redis
    expect(calls).toBe(before + 1);
    clock.set(1_000_100);
    expect((await r.tryAcquire('k')).allowed).toBe(true);
    expect(calls).toBe(before + 2);
  });

  it('a key admitted takes no slot of the tier, even when the admission spent its last; its first refusal does', async () => {
    // Found: new keys admitted once each (1 an hour, fixed window) filled the default tier
    // (10,000 keys) in seconds, and every decision after paid a scan of a full stripe.
    const { tier, r } = onClock({ limit: perHour(1), algorithm: 'fixed-window' });
    for (let i = 0; i < 50; i++) expect((await r.tryAcquire(`new:${i}`)).allowed).toBe(true);
    expect(tier.stats().liveKeys).toBe(0);
    const before = calls;
    expect(await r.tryAcquire('new:7')).toMatchObject({ allowed: false, reason: 'limited' }); // Redis refuses it
    expect(calls).toBe(before + 1);
    expect(tier.stats().liveKeys).toBe(1);
    expect(await r.tryAcquire('new:7')).toMatchObject({ allowed: false, reason: 'limited' }); // the tier does
    expect(calls).toBe(before + 1);
  });

  it.each(['gcra', 'fixed-window', 'sliding-window', 'sliding-log'] as const)('%s: with the tier, every decision admits exactly what Redis alone admits', async (algorithm: AlgorithmName) => {
    let cached = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.record({ advanceMs: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 40 }), fc.integer({ min: 40, max: 900 })), cost: fc.oneof(fc.constant(1), fc.integer({ min: 0, max: 4 })) }), { minLength: 5, maxLength: 40 }),
        async (steps) => {
          const options = { algorithm, limit: [{ permits: 4, periodMs: 300 }, { permits: 9, periodMs: 2_000 }], globalLimit: { permits: 12, periodMs: 1_000 } };
          const { clock, r } = onClock(options);
          const plain = new RedisRateLimiter({ timeoutMs: TEST_TIMEOUT_MS, prefixCheck: 'off', redis: redisServer.io, prefix: `lp${n++}:`, localTier: false, ...options });
          setScriptTime(plain, () => clock.now() * 1000, SCRIPT_TTL_PAD_MS);
          for (const [i, { advanceMs, cost }] of steps.entries()) {
            clock.advance(advanceMs);
            const before = calls;
            const withTier: Decision = await r.tryAcquire('k', cost);
            const alone: Decision = await plain.tryAcquire('k', cost);
            expect(withTier.allowed, `step ${i}, cost ${cost}`).toBe(alone.allowed);
            if (calls === before) {
              cached++;
              // A cached refusal's wait is the wait for cost 1: never longer than Redis's.
              expect(withTier.retryAfterMs).toBeLessThanOrEqual(alone.retryAfterMs + 1e-9);
            } else {
              expect(withTier).toEqual(alone);
            }
          }
        },
      ),
      { numRuns: 15 },
    );
    expect(cached).toBeGreaterThan(0);
  });

  it('one thread learns a refusal; the process\'s other threads answer it without Redis', async () => {
    const tier = LocalTier.create();
    const prefix = `lw${n++}:`;
    const r = new RedisRateLimiter({ timeoutMs: TEST_TIMEOUT_MS, prefixCheck: 'off', redis: redisServer.io, prefix, localTier: tier, limit: perHour(1) });
    expect((await r.tryAcquire('k')).allowed).toBe(true);
    expect((await r.tryAcquire('k')).allowed).toBe(false); // Redis refused: the tier holds it for an hour
    const worker = new Worker(new URL('../fixtures/redis-tier-worker.mjs', import.meta.url), {
      workerData: { socket: redisServer.server.socket, prefix, tier: tier.handle, options: { limit: perHour(1), prefixCheck: 'off' } },
    });
    try {
      const reply = await new Promise<{ decisions: Decision[]; calls: number }>((resolve, reject) => {
        worker.once('message', resolve);
        worker.once('error', reject);
        worker.postMessage({ key: 'k', n: 3 });
      });
      expect(reply.decisions.map((d) => d.allowed)).toEqual([false, false, false]);
      // The tier keeps a refusal at most 2^20 ms (17.5 minutes); then Redis is asked again.
      expect(reply.decisions[0]?.retryAfterMs).toBeGreaterThan(1_000_000);
      expect(reply.calls).toBe(0);
    } finally {
      worker.postMessage('close');
      await worker.terminate();
    }
  });

  it('a key this thread found absent is answered refused as soon as another instance records a refusal', async () => {
    const clock = new ManualClock(1_000_000);
    const mine = LocalTier.create({ clock });
    const other = LocalTier.attach(mine.handle, { clock });
    // Found absent, and recorded so: the next asks skip the table while nothing is inserted.
    expect(mine.refusedFor('k')).toBe(0);
    expect(mine.refusedFor('k')).toBe(0);
    expect(mine.take('k')).toBe(false);
    // Another key's insert voids the record too; the key stays absent.
    expect(other.refuseUntil('j', 1_000_050)).toBe(true);
    expect(mine.refusedFor('k')).toBe(0);
    expect(mine.refusedFor('j')).toBe(50);
    expect(other.refuseUntil('k', 1_000_100)).toBe(true);
    expect(mine.refusedFor('k')).toBe(100);
    // Through the limiter: a key this instance asked Redis about (and found absent in its tier)
    // is refused without Redis once another instance's refusal is recorded.
    const prefix = `la${n++}:`;
    const a = new RedisRateLimiter({ timeoutMs: TEST_TIMEOUT_MS, prefixCheck: 'off', redis: counted, prefix, localTier: mine, limit: perHour(1) });
    const b = new RedisRateLimiter({ timeoutMs: TEST_TIMEOUT_MS, prefixCheck: 'off', redis: counted, prefix, localTier: other, limit: perHour(1) });
    setScriptTime(a, () => clock.now() * 1000, SCRIPT_TTL_PAD_MS);
    setScriptTime(b, () => clock.now() * 1000, SCRIPT_TTL_PAD_MS);
    expect((await a.tryAcquire('x')).allowed).toBe(true);
    expect((await b.tryAcquire('x')).allowed).toBe(false); // Redis refused: b's tier records it
    const before = calls;
    expect(await a.tryAcquire('x')).toMatchObject({ allowed: false, reason: 'limited' });
    expect(calls).toBe(before);
  });

  it('leases: one script call serves a lease; grants shrink near the limit; exactly the limit is admitted', async () => {
    const { r } = onClock({ limit: perHour(25), lease: 10 });
    const before = calls;
    const got = [];
    for (let i = 0; i < 30; i++) got.push((await r.tryAcquire('k')).allowed);
    expect(got.filter(Boolean)).toHaveLength(25);
    expect(got.slice(0, 25).every(Boolean)).toBe(true);
    // Leases of 10, 10 and 5 (all that was left): the last reply also said the key is spent, so
    // the tier refuses the rest once the lease is used up.
    expect(calls - before).toBe(3);
  });

  it('a lease expires leaseMs after it was asked for: its unspent permits are not spent', async () => {
    const { clock, r } = onClock({ limit: perHour(100), lease: 10 }, { leaseMs: 1_000 });
    const before = calls;
    for (let i = 0; i < 5; i++) expect((await r.tryAcquire('k')).allowed).toBe(true);
    expect(calls - before).toBe(1);
    clock.advance(1_000); // the lease's last moment has passed: Redis is asked again
    expect((await r.tryAcquire('k')).allowed).toBe(true);
    expect(calls - before).toBe(2);
    // Redis counted 20: 10 per lease, 4 of them never used.
    expect((await r.tryAcquire('other', 0)).remaining).toBe(100);
    const probe = new RedisRateLimiter({ timeoutMs: TEST_TIMEOUT_MS, prefixCheck: 'off', redis: redisServer.io, prefix: `lt${n - 1}:`, localTier: false, limit: perHour(100) });
    setScriptTime(probe, () => clock.now() * 1000, SCRIPT_TTL_PAD_MS);
    expect((await probe.tryAcquire('k', 0)).remaining).toBe(80);
  });

  it('bad tier options are refused, naming them', () => {
    expect(() => new RedisRateLimiter({ prefixCheck: 'off', redis: redisServer.io, limit: perHour(1), localTier: {} as never })).toThrow(/options\.localTier must be a LocalTier or false/);
    expect(() => new RedisRateLimiter({ prefixCheck: 'off', redis: redisServer.io, limit: perHour(1), lease: 1 })).toThrow(/options\.lease must be an integer from 2/);
    expect(() => new RedisRateLimiter({ prefixCheck: 'off', redis: redisServer.io, limit: perHour(1), lease: 5, localTier: false })).toThrow(/options\.lease needs a local tier/);
  });

  it('RedisPolicyLimiter: a change of rules clears what the tier refused', async () => {
    const clock = new ManualClock(1_000_000);
    const tier = LocalTier.create({ clock });
    const p = new RedisPolicyLimiter({ timeoutMs: TEST_TIMEOUT_MS, redis: counted, prefix: `lpp${n++}:`, localTier: tier, rules: [{ limit: perHour(1) }] });
    setScriptTime(p, () => clock.now() * 1000, SCRIPT_TTL_PAD_MS);
    const u = { user: 'u', api: 'a' };
    expect((await p.tryAcquire(u)).allowed).toBe(true);
    expect((await p.tryAcquire(u)).allowed).toBe(false);
    const before = calls;
    expect((await p.tryAcquire(u)).allowed).toBe(false);
    expect(calls).toBe(before); // from the tier
    clock.advance(1); // the change comes after the refusal was asked for
    p.setRules([{ limit: perHour(2) }]);
    const d = await p.tryAcquire(u);
    expect(calls).toBe(before + 1); // Redis decides again, under the new rules
    expect(d.allowed).toBe(false); // an hour owed at 1 per hour is still 30 minutes too much at 2
    expect(d.retryAfterMs).toBe(1_800_000 - 1);
  });
});
