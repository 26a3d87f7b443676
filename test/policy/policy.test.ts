import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { ManualClock, perHour, perMinute, perSecond, PolicyLimiter, type PolicyRule } from '../../src/index.js';

const rules: PolicyRule[] = [
  { limit: perSecond(2) }, // default
  { user: 'alice', limit: perSecond(5) },
  { api: 'search', limit: perSecond(3) },
  { user: 'alice', api: 'search', algorithm: 'fixed-window', limit: perSecond(10) },
];

function limiter(extra: Partial<ConstructorParameters<typeof PolicyLimiter>[0]> = {}) {
  const clock = new ManualClock();
  return { clock, policy: new PolicyLimiter({ rules, maxKeys: 64, clock, ...extra }) };
}

function drain(policy: PolicyLimiter, user: string, api: string): number {
  let n = 0;
  while (policy.tryAcquire({ user, api }).allowed) n++;
  return n;
}

describe('PolicyLimiter', () => {
  it('applies the most specific rule: (user, api), then api, then user, then default', () => {
    const { policy } = limiter();
    expect(drain(policy, 'alice', 'search')).toBe(10); // (user, api)
    expect(drain(policy, 'bob', 'search')).toBe(3); // api
    expect(drain(policy, 'alice', 'upload')).toBe(5); // user
    expect(drain(policy, 'bob', 'upload')).toBe(2); // default
  });

  it('keeps one state per (user, api) pair', () => {
    const { policy } = limiter();
    expect(drain(policy, 'carol', 'a')).toBe(2);
    expect(drain(policy, 'carol', 'b')).toBe(2);
    expect(drain(policy, 'ca', 'rola')).toBe(2); // no confusion between ("carol", "a") and ("ca", "rola")
    expect(policy.tryAcquire({ user: 'carol', api: 'a' })).toMatchObject({ allowed: false, reason: 'limited', retryAfterMs: 500 });
  });

  it('applies a plan upgrade at once and keeps the key\'s GCRA state', () => {
    const { policy, clock } = limiter();
    expect(drain(policy, 'dave', 'x')).toBe(2); // 2 per second, spent
    policy.setRules([...rules, { user: 'dave', limit: perSecond(100) }]);
    // The key's debt carries over: 2 requests at 500 ms each = 1 s, which at the new 10 ms per
    // request is the whole new bucket of 100. Half a second later, half of it is back.
    expect(policy.tryAcquire({ user: 'dave', api: 'x' }, 0).remaining).toBe(0);
    clock.advance(500);
    expect(policy.tryAcquire({ user: 'dave', api: 'x' }, 0).remaining).toBe(50);
    expect(policy.tryAcquire({ user: 'dave', api: 'x' }, 50).allowed).toBe(true);
  });

  it('starts a key fresh when its rule changes algorithm', () => {
    const { policy } = limiter();
    expect(drain(policy, 'erin', 'x')).toBe(2);
    policy.setRules([...rules, { user: 'erin', algorithm: 'sliding-log', limit: perMinute(4) }]);
    expect(drain(policy, 'erin', 'x')).toBe(4);
  });

  it('rejects bad rules, naming the rule, and changes nothing', () => {
    const { policy } = limiter();
    expect(() => policy.setRules([{ limit: perSecond(1) }, { user: 'x', algorithm: 'nope' as never, limit: perSecond(1) }])).toThrow(/rules\[1\] \(user "x"\)\.algorithm must be one of/);
    expect(() => policy.setRules([{ limit: perSecond(1) }, { api: 'y', limit: { permits: -1, periodMs: 1 } }])).toThrow(/rules\[1\] \(api "y"\)\.limit\.permits must be a positive finite number, got -1/);
    expect(() => policy.setRules([{ limit: perSecond(1) }, { user: 'u', api: 'a', limit: perSecond(1) }, { user: 'u', api: 'a', limit: perHour(1) }])).toThrow(/rules\[2\] \(user "u", api "a"\) duplicates rules\[1\] \(user "u", api "a"\)/);
    expect(() => policy.setRules([{ user: 'u', limit: perSecond(1) }])).toThrow(/rules must include a default rule/);
    expect(() => new PolicyLimiter({ rules: 'x' as never, maxKeys: 1 })).toThrow(/rules must be an array/);
    expect(policy.rules).toEqual(JSON.parse(JSON.stringify(rules)));
    expect(drain(policy, 'bob', 'upload')).toBe(2);
    expect(() => policy.tryAcquire({ user: '', api: 'a' })).toThrow(/request\.user must be a non-empty string, got ""/);
    expect(() => policy.tryAcquire({ user: 'u', api: 'a' }, -1)).toThrow(/cost must be an integer from 0 to 2\^53 - 1 \(Number.MAX_SAFE_INTEGER\), got -1/);
  });

  it('refuses rules that need more state than was reserved, naming the option', () => {
    const { policy } = limiter({ maxStateWords: 16 });
    expect(() => policy.setRules([{ limit: perSecond(1) }, { user: 'u', algorithm: 'sliding-log', limit: perSecond(100) }])).toThrow(/rules\[1\] \(user "u"\) needs 102 state words per key; this limiter has room for 16 \(option maxStateWords\)/);
  });

  it('shares rules and state with a worker, and a worker can replace the rules for everyone', async () => {
    const { policy } = limiter();
    expect(policy.tryAcquire({ user: 'bob', api: 'upload' }).remaining).toBe(1);
    const worker = new Worker(new URL('../fixtures/worker.mjs', import.meta.url), {
      workerData: { mode: 'policy', handle: policy.handle, id: 0 },
    });
    const reply = await new Promise<{ before: number; after: number }>((resolve, reject) => { worker.once('message', resolve); worker.once('error', reject); });
    await worker.terminate();
    expect(reply.before).toBe(0); // the worker spent bob's last one
    expect(reply.after).toBe(7); // under the worker's new default of 8 per second, 1 spent
    expect(policy.rules).toEqual([{ limit: { permits: 8, periodMs: 1000 } }]);
    expect(policy.tryAcquire({ user: 'zed', api: 'q' }).remaining).toBe(7);
  });

  it('reclaims idle pairs', () => {
    const { policy, clock } = limiter();
    drain(policy, 'a', 'b');
    clock.advance(10_000);
    expect(policy.sweep()).toBe(1);
    expect(policy.stats().liveKeys).toBe(0);
  });
});

describe('PolicyLimiter.acquire()', () => {
  it('waits for the turn of the rule that applies, and rejects a wait over maxWaitMs', async () => {
    const clock = new ManualClock();
    const policy = new PolicyLimiter({ rules: [{ limit: perSecond(2) }], maxKeys: 8, clock });
    await policy.acquire({ user: 'u', api: 'a' }, { cost: 2 });
    let done = false;
    const waiting = policy.acquire({ user: 'u', api: 'a' }).then(() => { done = true; });
    await new Promise((r) => setTimeout(r, 5));
    expect(done).toBe(false);
    clock.advance(500);
    await waiting;
    expect(done).toBe(true);
    await expect(policy.acquire({ user: 'u', api: 'a' }, { maxWaitMs: 100 })).rejects.toMatchObject({ name: 'RateLimitTimeoutError', retryAfterMs: 500, key: 'u / a' });
  });
});

describe('PolicyLimiter.allow()', () => {
  it('answers what tryAcquire would, and spends the same', () => {
    const a = limiter().policy;
    const b = limiter().policy;
    for (const [user, api] of [['alice', 'search'], ['bob', 'search'], ['alice', 'upload'], ['bob', 'upload']] as const) {
      for (let i = 0; i < 12; i++) expect(a.allow({ user, api })).toBe(b.tryAcquire({ user, api }).allowed);
    }
    expect(a.allow({ user: 'bob', api: 'upload' }, 0)).toBe(true); // a probe spends nothing
    expect(a.tryAcquire({ user: 'carol', api: 'upload' }, 3).reason).toBe('exceeds-burst');
    expect(a.allow({ user: 'carol', api: 'upload' }, 3)).toBe(false);
  });

  it('follows onFull when the table has no slot, and rejects bad input like tryAcquire', () => {
    const full = (onFull: 'deny' | 'allow') => {
      const { policy } = limiter({ maxKeys: 1, onFull });
      let n = 0;
      while (policy.tryAcquire({ user: `u${n}`, api: 'a' }).reason !== 'table-full') n++;
      return policy.allow({ user: 'someone-else', api: 'a' });
    };
    expect(full('deny')).toBe(false);
    expect(full('allow')).toBe(true);
    const { policy } = limiter();
    expect(() => policy.allow({ user: 'u', api: 'a' }, -1)).toThrow(RangeError);
    expect(() => policy.allow(null as never)).toThrow(TypeError);
  });
});

describe('PolicyLimiter: a change of rules carries the debt across tick sizes', () => {
  it('perSecond(2) to perHour(100) after one request leaves 99, not 100', () => {
    const clock = new ManualClock(10_000);
    const policy = new PolicyLimiter({ rules: [{ limit: perSecond(2) }], maxKeys: 8, clock });
    expect(policy.tryAcquire({ user: 'u', api: 'a' })).toMatchObject({ allowed: true, remaining: 1 });
    policy.setRules([{ limit: perHour(100) }]);
    // 500 ms of debt carried into an interval of 36 s: 99 whole requests left, not a fresh 100.
    expect(policy.tryAcquire({ user: 'u', api: 'a' }, 0)).toMatchObject({ allowed: true, remaining: 99 });
    expect(policy.tryAcquire({ user: 'u', api: 'a' })).toMatchObject({ allowed: true, remaining: 98 });
    // And back: 500 ms + 36 s of debt under perSecond(2) is far past its 1 s bucket.
    policy.setRules([{ limit: perSecond(2) }]);
    expect(policy.tryAcquire({ user: 'u', api: 'a' })).toMatchObject({ allowed: false, remaining: 0 });
  });
});

describe('PolicyLimiter: a change of rules that adds or drops a GCRA limit carries the debt of the limits both have', () => {
  // Found: a rule that gained a limit started the pair fresh, so an hour's block on it was gone
  // at once (2 spent, the block, then setRules to two limits: 2 more admitted, 4 at one instant at
  // 2 a second, burst 2). docs/policies.md says a GCRA key's debt carries over.
  const k = { user: 'u', api: 'a' };
  const two = { permits: 2, periodMs: 1_000, burst: 2 };

  it('found: a block survives a rule that gains a limit; the new limit starts fresh', () => {
    const clock = new ManualClock(1_000_000);
    const p = new PolicyLimiter({ maxKeys: 8, clock, rules: [{ limit: two }] });
    expect(p.allow(k)).toBe(true);
    expect(p.allow(k)).toBe(true);
    p.block(k, 3_600_000);
    p.setRules([{ limit: [two, perMinute(100)] }]);
    expect(p.allow(k)).toBe(false);
    const d = p.tryAcquire(k);
    expect(d.allowed).toBe(false);
    expect(d.retryAfterMs).toBeGreaterThan(3_599_000);
    // The new limit is fresh: 100 a minute, the first limit's block the only thing refusing.
    expect(d.limits?.[1]?.remaining).toBe(100);
    clock.advance(3_600_010); // the carried debt is rounded up to the new rule's tick
    expect(p.allow(k)).toBe(true);
  });

  it('a rule that drops a limit keeps the debt of the one left', () => {
    const clock = new ManualClock(1_000_000);
    const p = new PolicyLimiter({ maxKeys: 8, clock, rules: [{ limit: [two, perMinute(100)] }] });
    expect(p.allow(k)).toBe(true);
    expect(p.allow(k)).toBe(true);
    p.setRules([{ limit: two }]);
    expect(p.allow(k)).toBe(false); // the two spent carried over: the burst of 2 is used
    clock.advance(501); // one interval (500 ms) later, and the carried debt's rounding
    expect(p.allow(k)).toBe(true);
    expect(p.allow(k)).toBe(false);
  });

  it('a reset under the new rule still starts every limit fresh', () => {
    const clock = new ManualClock(1_000_000);
    const p = new PolicyLimiter({ maxKeys: 8, clock, rules: [{ limit: two }] });
    p.block(k, 3_600_000);
    p.setRules([{ limit: [two, perMinute(100)] }]);
    p.reset(k);
    expect(p.allow(k)).toBe(true);
    expect(p.allow(k)).toBe(true);
    expect(p.allow(k)).toBe(false);
  });
});

describe('PolicyLimiter.ruleFor()', () => {
  it('names the rule that applies, the same object until the rules change', () => {
    const policy = new PolicyLimiter({ rules: [{ limit: perSecond(2) }, { api: 'search', limit: perSecond(3) }], maxKeys: 8 });
    const a = policy.ruleFor({ user: 'u', api: 'search' });
    expect(a).toEqual({ api: 'search', limit: { permits: 3, periodMs: 1000 } });
    expect(policy.ruleFor({ user: 'v', api: 'search' })).toBe(a);
    expect(policy.ruleFor({ user: 'u', api: 'other' })).toEqual({ limit: { permits: 2, periodMs: 1000 } });
    policy.setRules([{ limit: perSecond(2) }, { api: 'search', limit: perSecond(4) }]);
    expect(policy.ruleFor({ user: 'u', api: 'search' })).toEqual({ api: 'search', limit: { permits: 4, periodMs: 1000 } });
  });
});

describe('PolicyLimiter under racing workers while the rules change', () => {
  it('never admits more than the largest limit in force, and every thread follows the new rules', async () => {
    const { openGate, result, spawn } = await import('../helpers/workers.js');
    const clock = new ManualClock();
    const small = [{ limit: perSecond(100) }];
    const large = [{ limit: perSecond(200) }];
    const policy = new PolicyLimiter({ rules: small, maxKeys: 8, clock });
    const gate = new SharedArrayBuffer(8);
    const workers = Array.from({ length: 4 }, (_, id) => spawn({ mode: 'policy-hammer', handle: policy.handle, id, gate, attempts: 20_000 }));
    const replies = workers.map((w) => result<{ allowed: number }>(w));
    await openGate(gate, 4);
    for (let i = 0; i < 200; i++) {
      policy.setRules(i % 2 === 0 ? large : small); // flip while they hammer
      await new Promise((r) => setImmediate(r));
    }
    const total = (await Promise.all(replies)).reduce((sum, r) => sum + r.allowed, 0);
    await Promise.all(workers.map((w) => w.terminate()));
    // A frozen clock: GCRA debt is time, carried across the flips, so nothing is ever refunded.
    expect(total).toBeGreaterThanOrEqual(100);
    expect(total).toBeLessThanOrEqual(200);
    // Both rules hold a bucket of 1 s (100 x 10 ms, 200 x 5 ms), and the workers drained it: the
    // debt D is over 990 ms (the last admissions, under either rule, left less than one interval
    // of 10 ms, or of 5 ms, to spare). So nothing is left under the small rule, and under the
    // large one at most one request of 5 ms (when D <= 995).
    policy.setRules(small);
    expect(policy.tryAcquire({ user: 'u', api: 'a' }, 0).remaining).toBe(0);
    policy.setRules(large);
    const { remaining } = policy.tryAcquire({ user: 'u', api: 'a' }, 0);
    expect([0, 1]).toContain(remaining);
    expect(remaining).toBeLessThanOrEqual(200 - total);
  });
});
