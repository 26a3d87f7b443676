// A request's give-back on the one-limit path (the middleware's skipFailedRequests /
// skipSuccessfulRequests) racing a reset of its key, with real workers parked inside the give-back
// (fixtures/give-back-park-worker.mjs), on a frozen ManualClock.
//
// Found (docs/testing.md, 2026-12-05): the key's word is its state alone, so a reset and an
// admission at the spend's reading bring it back to the very value the give-back read. A give-back
// that had checked the slot's reset mark before the reset, and made its compareExchange after it,
// landed on the fresh state; an admission before its take-back kept the place (an attack's two
// real workers: 3 admitted at 2 an hour after a reset, at width 64). Every give-back now holds its
// mark's guard while it writes, and so does a reset (table/reset-marks.ts): the reset waits.
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { ManualClock, RateLimiter, RateLimitTimeoutError } from '../../src/index.js';
import { H_SLOT_WORDS } from '../../src/table/layout.js';
import { slotBaseOf } from '../helpers/slots.js';

const fixture = new URL('../fixtures/give-back-park-worker.mjs', import.meta.url);

interface Started {
  worker: Worker;
  flags: Int32Array;
  next<T>(): Promise<T>;
}

function start(handle: unknown, role: 'give-back' | 'cancel' | 'reset'): Started {
  const flags = new Int32Array(new SharedArrayBuffer(8));
  const worker = new Worker(fixture, { workerData: { handle, role, flags: flags.buffer } });
  const messages: unknown[] = [];
  let wake: (() => void) | null = null;
  let failure: unknown = null;
  worker.on('message', (m) => { messages.push(m); wake?.(); });
  worker.on('error', (e) => { failure = e; wake?.(); });
  return {
    worker,
    flags,
    async next<T>(): Promise<T> {
      while (messages.length === 0) {
        if (failure !== null) throw failure;
        await new Promise<void>((r) => { wake = r; });
      }
      return messages.shift() as T;
    },
  };
}

/** Resolves once the worker parked at `n` (or finished: -1). */
async function parkedAt(w: Started, n: number): Promise<void> {
  while (Atomics.load(w.flags, 0) !== n && Atomics.load(w.flags, 0) !== -1) await new Promise((r) => setTimeout(r, 1));
  expect(Atomics.load(w.flags, 0)).toBe(n);
}

function resume(w: Started, n: number): void {
  Atomics.store(w.flags, 1, n);
  Atomics.notify(w.flags, 1);
}

describe("a give-back on one GCRA limit holds its reset mark's guard", () => {
  it.each([
    ['width 32', {}],
    ['width 64', { maxBlockMs: 30 * 86_400_000 }],
  ])('found: %s: a reset waits for a give-back between its check of the mark and its write', async (_name, extra) => {
    const clock = new ManualClock(10_000); // frozen: an admission after a reset writes the spend's TAT again
    const rl = new RateLimiter({ limit: { permits: 1, periodMs: 1_000 }, maxKeys: 8, clock, ...extra });
    expect(rl.width).toBe('maxBlockMs' in extra ? 64 : 32);
    expect(rl.penalty('k', 0)).toBeDefined(); // the key is in the table, fresh
    const w = new Int32Array(rl.handle.table);
    const base = slotBaseOf(rl.handle.table, 'k');
    const words = (): string => Array.from(w.subarray(base, base + (w[H_SLOT_WORDS] as number))).join(',');
    const giver = start(rl.handle, 'give-back');
    const resetter: Started[] = [];
    try {
      // The give-back checked the mark (nothing reset since its spend) and stops before its write.
      await parkedAt(giver, 1);
      const before = words();
      // Another thread resets the key and checks it. Before the guard, it ran through: its check
      // wrote the spend's TAT again, the give-back then landed on the fresh state, and this
      // thread's check below took that place (two admitted after the reset, at a burst of 1).
      resetter.push(start(rl.handle, 'reset'));
      const r = resetter[0] as Started;
      expect(await r.next()).toBe('waiting'); // it waits for the give-back's guard
      expect(words()).toBe(before); // and wrote nothing
      resume(giver, 1);
      await parkedAt(giver, 2); // the give-back landed; it stops before it checks the mark again
      expect(rl.allow('k')).toBe(true); // on the spend given back: before the reset
      resume(giver, 2);
      expect(await giver.next()).toEqual({ admitted: true, parks: 2 });
      // The reset then ran: it forgot this thread's admission, and its own check passed.
      expect(await r.next()).toEqual({ reset: true, allowed: true });
      expect(rl.allow('k')).toBe(false); // one admitted after the reset, at a burst of 1
    } finally {
      resume(giver, 2);
      await giver.worker.terminate();
      for (const r of resetter) await r.worker.terminate();
    }
  });

  // Found by an attack on the fix: nothing failed with the guard taken out of the reservation's
  // refund alone (Gcra32.refund, WideGcra.refund). Without it, a reset, an allow and a reservation
  // brought the word back to the cancel's snapshot, the cancel landed on the fresh state, and a
  // second reservation of one interval's wait passed: 3 counted after the reset where 2 may be.
  it.each([
    ['width 32', {}],
    ['width 64', { maxBlockMs: 30 * 86_400_000 }],
  ])('%s: a reset waits for a reservation\'s cancel between its check of the mark and its write', async (_name, extra) => {
    const clock = new ManualClock(10_000);
    const rl = new RateLimiter({ limit: { permits: 1, periodMs: 1_000 }, maxKeys: 8, clock, ...extra });
    expect(rl.penalty('k', 0)).toBeDefined();
    const w = new Int32Array(rl.handle.table);
    const base = slotBaseOf(rl.handle.table, 'k');
    const words = (): string => Array.from(w.subarray(base, base + (w[H_SLOT_WORDS] as number))).join(',');
    const canceller = start(rl.handle, 'cancel');
    const resetter: Started[] = [];
    try {
      await parkedAt(canceller, 1); // allowed, reserved to 11,000; its cancel checked the mark
      const before = words();
      resetter.push(start(rl.handle, 'reset'));
      const r = resetter[0] as Started;
      expect(await r.next()).toBe('waiting');
      expect(words()).toBe(before);
      resume(canceller, 1);
      await parkedAt(canceller, 2);
      resume(canceller, 2);
      expect(await canceller.next()).toEqual({ admitted: true, cancelled: true, parks: 2 });
      expect(await r.next()).toEqual({ reset: true, allowed: true });
      expect(rl.reserve('k', { maxWaitMs: 1_000 }).delayMs).toBe(1_000); // the second after the reset
      expect(() => rl.reserve('k', { maxWaitMs: 1_000 })).toThrow(RateLimitTimeoutError); // and no more
    } finally {
      resume(canceller, 2);
      await canceller.worker.terminate();
      for (const r of resetter) await r.worker.terminate();
    }
  });
});
