import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { limitTasks, ManualClock, perSecond, RateLimiter, RateLimitTimeoutError } from '../src/index.js';

const settle = () => new Promise((r) => setTimeout(r, 5));

describe('limitTasks()', () => {
  it("'refuse' rejects tasks over the tenant's limit with RateLimitTimeoutError, without running them", async () => {
    const limiter = new RateLimiter({ limit: perSecond(2), maxKeys: 8, clock: new ManualClock() });
    let ran = 0;
    const task = limitTasks(limiter.handle, (t: { tenant: string }) => { ran++; return t.tenant; }, { key: (t) => t.tenant, mode: 'refuse' });
    await expect(task({ tenant: 'a' })).resolves.toBe('a');
    await expect(task({ tenant: 'a' })).resolves.toBe('a');
    await expect(task({ tenant: 'a' })).rejects.toBeInstanceOf(RateLimitTimeoutError);
    await expect(task({ tenant: 'b' })).resolves.toBe('b'); // tenants are independent
    expect(ran).toBe(3);
  });

  it("'wait' (the default) runs a task when its tenant's turn comes, with costs", async () => {
    const clock = new ManualClock();
    const limiter = new RateLimiter({ limit: perSecond(2), maxKeys: 8, clock });
    const order: string[] = [];
    const task = limitTasks(limiter, (t: { id: string }) => { order.push(t.id); }, { key: () => 'tenant', cost: (t) => (t.id === 'big' ? 2 : 1) });
    await task({ id: 'big' });
    const later = task({ id: 'small' });
    await settle();
    expect(order).toEqual(['big']);
    clock.advance(500);
    await later;
    expect(order).toEqual(['big', 'small']);
    const tooLong = limitTasks(limiter, () => 1, { key: () => 'tenant', maxWaitMs: 10 });
    await expect(tooLong({})).rejects.toMatchObject({ name: 'RateLimitTimeoutError', retryAfterMs: 500 });
  });

  it('checks its arguments', () => {
    const limiter = new RateLimiter({ limit: perSecond(2), maxKeys: 8 });
    expect(() => limitTasks(limiter, 1 as never, { key: () => 'k' })).toThrow(/run must be a function, got 1/);
    expect(() => limitTasks(limiter, () => 1, {} as never)).toThrow(/options\.key must be a function of the task, got undefined/);
    expect(() => limitTasks(limiter, () => 1, { key: () => 'k', mode: 'drop' as never })).toThrow(/options\.mode must be 'wait' or 'refuse', got "drop"/);
  });

  it('examples/piscina runs: each tenant gets its burst in a real piscina pool, the rest refused', () => {
    const t0 = performance.now();
    const out = execFileSync(process.execPath, ['examples/piscina/main.js'], { cwd: new URL('../', import.meta.url), encoding: 'utf8' });
    const elapsedSec = (performance.now() - t0) / 1000;
    const rows = [...out.matchAll(/^(\w+) +(\d+) run, (\d+) refused/gm)];
    expect(rows.map((r) => r[1])).toEqual(['acme', 'globex', 'initech']);
    for (const r of rows) {
      const run = Number(r[2]);
      expect(run + Number(r[3])).toBe(8);
      expect(run).toBeGreaterThanOrEqual(5);
      expect(run).toBeLessThanOrEqual(5 + Math.ceil(5 * elapsedSec)); // burst + rate x time
    }
  });
});
