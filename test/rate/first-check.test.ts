// A key new to the table is admitted by its insert on the 32-bit one-limit path: the fresh state
// counts the first check's cost (Gcra32.pendingCost, RateLimiter's #decideFirst). Its answer and
// what follows must be those of a key inserted first and decided after, at the same reading.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ManualClock, RateLimiter } from '../../src/index.js';
import { loadsDuring } from '../helpers/atomics-spy.js';

function pair(permits: number, burst: number, cacheSize: number | undefined, startMs: number) {
  const clock = new ManualClock(startMs);
  const rl = new RateLimiter({ limit: { permits, periodMs: 1000, burst }, maxKeys: 64, clock, ...(cacheSize === undefined ? {} : { cacheSize }) });
  return { clock, rl };
}

describe('a first check admitted by its insert', () => {
  it('answers as a check of a key inserted before it would, and leaves the same state', () => {
    fc.assert(fc.property(
      fc.integer({ min: 1, max: 20 }), fc.integer({ min: 1, max: 20 }), fc.constantFrom(undefined, 0),
      fc.integer({ min: 0, max: 2 ** 40 }), fc.array(fc.record({ cost: fc.integer({ min: 0, max: 24 }), stepMs: fc.integer({ min: 0, max: 700 }) }), { minLength: 1, maxLength: 8 }),
      (permits, burst, cacheSize, startMs, steps) => {
        const { clock, rl } = pair(permits, burst, cacheSize, startMs);
        expect(rl.width).toBe(32);
        // 'old' is in the table before its first real check (a probe inserts it, spending
        // nothing); 'new' meets the table at its first check.
        expect(rl.tryAcquire('old', 0).allowed).toBe(true);
        for (const { cost, stepMs } of steps) {
          const before = rl.stats().liveKeys;
          const fresh = rl.tryAcquire(`new-${before}`, cost);
          const old = rl.tryAcquire('old', cost);
          expect(fresh).toEqual(old);
          // The same next check on each: the first admission was counted once.
          expect(rl.tryAcquire(`new-${before}`, 1)).toEqual(rl.tryAcquire('old', 1));
          expect(rl.get(`new-${before}`)).toEqual(rl.get('old'));
          rl.reset('old');
          clock.advance(stepMs);
        }
      },
    ), { numRuns: 150 });
  });

  it('a cost beyond the burst, or a probe, spends nothing of a new key', () => {
    const { rl } = pair(5, 3, undefined, 1_000);
    const beyond = rl.tryAcquire('a', 4);
    expect(beyond).toMatchObject({ allowed: false, reason: 'exceeds-burst' });
    expect(rl.tryAcquire('a', 3)).toMatchObject({ allowed: true, remaining: 0 });
    expect(rl.tryAcquire('b', 0)).toMatchObject({ allowed: true, remaining: 3 });
    expect(rl.tryAcquire('b', 3)).toMatchObject({ allowed: true, remaining: 0 });
    expect(rl.tryAcquire('b', 1).allowed).toBe(false);
  });

  it('the insert decides: a first check loads no state word, and the next one starts from its write', () => {
    const clock = new ManualClock(1_000);
    const rl = new RateLimiter({ limit: { permits: 10, periodMs: 1000, burst: 2 }, maxKeys: 64, clock, hashSeed: 7 });
    const table = rl.handle.table;
    const inTable = (array: Int32Array): boolean => array.buffer === table;
    // A probe of a new key inserts it and then decides (a load of its tat and of its stamp); a
    // first check of cost 1 is decided by its insert: two loads fewer, on the same probe chain
    // (both keys find an empty home slot in this empty table).
    const probe = loadsDuring(() => { rl.tryAcquire('p', 0); }, inTable);
    let first = false;
    const check = loadsDuring(() => { first = rl.allow('k'); }, inTable);
    expect(first).toBe(true);
    expect(check).toBe(probe - 2);
    // The insert's admission is this thread's own write: the next check in the same second
    // loads nothing.
    let second = false;
    expect(loadsDuring(() => { second = rl.allow('k'); }, inTable)).toBe(0);
    expect(second).toBe(true);
    expect(rl.allow('k')).toBe(false);
    expect(rl.stats().liveKeys).toBe(2);
  });
});
