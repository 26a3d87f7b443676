import { execFileSync } from 'node:child_process';
import { Piscina } from 'piscina';
import { describe, expect, it } from 'vitest';
import { limitTasks, ManualClock, perMinute, perSecond, RateLimiter, RateLimitTimeoutError, TableFullError } from '../../src/index.js';

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

  it('a refusal from a real piscina pool is recognised by the caller, with its key and retryAfterMs', async () => {
    const limiter = new RateLimiter({ limit: perMinute(2), maxKeys: 8 }); // burst 2, then one every 30 s
    const pool = new Piscina({ filename: new URL('../fixtures/pool-task.mjs', import.meta.url).href, workerData: limiter.handle, maxThreads: 1 });
    try {
      expect(await pool.run({ tenant: 'acme' })).toBe('acme');
      expect(await pool.run({ tenant: 'acme' })).toBe('acme');
      const e: unknown = await pool.run({ tenant: 'acme' }).catch((x: unknown) => x);
      // The class and its fields do not cross the thread: the caller gets a plain Error...
      expect(e).toBeInstanceOf(Error);
      expect(e).not.toBeInstanceOf(RateLimitTimeoutError);
      expect((e as { key?: unknown }).key).toBeUndefined();
      // ...which `from` recognises and rebuilds, so that a server can set Retry-After.
      const refused = RateLimitTimeoutError.from(e);
      expect(refused).toBeInstanceOf(RateLimitTimeoutError);
      expect(refused).toMatchObject({ name: 'RateLimitTimeoutError', key: 'acme', maxWaitMs: 0, message: (e as Error).message });
      expect(refused?.retryAfterMs).toBeGreaterThan(25_000);
      expect(refused?.retryAfterMs).toBeLessThanOrEqual(30_000);
      expect(await pool.run({ tenant: 'globex' })).toBe('globex');
    } finally {
      await pool.destroy();
    }
  });

  it('from() recognises only its own errors, before and after a structured clone', () => {
    const never = new RateLimitTimeoutError('k', Infinity, 10);
    expect(RateLimitTimeoutError.from(never)).toBe(never);
    expect(RateLimitTimeoutError.from(structuredClone(never))).toMatchObject({ key: 'k', retryAfterMs: Infinity, maxWaitMs: 10, message: never.message });
    const full = new TableFullError('u / a');
    expect(TableFullError.from(structuredClone(full))).toMatchObject({ name: 'TableFullError', key: 'u / a', message: full.message });
    expect(TableFullError.from(structuredClone(never))).toBeUndefined();
    expect(RateLimitTimeoutError.from(structuredClone(full))).toBeUndefined();
    for (const other of [new Error('x'), new Error('x', { cause: { sluice: 'RateLimitTimeoutError' } }), 'a string', null, undefined]) {
      expect(RateLimitTimeoutError.from(other)).toBeUndefined();
    }
  });

  it('checks its arguments', () => {
    const limiter = new RateLimiter({ limit: perSecond(2), maxKeys: 8 });
    expect(() => limitTasks(limiter, 1 as never, { key: () => 'k' })).toThrow(/run must be a function, got 1/);
    expect(() => limitTasks(limiter, () => 1, {} as never)).toThrow(/options\.key must be a function of the task, got undefined/);
    expect(() => limitTasks(limiter, () => 1, { key: () => 'k', mode: 'drop' as never })).toThrow(/options\.mode must be 'wait' or 'refuse', got "drop"/);
  });

  it('examples/piscina runs: each tenant gets its burst in a real piscina pool, the rest refused', () => {
    const t0 = performance.now();
    const out = execFileSync(process.execPath, ['examples/piscina/main.js'], { cwd: new URL('../../', import.meta.url), encoding: 'utf8' });
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
