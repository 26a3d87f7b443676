// reset(key) on a RateLimiter whose decisions take the key's lock (a sliding log, with or without
// other limits and a cap): under the lock, the key's limits are written fresh (key-controls.ts,
// LockedControls), so a reset falls between two decisions on the key. Exact on a ManualClock.
import { describe, expect, it } from 'vitest';
import { ManualClock, perMinute, perSecond, RateLimiter } from '../../src/index.js';
import { openGate, result, spawn } from '../helpers/workers.js';
import { checkResetRace, type ResetRaceReply } from '../helpers/reset-race.js';

describe('reset on a sliding log', () => {
  it('the key reads as fresh; false when it owed nothing; a key the table does not hold is not inserted', () => {
    const clock = new ManualClock(1_000_000);
    const l = new RateLimiter({ limit: perMinute(3), algorithm: 'sliding-log', maxKeys: 8, clock });
    expect(l.reset('nobody')).toBe(false);
    expect(l.stats().liveKeys).toBe(0);
    for (let i = 0; i < 3; i++) expect(l.allow('k')).toBe(true);
    expect(l.allow('k')).toBe(false);
    expect(l.reset('k')).toBe(true);
    expect(l.get('k')).toMatchObject({ remaining: 3, resetAfterMs: 0 });
    expect(l.reset('k')).toBe(false);
    for (let i = 0; i < 3; i++) expect(l.allow('k')).toBe(true);
    expect(l.tryAcquire('k')).toMatchObject({ allowed: false, retryAfterMs: 60_000 });
    clock.advance(60_000); // entries made after the reset expire on their own time
    expect(l.allow('k')).toBe(true);
  });

  it('resets every limit of the key; a global cap keeps what the key spent', () => {
    const clock = new ManualClock(0);
    const l = new RateLimiter({ limit: [perSecond(2), perMinute(3)], algorithm: 'sliding-log', globalLimit: perMinute(5), maxKeys: 8, clock });
    expect([l.allow('k'), l.allow('k'), l.allow('k')]).toEqual([true, true, false]); // 2 a second
    clock.advance(1_000);
    expect([l.allow('k'), l.allow('k')]).toEqual([true, false]); // 3 a minute
    expect(l.reset('k')).toBe(true);
    expect(l.get('k')).toMatchObject({ limits: [{ remaining: 2 }, { remaining: 3 }] });
    expect(l.tryAcquire('k')).toMatchObject({ allowed: true }); // the cap: 4 of 5
    expect(l.tryAcquire('k')).toMatchObject({ allowed: true }); // 5 of 5
    clock.advance(1_000); // a new second, and 2 of 3 a minute: the key has room, the cap has none
    expect(l.tryAcquire('k')).toMatchObject({ allowed: false, reason: 'global-limit' });
    expect(l.reset('other')).toBe(false);
  });

  it('bad input is refused by name and changes nothing; block says what it is built for', () => {
    const l = new RateLimiter({ limit: perMinute(3), algorithm: 'sliding-log', maxKeys: 8, clock: new ManualClock(0) });
    l.allow('k');
    expect(() => l.reset('' as string)).toThrow(TypeError);
    expect(() => l.reset(7 as unknown as string)).toThrow(TypeError);
    expect(l.get('k')).toMatchObject({ remaining: 2 });
    expect(() => l.block('k', 1)).toThrow(/block\(\) is built for a RateLimiter of GCRA limits on its lock-free paths; this one runs 'sliding-log'/);
    expect(l.get('k')).toMatchObject({ remaining: 2 }); // penalty and reward: log-controls.test.ts
  });
});

describe('reset on a sliding log under 4 racing workers (frozen clock)', () => {
  it('never more than the limit between two resets: admitted <= permits x (1 + resets that found the key owing)', async () => {
    // Every worker spends the key and resets it every 61 attempts. On a frozen clock nothing
    // expires, so the key admits `permits` after each reset that found it owing and nothing
    // more. Tried again (up to 10 times) until some worker saw another's reset land between
    // two of its own decisions.
    for (let attempt = 0; ; attempt++) {
      const permits = 25;
      const l = new RateLimiter({ limit: perMinute(permits), algorithm: 'sliding-log', maxKeys: 8, clock: new ManualClock(0) });
      const gate = new SharedArrayBuffer(8);
      const workers = Array.from({ length: 4 }, (_, id) => spawn({ mode: 'reset-race', handle: l.handle, id, key: 'k', attempts: 1_500, every: 61, gate }));
      await openGate(gate, 4);
      const replies = await Promise.all(workers.map((w) => result<ResetRaceReply>(w)));
      await Promise.all(workers.map((w) => w.terminate()));
      checkResetRace(replies, l, permits);
      if (replies.some((r) => r.between > 0)) return;
      expect(attempt, 'no reset of another worker seen between two decisions in 10 tries').toBeLessThan(9);
    }
  }, 60_000);
});
