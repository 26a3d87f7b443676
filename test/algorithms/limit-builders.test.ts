import { describe, expect, it } from 'vitest';
import { formatDuration, formatRate, parseDuration, parseRate } from '../../src/cli/args.js';
import { ManualClock, perDay, perHour, perMinute, perSecond, RateLimiter } from '../../src/index.js';

describe('perDay()', () => {
  it('is permits per 86,400,000 ms, next to the other builders', () => {
    expect(perSecond(10)).toEqual({ permits: 10, periodMs: 1_000 });
    expect(perMinute(10)).toEqual({ permits: 10, periodMs: 60_000 });
    expect(perHour(10)).toEqual({ permits: 10, periodMs: 3_600_000 });
    expect(perDay(10)).toEqual({ permits: 10, periodMs: 86_400_000 });
    expect(perDay(1_000_000, { burst: 50 })).toEqual({ permits: 1_000_000, periodMs: 86_400_000, burst: 50 });
  });

  it.each([[0, RangeError], [-1, RangeError], [NaN, RangeError], ['5', TypeError]] as const)('rejects permits %j', (permits, type) => {
    expect(() => perDay(permits as number)).toThrow(type);
    expect(() => perDay(permits as number)).toThrow(/limit\.permits must be/);
  });

  it('rejects a burst below 1', () => {
    expect(() => perDay(10, { burst: 0 })).toThrow(/limit\.burst must be at least 1, got 0/);
  });

  it('admits the burst, then one request every 86,400,000 / permits ms', () => {
    const clock = new ManualClock();
    const limiter = new RateLimiter({ limit: perDay(24, { burst: 2 }), maxKeys: 4, clock });
    expect(limiter.allow('k')).toBe(true);
    expect(limiter.allow('k')).toBe(true);
    expect(limiter.tryAcquire('k')).toMatchObject({ allowed: false, retryAfterMs: 3_600_000 });
    clock.advance(3_600_000);
    expect(limiter.allow('k')).toBe(true);
  });
});

describe('the CLI day unit', () => {
  it.each([
    ['1000000/d', 1_000_000, 86_400_000], ['5/day', 5, 86_400_000], ['7/2d', 7, 172_800_000], ['1/0.5day', 1, 43_200_000],
  ] as const)('rate %s is %d per %d ms', (text, permits, periodMs) => {
    expect(parseRate('--limit', text)).toEqual({ permits, periodMs });
  });

  it('keeps the other rate units', () => {
    expect(['100/s', '100/sec', '20/min', '20/m', '1000/h', '1000/hr', '5/100ms'].map((t) => parseRate('--limit', t).periodMs))
      .toEqual([1_000, 1_000, 60_000, 60_000, 3_600_000, 3_600_000, 100]);
  });

  it.each([['1d', 86_400_000], ['2day', 172_800_000], ['1.5d', 129_600_000], ['1 day', 86_400_000]] as const)('duration %s is %d ms', (text, ms) => {
    expect(parseDuration('--for', text, 0, 1e10)).toBe(ms);
  });

  it.each(['1dy', '1days', 'd1', '1 week'])('%j is not a duration', (text) => {
    expect(() => parseDuration('--for', text, 0, 1e10)).toThrow(/--for must be a duration like/);
  });

  it('renders one and two days as 1 d and 2 d, and a day and a half as 1.5 d', () => {
    expect(formatDuration(86_400_000)).toBe('1 d');
    expect(formatDuration(172_800_000)).toBe('2 d');
    expect(formatDuration(129_600_000)).toBe('1.5 d');
    expect(formatDuration(90_000_000)).toBe('25 h'); // 1.04 d is not short
    expect(formatRate({ permits: 1_000_000, periodMs: 86_400_000 })).toBe('1,000,000 per d');
    expect(formatRate({ permits: 5, periodMs: 172_800_000 })).toBe('5 per 2 d');
  });

  it('still prints range bounds in hours, as the subcommands\' messages do', () => {
    expect(() => parseDuration('--every', '2d', 0.001, 86_400_000)).toThrow(/^--every must be from 0\.001 ms to 24 h, got "2d"$/);
  });
});
