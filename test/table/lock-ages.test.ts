// Lock tokens carry ms modulo 2^20 (1,048,576 ms). Found: claimTimeoutMs was accepted up to
// 3,600,000, so from 1,048,576 ms up a dead holder's lock could never read as older than the
// timeout (its key blocked for good), and setRules' 10x wait broke from 104,858 ms up. Now
// claimTimeoutMs stops at 60,000 and every wait on a lock (10x that at most) fits the stamp.
import { Worker } from 'node:worker_threads';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ConcurrencyLimiter, perHour, PolicyLimiter, RateLimiter } from '../../src/index.js';
import { AHEAD_MS, ageMs, DONE, FREE, lock, lockAges, lockToken, tryLock, underKeyLock, unlock, type LockedDecision } from '../../src/table/slot-lock.js';
import { reuseAfterMsFor } from '../../src/table/insert.js';
import { MAX_CLAIM_TIMEOUT_MS } from '../../src/table/table-options.js';
import { hold } from '../../src/rate/give-back-guard.js';
import { MarkGuard } from '../../src/table/reset-marks.js';
import { H_RESET_MARKS, S_CTRL, S_TAT } from '../../src/table/layout.js';

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

  it('a decision that waited stealAfterMs on one token stamped ahead of its readings takes it over (a dead holder costs no more)', () => {
    // A token young by its stamp (5 s ahead of the waiter's readings) is still taken over once
    // the waiter itself has seen it unchanged for stealAfterMs: without that, a dead holder's word
    // found in the part of the 2^20 ms cycle that reads as ahead held a decision up to AHEAD_MS.
    const stampedAt = 3 * 2 ** 20 + 17;
    const held = lockToken(3, stampedAt);
    const w = new Int32Array(new SharedArrayBuffer(8));
    const ages = lockAges(1_000, reuseAfterMsFor(1_000));
    w[0] = held;
    let reads = 0;
    const t0 = stampedAt - 5_000;
    vi.spyOn(performance, 'now').mockImplementation(() => {
      reads++;
      if (reads <= 50) return t0;
      if (reads <= 100) return t0 + 1_001; // waited past stealAfterMs; the stamp still reads as ahead
      return stampedAt + 2_000; // the stamp's own age past stealAfterMs (the old rule's only way)
    });
    const token = lock(w, 0, 5, ages);
    expect(reads).toBe(51);
    expect(w[0]).toBe(token);
    expect(ageMs(held, t0 + 1_001)).toBe(0);
  });

  /** performance.now() for a waiter: 50 readings at t0, 50 at t0 + waitedMs, then `after`. */
  function waiterClock(t0: number, waitedMs: number, after: number): () => number {
    let reads = 0;
    vi.spyOn(performance, 'now').mockImplementation(() => {
      reads++;
      return reads <= 50 ? t0 : reads <= 100 ? t0 + waitedMs : after;
    });
    return () => reads;
  }

  it('a give-back that waited its take-over age on one holder token stamped ahead takes the guard over', () => {
    const stampedAt = 3 * 2 ** 20 + 17;
    const w = new Int32Array(new SharedArrayBuffer(64));
    const base = 4;
    const ctrl = (5 << 2) | 2; // LIVE, generation 5
    w[base + S_CTRL] = ctrl;
    w[base + S_TAT] = -lockToken(3, stampedAt); // a holder's token, 5 s ahead of the readings below
    const reads = waiterClock(stampedAt - 5_000, 1_001, stampedAt + 2_000);
    const token = hold(w, base, ctrl, 6, 1_000, true);
    expect(reads()).toBe(51);
    expect(w[base + S_TAT]).toBe(token);
  });

  it('a reset mark guard waited on for its take-over age, stamped ahead, is taken over', () => {
    const limiter = new RateLimiter({ limit: perHour(5), maxKeys: 8 });
    const w = new Int32Array(limiter.handle.table);
    const guard = new MarkGuard(w, 9, 1_000);
    const base = 128 + 40;
    const mine = guard.take(base);
    const at = w.indexOf(mine, w[H_RESET_MARKS]); // the guard word of the base's mark
    expect(at).toBeGreaterThan(0);
    const stampedAt = 3 * 2 ** 20 + 17;
    w[at] = lockToken(3, stampedAt); // another holder's token, 5 s ahead of the readings below
    const reads = waiterClock(stampedAt - 5_000, 1_001, stampedAt + 2_000);
    const token = guard.take(base);
    expect(reads()).toBe(51);
    expect(w[at]).toBe(token);
  });

  // A guarded token (a reset, reward or reshape writing a key's state over what it read) is taken
  // over by a decision only at the reuse age: its writes land on any newer write of the same
  // values (sliding-log-reset-takeover.test.ts shows why, end to end).
  it.each([false, true])('a decision takes a held token over at stealAfterMs, a guarded one (%s) only at reclaimAfterMs', (guarded) => {
    const stealAfterMs = 1_000;
    const ages = lockAges(stealAfterMs, reuseAfterMsFor(stealAfterMs));
    expect(ages.reclaimAfterMs).toBe(30_000);
    const takenAt = 4 * 2 ** 20 - 3; // the readings below wrap the 2^20 ms stamp
    const w = new Int32Array(new SharedArrayBuffer(8));
    nowAt(takenAt);
    const held = lock(w, 0, 3, ages, guarded);
    expect(held & 4).toBe(guarded ? 4 : 0); // the guarded bit
    expect(held).toBe(lockToken(3, takenAt, false, guarded));
    // 50 readings past stealAfterMs (a plain token is taken at the first), then past reclaimAfterMs.
    const reads = waiterClock(takenAt + stealAfterMs + 1, 0, takenAt + ages.reclaimAfterMs + 1);
    const token = lock(w, 0, 5, ages);
    expect(reads()).toBe(guarded ? 101 : 1);
    expect(w[0]).toBe(token);
    // A reclaim waits reclaimAfterMs either way.
    w[0] = held;
    nowAt(takenAt + ages.reclaimAfterMs);
    expect(tryLock(w, 0, 4, ages)).toBe(FREE);
    nowAt(takenAt + ages.reclaimAfterMs + 1);
    expect(tryLock(w, 0, 4, ages)).not.toBe(FREE);
  });

  it.each([false, true])('an admission whose lock was taken over releases the newer token, but never a guarded one (%s)', (guarded) => {
    const ages = lockAges(1, reuseAfterMsFor(1));
    const w = new Int32Array(new SharedArrayBuffer(64));
    const base = 4;
    const ctrl = (9 << 2) | 2; // LIVE, generation 9
    w[base + S_CTRL] = ctrl;
    nowAt(10_000);
    let newer = FREE;
    const d: LockedDecision = {
      restarts: 0,
      guarded: false,
      spent: false,
      run: () => {
        // The decision's writes landed; then its lock was taken over, by a reset (guarded) or a decision.
        newer = lockToken(7, 10_005, true, guarded);
        w[base + S_TAT] = newer;
        d.spent = true;
        return true;
      },
      lost: () => {
        throw new Error('not a reclaim');
      },
    };
    expect(underKeyLock(w, base, ctrl, 2, ages, d)).toBe(DONE);
    const after = w[base + S_TAT] as number;
    if (guarded) expect(after).toBe(newer); // left to finish its writes
    else expect(after & 1).toBe(0); // released: the newer holder learns it at its own release
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
