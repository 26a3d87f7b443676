// Strict inputs: a misspelt or unknown name, a null where options belong, a clock that cannot tell
// the time, a handle of another class, a full table: each is a typed error that names what is
// wrong (and the closest known name), and nothing was built or changed.
import { describe, expect, it } from 'vitest';
import {
  ConcurrencyLimiter, LocalTier, ManualClock, monotonicClock, perMinute, perSecond, PolicyLimiter, RateLimiter,
  RedisRateLimiter, TableFullError, limitTasks, rateLimit, type Limit, type PolicyRule,
} from '../../src/index.js';
import { closest } from '../../src/config/option-names.js';

const limit = perSecond(5);

describe('misspelt and unknown names', () => {
  it.each([
    ['RateLimiter: onfull', () => new RateLimiter({ limit, maxKeys: 4, onfull: 'allow' } as never), /^options\.onfull is not a RateLimiter option; did you mean options\.onFull\? \(known: limit, /],
    ['RateLimiter: maxKey', () => new RateLimiter({ limit, maxKeys: 4, maxKey: 8 } as never), /^options\.maxKey is not a RateLimiter option; did you mean options\.maxKeys\?/],
    ['a limit: brust', () => new RateLimiter({ limit: { permits: 5, periodMs: 1000, brust: 2 }, maxKeys: 4 } as never), /^options\.limit\.brust is not a limit field; did you mean options\.limit\.burst\? \(known: permits, periodMs, burst\)$/],
    ['a second limit: period', () => new RateLimiter({ limit: [limit, { permits: 5, period: 1000 }], maxKeys: 4 } as never), /^options\.limit\[1\]\.period is not a limit field; did you mean options\.limit\[1\]\.periodMs\?/],
    ['a global limit', () => new RateLimiter({ limit, globalLimit: { permits: 5, periodMs: 1000, bust: 1 }, maxKeys: 4 } as never), /^options\.globalLimit\.bust is not a limit field; did you mean options\.globalLimit\.burst\?/],
    ['perSecond options', () => perSecond(5, { brust: 2 } as never), /^options\.brust is not a limit option; did you mean options\.burst\?/],
    ['PolicyLimiter: rule', () => new PolicyLimiter({ rule: [], rules: [{ limit }], maxKeys: 4 } as never), /^options\.rule is not a PolicyLimiter option; did you mean options\.rules\?/],
    ['ConcurrencyLimiter: leaseMS', () => new ConcurrencyLimiter({ maxInFlight: 2, leaseMS: 100, leaseMs: 100, maxKeys: 4 } as never), /^options\.leaseMS is not a ConcurrencyLimiter option; did you mean options\.leaseMs\?/],
    ['LocalTier: leaseMS', () => LocalTier.create({ leaseMS: 5 } as never), /^options\.leaseMS is not a LocalTier option; did you mean options\.leaseMs\?/],
    ['RedisRateLimiter: timeout', () => new RedisRateLimiter({ redis: {}, limit, timeout: 5 } as never), /^options\.timeout is not a RedisRateLimiter option; did you mean options\.timeoutMs\?/],
    ['limitTasks: maxWait', () => limitTasks(new RateLimiter({ limit, maxKeys: 4 }), () => 1, { key: () => 'k', maxWait: 5 } as never), /^options\.maxWait is not a limitTasks option; did you mean options\.maxWaitMs\?/],
    ['rateLimit: header', () => rateLimit({ limiter: new RateLimiter({ limit, maxKeys: 4 }), header: false } as never), /^options\.header is not a rateLimit option; did you mean options\.headers\?/],
    ['an unknown name far from every known one', () => new RateLimiter({ limit, maxKeys: 4, colour: 'red' } as never), /^options\.colour is not a RateLimiter option \(known: /],
  ])('%s', (_, make, message) => {
    expect(make).toThrow(TypeError);
    expect(make).toThrow(message);
  });

  it('a rule with usr is refused, not read as a default rule (nothing changes on setRules)', () => {
    // Alone, { usr } used to become the default rule: alice and everyone else shared it.
    expect(() => new PolicyLimiter({ rules: [{ usr: 'alice', limit: perMinute(1) }] as never, maxKeys: 4 })).toThrow(/^rules\[0\][^.]*\.usr is not a policy rule field; did you mean rules\[0\][^.]*\.user\?/);
    const rules: PolicyRule[] = [{ limit: perMinute(100) }, { user: 'alice', limit: perMinute(1) }];
    const policy = new PolicyLimiter({ rules, maxKeys: 4 });
    expect(() => policy.setRules([{ limit: perMinute(100) }, { usr: 'alice', limit: perMinute(5) }] as never)).toThrow(/rules\[1\][^.]*\.usr is not a policy rule field; did you mean rules\[1\][^.]*\.user\?/);
    expect(policy.rules).toEqual(rules);
    expect([1, 2].map(() => policy.tryAcquire({ user: 'alice', api: 'x' }).allowed)).toEqual([true, false]);
  });

  it('acquire, acquireSync and reserve options: maxWait is refused naming maxWaitMs', async () => {
    const limiter = new RateLimiter({ limit, maxKeys: 4 });
    await expect(limiter.acquire('k', { maxWait: 5 } as never)).rejects.toThrow(/^options\.maxWait is not a acquire\(\) option; did you mean options\.maxWaitMs\?/);
    expect(() => limiter.reserve('k', { maxWait: 5 } as never)).toThrow(/^options\.maxWait is not a reserve\(\) option; did you mean options\.maxWaitMs\?/);
    expect(() => limiter.reserve('k', { cots: 2 } as never)).toThrow(/^options\.cots is not a reserve\(\) option; did you mean options\.cost\?/);
    // The cost where reserve() took it before it took options as acquire() does: named, not misread.
    expect(() => limiter.reserve('k', 2 as never)).toThrow(/^reserve\(\) takes the cost in its options, as acquire\(\) does: reserve\(key, \{ cost: 2 \}\), got 2$/);
    // Nothing was spent by the refused calls.
    expect(limiter.tryAcquire('k', 0).remaining).toBe(5);
  });

  it('closest: case, one edit, a swap of neighbours; nothing for a name far from all', () => {
    const known = ['maxKeys', 'maxKeyBytes', 'burst', 'user', 'onFull'];
    expect(closest('onfull', known)).toBe('onFull');
    expect(closest('brust', known)).toBe('burst');
    expect(closest('usr', known)).toBe('user');
    expect(closest('maxkeybyte', known)).toBe('maxKeyBytes');
    expect(closest('zebra', known)).toBeUndefined();
  });
});

// Found (#29): accepted silently, and wrong later or never.
describe('smaller inputs that were accepted silently', () => {
  it.each([
    ['burst on a fixed window (ignored, while limiter.limit said burst 10)', () => new RateLimiter({ algorithm: 'fixed-window', limit: perSecond(5, { burst: 10 }), maxKeys: 4 }), /^options\.limit\.burst applies to 'gcra' only: a window admits its permits \(5\) at once, got burst 10$/],
    ['burst on a sliding window, second limit', () => new RateLimiter({ algorithm: 'sliding-window', limit: [perSecond(5), perMinute(50, { burst: 1 })], maxKeys: 4 }), /^options\.limit\[1\]\.burst applies to 'gcra' only/],
    ['burst on a Redis sliding log', () => new RedisRateLimiter({ redis: { call: async () => null }, algorithm: 'sliding-log', limit: perSecond(5, { burst: 2 }) }), /^options\.limit\.burst applies to 'gcra' only/],
    ['limitTasks maxWaitMs -1 (refused only at the first task)', () => limitTasks(new RateLimiter({ limit, maxKeys: 4 }), () => 1, { key: () => 'k', maxWaitMs: -1 }), /options\.maxWaitMs/],
    ['limitTasks cost -1', () => limitTasks(new RateLimiter({ limit, maxKeys: 4 }), () => 1, { key: () => 'k', cost: -1 }), /options\.cost must be an integer/],
  ])('%s is a RangeError at once', (_, make, message) => {
    expect(make).toThrow(RangeError);
    expect(make).toThrow(message);
  });

  it('a window limit whose burst equals its permits (as perSecond makes it) is accepted', () => {
    expect(new RateLimiter({ algorithm: 'fixed-window', limit: perSecond(5, { burst: 5 }), maxKeys: 4 }).limit).toMatchObject({ permits: 5, burst: 5 });
  });
});

describe('null and wrong kinds where options belong', () => {
  const limiter = new RateLimiter({ limit, maxKeys: 4 });

  it('attach(handle, null), reserve(key, null), acquire(key, null), ruleFor(null): typed errors', async () => {
    expect(() => RateLimiter.attach(limiter.handle, null as never)).toThrow(/^attach\(\) options must be an object like \{ clock, cacheSize \}, got null$/);
    expect(() => ConcurrencyLimiter.attach(new ConcurrencyLimiter({ maxInFlight: 1, leaseMs: 10, maxKeys: 4 }).handle, null as never)).toThrow(TypeError);
    expect(() => limiter.reserve('k', null as never)).toThrow(/^reserve\(\) options must be an object like \{ cost, maxWaitMs \}, got null$/);
    await expect(limiter.acquire('k', null as never)).rejects.toThrow(/^acquire\(\) options must be an object like \{ cost, maxWaitMs \}, got null$/);
    const policy = new PolicyLimiter({ rules: [{ limit }], maxKeys: 4 });
    expect(() => PolicyLimiter.attach(policy.handle, null as never)).toThrow(TypeError);
    expect(() => policy.ruleFor(null as never)).toThrow(/^request must be an object like \{ user, api \}, got null$/);
    await expect(policy.acquire({ user: 'u', api: 'a' }, null as never)).rejects.toThrow(TypeError);
    expect(limiter.tryAcquire('k', 0).remaining).toBe(5);
  });

  it('a signal that is not an AbortSignal is a TypeError, before anything is spent', async () => {
    await expect(limiter.acquire('s', { signal: { aborted: false } } as never)).rejects.toThrow(/^options\.signal must be an AbortSignal, got an object$/);
    expect(limiter.tryAcquire('s', 0).remaining).toBe(5);
  });

  it('a rule whose limit holds itself is refused by name, not by JSON', () => {
    const looped: Record<string, unknown> = { permits: 5, periodMs: 1000 };
    looped.self = looped;
    expect(() => new PolicyLimiter({ rules: [{ limit: looped as never }], maxKeys: 4 })).toThrow(/^rules\[0\][^.]*\.limit\.self is not a limit field/);
  });
});

describe('clocks', () => {
  it('a clock given at construction must return a finite number', () => {
    expect(() => new RateLimiter({ limit, maxKeys: 4, clock: { now: () => Number.NaN } })).toThrow(/^options\.clock\.now\(\) must return a finite number, got NaN$/);
    expect(() => new PolicyLimiter({ rules: [{ limit }], maxKeys: 4, clock: { now: () => '5' as never } })).toThrow(TypeError);
    expect(() => new ConcurrencyLimiter({ maxInFlight: 1, leaseMs: 10, maxKeys: 4, clock: { now: () => Infinity } })).toThrow(TypeError);
    expect(() => LocalTier.create({ clock: { now: () => undefined as never } })).toThrow(TypeError);
  });

  it('a clock given to attach must return a finite number too', () => {
    const clock = { now: () => 5 };
    const custom = new RateLimiter({ limit, maxKeys: 4, clock });
    expect(() => RateLimiter.attach(custom.handle, { clock: { now: () => Number.NaN } })).toThrow(/^options\.clock\.now\(\) must return a finite number, got NaN$/);
    expect(() => RateLimiter.attach(custom.handle, { clock: { now: () => '5' } as never })).toThrow(TypeError);
    const policy = new PolicyLimiter({ rules: [{ limit }], maxKeys: 4, clock });
    expect(() => PolicyLimiter.attach(policy.handle, { clock: { now: () => Infinity } })).toThrow(TypeError);
    const places = new ConcurrencyLimiter({ maxInFlight: 1, leaseMs: 10, maxKeys: 4, clock });
    expect(() => ConcurrencyLimiter.attach(places.handle, { clock: { now: () => -Infinity } })).toThrow(TypeError);
    expect(RateLimiter.attach(custom.handle, { clock }).allow('k')).toBe(true);
  });

  it('a ManualClock table refuses another ManualClock and the monotonic clock; the monotonic one refuses a ManualClock', () => {
    const clock = new ManualClock(1_000);
    const manual = new RateLimiter({ limit, maxKeys: 4, clock });
    expect(() => RateLimiter.attach(manual.handle, { clock: new ManualClock(1_000) })).toThrow(/runs on a ManualClock, which travels with its handle: attach it without options\.clock \(got another ManualClock\)/);
    expect(() => RateLimiter.attach(manual.handle, { clock: monotonicClock })).toThrow(/got monotonicClock/);
    expect(RateLimiter.attach(manual.handle, { clock: new ManualClock(clock.buffer) }).allow('k')).toBe(true);
    const real = new RateLimiter({ limit, maxKeys: 4 });
    expect(() => RateLimiter.attach(real.handle, { clock: new ManualClock(0) })).toThrow(/runs on performance\.now\(\)/);
    const tier = LocalTier.create({ clock });
    expect(() => LocalTier.attach(tier.handle, { clock: new ManualClock(0) })).toThrow(TypeError);
  });
});

describe('a handle of another class, its kind stripped', () => {
  it('is refused by the table itself (a PolicyLimiter table attached as a RateLimiter admitted everything)', () => {
    const policy = new PolicyLimiter({ rules: [{ limit: perMinute(1) }], maxKeys: 4 });
    const { table, clock } = policy.handle;
    expect(() => RateLimiter.attach({ table, clock } as never)).toThrow(/^handle\.table was made by a PolicyLimiter, not a RateLimiter: attach it with PolicyLimiter\.attach$/);
    const rate = new RateLimiter({ limit, maxKeys: 4 });
    expect(() => PolicyLimiter.attach({ ...rate.handle, kind: 'sluice.PolicyLimiter', rules: policy.handle.rules } as never)).toThrow(/made by a RateLimiter, not a PolicyLimiter/);
    expect(() => ConcurrencyLimiter.attach({ table: rate.handle.table, clock: null } as never)).toThrow(/made by a RateLimiter, not a ConcurrencyLimiter/);
  });
});

describe('messages that name the real problem', () => {
  it.each([
    ['cost 2^53', () => new RateLimiter({ limit, maxKeys: 4 }).tryAcquire('k', 2 ** 53), RangeError, /^cost must be an integer from 0 to 2\^53 - 1 \(Number\.MAX_SAFE_INTEGER\), got 9007199254740992$/],
    ['permits 1e300 without a burst', () => new RateLimiter({ limit: { permits: 1e300, periodMs: 1000 }, maxKeys: 4 }), RangeError, /^options\.limit\.permits must be at most 1099511627776 \(2\^40\) when burst is not given/],
    ['a sliding log over maxLogSize', () => new RateLimiter({ limit: perSecond(5000), algorithm: 'sliding-log', maxKeys: 4 }), RangeError, /^options\.limit\.permits must be at most 1000 \(the maxLogSize option: a log holds one entry per permit\), got 5000$/],
  ])('%s', (_, make, type, message) => {
    expect(make).toThrow(type);
    expect(make).toThrow(message);
  });
});

describe('a full table answers as onFull says, on every path', () => {
  /** A limiter whose table is full: keys are added until one finds no slot (returned as `key`). */
  function full(onFull: 'deny' | 'allow', options: { algorithm?: 'gcra' | 'fixed-window' | 'sliding-log'; limit?: Limit | readonly Limit[] } = {}) {
    const l = new RateLimiter({ limit: options.limit ?? limit, algorithm: options.algorithm ?? 'gcra', maxKeys: 1, onFull });
    for (let i = 0; i < 64; i++) {
      if (l.tryAcquire(`k${i}`).reason === 'table-full') return { l, key: `k${i}` };
    }
    throw new Error('the table never filled');
  }
  const configurations = [
    ['one GCRA limit', {}],
    ['two GCRA limits', { limit: [limit, perMinute(50)] as readonly Limit[] }],
    ['a fixed window', { algorithm: 'fixed-window' as const }],
    ['a sliding log', { algorithm: 'sliding-log' as const }],
  ] as const;

  it.each(configurations)("%s, onFull 'deny': tryAcquire refuses, reserve and acquire throw TableFullError", async (_, options) => {
    const { l, key } = full('deny', options);
    expect(l.tryAcquire(key)).toMatchObject({ allowed: false, reason: 'table-full' });
    if (!('algorithm' in options) || options.algorithm !== 'sliding-log') {
      expect(() => l.reserve(key)).toThrow(TableFullError);
    }
    const e = await l.acquire(key, { maxWaitMs: 10_000 }).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(TableFullError);
    expect(e).toMatchObject({ name: 'TableFullError', key, message: `table full: no slot for "${key}" (every one of maxKeys is live; onFull is 'deny')` });
  });

  it.each(configurations)("%s, onFull 'allow': tryAcquire, reserve and acquire admit at once, counting nothing", async (_, options) => {
    const { l, key } = full('allow', options);
    expect(l.tryAcquire(key)).toMatchObject({ allowed: true, reason: 'table-full' });
    if (!('algorithm' in options) || options.algorithm !== 'sliding-log') {
      const r = l.reserve(key);
      expect(r).toMatchObject({ key, cost: 1, delayMs: 0 });
      expect(r.cancel()).toBe(false); // nothing was counted: nothing to give back
    }
    await expect(l.acquire(key)).resolves.toBeUndefined();
  });

  it('PolicyLimiter.acquire: TableFullError at once under deny, admitted under allow', async () => {
    for (const onFull of ['deny', 'allow'] as const) {
      const policy = new PolicyLimiter({ rules: [{ limit }], maxKeys: 1, onFull });
      let user = 0;
      while (policy.tryAcquire({ user: `u${user}`, api: 'x' }).reason !== 'table-full') user++;
      const got = await policy.acquire({ user: `u${user}`, api: 'x' }, { maxWaitMs: 10_000 }).then(() => 'admitted', (e: unknown) => e);
      if (onFull === 'deny') expect(got).toBeInstanceOf(TableFullError);
      else expect(got).toBe('admitted');
    }
  });
});
