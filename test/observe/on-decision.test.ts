import { Redis } from 'ioredis';
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  ConcurrencyLimiter, ManualClock, perMinute, perSecond, PolicyLimiter, RateLimiter, RedisPolicyLimiter, RedisRateLimiter,
  type DecisionReason, type PolicyRequest,
} from '../../src/index.js';
import { privateRedis, redisAvailable, TEST_TIMEOUT_MS } from '../helpers/redis-server.js';

// onDecision: each limiter class tells a hook of each decision it makes (allow, tryAcquire and
// acquire's attempts), after the decision, on the deciding thread; never of get, reserve or the
// controls. A hook that throws changes nothing: the decision stands, and its error comes back
// from a microtask.

type Call<K = string> = [K, boolean, DecisionReason, number];

function recorder<K = string>() {
  const calls: Call<K>[] = [];
  return { calls, hook: (key: K, allowed: boolean, reason: DecisionReason, cost: number) => void calls.push([key, allowed, reason, cost]) };
}

afterEach(() => {
  vi.restoreAllMocks();
});

describe('onDecision on RateLimiter', () => {
  it('every allow and tryAcquire, with its outcome, reason and cost; not get, reserve, or a call refused as bad input', () => {
    const clock = new ManualClock();
    const { calls, hook } = recorder();
    const limiter = new RateLimiter({ limit: perSecond(2), maxKeys: 16, clock, onDecision: hook });
    expect(limiter.allow('a')).toBe(true);
    expect(limiter.tryAcquire('a', 1).allowed).toBe(true);
    expect(limiter.allow('a')).toBe(false);
    expect(limiter.tryAcquire('a', 3).reason).toBe('exceeds-burst');
    expect(limiter.allow('b', 0)).toBe(true);
    limiter.get('a');
    limiter.reserve('c', { maxWaitMs: 10_000 });
    expect(() => limiter.allow('', 1)).toThrow(TypeError);
    expect(() => limiter.allow('a', -1)).toThrow(RangeError);
    expect(calls).toEqual([
      ['a', true, 'allowed', 1],
      ['a', true, 'allowed', 1],
      ['a', false, 'limited', 1],
      ['a', false, 'exceeds-burst', 3],
      ['b', true, 'allowed', 0],
    ]);
  });

  it('several limits, a global cap and a full table give their own reasons', () => {
    const clock = new ManualClock();
    const { calls, hook } = recorder();
    const capped = new RateLimiter({ limit: [perSecond(5), perMinute(20)], globalLimit: perSecond(1), maxKeys: 16, clock, onDecision: hook });
    capped.allow('x');
    capped.allow('y');
    const full = new RateLimiter({ limit: perSecond(5), maxKeys: 1, slotsPerKey: 2, forceHash: 3, clock, onDecision: hook });
    full.allow('p');
    full.allow('q');
    full.allow('r');
    expect(calls.map(([k, a, r]) => `${k} ${a} ${r}`)).toEqual(['x true allowed', 'y false global-limit', 'p true allowed', 'q true allowed', 'r false table-full']);
  });

  it('acquire: its place held (GCRA: one decision) or each attempt (a sliding log); attach takes its own hook, the handle carries none', async () => {
    const clock = new ManualClock();
    const first = recorder();
    const limiter = new RateLimiter({ limit: perSecond(1), maxKeys: 16, clock, onDecision: first.hook });
    const second = recorder();
    const attached = RateLimiter.attach(limiter.handle, { clock, onDecision: second.hook });
    const plain = RateLimiter.attach(limiter.handle, { clock });
    attached.allow('k');
    plain.allow('k');
    const waiting = attached.acquire('k', { maxWaitMs: 5_000 });
    await expect(attached.acquire('k', { maxWaitMs: 10 })).rejects.toThrow(/would wait/);
    await expect(attached.acquire('k', { cost: 2, maxWaitMs: 10 })).rejects.toThrow(/can never pass/);
    clock.advance(2_000);
    await waiting;
    expect(first.calls).toEqual([]);
    expect(second.calls.map(([, a, r, c]) => `${a} ${r} ${c}`)).toEqual(['true allowed 1', 'true allowed 1', 'false limited 1', 'false exceeds-burst 2']);
    const log = recorder();
    const logged = new RateLimiter({ limit: perSecond(1), algorithm: 'sliding-log', maxKeys: 16, clock, onDecision: log.hook });
    logged.allow('k');
    const later = logged.acquire('k', { maxWaitMs: 5_000 });
    await vi.waitFor(() => expect(log.calls.length).toBe(2));
    clock.advance(1_000);
    await later;
    expect(log.calls.map(([, a, r]) => `${a} ${r}`)).toEqual(['true allowed', 'false limited', 'true allowed']);
  });

  it('a hook that throws: the decision stands and is counted once, and the error is thrown from a microtask', () => {
    const tasks: (() => void)[] = [];
    vi.spyOn(globalThis, 'queueMicrotask').mockImplementation((task) => void tasks.push(task));
    const clock = new ManualClock();
    const boom = new Error('hook failed');
    const limiter = new RateLimiter({ limit: perSecond(1), maxKeys: 16, clock, onDecision: () => { throw boom; } });
    expect(limiter.allow('k')).toBe(true);
    expect(limiter.tryAcquire('k').allowed).toBe(false); // the first was counted, once
    expect(tasks).toHaveLength(2);
    expect(() => (tasks[0] as () => void)()).toThrow(boom);
  });

  it('a hook that is not a function is refused by name, at construction and in attach', () => {
    expect(() => new RateLimiter({ limit: perSecond(1), maxKeys: 16, onDecision: 'log' as never })).toThrow(
      'options.onDecision must be a function (key, allowed, reason, cost), got "log"',
    );
    const limiter = new RateLimiter({ limit: perSecond(1), maxKeys: 16 });
    expect(() => RateLimiter.attach(limiter.handle, { onDecision: 5 as never })).toThrow(/options\.onDecision must be a function/);
    expect(() => RateLimiter.attach(limiter.handle, { onDecison: () => {} } as never)).toThrow(/did you mean options\.onDecision/);
  });
});

describe('onDecision on PolicyLimiter and ConcurrencyLimiter', () => {
  it('PolicyLimiter: the request object, on allow and tryAcquire', () => {
    const { calls, hook } = recorder<PolicyRequest>();
    const clock = new ManualClock();
    const policy = new PolicyLimiter({ rules: [{ limit: perSecond(1) }], maxKeys: 16, clock, onDecision: hook });
    const request = { user: 'u', api: 'a' };
    policy.allow(request);
    policy.tryAcquire(request);
    policy.tryAcquire(request, 2);
    policy.get(request);
    expect(calls).toEqual([[request, true, 'allowed', 1], [request, false, 'limited', 1], [request, false, 'exceeds-burst', 2]]);
    const other = recorder<PolicyRequest>();
    PolicyLimiter.attach(policy.handle, { clock, onDecision: other.hook }).allow(request);
    expect(other.calls).toEqual([[request, false, 'limited', 1]]);
  });

  it('ConcurrencyLimiter: each tryAcquire', () => {
    const { calls, hook } = recorder();
    const leases = new ConcurrencyLimiter({ maxInFlight: 1, leaseMs: 1_000, maxKeys: 16, clock: new ManualClock(), onDecision: hook });
    leases.tryAcquire('job');
    leases.tryAcquire('job');
    leases.get('job');
    expect(calls).toEqual([['job', true, 'allowed', 1], ['job', false, 'limited', 1]]);
  });
});

describe.skipIf(!redisAvailable())('onDecision on the Redis limiters', () => {
  const redisServer = privateRedis();

  it('told once each decision resolves, degraded ones as unavailable; not get or verify', async () => {
    const { calls, hook } = recorder();
    const r = new RedisRateLimiter({ timeoutMs: TEST_TIMEOUT_MS, redis: redisServer.io, prefix: 'od1:', limit: perMinute(1), localTier: false, onDecision: hook });
    expect(await r.allow('k')).toBe(true);
    expect((await r.tryAcquire('k')).allowed).toBe(false);
    await r.get('k');
    await r.verify();
    expect(calls).toEqual([['k', true, 'allowed', 1], ['k', false, 'limited', 1]]);
    // A client to a closed port: the decision is onError's, and the hook hears 'unavailable'.
    const dead = new Redis({ port: 1, lazyConnect: true, maxRetriesPerRequest: 0, enableOfflineQueue: false });
    const down = recorder();
    const off = new RedisRateLimiter({ redis: dead, limit: perMinute(1), localTier: false, timeoutMs: 200, onError: 'allow', onDecision: down.hook });
    expect((await off.tryAcquire('k')).degraded).toBe(true);
    expect(down.calls).toEqual([['k', true, 'unavailable', 1]]);
    dead.disconnect();
  });

  it('RedisPolicyLimiter: the request object', async () => {
    const { calls, hook } = recorder<PolicyRequest>();
    const r = new RedisPolicyLimiter({ timeoutMs: TEST_TIMEOUT_MS, redis: redisServer.io, prefix: 'od2:', rules: [{ limit: perMinute(1) }], localTier: false, onDecision: hook });
    const request = { user: 'u', api: 'a' };
    await r.allow(request);
    await r.allow(request);
    expect(calls).toEqual([[request, true, 'allowed', 1], [request, false, 'limited', 1]]);
  });

  it('a hook that is not a function is refused by name', () => {
    expect(() => new RedisRateLimiter({ redis: redisServer.io, limit: perMinute(1), onDecision: {} as never })).toThrow(/options\.onDecision must be a function/);
  });
});
