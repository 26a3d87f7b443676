import { describe, expect, it } from 'vitest';
import { ManualClock, perSecond, RateLimiter } from '../../src/index.js';

function fresh(extra: Record<string, unknown> = {}) {
  const clock = new ManualClock();
  const limiter = new RateLimiter({ limit: perSecond(5), maxKeys: 8, clock, ...extra });
  return { clock, limiter };
}

describe('bad input', () => {
  it.each([
    [123, TypeError, /key must be a non-empty string, got 123/],
    [undefined, TypeError, /key must be a non-empty string, got undefined/],
    [null, TypeError, /key must be a non-empty string, got null/],
    [{}, TypeError, /key must be a non-empty string, got an object/],
    ['', TypeError, /key must be a non-empty string, got ""/],
    ['x'.repeat(4097), RangeError, /key must be at most 4096 UTF-8 bytes \(option maxKeyBytes\), got "xxx/],
    ['é'.repeat(2049), RangeError, /key must be at most 4096 UTF-8 bytes/],
  ])('rejects key %j and changes nothing', (key, type, message) => {
    const { limiter } = fresh();
    limiter.tryAcquire('a', 2);
    expect(() => limiter.tryAcquire(key as string)).toThrow(type);
    expect(() => limiter.allow(key as string)).toThrow(message);
    expect(limiter.tryAcquire('a', 0).remaining).toBe(3);
    expect(limiter.stats().liveKeys).toBe(1);
  });

  it('accepts a key of exactly maxKeyBytes, counting UTF-8 bytes', () => {
    const { limiter } = fresh({ maxKeyBytes: 8 });
    expect(limiter.allow('12345678')).toBe(true);
    expect(limiter.allow('ab€de')).toBe(true); // 7 bytes
    expect(() => limiter.allow('ab€def€')).toThrow(/at most 8 UTF-8 bytes/);
  });

  it.each([
    [-1, RangeError], [1.5, RangeError], [NaN, RangeError], [Infinity, RangeError], ['1', TypeError], [2n, TypeError],
  ])('rejects cost %s and changes nothing', (cost, type) => {
    const { limiter } = fresh();
    expect(() => limiter.tryAcquire('a', cost as number)).toThrow(type);
    expect(() => limiter.tryAcquire('a', cost as number)).toThrow(/cost must be an integer from 0 to 2\^53 - 1 \(Number.MAX_SAFE_INTEGER\), got/);
    expect(limiter.tryAcquire('a', 0).remaining).toBe(5);
  });

  it.each([
    [{ permits: 0, periodMs: 1000 }, RangeError, /options\.limit\.permits must be a positive finite number, got 0/],
    [{ permits: -5, periodMs: 1000 }, RangeError, /options\.limit\.permits .* got -5/],
    [{ permits: NaN, periodMs: 1000 }, RangeError, /options\.limit\.permits .* got NaN/],
    [{ permits: '5', periodMs: 1000 }, TypeError, /options\.limit\.permits must be a number, got "5"/],
    [{ permits: 5, periodMs: Infinity }, RangeError, /options\.limit\.periodMs .* got Infinity/],
    [{ permits: 5, periodMs: 0 }, RangeError, /options\.limit\.periodMs .* got 0/],
    [{ permits: 5, periodMs: 1000, burst: 0 }, RangeError, /options\.limit\.burst must be at least 1, got 0/],
    [{ permits: 5, periodMs: 1000, burst: 2.5 }, RangeError, /options\.limit\.burst must be an integer/],
    [{ permits: 1e11, periodMs: 1, burst: 1 }, RangeError, /options\.limit: 100000000000 per 1 ms .* the finest interval is 0\.1 ps/],
    [{ permits: 5, periodMs: 1000, burst: 2 ** 40 + 1 }, RangeError, /options\.limit\.burst must be an integer from 1 to 1099511627776/],
    [{ permits: 1, periodMs: 1e25 }, RangeError, /the longest interval is 6\.872e\+20 ms/],
    [null, TypeError, /options\.limit must be an object/],
  ])('rejects limit %j', (limit, type, message) => {
    expect(() => new RateLimiter({ limit: limit as never, maxKeys: 10 })).toThrow(type);
    expect(() => new RateLimiter({ limit: limit as never, maxKeys: 10 })).toThrow(message);
  });

  it.each([
    [0, RangeError], [-1, RangeError], [1.5, RangeError], [NaN, RangeError], [2 ** 23, RangeError], ['10', TypeError],
  ])('rejects maxKeys %s', (maxKeys, type) => {
    expect(() => new RateLimiter({ limit: perSecond(1), maxKeys: maxKeys as number })).toThrow(type);
    expect(() => new RateLimiter({ limit: perSecond(1), maxKeys: maxKeys as number })).toThrow(/options\.maxKeys must be an integer/);
  });

  it('rejects the other options by name', () => {
    const limit = perSecond(1);
    expect(() => new RateLimiter({ limit, maxKeys: 1, onFull: 'maybe' as never })).toThrow(/options\.onFull must be 'deny' or 'allow', got "maybe"/);
    expect(() => new RateLimiter({ limit, maxKeys: 1, maxKeyBytes: 0 })).toThrow(/options\.maxKeyBytes/);
    expect(() => new RateLimiter({ limit, maxKeys: 1, clock: {} as never })).toThrow(/options\.clock must be an object with a now\(\) method/);
    expect(() => new RateLimiter(undefined as never)).toThrow(TypeError);
    expect(() => perSecond(0)).toThrow(/limit\.permits must be a positive finite number, got 0/);
    expect(() => perSecond(5, { burst: -1 })).toThrow(/limit\.burst must be at least 1, got -1/);
  });

  it('rejects a handle that is not a sluice table', () => {
    expect(() => RateLimiter.attach(null as never)).toThrow(TypeError);
    expect(() => RateLimiter.attach({ table: new ArrayBuffer(8) } as never)).toThrow(/handle must be a RateLimiter handle/);
    expect(() => RateLimiter.attach({ table: new SharedArrayBuffer(1024) } as never)).toThrow(/bad magic number/);
  });

  it('keeps ManualClock time monotonic', () => {
    const clock = new ManualClock(100);
    expect(() => clock.set(99)).toThrow(RangeError);
    expect(() => clock.advance(-1)).toThrow(/ms must be a finite number >= 0, got -1/);
    expect(() => new ManualClock(NaN)).toThrow(/startMs must be a finite number >= 0, got NaN/);
    expect(clock.now()).toBe(100);
    clock.advance(0.5);
    expect(clock.now()).toBe(100.5);
  });
});

describe('a table too large to allocate', () => {
  it('throws a RangeError naming maxKeys and the size, and allocates nothing', () => {
    expect(() => new RateLimiter({ limit: { permits: 65_000, periodMs: 1000 }, algorithm: 'sliding-log', maxKeys: 4_000_000, maxLogSize: 65_536 }))
      .toThrow(/options\.maxKeys 4000000 needs a table of \d+ bytes .* could not be allocated/);
  });
});
