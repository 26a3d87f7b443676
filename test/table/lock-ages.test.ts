// Lock tokens carry ms modulo 2^20 (1,048,576 ms). Found: claimTimeoutMs was accepted up to
// 3,600,000, so from 1,048,576 ms up a dead holder's lock could never read as older than the
// timeout (its key blocked for good), and setRules' 10x wait broke from 104,858 ms up. Now
// claimTimeoutMs stops at 60,000 and every wait on a lock (10x that at most) fits the stamp.
import { Worker } from 'node:worker_threads';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ConcurrencyLimiter, perHour, PolicyLimiter, RateLimiter } from '../../src/index.js';
import { AHEAD_MS, ageMs, FREE, lock, lockAges, lockToken, tryLock, unlock } from '../../src/table/slot-lock.js';
import { reuseAfterMsFor } from '../../src/table/insert.js';
import { MAX_CLAIM_TIMEOUT_MS } from '../../src/table/table-options.js';

const stallWorker = new URL('../fixtures/stall-worker.mjs', import.meta.url);

afterEach(() => {
  vi.restoreAllMocks();
});

const makers: [string, (claimTimeoutMs: number) => unknown][] = [
  ['RateLimiter', (claimTimeoutMs) => new RateLimiter({ limit: perHour(5), maxKeys: 8, claimTimeoutMs })],
  ['PolicyLimiter', (claimTimeoutMs) => new PolicyLimiter({ rules: [{ limit: perHour(5) }], maxKeys: 8, claimTimeoutMs })],
  ['ConcurrencyLimiter', (claimTimeoutMs) => new ConcurrencyLimiter({ maxInFlight: 2, leaseMs: 1_000, maxKeys: 8, claimTimeoutMs })],
];

describe('claimTimeoutMs', () => {
  it.each(makers)('%s accepts 1 to 60,000 ms and refuses more, naming the option and the value', (_name, make) => {
    expect(MAX_CLAIM_TIMEOUT_MS).toBe(60_000);
    expect(() => make(1)).not.toThrow();
    expect(() => make(60_000)).not.toThrow();
    for (const bad of [60_001, 104_858, 1_048_576, 3_600_000]) {
      expect(() => make(bad)).toThrow(RangeError);
      expect(() => make(bad)).toThrow(new RegExp(`options\\.claimTimeoutMs.*${bad}`));
    }
  });
});

describe('lock ages', () => {
  /** Makes performance.now() read `ms` on this thread. */
  function nowAt(ms: number): void {
    vi.spyOn(performance, 'now').mockReturnValue(ms);
  }

  // Every stealAfterMs the package passes: claimTimeoutMs at both ends, and a rules writer's 10x.
  it.each([1, 1_000, MAX_CLAIM_TIMEOUT_MS, 10 * MAX_CLAIM_TIMEOUT_MS])(
    'a lock taken %i ms ago: a decision takes it over once older than stealAfterMs, a reclaim once older than reclaimAfterMs',
    (stealAfterMs) => {
      const w = new Int32Array(new SharedArrayBuffer(8));
      // Near the top of the 2^20 ms stamp range, so the takeover reading wraps it.
      const takenAt = 5 * 2 ** 20 - 7;
      const held = lockToken(3, takenAt);
      const ages = lockAges(stealAfterMs, reuseAfterMsFor(stealAfterMs));
      const guard = ages.reclaimAfterMs;
      // 30x stealAfterMs, at least 30 s (the table's reuseAfterMs), at most 2^19 ms, never below stealAfterMs.
      expect(guard).toBe(Math.max(stealAfterMs, Math.min(Math.max(30 * stealAfterMs, 30_000), 2 ** 19)));
      w[0] = held;
      nowAt(takenAt + stealAfterMs + 1);
      // lock() takes it over (and returns rather than waiting on a lock it may take over).
      const token = lock(w, 0, 5, ages);
      expect(w[0]).toBe(token);
      expect(token).not.toBe(held);
      w[0] = held;
      nowAt(takenAt + guard);
      expect(tryLock(w, 0, 4, ages)).toBe(FREE);
      expect(w[0]).toBe(held);
      nowAt(takenAt + guard + 1);
      const reclaim = tryLock(w, 0, 4, ages);
      expect(reclaim).not.toBe(FREE);
      expect(w[0]).toBe(reclaim);
    },
  );

  it.each([1, 1_000, MAX_CLAIM_TIMEOUT_MS])(
    'after a takeover (stealAfterMs %i) the released lock keeps a reclaim off for reclaimAfterMs; decisions take it at once',
    (stealAfterMs) => {
      const w = new Int32Array(new SharedArrayBuffer(8));
      const takenAt = 3 * 2 ** 20 - 5;
      const ages = lockAges(stealAfterMs, reuseAfterMsFor(stealAfterMs));
      const guard = ages.reclaimAfterMs;
      w[0] = lockToken(3, takenAt);
      nowAt(takenAt + stealAfterMs + 1);
      const took = lock(w, 0, 5, ages);
      expect(unlock(w, 0, took)).toBe(true);
      const released = w[0] as number;
      expect(released).not.toBe(FREE); // marked: a stalled holder may still write
      expect(released & 1).toBe(0);
      // A decision takes the released word like a free one, and passes the mark on.
      const next = lock(w, 0, 6, ages);
      expect(unlock(w, 0, next)).toBe(true);
      expect(w[0]).toBe(released); // same ms: the same mark
      nowAt(takenAt + stealAfterMs + 1 + guard);
      expect(tryLock(w, 0, 4, ages)).toBe(FREE);
      nowAt(takenAt + stealAfterMs + 2 + guard);
      expect(tryLock(w, 0, 4, ages)).not.toBe(FREE);
      // Once the mark is old, a decision's token carries none: its release frees the word.
      w[0] = released;
      const plain = lock(w, 0, 6, ages);
      expect(unlock(w, 0, plain)).toBe(true);
      expect(w[0]).toBe(FREE);
    },
  );

  // Found by the explorer (window-penalty, deep run of 2026-12-06): a stamp ahead of the reading
  // that judges it (a reading taken before another thread stamped the word; on Bun and Deno, two
  // threads whose timelines disagree) read as 2^20 - 1,000 ms old, and a live holder was taken over.
  it.each([1, 1_000, AHEAD_MS])('a stamp %i ms ahead of the reading reads as 0 ms old, and is not taken over', (ahead) => {
    const stampedAt = 7 * 2 ** 20 + 3; // just past a wrap: the reading is on the other side of it
    const held = lockToken(3, stampedAt);
    expect(ageMs(held, stampedAt - ahead)).toBe(0);
    const w = new Int32Array(new SharedArrayBuffer(8));
    const ages = lockAges(1, reuseAfterMsFor(1));
    w[0] = held;
    nowAt(stampedAt - ahead);
    expect(tryLock(w, 0, 4, ages)).toBe(FREE); // a reclaim leaves it
    expect(w[0]).toBe(held);
    // A decision waits: it takes the lock over only once its readings are stealAfterMs past the stamp.
    let reads = 0;
    vi.spyOn(performance, 'now').mockImplementation(() => (++reads <= 100 ? stampedAt - ahead : stampedAt + 2));
    const token = lock(w, 0, 5, ages);
    expect(reads).toBeGreaterThan(100);
    expect(w[0]).toBe(token);
    expect(token).not.toBe(held);
  });

  it('a stamp more than AHEAD_MS ahead reads as the age it wraps to, past every wait the package uses', () => {
    const stampedAt = 2 ** 20 + 11;
    const held = lockToken(3, stampedAt);
    expect(ageMs(held, stampedAt - AHEAD_MS - 1)).toBe(2 ** 20 - AHEAD_MS - 1);
    expect(2 ** 20 - AHEAD_MS - 1).toBeGreaterThan(10 * MAX_CLAIM_TIMEOUT_MS);
    expect(2 ** 20 - AHEAD_MS - 1).toBeGreaterThan(lockAges(MAX_CLAIM_TIMEOUT_MS, reuseAfterMsFor(MAX_CLAIM_TIMEOUT_MS)).reclaimAfterMs);
    // Behind the reading, every age up to the wrap reads as itself.
    expect(ageMs(held, stampedAt + 2 ** 20 - AHEAD_MS - 1)).toBe(2 ** 20 - AHEAD_MS - 1);
    expect(ageMs(held, stampedAt + 10 * MAX_CLAIM_TIMEOUT_MS + 1)).toBe(10 * MAX_CLAIM_TIMEOUT_MS + 1);
  });

  it('a terminated holder of a key lock is taken over after the longest claimTimeoutMs', async () => {
    const limiter = new RateLimiter({ limit: perHour(3), algorithm: 'sliding-log', maxKeys: 8, claimTimeoutMs: MAX_CLAIM_TIMEOUT_MS, clock: { now: () => 5_000 } });
    expect(limiter.tryAcquire('k', 0).allowed).toBe(true); // the key exists before the stall
    const flags = new Int32Array(new SharedArrayBuffer(12));
    const worker = new Worker(stallWorker, { workerData: { handle: limiter.handle, key: 'k', cost: 1, parkAt: 1, flags: flags.buffer, frozenMs: 5_000 } });
    const exited = new Promise((resolve) => worker.once('exit', resolve));
    // The worker parks at its first clock reading, inside its decision, holding the key's lock.
    while (Atomics.load(flags, 0) === 0) await new Promise((r) => setTimeout(r, 1));
    await worker.terminate();
    await exited;
    // This thread's lock readings come a minute and a ms after the dead holder's token.
    const real = performance.now.bind(performance);
    vi.spyOn(performance, 'now').mockImplementation(() => real() + MAX_CLAIM_TIMEOUT_MS + 1);
    expect(limiter.sweep()).toBe(0); // a reclaim waits until reclaimAfterMs (524,288 ms here)
    let admitted = 0;
    for (let i = 0; i < 5; i++) if (limiter.allow('k')) admitted++;
    expect(admitted).toBe(3);
  });
});
