// reset and unblock on the windows (fixed and sliding; one limit, several, under a global cap):
// LockFreeEngine.reset writes every key limit fresh, each word by compareExchange from what it
// just read, under the key's give-back guard (rate/give-back-guard.ts), so that a decision taking
// back its first commits never takes back what the reset cleared. A cap keeps its spends. Exact
// on a ManualClock; raced on 4 workers.
import { describe, expect, it } from 'vitest';
import { ManualClock, perMinute, RateLimiter, type RateLimiterOptions } from '../../src/index.js';
import { raceUntilLost } from '../helpers/workers.js';
import { checkResetRace, type ResetRaceReply } from '../helpers/reset-race.js';

const CONFIGS: [string, Partial<RateLimiterOptions>][] = [
  ['a fixed window', { limit: perMinute(5), algorithm: 'fixed-window' }],
  ['a sliding window', { limit: perMinute(5), algorithm: 'sliding-window' }],
  ['two fixed windows', { limit: [perMinute(5), { permits: 100, periodMs: 3_600_000 }], algorithm: 'fixed-window' }],
  ['a fixed window under a global cap', { limit: perMinute(5), globalLimit: perMinute(1_000), algorithm: 'fixed-window' }],
];

describe.each(CONFIGS)('reset on %s', (_name, options) => {
  const make = () => new RateLimiter({ ...options, maxKeys: 8, clock: new ManualClock(30_000) } as RateLimiterOptions);

  it('gives back everything: the key admits its whole window again; true only when it owed anything', () => {
    const l = make();
    for (let i = 0; i < 5; i++) expect(l.allow('k')).toBe(true);
    expect(l.allow('k')).toBe(false);
    expect(l.reset('k')).toBe(true);
    expect(l.reset('k')).toBe(false);
    for (let i = 0; i < 5; i++) expect(l.allow('k')).toBe(true);
    expect(l.allow('k')).toBe(false);
    expect(l.unblock('k')).toBe(true);
    expect(l.get('k')?.remaining).toBe(5);
  });

  it('a key the table does not hold: false, nothing inserted; bad input refused by name', () => {
    const l = make();
    expect(l.reset('nobody')).toBe(false);
    expect(l.stats().liveKeys).toBe(0);
    expect(() => l.reset(7 as unknown as string)).toThrow(TypeError);
    expect(() => l.block('k', 1_000)).toThrow(TypeError); // penalty and reward: window-controls.test.ts
  });
});

describe('reset and a global cap', () => {
  it('the cap keeps what the key spent', () => {
    const l = new RateLimiter({ limit: perMinute(5), globalLimit: perMinute(6), algorithm: 'fixed-window', maxKeys: 8, clock: new ManualClock(30_000) });
    for (let i = 0; i < 5; i++) expect(l.allow('k')).toBe(true);
    expect(l.reset('k')).toBe(true);
    expect(l.allow('k')).toBe(true); // the cap's sixth
    expect(l.tryAcquire('k').reason).toBe('global-limit');
  });
});

describe('reset on the windows under 4 racing workers (frozen clock)', () => {
  it.each(CONFIGS)('%s: never more than the window between two resets', async (_name, options) => {
    // Every worker spends the key and resets it every 61 attempts. On a frozen clock no window
    // ends, so the key admits its 5 after each reset that found it owing and nothing more. Run
    // again until some worker saw another's reset land between two of its own decisions.
    await raceUntilLost<ResetRaceReply>(() => {
      const l = new RateLimiter({ ...options, maxKeys: 8, clock: new ManualClock(30_000) } as RateLimiterOptions);
      return {
        workers: Array.from({ length: 4 }, (_, id) => ({ mode: 'reset-race', handle: l.handle, id, key: 'k', attempts: 1_500, every: 61 })),
        raced: (replies) => replies.some((r) => r.between > 0),
        check: (replies) => checkResetRace(replies, l, 5),
      };
    });
  }, 60_000);
});
