// The Redis script's edge cases, against a real redis-server (its own socket), the
// script's time set by setScriptTime: deterministic.
import { describe, expect, it } from 'vitest';
import { RateLimitTimeoutError, RedisPolicyLimiter, RedisRateLimiter, type PolicyRule } from '../../src/index.js';
import { setScriptTime } from '../../src/redis/redis-core.js';
import { redisLimit, scriptPlan, type RedisLimit } from '../../src/redis/redis-limits.js';
import { aloneOutcome, batchOutcomes, type Outcome } from '../../src/redis/script-batcher.js';
import { privateRedis, redisAvailable, SCRIPT_TTL_PAD_MS, TEST_TIMEOUT_MS } from '../helpers/redis-server.js';

const available = redisAvailable();

describe.skipIf(!available)('the Redis script at its edges', () => {
  const redisServer = privateRedis();
  let n = 0;


  it('a fixed window whose permits a change of rules lowered below its count reports remaining 0, never less', async () => {
    // Same period and algorithm: the count is kept (docs/redis.md). 8 counted, then 5 permits.
    const fw = (permits: number): PolicyRule[] => [{ algorithm: 'fixed-window', limit: { permits, periodMs: 3_600_000 } }];
    const p = new RedisPolicyLimiter({ timeoutMs: TEST_TIMEOUT_MS, redis: redisServer.io, prefix: `al${n++}:`, localTier: false, rules: fw(10) });
    setScriptTime(p, () => 1_000 * 3_600_000 * 1000 + 60_000_000);
    const u = { user: 'u', api: 'a' };
    expect(await p.tryAcquire(u, 8)).toMatchObject({ allowed: true, remaining: 2 });
    p.setRules(fw(5));
    const refused = await p.tryAcquire(u);
    const probe = await p.tryAcquire(u, 0);
    expect({ refused: refused.remaining, probe: probe.remaining }).toEqual({ refused: 0, probe: 0 });
  });

  it.each([
    // [algorithm, the key's suffix, the moment its state equals a fresh key's, in ms from now]
    ['fixed-window', 'fw60000000:0', 60_000 - 25_000], // the window's end
    ['sliding-window', 'sw60000000:0', 2 * 60_000 - 25_000], // the end of the next window
    ['sliding-log', 'sl60000000:0', 60_000], // a period after the newest stamp
  ] as const)('%s: an admission writes its key with an expiry at the moment it holds nothing', async (algorithm, suffix, expectMs) => {
    const prefix = `exp${n++}:`;
    const r = new RedisRateLimiter({ timeoutMs: TEST_TIMEOUT_MS, prefixCheck: 'off', redis: redisServer.io, prefix, algorithm, limit: { permits: 5, periodMs: 60_000 }, localTier: false });
    // 25 s into a minute's window, on the script's clock.
    setScriptTime(r, () => (1_000_000 * 60_000 + 25_000) * 1000);
    expect((await r.tryAcquire('k')).allowed).toBe(true);
    const pttl = await redisServer.io.pttl(`${prefix}{k}:${suffix}`);
    expect(pttl).toBeLessThanOrEqual(expectMs);
    expect(pttl).toBeGreaterThan(expectMs - 1_000); // what the call itself took, at most
    // A refusal and a probe write nothing: the expiry stays.
    await r.tryAcquire('k', 0);
    expect(await redisServer.io.pttl(`${prefix}{k}:${suffix}`)).toBeLessThanOrEqual(pttl);
  });

  it.each([
    // [algorithm, a limit whose first admission writes an expiry of 2 ms at most, at this time]
    ['gcra', { permits: 1_000, periodMs: 1_000, burst: 2 }, 1_000_000_000], // one emission: 1 ms
    ['fixed-window', { permits: 2, periodMs: 1_000 }, 1_000_000_999], // 1 ms before the window's end
    ['sliding-window', { permits: 2, periodMs: 1 }, 1_000_000_000], // the next window's end: 2 ms
    ['sliding-log', { permits: 2, periodMs: 1 }, 1_000_000_000], // a period: 1 ms
  ] as const)('%s: under a test clock that stands still, a key outlives Redis\'s clock by the pad', async (algorithm, limit, atMs) => {
    // Found: a property test at a standing clock saw a window's count vanish on a busy machine,
    // because the key expired on Redis's clock (its TTL is in the script's time) between calls.
    const padded = new RedisRateLimiter({ timeoutMs: TEST_TIMEOUT_MS, prefixCheck: 'off', redis: redisServer.io, prefix: `pad${n++}:`, algorithm, limit, localTier: false });
    const bare = new RedisRateLimiter({ timeoutMs: TEST_TIMEOUT_MS, prefixCheck: 'off', redis: redisServer.io, prefix: `pad${n++}:`, algorithm, limit, localTier: false });
    setScriptTime(padded, () => atMs * 1000, SCRIPT_TTL_PAD_MS);
    setScriptTime(bare, () => atMs * 1000);
    expect(await padded.tryAcquire('k')).toMatchObject({ allowed: true, remaining: 1 });
    expect(await bare.tryAcquire('k')).toMatchObject({ allowed: true, remaining: 1 });
    // Redis's own clock runs on past every expiry the script wrote without the pad.
    const time = async (): Promise<number> => {
      const [s, us] = (await redisServer.io.call('TIME')) as [string, string];
      return Number(s) * 1e6 + Number(us);
    };
    const from = await time();
    while ((await time()) - from < 5_000);
    // The test's clock has not moved: the padded key still holds its admission.
    expect(await padded.tryAcquire('k', 0)).toMatchObject({ allowed: true, remaining: 1 });
    // Without the pad, the admission is gone at the same script time: what the fix is for.
    expect(await bare.tryAcquire('k', 0)).toMatchObject({ allowed: true, remaining: 2 });
  });

  it('the GCRA script for one decision decides and writes exactly as the batch script does for a batch of one', async () => {
    const io = redisServer.io;
    const gcra = (permits: number, periodMs: number, burst?: number): RedisLimit =>
      redisLimit('gcra', burst === undefined ? { permits, periodMs } : { permits, periodMs, burst }, 'limit', 1);
    // Plans of one or two key limits and a cap; within a group the plans share keys (a change of
    // rules: another k, 1/k µs, reads the fraction another one wrote).
    const groups: { key: RedisLimit[]; cap: RedisLimit[] }[][] = [
      [{ key: [gcra(10, 1_000, 3)], cap: [] }, { key: [gcra(3, 1_000, 2)], cap: [] }, { key: [gcra(7, 1_000, 4)], cap: [] }],
      [{ key: [gcra(5, 1_000, 2), gcra(3, 200)], cap: [gcra(3, 1_000, 2)] }, { key: [gcra(9, 700, 3), gcra(1, 3)], cap: [gcra(2, 1_000, 1)] }],
    ];
    const seen = new Set<number>();
    const lengths = new Set<number>();
    let fractions = 0;
    let seed = 12_345;
    const rand = (n: number): number => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      return Math.floor(seed / 2 ** 16) % n; // the high bits: the low ones repeat soon
    };
    for (const [g, plans] of groups.entries()) {
      const keys = (side: string, plan: { key: RedisLimit[]; cap: RedisLimit[] }): string[] => [
        ...plan.key.map((_, i) => `one${n}:${side}{k}:${i}`),
        ...plan.cap.map((_, i) => `one${n}:${side}:cap:${i}`),
      ];
      let now = 1_700_000_000_000_000 + g;
      let spentAt = now;
      for (let step = 0; step < 400; step++) {
        const plan = plans[rand(plans.length)] as { key: RedisLimit[]; cap: RedisLimit[] };
        const scripts = scriptPlan(plan.key, plan.cap, 'p:');
        const script = scripts.script;
        const single = script.single as { text: string };
        now += [0, 1, 333, 100_000, 1_000_000][rand(5)] as number;
        const kind = rand(10);
        // A spend, a lease, a probe, a refund of a spend made earlier, a late call.
        const cost = kind === 0 ? -(1 + rand(2)) : kind === 1 ? 0 : 1 + rand(4);
        const want = kind === 2 ? cost + 1 + rand(5) : cost;
        const deadline = cost < 0 ? spentAt : kind === 3 ? now - 1 : kind === 4 ? now : 0;
        if (cost > 0) spentAt = now;
        const batchKeys = keys('b', plan);
        const singleKeys = keys('s', plan);
        const both = [...batchKeys, ...singleKeys];
        // One transaction: nothing expires while it runs, so both sides read the same states.
        // Every state is then kept until written again (PERSIST): the next step's two calls,
        // microseconds apart on Redis's clock, find their keys as this step left them.
        // Redis's clock before the writes and after the expiries are read: the process may be
        // descheduled between two commands of the transaction (found: 4 ms apart on a busy machine).
        const tx = io.multi()
          .time()
          .eval(script.text, batchKeys.length, ...batchKeys, `1,${cost},${deadline},${want}`, now)
          .eval(single.text, singleKeys.length, ...singleKeys, cost, deadline, want, now);
        for (const k of both) tx.pttl(k);
        tx.time();
        for (const k of both) tx.persist(k);
        tx.mget(...batchKeys).mget(...singleKeys);
        const [before, ...results] = ((await tx.exec()) ?? []).map(([e, r]) => {
          if (e) throw e;
          return r;
        });
        const [fromBatch, fromSingle] = results as [number[], number[]];
        const ttls = results.slice(2, 2 + both.length) as number[];
        const after = results[2 + both.length] as [string, string];
        const [stored, storedSingle] = results.slice(3 + 2 * both.length) as (string | null)[][];
        const ms = ([sec, us]: [string, string]): number => Number(sec) * 1000 + Number(us) / 1000;
        const apartMs = ms(after) - ms(before as [string, string]);
        const outcome = (batchOutcomes(fromBatch as number[], scripts, [cost]) as Outcome[])[0]; // none raises an error
        expect(aloneOutcome(fromSingle as number[], scripts, cost), `step ${step}: cost ${cost}, want ${want}, deadline ${deadline}`).toEqual(outcome);
        expect(storedSingle, `step ${step}: the stored states`).toEqual(stored);
        // The expiries count on Redis's clock from each write, and are read one after the other:
        // the same, but for the time that passed between (at most the transaction's own).
        for (let i = 0; i < batchKeys.length; i++) {
          const [b, one] = [ttls[i] as number, ttls[batchKeys.length + i] as number];
          expect(Math.abs(b - one), `step ${step}: expiries ${b} and ${one} ms, ${apartMs} ms apart`).toBeLessThanOrEqual(2 + Math.ceil(apartMs));
        }
        seen.add(typeof outcome === 'object' ? outcome.status : -1);
        lengths.add(fromSingle.length - plan.cap.length - 1);
        fractions += (stored as (string | null)[]).filter((v) => v?.includes(':')).length;
      }
    }
    n++;
    // Every kind of answer came up (-1: late), in each form of the single script's reply (none
    // late, the debt, remaining and reset, six fields), and states with a fraction were read
    // under another k.
    expect([...seen].sort()).toEqual([-1, 0, 1, 2, 3]);
    expect([...lengths].sort()).toEqual([0, 1, 2, 6]);
    expect(fractions).toBeGreaterThan(0);
  });

  it('stores a whole TAT as the 8 bytes of its double, and a TAT with a fraction as "tat:frac:k"', async () => {
    const io = redisServer.io;
    const nowUs = 1_765_000_000_123_456; // an epoch reading in µs: 16 digits
    /** A limiter on its own prefix at `nowUs`, and the one Redis key its key 'k' has after `cost`. */
    const spend = async (limit: { permits: number; periodMs: number }, cost: number): Promise<string> => {
      const prefix = `st${n++}:`;
      const r = new RedisRateLimiter({ timeoutMs: TEST_TIMEOUT_MS, prefixCheck: 'off', redis: io, prefix, limit, localTier: false });
      setScriptTime(r, () => nowUs);
      expect((await r.tryAcquire('k', cost)).allowed).toBe(true);
      const keys = await io.keys(`${prefix}*`);
      expect(keys).toHaveLength(1);
      return keys[0] as string;
    };
    const packed = await io.getBuffer(await spend({ permits: 5, periodMs: 5_000 }, 2));
    expect(packed?.length).toBe(8);
    expect(packed?.readDoubleBE(0)).toBe(nowUs + 2_000_000); // two intervals of 1 s
    // 3 per second: an interval of 333,333 1/3 µs, so a TAT with a fraction (k = 3).
    expect(await io.get(await spend({ permits: 3, periodMs: 1_000 }, 1))).toBe(`${nowUs + 333_333}:1:3`);
  });

  it.each([1_765_000_000_123_456, -5_000_000])('reads a TAT stored in decimal (as releases before the packed form wrote it) as the same debt, at %d µs', async (nowUs) => {
    // -5 s (the tests' time override only): the decimal text is "-2000000", 8 bytes, never packed.
    const io = redisServer.io;
    const limit = { permits: 5, periodMs: 5_000 }; // an interval of 1 s, burst 5
    const make = (): RedisRateLimiter => {
      const r = new RedisRateLimiter({ timeoutMs: TEST_TIMEOUT_MS, prefixCheck: 'off', redis: io, prefix: `dec${n++}:`, limit, localTier: false });
      setScriptTime(r, () => nowUs);
      return r;
    };
    // Three intervals of debt: spent here (packed), and written in decimal by hand.
    const spent = make();
    expect((await spent.tryAcquire('k', 3)).allowed).toBe(true);
    const [spentKey] = await io.keys(`dec${n - 1}:{k}:*`);
    const legacy = make();
    const legacyKey = (spentKey as string).replace(/^dec\d+:/, `dec${n - 1}:`);
    await io.set(legacyKey, String(nowUs + 3_000_000), 'PX', 3_000);
    for (const cost of [0, 1, 2, 1]) expect(await legacy.tryAcquire('k', cost)).toEqual(await spent.tryAcquire('k', cost));
    expect((await io.getBuffer(legacyKey))?.length).toBe(8); // written back in the packed form
  });

  it.each([
    ['5 per 5 s (k = 1: whole TATs)', { permits: 5, periodMs: 5_000 }],
    ['3 per s (k = 3: TATs with a fraction)', { permits: 3, periodMs: 1_000 }],
  ] as const)('%s: decides at script times from -5 s to 2^53 µs as at 10^15, shifted', async (_name, limit) => {
    // The tests' time override may read negative or small times: the stored forms must still
    // read back as what was written (a negative text TAT starts with '-', not a packed byte).
    const run = async (t0: number): Promise<unknown[]> => {
      const r = new RedisRateLimiter({ timeoutMs: TEST_TIMEOUT_MS, prefixCheck: 'off', redis: redisServer.io, prefix: `sh${n++}:`, limit, localTier: false });
      let t = t0;
      setScriptTime(r, () => t);
      const out: unknown[] = [];
      for (const [dt, cost] of [[0, 1], [0, 1], [10, 1], [400_000, 2], [0, 1], [2_000_000, 1], [0, 0], [0, 3]] as const) {
        t += dt;
        out.push(await r.tryAcquire('k', cost));
      }
      return out;
    };
    const want = await run(1e15);
    for (const t0 of [-5_000_000, -1, 0, 7, 2 ** 53 - 10_000_000]) expect(await run(t0), `from ${t0}`).toEqual(want);
  });

  it('RedisPolicyLimiter.acquire: refuses at once what cannot pass in time, and an aborted wait', async () => {
    const p = new RedisPolicyLimiter({ timeoutMs: TEST_TIMEOUT_MS, redis: redisServer.io, prefix: `acq${n++}:`, rules: [{ limit: { permits: 1, periodMs: 3_600_000 } }], localTier: false });
    const u = { user: 'u', api: 'a' };
    await p.acquire(u); // the one permit
    await expect(p.acquire(u, { maxWaitMs: 1_000 })).rejects.toThrow(RateLimitTimeoutError);
    await expect(p.acquire(u, { cost: 2 })).rejects.toThrow(RateLimitTimeoutError); // never fits the burst
    const controller = new AbortController();
    controller.abort(new Error('gave up'));
    await expect(p.acquire(u, { signal: controller.signal })).rejects.toThrow('gave up');
    await expect(p.acquire(u, { maxWaitMs: -1 })).rejects.toThrow(RangeError);
  });
});
