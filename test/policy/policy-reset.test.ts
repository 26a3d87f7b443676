import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { ManualClock, perMinute, PolicyLimiter } from '../../src/index.js';
import { openGate, result } from '../helpers/workers.js';

// PolicyLimiter.reset: the pair reads as fresh under the rule it matches, written under the pair's
// lock by the steps that reshape a key after a change of rules. Unit cases on a ManualClock, then
// 3 workers spending from one pair while a fourth resets it, on a frozen clock: each reset gives
// back at most one burst, so the admissions never pass burst x (resets that found the pair + 1).
// (Lock waits are not counted by the engine: a round with more than one burst admitted shows
// resets landing among the spends.)

describe('PolicyLimiter.reset', () => {
  it('every algorithm: a spent pair reads fresh; other pairs keep theirs; an absent pair is not inserted', () => {
    for (const algorithm of ['gcra', 'fixed-window', 'sliding-window', 'sliding-log'] as const) {
      const clock = new ManualClock(1_000);
      const policy = new PolicyLimiter({ rules: [{ algorithm, limit: [perMinute(3), perMinute(50)] }], maxKeys: 64, clock });
      const a = { user: 'a', api: 'x' };
      const b = { user: 'b', api: 'x' };
      for (let i = 0; i < 3; i++) expect(policy.allow(a)).toBe(true);
      expect(policy.allow(a)).toBe(false);
      policy.allow(b);
      expect(policy.reset(a), algorithm).toBe(true);
      expect(policy.get(a), algorithm).toMatchObject({ remaining: 3 });
      expect([policy.allow(a), policy.allow(a), policy.allow(a), policy.allow(a)], algorithm).toEqual([true, true, true, false]);
      expect(policy.get(b), algorithm).toMatchObject({ remaining: 2 });
      const live = policy.stats().liveKeys;
      expect(policy.reset({ user: 'nobody', api: 'x' })).toBe(false);
      expect(policy.stats().liveKeys).toBe(live);
    }
  });

  it('after a change of rules: fresh under the new rule', () => {
    const clock = new ManualClock(1_000);
    const policy = new PolicyLimiter({ rules: [{ limit: perMinute(2) }], maxKeys: 64, clock });
    const a = { user: 'a', api: 'x' };
    policy.allow(a);
    policy.allow(a);
    policy.setRules([{ algorithm: 'fixed-window', limit: perMinute(5) }]);
    expect(policy.reset(a)).toBe(true);
    expect(policy.get(a)).toMatchObject({ remaining: 5 });
    expect(() => policy.reset({ user: '', api: 'x' })).toThrow(TypeError);
  });

  it('3 workers spend from one pair while a fourth resets it: at most one burst per reset that found it, resets seen between spends', async () => {
    const BURST = 50;
    const policy = new PolicyLimiter({ rules: [{ algorithm: 'fixed-window', limit: perMinute(BURST) }], maxKeys: 64, clock: new ManualClock(1_000) });
    // Rounds go on until one shows a reset landing among the spends (more than one burst admitted).
    let interleaved = 0;
    for (let round = 0; round < 12 && interleaved === 0; round++) {
      const user = `u${round}`;
      const gate = new SharedArrayBuffer(8);
      const spec = (resets: number) => ({ handle: policy.handle, user, api: 'x', attempts: 4_000, resets, gap: 2_000, gate });
      const workers = [0, 0, 0, 200].map((resets) => new Worker(new URL('../fixtures/policy-reset-worker.mjs', import.meta.url), { workerData: spec(resets) }));
      try {
        const replies = workers.map((w) => result<{ admitted: number; found: number }>(w));
        await openGate(gate, workers.length);
        const r = await Promise.all(replies);
        const admitted = r.reduce((n, x) => n + x.admitted, 0);
        const found = (r[3] as { found: number }).found;
        expect(admitted, `round ${round}: ${admitted} admitted, ${found} resets found the pair`).toBeLessThanOrEqual(BURST * (found + 1));
        expect(admitted).toBeGreaterThanOrEqual(BURST);
        if (admitted > BURST) interleaved++;
      } finally {
        await Promise.all(workers.map((w) => w.terminate()));
      }
    }
    expect(interleaved, 'no reset ever landed while the workers were spending').toBeGreaterThan(0);
  });
});
