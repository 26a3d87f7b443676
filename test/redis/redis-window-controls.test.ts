// penalty, reward and block on the Redis limiters' fixed and sliding windows, penalty and reward
// on their sliding logs, each one script call. Penalty and reward do what the shared-memory twins'
// do (a property over random sequences compares them, decision by decision); a block refuses until
// it ends with the right Retry-After, for 30 days, keeps a longer block and the window's own wait,
// outlives the window's expiry, and is ended by unblock. A global cap is never charged or given
// back. Real redis-server on its own socket, script time set.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ManualClock, perMinute, perSecond, RateLimiter, RedisPolicyLimiter, RedisRateLimiter, type Limit } from '../../src/index.js';
import { setScriptTime } from '../../src/redis/redis-core.js';
import { heldKeys, privateRedis, redisAvailable, SCRIPT_TTL_PAD_MS, TEST_TIMEOUT_MS } from '../helpers/redis-server.js';

const available = redisAvailable();

const WINDOWS = ['fixed-window', 'sliding-window'] as const;
const COUNTED = [...WINDOWS, 'sliding-log'] as const;

describe.skipIf(!available)('per-key controls on Redis windows and logs', () => {
  const redisServer = privateRedis();
  let n = 0;

  /** A limiter on Redis whose script reads `clock`, and its key's Redis keys under the prefix. */
  function onRedis(algorithm: (typeof COUNTED)[number], limit: Limit | Limit[], clock: ManualClock, extra: object = {}): RedisRateLimiter {
    const r = new RedisRateLimiter({ timeoutMs: TEST_TIMEOUT_MS, redis: redisServer.io, prefix: `wc${n++}:`, prefixCheck: 'off', limit, algorithm, localTier: false, ...extra });
    setScriptTime(r, () => clock.now() * 1000, SCRIPT_TTL_PAD_MS);
    return r;
  }

  const op = fc.oneof(
    fc.record({ kind: fc.constant('check' as const), cost: fc.integer({ min: 0, max: 4 }) }),
    fc.record({ kind: fc.constant('penalty' as const), cost: fc.integer({ min: 0, max: 9 }) }),
    fc.record({ kind: fc.constant('reward' as const), cost: fc.integer({ min: 0, max: 9 }) }),
  );
  const step = fc.record({ advanceMs: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 300 }), fc.integer({ min: 300, max: 2_500 })), op });

  it.each(COUNTED)('%s: penalty and reward decide as the shared-memory twin does, two limits', async (algorithm) => {
    let checked = 0;
    let refused = 0;
    let forced = 0;
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 1_000, max: 10_000_000 }), fc.array(step, { minLength: 5, maxLength: 40 }), async (startMs, steps) => {
        const clock = new ManualClock(startMs);
        const limit = [{ permits: 5, periodMs: 1_000 }, { permits: 8, periodMs: 3_000 }];
        const memory = new RateLimiter({ algorithm, limit, maxKeys: 16, clock });
        const r = new RedisRateLimiter({ timeoutMs: TEST_TIMEOUT_MS, redis: heldKeys(redisServer.io), prefix: `wd${n++}:`, limit, algorithm, localTier: false });
        setScriptTime(r, () => clock.now() * 1000, SCRIPT_TTL_PAD_MS);
        for (const [i, { advanceMs, op: o }] of steps.entries()) {
          clock.advance(advanceMs);
          const at = `step ${i} at ${clock.now()} ms: ${o.kind} ${o.cost}`;
          if (o.kind === 'penalty') {
            memory.penalty('k', o.cost);
            await r.penalty('k', o.cost);
            forced++;
          } else if (o.kind === 'reward') {
            memory.reward('k', o.cost);
            await r.reward('k', o.cost);
            forced++;
          } else {
            const m = memory.tryAcquire('k', o.cost);
            const d = await r.tryAcquire('k', o.cost);
            expect({ allowed: d.allowed, remaining: d.remaining }, at).toEqual({ allowed: m.allowed, remaining: m.remaining });
            checked++;
            if (!m.allowed) refused++;
          }
          // The state after each step too, read without spending.
          const ms = memory.get('k');
          expect((await r.get('k')).remaining, `${at}: get`).toBe(ms?.remaining ?? 5);
        }
      }),
      { numRuns: 20 },
    );
    expect(refused).toBeGreaterThan(checked / 10);
    expect(forced).toBeGreaterThan(checked / 2);
  });

  it.each(WINDOWS)('%s: a penalty counts now; a reward gives back, never below a fresh key; neither touches the cap', async (algorithm) => {
    const clock = new ManualClock(6_000_000); // a minute's start
    const r = onRedis(algorithm, perMinute(3), clock, { globalLimit: perMinute(4) });
    await r.penalty('k', 2);
    expect(await r.tryAcquire('k')).toMatchObject({ allowed: true, remaining: 0 });
    expect(await r.tryAcquire('k')).toMatchObject({ allowed: false, reason: 'limited' });
    await r.reward('k', 1);
    expect(await r.tryAcquire('k')).toMatchObject({ allowed: true, remaining: 0 });
    // More than was spent: the key is fresh. Its 3 are bound by the cap's 2 left (the cap
    // counted the two admissions, none given back, none charged by the penalty).
    await r.reward('k', 100);
    expect(await r.get('k')).toMatchObject({ remaining: 2 });
    await r.reward('never-seen', 5);
    expect(await r.get('never-seen')).toMatchObject({ remaining: 2, resetAfterMs: 0 });
    expect([await r.allow('a'), await r.allow('b'), await r.allow('c')]).toEqual([true, true, false]);
    expect((await r.tryAcquire('d')).reason).toBe('global-limit');
    // Without the cap's bound: the key's own three.
    const own = onRedis(algorithm, perMinute(3), clock);
    await own.penalty('k', 3);
    await own.reward('k', 100);
    expect(await own.get('k')).toMatchObject({ remaining: 3, resetAfterMs: 0 });
  });

  it('a fixed window is filled by a penalty at most; a sliding window counts past its permits, and the next window feels it', async () => {
    const clock = new ManualClock(6_000_000);
    const fixed = onRedis('fixed-window', perMinute(3), clock);
    const sliding = onRedis('sliding-window', perMinute(3), clock);
    await fixed.penalty('k', 10);
    await sliding.penalty('k', 9); // three windows' worth
    expect((await fixed.tryAcquire('k')).retryAfterMs).toBe(60_000);
    clock.advance(60_000);
    expect(await fixed.tryAcquire('k')).toMatchObject({ allowed: true, remaining: 2 });
    // The previous window's 9 weigh 9 x (1 - into / period): one more fits once that is at most
    // 2, 7/9 of the window in (46,666.67 ms).
    const d = await sliding.tryAcquire('k');
    expect(d.allowed).toBe(false);
    expect(Math.abs(d.retryAfterMs - 60_000 * 7 / 9)).toBeLessThan(0.001);
    clock.advance(46_666);
    expect((await sliding.tryAcquire('k')).allowed).toBe(false);
    clock.advance(1);
    expect(await sliding.tryAcquire('k')).toMatchObject({ allowed: true, remaining: 0 });
  });

  it('found: a sliding-window penalty past 4,194,303 counts what the shared-memory twin counts', async () => {
    // The count was held below 2^52 on Redis and at 4,194,303 in memory: 10,000,000 weighed
    // more on the next window, and a request 3,599,200 ms into it was refused on Redis alone.
    const clock = new ManualClock(36_000_000); // an hour's start
    const limit = { permits: 1_000, periodMs: 3_600_000 };
    const memory = new RateLimiter({ algorithm: 'sliding-window', limit, maxKeys: 16, clock });
    const r = onRedis('sliding-window', limit, clock);
    memory.penalty('k', 10_000_000);
    await r.penalty('k', 10_000_000);
    clock.advance(3_600_000 + 3_599_200);
    const m = memory.tryAcquire('k');
    expect(m.allowed).toBe(true);
    expect(await r.tryAcquire('k')).toMatchObject({ allowed: true, remaining: m.remaining });
  });

  it('a sliding log: a penalty writes stamps now and keeps the newest `permits`; a reward removes the newest that count', async () => {
    const clock = new ManualClock(6_000_000);
    const r = onRedis('sliding-log', perMinute(3), clock);
    expect(await r.allow('k')).toBe(true);
    clock.advance(30_000);
    await r.penalty('k', 5); // 3 stamps at 30 s: the one at 0 s is dropped
    clock.advance(31_000); // the stamp at 0 s would have expired anyway; the penalty's have not
    expect(await r.tryAcquire('k')).toMatchObject({ allowed: false, retryAfterMs: 29_000 });
    await r.reward('k', 2);
    expect([await r.allow('k'), await r.allow('k'), await r.allow('k')]).toEqual([true, true, false]);
    await r.reward('k', 10);
    expect(await r.get('k')).toMatchObject({ remaining: 3, resetAfterMs: 0 });
    expect(await redisServer.io.call('KEYS', `${'wc'}${n - 1}:*`)).toEqual([]); // the emptied list is gone
  });

  it.each(WINDOWS)('%s: a block refuses for 30 days with the right Retry-After, keeps a longer block and the window\'s wait; unblock ends it', async (algorithm) => {
    const clock = new ManualClock(6_000_000);
    const r = onRedis(algorithm, perSecond(1_000), clock);
    const month = 30 * 86_400_000;
    await r.block('k', month);
    expect(await r.tryAcquire('k')).toMatchObject({ allowed: false, reason: 'limited', remaining: 0, retryAfterMs: month, resetAfterMs: month });
    expect(await r.get('k')).toMatchObject({ remaining: 0, resetAfterMs: month });
    await r.block('k', 60_000); // shorter: the month stays
    clock.advance(month - 1);
    expect(await r.tryAcquire('k')).toMatchObject({ allowed: false, retryAfterMs: 1 });
    clock.advance(1);
    expect(await r.tryAcquire('k')).toMatchObject({ allowed: true, remaining: 999 });
    // The state outlives its window while blocked: its expiry is the block's end.
    await r.block('k', 3_600_000);
    const keys = (await redisServer.io.call('KEYS', `wc${n - 1}:*`)) as string[];
    expect(keys).toHaveLength(1);
    expect(await redisServer.io.pttl(keys[0] as string)).toBeGreaterThan(3_600_000);
    expect(await r.unblock('k')).toBe(true);
    expect(await r.get('k')).toMatchObject({ remaining: 1_000, resetAfterMs: 0 });
    // A block shorter than the window's own wait: the window's wait stands.
    const minute = new ManualClock(12_000_000); // a minute's start
    const w = onRedis(algorithm, perMinute(2), minute);
    expect([await w.allow('k'), await w.allow('k')]).toEqual([true, true]);
    await w.block('k', 1_000);
    const d = await w.tryAcquire('k');
    expect(d.allowed).toBe(false);
    expect(d.retryAfterMs).toBeGreaterThanOrEqual(60_000);
    // A block shorter than the window, on a key with room: it passes at the block's end, in the same window.
    await w.block('room', 10_000);
    expect(await w.tryAcquire('room')).toMatchObject({ allowed: false, retryAfterMs: 10_000 });
    minute.advance(10_000);
    expect(await w.tryAcquire('room')).toMatchObject({ allowed: true, remaining: 1 });
    expect(() => w.block('k', -1)).toThrow(RangeError);
    expect(() => w.block('k', 11 * 365 * 86_400_000)).toThrow(/ms must be from 0 to 315360000000 for these limits/);
  });

  it('a block survives the window\'s admissions and rewards, and a key blocked twice keeps the later end', async () => {
    const clock = new ManualClock(6_000_000);
    const r = onRedis('fixed-window', perMinute(3), clock);
    expect(await r.allow('k')).toBe(true);
    await r.block('k', 90_000); // past this window's end
    await r.reward('k', 1);
    await r.penalty('k', 1);
    clock.advance(60_000); // the next window: its count is 0, the block still runs
    expect(await r.tryAcquire('k')).toMatchObject({ allowed: false, retryAfterMs: 30_000 });
    await r.block('k', 40_000); // later than 30 s: kept
    clock.advance(30_000);
    expect(await r.tryAcquire('k')).toMatchObject({ allowed: false, retryAfterMs: 10_000 });
    clock.advance(10_000);
    expect(await r.tryAcquire('k')).toMatchObject({ allowed: true, remaining: 2 });
  });

  it('RedisPolicyLimiter: penalty, reward and block under a window rule; block under a sliding-log rule is a TypeError', async () => {
    const clock = new ManualClock(6_000_000);
    const p = new RedisPolicyLimiter({
      timeoutMs: TEST_TIMEOUT_MS,
      redis: redisServer.io, prefix: `wc${n++}:`, localTier: false,
      rules: [{ algorithm: 'fixed-window', limit: perMinute(3) }, { user: 'log', algorithm: 'sliding-log', limit: perMinute(2) }],
    });
    setScriptTime(p, () => clock.now() * 1000, SCRIPT_TTL_PAD_MS);
    const acme = { user: 'acme', api: 'x' };
    await p.penalty(acme, 2);
    expect([await p.allow(acme), await p.allow(acme)]).toEqual([true, false]);
    await p.reward(acme, 1);
    expect([await p.allow(acme), await p.allow(acme)]).toEqual([true, false]);
    await p.block({ user: 'b', api: 'x' }, 5_000);
    expect(await p.tryAcquire({ user: 'b', api: 'x' })).toMatchObject({ allowed: false, retryAfterMs: 5_000 });
    const log = { user: 'log', api: 'x' };
    await p.penalty(log, 2);
    expect(await p.allow(log)).toBe(false);
    await p.reward(log, 1);
    expect([await p.allow(log), await p.allow(log)]).toEqual([true, false]);
    expect(() => p.block(log, 1_000)).toThrow(TypeError);
  });
});
