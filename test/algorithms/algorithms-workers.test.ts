import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { ManualClock, perMinute, perSecond, RateLimiter, type RateLimiterHandle } from '../../src/index.js';

const workerUrl = new URL('../fixtures/worker.mjs', import.meta.url);

async function hammer(handle: RateLimiterHandle, workers: number, keys: string[], attempts: number, cost = 1) {
  const gate = new SharedArrayBuffer(8);
  const pool = Array.from({ length: workers }, (_, id) => new Worker(workerUrl, { workerData: { mode: 'hammer', handle, id, keys, attempts, cost, gate } }));
  const results = pool.map((w) => new Promise<{ admitted: number[]; casRetries: number }>((resolve, reject) => { w.once('message', resolve); w.once('error', reject); }));
  const g = new Int32Array(gate);
  while (Atomics.load(g, 0) < workers) await new Promise((r) => setTimeout(r, 1));
  Atomics.store(g, 1, 1);
  Atomics.notify(g, 1);
  const all = await Promise.all(results);
  await Promise.all(pool.map((w) => w.terminate()));
  return { perKey: keys.map((_, k) => all.reduce((s, r) => s + (r.admitted[k] ?? 0), 0)), retries: all.reduce((s, r) => s + r.casRetries, 0) };
}

describe('every algorithm under 4 racing workers (frozen clock)', () => {
  it.each(['gcra', 'fixed-window', 'sliding-window', 'sliding-log'] as const)('%s: never admits more than the limit', async (algorithm) => {
    const limiter = new RateLimiter({ limit: [perSecond(300), perMinute(400)], algorithm, maxKeys: 64, clock: new ManualClock(), maxLogSize: 400 });
    const keys = ['hot', 'k1', 'k2', 'k3'];
    const { perKey } = await hammer(limiter.handle, 4, keys, 4_000);
    expect(perKey).toEqual([300, 300, 300, 300]); // the per-second limit binds, exactly
  });

  it('combined limits with costs: exactly the tighter limit, nothing spent by refusals', async () => {
    const limiter = new RateLimiter({ limit: [perSecond(600), perMinute(900)], maxKeys: 8, clock: new ManualClock() });
    const { perKey } = await hammer(limiter.handle, 4, ['k'], 2_000, 3);
    expect(perKey[0]).toBe(200); // 600 / 3
    expect(limiter.tryAcquire('k', 0).remaining).toBe(0);
  });

  it('a fast global cap served in per-thread batches never admits more than the cap', async () => {
    // 1e7 per second with burst 1,000: allow() takes the cap in batches of up to 31 permits
    // (h = 1/32 of the tolerance, 3.1 us); on a frozen clock every batch is used or given back.
    const limiter = new RateLimiter({ limit: perSecond(1e6, { burst: 1e6 }), globalLimit: perSecond(1e7, { burst: 1_000 }), maxKeys: 64, clock: new ManualClock() });
    const keys = Array.from({ length: 8 }, (_, i) => `tenant-${i}`);
    const { perKey } = await hammer(limiter.handle, 4, keys, 1_000);
    const total = perKey.reduce((a, b) => a + b, 0);
    expect(total).toBeLessThanOrEqual(1_000);
    // What batches may leave unused at a frozen instant: the first batch's hold (h, 32 ticks of
    // 10 ns = 3.2 permits) and up to one partial batch per worker that no later call returned.
    expect(total).toBeGreaterThanOrEqual(1_000 - 4 - 4 * 31);
    expect(limiter.tryAcquire('tenant-0', 0).remaining).toBeLessThanOrEqual(1_000 - total);
  });

  it('a global cap shared by many keys admits exactly the cap in total', async () => {
    const limiter = new RateLimiter({ limit: perSecond(100), globalLimit: perSecond(250), maxKeys: 64, clock: new ManualClock() });
    const keys = Array.from({ length: 8 }, (_, i) => `tenant-${i}`);
    const { perKey } = await hammer(limiter.handle, 4, keys, 3_000);
    expect(perKey.reduce((a, b) => a + b, 0)).toBe(250);
    expect(Math.max(...perKey)).toBeLessThanOrEqual(100);
  });
});

describe('a worker terminated while holding a key lock (sliding log: the one algorithm with a lock)', () => {
  it('blocks that key only until the lock is taken over, and loses nothing', async () => {
    const limiter = new RateLimiter({ limit: [perSecond(10), perMinute(100)], algorithm: 'sliding-log', maxKeys: 8, clock: new ManualClock(), claimTimeoutMs: 30 });
    expect(limiter.tryAcquire('victim', 4).allowed).toBe(true);
    expect(limiter.allow('bystander')).toBe(true);
    const { HEADER_WORDS, H_SLOT_WORDS, S_CTRL, LIVE } = await import('../../src/table/layout.js');
    const { keyOffsetOf } = await import('../../src/table/table-buffer.js');
    const w = new Int32Array(limiter.handle.table);
    const keyAt = keyOffsetOf(w);
    const slotWords = w[H_SLOT_WORDS] as number;
    // Find the victim's slot: its key bytes start with "vict".
    let base = -1;
    for (let b = HEADER_WORDS; b + slotWords <= w.length; b += slotWords) {
      if (((w[b + S_CTRL] as number) & 3) === LIVE && w[b + keyAt] === new Int32Array(new TextEncoder().encode('vict').buffer)[0]) base = b;
    }
    expect(base).toBeGreaterThan(0);
    const gate = new SharedArrayBuffer(4);
    const worker = new Worker(workerUrl, { workerData: { mode: 'lock-and-die', handle: limiter.handle, id: 0, gate, base } });
    while (Atomics.load(new Int32Array(gate), 0) === 0) await new Promise((r) => setTimeout(r, 1));
    await worker.terminate(); // dies holding the victim's lock
    expect(limiter.allow('bystander')).toBe(true); // other keys never wait
    const d = limiter.tryAcquire('victim', 6); // waits ~30 ms, takes the lock over
    expect(d).toMatchObject({ allowed: true, remaining: 0 });
    expect(limiter.allow('victim')).toBe(false); // 4 + 6 = 10: exact
  });
});
