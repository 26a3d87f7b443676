import { describe, expect, it } from 'vitest';
import { ConcurrencyLimiter, ManualClock, perSecond, PolicyLimiter, RateLimiter } from '../../src/index.js';

// Keys are stored as UTF-8, which has no encoding for a lone UTF-16 surrogate (TextEncoder writes
// U+FFFD instead). Without a check, these three keys would share one state.
const REPLACEMENT = 'user-\uFFFD';
const LONE = [['a lone high surrogate', 'user-\uD800'], ['a lone low surrogate', 'user-\uDC00']] as const;
const MESSAGE = /^key must be a well-formed string \(no lone surrogates\), got "user-\\ud800"$/;

function rateLimiter(extra: Record<string, unknown> = {}) {
  const clock = new ManualClock();
  return { clock, limiter: new RateLimiter({ limit: perSecond(1), maxKeys: 8, clock, ...extra }) };
}

describe('RateLimiter keys', () => {
  it('rejects a lone surrogate instead of sharing the state of "user-\\uFFFD"', () => {
    const { limiter } = rateLimiter();
    expect(limiter.tryAcquire(REPLACEMENT).allowed).toBe(true);
    for (const [, key] of LONE) {
      expect(() => limiter.tryAcquire(key)).toThrow(TypeError);
      expect(() => limiter.allow(key)).toThrow(TypeError);
    }
    expect(() => limiter.tryAcquire('user-\uD800')).toThrow(MESSAGE);
    expect(limiter.stats().liveKeys).toBe(1);
    expect(limiter.tryAcquire(REPLACEMENT).allowed).toBe(false); // its one permit was spent once
  });

  it.each(LONE)('rejects %s in reserve() and acquire() and changes nothing', async (_, key) => {
    const { limiter } = rateLimiter();
    expect(() => limiter.reserve(key)).toThrow(TypeError);
    await expect(limiter.acquire(key)).rejects.toThrow(TypeError);
    expect(limiter.stats().liveKeys).toBe(0);
  });

  it.each(['fixed-window', 'sliding-window', 'sliding-log'] as const)('rejects a lone surrogate with algorithm %s', (algorithm) => {
    const { limiter } = rateLimiter({ algorithm });
    expect(limiter.allow(REPLACEMENT)).toBe(true);
    for (const [, key] of LONE) expect(() => limiter.tryAcquire(key)).toThrow(TypeError);
    expect(limiter.stats().liveKeys).toBe(1);
  });

  it('rejects a lone surrogate anywhere in the key, not only at its end', () => {
    const { limiter } = rateLimiter();
    for (const key of ['\uD800user', 'us\uDFFFer', '\uDC00\uD800']) expect(() => limiter.allow(key)).toThrow(TypeError);
    expect(limiter.stats().liveKeys).toBe(0);
  });

  it('keeps well-formed astral characters (surrogate pairs) as distinct keys', () => {
    const { limiter } = rateLimiter();
    const keys = ['user-\u{1F600}', 'user-\u{1F601}', 'user-\u{10FFFF}', REPLACEMENT];
    for (const key of keys) expect(limiter.allow(key)).toBe(true);
    for (const key of keys) expect(limiter.allow(key)).toBe(false);
    expect(limiter.stats().liveKeys).toBe(4);
  });
});

describe('PolicyLimiter keys', () => {
  function policy() {
    return new PolicyLimiter({ rules: [{ limit: perSecond(1) }], maxKeys: 8, clock: new ManualClock() });
  }

  it.each([
    ['user', { user: 'user-\uD800', api: 'search' }],
    ['user', { user: 'user-\uDC00', api: 'search' }],
    ['api', { user: 'alice', api: 'search-\uD800' }],
    ['api', { user: 'alice', api: 'search-\uDC00' }],
  ])('rejects a lone surrogate in the %s', (_, request) => {
    const limiter = policy();
    expect(limiter.tryAcquire({ user: 'user-\uFFFD', api: 'search' }).allowed).toBe(true);
    expect(limiter.tryAcquire({ user: 'alice', api: 'search-\uFFFD' }).allowed).toBe(true);
    expect(() => limiter.tryAcquire(request)).toThrow(TypeError);
    expect(() => limiter.tryAcquire(request)).toThrow(/well-formed string \(no lone surrogates\)/);
    expect(limiter.stats().liveKeys).toBe(2);
  });

  it('keeps well-formed astral characters as distinct keys', () => {
    const limiter = policy();
    for (const user of ['\u{1F600}', '\u{1F601}']) expect(limiter.tryAcquire({ user, api: 'x' }).allowed).toBe(true);
    expect(limiter.tryAcquire({ user: '\u{1F600}', api: 'x' }).allowed).toBe(false);
    expect(limiter.stats().liveKeys).toBe(2);
  });
});

describe('ConcurrencyLimiter keys', () => {
  function concurrency() {
    return new ConcurrencyLimiter({ maxInFlight: 1, leaseMs: 1_000, maxKeys: 8, clock: new ManualClock(1_000) });
  }

  it.each(LONE)('rejects %s and changes nothing', (_, key) => {
    const limiter = concurrency();
    expect(limiter.tryAcquire(REPLACEMENT).allowed).toBe(true);
    expect(() => limiter.tryAcquire(key)).toThrow(TypeError);
    expect(() => limiter.tryAcquire(key)).toThrow(/^key must be a well-formed string \(no lone surrogates\), got "user-\\ud[8c]00"$/);
    expect(limiter.stats().liveKeys).toBe(1);
  });

  it('keeps well-formed astral characters as distinct keys', () => {
    const limiter = concurrency();
    expect(limiter.tryAcquire('\u{1F600}').allowed).toBe(true);
    expect(limiter.tryAcquire('\u{1F601}').allowed).toBe(true);
    expect(limiter.tryAcquire('\u{1F600}').allowed).toBe(false);
    expect(limiter.stats().liveKeys).toBe(2);
  });
});
