import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { ManualClock, perMinute, perSecond, RateLimiter, RateLimitTimeoutError } from '../../src/index.js';

/** Lets pending promise callbacks and Atomics.waitAsync wake-ups run. */
const settle = () => new Promise((r) => setTimeout(r, 5));

describe('reserve()', () => {
  it('counts now, tells when to act, and serves callers in arrival order', () => {
    const clock = new ManualClock();
    const limiter = new RateLimiter({ limit: perSecond(5), maxKeys: 4, clock });
    const delays = Array.from({ length: 8 }, () => limiter.reserve('k').delayMs);
    expect(delays).toEqual([0, 0, 0, 0, 0, 200, 400, 600]);
    const r = limiter.reserve('k', { cost: 2 });
    expect(r).toMatchObject({ delayMs: 1000, actAtMs: 1000, cost: 2 });
  });

  it('cancel() gives the reserved time back if it has not come, once', () => {
    const clock = new ManualClock();
    const limiter = new RateLimiter({ limit: perSecond(5), maxKeys: 4, clock });
    for (let i = 0; i < 5; i++) limiter.reserve('k');
    const late = limiter.reserve('k', { cost: 2 });
    expect(late.delayMs).toBe(400);
    expect(late.cancel()).toBe(true);
    expect(late.cancel()).toBe(false);
    expect(limiter.reserve('k').delayMs).toBe(200); // as if the cancelled one never came
    clock.advance(200);
    const due = limiter.reserve('k');
    clock.advance(400);
    expect(due.cancel()).toBe(false); // its time has come: nothing to give back
  });

  it('refuses waits over maxWaitMs and costs over burst, counting nothing', () => {
    const clock = new ManualClock();
    const limiter = new RateLimiter({ limit: perSecond(5), maxKeys: 4, clock });
    for (let i = 0; i < 5; i++) limiter.allow('k');
    expect(() => limiter.reserve('k', { cost: 1, maxWaitMs: 199 })).toThrow(RateLimitTimeoutError);
    try {
      limiter.reserve('k', { cost: 1, maxWaitMs: 199 });
    } catch (e) {
      expect(e).toMatchObject({ name: 'RateLimitTimeoutError', retryAfterMs: 200, key: 'k' });
    }
    expect(() => limiter.reserve('k', { cost: 6 })).toThrow(/can never pass/);
    expect(limiter.reserve('k', { cost: 1, maxWaitMs: 200 }).delayMs).toBe(200); // nothing was counted before
    expect(() => limiter.reserve('k', { cost: 1, maxWaitMs: -1 })).toThrow(/options\.maxWaitMs must be a number >= 0, got -1/);
  });

  it('cannot hold a place in a sliding log (windows can: test/reserve-windows.test.ts)', () => {
    const limiter = new RateLimiter({ limit: perSecond(5), algorithm: 'sliding-log', maxKeys: 4 });
    expect(() => limiter.reserve('k')).toThrow(/reserve\(\) cannot hold a place in a sliding log .* this limiter runs sliding-log/);
    expect(limiter.tryAcquire('k', 0).remaining).toBe(5); // nothing counted
  });
});

describe('acquire() on a ManualClock', () => {
  it('resolves at once when admitted, else when the clock reaches its turn, in arrival order', async () => {
    const clock = new ManualClock();
    const limiter = new RateLimiter({ limit: perSecond(5), maxKeys: 4, clock });
    for (let i = 0; i < 5; i++) await limiter.acquire('k');
    const order: number[] = [];
    const waits = [1, 2, 3].map((n) => limiter.acquire('k').then(() => order.push(n)));
    await settle();
    expect(order).toEqual([]);
    clock.advance(200);
    await settle();
    expect(order).toEqual([1]);
    clock.advance(400);
    await Promise.all(waits);
    expect(order).toEqual([1, 2, 3]);
  });

  it('rejects at once when the wait would exceed maxWaitMs, and on cost > burst', async () => {
    const clock = new ManualClock();
    const limiter = new RateLimiter({ limit: perSecond(5), maxKeys: 4, clock });
    for (let i = 0; i < 5; i++) limiter.allow('k');
    await expect(limiter.acquire('k', { maxWaitMs: 100 })).rejects.toMatchObject({ name: 'RateLimitTimeoutError', retryAfterMs: 200 });
    await expect(limiter.acquire('k', { cost: 6 })).rejects.toMatchObject({ retryAfterMs: Infinity });
    expect(limiter.tryAcquire('k', 0).retryAfterMs).toBe(0); // nothing was reserved by the refusals
  });

  it('gives back its reservation when aborted', async () => {
    const clock = new ManualClock();
    const limiter = new RateLimiter({ limit: perSecond(5), maxKeys: 4, clock });
    for (let i = 0; i < 5; i++) limiter.allow('k');
    const controller = new AbortController();
    const waiting = limiter.acquire('k', { cost: 2, signal: controller.signal });
    await settle();
    controller.abort(new Error('client went away'));
    await expect(waiting).rejects.toThrow('client went away');
    expect(limiter.reserve('k').delayMs).toBe(200); // the aborted 2 were given back
    await expect(limiter.acquire('k', { signal: AbortSignal.abort('gone') })).rejects.toBe('gone');
  });

  it('waits for the retry time with several limits, too', async () => {
    const clock = new ManualClock();
    const limiter = new RateLimiter({ limit: [perSecond(2), perMinute(10)], maxKeys: 4, clock });
    await limiter.acquire('k', { cost: 2 });
    let done = false;
    const p = limiter.acquire('k').then(() => { done = true; });
    await settle();
    expect(done).toBe(false);
    clock.advance(500);
    await p;
    expect(done).toBe(true);
    await expect(limiter.acquire('k', { maxWaitMs: 10 })).rejects.toBeInstanceOf(RateLimitTimeoutError);
  });
});

describe('acquire() on the real clock', () => {
  it('waits about the reported time', async () => {
    const limiter = new RateLimiter({ limit: perSecond(50, { burst: 1 }), maxKeys: 4 });
    await limiter.acquire('k');
    const t0 = performance.now();
    await limiter.acquire('k'); // 20 ms later
    expect(performance.now() - t0).toBeGreaterThanOrEqual(15);
  });

  it('an abort ends a wait on the real clock, however late the timers run', async () => {
    // A wait of a minute: no event-loop lag of a busy machine can let the
    // clock reach the key's turn before the abort. (With a 20 ms wait here, a
    // timer that fired 20 ms late left the key free and the acquire resolved.)
    const limiter = new RateLimiter({ limit: perMinute(1, { burst: 1 }), maxKeys: 4 });
    await limiter.acquire('k');
    const controller = new AbortController();
    const waiting = limiter.acquire('k', { signal: controller.signal });
    controller.abort(new Error('stop'));
    await expect(waiting).rejects.toThrow('stop');
    const next = limiter.reserve('k').delayMs; // the aborted wait gave its turn back: one interval, not two
    expect(next).toBeGreaterThan(59_000);
    expect(next).toBeLessThanOrEqual(60_000);
  });
});

describe('acquireSync()', () => {
  it('refuses the main thread', () => {
    const limiter = new RateLimiter({ limit: perSecond(5), maxKeys: 4 });
    expect(() => limiter.acquireSync('k')).toThrow(/acquireSync\(\) blocks its thread .* call it in a worker/);
  });

  it('blocks a worker until the ManualClock reaches its turn, and throws on a long wait', async () => {
    const clock = new ManualClock();
    const limiter = new RateLimiter({ limit: perSecond(5), maxKeys: 4, clock });
    for (let i = 0; i < 5; i++) limiter.allow('k');
    const worker = new Worker(new URL('../fixtures/worker.mjs', import.meta.url), { workerData: { mode: 'acquire-sync', handle: limiter.handle, id: 0 } });
    const messages: string[] = [];
    const done = new Promise<void>((resolve, reject) => {
      worker.on('message', (m: string) => { messages.push(m); if (m.startsWith('timeout')) resolve(); });
      worker.once('error', reject);
    });
    while (!messages.includes('waiting')) await settle();
    await settle();
    expect(messages).toEqual(['waiting']); // blocked: the manual clock has not moved
    clock.advance(200);
    await done;
    await worker.terminate();
    expect(messages).toEqual(['waiting', 'admitted', 'timeout 200']);
  });
});
