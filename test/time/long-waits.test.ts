import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { RateLimiter, type Clock } from '../../src/index.js';
import { sleepUntil, sleepUntilSync } from '../../src/rate/waiting.js';

/** The longest delay Node's setTimeout honours; a longer one fires after 1 ms. */
const MAX_TIMER_MS = 2 ** 31 - 1;
const DAY_MS = 86_400_000;

/** A clock on the fake timers' `Date.now()`, so advancing fake time moves it. */
const dateClock: Clock = { now: () => Date.now() };

/** Collects the names of process warnings emitted while a test runs. */
function watchWarnings(): { names: string[]; stop: () => void } {
  const names: string[] = [];
  const onWarning = (w: Error): void => { names.push(w.name); };
  process.on('warning', onWarning);
  return { names, stop: () => { process.off('warning', onWarning); } };
}

/** Tracks whether a promise has settled, and how. */
function track(p: Promise<unknown>): { state: 'pending' | 'resolved' | 'rejected'; reason: unknown } {
  const t: { state: 'pending' | 'resolved' | 'rejected'; reason: unknown } = { state: 'pending', reason: undefined };
  p.then(() => { t.state = 'resolved'; }, (e: unknown) => { t.state = 'rejected'; t.reason = e; });
  return t;
}

describe('sleepUntil() beyond the 2**31 - 1 ms timer limit', () => {
  let warnings: ReturnType<typeof watchWarnings>;
  beforeEach(() => {
    vi.useFakeTimers();
    warnings = watchWarnings();
  });
  afterEach(() => {
    warnings.stop();
    vi.useRealTimers();
    vi.restoreAllMocks();
  });

  it('does not resolve before a 40-day wait has passed, and resolves once it has', async () => {
    const start = Date.now();
    const sleep = track(sleepUntil(dateClock, start + 40 * DAY_MS));
    await vi.advanceTimersByTimeAsync(10);
    expect(sleep.state).toBe('pending');
    await vi.advanceTimersByTimeAsync(MAX_TIMER_MS + 1000);
    expect(sleep.state).toBe('pending');
    await vi.advanceTimersByTimeAsync(40 * DAY_MS - (MAX_TIMER_MS + 1010) - 1);
    expect(sleep.state).toBe('pending');
    await vi.advanceTimersByTimeAsync(1);
    expect(sleep.state).toBe('resolved');
    expect(Date.now() - start).toBe(40 * DAY_MS);
    expect(vi.getTimerCount()).toBe(0);
    expect(warnings.names).not.toContain('TimeoutOverflowWarning');
  });

  it('rejects with the reason when aborted in the middle of a chained wait, clearing its timer', async () => {
    const controller = new AbortController();
    const sleep = track(sleepUntil(dateClock, Date.now() + 40 * DAY_MS, controller.signal));
    await vi.advanceTimersByTimeAsync(30 * DAY_MS); // past the first chunk
    expect(sleep.state).toBe('pending');
    expect(vi.getTimerCount()).toBe(1);
    const reason = new Error('client went away');
    controller.abort(reason);
    await vi.advanceTimersByTimeAsync(0);
    expect(sleep).toEqual({ state: 'rejected', reason });
    expect(vi.getTimerCount()).toBe(0);
    expect(warnings.names).not.toContain('TimeoutOverflowWarning');
  });

  it('lets acquire() wait out a limit of 1 per 30 days without an early admission', async () => {
    const limiter = new RateLimiter({ limit: { permits: 1, periodMs: 30 * DAY_MS }, maxKeys: 4, clock: dateClock });
    expect(limiter.tryAcquire('k').allowed).toBe(true); // a fresh key passes at once
    const second = track(limiter.acquire('k'));
    await vi.advanceTimersByTimeAsync(MAX_TIMER_MS + 1000);
    expect(second.state).toBe('pending');
    await vi.advanceTimersByTimeAsync(30 * DAY_MS - (MAX_TIMER_MS + 1000));
    expect(second.state).toBe('resolved');
    expect(warnings.names).not.toContain('TimeoutOverflowWarning');
  }, 10_000); // fake time only: a hang means a wait the fake timers never reach

  it('lets acquire() on several GCRA limits reserve a place 30 days ahead and wait for it', async () => {
    // Each limit counts the request where it acts, so the 10-a-second limit must hold it 30 days
    // ahead too: maxBlockMs gives the limits 64-bit states that reach that far.
    const limiter = new RateLimiter({
      limit: [{ permits: 1, periodMs: 30 * DAY_MS }, { permits: 10, periodMs: 1000 }], maxKeys: 4, clock: dateClock, maxBlockMs: 31 * DAY_MS,
    });
    expect(limiter.tryAcquire('k').allowed).toBe(true); // a fresh key passes at once
    const tries = vi.spyOn(limiter, 'tryAcquire');
    const second = track(limiter.acquire('k'));
    await vi.advanceTimersByTimeAsync(10_000);
    expect(second.state).toBe('pending');
    await vi.advanceTimersByTimeAsync(MAX_TIMER_MS);
    expect(second.state).toBe('pending');
    await vi.advanceTimersByTimeAsync(30 * DAY_MS - (MAX_TIMER_MS + 10_000));
    expect(second.state).toBe('resolved');
    expect(tries).toHaveBeenCalledTimes(0); // reserved once: no polling at all
    expect(warnings.names).not.toContain('TimeoutOverflowWarning');
  }, 10_000);

  it('lets a polling acquire() (sliding log) wait 30 days without spinning', async () => {
    const limiter = new RateLimiter({
      limit: [{ permits: 1, periodMs: 30 * DAY_MS }, { permits: 10, periodMs: 1000 }], algorithm: 'sliding-log', maxKeys: 4, clock: dateClock,
    });
    expect(limiter.tryAcquire('k').allowed).toBe(true);
    const tries = vi.spyOn(limiter, 'tryAcquire');
    const second = track(limiter.acquire('k'));
    await vi.advanceTimersByTimeAsync(10_000);
    expect(second.state).toBe('pending');
    expect(tries).toHaveBeenCalledTimes(1); // one refusal, then one long sleep: no 1 ms polling
    await vi.advanceTimersByTimeAsync(MAX_TIMER_MS);
    expect(second.state).toBe('pending');
    // The log's stamp rounds up to its tick (10 ms for a 30-day period): allow a second beyond.
    await vi.advanceTimersByTimeAsync(30 * DAY_MS - (MAX_TIMER_MS + 10_000) + 1_000);
    expect(second.state).toBe('resolved');
    // The refusal, the long sleep, then the pass (one more short try when the reported time lands a
    // tick early against the rounded-up stamp): never a polling loop.
    expect(tries.mock.calls.length).toBeGreaterThanOrEqual(2);
    expect(tries.mock.calls.length).toBeLessThanOrEqual(3);
    expect(warnings.names).not.toContain('TimeoutOverflowWarning');
  }, 10_000);
});

describe('sleepUntilSync() beyond the 2**31 - 1 ms timer limit', () => {
  afterEach(() => {
    vi.useRealTimers();
    vi.restoreAllMocks();
  });

  it('sleeps in chunks of at most 2**31 - 1 ms until the clock reads the target', () => {
    vi.useFakeTimers();
    const start = Date.now();
    const timeouts: number[] = [];
    // Atomics.wait stands in for real sleeping: it records the timeout and moves fake time by it.
    vi.spyOn(Atomics, 'wait').mockImplementation((_array: unknown, _index: number, _value: unknown, timeout?: number) => {
      timeouts.push(timeout ?? Infinity);
      vi.advanceTimersByTime(timeout ?? 0);
      return 'timed-out';
    });
    sleepUntilSync(dateClock, start + 40 * DAY_MS);
    expect(Date.now() - start).toBe(40 * DAY_MS);
    expect(timeouts).toEqual([MAX_TIMER_MS, 40 * DAY_MS - MAX_TIMER_MS]);
  });
});

describe('a long sleep on real timers', () => {
  it('schedules no timer that Node would overflow (no TimeoutOverflowWarning)', async () => {
    const warnings = watchWarnings();
    try {
      const controller = new AbortController();
      const sleep = sleepUntil(dateClock, Date.now() + 40 * DAY_MS, controller.signal);
      controller.abort('done');
      await expect(sleep).rejects.toBe('done');
      // process.emitWarning delivers on the next tick: let it arrive before looking.
      await new Promise((r) => setImmediate(r));
      expect(warnings.names).not.toContain('TimeoutOverflowWarning');
    } finally {
      warnings.stop();
    }
  });
});
