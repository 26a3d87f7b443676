// The coarse clock (src/coarse-clock.ts): a reading in one shared word, kept by an updater thread
// and by its readers, that travels with a limiter's handle.
import { Worker } from 'node:worker_threads';
import { afterEach, describe, expect, it } from 'vitest';
import { coarseClock, ManualClock, monotonicClock, perSecond, RateLimiter } from '../../src/index.js';
import { BYTES, CoarseClock, publish, RESOLUTION_BYTE } from '../../src/time/coarse-clock.js';
import { result } from '../helpers/workers.js';

/** A coarse clock with no updater thread, at `ms`, so that nothing but the test moves it. */
function frozen(ms: number, resolutionMs = 1): { clock: CoarseClock; w: Int32Array } {
  const buffer = new SharedArrayBuffer(BYTES);
  new Float64Array(buffer, RESOLUTION_BYTE, 1)[0] = resolutionMs;
  const w = new Int32Array(buffer);
  publish(w, ms, resolutionMs);
  return { clock: new CoarseClock(buffer), w };
}

const workers: Worker[] = [];
afterEach(async () => {
  await Promise.all(workers.splice(0).map((w) => w.terminate()));
});

describe('coarseClock', () => {
  it('reads performance.now() rounded down to its resolution, never ahead of it', () => {
    const clock = coarseClock();
    expect(clock.resolutionMs).toBe(1);
    let last = -Infinity;
    for (let i = 0; i < 1000; i++) {
      const t = clock.now();
      expect(t).toBeLessThanOrEqual(performance.now());
      expect(Number.isInteger(t)).toBe(true);
      expect(t).toBeGreaterThanOrEqual(last); // never backwards
      last = t;
    }
    const half = coarseClock(0.5);
    for (let i = 0; i < 100; i++) expect((half.now() * 2) % 1).toBe(0);
  });

  it('gives one clock per resolution on a thread', () => {
    expect(coarseClock()).toBe(coarseClock(1));
    expect(coarseClock(2)).not.toBe(coarseClock(1));
  });

  it('is moved forward by its updater thread while nobody reads it', async () => {
    // The word itself, read without now() (whose readers move it too).
    const word = new Int32Array(coarseClock(1).buffer);
    const before = Atomics.load(word, 0);
    // Waits for real time to pass (the property under test), with a generous deadline.
    const deadline = performance.now() + 10_000;
    let seen = before;
    while (seen === before && performance.now() < deadline) {
      await new Promise((r) => setTimeout(r, 5));
      seen = Atomics.load(word, 0);
    }
    expect(seen).not.toBe(before);
  });

  it('is moved forward by its readers when no updater runs: once every 64 readings', () => {
    const { clock } = frozen(0);
    const reads: number[] = [];
    for (let i = 0; i < 64; i++) reads.push(clock.now());
    expect(reads.slice(0, 63).every((t) => t === 0)).toBe(true);
    expect(reads[63]).toBeGreaterThan(0); // the 64th read performance.now() and published it
    expect(reads[63]).toBeLessThanOrEqual(performance.now());
  });

  it('tells its lag behind performance.now() without moving', () => {
    const { clock } = frozen(1_000);
    const before = performance.now();
    const lag = clock.lagMs;
    expect(lag).toBeGreaterThanOrEqual(before - 1_000);
    expect(lag).toBeLessThanOrEqual(performance.now() - 1_000);
    for (let i = 0; i < 200; i++) void clock.lagMs; // no reading: the word stays where it was
    expect(clock.lagMs).toBeGreaterThanOrEqual(lag);
    expect(Atomics.load(new Int32Array(clock.buffer), 0)).toBe(1_000);
  });

  it('never moves back, whatever a writer publishes', () => {
    const { clock, w } = frozen(5_000);
    publish(w, 4_000, 1);
    expect(clock.now()).toBe(5_000);
    publish(w, 5_000.9, 1);
    expect(clock.now()).toBe(5_000);
    publish(w, 5_001, 1);
    expect(clock.now()).toBe(5_001);
  });

  it('decodes across epochs: 2^30 units each, the slot of an epoch reused four epochs on', () => {
    const e = 2 ** 30;
    const { clock, w } = frozen(e - 1); // the last unit of epoch 0
    expect(clock.now()).toBe(e - 1);
    for (const units of [e, e + 1, 2 * e + 7, 3 * e, 4 * e - 1, 4 * e, 5 * e + 3, 9 * e + 123_456]) {
      publish(w, units, 1);
      expect(clock.now()).toBe(units);
    }
    // 0.25 ms units: the same word, a quarter of the time.
    const quarter = frozen(4 * e * 0.25 + 2.75, 0.25);
    expect(quarter.clock.now()).toBe(4 * e * 0.25 + 2.75);
  });

  it('rejects a resolution that is not a number from 0.01 to 1000 ms, naming it', () => {
    expect(() => coarseClock('1' as never)).toThrow(new TypeError('resolutionMs must be a number, got "1"'));
    for (const bad of [0, 0.001, -1, 1001, NaN, Infinity]) {
      expect(() => coarseClock(bad)).toThrow(RangeError);
      expect(() => coarseClock(bad)).toThrow(/^resolutionMs must be from 0.01 to 1000 ms, got /);
    }
    expect(() => new CoarseClock(new SharedArrayBuffer(8))).toThrow(TypeError);
  });
});

describe('a limiter on a coarse clock', () => {
  it('carries the clock in its handle: an attached limiter in a worker reads the same word', async () => {
    const { clock, w } = frozen(1e9); // far ahead of performance.now(): the readers never move it
    const limiter = new RateLimiter({ limit: perSecond(1, { burst: 1 }), maxKeys: 16, clock });
    expect(limiter.handle.clock).toBe(clock.buffer);
    expect(limiter.allow('k')).toBe(true);
    const worker = new Worker(new URL('../fixtures/coarse-worker.mjs', import.meta.url), { workerData: { handle: limiter.handle } });
    workers.push(worker);
    const ask = (key: string): Promise<{ allowed: boolean; retryAfterMs: number }> => {
      const reply = result<{ allowed: boolean; retryAfterMs: number }>(worker);
      worker.postMessage({ key });
      return reply;
    };
    // The worker's time is the shared word's, 1e9 ms: the key spent there waits exactly 1 s.
    expect(await ask('k')).toEqual({ allowed: false, retryAfterMs: 1000 });
    publish(w, 1e9 + 999, 1);
    expect(await ask('k')).toEqual({ allowed: false, retryAfterMs: 1 });
    publish(w, 1e9 + 1000, 1);
    expect(await ask('k')).toEqual({ allowed: true, retryAfterMs: 0 });
  });

  it('refuses another clock at attach, and takes its own', () => {
    const { clock } = frozen(1e9);
    const limiter = new RateLimiter({ limit: perSecond(10), maxKeys: 16, clock });
    expect(() => RateLimiter.attach(limiter.handle, { clock: monotonicClock })).toThrow(
      new TypeError('this RateLimiter runs on a coarseClock(), which travels with its handle: attach it without options.clock (got monotonicClock)'),
    );
    expect(() => RateLimiter.attach(limiter.handle, { clock: new ManualClock(0) })).toThrow(/runs on a coarseClock\(\).*got another ManualClock/);
    expect(() => RateLimiter.attach(limiter.handle, { clock: frozen(1e9).clock })).toThrow(/runs on a coarseClock\(\).*got another coarseClock\(\)/);
    expect(RateLimiter.attach(limiter.handle, { clock: new CoarseClock(clock.buffer) }).allow('k')).toBe(true);
    const plain = new RateLimiter({ limit: perSecond(10), maxKeys: 16 });
    expect(() => RateLimiter.attach(plain.handle, { clock })).toThrow(/runs on performance\.now\(\).*got a coarseClock\(\)\)$/);
  });
});
