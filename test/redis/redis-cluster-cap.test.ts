// The global cap of a RedisRateLimiter on a Redis Cluster (the cap on its own node: spent
// first, refunded when the key refuses). Real three-primary cluster; script time set by
// setScriptTime, the local tier on a ManualClock: every step is deterministic.
import { Cluster } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalTier, ManualClock, perDay, RedisRateLimiter } from '../../src/index.js';
import { setScriptTime } from '../../src/redis/redis-core.js';
import { redisAvailable, startCluster, type TestCluster } from '../helpers/redis-cluster.js';
import { SCRIPT_TTL_PAD_MS, TEST_TIMEOUT_MS } from '../helpers/redis-server.js';

const available = redisAvailable();

describe.skipIf(!available)('the global cap on a Cluster', () => {
  let cluster: TestCluster;
  let io: Cluster;
  let n = 0;

  beforeAll(async () => {
    cluster = await startCluster();
    io = await cluster.ioredis();
  }, 60_000);
  afterAll(async () => {
    io?.disconnect();
    await cluster?.stop();
  });

  it('a cap spend given back is not kept in the refusal cache: the next key passes', async () => {
    // Key limit 1 per day, cap 2 per day. Another process takes 'a' (and one of the cap's two).
    // This process asks for 'a' (its tier knows nothing of it): the cap call spends the cap's last
    // permit (its reply says the cap is blocked for 12 h), the key refuses, and the cap gets that
    // permit back: Redis now admits one more request of any other key.
    const clock = new ManualClock(1_000_000);
    const tier = LocalTier.create({ clock });
    const prefix = `acc${n++}:`;
    const r = new RedisRateLimiter({ timeoutMs: TEST_TIMEOUT_MS, prefixCheck: 'off', redis: io, prefix, localTier: tier, limit: perDay(1), globalLimit: perDay(2) });
    setScriptTime(r, () => clock.now() * 1000, SCRIPT_TTL_PAD_MS);
    // The same limits, no tier: what Redis alone answers.
    const plain = new RedisRateLimiter({ timeoutMs: TEST_TIMEOUT_MS, prefixCheck: 'off', redis: io, prefix, localTier: false, limit: perDay(1), globalLimit: perDay(2) });
    setScriptTime(plain, () => clock.now() * 1000, SCRIPT_TTL_PAD_MS);

    expect((await plain.tryAcquire('a')).allowed).toBe(true);
    expect(await r.tryAcquire('a')).toMatchObject({ allowed: false, reason: 'limited' });
    // Let the refund (fire-and-forget) land.
    for (let i = 0; i < 50 && (await plain.tryAcquire('probe', 0)).remaining === 0; i++) await new Promise((res) => setTimeout(res, 10));
    // Redis: the cap holds one permit again (the probe's remaining is min(key, cap)).
    expect((await plain.tryAcquire('probe', 0)).remaining).toBe(1);
    clock.advance(1);
    // The tier: 'global-limit' for every key of the process, for the 12 h the refunded spend owed
    // (cut to the tier's 17.5 minutes), though Redis would admit 'b' now.
    const b = await r.tryAcquire('b');
    expect(b, `cached refusal: ${JSON.stringify(b)}`).toMatchObject({ allowed: true });
  });

  it("a batch-mate's cap spend given back is not kept in the refusal cache either", async () => {
    // As above, but the refunded spend is another request's in the same cap batch: 'a' (its key
    // spent by another process) and 'b' go to the cap together and take its last two permits;
    // the cap's reply to 'b' says the cap is blocked (after the whole batch). 'b' is admitted,
    // 'a' refused and refunded: Redis admits one more request, the tier refuses every key.
    const clock = new ManualClock(1_000_000);
    const tier = LocalTier.create({ clock });
    const prefix = `acb${n++}:`;
    const r = new RedisRateLimiter({ timeoutMs: TEST_TIMEOUT_MS, prefixCheck: 'off', redis: io, prefix, localTier: tier, limit: perDay(1), globalLimit: perDay(2) });
    setScriptTime(r, () => clock.now() * 1000, SCRIPT_TTL_PAD_MS);
    const plain = new RedisRateLimiter({ timeoutMs: TEST_TIMEOUT_MS, prefixCheck: 'off', redis: io, prefix, localTier: false, limit: perDay(1) });
    setScriptTime(plain, () => clock.now() * 1000, SCRIPT_TTL_PAD_MS);
    expect((await plain.tryAcquire('a')).allowed).toBe(true); // the key only: the cap keeps 2
    const [a, b] = await Promise.all([r.tryAcquire('a'), r.tryAcquire('b')]);
    expect(a).toMatchObject({ allowed: false, reason: 'limited' });
    expect(b).toMatchObject({ allowed: true });
    // Let the refund (fire-and-forget) land: the cap holds one permit again.
    const capped = new RedisRateLimiter({ timeoutMs: TEST_TIMEOUT_MS, prefixCheck: 'off', redis: io, prefix, localTier: false, limit: perDay(1), globalLimit: perDay(2) });
    setScriptTime(capped, () => clock.now() * 1000, SCRIPT_TTL_PAD_MS);
    for (let i = 0; i < 50 && (await capped.tryAcquire('probe', 0)).remaining === 0; i++) await new Promise((res) => setTimeout(res, 10));
    expect((await capped.tryAcquire('probe', 0)).remaining).toBe(1);
    clock.advance(1);
    const c = await r.tryAcquire('c');
    expect(c, `cached refusal: ${JSON.stringify(c)}`).toMatchObject({ allowed: true });
  });

  it('a GCRA cap refund gives back only what has not drained since the spend: no over-admission', async () => {
    // Cap: 10 per 100 s (T = 10 s), burst 10. At t0 the cap is idle; 'a' (its key spent) costs the
    // cap T, then its key refuses. Before the refund reaches the cap node, other requests take
    // the cap at t0 + 5 s. The refund, at t0 + 5 s, subtracts a whole T from the debt although
    // 5 s of that T had already drained: the cap is 5 s of debt short.
    const cap = { permits: 10, periodMs: 100_000 };
    const prefix = `acg${n++}:`;
    const t0 = 1_000_000_000; // ms
    let rNow = t0 - 1_000_000;
    let sends = 0;
    const r2 = new RedisRateLimiter({ timeoutMs: TEST_TIMEOUT_MS, prefixCheck: 'off', redis: io, prefix, localTier: false, limit: perDay(1), globalLimit: cap });
    setScriptTime(r2, () => (t0 + 5_000) * 1000, SCRIPT_TTL_PAD_MS);
    const second: Promise<boolean>[] = [];
    const r = new RedisRateLimiter({ timeoutMs: TEST_TIMEOUT_MS, prefixCheck: 'off', redis: io, prefix, localTier: false, limit: perDay(1), globalLimit: cap });
    setScriptTime(r, () => {
      sends++;
      // Send 4 is the key call of 'a' at t0 (send 3 was its cap call). While it is on its way,
      // ten other requests reach the cap node at t0 + 5 s, ahead of the refund (same connection).
      if (sends === 4) for (let i = 0; i < 10; i++) second.push(r2.allow(`x${i}`));
      // Send 5 is the refund, at t0 + 5 s.
      if (sends === 5) rNow = t0 + 5_000;
      return rNow * 1000;
    }, SCRIPT_TTL_PAD_MS);
    // Long before t0: 'a' spends its key (and one of the cap's, long drained by t0).
    expect(await r.allow('a')).toBe(true);
    rNow = t0;
    expect(await r.tryAcquire('a')).toMatchObject({ allowed: false, reason: 'limited' });
    const firstWave = (await Promise.all(second)).filter(Boolean).length;
    expect(sends).toBe(5);
    // 9 fit at t0 + 5 s: the cap's idle burst of 10, less the 5 s still owed for 'a'.
    expect(firstWave).toBe(9);
    // The same instant, after the refund, and 5 s later: what does the cap admit?
    const r3 = new RedisRateLimiter({ timeoutMs: TEST_TIMEOUT_MS, prefixCheck: 'off', redis: io, prefix, localTier: false, limit: perDay(1), globalLimit: cap });
    let now3 = t0 + 5_000;
    setScriptTime(r3, () => now3 * 1000, SCRIPT_TTL_PAD_MS);
    let more = 0;
    for (let i = 0; i < 3; i++) if (await r3.allow(`y${i}`)) more++;
    now3 = t0 + 10_000;
    for (let i = 0; i < 3; i++) if (await r3.allow(`z${i}`)) more++;
    // GCRA: n admissions within a closed span of L ms number at most burst + floor(L / T):
    // within [t0 + 5 s, t0 + 10 s] that is 10 + floor(5 / 10) = 10. Without the refused request
    // the cap would admit 10 at t0 + 5 s and none more before t0 + 15 s.
    expect(firstWave + more, 'admitted by the cap within 5 s (GCRA bound: 10)').toBeLessThanOrEqual(10);
  });
  it('a GCRA cap refund gives back all of the spend still ahead when the cap was saturated: no under-admission', async () => {
    // Found: cluster + GCRA + cap admitted 1,013-1,132 of a 1,604-1,608 bound under contention.
    // Cap: 10 per 100 s (T = 10 s), burst 10. At t0 the cap owes 45 s (spent by others), so the
    // spend of 'a' takes the slot [t0 + 45 s, t0 + 55 s]; its key refuses, and the refund reaches
    // the cap 5.5 s later. The cap did not drain that spend meanwhile: all 10 s of it are still
    // ahead, and the exact state is 55 - 5.5 - 10 = 39.5 s owed, room for 6 more. A refund that
    // takes off only T less the time since the spend (4.5 s) leaves 45 s owed: room for 5.
    const cap = { permits: 10, periodMs: 100_000 };
    const prefix = `acs${n++}:`;
    const t0 = 2_000_000_000; // ms
    const at = (ms: number) => () => ms * 1000;
    // Others spend the cap: 5 intervals at t0 - 5 s (a key limit that lets them), 45 s owed at t0.
    const others = new RedisRateLimiter({ timeoutMs: TEST_TIMEOUT_MS, prefixCheck: 'off', redis: io, prefix, localTier: false, limit: perDay(100), globalLimit: cap });
    setScriptTime(others, at(t0 - 5_000), SCRIPT_TTL_PAD_MS);
    expect((await others.tryAcquire('w', 5)).allowed).toBe(true);
    // 'a' has spent its key (no cap on that limiter).
    const plain = new RedisRateLimiter({ timeoutMs: TEST_TIMEOUT_MS, prefixCheck: 'off', redis: io, prefix, localTier: false, limit: perDay(1) });
    setScriptTime(plain, at(t0), SCRIPT_TTL_PAD_MS);
    expect(await plain.allow('a')).toBe(true);
    // The cap call and the key call at t0; the refund (the third send) at t0 + 5.5 s.
    let sends = 0;
    const r = new RedisRateLimiter({ timeoutMs: TEST_TIMEOUT_MS, prefixCheck: 'off', redis: io, prefix, localTier: false, limit: perDay(1), globalLimit: cap });
    setScriptTime(r, () => (++sends <= 2 ? t0 : t0 + 5_500) * 1000, SCRIPT_TTL_PAD_MS);
    expect(await r.tryAcquire('a')).toMatchObject({ allowed: false, reason: 'limited' });
    // The cap as a probe sees it at t0 + 5.5 s (a key limit that is never the smaller one).
    setScriptTime(others, at(t0 + 5_500), SCRIPT_TTL_PAD_MS);
    const room = async () => (await others.tryAcquire('probe', 0)).remaining;
    // Let the refund (fire-and-forget) land: until then the cap owes 55 - 5.5 = 49.5 s, room for 5.
    for (let i = 0; i < 100 && sends < 3; i++) await new Promise((res) => setTimeout(res, 10));
    expect(sends).toBe(3);
    for (let i = 0; i < 50 && (await room()) === 5; i++) await new Promise((res) => setTimeout(res, 10));
    expect(await room()).toBe(6);
    // And it admits exactly those 6, then refuses: never more than the exact state allows.
    let admitted = 0;
    for (let i = 0; i < 8; i++) if (await others.allow(`v${i}`)) admitted++;
    expect(admitted).toBe(6);
  });
});
