// RedisPolicyLimiter against a real redis-server: the rules decide as PolicyLimiter's do (the same
// decision vectors, rule changes included), bad rules and requests are refused, and onError
// 'local' falls back to a shared-memory PolicyLimiter with the same rules.
import fc from 'fast-check';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { ManualClock, perHour, perMinute, perSecond, PolicyLimiter, RedisPolicyLimiter, type PolicyRule } from '../../src/index.js';
import { setScriptTime } from '../../src/redis/redis-core.js';
import { heldKeys, privateRedis, redisAvailable, SCRIPT_TTL_PAD_MS, TEST_TIMEOUT_MS } from '../helpers/redis-server.js';

const available = redisAvailable();

const rulesA: PolicyRule[] = [
  { limit: { permits: 5, periodMs: 1_000 } },
  { user: 'gold', limit: [{ permits: 10, periodMs: 1_000, burst: 4 }, { permits: 30, periodMs: 60_000 }] },
  { api: 'export', algorithm: 'fixed-window', limit: { permits: 3, periodMs: 2_000 } },
  { user: 'gold', api: 'export', algorithm: 'sliding-log', limit: { permits: 4, periodMs: 1_500 } },
];
// GCRA rates change (debts carry over in both); the window rules stay (their counts too).
const rulesB: PolicyRule[] = [
  { limit: { permits: 4, periodMs: 700 } },
  { user: 'gold', limit: [{ permits: 4, periodMs: 1_000 }, { permits: 50, periodMs: 60_000, burst: 9 }] },
  { api: 'export', algorithm: 'fixed-window', limit: { permits: 3, periodMs: 2_000 } },
  { user: 'gold', api: 'export', algorithm: 'sliding-log', limit: { permits: 4, periodMs: 1_500 } },
];

const USERS = ['gold', 'lead'];
const APIS = ['search', 'export'];

describe.skipIf(!available)('RedisPolicyLimiter', () => {
  const redisServer = privateRedis();
  let n = 0;
  const make = (rules: PolicyRule[], more: object = {}): RedisPolicyLimiter => new RedisPolicyLimiter({ timeoutMs: TEST_TIMEOUT_MS, redis: redisServer.io, rules, prefix: `p${n++}:`, localTier: false, ...more });


  it('decides as PolicyLimiter does, across a change of rules', async () => {
    let checked = 0;
    let refused = 0;
    const step = fc.record({
      advanceMs: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 60 }), fc.integer({ min: 60, max: 3_000 })),
      user: fc.integer({ min: 0, max: 1 }),
      api: fc.integer({ min: 0, max: 1 }),
      cost: fc.oneof(fc.constant(1), fc.integer({ min: 0, max: 5 })),
      swap: fc.boolean().map((b) => b && Math.random() < 0.1),
    });
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 1_000, max: 10_000_000 }), fc.array(step, { minLength: 5, maxLength: 50 }), async (startMs, steps) => {
        const clock = new ManualClock(startMs);
        const memory = new PolicyLimiter({ rules: rulesA, maxKeys: 16, clock });
        const onRedis = make(rulesA, { redis: heldKeys(redisServer.io) });
        let now = startMs;
        let current = rulesA;
        setScriptTime(onRedis, () => now * 1000, SCRIPT_TTL_PAD_MS);
        for (const [i, s] of steps.entries()) {
          now += s.advanceMs;
          clock.set(now);
          if (s.swap) {
            current = current === rulesA ? rulesB : rulesA;
            memory.setRules(current);
            onRedis.setRules(current);
          }
          const request = { user: USERS[s.user] as string, api: APIS[s.api] as string };
          expect(onRedis.ruleFor(request)).toEqual(memory.ruleFor(request));
          const m = memory.tryAcquire(request, s.cost);
          const r = await onRedis.tryAcquire(request, s.cost);
          const at = `step ${i} at ${now} ms, ${request.user}/${request.api}, cost ${s.cost}`;
          expect({ allowed: r.allowed, reason: r.reason, remaining: r.remaining }, at).toEqual({ allowed: m.allowed, reason: m.reason, remaining: m.remaining });
          if (m.retryAfterMs === Infinity) expect(r.retryAfterMs, at).toBe(Infinity);
          else expect(Math.abs(r.retryAfterMs - m.retryAfterMs), at).toBeLessThanOrEqual(0.001 + 1e-9);
          checked++;
          if (!m.allowed) refused++;
        }
      }),
      { numRuns: 30 },
    );
    expect(refused).toBeGreaterThan(checked / 10);
  });

  it('refuses bad rules, options and requests, naming them, and changes nothing', async () => {
    expect(() => make([{ user: 'x', limit: perSecond(1) }])).toThrow(/rules must include a default rule/);
    expect(() => make([{ limit: { permits: 1, periodMs: 0.0001 } }])).toThrow(/rules\[0\] \(default\)\.limit\.periodMs must be a whole number of microseconds/);
    expect(() => make([{ limit: perSecond(1) }, { user: 'x', algorithm: 'fixed-window', limit: perSecond(1.5) }])).toThrow(/rules\[1\] \(user "x"\)\.limit\.permits/);
    expect(() => make([{ limit: perSecond(1) }], { maxBatch: 0 })).toThrow(/options\.maxBatch/);
    expect(() => new RedisPolicyLimiter({ redis: redisServer.io, rules: [{ limit: perSecond(1) }], rule: [] } as never)).toThrow(/options\.rule is not a RedisPolicyLimiter option/);
    const r = make([{ limit: perMinute(2) }]);
    expect(() => r.tryAcquire({ user: '', api: 'a' })).toThrow(/request\.user must be a non-empty string/);
    expect(() => r.tryAcquire(null as never)).toThrow(/request must be an object/);
    expect(() => r.tryAcquire({ user: 'u', api: 'a' }, 1.5)).toThrow(/cost must be an integer from 0 to 2\^53 - 1 \(Number.MAX_SAFE_INTEGER\), got 1\.5/);
    expect(() => r.setRules([{ user: 'u', limit: perSecond(1) }])).toThrow(/default rule/);
    expect(r.rules).toEqual([{ limit: perMinute(2) }]);
    expect((await r.tryAcquire({ user: 'u', api: 'a' })).remaining).toBe(1);
  });

  it('a change of rules keeps GCRA debt: the time owed carries into the new rate', async () => {
    const r = make([{ limit: perHour(2) }]);
    const u = { user: 'u', api: 'a' };
    expect(await r.allow(u)).toBe(true);
    expect(await r.allow(u)).toBe(true);
    expect(await r.allow(u)).toBe(false);
    // Twice the rate: the hour owed for 2 requests is the whole burst of 4 at the new rate (a
    // fresh pair would pass); the next passes a quarter of an hour on.
    r.setRules([{ limit: perHour(4) }]);
    const d = await r.tryAcquire(u);
    expect(d.allowed).toBe(false);
    expect(d.retryAfterMs).toBeGreaterThan(14.9 * 60_000);
    expect(d.retryAfterMs).toBeLessThanOrEqual(15 * 60_000);
    expect((await r.tryAcquire({ user: 'v', api: 'a' })).remaining).toBe(3);
  });

  it('a window keeps its count under its own period and algorithm, and starts afresh under others', async () => {
    const fw = (periodMs: number): PolicyRule[] => [{ algorithm: 'fixed-window', limit: { permits: 2, periodMs } }];
    const r = make(fw(3_600_000));
    setScriptTime(r, () => 1_000_000 * 3_600_000 * 1000 + 60_000_000, SCRIPT_TTL_PAD_MS); // a minute into an hour
    const u = { user: 'u', api: 'a' };
    expect(await r.allow(u)).toBe(true);
    expect(await r.allow(u)).toBe(true);
    expect(await r.allow(u)).toBe(false);
    r.setRules(fw(7_200_000)); // another period: a window of its own
    expect(await r.allow(u)).toBe(true);
    r.setRules([{ algorithm: 'sliding-log', limit: { permits: 2, periodMs: 3_600_000 } }]);
    expect(await r.allow(u)).toBe(true);
    r.setRules(fw(3_600_000)); // back: the hour's count is still there
    expect(await r.tryAcquire(u)).toMatchObject({ allowed: false, remaining: 0, retryAfterMs: 59 * 60_000 });
  });

  it("onError 'local': a shared-memory PolicyLimiter with the same rules answers while Redis is away", async () => {
    const dead = new Redis({ path: '/nonexistent/redis.sock', lazyConnect: true, maxRetriesPerRequest: 0, enableOfflineQueue: false });
    dead.on('error', () => {}); // no server there, on purpose
    const r = new RedisPolicyLimiter({ redis: dead, rules: [{ limit: perMinute(1) }, { user: 'vip', limit: perMinute(3) }], onError: 'local', timeoutMs: 50 });
    const answers = [];
    for (let i = 0; i < 4; i++) answers.push(await r.tryAcquire({ user: 'vip', api: 'x' }));
    expect(answers.map((d) => d.allowed)).toEqual([true, true, true, false]);
    expect(answers.every((d) => d.degraded === true)).toBe(true);
    // The fallback's rules change too: a fresh pair of vip's gets 5.
    r.setRules([{ limit: perMinute(1) }, { user: 'vip', limit: perMinute(5) }]);
    const fresh = [];
    for (let i = 0; i < 6; i++) fresh.push((await r.tryAcquire({ user: 'vip', api: 'y' })).allowed);
    expect(fresh).toEqual([true, true, true, true, true, false]);
    dead.disconnect();
  });
});
