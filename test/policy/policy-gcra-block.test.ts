import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { ManualClock, PolicyLimiter } from '../../src/index.js';

// A PolicyLimiter made with maxBlockMs holds a block that long under every GCRA rule, as
// RateLimiter's maxBlockMs widens its state: each GCRA limit takes a tick coarse enough for it.
// Found: under a rule of 3 a ms (burst 5) a block of 30 days threw RangeError even with
// maxBlockMs 30 days, and a 30-day block made under a rule of 5 a day was carried to that rule
// by setRules cut to about 9.3 days (allowed after 10).

const DAY = 86_400_000;
const k = { user: 'u', api: 'a' };
const fine = { permits: 3, periodMs: 1, burst: 5 };
const daily = { permits: 5, periodMs: DAY, burst: 5 };

describe('PolicyLimiter maxBlockMs on GCRA rules', () => {
  it('found: a 30-day block under a rule of 3 a ms, with maxBlockMs 30 days', () => {
    const clock = new ManualClock(1_000_000);
    const p = new PolicyLimiter({ maxKeys: 8, clock, maxBlockMs: 30 * DAY, rules: [{ limit: fine }] });
    p.block(k, 30 * DAY);
    const d = p.tryAcquire(k);
    expect(d.allowed).toBe(false);
    expect(d.retryAfterMs).toBeGreaterThanOrEqual(30 * DAY);
    clock.advance(30 * DAY - 1);
    expect(p.allow(k)).toBe(false);
    clock.advance(2); // the block rounded up to the rule's tick
    expect(p.allow(k)).toBe(true);
  });

  it('found: a 30-day block carried by setRules to a finer rule keeps its end', () => {
    const clock = new ManualClock(1_000_000);
    const p = new PolicyLimiter({ maxKeys: 8, clock, maxBlockMs: 30 * DAY, rules: [{ limit: daily }] });
    p.block(k, 30 * DAY);
    p.setRules([{ limit: fine }]);
    clock.advance(10 * DAY);
    expect(p.allow(k)).toBe(false);
    clock.advance(20 * DAY - 1);
    expect(p.allow(k)).toBe(false);
    // The debt carries over whole, the old rule's tolerance less an interval with it (0.8 days
    // at 5 a day, burst 5): under the new rule the key is refused until that debt runs out.
    clock.advance(0.8 * DAY - 10_000);
    expect(p.allow(k)).toBe(false);
    clock.advance(11_000);
    expect(p.allow(k)).toBe(true);
  });

  it('the same rule keeps its exact tick without maxBlockMs, and a longer block than it holds is refused, nothing written', () => {
    const clock = new ManualClock(1_000_000);
    const p = new PolicyLimiter({ maxKeys: 8, clock, rules: [{ limit: fine }] });
    expect(() => p.block(k, 30 * DAY)).toThrow(RangeError);
    expect(p.allow(k)).toBe(true);
  });

  it('a maxBlockMs that a rule cannot hold at any tick is refused by name, at construction and by setRules', () => {
    // 1 ps an interval: no tick coarser than 1 ps, whose 64-bit state holds about 53 days.
    const tiny = { permits: 1e9, periodMs: 1, burst: 1_000 };
    expect(() => new PolicyLimiter({ maxKeys: 8, maxBlockMs: 365 * DAY, rules: [{ limit: tiny }] })).toThrow(/rules\[0\].*maxBlockMs/);
    const p = new PolicyLimiter({ maxKeys: 8, maxBlockMs: 365 * DAY, rules: [{ limit: daily }] });
    expect(() => p.setRules([{ limit: daily }, { user: 'x', limit: tiny }])).toThrow(/rules\[1\].*maxBlockMs/);
    expect(p.rules).toEqual([{ limit: daily }]);
  });

  it('a worker that attaches decides in the same ticks: it sees the block', async () => {
    const clock = new ManualClock(1_000_000);
    const p = new PolicyLimiter({ maxKeys: 8, clock, maxBlockMs: 30 * DAY, rules: [{ limit: fine }] });
    p.block(k, 30 * DAY);
    const code = `
      const { parentPort, workerData } = require('node:worker_threads');
      import(workerData.url).then(({ ManualClock, PolicyLimiter }) => {
        const p = PolicyLimiter.attach(workerData.handle, { clock: new ManualClock(workerData.handle.clock) });
        parentPort.postMessage(p.tryAcquire({ user: 'u', api: 'a' }).retryAfterMs);
      });`;
    const w = new Worker(code, { eval: true, workerData: { handle: p.handle, url: new URL('../../dist/index.js', import.meta.url).href } });
    try {
      const retry = await new Promise<number>((ok, no) => { w.once('message', ok); w.once('error', no); });
      expect(retry).toBeGreaterThanOrEqual(30 * DAY);
    } finally {
      await w.terminate();
    }
  });
});
